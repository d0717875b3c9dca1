"""Elementwise math for `xlc.numpy` beyond the HLO opcodes: inverse trigonometric and
hyperbolic functions, float decomposition (frexp, ldexp, modf, nextafter, spacing, signbit),
gcd/lcm, i0, logaddexp, nan_to_num and the numpy 2 bitwise spellings.

Everything is composed from existing `xlc.numpy` ops (there is no HLO `asin` or `nextafter`),
following `jax.numpy`: integer and bool inputs of float functions compute in f32, Python
scalars stay weakly typed, and bit-level functions work on the float's same-width integer
bitcast. Complex inputs are a TraceError (xlc has no complex path for these).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from xlc.frontend import dtypes
from xlc.frontend import lax as _lax
from xlc.frontend import numpy_api as xnp
from xlc.frontend.control_flow import while_loop
from xlc.frontend.eager import eager_ok
from xlc.frontend.tracer import Tracer, as_tracer, trace_error
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType as PT

__all__ = [
    "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "asin", "acos", "atan",
    "asinh", "acosh", "atanh", "atan2", "angle", "copysign", "deg2rad", "radians",
    "rad2deg", "degrees", "fabs", "float_power", "fmax", "fmin", "frexp", "ldexp", "modf",
    "gcd", "lcm", "heaviside", "hypot", "i0", "logaddexp", "logaddexp2", "nextafter",
    "positive", "rint", "trunc", "signbit", "sinc", "spacing", "isneginf", "isposinf",
    "iscomplex", "isreal", "nan_to_num", "bitwise_count", "bitwise_invert",
    "bitwise_left_shift", "bitwise_right_shift",
]

_LN2 = float(np.log(2.0))
_INT_OF_WIDTH = {2: PT.S16, 4: PT.S32, 8: PT.S64}


def _inexact(name: str, *xs: Any) -> list[Tracer]:
    """The operands promoted together, integers and bools then converted to f32 (JAX's
    promote_args_inexact, weak types kept); complex operands are a TraceError naming `name`."""
    ts = xnp.promote(*xs)
    pt = ts[0].ptype
    if pt.is_complex:
        raise trace_error(f"{name}: complex inputs are not supported, got "
                          + " and ".join(t.aval_text for t in ts))
    if not pt.is_float:
        ts = [xnp._convert_keep_weak(t, dtypes.canonical_float(pt), t.weak_type) for t in ts]
    return ts


def _int_view(x: Tracer) -> Tracer:
    """x's bits as the signed integer of its width (f32 -> s32, f64 -> s64, f16 -> s16)."""
    return _lax.bitcast_convert_type(x, _INT_OF_WIDTH[x.ptype.byte_size])


def _finfo(pt: PT) -> Any:
    import ml_dtypes

    return ml_dtypes.finfo(pt.dtype)


def _huge(t: Tracer) -> float:
    """sqrt of the largest finite value: above it x * x overflows."""
    return float(np.sqrt(np.float64(_finfo(t.ptype).max)))


# ---- inverse trigonometric and hyperbolic -------------------------------------------------
@eager_ok
def arctan(x: Any) -> Tracer:
    """Inverse tangent, atan2(x, 1)."""
    (t,) = _inexact("arctan", x)
    return xnp.arctan2(t, 1)


@eager_ok
def arcsin(x: Any) -> Tracer:
    """Inverse sine, 2 atan2(x, 1 + sqrt(1 - x^2)) (XLA's expansion); NaN outside [-1, 1]."""
    (t,) = _inexact("arcsin", x)
    return xnp.arctan2(t, 1 + xnp.sqrt(1 - t * t)) * 2


@eager_ok
def arccos(x: Any) -> Tracer:
    """Inverse cosine, 2 atan2(sqrt(1 - x^2), 1 + x) (pi at x = -1)."""
    (t,) = _inexact("arccos", x)
    return xnp.where(t == -1, np.pi, xnp.arctan2(xnp.sqrt(1 - t * t), 1 + t) * 2)


