"""`xlc.nn.dot_product_attention`: scaled dot-product attention with jax.nn's 'xla'
implementation semantics (grouped-query heads, boolean mask, additive bias, causal and local
window masks, per-batch sequence lengths; masked logits get -0.7 * the largest float, the
softmax runs in f32 and the probabilities are cast back to the inputs' dtype).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from xlc.frontend import lax as _lax
from xlc.frontend import numpy_api as xnp
from xlc.frontend.tracer import Tracer, as_tracer, trace_error

__all__ = ["dot_product_attention"]


def _ensure_4d(t: Any) -> Tracer:
    a = as_tracer(t)
    return xnp.reshape(a, (1,) * (4 - a.ndim) + a.shape) if a.ndim < 4 else a


def _grouped(t: Tracer | None, k: int, g: int) -> Tracer | None:
    """A (B, N, T, S) bias or mask as (B, K, G, T, S) (a single head broadcast)."""
    if t is None:
        return None
    tb, tn, tt, ts = t.shape
    if tn == 1:
        return xnp.broadcast_to(xnp.reshape(t, (tb, 1, 1, tt, ts)), (tb, 1, g, tt, ts))
    if tn != k * g:
        raise trace_error(f"dot_product_attention: bias/mask has {tn} heads, expected 1 or "
                          f"{k * g}")
    return xnp.reshape(t, (tb, k, g, tt, ts))


def _large_negative(dt: np.dtype) -> float:
    import ml_dtypes

    top = min(float(ml_dtypes.finfo(dt).max), float(np.finfo(np.float32).max))
    return float(np.asarray(-0.7 * top, dt))


def _logit_mask(t: int, s: int, mask: Tracer | None, is_causal: bool,
                q_len: Tracer | None, kv_len: Tracer | None,
                window: tuple[int, int] | None) -> Tracer | None:
    """The combined boolean mask over (B, K, G, T, S) (None: nothing is masked)."""
    parts: list[Tracer] = [] if mask is None else [mask]
    qi = _lax.broadcasted_iota("int32", (t, s), 0)
    ki = _lax.broadcasted_iota("int32", (t, s), 1)
    if is_causal:
        parts.append(xnp.greater_equal(qi, ki))
    if window is not None:
        left, right = window
        parts.append(xnp.logical_and(xnp.greater_equal(qi, xnp.subtract(ki, right)),
                                     xnp.less_equal(qi, xnp.add(ki, left))))
    if q_len is not None:
        q_ok = xnp.less(xnp.arange(t, dtype="int32")[None, :, None], q_len[:, None, None])
        parts.append(xnp.reshape(q_ok, (q_len.shape[0], 1, 1, t, 1)))
    if kv_len is not None:
        kv_ok = xnp.less(xnp.arange(s, dtype="int32")[None, None, :], kv_len[:, None, None])
        parts.append(xnp.reshape(kv_ok, (kv_len.shape[0], 1, 1, 1, s)))
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = xnp.logical_and(out, p)
    return out


def dot_product_attention(query: Any, key: Any, value: Any, bias: Any = None, mask: Any = None,
                          *, scale: float | None = None, is_causal: bool = False,
                          query_seq_lengths: Any = None, key_value_seq_lengths: Any = None,
                          local_window_size: int | tuple[int, int] | None = None,
                          implementation: str | None = None,
                          return_residual: bool = False) -> Any:
    """softmax(q k^T * scale + bias, masked) v over (B, T, N, H) query and (B, S, K, H) key
    and value (N a multiple of K: grouped heads; fewer dims get leading 1s). `mask` is boolean
    (true = keep), broadcast like `bias` over (B, N, T, S); `is_causal` keeps key positions
    <= the query position; the sequence lengths mask padding (padded query rows come out 0);
    `return_residual` also returns the logsumexp of the logits as (B, T, N). Only the 'xla'
    implementation exists (None picks it)."""
    if implementation not in (None, "xla"):
        raise trace_error(f"dot_product_attention: implementation must be None or 'xla', got "
                          f"{implementation!r}")
    out_shape = as_tracer(query).shape
    q, k, v = _ensure_4d(query), _ensure_4d(key), _ensure_4d(value)
    b, s, kh, h = k.shape
    if v.shape != k.shape or q.shape[0] != b or q.shape[3] != h or q.shape[2] % kh:
        raise trace_error(f"dot_product_attention: query (B, T, N, H) and key/value "
                          f"(B, S, K, H) with N a multiple of K, got {q.aval_text}, "
                          f"{k.aval_text} and {v.aval_text}")
    t, n = q.shape[1], q.shape[2]
    g = n // kh
    win = (local_window_size, local_window_size) if isinstance(local_window_size, int) \
        else local_window_size
    logits_dt = np.promote_types(q.dtype, np.float32)
    # logits (B, K, G, T, S): batch B, K; contract H
    qg = xnp.reshape(q, (b, t, kh, g, h))
    logits = _lax.dot_general(qg, k, (((4,), (3,)), ((0, 2), (0, 2))),
                              preferred_element_type=logits_dt)  # (B, K, T, G, S)
    logits = xnp.transpose(logits, (0, 1, 3, 2, 4))
    scale_val = 1.0 / np.sqrt(h) if scale is None else scale
    logits = xnp.multiply(logits, xnp.asarray(np.asarray(scale_val, logits_dt)))
    bias_g = _grouped(None if bias is None else _ensure_4d(bias), kh, g)
    if bias_g is not None:
        logits = xnp.astype(xnp.add(logits, bias_g), logits_dt)
    mask_t = None if mask is None else _ensure_4d(mask)
    if mask_t is not None and mask_t.dtype != np.bool_:
        raise trace_error(f"dot_product_attention: mask must be boolean, got {mask_t.aval_text}")
    q_len = None if query_seq_lengths is None else as_tracer(query_seq_lengths)
    kv_len = None if key_value_seq_lengths is None else as_tracer(key_value_seq_lengths)
    keep = _logit_mask(t, s, _grouped(mask_t, kh, g), is_causal, q_len, kv_len, win)
    if keep is not None:
        logits = xnp.where(keep, logits, xnp.asarray(np.asarray(_large_negative(logits_dt),
                                                                logits_dt)))
    logits = xnp.astype(logits, np.float32)
    from xlc.frontend.nn import logsumexp, softmax

    probs = xnp.astype(softmax(logits, axis=-1), k.dtype)
    # encoded (B, K, G, T, H): batch B, K; contract S
    enc = _lax.dot_general(probs, v, (((4,), (1,)), ((0, 1), (0, 2))))
    enc = xnp.reshape(xnp.transpose(enc, (0, 3, 1, 2, 4)), (b, t, n, h))
    if q_len is not None:
        q_ok = xnp.less(xnp.arange(t, dtype="int32")[None, :], q_len[:, None])
        enc = xnp.multiply(enc, xnp.astype(q_ok[:, :, None, None], enc.dtype))
    enc = xnp.reshape(enc, out_shape)
    if not return_residual:
        return enc
    lse = xnp.astype(logsumexp(logits, axis=-1), k.dtype)  # (B, K, G, T)
    lse = xnp.reshape(xnp.transpose(lse, (0, 3, 1, 2)), (b, t, n))
    return enc, xnp.reshape(lse, out_shape[:-1])
