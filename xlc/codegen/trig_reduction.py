"""Payne-Hanek argument reduction for `sin`/`cos`/`tan` of huge arguments, in LLVM IR.

`xlc.codegen.math` reduces f32 arguments by Cody-Waite in f64, which is accurate while
k = rint(x 2/pi) is small. For |x| >= 2^25 this module computes x 2/pi = k + r without any
cancellation error, for every finite f32 x up to 3.4e38, so sin/cos/tan stay accurate (a few
ulps) over the whole f32 range as XLA's are.

The method (Payne and Hanek; here branch-free and vectorisable, no table loads): write
x = m 2^e (m a 24-bit integer, e >= 2) and 2/pi = sum_k c_k 2^(-26 (k+1)) with 26-bit integer
chunks c_k. Every product x * (c_k 2^(-26 (k+1))) has at most 50 significant bits, so it is
exact in f64, and the chunks whose product is a multiple of 4 (whole turns) are dropped: with
j0 = ceil((e - 1) / 26) - 1 the first kept chunk gives T0 = m c_j0 2^s with s in [-24, 1].
Five chunks T0..T4 are kept (the rest is below 2^-78; T3 + T4 are one product). T0 and T1 are
reduced mod 4 exactly, their sum is exact (at most 29 - s <= 53 bits), k = rint(T0 + T1) is
removed exactly, T2 is added (exactly where a carry past 1/2 then cancels), the carry removed,
and the tail added: relative error ~2^-52 of the reduced argument however close x is to a
multiple of pi/2 (the closest f32, 7.73e28, is 1.0e-9 quarter turns from one). j0 takes four
values (e <= 104), so each chunk is picked with three selects.

f64 (`reduce_huge_f64`, |x| >= 2^48): x is split into a 26-bit high part and a 27-bit low
part, each multiplied exactly by 26-bit chunks loaded from a table (about 40 chunk positions
over the f64 exponent range). The leading products are reduced mod 4 and summed exactly, with
the integer removed after each; the next ones go through double-double (TwoSum) sums and the
small tail is added to the low word: absolute error ~2^-110 quarter turns, so f64 results are
accurate to a few ulps over the whole range, the hardest double (6381956970095103 2^797,
2^-61 from a multiple of pi/2) included.
"""
from __future__ import annotations

import math
from fractions import Fraction

from llvmlite import ir

from xlc.codegen import llvm_utils as lu

_CHUNK = 26
_KEPT = 5  # chunks used per argument
_J0_MAX = 3  # f32: e <= 104


