"""The derivatives of `xlc.lax.linalg`, JAX's (jax/_src/lax/linalg.py), batch dims leading:

- `Factorization`: cholesky, lu, qr, eigh and svd are custom_jvp functions whose tangent rule
  (`JVP_RULES`) is written in terms of the factorization's outputs, so neither `xlc.jvp` nor the
  transposition `xlc.grad` makes of the rule calls LAPACK again. Rules are linear in the
  tangents; the primal values they use are the outputs (custom_jvp markers), so
  differentiating the rule again (grad of grad) goes through the same rules.
- `CUSTOM_CALL_RULES`: the transpose rule of LAPACK's triangular solve (the `trsm`
  custom-call): linear in b, whose cotangent is a solve with the transposed matrix, and in a
  the negated outer product, masked to a's triangle. The tangent maps above solve with
  triangular factors, so their transposition ends here.

As in JAX: eigh and svd assume distinct eigen/singular values (the derivative of eigenvectors
of a repeated eigenvalue is not defined), svd with `full_matrices` only for square matrices,
and the cotangent of a triangular matrix is zero outside its triangle.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlc.errors import UnsupportedOpError
from xlc.frontend.autodiff_forward import custom_jvp
from xlc.frontend.tracer import Tracer
from xlc.hlo import lapack
from xlc.hlo.ir import HloInstruction

__all__ = ["Factorization", "JVP_RULES", "CUSTOM_CALL_RULES"]


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


def _ll() -> Any:
    from xlc.frontend import lax_linalg

    return lax_linalg


def _t(x: Tracer) -> Tracer:
    """The matrix transpose (last two dims)."""
    return _np().swapaxes(x, -1, -2)  # type: ignore[no-any-return]


def _h(x: Tracer) -> Tracer:
    """The conjugate transpose."""
    return _np().conj(_t(x))  # type: ignore[no-any-return]


def _mm(*xs: Tracer) -> Tracer:
    """The matrix product of `xs`, left to right (batch dims broadcast)."""
    xnp = _np()
    out = xs[0]
    for x in xs[1:]:
        out = xnp.matmul(out, x)
    return out


def _eye(n: int, dtype: Any) -> Tracer:
    return _np().eye(n, dtype=dtype)  # type: ignore[no-any-return]


def _diagonal(x: Tracer) -> Tracer:
    return _np().diagonal(x, axis1=-2, axis2=-1)  # type: ignore[no-any-return]


def _row(v: Tracer) -> Tracer:
    """v[..., None, :]."""
    return _np().expand_dims(v, -2)  # type: ignore[no-any-return]


def _solve(a: Tracer, b: Tracer, **kw: Any) -> Tracer:
    return _ll().triangular_solve(a, b, **kw)  # type: ignore[no-any-return]


# ---- the factorizations -------------------------------------------------------------------
Outputs = Any
JvpRule = Callable[..., Any]
"""rule(primals, outputs, tangents, **params) -> tangents of the outputs (same structure)."""


def cholesky_jvp(primals: Sequence[Tracer], l: Tracer, tangents: Sequence[Tracer]) -> Tracer:
    """dL = L phi(L^-1 dA L^-H), phi taking the lower triangle with its diagonal halved
    (arXiv:1602.07527)."""
    xnp = _np()
    (da,) = tangents
    tmp = _solve(l, da, left_side=False, transpose_a=True, conjugate_a=True, lower=True)
    inner = _solve(l, tmp, left_side=True, transpose_a=False, lower=True)
    n = l.shape[-1]
    phi = xnp.divide(xnp.tril(inner), xnp.add(1, _eye(n, l.dtype)))
    return _mm(l, phi)


def lu_jvp(primals: Sequence[Tracer], outputs: Outputs,
           tangents: Sequence[Tracer]) -> tuple[Tracer, Tracer, Tracer]:
    """With P A = L U: dL = L tril(X, -1), dU = triu(X) U for X = L^-1 P dA U^-1 (De Hoog,
    Anderssen and Lukas), packed like the factors; pivots and permutation have none."""
    xnp = _np()
    f, pivots, perm = outputs
    (da,) = tangents
    m, n = f.shape[-2:]
    k = min(m, n)
    batch = f.shape[:-2]
    l = xnp.tril(f[..., :, :k], -1)
    if m > k:
        l = xnp.concatenate([l, xnp.zeros(batch + (m, m - k), f.dtype)], axis=-1)
    l = xnp.add(l, _eye(m, f.dtype))
    u = xnp.triu(f[..., :k, :])
    if n > k:
        u = xnp.concatenate([u, xnp.zeros(batch + (n - k, n), f.dtype)], axis=-2)
        u = xnp.add(u, np.diag(np.arange(n) >= k).astype(f.dtype))
    rows = xnp.broadcast_to(xnp.expand_dims(perm, -1), da.shape)
    la = _solve(l, xnp.take_along_axis(da, rows, axis=-2), left_side=True, lower=True,
                unit_diagonal=True)
    lau = _solve(u, la, left_side=False, lower=False)
    dlu = xnp.add(_mm(l, xnp.tril(lau, -1)), _mm(xnp.triu(lau), u))
    return dlu, xnp.zeros_like(pivots), xnp.zeros_like(perm)


def _thin_qr_jvp(q: Tracer, r: Tracer, dx: Tracer) -> tuple[Tracer, Tracer]:
    """(dQ, dR) of x = Q R, x m x n with m >= n, Q m x n (j-towns.github.io/papers/
    qr-derivative.pdf)."""
    xnp = _np()
    dx_rinv = _solve(r, dx)  # dx R^-1
    qt_dx_rinv = _mm(_h(q), dx_rinv)
    lower = xnp.tril(qt_dx_rinv, -1)
    do = xnp.subtract(lower, _h(lower))  # skew-Hermitian
    if qt_dx_rinv.ptype.is_complex:
        imag = xnp.subtract(qt_dx_rinv, xnp.astype(xnp.real(qt_dx_rinv), qt_dx_rinv.dtype))
        do = xnp.add(do, xnp.multiply(_eye(r.shape[-1], do.dtype), imag))
    dq = xnp.add(_mm(q, xnp.subtract(do, qt_dx_rinv)), dx_rinv)
    dr = _mm(xnp.subtract(qt_dx_rinv, do), r)
    return dq, dr


def qr_jvp(primals: Sequence[Tracer], outputs: Outputs, tangents: Sequence[Tracer],
           full_matrices: bool) -> tuple[Tracer, Tracer]:
    """JAX's: the thin rule, for a wide x on its leading square block (dR2 = dQ^H x2 +
    Q^H dx2), for a tall x with `full_matrices` completed as arXiv:2409.13374 (eqs. 32-33)."""
    xnp = _np()
    (x,), (dx,) = primals, tangents
    q, r = outputs
    m, n = x.shape[-2:]
    if m < n:
        dq, dr1 = _thin_qr_jvp(q, r[..., :, :m], dx[..., :, :m])
        dr2 = xnp.add(_mm(_h(dq), x[..., :, m:]), _mm(_h(q), dx[..., :, m:]))
        return dq, xnp.concatenate([dr1, dr2], axis=-1)
    q_mn = q[..., :, :n] if full_matrices else q
    r_nn = r[..., :n, :n] if full_matrices else r
    dq_mn, dr_nn = _thin_qr_jvp(q_mn, r_nn, dx)
    if not full_matrices or m == n:
        return dq_mn, dr_nn
    from xlc.frontend import linalg

    q_nn, q_pn, q_mp = q_mn[..., :n, :], q_mn[..., n:, :], q[..., :, n:]
    dq_nn, dq_pn = dq_mn[..., :n, :], dq_mn[..., n:, :]
    z_pn_h = linalg.solve(_h(xnp.subtract(q_nn, _eye(n, q.dtype))), _h(q_pn))  # eq 33
    z_pn = _h(z_pn_h)
    dq_mp = xnp.subtract(_mm(dq_mn, z_pn_h),  # eq 32
                         _mm(xnp.add(q_mn, _mm(q_mp, z_pn)),
                             _h(xnp.subtract(dq_pn, _mm(z_pn, dq_nn)))))
    dr = xnp.concatenate([dr_nn, xnp.zeros(dr_nn.shape[:-2] + (m - n, n), dr_nn.dtype)],
                         axis=-2)
    return xnp.concatenate([dq_mn, dq_mp], axis=-1), dr


def eigh_jvp(primals: Sequence[Tracer], outputs: Outputs, tangents: Sequence[Tracer],
             lower: bool) -> tuple[Tracer, Tracer]:
    """Nondegenerate perturbation theory: dw = re diag(V^H dA V), dV = V (F * V^H dA V) with
    F[i, j] = 1 / (w_j - w_i) off the diagonal, 0 on it."""
    xnp = _np()
    v, w_real = outputs
    (da,) = tangents
    n = v.shape[-1]
    w = xnp.astype(w_real, v.dtype)
    eye = _eye(n, v.dtype)
    gaps = xnp.subtract(_row(w), xnp.expand_dims(w, -1))
    f = xnp.subtract(xnp.divide(1, xnp.add(eye, gaps)), eye)
    vdv = _mm(_h(v), da, v)
    return _mm(v, xnp.multiply(f, vdv)), xnp.real(_diagonal(vdv))


def svd_jvp(primals: Sequence[Tracer], outputs: Outputs, tangents: Sequence[Tracer],
            full_matrices: bool, compute_uv: bool) -> Any:
    """JAX's: ds = re diag(U^H dA V); dU and dV from the antisymmetric parts of dS = U^H dA V
    weighted by 1 / (s_j^2 - s_i^2), plus the components outside U's (V's) span for a tall
    (wide) matrix. Without `compute_uv` the singular vectors come from a thin SVD."""
    xnp = _np()
    (a,), (da,) = primals, tangents
    m, n = a.shape[-2:]
    if compute_uv:
        if full_matrices and m != n:
            raise UnsupportedOpError(
                "xlc.lax.linalg.svd: the derivative with full_matrices=True is only defined "
                f"for square matrices, got {a.aval_text} (as in JAX): use full_matrices=False")
        u, s, vt = outputs
    else:
        s = outputs
        u, _, vt = _ll().svd(a, full_matrices=False, compute_uv=True)
    ut, v = _h(u), _h(vt)
    ds_full = _mm(ut, da, v)
    ds = xnp.real(_diagonal(ds_full))
    if not compute_uv:
        return ds
    k = s.shape[-1]
    s_row = _row(s)
    eye_k = _eye(k, s.dtype)
    f = xnp.astype(xnp.subtract(xnp.divide(1, xnp.add(xnp.multiply(
        xnp.add(s_row, _t(s_row)), xnp.subtract(s_row, _t(s_row))), eye_k)), eye_k), a.dtype)
    sc = xnp.astype(s_row, a.dtype)
    dss = xnp.multiply(sc, ds_full)  # dS diag(s)
    sds = xnp.multiply(_t(sc), ds_full)  # diag(s) dS
    s_zeros = xnp.astype(xnp.equal(s, 0), s.dtype)
    s_inv = xnp.subtract(xnp.divide(1, xnp.add(s, s_zeros)), s_zeros)
    s_inv_mat = xnp.astype(xnp.multiply(eye_k, _row(s_inv)), a.dtype)
    du_dv_diag = xnp.multiply(xnp.multiply(0.5, xnp.subtract(ds_full, _h(ds_full))),
                              s_inv_mat)
    du = _mm(u, xnp.add(xnp.multiply(f, xnp.add(dss, _h(dss))), du_dv_diag))
    dv = _mm(v, xnp.multiply(f, xnp.add(sds, _h(sds))))
    if m > n:
        dav = _mm(da, v)
        du = xnp.add(du, xnp.divide(xnp.subtract(dav, _mm(u, ut, dav)), sc))
    if n > m:
        dahu = _mm(_h(da), u)
        dv = xnp.add(dv, xnp.divide(xnp.subtract(dahu, _mm(v, vt, dahu)), sc))
    return du, ds, _h(dv)


JVP_RULES: dict[str, JvpRule] = {
    "cholesky": cholesky_jvp, "lu": lu_jvp, "qr": qr_jvp, "eigh": eigh_jvp, "svd": svd_jvp,
}
"""Factorization name -> its tangent rule (see `JvpRule`)."""


class Factorization(custom_jvp):
    """`impl(*args, **params)` (a LAPACK factorization and the HLO around it) as a custom_jvp
    function differentiated by `JVP_RULES[name]`, which gets the outputs rather than
    factorizing again."""

    def __init__(self, name: str, impl: Callable[..., Any], params: dict[str, Any]) -> None:
        super().__init__(lambda *args: impl(*args, **params))
        self.name, self.params = name, params
        self.__name__ = f"lax.linalg.{name}"
        self.rule = self._recompute

    def _recompute(self, primals: Any, tangents: Any) -> Any:
        """The plain custom_jvp rule: factorize, then the tangent rule."""
        return self.jvp_given_outputs(primals, tangents, self.fun(*primals))

    def jvp_given_outputs(self, primals: Any, tangents: Any, outputs: Any) -> Any:
        """(outputs, their tangents) by the factorization's rule."""
        return outputs, JVP_RULES[self.name](tuple(primals), outputs, tuple(tangents),
                                             **self.params)


