"""`jax.lax`'s elementwise functions without an HLO opcode of their own, re-exported by
`xlc.lax`: the inverse trigonometric and hyperbolic family (acos and asin without the
cancellation of 1 - x^2 near |x| = 1), `sinh` / `cosh` (accurate near 0 and up to the overflow
threshold), `exp2` (exact power-of-two scaling), `square`, `reciprocal`, `integer_pow`,
`nextafter`, `mulhi`, and the bit-level opcodes `clz`, `population_count`,
`shift_right_arithmetic`, `shift_right_logical`.

As elsewhere in `xlc.lax`, binaries promote their operands the way `xlc.numpy` does instead of
requiring equal dtypes; float functions compute integer inputs in f32.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from xlc.frontend import lax as _lax
from xlc.frontend.eager import eager_ok
from xlc.frontend.tracer import Tracer, as_tracer, emit, infer, trace_error
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType as PT

__all__ = ["acos", "acosh", "asin", "asinh", "atan", "atanh", "sinh", "cosh", "exp2",
           "square", "reciprocal", "integer_pow", "nextafter", "clz", "population_count",
           "shift_right_arithmetic", "shift_right_logical", "mulhi"]


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


def _math() -> Any:
    from xlc.frontend import numpy_math

    return numpy_math


# ---- elementwise ------------------------------------------------------------------------------
def _float_operand(name: str, x: Any) -> Tracer:
    """x as a float tracer (integers and bools become f32; complex is refused)."""
    (t,) = _math()._inexact(name, x)
    return t


@eager_ok
def acos(x: Any) -> Tracer:
    """Inverse cosine, 2 atan2(sqrt((1 - x)(1 + x)), 1 + x) (no cancellation in 1 - x^2 near
    |x| = 1); pi at -1, NaN outside [-1, 1]."""
    xnp = _np()
    t = _float_operand("acos", x)
    r = xnp.arctan2(xnp.sqrt((1 - t) * (1 + t)), 1 + t) * 2
    return xnp.where(t == -1, np.pi, r)


@eager_ok
def acosh(x: Any) -> Tracer:
    """Inverse hyperbolic cosine."""
    return _math().arccosh(x)


@eager_ok
def asin(x: Any) -> Tracer:
    """Inverse sine, 2 atan2(x, 1 + sqrt((1 - x)(1 + x))); NaN outside [-1, 1]."""
    xnp = _np()
    t = _float_operand("asin", x)
    return xnp.arctan2(t, 1 + xnp.sqrt((1 - t) * (1 + t))) * 2


@eager_ok
def asinh(x: Any) -> Tracer:
    """Inverse hyperbolic sine."""
    return _math().arcsinh(x)


@eager_ok
def atan(x: Any) -> Tracer:
    """Inverse tangent."""
    return _math().arctan(x)


@eager_ok
def atanh(x: Any) -> Tracer:
    """Inverse hyperbolic tangent."""
    return _math().arctanh(x)


def _half_exp(a: Tracer) -> Tracer:
    """exp(a) / 2 for a >= 0 without overflowing before the result does: exp(a) / 2 while
    exp(a) is finite, else (exp(a / 2) / 2) * exp(a / 2)."""
    xnp = _np()
    limit = float(np.log(float(_math()._finfo(a.ptype).max))) - 1.0
    direct = xnp.exp(xnp.minimum(a, limit)) * 0.5
    h = xnp.exp(a * 0.5)
    return xnp.where(a < limit, direct, (h * 0.5) * h)


@eager_ok
def sinh(x: Any) -> Tracer:
    """Hyperbolic sine, accurate near zero (through expm1) and up to the overflow threshold."""
    xnp = _np()
    t = _float_operand("sinh", x)
    a = xnp.abs(t)
    e = xnp.expm1(xnp.minimum(a, 1.0))
    small = (e + e / (e + 1)) * 0.5
    h = _half_exp(a)
    r = xnp.where(a < 1, small, h - 0.25 / h)
    return xnp.where(t < 0, -r, r)


@eager_ok
def cosh(x: Any) -> Tracer:
    """Hyperbolic cosine, finite up to the overflow threshold."""
    xnp = _np()
    t = _float_operand("cosh", x)
    h = _half_exp(xnp.abs(t))
    return h + 0.25 / h


def _pow2(k: Tracer, pt: PT) -> Tracer:
    """2**k for integer-valued floats k inside the normal exponent range, built from bits."""
    xnp = _np()
    info = _math()._finfo(pt)
    it = _math()._INT_OF_WIDTH[pt.byte_size]
    bias = -int(info.minexp) + 1
    e = xnp.astype(k, it.dtype) + np.asarray(bias, it.dtype)
    return _lax.bitcast_convert_type(e << np.asarray(int(info.nmant), it.dtype), pt)


@eager_ok
def exp2(x: Any) -> Tracer:
    """2**x: exp(f ln 2) of the fraction f = x - round(x), scaled by 2**round(x) exactly (two
    power-of-two factors, so subnormal and overflowing results come out right)."""
    xnp = _np()
    t = _float_operand("exp2", x)
    if t.ptype in (PT.F16, PT.BF16):
        return xnp.astype(exp2(xnp.astype(t, "float32")), t.dtype)
    info = _math()._finfo(t.ptype)
    lo, hi = 2 * int(info.minexp), 2 * (int(info.maxexp) - 1)  # each half stays normal
    n = xnp.clip(xnp.round(xnp.where(xnp.isfinite(t), t, 0.0)), lo, hi)
    f = t - n
    r = xnp.exp(f * float(np.log(2.0)))
    n1 = xnp.floor(n * 0.5)
    out = r * _pow2(n1, t.ptype) * _pow2(n - n1, t.ptype)
    return xnp.where(xnp.isfinite(t), out, xnp.where(t > 0, t, xnp.where(t < 0, 0.0, t)))


@eager_ok
def square(x: Any) -> Tracer:
    """x * x."""
    return _np().square(x)


@eager_ok
def reciprocal(x: Any) -> Tracer:
    """1 / x."""
    return _np().reciprocal(x)


@eager_ok
def integer_pow(x: Any, y: int) -> Tracer:
    """x ** y for a static Python int y, as repeated multiplication (a negative y divides;
    integer x needs y >= 0)."""
    t = as_tracer(x)
    if not isinstance(y, (int, np.integer)) or isinstance(y, bool):
        raise trace_error(f"integer_pow: the exponent must be a Python int, got {y!r}")
    if int(y) < 0 and not (t.ptype.is_float or t.ptype.is_complex):
        raise trace_error(f"integer_pow: a negative exponent ({y}) needs a float operand, "
                          f"got {t.aval_text}")
    return _np()._integer_pow(t, int(y))


@eager_ok
def nextafter(x1: Any, x2: Any) -> Tracer:
    """The next float after x1 in the direction of x2."""
    return _math().nextafter(x1, x2)


def _integer_operand(name: str, x: Any) -> Tracer:
    t = as_tracer(x)
    if not t.ptype.is_integer:
        raise trace_error(f"{name}: needs an integer operand, got {t.aval_text}")
    return t


@eager_ok
def clz(x: Any) -> Tracer:
    """The number of leading zero bits (HLO `count-leading-zeros`)."""
    t = _integer_operand("clz", x)
    return emit(Opcode.CLZ, infer("infer_unary", Opcode.CLZ, t.aval), [t], op_name="clz")


@eager_ok
def population_count(x: Any) -> Tracer:
    """The number of set bits (HLO `popcnt`)."""
    t = _integer_operand("population_count", x)
    return emit(Opcode.POPCNT, infer("infer_unary", Opcode.POPCNT, t.aval), [t],
                op_name="population_count")


def _shift(opcode: Opcode, name: str, x: Any, y: Any) -> Tracer:
    a, b = _np().promote(x, y)
    if not a.ptype.is_integer:
        raise trace_error(f"{name}: needs integer operands, got {a.aval_text} and {b.aval_text}")
    return _np()._binary(opcode, name, a, b)


@eager_ok
def shift_right_arithmetic(x: Any, y: Any) -> Tracer:
    """x >> y filling with the sign bit (shifts of the bit width or more give 0 or -1)."""
    return _shift(Opcode.SHIFT_RIGHT_ARITHMETIC, "shift_right_arithmetic", x, y)


@eager_ok
def shift_right_logical(x: Any, y: Any) -> Tracer:
    """x >> y filling with zeros (shifts of the bit width or more give 0)."""
    return _shift(Opcode.SHIFT_RIGHT_LOGICAL, "shift_right_logical", x, y)


_WIDER = {PT.S8: PT.S32, PT.S16: PT.S32, PT.S32: PT.S64, PT.U8: PT.U32, PT.U16: PT.U32,
          PT.U32: PT.U64}


@eager_ok
def mulhi(x: Any, y: Any) -> Tracer:
    """The high half of the double-width product x * y (integers; signed or unsigned)."""
    xnp = _np()
    a, b = xnp._broadcast_all("mulhi", xnp.promote(x, y))
    pt = a.ptype
    if not pt.is_integer:
        raise trace_error(f"mulhi: needs integer operands, got {a.aval_text} and {b.aval_text}")
    bits = 8 * pt.byte_size
    if pt in _WIDER:
        w = _WIDER[pt]
        prod = _lax.convert_element_type(a, w) * _lax.convert_element_type(b, w)
        op = Opcode.SHIFT_RIGHT_LOGICAL if pt.is_unsigned_int else Opcode.SHIFT_RIGHT_ARITHMETIC
        hi = xnp._binary(op, "mulhi", prod, as_tracer(bits, w))
        return _lax.convert_element_type(hi, pt)
    ua, ub = (_lax.bitcast_convert_type(v, PT.U64) for v in (a, b))
    hi = _umulhi64(ua, ub)
    if pt.is_unsigned_int:
        return hi
    # signed: subtract b where a < 0 and a where b < 0 (two's complement correction)
    zero = xnp.zeros_like(ub)
    hi = hi - xnp.where(a < 0, ub, zero) - xnp.where(b < 0, ua, zero)
    return _lax.bitcast_convert_type(hi, pt)


def _umulhi64(a: Tracer, b: Tracer) -> Tracer:
    """The high 64 bits of the 128-bit product of u64 a and b, from 32-bit halves."""
    mask, s = np.uint64(0xFFFFFFFF), np.uint64(32)
    a_lo, a_hi, b_lo, b_hi = a & mask, a >> s, b & mask, b >> s
    lo_lo, hi_lo, lo_hi, hi_hi = a_lo * b_lo, a_hi * b_lo, a_lo * b_hi, a_hi * b_hi
    cross = (lo_lo >> s) + (hi_lo & mask) + lo_hi
    return hi_hi + (hi_lo >> s) + (cross >> s)
