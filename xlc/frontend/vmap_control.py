"""Batching rules of `xlc.vmap` for tuples, control flow and custom-calls (listed in
`vmap_rules.BATCH_RULES`).

- `while`: the carry leaves that become batched are found by probing the body until nothing
  new is batched. With an unbatched predicate the loop runs as before on batched carries; with
  a batched one (examples stop at different trips) it runs until every example is done and
  each step keeps the old carry of the examples that are done (`select`), as JAX does.
- `conditional`: an unbatched selector keeps the conditional (its branches batched alike); a
  batched selector runs every branch and selects per example, as JAX does.
- `call`: the callee is replayed inline.
- `custom-call`: LAPACK targets take leading batch dims already, so they run once on the
  batched operands; any other target (ffi calls, `pure_callback`) runs once per example in a
  loop, and side-effecting ones (`xlc.debug.print`) once per example in order, unrolled.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xlc.frontend import control_flow, lax
from xlc.frontend.tracer import Tracer, as_tracer
from xlc.frontend.vmap_core import (
    BatchCtx,
    BVal,
    Pattern,
    Val,
    bcast,
    bcast_to,
    bshape,
    decompose,
    flat_pattern,
    has_effect,
    leaves,
    pattern,
    probe_pattern,
    rebuild,
    reemit,
    replay,
    strong,
    union,
)
from xlc.hlo.ir import HloComputation, HloInstruction
from xlc.hlo.lapack import is_lapack_target
from xlc.hlo.shape import PrimitiveType as PT
from xlc.hlo.shape import Shape

__all__ = ["tuple_", "get_tuple_element", "while_", "conditional", "call", "custom_call",
           "sequential"]


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


def tuple_(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """tuple: a Python tuple of the element values."""
    return tuple(args)


def get_tuple_element(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """get-tuple-element: the element's value."""
    (t,) = args
    assert isinstance(t, tuple), f"get-tuple-element of an array ({inst.name})"
    return t[int(inst.attrs["index"])]


