"""xlc.numpy statistics, polynomials and signal functions (numpy_stats.py, numpy_poly.py)
against numpy and jax.numpy. Every case is one function of the namespace (`m` = xnp, np or
jnp), traced through `jit_run` (evaluator and CPU); dtypes must equal jax's (f64 cases with x64
on, where only the integer outputs may stay s32), values numpy's where numpy agrees."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import xlc.numpy as xnp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.frontend.helpers import assert_close, jit_run
from xlc.errors import TraceError

SETTINGS = settings(max_examples=8, deadline=None)
RNG = np.random.default_rng(7)
X = RNG.standard_normal((4, 6))
XN = X.copy()
XN[0, 2], XN[1, 0], XN[3, :] = np.nan, np.nan, np.nan
W = RNG.uniform(0.5, 2.0, 6)
A = np.sort(RNG.standard_normal(9))
V = np.concatenate([RNG.standard_normal(7), A[[0, 4, 8]], [np.nan, 10.0]]).reshape(3, 4)
Q = np.array([0.0, 0.25, 0.5, 0.9, 1.0])
I = np.array([[3, 0, -2, 5, 0, 1], [0, 0, 7, 1, 2, 2]], np.int32)  # noqa: E741
P, R = np.array([2.0, -3.0, 0.5, 1.0]), np.array([1.5, -1.0])
PHASE = np.cumsum(RNG.uniform(-5, 5, (3, 8)), axis=1)
T3 = RNG.standard_normal((2, 3, 4))


def _kw(m, **kw):
    """Keyword arguments numpy lacks (JAX and xlc extensions) only for jnp and xnp."""
    return {} if m is np else kw


def _bincount_np(i, length):
    return np.bincount(i, minlength=length)[:length]


# name -> (function of the namespace m and the arrays, arrays, numpy: True | False | override)
CASES = {
    "average": (lambda m, x, w: m.average(x, axis=1, weights=w, returned=True), (X, W), True),
    "average_all": (lambda m, x: m.average(x, keepdims=True), (X,), True),
    "average_2d_weights": (lambda m, x: m.average(x, axis=(0, 1), weights=x * x), (X,), True),
    "count_nonzero": (lambda m, i: m.count_nonzero(i, axis=0), (I,), True),
    "ptp": (lambda m, x: m.ptp(x, axis=1, keepdims=True), (X,), True),
    "median": (lambda m, x: (m.median(x, axis=1), m.median(x)), (X,), True),
    "median_of_nan": (lambda m, x: m.median(x, axis=0, keepdims=True), (XN,), True),
    "percentile": (lambda m, x: m.percentile(x, np.array([10.0, 50.0]), axis=0,
                                             keepdims=True), (X,), True),
    "nanquantile": (lambda m, x, q: m.nanquantile(x, q, axis=1), (XN, Q), True),
    "nanpercentile": (lambda m, x: m.nanpercentile(x, 35.0, axis=(0, 1)), (XN,), True),
    "nanmedian": (lambda m, x: m.nanmedian(x, axis=1), (XN,), True),
    "nansum": (lambda m, x: (m.nansum(x, axis=1), m.nansum(x)), (XN,), True),
    "nanprod": (lambda m, x: m.nanprod(x, axis=0), (XN,), True),
    "nanmax": (lambda m, x: m.nanmax(x, axis=1, keepdims=True), (XN,), True),
    "nanmin": (lambda m, x: m.nanmin(x, axis=1), (XN,), True),
    "nanmean": (lambda m, x: m.nanmean(x, axis=1), (XN,), True),
    "nanvar": (lambda m, x: (m.nanvar(x, axis=1), m.nanvar(x, ddof=1)), (XN,), True),
    "nanstd": (lambda m, x: m.nanstd(x, axis=0, ddof=1), (XN,), True),
    "nanargmax": (lambda m, x: m.nanargmax(x[:3], axis=1), (XN,), True),
    "nanargmin": (lambda m, x: (m.nanargmin(x[:3], axis=1), m.nanargmin(x)), (XN,), True),
    "nanargmax_all_nan": (lambda m, x: m.nanargmax(x, axis=1), (XN,), False),  # -1 in jax
    "nancumsum": (lambda m, x: (m.nancumsum(x, axis=1), m.nancumsum(x)), (XN,), True),
    "nancumprod": (lambda m, x: m.nancumprod(x, axis=0), (XN,), True),
    "cumulative_sum": (lambda m, x: m.cumulative_sum(x, axis=1, include_initial=True), (X,),
                       True),
    "cumulative_prod": (lambda m, x: m.cumulative_prod(x[0]), (X,), True),
    "cumulative_sum_int": (lambda m, i: m.cumulative_sum(i[0], include_initial=True), (I,),
                           False),
    "cov": (lambda m, x: (m.cov(x), m.cov(x, rowvar=False, bias=True), m.cov(x, ddof=2)),
            (X,), True),
    "cov_weights": (lambda m, x, w: m.cov(x, fweights=np.array([1, 2, 1, 3, 1, 1]),
                                          aweights=w), (X, W), True),
    "cov_xy": (lambda m, x: (m.cov(x[0], x[1]), m.cov(x[0])), (X,), True),
    "corrcoef": (lambda m, x: (m.corrcoef(x), m.corrcoef(x[0], x[2])), (X,), True),
    "searchsorted": (lambda m, a, v: (m.searchsorted(a, v), m.searchsorted(a, v, side="right"),
                                      m.searchsorted(a[::-1], v, sorter=np.arange(8, -1, -1))),
                     (A, V), True),
    "searchsorted_compare_all": (lambda m, a, v: tuple(m.searchsorted(
        a, v, side=s, **_kw(m, method="compare_all")) for s in ("left", "right")), (A, V), True),
    "searchsorted_int": (lambda m, i: m.searchsorted(np.array([-2, 0, 0, 3, 9], np.int32), i,
                                                     side="right"), (I,), True),
    "digitize": (lambda m, a, v: (m.digitize(v, a), m.digitize(v, a[::-1], right=True)),
                 (A, V), True),
    "interp": (lambda m, v, a: (m.interp(v, a, a * a), m.interp(v, a, a, left=-5.0,
                                                                 right=5.0)), (V, A), True),
    "interp_period": (lambda m, v, a: m.interp(v, a, m.sin(a), period=2.0), (V, A), True),
    "histogram": (lambda m, x: m.histogram(x, bins=5), (X,), True),
    "histogram_weighted": (lambda m, x, w: m.histogram(x[0], bins=4, range=(-1.0, 1.0),
                                                       weights=w, density=True), (X, W), True),
    "histogram_edges": (lambda m, x, a: m.histogram(x, bins=a), (X, A), True),
    "histogram_bin_edges": (lambda m, x: m.histogram_bin_edges(x, bins=6), (X,), True),
    "bincount": (lambda m, i: m.bincount(i[1], length=9), (I,),
                 lambda i: _bincount_np(i[1], 9)),
    "bincount_weights": (lambda m, i, w: m.bincount(i[1], weights=w, length=4), (I, W),
                         lambda i, w: np.bincount(i[1], weights=w)[:4]),
    "polyval": (lambda m, p, v: m.polyval(p, v), (P, V), True),
    "polyval_int": (lambda m, i: m.polyval(i[0], np.int32(2)), (I,), True),
    "polyadd_polysub": (lambda m, p, r: (m.polyadd(p, r), m.polysub(r, p)), (P, R), True),
    "polymul": (lambda m, p, r: (m.polymul(p, r), m.polymul(r, p)), (P, R), True),
    "polyder": (lambda m, p: (m.polyder(p), m.polyder(p, 2), m.polyder(p, 0)), (P,), True),
    "polyint": (lambda m, p: (m.polyint(p), m.polyint(p, 2, k=np.array([1.0, -2.0]))), (P,),
                True),
    "polydiv": (lambda m, p, r: m.polydiv(p, r), (P, R), False),  # numpy trims r
    "poly": (lambda m, p: m.poly(p), (P,), True),
    "vander": (lambda m, p: (m.vander(p), m.vander(p, 3, increasing=True)), (P,), True),
    "vander_int": (lambda m, i: m.vander(i[0], 4), (I,), True),
    "convolve": (lambda m, a, r: tuple(m.convolve(x, y, mode) for mode in ("full", "same",
                 "valid") for x, y in ((a, r), (r, a), (a, a[:4])) ), (A, R), True),
    "correlate": (lambda m, a, r: tuple(m.correlate(x, y, mode) for mode in ("full", "same",
                  "valid") for x, y in ((a, r), (r, a), (a[:4], a))), (A, R), True),
    "diff": (lambda m, x: (m.diff(x), m.diff(x, n=2, axis=0, prepend=0.0),
                           m.diff(x, append=x[:, :1]), m.diff(x > 0)), (X,), True),
    "ediff1d": (lambda m, x: m.ediff1d(x, to_begin=np.array([1.0, 2.0]), to_end=3.0), (X,),
                True),
    "gradient": (lambda m, x, a: (*m.gradient(x), m.gradient(x, 0.5, axis=1),
                                  m.gradient(x[0], a[:6])), (X, A), True),
    "trapezoid": (lambda m, x, a: (m.trapezoid(x), m.trapezoid(x, dx=0.5, axis=0),
                                   m.trapezoid(x, a[:6])), (X, A), True),
    "unwrap": (lambda m, p: (m.unwrap(p), m.unwrap(p, axis=0, period=4.0),
                             m.unwrap(p, discont=4.0)), (PHASE,), True),
    "cross": (lambda m, t: (m.cross(t[..., :3], t[0, :, 1:]), m.cross(t[0, :, :3], t[1, :, :2]),
                            m.cross(t[:, :2, 0], t[:, :2, 1], axis=1)), (T3,), True),
    "kron": (lambda m, t, i: (m.kron(t[0], i), m.kron(t[0, 0], t[1])), (T3, I), True),
    "vecdot_matvec_vecmat": (lambda m, t: (m.vecdot(t, t[0]), m.vecdot(t, t[:, :, :1], axis=1),
                                           m.matvec(t, t[0, 0]), m.vecmat(t[0, :, 0], t)),
                              (T3,), True),
}
for _meth in ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf"):
    CASES[f"quantile_{_meth}"] = (lambda m, x, q, meth=_meth: m.quantile(x, q, axis=1,
                                  method=meth), (X, Q), True)
F64_CASES = ["average", "median", "nanquantile", "nanvar", "nancumsum", "cov_weights", "interp",
             "histogram_weighted", "polyval", "polyint", "convolve", "gradient", "trapezoid",
             "unwrap", "quantile_linear", "searchsorted"]


def _jax_ref(fn, args, x64):
    jax = pytest.importorskip("jax")
    with jax.enable_x64(x64):
        out = fn(jax.numpy, *[jax.numpy.asarray(a) for a in args])
        return jax.tree_util.tree_map(np.asarray, out)


def _like_jax(got, want, x64):
    """Values and dtypes of jax; with x64, jax's integer outputs may be s64 where xlc's are
    s32."""
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _like_jax(g, w, x64)
        return
    got, want = np.asarray(got), np.asarray(want)
    if x64 and want.dtype.kind in "iu":
        assert got.dtype.kind == want.dtype.kind, (got.dtype, want.dtype)
        want = want.astype(got.dtype)
    tol = 1e-10 if want.dtype == np.float64 else 2e-5
    assert_close(got, want, rtol=tol, atol=tol)


def _like_numpy(got, want):
    if isinstance(want, (tuple, list)):
        for g, w in zip(got, want):
            _like_numpy(g, w)
        return
    got = np.asarray(got)
    tol = 1e-10 if got.dtype == np.float64 else 2e-5
    assert_close(got, np.asarray(want).astype(got.dtype), rtol=tol, atol=tol)


def _cast(args, dt):
    return tuple(a.astype(dt) if a.dtype == np.float64 else a for a in args)


@pytest.mark.parametrize("name, dt", [(n, "f32") for n in sorted(CASES)]
                         + [(n, "f64") for n in F64_CASES])
def test_against_numpy_and_jax(name, dt):
    fn, args, numpy_ref = CASES[name]
    args = _cast(args, np.float32 if dt == "f32" else np.float64)
    got = jit_run(lambda *a: fn(xnp, *a), *args)
    _like_jax(got, _jax_ref(fn, args, dt == "f64"), dt == "f64")
    if numpy_ref is False:
        return
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = fn(np, *args) if numpy_ref is True else numpy_ref(*args)
    _like_numpy(got, want)


@pytest.mark.parametrize("name", ["bartlett", "blackman", "hamming", "hanning", "kaiser"])
@pytest.mark.parametrize("size", [0, 1, 7])
def test_window_functions(name, size):
    args = (size, 4.5) if name == "kaiser" else (size,)
    got = jit_run(lambda: getattr(xnp, name)(*args))
    _like_jax(got, _jax_ref(lambda m: getattr(m, name)(*args), (), False), False)
    _like_numpy(got, getattr(np, name)(*args))


def test_eager_calls_and_polydiv_remainder():
    x = X.astype(np.float32)
    assert_close(xnp.median(x, axis=0), np.median(x, axis=0).astype(np.float32))
    assert_close(xnp.nanmean(XN.astype(np.float32)), np.float32(np.nanmean(XN)), rtol=1e-6)
    q, r = xnp.polydiv(np.array([1.0, 2.0, 3.0, 4.0], np.float32), np.float32([2.0, 1.0]))
    nq, nr = np.polydiv([1.0, 2.0, 3.0, 4.0], [2.0, 1.0])
    assert_close(q, nq.astype(np.float32))
    assert_close(r, np.concatenate([[0, 0, 0], nr]).astype(np.float32))  # untrimmed, as jax
    counts, edges = xnp.histogram(x, bins=3)
    assert counts.dtype == np.float32 and edges.shape == (4,)


def test_integer_inputs_compute_in_f32():
    i = I.astype(np.int32)
    got = jit_run(lambda a: (xnp.median(a), xnp.average(a, axis=0), xnp.nanvar(a, axis=1),
                             xnp.cov(a), xnp.convolve(a[0], a[1]), xnp.interp(a, a[0] * 0 +
                             np.arange(6), a[1])), i)
    assert [g.dtype for g in got] == [np.float32] * 6
    want = _jax_ref(lambda m, a: (m.median(a), m.average(a, axis=0), m.nanvar(a, axis=1),
                                  m.cov(a), m.convolve(a[0], a[1]),
                                  m.interp(a, a[0] * 0 + np.arange(6), a[1])), (i,), False)
    _like_jax(got, want, False)


@pytest.mark.parametrize("call, message", [
    (lambda x: xnp.quantile(x, 1.5), r"quantile: quantiles must be in the range \[0, 1\]"),
    (lambda x: xnp.quantile(x, 0.5, method="weibull"), "quantile: method must be one of"),
    (lambda x: xnp.quantile(x, 0.5, weights=x), "weights are only supported with method"),
    (lambda x: xnp.bincount(x[0].astype(np.int32)), "bincount: the output length depends"),
    (lambda x: xnp.bincount(x, length=3), "bincount: x must be a 1-D integer array"),
    (lambda x: xnp.searchsorted(x, x), "searchsorted: the sorted array a must be 1-D"),
    (lambda x: xnp.searchsorted(x[0], x, side="middle"), "searchsorted: side must be"),
    (lambda x: xnp.cumulative_sum(x), "cumulative_sum: axis must be given for an array"),
    (lambda x: xnp.average(x, weights=x[0]), "average: axis must be given"),
    (lambda x: xnp.convolve(x[0], x[0], mode="middle"), "convolve: mode must be"),
    (lambda x: xnp.convolve(x, x[0]), "convolve: the argument must be 1-D"),
    (lambda x: xnp.polymul(x[0], x[1], trim_leading_zeros=True), "polymul: trim_leading"),
    (lambda x: xnp.poly(x), "poly: the roots must be 1-D"),
    (lambda x: xnp.gradient(x[:1]), "gradient: needs at least 2 elements"),
    (lambda x: xnp.cross(x, x), "cross: vectors must have 2 or 3 components"),
    (lambda x: xnp.vecdot(x, x[:, :2]), "vecdot: the contracted dimensions"),
    (lambda x: xnp.histogram(x, bins=0), "histogram_bin_edges: bins must be positive"),
    (lambda x: xnp.cov(x, dtype=np.int32), "cov: dtype must be a float or complex type"),
])
def test_bad_inputs_are_trace_errors(call, message):
    with pytest.raises(TraceError, match=message):
        jit_run(call, X.astype(np.float32))


@SETTINGS
@given(a=hnp.arrays(np.float32, st.integers(1, 12), elements=st.floats(-50, 50, width=32)),
       v=hnp.arrays(np.float32, st.integers(1, 6), elements=st.floats(-60, 60, width=32)),
       side=st.sampled_from(["left", "right"]))
def test_searchsorted_methods_agree_with_numpy(a, v, side):
    a = np.sort(a)
    got = jit_run(lambda x, y: (xnp.searchsorted(x, y, side=side),
                                xnp.searchsorted(x, y, side=side, method="compare_all")), a, v)
    want = np.searchsorted(a, v, side=side).astype(np.int32)
    assert_close(got, (want, want))


@SETTINGS
@given(x=hnp.arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 7)),
                    elements=st.floats(-100, 100)),
       q=st.lists(st.floats(0, 1), min_size=1, max_size=3))
def test_quantile_linear_matches_numpy(x, q):
    got = jit_run(lambda a, b: xnp.quantile(a, b, axis=1), x, np.array(q))
    assert_close(got, np.quantile(x, q, axis=1), rtol=1e-12, atol=1e-12)


def test_quantiles_of_f64_keep_f64_precision():
    """A Python-number q becomes a constant of the computation type: f64 input, f64 to the
    last bits (q = 0.7 rounded to f32 first gave 1.7799999713897705 for 1.78)."""
    x = np.array([1.0, 1.5, 1.7, 1.8, 2.0])
    got = jit_run(lambda a: (xnp.percentile(a, 70.0), xnp.quantile(a, 0.7),
                             xnp.nanpercentile(a, 70), xnp.nanquantile(a, 0.7)), x)
    for g in got:
        assert g.dtype == np.float64
        assert float(g) == pytest.approx(1.78, rel=1e-15)


def test_kaiser_follows_the_type_of_beta():
    """f32 for a Python beta (xlc's default float), f64 for an f64 beta, as jax with x64."""
    beta = np.float64(4.5)
    got = jit_run(lambda b: (xnp.kaiser(7, b), xnp.kaiser(7, 4.5), xnp.kaiser(1, b)), beta)
    assert [g.dtype for g in got] == [np.float64, np.float32, np.float64]
    _like_jax(got[0], _jax_ref(lambda m, b: m.kaiser(7, b), (beta,), True), True)
    assert_close(got[0], np.kaiser(7, 4.5), rtol=1e-14, atol=1e-15)
