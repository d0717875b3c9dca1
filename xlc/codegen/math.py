"""Transcendental functions as vectorisable LLVM IR (polynomials, rationals, selects).

Every function takes an IRBuilder and float/double values (scalars or vectors; the code is the
same for both) and returns a value of the same type. Only intrinsics that LLVM lowers to SIMD
instructions are used (fabs, copysign, rint, floor, trunc, sqrt, fma, fmuladd, minnum, maxnum;
ldexp only where `has_vector_ldexp` says it is one instruction); never llvm.exp/llvm.tanh/...
(those become scalar libm calls on CPU, cpu-perf.md lesson 1).
f16/bf16 callers extend to f32 first (`xlc.codegen.elemental` does).

Coefficients are exact Taylor/series coefficients, or our own fits (f32 exp and log minimax
polynomials, tanh rational, erf tail Chebyshev series) derived by
tools/fit_math_coefficients.py and stored as literals in `xlc.codegen.math_coeffs`, so the
generated code is identical on every machine. Edge cases (inf, NaN, +-0, denormal inputs and
results, overflow) are handled with selects. Measured accuracy (tests/codegen/test_math.py:
random bit patterns over the whole range, dense in-domain samples and special values):

| function | f32 max ulp | f64 max ulp | notes                                                    |
|----------|-------------|-------------|----------------------------------------------------------|
| exp      | 1           | 1           | denormal results rounded once; f32 polynomial degree 6   |
| expm1    | 2           | 2           | Taylor for |x| < 0.5                                     |
| log      | 1           | 1           | denormal inputs rescaled; f32 0.91 on all of [0.25, 4)   |
| log1p    | 2.5         | 2.5         | Goldberg's u = 1 + x trick                               |
| tanh     | 6           | 3           | f32: rational (abs err <= 3.5e-7); f64: via expm1        |
| logistic | 3           | 3           |                                                          |
| erf      | 3           | 3.5         | Taylor near 0; else 1 - exp(-x^2) g(x), g Chebyshev fit  |
| sin, cos | 2           | 2           | whole range: Payne-Hanek from 2^25 (f32) / 2^48 (f64),   |
|          |             |             | `trig_reduction.py`, unless value ranges rule it out     |
| tan      | 3.5         | 3.5         | same as sin                                              |
| atan2    | 3.5         | 3.5         |                                                          |
| pow      | 1 (via f64) | see note    | f64: exact-ish binary powering for integer |y| <= 1024,  |
|          |             |             | else relative error ~(4 + 2|y ln x|) ulp                 |
| sqrt     | 0.5         | 0.5         | llvm.sqrt, correctly rounded                             |
| rsqrt    | 1.5         | 1.5         | 1 / sqrt(x)                                              |
| cbrt     | 1           | 1           | Newton iterations from a bit-level guess                 |

(ulp errors against the exact value: 0.5 is correctly rounded.)
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from llvmlite import ir

from xlc.codegen import math_coeffs as mc
from xlc.codegen.llvm_utils import const, has_vector_ldexp, intrinsic, with_scalar
from xlc.codegen.math_float import LN2_HI, LN2_LO, PIO2, FloatOps, taylor
from xlc.codegen.trig_guard import emit_trig
from xlc.codegen.trig_reduction import THRESHOLD, THRESHOLD_F64, reduce_huge_f32, reduce_huge_f64

# ---- exp family ---------------------------------------------------------------------------
_EXP_TERMS_64 = 14  # Taylor terms for e^r, |r| <= ln2/2 (f32: the minimax mc.EXP32)


def exp(b: ir.IRBuilder, x: ir.Value,
        arg_range: tuple[float, float] = (-math.inf, math.inf)) -> ir.Value:
    """e^x. Range reduction x = n ln2 + r with n found by the round-to-nearest shifter trick
    (k = x/ln2 + 1.5*2^mant holds n in its low mantissa bits: no float-to-int conversion, so a
    NaN flows through as a NaN, never as poison), a polynomial for e^r (f32: degree-6
    minimax; f64: Taylor), then p * 2^n: one `llvm.ldexp` where it is a single instruction
    (x86 AVX-512 vscalef, which rounds denormal results once and overflows to inf), else two
    exact power-of-two multiplies.
    `arg_range` bounds every non-NaN x (`xlc.codegen.value_range`): a clamp it makes
    unnecessary is left out."""
    f = FloatOps(b, x.type)
    lo, hi = (-104.0, 89.0) if not f.is64 else (-746.0, 710.0)
    xc = x  # clamped so that n fits the shifter's mantissa; a NaN stays NaN
    if arg_range[0] < lo:
        xc = f.sel(f.cmp("<", xc, f.c(lo)), f.c(lo), xc)
    if arg_range[1] > hi:
        xc = f.sel(f.cmp(">", xc, f.c(hi)), f.c(hi), xc)
    shifter = f.c(1.5 * 2.0 ** f.mant)
    k = f.fma(xc, f.c(1.0 / math.log(2.0)), shifter)
    n = f.sub(k, shifter)
    r = f.fma(n, f.c(-LN2_HI[f.bits]), xc)
    r = f.fma(n, f.c(-LN2_LO[f.bits]), r)
    if f.is64:
        p = f.poly(r, taylor(lambda j: 1.0 / math.factorial(j), _EXP_TERMS_64))
    else:
        p = f.poly(r, [*mc.EXP32[::-1], 1.0, 1.0])
    ni = b.sub(f.to_bits(k), f.to_bits(shifter))  # n as an integer (garbage for NaN: p is NaN)
    if has_vector_ldexp(b.module):
        return f.ldexp(p, ni)
    n1 = b.ashr(ni, f.ci(1))
    n2 = b.sub(ni, n1)
    return f.mul(f.mul(p, f.pow2i(n1)), f.pow2i(n2))


_EXPM1_TERMS = {32: 9, 64: 16}  # Taylor terms of (e^x - 1)/x for |x| < 0.5


def expm1(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """e^x - 1: Taylor series for |x| < 0.5 (no cancellation), exp(x) - 1 elsewhere."""
    f = FloatOps(b, x.type)
    small = f.cmp("<", f.abs(x), f.c(0.5))
    q = f.poly(x, taylor(lambda k: 1.0 / math.factorial(k + 1), _EXPM1_TERMS[f.bits]))
    series = f.mul(x, q)
    big = f.sub(exp(b, x), f.c(1.0))
    return f.sel(small, series, big)


# ---- log family ---------------------------------------------------------------------------
_LOG_TERMS_64 = 11  # series of 2 atanh(s), s^2 <= 0.04 (f32: the minimax mc.LOG32)


def log(b: ir.IRBuilder, x: ir.Value, positive_normal: bool = False) -> ir.Value:
    """Natural log. x = m 2^e with m in [2/3, 4/3) (found by subtracting the bits of 2/3:
    integer operations only), f = m - 1; f32: log(m) = f + f^2 Q(f) with a degree-8 minimax Q
    (no division); f64: 2 atanh(f / (2 + f)) in fdlibm's cancellation-free arrangement.
    Denormal inputs are rescaled first.
    `positive_normal=True` promises that every non-NaN x is a positive normal number or +inf
    (`xlc.codegen.value_range` proves it for e.g. log(x*x + 1)): the denormal, zero and
    negative cases are then left out."""
    f = FloatOps(b, x.type)
    dt = np.float32 if not f.is64 else np.float64
    scale_bits = 25 if not f.is64 else 54
    xs = x
    if not positive_normal:
        denorm = f.cmp("<", x, f.c(float(np.finfo(dt).tiny)))
        xs = f.sel(denorm, f.mul(x, f.c(2.0 ** scale_bits)), x)
    two_thirds = int(np.array(2.0 / 3.0, dt).view(np.int32 if not f.is64 else np.int64))
    ix = b.sub(f.to_bits(xs), f.ci(two_thirds))
    e = b.ashr(ix, f.ci(f.mant))
    if not positive_normal:
        e = b.sub(e, f.sel(denorm, f.ci(scale_bits), f.ci(0)))
    m = f.from_bits(b.add(b.and_(ix, f.ci((1 << f.mant) - 1)), f.ci(two_thirds)))
    fe = b.sitofp(e, f.ty)
    fm = f.sub(m, f.c(1.0))  # exact, in [-1/3, 1/3)
    lo = f.mul(fe, f.c(LN2_LO[f.bits]))
    if f.is64:
        s = f.div_by_normal(fm, f.add(f.c(2.0), fm))  # 2 + fm in [1.6, 2.4]
        z = f.mul(s, s)
        # R = 2 z / 3 + 2 z^2 / 5 + ...
        rr = f.mul(z, f.poly(z, taylor(lambda k: 2.0 / (2 * k + 3), _LOG_TERMS_64)))
        hfsq = f.mul(f.c(0.5), f.mul(fm, fm))
        res = f.sub(fm, f.sub(hfsq, f.fma(s, f.add(hfsq, rr), lo)))
    else:  # log(1 + fm) = fm + fm^2 Q(fm), no division
        res = f.add(fm, f.fma(f.mul(fm, fm), f.poly(fm, mc.LOG32[::-1]), lo))
    res = f.fma(fe, f.c(LN2_HI[f.bits]), res)
    # +inf and NaN give x itself (one unordered compare covers both)
    res = f.sel(f.b.fcmp_unordered(">=", x, f.c(math.inf)), x, res)
    if positive_normal:
        return res
    res = f.sel(f.cmp("==", x, f.c(0.0)), f.c(-math.inf), res)
    return f.sel(f.cmp("<", x, f.c(0.0)), f.c(math.nan), res)


def log1p(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """log(1 + x) = log(u) * x / (u - 1) with u = 1 + x (exact correction), x when u == 1."""
    f = FloatOps(b, x.type)
    u = f.add(f.c(1.0), x)
    res = f.mul(log(b, u), f.div(x, f.sub(u, f.c(1.0))))
    res = f.sel(f.cmp("==", u, f.c(1.0)), x, res)
    return f.sel(f.cmp("==", x, f.c(math.inf)), x, res)


# ---- hyperbolic / sigmoid -----------------------------------------------------------------
def tanh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """tanh. f32: odd rational x P(x^2) / Q(x^2) on the clamped |x| (11 fma + 1 divide: the
    fast form for fused elementwise loops; within 0.7 ulp of x for |x| < 2^-12), exactly +-1
    for |x| >= 9.1, the sign copied from x.
    f64: -e / (2 + e) with e = expm1(-2|x|), sign restored (no overflow, full relative
    accuracy near 0)."""
    f = FloatOps(b, x.type)
    if f.is64:
        e = expm1(b, f.mul(f.c(-2.0), f.abs(x)))
        res = f.div(f.neg(e), f.add(f.c(2.0), e))
        return f.copysign(res, x)
    ax = f.abs(x)
    xc = f.sel(f.cmp(">", ax, f.c(mc.TANH_CLAMP)), f.c(mc.TANH_CLAMP), ax)  # NaN flows through
    z = f.mul(xc, xc)
    q = f.poly(z, mc.TANH_Q[::-1])  # >= 1
    res = f.div_by_normal(f.mul(xc, f.poly(z, mc.TANH_P[::-1])), q)
    # tanh rounds to exactly 1 from |x| ~ 9.01 on (so 1 + tanh(x) is 0 there, as in numpy)
    res = f.sel(f.cmp(">=", ax, f.c(9.1)), f.c(1.0), res)
    res = f.sel(f.cmp(">", res, f.c(1.0)), f.c(1.0), res)  # after the select above: one vminps
    return f.copysign(res, x)  # odd; also keeps the sign of -0


def logistic(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """1 / (1 + e^-x), computed as r or e r with e = exp(-|x|), r = 1 / (1 + e): accurate
    relative error for both tails, never overflows."""
    f = FloatOps(b, x.type)
    e = exp(b, f.neg(f.abs(x)), arg_range=(-math.inf, 0.0))
    r = f.div(f.c(1.0), f.add(f.c(1.0), e))
    return f.sel(f.cmp(">=", x, f.c(0.0)), r, f.mul(e, r))


# ---- erf ------------------------------------------------------------------------------------
_ERF_TAYLOR = {32: 11, 64: 27}
_ERF_LO = {32: 1.0, 64: 1.5}  # Taylor below, erfc tail fit above
_ERF_HI = {32: 4.0, 64: 6.0}


def _clenshaw(f: FloatOps, t: ir.Value, coeffs: Sequence[float]) -> ir.Value:
    """sum c_k T_k(t) by Clenshaw's recurrence."""
    two_t = f.add(t, t)
    b1 = f.c(0.0)
    b2 = f.c(0.0)
    for c in coeffs[:0:-1]:
        b0 = f.add(f.fma(two_t, b1, f.neg(b2)), f.c(c))
        b2, b1 = b1, b0
    return f.add(f.fma(t, b1, f.neg(b2)), f.c(coeffs[0]))


