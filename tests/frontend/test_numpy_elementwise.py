"""xlc.numpy elementwise functions against numpy over shapes and dtypes (hypothesis)."""
from __future__ import annotations

import numpy as np
import pytest
import xlc.numpy as xnp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.frontend.helpers import assert_close, jit_run

SETTINGS = settings(max_examples=25, deadline=None)
FLOATS = [np.float32, np.float64]
INTS = [np.int32, np.int8, np.uint8, np.int64]


def arrays(dtype, shape):
    if np.dtype(dtype).kind == "f":
        elems = st.floats(-4, 4, width=np.finfo(dtype).bits, allow_nan=False)
    elif np.dtype(dtype).kind == "u":
        elems = st.integers(0, 50)
    else:
        elems = st.integers(-50, 50)
    return hnp.arrays(dtype, shape, elements=elems)


def pair(dtypes, min_dims=0):
    return st.sampled_from(dtypes).flatmap(lambda dt: hnp.mutually_broadcastable_shapes(
        num_shapes=2, min_dims=min_dims, max_dims=3, max_side=4).flatmap(
        lambda s: st.tuples(arrays(dt, s.input_shapes[0]), arrays(dt, s.input_shapes[1]))))


UNARY_FLOAT = {
    "exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1, "tanh": np.tanh,
    "sin": np.sin, "cos": np.cos, "sqrt": np.sqrt, "abs": np.abs, "sign": np.sign,
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "negative": np.negative,
    "square": np.square, "isfinite": np.isfinite, "rsqrt": lambda x: 1 / np.sqrt(x),
    "reciprocal": np.reciprocal,
}


@pytest.mark.parametrize("name", sorted(UNARY_FLOAT))
@SETTINGS
@given(x=st.sampled_from(FLOATS).flatmap(lambda dt: arrays(dt, hnp.array_shapes(
    min_dims=0, max_dims=3, max_side=4))))
def test_unary_float(name, x):
    with np.errstate(all="ignore"):
        want = UNARY_FLOAT[name](x)
    got = jit_run(getattr(xnp, name), x)
    assert_close(got, want, rtol=1e-5 if x.dtype == np.float32 else 1e-12, atol=1e-6)


@pytest.mark.parametrize("name", ["exp", "sqrt", "tanh", "log1p"])
def test_unary_float_of_int_is_f32(name):
    x = np.arange(1, 7, dtype=np.int32).reshape(2, 3)
    got = jit_run(getattr(xnp, name), x)
    assert got.dtype == np.float32
    assert_close(got, UNARY_FLOAT[name](x).astype(np.float32), rtol=1e-6)


BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
    "minimum": np.minimum,
}
COMPARE = {
    "equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
    "greater": np.greater, "greater_equal": np.greater_equal,
}


@pytest.mark.parametrize("name", sorted(BINARY) + sorted(COMPARE))
@SETTINGS
@given(xy=pair(FLOATS + INTS))
def test_binary_broadcasting(name, xy):
    x, y = xy
    ref = {**BINARY, **COMPARE}[name]
    want = ref(x, y)
    got = jit_run(getattr(xnp, name), x, y)
    assert_close(got, want)


