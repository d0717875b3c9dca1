"""Gather, scatter, select-and-scatter, sort, topk and map handlers of the reference evaluator.

Computations called per element (scatter combiners, sort comparators, select/scatter lambdas,
map functions) are evaluated vectorized: they are called once with whole arrays instead of
scalars, so every handler here is a handful of numpy calls, not a Python loop over elements.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from xlc.errors import EvaluationError
from xlc.hlo.evaluator_elementwise import as_compute, cast, compare_key, total_order_key
from xlc.hlo.evaluator_ops import (
    leaf_dtypes,
    pad_array,
    single_op_reducer,
    window_dims,
    window_padding,
    window_slices,
)
from xlc.hlo.ir import HloComputation, HloInstruction
from xlc.hlo.opcodes import Opcode

if TYPE_CHECKING:
    from xlc.hlo.evaluator import Evaluator, Handler


def _ints(inst: HloInstruction, key: str) -> list[int]:
    return [int(v) for v in inst.attrs.get(key, ())]


def _index_vectors(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """Indices with the index vector moved last (a trailing 1 added when ivd == rank)."""
    idx = np.asarray(indices).astype(np.int64)
    if index_vector_dim == idx.ndim:
        idx = idx[..., None]
    return np.moveaxis(idx, index_vector_dim, -1)


def _batch_coordinate(batch_shape: tuple[int, ...], axis: int) -> np.ndarray:
    """An int array of `batch_shape` holding each element's coordinate along `axis`."""
    shape = [1] * len(batch_shape)
    shape[axis] = batch_shape[axis]
    return np.broadcast_to(np.arange(batch_shape[axis]).reshape(shape), batch_shape)


def _batch_axis(indices_dim: int, index_vector_dim: int) -> int:
    """Position of an indices dimension among the batch dims (the index vector dim removed)."""
    return indices_dim - (1 if indices_dim > index_vector_dim else 0)


