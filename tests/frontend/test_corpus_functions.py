"""Functions of the XLA reference corpus re-written with xlc.numpy / xlc.nn / xlc.lax: traced
by xlc.jit and run on the interpreter, they must reproduce the outputs XLA computed."""
from __future__ import annotations

import numpy as np
import pytest
import xlc.lax as lax
import xlc.nn as nn
import xlc.numpy as xnp

import xlc
from tests.conftest import requires_corpus


def softmax(x):
    e = xnp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def rmsnorm(x, w):
    return x * xnp.rsqrt(xnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


def elementwise_chain(a, b, c):
    return xnp.tanh(a * b + c) * xnp.exp(-xnp.abs(c)) + xnp.log(1 + a * a)


def mlp2(x, w1, b1, w2, b2):
    return nn.relu(x @ w1 + b1) @ w2 + b2


def attention_single_head(x, wq, wk, wv, wo):
    q, k, v = x @ wq, x @ wk, x @ wv
    n = x.shape[0]
    mask = lax.broadcasted_iota(np.int32, (n, n), 0) >= lax.broadcasted_iota(np.int32, (n, n), 1)
    s = xnp.where(mask, q @ k.T / np.sqrt(q.shape[-1]).item(), -1e9)
    return (nn.softmax(s) @ v) @ wo


def power_iteration(m, v0):
    a = m @ m.T / m.shape[0]

    def norm(v):
        return xnp.sqrt(xnp.sum(v * v))

    def step(i, v):
        w = a @ v
        return w / norm(w)

    v = lax.fori_loop(0, 30, step, v0 / norm(v0))
    return v, v @ (a @ v)


def batched_matmul(a, b, c):
    return xnp.einsum("bij,bjk->bik", a, b), xnp.einsum("bij,bkj->bik", a, c)


CASES = {
    "softmax": softmax, "log_softmax": nn.log_softmax, "logsumexp":
    lambda x: nn.logsumexp(x, axis=-1), "gelu_tanh": nn.gelu, "sigmoid": nn.sigmoid,
    "relu_bias": lambda x, b: nn.relu(x + b), "rmsnorm": rmsnorm, "mlp2": mlp2,
    "elementwise_chain": elementwise_chain, "attention_single_head": attention_single_head,
    "power_iteration": power_iteration, "batched_matmul": batched_matmul,
}


@requires_corpus
@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_function_matches_xla(name):
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    got = xlc.jit(CASES[name])(*case.inputs)
    got = list(got) if isinstance(got, tuple) else [got]
    assert len(got) == len(case.outputs)
    for g, want in zip(got, case.outputs):
        assert g.shape == want.shape and g.dtype == want.dtype
        np.testing.assert_allclose(g, want, rtol=case.rtol * 10, atol=case.atol * 10)


def adam_update(params, grads, m, v, step):
    t = (step + 1).astype(np.float32)
    new_p, new_m, new_v = [], [], []
    for p, g, m_, v_ in zip(params, grads, m, v):
        m2 = m_ * 0.9 + g * 0.1
        v2 = v_ * 0.999 + g * 0.001 * g
        mhat = m2 / (1 - 0.9 ** t)
        vhat = v2 / (1 - 0.999 ** t)
        new_p.append(p - mhat * 0.001 / (xnp.sqrt(vhat) + 1e-8))
        new_m.append(m2)
        new_v.append(v2)
    return tuple(new_p), tuple(new_m), tuple(new_v)


@requires_corpus
def test_adam_update_donation_matches_xla_alias_config():
    from corpus import load_case  # type: ignore[import-not-found]

    from xlc.hlo.parser import parse_module

    case = load_case("adam_update")
    ins = case.inputs
    args = (tuple(ins[0:3]), tuple(ins[3:6]), tuple(ins[6:9]), tuple(ins[9:12]), ins[12])
    f = xlc.jit(adam_update, donate_argnums=(0, 2, 3))
    lowered = f.lower(*args)
    want = parse_module(case.module_text).input_output_alias
    assert lowered.module.input_output_alias == want
    got = [leaf for group in f(*args) for leaf in group]
    for g, w in zip(got, case.outputs):
        np.testing.assert_allclose(g, w, rtol=case.rtol * 10, atol=case.atol * 10)