@SETTINGS
@given(xy=pair(FLOATS))
def test_float_divide_power_ops(xy):
    x, y = xy
    y = np.where(np.abs(y) < 0.5, 1.5, y).astype(x.dtype)
    got = jit_run(lambda a, b: (a / b, a // b, a % b, xnp.power(xnp.abs(a), b)), x, y)
    want = (x / y, np.floor_divide(x, y), np.remainder(x, y), np.power(np.abs(x), y))
    assert_close(got, want, rtol=1e-5, atol=1e-5)


@SETTINGS
@given(xy=pair([np.int32, np.int8, np.int64]))
def test_int_floor_divide_and_mod_follow_numpy(xy):
    x, y = xy
    y = np.where(y == 0, 3, y).astype(x.dtype)
    got = jit_run(lambda a, b: (a // b, a % b), x, y)
    assert_close(got, (np.floor_divide(x, y), np.remainder(x, y)))


@SETTINGS
@given(xy=pair([np.int32, np.uint8, np.int8]))
def test_bitwise_and_shifts(xy):
    x, y = xy
    s = (np.abs(y.astype(np.int64)) % 5).astype(x.dtype)
    got = jit_run(lambda a, b, c: (a & b, a | b, a ^ b, ~a, a << c, a >> c), x, y, s)
    want = (x & y, x | y, x ^ y, ~x, x << s, x >> s)
    assert_close(got, want)


def test_logical_and_where_clip():
    x = np.array([[-2.0, 0.0, 3.0], [1.0, -1.0, 0.5]], np.float32)
    got = jit_run(lambda a: (xnp.logical_and(a > 0, a < 2), xnp.logical_or(a > 2, a < -1),
                             xnp.logical_not(a > 0), xnp.logical_xor(a > 0, a > 1),
                             xnp.where(a > 0, a, -a), xnp.clip(a, -1, 1)), x)
    want = (np.logical_and(x > 0, x < 2), np.logical_or(x > 2, x < -1), ~(x > 0),
            np.logical_xor(x > 0, x > 1), np.where(x > 0, x, -x), np.clip(x, -1, 1))
    assert_close(got, want)


def test_integer_power_is_exact():
    x = np.array([2, 3, -4], np.int32)
    assert_close(jit_run(lambda a: (a ** 3, xnp.square(a)), x), (x ** 3, x * x))


def test_operators_with_numpy_on_the_left():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = np.full((3,), 2.0, np.float32)
    got = jit_run(lambda a: (c + a, c * a, c - a, c / (a + 1), 2 ** a, -a, +a, abs(-a)), x)
    want = (c + x, c * x, c - x, c / (x + 1), 2 ** x, -x, x, x)
    assert_close(got, want, rtol=1e-6)


def test_matmul_operator_and_methods():
    r = np.random.default_rng(1)
    a = r.standard_normal((3, 4)).astype(np.float32)
    b = r.standard_normal((4, 2)).astype(np.float32)
    got = jit_run(lambda x, y: (x @ y, x.T, x.astype(np.int32), x.reshape(2, 6),
                                x.sum(), x.ndim + x.size + x.shape[0]), a, b)
    want = (a @ b, a.T, a.astype(np.int32), a.reshape(2, 6), a.sum(), np.int32(2 + 12 + 3))
    assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_isnan_isinf():
    x = np.array([1.0, np.nan, np.inf, -np.inf], np.float32)
    assert_close(jit_run(lambda a: (xnp.isnan(a), xnp.isinf(a), xnp.isfinite(a)), x),
                 (np.isnan(x), np.isinf(x), np.isfinite(x)))


def test_eager_outside_jit_uses_the_evaluator():
    x = np.linspace(0, 1, 5, dtype=np.float32)
    got = xnp.exp(x)
    assert isinstance(got, np.ndarray)
    assert_close(got, np.exp(x), rtol=1e-6)
    assert_close(xnp.arange(4), np.arange(4, dtype=np.int32))
    assert_close(xnp.add(x, 1), x + 1)


def test_more_math_and_triangles():
    x = np.linspace(0.5, 3, 12, dtype=np.float32).reshape(3, 4)
    got = jit_run(lambda a: (xnp.log2(a), xnp.log10(a), xnp.exp2(a), xnp.sinh(a), xnp.cosh(a),
                             xnp.tril(a), xnp.triu(a, 1), xnp.isclose(a, a + 1e-7),
                             xnp.allclose(a, a * 2)), x)
    want = (np.log2(x), np.log10(x), np.exp2(x), np.sinh(x), np.cosh(x), np.tril(x),
            np.triu(x, 1), np.isclose(x, x + 1e-7), np.bool_(False))
    assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_float_floor_divide_matches_numpy_on_edges():
    import xlc.numpy as xnp

    import xlc

    x = np.array([1e-45, -1e-45, 7.0, -7.0, 1.0, -1.0, 0.0, 5.5], np.float32)
    y = np.array([-2.0, 2.0, 2.0, 2.0, 0.0, 0.0, -3.0, -0.5], np.float32)
    got = xlc.jit(lambda a, b: xnp.floor_divide(a, b))(x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.floor_divide(x, y)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
