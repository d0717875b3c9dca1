"""Array creation for `xlc.numpy`: full/zeros/ones (and *_like), arange, linspace, eye,
asarray/array, tril/triu. Values created without an explicit dtype default to s32/f32, as in
JAX."""
from __future__ import annotations

import builtins
import operator
from typing import Any

import numpy as np

from xlc.frontend import dtypes
from xlc.frontend import lax as _lax
from xlc.frontend.eager import eager_ok
from xlc.frontend.tracer import Tracer, as_tracer, trace_error
from xlc.hlo.shape import PrimitiveType as PT

__all__ = ["full", "zeros", "ones", "full_like", "zeros_like", "ones_like", "arange",
           "linspace", "eye", "asarray", "array", "tril", "triu"]


def _api() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


# ---- creation ---------------------------------------------------------------------------
def _shape_tuple(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


@eager_ok
def full(shape: Any, fill_value: Any, dtype: Any = None) -> Tracer:
    """An array of `shape` filled with `fill_value` (dtype defaults to the value's)."""
    pt = dtypes.to_ptype(dtype) if dtype is not None else None
    v = as_tracer(fill_value, pt)
    if v.ndim:
        return _api().broadcast_to(v, _shape_tuple(shape))
    return _lax.broadcast_in_dim(v, _shape_tuple(shape), ())


@eager_ok
def zeros(shape: Any, dtype: Any = None) -> Tracer:
    """Zeros of `shape` (f32 by default)."""
    return full(shape, 0, dtype or np.float32)


@eager_ok
def ones(shape: Any, dtype: Any = None) -> Tracer:
    """Ones of `shape` (f32 by default)."""
    return full(shape, 1, dtype or np.float32)


@eager_ok
def full_like(a: Any, fill_value: Any, dtype: Any = None, shape: Any = None) -> Tracer:
    """Like `full` with `a`'s shape and dtype by default."""
    t = as_tracer(a)
    return full(t.shape if shape is None else shape, fill_value, dtype or t.ptype)


@eager_ok
def zeros_like(a: Any, dtype: Any = None) -> Tracer:
    """Zeros with `a`'s shape and dtype."""
    return full_like(a, 0, dtype)


@eager_ok
def ones_like(a: Any, dtype: Any = None) -> Tracer:
    """Ones with `a`'s shape and dtype."""
    return full_like(a, 1, dtype)


@eager_ok
def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> Tracer:
    """Evenly spaced values in [start, stop) (static bounds; s32 for ints, f32 for floats)."""
    if stop is None:
        start, stop = 0, start
    for v in (start, stop, step):
        if isinstance(v, Tracer):
            raise trace_error("arange: start/stop/step must be static Python numbers, got a "
                              "traced value")
    n = builtins.max(int(np.ceil((stop - start) / step)), 0)
    if dtype is None:
        is_int = builtins.all(isinstance(v, (int, np.integer)) for v in (start, stop, step))
        pt = PT.S32 if is_int else PT.F32
    else:
        pt = dtypes.to_ptype(dtype)
    i = _lax.iota(pt, n)
    if step != 1:
        i = _api().multiply(i, as_tracer(step, pt))
    if start != 0:
        i = _api().add(i, as_tracer(start, pt))
    return i


@eager_ok
def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True,
             retstep: bool = False, dtype: Any = None, axis: int = 0) -> Any:
    """`num` evenly spaced values from start to stop (scalars or arrays, which broadcast; the
    values run along `axis`), as JAX computes them: start * (1 - t) + stop * t for t = i / div,
    the endpoint exactly stop, differentiable in both. The type is `dtype`, else the bounds'
    float type: f32 for Python numbers and integers, f64 for f64 arrays. With `retstep`,
    (values, step)."""
    xnp = _api()
    if isinstance(num, Tracer) or operator.index(num) < 0:
        raise trace_error(f"linspace: num must be a static non-negative int, got {num!r}")
    s, e = xnp.promote(start, stop)
    pt = dtypes.to_ptype(dtype) if dtype is not None else dtypes.canonical_float(s.ptype)
    ct = dtypes.canonical_float(pt)
    s, e = xnp.broadcast_arrays(xnp.astype(s, ct.dtype), xnp.astype(e, ct.dtype))
    nd = s.ndim
    if not -nd - 1 <= axis <= nd:
        raise trace_error(f"linspace: axis {axis} is out of range for {nd + 1}-D values")
    axis = axis % (nd + 1)
    div = num - 1 if endpoint else num
    nan = xnp.full(s.shape, np.nan, ct.dtype)
    if num > 1:
        delta = xnp.divide(xnp.subtract(e, s), xnp.asarray(div, ct.dtype))
        real = {PT.C64: PT.F32, PT.C128: PT.F64}.get(ct, ct)
        shape = [1] * (nd + 1)
        shape[axis] = div
        t = xnp.reshape(xnp.divide(_lax.iota(real, div), xnp.asarray(div, real.dtype)), shape)
        t = xnp.astype(t, ct.dtype)
        out = xnp.add(xnp.multiply(xnp.expand_dims(s, axis), xnp.subtract(1, t)),
                      xnp.multiply(xnp.expand_dims(e, axis), t))
        if endpoint:
            out = xnp.concatenate([out, xnp.expand_dims(e, axis)], axis=axis)
    elif num == 1:
        delta = nan if endpoint else xnp.subtract(e, s)
        out = xnp.expand_dims(s, axis)
    else:
        delta = nan
        out = xnp.zeros(s.shape[:axis] + (0,) + s.shape[axis:], ct.dtype)
    if pt.is_integer:
        out = xnp.floor(out)
    out = xnp.astype(out, pt.dtype)
    return (out, delta) if retstep else out


