"""Eight small programs written as a JAX user writes them (an MLP, a CNN, a causal transformer
block, a KV-cache greedy decode, an RNN via `lax.scan`, a top-k sampler, a hand-written training
step, k-means via `while_loop`), each run through `xlc.jit` on the reference evaluator (the
interpreter backend) and on the CPU, and compared with the same program under `jax.jit` when jax
is installed.

Every program takes a namespace `M` with `np`, `nn` and `lax` (xlc's or jax's), so one source
runs on both."""
from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import xlc.lax
import xlc.nn
import xlc.numpy as xnp

import xlc
from tests.frontend.helpers import assert_close

try:
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover - jax is optional
    jax = None

XLC = SimpleNamespace(np=xnp, nn=xlc.nn, lax=xlc.lax)
R = np.random.default_rng(11)


def _normal(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (R.standard_normal(shape) * scale).astype(np.float32)


# ---- the programs ------------------------------------------------------------------------------
def mlp(M: Any, p: dict, x: Any) -> Any:
    h = M.nn.relu(x @ p["w1"] + p["b1"])
    h = M.nn.gelu(h @ p["w2"] + p["b2"])
    return M.nn.log_softmax(h @ p["w3"] + p["b3"], axis=-1)


def cnn(M: Any, p: dict, x: Any) -> Any:
    dn = ("NHWC", "HWIO", "NHWC")
    h = M.lax.conv_general_dilated(x, p["k1"], (1, 1), "SAME", dimension_numbers=dn)
    h = M.nn.relu(h + p["c1"])
    h = M.lax.reduce_window(h, -np.inf, M.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = M.lax.conv_general_dilated(h, p["k2"], (1, 1), "VALID", dimension_numbers=dn)
    h = M.nn.relu(h + p["c2"]).mean(axis=(1, 2))
    return h @ p["w"] + p["b"]


def _layer_norm(M: Any, x: Any, g: Any, b: Any) -> Any:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * M.lax.rsqrt(var + 1e-5) * g + b


def transformer_block(M: Any, p: dict, x: Any) -> Any:
    B, T, C = x.shape
    H = 2
    D = C // H

    def heads(t: Any) -> Any:
        return t.reshape(B, T, H, D).transpose(0, 2, 1, 3)

    h = _layer_norm(M, x, p["g1"], p["b1"])
    q, k, v = M.np.split(h @ p["wqkv"], 3, axis=-1)
    # D ** 0.5 is a weak Python float; np.sqrt(D) would be a strong f64 (xlc keeps 64 bits)
    s = M.np.einsum("bhqd,bhkd->bhqk", heads(q), heads(k)) / D ** 0.5
    causal = M.np.tril(M.np.ones((T, T), dtype=bool))
    s = M.np.where(causal, s, -1e9)
    a = M.np.einsum("bhqk,bhkd->bhqd", M.nn.softmax(s, axis=-1), heads(v))
    x = x + a.transpose(0, 2, 1, 3).reshape(B, T, C) @ p["wo"]
    h = _layer_norm(M, x, p["g2"], p["b2"])
    return x + M.nn.gelu(h @ p["w1"]) @ p["w2"]


def kv_decode(M: Any, p: dict, tok: Any, k_cache: Any, v_cache: Any, pos0: Any) -> Any:
    """Greedy decoding of 3 tokens: each step embeds the last token, writes its key and value
    into the caches at the current position, attends over the filled part, takes the argmax."""
    steps, T = 3, k_cache.shape[1]

    def step(i: Any, state: Any) -> Any:
        tok, kc, vc, out = state
        pos = pos0 + i
        h = p["emb"][tok]                                            # [B, C]
        q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
        kc = M.lax.dynamic_update_slice(kc, k[:, None, :], (0, pos, 0))
        vc = M.lax.dynamic_update_slice_in_dim(vc, v[:, None, :], pos, axis=1)
        s = M.np.einsum("btc,bc->bt", kc, q) / q.shape[-1] ** 0.5
        s = M.np.where(M.np.arange(T)[None, :] <= pos, s, -1e9)
        ctx = M.np.einsum("bt,btc->bc", M.nn.softmax(s, axis=-1), vc)
        logits = (h + ctx) @ p["wo"]
        nxt = M.np.argmax(logits, axis=-1).astype(M.np.int32)
        return nxt, kc, vc, out.at[:, i].set(nxt)

    out0 = M.np.zeros((tok.shape[0], steps), M.np.int32)
    return M.lax.fori_loop(0, steps, step, (tok, k_cache, v_cache, out0))


def rnn(M: Any, p: dict, xs: Any) -> Any:
    def cell(h: Any, x: Any) -> Any:
        h = M.np.tanh(x @ p["wx"] + h @ p["wh"] + p["b"])
        return h, h @ p["wy"]

    h0 = M.np.zeros((xs.shape[1], p["wh"].shape[0]), M.np.float32)
    return M.lax.scan(cell, h0, xs)


def topk_sampler(M: Any, logits: Any, gumbel: Any) -> Any:
    """Top-k sampling with temperature, the randomness passed in as Gumbel noise."""
    vals, idx = M.lax.top_k(logits, 5)
    probs = M.nn.softmax(vals / 0.7, axis=-1)
    choice = M.np.argmax(M.np.log(probs) + gumbel, axis=-1)
    token = M.np.take_along_axis(idx, choice[:, None], axis=-1)[:, 0]
    return token, probs, vals


def train(M: Any, p: tuple, x: Any, y: Any) -> Any:
    """Three SGD steps of a tanh MLP on a squared loss, with gradients written by hand."""
    lr = 0.1

    def loss_and_grads(p: tuple) -> Any:
        w1, b1, w2, b2 = p
        h = M.np.tanh(x @ w1 + b1)
        err = h @ w2 + b2 - y
        g_out = 2 * err / err.size
        g_z = (g_out @ w2.T) * (1 - h ** 2)
        grads = (x.T @ g_z, g_z.sum(0), h.T @ g_out, g_out.sum(0))
        return (err ** 2).mean(), grads

    def step(i: Any, p: tuple) -> tuple:
        _, grads = loss_and_grads(p)
        return tuple(w - lr * g for w, g in zip(p, grads))

    p = M.lax.fori_loop(0, 3, step, p)
    return p, loss_and_grads(p)[0]


def kmeans(M: Any, pts: Any, c0: Any) -> Any:
    K = c0.shape[0]

    def assign(c: Any) -> Any:
        return M.np.argmin(((pts[:, None, :] - c[None, :, :]) ** 2).sum(-1), axis=1)

    def cond(s: Any) -> Any:
        it, _, shift = s
        return M.np.logical_and(it < 20, shift > 1e-4)

    def body(s: Any) -> Any:
        it, c, _ = s
        onehot = M.nn.one_hot(assign(c), K, dtype=M.np.float32)
        counts = onehot.sum(0)
        new = (onehot.T @ pts) / M.np.maximum(counts, 1)[:, None]
        new = M.np.where(counts[:, None] > 0, new, c)
        return it + 1, new, M.np.abs(new - c).max()

    it, c, _ = M.lax.while_loop(cond, body, (0, c0, M.np.float32(np.inf)))
    return it, c, assign(c)


# ---- inputs ------------------------------------------------------------------------------------
def _cases() -> dict[str, tuple[Callable[..., Any], tuple]]:
    C, V, T, B = 16, 24, 8, 2
    mlp_p = {"w1": _normal(16, 32, scale=0.3), "b1": _normal(32, scale=0.1),
             "w2": _normal(32, 32, scale=0.2), "b2": _normal(32, scale=0.1),
             "w3": _normal(32, 10, scale=0.2), "b3": _normal(10, scale=0.1)}
    cnn_p = {"k1": _normal(3, 3, 3, 8, scale=0.3), "c1": _normal(8, scale=0.1),
             "k2": _normal(3, 3, 8, 8, scale=0.2), "c2": _normal(8, scale=0.1),
             "w": _normal(8, 5, scale=0.3), "b": _normal(5, scale=0.1)}
    tf_p = {"g1": 1 + _normal(C, scale=0.1), "b1": _normal(C, scale=0.1),
            "wqkv": _normal(C, 3 * C, scale=0.25), "wo": _normal(C, C, scale=0.25),
            "g2": 1 + _normal(C, scale=0.1), "b2": _normal(C, scale=0.1),
            "w1": _normal(C, 4 * C, scale=0.25), "w2": _normal(4 * C, C, scale=0.12)}
    kv_p = {"emb": _normal(V, C, scale=2.0), "wq": _normal(C, C, scale=0.3),
            "wk": _normal(C, C, scale=0.3), "wv": _normal(C, C, scale=0.3),
            "wo": _normal(C, V, scale=0.5)}
    k_cache, v_cache = np.zeros((B, T, C), np.float32), np.zeros((B, T, C), np.float32)
    k_cache[:, :2], v_cache[:, :2] = _normal(B, 2, C), _normal(B, 2, C)  # a 2-token prompt
    rnn_p = {"wx": _normal(4, 8, scale=0.4), "wh": _normal(8, 8, scale=0.3),
             "b": _normal(8, scale=0.1), "wy": _normal(8, 3, scale=0.4)}
    gumbel = -np.log(-np.log(R.uniform(1e-6, 1.0, (3, 5)))).astype(np.float32)
    train_p = (_normal(6, 8, scale=0.4), np.zeros(8, np.float32), _normal(8, 2, scale=0.4),
               np.zeros(2, np.float32))
    centers = np.array([[0, 0], [4, 4], [-4, 4]], np.float32)
    pts = (centers[R.integers(0, 3, 40)] + _normal(40, 2, scale=0.5)).astype(np.float32)
    c0 = np.stack([pts[np.argmin(((pts - m) ** 2).sum(1))] + 1.0 for m in centers])
    return {
        "mlp": (mlp, (mlp_p, _normal(8, 16))),
        "cnn": (cnn, (cnn_p, _normal(2, 8, 8, 3))),
        "transformer_block": (transformer_block, (tf_p, _normal(B, T, C))),
        "kv_decode": (kv_decode, (kv_p, np.array([8, 22], np.int32), k_cache, v_cache,
                                  np.int32(2))),
        "rnn_scan": (rnn, (rnn_p, _normal(6, 2, 4))),
        "topk_sampler": (topk_sampler, (_normal(3, 32, scale=2.0), gumbel)),
        "train_step": (train, (train_p, _normal(16, 6), _normal(16, 2))),
        "kmeans": (kmeans, (pts, c0)),
    }


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_real_program_matches_evaluator_and_jax(name: str) -> None:
    prog, args = CASES[name]

    def fn(*a: Any) -> Any:
        return prog(XLC, *a)

    ref = xlc.jit(fn, backend="interpreter")(*args)       # the reference evaluator
    got = xlc.jit(fn, backend="cpu")(*args)
    assert_close(got, ref, rtol=2e-5, atol=2e-5)
    if jax is None:
        return
    jax_ns = SimpleNamespace(np=jnp, nn=jax.nn, lax=jax.lax)
    want = jax.jit(lambda *a: prog(jax_ns, *a))(*args)
    want = jax.tree_util.tree_map(np.asarray, want)
    assert_close(ref, want, rtol=2e-4, atol=2e-5)
