"""Reductions for `xlc.numpy`: sum/prod/max/min/mean/any/all/argmax/argmin/var/std over axes
with keepdims, cumulative sums/products via reduce-window, sort/argsort via HLO sort.

Result dtypes follow JAX: sum/prod of bool and of integers narrower than 32 bits accumulate in
s32 (u32 for unsigned); mean/var/std of integers are f32. As in `jax.numpy`, sum/prod/mean/var
with an f16/bf16 result compute in f32 (convert, reduce, divide, convert back), so neither the
accumulation nor the element count (65,504 is f16's largest) is held in 16 bits.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from xlc.frontend import dtypes
from xlc.frontend import lax as _lax
from xlc.frontend.eager import eager_ok
from xlc.frontend.tracer import Tracer, as_tracer, trace_error
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType as PT

__all__ = ["sum", "prod", "max", "min", "amax", "amin", "mean", "any", "all", "argmax",
           "argmin", "var", "std", "cumsum", "cumprod", "cummax", "cummin", "sort", "argsort"]

_builtin_max = max


def _axes(axis: Any, ndim: int, op: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    out = []
    for a in axes:
        if not -ndim <= int(a) < ndim:
            raise trace_error(f"{op}: axis {a} is out of bounds for an array of rank {ndim}")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise trace_error(f"{op}: repeated axis in {tuple(axes)}")
    return tuple(sorted(out))


def _keep(x: Tracer, r: Tracer, axes: tuple[int, ...], keepdims: bool) -> Tracer:
    if not keepdims:
        return r
    return _lax.reshape(r, [1 if i in axes else d for i, d in enumerate(x.shape)])


def _accum_type(pt: PT) -> PT:
    if pt is PT.PRED or pt in (PT.S8, PT.S16):
        return PT.S32
    if pt in (PT.U8, PT.U16):
        return PT.U32
    return pt


def _compute_type(pt: PT) -> PT:
    """The type jax.numpy's sum/prod/mean/var compute a `pt` result in: f32 for f16/bf16."""
    return PT.F32 if pt in (PT.F16, PT.BF16) else pt


def _monoid(x: Any, axis: Any, keepdims: bool, opcode: Opcode, init: Any, op: str,
            ptype: PT | None = None, upcast: bool = False) -> Tracer:
    """Reduce `x` over `axis` with `opcode`, giving a `ptype` result (default: x's type); with
    `upcast`, a 16-bit float result is computed in f32 (jax.numpy's sum and prod)."""
    t = as_tracer(x)
    result = ptype if ptype is not None else t.ptype
    compute = _compute_type(result) if upcast else result
    if compute is not t.ptype:
        t = _lax.convert_element_type(t, compute)
    axes = _axes(axis, t.ndim, op)
    r = _lax.reduce(t, np.asarray(init, t.dtype), opcode, axes)
    if result is not compute:
        r = _lax.convert_element_type(r, result)
    return _keep(t, r, axes, keepdims)


