"""Array manipulation and construction for `xlc.numpy` (JAX semantics): joining and splitting
(append, block, column_stack, dstack, array_split, h/v/dsplit, unstack), insert/delete,
creation (empty, identity, tri, meshgrid, fromfunction, logspace, geomspace), flips, rolls and
transposes, resize, and applying functions along axes (apply_along_axis, apply_over_axes,
vectorize).

Functions mapped over array elements or slices (`vectorize`, `apply_along_axis`) use `xlc.vmap`
when it exists; otherwise `apply_along_axis` and `vectorize(signature=...)` become a
`lax.scan` over the slices (a loop in the program), and plain `vectorize` calls the function once
on the broadcast arrays, which assumes it is elementwise.
"""
from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlc.frontend import dtypes, pytree
from xlc.frontend import lax as _lax
from xlc.frontend import numpy_api as xnp
from xlc.frontend.eager import eager_ok
from xlc.frontend.numpy_select import flat, nonzero
from xlc.frontend.tracer import Tracer, trace_error
from xlc.hlo.shape import PrimitiveType as PT

__all__ = ["append", "array_split", "atleast_1d", "atleast_2d", "atleast_3d", "block",
           "column_stack", "dstack", "concat", "copy", "delete", "insert", "dsplit", "hsplit",
           "vsplit", "empty", "empty_like", "identity", "tri", "meshgrid", "fromfunction",
           "fliplr", "flipud", "rot90", "roll", "rollaxis", "permute_dims", "matrix_transpose",
           "unstack", "resize", "geomspace", "logspace", "apply_along_axis", "apply_over_axes",
           "vectorize"]


def _axis(axis: int, ndim: int, op: str) -> int:
    if isinstance(axis, Tracer) or not -ndim <= int(axis) < ndim:
        raise trace_error(f"{op}: axis {axis} is out of bounds for an array of rank {ndim}")
    return int(axis) % ndim


def _with_ndim(t: Tracer, ndim: int) -> Tracer:
    """t with leading size-1 dims up to rank `ndim`."""
    return xnp.reshape(t, (1,) * (ndim - t.ndim) + t.shape) if t.ndim < ndim else t


# ---- joining and splitting ----------------------------------------------------------------------
@eager_ok
def append(arr: Any, values: Any, axis: int | None = None) -> Tracer:
    """arr with values appended along `axis` (both flattened if None)."""
    if axis is None:
        return xnp.concatenate([flat(arr), flat(values)])
    return xnp.concatenate([arr, values], axis=axis)


@eager_ok
def concat(arrays: Sequence[Any], /, *, axis: int | None = 0) -> Tracer:
    """Array-API spelling of concatenate."""
    return xnp.concatenate([xnp.asarray(a) for a in arrays], axis=axis)


@eager_ok
def copy(a: Any, order: str | None = None) -> Tracer:
    """A copy of a (traced arrays are immutable, so a itself)."""
    return xnp.asarray(a)


def _atleast(arys: tuple, ndim: int) -> Any:
    out = []
    for a in arys:
        t = xnp.asarray(a)
        if t.ndim < ndim:
            if ndim == 3 and t.ndim == 1:
                t = xnp.reshape(t, (1, t.size, 1))
            elif ndim == 3 and t.ndim == 2:
                t = xnp.reshape(t, t.shape + (1,))
            else:
                t = _with_ndim(t, ndim)
        out.append(t)
    return out[0] if len(out) == 1 else out


@eager_ok
def atleast_1d(*arys: Any) -> Any:
    """Each input with at least 1 dim (a list when there are several)."""
    return _atleast(arys, 1)


@eager_ok
def atleast_2d(*arys: Any) -> Any:
    """Each input with at least 2 dims (1-D becomes a row)."""
    return _atleast(arys, 2)


@eager_ok
def atleast_3d(*arys: Any) -> Any:
    """Each input with at least 3 dims: (N,) -> (1, N, 1), (M, N) -> (M, N, 1)."""
    return _atleast(arys, 3)


def _block(xs: Any) -> tuple[Tracer, int]:
    if isinstance(xs, tuple):
        raise trace_error("block: tuples are not allowed, use nested lists")
    if not isinstance(xs, list):
        return xnp.asarray(xs), 1
    if not xs:
        raise trace_error("block: empty lists are not allowed")
    parts = [_block(x) for x in xs]
    depth = parts[0][1]
    if any(d != depth for _, d in parts):
        raise trace_error("block: mismatched list depths")
    rank = max(depth, max(p.ndim for p, _ in parts))
    return xnp.concatenate([_with_ndim(p, rank) for p, _ in parts], axis=-depth), depth + 1


