"""Derivatives through control flow (scan, fori_loop, while_loop, cond, switch), forward
mode (jvp of anything, loops of unknown trip count included) and custom_jvp: checked against
central finite differences in f64 and against JAX where it is importable."""
import numpy as np
import pytest
import xlc.lax as lax
import xlc.numpy as xnp
from hypothesis import given, settings
from hypothesis import strategies as st

import xlc
from xlc.errors import UnsupportedOpError

RNG = np.random.default_rng(7)


def _fd_grad(f, x, eps=1e-6):
    """Central finite differences of scalar f at x (f64)."""
    g = np.zeros_like(x)
    flat = x.reshape(-1)
    for i in range(flat.size):
        d = np.zeros_like(flat)
        d[i] = eps
        g.reshape(-1)[i] = (f((flat + d).reshape(x.shape)) - f((flat - d).reshape(x.shape))) \
            / (2 * eps)
    return g


def _value(f):
    jf = xlc.jit(f)
    return lambda x: float(jf(x))


def _rnn(w, xs):
    def step(h, x):
        h = xnp.tanh(h @ w + x)
        return h, xnp.sum(h * h)
    h, ys = lax.scan(step, xnp.zeros(w.shape[0], w.dtype), xs)
    return xnp.sum(ys) + xnp.sum(xnp.sin(h))


def _fori(x):
    return xnp.sum(lax.fori_loop(0, 4, lambda i, c: xnp.sin(c) * (i + 1.0) + c * c * 0.1, x))


def _nested(x):
    def outer(c, _):
        inner = lax.fori_loop(0, 3, lambda i, a: a * xnp.cos(a) + 0.5, c)
        return inner, xnp.sum(inner)
    c, ys = lax.scan(outer, x, None, length=3)
    return xnp.sum(c * c) + xnp.sum(ys)


def _cond(x):
    return xnp.sum(lax.cond(xnp.sum(x) > 0, lambda a: xnp.sin(a) * a, lambda a: xnp.exp(a), x))


def _switch(x):
    k = xnp.argmax(x).astype(np.int32) % 3
    return xnp.sum(lax.switch(k, [lambda a: a * a, lambda a: xnp.tanh(a), lambda a: a ** 3], x))


def _scan_reverse(x):
    c, ys = lax.scan(lambda c, v: (c * v + xnp.sin(c), c * v), xnp.float64(1.0), x,
                     reverse=True)
    return c + xnp.sum(ys * ys)


CASES = {
    "scan_rnn": (lambda x: _rnn(x[:9].reshape(3, 3), x[9:].reshape(4, 3)), 21),
    "fori_loop": (_fori, 5),
    "nested_loops": (_nested, 4),
    "cond": (_cond, 5),
    "switch": (_switch, 6),
    "scan_reverse": (_scan_reverse, 6),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_grad_through_control_flow_matches_finite_differences(name):
    f, n = CASES[name]
    x = RNG.normal(size=n) * 0.5
    got = np.asarray(xlc.grad(f)(x))
    want = _fd_grad(_value(f), x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(CASES))
def test_jvp_through_control_flow_equals_grad_dot_tangent(name):
    f, n = CASES[name]
    x = RNG.normal(size=n) * 0.5
    t = RNG.normal(size=n)
    value, tangent = xlc.jvp(f, (x,), (t,))
    g = np.asarray(xlc.grad(f)(x))
    np.testing.assert_allclose(float(tangent), float(g @ t), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(float(value), _value(f)(x), rtol=1e-12)


@pytest.mark.parametrize("name", ["scan_rnn", "fori_loop", "cond"])
def test_second_order_through_control_flow(name):
    """Hessian-vector products two ways: grad of <grad f, v> (reverse over reverse) and jvp
    of grad (forward over reverse), against finite differences of the gradient."""
    f, n = CASES[name]
    x = RNG.normal(size=n) * 0.5
    v = RNG.normal(size=n)
    hv_rr = np.asarray(xlc.grad(lambda y: xnp.vdot(xlc.grad(f)(y), v))(x))
    _, hv_fr = xlc.jvp(xlc.grad(f), (x,), (v,))
    gf = xlc.jit(xlc.grad(f))
    eps = 1e-5
    fd = (np.asarray(gf(x + eps * v)) - np.asarray(gf(x - eps * v))) / (2 * eps)
    np.testing.assert_allclose(hv_rr, fd, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(hv_fr), fd, rtol=1e-5, atol=1e-6)


def test_forward_mode_through_while_loop_of_unknown_trip_count():
    """A while loop that stops on a value: jvp carries the tangent through it (JAX's rule);
    reverse mode cannot run it backwards and says so."""
    def f(x):
        def body(c):
            v, k = c
            return v * 1.5 + xnp.sin(v), k + 1
        return lax.while_loop(lambda c: xnp.sum(c[0]) < 10.0, body, (x, 0))[0]

    x = np.array([0.3, 0.2, 0.1])
    t = np.array([1.0, -1.0, 0.5])
    value, tangent = xlc.jvp(f, (x,), (t,))
    eps = 1e-7
    fd = (np.asarray(xlc.jit(f)(x + eps * t)) - np.asarray(xlc.jit(f)(x - eps * t))) / (2 * eps)
    np.testing.assert_allclose(np.asarray(tangent), fd, rtol=1e-6)
    with pytest.raises(UnsupportedOpError, match="reverse-mode differentiation of a "
                       "while_loop needs a trip count known at trace time"):
        xlc.grad(lambda y: xnp.sum(f(y)))(x)


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 5), st.integers(1, 4))
def test_scan_grad_over_shapes(length, width):
    w = RNG.normal(size=(width, width)) * 0.4
    xs = RNG.normal(size=(length, width))
    f = lambda a: _rnn(a, xs)  # noqa: E731
    got = np.asarray(xlc.grad(f)(w))
    np.testing.assert_allclose(got, _fd_grad(_value(f), w), rtol=1e-6, atol=1e-7)