# ---- the triangular solve -------------------------------------------------------------------
_FLIP = {"N": "T", "T": "N", "C": "N"}  # op(a)^-T: solve with a^T, a, or conj(a)


def _trsm_rule(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
               ) -> Sequence[Any]:
    """Cotangents of (a, b) for x = op(a)^-1 b (side L) or b op(a)^-1 (side R): b's is the
    solve with op(a)^T, a's (for op(a)) -ct_b x^T or -x^T ct_b, taken back through op and
    masked to the triangle the solve reads (without the diagonal when it is a unit one)."""
    xnp = _np()
    attrs = lapack.decode(inst).attrs
    side, uplo, trans, diag = (str(attrs[k]) for k in ("side", "uplo", "trans_x", "diag"))
    a = ops[0]
    a_flip = xnp.conj(a) if trans == "C" else a
    ct_b = _ll().trsm(a_flip, ct, side, uplo, _FLIP[trans], diag)
    g = xnp.negative(_mm(ct_b, _t(out)) if side == "L" else _mm(_t(out), ct_b))
    if trans != "N":
        g = _t(g)
    if trans == "C":
        g = xnp.conj(g)
    unit = 1 if diag == "U" else 0
    g = xnp.tril(g, -unit) if uplo == "L" else xnp.triu(g, unit)
    return g, ct_b


CUSTOM_CALL_RULES: dict[str, Callable[[HloInstruction, Tracer, list[Tracer], Tracer],
                                      Sequence[Any]]] = {
    f"lapack_{p}trsm_ffi": _trsm_rule for p in "sdcz"}
"""custom-call target -> its transpose rule (`autodiff_rules.Rule`), for the LAPACK calls
differentiated as ops rather than as custom_jvp functions."""