@eager_ok
def block(arrays: Any) -> Tracer:
    """Assemble an array from nested lists of blocks (innermost lists join the last axis)."""
    return _block(arrays)[0]


def _rows(tup: Any) -> list[Any]:
    return list(tup) if isinstance(tup, (Tracer, np.ndarray)) else [xnp.asarray(a) for a in tup]


@eager_ok
def column_stack(tup: Any) -> Tracer:
    """Stack 1-D arrays as columns (2-D arrays join along axis 1)."""
    cols = [xnp.asarray(a) for a in _rows(tup)]
    return xnp.concatenate([xnp.reshape(c, (-1, 1)) if c.ndim < 2 else c for c in cols], 1)


@eager_ok
def dstack(tup: Any, dtype: Any = None) -> Tracer:
    """Stack along the third axis (inputs made at least 3-D)."""
    out = xnp.concatenate([_atleast((a,), 3) for a in _rows(tup)], axis=2)
    return out if dtype is None else xnp.astype(out, dtype)


@eager_ok
def array_split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Tracer]:
    """Split into sections (unequal allowed: the first ones one longer) or at indices."""
    t = xnp.asarray(ary)
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise trace_error(f"array_split: number of sections must be positive, got {k}")
        q, r = divmod(t.shape[_axis(axis, t.ndim, "array_split")], k)
        bounds = np.cumsum([q + 1] * r + [q] * (k - r))[:-1]
        return xnp.split(t, [int(b) for b in bounds], axis)
    return xnp.split(t, indices_or_sections, axis)


def _split_at_least(op: str, ary: Any, sections: Any, ndim: int, axis: int) -> list[Tracer]:
    t = xnp.asarray(ary)
    if t.ndim < ndim:
        raise trace_error(f"{op}: needs an array of at least {ndim} dims, got {t.aval_text}")
    return xnp.split(t, sections, axis)


@eager_ok
def hsplit(ary: Any, indices_or_sections: Any) -> list[Tracer]:
    """split along axis 1 (axis 0 for 1-D arrays)."""
    t = xnp.asarray(ary)
    return _split_at_least("hsplit", t, indices_or_sections, 1, 1 if t.ndim > 1 else 0)


@eager_ok
def vsplit(ary: Any, indices_or_sections: Any) -> list[Tracer]:
    """split along axis 0 (at least 2-D)."""
    return _split_at_least("vsplit", ary, indices_or_sections, 2, 0)


@eager_ok
def dsplit(ary: Any, indices_or_sections: Any) -> list[Tracer]:
    """split along axis 2 (at least 3-D)."""
    return _split_at_least("dsplit", ary, indices_or_sections, 3, 2)


@eager_ok
def unstack(x: Any, /, *, axis: int = 0) -> tuple[Tracer, ...]:
    """The slices of x along `axis`, as a tuple."""
    t = xnp.asarray(x)
    ax = _axis(axis, t.ndim, "unstack")
    return tuple(xnp.take(t, i, axis=ax) for i in range(t.shape[ax]))


@eager_ok
def delete(arr: Any, obj: Any, axis: int | None = None, *,
           assume_unique_indices: bool = False) -> Tracer:
    """arr without the entries `obj` (a static int, slice or index/bool array; a traced index
    array needs assume_unique_indices=True) along `axis` (flattened if None)."""
    t = xnp.asarray(arr)
    if axis is None:
        t, axis = xnp.ravel(t), 0
    ax = _axis(axis, t.ndim, "delete")
    n = t.shape[ax]
    if isinstance(obj, Tracer):
        if not (assume_unique_indices and obj.ptype.is_integer):
            raise trace_error("delete: a traced obj must be an integer array and needs "
                              "assume_unique_indices=True")
        d = xnp.sort(xnp.clip(xnp.where(xnp.less(obj, 0), obj + n, obj), 0, n).ravel())
        d = d - _lax.iota(d.ptype, d.size)
        i = _lax.iota(PT.S32, n - d.size)
        i = i + xnp.sum(xnp.astype(xnp.greater_equal(i[None, :], d[:, None]), np.int32), 0)
        return xnp.take(t, i, axis=ax)
    keep = np.ones(n, bool)
    if isinstance(obj, slice):
        keep[obj] = False
    else:
        o = np.asarray(obj)
        if o.dtype == bool:
            if o.shape != (n,):
                raise trace_error(f"delete: a boolean obj must have shape ({n},), got {o.shape}")
            keep = ~o
        elif o.dtype.kind in "iu" or o.size == 0:
            if o.size and (o.min() < -n or o.max() >= n):
                raise trace_error(f"delete: index out of bounds for axis {ax} with size {n}")
            keep[o.astype(np.int64)] = False
        else:
            raise trace_error(f"delete: obj must be integer or bool, got dtype {o.dtype}")
    return xnp.take(t, np.flatnonzero(keep).astype(np.int32), axis=ax)


