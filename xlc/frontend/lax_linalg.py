"""`xlc.lax.linalg`: the linear-algebra primitives, lowered as JAX lowers them on the CPU, to
its LAPACK custom-calls (`lapack_<p><op>_ffi`, `xlc/hlo/lapack.py`) plus the HLO around them
(symmetrizing, masking a failed factorization with NaN), so xlc and JAX programs print
comparable HLO and give the same numbers. Leading dims are batch dims throughout.

cholesky, triangular_solve, lu (and lu_pivots_to_permutation), qr, eigh, svd.

Derivatives are JAX's: each factorization (cholesky, lu, qr, eigh, svd) is a custom_jvp
function whose rule (`linalg_derivatives.JVP_RULES`) is written in terms of its outputs, so
`xlc.jvp` uses it and `xlc.grad` transposes it; the triangular solve's LAPACK call has a
transpose rule of its own (`linalg_derivatives.CUSTOM_CALL_RULES`), being linear in b.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xlc.frontend import lax as _lax
from xlc.frontend.tracer import Tracer, as_tracer, emit, trace_error
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType as PT
from xlc.hlo.shape import Shape

__all__ = ["cholesky", "triangular_solve", "lu", "lu_pivots_to_permutation", "qr", "eigh",
           "svd"]

_PREFIX = {PT.F32: "s", PT.F64: "d", PT.C64: "c", PT.C128: "z"}
_REAL = {PT.F32: PT.F32, PT.F64: PT.F64, PT.C64: PT.F32, PT.C128: PT.F64}


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


def _matrix(name: str, x: Any, square: bool = False) -> Tracer:
    t = as_tracer(x)
    if t.ptype not in _PREFIX:
        if t.ptype.is_integer or t.ptype is PT.PRED:
            t = _np().astype(t, PT.F32)
        else:
            raise trace_error(f"{name}: needs f32, f64, c64 or c128 matrices, got "
                              f"{t.aval_text}")
    if t.ndim < 2 or (square and t.shape[-1] != t.shape[-2]):
        what = "square matrices" if square else "matrices"
        raise trace_error(f"{name}: needs {what} (the last two dims), got {t.aval_text}")
    return t


def _lapack(op: str, x: Tracer, operands: Sequence[Tracer], results: Sequence[Shape],
            config: dict[str, str] | None = None) -> list[Tracer]:
    """One LAPACK custom-call (typed FFI, attributes as ASCII codes); its results."""
    target = f"lapack_{_PREFIX[x.ptype]}{op}_ffi"
    extra = []
    if config:
        extra.append(("backend_config", "{" + ", ".join(
            f"{k} = {ord(v)} : ui8" for k, v in sorted(config.items())) + "}"))
    shape = Shape.tuple_of(list(results)) if len(results) > 1 else results[0]
    r = emit(Opcode.CUSTOM_CALL, shape, operands,
             {"custom_call_target": target, "api_version": "API_VERSION_TYPED_FFI"},
             op_name=op, extra=extra)
    if len(results) == 1:
        return [r]
    return [_lax.get_tuple_element(r, i) for i in range(len(results))]


def _ok(info: Tracer, like: Tracer) -> Tracer:
    """info == 0 broadcast to `like`'s shape (batch dims first)."""
    xnp = _np()
    ok = xnp.equal(info, 0)
    return _lax.broadcast_in_dim(ok, like.shape, tuple(range(info.ndim)))


def _nan_unless(ok: Tracer, x: Tracer) -> Tracer:
    xnp = _np()
    return xnp.where(ok, x, xnp.full(x.shape, float("nan"), x.dtype))


def _swap_last(x: Tracer) -> Tracer:
    perm = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return _lax.transpose(x, perm)


def _adjoint(x: Tracer) -> Tracer:
    return _np().conj(_swap_last(x))


def _factorization(name: str, impl: Callable[..., Any], *args: Tracer, **params: Any) -> Any:
    """impl(*args, **params), differentiated by JAX's rule for `name`."""
    from xlc.frontend.linalg_derivatives import Factorization

    return Factorization(name, impl, params)(*args)


