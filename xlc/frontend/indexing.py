"""numpy indexing of traced arrays (`x[idx]`) and functional updates (`x.at[idx].set(v)`).

Basic indices (static ints, slices with any step, None, Ellipsis) lower to slice / reverse /
reshape. Integer-array indices and traced scalar indices (numpy "advanced" indexing) lower to a
`gather`; the index dims go where numpy puts them (in place of the indexed dims when those are
adjacent, first otherwise). Traced indices are wrapped for negatives and clamped into range by
gather (XLA semantics), not bounds-checked. `.at[...]` updates lower to dynamic-update-slice for
basic unit-stride indices and to `scatter` otherwise. Boolean masks are rejected (their result
shape depends on values), and so is anything else that is not an index (strings, floats,
dicts, boolean scalars, slices with non-integer or traced bounds): a TraceError, never a
silent full slice.
"""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from xlc.errors import TraceError
from xlc.frontend import lax as _lax
from xlc.frontend.eager import eager_ok
from xlc.frontend.tracer import Tracer, as_tracer, trace_error
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType as PT

_ADV = "adv"


def _index_error(x: Tracer, e: Any, why: str) -> TraceError:
    return trace_error(f"cannot index {x.aval_text} with {type(e).__name__} {e!r}: {why}")


_VALID = "indices must be integers, slices, None, Ellipsis or integer arrays"


def _checked_entry(x: Tracer, e: Any) -> Any:
    """One entry of an index, checked: an int, slice (static int bounds), None, Ellipsis, integer
    array (lists and tuples become arrays) or Tracer; TraceError for anything else."""
    if e is None or e is Ellipsis or isinstance(e, (Tracer, np.ndarray)):
        return e
    if isinstance(e, (bool, np.bool_)):
        raise _index_error(x, e, "boolean scalar indices are not supported; use None "
                                 "(newaxis) to add an axis")
    if isinstance(e, (int, np.integer)):
        return e
    if isinstance(e, (float, complex, np.floating, np.complexfloating)):
        raise _index_error(x, e, _VALID)
    if isinstance(e, (str, bytes)):
        raise _index_error(x, e, f"string indexing is not supported ({_VALID})")
    if isinstance(e, slice):
        for part in (e.start, e.stop, e.step):
            if isinstance(part, Tracer):
                raise _index_error(x, e, "slice bounds must be static integers; use "
                                         "xlc.lax.dynamic_slice for traced starts")
            if part is not None and (isinstance(part, (bool, np.bool_))
                                     or not hasattr(part, "__index__")):
                raise _index_error(x, e, "slice bounds must be integers or None")
        return e
    if isinstance(e, (list, tuple)):
        arr = np.asarray(e)
        return arr.astype(np.int32) if arr.dtype == np.float64 and arr.size == 0 else arr
    if hasattr(e, "__array__"):
        return np.asarray(e)
    if hasattr(e, "__index__"):
        return int(e.__index__())
    raise _index_error(x, e, _VALID)