def call(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """call: the callee replayed inline on the batched arguments."""
    comp = inst.called[0]
    assert comp.root is not None
    return replay(ctx, comp, dict(zip(comp.parameters, args)), [comp.root])[0]


def _run(ctx: BatchCtx, comp: HloComputation, arg: Val) -> Val:
    """The value of one-parameter computation `comp` applied to `arg`, replayed inline."""
    assert comp.root is not None
    return replay(ctx, comp, {comp.parameters[0]: arg}, [comp.root])[0]


def _force(ctx: BatchCtx, v: Val, p: Pattern) -> list[Tracer]:
    """The leaves of `v`, broadcast where pattern `p` says batched."""
    return [bcast_to(ctx, leaf, b).t for leaf, b in zip(leaves(v), flat_pattern(p))]


def _state(p: Pattern, ts: Sequence[Tracer]) -> Val:
    return rebuild(p, [BVal(strong(t), b) for t, b in zip(ts, flat_pattern(p))])


def _mask(p: Tracer, like: Tracer) -> Tracer:
    """Batched predicate p [N] broadcast to `like`'s shape."""
    return lax.broadcast_in_dim(p, like.shape, (0,))


# ---- while ---------------------------------------------------------------------------------------
def while_(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """while with a batched carry (see the module docstring)."""
    (init,) = args
    cond_c, body_c = inst.called
    carry: Pattern = pattern(init)
    pred_batched = False
    for _ in range(len(leaves(init)) + 2):
        pred_batched = probe_pattern(ctx, cond_c, [carry]) is True
        # a batched predicate batches every carry (each step selects per example)
        grown = _all_true(carry) if pred_batched else \
            union(carry, probe_pattern(ctx, body_c, [carry]))
        if grown == carry:
            break
        carry = grown
    init_ts = _force(ctx, init, carry)

    def cond_fun(ts: list[Tracer]) -> Tracer:
        p = _run(ctx, cond_c, _state(carry, ts))
        assert isinstance(p, BVal)
        return _np().any(p.t) if p.batched else p.t

    def body_fun(ts: list[Tracer]) -> list[Tracer]:
        state = _state(carry, ts)
        out = _force(ctx, _run(ctx, body_c, state), carry)
        if not pred_batched:
            return out
        p = _run(ctx, cond_c, state)
        assert isinstance(p, BVal) and p.batched
        return [strong(lax.select(_mask(p.t, o), o, t)) for o, t in zip(out, ts)]

    res = control_flow.while_loop(cond_fun, body_fun, list(init_ts))
    trips = control_flow.TRIP_COUNTS
    if inst.uid in trips and not pred_batched and res:
        trips[res[0].inst.operands[0].uid] = trips[inst.uid]
    return _state(carry, res)


# ---- conditional --------------------------------------------------------------------------------
def conditional(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """conditional (see the module docstring); branch i takes operand i + 1."""
    sel, *ops = args
    assert isinstance(sel, BVal)
    branches = list(inst.called)
    if sel.batched:
        return _select_branches(ctx, sel, branches, ops)
    out: Pattern | None = None
    for comp, op in zip(branches, ops):
        p = probe_pattern(ctx, comp, [pattern(op)])
        out = p if out is None else union(out, p)
    assert out is not None
    distinct: list[Val] = []
    slot = []
    for op in ops:  # the frontend passes one operand tuple to every branch: pass it once
        k = next((j for j, d in enumerate(distinct) if d is op), len(distinct))
        if k == len(distinct):
            distinct.append(op)
        slot.append(k)
    operands = tuple(_force(ctx, d, pattern(d)) for d in distinct)

    def branch(i: int) -> Callable[..., list[Tracer]]:
        def fn(*ts: list[Tracer]) -> list[Tracer]:
            arg = _state(pattern(distinct[slot[i]]), ts[slot[i]])
            return _force(ctx, _run(ctx, branches[i], arg), out)
        return fn

    fns = [branch(i) for i in range(len(branches))]
    if sel.t.ptype is PT.PRED:
        res = control_flow.cond(sel.t, fns[0], fns[1], *operands)
    else:
        res = control_flow.switch(_hlo_index(sel.t, len(branches)), fns, *operands)
    return _state(out, res)


def _hlo_index(i: Tracer, n: int) -> Tracer:
    """A conditional's branch index as HLO reads it: out of range runs the last branch."""
    xnp = _np()
    bad = xnp.logical_or(xnp.less(i, 0), xnp.greater_equal(i, n))
    return strong(lax.select(bad, xnp.full(i.shape, n - 1, i.dtype), i))


def _select_branches(ctx: BatchCtx, sel: BVal, branches: list[HloComputation],
                     ops: list[Val]) -> Val:
    """A batched selector: every branch runs inline and each example takes its branch's
    result."""
    results = [_run(ctx, comp, op) for comp, op in zip(branches, ops)]
    p: Pattern = pattern(results[0])
    outs = [_force(ctx, r, _all_true(p)) for r in results]
    xnp = _np()
    if sel.t.ptype is PT.PRED:
        chosen = [strong(lax.select(_mask(sel.t, t), t, f)) for t, f in zip(outs[0], outs[1])]
    else:
        idx = _hlo_index(sel.t, len(branches))
        chosen = outs[-1]
        for k in range(len(branches) - 2, -1, -1):
            hit = xnp.equal(idx, as_tracer(k, idx.ptype))
            chosen = [strong(lax.select(_mask(hit, t), t, c)) for t, c in zip(outs[k], chosen)]
    return _state(_all_true(p), chosen)


def _all_true(p: Pattern) -> Pattern:
    return True if isinstance(p, bool) else tuple(_all_true(x) for x in p)


# ---- custom-calls and the sequential fallback ----------------------------------------------------
def custom_call(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """custom-call: LAPACK targets once on batched operands, others per example."""
    target = str(inst.attrs.get("custom_call_target", ""))
    if is_lapack_target(target):
        ops = [bcast(ctx, a) for a in leaves(tuple(args))]
        return decompose(reemit(inst, ops, bshape(inst.shape, ctx.size)), True)
    return sequential(ctx, inst, args)


def _example(ctx: BatchCtx, v: BVal, i: Any) -> Tracer:
    """Example `i` (a Python int or a traced index) of `v`."""
    if not v.batched:
        return v.t
    return strong(lax.dynamic_index_in_dim(v.t, i, 0, keepdims=False))


def sequential(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """`inst` once per example: unrolled in order when it has a side effect, else in a loop
    writing each example's results into the batched outputs."""
    vals: list[BVal] = []
    for a in args:
        assert isinstance(a, BVal), f"tuple operand of {inst.name}"
        vals.append(a)
    n = ctx.size
    out_pat = _all_true(_shape_pattern(inst.shape))
    shapes = _leaf_shapes(inst.shape)
    xnp = _np()
    if has_effect(inst):
        per = [leaves(decompose(reemit(inst, [_example(ctx, v, i) for v in vals], inst.shape),
                                False)) for i in range(n)]
        stacked = [strong(lax.concatenate([lax.reshape(p[j].t, (1, *s.dims)) for p in per], 0))
                   if n else xnp.zeros((0, *s.dims), s.dtype) for j, s in enumerate(shapes)]
        return _state(out_pat, stacked)
    if not shapes:  # no results and no effect: nothing to run
        return _state(out_pat, [])
    accs = [xnp.zeros((n, *s.dims), s.dtype) for s in shapes]

    def body(i: Tracer, acc: list[Tracer]) -> list[Tracer]:
        r = reemit(inst, [_example(ctx, v, i) for v in vals], inst.shape)
        outs = leaves(decompose(r, False))
        return [strong(lax.dynamic_update_index_in_dim(a, o.t, i, 0))
                for a, o in zip(acc, outs)]

    return _state(out_pat, control_flow.fori_loop(0, n, body, accs))


def _shape_pattern(shape: Shape) -> Pattern:
    """An all-unbatched pattern of `shape`'s tuple structure."""
    if shape.is_tuple:
        assert shape.tuple_shapes is not None
        return tuple(_shape_pattern(s) for s in shape.tuple_shapes)
    return False


def _leaf_shapes(shape: Shape) -> list[Shape]:
    if shape.is_tuple:
        assert shape.tuple_shapes is not None
        return [leaf for s in shape.tuple_shapes for leaf in _leaf_shapes(s)]
    return [shape]
