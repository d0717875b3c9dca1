"""Arithmetic rewrites of the algebraic simplifier (see `xlc.passes.simplify` for the list).

Each function takes `(inst, rw)` and returns `(rewrite name, replacement)` or None; see
`xlc.passes.simplify_util` for the contract.
"""
from __future__ import annotations

import numpy as np

from xlc.hlo.attrs import Literal
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType
from xlc.passes.simplify_util import (
    Rewrite,
    Rewriter,
    is_splat_of,
    literal_array,
    replace_with_operand,
    same_shape,
    splat_value,
)


def _et(inst: HloInstruction) -> PrimitiveType:
    assert inst.shape.element_type is not None
    return inst.shape.element_type


def _zero_update(x: HloInstruction) -> bool:
    """x = dynamic-update-slice(zeros, U, i...) used once."""
    return (x.opcode is Opcode.DYNAMIC_UPDATE_SLICE and len(x.users) == 1
            and is_splat_of(x.operands[0], 0))


def rewrite_add(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`add-zero`: A+0 -> A and 0+A -> A. `add-update-slice`: A + dus(0, U, i) ->
    dus(A, ds(A, i) + U, i) (either order; the start indices clamp alike in both), so an
    accumulator that gains one slice per loop iteration (the transpose of a dynamic-slice
    inside a loop: reverse-mode scan) costs the slice, not the whole array; likewise
    dus(0, U, i) + dus(0, V, i) -> dus(0, U + V, i) (the same start indices)."""
    a, b = inst.operands
    if is_splat_of(b, 0):
        return replace_with_operand(inst, a, "add-zero")
    if is_splat_of(a, 0):
        return replace_with_operand(inst, b, "add-zero")
    if (_zero_update(a) and _zero_update(b) and a.operands[2:] == b.operands[2:]
            and a.operands[1].shape.dims == b.operands[1].shape.dims
            and same_shape(a.shape, inst.shape) and same_shape(b.shape, inst.shape)):
        part = rw.add(Opcode.ADD, a.operands[1].shape, [a.operands[1], b.operands[1]])
        return "add-update-slice", rw.add(Opcode.DYNAMIC_UPDATE_SLICE, inst.shape,
                                          [a.operands[0], part, *a.operands[2:]])
    for acc, upd in ((a, b), (b, a)):
        if (upd.opcode is Opcode.DYNAMIC_UPDATE_SLICE and len(upd.users) == 1
                and is_splat_of(upd.operands[0], 0) and acc is not upd
                and same_shape(acc.shape, inst.shape) and same_shape(upd.shape, inst.shape)):
            part, idx = upd.operands[1], list(upd.operands[2:])
            old = rw.add(Opcode.DYNAMIC_SLICE, part.shape, [acc, *idx],
                         {"dynamic_slice_sizes": tuple(part.shape.dims)})
            total = rw.add(Opcode.ADD, part.shape, [old, part])
            return "add-update-slice", rw.add(Opcode.DYNAMIC_UPDATE_SLICE, inst.shape,
                                              [acc, total, *idx])
    return None


def rewrite_subtract(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`sub-zero`: A-0 -> A."""
    a, b = inst.operands
    if is_splat_of(b, 0):
        return replace_with_operand(inst, a, "sub-zero")
    return None


def rewrite_multiply(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`mul-one`: A*1 -> A, 1*A -> A; `int-mul-zero`: A*0 -> 0 for integers (floats keep it:
    NaN*0 and inf*0 are NaN)."""
    a, b = inst.operands
    if is_splat_of(b, 1):
        return replace_with_operand(inst, a, "mul-one")
    if is_splat_of(a, 1):
        return replace_with_operand(inst, b, "mul-one")
    et = _et(inst)
    if et.is_integer or et is PrimitiveType.PRED:
        for zero in (b, a):
            if is_splat_of(zero, 0):
                return (replace_with_operand(inst, zero, "int-mul-zero")
                        or ("int-mul-zero", rw.splat(0, inst.shape)))
    return None


def _reciprocal(arr: np.ndarray) -> np.ndarray | None:
    if arr.size == 0 or np.any(arr == 0) or not np.all(np.isfinite(arr)):
        return None
    with np.errstate(all="ignore"):
        inv = (np.ones((), dtype=arr.dtype) / arr).astype(arr.dtype)
    return inv if np.all(np.isfinite(inv)) else None


def rewrite_divide(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`div-one`: A/1 -> A; `div-const-to-mul`: float A/C -> A*(1/C) for a constant C;
    `div-broadcast-to-mul`: float A/broadcast(C) -> A*broadcast(1/C)."""
    a, b = inst.operands
    if is_splat_of(b, 1):
        return replace_with_operand(inst, a, "div-one")
    if not _et(inst).is_float:
        return None
    arr = literal_array(b)
    if arr is not None:
        inv = _reciprocal(arr)
        if inv is None:
            return None
        c = rw.add(Opcode.CONSTANT, b.shape, (), {"literal": Literal(inv)})
        return "div-const-to-mul", rw.add(Opcode.MULTIPLY, inst.shape, (a, c))
    if b.opcode is Opcode.BROADCAST:
        src = b.operands[0]
        arr = literal_array(src)
        inv = _reciprocal(arr) if arr is not None else None
        if inv is None:
            return None
        c = rw.add(Opcode.CONSTANT, src.shape, (), {"literal": Literal(inv)})
        bc = rw.add(Opcode.BROADCAST, b.shape, (c,), b.attrs)
        return "div-broadcast-to-mul", rw.add(Opcode.MULTIPLY, inst.shape, (a, bc))
    return None


def rewrite_negate(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`negate-negate`: negate(negate(A)) -> A."""
    (a,) = inst.operands
    if a.opcode is Opcode.NEGATE:
        return replace_with_operand(inst, a.operands[0], "negate-negate")
    return None


def rewrite_not(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`not-not`: not(not(A)) -> A."""
    (a,) = inst.operands
    if a.opcode is Opcode.NOT:
        return replace_with_operand(inst, a.operands[0], "not-not")
    return None


def rewrite_max_min(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`max-same` / `min-same`: max(A, A) -> A, min(A, A) -> A."""
    a, b = inst.operands
    if a is b:
        name = "max-same" if inst.opcode is Opcode.MAXIMUM else "min-same"
        return replace_with_operand(inst, a, name)
    return None


def rewrite_select(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`select-same`: select(P, A, A) -> A; `select-const-pred`: select(true, A, B) -> A and
    select(false, A, B) -> B (constant or broadcast-of-constant predicate)."""
    p, a, b = inst.operands
    if a is b:
        return replace_with_operand(inst, a, "select-same")
    v = splat_value(p)
    if v is not None:
        return replace_with_operand(inst, a if bool(v) else b, "select-const-pred")
    return None


def rewrite_exp(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`exp-zero`: exp(0) -> 1."""
    (a,) = inst.operands
    if is_splat_of(a, 0):
        return "exp-zero", rw.splat(1, inst.shape)
    return None


def rewrite_log(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`log-exp`: log(exp(A)) -> A."""
    (a,) = inst.operands
    if a.opcode is Opcode.EXP:
        return replace_with_operand(inst, a.operands[0], "log-exp")
    return None


_COMPARE_SAME = {"EQ": True, "LE": True, "GE": True, "NE": False, "LT": False, "GT": False}


def rewrite_compare(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`compare-same`: compare(A, A) -> true for EQ/LE/GE, false for NE/LT/GT when A is an
    integer or pred (floats keep it: NaN != NaN)."""
    a, b = inst.operands
    et = a.shape.element_type
    if a is not b or et is None or not (et.is_integer or et is PrimitiveType.PRED):
        return None
    direction = str(inst.attrs.get("direction", ""))
    if direction not in _COMPARE_SAME:
        return None
    return "compare-same", rw.splat(_COMPARE_SAME[direction], inst.shape)


def _lossless(src: PrimitiveType, dst: PrimitiveType) -> bool:
    """Every value of `src` is exactly representable in `dst`."""
    if src == dst or src is PrimitiveType.PRED:
        return dst is not PrimitiveType.TOKEN
    if src.is_float and dst.is_float:
        widen = {PrimitiveType.F16: (PrimitiveType.F32, PrimitiveType.F64),
                 PrimitiveType.BF16: (PrimitiveType.F32, PrimitiveType.F64),
                 PrimitiveType.F32: (PrimitiveType.F64,)}
        return dst in widen.get(src, ())
    if src.is_integer and dst.is_integer:
        if src.is_signed_int and dst.is_unsigned_int:
            return False
        if src.is_unsigned_int and dst.is_signed_int:
            return dst.bit_width > src.bit_width
        return dst.bit_width >= src.bit_width
    if src.is_integer and dst.is_float:
        mantissa = {PrimitiveType.F16: 11, PrimitiveType.BF16: 8, PrimitiveType.F32: 24,
                    PrimitiveType.F64: 53}[dst]
        return src.bit_width - (1 if src.is_signed_int else 0) <= mantissa
    return False


def rewrite_convert(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`convert-same-type`: convert(A) to A's own type -> A; `convert-convert`:
    convert(convert(A, T2), T3) -> convert(A, T3) (or A when T3 is A's type) when A -> T2 is
    lossless."""
    (a,) = inst.operands
    if a.shape.element_type == inst.shape.element_type:
        return replace_with_operand(inst, a, "convert-same-type")
    if a.opcode is Opcode.CONVERT:
        src = a.operands[0]
        assert src.shape.element_type is not None and a.shape.element_type is not None
        if not _lossless(src.shape.element_type, a.shape.element_type):
            return None
        if src.shape.element_type == inst.shape.element_type:
            return replace_with_operand(inst, src, "convert-convert")
        return "convert-convert", rw.add(Opcode.CONVERT, inst.shape, (src,))
    return None


def rewrite_get_tuple_element(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`gte-tuple`: get-tuple-element(tuple(A0, ..., An), i) -> Ai."""
    (t,) = inst.operands
    if t.opcode is Opcode.TUPLE:
        return replace_with_operand(inst, t.operands[inst.tuple_index], "gte-tuple")
    return None


ARITH_REWRITES = {
    Opcode.ADD: rewrite_add,
    Opcode.SUBTRACT: rewrite_subtract,
    Opcode.MULTIPLY: rewrite_multiply,
    Opcode.DIVIDE: rewrite_divide,
    Opcode.NEGATE: rewrite_negate,
    Opcode.NOT: rewrite_not,
    Opcode.MAXIMUM: rewrite_max_min,
    Opcode.MINIMUM: rewrite_max_min,
    Opcode.SELECT: rewrite_select,
    Opcode.EXP: rewrite_exp,
    Opcode.LOG: rewrite_log,
    Opcode.COMPARE: rewrite_compare,
    Opcode.CONVERT: rewrite_convert,
    Opcode.GET_TUPLE_ELEMENT: rewrite_get_tuple_element,
}
