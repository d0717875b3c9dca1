"""xlc.numpy elementwise math (numpy_math.py) against numpy and jax.numpy: inverse trig and
hyperbolic functions, float bits (frexp, ldexp, nextafter, spacing, signbit), gcd/lcm, i0,
logaddexp, nan_to_num, the numpy 2 aliases. Traced through `jit_run` (evaluator and CPU) for
f32, f64 and s32 inputs with special values; dtypes must equal jax's (f64 with x64 on)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import xlc.numpy as xnp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import xlc
from tests.frontend.helpers import assert_close, jit_run
from xlc.errors import TraceError

SETTINGS = settings(max_examples=15, deadline=None)
SPECIAL = [-2.5, -1.0, -0.5, -0.0, 0.0, 0.3, 1.0, 2.0, 7.5, 30.0, np.nan, np.inf, -np.inf]
INPUTS = {
    "f32": np.array(SPECIAL, np.float32),
    "f64": np.array(SPECIAL, np.float64),
    "s32": np.array([-7, -3, -1, 0, 1, 2, 5, 12], np.int32),
}
UNARY = ["arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "asin", "acos", "atan",
         "asinh", "acosh", "atanh", "angle", "deg2rad", "radians", "rad2deg", "degrees", "fabs",
         "rint", "trunc", "signbit", "sinc", "spacing", "i0", "isposinf", "isneginf",
         "iscomplex", "isreal", "nan_to_num", "frexp", "modf", "positive"]
BINARY = ["copysign", "float_power", "fmax", "fmin", "heaviside", "hypot", "logaddexp",
          "logaddexp2", "nextafter", "atan2"]
# where numpy itself differs from jax.numpy (xlc follows jax): modf(inf) is (nan, inf) in
# jax, (0, inf) in numpy
NUMPY_FINITE_ONLY = {"modf"}


def _jax():
    jax = pytest.importorskip("jax")
    return jax, jax.numpy


def _np(x):
    return tuple(np.asarray(v) for v in x) if isinstance(x, tuple) else np.asarray(x)


def _jax_ref(fn, args, x64):
    jax, jnp = _jax()
    with jax.enable_x64(x64):
        return _np(fn(jnp, *[jnp.asarray(a) for a in args]))


def _against_numpy(got, want, finite=None):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w).astype(np.asarray(g).dtype)
        if finite is not None:
            g, w = g[finite], w[finite]
        assert_close(g, w, rtol=2e-5 if g.dtype != np.float64 else 1e-12, atol=1e-6)


def _check(name, args, x64):
    fn = lambda m, *a: getattr(m, name)(*a)  # noqa: E731
    got = jit_run(lambda *a: fn(xnp, *a), *args)
    want = _jax_ref(fn, args, x64)
    assert_close(got, want, rtol=2e-5 if not x64 else 1e-12, atol=1e-6)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        ref = fn(np, *args)
    finite = np.isfinite(args[0]) if name in NUMPY_FINITE_ONLY else None
    _against_numpy(got, ref, finite)


@pytest.mark.parametrize("dt", sorted(INPUTS))
@pytest.mark.parametrize("name", UNARY)
def test_unary_against_numpy_and_jax(name, dt):
    _check(name, (INPUTS[dt],), dt == "f64")


@pytest.mark.parametrize("dt", ["f32", "f64"])
@pytest.mark.parametrize("name", BINARY)
def test_binary_against_numpy_and_jax(name, dt):
    x = INPUTS[dt]
    _check(name, (np.roll(x, 4), x), dt == "f64")


@pytest.mark.parametrize("name", ["float_power", "fmax", "fmin", "hypot", "copysign",
                                  "heaviside", "logaddexp", "nextafter"])
def test_binary_of_integers_computes_in_f32(name):
    x = INPUTS["s32"]
    _check(name, (x, np.roll(x, 3)), False)


@pytest.mark.parametrize("name", ["gcd", "lcm", "bitwise_left_shift", "bitwise_right_shift",
                                  "bitwise_count", "bitwise_invert"])
@pytest.mark.parametrize("dt", [np.int8, np.int32, np.uint16, np.int64])
def test_integer_functions(name, dt):
    a = np.array([12, 18, 0, 7, 0, 100, 9, 3], dt)
    b = np.array([8, 6, 5, 0, 0, 75, 3, 1], dt)
    if np.dtype(dt).kind == "i":
        a = a * np.array([1, -1, 1, 1, -1, 1, -1, 1], dt)
    args = (a,) if name in ("bitwise_count", "bitwise_invert") else (a, b)
    _check(name, args, np.dtype(dt).itemsize == 8)


def test_gcd_lcm_broadcast_scalars():
    a = np.arange(-6, 7, dtype=np.int32).reshape(13, 1)
    got = jit_run(lambda x: (xnp.gcd(x, np.arange(1, 5, dtype=np.int32)), xnp.lcm(x, 4)), a)
    assert_close(got, (np.gcd(a, np.arange(1, 5)).astype(np.int32), np.lcm(a, 4)
                       .astype(np.int32)))


SUBNORMALS = np.array([1e-40, -3e-42, 1.4e-45, 1.1754942e-38, 1.1754944e-38], np.float32)


def test_float_bits_of_subnormals_follow_numpy():
    # jax on the CPU flushes subnormals to zero; numpy and xlc keep them
    got = jit_run(lambda x: (*xnp.frexp(x), xnp.spacing(x), xnp.nextafter(x, 0.0),
                             xnp.signbit(x), xnp.ldexp(x, np.int32(3))), SUBNORMALS)
    m, e = np.frexp(SUBNORMALS)
    want = (m, e.astype(np.int32), np.spacing(SUBNORMALS), np.nextafter(SUBNORMALS,
            np.float32(0)), np.signbit(SUBNORMALS), np.ldexp(SUBNORMALS, 3))
    assert_close(got, want, rtol=0, atol=0)


def test_ldexp_against_numpy_and_jax():
    x = np.array([0.75, -3.0, 0.0, np.inf, 1e30, 1e-30, np.nan], np.float32)
    e = np.array([2, -130, 5, 1, 10, 60, 1], np.int32)
    _check("ldexp", (x, e), False)
    with pytest.raises(TraceError, match="ldexp: the exponent must be an integer"):
        jit_run(lambda a: xnp.ldexp(a, a), x)


def test_f16_inputs_keep_their_type():
    x = np.array([-1.5, -0.25, 0.0, 0.5, 2.0, 7.0], np.float16)
    for name in ["arcsinh", "arctan", "sinc", "spacing", "deg2rad", "trunc", "rint"]:
        got = jit_run(lambda a, n=name: getattr(xnp, n)(a), x)
        want = _jax_ref(lambda m, a, n=name: getattr(m, n)(a), (x,), False)
        assert_close(got, want, rtol=2e-3, atol=2e-3)


def test_python_scalars_stay_weakly_typed():
    x = np.array([1.0, 2.0], np.float16)
    fn = lambda m, a: (a * m.arcsin(0.5), a + m.hypot(3.0, 4.0), a * m.sinc(0.5),  # noqa: E731
                       a + m.deg2rad(90), a * m.logaddexp(0.0, 0.0))
    got = jit_run(lambda a: fn(xnp, a), x)
    assert [g.dtype for g in got] == [np.float16] * 5
    assert_close(got, _jax_ref(fn, (x,), False), rtol=2e-3, atol=2e-3)


def test_eager_calls_on_numpy_inputs():
    x = INPUTS["f32"][:9]
    assert_close(xnp.arccosh(abs(x) + 1), np.arccosh(abs(x) + 1), rtol=2e-6, atol=0)
    assert_close(xnp.i0(x), np.i0(x).astype(np.float32), rtol=1e-5, atol=0)
    m, e = xnp.frexp(x)
    assert_close(m, np.frexp(x)[0])
    assert_close(xnp.gcd(np.int32(12), np.int32(18)), np.int32(6))
    assert xnp.acos is xnp.arccos and xnp.atan2 is xnp.arctan2
    assert xnp.bitwise_invert is xnp.invert


def test_i0_of_large_arguments_and_kaiser_range():
    x = np.array([0.0, 0.5, 7.9, 8.0, 8.1, 20.0, 80.0, -30.0], np.float64)
    assert_close(jit_run(xnp.i0, x), np.i0(x), rtol=1e-13, atol=0)


def test_nan_to_num_options():
    x = INPUTS["f32"]
    got = jit_run(lambda a: (xnp.nan_to_num(a, nan=-1.0, posinf=9.0),
                             xnp.nan_to_num(a.astype(np.int32))), x[:-3])
    assert_close(got[0], np.nan_to_num(x[:-3], nan=-1.0, posinf=9.0))
    with pytest.raises(TraceError, match="nan_to_num: complex"):
        jit_run(lambda a: xnp.nan_to_num(a), x.astype(np.complex64))


@pytest.mark.parametrize("call, message", [
    (lambda a: xnp.gcd(a, a), "gcd: arguments must be integers"),
    (lambda a: xnp.lcm(a, 2.5), "lcm: arguments must be integers"),
    (lambda a: xnp.bitwise_count(a), "bitwise_count: needs an integer or bool"),
    (lambda a: xnp.arcsin(a.astype(np.complex64)), "arcsin: complex inputs are not"),
    (lambda a: xnp.positive(a > 0), "positive: not defined for bool"),
    (lambda a: xnp.nextafter(a, a[:2]), "nextafter: shapes cannot be broadcast"),
])
def test_bad_inputs_are_trace_errors(call, message):
    with pytest.raises(TraceError, match=message):
        jit_run(call, INPUTS["f32"])


BIG = float(np.float32(1e30))


@SETTINGS
@given(x=hnp.arrays(np.float32, st.integers(1, 6),
                    elements=st.floats(-BIG, BIG, width=32, allow_subnormal=False)))
def test_frexp_ldexp_round_trip_and_nextafter_steps(x):
    m, e = jit_run(xnp.frexp, x)
    assert_close(np.ldexp(m, e), x, rtol=0, atol=0)
    assert_close(jit_run(lambda a, b: xnp.ldexp(a, b), m, e), x, rtol=0, atol=0)
    up = jit_run(lambda a: xnp.nextafter(a, np.float32(np.inf)), x)
    assert_close(up, np.nextafter(x, np.float32(np.inf)), rtol=0, atol=0)


@pytest.mark.parametrize("dt", [np.float16, np.float32, np.float64])
def test_frexp_is_bit_exact_at_the_extremes(dt):
    """The mantissa is x * 2**-e (in two exact halves): numpy's bits from the largest floats
    down to the smallest subnormal."""
    fi = np.finfo(dt)
    x = np.array([0.0, -0.0, 1.0, -3.5, fi.max, -fi.max, fi.tiny, fi.tiny / 3,
                  fi.smallest_subnormal, -fi.smallest_subnormal * 3, np.inf, -np.inf, np.nan],
                 dt)
    m, e = jit_run(xnp.frexp, x)
    want_m, want_e = np.frexp(x)
    assert m.dtype == dt and e.dtype == np.int32
    assert m.tobytes() == want_m.tobytes() and np.array_equal(e, want_e)


def test_frexp_and_ldexp_derivatives():
    """d mantissa / dx = 2**-e and d ldexp(x, n) / dx = 2**n, as jax (the bits only give the
    exponent)."""
    x = np.array([0.3, -1.7, 5.0, 1e-310, 0.0])
    n = np.array([1, -2, 0, 1000, 3], np.int32)
    _, e = np.frexp(x)  # 2**-e overflows for the subnormal: inf, as in jax
    g_m = xlc.grad(lambda a: xnp.sum(xnp.frexp(a)[0]))(x)
    g_l = xlc.grad(lambda a: xnp.sum(xnp.ldexp(a, n)))(x)
    with np.errstate(over="ignore"):
        assert_close(g_m, np.ldexp(1.0, -e), rtol=0, atol=0)
    # 0 and inf pass through a where, as in jax: derivative 1 there
    assert_close(g_l, np.where(x == 0, 1.0, np.ldexp(1.0, n)), rtol=0, atol=0)
    jax, jnp = _jax()
    with jax.enable_x64(True):
        assert_close(g_m, np.asarray(jax.grad(lambda a: jnp.sum(jnp.frexp(a)[0]))(x)))
        ok = n < 1000  # jax's 2**-e of the subnormal overflows: inf where xlc has 2**1000
        assert_close(g_l[ok], np.asarray(jax.grad(lambda a: jnp.sum(jnp.ldexp(a, n)))(x))[ok])
