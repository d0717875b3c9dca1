"""Exact floating-point remainder (C's `fmod`, HLO `remainder`) in LLVM IR.

`fmod(x, y) = x - trunc(x / y) * y` is always exactly representable, and XLA computes it
exactly on every backend (libm's `fmod` on CPU, libdevice's `__nv_fmod[f]` on GPU). LLVM's
`frem` instruction becomes a libm call on CPU targets (exact), but the NVPTX target expands
it into `x - trunc(x / y) * y` in floating point, which is wrong as soon as the quotient has
more bits than the mantissa (f32 `remainder(3.4e38, 1.1e-30)` gave -1.8e-08 instead of
9.98e-31). `fmod` here is the integer long division of the mantissas, `2^d mx mod my`, done in
chunks of shifts that keep every product inside 64 bits (f32: 40 bits a step, at most 7
steps; f64: 11 bits a step), so the result is exact for every input, denormals included
(they are used as they are, IEEE gradual underflow: see docs/gpu.md, "Numerics").
"""
from __future__ import annotations

import math

from llvmlite import ir

from xlc.codegen import llvm_utils as lu

_I64 = ir.IntType(64)


def frem_is_exact(module: ir.Module) -> bool:
    """Whether LLVM lowers `frem` exactly for `module`'s target (a libm `fmod` call: every
    CPU target); NVPTX expands it in floating point, which is not exact."""
    return not module.triple.startswith("nvptx")


def fmod(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """The exact remainder of f32/f64 values `x` and `y` (scalars or vectors) with the sign of
    `x`: NaN when x is infinite, y is zero or either is NaN; x when |x| < |y| (y infinite
    included). `frem` where the target lowers it exactly, else integer long division."""
    if frem_is_exact(b.module):
        return b.frem(x, y)
    if isinstance(x.type, ir.VectorType):
        out = ir.Constant(x.type, ir.Undefined)
        for lane in range(x.type.count):
            k = ir.Constant(ir.IntType(32), lane)
            r = _fmod_scalar(b, b.extract_element(x, k), b.extract_element(y, k))
            out = b.insert_element(out, r, k)
        return out
    return _fmod_scalar(b, x, y)


def _fmod_scalar(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    bits = lu.float_bits(x.type)
    mant, bias = (23, 127) if bits == 32 else (52, 1023)
    step = 40 if bits == 32 else 11  # (mantissa + 1) + step <= 64
    ity = ir.IntType(bits)

    def ci(v: int) -> ir.Constant:
        return ir.Constant(ity, v)

    ux, uy = b.bitcast(x, ity), b.bitcast(y, ity)
    magnitude = ci((1 << (bits - 1)) - 1)
    ax, ay = b.and_(ux, magnitude), b.and_(uy, magnitude)
    inf_bits = ci(((1 << (bits - 1 - mant)) - 1) << mant)
    is_nan = b.or_(b.or_(b.icmp_unsigned("==", ay, ci(0)),
                         b.icmp_unsigned(">=", ax, inf_bits)),
                   b.icmp_unsigned(">", ay, inf_bits))
    smaller = b.icmp_unsigned("<", ax, ay)
    equal = b.icmp_unsigned("==", ax, ay)

    def split(a: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(mantissa with its implicit bit, exponent >= 1) of a finite magnitude, as i64:
        a denormal is its mantissa at exponent 1."""
        e = b.lshr(a, ci(mant))
        m = b.and_(a, ci((1 << mant) - 1))
        normal = b.icmp_unsigned("!=", e, ci(0))
        m = b.select(normal, b.or_(m, ci(1 << mant)), m)
        e = b.select(normal, e, ci(1))
        return (b.zext(m, _I64), b.zext(e, _I64)) if bits < 64 else (m, e)

    mx, ex = split(ax)
    my, ey = split(ay)
    my = b.select(b.icmp_unsigned("==", my, ir.Constant(_I64, 0)), ir.Constant(_I64, 1), my)
    d = b.sub(ex, ey)
    d = b.select(b.icmp_signed("<", d, ir.Constant(_I64, 0)), ir.Constant(_I64, 0), d)
    # 2^d mx mod my: first the d mod step bits, then `step` bits per iteration
    with b.goto_entry_block():
        slot = b.alloca(_I64, name="fmod.r")
    b.store(b.urem(b.shl(mx, b.urem(d, ir.Constant(_I64, step))), my), slot)
    with lu.for_range(b, b.udiv(d, ir.Constant(_I64, step)), name="fmod"):
        b.store(b.urem(b.shl(b.load(slot), ir.Constant(_I64, step)), my), slot)
    r = b.load(slot)
    # the remainder is r * 2^(ey - bias - mant), exactly representable: r converts exactly,
    # and the power of two may be a denormal
    e = b.trunc(ey, ity) if bits < 64 else ey
    e = b.sub(e, ci(bias + mant))
    normal_pow = b.shl(b.add(e, ci(bias)), ci(mant))
    denormal_pow = b.shl(ci(1), b.add(e, ci(bias + mant - 1)))
    pow2 = b.bitcast(b.select(b.icmp_signed(">=", e, ci(1 - bias)), normal_pow, denormal_pow),
                     x.type)
    res = b.fmul(b.uitofp(r, x.type), pow2)
    res = lu.intrinsic(b, "llvm.copysign", [res, x])
    zero = lu.intrinsic(b, "llvm.copysign", [lu.const(x.type, 0.0), x])
    res = b.select(equal, zero, res)
    res = b.select(smaller, x, res)
    return b.select(is_nan, lu.const(x.type, math.nan), res)
