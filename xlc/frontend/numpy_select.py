"""Indexing routines for `xlc.numpy` (JAX semantics): nonzero/argwhere/flatnonzero,
compress/extract, choose/select/piecewise, put/put_along_axis/place/fill_diagonal,
ravel_multi_index/unravel_index, indices/ix_, and the diagonal and triangle helpers (diag,
diagonal, trace, diag_indices, tril_indices, mask_indices, ...).

Results whose length depends on the input's values take a static `size=` (and `fill_value=`), as
in JAX: the first `size` entries are kept and missing ones padded. Without `size` such a function
works only outside a trace, where the length is first counted eagerly from the concrete input
(as `jax.numpy` does outside `jit`); inside a trace it is a TraceError asking for `size=`.
Updates (`put`, `place`, ...) are functional: like JAX they need `inplace=False`.
"""
from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlc.frontend import dtypes
from xlc.frontend import lax as _lax
from xlc.frontend import numpy_api as xnp
from xlc.frontend.eager import eager_ok
from xlc.frontend.tracer import Tracer, current_builder, trace_error
from xlc.hlo.shape import PrimitiveType as PT

__all__ = ["nonzero", "flatnonzero", "argwhere", "compress", "extract", "choose", "select",
           "piecewise", "put", "put_along_axis", "place", "ravel_multi_index", "unravel_index",
           "indices", "ix_", "diag", "diagflat", "diagonal", "trace", "diag_indices",
           "diag_indices_from", "fill_diagonal", "mask_indices", "tril_indices", "triu_indices",
           "tril_indices_from", "triu_indices_from"]


# ---- value-dependent sizes ----------------------------------------------------------------------
def static_size(op: str, size: Any, count: Callable[[], Any]) -> int:
    """The static length of `op`'s result: `size` itself, or outside a trace `count()` evaluated
    eagerly on the concrete input; inside a trace without `size` a TraceError asking for it."""
    if size is not None:
        if isinstance(size, (bool, np.bool_, Tracer)) or not hasattr(size, "__index__") \
                or operator.index(size) < 0:
            raise trace_error(f"{op}: size must be a static non-negative int, got {size!r}")
        return operator.index(size)
    if current_builder() is not None:
        raise trace_error(f"{op}: the size of the result depends on the values of the input, "
                          "which are not known while tracing; pass a static size= (and "
                          "optionally fill_value=) to use it under xlc.jit")
    return int(count())


def not_traced(op: str, why: str) -> None:
    """TraceError when called inside a trace (for functions that need concrete values)."""
    if current_builder() is not None:
        raise trace_error(f"{op}: {why}")


def to_bool(x: Any) -> Tracer:
    """x as a bool array (x != 0 unless already bool)."""
    t = xnp.asarray(x)
    return t if t.ptype is PT.PRED else xnp.not_equal(t, 0)


@eager_ok
def flat(x: Any) -> Tracer:
    """x (array-like) flattened to 1-D."""
    return xnp.ravel(xnp.asarray(x))


@eager_ok
def count_true(x: Any) -> Tracer:
    """The number of nonzero entries of x (s32)."""
    return xnp.sum(xnp.astype(to_bool(x), np.int32))


def compact(keep: Tracer, size: int) -> tuple[Tracer, Tracer]:
    """(s32 positions of the True entries of 1-D `keep` in order, cut or padded with 0 to
    `size`; the number of True entries). A scatter to the running count drops the rest."""
    k = xnp.astype(keep, np.int32)
    count = xnp.sum(k)
    if size == 0 or keep.shape[0] == 0:
        return xnp.zeros((size,), np.int32), count
    target = xnp.where(keep, xnp.subtract(xnp.cumsum(k), 1), size)
    out = xnp.zeros((size,), np.int32).at[target].set(_lax.iota(PT.S32, keep.shape[0]))
    return out, count


def padded(values: Tracer, count: Tracer, fill_value: Any, axis: int = 0) -> Tracer:
    """`values` with the entries at or after `count` along `axis` set to `fill_value`."""
    shape = [1] * values.ndim
    shape[axis] = values.shape[axis]
    valid = xnp.less(_lax.broadcasted_iota(PT.S32, shape, axis), count)
    fill = xnp.asarray(fill_value)
    return xnp.where(valid, values, _lax.convert_element_type(fill, values.ptype))


