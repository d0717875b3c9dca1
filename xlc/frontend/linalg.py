"""`xlc.numpy.linalg`: numpy's / jax.numpy's linear algebra over `xlc.lax.linalg`, built as
jax.numpy builds it (LU for solve/inv/det/slogdet, Cholesky, QR, eigh, SVD), so the HLO has
the same LAPACK custom-calls as JAX's. Leading dims are batch dims; integer inputs become
f32. The CPU backend runs the custom-calls on scipy's LAPACK (`pip install 'xlc[linalg]'`).
"""
from __future__ import annotations

from typing import Any

from xlc.frontend import lax as _lax
from xlc.frontend import lax_linalg
from xlc.frontend.tracer import Tracer, as_tracer, trace_error
from xlc.hlo.shape import PrimitiveType as PT

__all__ = ["cholesky", "solve", "inv", "det", "slogdet", "qr", "eigh", "eigvalsh", "svd",
           "triangular_solve"]

triangular_solve = lax_linalg.triangular_solve


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


def _square(name: str, a: Any) -> Tracer:
    t = as_tracer(a)
    if t.ptype.is_integer or t.ptype is PT.PRED:
        t = _np().astype(t, PT.F32)
    if t.ndim < 2 or t.shape[-1] != t.shape[-2]:
        raise trace_error(f"linalg.{name}: needs square matrices (the last two dims), got "
                          f"{t.aval_text}")
    return t


def cholesky(a: Any) -> Tracer:
    """The lower Cholesky factor (NaN for a matrix that is not positive definite)."""
    return lax_linalg.cholesky(_square("cholesky", a))


def solve(a: Any, b: Any) -> Tracer:
    """x with a x = b: b one vector (n,) or matrices (..., n, k) whose batch dims broadcast
    with a's (numpy 2's and jax.numpy's rule); by LU with partial pivoting, then two
    triangular solves."""
    xnp = _np()
    ta = _square("solve", a)
    tb = as_tracer(b)
    if tb.ptype is not ta.ptype:
        tb = xnp.astype(tb, ta.dtype)
    n = ta.shape[-1]
    vector = tb.ndim == 1
    if vector:
        tb = xnp.expand_dims(tb, -1)
    if tb.ndim < 2 or tb.shape[-2] != n:
        raise trace_error(f"linalg.solve: a {ta.aval_text} and b {as_tracer(b).aval_text} do "
                          "not fit (b: (n,) or (..., n, k))")
    batch = tuple(xnp.broadcast_shapes(ta.shape[:-2], tb.shape[:-2]))
    ta = xnp.broadcast_to(ta, batch + ta.shape[-2:])
    tb = xnp.broadcast_to(tb, batch + tb.shape[-2:])
    f, _piv, perm = lax_linalg.lu(ta)
    rows = xnp.broadcast_to(xnp.expand_dims(perm, -1), tb.shape)
    y = lax_linalg.triangular_solve(f, xnp.take_along_axis(tb, rows, axis=-2), left_side=True,
                                    lower=True, unit_diagonal=True)
    x = lax_linalg.triangular_solve(f, y, left_side=True, lower=False)
    return xnp.squeeze(x, -1) if vector else x


def inv(a: Any) -> Tracer:
    """The inverse, as solve(a, I)."""
    xnp = _np()
    ta = _square("inv", a)
    n = ta.shape[-1]
    eye = _lax.broadcast_in_dim(xnp.eye(n, dtype=ta.dtype), ta.shape, (ta.ndim - 2, ta.ndim - 1))
    return solve(ta, eye)


def _lu_diagonal(name: str, a: Any) -> tuple[Tracer, Tracer]:
    """(diagonal of U, parity of the row swaps as 0/1 s32) of a's LU factorization."""
    xnp = _np()
    ta = _square(name, a)
    f, piv, _perm = lax_linalg.lu(ta)
    n = ta.shape[-1]
    eye = xnp.eye(n, dtype=bool)
    diag = xnp.sum(xnp.where(eye, f, xnp.zeros_like(f)), axis=-1)
    swaps = xnp.sum(xnp.astype(xnp.not_equal(piv, _lax.iota(PT.S32, n)), "int32"), axis=-1)
    return diag, xnp.remainder(swaps, 2)


def det(a: Any) -> Tracer:
    """The determinant: the product of U's diagonal, negated for an odd number of row
    swaps."""
    xnp = _np()
    diag, odd = _lu_diagonal("det", a)
    sign = xnp.where(xnp.equal(odd, 1), xnp.asarray(-1, diag.dtype), xnp.asarray(1, diag.dtype))
    return xnp.multiply(sign, xnp.prod(diag, axis=-1))


def slogdet(a: Any) -> tuple[Tracer, Tracer]:
    """(sign, log|det|): sign of a real determinant (+-1, 0 when singular) or the unit
    phase of a complex one, and the log of its magnitude (-inf when singular)."""
    xnp = _np()
    diag, odd = _lu_diagonal("slogdet", a)
    mag = xnp.abs(diag)
    logdet = xnp.sum(xnp.log(mag), axis=-1)
    zero = xnp.equal(mag, 0)
    phase = xnp.where(zero, xnp.zeros_like(diag),
                      xnp.divide(diag, xnp.astype(xnp.where(zero, xnp.ones_like(mag), mag),
                                                  diag.dtype)))
    flip = xnp.where(xnp.equal(odd, 1), xnp.asarray(-1, diag.dtype),
                     xnp.asarray(1, diag.dtype))
    return xnp.multiply(flip, xnp.prod(phase, axis=-1)), logdet


def qr(a: Any, mode: str = "reduced") -> Any:
    """(q, r) for mode 'reduced' or 'complete'; r alone for mode 'r'."""
    if mode not in ("reduced", "complete", "r"):
        raise trace_error(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    q, r = lax_linalg.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else (q, r)


def eigh(a: Any, UPLO: str = "L",  # noqa: N803 - numpy's name
         symmetrize_input: bool = True) -> tuple[Tracer, Tracer]:
    """(eigenvalues ascending, eigenvectors as columns) of a Hermitian matrix: of
    (a + a^H) / 2 by default, as jax.numpy does, else of its `UPLO` ('L' or 'U') triangle."""
    if UPLO not in ("L", "U"):
        raise trace_error(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    v, w = lax_linalg.eigh(_square("eigh", a), lower=UPLO == "L",
                           symmetrize_input=symmetrize_input)
    return w, v


def eigvalsh(a: Any, UPLO: str = "L") -> Tracer:  # noqa: N803 - numpy's name
    """The eigenvalues of a Hermitian matrix, ascending."""
    return eigh(a, UPLO)[0]


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True,
        hermitian: bool = False) -> Any:
    """(u, s, vh) with a = u diag(s) vh, or s alone without `compute_uv`. `hermitian` is
    accepted for numpy's signature; the general SVD serves it."""
    del hermitian
    return lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
