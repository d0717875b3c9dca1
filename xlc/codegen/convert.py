"""Elemental generators for type conversion, bitcast-convert, reduce-precision and compare
(XLA semantics; see `xlc.codegen.elemental` for the summary). Dispatched from elemental.py."""
from __future__ import annotations

from llvmlite import ir

from xlc.codegen import llvm_utils as lu
from xlc.codegen.scalar_types import cmake as _cmake
from xlc.codegen.scalar_types import compute_type, from_compute, to_compute
from xlc.codegen.scalar_types import cparts as _cparts
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType as PT

_FLOAT_FORMAT = {PT.F16: (5, 10), PT.BF16: (8, 7), PT.F32: (8, 23), PT.F64: (11, 52)}


def _et(inst: HloInstruction, i: int | None = None) -> PT:
    s = inst.shape if i is None else inst.operands[i].shape
    assert s.element_type is not None
    return s.element_type


# ---- convert ----------------------------------------------------------------------------------
def _to_pred(b: ir.IRBuilder, x: ir.Value, src: PT) -> ir.Value:
    if src.is_float:
        v = to_compute(b, x, src)
        return b.fcmp_unordered("!=", v, lu.const_like(v, 0.0))
    if src.is_complex:
        re, im = _cparts(b, x)
        zero = lu.const_like(re, 0.0)
        return b.or_(b.fcmp_unordered("!=", re, zero), b.fcmp_unordered("!=", im, zero))
    return b.icmp_unsigned("!=", x, lu.const_like(x, 0))


def _int_to_float(b: ir.IRBuilder, x: ir.Value, src: PT, dst: PT) -> ir.Value:
    signed = src.is_signed_int
    conv = b.sitofp if signed else b.uitofp
    bits = src.bit_width
    if dst is PT.F64 or dst is PT.F32:
        return conv(x, lu.value_type(dst) if not isinstance(x.type, ir.VectorType)
                    else lu.with_scalar(x.type, lu.value_type(dst)))
    if bits <= 24:  # exact in f32, then one rounding
        return from_compute(b, conv(x, lu.with_scalar(x.type, lu.F32)), dst)
    return from_compute(b, conv(x, lu.with_scalar(x.type, lu.F64)), dst)


def _float_to_int(b: ir.IRBuilder, x: ir.Value, src: PT, dst: PT) -> ir.Value:
    v = to_compute(b, x, src)
    name = "llvm.fptosi.sat" if dst.is_signed_int else "llvm.fptoui.sat"
    rty = lu.with_scalar(v.type, lu.value_type(dst))
    return lu.intrinsic(b, name, [v], ret=rty, overloads=[rty, v.type])


def _int_to_int(b: ir.IRBuilder, x: ir.Value, src: PT, dst: PT) -> ir.Value:
    rty = lu.with_scalar(x.type, lu.value_type(dst))
    sw, dw = src.bit_width, dst.bit_width
    if sw == dw:
        return x
    if sw > dw:
        return b.trunc(x, rty)
    return b.sext(x, rty) if src.is_signed_int else b.zext(x, rty)


def convert_value(b: ir.IRBuilder, x: ir.Value, src: PT, dst: PT) -> ir.Value:
    """Convert one element (value_type representation) from `src` to `dst` with XLA's rules."""
    if src is dst:
        return x
    if dst is PT.PRED:
        return _to_pred(b, x, src)
    if dst.is_complex:
        part = PT.F32 if dst is PT.C64 else PT.F64
        if src.is_complex:
            re, im = _cparts(b, x)
            sp = PT.F32 if src is PT.C64 else PT.F64
            return _cmake(b, dst, convert_value(b, re, sp, part), convert_value(b, im, sp, part))
        re = convert_value(b, x, src, part)
        return _cmake(b, dst, re, lu.const(lu.value_type(part), 0.0))
    if src.is_complex:  # real part
        re, _ = _cparts(b, x)
        return convert_value(b, re, PT.F32 if src is PT.C64 else PT.F64, dst)
    if src is PT.PRED:
        if dst.is_float:
            return from_compute(b, b.uitofp(x, compute_type(dst, x.type)), dst)
        return b.zext(x, lu.with_scalar(x.type, lu.value_type(dst)))
    if src.is_integer:
        return _int_to_float(b, x, src, dst) if dst.is_float else _int_to_int(b, x, src, dst)
    if dst.is_integer:
        return _float_to_int(b, x, src, dst)
    return from_compute(b, to_compute(b, x, src), dst)