# ---- nonzero ------------------------------------------------------------------------------------
def nonzero(a: Any, *, size: int | None = None,
            fill_value: Any = None) -> tuple[Tracer, ...]:
    """Indices (s32, one array per dim) of the nonzero entries, padded to a static `size`."""
    n = static_size("nonzero", size, lambda: count_true(a))
    return _nonzero(a, n, fill_value)


@eager_ok
def _nonzero(a: Any, size: int, fill_value: Any) -> tuple[Tracer, ...]:
    t = xnp.asarray(a)
    if t.ndim == 0:
        raise trace_error("nonzero: not defined for 0-d arrays; use atleast_1d(x) first")
    pos, count = compact(xnp.ravel(to_bool(t)), size)
    out, stride = [], max(t.size, 1)
    for d in t.shape:
        stride //= max(d, 1)
        out.append(xnp.remainder(xnp.floor_divide(pos, stride), d) if t.size else pos)
    if fill_value is None:
        return tuple(out)
    fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * t.ndim
    if len(fills) != t.ndim or any(np.ndim(f) for f in fills):
        raise trace_error(f"nonzero: fill_value must be a scalar or a tuple of {t.ndim} "
                          f"scalars, got {fill_value!r}")
    valid = xnp.less(_lax.iota(PT.S32, size), count)
    return tuple(xnp.where(valid, o, f) for o, f in zip(out, fills))


def flatnonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> Tracer:
    """Indices of the nonzero entries of the flattened array (see nonzero)."""
    n = static_size("flatnonzero", size, lambda: count_true(a))
    return _nonzero(flat(a), n, fill_value)[0]


def argwhere(a: Any, *, size: int | None = None, fill_value: Any = None) -> Tracer:
    """nonzero's indices as rows of an (n, ndim) array."""
    n = static_size("argwhere", size, lambda: count_true(a))
    return _argwhere(a, n, fill_value)


@eager_ok
def _argwhere(a: Any, size: int, fill_value: Any) -> Tracer:
    t = xnp.asarray(a)
    idx = _nonzero(xnp.reshape(t, (1,)) if t.ndim == 0 else t, size, fill_value)
    out = xnp.stack(idx, axis=-1)
    return out[:, :0] if t.ndim == 0 else out


# ---- compress / extract -------------------------------------------------------------------------
@eager_ok
def _compress_counts(condition: Any, length: int) -> tuple[Tracer, Tracer]:
    c = xnp.ravel(to_bool(condition))
    return count_true(c[:length]), count_true(c[length:])


def compress(condition: Any, a: Any, axis: int | None = None, *, size: int | None = None,
             fill_value: Any = 0, out: None = None) -> Tracer:
    """The slices of `a` along `axis` where the 1-D `condition` holds (static `size`)."""
    if out is not None:
        raise trace_error("compress: the 'out' argument is not supported")
    return _sized_compress("compress", condition, a, axis, size, fill_value)


def _sized_compress(op: str, condition: Any, a: Any, axis: int | None, size: int | None,
                    fill_value: Any) -> Tracer:
    shape = np.shape(a) if not isinstance(a, Tracer) else a.shape
    length = int(np.prod(shape)) if axis is None else shape[axis]

    def count() -> int:
        inside, beyond = _compress_counts(condition, length)
        if int(beyond):
            raise trace_error(f"{op}: condition has True entries beyond the array's length")
        return int(inside)

    n = static_size(op, size, count)
    return _compress(condition, a, axis, n, fill_value)


@eager_ok
def _compress(condition: Any, a: Any, axis: int | None, size: int, fill_value: Any) -> Tracer:
    c = to_bool(condition)
    if c.ndim != 1:
        raise trace_error(f"compress: condition must be 1-D, got {c.aval_text}")
    t = xnp.asarray(a)
    t = xnp.ravel(t) if axis is None else xnp.moveaxis(t, axis, 0)
    c, t = c[:t.shape[0]], t[:c.shape[0]]
    if size > t.shape[0]:
        raise trace_error(f"compress: size must not exceed the length {t.shape[0]} of the "
                          f"compressed axis, got {size}")
    idx, count = compact(c, size)
    out = padded(xnp.take(t, idx, axis=0), count, fill_value)
    return out if axis is None else xnp.moveaxis(out, 0, axis)