@eager_ok
def insert(arr: Any, obj: Any, values: Any, axis: int | None = None) -> Tracer:
    """arr with `values` inserted before the indices `obj` (int, slice or index array) along
    `axis` (flattened if None); values take arr's dtype."""
    t = xnp.asarray(arr)
    if axis is None:
        t, axis = xnp.ravel(t), 0
    ax = _axis(axis, t.ndim, "insert")
    n = t.shape[ax]
    idx = xnp.asarray(np.arange(n)[obj].astype(np.int32) if isinstance(obj, slice) else obj)
    if idx.ndim > 1 or not (idx.ptype.is_integer or idx.size == 0):
        raise trace_error(f"insert: obj must be an int, a slice or a 1-D integer array, "
                          f"got {idx.aval_text}")
    idx = xnp.astype(idx, np.int32)
    vals = _with_ndim(xnp.astype(xnp.asarray(values), t.dtype), t.ndim)
    if idx.size == 1:
        if idx.ndim == 0:
            vals = xnp.moveaxis(vals, 0, ax)
        idx = xnp.full((vals.shape[ax],), xnp.ravel(idx)[0])
    m = xnp.broadcast_shapes(idx.shape, (vals.shape[ax],), op="insert")[0]
    idx = xnp.clip(xnp.where(xnp.less(idx, 0), idx + n, idx), 0, n)
    idx = xnp.broadcast_to(idx, (m,))
    new_pos = idx.at[xnp.argsort(idx)].add(_lax.iota(PT.S32, m))
    old_pos = nonzero(xnp.ones((n + m,), bool).at[new_pos].set(False), size=n)[0]
    shape = list(t.shape)
    shape[ax] = n + m
    lead = (slice(None),) * ax
    out = xnp.zeros(shape, t.dtype).at[lead + (new_pos,)].set(vals)
    return out.at[lead + (old_pos,)].set(t)


# ---- creation -----------------------------------------------------------------------------------
@eager_ok
def empty(shape: Any, dtype: Any = None) -> Tracer:
    """An array of `shape` (zeros: xlc has no uninitialized memory)."""
    return xnp.zeros(shape, dtype)


@eager_ok
def empty_like(prototype: Any, dtype: Any = None, shape: Any = None) -> Tracer:
    """zeros with prototype's shape and dtype unless given."""
    return xnp.full_like(prototype, 0, dtype, shape)


@eager_ok
def identity(n: int, dtype: Any = None) -> Tracer:
    """The n x n identity matrix (f32 by default)."""
    return xnp.eye(n, dtype=dtype)


@eager_ok
def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Tracer:  # noqa: N803
    """Ones at and below diagonal k of an N x M array (f32 by default)."""
    shape = (int(N), int(N if M is None else M))
    rows = _lax.broadcasted_iota(PT.S32, shape, 0)
    mask = xnp.less_equal(_lax.broadcasted_iota(PT.S32, shape, 1), xnp.add(rows, k))
    return xnp.astype(mask, dtype or np.float32)


