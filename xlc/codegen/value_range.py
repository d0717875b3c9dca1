"""Bounds on the values of a floating-point HLO expression, for cheaper math code.

`float_range(inst)` returns (lo, hi) such that every element of `inst` that is not NaN lies in
[lo, hi] (lo may be -inf, hi inf: unknown). It looks through a few levels of elementwise and
data-movement instructions (constants, iota, converts from integers, broadcasts, reshapes, abs,
negate, add, subtract, multiply, exp, sqrt, maximum, minimum, select, ...) and knows nothing
about parameters.

The bounds are computed in float64 on the exact (unrounded) operations; the real values are
rounded to the instruction's type, and rounding to nearest is monotonic, so a bound that
clears a threshold with a relative margin (see `at_least`) also holds for the rounded values.

Used by the elemental emitter: `log` of a value known to be a positive normal number (such as
`log(x*x + 1)`) skips the denormal rescaling and the zero and negative cases.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType as PT

Range = tuple[float, float]
UNKNOWN: Range = (-math.inf, math.inf)
MAX_DEPTH = 8
"""How many instructions deep the analysis looks (fusions are small; this bounds the cost)."""

# Opcodes whose elements are all elements of their first operand (or of the listed operands).
_PASS_THROUGH = {Opcode.BROADCAST, Opcode.RESHAPE, Opcode.TRANSPOSE, Opcode.COPY, Opcode.SLICE,
                 Opcode.REVERSE, Opcode.DYNAMIC_SLICE, Opcode.GATHER}
_UNION_ALL = {Opcode.CONCATENATE, Opcode.PAD}
_EXACT_WIDENING = {(a, c) for a in (PT.F16, PT.BF16, PT.F32, PT.F64)
                   for c in (PT.F16, PT.BF16, PT.F32, PT.F64)
                   if a == c or (a in (PT.F16, PT.BF16) and c in (PT.F32, PT.F64))
                   or (a, c) == (PT.F32, PT.F64)}


def _nan_safe(lo: float, hi: float) -> Range:
    """(lo, hi) with a NaN endpoint (inf - inf, 0 * inf) widened to unknown."""
    return (-math.inf if math.isnan(lo) else lo, math.inf if math.isnan(hi) else hi)


def _union(ranges: list[Range]) -> Range:
    return min(r[0] for r in ranges), max(r[1] for r in ranges)


def _constant(inst: HloInstruction) -> Range:
    lit = inst.attrs.get("literal")
    if lit is None or lit.elided or lit.array is None:
        return UNKNOWN
    arr = np.asarray(lit.array, dtype=np.float64)
    arr = arr[~np.isnan(arr)]
    return (float(arr.min()), float(arr.max())) if arr.size else UNKNOWN


def _mul(a: Range, c: Range) -> Range:
    with np.errstate(invalid="ignore"):
        corners = [x * y for x in a for y in c]
    if any(math.isnan(v) for v in corners):  # 0 * inf: no bound
        return UNKNOWN
    return min(corners), max(corners)


def _abs(a: Range) -> Range:
    lo, hi = a
    if lo >= 0:
        return a
    if hi <= 0:
        return -hi, -lo
    return 0.0, max(-lo, hi)


def _monotone(fn: Callable[[float], float]) -> Callable[[Range], Range]:
    def apply(a: Range) -> Range:
        return fn(a[0]), fn(a[1])
    return apply


def _exp(v: float) -> float:
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


def _sqrt(v: float) -> float:
    return math.sqrt(max(v, 0.0))


_UNARY: dict[Opcode, Callable[[Range], Range]] = {
    Opcode.NEGATE: lambda a: (-a[1], -a[0]),
    Opcode.ABS: _abs,
    Opcode.EXP: _monotone(_exp),
    Opcode.SQRT: _monotone(_sqrt),
    Opcode.TANH: _monotone(math.tanh),
    Opcode.LOGISTIC: lambda a: (0.0, 1.0),
}


def float_range(inst: HloInstruction, depth: int = MAX_DEPTH) -> Range:
    """(lo, hi) bounding every non-NaN element of the float-typed `inst` (see the module
    docstring); UNKNOWN when nothing is known within `depth` instructions."""
    et = inst.shape.element_type
    if depth <= 0 or et is None or not et.is_float:
        return UNKNOWN
    op = inst.opcode
    sub = depth - 1
    if op is Opcode.CONSTANT:
        return _constant(inst)
    if op in _PASS_THROUGH:
        return float_range(inst.operands[0], sub)
    if op in _UNION_ALL:
        return _union([float_range(o, sub) for o in inst.operands])
    if op is Opcode.IOTA:
        return 0.0, float(max(inst.shape.dims[int(inst.attrs["iota_dimension"])] - 1, 0))
    if op is Opcode.CONVERT:
        # an exact widening keeps every value; anything else may round past a bound
        src = inst.operands[0].shape.element_type
        if (src, et) in _EXACT_WIDENING:
            return float_range(inst.operands[0], sub)
        if src is not None and (src.is_signed_int or src.is_unsigned_int):
            info = np.iinfo(src.dtype)  # rounding to nearest is monotonic
            return float(info.min), float(info.max)
        return UNKNOWN
    if op in _UNARY:
        return _nan_safe(*_UNARY[op](float_range(inst.operands[0], sub)))
    if op is Opcode.SELECT:
        return _union([float_range(o, sub) for o in inst.operands[1:]])
    if op in (Opcode.ADD, Opcode.SUBTRACT, Opcode.MULTIPLY, Opcode.MAXIMUM, Opcode.MINIMUM):
        a, c = (float_range(o, sub) for o in inst.operands)
        if op is Opcode.ADD:
            return _nan_safe(a[0] + c[0], a[1] + c[1])
        if op is Opcode.SUBTRACT:
            return _nan_safe(a[0] - c[1], a[1] - c[0])
        if op is Opcode.MAXIMUM:
            return max(a[0], c[0]), max(a[1], c[1])
        if op is Opcode.MINIMUM:
            return min(a[0], c[0]), min(a[1], c[1])
        if inst.operands[0] is inst.operands[1]:  # a square is never negative
            lo, hi = _mul(a, a)
            return max(lo, 0.0), hi
        return _mul(a, c)
    return UNKNOWN


def at_least(inst: HloInstruction, threshold: float) -> bool:
    """Whether every non-NaN element of `inst` is >= threshold (> 0), with a factor-2 margin
    for the rounding of the intermediate results."""
    return float_range(inst)[0] >= 2.0 * threshold
