"""`xlc.random`'s distributions built on `uniform` / `normal` / `bits`, each following
`jax.random`'s recipe step for step (same keys, same splits, same operation order), so that
the samplers with integer results or only arithmetic and sqrt (rademacher, choice,
categorical, geometric, triangular) are bit-exact, and the ones whose values go through a
transcendental (log, log1p, tan, exp, pow, erf, erf_inv) match to a few ulps of XLA's math
(most f16/bf16 ones bit for bit: those transcendentals run in f32 and round once).

Re-exported from `xlc.random`; the rejection samplers (gamma, poisson, binomial and the
families built on them) live in `random_gamma`.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xlc.frontend import lax as _lax
from xlc.frontend import random as _r
from xlc.frontend.tracer import Tracer, as_tracer, trace_error
from xlc.hlo.shape import PrimitiveType as PT

__all__ = ["gumbel", "categorical", "choice", "truncated_normal", "exponential", "laplace",
           "logistic", "cauchy", "rademacher", "lognormal", "maxwell", "double_sided_maxwell",
           "weibull_min", "pareto", "multivariate_normal", "orthogonal", "triangular",
           "geometric", "rayleigh", "wald"]


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


def _shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(d) for d in shape)


def _param(x: Any, dt: np.dtype) -> Tracer:
    """`x` as an array of dtype `dt` (lax.convert_element_type)."""
    return _np().astype(as_tracer(x), dt)


def _param_shape(shape: Any, *params: Tracer) -> tuple[int, ...]:
    """`shape`, or the broadcast shape of the parameters when it is None."""
    if shape is not None:
        return _shape(shape)
    return tuple(np.broadcast_shapes(*(p.shape for p in params)))


def _finfo(dt: np.dtype) -> Any:
    import ml_dtypes

    return ml_dtypes.finfo(dt)


def _c(value: Any, dt: np.dtype) -> Tracer:
    """A constant of dtype `dt` (numpy rounds it, as jax's lax._const does)."""
    return _np().asarray(np.asarray(value, dt))


# ---- uniform-based --------------------------------------------------------------------------
def exponential(k: Any, shape: Sequence[int] = (), dtype: Any = "float32") -> Tracer:
    """Exponential(1) samples: -log1p(-u), u = uniform(k)."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "exponential")
    u = _r.uniform(k, _shape(shape), dt)
    return xnp.negative(xnp.log1p(xnp.negative(u)))


def gumbel(k: Any, shape: Sequence[int] = (), dtype: Any = "float32",
           mode: str | None = None) -> Tracer:
    """Gumbel samples -log(-log(u)). mode 'low' (default): u = uniform(k) in [tiny, 1);
    'high': two uniforms combined for more resolution near 0; 'highest' (f32): 64 random bits
    turned into a float in (0, 1) by counting leading zeros."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "gumbel")
    shape = _shape(shape)
    mode = "low" if mode is None else mode
    if mode not in ("low", "high", "highest"):
        raise trace_error(f"xlc.random.gumbel: mode must be 'low', 'high' or 'highest', got "
                          f"{mode!r}")
    info = _finfo(dt)
    if mode == "highest" and dt == np.float32:
        return _gumbel_highest(k, shape)
    if mode in ("high", "highest"):
        both = _r.uniform(k, (2, *shape), dt, 0.0, 1.0)
        high, low = both[0], both[1]
        x = xnp.where(xnp.greater_equal(high, 0.5), high,
                      xnp.add(xnp.add(high, xnp.multiply(2.0 ** -info.nmant, low)),
                              _c(info.tiny, dt)))
        return xnp.negative(xnp.log(xnp.negative(xnp.log1p(xnp.negative(x)))))
    u = _r.uniform(k, shape, dt, np.asarray(info.tiny, dt), 1.0)
    return xnp.negative(xnp.log(xnp.negative(xnp.log(u))))


def _clz32(x: Tracer) -> Tracer:
    """Count of leading zero bits of uint32 `x` (32 for 0), by binary search."""
    xnp = _np()
    n = xnp.zeros(x.shape, "uint32")
    for s in (16, 8, 4, 2, 1):
        small = xnp.less(x, _r._u32(1 << (32 - s)))
        n = xnp.where(small, xnp.add(n, _r._u32(s)), n)
        x = xnp.where(small, xnp.left_shift(x, _r._u32(s)), x)
    return xnp.where(xnp.equal(x, _r._u32(0)), xnp.add(n, _r._u32(1)), n)


def _gumbel_highest(k: Any, shape: tuple[int, ...]) -> Tracer:
    """jax's f32 'highest' Gumbel: a 64-bit fixed-point uniform, flipped to 1 - u below 1/2,
    converted exactly to f32 (leading-zero count for the exponent)."""
    xnp = _np()
    u32 = _r._u32
    b = _r.bits(k, (2, *shape), "uint32")
    neg = xnp.bitwise_not(b)
    lo_bits = neg[1]
    carry = xnp.astype(xnp.equal(lo_bits, u32(0xFFFFFFFF)), "uint32")
    neg = xnp.add(neg, xnp.stack([carry, xnp.ones_like(lo_bits)]))
    flip = xnp.less(b[0], u32(1 << 31))
    sel = xnp.where(flip, b, neg)
    hi, lo = sel[0], sel[1]
    hiclz, loclz = _clz32(hi), _clz32(lo)
    all_lo = xnp.equal(hiclz, u32(32))
    # shifts by 32 give 0 in XLA; the `where`s only use in-range shifts' results
    lo_part = xnp.where(all_lo, xnp.left_shift(lo, xnp.minimum(loclz, u32(31))),
                        _shr(lo, xnp.subtract(u32(32), hiclz)))
    mant = xnp.bitwise_or(_shl(hi, hiclz), lo_part)
    mant = xnp.bitwise_and(xnp.right_shift(mant, u32(32 - 23 - 1)), u32((1 << 23) - 1))
    lead = xnp.where(all_lo, xnp.add(u32(32), loclz), hiclz)
    exp = xnp.left_shift(xnp.subtract(u32(126), lead), u32(23))
    exp = xnp.bitwise_and(exp, u32((1 << 30) - (1 << 22)))
    x = _lax.bitcast_convert_type(xnp.bitwise_or(exp, mant), "float32")
    return xnp.where(flip, xnp.negative(xnp.log(xnp.negative(xnp.log1p(xnp.negative(x))))),
                     xnp.negative(xnp.log(xnp.negative(xnp.log(x)))))


def _shl(x: Tracer, s: Tracer) -> Tracer:
    """x << s with XLA's semantics for s >= 32 (0)."""
    xnp = _np()
    big = xnp.greater_equal(s, _r._u32(32))
    return xnp.where(big, xnp.zeros_like(x), xnp.left_shift(x, xnp.where(big, _r._u32(0), s)))


def _shr(x: Tracer, s: Tracer) -> Tracer:
    """Logical x >> s with XLA's semantics for s >= 32 (0)."""
    xnp = _np()
    big = xnp.greater_equal(s, _r._u32(32))
    return xnp.where(big, xnp.zeros_like(x), xnp.right_shift(x, xnp.where(big, _r._u32(0), s)))


def laplace(k: Any, shape: Sequence[int] = (), dtype: Any = "float32") -> Tracer:
    """Laplace(0, 1) samples: sign(u) * log1p(-|u|), u uniform in [-1 + epsneg, 1)."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "laplace")
    u = _r.uniform(k, _shape(shape), dt, -1.0 + float(_finfo(dt).epsneg), 1.0)
    return xnp.multiply(xnp.sign(u), xnp.log1p(xnp.negative(xnp.abs(u))))


def logistic(k: Any, shape: Sequence[int] = (), dtype: Any = "float32") -> Tracer:
    """Logistic samples log(u) - log1p(-u), u uniform in [tiny, 1)."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "logistic")
    u = _r.uniform(k, _shape(shape), dt, np.asarray(_finfo(dt).tiny, dt), 1.0)
    return xnp.subtract(xnp.log(u), xnp.log1p(xnp.negative(u)))


def cauchy(k: Any, shape: Sequence[int] = (), dtype: Any = "float32") -> Tracer:
    """Cauchy samples tan(pi (u - 1/2)), u uniform in [eps, 1)."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "cauchy")
    u = _r.uniform(k, _shape(shape), dt, np.asarray(_finfo(dt).eps, dt), 1.0)
    return xnp.tan(xnp.multiply(_c(np.pi, dt), xnp.subtract(u, _c(0.5, dt))))


def rademacher(k: Any, shape: Sequence[int] = (), dtype: Any = "int32") -> Tracer:
    """-1 or +1 with equal probability (2 * bernoulli(k, 0.5) - 1), of `dtype`."""
    xnp = _np()
    b = xnp.astype(_r.bernoulli(k, 0.5, _shape(shape)), dtype)
    return xnp.astype(xnp.subtract(xnp.multiply(2, b), 1), dtype)


def weibull_min(k: Any, scale: Any, concentration: Any, shape: Sequence[int] = (),
                dtype: Any = "float32") -> Tracer:
    """Weibull samples (-log1p(-u)) ** (1 / concentration) * scale."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "weibull_min")
    u = _r.uniform(k, _shape(shape), dt, 0, 1)
    inv = 1.0 / concentration if isinstance(concentration, (int, float)) else \
        xnp.true_divide(1.0, concentration)
    return xnp.multiply(xnp.power(xnp.negative(xnp.log1p(xnp.negative(u))), inv), scale)


def pareto(k: Any, b: Any, shape: Sequence[int] | None = None,
           dtype: Any = "float32") -> Tracer:
    """Pareto(b) samples exp(e / b), e = exponential(k)."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "pareto")
    bt = _param(b, dt)
    e = exponential(k, _param_shape(shape, bt), dt)
    return xnp.exp(xnp.true_divide(e, bt))


def triangular(k: Any, left: Any, mode: Any, right: Any,
               shape: Sequence[int] | None = None, dtype: Any = "float32") -> Tracer:
    """Triangular(left, mode, right) samples by inverting the CDF piecewise."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "triangular")
    lt, mt, rt = _param(left, dt), _param(mode, dt), _param(right, dt)
    shape = _param_shape(shape, lt, mt, rt)
    lt, mt, rt = (xnp.broadcast_to(t, shape) for t in (lt, mt, rt))
    fc = xnp.true_divide(xnp.subtract(mt, lt), xnp.subtract(rt, lt))
    u = _r.uniform(k, shape, dt)
    out1 = xnp.add(lt, xnp.sqrt(xnp.multiply(xnp.multiply(u, xnp.subtract(rt, lt)),
                                             xnp.subtract(mt, lt))))
    out2 = xnp.subtract(rt, xnp.sqrt(xnp.multiply(
        xnp.multiply(xnp.subtract(1, u), xnp.subtract(rt, lt)), xnp.subtract(rt, mt))))
    return xnp.where(xnp.less(u, fc), out1, out2)


def geometric(k: Any, p: Any, shape: Sequence[int] | None = None,
              dtype: Any = "int32") -> Tracer:
    """Geometric(p) samples (trials up to the first success, >= 1):
    floor(log(u) / log1p(-p)) + 1."""
    xnp = _np()
    pt = as_tracer(p)
    if not pt.ptype.is_float:
        pt = xnp.astype(pt, "float32")
    shape = _param_shape(shape, pt)
    u = _r.uniform(k, shape, pt.dtype)
    u = xnp.where(xnp.equal(u, 0), xnp.ones_like(u), u)
    l1mp = xnp.broadcast_to(xnp.log1p(xnp.negative(pt)), shape)
    g = xnp.add(xnp.floor(xnp.true_divide(xnp.log(u), l1mp)), 1)
    return xnp.astype(g, dtype)


def rayleigh(k: Any, scale: Any, shape: Sequence[int] | None = None,
             dtype: Any = "float32") -> Tracer:
    """Rayleigh(scale) samples scale * sqrt(-2 log(u))."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "rayleigh")
    st = _param(scale, dt)
    shape = _param_shape(shape, st)
    u = _r.uniform(k, shape, dt)
    st = xnp.broadcast_to(st, shape)
    return xnp.multiply(st, xnp.sqrt(xnp.multiply(xnp.log(u), _c(-2, dt))))


# ---- normal-based ---------------------------------------------------------------------------
def lognormal(k: Any, sigma: Any = 1.0, shape: Sequence[int] | None = None,
              dtype: Any = "float32") -> Tracer:
    """Log-normal samples exp(sigma * normal(k))."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "lognormal")
    st = _param(sigma, dt)
    return xnp.exp(xnp.multiply(_r.normal(k, _param_shape(shape, st), dt), st))


def truncated_normal(k: Any, lower: Any, upper: Any, shape: Sequence[int] | None = None,
                     dtype: Any = "float32") -> Tracer:
    """Standard normal samples restricted to (lower, upper): sqrt(2) erf_inv(u) with u uniform
    between erf(lower / sqrt 2) and erf(upper / sqrt 2), clamped into the open interval."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "truncated_normal")
    lo, hi = _param(lower, dt), _param(upper, dt)
    shape = _param_shape(shape, lo, hi)
    sqrt2 = _c(np.sqrt(2), dt)
    a = xnp.erf(xnp.true_divide(lo, sqrt2))
    b = xnp.erf(xnp.true_divide(hi, sqrt2))
    u = _r.uniform(k, shape, dt, a, b)
    out = xnp.multiply(sqrt2, _r.erf_inv(u))
    return xnp.minimum(xnp.maximum(out, nextafter(lo, True)), nextafter(hi, False))


def nextafter(x: Tracer, up: bool) -> Tracer:
    """The float next to `x` towards +inf (`up`) or -inf, from its bits (NaNs and the infinity
    in that direction stay)."""
    xnp = _np()
    nbits = x.dtype.itemsize * 8
    ut = f"uint{nbits}"
    one = as_tracer(1, PT.from_dtype(np.dtype(ut)))
    b = _lax.bitcast_convert_type(x, ut)
    away = xnp.greater(x, 0) if up else xnp.less(x, 0)
    stepped = xnp.where(away, xnp.add(b, one), xnp.subtract(b, one))
    zero_step = np.asarray(1 if up else (1 << (nbits - 1)) | 1, ut)
    stepped = xnp.where(xnp.equal(x, 0), xnp.asarray(zero_step), stepped)
    stuck = xnp.logical_or(xnp.isnan(x), xnp.equal(x, np.inf if up else -np.inf))
    return xnp.where(stuck, x, _lax.bitcast_convert_type(stepped, x.dtype))


def maxwell(k: Any, shape: Sequence[int] = (), dtype: Any = "float32") -> Tracer:
    """Maxwell samples: the norm of three standard normals."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "maxwell")
    n = _r.normal(k, (*_shape(shape), 3), dt)
    return xnp.sqrt(xnp.sum(xnp.multiply(n, n), axis=-1))


def double_sided_maxwell(k: Any, loc: Any, scale: Any, shape: Sequence[int] = (),
                         dtype: Any = "float32") -> Tracer:
    """Maxwell samples with a random sign, scaled and shifted: sign * maxwell * scale + loc
    (shape is `shape` + the parameters' broadcast shape)."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "double_sided_maxwell")
    params = tuple(np.broadcast_shapes(np.shape(loc), np.shape(scale)))
    shape = _shape(shape) or params
    shape = shape + params
    mk, rk = _r._split2(k)
    m = maxwell(mk, shape, dt)
    sign = rademacher(rk, shape, dt)
    return xnp.add(xnp.multiply(xnp.multiply(sign, m), scale), loc)


def wald(k: Any, mean: Any, shape: Sequence[int] | None = None,
         dtype: Any = "float32") -> Tracer:
    """Wald (inverse Gaussian, unit shape) samples by Michael, Schucany and Haas' method."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "wald")
    mt = _param(mean, dt)
    shape = _param_shape(shape, mt)
    k1, k2 = _r._split2(k)
    mt = xnp.broadcast_to(mt, shape)
    v = _r.normal(k1, shape, dt)
    z = _r.uniform(k2, shape, dt)
    y = xnp.multiply(v, v)
    y_sq = xnp.multiply(y, y)
    mean_sq = xnp.multiply(mt, mt)
    sqrt_term = xnp.sqrt(xnp.add(xnp.multiply(xnp.multiply(4, mt), y),
                                 xnp.multiply(mean_sq, y_sq)))
    x = xnp.subtract(xnp.add(mt, xnp.true_divide(xnp.multiply(mean_sq, y), 2)),
                     xnp.multiply(xnp.true_divide(mt, 2), sqrt_term))
    return xnp.where(xnp.less_equal(z, xnp.true_divide(mt, xnp.add(mt, x))), x,
                     xnp.true_divide(mean_sq, x))


def multivariate_normal(k: Any, mean: Any, cov: Any, shape: Sequence[int] | None = None,
                        dtype: Any = None, method: str = "cholesky") -> Tracer:
    """Samples mean + factor @ normal(k), factor from `cov` by 'cholesky', 'eigh' (v sqrt(w))
    or 'svd' (u sqrt(s)); result shape `shape` (default: the broadcast batch shape) + (n,)."""
    xnp = _np()
    if method not in ("svd", "eigh", "cholesky"):
        raise trace_error(f"xlc.random.multivariate_normal: method must be one of 'svd', "
                          f"'eigh' and 'cholesky', got {method!r}")
    m, c = as_tracer(mean), as_tracer(cov)
    ft = np.result_type(m.dtype, c.dtype)
    if not np.issubdtype(ft, np.floating):
        ft = np.dtype("float32")
    m, c = xnp.astype(m, ft), xnp.astype(c, ft)
    dt = ft if dtype is None else _r._float_dtype(dtype, "multivariate_normal")
    if m.ndim < 1 or c.ndim < 2 or c.shape[-2:] != (m.shape[-1], m.shape[-1]):
        raise trace_error(f"xlc.random.multivariate_normal: needs mean (..., n) and cov "
                          f"(..., n, n), got {m.aval_text} and {c.aval_text}")
    batch = tuple(np.broadcast_shapes(m.shape[:-1], c.shape[:-2])) if shape is None else \
        _shape(shape)
    if method == "svd":
        u, s, _ = xnp.linalg.svd(c)
        factor = xnp.multiply(u, xnp.sqrt(xnp.expand_dims(s, -2)))
    elif method == "eigh":
        w, v = xnp.linalg.eigh(c)
        factor = xnp.multiply(v, xnp.sqrt(xnp.expand_dims(w, -2)))
    else:
        factor = xnp.linalg.cholesky(c)
    z = _r.normal(k, (*batch, m.shape[-1]), dt)
    # einsum('...ij,...j->...i', factor, z) as a batched matrix-vector product
    return xnp.add(m, xnp.squeeze(xnp.matmul(factor, xnp.expand_dims(z, -1)), -1))


def orthogonal(k: Any, n: int, shape: Sequence[int] = (), dtype: Any = "float32",
               m: int | None = None) -> Tracer:
    """Haar-random (n, m) matrices with orthonormal columns or rows (m defaults to n): the Q
    of a normal matrix's QR, its columns signed by R's diagonal."""
    xnp = _np()
    dt = _r._float_dtype(dtype, "orthogonal")
    m = n if m is None else int(m)
    z = _r.normal(k, (*_shape(shape), max(n, m), min(n, m)), dt)
    if dt.itemsize < 4:  # LAPACK has no 16-bit QR: factor in f32, round the factors back
        q, r = (xnp.astype(f, dt) for f in xnp.linalg.qr(xnp.astype(z, "float32")))
    else:
        q, r = xnp.linalg.qr(z)
    d = xnp.sum(xnp.multiply(r, xnp.eye(r.shape[-1], dtype=dt)), axis=-1)  # exact: + zeros
    x = xnp.multiply(q, xnp.expand_dims(xnp.sign(d), -2))
    return xnp.swapaxes(x, -1, -2) if n < m else x


# ---- discrete -------------------------------------------------------------------------------
def categorical(k: Any, logits: Any, axis: int = -1, shape: Sequence[int] | None = None,
                replace: bool = True, mode: str | None = None) -> Tracer:
    """Category indices (int32) drawn with probabilities softmax(logits) along `axis`: the
    Gumbel-max trick, or Gumbel top-k without replacement (`shape`'s leading extra dims are
    the draws)."""
    xnp = _np()
    lg = as_tracer(logits)
    if not lg.ptype.is_float:
        lg = xnp.astype(lg, "float32")
    axis = axis % lg.ndim if lg.ndim else 0
    batch = lg.shape[:axis] + lg.shape[axis + 1:]
    shape = batch if shape is None else _shape(shape)
    if shape[len(shape) - len(batch):] != batch:
        raise trace_error(f"xlc.random.categorical: shape {shape} must end with the logits' "
                          f"batch shape {batch}")
    prefix = shape[:len(shape) - len(batch)]
    if replace:
        neg_axis = axis - lg.ndim
        lshape = list(shape[len(shape) - len(batch):])
        lshape.insert(neg_axis % lg.ndim, lg.shape[axis])
        g = gumbel(k, (*prefix, *lshape), lg.dtype, mode)
        lx = xnp.reshape(lg, (1,) * len(prefix) + lg.shape)
        return xnp.argmax(xnp.add(g, lx), axis=neg_axis)
    n = int(np.prod(prefix))
    if n > lg.shape[axis]:
        raise trace_error(f"xlc.random.categorical: cannot draw {n} samples without "
                          f"replacement from {lg.shape[axis]} categories")
    noisy = xnp.add(lg, gumbel(k, lg.shape, lg.dtype, mode))
    _, idx = _lax.top_k(xnp.moveaxis(noisy, axis, -1), n)
    idx = xnp.moveaxis(idx, -1, 0)
    return xnp.reshape(idx, shape)


def choice(k: Any, a: Any, shape: Sequence[int] = (), replace: bool = True, p: Any = None,
           axis: int = 0, mode: str | None = None) -> Tracer:
    """Random draws from `a` (an array along `axis`, or arange(a) for an int): uniform with
    replacement (randint), without (a permutation's head), or weighted by `p` (inverse CDF
    with replacement, Gumbel top-k without)."""
    xnp = _np()
    shape = _shape(shape)
    if not isinstance(a, Tracer) and np.ndim(a) == 0:
        a = int(a)  # a concrete scalar: arange(a)
    scalar = isinstance(a, int)
    arr = None if scalar else as_tracer(a)
    if arr is not None and arr.ndim == 0:
        raise trace_error("xlc.random.choice: a must be an int or an array of rank >= 1")
    axis = 0 if arr is None else axis % arr.ndim
    n_in = int(a) if arr is None else arr.shape[axis]
    n_draws = int(np.prod(shape))
    if n_draws == 0:
        return xnp.zeros(shape, "int32" if arr is None else arr.dtype)
    if n_in <= 0:
        raise trace_error("xlc.random.choice: a must be greater than 0 unless no samples "
                          "are taken")
    if not replace and n_draws > n_in:
        raise trace_error(f"xlc.random.choice: cannot take a larger sample (size {n_draws}) "
                          f"than population (size {n_in}) when 'replace=False'")
    if p is None:
        if replace:
            ind = _r.randint(k, shape, 0, n_in)
            res = ind if arr is None else xnp.take(arr, ind, axis=axis)
        else:
            perm = _r.permutation(k, n_in if arr is None else arr, axis)
            res = _take_head(perm, n_draws, axis)
    else:
        pt = as_tracer(p)
        if not pt.ptype.is_float:
            pt = xnp.astype(pt, "float32")
        if pt.shape != (n_in,):
            raise trace_error(f"xlc.random.choice: p must be None or a 1D vector with the same "
                              f"size as a.shape[axis] ({n_in}), got {pt.aval_text}")
        if replace:
            cum = xnp.cumsum(pt)
            r = xnp.multiply(cum[-1], xnp.subtract(1, _r.uniform(k, shape, cum.dtype)))
            ind = _searchsorted_left(cum, r)
        else:
            g = xnp.add(gumbel(k, (n_in,), pt.dtype, mode), xnp.log(pt))
            ind = _lax.top_k(g, n_draws)[1]
        res = ind if arr is None else xnp.take(arr, ind, axis=axis)
    out = shape if arr is None else arr.shape[:axis] + shape + arr.shape[axis + 1:]
    return xnp.reshape(res, out)


def _take_head(x: Tracer, n: int, axis: int) -> Tracer:
    start = [0] * x.ndim
    limit = list(x.shape)
    limit[axis] = n
    return _lax.slice(x, start, limit)


def _searchsorted_left(sorted_1d: Tracer, v: Tracer) -> Tracer:
    """numpy.searchsorted(side='left') of a sorted 1-D array: how many entries are < v."""
    xnp = _np()
    less = xnp.less(sorted_1d, xnp.expand_dims(v, -1))
    return xnp.sum(xnp.astype(less, "int32"), axis=-1)
