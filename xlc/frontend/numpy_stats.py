"""Statistics for `xlc.numpy`: weighted averages, quantiles and medians (sort + gather),
NaN-ignoring reductions, cumulative_sum/prod, cov/corrcoef and histograms with static bin
counts.

Semantics follow `jax.numpy`: integer inputs compute in f32; quantiles offer JAX's methods
('linear', 'lower', 'higher', 'midpoint', 'nearest', 'inverted_cdf') and are NaN for a slice
holding NaN; nanargmax of an all-NaN slice is -1; histogram counts are floats; every output
shape is static (bincount needs `length`, histogram a static `bins`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xlc.frontend import dtypes
from xlc.frontend import lax as _lax
from xlc.frontend import numpy_api as xnp
from xlc.frontend.eager import eager_ok
from xlc.frontend.numpy_math import _inexact
from xlc.frontend.numpy_poly import searchsorted
from xlc.frontend.numpy_reductions import _axes, _compute_type
from xlc.frontend.tracer import Tracer, as_tracer, trace_error
from xlc.hlo.shape import PrimitiveType as PT

__all__ = [
    "average", "count_nonzero", "ptp", "quantile", "percentile", "median", "nanquantile",
    "nanpercentile", "nanmedian", "nansum", "nanprod", "nanmax", "nanmin", "nanmean",
    "nanvar", "nanstd", "nanargmax", "nanargmin", "nancumsum", "nancumprod", "cumulative_sum",
    "cumulative_prod", "cov", "corrcoef", "histogram_bin_edges", "histogram", "bincount",
]


def _floats(*xs: Any) -> list[Tracer]:
    """Promoted together, integers and bools then in f32; complex stays complex."""
    ts = xnp.promote(*xs)
    pt = ts[0].ptype
    if pt.is_float or pt.is_complex:
        return ts
    return [xnp._convert_keep_weak(t, dtypes.canonical_float(pt), t.weak_type) for t in ts]


def _axis_list(axis: Any, ndim: int) -> list[int]:
    """`axis` (an int or a sequence) as non-negative ints in the order given."""
    return [int(a) % ndim for a in ([axis] if np.ndim(axis) == 0 else axis)]


# ---- averages and simple reductions -------------------------------------------------------
@eager_ok
def average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False,
            keepdims: bool = False) -> Any:
    """Weighted mean over `axis`; with `returned`, also the sum of the weights (broadcast to
    the mean's shape). 1-D weights go along a single `axis`, as numpy's."""
    t = as_tracer(a)
    axes = _axes(axis, t.ndim, "average")
    if weights is None:
        (t,) = _floats(t)
        avg = xnp.mean(t, axis=axes, keepdims=keepdims)
        count = int(np.prod([t.shape[d] for d in axes], dtype=np.int64))
        wsum = xnp.full(avg.shape, count, avg.dtype)
    else:
        t, w = _floats(t, weights)
        if w.shape != t.shape:
            if axis is None:
                raise trace_error(f"average: axis must be given when the weights {w.aval_text} "
                                  f"and a {t.aval_text} differ in shape")
            given = _axis_list(axis, t.ndim)
            if w.shape != tuple(t.shape[d] for d in given):
                raise trace_error(f"average: weights {w.aval_text} must have the shape of a "
                                  f"{t.aval_text} along axis {axis}")
            order = sorted(range(len(given)), key=lambda i: given[i])
            w = xnp.reshape(xnp.transpose(w, order),
                            [d if i in axes else 1 for i, d in enumerate(t.shape)])
        wsum = xnp.sum(xnp.broadcast_to(w, t.shape), axis=axes, keepdims=keepdims)
        avg = xnp.sum(t * w, axis=axes, keepdims=keepdims) / wsum
    if returned:
        return avg, xnp.broadcast_to(wsum, avg.shape)
    return avg


@eager_ok
def count_nonzero(a: Any, axis: Any = None, keepdims: bool = False) -> Tracer:
    """The number (s32) of nonzero elements along `axis`."""
    return xnp.sum(xnp.not_equal(a, 0), axis=axis, dtype=np.int32, keepdims=keepdims)


@eager_ok
def ptp(a: Any, axis: Any = None, keepdims: bool = False) -> Tracer:
    """Peak to peak, max - min along `axis`."""
    t = as_tracer(a)
    if t.ptype is PT.PRED:
        raise trace_error(f"ptp: not defined for bool arrays, got {t.aval_text}")
    return xnp.max(t, axis=axis, keepdims=keepdims) - xnp.min(t, axis=axis, keepdims=keepdims)


# ---- quantiles -----------------------------------------------------------------------------
_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")


def _to_last(t: Tracer, axis: Any, keepdims: bool, op: str) -> tuple[Tracer, tuple[int, ...]]:
    """`t` with the reduced axes moved last and merged into one, and the result's batch shape
    (the kept dims; all dims with the reduced ones 1 under `keepdims`)."""
    axes = _axes(axis, t.ndim, op)
    keep = [d for d in range(t.ndim) if d not in axes]
    n = int(np.prod([t.shape[d] for d in axes], dtype=np.int64))
    moved = xnp.reshape(xnp.transpose(t, keep + list(axes)), [t.shape[d] for d in keep] + [n])
    out = tuple(1 if d in axes else s for d, s in enumerate(t.shape)) if keepdims else \
        tuple(t.shape[d] for d in keep)
    return moved, out


def _pick(a: Tracer, idx: Tracer) -> Tracer:
    """a[..., idx] along the last axis, for idx of shape q_shape + a.shape[:-1]."""
    ab = xnp.broadcast_to(a, idx.shape + (a.shape[-1],))
    return xnp.squeeze(xnp.take_along_axis(ab, xnp.expand_dims(idx, -1), -1), -1)


def _check_quantile_args(name: str, q: Any, method: str, weights: Any) -> Tracer:
    if method not in _QUANTILE_METHODS:
        raise trace_error(f"{name}: method must be one of {', '.join(_QUANTILE_METHODS)}; "
                          f"got {method!r}")
    if weights is not None and method != "inverted_cdf":
        raise trace_error(f"{name}: weights are only supported with method='inverted_cdf', "
                          f"got method={method!r}")
    if not isinstance(q, Tracer) and not np.all((np.asarray(q) >= 0) & (np.asarray(q) <= 1)):
        raise trace_error(f"{name}: quantiles must be in the range [0, 1], got {q}")
    qt = as_tracer(q)
    if qt.ndim > 1:
        raise trace_error(f"{name}: q must be a scalar or 1-D, got {qt.aval_text}")
    return qt


def _quantile(name: str, a: Any, q: Any, axis: Any, method: str, keepdims: bool,
              squash_nans: bool, weights: Any = None) -> Tracer:
    """JAX's quantile: sort the merged reduction axis (NaNs last), gather the values at
    floor/ceil of q * (count - 1) and combine them by `method`; the result has shape
    q.shape + the batch shape and a's (inexact) dtype."""
    qt = _check_quantile_args(name, q, method, weights)
    ts = _inexact(name, a) if weights is None else _inexact(name, a, weights)
    if weights is not None and ts[1].shape != ts[0].shape:
        raise trace_error(f"{name}: weights {ts[1].aval_text} must have the shape of a "
                          f"{ts[0].aval_text}")
    ct = dtypes.result_type((ts[0].ptype, False), (qt.ptype, qt.weak_type))[0]
    ct = PT.F32 if ct in (PT.F16, PT.BF16) or not ct.is_float else ct
    moved = [_to_last(t, axis, keepdims, name) for t in ts]
    x, bshape = moved[0]
    nan = xnp.isnan(x)
    if not squash_nans:
        x = xnp.where(xnp.any(nan, axis=-1, keepdims=True), np.nan, x)
    if weights is None:
        x, wx = _lax.sort(x, x.ndim - 1), None
    else:
        x, wx = _lax.sort((x, moved[1][0]), x.ndim - 1, num_keys=1)
    if squash_nans:
        top = xnp.sum(~nan, axis=-1, dtype=ct.dtype) - 1
    else:
        top = xnp.full(x.shape[:-1], x.shape[-1] - 1, ct.dtype)
    # a Python or numpy q becomes a constant of the computation type directly (an f32
    # constant first would round q = 0.7 before an f64 computation)
    qv = qt if isinstance(q, Tracer) else xnp.asarray(np.asarray(q, ct.dtype))
    qc = xnp.reshape(xnp.astype(qv, ct.dtype), qt.shape + (1,) * (x.ndim - 1))
    if method == "inverted_cdf":
        r = _inverted_cdf(x, wx, qc, top, squash_nans)
    else:
        pos = qc * top
        hw = pos - xnp.floor(pos)
        lo = xnp.astype(xnp.clip(xnp.minimum(xnp.floor(pos), top), 0), np.int32)
        hi = xnp.astype(xnp.clip(xnp.minimum(xnp.ceil(pos), top), 0), np.int32)
        lv, hv = _pick(x, lo), _pick(x, hi)
        if method == "linear":
            r = xnp.astype(lv, ct.dtype) * (1 - hw) + xnp.astype(hv, ct.dtype) * hw
        elif method == "lower":
            r = lv
        elif method == "higher":
            r = hv
        elif method == "nearest":
            r = xnp.where(hw <= 0.5, lv, hv)
        else:
            r = (lv + hv) * 0.5
    return xnp.astype(xnp.reshape(r, qt.shape + bshape), ts[0].dtype)


def _inverted_cdf(x: Tracer, wx: Tracer | None, qc: Tracer, top: Tracer,
                  squash_nans: bool) -> Tracer:
    """JAX's inverted_cdf on sorted x (weights wx sorted alongside): the first value whose
    cumulative weight reaches q * total; NaN where a weight is negative or NaN, where the
    slice is all NaN, and (without squash_nans) where it holds any NaN."""
    w = xnp.full(x.shape, 1, x.dtype) if wx is None else wx
    bad = xnp.logical_or(w < 0, xnp.isnan(w))
    nan = xnp.isnan(x)
    cw = xnp.cumsum(xnp.where(xnp.logical_or(bad, nan), 0, w), axis=-1)
    target = xnp.expand_dims(qc, -1) * cw[..., -1:]
    idx = xnp.sum(cw < target, axis=-1, dtype=np.int32)
    idx = xnp.clip(xnp.minimum(idx, xnp.astype(top, np.int32)), 0)
    force = xnp.logical_or(xnp.any(bad, axis=-1),
                           top < 0 if squash_nans else xnp.any(nan, axis=-1))
    return xnp.where(force, np.nan, _pick(x, idx))


@eager_ok
def quantile(a: Any, q: Any, axis: Any = None, method: str = "linear", keepdims: bool = False,
             *, weights: Any = None) -> Tracer:
    """The q-th quantiles (q in [0, 1], a scalar or 1-D) along `axis`; NaN for a slice with
    NaN."""
    return _quantile("quantile", a, q, axis, method, keepdims, False, weights)


@eager_ok
def nanquantile(a: Any, q: Any, axis: Any = None, method: str = "linear",
                keepdims: bool = False, *, weights: Any = None) -> Tracer:
    """Like quantile, ignoring NaNs (NaN for an all-NaN slice)."""
    return _quantile("nanquantile", a, q, axis, method, keepdims, True, weights)


def _percent(name: str, q: Any) -> Any:
    if isinstance(q, Tracer):
        (qt,) = _inexact(name, q)
        return qt / 100
    return np.asarray(q, np.float64) / 100 if np.ndim(q) else float(q) / 100


@eager_ok
def percentile(a: Any, q: Any, axis: Any = None, method: str = "linear",
               keepdims: bool = False, *, weights: Any = None) -> Tracer:
    """The q-th percentiles (q in [0, 100]) along `axis`."""
    return _quantile("percentile", a, _percent("percentile", q), axis, method, keepdims, False,
                     weights)


@eager_ok
def nanpercentile(a: Any, q: Any, axis: Any = None, method: str = "linear",
                  keepdims: bool = False, *, weights: Any = None) -> Tracer:
    """Like percentile, ignoring NaNs."""
    return _quantile("nanpercentile", a, _percent("nanpercentile", q), axis, method, keepdims,
                     True, weights)


@eager_ok
def median(a: Any, axis: Any = None, keepdims: bool = False) -> Tracer:
    """The median along `axis` (the midpoint of the two middle values for even counts)."""
    return _quantile("median", a, 0.5, axis, "midpoint", keepdims, False)


@eager_ok
def nanmedian(a: Any, axis: Any = None, keepdims: bool = False) -> Tracer:
    """The median ignoring NaNs (NaN for an all-NaN slice)."""
    return _quantile("nanmedian", a, 0.5, axis, "midpoint", keepdims, True)


# ---- NaN-ignoring reductions ----------------------------------------------------------------
def _fill_nan(a: Any, value: float) -> Tracer:
    t = as_tracer(a)
    return xnp.where(xnp.isnan(t), value, t) if t.ptype.is_float else t


@eager_ok
def nansum(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Tracer:
    """Sum treating NaNs as zero."""
    return xnp.sum(_fill_nan(a, 0), axis=axis, dtype=dtype, keepdims=keepdims)


@eager_ok
def nanprod(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Tracer:
    """Product treating NaNs as one."""
    return xnp.prod(_fill_nan(a, 1), axis=axis, dtype=dtype, keepdims=keepdims)


def _nan_extreme(a: Any, axis: Any, keepdims: bool, fill: float, fn: Any) -> Tracer:
    t = as_tracer(a)
    if not t.ptype.is_float:
        return fn(t, axis=axis, keepdims=keepdims)
    r = fn(_fill_nan(t, fill), axis=axis, keepdims=keepdims)
    return xnp.where(xnp.all(xnp.isnan(t), axis=axis, keepdims=keepdims), np.nan, r)


@eager_ok
def nanmax(a: Any, axis: Any = None, keepdims: bool = False) -> Tracer:
    """Maximum ignoring NaNs (NaN for an all-NaN slice)."""
    return _nan_extreme(a, axis, keepdims, -np.inf, xnp.max)


@eager_ok
def nanmin(a: Any, axis: Any = None, keepdims: bool = False) -> Tracer:
    """Minimum ignoring NaNs (NaN for an all-NaN slice)."""
    return _nan_extreme(a, axis, keepdims, np.inf, xnp.min)


@eager_ok
def nanmean(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Tracer:
    """Mean of the non-NaN elements (NaN for an all-NaN slice; f16 computes in f32)."""
    t = as_tracer(a)
    if not t.ptype.is_float:
        return xnp.mean(t, axis=axis, dtype=dtype, keepdims=keepdims)
    pt = dtypes.to_ptype(dtype) if dtype is not None else t.ptype
    ct = _compute_type(pt).dtype
    count = xnp.sum(~xnp.isnan(t), axis=axis, dtype=ct, keepdims=keepdims)
    return xnp.astype(nansum(xnp.astype(t, ct), axis=axis, keepdims=keepdims) / count, pt.dtype)


@eager_ok
def nanvar(a: Any, axis: Any = None, dtype: Any = None, ddof: int = 0,
           keepdims: bool = False) -> Tracer:
    """Variance of the non-NaN elements over count - ddof (NaN when that is <= 0)."""
    t = as_tracer(a)
    pt = dtypes.to_ptype(dtype) if dtype is not None else dtypes.canonical_float(t.ptype)
    ct = _compute_type(pt).dtype
    t = xnp.astype(t, ct)
    nan = xnp.isnan(t)
    centered = xnp.where(nan, 0, t - nanmean(t, axis=axis, keepdims=True))
    n = xnp.sum(~nan, axis=axis, keepdims=keepdims) - ddof
    s = xnp.sum(centered * centered, axis=axis, keepdims=keepdims)
    r = xnp.where(n <= 0, np.nan, s) / xnp.astype(xnp.where(n <= 0, 1, n), ct)
    return xnp.astype(r, pt.dtype)


@eager_ok
def nanstd(a: Any, axis: Any = None, dtype: Any = None, ddof: int = 0,
           keepdims: bool = False) -> Tracer:
    """Standard deviation of the non-NaN elements."""
    return xnp.sqrt(nanvar(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims))


def _nan_arg(a: Any, axis: Any, keepdims: bool, fill: float, fn: Any) -> Tracer:
    t = as_tracer(a)
    if not t.ptype.is_float:
        return fn(t, axis=axis, keepdims=keepdims)
    r = fn(_fill_nan(t, fill), axis=axis, keepdims=keepdims)
    return xnp.where(xnp.all(xnp.isnan(t), axis=axis, keepdims=keepdims), -1, r)


@eager_ok
def nanargmax(a: Any, axis: Any = None, keepdims: bool = False) -> Tracer:
    """Index of the maximum ignoring NaNs (-1 for an all-NaN slice, as in JAX)."""
    return _nan_arg(a, axis, keepdims, -np.inf, xnp.argmax)


@eager_ok
def nanargmin(a: Any, axis: Any = None, keepdims: bool = False) -> Tracer:
    """Index of the minimum ignoring NaNs (-1 for an all-NaN slice, as in JAX)."""
    return _nan_arg(a, axis, keepdims, np.inf, xnp.argmin)


def _cum(fn: Any, t: Tracer, axis: Any, dtype: Any) -> Tracer:
    if dtype is None:
        return fn(t, axis=axis)
    return xnp.astype(fn(xnp.astype(t, dtype), axis=axis), dtype)


@eager_ok
def nancumsum(a: Any, axis: Any = None, dtype: Any = None) -> Tracer:
    """Cumulative sum treating NaNs as zero (flattened if axis is None)."""
    return _cum(xnp.cumsum, _fill_nan(a, 0), axis, dtype)


@eager_ok
def nancumprod(a: Any, axis: Any = None, dtype: Any = None) -> Tracer:
    """Cumulative product treating NaNs as one."""
    return _cum(xnp.cumprod, _fill_nan(a, 1), axis, dtype)


def _cumulative(name: str, fn: Any, x: Any, axis: Any, dtype: Any, include_initial: bool,
                init: int) -> Tracer:
    t = as_tracer(x)
    if t.ndim == 0:
        raise trace_error(f"{name}: the input must not be a scalar, got {t.aval_text}")
    if axis is None:
        if t.ndim > 1:
            raise trace_error(f"{name}: axis must be given for an array of rank {t.ndim} "
                              f"({t.aval_text})")
        axis = 0
    ax = _axes(axis, t.ndim, name)[0]
    out = _cum(fn, t, ax, dtype)
    if include_initial:
        shape = list(t.shape)
        shape[ax] = 1
        out = xnp.concatenate([xnp.full(shape, init, out.dtype), out], ax)
    return out


@eager_ok
def cumulative_sum(x: Any, axis: int | None = None, dtype: Any = None,
                   include_initial: bool = False) -> Tracer:
    """The array API cumulative sum along `axis` (required above rank 1), optionally starting
    with 0."""
    return _cumulative("cumulative_sum", xnp.cumsum, x, axis, dtype, include_initial, 0)


@eager_ok
def cumulative_prod(x: Any, axis: int | None = None, dtype: Any = None,
                    include_initial: bool = False) -> Tracer:
    """The array API cumulative product along `axis`, optionally starting with 1."""
    return _cumulative("cumulative_prod", xnp.cumprod, x, axis, dtype, include_initial, 1)


# ---- covariance ---------------------------------------------------------------------------
def _as_rows(x: Tracer, rowvar: bool) -> Tracer:
    """Variables as rows: a 1-D x is one variable; without rowvar a 2-D x is transposed."""
    if x.ndim < 2:
        return xnp.reshape(x, (1, -1))
    return x if rowvar else xnp.transpose(x)


def _cov_weights(name: str, v: Any, n: int, dtype: np.dtype) -> Tracer:
    vt = as_tracer(v)
    if vt.ndim != 1 or vt.shape[0] != n:
        raise trace_error(f"cov: {name} must be 1-D with one weight per observation ({n}), "
                          f"got {vt.aval_text}")
    if name == "fweights" and not vt.ptype.is_integer:
        raise trace_error(f"cov: fweights must be integers, got {vt.aval_text}")
    return xnp.astype(abs(vt), dtype)


@eager_ok
def cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: int | None = None,
        fweights: Any = None, aweights: Any = None, dtype: Any = None) -> Tracer:
    """Covariance matrix of the variables (rows, or columns without `rowvar`) of m and y,
    with optional integer frequency and real analytic weights."""
    xs = _floats(m) if y is None else _floats(m, y)
    if any(x.ndim > 2 for x in xs):
        raise trace_error("cov: m and y must have at most 2 dimensions, got "
                          + " and ".join(x.aval_text for x in xs))
    X = _as_rows(xs[0], rowvar)
    if y is not None:
        Y = _as_rows(xs[1], True)
        X = xnp.concatenate([X, Y if rowvar or Y.shape[0] == 1 else xnp.transpose(Y)], 0)
    if dtype is not None:
        if not (dtypes.to_ptype(dtype).is_float or dtypes.to_ptype(dtype).is_complex):
            raise trace_error(f"cov: dtype must be a float or complex type, got {dtype!r}")
        X = xnp.astype(X, dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    n = X.shape[1]
    fw = None if fweights is None else _cov_weights("fweights", fweights, n, X.dtype)
    aw = None if aweights is None else _cov_weights("aweights", aweights, n, X.dtype)
    w = aw if fw is None else (fw if aw is None else fw * aw)
    avg, wsum = average(X, axis=1, weights=w, returned=True)
    wsum = wsum[0]
    if w is None:
        f: Any = n - ddof
    elif ddof == 0:
        f = wsum
    elif aw is None:
        f = wsum - ddof
    else:
        f = wsum - ddof * xnp.sum(w * aw) / wsum
    Xc = X - xnp.expand_dims(avg, 1)
    Xw = Xc if w is None else Xc * w
    return xnp.squeeze(xnp.dot(Xc, xnp.transpose(Xw)) / f)


@eager_ok
def corrcoef(x: Any, y: Any = None, rowvar: bool = True, dtype: Any = None) -> Tracer:
    """Pearson correlation coefficients: cov over the outer product of the standard
    deviations, clipped to [-1, 1]."""
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    n = c.shape[0]
    eye = _lax.broadcasted_iota(PT.S32, (n, n), 0) == _lax.broadcasted_iota(PT.S32, (n, n), 1)
    sd = xnp.sqrt(xnp.sum(xnp.where(eye, c, 0), axis=1))
    return xnp.clip(c / xnp.expand_dims(sd, 1) / xnp.expand_dims(sd, 0), -1, 1)


# ---- histograms ------------------------------------------------------------------------------
@eager_ok
def histogram_bin_edges(a: Any, bins: Any = 10, range: Sequence[Any] | None = None,  # noqa: A002
                        weights: Any = None) -> Tracer:
    """The edges histogram uses: the given 1-D `bins`, or a static count of equal bins over
    `range` (default the data's min and max, widened by 0.5 each way when they are equal)."""
    del weights
    (t,) = _floats(a)
    if isinstance(bins, str):
        raise trace_error(f"histogram_bin_edges: string bins ({bins!r}) are not supported")
    if isinstance(bins, Tracer) or np.ndim(bins) == 1:
        return xnp.asarray(bins, t.dtype)
    nb = int(bins)
    if nb < 1:
        raise trace_error(f"histogram_bin_edges: bins must be positive, got {bins}")
    if range is None:
        lo, hi = xnp.min(t), xnp.max(t)
    elif len(range) != 2:
        raise trace_error(f"histogram_bin_edges: range must be (min, max), got {range}")
    else:
        lo, hi = xnp.astype(range[0], t.dtype), xnp.astype(range[1], t.dtype)
    same = lo == hi
    lo, hi = xnp.where(same, lo - 0.5, lo), xnp.where(same, hi + 0.5, hi)
    frac = _lax.convert_element_type(_lax.iota(PT.S32, nb + 1), t.ptype) / nb
    return lo * (1 - frac) + hi * frac  # JAX's linspace: the last edge is exactly hi


@eager_ok
def histogram(a: Any, bins: Any = 10, range: Sequence[Any] | None = None,  # noqa: A002
              weights: Any = None, density: bool | None = None) -> tuple[Tracer, Tracer]:
    """(counts, edges): (weighted) float counts of the flattened a per bin, the last bin
    closed; values outside the edges are dropped."""
    if weights is None:
        (t,) = _floats(a)
        w = xnp.full(t.shape, 1, t.dtype)
    else:
        t, w = _floats(a, weights)
        if t.shape != w.shape:
            raise trace_error(f"histogram: weights {w.aval_text} must have the shape of a "
                              f"{t.aval_text}")
    edges = histogram_bin_edges(t, bins, range)
    ne = edges.shape[0]
    t, w = xnp.ravel(t), xnp.ravel(w)
    idx = xnp.where(t == edges[-1], ne - 1, searchsorted(edges, t, side="right"))
    idx = xnp.where(idx > ne - 1, 0, idx)  # beyond the last edge: into slot 0, dropped below
    counts = xnp.zeros(ne, w.dtype).at[idx].add(w)[1:]
    if density:
        counts = counts / (edges[1:] - edges[:-1]) / xnp.sum(counts)
    return counts, edges


@eager_ok
def bincount(x: Any, weights: Any = None, minlength: int = 0, *,
             length: int | None = None) -> Tracer:
    """Counts (or summed weights) of each value of the integer 1-D x over a static `length`
    (values >= length are dropped, negatives count as 0; `minlength` only matters without
    `length`, which xlc requires, as JAX does under jit)."""
    t = as_tracer(x)
    if t.ptype is PT.PRED:
        t = xnp.astype(t, np.int32)
    if not t.ptype.is_integer or t.ndim != 1:
        raise trace_error(f"bincount: x must be a 1-D integer array, got {t.aval_text}")
    if length is None:
        raise trace_error("bincount: the output length depends on the values of x; pass a "
                          "static length= (jax.numpy.bincount needs it under jit too)")
    n = int(length)
    w = xnp.full(t.shape, 1, np.int32) if weights is None else as_tracer(weights)
    if w.shape != t.shape:
        raise trace_error(f"bincount: weights {w.aval_text} must have the shape of x "
                          f"{t.aval_text}")
    idx = xnp.where(t < n, xnp.clip(t, 0), n)
    return xnp.zeros(n + 1, w.dtype).at[idx].add(w)[:n]
