"""xlc.nn functions against numpy formulas."""
from __future__ import annotations

import math

import numpy as np
import pytest
import xlc.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.frontend.helpers import assert_close, jit_run

erf = np.vectorize(math.erf)


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def np_logsumexp(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


REFS = {
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "softmax": np_softmax,
    "log_softmax": lambda x: np.log(np_softmax(x)),
    "logsumexp": np_logsumexp,
    "silu": lambda x: x / (1 + np.exp(-x)),
    "softplus": lambda x: np.log1p(np.exp(x)),
}


@pytest.mark.parametrize("name", sorted(REFS))
@settings(max_examples=20, deadline=None)
@given(x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                    elements=st.floats(-6, 6, width=32)))
def test_nn_against_numpy(name, x):
    got = jit_run(getattr(nn, name), x)
    want = REFS[name](x.astype(np.float64)).astype(np.float32)
    assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_gelu_exact():
    x = np.linspace(-4, 4, 17, dtype=np.float32)
    want = (0.5 * x * (1 + erf(x / np.sqrt(2)))).astype(np.float32)
    assert_close(jit_run(lambda a: nn.gelu(a, approximate=False), x), want, rtol=1e-5,
                 atol=1e-6)


def test_softmax_axis_and_large_values():
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0]], np.float32)
    assert_close(jit_run(lambda a: (nn.softmax(a, axis=0), nn.softmax(a), nn.logsumexp(a, 1)),
                         x),
                 (np_softmax(x.astype(np.float64), 0).astype(np.float32),
                  np_softmax(x.astype(np.float64)).astype(np.float32),
                  np_logsumexp(x.astype(np.float64), 1).astype(np.float32)),
                 rtol=1e-5, atol=1e-6)


def test_logsumexp_all_neg_inf_and_keepdims():
    x = np.array([[-np.inf, -np.inf], [0.0, 1.0]], np.float32)
    got = jit_run(lambda a: (nn.logsumexp(a, axis=1), nn.logsumexp(a, axis=1, keepdims=True)),
                  x)
    want = np.array([-np.inf, np.log(1 + np.e)], np.float32)
    assert_close(got, (want, want[:, None]), rtol=1e-6)


def test_layer_norm_with_scale_bias():
    r = np.random.default_rng(0)
    x = r.standard_normal((4, 8)).astype(np.float32)
    g = r.standard_normal(8).astype(np.float32)
    b = r.standard_normal(8).astype(np.float32)
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    want = (x - mu) / np.sqrt(var + 1e-5)
    got = jit_run(lambda a, s, c: (nn.layer_norm(a), nn.layer_norm(a, s, c, eps=1e-5)), x, g, b)
    assert_close(got, (want, want * g + b), rtol=1e-4, atol=1e-5)


def test_one_hot():
    got = jit_run(lambda i: nn.one_hot(i, 4), np.array([0, 3, 1], np.int32))
    assert_close(got, np.eye(4, dtype=np.float32)[[0, 3, 1]])
