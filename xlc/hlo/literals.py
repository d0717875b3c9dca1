"""Constant literals in HLO text: parsing (`{ {1, 2}, {3, 4} }`, scalars, tuples, `{...}`) and
printing exactly as XLA does (`RoundTripFpToString`: f32 with %.6g, %.9g when that does not
round-trip; f64 %.15g / %.17g; f16 %.3g / %.5g; bf16 %.2g / %.4g).
"""
from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np

from xlc.hlo.attrs import Literal
from xlc.hlo.lexer import Cursor
from xlc.hlo.shape import PrimitiveType, Shape

_COMMENT = re.compile(r"/\*.*?\*/", re.S)
# A complex element is one token: `(re, im)` (each part may be a `nan(0x..)` payload).
_PAREN = r"\((?:[^()]|\([^()]*\))*\)"
_LIT_TOKEN = re.compile(r"[{}]|" + _PAREN + r"|[^\s{},]+")
_ELIDED = re.compile(r"\{\s*\.\.\.\s*\}")
_SCALAR = re.compile(r"-?nan\(0x[0-9a-fA-F]+\)|" + _PAREN + r"|[^\s,(){}]+")
_COMPLEX = re.compile(r"\(\s*([^\s,]+)\s*,\s*([^\s,]+)\s*\)$")
_NAN_PAYLOAD = re.compile(r"(-?)nan\(0x([0-9a-fA-F]+)\)$")


# ---- parsing ------------------------------------------------------------------------------
def parse_literal(cur: Cursor, shape: Shape) -> Literal:
    """Parse the literal of a `constant(...)` whose shape is `shape`, from the cursor (which
    stands just after `constant(`). Requires: a non-token shape. Guarantees: the returned
    Literal's array has exactly `shape.dims` and the element type's dtype, or is elided."""
    if shape.is_tuple:
        assert shape.tuple_shapes is not None
        cur.expect("(")
        elements = []
        for i, sub in enumerate(shape.tuple_shapes):
            if i:
                cur.expect(",")
            elements.append(parse_literal(cur, sub))
        cur.expect(")")
        return Literal(elements=tuple(elements))
    cur.skip()
    start = cur.pos
    if cur.peek() == "{":
        body = cur.balanced("{", "}")
        if _ELIDED.fullmatch(body):
            return Literal(elided=True)
        return Literal(_parse_array(cur, body, start, shape))
    m = cur.match(_SCALAR)
    if m is None:
        cur.error(f"expected literal but found {cur.describe()}")
    if shape.rank != 0:
        cur.error(f"constant has 1 elements but shape {shape.to_text(False)} needs "
                  f"{shape.num_elements}", start)
    values = _convert(cur, [(m.group(0), start)], shape)
    return Literal(values.reshape(()))


def _parse_array(cur: Cursor, body: str, start: int, shape: Shape) -> np.ndarray:
    """Check the brace structure of `body` against `shape` and convert its elements."""
    clean = _COMMENT.sub(lambda m: " " * len(m.group(0)), body)
    rank = shape.rank
    dims = shape.dims
    stack: list[int] = []
    values: list[tuple[str, int]] = []
    structure_ok = rank > 0
    for m in _LIT_TOKEN.finditer(clean):
        tok = m.group(0)
        if tok == "{":
            if stack:
                stack[-1] += 1
            stack.append(0)
            if len(stack) > rank:
                structure_ok = False
        elif tok == "}":
            count = stack.pop()
            depth = len(stack)
            if depth < rank and count != dims[depth]:
                structure_ok = False
        else:
            values.append((tok, start + m.start()))
            if stack:
                stack[-1] += 1
            if len(stack) != rank:
                structure_ok = False
    need = shape.num_elements
    if len(values) != need:
        cur.error(f"constant has {len(values)} elements but shape {shape.to_text(False)} needs "
                  f"{need}", start)
    if not structure_ok:
        cur.error(f"constant literal nesting does not match shape {shape.to_text(False)}", start)
    return _convert(cur, values, shape).reshape(dims)


