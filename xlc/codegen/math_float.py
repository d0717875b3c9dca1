"""The float toolkit behind `xlc.codegen.math`: `FloatOps`, arithmetic on one (vector) float
type that keeps the formulas readable (constants, fma, selects, compares, polynomials, bit
tricks), `taylor` coefficient lists, and the multi-part constants (pi/2 in three parts, ln 2 as
hi + lo) the argument reductions need.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from decimal import Decimal, localcontext

import numpy as np
from llvmlite import ir

from xlc.codegen.llvm_utils import const, float_bits, intrinsic, with_scalar
from xlc.errors import LoweringError

_PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459")
_LN2 = Decimal("0.693147180559945309417232121458176568075500134360255254120680009")


def _split_half(value: Decimal, bits: int, parts: int) -> list[float]:
    """value / 2 = sum of `parts` floats of the given precision (each the rounded remainder)."""
    dt = np.float32 if bits == 32 else np.float64
    out = []
    with localcontext() as ctx:
        ctx.prec = 60
        rem = value / 2
        for _ in range(parts):
            c = float(dt(float(rem)))
            out.append(c)
            rem -= Decimal(c)
    return out


PIO2 = {32: _split_half(_PI, 32, 3), 64: _split_half(_PI, 64, 3)}
# ln2 = hi + lo with hi short enough that n * hi is exact for every exponent n in range.
LN2_HI = {32: 0.693359375, 64: 6.93147180369123816490e-01}
with localcontext() as _ctx:
    _ctx.prec = 60
    LN2_LO = {b: float(_LN2 - Decimal(LN2_HI[b])) for b in (32, 64)}


class FloatOps:
    """Arithmetic on one (vector) float type, to keep the formulas readable."""

    def __init__(self, b: ir.IRBuilder, ty: ir.Type):
        self.b = b
        self.ty = ty
        self.bits = float_bits(ty)
        if self.bits not in (32, 64):
            raise LoweringError(f"math functions take f32 or f64 values, got {ty}")
        self.ity = with_scalar(ty, ir.IntType(self.bits))
        self.mant = 23 if self.bits == 32 else 52
        self.bias = 127 if self.bits == 32 else 1023
        self.is64 = self.bits == 64

    # constants
    def c(self, v: float) -> ir.Constant:
        return const(self.ty, v)

    def ci(self, v: int) -> ir.Constant:
        return const(self.ity, v)

    # arithmetic
    def add(self, a: ir.Value, c: ir.Value) -> ir.Value:
        return self.b.fadd(a, c)

    def sub(self, a: ir.Value, c: ir.Value) -> ir.Value:
        return self.b.fsub(a, c)

    def mul(self, a: ir.Value, c: ir.Value) -> ir.Value:
        return self.b.fmul(a, c)

    def div(self, a: ir.Value, c: ir.Value) -> ir.Value:
        return self.b.fdiv(a, c)

    def div_by_normal(self, a: ir.Value, c: ir.Value) -> ir.Value:
        """a / c where a is finite and c is known to be a positive normal number of modest size
        (a polynomial denominator): marked `arcp ninf`, so the target may use a reciprocal
        estimate refined by Newton's method instead of a divide (x86 AVX-512: rcp14 + one
        step, ~2^-28 relative error, several times the throughput of vdivps; LLVM needs both
        flags). Never use it where c can be 0, inf, NaN or subnormal: the estimate's
        refinement turns those into NaN."""
        return self.b.fdiv(a, c, flags=("arcp", "ninf", "contract"))

    def neg(self, a: ir.Value) -> ir.Value:
        return self.b.fneg(a)

    def fma(self, a: ir.Value, c: ir.Value, d: ir.Value) -> ir.Value:
        """a*c + d, fused where the target has FMA (llvm.fmuladd)."""
        return intrinsic(self.b, "llvm.fmuladd", [a, c, d])

    def fma_exact(self, a: ir.Value, c: ir.Value, d: ir.Value) -> ir.Value:
        """a*c + d with one rounding (llvm.fma; native on FMA CPUs and GPUs)."""
        return intrinsic(self.b, "llvm.fma", [a, c, d])

    def poly(self, x: ir.Value, coeffs: Sequence[float]) -> ir.Value:
        """Horner: coeffs[0]*x^(n-1) + ... + coeffs[-1]."""
        r = self.c(coeffs[0])
        for k in coeffs[1:]:
            r = self.fma(r, x, self.c(k))
        return r

    def un(self, name: str, a: ir.Value) -> ir.Value:
        return intrinsic(self.b, f"llvm.{name}", [a])

    def abs(self, a: ir.Value) -> ir.Value:
        return self.un("fabs", a)

    def copysign(self, mag: ir.Value, sign: ir.Value) -> ir.Value:
        return intrinsic(self.b, "llvm.copysign", [mag, sign])

    def minnum(self, a: ir.Value, c: ir.Value) -> ir.Value:
        return intrinsic(self.b, "llvm.minnum", [a, c])

    def maxnum(self, a: ir.Value, c: ir.Value) -> ir.Value:
        return intrinsic(self.b, "llvm.maxnum", [a, c])

    # comparisons and selects (ordered: false when either side is NaN)
    def cmp(self, op: str, a: ir.Value, c: ir.Value) -> ir.Value:
        return self.b.fcmp_ordered(op, a, c)

    def isnan(self, a: ir.Value) -> ir.Value:
        return self.b.fcmp_unordered("uno", a, a)

    def isinf(self, a: ir.Value) -> ir.Value:
        return self.cmp("==", self.abs(a), self.c(math.inf))

    def sel(self, cond: ir.Value, a: ir.Value, c: ir.Value) -> ir.Value:
        return self.b.select(cond, a, c)

    # bits
    def to_bits(self, a: ir.Value) -> ir.Value:
        return self.b.bitcast(a, self.ity)

    def from_bits(self, i: ir.Value) -> ir.Value:
        return self.b.bitcast(i, self.ty)

    def signbit(self, a: ir.Value) -> ir.Value:
        return self.b.icmp_signed("<", self.to_bits(a), self.ci(0))

    def pow2i(self, n: ir.Value) -> ir.Value:
        """2^n for an integer n (of type ity) in the normal exponent range."""
        return self.from_bits(self.b.shl(self.b.add(n, self.ci(self.bias)), self.ci(self.mant)))

    def to_int(self, a: ir.Value) -> ir.Value:
        return self.b.fptosi(a, self.ity)

    def ldexp(self, a: ir.Value, n: ir.Value) -> ir.Value:
        """a * 2^n for an integer n (of type ity, |n| < 2^31) with one rounding: `llvm.ldexp`.
        Only where `has_vector_ldexp` says it is one instruction."""
        n32 = n if not self.is64 else self.b.trunc(n, with_scalar(n.type, ir.IntType(32)))
        return intrinsic(self.b, "llvm.ldexp", [a, n32], overloads=[a.type, n32.type])

    def clamp(self, a: ir.Value, lo: float, hi: float) -> ir.Value:
        """min(max(a, lo), hi) with a NaN passed through (selects on ordered compares: one
        vmaxps/vminps each on x86, no NaN fix-up)."""
        a = self.sel(self.cmp("<", a, self.c(lo)), self.c(lo), a)
        return self.sel(self.cmp(">", a, self.c(hi)), self.c(hi), a)


def taylor(coeff: Callable[[int], float], count: int) -> list[float]:
    """Coefficients coeff(count-1), ..., coeff(0) for `FloatOps.poly`."""
    return [coeff(k) for k in range(count - 1, -1, -1)]
