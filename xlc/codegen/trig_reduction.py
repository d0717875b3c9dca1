"""Payne-Hanek argument reduction for f32 `sin`/`cos`/`tan` of huge arguments, in LLVM IR.

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
"""
from __future__ import annotations

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