def _convert(cur: Cursor, values: list[tuple[str, int]], shape: Shape) -> np.ndarray:
    """Convert literal element tokens to a 1-D numpy array of the shape's element type."""
    et = shape.element_type
    assert et is not None
    if et is PrimitiveType.TOKEN:
        cur.error("token constants are not supported", values[0][1] if values else None)
    try:
        if et is PrimitiveType.PRED:
            return np.array([_pred(t) for t, _ in values], dtype=np.bool_)
        if et.is_integer:
            info = ml_dtypes.iinfo(et.dtype)  # also s4/u4
            ints = [int(t) for t, _ in values]
            for (t, pos), v in zip(values, ints):
                if v < info.min or v > info.max:
                    cur.error(f"value {t} is out of range for {et.text}", pos)
            return np.array(ints, dtype=et.dtype)
        if et.is_float:
            return _floats(values, et)
        if et.is_complex:
            return _complexes(values, et)
    except ValueError:
        pass
    else:
        cur.error(f"constants of type {et.text} are not supported",
                  values[0][1] if values else None)
    for tok, pos in values:  # find the offending element for the message
        try:
            if et is PrimitiveType.PRED:
                _pred(tok)
            elif et.is_integer:
                int(tok)
            elif et.is_complex:
                _complex(tok)
            else:
                _float(tok)
        except ValueError:
            cur.error(f"bad {et.text} literal value '{tok}'", pos)
    raise AssertionError("unreachable")  # pragma: no cover


def _pred(tok: str) -> bool:
    if tok in ("true", "1"):
        return True
    if tok in ("false", "0"):
        return False
    raise ValueError(tok)


def _float(tok: str) -> float:
    m = _NAN_PAYLOAD.match(tok)
    if m:
        return -math.nan if m.group(1) else math.nan
    if tok[-1:].isalpha() and tok.lower().lstrip("+-") not in ("inf", "nan", "infinity"):
        raise ValueError(tok)
    return float(tok)


def _complex(tok: str) -> tuple[float, float]:
    """`(re, im)` as XLA prints a c64/c128 element; a bare real number has imaginary part 0."""
    m = _COMPLEX.match(tok)
    if m is None:
        if tok.startswith("("):
            raise ValueError(tok)
        return _float(tok), 0.0
    return _float(m.group(1)), _float(m.group(2))


def _complexes(values: list[tuple[str, int]], et: PrimitiveType) -> np.ndarray:
    parts = np.array([_complex(t) for t, _ in values], dtype=np.float64).reshape(-1, 2)
    part = np.float32 if et is PrimitiveType.C64 else np.float64
    with np.errstate(over="ignore"):
        re_im = parts.astype(part)
    out = np.empty(len(values), dtype=et.dtype)
    out.real = re_im[:, 0]
    out.imag = re_im[:, 1]
    return out


def _floats(values: list[tuple[str, int]], et: PrimitiveType) -> np.ndarray:
    arr = np.array([_float(t) for t, _ in values], dtype=np.float64)
    with np.errstate(over="ignore"):
        out = arr.astype(et.dtype)
    # float('-nan') keeps the sign bit in the double; astype keeps it too.
    return out


# ---- printing -----------------------------------------------------------------------------
def format_scalar(value: object, et: PrimitiveType) -> str:
    """One element as XLA prints it (`1`, `-0.5`, `1e-05`, `-inf`, `nan`, `true`)."""
    if et is PrimitiveType.PRED:
        return "true" if bool(value) else "false"
    if et.is_integer:
        return str(int(value))  # type: ignore[call-overload]
    if et.is_complex:
        c = complex(value)  # type: ignore[call-overload]
        real = PrimitiveType.F32 if et is PrimitiveType.C64 else PrimitiveType.F64
        return f"({format_scalar(c.real, real)}, {format_scalar(c.imag, real)})"
    return _format_float(value, et)


def _format_float(value: object, et: PrimitiveType) -> str:
    x = float(value)  # type: ignore[arg-type]
    if math.isnan(x):
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    if math.isinf(x):
        return "-inf" if x < 0 else "inf"
    if et is PrimitiveType.F32:
        s = f"{x:.6g}"
        with np.errstate(over="ignore"):
            return s if np.float32(float(s)) == np.float32(x) else f"{x:.9g}"
    if et is PrimitiveType.F64:
        s = f"{x:.15g}"
        return s if float(s) == x else f"{x:.17g}"
    short, full = _FLOAT_DIGITS[et]
    dt = et.dtype
    with np.errstate(over="ignore"):
        s = f"{x:.{short}g}"
        same = np.array(float(s)).astype(dt) == np.array(x).astype(dt)
        return s if same else f"{x:.{full}g}"



