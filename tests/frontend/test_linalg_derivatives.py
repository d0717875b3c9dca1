"""Derivatives of xlc.numpy.linalg / xlc.lax.linalg (`linalg_derivatives.py`) beyond the
table of `test_autodiff_ops.py` (reverse mode, real, against finite differences and jax.grad):
forward mode against jax.jvp, complex inputs (on the evaluator: the CPU backend has no complex
dot), how many LAPACK calls a derivative costs, the refusals JAX makes too, and the
custom_jvp machinery the factorizations rely on (several outputs, integer outputs)."""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import xlc.lax
import xlc.numpy as xnp

import xlc
from tests.frontend.autodiff_harness import x64_jax
from tests.frontend.helpers import assert_close
from xlc.frontend import pytree
from xlc.hlo.evaluator import evaluate

RNG = np.random.default_rng(11)
X = RNG.standard_normal((2, 3, 4))  # a batch of two 3 x 4 matrices
SQ = X[..., :3] + 2.0 * np.eye(3)
WIDE = X + np.eye(3, 4) * np.array([[3.0], [2.0], [1.0]])
XC = X + 1j * RNG.standard_normal(X.shape)
SQC = XC[..., :3] + 2.0 * np.eye(3)


@pytest.fixture(scope="module")
def jax() -> Any:
    with x64_jax() as j:
        if j is None:
            pytest.skip("needs jax")
        yield j


def _lin(ns: Any) -> Any:
    """xlc.lax.linalg for xlc.numpy, jax.lax.linalg for jax.numpy."""
    if ns is xnp:
        return xlc.lax.linalg
    import jax.lax.linalg

    return jax.lax.linalg


def _gram(a: Any, ns: Any) -> Any:
    return a @ ns.conj(ns.swapaxes(a, -1, -2)) + np.eye(a.shape[-2])


def _loss(out: Any, m: Any) -> Any:
    """A fixed weighted sum of the float leaves (real and imaginary parts)."""
    total: Any = 0.0
    for k, leaf in enumerate(pytree.flatten(out)[0]):
        kind = np.dtype(leaf.dtype).kind
        w = np.cos(np.arange(int(np.prod(leaf.shape))) * 1.3 + k).reshape(leaf.shape)
        if kind == "c":
            total = total + m.sum(m.real(leaf) * w) + m.sum(m.imag(leaf) * (1 - w))
        elif kind == "f":
            total = total + m.sum(leaf * w)
    return total


CASES: dict[str, Callable[[Any, Any], Any]] = {
    "cholesky": lambda ns, a: ns.linalg.cholesky(_gram(a, ns)),
    "triangular_solve": lambda ns, a: (
        _lin(ns).triangular_solve(a[..., :3] + 3.0 * np.eye(3), a, left_side=True, lower=True),
        _lin(ns).triangular_solve(a[..., :3] + 3.0 * np.eye(3), a[..., :2, :3],
                                  transpose_a=True, conjugate_a=True, unit_diagonal=True)),
    "lu": lambda ns, a: (_lin(ns).lu(a[..., :3] + 2.0 * np.eye(3)), _lin(ns).lu(a)),
    "qr": lambda ns, a: (ns.linalg.qr(a), ns.linalg.qr(ns.swapaxes(a, -1, -2)),
                         ns.linalg.qr(ns.swapaxes(a, -1, -2)[..., :2], mode="complete")),
    "eigh": lambda ns, a: ns.linalg.eigh(_gram(a, ns)),
    "svd": lambda ns, a: (ns.linalg.svd(a, full_matrices=False),
                          ns.linalg.svd(a, compute_uv=False)),
    "solve_det": lambda ns, a: (ns.linalg.solve(a[..., :3] + 2.0 * np.eye(3), a[..., 3:]),
                                ns.linalg.det(a[..., :3] + 2.0 * np.eye(3)),
                                ns.linalg.slogdet(a[..., :3] + 2.0 * np.eye(3))[1],
                                ns.linalg.inv(a[..., :3] + 2.0 * np.eye(3))),
}
REAL_INPUT = {"lu": X, "svd": WIDE, "qr": WIDE}


