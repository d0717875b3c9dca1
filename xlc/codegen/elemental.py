"""The elemental emitter: one scalar IR generator per elementwise opcode (XLA semantics).

`emit_elemental(builder, inst, operand_values)` computes one element of `inst` from one element
of each operand. Values use `llvm_utils.value_type` (pred i1, bf16 as raw i16 bits, complex as
{re, im} structs). Generators work unchanged on vectors of those values (except complex), so a
loop of them vectorises. Shared by the CPU and GPU backends.

Semantics (XLA's, which the evaluator follows):
* integer x / 0 = -1 (all ones), x % 0 = x; INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0;
* shifts by >= bit width (amount read as unsigned): shl/lshr -> 0, ashr -> sign fill;
* float maximum/minimum propagate NaN; clamp(lo, x, hi) = min(max(x, lo), hi);
* convert float -> int saturates, NaN -> 0; x -> pred is x != 0; f64 -> f16/bf16 rounds once
  (round-to-odd through f32); int -> f16/bf16 through f64;
* integer power by squaring (wrapping); a negative exponent gives 1 for base 1, else 0;
* compare directions EQ/NE/LT/LE/GT/GE with types FLOAT (NaN: only NE true), TOTALORDER
  (-NaN < -inf < ... < -0 < +0 < ... < inf < NaN), SIGNED, UNSIGNED;
* f16/bf16 arithmetic is done in f32 and rounded back (exact for + - * / sqrt).
"""
from __future__ import annotations

import math
from collections.abc import Callable

from llvmlite import ir

from xlc.codegen import llvm_utils as lu
from xlc.codegen import math as xmath
from xlc.codegen.fmod import fmod
from xlc.codegen.scalar_types import cmake as _cmake
from xlc.codegen.scalar_types import compute_type, from_compute, to_compute
from xlc.codegen.scalar_types import cparts as _cparts
from xlc.codegen.value_range import at_least, float_range
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType as PT

Generator = Callable[[ir.IRBuilder, HloInstruction, list[ir.Value]], ir.Value]


def _out(inst: HloInstruction) -> PT:
    et = inst.shape.element_type
    assert et is not None, f"{inst.name} has a tuple shape"
    return et


def _opt(inst: HloInstruction, i: int) -> PT:
    et = inst.operands[i].shape.element_type
    assert et is not None, f"operand {i} of {inst.name} has a tuple shape"
    return et


def _unsupported(inst: HloInstruction, pt: PT) -> UnsupportedOpError:
    return UnsupportedOpError(
        f"no elemental generator for '{inst.opcode.text}' on {pt.text} ({inst.name})")