def _normalize(x: Tracer, idx: Any, allow_none: bool = True) -> list[Any]:
    """Expand Ellipsis, pad with full slices; returns one entry per dim (+ None entries)."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    entries: list[Any] = []
    for e in idx:
        e = _checked_entry(x, e)
        if isinstance(e, (np.ndarray, Tracer)) and e.dtype == np.bool_:
            raise trace_error("boolean mask indexing has a value-dependent shape and cannot be "
                              "traced; use xlc.numpy.where instead")
        if isinstance(e, (np.ndarray, Tracer)) and not np.issubdtype(e.dtype, np.integer):
            raise trace_error(f"array indices must be integers, got dtype {e.dtype}")
        if e is None and not allow_none:
            raise trace_error(".at[] does not support None (newaxis) in the index")
        entries.append(e)
    n_ell = builtins.sum(1 for e in entries if e is Ellipsis)
    if n_ell > 1:
        raise trace_error("an index can only have a single ellipsis ('...')")
    consuming = builtins.sum(1 for e in entries if e is not None and e is not Ellipsis)
    if consuming > x.ndim:
        raise trace_error(f"too many indices for array: {x.aval_text} is {x.ndim}-dimensional, "
                          f"but {consuming} were indexed")
    fill = [slice(None)] * (x.ndim - consuming)
    if n_ell:
        i = entries.index(Ellipsis)
        entries = entries[:i] + fill + entries[i + 1:]
    else:
        entries = entries + fill
    return entries


def _is_static_int(e: Any) -> bool:
    return isinstance(e, (int, np.integer)) and not isinstance(e, bool)


def _static_int(e: int, size: int, axis: int) -> int:
    if not -size <= e < size:
        raise trace_error(f"index {e} is out of bounds for axis {axis} with size {size}")
    return int(e) % size


def _apply_slices(x: Tracer, entries: list[Any]) -> Tracer:
    """Apply the slice entries (one per dim), keeping every dim."""
    bounds: list[tuple[int, int, int]] = []
    rev = []
    for d, (e, n) in enumerate(zip(entries, x.shape)):
        if not isinstance(e, slice):
            bounds.append((0, n, 1))
            continue
        a, b, s = e.indices(n)
        count = len(range(a, b, s))
        if count == 0:
            bounds.append((0, 0, 1))
        elif s > 0:
            bounds.append((a, a + (count - 1) * s + 1, s))
        else:  # slice the same elements ascending, then reverse the dim
            bounds.append((a + (count - 1) * s, a + 1, -s))
            rev.append(d)
    start, limit, stride = ([b[i] for b in bounds] for i in range(3))
    y = _lax.slice(x, start, limit, stride)
    return _lax.rev(y, rev)


def _wrap_negative(i: Tracer, n: int) -> Tracer:
    from xlc.frontend import numpy_api as xnp

    if i.ptype.is_unsigned_int:
        return i
    return xnp.where(xnp.less(i, 0), xnp.add(i, n), i)


def _index_arrays(x: Tracer, entries: list[Any], adv: list[int]) -> tuple[list[Tracer],
                                                                         tuple[int, ...]]:
    """s32 index tracers for the advanced dims, broadcast to their common shape B."""
    from xlc.frontend import numpy_api as xnp

    arrays = []
    for d in adv:
        e, n = entries[d], x.shape[d]
        if _is_static_int(e):
            arrays.append(as_tracer(np.int32(_static_int(e, n, d))))
        elif isinstance(e, np.ndarray):
            if e.size and ((e < -n).any() or (e >= n).any()):
                bad = e[(e < -n) | (e >= n)].flat[0]
                raise trace_error(f"index {bad} is out of bounds for axis {d} with size {n}")
            arrays.append(as_tracer(np.mod(e, builtins.max(n, 1)).astype(np.int32)))
        else:
            t = e if e.ptype is PT.S32 else _lax.convert_element_type(e, PT.S32)
            arrays.append(_wrap_negative(t, n))
    shape = xnp.broadcast_shapes(*[a.shape for a in arrays], op="index")
    arrays = [xnp.broadcast_to(a, shape) for a in arrays]
    return arrays, shape


def _placement(adv: list[int], rank: int, nb: int) -> tuple[bool, list[int]]:
    """Whether the index dims replace the advanced dims in place (adjacent) and the output
    positions of the remaining (window) dims."""
    contiguous = adv == list(range(adv[0], adv[0] + len(adv)))
    rest = [d for d in range(rank) if d not in adv]
    pos = []
    for j, d in enumerate(rest):
        if contiguous:
            pos.append(j if d < adv[0] else j + nb)
        else:
            pos.append(nb + j)
    return contiguous, pos


def getitem(x: Tracer, idx: Any) -> Tracer:
    """`x[idx]` with numpy semantics (see the module docstring)."""
    entries = _normalize(x, idx)
    if builtins.any(isinstance(e, (np.ndarray, Tracer)) for e in entries):
        return _advanced_getitem(x, entries)
    consumed = [e for e in entries if e is not None]
    ints = {}
    for d, e in enumerate(consumed):
        if _is_static_int(e):
            ints[d] = _static_int(e, x.shape[d], d)
    y = _apply_slices(x, [slice(ints[d], ints[d] + 1) if d in ints else e
                          for d, e in enumerate(consumed)])
    dims, d = [], 0
    for e in entries:
        if e is None:
            dims.append(1)
            continue
        if d not in ints:
            dims.append(y.shape[d])
        d += 1
    return _lax.reshape(y, dims)


def _advanced_getitem(x: Tracer, entries: list[Any]) -> Tracer:
    if builtins.any(e is None for e in entries):
        shape = []
        consumed = []
        it = iter(x.shape)
        for e in entries:
            shape.append(1 if e is None else next(it))
            consumed.append(slice(None) if e is None else e)
        x, entries = _lax.reshape(x, shape), consumed
    x = _apply_slices(x, entries)
    adv = [d for d, e in enumerate(entries) if not isinstance(e, slice)]
    arrays, bshape = _index_arrays(x, entries, adv)
    nb = len(bshape)
    from xlc.frontend import numpy_api as xnp

    indices = xnp.stack(arrays, axis=-1) if arrays else None
    _, offset = _placement(adv, x.ndim, nb)
    sizes = [1 if d in adv else n for d, n in enumerate(x.shape)]
    return _lax.gather(x, indices, offset, adv, adv, nb, sizes)


@eager_ok
def take(a: Any, indices: Any, axis: int | None = None) -> Tracer:
    """Elements of `a` at integer `indices` along `axis` (of the flattened array if None)."""
    from xlc.frontend import numpy_api as xnp

    t = as_tracer(a)
    if axis is None:
        t, axis = xnp.reshape(t, (-1,)), 0
    ax = int(axis) % t.ndim
    idx = indices if isinstance(indices, Tracer) else np.asarray(indices)
    return getitem(t, (slice(None),) * ax + (idx,))


@eager_ok
def take_along_axis(arr: Any, indices: Any, axis: int) -> Tracer:
    """numpy.take_along_axis: `indices` has `arr`'s rank; picks along `axis`."""
    t = as_tracer(arr)
    idx = as_tracer(indices)
    ax = int(axis) % t.ndim
    if idx.ndim != t.ndim:
        raise trace_error(f"take_along_axis: indices {idx.aval_text} must have the rank of "
                          f"{t.aval_text}")
    entries: list[Any] = []
    for d in range(t.ndim):
        if d == ax:
            entries.append(idx)
        else:
            shp = [1] * t.ndim
            shp[d] = idx.shape[d]
            entries.append(_lax.broadcasted_iota(PT.S32, shp, d))
    return _advanced_getitem(t, entries)