def extract(condition: Any, arr: Any, *, size: int | None = None, fill_value: Any = 0) -> Tracer:
    """The entries of ravel(arr) where ravel(condition) is nonzero (static `size`)."""
    return _sized_compress("extract", flat(condition), flat(arr), None, size, fill_value)


# ---- choose / select / piecewise ----------------------------------------------------------------
def _check_bounds(op: str, name: str, index: Any, n: int) -> None:
    """Eager `mode='raise'`: a TraceError when a concrete index is out of [0, n)."""
    not_traced(op, f"mode='raise' needs concrete {name}; use mode='wrap' or mode='clip' under "
                   "xlc.jit")
    arr = np.asarray(index)
    if arr.size and (arr.min() < 0 or arr.max() >= n):
        raise trace_error(f"{op}: invalid entry in {name} (out of range for size {n})")


def choose(a: Any, choices: Any, out: None = None, mode: str = "raise") -> Tracer:
    """choices[a[i]][i] for every i, all broadcast together; mode 'raise', 'wrap' or 'clip'."""
    if out is not None:
        raise trace_error("choose: the 'out' argument is not supported")
    if mode == "raise":
        _check_bounds("choose", "the choice array", a, len(choices))
        mode = "clip"
    return _choose(a, choices, mode)


@eager_ok
def _choose(a: Any, choices: Any, mode: str) -> Tracer:
    idx = xnp.asarray(a)
    if not idx.ptype.is_integer:
        raise trace_error(f"choose: the index array must be integer typed, got {idx.aval_text}")
    cs = [xnp.asarray(c) for c in choices]
    if mode == "wrap":
        idx = xnp.remainder(idx, len(cs))
    elif mode == "clip":
        idx = xnp.clip(idx, 0, len(cs) - 1)
    else:
        raise trace_error(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    idx, *cs = xnp.broadcast_arrays(idx, *cs)
    result = cs[-1]
    for i in reversed(range(len(cs) - 1)):
        result = xnp.where(xnp.equal(idx, i), cs[i], result)
    return result


@eager_ok
def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Tracer:
    """The choice of the first true condition per element, else `default`."""
    if len(condlist) != len(choicelist):
        raise trace_error(f"select: condlist and choicelist must have the same length, got "
                          f"{len(condlist)} and {len(choicelist)}")
    if not len(condlist):
        raise trace_error("select: condlist must be non-empty")
    result = xnp.asarray(default) if not dtypes.is_python_scalar(default) else default
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        result = xnp.where(to_bool(cond), choice, result)
    return xnp.asarray(result)


@eager_ok
def piecewise(x: Any, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Tracer:
    """funclist[i] (a function of x or a value) where condlist[i] holds (the last true one
    wins), funclist[-1] or 0 elsewhere; the result has x's dtype."""
    t = xnp.asarray(x)
    conds = [to_bool(c) for c in condlist]
    nc, nf = len(conds), len(funclist)
    if nf not in (nc, nc + 1):
        raise trace_error(f"piecewise: with {nc} condition(s), either {nc} or {nc + 1} "
                          f"functions are expected; got {nf}")

    def value(f: Any) -> Tracer:
        v = f(t, *args, **kw) if callable(f) else f
        return xnp.broadcast_to(xnp.astype(xnp.asarray(v), t.dtype), t.shape)

    result = value(funclist[-1] if nf == nc + 1 else 0)
    for cond, f in zip(conds, funclist):
        result = xnp.where(cond, value(f), result)
    return result


# ---- functional updates -------------------------------------------------------------------------
def _no_inplace(op: str, inplace: bool) -> None:
    if inplace:
        raise trace_error(f"{op}: xlc arrays are immutable and cannot be modified in place; "
                          "pass inplace=False to get the updated array")


def _tile_to_size(v: Tracer, n: int) -> Tracer:
    """1-D v repeated cyclically to length n."""
    return v if v.shape[0] == n else xnp.take(v, np.arange(n) % v.shape[0])


@eager_ok
def put(a: Any, ind: Any, v: Any, mode: str | None = None, *, inplace: bool = True) -> Tracer:
    """a with a.flat[ind] = v (v repeated cyclically); needs inplace=False, as in JAX."""
    _no_inplace("put", inplace)
    t, i, vals = xnp.asarray(a), flat(ind), flat(v)
    if not t.size or not i.size or not vals.size:
        return t
    if mode == "clip":
        i = xnp.clip(i, 0, t.size - 1)
    elif mode == "wrap":
        i = xnp.remainder(i, t.size)
    elif mode is not None:
        raise trace_error(f"put: mode must be None, 'clip' or 'wrap', got {mode!r}")
    return t.at[unravel_index(i, t.shape)].set(_tile_to_size(vals, i.shape[0]))


@eager_ok
def put_along_axis(arr: Any, indices: Any, values: Any, axis: int | None, inplace: bool = True,
                   *, mode: str | None = None) -> Tracer:
    """arr with values written at `indices` along `axis` (take_along_axis's inverse)."""
    _no_inplace("put_along_axis", inplace)
    t, idx = xnp.asarray(arr), xnp.asarray(indices)
    shape = t.shape
    if axis is None:
        t, axis = xnp.ravel(t), 0
    if idx.ndim != t.ndim:
        raise trace_error(f"put_along_axis: indices {idx.aval_text} must have the rank of "
                          f"{t.aval_text}")
    ax = axis % t.ndim
    if mode == "clip":
        idx = xnp.clip(idx, 0, t.shape[ax] - 1)
    elif mode is not None:
        raise trace_error(f"put_along_axis: mode must be None or 'clip', got {mode!r}")
    entries = []
    for d in range(t.ndim):
        iota_shape = [1] * t.ndim
        iota_shape[d] = t.shape[d]
        entries.append(idx if d == ax else _lax.broadcasted_iota(PT.S32, iota_shape, d))
    return xnp.reshape(t.at[tuple(entries)].set(values), shape)


@eager_ok
def place(arr: Any, mask: Any, vals: Any, *, inplace: bool = True) -> Tracer:
    """arr with the entries where mask holds replaced, in order, by vals (cyclically)."""
    _no_inplace("place", inplace)
    t, m, v = xnp.asarray(arr), xnp.ravel(to_bool(mask)), flat(vals)
    if t.size != m.size:
        raise trace_error(f"place: arr and mask must have the same size, got {t.aval_text} "
                          f"and {m.aval_text}")
    if not v.size:
        raise trace_error("place: cannot place values from an empty array")
    if not t.size:
        return t
    pos = xnp.remainder(xnp.cumsum(xnp.astype(m, np.int32)) - 1, v.size)
    picked = xnp.astype(xnp.take(v, pos), t.dtype)
    return xnp.reshape(xnp.where(m, picked, xnp.ravel(t)), t.shape)


# ---- flat and multi-dimensional indices ---------------------------------------------------------
def ravel_multi_index(multi_index: Sequence[Any], dims: Sequence[int], mode: str = "raise",
                      order: str = "C", *, dtype: Any = None) -> Tracer:
    """Flat indices of the coordinate arrays `multi_index` into an array of shape `dims`."""
    if len(multi_index) != len(dims):
        raise trace_error(f"ravel_multi_index: {len(multi_index)} index arrays for "
                          f"{len(dims)} dims")
    if mode == "raise":
        for i, d in zip(multi_index, dims):
            _check_bounds("ravel_multi_index", "coordinates array", i, int(d))
        mode = "ignore"
    return _ravel_multi_index(tuple(multi_index), tuple(int(d) for d in dims), mode, order,
                              dtype)


@eager_ok
def _ravel_multi_index(multi_index: tuple, dims: tuple[int, ...], mode: str, order: str,
                       dtype: Any) -> Tracer:
    idx = [xnp.asarray(i) for i in multi_index]
    if any(not i.ptype.is_integer for i in idx):
        raise trace_error("ravel_multi_index: only integer indices are permitted")
    dt = np.dtype(dtype) if dtype is not None else xnp.result_type(0, *idx)
    if dt.kind not in "iu":
        raise trace_error(f"ravel_multi_index: dtype {dt} is not an integer type")
    if int(np.prod(dims, dtype=np.int64)) - 1 > np.iinfo(dt).max:
        raise trace_error(f"ravel_multi_index: dtype {dt} cannot hold the flat indices of "
                          f"an array of shape {dims}; pass a wider dtype")
    if mode == "clip":
        idx = [xnp.clip(i, 0, d - 1) for i, d in zip(idx, dims)]
    elif mode == "wrap":
        idx = [xnp.remainder(i, d) for i, d in zip(idx, dims)]
    elif mode != "ignore":
        raise trace_error(f"ravel_multi_index: mode must be 'raise', 'wrap', 'clip' or "
                          f"'ignore', got {mode!r}")
    if order not in ("C", "F"):
        raise trace_error(f"ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    strides = np.cumprod((1,) + dims[:-1]) if order == "F" else \
        np.cumprod((1,) + dims[1:][::-1])[::-1]
    result: Any = xnp.zeros((), dt)
    for i, s in zip(idx, strides):
        result = xnp.add(result, xnp.multiply(xnp.astype(i, dt), int(s)))
    return result


@eager_ok
def unravel_index(indices: Any, shape: Any) -> tuple[Tracer, ...]:
    """Coordinate arrays of flat `indices` into `shape`; out-of-range indices clip, as JAX."""
    rest = xnp.asarray(indices)
    dims = [int(shape)] if np.ndim(shape) == 0 else [int(s) for s in shape]
    out: list[Any] = [None] * len(dims)
    for i in reversed(range(len(dims))):
        rest, out[i] = xnp.floor_divide(rest, dims[i]), xnp.remainder(rest, dims[i])
    high = xnp.greater(rest, 0)
    low = xnp.less(rest, -1) if not rest.ptype.is_unsigned_int else xnp.zeros(rest.shape, bool)
    return tuple(xnp.where(high, s - 1, xnp.where(low, 0, o)) for s, o in zip(dims, out))


# ---- index grids --------------------------------------------------------------------------------
@eager_ok
def indices(dimensions: Sequence[int], dtype: Any = None, sparse: bool = False) -> Any:
    """Index grids: out[i] varies along dim i (s32 by default; sparse: broadcastable)."""
    pt = dtypes.to_ptype(dtype or int)
    dims = tuple(int(d) for d in dimensions)
    out = []
    for i, d in enumerate(dims):
        shape = tuple(d if j == i else 1 for j in range(len(dims))) if sparse else dims
        out.append(_lax.broadcasted_iota(pt, shape, i))
    if sparse:
        return tuple(out)
    return xnp.stack(out) if out else xnp.zeros((0,), pt.dtype)


@eager_ok
def ix_(*args: Any) -> tuple[Tracer, ...]:
    """Open mesh from 1-D integer sequences: arg i gets shape (1, .., len, .., 1)."""
    out = []
    for i, a in enumerate(args):
        t = xnp.asarray(a)
        if t.ndim != 1:
            raise trace_error(f"ix_: arguments must be 1-D, got {t.aval_text}")
        if t.ptype is PT.PRED:
            raise trace_error("ix_: boolean arguments are not supported (their nonzero count "
                              "depends on the values); pass integer indices")
        shape = [1] * len(args)
        shape[i] = t.shape[0]
        out.append(xnp.reshape(xnp.astype(t, np.int32) if not t.size else t, shape))
    return tuple(out)


# ---- diagonals and triangles --------------------------------------------------------------------
@eager_ok
def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tracer:
    """The diagonal `offset` of the (axis1, axis2) planes, as the last axis."""
    t = xnp.asarray(a)
    if t.ndim < 2:
        raise trace_error(f"diagonal: needs at least 2 dims, got {t.aval_text}")
    a1, a2 = axis1 % t.ndim, axis2 % t.ndim
    if a1 == a2:
        raise trace_error(f"diagonal: axis1 and axis2 must differ, got {axis1} and {axis2}")
    k = operator.index(offset)
    t = xnp.transpose(t, [d for d in range(t.ndim) if d not in (a1, a2)] + [a1, a2])
    n = max(0, min(t.shape[-2] + min(k, 0), t.shape[-1] - max(k, 0)))
    i = np.arange(n, dtype=np.int32)
    return t[..., i - min(k, 0), i + max(k, 0)]


@eager_ok
def diag(v: Any, k: int = 0) -> Tracer:
    """The kth diagonal of a 2-D array, or a 2-D array with 1-D `v` on its kth diagonal."""
    t = xnp.asarray(v)
    k = operator.index(k)
    if t.ndim == 2:
        return diagonal(t, k)
    if t.ndim != 1:
        raise trace_error(f"diag: needs a 1-D or 2-D array, got {t.aval_text}")
    n = t.shape[0] + abs(k)
    col = xnp.pad(t, (max(0, -k), max(0, k)))[:, None]
    return xnp.where(xnp.eye(n, k=k, dtype=bool), col, xnp.zeros((), t.dtype))


@eager_ok
def diagflat(v: Any, k: int = 0) -> Tracer:
    """A 2-D array with the flattened `v` on its kth diagonal."""
    return diag(flat(v), k)


@eager_ok
def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
          out: None = None) -> Tracer:
    """Sum along the diagonal `offset` of the (axis1, axis2) planes."""
    if out is not None:
        raise trace_error("trace: the 'out' argument is not supported")
    return xnp.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


@eager_ok
def diag_indices(n: int, ndim: int = 2) -> tuple[Tracer, ...]:
    """Index arrays (s32) reaching the main diagonal of an n x ... x n array."""
    return (xnp.arange(int(n)),) * int(ndim)


def _square(op: str, arr: Any) -> Tracer:
    t = xnp.asarray(arr)
    if t.ndim < 2 or any(d != t.shape[0] for d in t.shape):
        raise trace_error(f"{op}: needs an array of at least 2 dims, all of equal length, got "
                          f"{t.aval_text}")
    return t


@eager_ok
def diag_indices_from(arr: Any) -> tuple[Tracer, ...]:
    """diag_indices for the (square) shape of arr."""
    t = _square("diag_indices_from", arr)
    return diag_indices(t.shape[0], t.ndim)


@eager_ok
def fill_diagonal(a: Any, val: Any, wrap: bool = False, *, inplace: bool = True) -> Tracer:
    """a with its main diagonal set to val (repeated cyclically); needs inplace=False."""
    _no_inplace("fill_diagonal", inplace)
    if wrap:
        raise trace_error("fill_diagonal: wrap=True is not supported")
    t = xnp.asarray(a)
    if t.ndim > 2:
        _square("fill_diagonal", t)
    elif t.ndim < 2:
        raise trace_error(f"fill_diagonal: needs at least 2 dims, got {t.aval_text}")
    n = min(t.shape)
    v = xnp.asarray(val)
    return t.at[diag_indices(n, t.ndim)].set(v if v.ndim == 0 else _tile_to_size(flat(v), n))


def _tri_indices(n: int, k: int, m: int | None, lower: bool) -> tuple[Tracer, Tracer]:
    rows, cols = (np.tril_indices if lower else np.triu_indices)(int(n), int(k), m)
    return xnp.asarray(rows.astype(np.int32)), xnp.asarray(cols.astype(np.int32))


@eager_ok
def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Tracer, Tracer]:
    """(rows, cols) of the entries at and below diagonal k of an n x m array."""
    return _tri_indices(n, k, m, True)


@eager_ok
def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Tracer, Tracer]:
    """(rows, cols) of the entries at and above diagonal k of an n x m array."""
    return _tri_indices(n, k, m, False)


