"""`xlc.vmap`: vectorizing a per-example function over a batch axis (jax.vmap's semantics).

`vmap(fn, in_axes, out_axes, axis_size)(*args)` inside a trace:

1. every argument leaf with a mapped axis (`in_axes`: an int, None, or a pytree prefix of the
   arguments) is checked and transposed so that the batch axis leads;
2. `fn` is traced on per-example values into a scratch computation of the current module
   (values of enclosing traces it closes over become its extra parameters, unbatched);
3. `vmap_core.replay` re-emits the instructions the outputs need into the current computation,
   batched by the per-opcode rules of `vmap_rules.BATCH_RULES`; unbatched values stay unbatched;
4. each output's batch axis moves to its `out_axes` position (an unbatched output with an
   `out_axes` entry is broadcast; a batched one with None is an error).

The scratch computation is left unused and dropped when the module is finalized. Since the
result is ordinary traced HLO, vmap composes with jit, grad and itself; outside a trace the
vmapped function jits itself.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlc.frontend import lax, pytree
from xlc.frontend.staging import new_sub_builder
from xlc.frontend.tracer import (
    Builder,
    CaptureList,
    Tracer,
    as_tracer,
    current_builder,
    is_arraylike,
    push_builder,
    trace_error,
)
from xlc.frontend.vmap_core import BatchCtx, BVal, Val, bcast, replay, strong
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import Shape

__all__ = ["vmap"]

AxisSpec = Any
"""An int, None, or a (nested) tuple/list/dict of them: a pytree prefix of the values."""


def vmap(fn: Callable[..., Any], in_axes: AxisSpec = 0, out_axes: AxisSpec = 0,
         axis_size: int | None = None) -> Callable[..., Any]:
    """A function mapping `fn` over an axis of its arguments (jax.vmap).

    `in_axes` says which axis of each positional argument is mapped: an int (every leaf, the
    axis may be negative), None (not mapped: the same value for every example), or a tuple
    with one entry per positional argument, each a pytree prefix of that argument. Keyword
    arguments are mapped over axis 0. `out_axes` places the batch axis in the outputs the same
    way (None: the output must not depend on the mapped axis). `axis_size` gives the batch size
    when no argument is mapped. Inside a trace the batched program is emitted into it;
    outside one the vmapped function is jitted."""
    if not callable(fn):
        raise trace_error(f"vmap: expected a function, got {type(fn).__name__}")
    _check_spec(in_axes, "in_axes")
    _check_spec(out_axes, "out_axes")
    if isinstance(in_axes, list):  # a list at the top means one entry per argument
        in_axes = tuple(in_axes)
    if axis_size is not None and (not isinstance(axis_size, (int, np.integer))
                                  or isinstance(axis_size, bool) or axis_size < 0):
        raise trace_error(f"vmap: axis_size must be a non-negative int, got {axis_size!r}")
    name = getattr(fn, "__name__", "fn")
    name = "lambda" if name == "<lambda>" else name
    jitted: list[Any] = []

    @functools.wraps(fn)
    def batched(*args: Any, **kwargs: Any) -> Any:
        if current_builder() is None:
            if not jitted:
                import xlc

                jitted.append(xlc.jit(batched))
            return jitted[0](*args, **kwargs)
        return _vmap_trace(fn, name, in_axes, out_axes, axis_size, args, kwargs)

    return batched


# ---- axis specifications -----------------------------------------------------------------------
def _is_axis(x: Any) -> bool:
    return x is None or (isinstance(x, (int, np.integer)) and not isinstance(x, bool))


def _check_spec(spec: Any, what: str) -> None:
    leaves, _ = pytree.flatten(spec, is_leaf=_is_axis)
    bad = [x for x in leaves if not _is_axis(x)]
    if bad:
        raise trace_error(f"vmap {what} must be an int, None, or (nested) container with those "
                          f"types as leaves, but got {spec!r}")


def _prefix_axes(spec: Any, value: Any, what: str) -> list[int | None]:
    """One axis per leaf of `value`, from `spec`, a pytree prefix of it; TraceError when it is
    not one."""
    _, vtd = pytree.flatten(value)
    _, std = pytree.flatten(spec, is_leaf=_is_axis)
    spec_leaves = iter(pytree.flatten(spec, is_leaf=_is_axis)[0])
    out: list[int | None] = []

    def go(s: pytree.TreeDef, v: pytree.TreeDef) -> None:
        if s.kind == "leaf":
            axis = next(spec_leaves)
            out.extend([None if axis is None else int(axis)] * v.num_leaves)
            return
        same = (s.kind == v.kind and s.keys == v.keys and len(s.children) == len(v.children)
                and (s.node == v.node or s.kind in ("tuple", "list", "dict")))
        if not same:
            raise trace_error(f"vmap {what} specification must be a tree prefix of the "
                              f"corresponding value, got specification {spec!r} for value tree "
                              f"{vtd}")
        for sc, vc in zip(s.children, v.children):
            go(sc, vc)

    go(std, vtd)
    return out


def _arg_names(fn: Callable[..., Any], n: int) -> list[str]:
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"args[{i}]" for i in range(n)]


class _Mapped:
    """One argument leaf with a mapped axis: its tracer, axis and label for messages."""

    def __init__(self, t: Tracer, axis: int, label: str):
        self.t, self.axis, self.label = t, axis, label

    @property
    def size(self) -> int:
        return self.t.shape[self.axis]

    def describe(self) -> str:
        return f"axis {self.axis} of {self.label} of type {self.t.aval_text}"


def _map_leaf(leaf: Any, axis: int, label: str) -> _Mapped:
    if not is_arraylike(leaf):
        raise trace_error(f"vmap: {label} is a {type(leaf).__name__}, which cannot be mapped "
                          "over (only arrays can); give it in_axes None")
    t = as_tracer(leaf)
    if t.ndim == 0 or not -t.ndim <= axis < t.ndim:
        raise trace_error(f"vmap was requested to map its argument along axis {axis}, which "
                          f"implies that its rank should be at least "
                          f"{axis + 1 if axis >= 0 else -axis}, but is only {t.ndim} (its "
                          f"shape is {t.shape}) for {label}")
    return _Mapped(t, axis % t.ndim, label)


def _batch_size(mapped: list[_Mapped], axis_size: int | None) -> int:
    sizes = {m.size for m in mapped}
    if axis_size is not None:
        sizes.add(int(axis_size))
    if not sizes:
        raise trace_error("vmap must have at least one non-None value in in_axes (or be given "
                          "axis_size)")
    if len(sizes) > 1:
        lines = [f"  * {m.describe()} has size {m.size}" for m in mapped]
        if axis_size is not None:
            lines.insert(0, f"  * axis_size is {axis_size}")
        raise trace_error("vmap got inconsistent sizes for array axes to be mapped:\n"
                          + ";\n".join(lines))
    return sizes.pop()


# ---- the transformation --------------------------------------------------------------------------
def _vmap_trace(fn: Callable[..., Any], name: str, in_axes: AxisSpec, out_axes: AxisSpec,
                axis_size: int | None, args: tuple, kwargs: dict) -> Any:
    where = f"vmap({name})"
    if isinstance(in_axes, tuple):
        if len(in_axes) != len(args):
            raise trace_error(f"vmap in_axes must be an int, None, or a tuple of entries "
                              f"corresponding to the positional arguments passed to the "
                              f"function, but got len(in_axes)={len(in_axes)}, "
                              f"len(args)={len(args)}")
        specs: Sequence[Any] = in_axes
    elif _is_axis(in_axes):
        specs = [in_axes] * len(args)
    else:
        raise trace_error(f"vmap in_axes must be an int, None, or a tuple of entries "
                          f"corresponding to the positional arguments passed to the function, "
                          f"but got {in_axes!r}")
    names = _arg_names(fn, len(args))
    tree = (tuple(args), dict(kwargs))
    flat, td = pytree.flatten(tree)
    axes: list[int | None] = []
    for spec, arg in zip(specs, args):
        axes += _prefix_axes(spec, arg, "in_axes")
    axes += [0] * (len(flat) - len(axes))  # keyword arguments: axis 0
    paths = pytree.leaf_paths(td)
    mapped: dict[int, _Mapped] = {}
    for k, (leaf, axis, path) in enumerate(zip(flat, axes, paths)):
        if axis is not None:
            mapped[k] = _map_leaf(leaf, axis, _label(path, names))
    n = _batch_size(list(mapped.values()), axis_size)
    parent = current_builder()
    assert parent is not None
    batched_in = {k: _to_front(m.t, m.axis) for k, m in mapped.items()}

    # trace fn per example into a scratch computation
    captured: dict[HloInstruction, Tracer] = {}
    counter = [0]

    def make(b: Builder, k: int, outer: Tracer) -> Tracer:
        inst = b.comp.add_parameter(counter[0], outer.aval, name=f"capture.{k}")
        counter[0] += 1
        captured[inst] = outer
        return Tracer(inst, b, outer.weak_type)

    sb = new_sub_builder("vmap.per_example", f"function vmapped by {where}",
                         capture=(CaptureList(), make))
    sb.name_stack = f"{parent.name_stack}/{where}"
    bindings: dict[HloInstruction, Val] = {}
    with push_builder(sb):
        leaves = list(flat)
        for k, m in mapped.items():
            dims = m.t.shape[:m.axis] + m.t.shape[m.axis + 1:]
            inst = sb.comp.add_parameter(counter[0], Shape.array(m.t.ptype, dims),
                                         name=f"example.{k}")
            counter[0] += 1
            bindings[inst] = BVal(batched_in[k], True)
            leaves[k] = Tracer(inst, sb, m.t.weak_type)
        a, kw = pytree.unflatten(td, leaves)
        out = fn(*a, **kw)
        out_leaves, out_td = pytree.flatten(out)
        outs = []
        for leaf, path in zip(out_leaves, pytree.leaf_paths(out_td)):
            if not is_arraylike(leaf):
                raise trace_error(f"{where} returned a {type(leaf).__name__} at "
                                  f"{path or 'its output'}; only arrays, scalars and "
                                  "tuples/lists/dicts of them can be returned")
            outs.append(sb.lift(as_tracer(leaf)))
    for inst, outer in captured.items():
        bindings[inst] = BVal(strong(outer), False)
    ctx = BatchCtx(n, where)
    vals = replay(ctx, sb.comp, bindings, [o.inst for o in outs])
    oaxes = _prefix_axes(out_axes, out, "out_axes")
    results = [_place(ctx, v, o, ax, path)
               for v, o, ax, path in zip(vals, outs, oaxes, pytree.leaf_paths(out_td))]
    return pytree.unflatten(out_td, results)


def _label(path: str, names: list[str]) -> str:
    """`argument x` / `argument x['w']` for leaf `path` of ((args...), {kwargs})."""
    if path.startswith("[0]["):
        rest = path[4:]
        i = int(rest[:rest.index("]")])
        return f"argument {names[i]}{rest[rest.index(']') + 1:]}"
    return f"keyword argument {path[3:]}"


def _to_front(t: Tracer, axis: int) -> Tracer:
    if axis == 0:
        return strong(t)
    perm = [axis] + [d for d in range(t.ndim) if d != axis]
    return strong(lax.transpose(t, perm))


def _place(ctx: BatchCtx, v: Val, per_example: Tracer, axis: int | None, path: str) -> Tracer:
    """The output for value `v` with its batch axis at `axis` and the per-example output's weak
    type."""
    assert isinstance(v, BVal)
    weak = per_example.weak_type
    if axis is None:
        if v.batched:
            raise trace_error(f"vmap has mapped output but out_axes is None (at output "
                              f"{path or '[0]'} of {ctx.where})")
        return Tracer(v.t.inst, v.t.builder, weak)
    rank = v.t.ndim + (0 if v.batched else 1)
    if not -rank <= axis < rank:
        raise trace_error(f"vmap out_axes {axis} is out of range for output {path or '[0]'} "
                          f"of {ctx.where}, of rank {rank} with the mapped axis")
    axis %= rank
    t = bcast(ctx, v)
    if axis:
        perm = list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank))
        t = lax.transpose(t, perm)
    return Tracer(t.inst, t.builder, weak)