# ---- .at[...] updates --------------------------------------------------------------------------
_COMBINERS: dict[str, Opcode | None] = {
    "set": None, "add": Opcode.ADD, "multiply": Opcode.MULTIPLY, "min": Opcode.MINIMUM,
    "max": Opcode.MAXIMUM,
}


class IndexUpdateHelper:
    """`x.at`: indexing it gives an `IndexUpdateRef`."""

    __slots__ = ("x",)

    def __init__(self, x: Tracer):
        self.x = x

    def __getitem__(self, idx: Any) -> IndexUpdateRef:
        return IndexUpdateRef(self.x, idx)


class IndexUpdateRef:
    """`x.at[idx]`: `.set/.add/.multiply/.mul/.min/.max(v)` return updated copies of x;
    `.get()` is `x[idx]`."""

    __slots__ = ("x", "idx")

    def __init__(self, x: Tracer, idx: Any):
        self.x, self.idx = x, idx

    def get(self) -> Tracer:
        return getitem(self.x, self.idx)

    def set(self, v: Any) -> Tracer:
        return update(self.x, self.idx, v, "set")

    def add(self, v: Any) -> Tracer:
        return update(self.x, self.idx, v, "add")

    def multiply(self, v: Any) -> Tracer:
        return update(self.x, self.idx, v, "multiply")

    mul = multiply

    def min(self, v: Any) -> Tracer:
        return update(self.x, self.idx, v, "min")

    def max(self, v: Any) -> Tracer:
        return update(self.x, self.idx, v, "max")