@eager_ok
def arcsinh(x: Any) -> Tracer:
    """Inverse hyperbolic sine: log(2|x|) for huge |x|, a log1p form elsewhere; odd in x."""
    (t,) = _inexact("arcsinh", x)
    a = abs(t)
    r = xnp.where(a >= _huge(t), xnp.log(a) + _LN2,
                  xnp.log1p(a + a * a / (1 + xnp.sqrt(1 + a * a))))
    return xnp.where(t < 0, -r, r)


@eager_ok
def arccosh(x: Any) -> Tracer:
    """Inverse hyperbolic cosine, log1p(y + sqrt(y (x + 1))) with y = x - 1; NaN below 1."""
    (t,) = _inexact("arccosh", x)
    y = t - 1
    return xnp.where(t >= _huge(t), xnp.log(t) + _LN2, xnp.log1p(y + xnp.sqrt(y * (t + 1))))


@eager_ok
def arctanh(x: Any) -> Tracer:
    """Inverse hyperbolic tangent, (log1p(x) - log1p(-x)) / 2; +-inf at +-1, NaN beyond."""
    (t,) = _inexact("arctanh", x)
    return (xnp.log1p(t) - xnp.log1p(-t)) * 0.5


asin, acos, atan = arcsin, arccos, arctan
asinh, acosh, atanh = arcsinh, arccosh, arctanh
atan2 = xnp.arctan2


@eager_ok
def angle(z: Any, deg: bool = False) -> Tracer:
    """The argument of z, atan2(imag, real): 0 or pi for reals, f32 for integers."""
    t = as_tracer(z)
    re, im = xnp.real(t), xnp.imag(t)
    if not re.ptype.is_float:
        re, im = (_lax.convert_element_type(v, dtypes.canonical_float(v.ptype))
                  for v in (re, im))
    r = xnp.arctan2(im, re)
    return rad2deg(r) if deg else r


# ---- sign, magnitude, rounding ---------------------------------------------------------------
@eager_ok
def signbit(x: Any) -> Tracer:
    """True where the sign bit is set (so for -0.0 and -NaN); x < 0 for integers, False for
    bools."""
    t = as_tracer(x)
    if t.ptype is PT.PRED:
        return xnp.full(t.shape, False, bool)
    if t.ptype.is_complex:
        raise trace_error(f"signbit: not defined for complex inputs, got {t.aval_text}")
    return t < 0 if not t.ptype.is_float else _int_view(t) < 0


@eager_ok
def copysign(x1: Any, x2: Any) -> Tracer:
    """|x1| with the sign bit of x2."""
    a, b = _inexact("copysign", x1, x2)
    return xnp.where(signbit(b), -abs(a), abs(a))


@eager_ok
def fabs(x: Any) -> Tracer:
    """|x| as a float (integers are converted to f32 first)."""
    (t,) = _inexact("fabs", x)
    return abs(t)


@eager_ok
def positive(x: Any) -> Tracer:
    """+x: the array itself (bools are rejected, as numpy does)."""
    t = as_tracer(x)
    if t.ptype is PT.PRED:
        raise trace_error(f"positive: not defined for bool inputs, got {t.aval_text}")
    return t


@eager_ok
def rint(x: Any) -> Tracer:
    """Round half to even; integers and bools become f32 (as in JAX)."""
    (t,) = _inexact("rint", x)
    return xnp._unary(Opcode.ROUND_EVEN, "rint", t)


@eager_ok
def trunc(x: Any) -> Tracer:
    """Round toward zero (identity for integers and bools)."""
    t = as_tracer(x)
    if not t.ptype.is_float:
        return t
    return xnp.where(t < 0, xnp.ceil(t), xnp.floor(t))


@eager_ok
def modf(x: Any) -> tuple[Tracer, Tracer]:
    """(fractional part, integral part), both with the sign of x (NaN fraction for inf, as
    JAX)."""
    (t,) = _inexact("modf", x)
    whole = xnp.where(t >= 0, xnp.floor(t), xnp.ceil(t))
    return t - whole, whole


@eager_ok
def deg2rad(x: Any) -> Tracer:
    """Degrees to radians, x * pi / 180."""
    (t,) = _inexact("deg2rad", x)
    return t * (np.pi / 180)


