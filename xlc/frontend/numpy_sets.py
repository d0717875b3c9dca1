"""Set routines, sorting helpers and bit packing for `xlc.numpy` (JAX semantics): unique and
its array-API variants, isin, intersect1d/union1d/setdiff1d/setxor1d, array_equal/array_equiv,
lexsort, partition/argpartition, sort_complex, packbits/unpackbits and trim_zeros.

Unique values are found by sorting (rows compared lexicographically for `axis=`) and marking the
first entry of each run of equal values; set operations keep the sorted candidates that pass an
all-pairs membership test (`isin`, like JAX's default method). Results whose length depends on
the values take a static `size=` and `fill_value=` as in JAX (see `numpy_select`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from xlc.errors import TraceError
from xlc.frontend import lax as _lax
from xlc.frontend import numpy_api as xnp
from xlc.frontend.eager import eager_ok
from xlc.frontend.numpy_select import (
    compact,
    count_true,
    flat,
    not_traced,
    padded,
    static_size,
    to_bool,
)
from xlc.frontend.tracer import Tracer, trace_error
from xlc.hlo.shape import PrimitiveType as PT

__all__ = ["array_equal", "array_equiv", "isin", "unique", "unique_values", "unique_counts",
           "unique_inverse", "unique_all", "intersect1d", "union1d", "setdiff1d", "setxor1d",
           "lexsort", "partition", "argpartition", "sort_complex", "packbits", "unpackbits",
           "trim_zeros"]


@eager_ok
def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> Tracer:
    """True when both arrays have the same shape and elements (NaNs equal if equal_nan)."""
    a, b = xnp.asarray(a1), xnp.asarray(a2)
    if a.shape != b.shape:
        return xnp.asarray(np.bool_(False))
    eq = xnp.equal(a, b)
    if equal_nan:
        eq = xnp.logical_or(eq, xnp.logical_and(xnp.isnan(a), xnp.isnan(b)))
    return xnp.all(eq)


@eager_ok
def array_equiv(a1: Any, a2: Any) -> Tracer:
    """True when the arrays broadcast together and are equal everywhere."""
    a, b = xnp.asarray(a1), xnp.asarray(a2)
    try:
        xnp.broadcast_shapes(a.shape, b.shape)
    except TraceError:
        return xnp.asarray(np.bool_(False))
    return xnp.all(xnp.equal(a, b))


def _member(e: Tracer, t: Tracer) -> Tracer:
    """For each entry of 1-D e, whether it equals some entry of 1-D t (all pairs compared)."""
    if not e.size or not t.size:
        return xnp.zeros(e.shape, bool)
    return xnp.any(xnp.equal(e[:, None], t[None, :]), axis=1)


@eager_ok
def isin(element: Any, test_elements: Any, assume_unique: bool = False, invert: bool = False,
         *, method: str = "auto") -> Tracer:
    """Whether each entry of `element` occurs in `test_elements` (element's shape)."""
    if method not in ("auto", "compare_all", "sort", "binary_search"):
        raise trace_error(f"isin: unknown method {method!r}")
    e, t = xnp.promote(xnp.asarray(element), xnp.asarray(test_elements))
    hit = xnp.reshape(_member(xnp.ravel(e), xnp.ravel(t)), e.shape)
    return xnp.logical_not(hit) if invert else hit


# ---- unique -------------------------------------------------------------------------------------
class UniqueAllResult(NamedTuple):
    """unique_all's result."""

    values: Any
    indices: Any
    inverse_indices: Any
    counts: Any


class UniqueCountsResult(NamedTuple):
    """unique_counts's result."""

    values: Any
    counts: Any


class UniqueInverseResult(NamedTuple):
    """unique_inverse's result."""

    values: Any
    inverse_indices: Any


def _sort_keys(col: Tracer) -> list[Tracer]:
    return [xnp.real(col), xnp.imag(col)] if col.ptype.is_complex else [col]


def _sorted_runs(x: Tracer, equal_nan: bool) -> tuple[Tracer, Tracer, Tracer]:
    """(x sorted along axis 0, rows compared lexicographically; True at the first row of each
    run of equal rows; the stable sorting permutation)."""
    n = x.shape[0]
    inner = int(np.prod(x.shape[1:], dtype=np.int64))
    rows = xnp.reshape(x, (n, inner))
    perm = _lax.iota(PT.S32, n)
    if n == 0:
        return x, xnp.zeros((0,), bool), perm
    if inner:
        keys = [k for c in range(inner) for k in _sort_keys(rows[:, c])]
        perm = _lax.sort((*keys, perm), 0, is_stable=True, num_keys=len(keys))[-1]
    aux = xnp.take(x, perm, axis=0)
    a = xnp.take(rows, perm, axis=0)
    neq = xnp.not_equal(a[1:], a[:-1])
    if equal_nan and (x.ptype.is_float or x.ptype.is_complex):
        both_nan = xnp.logical_and(xnp.isnan(a[1:]), xnp.isnan(a[:-1]))
        neq = xnp.logical_and(neq, xnp.logical_not(both_nan))
    first = xnp.concatenate([xnp.ones((1,), bool), xnp.any(neq, axis=1)])
    return aux, first, perm


def _along(ar: Any, axis: int | None) -> tuple[Tracer, int | None]:
    t = xnp.asarray(ar)
    if axis is None:
        return xnp.ravel(t), None
    if not -t.ndim <= axis < t.ndim:
        raise trace_error(f"unique: axis {axis} is out of bounds for {t.aval_text}")
    return xnp.moveaxis(t, axis, 0), axis % t.ndim


@eager_ok
def _count_unique(ar: Any, axis: int | None, equal_nan: bool) -> Tracer:
    return count_true(_sorted_runs(_along(ar, axis)[0], equal_nan)[1])


def unique(ar: Any, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: int | None = None, *, equal_nan: bool = True,
           size: int | None = None, fill_value: Any = None, sorted: bool = True) -> Any:
    """The sorted unique values (or rows/slices along `axis`) with optional first indices,
    inverse and counts; static `size` pads with fill_value (default: the smallest value)."""
    return _unique_op("unique", ar, return_index, return_inverse, return_counts, axis,
                      equal_nan, size, fill_value)


def _unique_op(op: str, ar: Any, return_index: bool, return_inverse: bool, return_counts: bool,
               axis: int | None, equal_nan: bool, size: int | None, fill_value: Any) -> Any:
    n = static_size(op, size, lambda: _count_unique(ar, axis, equal_nan))
    return _unique(ar, return_index, return_inverse, return_counts, axis, equal_nan, n,
                   fill_value)


@eager_ok
def _unique(ar: Any, return_index: bool, return_inverse: bool, return_counts: bool,
            axis: int | None, equal_nan: bool, size: int, fill_value: Any) -> Any:
    t = xnp.asarray(ar)
    x, ax = _along(t, axis)
    n = x.shape[0]
    if n == 0 and size and fill_value is None:
        raise trace_error("unique: an empty input with a nonzero size needs a fill_value")
    aux, first, perm = _sorted_runs(x, equal_nan)
    ind, count = compact(first, size)
    if n:
        values = xnp.take(aux, ind, axis=0)
        values = values if fill_value is None else padded(values, count, fill_value)
    else:
        values = xnp.full((size,) + x.shape[1:], fill_value, x.dtype)
    out = [values if ax is None else xnp.moveaxis(values, 0, ax)]
    if return_index:
        out.append(xnp.take(perm, ind) if n else xnp.zeros((size,), np.int32))
    if return_inverse:
        runs = xnp.cumsum(xnp.astype(first, np.int32)) - 1
        inv = xnp.zeros((n,), np.int32).at[perm].set(runs) if n else xnp.zeros((0,), np.int32)
        out.append(xnp.reshape(inv, t.shape) if ax is None else inv)
    if return_counts:
        starts = padded(compact(first, size + 1)[0], count, n)
        out.append(starts[1:] - starts[:-1])
    return out[0] if len(out) == 1 else tuple(out)


def unique_values(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique values (every NaN distinct)."""
    return _unique_op("unique_values", x, False, False, False, None, False, size, fill_value)


def unique_counts(x: Any, /, *, size: int | None = None,
                  fill_value: Any = None) -> UniqueCountsResult:
    """(values, counts) of the unique values."""
    return UniqueCountsResult(*_unique_op("unique_counts", x, False, False, True, None, False,
                                          size, fill_value))


def unique_inverse(x: Any, /, *, size: int | None = None,
                   fill_value: Any = None) -> UniqueInverseResult:
    """(values, inverse_indices) with values[inverse_indices] == x."""
    return UniqueInverseResult(*_unique_op("unique_inverse", x, False, True, False, None,
                                           False, size, fill_value))


def unique_all(x: Any, /, *, size: int | None = None,
               fill_value: Any = None) -> UniqueAllResult:
    """(values, first indices, inverse_indices, counts) of the unique values."""
    return UniqueAllResult(*_unique_op("unique_all", x, True, True, True, None, False, size,
                                       fill_value))


# ---- set operations -----------------------------------------------------------------------------
def _candidates(op: str, ar1: Any, ar2: Any,
                assume_unique: bool) -> tuple[Tracer, Tracer, Tracer, Tracer]:
    """(candidate values, which of them are in the result, their positions in ar1 (for
    intersect1d), ar2 flattened) for the set operation `op`: sorted candidates whose kept
    entries are the result in order."""
    a, b = xnp.promote(flat(ar1), flat(ar2))
    if op == "setdiff1d" and assume_unique:  # numpy keeps ar1's order here
        return a, xnp.logical_not(_member(a, b)), _lax.iota(PT.S32, a.size), b
    aux1, first1, perm1 = _sorted_runs(a, True)
    if assume_unique:
        first1 = xnp.ones(first1.shape, bool)
    if op == "intersect1d":
        return aux1, xnp.logical_and(first1, _member(aux1, b)), perm1, b
    if op == "setdiff1d":
        return aux1, xnp.logical_and(first1, xnp.logical_not(_member(aux1, b))), perm1, b
    aux2, first2, _ = _sorted_runs(b, True)
    if assume_unique:
        first2 = xnp.ones(first2.shape, bool)
    keep = xnp.concatenate([xnp.logical_and(first1, xnp.logical_not(_member(aux1, b))),
                            xnp.logical_and(first2, xnp.logical_not(_member(aux2, a)))])
    drop = xnp.logical_not(keep)
    cand = xnp.concatenate([aux1, aux2])
    _, cand, keep = _lax.sort((drop, cand, keep), 0, is_stable=True, num_keys=2)
    return cand, keep, perm1, b


@eager_ok
def _count_set(op: str, ar1: Any, ar2: Any, assume_unique: bool) -> Tracer:
    return count_true(_candidates(op, ar1, ar2, assume_unique)[1])


def _set_op(op: str, ar1: Any, ar2: Any, assume_unique: bool, size: int | None,
            fill_value: Any, return_indices: bool = False) -> Any:
    n = static_size(op, size, lambda: _count_set(op, ar1, ar2, assume_unique))
    return _set_result(op, ar1, ar2, assume_unique, n, fill_value, return_indices)


@eager_ok
def _set_result(op: str, ar1: Any, ar2: Any, assume_unique: bool, size: int, fill_value: Any,
                return_indices: bool) -> Any:
    cand, keep, perm1, b = _candidates(op, ar1, ar2, assume_unique)
    idx, count = compact(keep, size)
    if not cand.size or not size:
        vals = xnp.full((size,), 0 if fill_value is None else fill_value, cand.dtype)
    else:
        vals = xnp.take(cand, idx)
        if fill_value is None:  # JAX's default: the smallest result (setdiff1d: 0)
            fill_value = 0 if op == "setdiff1d" else \
                xnp.where(xnp.greater(count, 0), vals[0], xnp.zeros((), vals.dtype))
        vals = padded(vals, count, fill_value)
    if not return_indices:
        return vals
    i1 = padded(xnp.take(perm1, idx), count, perm1.size) if perm1.size else \
        xnp.zeros((size,), np.int32)
    hits = xnp.equal(b[None, :], vals[:, None])
    i2 = xnp.astype(xnp.argmax(hits, axis=1), np.int32) if b.size and size else \
        xnp.zeros((size,), np.int32)
    return vals, i1, padded(i2, count, b.size)


def intersect1d(ar1: Any, ar2: Any, assume_unique: bool = False, return_indices: bool = False,
                *, size: int | None = None, fill_value: Any = None) -> Any:
    """Sorted unique values in both arrays (and their first indices in each)."""
    return _set_op("intersect1d", ar1, ar2, assume_unique, size, fill_value, return_indices)


def union1d(ar1: Any, ar2: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """Sorted unique values in either array."""
    both = xnp.concatenate([flat(ar1), flat(ar2)])
    return _unique_op("union1d", both, False, False, False, None, True, size, fill_value)


def setdiff1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
              fill_value: Any = None) -> Any:
    """Sorted unique values of ar1 not in ar2 (ar1's order if assume_unique)."""
    return _set_op("setdiff1d", ar1, ar2, assume_unique, size, fill_value)


def setxor1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
             fill_value: Any = None) -> Any:
    """Sorted unique values in exactly one of the arrays."""
    return _set_op("setxor1d", ar1, ar2, assume_unique, size, fill_value)


# ---- sorting ------------------------------------------------------------------------------------
@eager_ok
def lexsort(keys: Any, axis: int = -1) -> Tracer:
    """Indices (s32) sorting by several keys, the last key primary (stable)."""
    ks = [xnp.asarray(k) for k in keys]
    if not ks:
        raise trace_error("lexsort: needs at least one key")
    if len({k.shape for k in ks}) > 1:
        raise trace_error("lexsort: all keys must have the same shape, got "
                          + " and ".join(k.aval_text for k in ks))
    if ks[0].ndim == 0:
        return xnp.zeros((), np.int32)
    ax = axis % ks[0].ndim
    iota = _lax.broadcasted_iota(PT.S32, ks[0].shape, ax)
    return _lax.sort((*ks[::-1], iota), ax, is_stable=True, num_keys=len(ks))[-1]


def _kth(op: str, t: Tracer, kth: int, axis: int) -> int:
    n = t.shape[axis % t.ndim] if t.ndim else 0
    if isinstance(kth, Tracer) or not -n <= int(kth) < n:
        raise trace_error(f"{op}: kth must be a static int in [{-n}, {n}), got {kth!r}")
    return int(kth) % n


@eager_ok
def partition(a: Any, kth: int, axis: int = -1) -> Tracer:
    """Values with the kth smallest at position kth, smaller before, larger after (a sort)."""
    t = xnp.asarray(a)
    _kth("partition", t, kth, axis)
    return xnp.sort(t, axis=axis)


@eager_ok
def argpartition(a: Any, kth: int, axis: int = -1) -> Tracer:
    """Indices that partition `a` around its kth smallest value (a stable argsort)."""
    t = xnp.asarray(a)
    if t.ptype.is_complex:
        raise trace_error("argpartition: complex inputs are not supported")
    _kth("argpartition", t, kth, axis)
    return xnp.argsort(t, axis=axis)


@eager_ok
def sort_complex(a: Any) -> Tracer:
    """Sorted along the last axis by real part, then imaginary part; a complex result."""
    t = xnp.asarray(a)
    if t.ptype.is_complex:
        return _lax.sort((xnp.real(t), xnp.imag(t), t), -1, num_keys=2)[2]
    ct = PT.C128 if t.ptype in (PT.F64, PT.S64, PT.U64) else PT.C64
    return _lax.convert_element_type(xnp.sort(t, axis=-1), ct)


# ---- bits ---------------------------------------------------------------------------------------
def _bit_weights(bitorder: str, op: str) -> np.ndarray:
    if bitorder not in ("big", "little"):
        raise trace_error(f"{op}: bitorder must be 'big' or 'little', got {bitorder!r}")
    w = (1 << np.arange(8)).astype(np.uint8)
    return w[::-1].copy() if bitorder == "big" else w


@eager_ok
def packbits(a: Any, axis: int | None = None, bitorder: str = "big") -> Tracer:
    """Pack a bool/integer array (nonzero = 1) into uint8 bytes along `axis`."""
    t = xnp.asarray(a)
    if not (t.ptype.is_integer or t.ptype is PT.PRED):
        raise trace_error(f"packbits: needs an integer or bool array, got {t.aval_text}")
    w = _bit_weights(bitorder, "packbits")
    if axis is None:
        t, axis = xnp.ravel(t), 0
    bits = xnp.swapaxes(xnp.astype(to_bool(t), np.uint8), axis, -1)
    n = bits.shape[-1]
    bits = xnp.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, -n % 8)])
    bits = xnp.reshape(bits, bits.shape[:-1] + (bits.shape[-1] // 8, 8))
    packed = xnp.astype(xnp.sum(xnp.multiply(bits, w), axis=-1), np.uint8)
    return xnp.swapaxes(packed, axis, -1)


@eager_ok
def unpackbits(a: Any, axis: int | None = None, count: int | None = None,
               bitorder: str = "big") -> Tracer:
    """Unpack uint8 bytes into 0/1 uint8 bits along `axis` (first `count` bits)."""
    t = xnp.asarray(a)
    if t.ptype is not PT.U8:
        raise trace_error(f"unpackbits: needs a uint8 array, got {t.aval_text}")
    w = _bit_weights(bitorder, "unpackbits")
    if axis is None:
        t, axis = xnp.ravel(t), 0
    t = xnp.swapaxes(t, axis, -1)
    bits = xnp.astype(xnp.not_equal(xnp.bitwise_and(t[..., None], w), 0), np.uint8)
    bits = xnp.reshape(bits, bits.shape[:-2] + (-1,))
    if count is not None:
        extra = int(count) - bits.shape[-1]
        bits = xnp.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, extra)]) if extra > 0 else \
            bits[..., :int(count)]
    return xnp.swapaxes(bits, axis, -1)


