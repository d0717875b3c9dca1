"""Custom derivative rules under `xlc.vmap`: when vmap re-emits the output markers of a
`custom_vjp` / `custom_jvp` call, the batched markers get a batched copy of the call's group,
so `grad(vmap(f))` and `jvp(vmap(f))` still use the user's rule (JAX batches the rule with the
function). The rule itself is vmapped: its arguments, residuals and cotangents carry the batch
dimension first where the batched program's values do; the cotangent of an argument shared by
every example (unbatched) is the sum over the batch.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xlc.frontend import autodiff, pytree
from xlc.frontend.tracer import Tracer
from xlc.frontend.vmap_core import BatchCtx, BVal, Val, bcast
from xlc.hlo.ir import HloInstruction

__all__ = ["carry_custom"]


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


def carry_custom(ctx: BatchCtx, inst: HloInstruction, env: dict[HloInstruction, Val]) -> None:
    """If `inst` is an output marker of a custom_vjp/custom_jvp call, register its batched
    value (`env[inst]`, made batched when the call's arguments are) as a marker of a batched
    copy of the call's group (one copy per vmap and call)."""
    group = autodiff._CUSTOM.get(inst.uid)
    if group is None:
        return
    if id(group) not in ctx.custom_groups:
        ctx.custom_groups[id(group)] = _batched_group(ctx, group, env)
    new, batched = ctx.custom_groups[id(group)]
    val = env[inst]
    assert isinstance(val, BVal)
    if batched and not val.batched:
        val = BVal(bcast(ctx, val), True)
        env[inst] = val
    new.markers[group.markers.index(inst)] = val.t.inst
    autodiff._CUSTOM[val.t.inst.uid] = new


def _value(x: Any, env: dict[HloInstruction, Val]) -> tuple[Any, int | None]:
    """The batched program's value of per-example tracer `x` and its batch axis (None: shared
    by every example; values from outside the vmapped function are shared)."""
    if isinstance(x, Tracer) and x.inst in env:
        v = env[x.inst]
        assert isinstance(v, BVal)
        return v.t, (0 if v.batched else None)
    return x, None


def _batched_group(ctx: BatchCtx, group: Any, env: dict[HloInstruction, Val]
                   ) -> tuple[Any, bool]:
    """The batched copy of `group` and whether any of its arguments is batched."""
    from xlc.frontend.vmap import vmap

    args, axes = zip(*[_value(a, env) for a in group.args]) if group.args else ((), ())
    res_leaves, res_tree = pytree.flatten(group.residuals)
    res_vals = [_value(r, env) for r in res_leaves]
    new = autodiff._CustomGroup(None, pytree.unflatten(res_tree, [v for v, _ in res_vals]),
                                list(args), group.arg_tree, group.out_tree,
                                list(group.markers))
    if all(a is None for a in axes):  # the rule applies as it is
        new.bwd, new.jvp = group.bwd, group.jvp
        return new, False
    arg_axes = pytree.unflatten(group.arg_tree, list(axes))
    if group.jvp is not None:
        rule = group.jvp

        def jvp_b(primals: Any, tangents: Any, outputs: Any) -> Any:
            return vmap(lambda p, t, o: rule(p, t, o), in_axes=(arg_axes, arg_axes, 0),
                        axis_size=ctx.size)(primals, tangents, outputs)

        new.jvp = jvp_b
    if group.bwd is not None:
        new.bwd = _batched_bwd(ctx, group.bwd, res_tree, res_vals, list(axes), vmap)
    return new, True


def _batched_bwd(ctx: BatchCtx, bwd: Callable[..., Any], res_tree: Any,
                 res_vals: list[tuple[Any, int | None]], arg_axes: list[int | None],
                 vmap: Callable[..., Any]) -> Callable[..., Any]:
    """The user's backward function vmapped over the batched residuals and cotangents; the
    cotangents of shared (unbatched) arguments summed over the batch."""
    traced = [k for k, (v, _) in enumerate(res_vals) if isinstance(v, Tracer)]
    statics = [v for v, _ in res_vals]
    in_res_axes = [res_vals[k][1] for k in traced]

    def per_example(res_tracers: list[Tracer], ct: Any) -> Any:
        full = list(statics)
        for k, t in zip(traced, res_tracers):
            full[k] = t
        return tuple(bwd(pytree.unflatten(res_tree, full), ct))

    def bwd_b(residuals: Any, ct: Any) -> Any:
        leaves = pytree.flatten(residuals)[0]
        got = vmap(per_example, in_axes=(in_res_axes, 0), axis_size=ctx.size)(
            [leaves[k] for k in traced], ct)
        xnp = _np()
        flat, tree = pytree.flatten(list(got))
        out = [g if ax is not None or g is None else xnp.sum(g, axis=0)
               for g, ax in zip(flat, arg_axes)]
        return pytree.unflatten(tree, out)

    return bwd_b
