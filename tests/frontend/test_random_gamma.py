"""xlc.random's rejection samplers: gamma / loggamma, beta, dirichlet, poisson and binomial
(t, chisquare, f, generalized_normal and ball: test_random_gamma_family.py). Each test draws
one sample, checks its moments (no JAX needed), then compares it with jax.random's for the
same key when JAX is installed: the loops make the same accept/reject decisions (integer
results, poisson and binomial, bit for bit), the values go through log/exp/pow/erf_inv and
match to a few ulps. One compile per test: these programs hold whole while loops."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import xlc.random as xr

import xlc
from tests.frontend.test_random_dists import assert_ulps

KEY = np.array([0, 42], np.uint32)  # jax.random.PRNGKey(42)


def draw(mine: Callable[[Any], Any]) -> Any:
    """xlc's sample(s) for KEY, as numpy."""
    out = xlc.jit(mine)(KEY)
    return tuple(np.asarray(o) for o in out) if isinstance(out, tuple) else np.asarray(out)


def compare_with_jax(got: Any, theirs: Callable[[Any, Any], Any], ulps: float,
                     floor: float) -> None:
    """jax.random's sample(s) for KEY equal `got` to `ulps` (skipped without JAX)."""
    try:
        import jax
    except ImportError:
        return
    want = jax.jit(lambda k: theirs(jax.random, k))(jax.random.PRNGKey(42))
    pairs = zip(got, want) if isinstance(want, tuple) else [(got, want)]
    for g, w in pairs:
        assert_ulps(np.asarray(g), np.asarray(w), ulps, floor)


def assert_moments(x: Any, mean: float, var: float, var_rtol: float | None = 0.15) -> None:
    """Sample mean within 5 standard errors, sample variance within var_rtol (None: too
    heavy-tailed to check)."""
    x = np.asarray(x, np.float64).ravel()
    assert abs(x.mean() - mean) < 5 * np.sqrt(var / x.size), (x.mean(), mean)
    assert var_rtol is None or abs(x.var() / var - 1) < var_rtol, (x.var(), var)


ALPHA = np.array([0.05, 0.3, 1.0, 2.5, 7.0, 40.0], np.float32)


def test_gamma_and_loggamma() -> None:
    """Both branches (alpha < 1 boosted, alpha >= 1), in linear and in log space."""
    g, lg = draw(lambda k: (xr.gamma(k, ALPHA, (1500, 6)), xr.loggamma(k, ALPHA, (1500, 6))))
    for j, a in enumerate(ALPHA):
        assert_moments(g[:, j], a, a, var_rtol=0.3 if a >= 0.3 else None)
    assert np.isfinite(lg).all() and (g >= 0).all()
    np.testing.assert_allclose(np.exp(lg[:, 2:]), g[:, 2:], rtol=1e-5)  # same draws, alpha >= 1
    compare_with_jax((g, lg), lambda r, k: (r.gamma(k, ALPHA, (1500, 6)),
                                            r.loggamma(k, ALPHA, (1500, 6))), 8, 1.0)


def test_gamma_f16() -> None:
    g = draw(lambda k: xr.gamma(k, 2.5, (2000,), "float16"))
    assert g.dtype == np.float16
    assert_moments(g, 2.5, 2.5)
    compare_with_jax(g, lambda r, k: r.gamma(k, 2.5, (2000,), "float16"), 8, 1.0)


def test_beta() -> None:
    b = draw(lambda k: xr.beta(k, 2.0, 0.5, (4000,)))
    assert_moments(b, 0.8, 2 * 0.5 / (2.5 ** 2 * 3.5))
    compare_with_jax(b, lambda r, k: r.beta(k, 2.0, 0.5, (4000,)), 8, 0.0)


def test_dirichlet() -> None:
    alpha = np.array([0.3, 1.0, 2.5, 7.0], np.float32)
    d = draw(lambda k: xr.dirichlet(k, alpha, (2000,)))
    np.testing.assert_allclose(d.sum(-1), 1, atol=1e-5)
    a0 = alpha.sum()
    for j, a in enumerate(alpha):
        assert_moments(d[:, j], a / a0, a * (a0 - a) / (a0 ** 2 * (a0 + 1)), var_rtol=0.2)
    # softmax of log-gammas: an ulp of a log-gamma near -10 is ~16 ulps of its exp
    compare_with_jax(d, lambda r, k: r.dirichlet(k, alpha, (2000,)), 64, 0.0)


LAM = np.array([0.0, 0.5, 3.0, 9.9, 10.0, 25.0, 300.0], np.float32)


def test_poisson() -> None:
    """Knuth's loop below lambda = 10, the transformed rejection above; lambda 0 gives 0."""
    p = draw(lambda k: xr.poisson(k, LAM, (1500, 7)))
    assert p.dtype == np.int32 and (p[:, 0] == 0).all()
    for j, lam in enumerate(LAM[1:], 1):
        assert_moments(p[:, j], lam, lam)
    compare_with_jax(p, lambda r, k: r.poisson(k, LAM, (1500, 7)), 0, 0.0)


def test_binomial() -> None:
    """Inversion where n min(p, 1-p) <= 10, BTRS above; p > 1/2 by symmetry; n = 0 gives 0."""
    n = np.array([5.0, 20.0, 100.0, 1000.0, 0.0], np.float32)
    p = np.array([0.3, 0.7, 0.2, 0.45, 0.5], np.float32)
    b = draw(lambda k: xr.binomial(k, n, p, (1500, 5)))
    assert b.dtype == np.float32 and (b[:, 4] == 0).all()
    for j in range(4):
        assert_moments(b[:, j], n[j] * p[j], n[j] * p[j] * (1 - p[j]))
    compare_with_jax(b, lambda r, k: r.binomial(k, n, p, (1500, 5)), 0, 0.0)


def test_lgamma_against_math() -> None:
    """The Lanczos lgamma poisson's rejection test uses, reflection branch included."""
    import math

    from xlc.frontend.random_gamma import lgamma

    x = np.array([0.1, 0.5, 1.0, 2.0, 3.5, 10.0, 101.0, -0.5, -2.5], np.float32)
    got = np.asarray(xlc.jit(lgamma)(x))
    np.testing.assert_allclose(got, [math.lgamma(float(v)) for v in x], rtol=2e-6, atol=2e-6)


def test_bad_dtypes() -> None:
    from xlc.errors import TraceError

    with pytest.raises(TraceError, match=r"xlc.random.poisson: dtype must be an integer type"):
        xlc.jit(lambda k: xr.poisson(k, 3.0, (2,), "float32"))(KEY)
    with pytest.raises(TraceError, match=r"xlc.random.gamma: dtype must be a float type"):
        xlc.jit(lambda k: xr.gamma(k, 3.0, (2,), "int32"))(KEY)
