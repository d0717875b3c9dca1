"""`xlc.random`'s rejection samplers, as `jax.random` builds them with `while_loop`s: gamma
and loggamma (Marsaglia-Tsang, one key per element, the loops batched the way `jax.vmap`
batches them: every element steps until all are done, each keeping its own state), and the
families built on them (beta, dirichlet, t, chisquare, f, generalized_normal, ball); poisson
(Knuth below lambda 10, Hormann's transformed rejection above) and binomial (inversion or
BTRS), whose loops draw one key per round for the whole array.

The samples match jax.random's to a few ulps (they go through log/exp/pow and erf_inv); an
accept/reject test that lands within those ulps of its threshold can go the other way, which
the tests allow for a small fraction of the elements.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from xlc.frontend import lax as _lax
from xlc.frontend import random as _r
from xlc.frontend.control_flow import while_loop
from xlc.frontend.random_dists import _c, _param, _param_shape, _shape, exponential, rademacher
from xlc.frontend.tracer import Tracer, as_tracer, trace_error
from xlc.hlo.shape import PrimitiveType as PT

__all__ = ["gamma", "loggamma", "beta", "dirichlet", "t", "chisquare", "f",
           "generalized_normal", "ball", "poisson", "binomial", "multinomial"]


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


# ---- per-element keys -----------------------------------------------------------------------
Keys = tuple[Tracer, Tracer]  # the two uint32 words of a batch of keys, each of shape (m,)


def _ksplit(keys: Keys, n: int) -> list[Keys]:
    """`split(key, n)` of every key of the batch (one cipher call over an (n, m) counter)."""
    xnp = _np()
    m = keys[0].shape
    count = _lax.broadcast_in_dim(_lax.iota(PT.U32, n), (n, *m), (0,))
    k1, k2 = (_lax.broadcast_in_dim(w, (n, *m), tuple(range(1, 1 + len(m)))) for w in keys)
    b1, b2 = _r.threefry2x32_rolled(k1, k2, xnp.zeros((n, *m), "uint32"), count)
    return [(b1[i], b2[i]) for i in range(n)]


def _kuniform(keys: Keys, dt: np.dtype) -> Tracer:
    """`uniform(key, (), dt)` of every key of the batch."""
    b1, b2 = _r.threefry2x32_rolled(keys[0], keys[1], _r._u32(0), _r._u32(0))
    return _r.unit_floats(_r.words_to_bits(b1, b2, _r._rng_width(dt)), dt)


def _knormal(keys: Keys, dt: np.dtype) -> Tracer:
    """`normal(key, (), dt)` of every key of the batch."""
    lo, hi = _r._normal_bounds(dt)
    return _r.normal_from_uniform(_r._scale(_kuniform(keys, dt), dt, lo, hi))


def _rsplit(k: Any, n: int) -> list[Tracer]:
    """`split(k, n)` as n keys, the cipher rolled (these run inside loops)."""
    keys = _r._split(k, n, rolled=True)
    return [keys[i] for i in range(n)]


def _runiform(k: Any, shape: tuple[int, ...], dt: Any) -> Tracer:
    """`uniform(k, shape, dt)`, the cipher rolled."""
    return _r._uniform(k, shape, dt, 0.0, 1.0, rolled=True)


# ---- gamma ----------------------------------------------------------------------------------
def _gamma_batch(keys: Keys, alpha: Tracer, log_space: bool) -> Tracer:
    """Marsaglia and Tsang's Gamma(alpha) (alpha < 1 boosted to alpha + 1 and scaled by
    u^(1/alpha)), one key per element of the 1-D `alpha`."""
    xnp = _np()
    dt = alpha.dtype
    zero, one = _c(0, dt), _c(1, dt)
    boost_mask = xnp.greater_equal(alpha, one)
    alpha_orig = alpha
    alpha = xnp.where(boost_mask, alpha, xnp.add(alpha, one))
    d = xnp.subtract(alpha, _c(1 / 3, dt))
    c = xnp.true_divide(_c(1 / 3, dt), xnp.sqrt(d))
    m = alpha.shape
    (k1, k2), sub = _ksplit(keys, 2)

    def accept_pending(state: Any) -> Tracer:
        _, _, x, v, u = state
        return xnp.logical_and(
            xnp.greater_equal(u, xnp.subtract(one, xnp.multiply(_c(0.0331, dt),
                                                                xnp.multiply(x, x)))),
            xnp.greater_equal(xnp.log(u), xnp.add(
                xnp.multiply(x, _c(0.5, dt)),
                xnp.multiply(d, xnp.add(xnp.subtract(one, v), xnp.log(v))))))

    def body(state: Any) -> Any:
        live = accept_pending(state)
        key, xkey, ukey = _ksplit((state[0], state[1]), 3)

        def draw(inner: Any) -> Any:
            pending = xnp.less_equal(inner[3], zero)
            nk, s = _ksplit((inner[0], inner[1]), 2)
            x = _knormal(s, dt)
            v = xnp.add(one, xnp.multiply(x, c))
            new = (nk[0], nk[1], x, v)
            return tuple(xnp.where(pending, n, o) for n, o in zip(new, inner))

        _, _, x, v = while_loop(lambda s: xnp.any(xnp.less_equal(s[3], zero)), draw,
                                (xkey[0], xkey[1], xnp.zeros(m, dt), xnp.full(m, -1, dt)))
        new = (key[0], key[1], xnp.multiply(x, x), xnp.multiply(xnp.multiply(v, v), v),
               _kuniform(ukey, dt))
        return tuple(xnp.where(live, n, o) for n, o in zip(new, state))

    init = (k1, k2, xnp.zeros(m, dt), xnp.ones(m, dt), xnp.full(m, 2, dt))
    _, _, _, v, _ = while_loop(lambda s: xnp.any(accept_pending(s)), body, init)
    if log_space:
        log_samples = xnp.negative(xnp.negative(xnp.log1p(xnp.negative(_kuniform(sub, dt)))))
        log_boost = xnp.where(xnp.logical_or(boost_mask, xnp.equal(log_samples, zero)), zero,
                              xnp.multiply(log_samples, xnp.true_divide(one, alpha_orig)))
        return xnp.add(xnp.add(xnp.log(d), xnp.log(v)), log_boost)
    samples = xnp.subtract(1, _kuniform(sub, dt))
    boost = xnp.where(boost_mask, one, xnp.power(samples, xnp.true_divide(one, alpha_orig)))
    return xnp.multiply(xnp.multiply(d, v), boost)


def _gammas(draws: Sequence[tuple[Any, Tracer]], shape: tuple[int, ...],
            log_space: bool) -> list[Tracer]:
    """Gamma samples of `shape` for each (key, alpha) in `draws`, all in one batched loop:
    the elements are independent (each has its own key from split(key, size)), so batching
    several draws together gives each the values it would get alone."""
    xnp = _np()
    n = math.prod(shape)
    if n == 0:
        return [xnp.zeros(shape, a.dtype) for _, a in draws]
    keys = xnp.concatenate([_r._split(k, n, rolled=True) for k, _ in draws], axis=0)
    alphas = xnp.concatenate([xnp.reshape(xnp.broadcast_to(a, shape), (n,)) for _, a in draws])
    out = _gamma_batch((keys[:, 0], keys[:, 1]), alphas, log_space)
    return [xnp.reshape(out[i * n:(i + 1) * n], shape) for i in range(len(draws))]


def _gamma(k: Any, a: Any, shape: Sequence[int] | None, dtype: Any, log_space: bool,
           where: str) -> Tracer:
    dt = _r._float_dtype(dtype, where)
    at = _param(a, dt)
    return _gammas([(k, at)], _param_shape(shape, at), log_space)[0]


def gamma(k: Any, a: Any, shape: Sequence[int] | None = None,
          dtype: Any = "float32") -> Tracer:
    """Gamma(a, 1) samples (shape defaults to a's)."""
    return _gamma(k, a, shape, dtype, False, "gamma")


def loggamma(k: Any, a: Any, shape: Sequence[int] | None = None,
             dtype: Any = "float32") -> Tracer:
    """log of Gamma(a, 1) samples, computed in log space (accurate for small a)."""
    return _gamma(k, a, shape, dtype, True, "loggamma")


def beta(k: Any, a: Any, b: Any, shape: Sequence[int] | None = None,
         dtype: Any = "float32") -> Tracer:
    """Beta(a, b) samples as ga / (ga + gb) from two log-gammas, rescaled by their max."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "beta")
    at, bt = _param(a, dt), _param(b, dt)
    shape = _param_shape(shape, at, bt)
    ka, kb = _rsplit(k, 2)
    lga, lgb = _gammas([(ka, at), (kb, bt)], shape, True)
    top = xnp.maximum(lga, lgb)
    ga, gb = xnp.exp(xnp.subtract(lga, top)), xnp.exp(xnp.subtract(lgb, top))
    return xnp.true_divide(ga, xnp.add(ga, gb))


def dirichlet(k: Any, alpha: Any, shape: Sequence[int] | None = None,
              dtype: Any = "float32") -> Tracer:
    """Dirichlet(alpha) samples: softmax of log-gammas along the last axis."""
    from xlc.frontend import nn

    dt = _r._float_dtype(dtype, "dirichlet")
    at = _param(alpha, dt)
    if at.ndim < 1:
        raise trace_error(f"xlc.random.dirichlet: alpha needs at least one dimension, got "
                          f"{at.aval_text}")
    shape = at.shape[:-1] if shape is None else _shape(shape)
    return nn.softmax(loggamma(k, at, (*shape, at.shape[-1]), dt), -1)


def t(k: Any, df: Any, shape: Sequence[int] | None = None, dtype: Any = "float32") -> Tracer:
    """Student's t(df) samples n * sqrt((df / 2) / gamma(df / 2))."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "t")
    dft = _param(df, dt)
    shape = _param_shape(shape, dft)
    kn, kg = _rsplit(k, 2)
    n = _r.normal(kn, shape, dt)
    half = xnp.true_divide(dft, _c(2, dt))
    g = gamma(kg, half, shape, dt)
    return xnp.multiply(n, xnp.sqrt(xnp.true_divide(half, g)))


def chisquare(k: Any, df: Any, shape: Sequence[int] | None = None,
              dtype: Any = "float32") -> Tracer:
    """Chi-square(df) samples 2 * exp(loggamma(df / 2))."""
    dt = _r._float_dtype(dtype, "chisquare")
    dft = _param(df, dt)
    return _chisquares([(k, dft)], _param_shape(shape, dft))[0]


def _chisquares(draws: Sequence[tuple[Any, Tracer]], shape: tuple[int, ...]) -> list[Tracer]:
    xnp = _np()
    two = _c(2, draws[0][1].dtype)
    logs = _gammas([(k, xnp.true_divide(df, two)) for k, df in draws], shape, True)
    return [xnp.multiply(xnp.exp(lg), two) for lg in logs]


def f(k: Any, dfnum: Any, dfden: Any, shape: Sequence[int] | None = None,
      dtype: Any = "float32") -> Tracer:
    """F(dfnum, dfden) samples: the ratio of two scaled chi-squares."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "f")
    dn, dd = _param(dfnum, dt), _param(dfden, dt)
    shape = _param_shape(shape, dn, dd)
    kd, kn = _rsplit(k, 2)
    chi_n, chi_d = _chisquares([(kn, dn), (kd, dd)], shape)
    return xnp.true_divide(xnp.true_divide(chi_n, dn), xnp.true_divide(chi_d, dd))


def generalized_normal(k: Any, p: float, shape: Sequence[int] = (),
                       dtype: Any = "float32") -> Tracer:
    """Generalized normal(p) samples: a random sign times gamma(1/p) ** (1/p)."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "generalized_normal")
    shape = _shape(shape)
    k0, k1 = _rsplit(k, 2)
    g = gamma(k0, 1 / p, shape, dt)
    r = rademacher(k1, shape, dt)
    return xnp.multiply(r, xnp.power(g, 1 / p))


def ball(k: Any, d: int, p: float = 2, shape: Sequence[int] = (),
         dtype: Any = "float32") -> Tracer:
    """Uniform samples from the unit p-norm ball in `d` dimensions (shape + (d,))."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "ball")
    shape = _shape(shape)
    k1, k2 = _rsplit(k, 2)
    g = generalized_normal(k1, p, (*shape, int(d)), dt)
    e = exponential(k2, shape, dt)
    norm = xnp.power(xnp.add(xnp.sum(xnp.power(xnp.abs(g), p), axis=-1), e), 1 / p)
    return xnp.true_divide(g, xnp.expand_dims(norm, -1))


# ---- poisson --------------------------------------------------------------------------------
def poisson(k: Any, lam: Any, shape: Sequence[int] | None = None,
            dtype: Any = "int32") -> Tracer:
    """Poisson(lam) counts: Knuth's product of uniforms for lam < 10, Hormann's transformed
    rejection otherwise (lam in f32, as jax computes it)."""
    xnp = _np()
    lt = as_tracer(lam)
    shape = _param_shape(shape, lt)
    lt = xnp.astype(xnp.broadcast_to(lt, shape), "float32")
    odt = np.dtype(dtype)
    if odt.kind not in "iu":
        raise trace_error(f"xlc.random.poisson: dtype must be an integer type, got {dtype}")
    use_knuth = xnp.logical_or(xnp.isnan(lt), xnp.less(lt, 10))
    lam_knuth = xnp.where(use_knuth, lt, xnp.zeros_like(lt))
    lam_rej = xnp.where(use_knuth, xnp.full_like(lt, 1e5), lt)
    max_iters = int(np.iinfo(odt).max)
    res = xnp.where(use_knuth, _poisson_knuth(k, lam_knuth, shape, odt, max_iters),
                    _poisson_rejection(k, lam_rej, shape, odt, max_iters))
    return xnp.where(xnp.equal(lt, 0), xnp.zeros_like(res), res)


def _poisson_knuth(k: Any, lam: Tracer, shape: tuple[int, ...], odt: np.dtype,
                   max_iters: int) -> Tracer:
    xnp = _np()
    neg_lam = xnp.negative(lam)

    def body(c: Any) -> Any:
        i, cnt, key, log_prod = c
        key, sub = _rsplit(key, 2)
        cnt = xnp.where(xnp.greater(log_prod, neg_lam), xnp.add(cnt, 1), cnt)
        u = _runiform(sub, shape, "float32")
        return xnp.add(i, 1), cnt, key, xnp.add(log_prod, xnp.log(u))

    def cond(c: Any) -> Tracer:
        return xnp.logical_and(xnp.any(xnp.greater(c[3], neg_lam)), xnp.less(c[0], max_iters))

    init = (xnp.asarray(np.int32(0)), xnp.zeros(shape, odt), as_tracer(k),
            xnp.zeros(shape, "float32"))
    cnt = while_loop(cond, body, init)[1]
    return xnp.astype(xnp.subtract(cnt, 1), odt)


def _poisson_rejection(k: Any, lam: Tracer, shape: tuple[int, ...], odt: np.dtype,
                       max_iters: int) -> Tracer:
    xnp = _np()
    log_lam = xnp.log(lam)
    b = xnp.add(0.931, xnp.multiply(2.53, xnp.sqrt(lam)))
    a = xnp.add(-0.059, xnp.multiply(0.02483, b))
    inv_alpha = xnp.add(1.1239, xnp.true_divide(1.1328, xnp.subtract(b, 3.4)))
    v_r = xnp.subtract(0.9277, xnp.true_divide(3.6224, xnp.subtract(b, 2)))

    def propose(key: Any) -> Any:
        key, s0, s1 = _rsplit(key, 3)
        u = xnp.subtract(_runiform(s0, shape, lam.dtype), 0.5)
        v = _runiform(s1, shape, lam.dtype)
        us = xnp.subtract(0.5, xnp.abs(u))
        kk = xnp.floor(xnp.add(xnp.add(xnp.multiply(
            xnp.add(xnp.true_divide(xnp.multiply(2, a), us), b), u), lam), 0.43))
        s = xnp.log(xnp.true_divide(xnp.multiply(v, inv_alpha),
                                    xnp.add(xnp.true_divide(a, xnp.multiply(us, us)), b)))
        tt = xnp.subtract(xnp.add(xnp.negative(lam), xnp.multiply(kk, log_lam)),
                          lgamma(xnp.add(kk, 1)))
        accept1 = xnp.logical_and(xnp.greater_equal(us, 0.07), xnp.less_equal(v, v_r))
        reject = xnp.logical_or(xnp.less(kk, 0), xnp.logical_and(xnp.less(us, 0.013),
                                                                 xnp.greater(v, us)))
        accept = xnp.logical_or(accept1, xnp.logical_and(xnp.logical_not(reject),
                                                         xnp.less_equal(s, tt)))
        return key, kk, accept

    return _until_accepted(k, shape, lam.dtype, odt, max_iters, propose)


def _until_accepted(k: Any, shape: tuple[int, ...], dtype: np.dtype, odt: Any, max_iters: float,
                    propose: Any) -> Tracer:
    """A rejection loop: `propose(key) -> (key, values, accepted)` runs until every element
    has been accepted once or `max_iters` rounds; an element takes the value of each round
    that accepts it (-1 where none did), as `odt`."""
    xnp = _np()

    def body(c: Any) -> Any:
        i, out, accepted, key = c
        key, values, accept = propose(key)
        return (xnp.add(i, 1), xnp.where(accept, values, out),
                xnp.logical_or(accepted, accept), key)

    def cond(c: Any) -> Tracer:
        return xnp.logical_and(xnp.any(xnp.logical_not(c[2])), xnp.less(c[0], max_iters))

    init = (xnp.asarray(np.int32(0)), xnp.full(shape, -1, dtype), xnp.zeros(shape, "bool"),
            as_tracer(k))
    return xnp.astype(while_loop(cond, body, init)[1], odt)


_LANCZOS_G = 7.0
_LANCZOS_BASE = 0.99999999999980993227684700473478
_LANCZOS = (676.520368121885098567009190444019, -1259.13921672240287047156078755283,
            771.3234287776530788486528258894, -176.61502916214059906584551354,
            12.507343278686904814458936853, -0.13857109526572011689554707,
            9.984369578019570859563e-6, 1.50563273514931155834e-7)


def lgamma(x: Any) -> Tracer:
    """log|Gamma(x)| by Lanczos' approximation (g = 7, 9 terms) with Euler's reflection below
    1/2: XLA's own recipe, operation for operation."""
    xnp = _np()
    xt = as_tracer(x)
    dt = xt.dtype
    one, half = _c(1, dt), _c(0.5, dt)
    reflect = xnp.less(xt, half)
    z = xnp.where(reflect, xnp.negative(xt), xnp.subtract(xt, one))
    acc = _c(_LANCZOS_BASE, dt)
    for i, coeff in enumerate(_LANCZOS):
        acc = xnp.add(acc, xnp.true_divide(_c(coeff, dt),
                                           xnp.add(xnp.add(z, _c(i, dt)), one)))
    gph = _c(_LANCZOS_G + 0.5, dt)
    tz = xnp.add(gph, z)
    log_t = xnp.add(_c(math.log(_LANCZOS_G + 0.5), dt), xnp.log1p(xnp.true_divide(z, gph)))
    log_y = xnp.add(xnp.add(_c((math.log(2) + math.log(math.pi)) / 2, dt), xnp.multiply(
        xnp.subtract(xnp.add(z, half), xnp.true_divide(tz, log_t)), log_t)), xnp.log(acc))
    ax = xnp.abs(xt)
    frac = xnp.subtract(ax, xnp.floor(ax))
    frac = xnp.where(xnp.greater(frac, half), xnp.subtract(one, frac), frac)
    denom = xnp.log(xnp.sin(xnp.multiply(_c(math.pi, dt), frac)))
    refl = xnp.where(xnp.isfinite(denom),
                     xnp.subtract(xnp.subtract(_c(math.log(math.pi), dt), denom), log_y),
                     xnp.negative(denom))
    out = xnp.where(reflect, refl, log_y)
    return xnp.where(xnp.isinf(xt), xnp.full_like(xt, np.inf), out)


# ---- binomial -------------------------------------------------------------------------------
_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                  0.00833056343336287)


