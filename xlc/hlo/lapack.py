"""JAX's LAPACK custom-call targets (`lapack_<p><op>_ffi`, p in s/d/c/z), as jaxlib's CPU
lowering emits them for `jnp.linalg` / `jax.scipy.linalg` and `xlc.numpy.linalg`: what each
one takes and returns, and a reference run on scipy's LAPACK that the evaluator and the CPU
backend (through a host call, `backend_cpu/host_call.py`) share.

| op (target stem) | operands | results | backend_config |
|---|---|---|---|
| potrf (Cholesky) | a[..., n, n] | (a, info s32[...]) | uplo |
| getrf (LU) | a[..., m, n] | (a, ipiv s32[..., min(m,n)] 1-based, info s32[...]) | |
| geqrf (QR) | a[..., m, n] | (a, tau[..., min(m,n)]) | |
| orgqr / ungqr (Q of QR) | a[..., m, n], tau[..., k] | a | |
| syevd / heevd (eigh) | a[..., n, n] | (v, w real[..., n], info s32[...]) | mode, uplo |
| gesdd (SVD) | a[..., m, n] | (a, s real[..., k], u, vt, info s32[...]) | mode |
| trsm (triangular solve) | a, b[..., m, n] | x (= b's shape) | side, uplo, trans_x, diag |

Leading dims are batch dims (`num_batch_dims`); the operands are matrices as HLO values (the
column-major layouts JAX declares only say how they are stored). `backend_config` is the typed
FFI's attribute dictionary, `{uplo = 76 : ui8}`: each letter as its ASCII code (uplo L/U,
mode V/N for eigh and A/S/N for SVD, side L/R, trans_x N/T/C, diag N/U). As LAPACK does, the
factorizations leave the entries they do not compute as they were (potrf's other triangle,
getrf/geqrf's a holds the factors) and report failures in `info` (potrf: the order of the
leading minor that is not positive definite), never by raising.

scipy is an optional dependency (`pip install xlc[linalg]`); without it these targets raise
UnsupportedOpError saying so.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType, Shape

_PREFIX = {"s": PrimitiveType.F32, "d": PrimitiveType.F64, "c": PrimitiveType.C64,
           "z": PrimitiveType.C128}
_TARGET = re.compile(r"^lapack_([sdcz])(potrf|getrf|geqrf|orgqr|ungqr|syevd|heevd|gesdd|trsm)"
                     r"_ffi$")
_ATTR = re.compile(r"(\w+)\s*=\s*(-?\d+|true|false)\s*(?::\s*\w+)?")


@dataclass(frozen=True)
class LapackCall:
    """A decoded LAPACK custom-call: the operation, its element type, its attributes (ASCII
    letters as str, integers as int) and its batch dims."""

    target: str
    op: str
    dtype: PrimitiveType
    attrs: dict[str, Any]


def is_lapack_target(target: str) -> bool:
    """Whether `target` names one of the LAPACK custom-calls of the module docstring."""
    m = _TARGET.match(target)
    return m is not None and (m.group(2) not in ("orgqr", "syevd") or m.group(1) in "sd") \
        and (m.group(2) not in ("ungqr", "heevd") or m.group(1) in "cz")


def parse_backend_config(text: str | None) -> dict[str, Any]:
    """The typed FFI attribute dictionary `{uplo = 76 : ui8, ...}` as {name: value}, letters
    (values 65..90) as one-character strings."""
    out: dict[str, Any] = {}
    for name, value in _ATTR.findall(text or ""):
        if value in ("true", "false"):
            out[name] = value == "true"
        else:
            v = int(value)
            out[name] = chr(v) if 65 <= v <= 90 else v
    return out


def decode_target(target: str, config: str | None, where: str = "") -> LapackCall:
    """The LapackCall of `target` with backend_config text `config` (UnsupportedOpError,
    naming `where`, if the target is not one of the module docstring's)."""
    m = _TARGET.match(target)
    if m is None or not is_lapack_target(target):
        raise UnsupportedOpError(f"custom-call {where}: '{target}' is not a LAPACK target "
                                 "xlc knows")
    return LapackCall(target, m.group(2), _PREFIX[m.group(1)], parse_backend_config(config))


def decode(inst: HloInstruction) -> LapackCall:
    """The LapackCall of a LAPACK custom-call instruction (UnsupportedOpError if it is not
    one)."""
    return decode_target(str(inst.attrs.get("custom_call_target", "")),
                         inst.get_extra("backend_config"), f"'{inst.name}'")


def _results(shape: Shape) -> list[Shape]:
    return list(shape.tuple_shapes or ()) if shape.is_tuple else [shape]


def check(inst: HloInstruction) -> str | None:
    """Why `inst` (a LAPACK custom-call) has operands or results LAPACK cannot have, or None."""
    call = decode(inst)
    ops = [o.shape for o in inst.operands]
    res = _results(inst.shape)
    want_ops = {"orgqr": 2, "ungqr": 2, "trsm": 2}.get(call.op, 1)
    if len(ops) != want_ops:
        return f"'{call.target}' takes {want_ops} operand(s), got {len(ops)}"
    a = ops[0]
    if not a.is_array or a.rank < 2 or a.element_type is not call.dtype:
        return f"'{call.target}' needs a {call.dtype.text} matrix (rank >= 2), got {a}"
    batch = a.dims[:-2]
    m, n = a.dims[-2:]
    k = min(m, n)
    real = {PrimitiveType.C64: PrimitiveType.F32,
            PrimitiveType.C128: PrimitiveType.F64}.get(call.dtype, call.dtype)
    s32 = PrimitiveType.S32
    want: list[tuple[PrimitiveType, tuple[int, ...]]]
    if call.op == "potrf":
        want = [(call.dtype, a.dims), (s32, batch)]
    elif call.op == "getrf":
        want = [(call.dtype, a.dims), (s32, batch + (k,)), (s32, batch)]
    elif call.op == "geqrf":
        want = [(call.dtype, a.dims), (call.dtype, batch + (k,))]
    elif call.op in ("orgqr", "ungqr"):
        want = [(call.dtype, a.dims)]
    elif call.op in ("syevd", "heevd"):
        want = [(call.dtype, a.dims), (real, batch + (n,)), (s32, batch)]
    elif call.op == "gesdd":
        if len(res) != 5:
            return f"'{call.target}' returns (a, s, u, vt, info), got {inst.shape}"
        want = [(call.dtype, a.dims), (real, batch + (k,)),
                (call.dtype, res[2].dims), (call.dtype, res[3].dims), (s32, batch)]
    else:  # trsm
        want = [(call.dtype, ops[1].dims)]
    got = [(s.element_type, s.dims) for s in res]
    if got != want:
        text = ", ".join(f"{t.text}[{','.join(map(str, d))}]" for t, d in want)
        return f"'{call.target}' of {a} returns ({text}), not {inst.shape}"
    return None


# ---- the reference run -------------------------------------------------------------------
def _scipy() -> Any:
    try:
        import scipy.linalg.blas as blas
        import scipy.linalg.lapack as lapack
    except ImportError:
        raise UnsupportedOpError(
            "JAX's LAPACK custom-calls (jnp.linalg, xlc.numpy.linalg) need scipy: "
            "pip install 'xlc[linalg]'") from None
    return lapack, blas


def _batched(fn: Callable[..., tuple], args: Sequence[np.ndarray], batch: tuple[int, ...],
             outs: Sequence[tuple[tuple[int, ...], Any]]) -> tuple[np.ndarray, ...]:
    """Run `fn` (one matrix problem -> tuple of arrays) over every batch index."""
    results = [np.zeros(batch + dims, dtype) for dims, dtype in outs]
    for idx in np.ndindex(*batch):
        for r, v in zip(results, fn(*[a[idx] for a in args])):
            r[idx] = v
    return tuple(results)


def run(call: LapackCall, operands: Sequence[np.ndarray],
        results: Sequence[Shape]) -> tuple[np.ndarray, ...]:
    """The results of `call` on `operands` (logical arrays), shaped as `results`."""
    lapack, blas = _scipy()
    p = {PrimitiveType.F32: "s", PrimitiveType.F64: "d", PrimitiveType.C64: "c",
         PrimitiveType.C128: "z"}[call.dtype]
    dt = call.dtype.dtype
    a = np.asarray(operands[0], dt)
    batch = a.shape[:-2]
    at = call.attrs
    outs = [(tuple(s.dims[len(batch):]), _dtype(s)) for s in results]

    def one(fn: Callable[..., tuple]) -> tuple[np.ndarray, ...]:
        return _batched(fn, [np.asarray(x) for x in operands], batch, outs)

    if call.op == "potrf":
        f = getattr(lapack, f"{p}potrf")
        return one(lambda x: (lambda c, info: (c, np.int32(info)))(
            *f(x, lower=at.get("uplo", "L") == "L", clean=0)))
    if call.op == "getrf":
        f = getattr(lapack, f"{p}getrf")
        return one(lambda x: (lambda lu, piv, info: (lu, (piv + 1).astype(np.int32),
                                                     np.int32(info)))(*f(x)))
    if call.op == "geqrf":
        f = getattr(lapack, f"{p}geqrf")
        return one(lambda x: f(x)[:2])
    if call.op in ("orgqr", "ungqr"):
        f = getattr(lapack, f"{p}{call.op}")
        return one(lambda x, tau: f(x, tau)[:1])  # (q, work, info): Q's first n columns
    if call.op in ("syevd", "heevd"):
        f = getattr(lapack, f"{p}{call.op}")
        vectors = at.get("mode", "V") == "V"

        def eig(x: np.ndarray) -> tuple:
            w, v, info = f(x, compute_v=int(vectors), lower=int(at.get("uplo", "L") == "L"))
            return (v if vectors else x), w, np.int32(info)
        return one(eig)
    if call.op == "gesdd":
        f = getattr(lapack, f"{p}gesdd")
        mode = at.get("mode", "A")

        def svd(x: np.ndarray) -> tuple:
            u, s, vt, info = f(x, compute_uv=int(mode != "N"), full_matrices=int(mode == "A"))
            if mode == "N":
                u, vt = np.zeros(outs[2][0], dt), np.zeros(outs[3][0], dt)
            return x, s, u, vt, np.int32(info)
        return one(svd)
    # trsm: op(a) x = b (side L) or x op(a) = b (side R), a triangular
    f = getattr(blas, f"{p}trsm")
    trans = {"N": 0, "T": 1, "C": 2}[at.get("trans_x", "N")]
    return one(lambda x, y: (f(1.0, x, y, side=int(at.get("side", "L") == "R"),
                               lower=int(at.get("uplo", "L") == "L"), trans_a=trans,
                               diag=int(at.get("diag", "N") == "U")),))


def _dtype(shape: Shape) -> np.dtype:
    assert shape.element_type is not None, shape
    return shape.element_type.dtype
