"""xlc.random's samplers built on gamma or binomial: t, chisquare, f, generalized_normal,
ball and multinomial; moments without JAX, then the same draws against jax.random's (a few
ulps; multinomial's integer counts bit for bit). See test_random_gamma.py."""
from __future__ import annotations

import numpy as np
import xlc.random as xr

from tests.frontend.test_random_gamma import assert_moments, compare_with_jax, draw


def test_t() -> None:
    x = draw(lambda k: xr.t(k, 5.0, (4000,)))
    assert_moments(x, 0.0, 5 / 3, var_rtol=0.3)
    compare_with_jax(x, lambda r, k: r.t(k, 5.0, (4000,)), 8, 1.0)


def test_chisquare_and_f() -> None:
    c, f = draw(lambda k: (xr.chisquare(k, 3.0, (4000,)), xr.f(k, 3.0, 9.0, (4000,))))
    assert_moments(c, 3.0, 6.0)
    assert_moments(f, 9 / 7, 2 * 81 * 10 / (3 * 49 * 5), var_rtol=0.4)
    compare_with_jax((c, f), lambda r, k: (r.chisquare(k, 3.0, (4000,)),
                                           r.f(k, 3.0, 9.0, (4000,))), 8, 1.0)


def test_generalized_normal() -> None:
    """p = 2 is N(0, 1/2); p = 1 is Laplace(0, 1)."""
    g2, g1 = draw(lambda k: (xr.generalized_normal(k, 2.0, (4000,)),
                             xr.generalized_normal(k, 1.0, (4000,))))
    assert_moments(g2, 0.0, 0.5)
    assert_moments(g1, 0.0, 2.0, var_rtol=0.2)
    compare_with_jax((g2, g1), lambda r, k: (r.generalized_normal(k, 2.0, (4000,)),
                                             r.generalized_normal(k, 1.0, (4000,))), 8, 1.0)


def test_ball() -> None:
    """Points of the unit 2-ball in 3-D: inside it, their radius cubed uniform on [0, 1)."""
    b = draw(lambda k: xr.ball(k, 3, 2, (4000,)))
    r = np.linalg.norm(b, axis=-1)
    assert b.shape == (4000, 3) and (r <= 1).all()
    assert_moments(r ** 3, 0.5, 1 / 12)
    compare_with_jax(b, lambda rnd, k: rnd.ball(k, 3, 2, (4000,)), 8, 1.0)


def test_multinomial() -> None:
    """Counts sum to n; each outcome's count is binomial(n, p_i); bit for bit with JAX."""
    p = np.array([0.2, 0.3, 0.5], np.float32)
    c = draw(lambda k: xr.multinomial(k, 20.0, p, shape=(2000, 3)))
    assert (c.sum(-1) == 20).all()
    for j in range(3):
        assert_moments(c[:, j], 20 * p[j], 20 * p[j] * (1 - p[j]))
    compare_with_jax(c, lambda r, k: r.multinomial(k, 20.0, p, shape=(2000, 3)), 0, 0.0)