def _symmetrize(a: Tracer) -> Tracer:
    xnp = _np()
    return xnp.divide(xnp.add(a, _adjoint(a)), xnp.asarray(2, a.dtype))


def cholesky(x: Any, symmetrize_input: bool = True) -> Tracer:
    """The lower Cholesky factor L (x = L L^H); NaN where x is not positive definite."""
    a = _matrix("cholesky", x, square=True)
    if symmetrize_input:
        a = _symmetrize(a)
    out: Tracer = _factorization("cholesky", _cholesky, a)
    return out


def _cholesky(a: Tracer) -> Tracer:
    batch = a.shape[:-2]
    f, info = _lapack("potrf", a, [a], [a.aval, Shape.array(PT.S32, batch)], {"uplo": "L"})
    return _np().tril(_nan_unless(_ok(info, f), f))


def triangular_solve(a: Any, b: Any, left_side: bool = False, lower: bool = False,
                     transpose_a: bool = False, conjugate_a: bool = False,
                     unit_diagonal: bool = False) -> Tracer:
    """x with op(a) x = b (`left_side`) or x op(a) = b, a triangular (JAX's signature)."""
    ta = _matrix("triangular_solve", a, square=True)
    tb = _matrix("triangular_solve", b)
    if tb.ptype is not ta.ptype:
        tb = _np().astype(tb, ta.dtype)
    if conjugate_a and not transpose_a:
        ta = _np().conj(ta)
    trans = ("C" if conjugate_a else "T") if transpose_a else "N"
    k = tb.shape[-2] if left_side else tb.shape[-1]
    if ta.shape[-1] != k or ta.shape[:-2] != tb.shape[:-2]:
        raise trace_error(f"triangular_solve: a {ta.aval_text} does not fit b {tb.aval_text} "
                          f"(left_side={left_side})")
    return trsm(ta, tb, "L" if left_side else "R", "L" if lower else "U", trans,
                "U" if unit_diagonal else "N")


def trsm(a: Tracer, b: Tracer, side: str, uplo: str, trans: str, diag: str) -> Tracer:
    """LAPACK's triangular solve as one custom-call, its attributes as LAPACK's letters
    (side L/R, uplo L/U, trans N/T/C, diag N/U); a and b of one type and batch shape."""
    return _lapack("trsm", a, [a, b], [b.aval],
                   {"side": side, "uplo": uplo, "trans_x": trans, "diag": diag})[0]


def lu_pivots_to_permutation(pivots: Any, permutation_size: int) -> Tracer:
    """The row permutation (s32[..., size]) that LU's 0-based row swaps `pivots` make."""
    xnp = _np()
    piv = as_tracer(pivots)
    batch = piv.shape[:-1]
    perm = _lax.broadcast_in_dim(_lax.iota(PT.S32, permutation_size),
                                 batch + (permutation_size,), (len(batch),))
    lanes = perm
    for i in range(piv.shape[-1]):
        p = _lax.slice(piv, [0] * len(batch) + [i], list(batch) + [i + 1])
        at_i = _lax.slice(perm, [0] * len(batch) + [i], list(batch) + [i + 1])
        at_p = xnp.take_along_axis(perm, p, axis=-1)
        perm = xnp.where(xnp.equal(lanes, i), at_p, xnp.where(xnp.equal(lanes, p), at_i, perm))
    return perm


def lu(x: Any) -> tuple[Tracer, Tracer, Tracer]:
    """(lu, pivots, permutation) of a pivoted LU factorization (JAX's lax.linalg.lu): unit
    lower L below the diagonal and U on and above it, 0-based row swaps, the permutation."""
    out: tuple[Tracer, Tracer, Tracer] = _factorization("lu", _lu, _matrix("lu", x))
    return out


def _lu(a: Tracer) -> tuple[Tracer, Tracer, Tracer]:
    xnp = _np()
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    k = min(m, n)
    f, ipiv, _info = _lapack("getrf", a, [a], [a.aval, Shape.array(PT.S32, batch + (k,)),
                                                Shape.array(PT.S32, batch)])
    pivots = xnp.subtract(ipiv, xnp.asarray(1, "int32"))
    return f, pivots, lu_pivots_to_permutation(pivots, m)