def _two_over_pi_bits(bits: int) -> int:
    """floor(2/pi * 2^bits), from pi by Machin's formula in integers (guard digits included)."""
    guard = 64
    one = 1 << (bits + guard)

    def arctan_inv(n: int) -> int:
        total, term, k, sign = 0, one // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k += 2
            sign = -sign
        return total

    pi = 16 * arctan_inv(5) - 4 * arctan_inv(239)  # pi * 2^(bits + guard)
    return (2 * one * one // pi) >> guard


_TOTAL_BITS = _CHUNK * (_J0_MAX + _KEPT)
_TWO_OVER_PI = _two_over_pi_bits(_TOTAL_BITS)
# C_k = c_k 2^(-26 (k+1)): exact doubles (26-bit integers scaled by powers of two)
CHUNKS = [((_TWO_OVER_PI >> (_TOTAL_BITS - _CHUNK * (k + 1))) & ((1 << _CHUNK) - 1))
          * 2.0 ** (-_CHUNK * (k + 1)) for k in range(_J0_MAX + _KEPT)]
TAILS = [CHUNKS[j + 3] + CHUNKS[j + 4] for j in range(_J0_MAX + 1)]
THRESHOLD = 2.0 ** 25
"""|x| from which `reduce_huge_f32` applies (e >= 2); below it Cody-Waite in f64 is exact
enough."""


def _call(b: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    return lu.intrinsic(b, name, list(args))


def reduce_huge_f32(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(k, r) as f64 values (lanes as `x`, an f32 scalar or vector) with x 2/pi = k + r,
    k integer-valued, |r| <= 1/2, for every finite x with |x| >= THRESHOLD. Other lanes give
    values to be discarded."""
    dty = lu.with_scalar(x.type, ir.DoubleType())
    ity = lu.with_scalar(x.type, ir.IntType(32))

    def cd(v: float) -> ir.Constant:
        return lu.const(dty, v)

    def ci(v: int) -> ir.Constant:
        return lu.const(ity, v)

    biased = b.and_(b.lshr(b.bitcast(x, ity), ci(23)), ci(255))
    # j0 + 1 = ceil((e - 1) / 26) with e = biased - 150: (biased - 126) // 26 by a multiply
    j0 = b.sub(b.lshr(b.mul(b.sub(biased, ci(126)), ci(2521)), ci(16)), ci(1))
    j0 = b.select(b.icmp_signed("<", j0, ci(0)), ci(0), j0)
    j0 = b.select(b.icmp_signed(">", j0, ci(_J0_MAX)), ci(_J0_MAX), j0)
    picks = [b.icmp_signed("==", j0, ci(j)) for j in range(_J0_MAX)]
    ax = _call(b, "llvm.fabs", b.fpext(x, dty))
    terms = []
    for i in range(4):
        # T0..T2 exact (24 x 26 bits); T3 + T4 as one product with the sum of their chunks
        # (its rounding error, ~2^(s-81), is far below what the result needs)
        table = CHUNKS[i:] if i < 3 else TAILS
        c = cd(table[_J0_MAX])
        for j in range(_J0_MAX - 1, -1, -1):
            c = b.select(picks[j], cd(table[j]), c)
        terms.append(b.fmul(ax, c))

    def mod4(t: ir.Value) -> ir.Value:  # exact: t - 4 floor(t / 4) is representable
        fl = _call(b, "llvm.floor", b.fmul(t, cd(0.25)))
        return _call(b, "llvm.fma", fl, cd(-4.0), t)

    s = b.fadd(mod4(terms[0]), mod4(terms[1]))  # exact: at most 29 - s <= 53 bits
    k = _call(b, "llvm.rint", s)
    r = b.fadd(b.fsub(s, k), terms[2])  # exact where the next step cancels (s = 1)
    k2 = _call(b, "llvm.rint", r)  # T2 may carry r past 1/2: remove it before adding T3
    r = b.fadd(b.fsub(r, k2), terms[3])
    k = b.fadd(k, k2)
    neg = b.fcmp_ordered("<", x, lu.const(x.type, 0.0))
    return b.select(neg, b.fneg(k), k), b.select(neg, b.fneg(r), r)


# ---- f64 -------------------------------------------------------------------------------------
THRESHOLD_F64 = 2.0 ** 48
"""|x| from which `reduce_huge_f64` applies (Cody-Waite in f64 is accurate to about 2^50)."""
_F64_CHUNKS = 48  # chunk positions jb = -1 .. 38, plus the 8 used from each
_F64_BITS = _CHUNK * _F64_CHUNKS
_TWO_OVER_PI_F64 = _two_over_pi_bits(_F64_BITS)
_F64_SCALE = 600
"""table[i] = C_(i-1) 2^600 (C_k 2^-(26 (k+1)) reaches 2^-1222, below the doubles), and x's
parts are scaled by 2^-600 (exactly: they stay normal) before the products."""
F64_TABLE = [0.0] + [math.ldexp((_TWO_OVER_PI_F64 >> (_F64_BITS - _CHUNK * (k + 1)))
                                & ((1 << _CHUNK) - 1), _F64_SCALE - _CHUNK * (k + 1))
                     for k in range(_F64_CHUNKS - 1)]


def _table(b: ir.IRBuilder) -> ir.GlobalVariable:
    """The chunk table of the module being built (one per module)."""
    module = b.module
    name = "xlc.two_over_pi.f64"
    gv = module.globals.get(name)
    if gv is None:
        aty = ir.ArrayType(ir.DoubleType(), len(F64_TABLE))
        gv = ir.GlobalVariable(module, aty, name=name)
        gv.initializer = ir.Constant(aty, [ir.Constant(ir.DoubleType(), v) for v in F64_TABLE])
        gv.global_constant = True
        gv.linkage = "internal"
    return gv


def _load_chunk(b: ir.IRBuilder, index: ir.Value) -> ir.Value:
    """table[index] (i64 scalar or vector index; a vector by one `llvm.masked.gather`, which
    LLVM lowers to a gather instruction or lane by lane where the target has none)."""
    gv = _table(b)
    aty = gv.value_type
    ptr = b.gep(gv, [ir.Constant(_I64, 0), index], inbounds=True, source_etype=aty)
    if not isinstance(index.type, ir.VectorType):
        return b.load(ptr, typ=ir.DoubleType())
    n = index.type.count
    ptr.type = ir.VectorType(lu.PTR, n)  # llvmlite types a GEP with vector indices as scalar
    vty = ir.VectorType(ir.DoubleType(), n)
    every = ir.Constant(ir.VectorType(ir.IntType(1), n), [1] * n)
    return lu.intrinsic(b, "llvm.masked.gather", [ptr, ir.Constant(ir.IntType(32), 8), every,
                                                  ir.Constant(vty, ir.Undefined)],
                        ret=vty, overloads=[vty, ptr.type])


_I64 = ir.IntType(64)


def _pio2_parts() -> tuple[float, float]:
    """pi/2 = hi + lo (doubles, lo the rounded remainder), from 2/pi's integer expansion."""
    bits = 240
    pio2 = Fraction(1 << (2 * bits), _two_over_pi_bits(bits) << bits)  # (2/pi)^-1
    hi = float(pio2)
    return hi, float(pio2 - Fraction(hi))


_PIO2_HI, _PIO2_LO = _pio2_parts()


def reduce_huge_f64(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(k, r) with x = k pi/2 + r (k integer-valued, |r| <= pi/4 + tiny, in radians, rounded
    once from a double-double), for every finite f64 `x` (scalar or vector) with
    |x| >= THRESHOLD_F64; other lanes give values to be discarded."""
    ity = lu.with_scalar(x.type, _I64)

    def cd(v: float) -> ir.Constant:
        return lu.const(x.type, v)

    def ci(v: int) -> ir.Constant:
        return lu.const(ity, v)

    def rint(v: ir.Value) -> ir.Value:
        return _call(b, "llvm.rint", v)

    def mod4(t: ir.Value) -> ir.Value:
        fl = _call(b, "llvm.floor", b.fmul(t, cd(0.25)))
        return _call(b, "llvm.fma", fl, cd(-4.0), t)

    def two_sum(a: ir.Value, c: ir.Value) -> tuple[ir.Value, ir.Value]:
        s = b.fadd(a, c)
        cc = b.fsub(s, a)
        return s, b.fadd(b.fsub(a, b.fsub(s, cc)), b.fsub(c, cc))

    ax = _call(b, "llvm.fabs", x)
    bits = b.bitcast(ax, ity)
    # e = biased - 1075, the exponent of x's ulp; jb + 1 = ceil((e - 1) / 26), which puts the
    # ulp of xl * C_jb at 2^sB, sB in [-24, 1]; table index jb + 1 holds C_jb
    biased = b.lshr(bits, ci(52))
    jb1 = b.udiv(b.sub(b.select(b.icmp_signed("<", biased, ci(1051)), ci(1051), biased),
                       ci(1051)), ci(26))
    top = len(F64_TABLE) - 8
    jb1 = b.select(b.icmp_signed(">", jb1, ci(top)), ci(top), jb1)
    chunks = [_load_chunk(b, b.add(jb1, ci(i))) for i in range(8)]  # C_jb .. C_(jb+7)
    xh = b.bitcast(b.and_(bits, ci(~((1 << 27) - 1))), x.type)  # 26 bits
    xl = b.fmul(b.fsub(ax, xh), cd(2.0 ** -_F64_SCALE))  # exact, 27 bits
    xh = b.fmul(xh, cd(2.0 ** -_F64_SCALE))
    prod = [(b.fmul(xl, chunks[i]), b.fmul(xh, chunks[i + 1])) for i in range(7)]  # exact
    # exact part: B_jb + A_jb+1, then B_jb+1, A_jb+2, integers removed after each
    s = b.fadd(mod4(prod[0][0]), mod4(prod[0][1]))
    k = rint(s)
    s = b.fsub(s, k)
    for t in prod[1]:
        s = b.fadd(s, mod4(t))
        kk = rint(s)
        s = b.fsub(s, kk)
        k = b.fadd(k, kk)
    # double-double part (hi + lo, not renormalised: only the sum matters): B_jb+2 and A_jb+3
    # (below 4, bits down to 2^(sB-52)) without their integers, then the terms below 2^-24
    hi, lo = s, cd(0.0)
    for t in prod[2]:
        kk = rint(t)
        k = b.fadd(k, kk)
        hi, err = two_sum(hi, b.fsub(t, kk))
        lo = b.fadd(lo, err)
    kk = rint(hi)
    hi = b.fsub(hi, kk)  # exact: |hi| <= 3/2
    k = b.fadd(k, kk)
    for t in prod[3]:
        hi, err = two_sum(hi, t)
        lo = b.fadd(lo, err)
    for pair in prod[4:]:  # below 2^-50
        for t in pair:
            lo = b.fadd(lo, t)
    # radians: (hi + lo) * pi/2 with pi/2 = P1 + P2, in double-double, rounded once
    p = b.fmul(hi, cd(_PIO2_HI))
    err = _call(b, "llvm.fma", hi, cd(_PIO2_HI), b.fneg(p))
    r = b.fadd(p, b.fadd(err, b.fadd(b.fmul(hi, cd(_PIO2_LO)), b.fmul(lo, cd(_PIO2_HI)))))
    neg = b.fcmp_ordered("<", x, cd(0.0))
    return b.select(neg, b.fneg(k), k), b.select(neg, b.fneg(r), r)
