"""Batching rules of `xlc.vmap` for indexing (listed in `vmap_rules.BATCH_RULES`): pad,
dynamic-slice, dynamic-update-slice, gather and scatter.

Batched *indices* turn dynamic slices into gathers and dynamic updates into scatters. Where both
the array and the indices are batched, each example must index its own slice of the array: a
counter (iota over the batch) is prepended to every index vector and the batch dim of the array
becomes a collapsed (gather) or inserted (scatter) dim, as JAX batches them.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xlc.frontend import lax
from xlc.frontend.tracer import Tracer, as_tracer, infer
from xlc.frontend.vmap_core import BatchCtx, BVal, Val, bcast, bshape, decompose, reemit, strong
from xlc.hlo.attrs import PaddingConfig
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType as PT

__all__ = ["pad", "dynamic_slice", "dynamic_update_slice", "gather", "scatter"]


def _arrays(args: Sequence[Val]) -> list[BVal]:
    out = []
    for a in args:
        assert isinstance(a, BVal), "tuple-shaped operand of an indexing op"
        out.append(a)
    return out


def _plus1(xs: Any) -> tuple[int, ...]:
    return tuple(int(x) + 1 for x in xs)


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


# ---- pad ---------------------------------------------------------------------------------------
def pad(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """pad: no padding on the batch dim; a batched padding value pads with zero and selects
    the value in where a mask of the padding says so (as JAX does)."""
    x, v = _arrays(args)
    cfg = inst.attrs["padding"]
    bcfg = PaddingConfig(((0, 0, 0), *cfg.dims))
    shape = bshape(inst.shape, ctx.size)
    xb = bcast(ctx, x)
    if not v.batched:
        return BVal(reemit(inst, [xb, v.t], shape, inst.attrs.replace(padding=bcfg)), True)
    xnp = _np()
    zero = as_tracer(0, x.t.ptype)
    padded = reemit(inst, [xb, zero], shape, inst.attrs.replace(padding=bcfg))
    inside = lax.pad(xnp.ones(xb.shape, "bool"), False, bcfg.dims)
    fill = lax.broadcast_in_dim(v.t, shape.dims, (0,))
    return BVal(strong(lax.select(inside, padded, fill)), True)


# ---- dynamic slices ------------------------------------------------------------------------------
def _index_matrix(ctx: BatchCtx, starts: Sequence[BVal], counter: bool) -> Tracer:
    """The start indices as an [N, k] matrix (each row one example's index vector), with the
    example's number first when `counter`."""
    n = ctx.size
    pt = starts[0].t.ptype if starts else PT.S32
    cols = []
    if counter:
        cols.append(lax.broadcasted_iota(pt, (n, 1), 0))
    for s in starts:
        col = s.t if s.batched else lax.broadcast_in_dim(s.t, (n,), ())
        cols.append(lax.reshape(col, (n, 1)))
    return strong(lax.concatenate(cols, 1)) if len(cols) > 1 else strong(cols[0])


def dynamic_slice(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """dynamic-slice: unbatched starts slice the whole batch dim; batched starts make a
    gather (whose start clamping is dynamic-slice's)."""
    x, *starts = _arrays(args)
    sizes = tuple(int(s) for s in inst.attrs["dynamic_slice_sizes"])
    n = ctx.size
    if not any(s.batched for s in starts):
        pt = starts[0].t.ptype if starts else PT.S32
        zero = as_tracer(0, pt)
        return BVal(reemit(inst, [x.t, zero, *(s.t for s in starts)], bshape(inst.shape, n),
                           inst.attrs.replace(dynamic_slice_sizes=(n, *sizes))), True)
    r = len(sizes)
    idx = _index_matrix(ctx, starts, counter=x.batched)
    if x.batched:
        out = lax.gather(x.t, idx, offset_dims=tuple(range(1, r + 1)), collapsed_slice_dims=(0,),
                         start_index_map=tuple(range(r + 1)), index_vector_dim=1,
                         slice_sizes=(1, *sizes))
    else:
        out = lax.gather(x.t, idx, offset_dims=tuple(range(1, r + 1)), collapsed_slice_dims=(),
                         start_index_map=tuple(range(r)), index_vector_dim=1,
                         slice_sizes=sizes)
    return BVal(strong(out), True)


def dynamic_update_slice(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """dynamic-update-slice: unbatched starts update the whole batch dim; batched starts make
    a scatter of the (clamped, as dynamic-update-slice clamps) starts."""
    x, u, *starts = _arrays(args)
    n = ctx.size
    xb, ub = bcast(ctx, x), bcast(ctx, u)
    if not any(s.batched for s in starts):
        pt = starts[0].t.ptype if starts else PT.S32
        zero = as_tracer(0, pt)
        return BVal(reemit(inst, [xb, ub, zero, *(s.t for s in starts)],
                           bshape(inst.shape, n)), True)
    clamped = []
    for s, dim, size in zip(starts, x.t.shape[int(x.batched):],
                              u.t.shape[int(u.batched):]):
        hi = as_tracer(dim - size, s.t.ptype)
        clamped.append(BVal(strong(lax.clamp(as_tracer(0, s.t.ptype), s.t, hi)), s.batched))
    r = len(starts)
    idx = _index_matrix(ctx, clamped, counter=True)
    out = lax.scatter(xb, idx, ub, update_window_dims=tuple(range(1, r + 1)),
                      inserted_window_dims=(0,), scatter_dims_to_operand_dims=tuple(range(r + 1)),
                      index_vector_dim=1)
    return BVal(strong(out), True)


# ---- gather / scatter ----------------------------------------------------------------------------
def _with_counter(ctx: BatchCtx, idx: Tracer, ivd: int) -> tuple[Tracer, int]:
    """Batched indices [N, ...] (index vectors along `ivd`, numbered with the batch dim) with
    the example's number prepended to every index vector; returns (indices, index_vector_dim)."""
    if ivd == idx.ndim:  # implicit trailing index vector of length 1: spell it out
        idx = lax.reshape(idx, (*idx.shape, 1))
    shape = list(idx.shape)
    shape[ivd] = 1
    counter = lax.broadcasted_iota(idx.ptype, shape, 0)
    return strong(lax.concatenate([counter, idx], ivd)), ivd


def gather(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """gather: a batched operand adds a full-size offset dim in front; batched indices add an
    index batch dim in front; both batched add a counter to the index vectors."""
    x, i = _arrays(args)
    a = inst.attrs
    offset, collapsed = tuple(a["offset_dims"]), tuple(a["collapsed_slice_dims"])
    smap, ivd = tuple(a["start_index_map"]), int(a["index_vector_dim"])
    sizes = tuple(a["slice_sizes"])
    obd = tuple(a.get("operand_batching_dims", ()))
    ibd = tuple(a.get("start_indices_batching_dims", ()))
    n = ctx.size
    idx = i.t
    if x.batched and not i.batched:
        offset, collapsed, smap = (0, *_plus1(offset)), _plus1(collapsed), _plus1(smap)
        sizes, obd = (n, *sizes), _plus1(obd)
    elif i.batched and not x.batched:
        offset, ivd, ibd = _plus1(offset), ivd + 1, _plus1(ibd)
    else:
        idx, ivd = _with_counter(ctx, i.t, ivd + 1)
        offset, collapsed, smap = _plus1(offset), (0, *_plus1(collapsed)), (0, *_plus1(smap))
        sizes, obd, ibd = (1, *sizes), _plus1(obd), _plus1(ibd)
    attrs = a.replace(offset_dims=offset, collapsed_slice_dims=collapsed, start_index_map=smap,
                      index_vector_dim=ivd, slice_sizes=sizes,
                      operand_batching_dims=obd or None, start_indices_batching_dims=ibd or None)
    shape = infer("infer_gather", x.t.aval, idx.aval, offset, collapsed, smap, ivd, sizes,
                  obd, ibd)
    out = reemit(inst, [x.t, idx], shape, attrs)
    return BVal(out, True)


def scatter(ctx: BatchCtx, inst: HloInstruction, args: list[Val]) -> Val:
    """scatter: the operands are batched (the result is); unbatched indices make the batch a
    leading window dim of the updates, batched ones get a counter and the batch dim becomes an
    inserted window dim."""
    vals = _arrays(args)
    k = (len(vals) - 1) // 2
    ops, i, upds = vals[:k], vals[k], vals[k + 1:]
    a = inst.attrs
    uwd, iwd = tuple(a["update_window_dims"]), tuple(a["inserted_window_dims"])
    sdod, ivd = tuple(a["scatter_dims_to_operand_dims"]), int(a["index_vector_dim"])
    ibd = tuple(a.get("input_batching_dims", ()))
    sibd = tuple(a.get("scatter_indices_batching_dims", ()))
    xs = [bcast(ctx, o) for o in ops]
    us = [bcast(ctx, u) for u in upds]
    idx = i.t
    if not i.batched:
        uwd, iwd, sdod, ibd = (0, *_plus1(uwd)), _plus1(iwd), _plus1(sdod), _plus1(ibd)
    else:
        idx, ivd = _with_counter(ctx, i.t, ivd + 1)
        uwd, iwd, sdod = _plus1(uwd), (0, *_plus1(iwd)), (0, *_plus1(sdod))
        ibd, sibd = _plus1(ibd), _plus1(sibd)
    attrs = a.replace(update_window_dims=uwd, inserted_window_dims=iwd,
                      scatter_dims_to_operand_dims=sdod, index_vector_dim=ivd,
                      input_batching_dims=ibd or None, scatter_indices_batching_dims=sibd or None)
    shape = infer("infer_scatter", [x.aval for x in xs], idx.aval, [u.aval for u in us], uwd,
                  iwd, sdod, ivd, ibd, sibd, to_apply=inst.called[0])
    out = reemit(inst, [*xs, idx, *us], shape, attrs)
    return decompose(out, True)
