"""`xlc.nn`: jax.nn's functions built from `xlc.numpy`, each with jax.nn's formula and operation
order (so results match jax.nn to the ulp where no transcendental is involved, and to a few ulps
of XLA's math where one is): activations, softmax / log_softmax / logsumexp (max subtracted
first), standardize, one_hot, plus `dot_product_attention` (`nn_attention`) and the
`initializers` module (`nn_initializers`, on `xlc.random`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from xlc.frontend import numpy_api as xnp
from xlc.frontend.eager import eager_ok
from xlc.frontend.tracer import Tracer, as_tracer, emit, infer, trace_error
from xlc.hlo.opcodes import Opcode

__all__ = ["relu", "relu6", "gelu", "sigmoid", "silu", "swish", "softplus", "softmax",
           "log_softmax", "logsumexp", "logmeanexp", "layer_norm", "one_hot", "identity",
           "tanh", "celu", "elu", "selu", "glu", "hard_sigmoid", "hard_silu", "hard_swish",
           "hard_tanh", "leaky_relu", "log_sigmoid", "soft_sign", "sparse_plus",
           "sparse_sigmoid", "squareplus", "standardize", "mish", "log1mexp",
           "dot_product_attention", "initializers"]


def _float(x: Any) -> Tracer:
    """`x` as an inexact array (integers and bools become f32, as jax promotes them)."""
    t = as_tracer(x)
    return t if t.ptype.is_float or t.ptype.is_complex else xnp.astype(t, np.float32)


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(int(a) % max(ndim, 1) for a in axes)


@eager_ok
def identity(x: Any) -> Tracer:
    """x itself."""
    return as_tracer(x)


@eager_ok
def tanh(x: Any) -> Tracer:
    """Hyperbolic tangent."""
    return xnp.tanh(x)


@eager_ok
def relu(x: Any) -> Tracer:
    """max(x, 0)."""
    return xnp.maximum(x, 0)


@eager_ok
def relu6(x: Any) -> Tracer:
    """min(max(x, 0), 6.)."""
    return xnp.minimum(xnp.maximum(x, 0), 6.0)


@eager_ok
def sigmoid(x: Any) -> Tracer:
    """1 / (1 + exp(-x)) via HLO `logistic`."""
    t = _float(x)
    return emit(Opcode.LOGISTIC, infer("infer_unary", Opcode.LOGISTIC, t.aval), [t],
                op_name="sigmoid", weak=t.weak_type)


@eager_ok
def silu(x: Any) -> Tracer:
    """x * sigmoid(x)."""
    return xnp.multiply(x, sigmoid(x))


swish = silu


@eager_ok
def softplus(x: Any) -> Tracer:
    """log(1 + exp(x)) as jax computes it, logaddexp(x, 0):
    max(x, 0) + log1p(exp(-|x|)) (x + 0 for NaN)."""
    t = _float(x)
    stable = xnp.add(xnp.maximum(t, 0), xnp.log1p(xnp.exp(xnp.negative(xnp.abs(t)))))
    return xnp.where(xnp.isnan(t), xnp.add(t, 0), stable)


@eager_ok
def log_sigmoid(x: Any) -> Tracer:
    """log(sigmoid(x)) = -softplus(-x)."""
    return xnp.negative(softplus(xnp.negative(_float(x))))


@eager_ok
def mish(x: Any) -> Tracer:
    """x * tanh(softplus(x))."""
    t = _float(x)
    return xnp.multiply(t, xnp.tanh(softplus(t)))


@eager_ok
def soft_sign(x: Any) -> Tracer:
    """x / (|x| + 1)."""
    t = as_tracer(x)
    return xnp.true_divide(t, xnp.add(xnp.abs(t), 1))


@eager_ok
def squareplus(x: Any, b: Any = 4) -> Tracer:
    """(x + sqrt(x^2 + b)) / 2."""
    t = as_tracer(x)
    return xnp.true_divide(xnp.add(t, xnp.sqrt(xnp.add(xnp.square(t), b))), 2)


@eager_ok
def sparse_plus(x: Any) -> Tracer:
    """0 for x <= -1, x for x >= 1, (x + 1)^2 / 4 between."""
    t = as_tracer(x)
    mid = xnp.true_divide(xnp.power(xnp.add(t, 1.0), 2), 4)
    return xnp.where(xnp.less_equal(t, -1.0), 0.0, xnp.where(xnp.greater_equal(t, 1.0), t, mid))


@eager_ok
def sparse_sigmoid(x: Any) -> Tracer:
    """0.5 * clip(x + 1, 0, 2)."""
    return xnp.multiply(0.5, xnp.clip(xnp.add(x, 1.0), 0.0, 2.0))


@eager_ok
def elu(x: Any, alpha: Any = 1.0) -> Tracer:
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""
    t = as_tracer(x)
    pos = xnp.greater(t, 0)
    return xnp.where(pos, t, xnp.multiply(alpha, xnp.expm1(xnp.where(pos, 0.0, t))))


@eager_ok
def celu(x: Any, alpha: Any = 1.0) -> Tracer:
    """max(x, 0) + alpha * expm1(min(x, 0) / alpha)."""
    return xnp.add(xnp.maximum(x, 0.0), xnp.multiply(alpha, xnp.expm1(
        xnp.true_divide(xnp.minimum(x, 0.0), alpha))))


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@eager_ok
def selu(x: Any) -> Tracer:
    """scale * elu(x, alpha) with the self-normalising constants."""
    return xnp.multiply(_SELU_SCALE, elu(x, _SELU_ALPHA))


@eager_ok
def leaky_relu(x: Any, negative_slope: Any = 1e-2) -> Tracer:
    """x for x >= 0, negative_slope * x otherwise."""
    t = as_tracer(x)
    return xnp.where(xnp.greater_equal(t, 0), t, xnp.multiply(negative_slope, t))


@eager_ok
def hard_tanh(x: Any) -> Tracer:
    """x clamped to [-1, 1]."""
    t = as_tracer(x)
    return xnp.where(xnp.greater(t, 1), 1, xnp.where(xnp.less(t, -1), -1, t))


@eager_ok
def hard_sigmoid(x: Any) -> Tracer:
    """relu6(x + 3) / 6."""
    return xnp.true_divide(relu6(xnp.add(x, 3.0)), 6.0)


@eager_ok
def hard_silu(x: Any) -> Tracer:
    """x * hard_sigmoid(x)."""
    return xnp.multiply(x, hard_sigmoid(x))


hard_swish = hard_silu


@eager_ok
def gelu(x: Any, approximate: bool = True) -> Tracer:
    """GELU: x * 0.5 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) by default (like jax.nn.gelu),
    exact 0.5 x erfc(-x / sqrt 2) with approximate=False."""
    t = _float(x)
    dt = t.dtype
    if approximate:
        inner = xnp.multiply(xnp.asarray(np.sqrt(2 / np.pi).astype(dt)),
                             xnp.add(t, xnp.multiply(0.044715, xnp.power(t, 3))))
        return xnp.multiply(t, xnp.multiply(0.5, xnp.add(1.0, xnp.tanh(inner))))
    z = xnp.multiply(xnp.negative(t), xnp.asarray(np.sqrt(0.5).astype(dt)))
    return xnp.multiply(xnp.multiply(0.5, t), _erfc(z))


def _erfc(z: Tracer) -> Tracer:
    """1 - erf(z) without the cancellation for large z: 1 - erf(|z|) below 1/2, else the
    Chebyshev fit exp(-z^2 + P(t)) t, t = 1 / (1 + z/2) (relative error < 1.2e-7), evaluated
    in f64 for 32-bit and narrower floats; erfc(-z) = 2 - erfc(z). f64 inputs use 1 - erf."""
    dt = z.dtype
    if dt == np.float64:
        return xnp.subtract(1.0, xnp.erf(z))
    w = xnp.astype(z, np.float64)
    a = xnp.abs(w)
    t = xnp.true_divide(1.0, xnp.add(1.0, xnp.multiply(0.5, a)))
    poly = xnp.asarray(np.float64(_ERFC_FIT[-1]))
    for c in _ERFC_FIT[-2::-1]:
        poly = xnp.add(c, xnp.multiply(t, poly))
    tail = xnp.multiply(t, xnp.exp(xnp.add(xnp.negative(xnp.multiply(a, a)), poly)))
    pos = xnp.where(xnp.less(a, 0.5), xnp.subtract(1.0, xnp.erf(a)), tail)
    return xnp.astype(xnp.where(xnp.less(w, 0), xnp.subtract(2.0, pos), pos), dt)


_ERFC_FIT = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
             -1.13520398, 1.48851587, -0.82215223, 0.17087277)


@eager_ok
def glu(x: Any, axis: int = -1) -> Tracer:
    """Gated linear unit: the first half of `axis` times sigmoid of the second half."""
    t = as_tracer(x)
    if t.shape[axis] % 2:
        raise trace_error(f"glu: axis {axis} must have an even size, got {t.aval_text}")
    x1, x2 = xnp.split(t, 2, axis)
    return xnp.multiply(x1, sigmoid(x2))


def _masked(t: Tracer, where: Any, fill: float) -> Tracer:
    return t if where is None else xnp.where(where, t, fill)


@eager_ok
def logsumexp(x: Any, axis: Any = None, b: Any = None, keepdims: bool = False,
              return_sign: bool = False, where: Any = None) -> Any:
    """log(sum(b * exp(x))) over `axis`, the finite max subtracted first (an all -inf slice
    gives -inf); `return_sign` also returns the sign of the sum (with `b`, it may be < 0)."""
    t = _float(x)
    axes = _axes(axis, t.ndim)
    m = xnp.max(_masked(t, where, -np.inf), axis=axes, keepdims=True) if t.ndim else t
    m = xnp.where(xnp.isfinite(m), m, xnp.zeros_like(m))
    e = xnp.exp(xnp.subtract(t, m))
    if b is not None:
        e = xnp.multiply(e, b)
    s = xnp.sum(_masked(e, where, 0.0), axis=axes, keepdims=True) if t.ndim else e
    sign = xnp.sign(s)
    out = xnp.add(xnp.log(xnp.abs(s)), m)
    if not keepdims and t.ndim:
        out, sign = xnp.squeeze(out, axes), xnp.squeeze(sign, axes)
    return (out, sign) if return_sign else out


@eager_ok
def logmeanexp(x: Any, axis: Any = None, where: Any = None, keepdims: bool = False) -> Tracer:
    """logsumexp(x) - log(n), n the number of (unmasked) elements reduced."""
    t = _float(x)
    lse = logsumexp(t, axis, keepdims=keepdims, where=where)
    axes = _axes(axis, t.ndim)
    if where is None:
        count = xnp.asarray(np.asarray(int(np.prod([t.shape[a] for a in axes])), lse.dtype))
    else:
        w = xnp.broadcast_to(as_tracer(where), t.shape)
        count = xnp.sum(xnp.astype(w, lse.dtype), axis=axes, keepdims=keepdims)
    return xnp.subtract(lse, xnp.log(count))


@eager_ok
def log1mexp(x: Any) -> Tracer:
    """log(1 - exp(-x)) for x >= 0: log(-expm1(-x)) below log 2, log1p(-exp(-x)) above."""
    t = _float(x)
    return xnp.where(xnp.less(t, float(np.log(np.float32(2.0)))),
                     xnp.log(xnp.negative(xnp.expm1(xnp.negative(t)))),
                     xnp.log1p(xnp.negative(xnp.exp(xnp.negative(t)))))


@eager_ok
def softmax(x: Any, axis: Any = -1, where: Any = None) -> Tracer:
    """exp(x - max) / sum(exp(x - max)) along `axis`; masked-out elements (`where` false)
    are left out of the max and the sum and come out 0."""
    t = _float(x)
    axes = _axes(axis, t.ndim)
    xs = _masked(t, where, -np.inf)
    e = xnp.exp(xnp.subtract(xs, xnp.max(xs, axis=axes, keepdims=True)))
    out = xnp.true_divide(e, xnp.sum(_masked(e, where, 0.0), axis=axes, keepdims=True))
    return _masked(out, where, 0.0)


@eager_ok
def log_softmax(x: Any, axis: Any = -1, where: Any = None) -> Tracer:
    """x - max - log(sum(exp(x - max))) along `axis` (-inf where `where` is false)."""
    t = _float(x)
    axes = _axes(axis, t.ndim)
    xs = _masked(t, where, -np.inf)
    shifted = xnp.subtract(xs, xnp.max(xs, axis=axes, keepdims=True))
    lse = xnp.log(xnp.sum(_masked(xnp.exp(shifted), where, 0.0), axis=axes, keepdims=True))
    return _masked(xnp.subtract(shifted, lse), where, -np.inf)


def _mean(t: Tracer, axes: tuple[int, ...], where: Any) -> Tracer:
    if where is None:
        return xnp.mean(t, axis=axes, keepdims=True)
    w = xnp.broadcast_to(as_tracer(where), t.shape)
    n = xnp.sum(xnp.astype(w, t.dtype), axis=axes, keepdims=True)
    return xnp.true_divide(xnp.sum(xnp.where(w, t, 0), axis=axes, keepdims=True), n)


@eager_ok
def standardize(x: Any, axis: Any = -1, mean: Any = None, variance: Any = None,
                epsilon: Any = 1e-5, where: Any = None, *, algorithm: str = "fast") -> Tracer:
    """(x - mean) * rsqrt(variance + epsilon), the moments over `axis` unless given; the
    variance as mean(x^2) - mean(x)^2 clipped at 0 ('fast', jax's default) or
    mean((x - mean)^2) ('stable')."""
    t = _float(x)
    axes = _axes(axis, t.ndim)
    mu = _mean(t, axes, where) if mean is None else as_tracer(mean)
    if variance is None:
        if algorithm == "stable":
            variance = _mean(xnp.square(xnp.subtract(t, mu)), axes, where)
        elif algorithm == "fast":
            variance = xnp.maximum(xnp.subtract(_mean(xnp.square(t), axes, where),
                                                xnp.square(mu)), 0)
        else:
            raise trace_error(f"standardize: unknown algorithm {algorithm!r}, expected 'fast' "
                              f"or 'stable'")
    return xnp.multiply(xnp.subtract(t, mu), xnp.rsqrt(xnp.add(variance, epsilon)))


@eager_ok
def layer_norm(x: Any, scale: Any = None, bias: Any = None, eps: float = 1e-5,
               axis: int = -1) -> Tracer:
    """(x - mean) / sqrt(var + eps) over the last axis (or `axis`), then * scale + bias
    (scale/bias broadcast against the normalized axis)."""
    t = _float(x)
    mu = xnp.mean(t, axis=axis, keepdims=True)
    d = xnp.subtract(t, mu)
    var = xnp.mean(xnp.multiply(d, d), axis=axis, keepdims=True)
    y = xnp.multiply(d, xnp.rsqrt(xnp.add(var, eps)))
    if scale is not None:
        y = xnp.multiply(y, scale)
    if bias is not None:
        y = xnp.add(y, bias)
    return y


@eager_ok
def one_hot(x: Any, num_classes: int, dtype: Any = np.float32, axis: int = -1) -> Tracer:
    """One-hot encoding along a new axis `axis` (last by default); indices outside
    [0, num_classes) give all zeros."""
    from xlc.frontend import lax as _lax

    t = as_tracer(x)
    pos = axis % (t.ndim + 1)
    shape = [1] * t.ndim
    shape.insert(pos, int(num_classes))
    classes = _lax.broadcasted_iota(t.dtype, tuple(shape), pos)
    return xnp.astype(xnp.equal(xnp.expand_dims(t, pos), classes),
                      np.float32 if dtype is None else dtype)


# Attention and the initializers module, in their own files (they build on the above).
from xlc.frontend import nn_initializers as initializers  # noqa: E402
from xlc.frontend.nn_attention import dot_product_attention  # noqa: E402