def literal_to_text(lit: Literal, shape: Shape) -> str:
    """The text of a literal as it appears inside `constant(...)`: `{...}` when elided, tuples
    `( a, b )`, scalars bare, rank 1 `{a, b}`, rank 2 `{ { a, b }, { c, d } }`, rank >= 3 with
    `/*iK=N*/` comments like XLA's one-line literal printer."""
    if lit.elided:
        return "{...}"
    if lit.elements is not None:
        subs = shape.tuple_shapes or tuple(_shape_of(e) for e in lit.elements)
        return "( " + ", ".join(literal_to_text(e, s) for e, s in zip(lit.elements, subs)) + " )"
    assert lit.array is not None
    arr = lit.array
    et = shape.element_type or PrimitiveType.from_dtype(arr.dtype)
    if arr.ndim == 0:
        return format_scalar(arr.item() if et.is_integer else arr[()], et)
    flat = _format_elements(arr, et)
    dims: tuple[int, ...] = tuple(arr.shape)
    if arr.ndim == 1:
        return "{" + ", ".join(flat) + "}"
    if arr.ndim == 2:
        n = dims[1]
        rows = ["{ " + ", ".join(flat[i * n:(i + 1) * n]) + " }" for i in range(dims[0])]
        return "{ " + ", ".join(rows) + " }" if rows else "{  }"
    return _nested(flat, dims, 0, 0)


def _shape_of(lit: Literal) -> Shape:
    if lit.elements is not None:
        return Shape.tuple_of([_shape_of(e) for e in lit.elements])
    if lit.array is None:
        return Shape.array(PrimitiveType.F32)
    return Shape.array(PrimitiveType.from_dtype(lit.array.dtype), lit.array.shape)


# (digits10, max_digits10) per float type: print with the first, fall back to the second when
# the short form does not round-trip (XLA's RoundTripFpToString).
_FLOAT_DIGITS = {PrimitiveType.F32: (6, 9), PrimitiveType.F64: (15, 17),
                 PrimitiveType.F16: (3, 5), PrimitiveType.BF16: (2, 4)}


def _format_elements(arr: np.ndarray, et: PrimitiveType) -> list[str]:
    """Every element of `arr` (row-major) as text; vectorised version of `format_scalar`."""
    if et is PrimitiveType.PRED:
        return ["true" if v else "false" for v in arr.ravel().tolist()]
    if et.is_integer:
        return [str(v) for v in arr.ravel().tolist()]
    if et not in _FLOAT_DIGITS:
        return [format_scalar(v, et) for v in arr.ravel()]
    short, full = _FLOAT_DIGITS[et]
    with np.errstate(over="ignore", invalid="ignore"):
        typed = arr.astype(et.dtype, copy=False).ravel()
        values = typed.astype(np.float64).tolist()
        out = [f"{v:.{short}g}" for v in values]
        back = np.array([float(t) for t in out], dtype=np.float64).astype(et.dtype)
        bad = np.flatnonzero(back != typed)
    for i in bad.tolist():
        v = values[i]
        if math.isnan(v):
            out[i] = "-nan" if math.copysign(1.0, v) < 0 else "nan"
        else:
            out[i] = f"{v:.{full}g}"
    return out


def _nested(flat: list[str], dims: tuple[int, ...], level: int, offset: int,
            index: int = 0) -> str:
    """Rank >= 3 literal text: `{ { /*i0=0*/ {a, b}, {c, d} }, ... }`; `index` is this group's
    position along dim `level - 1`."""
    if level == len(dims) - 1:
        return "{" + ", ".join(flat[offset:offset + dims[-1]]) + "}"
    stride = 1
    for d in dims[level + 1:]:
        stride *= d
    children = [_nested(flat, dims, level + 1, offset + i * stride, i) for i in range(dims[level])]
    body = ", ".join(children)
    if level == 0:
        return "{ " + body + " }"
    return f"{{ /*i{level - 1}={index}*/ " + body + (" }" if body else "}")
