"""Data-movement, reduction, dot and convolution handlers of the reference evaluator.

Values are numpy arrays in logical (row-major index) order; only `bitcast` looks at layouts (it
reinterprets the physical buffer laid out per `minor_to_major`). Handler signature:
`handler(ev, inst, operands) -> value` (see `xlc.hlo.evaluator`).
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from xlc.errors import EvaluationError
from xlc.hlo.attrs import Window, WindowDim
from xlc.hlo.evaluator_elementwise import (
    REDUCER_UFUNCS,
    as_compute,
    cast,
    compute_dtype,
    contiguous,
    is_float,
)
from xlc.hlo.ir import HloComputation, HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Layout, Shape, layout_order, physical_order

if TYPE_CHECKING:
    from xlc.hlo.evaluator import Evaluator, Handler


# ---- helpers ------------------------------------------------------------------------------------
def leaf_dtypes(shape: Shape) -> list[np.dtype]:
    """Element dtypes of a shape's leaves, in order (one entry for an array shape)."""
    return [s.dtype for _, s in shape.leaves()]


def single_op_reducer(comp: HloComputation) -> Opcode | None:
    """If `comp` is `f(p0, p1) = op(p0, p1)` (or `op(p1, p0)`) for a binary op with a numpy
    ufunc fast path, return that opcode, else None."""
    root = comp.root
    if root is None or comp.num_parameters != 2 or root.opcode not in REDUCER_UFUNCS:
        return None
    ps = comp.parameters
    if len(root.operands) == 2 and set(map(id, root.operands)) == {id(ps[0]), id(ps[1])}:
        return root.opcode
    return None


def _ufunc_for(op: Opcode, dt: np.dtype) -> np.ufunc | None:
    """The ufunc of a single-op reducer for dtype `dt` (None where numpy would change dtype)."""
    if dt == np.bool_:
        table = {Opcode.AND: np.logical_and, Opcode.MINIMUM: np.logical_and,
                 Opcode.MULTIPLY: np.logical_and, Opcode.OR: np.logical_or,
                 Opcode.MAXIMUM: np.logical_or, Opcode.ADD: np.logical_or,
                 Opcode.XOR: np.logical_xor}
        return table.get(op)
    if is_float(dt) and op in (Opcode.AND, Opcode.OR, Opcode.XOR):
        return None
    return REDUCER_UFUNCS[op]


def pad_array(x: np.ndarray, value: Any, config: Sequence[tuple[int, int, int]]) -> np.ndarray:
    """XLA pad: per dim (low, high, interior); negative low/high crop."""
    out = np.asarray(x)
    for d, (lo, hi, it) in enumerate(config):
        n = out.shape[d]
        if it > 0 and n > 1:
            shape = list(out.shape)
            shape[d] = n + (n - 1) * it
            dil = np.full(shape, value, dtype=out.dtype)
            idx: list[Any] = [slice(None)] * out.ndim
            idx[d] = slice(0, shape[d], it + 1)
            dil[tuple(idx)] = out
            out = dil
        if lo > 0 or hi > 0:
            shape = list(out.shape)
            shape[d] = out.shape[d] + max(lo, 0) + max(hi, 0)
            big = np.full(shape, value, dtype=out.dtype)
            idx = [slice(None)] * out.ndim
            idx[d] = slice(max(lo, 0), max(lo, 0) + out.shape[d])
            big[tuple(idx)] = out
            out = big
        if lo < 0 or hi < 0:
            idx = [slice(None)] * out.ndim
            start = -lo if lo < 0 else 0
            stop = out.shape[d] + hi if hi < 0 else out.shape[d]
            idx[d] = slice(start, max(start, stop))
            out = out[tuple(idx)]
    return out


def window_dims(inst: HloInstruction, rank: int) -> tuple[WindowDim, ...]:
    """The `window` attribute's dims (all size 1 when absent)."""
    w = inst.attrs.get("window")
    if w is None or (isinstance(w, Window) and not w.dims and rank):
        return tuple(WindowDim(1) for _ in range(rank))
    if len(w.dims) != rank:
        raise EvaluationError(f"'{inst.name}': window has {len(w.dims)} dims, operand rank "
                              f"is {rank}")
    return tuple(w.dims)