@eager_ok
def rad2deg(x: Any) -> Tracer:
    """Radians to degrees, x * 180 / pi."""
    (t,) = _inexact("rad2deg", x)
    return t * (180 / np.pi)


radians, degrees = deg2rad, rad2deg


# ---- binary float functions ------------------------------------------------------------------
@eager_ok
def float_power(x: Any, y: Any) -> Tracer:
    """x ** y in floating point (integers in f32, not numpy's f64, as in JAX)."""
    a, b = _inexact("float_power", x, y)
    return xnp.power(a, b)


@eager_ok
def fmax(x1: Any, x2: Any) -> Tracer:
    """Elementwise maximum ignoring NaNs (NaN only where both are NaN)."""
    return xnp.where(xnp.logical_or(xnp.greater(x1, x2), xnp.isnan(x2)), x1, x2)


@eager_ok
def fmin(x1: Any, x2: Any) -> Tracer:
    """Elementwise minimum ignoring NaNs (NaN only where both are NaN)."""
    return xnp.where(xnp.logical_or(xnp.less(x1, x2), xnp.isnan(x2)), x1, x2)


@eager_ok
def heaviside(x1: Any, x2: Any) -> Tracer:
    """0 where x1 < 0, 1 where x1 > 0, x2 where x1 == 0 (NaN stays NaN)."""
    a, b = _inexact("heaviside", x1, x2)
    return xnp.where(a < 0, 0, xnp.where(a > 0, 1, xnp.where(xnp.isnan(a), a, b)))


@eager_ok
def hypot(x1: Any, x2: Any) -> Tracer:
    """sqrt(x1^2 + x2^2) without overflow (scaled by the larger magnitude); inf beats NaN."""
    a, b = _inexact("hypot", x1, x2)
    a, b = abs(a), abs(b)
    hi, lo = xnp.maximum(a, b), xnp.minimum(a, b)
    ratio = lo / xnp.where(hi == 0, 1, hi)
    r = xnp.where(hi == 0, hi, hi * xnp.sqrt(1 + ratio * ratio))
    return xnp.where(xnp.logical_or(a == np.inf, b == np.inf), np.inf, r)


@eager_ok
def logaddexp(x1: Any, x2: Any) -> Tracer:
    """log(exp(x1) + exp(x2)) without overflow."""
    a, b = xnp._broadcast_all("logaddexp", _inexact("logaddexp", x1, x2))
    delta = a - b
    r = xnp.maximum(a, b) + xnp.log1p(xnp.exp(-abs(delta)))
    return xnp.where(xnp.isnan(delta), a + b, r)  # NaN, or infinities of one sign


@eager_ok
def logaddexp2(x1: Any, x2: Any) -> Tracer:
    """log2(2^x1 + 2^x2) without overflow."""
    a, b = xnp._broadcast_all("logaddexp2", _inexact("logaddexp2", x1, x2))
    delta = a - b
    r = xnp.maximum(a, b) + xnp.log1p(xnp.exp2(-abs(delta))) * (1 / _LN2)
    return xnp.where(xnp.isnan(delta), a + b, r)


@eager_ok
def sinc(x: Any) -> Tracer:
    """sin(pi x) / (pi x), 1 at 0."""
    (t,) = _inexact("sinc", x)
    px = xnp.where(t == 0, 1, t * np.pi)
    return xnp.where(t == 0, 1, xnp.sin(px) / px)


# ---- float bits ------------------------------------------------------------------------------
@eager_ok
def nextafter(x1: Any, x2: Any) -> Tracer:
    """The next representable float after x1 toward x2 (x2 where equal, NaN if either is):
    the bit pattern moves by one, up in magnitude when x2 lies away from zero."""
    a, b = xnp._broadcast_all("nextafter", _inexact("nextafter", x1, x2))
    it = _INT_OF_WIDTH[a.ptype.byte_size].dtype
    bits, sign, one = _int_view(a), np.asarray(np.iinfo(it).min, it), np.asarray(1, it)
    from_zero = (_int_view(b) & sign) | one  # the smallest subnormal with b's sign
    step = xnp.where(xnp.equal(a < b, a > 0), bits + one, bits - one)
    r = _lax.bitcast_convert_type(xnp.where(a == 0, from_zero, step), a.ptype)
    r = xnp.where(a == b, b, r)
    return xnp.where(xnp.logical_or(xnp.isnan(a), xnp.isnan(b)), a + b, r)


