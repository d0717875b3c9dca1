"""`xlc.numpy.linalg` / `xlc.lax.linalg`: lowered to JAX's LAPACK custom-calls and run on the
CPU; checked against numpy (always) and JAX (when installed), for f32/f64/c64/c128 and batch
dims; bad input is a TraceError naming the function."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

pytest.importorskip("scipy")

import xlc.lax  # noqa: E402
import xlc.numpy as xnp  # noqa: E402

import xlc  # noqa: E402
from xlc.errors import TraceError  # noqa: E402

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def _tol(dt: Any) -> float:
    return 2e-4 if np.dtype(dt) in (np.float32, np.complex64) else 1e-10


def _mat(dt: Any, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dt).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dt)


def _spd(dt: Any, n: int, batch: tuple[int, ...] = ()) -> np.ndarray:
    x = _mat(dt, batch + (n, n), 1)
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)).astype(dt)


def _close(got: Any, want: Any, dt: Any) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=_tol(dt), atol=_tol(dt) * 10)


@pytest.mark.parametrize("dt", DTYPES)
def test_against_numpy(dt: Any) -> None:
    a = _mat(dt, (2, 5, 5)) + 3 * np.eye(5, dtype=dt)
    b = _mat(dt, (2, 5, 3), 2)
    spd = _spd(dt, 5, (2,))
    _close(xlc.jit(xnp.linalg.cholesky)(spd), np.linalg.cholesky(spd), dt)
    _close(xlc.jit(xnp.linalg.solve)(a, b), np.linalg.solve(a, b), dt)
    _close(xlc.jit(xnp.linalg.solve)(a, b[0, :, 0]), np.linalg.solve(a, b[0, :, 0]), dt)
    _close(xlc.jit(xnp.linalg.inv)(a), np.linalg.inv(a), dt)
    _close(xlc.jit(xnp.linalg.det)(a), np.linalg.det(a), dt)
    sign, logdet = xlc.jit(xnp.linalg.slogdet)(a)
    want_sign, want_log = np.linalg.slogdet(a)
    _close(sign, want_sign, dt)
    _close(logdet, want_log, dt)
    w, v = xlc.jit(xnp.linalg.eigh)(spd)
    _close(w, np.linalg.eigvalsh(spd), dt)
    _close(spd @ np.asarray(v), np.asarray(v) * np.asarray(w)[..., None, :], dt)
    _close(xlc.jit(lambda x: xnp.linalg.svd(x, compute_uv=False))(b),
           np.linalg.svd(b, compute_uv=False), dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(6, 4), (3, 5), (4, 4)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_modes_rebuild_the_matrix(dt: Any, shape: tuple[int, int], mode: str) -> None:
    a = _mat(dt, shape, 3)
    out = xlc.jit(lambda x: xnp.linalg.qr(x, mode=mode))(a)
    want = np.linalg.qr(a, mode=mode)
    if mode == "r":
        _close(np.abs(out), np.abs(want), dt)
        return
    q, r = (np.asarray(o) for o in out)
    assert q.shape == want[0].shape and r.shape == want[1].shape
    _close(q @ r, a, dt)
    _close(np.conj(q.T) @ q, np.eye(q.shape[1]), dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("full", [True, False])
def test_svd_rebuilds_the_matrix(dt: Any, full: bool) -> None:
    a = _mat(dt, (2, 5, 3), 4)
    u, s, vh = (np.asarray(o) for o in xlc.jit(lambda x: xnp.linalg.svd(x, full))(a))
    want_u, want_s, want_vh = np.linalg.svd(a, full_matrices=full)
    assert u.shape == want_u.shape and vh.shape == want_vh.shape
    _close(s, want_s, dt)
    _close((u[..., :3] * s[..., None, :]) @ vh[..., :3, :], a, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_lax_triangular_solve_and_lu(dt: Any) -> None:
    a = np.tril(_mat(dt, (4, 4), 5)) + 4 * np.eye(4, dtype=dt)
    b = _mat(dt, (3, 4), 6)
    x = xlc.jit(lambda a, b: xlc.lax.linalg.triangular_solve(a, b, left_side=False, lower=True,
                                                             transpose_a=True))(a, b)
    _close(np.asarray(x) @ a.T, b, dt)
    m = _mat(dt, (5, 5), 7)
    lu, piv, perm = (np.asarray(o) for o in xlc.jit(xlc.lax.linalg.lu)(m))
    lower = np.tril(lu, -1) + np.eye(5)
    _close(lower @ np.triu(lu), m[perm], dt)
    assert piv.dtype == np.int32 and perm.dtype == np.int32 and sorted(perm) == list(range(5))


def test_cholesky_of_a_matrix_that_is_not_positive_definite_is_nan() -> None:
    got = np.asarray(xlc.jit(xnp.linalg.cholesky)(-_spd(np.float64, 3)))
    assert np.isnan(got[np.tril_indices(3)]).all() and (np.triu(got, 1) == 0).all()


def test_real_imag_conj() -> None:
    z = _mat(np.complex64, (3,))
    got = xlc.jit(lambda v: (xnp.real(v), xnp.imag(v), xnp.conj(v)))(z)
    np.testing.assert_array_equal(got[0], z.real)
    np.testing.assert_array_equal(got[1], z.imag)
    np.testing.assert_array_equal(got[2], np.conj(z))
    x = np.arange(3.0)
    got = xlc.jit(lambda v: (xnp.real(v), xnp.imag(v), xnp.conjugate(v)))(x)
    np.testing.assert_array_equal(got[1], np.zeros(3))


@pytest.mark.parametrize("fn,arg,message", [
    (xnp.linalg.inv, np.ones((3, 4), np.float32),
     r"linalg.inv: needs square matrices \(the last two dims\), got f32\[3,4\]"),
    (xnp.linalg.cholesky, np.ones(3, np.float32),
     r"linalg.cholesky: needs square matrices \(the last two dims\), got f32\[3\]"),
    (lambda a: xnp.linalg.qr(a, mode="full"), np.ones((3, 3), np.float32),
     r"linalg.qr: mode must be 'reduced', 'complete' or 'r', got 'full'"),
])
def test_bad_input_names_the_function(fn: Callable, arg: np.ndarray, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        xlc.jit(fn)(arg)


def test_solve_refuses_a_b_that_does_not_fit() -> None:
    with pytest.raises(TraceError, match=r"linalg.solve: a f32\[3,3\] and b f32\[4,2\] do not "
                                         r"fit"):
        xlc.jit(xnp.linalg.solve)(np.eye(3, dtype=np.float32), np.ones((4, 2), np.float32))


CASES: dict[str, tuple[Callable[[Any], Callable], Callable[[Any], list]]] = {
    "cholesky": (lambda m: m.linalg.cholesky, lambda dt: [_spd(dt, 5, (2,))]),
    "cholesky_not_pd": (lambda m: m.linalg.cholesky, lambda dt: [-_spd(dt, 4)]),
    "solve": (lambda m: m.linalg.solve, lambda dt: [_mat(dt, (2, 5, 5)), _mat(dt, (5, 2))]),
    "inv": (lambda m: m.linalg.inv, lambda dt: [_mat(dt, (3, 4, 4))]),
    "det": (lambda m: m.linalg.det, lambda dt: [_mat(dt, (4, 4))]),
    "slogdet": (lambda m: lambda a: tuple(m.linalg.slogdet(a)), lambda dt: [_mat(dt, (4, 4))]),
    "qr": (lambda m: m.linalg.qr, lambda dt: [_mat(dt, (6, 4))]),
    "qr_complete": (lambda m: lambda a: m.linalg.qr(a, mode="complete"),
                    lambda dt: [_mat(dt, (3, 5))]),
    "eigh": (lambda m: m.linalg.eigh, lambda dt: [_spd(dt, 5)]),
    "svd": (lambda m: m.linalg.svd, lambda dt: [_mat(dt, (5, 3))]),
    "svd_reduced": (lambda m: lambda a: m.linalg.svd(a, full_matrices=False),
                    lambda dt: [_mat(dt, (3, 5))]),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dt", DTYPES)
def test_against_jax(name: str, dt: Any) -> None:
    """Same outputs (including NaN positions, signs of eigen/singular vectors) as jax.numpy:
    both run the same LAPACK routines."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    make, data = CASES[name]
    args = data(dt)
    with jax.enable_x64(True):
        want = jax.tree_util.tree_leaves(jax.jit(make(jnp))(*args))
    got = jax.tree_util.tree_leaves(xlc.jit(make(xnp))(*args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=_tol(dt), atol=_tol(dt) * 10, equal_nan=True)
