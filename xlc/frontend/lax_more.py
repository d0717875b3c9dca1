"""More of `jax.lax`, re-exported by `xlc.lax`: shape helpers (`broadcast`, `expand_dims`,
`squeeze`, `collapse`, `full`, `split`, `stack`, `tile`, ...), the single-op reductions
(`reduce_sum`, ..., `argmax`, `argmin`), exact `approx_max_k` / `approx_min_k`, `select_n`,
`sort_key_val`, `batch_matmul`, `ragged_dot`, `dtype`, and the `Precision` names.
Elementwise functions are in `lax_elementwise.py`.

Semantics follow `jax.lax` (static Python ints for sizes, axes and indices).
"""
from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from xlc.frontend import dtypes
from xlc.frontend import lax as _lax
from xlc.frontend.eager import eager_ok
from xlc.frontend.tracer import Tracer, as_tracer, trace_error, type_of
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType as PT

__all__ = [
    "broadcast", "broadcast_to_rank", "broadcast_shapes", "broadcast_like", "expand_dims",
    "squeeze", "collapse", "full", "full_like", "empty", "index_in_dim", "slice_in_dim",
    "index_take", "split", "stack", "unstack", "tile",
    "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and", "reduce_or",
    "reduce_xor", "argmax", "argmin", "approx_max_k", "approx_min_k", "select_n",
    "sort_key_val", "batch_matmul", "ragged_dot", "dtype", "Precision", "PrecisionLike",
    "DotDimensionNumbers",
]


class Precision(enum.Enum):
    """JAX's matmul / convolution precision names. A dot's precision becomes its
    `operand_precision` (xlc.hlo.precision): on the GPU f32 dots run on TF32 tensor cores at
    DEFAULT and HIGH, in full FP32 at HIGHEST; the CPU computes them in FP32 at every level.
    Convolutions accept it and compute in the operand type."""

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2


PrecisionLike = str | Precision | tuple[str, str] | tuple[Precision, Precision] | None
DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]],
                            tuple[Sequence[int], Sequence[int]]]


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


def _axis(axis: int, ndim: int, op: str) -> int:
    if not -ndim <= int(axis) < ndim:
        raise trace_error(f"{op}: axis {axis} is out of bounds for an array of rank {ndim}")
    return int(axis) % ndim


def _shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


# ---- shapes -----------------------------------------------------------------------------------
@eager_ok
def broadcast(operand: Any, sizes: Sequence[int]) -> Tracer:
    """`operand` with new leading dims `sizes` (jax.lax.broadcast)."""
    x = as_tracer(operand)
    lead = _shape(sizes)
    return _lax.broadcast_in_dim(x, lead + x.shape, tuple(range(len(lead), len(lead) + x.ndim)))