@eager_ok
def spacing(x: Any) -> Tracer:
    """The distance from x to the next float away from zero (toward +inf for f16, as JAX)."""
    (t,) = _inexact("spacing", x)
    if t.ptype is PT.F16:
        return nextafter(t, np.inf) - t
    r = nextafter(t, copysign(np.inf, t)) - t
    return xnp.where(r == 0, copysign(float(_finfo(t.ptype).smallest_subnormal), t), r)


@eager_ok
def frexp(x: Any) -> tuple[Tracer, Tracer]:
    """(mantissa in [0.5, 1) with x's sign, s32 exponent) with x = m * 2**e; (x, 0) for 0,
    inf and NaN. The exponent comes from the bits (subnormals scaled into the normal range
    first), the mantissa is x * 2**-e, exact, so its derivative is 2**-e (as JAX's)."""
    (t,) = _inexact("frexp", x)
    info = _finfo(t.ptype)
    it = _INT_OF_WIDTH[t.ptype.byte_size].dtype
    nmant, mask, bias = int(info.nmant), (1 << int(info.nexp)) - 1, 1 - int(info.minexp)
    sub = abs(t) < float(info.tiny)
    bits = _int_view(xnp.where(sub, t * float(2 ** nmant), t))
    e = xnp.where(sub, np.asarray(-nmant, it), np.asarray(0, it))
    e = e + ((bits >> np.asarray(nmant, it)) & np.asarray(mask, it)) + np.asarray(1 - bias, it)
    special = xnp.logical_or(xnp.logical_or(xnp.isinf(t), xnp.isnan(t)), t == 0)
    e = xnp.where(special, np.asarray(0, it), e)
    # 2**-e in two halves: 2**-e alone overflows for subnormal x (and is subnormal for the
    # largest floats); each half is a normal power of two, so both products are exact
    half = e >> np.asarray(1, it)
    m = t * _pow2(-half, t.ptype) * _pow2(half - e, t.ptype)
    return m, _lax.convert_element_type(e, PT.S32)


def _pow2(k: Tracer, pt: PT) -> Tracer:
    """2**k as `pt`, built from its bits (k within the normal exponent range)."""
    info = _finfo(pt)
    it = _INT_OF_WIDTH[pt.byte_size].dtype
    bias = 1 - int(info.minexp)
    return _lax.bitcast_convert_type((k + np.asarray(bias, it)) << np.asarray(int(info.nmant), it),
                                     pt)


@eager_ok
def ldexp(x1: Any, x2: Any) -> Tracer:
    """x1 * 2**x2 for an integer x2, without intermediate overflow (via frexp, as JAX)."""
    t2 = as_tracer(x2)
    if not t2.ptype.is_integer:
        raise trace_error(f"ldexp: the exponent must be an integer array, got {t2.aval_text}")
    (t1,) = _inexact("ldexp", x1)
    m, e = frexp(t1)
    e = _lax.convert_element_type(_lax.convert_element_type(e, t2.ptype) + t2, t1.ptype)
    m = xnp.where(e > 0, m * 2, m)
    e = xnp.where(e > 0, e - 1, e)
    r = m * xnp.power(np.asarray(2, t1.dtype), e)
    return xnp.where(xnp.logical_or(xnp.isinf(t1), t1 == 0), t1, r)


# ---- integers ----------------------------------------------------------------------------------
def _integers(name: str, x1: Any, x2: Any) -> list[Tracer]:
    a, b = xnp.promote(x1, x2)
    if not a.ptype.is_integer:
        raise trace_error(f"{name}: arguments must be integers, got {a.aval_text} and "
                          f"{b.aval_text}")
    return xnp._broadcast_all(name, [a, b])


