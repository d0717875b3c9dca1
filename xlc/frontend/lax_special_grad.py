"""Derivatives of the incomplete gamma and beta functions (`lax_special.py`), re-exported by
`xlc.lax`: `igamma_grad_a` (dP(a, x)/da), `random_gamma_grad` (the derivative of a Gamma(a)
sample with respect to a, at fixed uniform), and the `custom_vjp` rules that make `igamma`,
`igammac` and `betainc` differentiable although they iterate in `while_loop`s (and give
`lgamma` and `erf_inv` their closed-form derivatives, digamma and sqrt(pi)/2 exp(y^2), where
differentiating their branchy recipes would meet NaNs in unused branches).

* dP/dx = x^(a-1) e^-x / Gamma(a); dI_x(a, b)/dx = x^(a-1) (1-x)^(b-1) / B(a, b).
* dP/da differentiates the power series of P term by term, or (where Q is computed by its
  continued fraction) the continued fraction's forward recurrence A_n / B_n together with the
  derivatives of A_n and B_n, iterating until value and derivative converged.
* I_x(a, b) has no derivative with respect to a or b here (nor in JAX, which raises): those
  cotangents are NaN, so a result that depends on them shows it.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from xlc.frontend.eager import eager_ok
from xlc.frontend.tracer import Tracer

__all__ = ["igamma_grad_a", "random_gamma_grad"]


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


def _sp() -> Any:
    from xlc.frontend import lax_special

    return lax_special


def _dp_dx(a: Tracer, x: Tracer) -> Tracer:
    """x^(a-1) e^-x / Gamma(a), with its limits at x = 0."""
    xnp = _np()
    xs = xnp.where(x > 0, x, 1.0)
    r = _sp()._gamma_prefactor(a, xs, plus_one=False) / xs
    at0 = xnp.where(a < 1, np.inf, xnp.where(a == 1, 1.0, 0.0))
    return xnp.where(x > 0, r, at0)


def _dp_da(a: Tracer, x: Tracer) -> Tracer:
    """dP(a, x)/da for a > 0, x >= 0."""
    xnp = _np()
    sp = _sp()
    eps = sp._eps(a)
    bad = xnp.logical_or(xnp.logical_or(xnp.isnan(a), xnp.isnan(x)),
                         xnp.logical_or(a <= 0, x < 0))
    trivial = xnp.logical_or(xnp.logical_or(bad, x == 0), xnp.logical_or(xnp.isinf(x),
                                                                        xnp.isinf(a)))
    a_ = xnp.where(trivial, 1.0, a)
    x_ = xnp.where(trivial, 1.0, x)
    use_cf = xnp.logical_and(x_ > 1.1, x_ >= a_)
    log_x = xnp.log(x_)

    def series_step(st: list[Tracer]) -> tuple[list[Tracer], Tracer]:
        ap, t, s, dt, ds = st
        ap = ap + 1.0
        r = x_ / ap
        dt = (dt - t / ap) * r
        t = t * r
        s, ds = s + t, ds + dt
        conv = xnp.logical_and(xnp.abs(t) <= xnp.abs(s) * eps, xnp.abs(dt) <= xnp.abs(ds) * eps)
        return [ap, t, s, dt, ds], conv

    one, zero = xnp.ones_like(a_), xnp.zeros_like(a_)
    _, _, s, _, ds = sp._iterate(series_step, [a_, one, one, zero, zero],
                                 xnp.logical_or(trivial, use_cf), 10000)
    pre1 = sp._gamma_prefactor(a_, x_, plus_one=True)
    d_series = pre1 * (s * (log_x - sp._digamma(a_ + 1.0)) + ds)

    big, small = 1.0 / eps, eps

    def cf_step(st: list[Tracer]) -> tuple[list[Tracer], Tracer]:
        n, a1, a2, b1, b2, da1, da2, db1, db2, f, df = st
        an, bn = -n * (n - a_), x_ + 2.0 * n + 1.0 - a_
        a0 = bn * a1 + an * a2
        b0 = bn * b1 + an * b2
        da0 = -a1 + bn * da1 + n * a2 + an * da2
        db0 = -b1 + bn * db1 + n * b2 + an * db2
        f_new = a0 / b0
        df_new = (da0 * b0 - a0 * db0) / (b0 * b0)
        conv = xnp.logical_and(xnp.abs(f_new - f) <= xnp.abs(f_new) * eps,
                               xnp.abs(df_new - df) <= xnp.abs(df_new) * eps)
        scale = xnp.where(xnp.abs(a0) > big, small, 1.0)
        vals = [a0, a1, b0, b1, da0, da1, db0, db1]
        return [n + 1.0] + [v * scale for v in vals] + [f_new, df_new], conv

    b0 = x_ + 1.0 - a_
    init = [one, b0, one, one, zero, -one, zero, zero, zero, b0, -one]
    *_, f, df = sp._iterate(cf_step, init, xnp.logical_or(trivial, xnp.logical_not(use_cf)),
                            10000)
    pre = sp._gamma_prefactor(a_, x_, plus_one=False)
    d_cf = -pre * ((log_x - sp._digamma(a_)) / f - df / (f * f))
    r = xnp.where(use_cf, d_cf, d_series)
    r = xnp.where(xnp.logical_or(x == 0, xnp.isinf(x)), 0.0, r)
    return xnp.where(xnp.logical_or(bad, xnp.isinf(a)), np.nan, r)


@eager_ok
def igamma_grad_a(a: Any, x: Any) -> Tracer:
    """The derivative of the regularized lower incomplete gamma function P(a, x) with respect
    to a."""
    sp = _sp()
    (ta, tx), out = sp._floats("igamma_grad_a", a, x)
    return sp._finish(_dp_da(ta, tx), out)


@eager_ok
def random_gamma_grad(a: Any, x: Any) -> Tracer:
    """d sample / d a of a Gamma(a, 1) sample x drawn by inverting P(a, .) at a fixed uniform:
    -(dP/da) / (dP/dx)."""
    sp = _sp()
    (ta, tx), out = sp._floats("random_gamma_grad", a, x)
    return sp._finish(-_dp_da(ta, tx) / _dp_dx(ta, tx), out)


def _erf_inv(t: Tracer) -> Tracer:
    from xlc.frontend import random

    return random.erf_inv(t)


# ---- custom_vjp rules ---------------------------------------------------------------------------
@functools.cache
def _rules() -> dict[str, Any]:
    """The custom_vjp-wrapped cores, built on first use (autodiff imports xlc.lax)."""
    from xlc.frontend.autodiff import custom_vjp
    from xlc.frontend.autodiff_forward import custom_jvp

    sp = _sp()
    xnp = _np()

    def p_fun(a: Tracer, x: Tracer) -> Tracer:
        return sp._igamma_pair(a, x)[0]

    def q_fun(a: Tracer, x: Tracer) -> Tracer:
        return sp._igamma_pair(a, x)[1]

    def gamma_bwd(sign: float) -> Any:
        def bwd(res: Any, ct: Tracer) -> tuple[Tracer, Tracer]:
            a, x = res
            return ct * (sign * _dp_da(a, x)), ct * (sign * _dp_dx(a, x))
        return bwd

    def beta_bwd(res: Any, ct: Tracer) -> tuple[Tracer, Tracer, Tracer]:
        a, b, x = res
        lg = sp.lgamma
        log_d = ((a - 1.0) * xnp.log(x) + (b - 1.0) * xnp.log1p(-x)
                 - (lg(a) + lg(b) - lg(a + b)))
        nan = xnp.full_like(ct, np.nan)
        return nan, nan, ct * xnp.exp(log_d)

    # lgamma and erf_inv: custom_jvp rules (as JAX), so their derivatives are themselves
    # differentiable (digamma's own series; erf_inv's rule reuses erf_inv)
    lgamma = custom_jvp(sp._lgamma)
    lgamma.defjvps(lambda dt, out, t: dt * sp._digamma(t))
    erf_inv = custom_jvp(_erf_inv)
    erf_inv.defjvps(lambda dt, out, t: dt * (np.sqrt(np.pi) / 2) * xnp.exp(out * out))
    p = custom_vjp(p_fun)
    p.defvjp(lambda a, x: (p_fun(a, x), (a, x)), gamma_bwd(1.0))
    q = custom_vjp(q_fun)
    q.defvjp(lambda a, x: (q_fun(a, x), (a, x)), gamma_bwd(-1.0))
    beta = custom_vjp(sp._betainc)
    beta.defvjp(lambda a, b, x: (sp._betainc(a, b, x), (a, b, x)), beta_bwd)
    return {"igamma": p, "igammac": q, "betainc": beta, "lgamma": lgamma, "erf_inv": erf_inv}


def differentiable(name: str) -> Any:
    """The custom_vjp version of `igamma`, `igammac`, `betainc`, `lgamma` or `erf_inv` (on
    prepared operands)."""
    return _rules()[name]
