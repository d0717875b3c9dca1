"""THE batching-rule table of `xlc.vmap`, built explicitly in one place: `BATCH_RULES` maps an
opcode to `rule(ctx, inst, args) -> Val`, called when at least one operand of `inst` is batched
(`args`: the operands' values, see `vmap_core`); the result keeps the batch dim first. Opcodes
without a rule are listed with the reason in `NO_RULE`; `ALWAYS` names the opcodes whose rule
runs even when no operand is batched (tuples, and copies that may be stop_gradient markers).

This module holds the rules for elementwise ops, data movement, reductions, sort, dot and
convolution; indexing (gather/scatter, dynamic slices, pad) is in `vmap_rules_index.py`,
control flow and custom-calls in `vmap_control.py`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xlc.frontend import lax
from xlc.frontend import vmap_control as _ctl
from xlc.frontend import vmap_rules_index as _idx
from xlc.frontend.tracer import Tracer, infer, trace_error
from xlc.frontend.vmap_core import (
    BatchCtx,
    BVal,
    Val,
    bcast,
    bshape,
    decompose,
    leaves,
    materialize,
    pattern,
    rebuild,
    reemit,
    strong,
)
from xlc.hlo.attrs import ConvDimLabels, SliceDim, Window, WindowDim
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode

__all__ = ["ALWAYS", "BATCH_RULES", "NO_RULE", "Rule"]

Rule = Callable[[BatchCtx, HloInstruction, list[Val]], Val]
"""rule(ctx, inst, operand values) -> the batched value of `inst`."""


def _arrays(args: Sequence[Val]) -> list[BVal]:
    out = []
    for a in args:
        assert isinstance(a, BVal), "tuple-shaped operand of an array op"
        out.append(a)
    return out


def _ints(xs: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


def _plus1(xs: Any) -> tuple[int, ...]:
    return tuple(int(x) + 1 for x in xs)


# ---- elementwise and shape-preserving ops --------------------------------------------------------
def _elementwise(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """Elementwise ops: unbatched operands of the result's rank are broadcast along the batch
    dim; an unbatched scalar bound of clamp/select stays a scalar."""
    rank = inst.shape.rank
    ops = []
    for a in _arrays(args):
        if a.batched:
            t = a.t
            if t.ndim - 1 != rank:  # a scalar bound, batched: spell it out
                t = lax.broadcast_in_dim(t, (ctx.size, *inst.shape.dims), (0,))
            ops.append(t)
        else:
            ops.append(bcast(ctx, a) if a.t.ndim == rank else a.t)
    return BVal(reemit(inst, ops, bshape(inst.shape, ctx.size)), True)


def _same_layout(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """One operand, the batch dim simply leads the result (reshape, bitcast-convert, fft,
    topk, ...): the op acts on the trailing dims or on every element."""
    ops = [bcast(ctx, a) for a in _arrays(args)]
    return decompose(reemit(inst, ops, bshape(inst.shape, ctx.size)), True)


def _opt_barrier(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """opt-barrier of a tuple: every leaf batched."""
    (v,) = args
    forced = rebuild(pattern(v), [BVal(bcast(ctx, leaf), True) for leaf in leaves(v)])
    return decompose(reemit(inst, [materialize(forced)], bshape(inst.shape, ctx.size)), True)


def _token(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """after-all: tokens carry no data, so it is re-emitted unchanged (never batched)."""
    return decompose(reemit(inst, [leaf.t for leaf in leaves(tuple(args))], inst.shape), False)


def _copy(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """copy; a stop_gradient copy stays one (so grad of a vmapped function stops there)."""
    (a,) = _arrays(args)
    from xlc.frontend import autodiff

    if inst.uid in autodiff._STOPPED:
        return BVal(strong(autodiff.stop_gradient(a.t)), a.batched)
    shape = bshape(inst.shape, ctx.size) if a.batched else inst.shape
    return BVal(reemit(inst, [a.t], shape), a.batched)


def _broadcast(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    (a,) = _arrays(args)
    dims = (0, *_plus1(inst.attrs.get("dimensions", ())))
    return BVal(reemit(inst, [a.t], bshape(inst.shape, ctx.size),
                       inst.attrs.replace(dimensions=dims)), True)


def _transpose(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    (a,) = _arrays(args)
    perm = (0, *_plus1(inst.attrs["dimensions"]))
    return BVal(reemit(inst, [a.t], bshape(inst.shape, ctx.size),
                       inst.attrs.replace(dimensions=perm)), True)


def _reverse(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    (a,) = _arrays(args)
    return BVal(reemit(inst, [a.t], bshape(inst.shape, ctx.size),
                       inst.attrs.replace(dimensions=_plus1(inst.attrs["dimensions"]))), True)


def _slice(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    (a,) = _arrays(args)
    sl = (SliceDim(0, ctx.size, 1), *inst.attrs["slice"])
    return BVal(reemit(inst, [a.t], bshape(inst.shape, ctx.size),
                       inst.attrs.replace(slice=sl)), True)


def _concatenate(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    ops = [bcast(ctx, a) for a in _arrays(args)]
    dims = _plus1(inst.attrs["dimensions"])
    return BVal(reemit(inst, ops, bshape(inst.shape, ctx.size),
                       inst.attrs.replace(dimensions=dims)), True)


def _map(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    ops = [bcast(ctx, a) for a in _arrays(args)]
    dims = tuple(range(inst.shape.rank + 1))
    return BVal(reemit(inst, ops, bshape(inst.shape, ctx.size),
                       inst.attrs.replace(dimensions=dims)), True)


# ---- reductions and sort ------------------------------------------------------------------------
def _split_inits(ctx: BatchCtx, inst: HloInstruction, args: list[Val], k: int
                 ) -> tuple[list[BVal], list[BVal]]:
    """(operands, init values) of a reduce-like op with `k` operands; a batched init value is
    refused, as in JAX."""
    vals = _arrays(args)
    ops, inits = vals[:k], vals[k:]
    if any(i.batched for i in inits):
        raise trace_error(f"{ctx.where}: {inst.opcode.text} with an init value that depends "
                          "on the mapped axis is not supported (as in JAX); pass a constant "
                          "init value")
    return ops, inits


def _reduce(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    k = len(args) // 2
    ops, inits = _split_inits(ctx, inst, args, k)
    xs = [bcast(ctx, o) for o in ops]
    dims = _plus1(inst.attrs["dimensions"])
    r = reemit(inst, [*xs, *(i.t for i in inits)], bshape(inst.shape, ctx.size),
               inst.attrs.replace(dimensions=dims))
    return decompose(r, True)


def _window(w: Window) -> Window:
    return Window((WindowDim(1), *w.dims))


def _reduce_window(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    k = len(args) // 2
    ops, inits = _split_inits(ctx, inst, args, k)
    xs = [bcast(ctx, o) for o in ops]
    r = reemit(inst, [*xs, *(i.t for i in inits)], bshape(inst.shape, ctx.size),
               inst.attrs.replace(window=_window(inst.attrs["window"])))
    return decompose(r, True)


def _select_and_scatter(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    ops, inits = _split_inits(ctx, inst, args, 2)
    xs = [bcast(ctx, o) for o in ops]
    return BVal(reemit(inst, [*xs, inits[0].t], bshape(inst.shape, ctx.size),
                       inst.attrs.replace(window=_window(inst.attrs["window"]))), True)


def _sort(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    xs = [bcast(ctx, a) for a in _arrays(args)]
    dims = _plus1(inst.attrs["dimensions"])
    return decompose(reemit(inst, xs, bshape(inst.shape, ctx.size),
                            inst.attrs.replace(dimensions=dims)), True)


# ---- dot and convolution -----------------------------------------------------------------------
def _dot(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """dot: both batched -> one more batch dim; one batched -> its batch dim is a free dim of
    that side, moved to the front of the result."""
    a, b = _arrays(args)
    at = inst.attrs
    lc, rc = _ints(at["lhs_contracting_dims"]), _ints(at["rhs_contracting_dims"])
    lb, rb = _ints(at.get("lhs_batch_dims", ())), _ints(at.get("rhs_batch_dims", ()))
    if a.batched and b.batched:
        lb, rb, lc, rc, pos = (0, *_plus1(lb)), (0, *_plus1(rb)), _plus1(lc), _plus1(rc), 0
    elif a.batched:
        pos = len(lb)
        lb, lc = _plus1(lb), _plus1(lc)
    else:
        pos = len(lb) + a.t.ndim - len(lb) - len(lc)
        rb, rc = _plus1(rb), _plus1(rc)
    shape = infer("infer_dot", a.t.aval, b.t.aval, lb, rb, lc, rc, inst.shape.element_type)
    attrs = at.replace(lhs_contracting_dims=lc, rhs_contracting_dims=rc,
                       lhs_batch_dims=lb or None, rhs_batch_dims=rb or None)
    out = reemit(inst, [a.t, b.t], shape, attrs)
    return BVal(_to_front(out, pos), True)


def _to_front(t: Tracer, pos: int) -> Tracer:
    """`t` with dim `pos` moved to the front."""
    if pos == 0:
        return t
    perm = [pos] + [d for d in range(t.ndim) if d != pos]
    return strong(lax.transpose(t, perm))


def _fold(t: Tracer, dim: int, groups: int) -> Tracer:
    """Merge the leading batch dim B of `t` into dim `dim` of the per-example value (numbered
    without B), ordered (groups, B, rest): B-major within each of `groups` groups."""
    n, rest = t.shape[0], list(t.shape[1:])
    size = rest[dim]
    split = rest[:dim] + [groups, size // groups] + rest[dim + 1:]
    x = lax.reshape(t, (n, *split))
    # x dims: 0 = B, 1..dim = before, dim+1 = groups, dim+2 = rest of dim, ...
    perm = list(range(1, dim + 2)) + [0] + list(range(dim + 2, len(split) + 1))
    x = lax.transpose(x, perm)
    return strong(lax.reshape(x, (*rest[:dim], size * n, *rest[dim + 1:])))


def _unfold(t: Tracer, dim: int, n: int, groups: int) -> Tracer:
    """The inverse of `_fold`: split dim `dim` of `t`, ordered (groups, B, rest), and move B
    to the front."""
    dims = list(t.shape)
    rest = dims[dim] // (groups * n)
    x = lax.reshape(t, (*dims[:dim], groups, n, rest, *dims[dim + 1:]))
    perm = [dim + 1] + [d for d in range(x.ndim) if d != dim + 1]
    x = lax.transpose(x, perm)
    return strong(lax.reshape(x, (n, *dims[:dim], groups * rest, *dims[dim + 1:])))


def _convolution(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """convolution, as JAX batches it: a batched input folds B into its batch dim, a batched
    kernel into its output features, both batched into feature (or batch) groups."""
    a, b = _arrays(args)
    lab: ConvDimLabels = inst.attrs["dim_labels"]
    fgc = int(inst.attrs.get("feature_group_count", 1))
    bgc = int(inst.attrs.get("batch_group_count", 1))
    n = ctx.size
    et = inst.shape.element_type
    if a.batched and b.batched:
        if bgc > 1:
            lhs, bgc = _fold(a.t, lab.input_batch, 1), bgc * n
        else:
            lhs, fgc = _fold(a.t, lab.input_feature, 1), fgc * n
        rhs = _fold(b.t, lab.kernel_output_feature, 1)
        out_dim, groups = lab.output_feature, 1
    elif a.batched:
        lhs, rhs = _fold(a.t, lab.input_batch, bgc), b.t
        out_dim, groups = lab.output_batch, 1
    else:
        groups = fgc if fgc > 1 else bgc
        lhs, rhs = a.t, _fold(b.t, lab.kernel_output_feature, groups)
        out_dim = lab.output_feature
    window = inst.attrs["window"]
    shape = infer("infer_convolution", lhs.aval, rhs.aval, window, lab, fgc, bgc, et)
    out = reemit(inst, [lhs, rhs], shape, inst.attrs.replace(feature_group_count=fgc,
                                                              batch_group_count=bgc))
    return BVal(_unfold(out, out_dim, n, groups), True)


# ---- the table ----------------------------------------------------------------------------------
BATCH_RULES: dict[Opcode, Rule] = {
    **{op: _elementwise for op in Opcode if op.is_elementwise},
    # one operand; the batch dim leads the result unchanged
    Opcode.BITCAST_CONVERT: _same_layout,
    Opcode.RESHAPE: _same_layout,
    Opcode.BITCAST: _same_layout,
    Opcode.FFT: _same_layout,
    Opcode.TOPK: _same_layout,
    Opcode.COPY: _copy,
    # data movement
    Opcode.BROADCAST: _broadcast,
    Opcode.TRANSPOSE: _transpose,
    Opcode.REVERSE: _reverse,
    Opcode.SLICE: _slice,
    Opcode.CONCATENATE: _concatenate,
    Opcode.MAP: _map,
    Opcode.PAD: _idx.pad,
    Opcode.DYNAMIC_SLICE: _idx.dynamic_slice,
    Opcode.DYNAMIC_UPDATE_SLICE: _idx.dynamic_update_slice,
    Opcode.GATHER: _idx.gather,
    Opcode.SCATTER: _idx.scatter,
    # reductions, sort, contractions
    Opcode.REDUCE: _reduce,
    Opcode.REDUCE_WINDOW: _reduce_window,
    Opcode.SELECT_AND_SCATTER: _select_and_scatter,
    Opcode.SORT: _sort,
    Opcode.DOT: _dot,
    Opcode.CONVOLUTION: _convolution,
    # tuples, control flow, custom-calls, stateful random bits
    Opcode.TUPLE: _ctl.tuple_,
    Opcode.GET_TUPLE_ELEMENT: _ctl.get_tuple_element,
    Opcode.WHILE: _ctl.while_,
    Opcode.CONDITIONAL: _ctl.conditional,
    Opcode.CALL: _ctl.call,
    Opcode.CUSTOM_CALL: _ctl.custom_call,
    Opcode.RNG_BIT_GENERATOR: _ctl.sequential,
    Opcode.RNG: _ctl.sequential,  # lax.rng_uniform with batched bounds: one draw per example
    Opcode.AFTER_ALL: _token,
    Opcode.OPT_BARRIER: _opt_barrier,
}

_LEAF = "it has no operands, so it is never batched: it is emitted unchanged"

NO_RULE: dict[Opcode, str] = {
    Opcode.PARAMETER: "parameters are bound to the (batched) arguments by vmap itself",
    Opcode.CONSTANT: _LEAF,
    Opcode.IOTA: _LEAF,
    Opcode.RNG_GET_AND_UPDATE_STATE: _LEAF,
    Opcode.PARTITION_ID: _LEAF,
    Opcode.REPLICA_ID: _LEAF,
    Opcode.FUSION: "fusions are made by the compiler's passes after tracing, never traced",
    Opcode.DOMAIN: "sharding domains are made by the compiler, never traced",
    Opcode.ADD_DEPENDENCY: "token dependencies are made by the compiler, never traced",
    Opcode.ALL_REDUCE: "collectives are not traced by xlc's frontend (no named axes)",
    Opcode.COPY_START: "asynchronous copies are made by the compiler (host offload)",
    Opcode.COPY_DONE: "asynchronous copies are made by the compiler (host offload)",
}

ALWAYS: frozenset[Opcode] = frozenset({Opcode.TUPLE, Opcode.GET_TUPLE_ELEMENT, Opcode.COPY})
"""Opcodes whose rule runs even when no operand is batched."""

assert not set(BATCH_RULES) & set(NO_RULE)
assert set(BATCH_RULES) | set(NO_RULE) == set(Opcode), set(Opcode) - set(BATCH_RULES) - set(NO_RULE)