def _shape2(op: str, arr: Any) -> tuple[int, ...]:
    shape = tuple(arr.shape) if hasattr(arr, "shape") else np.shape(arr)
    if len(shape) != 2:
        raise trace_error(f"{op}: needs a 2-D array, got shape {shape}")
    return shape


@eager_ok
def tril_indices_from(arr: Any, k: int = 0) -> tuple[Tracer, Tracer]:
    """tril_indices for the shape of the 2-D arr."""
    n, m = _shape2("tril_indices_from", arr)
    return _tri_indices(n, k, m, True)


@eager_ok
def triu_indices_from(arr: Any, k: int = 0) -> tuple[Tracer, Tracer]:
    """triu_indices for the shape of the 2-D arr."""
    n, m = _shape2("triu_indices_from", arr)
    return _tri_indices(n, k, m, False)


def mask_indices(n: int, mask_func: Callable[[Any, int], Any], k: int = 0, *,
                 size: int | None = None) -> tuple[Tracer, Tracer]:
    """nonzero(mask_func(ones((n, n)), k)), e.g. mask_func=triu (static `size` when traced)."""
    def count() -> Any:
        return count_true(mask_func(np.ones((n, n), np.float32), k))

    s = static_size("mask_indices", size, count)
    return _mask_indices(n, mask_func, k, s)


@eager_ok
def _mask_indices(n: int, mask_func: Callable[[Any, int], Any], k: int,
                  size: int) -> tuple[Tracer, Tracer]:
    i, j = _nonzero(mask_func(xnp.ones((n, n)), k), size, None)
    return i, j
