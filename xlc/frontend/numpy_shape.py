"""Shape manipulation for `xlc.numpy`: reshape, transpose, swapaxes, moveaxis, expand_dims,
squeeze, broadcast_to, concatenate, stack, pad, flip, split, tile/repeat (static sizes only)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xlc.frontend import lax as _lax
from xlc.frontend.eager import eager_ok
from xlc.frontend.tracer import Tracer, as_tracer, trace_error

__all__ = ["reshape", "transpose", "swapaxes", "moveaxis", "expand_dims", "squeeze",
           "broadcast_to", "broadcast_arrays", "concatenate", "stack", "hstack", "vstack",
           "pad", "flip", "ravel", "split", "tile", "repeat", "ndim", "shape", "size"]


def _axis(axis: int, ndim: int, op: str) -> int:
    if not -ndim <= axis < ndim:
        raise trace_error(f"{op}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def ndim(x: Any) -> int:
    """Rank of x."""
    return x.ndim if isinstance(x, Tracer) else np.ndim(x)


def shape(x: Any) -> tuple[int, ...]:
    """Shape of x."""
    return x.shape if isinstance(x, Tracer) else np.shape(x)


def size(x: Any) -> int:
    """Number of elements of x."""
    return int(np.prod(shape(x), dtype=np.int64))


@eager_ok
def reshape(a: Any, newshape: Any) -> Tracer:
    """Row-major reshape; one dim may be -1."""
    t = as_tracer(a)
    dims = [int(newshape)] if isinstance(newshape, (int, np.integer)) else \
        [int(d) for d in newshape]
    if dims.count(-1) > 1:
        raise trace_error(f"reshape: only one dimension may be -1, got {tuple(dims)}")
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
        if known == 0 or t.size % known:
            raise trace_error(f"reshape: cannot reshape {t.aval_text} into shape {tuple(dims)}")
        dims[dims.index(-1)] = t.size // known
    if int(np.prod(dims, dtype=np.int64)) != t.size:
        raise trace_error(f"reshape: cannot reshape {t.aval_text} into shape {tuple(dims)}")
    return _lax.reshape(t, dims)


@eager_ok
def transpose(a: Any, axes: Sequence[int] | None = None) -> Tracer:
    """Permute dims (reverse them by default)."""
    t = as_tracer(a)
    perm = tuple(reversed(range(t.ndim))) if axes is None else \
        tuple(_axis(int(x), t.ndim, "transpose") for x in axes)
    if sorted(perm) != list(range(t.ndim)):
        raise trace_error(f"transpose: axes {tuple(axes or ())} are not a permutation of the "
                          f"dims of {t.aval_text}")
    return _lax.transpose(t, perm)


@eager_ok
def swapaxes(a: Any, axis1: int, axis2: int) -> Tracer:
    """Exchange two dims."""
    t = as_tracer(a)
    perm = list(range(t.ndim))
    i, j = _axis(axis1, t.ndim, "swapaxes"), _axis(axis2, t.ndim, "swapaxes")
    perm[i], perm[j] = perm[j], perm[i]
    return _lax.transpose(t, perm)


@eager_ok
def moveaxis(a: Any, source: int, destination: int) -> Tracer:
    """Move dim `source` to position `destination`."""
    t = as_tracer(a)
    s, d = _axis(source, t.ndim, "moveaxis"), _axis(destination, t.ndim, "moveaxis")
    perm = [i for i in range(t.ndim) if i != s]
    perm.insert(d, s)
    return _lax.transpose(t, perm)


@eager_ok
def expand_dims(a: Any, axis: int | Sequence[int]) -> Tracer:
    """Insert size-1 dims at `axis` (positions in the result)."""
    t = as_tracer(a)
    axes = [axis] if isinstance(axis, int) else list(axis)
    out_rank = t.ndim + len(axes)
    axes = sorted(_axis(x, out_rank, "expand_dims") for x in axes)
    dims = list(t.shape)
    for x in axes:
        dims.insert(x, 1)
    return _lax.reshape(t, dims)


@eager_ok
def squeeze(a: Any, axis: int | Sequence[int] | None = None) -> Tracer:
    """Remove size-1 dims (all of them, or those in `axis`, which must have size 1)."""
    t = as_tracer(a)
    if axis is None:
        axes = [i for i, d in enumerate(t.shape) if d == 1]
    else:
        axes = [_axis(x, t.ndim, "squeeze") for x in ([axis] if isinstance(axis, int)
                                                       else axis)]
        for x in axes:
            if t.shape[x] != 1:
                raise trace_error(f"squeeze: cannot squeeze axis {x} of size {t.shape[x]} "
                                  f"of {t.aval_text}")
    return _lax.reshape(t, [d for i, d in enumerate(t.shape) if i not in axes])


@eager_ok
def broadcast_to(a: Any, shape: Any) -> Tracer:
    """Broadcast to `shape` by numpy rules (trailing dims align)."""
    t = as_tracer(a)
    shp = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    ok = len(shp) >= t.ndim and all(
        d in (1, o) for d, o in zip(t.shape, shp[len(shp) - t.ndim:]))
    if not ok:
        raise trace_error(f"broadcast_to: cannot broadcast {t.aval_text} to shape {list(shp)}")
    return _lax.broadcast_in_dim(t, shp, tuple(range(len(shp) - t.ndim, len(shp))))


def broadcast_arrays(*args: Any) -> list[Tracer]:
    """All arguments broadcast to their common shape."""
    from xlc.frontend.numpy_api import _broadcast_all

    return _broadcast_all("broadcast_arrays", [as_tracer(a) for a in args])


@eager_ok
def concatenate(arrays: Sequence[Any], axis: int | None = 0) -> Tracer:
    """Join arrays along an existing axis (promoting dtypes; axis=None flattens first)."""
    from xlc.frontend.numpy_api import promote

    if not arrays:
        raise trace_error("concatenate: needs at least one array")
    xs = promote(*arrays)
    if axis is None:
        xs = [reshape(x, (-1,)) for x in xs]
        axis = 0
    rank = xs[0].ndim
    if rank == 0:
        raise trace_error("concatenate: zero-dimensional arrays cannot be concatenated")
    ax = _axis(axis, rank, "concatenate")
    for x in xs[1:]:
        if x.ndim != rank or any(a != b for i, (a, b) in enumerate(zip(x.shape, xs[0].shape))
                                 if i != ax):
            raise trace_error(f"concatenate: shapes must match except along axis {ax}, got "
                              + " and ".join(y.aval_text for y in xs))
    return _lax.concatenate(xs, ax)


@eager_ok
def stack(arrays: Sequence[Any], axis: int = 0) -> Tracer:
    """Join arrays of equal shape along a new axis."""
    from xlc.frontend.numpy_api import promote

    xs = promote(*arrays)
    if any(x.shape != xs[0].shape for x in xs):
        raise trace_error("stack: all arrays must have the same shape, got "
                          + " and ".join(x.aval_text for x in xs))
    ax = _axis(axis, xs[0].ndim + 1, "stack")
    return _lax.concatenate([expand_dims(x, ax) for x in xs], ax)


@eager_ok
def hstack(arrays: Sequence[Any]) -> Tracer:
    """Concatenate along axis 1 (axis 0 for 1-D inputs)."""
    xs = [as_tracer(a) for a in arrays]
    return concatenate(xs, 0 if xs[0].ndim == 1 else 1)


@eager_ok
def vstack(arrays: Sequence[Any]) -> Tracer:
    """Concatenate along axis 0 (1-D inputs become rows)."""
    xs = [as_tracer(a) for a in arrays]
    return concatenate([reshape(x, (1, -1)) if x.ndim == 1 else x for x in xs], 0)


@eager_ok
def pad(array: Any, pad_width: Any, mode: str = "constant", constant_values: Any = 0) -> Tracer:
    """numpy.pad with mode='constant' (pad_width: int, (lo, hi) or per-dim pairs)."""
    t = as_tracer(array)
    if mode != "constant":
        raise trace_error(f"pad: only mode='constant' is supported, got {mode!r}")
    pw = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (t.ndim, 2))
    if (pw < 0).any():
        raise trace_error(f"pad: pad_width must be non-negative, got {pad_width}")
    return _lax.pad(t, constant_values, [(int(lo), int(hi), 0) for lo, hi in pw])


@eager_ok
def flip(m: Any, axis: int | Sequence[int] | None = None) -> Tracer:
    """Reverse the order of elements along `axis` (all axes by default)."""
    t = as_tracer(m)
    axes = range(t.ndim) if axis is None else ([axis] if isinstance(axis, int) else axis)
    return _lax.rev(t, sorted(_axis(a, t.ndim, "flip") for a in axes))


@eager_ok
def ravel(a: Any) -> Tracer:
    """Flatten to 1-D (row-major)."""
    return reshape(a, (-1,))


@eager_ok
def split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Tracer]:
    """Split into equal sections or at the given static indices."""
    t = as_tracer(ary)
    ax = _axis(axis, t.ndim, "split")
    n = t.shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if n % k:
            raise trace_error(f"split: array split does not result in an equal division: "
                              f"{n} into {k}")
        bounds = [i * (n // k) for i in range(k + 1)]
    else:
        bounds = [0] + [int(i) for i in indices_or_sections] + [n]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        start = [0] * t.ndim
        limit = list(t.shape)
        start[ax], limit[ax] = lo, max(hi, lo)
        out.append(_lax.slice(t, start, limit))
    return out


@eager_ok
def tile(a: Any, reps: int | Sequence[int]) -> Tracer:
    """Repeat the whole array `reps` times per dim."""
    t = as_tracer(a)
    r = [reps] if isinstance(reps, int) else list(reps)
    r = [1] * (t.ndim - len(r)) + r
    t = reshape(t, [1] * (len(r) - t.ndim) + list(t.shape))
    dims = []
    for d in t.shape:
        dims += [1, d]
    x = reshape(t, dims)
    bshape = []
    for k, d in zip(r, t.shape):
        bshape += [k, d]
    x = broadcast_to(x, bshape)
    return reshape(x, [k * d for k, d in zip(r, t.shape)])


@eager_ok
def repeat(a: Any, repeats: int, axis: int | None = None) -> Tracer:
    """Repeat each element `repeats` (a static int) times along `axis` (flattened if None)."""
    t = as_tracer(a)
    if axis is None:
        t, axis = reshape(t, (-1,)), 0
    ax = _axis(axis, t.ndim, "repeat")
    x = expand_dims(t, ax + 1)
    shp = list(x.shape)
    shp[ax + 1] = int(repeats)
    x = broadcast_to(x, shp)
    out = list(t.shape)
    out[ax] *= int(repeats)
    return reshape(x, out)
