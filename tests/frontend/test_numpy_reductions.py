"""xlc.numpy reductions, cumulative ops and sorting against numpy."""
from __future__ import annotations

import numpy as np
import pytest
import xlc.numpy as xnp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.frontend.helpers import assert_close, jit_run

SETTINGS = settings(max_examples=25, deadline=None)


@st.composite
def array_and_axis(draw, dtypes=(np.float32, np.int32)):
    dt = draw(st.sampled_from(dtypes))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    elems = st.floats(-8, 8, width=32) if dt == np.float32 else st.integers(-9, 9)
    x = draw(hnp.arrays(dt, shape, elements=elems))
    axis = draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1),
                          st.lists(st.integers(0, x.ndim - 1), min_size=1, max_size=x.ndim,
                                   unique=True).map(tuple)))
    keepdims = draw(st.booleans())
    return x, axis, keepdims


def np_sum_dtype(x):
    return np.int32 if x.dtype.kind in "ib" else x.dtype


@pytest.mark.parametrize("name", ["sum", "max", "min", "mean", "prod", "any", "all"])
@SETTINGS
@given(case=array_and_axis())
def test_reductions(name, case):
    x, axis, keepdims = case
    if name == "prod":
        x = np.clip(x, -2, 2)
    got = jit_run(lambda a: getattr(xnp, name)(a, axis=axis, keepdims=keepdims), x)
    want = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    if name in ("sum", "prod"):
        want = want.astype(np_sum_dtype(x))
    if name == "mean":
        want = want.astype(np.float32)
    assert_close(got, np.asarray(want), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@SETTINGS
@given(case=array_and_axis())
def test_arg_reductions(name, case):
    x, axis, keepdims = case
    if isinstance(axis, tuple):
        axis = axis[0]
    got = jit_run(lambda a: getattr(xnp, name)(a, axis=axis, keepdims=keepdims), x)
    want = getattr(np, name)(x, axis=axis, keepdims=keepdims).astype(np.int32)
    assert_close(got, want)


def test_argmax_first_nan_and_ties():
    x = np.array([[1.0, 3.0, 3.0, np.nan, np.nan], [2.0, 2.0, 1.0, 0.0, 2.0]], np.float32)
    assert_close(jit_run(lambda a: (xnp.argmax(a, axis=1), xnp.argmin(a, axis=1)), x),
                 (np.argmax(x, 1).astype(np.int32), np.argmin(x, 1).astype(np.int32)))


def test_elementwise_uses_of_argmax_compile():
    # row fusion crashed (IndexError) on any consumer of argmax's variadic reduce
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    emb = rng.standard_normal((8, 3)).astype(np.float32)
    got = jit_run(lambda a, e: (xnp.argmax(a, axis=-1) + 1, xnp.argmin(a, axis=0) * 2,
                                e[xnp.argmax(a, axis=-1)], xnp.argmax(a) - 1), x, emb)
    assert_close(got, ((np.argmax(x, -1) + 1).astype(np.int32),
                       (np.argmin(x, 0) * 2).astype(np.int32), emb[np.argmax(x, -1)],
                       np.int32(np.argmax(x) - 1)))


@SETTINGS
@given(case=array_and_axis(dtypes=(np.float32,)))
def test_var_std(case):
    x, axis, keepdims = case
    got = jit_run(lambda a: (xnp.var(a, axis=axis, keepdims=keepdims),
                             xnp.std(a, axis=axis, keepdims=keepdims), a.var(ddof=1)), x)
    n = x.size
    want = (np.var(x, axis=axis, keepdims=keepdims), np.std(x, axis=axis, keepdims=keepdims),
            np.float32(np.var(x, ddof=1)) if n > 1 else np.float32(np.inf))
    assert_close(got[:2], want[:2], rtol=1e-4, atol=1e-4)
    if n > 1:
        assert_close(got[2], want[2], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_cumulative(name, axis):
    x = (np.arange(12, dtype=np.float32).reshape(3, 4) % 5) - 1
    got = jit_run(lambda a: getattr(xnp, name)(a, axis=axis), x)
    assert_close(got, getattr(np, name)(x, axis=axis), rtol=1e-6)


def test_cumsum_int_and_cummax():
    x = np.array([[3, -1, 4], [1, 5, -9]], np.int8)
    got = jit_run(lambda a: (xnp.cumsum(a, axis=1), xnp.cummax(a, axis=1),
                             xnp.cummin(a, axis=0)), x)
    assert_close(got, (np.cumsum(x, 1).astype(np.int32), np.maximum.accumulate(x, 1),
                       np.minimum.accumulate(x, 0)))


@SETTINGS
@given(case=array_and_axis(dtypes=(np.float32, np.int32)))
def test_sort_and_argsort(case):
    x, axis, _ = case
    ax = axis[0] if isinstance(axis, tuple) else (-1 if axis is None else axis)
    got = jit_run(lambda a: (xnp.sort(a, axis=ax), xnp.argsort(a, axis=ax)), x)
    assert_close(got, (np.sort(x, axis=ax),
                       np.argsort(x, axis=ax, kind="stable").astype(np.int32)))


def test_sort_puts_nans_last():
    x = np.array([3.0, np.nan, -1.0, np.inf, 0.0], np.float32)
    assert_close(jit_run(xnp.sort, x), np.sort(x))


def test_reduction_axis_out_of_bounds_is_trace_error():
    import xlc

    with pytest.raises(xlc.TraceError, match=r"sum: axis 2 is out of bounds for an array of "
                                             r"rank 2 \(at .*test_numpy_reductions.py:\d+\)"):
        jit_run(lambda a: a.sum(axis=2), np.ones((2, 3), np.float32))


def test_tracer_methods():
    x = np.array([[3.0, 1.0, 2.0], [0.5, 5.0, -1.0]], np.float32)
    got = jit_run(lambda a: (a.sort(), a.argsort(axis=0), a.cumprod(axis=1), a.take([2, 0]),
                             a.repeat(2, axis=0), a.prod(), a.any(), a.all(axis=0),
                             a.std(axis=1), a.min(axis=1, keepdims=True), a.argmin()), x)
    want = (np.sort(x), np.argsort(x, axis=0).astype(np.int32), x.cumprod(axis=1),
            x.take([2, 0]), x.repeat(2, axis=0), x.prod(), x.any(), x.all(axis=0),
            x.std(axis=1), x.min(axis=1, keepdims=True), np.int32(x.argmin()))
    assert_close(got, want, rtol=1e-6)