def _float_unary(fn: Callable[[ir.IRBuilder, ir.Value], ir.Value]) -> Generator:
    def gen(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
        pt = _out(inst)
        if not pt.is_float:
            raise _unsupported(inst, pt)
        return from_compute(b, fn(b, to_compute(b, ops[0], pt)), pt)
    return gen


_MIN_NORMAL = {PT.F16: 2.0 ** -14, PT.BF16: 2.0 ** -126, PT.F32: 2.0 ** -126, PT.F64: 2.0 ** -1022}


def _log(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    """log, without the denormal/zero/negative cases when the operand is provably a positive
    normal number of its own type (`value_range.at_least`)."""
    pt = _out(inst)
    if not pt.is_float:
        raise _unsupported(inst, pt)
    normal = at_least(inst.operands[0], _MIN_NORMAL[pt])
    return from_compute(b, xmath.log(b, to_compute(b, ops[0], pt), positive_normal=normal), pt)


def _exp(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    """exp, without the range clamps the operand's known bounds make unnecessary."""
    pt = _out(inst)
    if not pt.is_float:
        raise _unsupported(inst, pt)
    rng = float_range(inst.operands[0])
    return from_compute(b, xmath.exp(b, to_compute(b, ops[0], pt), arg_range=rng), pt)


def _trig(fn: Callable[..., ir.Value]) -> Generator:
    """sin/cos/tan, told the operand's known bounds (an f16 operand's finite values are below
    65504), so arguments that cannot be huge skip the Payne-Hanek reduction."""
    def gen(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
        pt = _out(inst)
        if not pt.is_float:
            raise _unsupported(inst, pt)
        lo, hi = float_range(inst.operands[0])
        if pt is PT.F16:
            lo, hi = max(lo, -65504.0), min(hi, 65504.0)
        return from_compute(b, fn(b, to_compute(b, ops[0], pt), arg_range=(lo, hi)), pt)
    return gen


def _intr(name: str) -> Callable[[ir.IRBuilder, ir.Value], ir.Value]:
    return lambda b, v: lu.intrinsic(b, name, [v])


def _round_afz(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    t = lu.intrinsic(b, "llvm.trunc", [v])
    frac = lu.intrinsic(b, "llvm.fabs", [b.fsub(v, t)])
    up = b.fcmp_ordered(">=", frac, lu.const_like(v, 0.5))
    step = lu.intrinsic(b, "llvm.copysign", [lu.const_like(v, 1.0), v])
    return b.select(up, b.fadd(t, step), t)


def _cdiv(b: ir.IRBuilder, pt: PT, x: ir.Value, y: ir.Value) -> ir.Value:
    """Smith's algorithm (no intermediate overflow for large divisors); a zero divisor gives
    numpy's infinities (a / |c|, b / |c|) rather than Smith's NaN."""
    a, bb = _cparts(b, x)
    c, d = _cparts(b, y)
    fabs = "llvm.fabs"
    c_big = b.fcmp_ordered(">=", lu.intrinsic(b, fabs, [c]), lu.intrinsic(b, fabs, [d]))
    r1 = b.fdiv(d, c)
    den1 = b.fadd(c, b.fmul(d, r1))
    re1 = b.fdiv(b.fadd(a, b.fmul(bb, r1)), den1)
    im1 = b.fdiv(b.fsub(bb, b.fmul(a, r1)), den1)
    r2 = b.fdiv(c, d)
    den2 = b.fadd(b.fmul(c, r2), d)
    re2 = b.fdiv(b.fadd(b.fmul(a, r2), bb), den2)
    im2 = b.fdiv(b.fsub(b.fmul(bb, r2), a), den2)
    # a zero divisor: a / |c| and b / |c| (infinities, or NaN for a zero part), as numpy
    zero = lu.const_like(c, 0.0)
    both_zero = b.and_(b.fcmp_ordered("==", c, zero), b.fcmp_ordered("==", d, zero))
    ac = lu.intrinsic(b, fabs, [c])
    re = b.select(both_zero, b.fdiv(a, ac), b.select(c_big, re1, re2))
    im = b.select(both_zero, b.fdiv(bb, ac), b.select(c_big, im1, im2))
    return _cmake(b, pt, re, im)


def _cabs(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """hypot(re, im) without overflow; inf if either part is inf."""
    re, im = _cparts(b, v)
    fabs = "llvm.fabs"
    ar, ai = lu.intrinsic(b, fabs, [re]), lu.intrinsic(b, fabs, [im])
    hi = lu.intrinsic(b, "llvm.maxnum", [ar, ai])
    lo = lu.intrinsic(b, "llvm.minnum", [ar, ai])
    q = b.fdiv(lo, hi)
    res = b.fmul(hi, xmath.sqrt(b, b.fadd(lu.const_like(q, 1.0), b.fmul(q, q))))
    res = b.select(b.fcmp_ordered("==", hi, lu.const_like(hi, 0.0)), hi, res)
    inf = lu.const_like(hi, math.inf)
    res = b.select(b.fcmp_ordered("==", hi, inf), inf, res)
    return b.select(b.fcmp_unordered("uno", re, im), b.fadd(re, im), res)


# ---- arithmetic -----------------------------------------------------------------------------
CONTRACT = ("contract",)
"""Flags of float add/subtract/multiply: a multiply feeding an add may become one fused
multiply-add (one rounding instead of two), as XLA allows on CPU and GPU."""


def _binary_float(b: ir.IRBuilder, pt: PT, fn: Callable[[ir.Value, ir.Value], ir.Value],
                  x: ir.Value, y: ir.Value) -> ir.Value:
    return from_compute(b, fn(to_compute(b, x, pt), to_compute(b, y, pt)), pt)


def _arith(int_op: str, float_op: str, complex_op: str | None) -> Generator:
    def gen(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
        pt = _out(inst)
        x, y = ops
        if pt.is_float:
            op = getattr(b, float_op)
            return _binary_float(b, pt, lambda p, q: op(p, q, flags=CONTRACT), x, y)
        if pt.is_complex:
            if complex_op is None:
                raise _unsupported(inst, pt)
            return _COMPLEX_BINARY[complex_op](b, pt, x, y)
        if pt is PT.PRED and int_op != "xor":
            int_op_p = {"add": "or_", "sub": "xor", "mul": "and_"}[int_op]
            return getattr(b, int_op_p)(x, y)
        return getattr(b, int_op)(x, y)
    return gen


def _c_add(b: ir.IRBuilder, pt: PT, x: ir.Value, y: ir.Value) -> ir.Value:
    (a, c), (d, e) = _cparts(b, x), _cparts(b, y)
    return _cmake(b, pt, b.fadd(a, d), b.fadd(c, e))


def _c_sub(b: ir.IRBuilder, pt: PT, x: ir.Value, y: ir.Value) -> ir.Value:
    (a, c), (d, e) = _cparts(b, x), _cparts(b, y)
    return _cmake(b, pt, b.fsub(a, d), b.fsub(c, e))


def _c_mul(b: ir.IRBuilder, pt: PT, x: ir.Value, y: ir.Value) -> ir.Value:
    (a, c), (d, e) = _cparts(b, x), _cparts(b, y)
    return _cmake(b, pt, b.fsub(b.fmul(a, d), b.fmul(c, e)), b.fadd(b.fmul(a, e), b.fmul(c, d)))


_COMPLEX_BINARY = {"add": _c_add, "sub": _c_sub, "mul": _c_mul, "div": _cdiv}


def _int_limits(pt: PT) -> tuple[int, int]:
    bits = pt.bit_width
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if pt.is_signed_int else (0, (1 << bits) - 1)


def _divide(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    pt = _out(inst)
    x, y = ops
    if pt.is_float:
        return _binary_float(b, pt, b.fdiv, x, y)
    if pt.is_complex:
        return _cdiv(b, pt, x, y)
    if pt is PT.PRED:
        return x
    zero = b.icmp_unsigned("==", y, lu.const_like(y, 0))
    if pt.is_unsigned_int:
        safe = b.select(zero, lu.const_like(y, 1), y)
        return b.select(zero, lu.const_like(x, -1), b.udiv(x, safe))
    ovf = b.and_(b.icmp_signed("==", x, lu.const_like(x, _int_limits(pt)[0])),
                 b.icmp_signed("==", y, lu.const_like(y, -1)))
    bad = b.or_(zero, ovf)
    q = b.sdiv(x, b.select(bad, lu.const_like(y, 1), y))
    return b.select(zero, lu.const_like(x, -1), q)  # INT_MIN / 1 == INT_MIN already


def _remainder(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    pt = _out(inst)
    x, y = ops
    if pt.is_float:  # exact on every target (NVPTX's own frem expansion is not)
        return _binary_float(b, pt, lambda p, q: fmod(b, p, q), x, y)
    if pt is PT.PRED or pt.is_complex:
        raise _unsupported(inst, pt)
    zero = b.icmp_unsigned("==", y, lu.const_like(y, 0))
    if pt.is_unsigned_int:
        r = b.urem(x, b.select(zero, lu.const_like(y, 1), y))
        return b.select(zero, x, r)
    minus1 = b.icmp_signed("==", y, lu.const_like(y, -1))
    r = b.srem(x, b.select(b.or_(zero, minus1), lu.const_like(y, 1), y))
    r = b.select(minus1, lu.const_like(x, 0), r)
    return b.select(zero, x, r)


def _float_max(b: ir.IRBuilder, x: ir.Value, y: ir.Value, is_max: bool) -> ir.Value:
    """NaN-propagating max/min (XLA: a NaN operand wins)."""
    sel = b.select(b.fcmp_unordered(">=" if is_max else "<=", x, y), x, y)
    return b.select(b.fcmp_unordered("uno", y, y), y, sel)


def _minmax(is_max: bool) -> Generator:
    def gen(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
        pt = _out(inst)
        x, y = ops
        if pt.is_float:
            return _binary_float(b, pt, lambda p, q: _float_max(b, p, q, is_max), x, y)
        if pt.is_complex:
            raise _unsupported(inst, pt)
        op = (">" if is_max else "<")
        cmp = b.icmp_signed(op, x, y) if pt.is_signed_int else b.icmp_unsigned(op, x, y)
        return b.select(cmp, x, y)
    return gen


def _int_pow(b: ir.IRBuilder, pt: PT, x: ir.Value, y: ir.Value) -> ir.Value:
    acc = lu.const_like(x, 1)
    base = x
    for bit in range(pt.bit_width):
        on = b.icmp_unsigned("!=", b.and_(y, lu.const_like(y, 1 << bit)), lu.const_like(y, 0))
        acc = b.select(on, b.mul(acc, base), acc)
        base = b.mul(base, base)
    if pt.is_signed_int:
        one = lu.const_like(x, 1)
        neg_result = b.select(b.icmp_signed("==", x, one), one, lu.const_like(x, 0))
        acc = b.select(b.icmp_signed("<", y, lu.const_like(y, 0)), neg_result, acc)
    return acc


def _power(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    pt = _out(inst)
    if pt.is_float:
        return _binary_float(b, pt, lambda p, q: xmath.pow(b, p, q), *ops)
    if pt.is_integer:
        return _int_pow(b, pt, *ops)
    if pt is PT.PRED:  # x^y: 0^0 = 1
        return b.or_(ops[0], b.not_(ops[1]))
    raise _unsupported(inst, pt)


def _atan2(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    pt = _out(inst)
    if not pt.is_float:
        raise _unsupported(inst, pt)
    return _binary_float(b, pt, lambda p, q: xmath.atan2(b, p, q), *ops)


def _bitwise(name: str) -> Generator:
    def gen(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
        pt = _out(inst)
        if not (pt.is_integer or pt is PT.PRED):
            raise _unsupported(inst, pt)
        return getattr(b, name)(*ops)
    return gen


def _shift(kind: str) -> Generator:
    def gen(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
        pt = _out(inst)
        if not pt.is_integer:
            raise _unsupported(inst, pt)
        x, y = ops
        width = lu.const_like(y, pt.bit_width)
        oob = b.icmp_unsigned(">=", y, width)
        safe = b.select(oob, lu.const_like(y, 0), y)
        if kind == "shl":
            return b.select(oob, lu.const_like(x, 0), b.shl(x, safe))
        if kind == "lshr":
            return b.select(oob, lu.const_like(x, 0), b.lshr(x, safe))
        fill = b.ashr(x, lu.const_like(x, pt.bit_width - 1))
        return b.select(oob, fill, b.ashr(x, safe))
    return gen


# ---- unary ----------------------------------------------------------------------------------
def _abs(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    pt = _opt(inst, 0)
    x = ops[0]
    if pt.is_float:
        return from_compute(b, lu.intrinsic(b, "llvm.fabs", [to_compute(b, x, pt)]), pt)
    if pt.is_complex:
        return _cabs(b, x)
    if pt.is_signed_int:
        return b.select(b.icmp_signed("<", x, lu.const_like(x, 0)), b.neg(x), x)
    return x


def _negate(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    pt = _out(inst)
    x = ops[0]
    if pt is PT.BF16:
        return b.xor(x, lu.const_like(x, 0x8000))
    if pt.is_float:
        return b.fneg(x)
    if pt.is_complex:
        re, im = _cparts(b, x)
        return _cmake(b, pt, b.fneg(re), b.fneg(im))
    if pt is PT.PRED:
        return x
    return b.neg(x)


def _sign(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    pt = _out(inst)
    x = ops[0]
    if pt.is_float:
        v = to_compute(b, x, pt)
        keep = b.fcmp_unordered("==", v, lu.const_like(v, 0.0))  # zeros and NaN stay
        one = lu.intrinsic(b, "llvm.copysign", [lu.const_like(v, 1.0), v])
        return from_compute(b, b.select(keep, v, one), pt)
    if pt.is_signed_int:
        zero = lu.const_like(x, 0)
        pos = b.select(b.icmp_signed(">", x, zero), lu.const_like(x, 1), zero)
        return b.select(b.icmp_signed("<", x, zero), lu.const_like(x, -1), pos)
    if pt is PT.PRED:
        return x
    if pt.is_unsigned_int:
        return b.zext(b.icmp_unsigned("!=", x, lu.const_like(x, 0)), x.type)
    raise _unsupported(inst, pt)


def _not(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    pt = _out(inst)
    if not (pt.is_integer or pt is PT.PRED):
        raise _unsupported(inst, pt)
    return b.not_(ops[0])


def _is_finite(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    pt = _opt(inst, 0)
    if not pt.is_float:
        raise _unsupported(inst, pt)
    v = to_compute(b, ops[0], pt)
    return b.fcmp_ordered("<", lu.intrinsic(b, "llvm.fabs", [v]), lu.const_like(v, math.inf))


def _bit_count(name: str) -> Generator:
    def gen(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
        pt = _out(inst)
        if not pt.is_integer:
            raise _unsupported(inst, pt)
        if name == "llvm.ctlz":
            return lu.intrinsic(b, name, [ops[0], ir.Constant(lu.I1, 0)])
        return lu.intrinsic(b, name, [ops[0]])
    return gen


def _real(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    if _opt(inst, 0).is_complex:
        return b.extract_value(ops[0], 0)
    return ops[0]


def _imag(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    if _opt(inst, 0).is_complex:
        return b.extract_value(ops[0], 1)
    pt = _out(inst)
    return from_compute(b, lu.const(compute_type(pt, ops[0].type), 0.0), pt)


def _complex(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    return _cmake(b, _out(inst), ops[0], ops[1])


def _copy(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    return ops[0]


def _select(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    return b.select(ops[0], ops[1], ops[2])


def _clamp(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    lo, x, hi = ops
    mx = _minmax(True)
    mn = _minmax(False)
    return mn(b, inst, [mx(b, inst, [x, lo]), hi])


def _round(name: str) -> Generator:
    fn = _round_afz if name == "afz" else _intr(f"llvm.{name}")
    return _float_unary(fn)


# ---- the dispatch table -----------------------------------------------------------------------
def _build_table() -> dict[Opcode, Generator]:
    from xlc.codegen import convert as cv  # convert.py builds on this module's helpers

    t: dict[Opcode, Generator] = {
        Opcode.ABS: _abs,
        Opcode.NEGATE: _negate,
        Opcode.EXP: _exp,
        Opcode.EXPM1: _float_unary(xmath.expm1),
        Opcode.LOG: _log,
        Opcode.LOG1P: _float_unary(xmath.log1p),
        Opcode.SQRT: _float_unary(xmath.sqrt),
        Opcode.RSQRT: _float_unary(xmath.rsqrt),
        Opcode.CBRT: _float_unary(xmath.cbrt),
        Opcode.TANH: _float_unary(xmath.tanh),
        Opcode.LOGISTIC: _float_unary(xmath.logistic),
        Opcode.SIN: _trig(xmath.sin),
        Opcode.COS: _trig(xmath.cos),
        Opcode.TAN: _trig(xmath.tan),
        Opcode.ERF: _float_unary(xmath.erf),
        Opcode.FLOOR: _round("floor"),
        Opcode.CEIL: _round("ceil"),
        Opcode.ROUND_AFZ: _round("afz"),
        Opcode.ROUND_EVEN: _round("roundeven"),
        Opcode.SIGN: _sign,
        Opcode.NOT: _not,
        Opcode.IS_FINITE: _is_finite,
        Opcode.POPCNT: _bit_count("llvm.ctpop"),
        Opcode.CLZ: _bit_count("llvm.ctlz"),
        Opcode.REAL: _real,
        Opcode.IMAG: _imag,
        Opcode.CONVERT: cv.emit_convert,
        Opcode.BITCAST_CONVERT: cv.emit_bitcast_convert,
        Opcode.REDUCE_PRECISION: cv.emit_reduce_precision,
        Opcode.COPY: _copy,
        Opcode.ADD: _arith("add", "fadd", "add"),
        Opcode.SUBTRACT: _arith("sub", "fsub", "sub"),
        Opcode.MULTIPLY: _arith("mul", "fmul", "mul"),
        Opcode.DIVIDE: _divide,
        Opcode.REMAINDER: _remainder,
        Opcode.MAXIMUM: _minmax(True),
        Opcode.MINIMUM: _minmax(False),
        Opcode.POWER: _power,
        Opcode.ATAN2: _atan2,
        Opcode.AND: _bitwise("and_"),
        Opcode.OR: _bitwise("or_"),
        Opcode.XOR: _bitwise("xor"),
        Opcode.SHIFT_LEFT: _shift("shl"),
        Opcode.SHIFT_RIGHT_ARITHMETIC: _shift("ashr"),
        Opcode.SHIFT_RIGHT_LOGICAL: _shift("lshr"),
        Opcode.COMPLEX: _complex,
        Opcode.COMPARE: cv.emit_compare,
        Opcode.SELECT: _select,
        Opcode.CLAMP: _clamp,
    }
    return t


ELEMENTAL_GENERATORS: dict[Opcode, Generator] = _build_table()


def has_elemental_generator(op: Opcode) -> bool:
    """Whether `emit_elemental` handles opcode `op`."""
    return op in ELEMENTAL_GENERATORS


def emit_elemental(b: ir.IRBuilder, inst: HloInstruction, operands: list[ir.Value]) -> ir.Value:
    """One element of `inst` from one element of each operand (value_type representation).

    Requires: `operands[i]` has `value_type` of operand i's element type (scalars, or vectors
    for non-complex types). Raises UnsupportedOpError("no elemental generator for 'cbrt' ...")
    for opcodes (or element types) without a generator."""
    gen = ELEMENTAL_GENERATORS.get(inst.opcode)
    if gen is None:
        raise UnsupportedOpError(f"no elemental generator for '{inst.opcode.text}'")
    return gen(b, inst, operands)
