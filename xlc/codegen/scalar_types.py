"""Scalar value representations shared by the elemental generators: float compute types
(f16/bf16 computed in f32), exact widening, single-rounding narrowing (round-to-nearest-even,
round-to-odd through f32 for f64 -> f16/bf16), and complex {re, im} struct helpers."""
from __future__ import annotations

from llvmlite import ir

from xlc.codegen import llvm_utils as lu
from xlc.errors import UnsupportedOpError
from xlc.hlo.shape import PrimitiveType as PT


# ---- float compute types --------------------------------------------------------------------
def compute_type(pt: PT, like: ir.Type) -> ir.Type:
    """The type arithmetic on `pt` is done in: double for f64, float for f16/bf16/f32."""
    return lu.with_scalar(like, lu.F64 if pt is PT.F64 else lu.F32)


def to_compute(b: ir.IRBuilder, v: ir.Value, pt: PT) -> ir.Value:
    """A float value of type `pt` widened to its compute type (exact)."""
    if pt is PT.F16:
        return b.fpext(v, lu.with_scalar(v.type, lu.F32))
    if pt is PT.BF16:
        wide = b.zext(v, lu.with_scalar(v.type, lu.I32))
        i32 = b.shl(wide, lu.const_like(wide, 16))
        return b.bitcast(i32, lu.with_scalar(v.type, lu.F32))
    return v


def _f32_to_bf16(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """Round-to-nearest-even f32 -> bf16 bits; NaN stays (quiet) NaN."""
    i32t = lu.with_scalar(v.type, lu.I32)
    bits = b.bitcast(v, i32t)
    lsb = b.and_(b.lshr(bits, lu.const(i32t, 16)), lu.const(i32t, 1))
    rounded = b.lshr(b.add(b.add(bits, lu.const(i32t, 0x7FFF)), lsb), lu.const(i32t, 16))
    is_nan = b.icmp_unsigned(">", b.and_(bits, lu.const(i32t, 0x7FFFFFFF)),
                             lu.const(i32t, 0x7F800000))
    quiet = b.or_(b.lshr(bits, lu.const(i32t, 16)), lu.const(i32t, 0x40))
    return b.trunc(b.select(is_nan, quiet, rounded), lu.with_scalar(v.type, lu.I16))


def _f64_to_f32_odd(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """f64 -> f32 rounding to odd (so a second rounding to a narrower type is correct)."""
    f32t = lu.with_scalar(v.type, lu.F32)
    i32t = lu.with_scalar(v.type, lu.I32)
    t = b.fptrunc(v, f32t)
    back = b.fpext(t, v.type)
    bits = b.bitcast(t, i32t)
    fabs = "llvm.fabs"
    too_big = b.fcmp_ordered(">", lu.intrinsic(b, fabs, [back]), lu.intrinsic(b, fabs, [v]))
    tz = b.select(too_big, b.sub(bits, lu.const(i32t, 1)), bits)
    inexact = b.fcmp_ordered("!=", back, v)
    res = b.select(inexact, b.or_(tz, lu.const(i32t, 1)), bits)
    return b.bitcast(res, f32t)


def from_compute(b: ir.IRBuilder, v: ir.Value, pt: PT) -> ir.Value:
    """A compute-type (float or double) value rounded once to float type `pt`."""
    src64 = isinstance(lu.scalar_type(v.type), ir.DoubleType)
    if pt is PT.F64:
        return v if src64 else b.fpext(v, lu.with_scalar(v.type, lu.F64))
    if pt is PT.F32:
        return b.fptrunc(v, lu.with_scalar(v.type, lu.F32)) if src64 else v
    if src64:
        v = _f64_to_f32_odd(b, v)
    if pt is PT.F16:
        return b.fptrunc(v, lu.with_scalar(v.type, lu.F16))
    if pt is PT.BF16:
        return _f32_to_bf16(b, v)
    raise UnsupportedOpError(f"'{pt.text}' is not a floating-point type")


# ---- complex helpers ------------------------------------------------------------------------
def cparts(b: ir.IRBuilder, v: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(re, im) of a complex value."""
    return b.extract_value(v, 0), b.extract_value(v, 1)


def cmake(b: ir.IRBuilder, pt: PT, re: ir.Value, im: ir.Value) -> ir.Value:
    """The complex value re + i im of type pt."""
    v = ir.Constant(lu.value_type(pt), ir.Undefined)
    return b.insert_value(b.insert_value(v, re, 0), im, 1)