def erf(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """erf: x P(x^2) (Taylor) for |x| < 1 (f32) / 1.5 (f64); beyond, 1 - exp(-x^2) g(|x|) with
    g = erfc(x) e^(x^2) as a Chebyshev series; x^2 is split exactly (fma) so exp(-x^2) keeps
    its accuracy."""
    f = FloatOps(b, x.type)
    two_over_sqrt_pi = 2.0 / math.sqrt(math.pi)
    z = f.mul(x, x)
    near = f.mul(x, f.poly(z, taylor(
        lambda k: two_over_sqrt_pi * (-1) ** k / (math.factorial(k) * (2 * k + 1)),
        _ERF_TAYLOR[f.bits])))
    hi, lo = _ERF_HI[f.bits], _ERF_LO[f.bits]
    ax = f.minnum(f.maxnum(f.abs(x), f.c(lo)), f.c(hi))
    sq = f.mul(ax, ax)
    sq_lo = f.fma_exact(ax, ax, f.neg(sq))
    e = f.mul(exp(b, f.neg(sq)), f.sub(f.c(1.0), sq_lo))
    t = f.div(f.sub(f.add(ax, ax), f.c(lo + hi)), f.c(hi - lo))
    g = _clenshaw(f, t, mc.ERF_CHEB[f.bits])
    tail = f.copysign(f.sub(f.c(1.0), f.mul(e, g)), x)
    res = f.sel(f.cmp("<", f.abs(x), f.c(lo)), near, tail)
    return f.sel(f.isnan(x), x, res)


# ---- trigonometry ---------------------------------------------------------------------------
_SIN_TERMS = {32: 5, 64: 9}  # odd Taylor terms of sin(r)/r in r^2, |r| <= pi/4
_COS_TERMS = {32: 6, 64: 10}


def _sincos_reduced(f: FloatOps, x: ir.Value, huge: bool = True
                    ) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(sin r, cos r, quadrant q in 0..3 as ity) with x = k pi/2 + r, |r| <= pi/4.

    f64: Cody-Waite with a 3-part pi/2 and exact FMAs (accurate for |x| < ~1e9). f32: the
    reduction is carried out in f64 (a float widens exactly, k is an exact integer and r keeps
    far more than f32 precision), so f32 results are accurate up to |x| ~ 1e13 (where k's
    rounding starts to slip) instead of ~1e4 - positional encodings and the like reach 1e5
    and more. It costs ~12 more vector instructions per 16 elements (sin of 4M floats on one
    core 1.7 -> 2.7 ms; XLA:CPU takes 18 ms for the same on two). With `huge` (unless the
    caller knows |x| is smaller), arguments from 2^25 (f32) / 2^48 (f64) up take the exact
    Payne-Hanek reductions of `xlc.codegen.trig_reduction`: accurate over the whole range."""
    b = f.b
    if f.is64:
        k = f.un("rint", f.mul(x, f.c(2.0 / math.pi)))
        c1, c2, c3 = PIO2[64]
        r = f.fma_exact(f.neg(k), f.c(c1), x)
        r = f.fma_exact(f.neg(k), f.c(c2), r)
        r = f.fma_exact(f.neg(k), f.c(c3), r)
        if huge:  # exact Payne-Hanek reduction from 2^48 up
            big = f.cmp(">=", f.abs(x), f.c(THRESHOLD_F64))
            kh, rh = reduce_huge_f64(b, x)
            k = f.sel(big, kh, k)
            r = f.sel(big, rh, r)
        kf = f.sel(f.cmp("<", f.abs(k), f.c(2.0 ** f.mant)), k, f.c(0.0))  # finite, exact
        kmod = f.sub(kf, f.mul(f.c(4.0), f.un("floor", f.mul(kf, f.c(0.25)))))
        q = f.to_int(kmod)
    else:
        d = FloatOps(b, with_scalar(f.ty, ir.DoubleType()))
        xd = b.fpext(x, d.ty)
        k = d.un("rint", d.mul(xd, d.c(2.0 / math.pi)))
        c1, c2, _ = PIO2[64]  # 106 bits of pi/2: plenty for an f32 result up to |x| ~ 1e16
        rd = d.fma_exact(d.neg(k), d.c(c1), xd)
        rd = d.fma_exact(d.neg(k), d.c(c2), rd)
        if huge:  # exact Payne-Hanek reduction from 2^25 up
            big = d.cmp(">=", d.abs(xd), d.c(THRESHOLD))
            kh, rh = reduce_huge_f32(b, x)
            k = d.sel(big, kh, k)
            rd = d.sel(big, d.mul(rh, d.c(math.pi / 2)), rd)
        r = b.fptrunc(rd, f.ty)
        kc = d.minnum(d.maxnum(k, d.c(-(2.0 ** 62))), d.c(2.0 ** 62))  # NaN -> bound
        ki = b.fptosi(kc, with_scalar(f.ty, ir.IntType(64)))
        q = b.trunc(b.and_(ki, const(ki.type, 3)), f.ity)
    z = f.mul(r, r)
    s = f.mul(r, f.poly(z, taylor(lambda j: (-1) ** j / math.factorial(2 * j + 1),
                                   _SIN_TERMS[f.bits])))
    c = f.poly(z, taylor(lambda j: (-1) ** j / math.factorial(2 * j), _COS_TERMS[f.bits]))
    return s, c, q


def _quadrant(f: FloatOps, q: ir.Value, v0: ir.Value, v1: ir.Value, v2: ir.Value,
              v3: ir.Value) -> ir.Value:
    b = f.b
    lo = f.sel(b.icmp_signed("==", q, f.ci(0)), v0, v1)
    hi = f.sel(b.icmp_signed("==", q, f.ci(2)), v2, v3)
    return f.sel(b.icmp_signed("<", q, f.ci(2)), lo, hi)


def _finish_trig(f: FloatOps, x: ir.Value, res: ir.Value, bound: bool = True) -> ir.Value:
    if bound:  # huge arguments beyond the reduction's range: keep the result in [-1, 1]
        res = f.minnum(f.maxnum(res, f.c(-1.0)), f.c(1.0))
    bad = f.b.not_(f.cmp("<", f.abs(x), f.c(math.inf)))
    return f.sel(bad, f.c(math.nan), res)


def sin(b: ir.IRBuilder, x: ir.Value, arg_range: tuple[float, float] = (-math.inf, math.inf),
        huge: bool | None = None) -> ir.Value:
    """sin by Cody-Waite reduction modulo pi/2 (3-part constant, exact fma) and Taylor; with
    `huge`, Payne-Hanek from 2^25 (f32) / 2^48 (f64) up. By default `trig_guard.emit_trig`
    decides from `arg_range` and runs the huge form only for vectors that need it."""
    if huge is None:
        return emit_trig(b, "sin", x, arg_range, lambda bb, v, h: sin(bb, v, huge=h))
    f = FloatOps(b, x.type)
    s, c, q = _sincos_reduced(f, x, huge)
    res = _quadrant(f, q, s, c, f.neg(s), f.neg(c))
    res = f.sel(f.cmp("==", x, f.c(0.0)), x, res)  # the reduction turns -0 into +0
    return _finish_trig(f, x, res)


def cos(b: ir.IRBuilder, x: ir.Value, arg_range: tuple[float, float] = (-math.inf, math.inf),
        huge: bool | None = None) -> ir.Value:
    """cos, same reduction as `sin`."""
    if huge is None:
        return emit_trig(b, "cos", x, arg_range, lambda bb, v, h: cos(bb, v, huge=h))
    f = FloatOps(b, x.type)
    s, c, q = _sincos_reduced(f, x, huge)
    res = _quadrant(f, q, c, f.neg(s), f.neg(c), s)
    return _finish_trig(f, x, res)


def tan(b: ir.IRBuilder, x: ir.Value, arg_range: tuple[float, float] = (-math.inf, math.inf),
        huge: bool | None = None) -> ir.Value:
    """tan = s/c (even quadrant) or -c/s (odd quadrant)."""
    if huge is None:
        return emit_trig(b, "tan", x, arg_range, lambda bb, v, h: tan(bb, v, huge=h))
    f = FloatOps(b, x.type)
    s, c, q = _sincos_reduced(f, x, huge)
    odd = b.trunc(q, with_scalar(f.ty, ir.IntType(1)))
    res = f.sel(odd, f.div(f.neg(c), s), f.div(s, c))
    res = f.sel(f.cmp("==", x, f.c(0.0)), x, res)  # keep the sign of -0
    return _finish_trig(f, x, res, bound=False)


_ATAN_TERMS = {32: 5, 64: 12}


def _atan_unit(f: FloatOps, t: ir.Value) -> ir.Value:
    """atan(t) for t in [0, 1]: fold to |u| <= tan(pi/8), halve once, Taylor series."""
    tan_pi_8 = math.sqrt(2.0) - 1.0
    fold = f.cmp(">", t, f.c(tan_pi_8))
    u = f.sel(fold, f.div(f.sub(t, f.c(1.0)), f.add(t, f.c(1.0))), t)
    base = f.sel(fold, f.c(math.pi / 4), f.c(0.0))
    one = f.c(1.0)
    h = f.div(u, f.add(one, intrinsic(f.b, "llvm.sqrt", [f.fma(u, u, one)])))
    z = f.mul(h, h)
    a = f.mul(h, f.poly(z, taylor(lambda k: (-1) ** k / (2 * k + 1), _ATAN_TERMS[f.bits])))
    return f.fma(f.c(2.0), a, base)


def atan2(b: ir.IRBuilder, y: ir.Value, x: ir.Value) -> ir.Value:
    """atan2(y, x) with C99 special cases (signed zeros, infinities, NaN)."""
    f = FloatOps(b, x.type)
    ax, ay = f.abs(x), f.abs(y)
    swap = f.cmp(">", ay, ax)
    num = f.sel(swap, ax, ay)
    den = f.sel(swap, ay, ax)
    t = _atan_unit(f, f.div(num, den))
    both_inf = b.and_(f.isinf(x), f.isinf(y))
    t = f.sel(both_inf, f.c(math.pi / 4), t)
    t = f.sel(f.cmp("==", den, f.c(0.0)), f.c(0.0), t)
    t = f.sel(swap, f.sub(f.c(math.pi / 2), t), t)
    t = f.sel(f.signbit(x), f.sub(f.c(math.pi), t), t)
    res = f.copysign(t, y)
    return f.sel(b.or_(f.isnan(x), f.isnan(y)), f.add(x, y), res)


# ---- powers and roots -----------------------------------------------------------------------
def _exp_log_pow(b: ir.IRBuilder, ax: ir.Value, y: ir.Value) -> ir.Value:
    """|x|^y as exp(y log|x|), in f64 for f32 inputs (then rounded once)."""
    f = FloatOps(b, ax.type)
    if f.is64:
        general = exp(b, f.mul(y, log(b, ax)))
        # integer |y| <= 1024: binary powering (exact for exact cases, error ~ log2|y| ulp)
        ay = f.abs(y)
        small_int = b.and_(f.cmp("==", f.un("floor", ay), ay), f.cmp("<=", ay, f.c(1024.0)))
        n = f.to_int(f.sel(small_int, ay, f.c(0.0)))
        acc, sq = f.c(1.0), ax
        for bit in range(11):
            on = b.icmp_signed("!=", b.and_(n, f.ci(1 << bit)), f.ci(0))
            acc = f.sel(on, f.mul(acc, sq), acc)
            sq = f.mul(sq, sq)
        acc = f.sel(f.signbit(y), f.div(f.c(1.0), acc), acc)
        return f.sel(small_int, acc, general)
    dty = with_scalar(ax.type, ir.DoubleType())
    axd, yd = b.fpext(ax, dty), b.fpext(y, dty)
    fd = FloatOps(b, dty)
    return b.fptrunc(exp(b, fd.mul(yd, log(b, axd))), ax.type)


def pow(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:  # noqa: A001
    """x^y with C99 `pow` special cases: y == 0 or x == 1 -> 1; negative x needs an integer y
    (sign from its parity), else NaN; (-1)^(+-inf) = 1; zeros and infinities signed."""
    f = FloatOps(b, x.type)
    res = _exp_log_pow(b, f.abs(x), y)
    y_int = f.cmp("==", f.un("floor", y), y)
    half = f.mul(y, f.c(0.5))
    y_odd = b.and_(y_int, f.cmp("!=", f.un("floor", half), half))
    res = f.sel(b.and_(f.signbit(x), y_odd), f.neg(res), res)
    neg_nonint = b.and_(f.cmp("<", x, f.c(0.0)), b.not_(y_int))
    res = f.sel(b.and_(neg_nonint, f.cmp("!=", x, f.c(-math.inf))), f.c(math.nan), res)
    res = f.sel(b.and_(f.cmp("==", f.abs(x), f.c(1.0)), f.isinf(y)), f.c(1.0), res)
    one = b.or_(f.cmp("==", y, f.c(0.0)), f.cmp("==", x, f.c(1.0)))
    return f.sel(one, f.c(1.0), res)


def sqrt(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """llvm.sqrt (a single SIMD instruction; correctly rounded)."""
    return intrinsic(b, "llvm.sqrt", [x])


def rsqrt(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """1 / sqrt(x)."""
    return b.fdiv(const(x.type, 1.0), sqrt(b, x))


def cbrt(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Cube root: bit-level first guess (exponent / 3), Newton steps, sign restored; zeros,
    infinities and NaN pass through, denormals are rescaled by 2^(3k) first."""
    f = FloatOps(b, x.type)
    ax = f.abs(x)
    min_normal = float(np.finfo(np.float32 if not f.is64 else np.float64).tiny)
    k = 18 if not f.is64 else 36
    denorm = f.cmp("<", ax, f.c(min_normal))
    axs = f.sel(denorm, f.mul(ax, f.c(2.0 ** (3 * k))), ax)
    one_bits = (f.bias << f.mant)
    guess_bits = b.add(b.udiv(f.to_bits(axs), f.ci(3)), f.ci(one_bits - one_bits // 3))
    yv = f.from_bits(guess_bits)
    third = f.c(1.0 / 3.0)
    for _ in range(3 if not f.is64 else 4):
        # y <- y - (y^3 - a) / (3 y^2) = (2 y + a / y^2) / 3
        yv = f.mul(third, f.add(f.add(yv, yv), f.div(axs, f.mul(yv, yv))))
    # last step as a small correction, so its rounding error stays small
    yv = f.fma(f.sub(f.div(axs, f.mul(yv, yv)), yv), third, yv)
    yv = f.sel(denorm, f.mul(yv, f.c(2.0 ** -k)), yv)
    special = b.or_(f.cmp("==", ax, f.c(0.0)), b.not_(f.cmp("<", ax, f.c(math.inf))))
    yv = f.sel(special, ax, yv)
    return f.copysign(yv, x)


# Unary functions by name (what elemental.py dispatches to).
UNARY: dict[str, Callable[[ir.IRBuilder, ir.Value], ir.Value]] = {
    "exp": exp, "expm1": expm1, "log": log, "log1p": log1p, "tanh": tanh,
    "logistic": logistic, "erf": erf, "sin": sin, "cos": cos, "tan": tan, "sqrt": sqrt,
    "rsqrt": rsqrt, "cbrt": cbrt,
}
BINARY: dict[str, Callable[[ir.IRBuilder, ir.Value, ir.Value], ir.Value]] = {
    "pow": pow, "atan2": atan2,
}