# ---- gather -------------------------------------------------------------------------------------
def _gather(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    operand = np.asarray(ops[0])
    ivd = int(inst.attrs["index_vector_dim"])
    idx = _index_vectors(ops[1], ivd)
    batch_shape = idx.shape[:-1]
    offset_dims = _ints(inst, "offset_dims")
    collapsed = _ints(inst, "collapsed_slice_dims")
    start_map = _ints(inst, "start_index_map")
    op_batch = _ints(inst, "operand_batching_dims")
    idx_batch = _ints(inst, "start_indices_batching_dims")
    sizes = _ints(inst, "slice_sizes")
    rank = operand.ndim
    nb = len(batch_shape)
    starts: list[Any] = [np.zeros(batch_shape, dtype=np.int64) for _ in range(rank)]
    for k, d in enumerate(start_map):
        starts[d] = idx[..., k]
    for od, idim in zip(op_batch, idx_batch):
        starts[od] = _batch_coordinate(batch_shape, _batch_axis(idim, ivd))
    index_arrays = []
    for d in range(rank):
        s = np.clip(starts[d], 0, operand.shape[d] - sizes[d])
        s = s.reshape(batch_shape + (1,) * rank)
        r = np.arange(sizes[d]).reshape((1,) * nb + tuple(sizes[d] if e == d else 1
                                                           for e in range(rank)))
        index_arrays.append(s + r)
    g = operand[tuple(index_arrays)]  # batch dims + all slice dims
    drop = set(collapsed) | set(op_batch)
    keep_axes = list(range(nb)) + [nb + d for d in range(rank) if d not in drop]
    g = g.reshape([g.shape[a] for a in keep_axes])
    # Output: offset dims at `offset_dims` positions, batch dims fill the rest in order.
    out_rank = len(inst.shape.dims)
    src = []
    bi, oi = 0, nb
    for pos in range(out_rank):
        if pos in offset_dims:
            src.append(oi)
            oi += 1
        else:
            src.append(bi)
            bi += 1
    return np.transpose(g, src).reshape(inst.shape.dims)


# ---- applying updates with a combiner -----------------------------------------------------------
def apply_updates(ev: Evaluator, comp: HloComputation, targets: list[np.ndarray],
                  positions: np.ndarray, updates: list[np.ndarray]) -> None:
    """targets[i].flat[positions[j]] = comp(targets..., updates...)[i] for each j in order.

    `targets` are flat arrays updated in place; repeated positions are applied in index order
    (in rounds of distinct positions, each round one vectorized call of `comp`)."""
    if positions.size == 0:
        return
    op = single_op_reducer(comp) if len(targets) == 1 else None
    root = comp.root
    if op is Opcode.ADD and targets[0].dtype != np.bool_:
        np.add.at(targets[0], positions, updates[0].astype(targets[0].dtype))
        return
    if root is not None and root.opcode is Opcode.PARAMETER and len(targets) == 1:
        which = root.parameter_number  # 0: keep the old value, 1: assign
        if which == 1:
            targets[0][positions] = updates[0]
        return
    order = np.argsort(positions, kind="stable")
    sp = positions[order]
    first = np.r_[True, sp[1:] != sp[:-1]]
    group_start = np.maximum.accumulate(np.where(first, np.arange(sp.size), 0))
    rank = np.empty_like(positions)
    rank[order] = np.arange(sp.size) - group_start
    dtypes = [t.dtype for t in targets]
    for r in range(int(rank.max()) + 1):
        sel = rank == r
        pos = positions[sel]
        olds = [t[pos] for t in targets]
        news = [u[sel] for u in updates]
        res = ev.call_leaves(comp, olds + news)
        for t, v, dt in zip(targets, res, dtypes):
            t[pos] = np.broadcast_to(cast(v, dt), pos.shape)


# ---- scatter ------------------------------------------------------------------------------------
def _scatter(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> Any:
    n = (len(ops) - 1) // 2
    operands = [np.array(o, copy=True) for o in ops[:n]]
    ivd = int(inst.attrs["index_vector_dim"])
    idx = _index_vectors(ops[n], ivd)
    updates = [np.asarray(u) for u in ops[n + 1:]]
    uwd = _ints(inst, "update_window_dims")
    inserted = _ints(inst, "inserted_window_dims")
    to_operand = _ints(inst, "scatter_dims_to_operand_dims")
    in_batch = _ints(inst, "input_batching_dims")
    idx_batch = _ints(inst, "scatter_indices_batching_dims")
    shape = operands[0].shape
    rank = len(shape)
    upd = updates[0]
    scatter_dims = [d for d in range(upd.ndim) if d not in uwd]
    batch_shape = idx.shape[:-1]
    window_operand_dims = [d for d in range(rank) if d not in inserted and d not in in_batch]
    # Per update element: its scatter (batch) coordinate and its window coordinate.
    ucoords = np.indices(upd.shape, sparse=False).reshape(upd.ndim, upd.size)  # scalar: (0, 1)
    bcoord = tuple(ucoords[d] for d in scatter_dims)
    flat_batch = (np.ravel_multi_index(bcoord, batch_shape) if batch_shape
                  else np.zeros(ucoords.shape[1], dtype=np.int64))
    idx_flat = idx.reshape(-1, idx.shape[-1])
    full = np.zeros((rank, ucoords.shape[1]), dtype=np.int64)
    for k, d in enumerate(to_operand):
        full[d] = idx_flat[flat_batch, k]
    for od, idim in zip(in_batch, idx_batch):
        full[od] = bcoord[_batch_axis(idim, ivd)]
    window_size = [1] * rank
    for wd, od in zip(uwd, window_operand_dims):
        window_size[od] = upd.shape[wd]
    in_bounds = np.ones(ucoords.shape[1], dtype=bool)
    for d in range(rank):
        in_bounds &= (full[d] >= 0) & (full[d] + window_size[d] <= shape[d])
    for wd, od in zip(uwd, window_operand_dims):
        full[od] += ucoords[wd]
    positions = np.ravel_multi_index(tuple(np.where(in_bounds, full, 0)), shape)[in_bounds] \
        if rank else np.zeros(int(in_bounds.sum()), dtype=np.int64)
    flat_targets = [o.reshape(-1) for o in operands]
    flat_updates = [u.reshape(-1)[in_bounds] for u in updates]
    apply_updates(ev, inst.called[0], flat_targets, positions, flat_updates)
    outs = [t.reshape(shape) for t in flat_targets]
    return tuple(outs) if inst.shape.is_tuple else outs[0]


# ---- select-and-scatter -------------------------------------------------------------------------
def _select_and_scatter(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    x, source, init = np.asarray(ops[0]), np.asarray(ops[1]), np.asarray(ops[2]).reshape(())
    select, scatter = inst.called[0], inst.called[1]
    wd = window_dims(inst, x.ndim)
    config = window_padding(wd)
    px = pad_array(x, np.zeros((), x.dtype), config)
    valid = pad_array(np.ones(x.shape, dtype=bool), False, config)
    flat_pos = pad_array(np.arange(x.size).reshape(x.shape), -1, config)
    out_dims, slices = window_slices(px.shape, wd)
    if tuple(out_dims) != source.shape:
        raise EvaluationError(f"select-and-scatter '{inst.name}': source shape {source.shape} "
                              f"is not the window output shape {tuple(out_dims)}")
    sel_val = np.zeros(out_dims, dtype=x.dtype)
    sel_pos = np.full(out_dims, -1, dtype=np.int64)
    has = np.zeros(out_dims, dtype=bool)
    for _, sl in slices:
        cur, ok, pos = px[sl], valid[sl], flat_pos[sl]
        keep = np.broadcast_to(np.asarray(ev.call_leaves(select, [sel_val, cur])[0], bool),
                               out_dims)
        take = ok & (~has | ~keep)
        sel_val = np.where(take, cur, sel_val)
        sel_pos = np.where(take, pos, sel_pos)
        has |= ok
    out = np.full(x.size, init, dtype=inst.shape.dtype)
    apply_updates(ev, scatter, [out], sel_pos[has], [source[has].astype(out.dtype)])
    return out.reshape(x.shape)


# ---- sort ---------------------------------------------------------------------------------------
def _simple_compare(comp: HloComputation) -> tuple[str, str | None] | None:
    """(direction, type) when the comparator is `compare(p0, p1)` over operand 0 only."""
    root = comp.root
    if root is None or root.opcode is not Opcode.COMPARE or len(root.operands) != 2:
        return None
    a, b = root.operands
    if a.opcode is not Opcode.PARAMETER or b.opcode is not Opcode.PARAMETER:
        return None
    if (a.parameter_number, b.parameter_number) == (0, 1):
        return str(root.attrs.get("direction")), root.attrs.get("type")
    if (a.parameter_number, b.parameter_number) == (1, 0):
        flipped = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE"}
        d = str(root.attrs.get("direction"))
        return flipped.get(d, d), root.attrs.get("type")
    return None


def _stable_argsort_desc(key: np.ndarray) -> np.ndarray:
    """Stable descending argsort along the last axis (ties keep the lower index first)."""
    n = key.shape[-1]
    return n - 1 - np.argsort(key[..., ::-1], axis=-1, kind="stable")[..., ::-1]


def _comparator_sort_perm(ev: Evaluator, comp: HloComputation, keys: list[np.ndarray]
                          ) -> np.ndarray:
    """Stable sort permutation along the last axis for an arbitrary comparator: a bottom-up
    merge sort where every element finds its merged position by a vectorized binary search."""
    shape = keys[0].shape
    n = shape[-1]
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    ks = [k.reshape(rows, n) for k in keys]
    perm = np.broadcast_to(np.arange(n), (rows, n)).copy()
    row_idx = np.arange(rows)[:, None]
    p = np.arange(n)[None, :]
    width = 1
    while width < n:
        run = p // width
        is_left = (run % 2) == 0
        own_start = run * width
        partner_start = np.where(is_left, own_start + width, own_start - width)
        partner_len = np.clip(n - partner_start, 0, width)
        lo = np.zeros((rows, n), dtype=np.int64)
        hi = np.broadcast_to(partner_len, (rows, n)).copy()
        self_vals = [k[row_idx, perm] for k in ks]
        while True:
            active = lo < hi
            if not active.any():
                break
            mid = (lo + hi) // 2
            q = np.clip(partner_start + mid, 0, n - 1)
            other = perm[row_idx, q]
            other_vals = [k[row_idx, other] for k in ks]
            args = []
            for sv, ov in zip(self_vals, other_vals):
                args += [np.where(is_left, ov, sv), np.where(is_left, sv, ov)]
            c = np.broadcast_to(np.asarray(ev.call_leaves(comp, args)[0], dtype=bool), (rows, n))
            advance = np.where(is_left, c, ~c)
            lo = np.where(active & advance, mid + 1, lo)
            hi = np.where(active & ~advance, mid, hi)
        pair_start = (run // 2) * 2 * width
        new_pos = pair_start + (p - own_start) + lo
        if not (np.sort(new_pos, axis=-1) == p).all():
            # no strict weak order (e.g. LT over NaNs): the positions collide; the result is
            # implementation-defined, so take a sequential stable sort's
            return _sequential_sort_perm(ev, comp, ks).reshape(shape)
        new_perm = np.empty_like(perm)
        new_perm[row_idx, new_pos] = perm
        perm = new_perm
        width *= 2
    return perm.reshape(shape)


def _sequential_sort_perm(ev: Evaluator, comp: HloComputation, ks: list[np.ndarray]
                          ) -> np.ndarray:
    """Per row, Python's stable sort calling the comparator on scalars (any comparator)."""
    rows, n = ks[0].shape

    def less(r: int, i: int, j: int) -> bool:
        args = []
        for k in ks:
            args += [k[r, i], k[r, j]]
        return bool(np.asarray(ev.call_leaves(comp, args)[0]))

    out = np.empty((rows, n), dtype=np.int64)
    for r in range(rows):
        def order(i: int, j: int, r: int = r) -> int:
            return -1 if less(r, i, j) else (1 if less(r, j, i) else 0)

        out[r] = sorted(range(n), key=functools.cmp_to_key(order))
    return out


def _sort(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> Any:
    arrays = [np.asarray(o) for o in ops]
    (dim,) = _ints(inst, "dimensions") or [arrays[0].ndim - 1]
    moved = [np.moveaxis(a, dim, -1) for a in arrays]
    comp = inst.called[0]
    simple = _simple_compare(comp)
    key0 = moved[0]
    if moved[0].shape[-1] <= 1:
        perm = np.zeros(moved[0].shape, dtype=np.int64)
    elif simple is not None and simple[0] in ("LT", "GT") and key0.dtype.kind != "c" and (
            simple[1] == "TOTALORDER" or key0.dtype.kind in "iub"
            or not np.isnan(as_compute(key0)).any()):
        key = compare_key(as_compute(key0), simple[1])
        if simple[0] == "LT":
            perm = np.argsort(key, axis=-1, kind="stable")
        else:
            perm = _stable_argsort_desc(key)
    else:
        perm = _comparator_sort_perm(ev, comp, moved)
    outs = [np.moveaxis(np.take_along_axis(m, perm, axis=-1), -1, dim) for m in moved]
    return tuple(outs) if inst.shape.is_tuple else outs[0]


def topk_arrays(x: np.ndarray, k: int, largest: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The k largest (or smallest) entries along the last axis, ties by lower index, with their
    s32 indices. Floats are ordered by TOTALORDER (NaN largest)."""
    key = total_order_key(x)
    if largest:
        perm = _stable_argsort_desc(key)
    else:
        perm = np.argsort(key, axis=-1, kind="stable")
    perm = perm[..., :k]
    return np.take_along_axis(x, perm, axis=-1), perm.astype(np.int32)


def _topk(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    k = int(inst.attrs.get("k", inst.shape.tuple_shapes[0].dims[-1]))  # type: ignore[index]
    return topk_arrays(np.asarray(ops[0]), k, bool(inst.attrs.get("largest", True)))


# ---- map ----------------------------------------------------------------------------------------
def _map(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    res = ev.call_leaves(inst.called[0], [np.asarray(o) for o in ops])[0]
    return np.broadcast_to(cast(res, leaf_dtypes(inst.shape)[0]), inst.shape.dims).copy()


INDEXING_HANDLERS: dict[Opcode, Handler] = {
    Opcode.GATHER: _gather,
    Opcode.SCATTER: _scatter,
    Opcode.SELECT_AND_SCATTER: _select_and_scatter,
    Opcode.SORT: _sort,
    Opcode.TOPK: _topk,
    Opcode.MAP: _map,
}
"""Handlers of gather/scatter/select-and-scatter/sort/topk/map."""