@xlc.custom_jvp
def _softplus(x):
    return xnp.log1p(xnp.exp(x))


@_softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _softplus(x), t * (1 / (1 + xnp.exp(-x)))


def test_custom_jvp_in_both_modes():
    x = np.array([-30.0, -1.0, 0.0, 2.0, 40.0])
    t = np.ones(5)
    _, tangent = xlc.jvp(_softplus, (x,), (t,))
    g = np.asarray(xlc.grad(lambda y: xnp.sum(_softplus(y)))(x))
    want = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(np.asarray(tangent), want, rtol=1e-12)
    np.testing.assert_allclose(g, want, rtol=1e-12)


def test_custom_jvp_rule_replaces_the_functions_own_derivative():
    @xlc.custom_jvp
    def scaled_grad(x):
        return xnp.sin(x)

    scaled_grad.defjvps(lambda t, out, x: t * 0.5)
    x = np.array([1.0, 2.0])
    g = xlc.grad(lambda y: xnp.sum(scaled_grad(y) * 5.0))(x)
    np.testing.assert_allclose(np.asarray(g), [2.5, 2.5])
    _, t = xlc.jvp(scaled_grad, (x,), (np.array([1.0, -2.0]),))
    np.testing.assert_allclose(np.asarray(t), [0.5, -1.0])


def test_jvp_of_custom_vjp_is_an_error():
    @xlc.custom_vjp
    def f(x):
        return xnp.sin(x)

    f.defvjp(lambda x: (f(x), x), lambda x, ct: (ct * xnp.cos(x),))
    with pytest.raises(UnsupportedOpError, match="forward-mode differentiation of a "
                       "custom_vjp function is not defined"):
        xlc.jvp(f, (np.ones(2),), (np.ones(2),))


def test_custom_vjp_inside_scan_body():
    @xlc.custom_vjp
    def scaled(x):
        return x * 2.0

    scaled.defvjp(lambda x: (scaled(x), None), lambda r, ct: (ct * 10.0,))

    def f(x):
        c, _ = lax.scan(lambda c, _: (scaled(c), None), x, None, length=3)
        return xnp.sum(c)

    np.testing.assert_allclose(np.asarray(xlc.grad(f)(np.ones(2))), [1000.0, 1000.0])



@pytest.mark.parametrize("name", sorted(CASES))
def test_control_flow_grads_match_jax(name):
    jax_ = pytest.importorskip("jax")
    jnp = jax_.numpy
    jlax = jax_.lax
    from jax import config

    f, n = CASES[name]
    x = RNG.normal(size=n) * 0.5
    old = config.jax_enable_x64
    config.update("jax_enable_x64", True)
    try:
        # the same programs written against jax
        import tests.frontend.test_autodiff_control as mod

        saved = (mod.xnp, mod.lax)
        mod.xnp, mod.lax = jnp, jlax
        try:
            want = np.asarray(jax_.grad(f)(x))
        finally:
            mod.xnp, mod.lax = saved
    finally:
        config.update("jax_enable_x64", old)
    np.testing.assert_allclose(np.asarray(xlc.grad(f)(x)), want, rtol=1e-10, atol=1e-12)


def test_derivative_marks_do_not_outlive_the_trace():
    """stop_gradient marks, custom rule groups and loop trip counts are per trace: a long
    program that traces many functions does not accumulate them."""
    from xlc.frontend import autodiff, control_flow

    f = lambda x: xnp.sum(lax.fori_loop(  # noqa: E731
        0, 3, lambda i, c: _softplus(xlc.stop_gradient(c) + c), x))
    g = np.asarray(xlc.grad(f)(np.ones(2)))
    assert np.all(np.isfinite(g))
    assert not autodiff._STOPPED and not autodiff._CUSTOM and not control_flow.TRIP_COUNTS
