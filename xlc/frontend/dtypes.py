"""dtype promotion for the tracing frontend: JAX's type-promotion lattice with weak types.

Rules (requires nothing; guarantees a deterministic, symmetric and associative `result_type`):
- Python scalars are *weakly typed*: `x_f32 * 2` stays f32, `x_i8 + 1` stays s8, `x_i32 * 2.0`
  becomes f32 (a weak float). A value's kind (bool < int < float < complex) can only go up.
- Strong types promote by the lattice  b1 -> {u8, i8};  u8 -> {u16, i16};  u16 -> {u32, i32};
  u32 -> {u64, i64};  i8 -> i16 -> i32 -> i64;  {u64, i64} -> f*;  f* -> {bf16, f16};
  {bf16, f16} -> f32 -> f64;  f32 -> c64 -> c128;  f64 -> c128  (least upper bound), so
  `bf16 + f16 = f32`, `u8 + i8 = s16`, `u64 + s64 = f32` (via the weak float node).
- 64-bit types are kept as given (unlike JAX's x64-disabled default, xlc never canonicalizes an
  explicit f64/s64/u64 input down to 32 bits). Values *created* without an explicit dtype
  (Python scalars, `arange(5)`, `zeros(3)`) default to s32 / f32 / c64, as in JAX.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from xlc.errors import ArgumentError
from xlc.frontend.pytree import FLOAT0
from xlc.hlo.shape import PrimitiveType as PT

# JAX's jax.dtypes.float0 (xlc.dtypes.float0): the tangent type of integer and boolean values
float0 = FLOAT0

# Weak (kind-only) lattice nodes.
WEAK_INT = "i*"
WEAK_FLOAT = "f*"
WEAK_COMPLEX = "c*"
Node = PT | str

_EDGES: dict[Node, tuple[Node, ...]] = {
    PT.PRED: (WEAK_INT,),
    WEAK_INT: (PT.U8, PT.S8),
    PT.U8: (PT.U16, PT.S16),
    PT.U16: (PT.U32, PT.S32),
    PT.U32: (PT.U64, PT.S64),
    PT.U64: (WEAK_FLOAT,),
    PT.S8: (PT.S16,),
    PT.S16: (PT.S32,),
    PT.S32: (PT.S64,),
    PT.S64: (WEAK_FLOAT,),
    WEAK_FLOAT: (PT.BF16, PT.F16, WEAK_COMPLEX),
    PT.BF16: (PT.F32,),
    PT.F16: (PT.F32,),
    PT.F32: (PT.F64, PT.C64),
    PT.F64: (PT.C128,),
    WEAK_COMPLEX: (PT.C64,),
    PT.C64: (PT.C128,),
    PT.C128: (),
}

DEFAULT_INT = PT.S32
DEFAULT_FLOAT = PT.F32
DEFAULT_COMPLEX = PT.C64
_WEAK_DEFAULT = {WEAK_INT: DEFAULT_INT, WEAK_FLOAT: DEFAULT_FLOAT, WEAK_COMPLEX: DEFAULT_COMPLEX}


@functools.cache
def _upper_bounds(node: Node) -> frozenset[Node]:
    out = {node}
    for nxt in _EDGES[node]:
        out |= _upper_bounds(nxt)
    return frozenset(out)


def _lub(a: Node, b: Node) -> Node:
    common = _upper_bounds(a) & _upper_bounds(b)
    for cand in common:  # the least element: every other common bound is above it
        if common <= _upper_bounds(cand):
            return cand
    raise AssertionError(f"no least upper bound for {a} and {b}")  # lattice is complete


def _weak_node(pt: PT) -> Node:
    if pt is PT.PRED:
        return PT.PRED
    if pt.is_integer:
        return WEAK_INT
    if pt.is_float:
        return WEAK_FLOAT
    return WEAK_COMPLEX


def result_type(*types: tuple[PT, bool]) -> tuple[PT, bool]:
    """Promote (element type, is_weak) pairs; returns (element type, is_weak).

    A weak input of type t stands for "some type of t's kind". As in JAX, the result is weak
    when the least upper bound is a weak node (i*, f*, c*): then it is the widest weak input
    of that kind if every input is weak, else the default type of the kind (s32/f32/c64)."""
    assert types, "result_type needs at least one type"
    node: Node | None = None
    for pt, weak in types:
        n = _weak_node(pt) if weak else pt
        node = n if node is None else _lub(node, n)
    assert node is not None
    if isinstance(node, PT):
        return node, False
    if all(w for _, w in types):
        # All weak: keep the widest concrete type among inputs of the result's kind.
        same_kind = [pt for pt, _ in types if _weak_node(pt) == node]
        if same_kind:
            return max(same_kind, key=lambda p: p.byte_size), True
    return _WEAK_DEFAULT[node], True


def python_scalar_type(value: Any) -> PT:
    """The default element type of a Python scalar (bool -> pred, int -> s32, float -> f32,
    complex -> c64)."""
    if isinstance(value, (bool, np.bool_)):
        return PT.PRED
    if isinstance(value, int):
        return DEFAULT_INT
    if isinstance(value, float):
        return DEFAULT_FLOAT
    if isinstance(value, complex):
        return DEFAULT_COMPLEX
    raise TypeError(f"not a Python scalar: {type(value).__name__}")


def is_python_scalar(value: Any) -> bool:
    """True for bool/int/float/complex (weakly typed) values, not numpy scalars."""
    return isinstance(value, (bool, int, float, complex)) and not isinstance(value, np.generic)


def to_ptype(dtype: Any) -> PT:
    """numpy dtype / PrimitiveType / type name / Python type -> PrimitiveType.

    Python `int`/`float`/`complex`/`bool` map to the defaults (s32/f32/c64/pred), as in JAX.
    Anything else raises TraceError (inside a trace, at the user's line) or ArgumentError."""
    if isinstance(dtype, PT):
        return dtype
    if dtype is int:
        return DEFAULT_INT
    if dtype is float:
        return DEFAULT_FLOAT
    if dtype is complex:
        return DEFAULT_COMPLEX
    if dtype is bool:
        return PT.PRED
    if isinstance(dtype, str):
        try:
            return PT.from_text(dtype)
        except KeyError:
            pass
    try:
        return PT.from_dtype(dtype)
    except TypeError:
        pass
    message = (f"unsupported dtype {dtype!r}: expected a numpy dtype or type name of "
               "bool, (u)int8-64, float16/32/64, bfloat16 or complex64/128 (or f32, s8, ...)")
    from xlc.frontend.tracer import current_builder, trace_error

    if current_builder() is not None:
        raise trace_error(message)
    raise ArgumentError(message)


def canonical_float(pt: PT) -> PT:
    """The float type an op like `exp` or `/` computes in for inputs of type `pt`
    (ints and bools -> f32; floats and complex unchanged)."""
    if pt.is_float or pt.is_complex:
        return pt
    return DEFAULT_FLOAT