def window_slices(padded_shape: Sequence[int], dims: Sequence[WindowDim]
                  ) -> tuple[tuple[int, ...], list[tuple[tuple[int, ...], tuple[slice, ...]]]]:
    """Output dims of a strided, dilated window over an (already padded) array, and for each
    window offset the strided slice of the padded array that it reads."""
    out_dims = []
    for n, w in zip(padded_shape, dims):
        span = (w.size - 1) * w.window_dilation + 1
        out_dims.append(0 if n < span else (n - span) // w.stride + 1)
    slices = []
    for k in itertools.product(*(range(w.size) for w in dims)):
        sl = tuple(slice(ki * w.window_dilation, ki * w.window_dilation + (o - 1) * w.stride + 1,
                         w.stride) if o > 0 else slice(0, 0)
                   for ki, w, o in zip(k, dims, out_dims))
        slices.append((k, sl))
    return tuple(out_dims), slices


def window_padding(dims: Sequence[WindowDim]) -> list[tuple[int, int, int]]:
    """Pad config (low, high, interior) of a window's padding and base dilation."""
    return [(w.pad_low, w.pad_high, w.base_dilation - 1) for w in dims]


def _combine(ev: Evaluator, comp: HloComputation, acc: list[np.ndarray], cur: list[np.ndarray],
             dtypes: list[np.dtype]) -> list[np.ndarray]:
    """Apply a (possibly variadic) reducer vectorized: comp(acc..., cur...) -> list of arrays."""
    res = ev.call_leaves(comp, acc + cur)
    shape = np.broadcast_shapes(*(a.shape for a in acc + cur))
    return [np.broadcast_to(cast(r, dt), shape) for r, dt in zip(res, dtypes)]


# ---- data movement ------------------------------------------------------------------------------
def _broadcast(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    x = np.asarray(ops[0])
    dims = tuple(inst.attrs.get("dimensions", ()))
    out_dims = inst.shape.dims
    if not out_dims:  # scalar to scalar (possibly vectorized inside a lambda)
        return x
    if x.ndim != len(dims):
        raise EvaluationError(f"broadcast '{inst.name}': operand rank {x.ndim} but "
                              f"dimensions={{{','.join(map(str, dims))}}}")
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    x = np.transpose(x, order)
    shape = [1] * len(out_dims)
    for i in order:
        shape[dims[i]] = x.shape[order.index(i)]
    return np.broadcast_to(x.reshape(shape), out_dims)


def _reshape(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    x = np.asarray(ops[0])
    if inst.shape.num_elements == 1 and x.size != 1:  # scalar-like reshape in a lambda
        return x
    return x.reshape(inst.shape.dims)


def _transpose(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    return np.transpose(np.asarray(ops[0]), tuple(inst.attrs["dimensions"]))


def to_physical(x: np.ndarray, layout: Layout | None) -> np.ndarray:
    """The 1-D physical buffer of a logical array stored with `layout`."""
    return np.ascontiguousarray(np.transpose(x, layout_order(layout, x.ndim))).ravel()


def from_physical(buf: np.ndarray, shape: Shape) -> np.ndarray:
    """The logical array of `shape` whose physical buffer (per its layout) is `buf`."""
    m2m = physical_order(shape)
    arr = buf.reshape([shape.dims[d] for d in m2m])
    return np.transpose(arr, np.argsort(m2m))


def _bitcast(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    x = np.asarray(ops[0])
    src = inst.operands[0].shape
    if src.is_array and src.rank == 0 and inst.shape.rank == 0:  # also vectorized lambdas
        return contiguous(x).view(inst.shape.dtype)
    buf = to_physical(x, src.layout if src.is_array else None)
    dt = inst.shape.dtype
    if dt != buf.dtype:
        if dt.itemsize * inst.shape.num_elements != buf.dtype.itemsize * buf.size:
            raise EvaluationError(f"bitcast '{inst.name}': {src} and {inst.shape} have "
                                  "different byte sizes")
        buf = buf.view(dt)
    if buf.size != inst.shape.num_elements:
        raise EvaluationError(f"bitcast '{inst.name}': {src} and {inst.shape} have different "
                              "element counts")
    return from_physical(buf, inst.shape)


def _copy(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> Any:
    return ops[0]


def _slice(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    sl = tuple(slice(s.start, s.limit, s.stride) for s in inst.attrs["slice"])
    return np.asarray(ops[0])[sl]


def _start_indices(ops: list[Any], rank: int) -> list[int]:
    if len(ops) == 1 and np.asarray(ops[0]).ndim == 1:  # old form: one index vector
        return [int(v) for v in np.asarray(ops[0])]
    return [int(np.asarray(o).reshape(())) for o in ops[:rank]]


def _dynamic_slice(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    x = np.asarray(ops[0])
    sizes = tuple(inst.attrs.get("dynamic_slice_sizes", inst.shape.dims))
    starts = _start_indices(ops[1:], x.ndim)
    sl = []
    for s, size, n in zip(starts, sizes, x.shape):
        s = min(max(s, 0), n - size)
        sl.append(slice(s, s + size))
    return x[tuple(sl)]


def _dynamic_update_slice(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    x = np.array(ops[0], copy=True)
    upd = np.asarray(ops[1])
    starts = _start_indices(ops[2:], x.ndim)
    sl = []
    for s, size, n in zip(starts, upd.shape, x.shape):
        s = min(max(s, 0), n - size)
        sl.append(slice(s, s + size))
    x[tuple(sl)] = upd
    return x


def _concatenate(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    (dim,) = tuple(inst.attrs["dimensions"])
    return np.concatenate([np.asarray(o) for o in ops], axis=dim)


def _pad(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    dt = inst.shape.dtype  # operand and pad value may be floats of different precision
    value = np.asarray(ops[1]).reshape(()).astype(dt)
    return pad_array(np.asarray(ops[0]).astype(dt, copy=False), value, inst.attrs["padding"].dims)


def _reverse(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    dims = tuple(inst.attrs.get("dimensions", ()))
    return np.flip(np.asarray(ops[0]), axis=dims) if dims else np.asarray(ops[0])


def _iota(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    dims = inst.shape.dims
    d = int(inst.attrs.get("iota_dimension", 0))
    shape = [1] * len(dims)
    shape[d] = dims[d]
    r = np.arange(dims[d], dtype=np.float64 if is_float(inst.shape.dtype) else np.int64)
    return np.broadcast_to(r.reshape(shape).astype(inst.shape.dtype), dims)


# ---- reduce / reduce-window ---------------------------------------------------------------------
def _reduce(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> Any:
    n = len(ops) // 2
    inputs = [np.asarray(o) for o in ops[:n]]
    inits = [np.asarray(o).reshape(()) for o in ops[n:]]
    dims = tuple(sorted(inst.attrs.get("dimensions", ())))
    comp = inst.called[0]
    dtypes = leaf_dtypes(inst.shape)
    rank = inputs[0].ndim
    keep = [d for d in range(rank) if d not in dims]
    keep_shape = tuple(inputs[0].shape[d] for d in keep)
    count = int(np.prod([inputs[0].shape[d] for d in dims], dtype=np.int64))
    op = single_op_reducer(comp) if n == 1 else None
    uf = _ufunc_for(op, inputs[0].dtype) if op is not None else None
    if uf is not None and count > 0:
        x = as_compute(inputs[0])
        if uf is np.add and x.dtype.kind in "fc":
            # numpy sums pairwise only along its innermost loop; over a major axis (or a
            # strided view) it adds row after row, error ~ n eps: reduce a contiguous copy
            # with the reduced axes last
            x = np.ascontiguousarray(np.transpose(x, keep + list(dims)))
            r = uf.reduce(x.reshape(keep_shape + (count,)), axis=-1)
        else:
            r = uf.reduce(x, axis=dims)
        return cast(uf(as_compute(inits[0]), r), dtypes[0])
    if count == 0:
        outs = [np.broadcast_to(cast(i, dt), keep_shape) for i, dt in zip(inits, dtypes)]
    else:
        vals = [np.transpose(x, keep + list(dims)).reshape(keep_shape + (count,)) for x in inputs]
        while vals[0].shape[-1] > 1:
            m = vals[0].shape[-1]
            half = m // 2
            a = [v[..., :half] for v in vals]
            b = [v[..., half:2 * half] for v in vals]
            c = _combine(ev, comp, a, b, dtypes)
            if m % 2:
                c = [np.concatenate([ci, v[..., 2 * half:]], axis=-1) for ci, v in zip(c, vals)]
            vals = c
        last = [v[..., 0] for v in vals]
        init_b = [np.broadcast_to(cast(i, dt), keep_shape) for i, dt in zip(inits, dtypes)]
        outs = _combine(ev, comp, init_b, last, dtypes)
    outs = [np.array(o) for o in outs]
    return tuple(outs) if inst.shape.is_tuple else outs[0]


def _reduce_window(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> Any:
    n = len(ops) // 2
    inputs = [np.asarray(o) for o in ops[:n]]
    inits = [np.asarray(o).reshape(()) for o in ops[n:]]
    comp = inst.called[0]
    dtypes = leaf_dtypes(inst.shape)
    wd = window_dims(inst, inputs[0].ndim)
    padded = [pad_array(x, i, window_padding(wd)) for x, i in zip(inputs, inits)]
    out_dims, slices = window_slices(padded[0].shape, wd)
    acc = [np.broadcast_to(cast(i, dt), out_dims) for i, dt in zip(inits, dtypes)]
    op = single_op_reducer(comp) if n == 1 else None
    uf = _ufunc_for(op, inputs[0].dtype) if op is not None else None
    if uf is not None:
        a = as_compute(acc[0])
        px = as_compute(padded[0])
        for _, sl in slices:
            a = uf(a, px[sl])
        return cast(a, dtypes[0])
    for _, sl in slices:
        acc = _combine(ev, comp, acc, [p[sl] for p in padded], dtypes)
    outs = [np.array(o) for o in acc]
    return tuple(outs) if inst.shape.is_tuple else outs[0]


# ---- dot / convolution --------------------------------------------------------------------------
def _accumulation_dtype(result: np.dtype, *operands: np.dtype) -> np.dtype:
    if result == np.bool_:
        return np.dtype(np.int64)
    if result.kind == "c" or any(o.kind == "c" for o in operands):
        wide = result == np.complex128 or any(o in (np.complex128, np.float64) for o in operands)
        return np.dtype(np.complex128 if wide else np.complex64)
    if is_float(result):
        return np.dtype(np.float64) if (result == np.float64 or np.dtype(np.float64) in operands) \
            else np.dtype(np.float32)
    return compute_dtype(result)


def _dot(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    lhs, rhs = np.asarray(ops[0]), np.asarray(ops[1])
    a = inst.attrs
    lb, rb = list(a.get("lhs_batch_dims", ())), list(a.get("rhs_batch_dims", ()))
    lc, rc = list(a.get("lhs_contracting_dims", ())), list(a.get("rhs_contracting_dims", ()))
    lf = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.ndim) if d not in rb and d not in rc]
    dt = inst.shape.dtype
    acc = _accumulation_dtype(dt, lhs.dtype, rhs.dtype)
    size = lambda x, ds: int(np.prod([x.shape[d] for d in ds], dtype=np.int64))  # noqa: E731
    B, M, K, N = size(lhs, lb), size(lhs, lf), size(lhs, lc), size(rhs, rf)
    L = lhs.astype(acc).transpose(lb + lf + lc).reshape(B, M, K)
    R = rhs.astype(acc).transpose(rb + rc + rf).reshape(B, K, N)
    out = np.matmul(L, R)
    shape = [lhs.shape[d] for d in lb] + [lhs.shape[d] for d in lf] + [rhs.shape[d] for d in rf]
    out = out.reshape(shape)
    return (out != 0) if dt == np.bool_ else cast(out, dt)


def _convolution(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    lhs, rhs = np.asarray(ops[0]), np.asarray(ops[1])
    dl = inst.attrs["dim_labels"]
    fgc = int(inst.attrs.get("feature_group_count", 1))
    bgc = int(inst.attrs.get("batch_group_count", 1))
    nsp = len(dl.input_spatial)
    wd = window_dims(inst, nsp)
    dt = inst.shape.dtype
    acc = _accumulation_dtype(dt, lhs.dtype, rhs.dtype)
    x = lhs.astype(acc).transpose([dl.input_batch, dl.input_feature, *dl.input_spatial])
    w = rhs.astype(acc).transpose([dl.kernel_output_feature, dl.kernel_input_feature,
                                   *dl.kernel_spatial])
    for i, d in enumerate(wd):
        if d.reversal:
            w = np.flip(w, axis=2 + i)
    x = pad_array(x, acc.type(0), [(0, 0, 0), (0, 0, 0)] + window_padding(wd))
    sp_dims = [WindowDim(d.size, d.stride, 0, 0, d.window_dilation) for d in wd]
    out_sp, slices = window_slices(x.shape[2:], sp_dims)
    n_in, c_in = x.shape[0], x.shape[1]
    o_total = w.shape[0]
    if n_in % bgc or c_in % fgc or o_total % (fgc * bgc):
        raise EvaluationError(f"convolution '{inst.name}': batch {n_in}, features {c_in}, output "
                              f"features {o_total} do not divide into feature_group_count={fgc}"
                              f", batch_group_count={bgc}")
    n_out = n_in // bgc
    out = np.zeros((n_out, o_total, *out_sp), dtype=acc)
    cg = c_in // fgc
    groups = fgc * bgc
    og = o_total // groups
    for k, sl in slices:
        patch = x[(slice(None), slice(None)) + sl]  # (N, C, *out_sp)
        wk = w[(slice(None), slice(None)) + tuple(k)]  # (O, Cg)
        for g in range(groups):
            if bgc > 1:
                p = patch[g * n_out:(g + 1) * n_out]
            else:
                p = patch[:, g * cg:(g + 1) * cg]
            wg = wk[g * og:(g + 1) * og]
            contrib = np.tensordot(wg, p, axes=([1], [1]))  # (og, N, *sp)
            out[:, g * og:(g + 1) * og] += np.moveaxis(contrib, 0, 1)
    src = [dl.output_batch, dl.output_feature, *dl.output_spatial]
    out = np.transpose(out, np.argsort(src))
    return (out != 0) if dt == np.bool_ else cast(out, dt)


def _fft(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    """numpy's FFTs over the innermost len(fft_length) axes (computed in double precision,
    rounded once to the result type); IRFFT takes fft_length as the output sizes."""
    x = np.asarray(ops[0])
    lengths = tuple(int(n) for n in inst.attrs["fft_length"])
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    kind = inst.attrs["fft_type"]
    out: np.ndarray
    if kind == "FFT":
        out = np.fft.fftn(x.astype(np.complex128), axes=axes)
    elif kind == "IFFT":
        out = np.fft.ifftn(x.astype(np.complex128), axes=axes)
    elif kind == "RFFT":
        out = np.fft.rfftn(x.astype(np.float64), s=lengths, axes=axes)
    else:
        out = np.fft.irfftn(x.astype(np.complex128), s=lengths, axes=axes)
    return out.astype(inst.shape.dtype)


DATA_HANDLERS: dict[Opcode, Handler] = {
    Opcode.FFT: _fft,
    Opcode.BROADCAST: _broadcast,
    Opcode.RESHAPE: _reshape,
    Opcode.TRANSPOSE: _transpose,
    Opcode.BITCAST: _bitcast,
    Opcode.COPY: _copy,
    Opcode.SLICE: _slice,
    Opcode.DYNAMIC_SLICE: _dynamic_slice,
    Opcode.DYNAMIC_UPDATE_SLICE: _dynamic_update_slice,
    Opcode.CONCATENATE: _concatenate,
    Opcode.PAD: _pad,
    Opcode.REVERSE: _reverse,
    Opcode.IOTA: _iota,
    Opcode.REDUCE: _reduce,
    Opcode.REDUCE_WINDOW: _reduce_window,
    Opcode.DOT: _dot,
    Opcode.CONVOLUTION: _convolution,
}
"""Handlers of data movement, reductions, dot and convolution."""