def emit_convert(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    """`convert`: see `convert_value`."""
    return convert_value(b, ops[0], _et(inst, 0), _et(inst))


def emit_bitcast_convert(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    """`bitcast-convert` between element types of the same bit width (other widths change the
    shape and are not elemental)."""
    src, dst = _et(inst, 0), _et(inst)
    if src.bit_width != dst.bit_width or src.is_complex or dst.is_complex:
        raise UnsupportedOpError(
            f"no elemental generator for 'bitcast-convert' from {src.text} to {dst.text} "
            f"({inst.name})")
    x = ops[0]
    return b.bitcast(x, lu.with_scalar(x.type, lu.value_type(dst)))


# ---- reduce-precision -------------------------------------------------------------------------
def emit_reduce_precision(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]
                          ) -> ir.Value:
    """Round to `mantissa_bits` (nearest even), then overflow to inf / flush values below the
    reduced type's smallest normal to signed zero (`exponent_bits`); NaN stays NaN."""
    pt = _et(inst)
    if not pt.is_float:
        raise UnsupportedOpError(f"reduce-precision needs a float operand, got {pt.text}")
    ebits = int(inst.attrs["exponent_bits"])
    mbits = int(inst.attrs["mantissa_bits"])
    v = to_compute(b, ops[0], pt)
    wide = PT.F64 if pt is PT.F64 else PT.F32
    src_e, src_m = _FLOAT_FORMAT[wide]
    width = 1 + src_e + src_m
    ity = lu.with_scalar(v.type, ir.IntType(width))
    c = lambda n: lu.const(ity, n)  # noqa: E731
    bits = b.bitcast(v, ity)
    if mbits < src_m:
        shift = src_m - mbits
        last = 1 << shift
        base_bias = (last >> 1) - 1
        lsb = b.lshr(b.and_(bits, c(last)), c(shift))
        bits = b.and_(b.add(bits, b.add(lsb, c(base_bias))), c(~(last - 1)))
    if ebits < src_e:
        exp_mask = ((1 << src_e) - 1) << src_m
        bias = (1 << (src_e - 1)) - 1
        max_exp = bias + (1 << (ebits - 1)) - 1
        min_exp = bias - (1 << (ebits - 1)) + 2
        x_exp = b.and_(bits, c(exp_mask))
        overflow = b.icmp_unsigned(">", x_exp, c(max_exp << src_m))
        underflow = b.icmp_unsigned("<", x_exp, c(min_exp << src_m))
        signed_zero = b.and_(bits, c(1 << (width - 1)))
        signed_inf = b.or_(signed_zero, c(exp_mask))
        bits = b.select(overflow, signed_inf, b.select(underflow, signed_zero, bits))
    res = b.bitcast(bits, v.type)
    res = b.select(b.fcmp_unordered("uno", v, v), v, res)
    return from_compute(b, res, pt)


# ---- compare ------------------------------------------------------------------------------------
_DIRS = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def _total_order_key(b: ir.IRBuilder, v: ir.Value, pt: PT) -> ir.Value:
    """Signed integer whose order is IEEE totalOrder of the float `v`."""
    if pt is PT.BF16:
        bits = v  # already i16
    else:
        width = {PT.F16: 16, PT.F32: 32, PT.F64: 64}[pt]
        bits = b.bitcast(v, lu.with_scalar(v.type, ir.IntType(width)))
    width = lu.scalar_type(bits.type).width
    neg = b.ashr(bits, lu.const_like(bits, width - 1))  # all ones if negative
    flip = b.lshr(neg, lu.const_like(bits, 1))  # 0x7ff.. if negative
    return b.xor(bits, flip)


def emit_compare(b: ir.IRBuilder, inst: HloInstruction, ops: list[ir.Value]) -> ir.Value:
    """`compare` with `direction` and optional `type` (default: FLOAT for floats, SIGNED for
    signed ints, UNSIGNED for unsigned ints and pred)."""
    src = _et(inst, 0)
    direction = str(inst.attrs.get("direction", ""))
    if direction not in _DIRS:
        raise UnsupportedOpError(f"compare {inst.name}: bad direction '{direction}'")
    op = _DIRS[direction]
    x, y = ops
    default = ("FLOAT" if src.is_float or src.is_complex else
               "SIGNED" if src.is_signed_int else "UNSIGNED")
    ctype = str(inst.attrs.get("type", default))
    if src.is_complex:
        if direction not in ("EQ", "NE"):
            raise UnsupportedOpError(f"compare {inst.name}: {direction} on {src.text}")
        (a, c), (d, e) = _cparts(b, x), _cparts(b, y)
        if direction == "EQ":
            return b.and_(b.fcmp_ordered("==", a, d), b.fcmp_ordered("==", c, e))
        return b.or_(b.fcmp_unordered("!=", a, d), b.fcmp_unordered("!=", c, e))
    if src.is_float and ctype == "TOTALORDER":
        return b.icmp_signed(op, _total_order_key(b, x, src), _total_order_key(b, y, src))
    if src.is_float:
        xv, yv = to_compute(b, x, src), to_compute(b, y, src)
        if direction == "NE":
            return b.fcmp_unordered("!=", xv, yv)
        return b.fcmp_ordered(op, xv, yv)
    if ctype == "SIGNED" and src is not PT.PRED:
        return b.icmp_signed(op, x, y)
    return b.icmp_unsigned(op, x, y)
