"""Elementwise handlers of the reference evaluator: unary, binary, compare, select, clamp,
convert, bitcast-convert and reduce-precision, following XLA's semantics exactly.

Every handler has the signature `handler(ev, inst, operands) -> np.ndarray` (see
`xlc.hlo.evaluator.Handler`) and returns an array of `inst.shape`'s element type. Handlers rely on
numpy broadcasting only, never on the declared dims, so scalar lambdas (reducers, comparators,
scatter combiners) can be evaluated vectorized on whole arrays.

Notes on dtypes: f16/bf16 arithmetic is computed in f32 and rounded once to the result type (as
XLA's CPU backend does); integer arithmetic wraps; integer divide truncates toward zero with
x/0 = -1 and INT_MIN/-1 = INT_MIN; remainder has the dividend's sign with x%0 = x.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ml_dtypes
import numpy as np

from xlc.errors import EvaluationError, UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode

if TYPE_CHECKING:
    from xlc.hlo.evaluator import Evaluator

Handler = Callable[["Evaluator", HloInstruction, list[Any]], Any]

_NARROW_FLOATS = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
# s4/u4 compute in 8 bits; casting the result back wraps to 4 bits (two's complement)
_NARROW_INTS = {np.dtype(ml_dtypes.int4): np.dtype(np.int8),
                np.dtype(ml_dtypes.uint4): np.dtype(np.uint8)}
_UNSIGNED_OF = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_SIGNED_OF = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}


# ---- dtype helpers ----------------------------------------------------------------------------
def result_dtype(inst: HloInstruction) -> np.dtype:
    """The numpy dtype of an array-shaped instruction's result."""
    return inst.shape.dtype


def compute_dtype(dt: np.dtype) -> np.dtype:
    """The dtype arithmetic on `dt` runs in: f32 for f16/bf16, s8/u8 for s4/u4, `dt`
    otherwise."""
    if dt in _NARROW_INTS:
        return _NARROW_INTS[dt]
    return np.dtype(np.float32) if dt in _NARROW_FLOATS else dt


def as_compute(x: np.ndarray) -> np.ndarray:
    """`x` widened to its compute dtype (f16/bf16 -> f32, s4/u4 -> s8/u8), otherwise
    unchanged."""
    x = np.asarray(x)
    if x.dtype in _NARROW_INTS:
        return x.astype(_NARROW_INTS[x.dtype])
    return x.astype(np.float32) if x.dtype in _NARROW_FLOATS else x


def cast(x: Any, dt: np.dtype) -> np.ndarray:
    """`x` as an array of dtype `dt` (no copy when it already is)."""
    return np.asarray(x).astype(dt, copy=False)


def is_float(dt: np.dtype) -> bool:
    """True for f16/bf16/f32/f64."""
    return dt in _NARROW_FLOATS or dt.kind == "f"


def contiguous(x: Any) -> np.ndarray:
    """`x` as a C-contiguous array of the same shape (0-d stays 0-d, unlike
    np.ascontiguousarray)."""
    x = np.asarray(x)
    return x if x.flags.c_contiguous else x.copy()


def unsigned_view(x: np.ndarray) -> np.ndarray:
    """The bit pattern of an integer/float array as the unsigned integer of the same width."""
    x = contiguous(x)
    return x.view(_UNSIGNED_OF[x.dtype.itemsize])


def signed_view(x: np.ndarray) -> np.ndarray:
    """The bit pattern of an integer/float array as the signed integer of the same width."""
    x = contiguous(x)
    return x.view(_SIGNED_OF[x.dtype.itemsize])


def total_order_key(x: np.ndarray) -> np.ndarray:
    """Signed integers ordered like XLA's TOTALORDER float comparison:
    -NaN < -inf < ... < -0 < +0 < ... < inf < NaN. Integers are returned unchanged."""
    x = np.asarray(x)
    if not is_float(x.dtype):
        return x
    s = signed_view(x)
    mx = np.iinfo(s.dtype).max
    return np.where(s < 0, s ^ s.dtype.type(mx), s)