def qr(x: Any, full_matrices: bool = True) -> tuple[Tracer, Tracer]:
    """(q, r) with x = q r (JAX's lax.linalg.qr): q m x m and r m x n with `full_matrices`,
    else q m x k and r k x n (k = min(m, n))."""
    out: tuple[Tracer, Tracer] = _factorization("qr", _qr, _matrix("qr", x),
                                                full_matrices=full_matrices)
    return out


def _qr(a: Tracer, full_matrices: bool) -> tuple[Tracer, Tracer]:
    xnp = _np()
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    k = min(m, n)
    f, tau = _lapack("geqrf", a, [a], [a.aval, Shape.array(a.ptype, batch + (k,))])
    cols = m if full_matrices else k
    if n < cols:  # Q needs m x cols reflector columns: pad with zeros
        pad = xnp.zeros(batch + (m, cols - n), a.dtype)
        basis = _lax.concatenate([f, pad], a.ndim - 1)
    else:
        basis = _lax.slice(f, [0] * a.ndim, list(batch) + [m, cols])
    op = "orgqr" if a.ptype in (PT.F32, PT.F64) else "ungqr"
    q = _lapack(op, a, [basis, tau], [basis.aval])[0]
    rows = m if full_matrices else k
    r = xnp.triu(_lax.slice(f, [0] * a.ndim, list(batch) + [rows, n])) if rows <= m else \
        xnp.triu(f)
    return q, r


def eigh(x: Any, lower: bool = True, symmetrize_input: bool = True) -> tuple[Tracer, Tracer]:
    """(v, w): eigenvectors (columns) and ascending real eigenvalues of a Hermitian matrix
    (JAX's lax.linalg.eigh); NaN where LAPACK fails."""
    a = _matrix("eigh", x, square=True)
    if symmetrize_input:
        a = _symmetrize(a)
    out: tuple[Tracer, Tracer] = _factorization("eigh", _eigh, a, lower=lower)
    return out


def _eigh(a: Tracer, lower: bool) -> tuple[Tracer, Tracer]:
    n = a.shape[-1]
    batch = a.shape[:-2]
    op = "syevd" if a.ptype in (PT.F32, PT.F64) else "heevd"
    v, w, info = _lapack(op, a, [a], [a.aval, Shape.array(_REAL[a.ptype], batch + (n,)),
                                      Shape.array(PT.S32, batch)],
                         {"mode": "V", "uplo": "L" if lower else "U"})
    return _nan_unless(_ok(info, v), v), _nan_unless(_ok(info, w), w)


def svd(x: Any, full_matrices: bool = True, compute_uv: bool = True) -> Any:
    """(u, s, vh) with x = u diag(s) vh, s descending, or s alone without `compute_uv`
    (u m x m and vh n x n with `full_matrices`, else m x k and k x n); NaN where LAPACK
    fails."""
    return _factorization("svd", _svd, _matrix("svd", x), full_matrices=full_matrices,
                          compute_uv=compute_uv)


def _svd(a: Tracer, full_matrices: bool, compute_uv: bool) -> Any:
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    k = min(m, n)
    mode = "N" if not compute_uv else "A" if full_matrices else "S"
    u_dims = {"A": (m, m), "S": (m, k), "N": (0, 0)}[mode]
    vt_dims = {"A": (n, n), "S": (k, n), "N": (0, 0)}[mode]
    _a, s, u, vt, info = _lapack(
        "gesdd", a, [a], [a.aval, Shape.array(_REAL[a.ptype], batch + (k,)),
                          Shape.array(a.ptype, batch + u_dims),
                          Shape.array(a.ptype, batch + vt_dims), Shape.array(PT.S32, batch)],
        {"mode": mode})
    s = _nan_unless(_ok(info, s), s)
    if not compute_uv:
        return s
    return _nan_unless(_ok(info, u), u), s, _nan_unless(_ok(info, vt), vt)
