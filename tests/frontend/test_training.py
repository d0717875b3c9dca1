"""Training with xlc.grad and an Adam update written in xlc.numpy, 200 steps, f32: a 4-layer
MLP and a small transformer (embedding, causal self-attention, layer norm, MLP, softmax
cross-entropy). The loss at every step equals JAX's running the same program to 1e-4
relative; without JAX the loss must fall."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import xlc.numpy as xnp

import xlc

STEPS = 200
RNG = np.random.default_rng(11)


def _adam_step(m: Any, loss: Callable, grad: Callable, lr: float = 3e-3) -> Callable:
    """One training step: loss, gradient, Adam update (b1 0.9, b2 0.999, eps 1e-8)."""
    def step(params: dict, opt: dict, t: Any, *batch: Any) -> Any:
        value = loss(params, *batch)
        g = grad(loss)(params, *batch)
        t = t + 1.0
        new_p, new_m, new_v = {}, {}, {}
        for k in params:
            new_m[k] = 0.9 * opt["m"][k] + 0.1 * g[k]
            new_v[k] = 0.999 * opt["v"][k] + 0.001 * g[k] * g[k]
            mhat = new_m[k] / (1.0 - 0.9 ** t)
            vhat = new_v[k] / (1.0 - 0.999 ** t)
            new_p[k] = params[k] - lr * mhat / (m.sqrt(vhat) + 1e-8)
        return value, new_p, {"m": new_m, "v": new_v}, t
    return step


def _train(m: Any, nn: Any, grad: Callable, jit: Callable, loss: Callable, params: dict,
           batch: tuple) -> list[float]:
    step = jit(_adam_step(m, loss, grad))
    opt = {"m": {k: np.zeros_like(v) for k, v in params.items()},
           "v": {k: np.zeros_like(v) for k, v in params.items()}}
    t = np.float32(0)
    losses = []
    for _ in range(STEPS):
        value, params, opt, t = step(params, opt, t, *batch)
        losses.append(float(value))
    return losses


# ---- the models, written once against a numpy-like module `m` and its nn ---------------------
def mlp_loss(m: Any, nn: Any) -> Callable:
    def loss(p: dict, x: Any, y: Any) -> Any:
        h = x
        for i in range(3):
            h = nn.gelu(h @ p[f"w{i}"] + p[f"b{i}"])
        logits = h @ p["w3"] + p["b3"]
        return -m.mean(m.sum(y * nn.log_softmax(logits), axis=-1))
    return loss


def mlp_data() -> tuple[dict, tuple]:
    sizes = [12, 32, 32, 32, 5]
    p = {}
    for i in range(4):
        p[f"w{i}"] = (RNG.standard_normal((sizes[i], sizes[i + 1])) /
                      np.sqrt(sizes[i])).astype(np.float32)
        p[f"b{i}"] = np.zeros(sizes[i + 1], np.float32)
    x = RNG.standard_normal((64, 12)).astype(np.float32)
    y = np.eye(5, dtype=np.float32)[RNG.integers(0, 5, 64)]
    return p, (x, y)


def transformer_loss(m: Any, nn: Any) -> Callable:
    def norm(h: Any, g: Any) -> Any:
        mu = m.mean(h, axis=-1, keepdims=True)
        var = m.mean((h - mu) ** 2, axis=-1, keepdims=True)
        return (h - mu) / m.sqrt(var + 1e-5) * g

    def loss(p: dict, tokens: Any, targets: Any) -> Any:
        seq = tokens.shape[1]
        h = m.take(p["embed"], tokens, axis=0) + p["pos"][:seq]
        a = norm(h, p["g1"])
        q, k, v = a @ p["wq"], a @ p["wk"], a @ p["wv"]
        scores = m.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1])
        causal = m.tril(m.ones((seq, seq), bool))
        scores = m.where(causal, scores, -1e9)
        h = h + m.einsum("bqk,bkd->bqd", nn.softmax(scores, axis=-1), v) @ p["wo"]
        f = norm(h, p["g2"])
        h = h + nn.relu(f @ p["w1"]) @ p["w2"]
        logits = norm(h, p["g3"]) @ p["embed"].T
        logp = nn.log_softmax(logits, axis=-1)
        picked = m.take_along_axis(logp, targets[..., None], axis=-1)
        return -m.mean(picked)
    return loss


def transformer_data() -> tuple[dict, tuple]:
    vocab, d, seq, ff = 17, 16, 8, 32

    def w(*shape: int) -> np.ndarray:
        return (RNG.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

    p = {"embed": w(vocab, d), "pos": w(seq, d) * 0.1, "wq": w(d, d), "wk": w(d, d),
         "wv": w(d, d), "wo": w(d, d), "w1": w(d, ff), "w2": w(ff, d),
         "g1": np.ones(d, np.float32), "g2": np.ones(d, np.float32),
         "g3": np.ones(d, np.float32)}
    tokens = RNG.integers(0, vocab, (4, seq + 1)).astype(np.int32)
    return p, (tokens[:, :-1], tokens[:, 1:])


MODELS = {"mlp4": (mlp_loss, mlp_data), "transformer": (transformer_loss, transformer_data)}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_training_loss_falls(model: str) -> None:
    make, data = MODELS[model]
    params, batch = data()
    losses = _train(xnp, xlc.nn, xlc.grad, xlc.jit, make(xnp, xlc.nn), params, batch)
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize("model", sorted(MODELS))
def test_training_curve_matches_jax(model: str) -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    make, data = MODELS[model]
    params, batch = data()
    mine = _train(xnp, xlc.nn, xlc.grad, xlc.jit, make(xnp, xlc.nn), params, batch)
    theirs = _train(jnp, jax.nn, jax.grad, jax.jit, make(jnp, jax.nn), params, batch)
    np.testing.assert_allclose(mine, theirs, rtol=1e-4)