@eager_ok
def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False,
             indexing: str = "xy") -> list[Tracer]:
    """Coordinate grids from 1-D arrays ('xy': cartesian, 'ij': matrix indexing)."""
    if indexing not in ("xy", "ij"):
        raise trace_error(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    args = [xnp.asarray(a) for a in xi]
    if any(a.ndim != 1 for a in args):
        raise trace_error("meshgrid: arguments must be 1-D, got "
                          + " and ".join(a.aval_text for a in args))
    swap = indexing == "xy" and len(args) >= 2
    if swap:
        args[0], args[1] = args[1], args[0]
    full = [a.shape[0] for a in args]
    out = []
    for i, a in enumerate(args):
        shape = [1] * len(args) if sparse else list(full)
        shape[i] = a.shape[0]
        out.append(_lax.broadcast_in_dim(a, shape, (i,)))
    if swap:
        out[0], out[1] = out[1], out[0]
    return out


@eager_ok
def fromfunction(function: Callable[..., Any], shape: Any, *, dtype: Any = float,
                 **kwargs: Any) -> Any:
    """function(*index grids of `shape`), each output broadcast to `shape`."""
    dims = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    pt = dtypes.to_ptype(dtype)
    out = function(*(_lax.broadcasted_iota(pt, dims, i) for i in range(len(dims))), **kwargs)
    leaves, td = pytree.flatten(out)
    return pytree.unflatten(td, [xnp.broadcast_to(xnp.asarray(x), dims) for x in leaves])


def _space_types(start: Any, stop: Any, dtype: Any) -> tuple[Tracer, Tracer, PT]:
    """start and stop in the computation type (a float or complex type) and the result type
    (the float type of the promoted inputs unless `dtype` is given), as JAX."""
    s, e = xnp.promote(start, stop)
    inexact = s.ptype.is_float or s.ptype.is_complex
    pt = dtypes.to_ptype(dtype) if dtype is not None else \
        s.ptype if inexact else dtypes.canonical_float(s.ptype)
    ct = pt if pt.is_float or pt.is_complex else dtypes.canonical_float(pt)
    s, e = xnp.broadcast_arrays(xnp.astype(s, ct.dtype), xnp.astype(e, ct.dtype))
    return s, e, pt


def _lin(s: Tracer, e: Tracer, num: int, endpoint: bool, op: str) -> Tracer:
    """num values linearly from s to e along a new leading axis."""
    if isinstance(num, Tracer) or operator.index(num) < 0:
        raise trace_error(f"{op}: num must be a static non-negative int, got {num!r}")
    div = num - 1 if endpoint else num
    step = xnp.true_divide(e - s, div) if div > 0 else xnp.zeros_like(s)
    i = xnp.reshape(_lax.iota(s.ptype, num), (num,) + (1,) * s.ndim)
    lin = xnp.add(s[None], xnp.multiply(i, step[None]))
    return lin.at[-1].set(e) if endpoint and num > 1 else lin


@eager_ok
def logspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, base: Any = 10.0,
             dtype: Any = None, axis: int = 0) -> Tracer:
    """base ** linspace(start, stop, num), along `axis`."""
    s, e, pt = _space_types(start, stop, dtype)
    out = xnp.power(base, _lin(s, e, num, endpoint, "logspace"))
    return xnp.astype(xnp.moveaxis(out, 0, _axis(axis, out.ndim, "logspace")), pt.dtype)


@eager_ok
def geomspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: Any = None,
              axis: int = 0) -> Tracer:
    """num values from start to stop in geometric progression, along `axis`."""
    s, e, pt = _space_types(start, stop, dtype)
    sign = xnp.sign(s)
    lin = _lin(xnp.log10(s / sign), xnp.log10(e / sign), num, endpoint, "geomspace")
    out = xnp.multiply(sign[None], xnp.power(10.0, lin))
    return xnp.astype(xnp.moveaxis(out, 0, _axis(axis, out.ndim, "geomspace")), pt.dtype)


# ---- flips, rolls and transposes ----------------------------------------------------------------
@eager_ok
def fliplr(m: Any) -> Tracer:
    """Reverse axis 1 (at least 2-D)."""
    t = xnp.asarray(m)
    if t.ndim < 2:
        raise trace_error(f"fliplr: needs at least 2 dims, got {t.aval_text}")
    return xnp.flip(t, 1)


@eager_ok
def flipud(m: Any) -> Tracer:
    """Reverse axis 0 (at least 1-D)."""
    t = xnp.asarray(m)
    if t.ndim < 1:
        raise trace_error(f"flipud: needs at least 1 dim, got {t.aval_text}")
    return xnp.flip(t, 0)