# ---- trim_zeros ---------------------------------------------------------------------------------
def trim_zeros(filt: Any, trim: str = "fb", axis: int | Sequence[int] | None = None) -> Tracer:
    """filt without its leading ('f') and/or trailing ('b') zeros along `axis` (all by default).
    The result's shape depends on the values: like JAX it needs a concrete array, outside a
    trace."""
    not_traced("trim_zeros", "the size of the result depends on the values of `filt`, so it "
                             "needs a concrete array; call it outside xlc.jit")
    arr = np.asarray(filt)
    axes = {int(x) % arr.ndim for x in np.atleast_1d(
        np.arange(arr.ndim) if axis is None else np.asarray(axis))}
    slices = []
    for d in range(arr.ndim):
        mask = np.any(arr != 0, axis=tuple(i for i in range(arr.ndim) if i != d))
        if d not in axes:
            slices.append(slice(None))
        elif not mask.any():
            slices.append(slice(0, 0))
        else:
            start = int(mask.argmax()) if "f" in trim.lower() else None
            stop = arr.shape[d] - int(mask[::-1].argmax()) if "b" in trim.lower() else None
            slices.append(slice(start, stop))
    return _getitem(filt, tuple(slices))


@eager_ok
def _getitem(a: Any, idx: tuple) -> Tracer:
    return xnp.asarray(a)[idx]