@eager_ok
def gcd(x1: Any, x2: Any) -> Tracer:
    """Greatest common divisor of |x1| and |x2| (Euclid's algorithm in a while loop)."""
    a, b = _integers("gcd", x1, x2)

    def body(c: tuple[Tracer, Tracer]) -> tuple[Tracer, Tracer]:
        p, q = c
        nz = q != 0
        p, q = xnp.where(nz, q, p), xnp.where(nz, _lax.rem(p, xnp.where(nz, q, 1)), 0)
        return xnp.where(p < q, q, p), xnp.where(p < q, p, q)

    g, _ = while_loop(lambda c: xnp.any(c[1] != 0), body, (abs(a), abs(b)))
    return g


@eager_ok
def lcm(x1: Any, x2: Any) -> Tracer:
    """Least common multiple of |x1| and |x2| (0 if either is 0)."""
    a, b = _integers("lcm", x1, x2)
    a, b = abs(a), abs(b)
    d = gcd(a, b)
    return xnp.where(d == 0, 0, a * _lax.div(b, xnp.where(d == 0, 1, d)))


@eager_ok
def bitwise_count(x: Any) -> Tracer:
    """The number of set bits of |x|, as uint8 (HLO `popcnt`)."""
    t = as_tracer(x)
    if t.ptype is PT.PRED:
        t = _lax.convert_element_type(t, PT.U8)
    if not t.ptype.is_integer:
        raise trace_error(f"bitwise_count: needs an integer or bool operand, got {t.aval_text}")
    return _lax.convert_element_type(xnp._unary(Opcode.POPCNT, "bitwise_count", abs(t)), PT.U8)


bitwise_invert, bitwise_left_shift = xnp.invert, xnp.left_shift
bitwise_right_shift = xnp.right_shift


# ---- classification and cleanup ----------------------------------------------------------------
def _is_signed_inf(name: str, x: Any, value: float) -> Tracer:
    t = as_tracer(x)
    if t.ptype.is_complex:
        raise trace_error(f"{name}: not defined for complex inputs, got {t.aval_text}")
    if not t.ptype.is_float:
        return xnp.full(t.shape, False, bool)
    return t == value


@eager_ok
def isposinf(x: Any) -> Tracer:
    """True where x is +inf."""
    return _is_signed_inf("isposinf", x, np.inf)


@eager_ok
def isneginf(x: Any) -> Tracer:
    """True where x is -inf."""
    return _is_signed_inf("isneginf", x, -np.inf)


@eager_ok
def iscomplex(x: Any) -> Tracer:
    """True where the imaginary part is nonzero (all False for real arrays)."""
    return xnp.imag(x) != 0


@eager_ok
def isreal(x: Any) -> Tracer:
    """True where the imaginary part is zero (all True for real arrays)."""
    return xnp.imag(x) == 0


@eager_ok
def nan_to_num(x: Any, copy: bool = True, nan: Any = 0.0, posinf: Any = None,
               neginf: Any = None) -> Tracer:
    """NaN -> `nan`, +-inf -> `posinf`/`neginf` (the dtype's largest finite values by default);
    integer arrays are returned unchanged."""
    del copy
    t = as_tracer(x)
    if t.ptype.is_complex:
        raise trace_error(f"nan_to_num: complex inputs are not supported, got {t.aval_text}")
    if not t.ptype.is_float:
        return t
    info = _finfo(t.ptype)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    out = xnp.where(xnp.isnan(t), as_tracer(nan, t.ptype), t)
    out = xnp.where(out == np.inf, as_tracer(hi, t.ptype), out)
    return xnp.where(out == -np.inf, as_tracer(lo, t.ptype), out)


@eager_ok
def i0(x: Any) -> Tracer:
    """The modified Bessel function of the first kind, order 0: exp(|x|) i0e(|x|)."""
    from xlc.frontend.lax_special import bessel_i0e

    (t,) = _inexact("i0", x)
    a = abs(t)
    return xnp.exp(a) * bessel_i0e(a)
