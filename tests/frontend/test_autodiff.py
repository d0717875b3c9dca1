"""xlc.grad / value_and_grad / vjp / stop_gradient: reverse mode on the traced HLO, checked
against central finite differences in f64 and against jax.grad (when installed), first and
second order, plus a small MLP trained with xlc.grad whose loss curve follows JAX's."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import xlc.lax
import xlc.nn
import xlc.numpy as xnp

import xlc
from xlc.errors import TraceError, UnsupportedOpError

RNG = np.random.default_rng(0)


def _fd(f: Callable[[np.ndarray], float], x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    g = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


FUNCS: dict[str, tuple[Callable[[Any, Any], Any], tuple[int, ...]]] = {
    # name: (f(np_module, x) -> scalar, shape of x); x is drawn in [0.5, 1.5)
    "elementwise": (lambda m: lambda x: m.sum(m.sin(x) * m.exp(x) + m.log(x) * m.tanh(x)
                                              + m.sqrt(x) / (1.0 + x) + x ** 3), (3, 4)),
    "logistic_pow": (lambda m: lambda x: m.sum(1 / (1 + m.exp(-x)) * m.power(x, 2.5)), (5,)),
    "matmul": (lambda m: lambda x: m.sum(m.tanh(x @ x.T) @ x), (3, 4)),
    "softmax_xent": (lambda m: lambda x: -m.sum(m.log(m.exp(x - m.max(x, axis=-1,
                                                                       keepdims=True))
                                                      / m.sum(m.exp(x - m.max(
                                                          x, axis=-1, keepdims=True)),
                                                          axis=-1, keepdims=True))[:, 0]),
                     (4, 6)),
    "shapes": (lambda m: lambda x: m.sum(
        (m.concatenate([x[1:, ::2], x[:-1, 1::2]], axis=1) @ m.transpose(x)[:, 1:]) ** 2)
        + m.sum(m.pad(x, 1) * x.reshape(-1)[3]), (5, 8)),
    "max_min_where": (lambda m: lambda x: m.sum(m.maximum(x, 1.0) * m.minimum(x, 1.2)
                                                + m.where(x > 1.0, x * x, -x)) + m.max(x),
                      (4, 3)),
    "indexing": (lambda m: lambda x: m.sum(m.take(x, np.array([2, 0, 2, 3]), axis=0) ** 2)
                 + m.sum(x[np.array([1, 1]), np.array([0, 2])] * x[0, :2]), (4, 3)),
    "cumsum_pool": (lambda m: lambda x: m.sum(m.cumsum(x, axis=1) ** 2) + m.sum(
        m.cumsum(x[::-1], axis=0) * x), (4, 5)),
    "mean_var": (lambda m: lambda x: m.mean(x) * m.var(x, axis=0).sum() + m.prod(x[0]),
                 (3, 4)),
}


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_gradients_match_finite_differences(name: str) -> None:
    make, shape = FUNCS[name]
    x = RNG.uniform(0.5, 1.5, shape)
    got = np.asarray(xlc.grad(make(xnp))(x))
    want = _fd(lambda v: float(make(np)(v)), x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_gradients_match_jax(name: str) -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    make, shape = FUNCS[name]
    x = RNG.uniform(0.5, 1.5, shape)
    with jax.enable_x64(True):
        want = np.asarray(jax.grad(make(jnp))(x))
    np.testing.assert_allclose(np.asarray(xlc.grad(make(xnp))(x)), want, rtol=1e-10,
                               atol=1e-12)


def test_dynamic_slices() -> None:
    import xlc.lax

    def f(x: Any, i: Any) -> Any:
        s = xlc.lax.dynamic_slice(x, [i, 1], [2, 2])
        y = xlc.lax.dynamic_update_slice(x, s * s, [1, i])
        return xnp.sum(y * y)

    x = RNG.uniform(0.5, 1.5, (4, 5))
    for i in (0, 2, 9):  # 9: clamped like the slice
        got = np.asarray(xlc.grad(f)(x, np.int32(i)))

        def ref(v: np.ndarray, i: int = i) -> float:
            r = min(max(i, 0), 2)
            s = v[r:r + 2, 1:3]
            y = v.copy()
            c = min(max(i, 0), 3)
            y[1:3, c:c + 2] = s * s
            return float(np.sum(y * y))

        np.testing.assert_allclose(got, _fd(ref, x), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("window,strides,padding", [((2, 2), (2, 2), "VALID"),
                                                    ((3, 2), (1, 2), "SAME"),
                                                    ((2, 3), (2, 1), [(1, 0), (2, 1)])])
def test_average_pooling(window: tuple, strides: tuple, padding: Any) -> None:
    """reduce-window sums with strides and padding (average pooling) against finite
    differences of the same window sum in numpy via the evaluator."""
    from xlc.hlo.evaluator import evaluate
    from xlc.hlo.parser import parse_module

    def pool(x: Any) -> Any:
        return xlc.lax.reduce_window(x, 0.0, xlc.lax.Opcode.ADD, window, strides, padding)

    x = RNG.uniform(0.5, 1.5, (5, 6))
    weights = RNG.uniform(0.5, 1.5, np.asarray(xlc.jit(pool)(x)).shape)
    text = xlc.jit(lambda v: xnp.sum(pool(v) ** 2 * weights)).lower(x).as_text()
    module = parse_module(text)
    got = np.asarray(xlc.grad(lambda v: xnp.sum(pool(v) ** 2 * weights))(x))
    want = _fd(lambda v: float(np.asarray(evaluate(module, [v]))), x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["elementwise", "matmul", "softmax_xent", "shapes"])
def test_jvp_matches_directional_finite_differences(name: str) -> None:
    make, shape = FUNCS[name]
    x = RNG.uniform(0.5, 1.5, shape)
    t = RNG.standard_normal(shape)
    out, tangent = xlc.jvp(make(xnp), (x,), (t,))
    eps = 1e-6
    want = (float(make(np)(x + eps * t)) - float(make(np)(x - eps * t))) / (2 * eps)
    np.testing.assert_allclose(float(out), float(make(np)(x)), rtol=1e-12)
    np.testing.assert_allclose(float(tangent), want, rtol=1e-6)


def test_jvp_of_a_vector_function_matches_jax() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")

    def f(m: Any) -> Callable:
        return lambda a, b: (m.tanh(a @ b), m.sum(a * a, axis=1))

    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    ta, tb = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    out, tangent = xlc.jvp(f(xnp), (a, b), (ta, tb))
    with jax.enable_x64(True):
        want_out, want_t = jax.jvp(f(jnp), (a, b), (ta, tb))
    for g, w in zip(tangent, want_t):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(out[0]), np.asarray(want_out[0]), rtol=1e-12)


def test_custom_vjp_replaces_the_derivative() -> None:
    """A clipped-gradient identity (the backward function halves the cotangent) and a
    numerically safe log1p(exp(x)) with a hand-written derivative, under grad."""
    @xlc.custom_vjp
    def halve_grad(x: Any) -> Any:
        return x

    halve_grad.defvjp(lambda x: (x, None), lambda res, ct: (ct * 0.5,))

    @xlc.custom_vjp
    def softplus(x: Any) -> Any:
        return xnp.log1p(xnp.exp(x))

    softplus.defvjp(lambda x: (softplus(x), x),
                    lambda x, ct: (ct * (1.0 / (1.0 + xnp.exp(-x))),))

    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(xlc.grad(lambda v: xnp.sum(halve_grad(v) ** 2))(x), x)
    np.testing.assert_allclose(xlc.grad(lambda v: xnp.sum(softplus(v) * 3.0))(x),
                               3.0 / (1.0 + np.exp(-x)), rtol=1e-12)
    np.testing.assert_allclose(xlc.jit(softplus)(x), np.log1p(np.exp(x)), rtol=1e-12)


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("strides,padding", [((2, 2), "VALID"), ((1, 1), "SAME")])
def test_max_and_min_pooling(op: str, strides: tuple, padding: str) -> None:
    """reduce-window max/min: the cotangent of each window goes to its chosen element
    (distinct values, so finite differences apply); equal to jax.grad when installed."""
    opcode = xlc.lax.Opcode.MAXIMUM if op == "max" else xlc.lax.Opcode.MINIMUM
    init = -np.inf if op == "max" else np.inf

    def f(m: Any, lax: Any, x: Any) -> Any:
        reducer = opcode if lax is xlc.lax else (lax.max if op == "max" else lax.min)
        pooled = lax.reduce_window(x, init, reducer, (2, 3), strides, padding)
        return m.sum(pooled ** 2 * m.arange(1.0, pooled.size + 1.0).reshape(pooled.shape))

    x = RNG.permutation(30).reshape(5, 6) / 7.0 + 0.1
    got = np.asarray(xlc.grad(lambda v: f(xnp, xlc.lax, v))(x))
    from xlc.hlo.evaluator import evaluate
    from xlc.hlo.parser import parse_module

    module = parse_module(xlc.jit(lambda v: f(xnp, xlc.lax, v)).lower(x).as_text())
    want = _fd(lambda v: float(np.asarray(evaluate(module, [v]))), x, eps=1e-7)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return
    with jax.enable_x64(True):
        theirs = np.asarray(jax.grad(lambda v: f(jnp, jax.lax, v))(x))
    np.testing.assert_allclose(got, theirs, rtol=1e-12)


def test_second_order() -> None:
    f = lambda x: xnp.sin(x) * x ** 3  # noqa: E731
    d2 = xlc.jit(xlc.grad(xlc.grad(f)))
    for x in (0.3, 1.1, 2.0):
        want = -np.sin(x) * x ** 3 + 6 * x ** 2 * np.cos(x) + 6 * x * np.sin(x)
        np.testing.assert_allclose(float(d2(np.float64(x))), want, rtol=1e-12)


def test_value_and_grad_argnums_aux_and_pytrees() -> None:
    def loss(params: dict, x: Any, scale: float) -> tuple:
        h = xnp.tanh(x @ params["w"] + params["b"])
        out = xnp.sum(h * h) * scale
        return out, {"hidden": h}

    params = {"w": RNG.standard_normal((3, 2)), "b": RNG.standard_normal(2)}
    x = RNG.standard_normal((4, 3))
    (value, aux), grads = xlc.value_and_grad(loss, argnums=(0, 1), has_aux=True)(params, x,
                                                                                 2.0)
    gp, gx = grads
    assert set(gp) == {"w", "b"} and gx.shape == (4, 3) and aux["hidden"].shape == (4, 2)

    def f_w(w: np.ndarray) -> float:
        return float(loss({"w": w, "b": params["b"]}, x, 2.0)[0])

    np.testing.assert_allclose(gp["w"], _fd(f_w, params["w"]), rtol=1e-6, atol=1e-8)
    g_only, aux2 = xlc.grad(loss, has_aux=True)(params, x, 2.0)
    np.testing.assert_allclose(g_only["b"], gp["b"], rtol=1e-12)


def test_stop_gradient_and_closed_over_values() -> None:
    def f(x: Any) -> Any:
        return xnp.sum(x * xlc.stop_gradient(x))

    x = np.arange(1.0, 4.0)
    np.testing.assert_allclose(xlc.grad(f)(x), x)


def test_vjp_inside_jit() -> None:
    @xlc.jit
    def pull(x: Any, ct: Any) -> Any:
        y, f_vjp = xlc.vjp(lambda v: xnp.exp(v) * 2.0, x)
        return y, f_vjp(ct)[0]

    x = np.array([0.0, 1.0])
    y, g = pull(x, np.array([1.0, 3.0]))
    np.testing.assert_allclose(g, np.exp(x) * 2 * [1.0, 3.0])


def test_errors_name_the_problem() -> None:
    with pytest.raises(TraceError, match=r"xlc.grad of <lambda>: the function must return a "
                                         r"real scalar, got f64\[2\]"):
        xlc.grad(lambda x: x * 2)(np.ones(2))
    with pytest.raises(TraceError, match=r"needs float inputs, got s32\[2\]"):
        xlc.grad(lambda x: xnp.sum(x))(np.ones(2, np.int32))
    with pytest.raises(UnsupportedOpError, match=r"xlc.grad of <lambda>: reverse-mode "
                       r"differentiation of a while_loop needs a trip count known at trace "
                       r"time \(while(\.\d+)?\)"):
        xlc.grad(lambda x, n: xnp.sum(xlc.lax.fori_loop(0, n, lambda i, v: v * 2.0, x)))(
            np.ones(2), np.int32(3))


def test_mlp_training_curve_follows_jax() -> None:
    """A 2-layer MLP with softmax cross-entropy, 30 steps of SGD with xlc.grad: the loss at
    every step equals JAX's to 1e-10 (f64)."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")

    def make(m: Any, nn_softmax: Callable) -> Callable:
        def loss(p: dict, x: Any, y: Any) -> Any:
            h = m.tanh(x @ p["w1"] + p["b1"])
            logits = h @ p["w2"] + p["b2"]
            probs = nn_softmax(logits)
            return -m.mean(m.sum(y * m.log(probs), axis=-1))
        return loss

    x = RNG.standard_normal((16, 5))
    y = np.eye(3)[RNG.integers(0, 3, 16)]
    p0 = {"w1": RNG.standard_normal((5, 8)) * 0.5, "b1": np.zeros(8),
          "w2": RNG.standard_normal((8, 3)) * 0.5, "b2": np.zeros(3)}

    def train(m: Any, grad: Callable, softmax: Callable, jit: Callable) -> list[float]:
        loss = make(m, softmax)
        step = jit(lambda p: (loss(p, x, y), grad(loss)(p, x, y)))
        p, losses = dict(p0), []
        for _ in range(30):
            value, g = step(p)
            losses.append(float(value))
            p = {k: np.asarray(p[k]) - 0.5 * np.asarray(g[k]) for k in p}
        return losses

    mine = train(xnp, xlc.grad, xlc.nn.softmax, xlc.jit)
    with jax.enable_x64(True):
        theirs = train(jnp, jax.grad, jax.nn.softmax, jax.jit)
    np.testing.assert_allclose(mine, theirs, rtol=1e-10)
    assert mine[-1] < mine[0]
