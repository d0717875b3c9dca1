"""xlc.nn against jax.nn (skipped without JAX): every activation in f32 and bf16, the
softmax / logsumexp / standardize family with axes and `where` masks, one_hot, glu,
dot_product_attention (implementation='xla': grouped heads, bias, mask, causal, local window,
sequence lengths, residual) and nn.initializers with the same key. Tolerances are in ulps of
max(|value|, 1): 0 means bit for bit (no transcendental involved); the others go through
exp/log/tanh/erf, whose XLA and xlc implementations differ by an ulp or a few. Plus checks
against numpy formulas that run without JAX."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import xlc.nn as nn

import xlc
from tests.frontend.test_random_dists import assert_ulps

X = np.concatenate([np.linspace(-8, 8, 161), [0.0, 1e-3, -1e-3, 30.0, -30.0, 100.0, -100.0]]
                   ).astype(np.float32)

# name: (ulps in f32, ulps in bf16)
ACTIVATIONS: dict[str, tuple[float, float]] = {
    "relu": (0, 0), "relu6": (0, 0), "identity": (0, 0), "soft_sign": (0, 0),
    "squareplus": (0, 0), "sparse_plus": (0, 0), "sparse_sigmoid": (0, 0),
    "leaky_relu": (0, 0), "hard_tanh": (0, 0), "hard_sigmoid": (0, 1), "hard_silu": (0, 2),
    "hard_swish": (0, 2), "sigmoid": (1, 1), "silu": (1, 1), "swish": (1, 1),
    "softplus": (1, 0), "log_sigmoid": (1, 0), "mish": (4, 0), "elu": (1, 0), "celu": (1, 0),
    "selu": (1, 0), "tanh": (4, 0), "log1mexp": (4, 1),
}
VARIANTS: dict[str, tuple[Callable[..., Any], Callable[..., Any], float, float]] = {
    "gelu_tanh": (lambda x: nn.gelu(x), lambda j, x: j.gelu(x), 8, 0),
    "gelu_exact": (lambda x: nn.gelu(x, approximate=False),
                   lambda j, x: j.gelu(x, approximate=False), 2, 1),
    "elu_alpha": (lambda x: nn.elu(x, 0.5), lambda j, x: j.elu(x, 0.5), 1, 0),
    "celu_alpha": (lambda x: nn.celu(x, 2.0), lambda j, x: j.celu(x, 2.0), 4, 0),
    "leaky_relu_slope": (lambda x: nn.leaky_relu(x, 0.2), lambda j, x: j.leaky_relu(x, 0.2),
                         0, 0),
    "squareplus_b": (lambda x: nn.squareplus(x, 1.5), lambda j, x: j.squareplus(x, 1.5), 0, 0),
}


def _jnn() -> Any:
    return pytest.importorskip("jax").nn


def _act_cases() -> list[tuple[str, str]]:
    names = sorted(ACTIVATIONS) + sorted(VARIANTS)
    return [(n, d) for n in names for d in ("float32", "bfloat16")]


@pytest.mark.parametrize("name,dtype", _act_cases())
def test_activation_matches_jax(name: str, dtype: str) -> None:
    jnn = _jnn()
    import jax

    x = X.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32)
    if name == "log1mexp":
        x = np.abs(x)
    if name in VARIANTS:
        mine, theirs, u32, u16 = VARIANTS[name]
    else:
        mine, u32, u16 = getattr(nn, name), *ACTIVATIONS[name]
        theirs = (lambda n: lambda j, v: getattr(j, n)(v))(name)
    got = np.asarray(xlc.jit(mine)(x))
    want = np.asarray(jax.jit(lambda v: theirs(jnn, v))(x))
    assert_ulps(got, want, u32 if dtype == "float32" else u16, 1.0)


R = np.random.default_rng(0)
T = (R.normal(size=(4, 6, 8)) * 3).astype(np.float32)
MASK = R.random((4, 6, 8)) > 0.3
B = R.normal(size=(4, 6, 8)).astype(np.float32)
IDX = np.array([[0, 3], [5, -1]], np.int32)

REDUCTIONS: dict[str, tuple[Callable[..., Any], Callable[..., Any], float]] = {
    "softmax": (lambda x: nn.softmax(x), lambda j, x: j.softmax(x), 2),
    "softmax_axes": (lambda x: nn.softmax(x, axis=(0, 2)),
                     lambda j, x: j.softmax(x, axis=(0, 2)), 4),
    "softmax_where": (lambda x: nn.softmax(x, where=MASK), lambda j, x: j.softmax(x, where=MASK),
                      2),
    "log_softmax": (lambda x: nn.log_softmax(x, axis=1), lambda j, x: j.log_softmax(x, axis=1),
                    2),
    "log_softmax_where": (lambda x: nn.log_softmax(x, where=MASK),
                          lambda j, x: j.log_softmax(x, where=MASK), 2),
    "logsumexp": (lambda x: nn.logsumexp(x, axis=-1), lambda j, x: j.logsumexp(x, axis=-1), 2),
    "logsumexp_all": (lambda x: nn.logsumexp(x), lambda j, x: j.logsumexp(x), 2),
    "logsumexp_b_sign": (lambda x: nn.logsumexp(x, axis=1, b=B, return_sign=True),
                         lambda j, x: j.logsumexp(x, axis=1, b=B, return_sign=True), 2),
    "logsumexp_where": (lambda x: nn.logsumexp(x, axis=2, where=MASK, keepdims=True),
                        lambda j, x: j.logsumexp(x, axis=2, where=MASK, keepdims=True), 2),
    "logmeanexp": (lambda x: nn.logmeanexp(x, axis=2), lambda j, x: j.logmeanexp(x, axis=2), 2),
    "standardize": (lambda x: nn.standardize(x), lambda j, x: j.standardize(x), 4),
    "standardize_stable": (lambda x: nn.standardize(x, axis=(1, 2), algorithm="stable"),
                           lambda j, x: j.standardize(x, axis=(1, 2), algorithm="stable"), 4),
    "standardize_where": (lambda x: nn.standardize(x, where=MASK),
                          lambda j, x: j.standardize(x, where=MASK), 8),
    "glu": (lambda x: nn.glu(x), lambda j, x: j.glu(x), 2),
    "glu_axis0": (lambda x: nn.glu(x, axis=0), lambda j, x: j.glu(x, axis=0), 2),
    "one_hot": (lambda x: nn.one_hot(IDX, 5), lambda j, x: j.one_hot(IDX, 5), 0),
    "one_hot_axis": (lambda x: nn.one_hot(IDX, 6, axis=1, dtype=np.int32),
                     lambda j, x: j.one_hot(IDX, 6, axis=1, dtype=np.int32), 0),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_match_jax(name: str) -> None:
    jnn = _jnn()
    import jax

    mine, theirs, ulps = REDUCTIONS[name]
    got, want = xlc.jit(mine)(T), jax.jit(lambda v: theirs(jnn, v))(T)
    for g, w in (zip(got, want) if isinstance(want, tuple) else [(got, want)]):
        assert_ulps(np.asarray(g), np.asarray(w), ulps, 1.0)


BT, TT, ST, NH, KH, HD = 2, 5, 7, 4, 2, 8
Q = R.normal(size=(BT, TT, NH, HD)).astype(np.float32)
K = R.normal(size=(BT, ST, KH, HD)).astype(np.float32)
V = R.normal(size=(BT, ST, KH, HD)).astype(np.float32)
ATTENTION: dict[str, dict[str, Any]] = {
    "plain": {},
    "bias": {"bias": R.normal(size=(BT, NH, TT, ST)).astype(np.float32)},
    "bias_broadcast": {"bias": R.normal(size=(1, 1, TT, ST)).astype(np.float32)},
    "mask": {"mask": R.random((BT, 1, TT, ST)) > 0.3},
    "causal_scale": {"is_causal": True, "scale": 0.3},
    "seq_lengths": {"query_seq_lengths": np.array([5, 3], np.int32),
                    "key_value_seq_lengths": np.array([7, 4], np.int32)},
    "local_window": {"local_window_size": (2, 1)},
    "residual": {"is_causal": True, "return_residual": True},
}


@pytest.mark.parametrize("name", sorted(ATTENTION) + ["bf16", "3d"])
def test_dot_product_attention_matches_jax(name: str) -> None:
    jnn = _jnn()
    import jax

    kw = ATTENTION.get(name, {"is_causal": True})
    args: tuple[np.ndarray, ...] = (Q, K, V)
    if name == "bf16":
        args = tuple(a.astype(ml_dtypes.bfloat16) for a in args)
    if name == "3d":  # no batch dim, as many key/value heads as query heads
        args = (Q[0], np.repeat(K[0], 2, axis=1), np.repeat(V[0], 2, axis=1))
    got = xlc.jit(lambda q, k, v: nn.dot_product_attention(q, k, v, **kw))(*args)
    want = jax.jit(lambda q, k, v: jnn.dot_product_attention(q, k, v, implementation="xla",
                                                             **kw))(*args)
    for g, w in (zip(got, want) if isinstance(want, tuple) else [(got, want)]):
        assert_ulps(np.asarray(g), np.asarray(w), 0 if name == "bf16" else 4, 1.0)


INITS: dict[str, tuple[Callable[[Any], Any], float]] = {
    # name: (factory over the initializers module, ulps)
    "zeros": (lambda m: m.zeros, 0), "ones": (lambda m: m.ones, 0),
    "constant": (lambda m: m.constant(0.3), 0), "uniform": (lambda m: m.uniform(0.5), 0),
    "normal": (lambda m: m.normal(2.0), 2),
    "truncated_normal": (lambda m: m.truncated_normal(0.7), 2),
    "glorot_uniform": (lambda m: m.glorot_uniform(), 0),
    "glorot_normal": (lambda m: m.glorot_normal(), 2),
    "xavier_uniform": (lambda m: m.xavier_uniform(), 0),
    "lecun_uniform": (lambda m: m.lecun_uniform(), 0),
    "lecun_normal": (lambda m: m.lecun_normal(), 2),
    "he_uniform": (lambda m: m.he_uniform(), 0),
    "kaiming_normal": (lambda m: m.kaiming_normal(), 2),
    "variance_scaling_geo": (lambda m: m.variance_scaling(0.5, "fan_geo_avg", "normal",
                                                          in_axis=(0, 1)), 2),
    "variance_scaling_batch": (lambda m: m.variance_scaling(3.0, "fan_out", "uniform",
                                                            batch_axis=0), 0),
    "orthogonal": (lambda m: m.orthogonal(1.5), 16),
    "orthogonal_column0": (lambda m: m.orthogonal(column_axis=0), 16),
    "delta_orthogonal": (lambda m: m.delta_orthogonal(), 16),
}


@pytest.mark.parametrize("name", sorted(INITS))
def test_initializers_match_jax(name: str) -> None:
    """f32 weights from the same key (bf16 too for the non-orthogonal ones: JAX has no bf16
    QR on CPU)."""
    jnn = _jnn()
    import jax

    make, ulps = INITS[name]
    shape = (3, 3, 4, 4) if name == "delta_orthogonal" else (3, 4, 5)
    key = jax.random.PRNGKey(3)
    dtypes = [np.float32] if "orthogonal" in name else [np.float32, ml_dtypes.bfloat16]
    for dt in dtypes:
        got = np.asarray(xlc.jit(lambda k, d=dt: make(nn.initializers)(k, shape, d))(
            np.asarray(key)))
        want = np.asarray(jax.jit(lambda k, d=dt: make(jnn.initializers)(k, shape, d))(key))
        assert_ulps(got, want, ulps if dt == np.float32 else max(ulps, 3), 1.0)


# ---- without JAX ----------------------------------------------------------------------------
def test_activations_against_numpy() -> None:
    x = X.astype(np.float64)
    sp = np.logaddexp(x, 0)
    want = {"elu": np.where(x > 0, x, np.expm1(x)), "celu": np.where(x > 0, x, np.expm1(x)),
            "selu": 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)),
            "mish": x * np.tanh(sp), "log_sigmoid": -np.logaddexp(-x, 0), "softplus": sp,
            "hard_tanh": np.clip(x, -1, 1), "hard_sigmoid": np.clip(x + 3, 0, 6) / 6,
            "soft_sign": x / (1 + np.abs(x)), "squareplus": (x + np.sqrt(x * x + 4)) / 2,
            "sparse_sigmoid": np.clip(x + 1, 0, 2) / 2,
            "sparse_plus": np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4))}
    got = xlc.jit(lambda v: {n: getattr(nn, n)(v) for n in want})(X)
    for n, w in want.items():
        np.testing.assert_allclose(got[n], w, rtol=2e-6, atol=1e-6, err_msg=n)


def test_gelu_exact_tail() -> None:
    """erfc, not 1 + erf: the far negative tail keeps its relative accuracy."""
    import math

    x = np.array([-12.0, -8.0, -5.0, -2.0, 0.3, 4.0], np.float32)
    z = -x * np.float32(np.sqrt(0.5))  # in f32, as jax.nn.gelu forms it
    want = [0.5 * float(v) * math.erfc(float(w)) for v, w in zip(x, z)]
    np.testing.assert_allclose(xlc.jit(lambda v: nn.gelu(v, approximate=False))(x), want,
                               rtol=1e-6)


def test_attention_against_numpy() -> None:
    """Grouped-query causal attention = per-head softmax(q k^T / sqrt(H)) v."""
    got = np.asarray(xlc.jit(lambda q, k, v: nn.dot_product_attention(q, k, v, is_causal=True))(
        Q, K, V))
    g = NH // KH
    kk, vv = np.repeat(K, g, axis=2), np.repeat(V, g, axis=2)
    logits = np.einsum("btnh,bsnh->bnts", Q, kk) / np.sqrt(HD)
    logits = np.where(np.tril(np.ones((TT, ST), bool)), logits, -np.inf)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(got, np.einsum("bnts,bsnh->btnh", p, vv), rtol=1e-5, atol=1e-6)


def test_initializer_statistics() -> None:
    """Variance scaling hits its variance; orthogonal columns are orthonormal."""
    import xlc.random as xr

    k = np.asarray(xlc.jit(lambda: xr.key(0))())
    shape = (300, 200)
    w_u, w_t, q = xlc.jit(lambda k: (nn.initializers.he_uniform()(k, shape),
                                     nn.initializers.glorot_normal()(k, shape),
                                     nn.initializers.orthogonal()(k, (50, 20))))(k)
    np.testing.assert_allclose(np.var(w_u), 2 / 300, rtol=0.05)
    np.testing.assert_allclose(np.var(w_t), 2 / 500, rtol=0.05)
    assert np.abs(w_t).max() <= 2 * np.sqrt(2 / 500) / 0.87962566103423978 + 1e-6
    np.testing.assert_allclose(np.asarray(q).T @ np.asarray(q), np.eye(20), atol=1e-5)
