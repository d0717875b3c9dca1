"""`xlc.nn`: common neural-network functions built from `xlc.numpy` (numerically stable forms:
softmax/log_softmax/logsumexp subtract the max first)."""
from __future__ import annotations

from typing import Any

import numpy as np

from xlc.frontend import numpy_api as xnp
from xlc.frontend.eager import eager_ok
from xlc.frontend.tracer import Tracer, as_tracer, emit, infer
from xlc.hlo.opcodes import Opcode

__all__ = ["relu", "relu6", "gelu", "sigmoid", "silu", "swish", "softplus", "softmax",
           "log_softmax", "logsumexp", "layer_norm", "one_hot"]


@eager_ok
def relu(x: Any) -> Tracer:
    """max(x, 0)."""
    return xnp.maximum(x, 0)


@eager_ok
def relu6(x: Any) -> Tracer:
    """min(max(x, 0), 6)."""
    return xnp.clip(x, 0, 6)


@eager_ok
def sigmoid(x: Any) -> Tracer:
    """1 / (1 + exp(-x)) via HLO `logistic`."""
    t = as_tracer(x)
    if not t.ptype.is_float:
        t = xnp.astype(t, np.float32)
    return emit(Opcode.LOGISTIC, infer("infer_unary", Opcode.LOGISTIC, t.aval), [t],
                op_name="sigmoid", weak=t.weak_type)


@eager_ok
def silu(x: Any) -> Tracer:
    """x * sigmoid(x)."""
    return xnp.multiply(x, sigmoid(x))


swish = silu


@eager_ok
def softplus(x: Any) -> Tracer:
    """log(1 + exp(x)), computed stably as max(x, 0) + log1p(exp(-|x|))."""
    return xnp.add(xnp.maximum(x, 0), xnp.log1p(xnp.exp(xnp.negative(xnp.abs(x)))))


@eager_ok
def gelu(x: Any, approximate: bool = True) -> Tracer:
    """GELU: tanh approximation 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) by default (like
    jax.nn.gelu), exact 0.5x(1 + erf(x/sqrt(2))) with approximate=False."""
    t = as_tracer(x)
    if not t.ptype.is_float:
        t = xnp.astype(t, np.float32)
    if approximate:
        inner = xnp.multiply(float(np.sqrt(2 / np.pi)), xnp.add(t, xnp.multiply(0.044715,
                                                                         xnp.power(t, 3))))
        return xnp.multiply(xnp.multiply(0.5, t), xnp.add(1.0, xnp.tanh(inner)))
    return xnp.multiply(xnp.multiply(0.5, t), xnp.add(1.0, xnp.erf(xnp.multiply(
        t, float(1 / np.sqrt(2))))))


@eager_ok
def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Tracer:
    """log(sum(exp(x))) over `axis`, stable for large inputs (an all -inf slice gives -inf)."""
    t = as_tracer(x)
    if not t.ptype.is_float:
        t = xnp.astype(t, np.float32)
    m = xnp.max(t, axis=axis, keepdims=True)
    m = xnp.where(xnp.isfinite(m), m, 0)
    s = xnp.sum(xnp.exp(xnp.subtract(t, m)), axis=axis, keepdims=True)
    out = xnp.add(xnp.log(s), m)
    if not keepdims:
        axes = tuple(range(t.ndim)) if axis is None else (
            (axis,) if isinstance(axis, int) else tuple(axis))
        out = xnp.squeeze(out, tuple(a % t.ndim for a in axes)) if t.ndim else out
    return out


@eager_ok
def softmax(x: Any, axis: Any = -1) -> Tracer:
    """exp(x - max) / sum(exp(x - max)) along `axis`."""
    t = as_tracer(x)
    if not t.ptype.is_float:
        t = xnp.astype(t, np.float32)
    e = xnp.exp(xnp.subtract(t, xnp.max(t, axis=axis, keepdims=True)))
    return xnp.true_divide(e, xnp.sum(e, axis=axis, keepdims=True))


@eager_ok
def log_softmax(x: Any, axis: Any = -1) -> Tracer:
    """x - max - log(sum(exp(x - max))) along `axis`."""
    t = as_tracer(x)
    if not t.ptype.is_float:
        t = xnp.astype(t, np.float32)
    shifted = xnp.subtract(t, xnp.max(t, axis=axis, keepdims=True))
    return xnp.subtract(shifted, xnp.log(xnp.sum(xnp.exp(shifted), axis=axis, keepdims=True)))


@eager_ok
def layer_norm(x: Any, scale: Any = None, bias: Any = None, eps: float = 1e-5,
               axis: int = -1) -> Tracer:
    """(x - mean) / sqrt(var + eps) over the last axis (or `axis`), then * scale + bias
    (scale/bias broadcast against the normalized axis)."""
    t = as_tracer(x)
    if not t.ptype.is_float:
        t = xnp.astype(t, np.float32)
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
def one_hot(x: Any, num_classes: int, dtype: Any = np.float32) -> Tracer:
    """One-hot encoding along a new last axis."""
    t = as_tracer(x)
    classes = xnp.arange(num_classes)
    return xnp.astype(xnp.equal(xnp.expand_dims(t, -1), classes), dtype)