def _update_value(x: Tracer, v: Any, shape: tuple[int, ...], mode: str) -> Tracer:
    from xlc.frontend import numpy_api as xnp

    val = as_tracer(v)
    if val.ptype is not x.ptype:
        val = _lax.convert_element_type(val, x.ptype)
    try:
        return xnp.broadcast_to(val, shape)
    except Exception:
        raise trace_error(f".at[].{mode}: cannot broadcast the update {val.aval_text} to the "
                          f"indexed shape {list(shape)}") from None


def _selection_shape(x: Tracer, entries: list[Any], adv: list[int]) -> tuple[int, ...]:
    """The shape of x[entries] (no None entries) without emitting anything."""
    from xlc.frontend.numpy_api import broadcast_shapes

    shapes = [() if _is_static_int(entries[d]) else tuple(entries[d].shape) for d in adv]
    bshape = broadcast_shapes(*shapes, op="index") if shapes else ()
    rest = [len(range(*entries[d].indices(n))) for d, n in enumerate(x.shape) if d not in adv]
    if not adv:
        return tuple(rest)
    _, pos = _placement(adv, x.ndim, len(bshape))
    out: list[int] = [0] * (len(bshape) + len(rest))
    for p, r in zip(pos, rest):
        out[p] = r
    free = [i for i in range(len(out)) if i not in pos]
    for i, b in zip(free, bshape):
        out[i] = b
    return tuple(out)


def update(x: Tracer, idx: Any, v: Any, mode: str) -> Tracer:
    """The functional update behind `x.at[idx].<mode>(v)`."""
    from xlc.frontend import numpy_api as xnp

    entries = _normalize(x, idx, allow_none=False)
    for e in entries:
        if isinstance(e, slice) and e.step not in (None, 1):
            raise trace_error(f".at[].{mode}: slices with a step other than 1 are not "
                              f"supported, got {e}")
    adv = [d for d, e in enumerate(entries) if not isinstance(e, slice)]
    sel_shape = _selection_shape(x, entries, adv)
    value = _update_value(x, v, sel_shape, mode)
    has_arrays = builtins.any(isinstance(e, (np.ndarray, Tracer)) for e in entries)
    if not has_arrays:
        starts, region = [], []
        for d, (e, n) in enumerate(zip(entries, x.shape)):
            if isinstance(e, slice):
                a, b, _ = e.indices(n)
                starts.append(a)
                region.append(builtins.max(b - a, 0))
            else:
                starts.append(_static_int(e, n, d))
                region.append(1)
        if 0 in region:
            return x
        upd = _lax.reshape(value, region)
        if mode != "set":
            old = _lax.slice(x, starts, [s + r for s, r in zip(starts, region)])
            fn = {"add": xnp.add, "multiply": xnp.multiply, "min": xnp.minimum,
                  "max": xnp.maximum}[mode]
            upd = fn(old, upd)
        return _lax.dynamic_update_slice(x, upd, [np.int32(s) for s in starts])
    arrays, bshape = _index_arrays(x, entries, adv)
    nb = len(bshape)
    comps = []
    for d, e in enumerate(entries):
        if d in adv:
            comps.append(arrays[adv.index(d)])
        else:
            a = e.indices(x.shape[d])[0]
            comps.append(xnp.full(bshape, a, np.int32))
    indices = xnp.stack(comps, axis=-1)
    _, window_pos = _placement(adv, x.ndim, nb)
    if nb == 0:  # one update: give it a batch dim of 1 (scatter with no batch dims is rare)
        indices = _lax.reshape(indices, (1, x.ndim))
        value = _lax.reshape(value, (1,) + value.shape)
        window_pos, nb = [p + 1 for p in window_pos], 1
    return _lax.scatter(x, indices, value, window_pos, adv, tuple(range(x.ndim)), nb,
                        _COMBINERS[mode])