def _evaluated(fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args) traced by xlc.jit and run as traced on the reference evaluator."""
    lowered = xlc.jit(fn).lower(*args)
    flat = evaluate(lowered.module, pytree.flatten(args)[0])
    return pytree.unflatten(lowered.out_tree, list(flat) if isinstance(flat, tuple) else [flat])


@pytest.mark.parametrize("name", sorted(CASES))
def test_jvp_matches_jax(name: str, jax: Any) -> None:
    """Forward mode (the rules themselves, not their transposition) against jax.jvp, on a
    batch of real matrices."""
    fn, a = CASES[name], REAL_INPUT.get(name, X)
    t = RNG.standard_normal(a.shape)
    got = xlc.jvp(lambda b: _loss(fn(xnp, b), xnp), (a,), (t,))[1]
    want = jax.jvp(lambda b: _loss(fn(jax.numpy, b), jax.numpy), (a,), (t,))[1]
    assert_close(np.asarray(got), np.asarray(want), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", ["cholesky", "triangular_solve", "qr", "eigh", "svd",
                                  "solve_det"])
def test_complex_gradients_and_jvps_match_jax(name: str, jax: Any) -> None:
    """Complex inputs: the gradient with respect to the real and imaginary parts (jax's
    unconjugated cotangent convention) and the jvp."""
    fn = CASES[name]
    a = XC if name != "svd" else XC + np.eye(3, 4) * 3.0

    def mine(re: Any, im: Any) -> Any:
        return _loss(fn(xnp, xlc.lax.complex(re, im)), xnp)

    def theirs(re: Any, im: Any) -> Any:
        return _loss(fn(jax.numpy, jax.lax.complex(re, im)), jax.numpy)

    got = _evaluated(lambda r, i: xlc.grad(mine, argnums=(0, 1))(r, i), a.real, a.imag)
    want = jax.grad(theirs, argnums=(0, 1))(a.real, a.imag)
    for g, w in zip(got, want):
        assert_close(np.asarray(g), np.asarray(w), rtol=1e-10, atol=1e-10)
    t = RNG.standard_normal(a.shape)
    got_t = _evaluated(lambda r, i, t: xlc.jvp(lambda u: mine(u, i), (r,), (t,))[1],
                       a.real, a.imag, t)
    want_t = jax.jvp(lambda u: theirs(u, a.imag), (a.real,), (t,))[1]
    assert_close(np.asarray(got_t), np.asarray(want_t), rtol=1e-10, atol=1e-10)


def _lapack_calls(fn: Callable[..., Any], *args: Any) -> dict[str, int]:
    text = xlc.jit(fn).lower(*args).as_text()
    names = re.findall(r'custom_call_target="lapack_\w(\w+)_ffi"', text)
    return {n: names.count(n) for n in sorted(set(names))}


def test_derivatives_do_not_factorize_again() -> None:
    """The rules read the factorization's outputs: one potrf for cholesky's gradient and
    jvp (the two triangular solves of its rule, transposed), one syevd for eigh's."""
    spd = _gram(X[0], np)

    def chol(a: Any) -> Any:
        return xnp.sum(xnp.linalg.cholesky(a) ** 2)

    def eig(a: Any) -> Any:
        return xnp.sum(xnp.linalg.eigh(a)[1] ** 3)

    assert _lapack_calls(xlc.grad(chol), spd) == {"potrf": 1, "trsm": 2}
    assert _lapack_calls(lambda a: xlc.jvp(chol, (a,), (a,))[1], spd) == {"potrf": 1,
                                                                          "trsm": 2}
    assert _lapack_calls(xlc.grad(eig), spd) == {"syevd": 1}
    assert _lapack_calls(xlc.grad(lambda a: xnp.sum(xnp.linalg.eigvalsh(a))), spd) == {
        "syevd": 1}
    assert _lapack_calls(xlc.grad(lambda a: xnp.linalg.det(a)), SQ[0]) == {"getrf": 1,
                                                                          "trsm": 2}


def test_svd_with_full_matrices_of_a_non_square_matrix_has_no_derivative() -> None:
    """As in JAX: the full U of a tall matrix is not determined by it."""
    with pytest.raises(xlc.UnsupportedOpError, match="full_matrices=True is only defined for "
                                                     "square matrices"):
        xlc.grad(lambda a: xnp.sum(xnp.linalg.svd(a)[0]))(WIDE[0])


def test_eigh_gradient_is_symmetric_with_symmetrize_input() -> None:
    """The symmetrized input of JAX's default: a symmetric gradient, whose symmetric part
    is the gradient without symmetrizing."""
    a = _gram(X[0], np)

    def top(sym: bool) -> Callable[[Any], Any]:
        return lambda m: xlc.lax.linalg.eigh(m, symmetrize_input=sym)[1][-1]

    g = xlc.grad(top(True))(a)
    g_raw = xlc.grad(top(False))(a)
    assert_close(g, g.T, rtol=1e-12, atol=1e-12)
    assert_close(g, (g_raw + g_raw.T) / 2, rtol=1e-12, atol=1e-12)


# ---- the custom_jvp machinery ------------------------------------------------------------------
@xlc.custom_jvp
def _sincos(x: Any) -> Any:
    return xnp.sin(x), xnp.cos(x)


@_sincos.defjvp
def _sincos_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (dx,) = primals, tangents
    return _sincos(x), (xnp.cos(x) * dx, -xnp.sin(x) * dx)


def test_custom_jvp_rule_runs_when_only_a_later_output_is_used() -> None:
    """Transposing a custom_jvp rule waits for its first output; with no cotangent there (only
    eigh's eigenvalues, say) it still runs, and a backward pass per output (vjp of a tuple)
    does not carry one pass's cotangents into the next."""
    x = np.array([0.3, 1.2, -0.7])
    assert_close(xlc.grad(lambda a: xnp.sum(_sincos(a)[1]))(x), -np.sin(x))

    @xlc.jit
    def both(a: Any) -> Any:
        return xlc.vjp(_sincos, a)[1]((xnp.ones_like(a), 2.0 * xnp.ones_like(a)))[0]

    assert_close(both(x), np.cos(x) - 2.0 * np.sin(x))
    second = xlc.grad(lambda a: xnp.sum(xlc.grad(lambda b: xnp.sum(_sincos(b)[1]))(a)))(x)
    assert_close(second, -np.cos(x))


def test_lu_pivots_have_no_tangent() -> None:
    """LU's integer outputs: jvp gives them float0 tangents (as JAX does), and the factor's
    tangent is computed once."""
    a = SQ[0]
    (f, piv, perm), (df, dpiv, dperm) = xlc.jvp(xlc.lax.linalg.lu, (a,), (np.eye(3),))
    assert dpiv.dtype == xlc.dtypes.float0 and dpiv.shape == piv.shape
    assert dperm.dtype == xlc.dtypes.float0 and dperm.shape == perm.shape
    assert _lapack_calls(lambda m: xlc.jvp(xlc.lax.linalg.lu, (m,), (m,))[1][0], a) == {
        "getrf": 1, "trsm": 2}
