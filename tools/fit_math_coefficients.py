"""Derive the fitted coefficient tables of xlc/codegen/math.py (run once; paste the output).

* tanh (f32): odd rational x P(x^2) / Q(x^2), P degree 6, Q degree 3 in x^2, on [0, 7.9053]
  by Sanathanan-Koerner iteration (linearised least squares on relative error, reweighted by
  the previous denominator); the denominator comes out with positive coefficients (no poles).
* erf tail: Chebyshev least-squares fit of g(x) = erfc(x) e^(x^2) on [lo, hi] at Chebyshev
  nodes rounded to a 2^-20 grid (so x*x is exact in double); degree 13 (f32) / 26 (f64),
  where the coefficients reach the target precision (beyond, they are rounding noise).

Usage: python tools/fit_math_coefficients.py
"""
from __future__ import annotations

import math

import numpy as np

TANH_CLAMP = 7.90531110763549805


def fit_tanh(npd: int = 7, nq: int = 4, iters: int = 12) -> tuple[list[float], list[float]]:
    c = TANH_CLAMP
    xs = c * np.sin(np.linspace(0, np.pi / 2, 20000))
    xs = xs[xs > 1e-4]
    t = np.tanh(xs)
    s = (xs / c) ** 2
    qprev = np.ones_like(xs)
    p = q = np.zeros(1)
    for _ in range(iters):
        w = 1.0 / (t * np.abs(qprev))
        cols = [xs * s ** k for k in range(npd)] + [-t * s ** k for k in range(1, nq)]
        sol, *_ = np.linalg.lstsq(np.stack(cols, 1) * w[:, None], t * w, rcond=None)
        p, q = sol[:npd], np.concatenate([[1.0], sol[npd:]])
        qprev = np.polynomial.polynomial.polyval(s, q)
    pz = p / (c * c) ** np.arange(npd)
    qz = q / (c * c) ** np.arange(nq)
    assert np.all(qz > 0), "denominator must have no positive root"
    return [float(np.float32(v)) for v in pz], [float(np.float32(v)) for v in qz]


def fit_erf_tail(lo: float, hi: float, bits: int, deg: int) -> list[float]:
    def g(x: float) -> float:
        return math.erfc(x) * math.exp(x * x)

    t = np.cos(np.pi * (np.arange(600) + 0.5) / 600)
    x = np.round((lo + (hi - lo) * (t + 1) / 2) * 2.0 ** 20) / 2.0 ** 20
    t = (2 * x - (lo + hi)) / (hi - lo)
    coeffs = np.polynomial.chebyshev.chebfit(t, np.array([g(v) for v in x]), deg)
    dt = np.float32 if bits == 32 else np.float64
    return [float(dt(v)) for v in coeffs]


def main() -> None:
    p, q = fit_tanh()
    print(f"_TANH_CLAMP = {TANH_CLAMP!r}")
    print(f"_TANH_P = {p!r}  # x^0 .. x^12 coefficients of P(x^2)")
    print(f"_TANH_Q = {q!r}")
    print(f"_ERF_CHEB = {{32: {fit_erf_tail(1.0, 4.0, 32, 13)!r},\n"
          f"             64: {fit_erf_tail(1.5, 6.0, 64, 26)!r}}}")


if __name__ == "__main__":
    main()