@eager_ok
def broadcast_to_rank(x: Any, rank: int) -> Tracer:
    """`x` with leading size-1 dims added up to rank `rank`."""
    t = as_tracer(x)
    if t.ndim > rank:
        raise trace_error(f"broadcast_to_rank: {t.aval_text} has rank above {rank}")
    return broadcast(t, (1,) * (int(rank) - t.ndim))


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The numpy-style broadcast of `shapes` (trailing dims align, size 1 stretches)."""
    return _np().broadcast_shapes(*[_shape(s) for s in shapes])


@eager_ok
def broadcast_like(arr: Any, like_arr: Any) -> Tracer:
    """`arr` broadcast (numpy rules) to the shape of `like_arr`."""
    return _np().broadcast_to(arr, as_tracer(like_arr).shape)


@eager_ok
def expand_dims(array: Any, dimensions: Sequence[int]) -> Tracer:
    """`array` with size-1 dims inserted at `dimensions` (positions in the result; negative
    ones count from the result's end)."""
    x = as_tracer(array)
    n = x.ndim + len(dimensions)
    dims = sorted({_axis(d, n, "expand_dims") for d in dimensions})
    if len(dims) != len(dimensions):
        raise trace_error(f"expand_dims: repeated dimensions {list(dimensions)}")
    shape = list(x.shape)
    for d in dims:
        shape.insert(d, 1)
    return _lax.reshape(x, shape)


@eager_ok
def squeeze(array: Any, dimensions: Sequence[int]) -> Tracer:
    """`array` without the size-1 dims `dimensions`."""
    x = as_tracer(array)
    dims = {_axis(d, x.ndim, "squeeze") for d in dimensions}
    bad = [d for d in sorted(dims) if x.shape[d] != 1]
    if bad:
        raise trace_error(f"squeeze: dimensions {bad} of {x.aval_text} do not have size 1")
    return _lax.reshape(x, [s for i, s in enumerate(x.shape) if i not in dims])


@eager_ok
def collapse(operand: Any, start_dimension: int, stop_dimension: int | None = None) -> Tracer:
    """`operand` with dims [start_dimension, stop_dimension) merged into one (row-major)."""
    x = as_tracer(operand)
    lo, hi, _ = slice(start_dimension, stop_dimension).indices(x.ndim)
    if hi < lo:
        raise trace_error(f"collapse: invalid dimension range [{start_dimension}:"
                          f"{stop_dimension}] for {x.aval_text}")
    return _lax.reshape(x, x.shape[:lo] + (math.prod(x.shape[lo:hi]),) + x.shape[hi:])


@eager_ok
def full(shape: Any, fill_value: Any, dtype: Any = None) -> Tracer:
    """An array of `shape` filled with the scalar `fill_value` (of `dtype`, else the value's
    own type; a Python scalar stays weakly typed)."""
    pt = dtypes.to_ptype(dtype) if dtype is not None else None
    v = as_tracer(fill_value, pt)
    if v.ndim:
        raise trace_error(f"full: fill_value must be a scalar, got {v.aval_text}")
    out = _lax.broadcast_in_dim(v, _shape(shape), ())
    return Tracer(out.inst, out.builder, v.weak_type and pt is None)


@eager_ok
def full_like(x: Any, fill_value: Any, dtype: Any = None, shape: Any = None) -> Tracer:
    """`full` with `x`'s shape and dtype unless given (weakly typed when `x` is and no dtype
    is given)."""
    pt, weak = type_of(x)
    dims = np.shape(x) if not isinstance(x, Tracer) else x.shape
    out = full(dims if shape is None else shape, as_tracer(fill_value, dtypes.to_ptype(
        dtype) if dtype is not None else pt))
    return Tracer(out.inst, out.builder, weak and dtype is None)


@eager_ok
def empty(shape: Any, dtype: Any) -> Tracer:
    """An array of `shape` and `dtype` whose values do not matter (zeros here)."""
    return full(shape, 0, dtype)


@eager_ok
def index_in_dim(operand: Any, index: int, axis: int = 0, keepdims: bool = True) -> Tracer:
    """Element `index` (static; negative counts from the end) of `operand` along `axis`."""
    x = as_tracer(operand)
    ax = _axis(axis, x.ndim, "index_in_dim")
    n = x.shape[ax]
    if not -n <= int(index) < n:
        raise trace_error(f"index_in_dim: index {index} is out of bounds for axis {axis} of "
                          f"{x.aval_text}")
    i = int(index) % n
    y = slice_in_dim(x, i, i + 1, 1, ax)
    return y if keepdims else _lax.reshape(y, x.shape[:ax] + x.shape[ax + 1:])


@eager_ok
def slice_in_dim(operand: Any, start_index: int | None, limit_index: int | None,
                 stride: int = 1, axis: int = 0) -> Tracer:
    """`operand[start_index:limit_index:stride]` along `axis` (static; None means the ends,
    a negative index counts from the end)."""
    x = as_tracer(operand)
    ax = _axis(axis, x.ndim, "slice_in_dim")
    n = x.shape[ax]
    lo = 0 if start_index is None else int(start_index)
    hi = n if limit_index is None else int(limit_index)
    lo, hi = lo + n if lo < 0 else lo, hi + n if hi < 0 else hi
    starts, limits, strides = [0] * x.ndim, list(x.shape), [1] * x.ndim
    starts[ax], limits[ax], strides[ax] = lo, hi, int(stride)
    return _lax.slice(x, starts, limits, strides)


@eager_ok
def index_take(src: Any, idxs: Sequence[Any], axes: Sequence[int]) -> Tracer:
    """`src` gathered at the points (idxs[0][k], idxs[1][k], ...) of dims `axes`: the result
    has the points first, then the dims not in `axes`. Indices wrap modulo the dim size."""
    x = as_tracer(src)
    axes_t = tuple(_axis(a, x.ndim, "index_take") for a in axes)
    if len(idxs) != len(axes_t):
        raise trace_error(f"index_take: {len(idxs)} index arrays for {len(axes_t)} axes")
    cols = []
    for i, a in zip(idxs, axes_t):
        t = as_tracer(i)
        if not t.ptype.is_integer or t.ndim != 1:
            raise trace_error(f"index_take: indices must be 1-D integer arrays, got "
                              f"{t.aval_text}")
        t = _np().remainder(t, as_tracer(x.shape[a], t.ptype))
        cols.append(_lax.reshape(t, (t.shape[0], 1)))
    pt = dtypes.result_type(*[(c.ptype, False) for c in cols])[0]
    indices = _lax.concatenate([_lax.convert_element_type(c, pt) for c in cols], 1)
    sizes = [1 if d in axes_t else s for d, s in enumerate(x.shape)]
    offset = tuple(range(1, x.ndim - len(axes_t) + 1))
    return _lax.gather(x, indices, offset, axes_t, axes_t, 1, sizes)


@eager_ok
def split(operand: Any, sizes: Sequence[int], axis: int = 0) -> list[Tracer]:
    """Consecutive pieces of `operand` along `axis` of the given `sizes` (summing to the
    dim's size)."""
    x = as_tracer(operand)
    ax = _axis(axis, x.ndim, "split")
    sz = _shape(sizes)
    if sum(sz) != x.shape[ax] or any(s < 0 for s in sz):
        raise trace_error(f"split: sizes {list(sz)} must be non-negative and sum to "
                          f"{x.shape[ax]}, the size of axis {axis} of {x.aval_text}")
    out, at = [], 0
    for s in sz:
        out.append(slice_in_dim(x, at, at + s, 1, ax))
        at += s
    return out


@eager_ok
def stack(operands: Sequence[Any], axis: int = 0) -> Tracer:
    """The arrays (of one shape and dtype) joined along a new dim `axis`."""
    xs = [as_tracer(o) for o in operands]
    if not xs:
        raise trace_error("stack: needs at least one array")
    if any(x.shape != xs[0].shape for x in xs):
        raise trace_error("stack: arrays must have one shape, got "
                          + ", ".join(x.aval_text for x in xs))
    ax = _axis(axis, xs[0].ndim + 1, "stack")
    return _lax.concatenate([expand_dims(x, (ax,)) for x in xs], ax)


@eager_ok
def unstack(x: Any, axis: int = 0) -> tuple[Tracer, ...]:
    """The slices of `x` along `axis`, that dim removed."""
    t = as_tracer(x)
    ax = _axis(axis, t.ndim, "unstack")
    return tuple(index_in_dim(t, i, ax, keepdims=False) for i in range(t.shape[ax]))


@eager_ok
def tile(operand: Any, reps: Sequence[int]) -> Tracer:
    """`operand` repeated reps[i] times along dim i (len(reps) == rank)."""
    x = as_tracer(operand)
    r = _shape(reps)
    if len(r) != x.ndim:
        raise trace_error(f"tile: reps {list(r)} must have one entry per dim of {x.aval_text}")
    inter = tuple(v for pair in zip(r, x.shape) for v in pair)
    y = _lax.broadcast_in_dim(x, inter, tuple(range(1, 2 * x.ndim, 2)))
    return _lax.reshape(y, tuple(a * b for a, b in zip(r, x.shape)))


# ---- reductions -------------------------------------------------------------------------------
def _reduce(operand: Any, axes: Sequence[int], opcode: Opcode, init: Any, op: str) -> Tracer:
    x = as_tracer(operand)
    dims = tuple(_axis(a, x.ndim, op) for a in axes) if x.ndim else ()
    value = init(x.ptype) if callable(init) else init
    return _lax.reduce(x, np.asarray(value, x.dtype), opcode, dims)


def _lowest(pt: PT) -> Any:
    if pt is PT.PRED:
        return False
    return -np.inf if pt.is_float else np.iinfo(pt.dtype).min


def _highest(pt: PT) -> Any:
    if pt is PT.PRED:
        return True
    return np.inf if pt.is_float else np.iinfo(pt.dtype).max


def _all_ones(pt: PT) -> Any:
    return True if pt is PT.PRED else np.asarray(-1).astype(pt.dtype)


def _bitwise_operand(op: str, operand: Any) -> Tracer:
    x = as_tracer(operand)
    if not (x.ptype.is_integer or x.ptype is PT.PRED):
        raise trace_error(f"{op}: needs an integer or bool operand, got {x.aval_text}")
    return x


@eager_ok
def reduce_sum(operand: Any, axes: Sequence[int]) -> Tracer:
    """The sum over `axes`."""
    return _reduce(operand, axes, Opcode.ADD, 0, "reduce_sum")


@eager_ok
def reduce_prod(operand: Any, axes: Sequence[int]) -> Tracer:
    """The product over `axes`."""
    return _reduce(operand, axes, Opcode.MULTIPLY, 1, "reduce_prod")


@eager_ok
def reduce_max(operand: Any, axes: Sequence[int]) -> Tracer:
    """The maximum over `axes` (NaN if any is NaN)."""
    return _reduce(operand, axes, Opcode.MAXIMUM, _lowest, "reduce_max")


@eager_ok
def reduce_min(operand: Any, axes: Sequence[int]) -> Tracer:
    """The minimum over `axes` (NaN if any is NaN)."""
    return _reduce(operand, axes, Opcode.MINIMUM, _highest, "reduce_min")


@eager_ok
def reduce_and(operand: Any, axes: Sequence[int]) -> Tracer:
    """Logical / bitwise and over `axes`."""
    x = _bitwise_operand("reduce_and", operand)
    return _reduce(x, axes, Opcode.AND, _all_ones, "reduce_and")


@eager_ok
def reduce_or(operand: Any, axes: Sequence[int]) -> Tracer:
    """Logical / bitwise or over `axes`."""
    x = _bitwise_operand("reduce_or", operand)
    return _reduce(x, axes, Opcode.OR, 0, "reduce_or")


@eager_ok
def reduce_xor(operand: Any, axes: Sequence[int]) -> Tracer:
    """Logical / bitwise xor over `axes`."""
    x = _bitwise_operand("reduce_xor", operand)
    return _reduce(x, axes, Opcode.XOR, 0, "reduce_xor")


def _arg_reduce(operand: Any, axis: int, index_dtype: Any, greater: bool, op: str) -> Tracer:
    """The index of the first extreme element along `axis`; a NaN counts as more extreme than
    any number (so the first NaN wins)."""
    xnp = _np()
    x = as_tracer(operand)
    ax = _axis(axis, x.ndim, op)
    ipt = dtypes.to_ptype(index_dtype)
    if not ipt.is_integer:
        raise trace_error(f"{op}: index_dtype must be an integer type, got {index_dtype!r}")
    if x.shape[ax] == 0:
        raise trace_error(f"{op}: axis {axis} of {x.aval_text} is empty")
    idx = _lax.broadcasted_iota(ipt, x.shape, ax)
    is_float = x.ptype.is_float

    def reducer(av: Tracer, ai: Tracer, bv: Tracer, bi: Tracer) -> tuple[Tracer, Tracer]:
        if x.ptype is PT.PRED:
            better = xnp.logical_and(av, xnp.logical_not(bv)) if greater else \
                xnp.logical_and(bv, xnp.logical_not(av))
            tie = xnp.equal(av, bv)
        else:
            better = xnp.greater(av, bv) if greater else xnp.less(av, bv)
            tie = xnp.equal(av, bv)
        if is_float:
            a_nan, b_nan = xnp.isnan(av), xnp.isnan(bv)
            better = xnp.logical_or(better, xnp.logical_and(a_nan, xnp.logical_not(b_nan)))
            tie = xnp.logical_or(tie, xnp.logical_and(a_nan, b_nan))
        pick_a = xnp.logical_or(better, xnp.logical_and(tie, xnp.less(ai, bi)))
        return _lax.select(pick_a, av, bv), _lax.select(pick_a, ai, bi)

    init = _lowest(x.ptype) if greater else _highest(x.ptype)
    _, r = _lax.reduce((x, idx), (np.asarray(init, x.dtype), np.asarray(0, ipt.dtype)),
                       reducer, (ax,))
    return r


@eager_ok
def argmax(operand: Any, axis: int, index_dtype: Any) -> Tracer:
    """The index (of `index_dtype`) of the maximum along `axis`; ties and NaNs: the first."""
    return _arg_reduce(operand, axis, index_dtype, True, "argmax")


@eager_ok
def argmin(operand: Any, axis: int, index_dtype: Any) -> Tracer:
    """The index (of `index_dtype`) of the minimum along `axis`; ties and NaNs: the first."""
    return _arg_reduce(operand, axis, index_dtype, False, "argmin")


def _approx_k(operand: Any, k: int, dim: int, largest: bool, op: str
              ) -> tuple[Tracer, Tracer]:
    xnp = _np()
    x = as_tracer(operand)
    ax = _axis(dim, x.ndim, op)
    perm = [d for d in range(x.ndim) if d != ax] + [ax]
    t = _lax.transpose(x, perm)
    if not largest:  # order-reversing maps: negation, or bitwise not for unsigned ints
        t = xnp.invert(t) if t.ptype.is_unsigned_int else xnp.negative(t)
    vals, idx = _lax.top_k(t, k)
    if not largest:
        vals = xnp.invert(vals) if vals.ptype.is_unsigned_int else xnp.negative(vals)
    back = [perm.index(d) for d in range(x.ndim)]
    return _lax.transpose(vals, back), _lax.transpose(idx, back)


@eager_ok
def approx_max_k(operand: Any, k: int, reduction_dimension: int = -1,
                 recall_target: float = 0.95, reduction_input_size_override: int = -1,
                 aggregate_to_topk: bool = True) -> tuple[Tracer, Tracer]:
    """The k largest values along `reduction_dimension` and their s32 indices: exact (what
    JAX computes on the CPU too); the recall and aggregation arguments are accepted."""
    return _approx_k(operand, k, reduction_dimension, True, "approx_max_k")


@eager_ok
def approx_min_k(operand: Any, k: int, reduction_dimension: int = -1,
                 recall_target: float = 0.95, reduction_input_size_override: int = -1,
                 aggregate_to_topk: bool = True) -> tuple[Tracer, Tracer]:
    """The k smallest values along `reduction_dimension` and their s32 indices (exact)."""
    return _approx_k(operand, k, reduction_dimension, False, "approx_min_k")


# ---- selection, sorting, matmul ------------------------------------------------------------
@eager_ok
def select_n(which: Any, *cases: Any) -> Tracer:
    """cases[which] elementwise: `which` is bool (False picks cases[0]) or an integer in
    [0, len(cases)), a scalar or of the cases' shape."""
    if not cases:
        raise trace_error("select_n: needs at least one case")
    w = as_tracer(which)
    cs = _lax._same_type(*cases)
    if any(c.shape != cs[0].shape for c in cs):
        raise trace_error("select_n: cases must have one shape, got "
                          + ", ".join(c.aval_text for c in cs))
    if w.ptype is PT.PRED:
        if len(cs) > 2:
            raise trace_error(f"select_n: a bool selector picks from at most 2 cases, got "
                              f"{len(cs)}")
        return cs[0] if len(cs) == 1 else _lax.select(w, cs[1], cs[0])
    if not w.ptype.is_integer:
        raise trace_error(f"select_n: which must be bool or integer, got {w.aval_text}")
    if w.ndim and w.shape != cs[0].shape:
        raise trace_error(f"select_n: which {w.aval_text} must be a scalar or of the cases' "
                          f"shape {cs[0].aval_text}")

    def pick(lo: int, hi: int) -> Tracer:
        if hi - lo == 1:
            return cs[lo]
        mid = (lo + hi) // 2
        return _lax.select(_np().less(w, as_tracer(mid, w.ptype)), pick(lo, mid), pick(mid, hi))

    return pick(0, len(cs))


@eager_ok
def sort_key_val(keys: Any, values: Any, dimension: int = -1, is_stable: bool = True
                 ) -> tuple[Tracer, Tracer]:
    """`keys` sorted along `dimension` and `values` permuted alongside."""
    k, v = _lax.sort((keys, values), dimension, is_stable, num_keys=1)
    return k, v


@eager_ok
def batch_matmul(lhs: Any, rhs: Any, precision: Any = None) -> Tracer:
    """Matrix products over the leading (batch) dims of two arrays of equal rank >= 2."""
    a, b = as_tracer(lhs), as_tracer(rhs)
    if min(a.ndim, b.ndim) < 2 or a.ndim != b.ndim:
        raise trace_error(f"batch_matmul: needs arrays of equal rank >= 2, got {a.aval_text} "
                          f"and {b.aval_text}")
    batch = tuple(range(a.ndim - 2))
    return _lax.dot_general(a, b, (((a.ndim - 1,), (b.ndim - 2,)), (batch, batch)), precision)


@eager_ok
def ragged_dot(lhs: Any, rhs: Any, group_sizes: Any, precision: Any = None,
               preferred_element_type: Any = None, group_offset: Any = None) -> Tracer:
    """lhs [m, k] times rhs [g, k, n] where consecutive row groups of lhs, of sizes
    `group_sizes` [g], use their own rhs[i]; rows past the groups give zeros. Computed as all
    g products, each masked to its rows (g times the work of one matmul)."""
    xnp = _np()
    a, b, sizes = as_tracer(lhs), as_tracer(rhs), as_tracer(group_sizes)
    if group_offset is not None:
        raise trace_error("ragged_dot: group_offset is not supported")
    if a.ndim != 2 or b.ndim != 3 or sizes.shape != (b.shape[0],) or a.shape[1] != b.shape[1]:
        raise trace_error(f"ragged_dot: needs lhs [m, k], rhs [g, k, n] and group_sizes [g], "
                          f"got {a.aval_text}, {b.aval_text} and {sizes.aval_text}")
    prods = _lax.dot_general(a, b, (((1,), (1,)), ((), ())), precision,
                             preferred_element_type=preferred_element_type)
    ends = _lax.cumsum(sizes)
    rows = _lax.broadcasted_iota(sizes.ptype, (a.shape[0], b.shape[0]), 0)
    ends_b = _lax.broadcast_in_dim(ends, rows.shape, (1,))
    mask = xnp.logical_and(rows >= ends_b - _lax.broadcast_in_dim(sizes, rows.shape, (1,)),
                           rows < ends_b)
    mask = _lax.broadcast_in_dim(mask, prods.shape, (0, 1))
    return reduce_sum(_lax.select(mask, prods, xnp.zeros_like(prods)), (1,))


def dtype(x: Any) -> np.dtype:
    """The dtype of a value or type (Python scalars and types map to xlc's defaults: int ->
    int32, float -> float32)."""
    if x is None:
        raise TypeError("dtype: invalid argument None")
    if isinstance(x, Tracer):
        return x.dtype
    if isinstance(x, type) or isinstance(x, (str, np.dtype)):
        return np.dtype(dtypes.to_ptype(x).dtype)
    if dtypes.is_python_scalar(x):
        return np.dtype(dtypes.python_scalar_type(x).dtype)
    return np.dtype(dtypes.to_ptype(np.asarray(x).dtype).dtype)