@eager_ok
def eye(n: int, m: int | None = None, k: int = 0, dtype: Any = None) -> Tracer:
    """Identity-like matrix with ones on diagonal k."""
    m = n if m is None else m
    rows = _lax.broadcasted_iota(PT.S32, (n, m), 0)
    cols = _lax.broadcasted_iota(PT.S32, (n, m), 1)
    return _api().astype(_api().equal(_api().add(rows, k), cols), dtype or np.float32)


@eager_ok
def asarray(x: Any, dtype: Any = None) -> Tracer:
    """A traced array from a Tracer, numpy array or (nested lists of) scalars."""
    if isinstance(x, Tracer):
        return x if dtype is None else _api().astype(x, dtype)
    if isinstance(x, (list, tuple)):
        if _contains_tracer(x):
            return _api().stack([asarray(v, dtype) for v in x])
        try:
            x = np.asarray(x)
        except (ValueError, OverflowError) as e:  # ragged nesting
            raise trace_error(f"asarray: {e}") from None
        if x.dtype == np.object_:  # ints beyond 64 bits, None, other objects
            raise trace_error(f"asarray: cannot make a numeric array of {x.ravel().tolist()}")
        target = (dtypes.to_ptype(dtype) if dtype is not None else
                  PT.F32 if x.dtype == np.float64 else PT.S32 if x.dtype.kind in "iu" else None)
        if target is not None and target.is_integer and x.dtype.kind in "iu" and x.size:
            info = np.iinfo(target.dtype)
            lo, hi = int(x.min()), int(x.max())
            if lo < info.min or hi > info.max:  # Python ints that would wrap silently
                bad = lo if lo < info.min else hi
                raise trace_error(f"asarray: Python int {bad} does not fit in {target.text} "
                                  f"(range {info.min}..{info.max}); pass a dtype that holds it")
        if dtype is None and target is not None:
            x = x.astype(target.dtype)
    return as_tracer(x, dtypes.to_ptype(dtype) if dtype is not None else None)


array = asarray


def _contains_tracer(x: Any) -> bool:
    if isinstance(x, Tracer):
        return True
    return isinstance(x, (list, tuple)) and builtins.any(_contains_tracer(v) for v in x)


def _tri_mask(shape: tuple[int, ...], k: int, lower: bool) -> Tracer:
    n, m = shape[-2], shape[-1]
    rows = _lax.broadcasted_iota(PT.S32, (n, m), 0)
    cols = _lax.broadcasted_iota(PT.S32, (n, m), 1)
    xnp = _api()
    diag = xnp.add(rows, k)
    mask = xnp.less_equal(cols, diag) if lower else xnp.greater_equal(cols, diag)
    return _lax.broadcast_in_dim(mask, shape, (len(shape) - 2, len(shape) - 1))


@eager_ok
def tril(m: Any, k: int = 0) -> Tracer:
    """Zero the elements above diagonal k (last two dims)."""
    t = as_tracer(m)
    if t.ndim < 2:
        raise trace_error(f"tril: needs at least 2 dims, got {t.aval_text}")
    return _api().where(_tri_mask(t.shape, k, True), t, zeros_like(t))


@eager_ok
def triu(m: Any, k: int = 0) -> Tracer:
    """Zero the elements below diagonal k (last two dims)."""
    t = as_tracer(m)
    if t.ndim < 2:
        raise trace_error(f"triu: needs at least 2 dims, got {t.aval_text}")
    return _api().where(_tri_mask(t.shape, k, False), t, zeros_like(t))