def _stirling_tail(kk: Tracer) -> Tracer:
    """lgamma(k + 1)'s Stirling remainder: tabulated for k <= 9, else its series."""
    xnp = _np()
    table = xnp.asarray(np.asarray(_STIRLING_TAIL, kk.dtype))
    use_table = xnp.less_equal(kk, 9)
    kc = xnp.clip(kk, _c(0.0, kk.dtype), _c(9.0, kk.dtype))
    kp1sq = xnp.multiply(xnp.add(kc, 1), xnp.add(kc, 1))
    approx = xnp.true_divide(xnp.subtract(1.0 / 12, xnp.true_divide(
        xnp.subtract(1.0 / 360, xnp.true_divide(1.0 / 1260, kp1sq)), kp1sq)), xnp.add(kc, 1))
    idx = xnp.astype(xnp.floor(kc), "int32")
    return xnp.where(use_table, xnp.take(table, idx), approx)


def binomial(k: Any, n: Any, p: Any, shape: Sequence[int] | None = None,
             dtype: Any = "float32") -> Tracer:
    """Binomial(n, p) counts (as floats): inversion (summed geometrics) where n * min(p, 1-p)
    <= 10, else BTRS transformed rejection; NaN for invalid n or p, inf for n = inf."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "binomial")
    pt = as_tracer(p)
    if not pt.ptype.is_float:
        pt = xnp.astype(pt, "float32")
    nt = as_tracer(n)
    shape = _param_shape(shape, nt, pt)
    count = xnp.broadcast_to(xnp.astype(nt, pt.dtype), shape)
    prob = xnp.broadcast_to(pt, shape)
    p_lt_half = xnp.less(prob, 0.5)
    q = xnp.where(p_lt_half, prob, xnp.subtract(1.0, prob))
    bad_count = xnp.logical_or(xnp.isnan(count), xnp.less(count, 0.0))
    count_inf = xnp.isinf(count)
    q_nan = xnp.isnan(q)
    q_neg = xnp.less(q, 0.0)
    q = xnp.where(xnp.logical_or(q_nan, q_neg), xnp.full_like(q, 0.01), q)
    use_inv = xnp.logical_or(bad_count, xnp.less_equal(xnp.multiply(count, q), 10.0))
    count = xnp.floor(count)
    count_inv = xnp.where(use_inv, count, xnp.zeros_like(count))
    count_btrs = xnp.where(use_inv, xnp.full_like(count, 1e4), count)
    q_btrs = xnp.where(use_inv, xnp.full_like(q, 0.5), q)
    samples = xnp.where(use_inv, _binomial_inversion(k, count_inv, q, shape, dt),
                        _btrs(k, count_btrs, q_btrs, shape, dt))
    invalid = xnp.logical_or(xnp.logical_or(q_neg, q_nan), bad_count)
    samples = xnp.where(invalid, xnp.full_like(samples, np.nan), samples)
    samples = xnp.where(xnp.logical_and(count_inf, xnp.logical_not(invalid)),
                        xnp.full_like(samples, np.inf), samples)
    keep = xnp.logical_or(xnp.logical_or(p_lt_half, bad_count),
                          xnp.logical_or(q_nan, count_inf))
    return xnp.where(keep, samples, xnp.subtract(xnp.astype(count, dt), samples))


def _binomial_inversion(k: Any, count: Tracer, prob: Tracer, shape: tuple[int, ...],
                        dt: np.dtype) -> Tracer:
    xnp = _np()
    l1mp = xnp.log1p(xnp.negative(prob))
    max_iters = float(np.finfo(dt).max)

    def body(c: Any) -> Any:
        i, num_geom, geom_sum, key = c
        sub, key = _rsplit(key, 2)
        num_geom = xnp.where(xnp.less_equal(geom_sum, count), xnp.add(num_geom, 1), num_geom)
        u = _runiform(sub, shape, prob.dtype)
        geom = xnp.ceil(xnp.true_divide(xnp.log(u), l1mp))
        return xnp.add(i, 1), num_geom, xnp.add(geom_sum, geom), key

    def cond(c: Any) -> Tracer:
        return xnp.logical_and(xnp.any(xnp.less_equal(c[2], count)),
                               xnp.less(c[0], max_iters))

    init = (xnp.asarray(np.int32(0)), xnp.zeros(shape, prob.dtype),
            xnp.zeros(shape, prob.dtype), as_tracer(k))
    return xnp.astype(xnp.subtract(while_loop(cond, body, init)[1], 1), dt)


def _btrs(k: Any, count: Tracer, prob: Tracer, shape: tuple[int, ...], dt: np.dtype) -> Tracer:
    xnp = _np()
    stddev = xnp.sqrt(xnp.multiply(xnp.multiply(count, prob), xnp.subtract(1, prob)))
    b = xnp.add(1.15, xnp.multiply(2.53, stddev))
    a = xnp.add(xnp.add(-0.0873, xnp.multiply(0.0248, b)), xnp.multiply(0.01, prob))
    c = xnp.add(xnp.multiply(count, prob), 0.5)
    v_r = xnp.subtract(0.92, xnp.true_divide(4.2, b))
    r = xnp.true_divide(prob, xnp.subtract(1, prob))
    alpha = xnp.multiply(xnp.add(2.83, xnp.true_divide(5.1, b)), stddev)
    m = xnp.floor(xnp.multiply(xnp.add(count, 1), prob))
    max_iters = float(np.finfo(dt).max)
    log = xnp.log

    def propose(key: Any) -> Any:
        key, s0, s1 = _rsplit(key, 3)
        u = _runiform(s0, shape, prob.dtype)
        v = _runiform(s1, shape, prob.dtype)
        u = xnp.subtract(u, 0.5)
        us = xnp.subtract(0.5, xnp.abs(u))
        accept1 = xnp.logical_and(xnp.greater_equal(us, 0.07), xnp.less_equal(v, v_r))
        kk = xnp.floor(xnp.add(xnp.multiply(
            xnp.add(xnp.true_divide(xnp.multiply(2, a), us), b), u), c))
        reject = xnp.logical_or(xnp.less(kk, 0), xnp.greater(kk, count))
        v = log(xnp.true_divide(xnp.multiply(v, alpha),
                                xnp.add(xnp.true_divide(a, xnp.multiply(us, us)), b)))
        cm1 = xnp.add(xnp.subtract(count, m), 1)
        ck1 = xnp.add(xnp.subtract(count, kk), 1)
        ub = xnp.multiply(xnp.add(m, 0.5), log(xnp.true_divide(xnp.add(m, 1),
                                                               xnp.multiply(r, cm1))))
        ub = xnp.add(ub, xnp.multiply(xnp.add(count, 1), log(xnp.true_divide(cm1, ck1))))
        ub = xnp.add(ub, xnp.multiply(xnp.add(kk, 0.5), log(
            xnp.true_divide(xnp.multiply(r, ck1), xnp.add(kk, 1)))))
        ub = xnp.add(ub, _stirling_tail(m))
        ub = xnp.add(ub, _stirling_tail(xnp.subtract(count, m)))
        ub = xnp.subtract(ub, _stirling_tail(kk))
        ub = xnp.subtract(ub, _stirling_tail(xnp.subtract(count, kk)))
        accept = xnp.logical_or(accept1, xnp.logical_and(xnp.logical_not(reject),
                                                         xnp.less_equal(v, ub)))
        return key, kk, accept

    return _until_accepted(k, shape, prob.dtype, dt, max_iters, propose)


def multinomial(k: Any, n: Any, p: Any, *, shape: Sequence[int] | None = None,
                dtype: Any = "float32") -> Tracer:
    """Multinomial(n, p) counts over the last axis of `p` (as floats): a scan over the
    outcomes drawing binomial(remaining trials, p_i / remaining probability), one key each."""
    from xlc.frontend import lax as _lx
    from xlc.frontend.control_flow import scan
    from xlc.hlo.opcodes import Opcode

    xnp = _np()
    pt, nt = as_tracer(p), as_tracer(n)
    ft = np.result_type(pt.dtype, nt.dtype)
    ft = ft if np.issubdtype(ft, np.floating) else np.dtype("float32")
    pt, nt = xnp.astype(pt, ft), xnp.astype(nt, ft)
    shape = pt.shape if shape is None else _shape(shape)
    nt = xnp.broadcast_to(nt, shape[:-1])
    pt = xnp.moveaxis(xnp.broadcast_to(pt, shape), -1, 0)
    m = pt.shape[0]
    # the probability left from each outcome on, as jax's reverse cumsum (a reduce-window)
    remaining = _lx.reduce_window(pt, np.asarray(0, ft), Opcode.ADD, [m] + [1] * (pt.ndim - 1),
                                  None, [(0, m - 1)] + [(0, 0)] * (pt.ndim - 1))
    ratios = xnp.true_divide(pt, xnp.where(xnp.equal(remaining, 0), 1, remaining))

    def step(rest: Tracer, ratio_key: tuple[Tracer, Tracer]) -> tuple[Tracer, Tracer]:
        ratio, key = ratio_key
        count = binomial(key, rest, xnp.clip(ratio, 0, 1), dtype=rest.dtype)
        return xnp.subtract(rest, count), count

    _, counts = scan(step, nt, (ratios, _r.split(k, m)))
    return xnp.astype(xnp.moveaxis(counts, 0, -1), dtype)
