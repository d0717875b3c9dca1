"""Derive the fitted coefficient tables of xlc/codegen/math.py (run once; paste the output).

* tanh (f32): odd rational x P(x^2) / Q(x^2), P degree 6, Q degree 3 in x^2, on [0, 7.9053]
  by Sanathanan-Koerner iteration (linearised least squares on relative error, reweighted by
  the previous denominator); the denominator comes out with positive coefficients (no poles).
* erf tail: Chebyshev least-squares fit of g(x) = erfc(x) e^(x^2) on [lo, hi] at Chebyshev
  nodes rounded to a 2^-20 grid (so x*x is exact in double); degree 13 (f32) / 26 (f64),
  where the coefficients reach the target precision (beyond, they are rounding noise).
* exp (f32): e^r ~ 1 + r + c2 r^2 + ... + c6 r^6 on |r| <= ln2/2, and log (f32):
  log(1 + f) ~ f + f^2 (q0 + q1 f + ... + q8 f^8) on |f| <= 1/3: minimax in relative error
  by Lawson's iteration (weighted least squares at Chebyshev nodes, weights multiplied by the
  error each round); the leading coefficients are fixed so that exp(0) = 1 and log(1) = 0
  exactly and both are exact to first order near there.

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


def fit_minimax(xs: np.ndarray, target: np.ndarray, fixed: np.ndarray, powers: range,
                iters: int = 300) -> list[float]:
    """Coefficients c_k (k in `powers`) minimising max |fixed + sum c_k x^k - target| / |target|
    over `xs` (Lawson's iteration), rounded to f32."""
    w = 1.0 / np.abs(target)
    a = np.stack([xs ** k for k in powers], 1) * w[:, None]
    y = (target - fixed) * w
    lw = np.full(len(xs), 1.0 / len(xs))
    c = np.zeros(len(powers))
    for _ in range(iters):
        sw = np.sqrt(lw)
        c, *_ = np.linalg.lstsq(a * sw[:, None], y * sw, rcond=None)
        lw = lw * np.abs(a @ c - y)
        lw /= lw.sum()
    return [float(np.float32(v)) for v in c]


def _cheb_nodes(half_width: float, n: int) -> np.ndarray:
    return half_width * np.cos(np.pi * (np.arange(n) + 0.5) / n)


def fit_exp32() -> list[float]:
    r = _cheb_nodes(math.log(2.0) / 2 * 1.0001, 4000)
    return fit_minimax(r, np.exp(r), 1.0 + r, range(2, 7))


def fit_log32() -> list[float]:
    f = _cheb_nodes(1.0 / 3.0 * 1.0001, 6000)
    f = f[np.abs(f) > 1e-6]
    return fit_minimax(f, np.log1p(f), f, range(2, 11))


def main() -> None:
    p, q = fit_tanh()
    print(f"_TANH_CLAMP = {TANH_CLAMP!r}")
    print(f"_TANH_P = {p!r}  # x^0 .. x^12 coefficients of P(x^2)")
    print(f"_TANH_Q = {q!r}")
    print(f"_ERF_CHEB = {{32: {fit_erf_tail(1.0, 4.0, 32, 13)!r},\n"
          f"             64: {fit_erf_tail(1.5, 6.0, 64, 26)!r}}}")
    print(f"EXP32 = {fit_exp32()!r}  # c2 .. c6")
    print(f"LOG32 = {fit_log32()!r}  # q0 .. q8")


if __name__ == "__main__":
    main()