@eager_ok
def rot90(m: Any, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Tracer:
    """Rotate by 90 degrees k times in the plane of `axes` (from the first toward the second)."""
    t = xnp.asarray(m)
    if t.ndim < 2:
        raise trace_error(f"rot90: needs at least 2 dims, got {t.aval_text}")
    a1, a2 = _axis(axes[0], t.ndim, "rot90"), _axis(axes[1], t.ndim, "rot90")
    if a1 == a2:
        raise trace_error(f"rot90: axes must be different, got {tuple(axes)}")
    k = operator.index(k) % 4
    perm = list(range(t.ndim))
    perm[a1], perm[a2] = perm[a2], perm[a1]
    if k == 0:
        return t
    if k == 2:
        return xnp.flip(t, (a1, a2))
    return xnp.transpose(xnp.flip(t, a2), perm) if k == 1 else \
        xnp.flip(xnp.transpose(t, perm), a2)


@eager_ok
def roll(a: Any, shift: Any, axis: int | Sequence[int] | None = None) -> Tracer:
    """Shift elements cyclically along `axis` (the flattened array if None); `shift` may be
    traced."""
    t = xnp.asarray(a)
    if axis is None:
        return xnp.reshape(roll(xnp.ravel(t), shift, 0), t.shape)
    axes = [_axis(x, t.ndim, "roll") for x in np.atleast_1d(np.asarray(axis))]
    pairs: list[tuple[Any, int]]
    if isinstance(shift, Tracer):
        if shift.ndim > 1:
            raise trace_error(f"roll: shift must be a scalar or 1-D, got {shift.aval_text}")
        shifts = xnp.broadcast_to(shift, np.broadcast_shapes(shift.shape, (len(axes),)))
        pairs = [(shifts[i], ax) for i, ax in enumerate(np.broadcast_to(axes, shifts.shape))]
    else:
        sh, ax_arr = np.broadcast_arrays(np.asarray(shift), np.asarray(axes))
        pairs = [(int(s), int(x)) for s, x in zip(sh.ravel(), ax_arr.ravel())]
    for s, ax in pairs:
        n = t.shape[ax]
        if n == 0:
            continue
        if isinstance(s, Tracer):
            start = n - xnp.remainder(xnp.astype(s, np.int32), n)
            t = _lax.dynamic_slice_in_dim(xnp.concatenate([t, t], ax), start, n, axis=ax)
        elif s % n:
            t = xnp.concatenate(xnp.split(t, [n - s % n], ax)[::-1], ax)
    return t


@eager_ok
def rollaxis(a: Any, axis: int, start: int = 0) -> Tracer:
    """Move `axis` to sit before position `start` (numpy's older moveaxis)."""
    t = xnp.asarray(a)
    ax = _axis(axis, t.ndim, "rollaxis")
    if not -t.ndim <= start <= t.ndim:
        raise trace_error(f"rollaxis: start={start} must be in [{-t.ndim}, {t.ndim}]")
    start = start + t.ndim if start < 0 else start
    return xnp.moveaxis(t, ax, start - 1 if start > ax else start)


@eager_ok
def permute_dims(a: Any, /, axes: Sequence[int]) -> Tracer:
    """Array-API spelling of transpose."""
    return xnp.transpose(a, axes)


@eager_ok
def matrix_transpose(x: Any, /) -> Tracer:
    """Swap the last two axes (at least 2-D)."""
    t = xnp.asarray(x)
    if t.ndim < 2:
        raise trace_error(f"matrix_transpose: needs at least 2 dims, got {t.aval_text}")
    return xnp.swapaxes(t, -1, -2)


@eager_ok
def resize(a: Any, new_shape: Any) -> Tracer:
    """The flattened array repeated cyclically to fill `new_shape`."""
    t = flat(a)
    shape = (int(new_shape),) if np.ndim(new_shape) == 0 else tuple(int(s) for s in new_shape)
    if any(s < 0 for s in shape):
        raise trace_error(f"resize: new_shape must be non-negative, got {shape}")
    n = int(np.prod(shape, dtype=np.int64))
    if t.size == 0 or n == 0:
        return xnp.zeros(shape, t.dtype)
    return xnp.reshape(xnp.tile(t, -(-n // t.size))[:n], shape)


# ---- applying functions -------------------------------------------------------------------------
def _vmap() -> Callable[..., Any] | None:
    import xlc

    return getattr(xlc, "vmap", None)


def map_leading(fn: Callable[..., Any], args: Sequence[Tracer]) -> Any:
    """fn mapped over the leading axis of every array of `args`, outputs stacked: xlc.vmap
    when it exists, otherwise a lax.scan (a loop in the program)."""
    vmap = _vmap()
    if vmap is not None:
        return vmap(fn)(*args)
    return _lax.scan(lambda c, xs: (c, fn(*xs)), None, tuple(args))[1]


@eager_ok
def apply_along_axis(func1d: Callable[..., Any], axis: int, arr: Any, *args: Any,
                     **kwargs: Any) -> Tracer:
    """func1d applied to every 1-D slice along `axis`; its output dims replace that axis."""
    t = xnp.asarray(arr)
    ax = _axis(axis, t.ndim, "apply_along_axis")
    moved = xnp.moveaxis(t, ax, -1)
    batch = moved.shape[:-1]
    rows = xnp.reshape(moved, (int(np.prod(batch, dtype=np.int64)), moved.shape[-1]))
    out = xnp.asarray(map_leading(lambda r: xnp.asarray(func1d(r, *args, **kwargs)), [rows]))
    core = out.ndim - 1
    out = xnp.reshape(out, batch + out.shape[1:])
    return xnp.transpose(out, list(range(ax)) + list(range(len(batch), len(batch) + core))
                         + list(range(ax, len(batch))))


@eager_ok
def apply_over_axes(func: Callable[[Any, int], Any], a: Any, axes: Sequence[int]) -> Tracer:
    """func(a, axis) for each axis in turn, keeping the rank (a reduced axis is re-added)."""
    t = xnp.asarray(a)
    for ax in np.atleast_1d(np.asarray(axes)):
        b = xnp.asarray(func(t, int(ax)))
        if b.ndim == t.ndim - 1:
            b = xnp.expand_dims(b, int(ax))
        elif b.ndim != t.ndim:
            raise trace_error(f"apply_over_axes: func returned {b.aval_text} for an input "
                              f"{t.aval_text}; it must keep or reduce the axis")
        t = b
    return t


def _core_dims(signature: str) -> list[tuple[str, ...]]:
    """The core dim names of each input of a gufunc signature such as '(m,n),(n)->(m)'."""
    parts = signature.replace(" ", "").split("->")
    if len(parts) != 2 or not re.fullmatch(r"(\(\w*(,\w+)*\),?)*", parts[0] + ","):
        raise trace_error(f"vectorize: not a valid gufunc signature: {signature!r}")
    return [tuple(d for d in g.split(",") if d) for g in re.findall(r"\(([^()]*)\)", parts[0])]


def vectorize(pyfunc: Callable[..., Any], *, excluded: Any = frozenset(),
              signature: str | None = None) -> Callable[..., Any]:
    """pyfunc mapped over the broadcast leading (loop) dims of its array arguments; `signature`
    ('(n),(n)->()') names the core dims each call sees. Positions in `excluded` and keyword
    arguments are passed through unmapped."""
    ins = _core_dims(signature) if signature is not None else None

    def call(*args: Any, **kwargs: Any) -> Any:
        pos = [i for i in range(len(args)) if i not in excluded]
        arrays = [xnp.asarray(args[i]) for i in pos]
        cores = ins if ins is not None else [()] * len(arrays)
        if len(cores) != len(arrays):
            raise trace_error(f"vectorize: the signature {signature!r} has {len(cores)} "
                              f"inputs, got {len(arrays)} mapped arguments")
        sizes: dict[str, int] = {}
        loops = []
        for a, names in zip(arrays, cores):
            if a.ndim < len(names):
                raise trace_error(f"vectorize: argument {a.aval_text} has fewer dims than its "
                                  f"core dims {names}")
            for name, n in zip(names, a.shape[a.ndim - len(names):]):
                if sizes.setdefault(name, n) != n:
                    raise trace_error(f"vectorize: core dim {name!r} has sizes {sizes[name]} "
                                      f"and {n}")
            loops.append(a.shape[:a.ndim - len(names)])
        batch = xnp.broadcast_shapes(*loops, op="vectorize")

        def one(*xs: Any) -> Any:
            full = list(args)
            for i, x in zip(pos, xs):
                full[i] = x
            return pyfunc(*full, **kwargs)

        if ins is None and _vmap() is None:  # elementwise: one call on the broadcast arrays
            leaves, td = pytree.flatten(one(*(xnp.broadcast_to(a, batch) for a in arrays)))
            return pytree.unflatten(td, [xnp.broadcast_to(x, batch) for x in leaves])
        n = int(np.prod(batch, dtype=np.int64))
        flat_args = [xnp.reshape(xnp.broadcast_to(a, batch + a.shape[a.ndim - len(c):]),
                                 (n,) + a.shape[a.ndim - len(c):])
                     for a, c in zip(arrays, cores)]
        leaves, td = pytree.flatten(map_leading(one, flat_args))
        return pytree.unflatten(td, [xnp.reshape(x, batch + x.shape[1:]) for x in leaves])

    call.__name__ = getattr(pyfunc, "__name__", "vectorized")
    return functools.wraps(pyfunc)(eager_ok(call))