# ---- unary --------------------------------------------------------------------------------------
def _float_unary(fn: Callable[[np.ndarray], np.ndarray]) -> Handler:
    def handler(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
        return cast(fn(as_compute(ops[0])), result_dtype(inst))
    return handler


def _logistic(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


_erf_vec = np.vectorize(math.erf, otypes=[np.float64])


def _erf(x: np.ndarray) -> np.ndarray:
    return _erf_vec(x.astype(np.float64))


def _round_afz(x: np.ndarray) -> np.ndarray:
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


def _sign(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "u":
        return (x != 0).astype(x.dtype)
    if x.dtype.kind == "c":
        a = np.abs(x)
        return np.where(a == 0, x, x / np.where(a == 0, 1, a))
    one = x.dtype.type(1)
    # ±0 and NaN pass through unchanged (keeps -0 and NaN).
    return np.where(x > 0, one, np.where(x < 0, -one, x))


def _abs(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    return cast(np.abs(as_compute(ops[0])), result_dtype(inst))


def _negate(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    x = as_compute(ops[0])
    if x.dtype == np.bool_:
        return x.copy()
    return cast(np.negative(x), result_dtype(inst))


def _not(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    x = np.asarray(ops[0])
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


def _popcnt(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    x = np.asarray(ops[0])
    return cast(np.bitwise_count(unsigned_view(x)), result_dtype(inst))


def _clz(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    u = unsigned_view(np.asarray(ops[0]))
    width = u.dtype.itemsize * 8
    n = np.zeros(u.shape, dtype=np.int64)
    x = u.copy()
    step = width // 2
    while step >= 1:
        top_clear = (x >> u.dtype.type(width - step)) == 0
        n += np.where(top_clear, step, 0)
        x = np.where(top_clear, x << u.dtype.type(step), x)
        step //= 2
    n = np.where(u == 0, width, n)
    return cast(n, result_dtype(inst))


def _is_finite(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    return np.isfinite(as_compute(ops[0]))


def _real(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    return cast(np.real(ops[0]), result_dtype(inst))


def _imag(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    x = np.asarray(ops[0])
    if x.dtype.kind != "c":
        return np.zeros_like(x, dtype=result_dtype(inst))
    return cast(np.imag(x), result_dtype(inst))


def convert_array(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """XLA's `convert`: float->int truncates toward zero and saturates (NaN -> 0); int->int
    wraps; anything->pred is `!= 0`; pred->number is 0/1; complex->real keeps the real part."""
    x = np.asarray(x)
    if dt == x.dtype:
        return x
    if dt == np.bool_:
        return x != 0
    if x.dtype.kind == "c" and dt.kind != "c":
        x = np.real(x)
    if is_float(x.dtype) and (dt.kind in "iu" or dt in _NARROW_INTS):
        info = ml_dtypes.iinfo(dt)
        v = np.trunc(x.astype(np.float64))
        lo, hi = float(info.min), float(info.max) + 1.0  # both exact powers of two
        inside = (v >= lo) & (v < hi)
        out = np.where(inside, v, 0).astype(dt)
        out = np.where(v >= hi, dt.type(info.max), out)
        out = np.where(v < lo, dt.type(info.min), out)
        return out.astype(dt, copy=False)
    if x.dtype in _NARROW_FLOATS and dt in _NARROW_FLOATS:
        return x.astype(np.float32).astype(dt)
    return x.astype(dt)


def _convert(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    return convert_array(ops[0], result_dtype(inst))


def _bitcast_convert(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    x = contiguous(ops[0])
    dt = result_dtype(inst)
    if x.dtype == np.bool_ or dt == np.bool_:
        if x.dtype.itemsize != dt.itemsize:
            raise EvaluationError(f"bitcast-convert '{inst.name}': cannot reinterpret "
                                  f"{x.dtype} as {dt}")
    # flat first: numpy cannot change the item size of a 0-d array (u64[] -> bf16[4])
    return x.reshape(-1).view(dt).reshape(inst.shape.dims)


def reduce_precision_array(x: np.ndarray, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """XLA's reduce-precision: round to `mantissa_bits` (nearest even), then flush values outside
    the `exponent_bits` range to ±inf / ±0 (denormals flush to zero); NaN stays NaN (becomes +inf
    when mantissa_bits == 0). Result has x's dtype."""
    x = np.asarray(x)
    orig = x.dtype
    wide = x.astype(np.float64) if orig == np.float64 else x.astype(np.float32)
    src_mant, src_exp = (52, 11) if wide.dtype == np.float64 else (23, 8)
    u = unsigned_view(wide).copy()
    t = u.dtype.type
    nbits = u.dtype.itemsize * 8
    if mantissa_bits < src_mant:
        shift = src_mant - mantissa_bits
        last_bit_mask = t(1) << t(shift)
        base_bias = (last_bit_mask >> t(1)) - t(1)
        last_bit = (u & last_bit_mask) >> t(shift)
        trunc_mask = ~(last_bit_mask - t(1))
        u = (u + last_bit + base_bias) & trunc_mask
    if exponent_bits < src_exp:
        sign_mask = t(1) << t(nbits - 1)
        exp_mask = t(((1 << src_exp) - 1) << src_mant)
        bias = (1 << (src_exp - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        max_exp = t((bias + reduced_bias) << src_mant)
        min_exp = t((bias - reduced_bias) << src_mant)
        e = u & exp_mask
        signed_zero = u & sign_mask
        u = np.where(e > max_exp, signed_zero | exp_mask, np.where(e <= min_exp, signed_zero, u))
    out = contiguous(u).view(wide.dtype)
    # NaN would have been turned into inf (or zero) above: restore it (mantissa_bits == 0 has
    # no NaN encoding, so NaN becomes +inf there, as XLA does).
    nan_value = wide if mantissa_bits > 0 else wide.dtype.type(np.inf)
    out = np.where(np.isnan(wide), nan_value, out)
    return out.astype(orig)


def _reduce_precision(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    return reduce_precision_array(ops[0], int(inst.attrs["exponent_bits"]),
                                  int(inst.attrs["mantissa_bits"]))


# ---- binary -------------------------------------------------------------------------------------
def _arith(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Handler:
    def handler(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
        return cast(fn(as_compute(ops[0]), as_compute(ops[1])), result_dtype(inst))
    return handler


def _pred_or_arith(pred_fn: Callable[[Any, Any], Any],
                   fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Handler:
    def handler(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
        a, b = as_compute(ops[0]), as_compute(ops[1])
        if a.dtype == np.bool_:
            return np.asarray(pred_fn(a, b))
        return cast(fn(a, b), result_dtype(inst))
    return handler


def int_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero; x/0 = -1 (all bits set); INT_MIN/-1 = INT_MIN."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    dt = a.dtype
    zero = b == 0
    if dt.kind == "i":
        overflow = (a == np.iinfo(dt).min) & (b == -1)
        sb = np.where(zero | overflow, dt.type(1), b)
        q = a // sb
        r = a - q * sb
        q = q + ((r != 0) & ((a < 0) != (sb < 0))).astype(dt)
        return np.where(zero, dt.type(-1), q).astype(dt)
    sb = np.where(zero, dt.type(1), b)
    return np.where(zero, dt.type(np.iinfo(dt).max), a // sb).astype(dt)


def int_remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer remainder with the dividend's sign; x%0 = x; INT_MIN%-1 = 0."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    dt = a.dtype
    zero = b == 0
    if dt.kind == "i":
        sb = np.where(zero | (b == -1), dt.type(1), b)
        return np.where(zero, a, np.fmod(a, sb)).astype(dt)
    sb = np.where(zero, dt.type(1), b)
    return np.where(zero, a, a % sb).astype(dt)


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return int_divide(a, b)
    return np.true_divide(a, b)


def _remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return int_remainder(a, b)
    return np.fmod(a, b)


def int_power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer power by squaring (wrapping); a negative exponent gives 1 if the base is 1,
    else 0; 0^0 = 1."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    dt = a.dtype
    result = np.ones(a.shape, dtype=dt)
    base = a.copy()
    e = np.where(b < 0, 0, b).astype(np.uint64)
    while np.any(e):
        result = np.where((e & np.uint64(1)) != 0, result * base, result)
        base = base * base
        e = e >> np.uint64(1)
    neg = b < 0
    return np.where(neg, np.where(a == 1, dt.type(1), dt.type(0)), result).astype(dt)


def _power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return int_power(a, b)
    return np.power(a, b)


def _shift_left(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ua, ub = np.broadcast_arrays(unsigned_view(a), unsigned_view(b))
    width = ua.dtype.itemsize * 8
    big = ub >= width
    out = np.where(big, 0, ua << np.where(big, 0, ub).astype(ua.dtype)).astype(ua.dtype)
    return out.view(np.asarray(a).dtype)


def _shift_right_logical(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ua, ub = np.broadcast_arrays(unsigned_view(a), unsigned_view(b))
    width = ua.dtype.itemsize * 8
    big = ub >= width
    out = np.where(big, 0, ua >> np.where(big, 0, ub).astype(ua.dtype)).astype(ua.dtype)
    return out.view(np.asarray(a).dtype)


def _shift_right_arithmetic(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    sa = signed_view(a)
    ub = unsigned_view(b)
    sa, ub = np.broadcast_arrays(sa, ub)
    width = sa.dtype.itemsize * 8
    amount = np.minimum(ub, width - 1).astype(sa.dtype)
    out = (sa >> amount).astype(sa.dtype)
    return contiguous(out).view(np.asarray(a).dtype)


def _complex(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # Build from parts: `a + 1j * b` would turn complex(x, inf) into (nan, inf).
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    out = np.empty(a.shape, np.complex128 if a.dtype == np.float64 else np.complex64)
    out.real = a
    out.imag = b
    return out


# ---- compare / select / clamp -------------------------------------------------------------------
_DIRECTIONS: dict[str, Callable[[Any, Any], np.ndarray]] = {
    "EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
    "GT": np.greater, "GE": np.greater_equal,
}


def compare_key(x: np.ndarray, cmp_type: str | None) -> np.ndarray:
    """`x` mapped so that numpy's ordering of the result is compare's ordering for `cmp_type`
    (TOTALORDER floats -> ordered ints; UNSIGNED/SIGNED reinterpret integer bits)."""
    if cmp_type == "TOTALORDER" and is_float(x.dtype):
        return total_order_key(x)
    if cmp_type == "UNSIGNED" and x.dtype.kind == "i":
        return unsigned_view(x)
    if cmp_type == "SIGNED" and x.dtype.kind == "u":
        return signed_view(x)
    return as_compute(x)


def compare_arrays(a: np.ndarray, b: np.ndarray, direction: str, cmp_type: str | None
                   ) -> np.ndarray:
    """XLA's compare: direction EQ/NE/LT/LE/GT/GE; type TOTALORDER orders floats as
    -NaN < -inf < ... < -0 < +0 < ... < inf < NaN; UNSIGNED/SIGNED reinterpret integer bits."""
    try:
        fn = _DIRECTIONS[direction]
    except KeyError:
        raise EvaluationError(f"unknown comparison direction {direction!r}") from None
    return np.asarray(fn(compare_key(np.asarray(a), cmp_type),
                         compare_key(np.asarray(b), cmp_type)))


def _compare(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    direction = str(inst.attrs.get("direction", ""))
    if direction not in _DIRECTIONS:
        raise EvaluationError(f"compare '{inst.name}': unknown direction {direction!r}")
    return compare_arrays(ops[0], ops[1], direction, inst.attrs.get("type"))


def _select(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    return cast(np.where(np.asarray(ops[0]), ops[1], ops[2]), result_dtype(inst))


def _clamp(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
    lo, x, hi = (as_compute(o) for o in ops)
    return cast(np.minimum(np.maximum(x, lo), hi), result_dtype(inst))


# ---- the table ----------------------------------------------------------------------------------
def _unsupported(name: str) -> Handler:
    def handler(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> np.ndarray:
        raise UnsupportedOpError(f"the evaluator does not support {name} ('{inst.name}')")
    return handler


ELEMENTWISE_HANDLERS: dict[Opcode, Handler] = {
    Opcode.ABS: _abs,
    Opcode.NEGATE: _negate,
    Opcode.EXP: _float_unary(np.exp),
    Opcode.EXPM1: _float_unary(np.expm1),
    Opcode.LOG: _float_unary(np.log),
    Opcode.LOG1P: _float_unary(np.log1p),
    Opcode.SQRT: _float_unary(np.sqrt),
    Opcode.RSQRT: _float_unary(lambda x: 1 / np.sqrt(x)),
    Opcode.CBRT: _float_unary(np.cbrt),
    Opcode.TANH: _float_unary(np.tanh),
    Opcode.LOGISTIC: _float_unary(_logistic),
    Opcode.SIN: _float_unary(np.sin),
    Opcode.COS: _float_unary(np.cos),
    Opcode.TAN: _float_unary(np.tan),
    Opcode.ERF: _float_unary(_erf),
    Opcode.FLOOR: _float_unary(np.floor),
    Opcode.CEIL: _float_unary(np.ceil),
    Opcode.ROUND_AFZ: _float_unary(_round_afz),
    Opcode.ROUND_EVEN: _float_unary(np.rint),
    Opcode.SIGN: _float_unary(_sign),
    Opcode.NOT: _not,
    Opcode.IS_FINITE: _is_finite,
    Opcode.POPCNT: _popcnt,
    Opcode.CLZ: _clz,
    Opcode.REAL: _real,
    Opcode.IMAG: _imag,
    Opcode.CONVERT: _convert,
    Opcode.BITCAST_CONVERT: _bitcast_convert,
    Opcode.REDUCE_PRECISION: _reduce_precision,
    Opcode.ADD: _pred_or_arith(np.logical_or, np.add),
    Opcode.SUBTRACT: _pred_or_arith(np.logical_xor, np.subtract),
    Opcode.MULTIPLY: _pred_or_arith(np.logical_and, np.multiply),
    Opcode.DIVIDE: _arith(_divide),
    Opcode.REMAINDER: _arith(_remainder),
    Opcode.MAXIMUM: _pred_or_arith(np.logical_or, np.maximum),
    Opcode.MINIMUM: _pred_or_arith(np.logical_and, np.minimum),
    Opcode.POWER: _arith(_power),
    Opcode.ATAN2: _arith(np.arctan2),
    Opcode.AND: _arith(np.bitwise_and),
    Opcode.OR: _arith(np.bitwise_or),
    Opcode.XOR: _arith(np.bitwise_xor),
    Opcode.SHIFT_LEFT: _arith(_shift_left),
    Opcode.SHIFT_RIGHT_ARITHMETIC: _arith(_shift_right_arithmetic),
    Opcode.SHIFT_RIGHT_LOGICAL: _arith(_shift_right_logical),
    Opcode.COMPLEX: _arith(_complex),
    Opcode.COMPARE: _compare,
    Opcode.SELECT: _select,
    Opcode.CLAMP: _clamp,
}
"""Handlers of the elementwise opcodes (and convert-like unary ops)."""

# Vectorized fast paths for single-op reducers/combiners: opcode -> numpy ufunc.
REDUCER_UFUNCS: dict[Opcode, np.ufunc] = {
    Opcode.ADD: np.add, Opcode.MULTIPLY: np.multiply, Opcode.MAXIMUM: np.maximum,
    Opcode.MINIMUM: np.minimum, Opcode.AND: np.bitwise_and, Opcode.OR: np.bitwise_or,
    Opcode.XOR: np.bitwise_xor,
}