@eager_ok
def sum(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Tracer:  # noqa: A001
    """Sum over `axis` (all axes by default)."""
    t = as_tracer(a)
    pt = dtypes.to_ptype(dtype) if dtype is not None else _accum_type(t.ptype)
    return _monoid(t, axis, keepdims, Opcode.ADD, 0, "sum", pt, upcast=True)


@eager_ok
def prod(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Tracer:
    """Product over `axis`."""
    t = as_tracer(a)
    pt = dtypes.to_ptype(dtype) if dtype is not None else _accum_type(t.ptype)
    return _monoid(t, axis, keepdims, Opcode.MULTIPLY, 1, "prod", pt, upcast=True)


def _lowest(pt: PT) -> Any:
    if pt is PT.PRED:
        return False
    if pt.is_float:
        return -np.inf
    return np.iinfo(pt.dtype).min


def _highest(pt: PT) -> Any:
    if pt is PT.PRED:
        return True
    if pt.is_float:
        return np.inf
    return np.iinfo(pt.dtype).max


@eager_ok
def max(a: Any, axis: Any = None, keepdims: bool = False) -> Tracer:  # noqa: A001
    """Maximum over `axis` (NaN propagates)."""
    t = as_tracer(a)
    if t.ptype is PT.PRED:
        return _monoid(t, axis, keepdims, Opcode.OR, False, "max")
    _nonempty(t, axis, "max")
    return _monoid(t, axis, keepdims, Opcode.MAXIMUM, _lowest(t.ptype), "max")


@eager_ok
def min(a: Any, axis: Any = None, keepdims: bool = False) -> Tracer:  # noqa: A001
    """Minimum over `axis` (NaN propagates)."""
    t = as_tracer(a)
    if t.ptype is PT.PRED:
        return _monoid(t, axis, keepdims, Opcode.AND, True, "min")
    _nonempty(t, axis, "min")
    return _monoid(t, axis, keepdims, Opcode.MINIMUM, _highest(t.ptype), "min")


amax, amin = max, min


def _nonempty(t: Tracer, axis: Any, op: str) -> None:
    for ax in _axes(axis, t.ndim, op):
        if t.shape[ax] == 0:
            raise trace_error(f"{op}: zero-size array to reduction operation {op} which has no "
                              f"identity ({t.aval_text}, axis {ax})")


@eager_ok
def any(a: Any, axis: Any = None, keepdims: bool = False) -> Tracer:  # noqa: A001
    """True where any element along `axis` is nonzero."""
    from xlc.frontend.numpy_api import _to_bool

    return _monoid(_to_bool(a), axis, keepdims, Opcode.OR, False, "any")


@eager_ok
def all(a: Any, axis: Any = None, keepdims: bool = False) -> Tracer:  # noqa: A001
    """True where every element along `axis` is nonzero."""
    from xlc.frontend.numpy_api import _to_bool

    return _monoid(_to_bool(a), axis, keepdims, Opcode.AND, True, "all")


@eager_ok
def mean(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Tracer:
    """Arithmetic mean over `axis` (integers average in f32, f16/bf16 in f32 then rounded)."""
    t = as_tracer(a)
    pt = dtypes.to_ptype(dtype) if dtype is not None else dtypes.canonical_float(t.ptype)
    compute = _compute_type(pt)
    axes = _axes(axis, t.ndim, "mean")
    n = int(np.prod([t.shape[i] for i in axes], dtype=np.int64))
    s = sum(_lax.convert_element_type(t, compute), axis=axes, keepdims=keepdims)
    from xlc.frontend.numpy_api import true_divide

    m = true_divide(s, np.asarray(n, compute.dtype))
    return m if compute is pt else _lax.convert_element_type(m, pt)


@eager_ok
def var(a: Any, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Tracer:
    """Variance over `axis` (mean of squared deviations, divided by N - ddof)."""
    from xlc.frontend.numpy_api import multiply, subtract, true_divide

    t = as_tracer(a)
    pt = dtypes.canonical_float(t.ptype)
    compute = _compute_type(pt)
    t = _lax.convert_element_type(t, compute)
    axes = _axes(axis, t.ndim, "var")
    n = int(np.prod([t.shape[i] for i in axes], dtype=np.int64))
    d = subtract(t, mean(t, axis=axes, keepdims=True))
    s = sum(multiply(d, d), axis=axes, keepdims=keepdims)
    v = true_divide(s, np.asarray(_builtin_max(n - ddof, 0), compute.dtype))
    return v if compute is pt else _lax.convert_element_type(v, pt)


@eager_ok
def std(a: Any, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Tracer:
    """Standard deviation over `axis`."""
    from xlc.frontend.numpy_api import sqrt

    return sqrt(var(a, axis=axis, ddof=ddof, keepdims=keepdims))


def _arg_reduce(a: Any, axis: Any, keepdims: bool, greater: bool, op: str) -> Tracer:
    from xlc.frontend import numpy_api as xnp

    t = as_tracer(a)
    if t.ptype is PT.PRED:
        t = _lax.convert_element_type(t, PT.S32)
    if axis is None:
        flat = xnp.reshape(t, (-1,))
        r = _arg_reduce(flat, 0, False, greater, op)
        return _lax.reshape(r, [1] * t.ndim) if keepdims else r
    ax = _axes(axis, t.ndim, op)[0]
    if t.shape[ax] == 0:
        raise trace_error(f"{op}: attempt to get {op} of an empty sequence ({t.aval_text})")
    idx = _lax.broadcasted_iota(PT.S32, t.shape, ax)

    def reducer(av: Tracer, ai: Tracer, bv: Tracer, bi: Tracer) -> tuple[Tracer, Tracer]:
        a_nan, b_nan = xnp.isnan(av), xnp.isnan(bv)
        better = xnp.greater(av, bv) if greater else xnp.less(av, bv)
        better = xnp.logical_or(better, xnp.logical_and(a_nan, xnp.logical_not(b_nan)))
        tie = xnp.logical_or(xnp.equal(av, bv), xnp.logical_and(a_nan, b_nan))
        pick_a = xnp.logical_or(better, xnp.logical_and(tie, xnp.less(ai, bi)))
        return _lax.select(pick_a, av, bv), _lax.select(pick_a, ai, bi)

    init = _lowest(t.ptype) if greater else _highest(t.ptype)
    _, r = _lax.reduce((t, idx), (np.asarray(init, t.dtype), np.int32(0)),
                       reducer, (ax,))
    return _keep(t, r, (ax,), keepdims)


@eager_ok
def argmax(a: Any, axis: Any = None, keepdims: bool = False) -> Tracer:
    """Index (s32) of the first maximum along `axis` (first NaN wins, like numpy)."""
    return _arg_reduce(a, axis, keepdims, True, "argmax")


@eager_ok
def argmin(a: Any, axis: Any = None, keepdims: bool = False) -> Tracer:
    """Index (s32) of the first minimum along `axis`."""
    return _arg_reduce(a, axis, keepdims, False, "argmin")


def _cumulative(a: Any, axis: Any, opcode: Opcode, init: Any, op: str,
                accum: bool = True) -> Tracer:
    from xlc.frontend.numpy_api import reshape

    t = as_tracer(a)
    if axis is None:
        t, axis = reshape(t, (-1,)), 0
    if accum:
        t = _lax.convert_element_type(t, _accum_type(t.ptype))
    ax = _axes(axis, t.ndim, op)[0]
    n = t.shape[ax]
    if n == 0:
        return t
    win = [1] * t.ndim
    win[ax] = n
    pads = [(0, 0)] * t.ndim
    pads[ax] = (n - 1, 0)
    init_v = init(t.ptype) if callable(init) else init
    return _lax.reduce_window(t, np.asarray(init_v, t.dtype), opcode, win, None, pads)


@eager_ok
def cumsum(a: Any, axis: Any = None) -> Tracer:
    """Inclusive cumulative sum along `axis` (flattened if None), via reduce-window."""
    return _cumulative(a, axis, Opcode.ADD, 0, "cumsum")


@eager_ok
def cumprod(a: Any, axis: Any = None) -> Tracer:
    """Inclusive cumulative product along `axis`."""
    return _cumulative(a, axis, Opcode.MULTIPLY, 1, "cumprod")


@eager_ok
def cummax(a: Any, axis: Any = None) -> Tracer:
    """Running maximum along `axis`."""
    return _cumulative(a, axis, Opcode.MAXIMUM, _lowest, "cummax", accum=False)


@eager_ok
def cummin(a: Any, axis: Any = None) -> Tracer:
    """Running minimum along `axis`."""
    return _cumulative(a, axis, Opcode.MINIMUM, _highest, "cummin", accum=False)


@eager_ok
def sort(a: Any, axis: int | None = -1) -> Tracer:
    """Sorted copy along `axis` (ascending, NaNs last; flattened if None)."""
    from xlc.frontend.numpy_api import reshape

    t = as_tracer(a)
    if axis is None:
        t, axis = reshape(t, (-1,)), 0
    if t.ndim == 0:
        return t
    return _lax.sort(t, _axes(axis, t.ndim, "sort")[0])


@eager_ok
def argsort(a: Any, axis: int | None = -1) -> Tracer:
    """Indices (s32) that sort `a` along `axis` (stable)."""
    from xlc.frontend.numpy_api import reshape

    t = as_tracer(a)
    if axis is None:
        t, axis = reshape(t, (-1,)), 0
    ax = _axes(axis, t.ndim, "argsort")[0]
    idx = _lax.broadcasted_iota(PT.S32, t.shape, ax)
    _, out = _lax.sort((t, idx), ax, is_stable=True, num_keys=1)
    return out
