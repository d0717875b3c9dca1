"""`xlc.random`: counter-based random numbers with JAX's Threefry-2x32 keys, following
`jax.random` (its default, "partitionable" Threefry) recipe for recipe: keys, `split`,
`fold_in`, `bits`, `uniform`, `randint`, `bernoulli`, `permutation` are bit-exact; `normal`
goes through erf_inv (Giles' polynomials, as XLA) and matches to a few ulps in f32/f64 (f64:
XLA's own log1p is ~126 ulps off), bit for bit in f16/bf16. The other distributions live in
`random_dists` (uniform/normal-based, categorical, choice, ...) and `random_gamma` (the
rejection samplers) and are re-exported here.

Keys are raw `uint32[2]` arrays (`jax.random.PRNGKey`'s form): `key(0)` / `PRNGKey(0)`,
`split(key, n)` -> `uint32[n, 2]`, `fold_in(key, data)`; `key_data` / `wrap_key_data` are
identities on them. Every sampler takes a key, a shape and a dtype, and traces to plain HLO
(integer adds, rotations, xors), so it runs on every backend and inside jitted programs.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlc.frontend import lax as _lax
from xlc.frontend.tracer import Tracer, as_tracer, trace_error
from xlc.hlo.shape import PrimitiveType as PT

__all__ = ["key", "PRNGKey", "split", "fold_in", "bits", "uniform", "randint", "bernoulli",
           "normal", "permutation", "shuffle", "key_data", "wrap_key_data", "key_impl", "key_dtype",
           "clone"]

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


def _u32(x: Any) -> Tracer:
    return as_tracer(x, PT.U32)


def _rotl(xnp: Any, v: Tracer, r: int) -> Tracer:
    return xnp.bitwise_or(xnp.left_shift(v, _u32(r)), xnp.right_shift(v, _u32(32 - r)))


def threefry2x32(k1: Any, k2: Any, x1: Any, x2: Any) -> tuple[Tracer, Tracer]:
    """The Threefry-2x32 block cipher (20 rounds) of counters (x1, x2) under key (k1, k2),
    all uint32; the key words are scalars, or arrays of the counters' shape (one key per
    element)."""
    xnp = _np()
    k1, k2 = _u32(k1), _u32(k2)
    ks = [k1, k2, xnp.bitwise_xor(xnp.bitwise_xor(k1, k2), _u32(_PARITY))]
    x = [xnp.add(_u32(x1), ks[0]), xnp.add(_u32(x2), ks[1])]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x[0] = xnp.add(x[0], x[1])
            x[1] = xnp.bitwise_xor(x[0], _rotl(xnp, x[1], r))
        x[0] = xnp.add(x[0], ks[(i + 1) % 3])
        x[1] = xnp.add(xnp.add(x[1], ks[(i + 2) % 3]), _u32(i + 1))
    return x[0], x[1]


def threefry2x32_rolled(k1: Any, k2: Any, x1: Any, x2: Any) -> tuple[Tracer, Tracer]:
    """`threefry2x32` as a 5-trip loop of 4 rounds (the rotation set picked by the trip's
    parity, the key schedule rotated in the carry): the same bits from a quarter of the code,
    for the samplers that call the cipher inside their own loops (compile time)."""
    from xlc.frontend.control_flow import fori_loop

    xnp = _np()
    x1t, x2t = _u32(x1), _u32(x2)
    shape = np.broadcast_shapes(x1t.shape, x2t.shape, _u32(k1).shape, _u32(k2).shape)
    k1, k2 = (xnp.broadcast_to(_u32(w), shape) for w in (k1, k2))
    ks2 = xnp.bitwise_xor(xnp.bitwise_xor(k1, k2), _u32(_PARITY))
    rot = [np.uint32(r) for r in _ROTATIONS[0]], [np.uint32(r) for r in _ROTATIONS[1]]

    def group(i: Tracer, c: tuple[Tracer, ...]) -> tuple[Tracer, ...]:
        x0, x1_, a, b, rest = c
        odd = xnp.equal(xnp.remainder(i, 2), 1)
        for j in range(4):
            r = xnp.where(odd, _u32(rot[1][j]), _u32(rot[0][j]))
            x0 = xnp.add(x0, x1_)
            x1_ = xnp.bitwise_xor(x0, xnp.bitwise_or(xnp.left_shift(x1_, r), xnp.right_shift(
                x1_, xnp.subtract(_u32(32), r))))
        x0 = xnp.add(x0, a)
        x1_ = xnp.add(xnp.add(x1_, b), xnp.astype(xnp.add(i, 1), "uint32"))
        return x0, x1_, b, rest, a

    x0 = xnp.add(xnp.broadcast_to(x1t, shape), k1)
    x1_ = xnp.add(xnp.broadcast_to(x2t, shape), k2)
    out = fori_loop(0, 5, group, (x0, x1_, k2, ks2, k1))
    return out[0], out[1]


Cipher = Callable[[Any, Any, Any, Any], tuple[Tracer, Tracer]]


def _cipher(rolled: bool) -> Cipher:
    return threefry2x32_rolled if rolled else threefry2x32


def _iota_2x32(shape: tuple[int, ...]) -> tuple[Tracer, Tracer]:
    """(high, low) words of the row-major element counter over `shape`."""
    n = math.prod(shape)
    if n >= 2 ** 32:
        raise trace_error(f"xlc.random: at most 2**32 values per call, got shape {shape}")
    lo = _lax.reshape(_lax.iota(PT.U32, n), shape) if shape else _u32(0)
    return _np().zeros(shape, "uint32"), lo


def _key(k: Any, where: str) -> tuple[Tracer, Tracer]:
    t = as_tracer(k)
    if t.shape != (2,) or t.ptype is not PT.U32:
        raise trace_error(f"xlc.random.{where}: a key is a uint32[2] array (xlc.random.key), "
                          f"got {t.aval_text}")
    return (_lax.reshape(_lax.slice(t, [0], [1]), ()),
            _lax.reshape(_lax.slice(t, [1], [2]), ()))


def key(seed: Any) -> Tracer:
    """A key from an integer seed: [seed >> 32, seed & 0xFFFFFFFF] as uint32 (a 32-bit
    seed's high word is 0), jax.random.PRNGKey's raw key."""
    xnp = _np()
    if isinstance(seed, (int, np.integer)):
        s = int(seed)
        high = (s >> 32) & 0xFFFFFFFF if not -2**31 <= s < 2**31 else 0
        return xnp.asarray(np.array([high, s & 0xFFFFFFFF], np.uint32))
    t = as_tracer(seed)
    if not t.ptype.is_integer or t.shape:
        raise trace_error(f"xlc.random.key: the seed is an integer scalar, got {t.aval_text}")
    if t.ptype.byte_size == 8:  # a 64-bit seed: its two 32-bit halves
        u = t if t.ptype is PT.U64 else _lax.bitcast_convert_type(t, "uint64")
        hi = xnp.astype(xnp.right_shift(u, as_tracer(32, PT.U64)), "uint32")
        lo = xnp.astype(xnp.bitwise_and(u, as_tracer(0xFFFFFFFF, PT.U64)), "uint32")
    else:  # a 32-bit (or narrower) seed: its bits, the high word 0
        wide = xnp.astype(t, "int32" if t.ptype.is_signed_int else "uint32")
        lo = _lax.bitcast_convert_type(wide, "uint32") if wide.ptype is PT.S32 else wide
        hi = _u32(0)
    return xnp.stack([hi, lo])


PRNGKey = key


def key_data(k: Any) -> Tracer:
    """The key's uint32[..., 2] words (keys are raw already)."""
    return as_tracer(k)


def wrap_key_data(data: Any, *, impl: str | None = None) -> Tracer:
    """A key (array) from its uint32[..., 2] words: xlc keys are raw, so the words themselves;
    `impl` may only name Threefry."""
    if impl not in (None, "threefry2x32"):
        raise trace_error(f"xlc.random.wrap_key_data: only the 'threefry2x32' implementation "
                          f"exists, got {impl!r}")
    t = as_tracer(data)
    if t.ndim < 1 or t.shape[-1] != 2 or t.ptype is not PT.U32:
        raise trace_error(f"xlc.random.wrap_key_data: key data is a uint32[..., 2] array, got "
                          f"{t.aval_text}")
    return t


def key_impl(k: Any) -> str:
    """The name of the keys' generator: always 'threefry2x32'."""
    del k
    return "threefry2x32"


def key_dtype(impl: str | None = None) -> np.dtype:
    """The element type of xlc's (raw) keys: uint32 (jax's typed-key dtype has no xlc
    counterpart)."""
    del impl
    return np.dtype(np.uint32)


def clone(k: Any) -> Tracer:
    """The key itself (jax.random.clone: only meaningful for key-reuse checking)."""
    return as_tracer(k)


def split(k: Any, num: int | Sequence[int] = 2) -> Tracer:
    """`num` new keys (uint32[num, 2]; a shape gives uint32[*shape, 2])."""
    return _split(k, num, rolled=False)


def _split(k: Any, num: int | Sequence[int], rolled: bool) -> Tracer:
    shape = (int(num),) if isinstance(num, (int, np.integer)) else tuple(int(d) for d in num)
    k1, k2 = _key(k, "split")
    c1, c2 = _iota_2x32(shape)
    b1, b2 = _cipher(rolled)(k1, k2, c1, c2)
    return _np().stack([b1, b2], axis=len(shape))


def fold_in(k: Any, data: Any) -> Tracer:
    """A new key from `k` and an integer `data` (uint32)."""
    k1, k2 = _key(k, "fold_in")
    d = as_tracer(data)
    d = _lax.bitcast_convert_type(d, "uint32") if d.ptype is PT.S32 else \
        _np().astype(d, "uint32")
    b1, b2 = threefry2x32(k1, k2, _u32(0), d)
    return _np().stack([b1, b2])


def bits(k: Any, shape: Sequence[int] = (), dtype: Any = "uint32") -> Tracer:
    """Uniform random bits of an unsigned `dtype` (8, 16, 32 or 64 bits)."""
    return _bits(k, shape, dtype, rolled=False)


def _bits(k: Any, shape: Sequence[int], dtype: Any, rolled: bool) -> Tracer:
    shape = tuple(int(d) for d in shape)
    width = np.dtype(dtype).itemsize * 8
    if np.dtype(dtype).kind != "u" or width not in (8, 16, 32, 64):
        raise trace_error(f"xlc.random.bits: dtype must be uint8/16/32/64, got {dtype}")
    k1, k2 = _key(k, "bits")
    c1, c2 = _iota_2x32(shape)
    b1, b2 = _cipher(rolled)(k1, k2, c1, c2)
    return words_to_bits(b1, b2, width)


def words_to_bits(b1: Tracer, b2: Tracer, width: int) -> Tracer:
    """`width` random bits from the cipher's two output words: both for 64, their xor for 32,
    its low bits for 8 and 16."""
    xnp = _np()
    if width == 64:
        return xnp.bitwise_or(xnp.left_shift(xnp.astype(b1, "uint64"), as_tracer(32, PT.U64)),
                              xnp.astype(b2, "uint64"))
    out = xnp.bitwise_xor(b1, b2)
    return out if width == 32 else xnp.astype(out, f"uint{width}")


def uniform(k: Any, shape: Sequence[int] = (), dtype: Any = "float32", minval: Any = 0.0,
            maxval: Any = 1.0) -> Tracer:
    """Floats in [minval, maxval): random mantissa bits under the exponent of 1.0, minus 1,
    scaled (jax.random.uniform's construction, bit for bit)."""
    return _uniform(k, shape, dtype, minval, maxval, rolled=False)


def _uniform(k: Any, shape: Sequence[int], dtype: Any, minval: Any, maxval: Any,
             rolled: bool) -> Tracer:
    dt = _float_dtype(dtype, "uniform")
    shape = tuple(int(d) for d in shape)
    b = _bits(k, shape, f"uint{_rng_width(dt)}", rolled)
    return _scale(unit_floats(b, dt), dt, minval, maxval)


def _rng_width(dt: np.dtype) -> int:
    """How many random bits a uniform float of dtype `dt` takes (8 for 8-bit floats)."""
    import ml_dtypes

    info = ml_dtypes.finfo(dt)
    return 8 if info.nmant < 8 else int(info.bits)


def unit_floats(b: Tracer, dt: np.dtype) -> Tracer:
    """Floats in [0, 1) of dtype `dt` from random bits `b` (`_rng_width(dt)` wide): the top
    mantissa bits under the exponent of 1.0, minus 1."""
    import ml_dtypes

    xnp = _np()
    info = ml_dtypes.finfo(dt)
    nbits, nmant = int(info.bits), int(info.nmant)
    rng_bits = _rng_width(dt)
    udt = f"uint{nbits}"
    if rng_bits != nbits:
        b = xnp.astype(b, udt)
    one = int(np.array(1.0, dt).view(udt))
    fb = xnp.bitwise_or(xnp.right_shift(b, as_tracer(rng_bits - nmant, PT.from_dtype(udt))),
                        as_tracer(one, PT.from_dtype(udt)))
    return xnp.subtract(_lax.bitcast_convert_type(fb, dt), xnp.asarray(1.0, dt))


def _scale(floats: Tracer, dt: np.dtype, minval: Any, maxval: Any) -> Tracer:
    """max(minval, floats * (maxval - minval) + minval) in dtype `dt`."""
    xnp = _np()
    lo = xnp.astype(as_tracer(minval), dt)
    hi = xnp.astype(as_tracer(maxval), dt)
    return xnp.maximum(lo, xnp.add(xnp.multiply(floats, xnp.subtract(hi, lo)), lo))


def _float_dtype(dtype: Any, where: str) -> np.dtype:
    """The numpy dtype of float type `dtype` (f16, bf16, f32, f64; names included)."""
    from xlc.frontend import dtypes

    try:
        pt = dtypes.to_ptype(dtype)
    except Exception:  # noqa: BLE001 - any unknown dtype: the message below
        pt = None
    if pt is None or not pt.is_float:
        raise trace_error(f"xlc.random.{where}: dtype must be a float type, got {dtype}")
    return pt.dtype


def randint(k: Any, shape: Sequence[int], minval: Any, maxval: Any,
            dtype: Any = "int32") -> Tracer:
    """Integers in [minval, maxval) (jax.random.randint's construction: twice the bits,
    reduced modulo the span)."""
    xnp = _np()
    dt = np.dtype(dtype)
    if dt.kind not in "iu":
        raise trace_error(f"xlc.random.randint: dtype must be an integer type, got {dtype}")
    nbits = dt.itemsize * 8
    udt = f"uint{nbits}"
    info = np.iinfo(dt)
    shape = tuple(int(d) for d in shape)
    lo_t, hi_t = as_tracer(minval), as_tracer(maxval)
    out_of_range = xnp.greater(xnp.astype(hi_t, "int64") if hi_t.ptype.byte_size < 8 else hi_t,
                               info.max) if info.max < 2 ** 31 - 1 else xnp.asarray(False)
    lo = xnp.astype(xnp.clip(lo_t, info.min, info.max), dt)
    hi = xnp.astype(xnp.clip(hi_t, info.min, info.max), dt)
    k1, k2 = _split2(k)
    higher, lower = bits(k1, shape, udt), bits(k2, shape, udt)
    span = xnp.astype(xnp.subtract(hi, lo), udt)
    span = xnp.where(xnp.less_equal(hi, lo), xnp.ones_like(span), span)
    span = xnp.where(xnp.logical_and(out_of_range, xnp.greater(hi, lo)),
                     xnp.add(span, as_tracer(1, PT.from_dtype(udt))), span)
    # XLA's remainder (x rem 0 = x): a span that wrapped to 0 leaves the bits as they are
    rem = _lax.rem
    half = as_tracer(2 ** (nbits // 2), PT.from_dtype(udt))
    mult = rem(half, span)
    mult = rem(xnp.multiply(mult, mult), span)
    offset = rem(xnp.add(xnp.multiply(rem(higher, span), mult), rem(lower, span)), span)
    return xnp.add(lo, xnp.astype(offset, dt))


def _split2(k: Any) -> tuple[Tracer, Tracer]:
    pair = split(k, 2)
    return (_lax.reshape(_lax.slice(pair, [0, 0], [1, 2]), (2,)),
            _lax.reshape(_lax.slice(pair, [1, 0], [2, 2]), (2,)))


def bernoulli(k: Any, p: Any = 0.5, shape: Sequence[int] | None = None) -> Tracer:
    """Booleans that are true with probability `p` (uniform(k) < p)."""
    xnp = _np()
    pt = as_tracer(p)
    if not pt.ptype.is_float:
        pt = xnp.astype(pt, "float32")
    shape = tuple(pt.shape) if shape is None else tuple(int(d) for d in shape)
    return xnp.less(uniform(k, shape, pt.dtype), pt)


def normal(k: Any, shape: Sequence[int] = (), dtype: Any = "float32") -> Tracer:
    """Standard normal samples: sqrt(2) * erf_inv(uniform(k) in (-1, 1)) (jax.random.normal's
    construction; erf_inv in xlc's own math, within a few ulps of XLA's)."""
    dt = _float_dtype(dtype, "normal")
    lo, hi = _normal_bounds(dt)
    return normal_from_uniform(uniform(k, shape, dt, lo, hi))


def _normal_bounds(dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """The uniform range normal samples are drawn from: [nextafter(-1, 0), 1)."""
    return np.nextafter(np.array(-1.0, dt), np.array(0.0, dt), dtype=dt), np.array(1.0, dt)


def normal_from_uniform(u: Tracer) -> Tracer:
    """sqrt(2) * erf_inv(u)."""
    xnp = _np()
    return xnp.multiply(xnp.asarray(np.asarray(np.sqrt(2), u.dtype)), erf_inv(u))


def erf_inv(x: Any) -> Tracer:
    """The inverse error function on (-1, 1): Giles' approximations in w = -log1p(-x^2), the
    single-precision one (2 branches) for f32 (f16/bf16 evaluated in f32 and rounded once) and
    the double one (3 branches) for f64, XLA's own recipe; +-1 gives +-inf."""
    xnp = _np()
    t = as_tracer(x)
    if t.dtype.itemsize < 4:  # one operation, as XLA's: evaluated in f32, rounded once
        return xnp.astype(erf_inv(xnp.astype(t, "float32")), t.dtype)
    dt = t.dtype
    w = xnp.negative(xnp.log1p(xnp.negative(xnp.multiply(t, t))))
    if t.ptype is PT.F64:
        branches = [(w, 3.125, _ERFINV64_A), (xnp.sqrt(w), 3.25, _ERFINV64_B),
                    (xnp.sqrt(w), 5.0, _ERFINV64_C)]
        ps = [_horner(xnp, xnp.subtract(v, xnp.asarray(off, dt)), cs, dt)
              for v, off, cs in branches]
        p = xnp.where(xnp.less(w, xnp.asarray(6.25, dt)), ps[0],
                      xnp.where(xnp.less(w, xnp.asarray(16.0, dt)), ps[1], ps[2]))
    else:
        small = _horner(xnp, xnp.subtract(w, xnp.asarray(2.5, dt)), _ERFINV32_A, dt)
        large = _horner(xnp, xnp.subtract(xnp.sqrt(w), xnp.asarray(3.0, dt)), _ERFINV32_B, dt)
        p = xnp.where(xnp.less(w, xnp.asarray(5.0, dt)), small, large)
    y = xnp.multiply(p, t)
    return xnp.where(xnp.equal(xnp.abs(t), xnp.asarray(1.0, dt)),
                     xnp.multiply(t, xnp.asarray(np.inf, dt)), y)


def _horner(xnp: Any, w: Tracer, coeffs: Sequence[float], dt: np.dtype) -> Tracer:
    p = xnp.asarray(coeffs[0], dt)
    for c in coeffs[1:]:
        p = xnp.add(xnp.multiply(p, w), xnp.asarray(c, dt))
    return p


# Giles, "Approximating the erfinv function" (GPU Computing Gems), as XLA uses them.
_ERFINV32_A = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
               -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV32_B = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
               -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)
_ERFINV64_A = (-3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
               1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
               6.6376381343583238325e-15, -4.0545662729752068639e-14,
               -8.1519341976054721522e-14, 2.6335093153082322977e-12,
               -1.2975133253453532498e-11, -5.4154120542946279317e-11,
               1.051212273321532285e-09, -4.1126339803469836976e-09,
               -2.9070369957882005086e-08, 4.2347877827932403518e-07,
               -1.3654692000834678645e-06, -1.3882523362786468719e-05,
               0.0001867342080340571352, -0.00074070253416626697512,
               -0.0060336708714301490533, 0.24015818242558961693, 1.6536545626831027356)
_ERFINV64_B = (2.2137376921775787049e-09, 9.0756561938885390979e-08,
               -2.7517406297064545428e-07, 1.8239629214389227755e-08,
               1.5027403968909827627e-06, -4.013867526981545969e-06,
               2.9234449089955446044e-06, 1.2475304481671778723e-05,
               -4.7318229009055733981e-05, 6.8284851459573175448e-05,
               2.4031110387097893999e-05, -0.0003550375203628474796,
               0.00095328937973738049703, -0.0016882755560235047313,
               0.0024914420961078508066, -0.0037512085075692412107,
               0.005370914553590063617, 1.0052589676941592334, 3.0838856104922207635)
_ERFINV64_C = (-2.7109920616438573243e-11, -2.5556418169965252055e-10,
               1.5076572693500548083e-09, -3.7894654401267369937e-09,
               7.6157012080783393804e-09, -1.4960026627149240478e-08,
               2.9147953450901080826e-08, -6.7711997758452339498e-08,
               2.2900482228026654717e-07, -9.9298272942317002539e-07,
               4.5260625972231537039e-06, -1.9681778105531670567e-05,
               7.5995277030017761139e-05, -0.00021503011930044477347,
               -0.00013871931833623122026, 1.0103004648645343977, 4.8499064014085844221)


def permutation(k: Any, x: Any, axis: int = 0, independent: bool = False) -> Tracer:
    """A random permutation of `x` along `axis` (of arange(x) for an int): the indices are
    shuffled by sorting on random keys for ceil(3 ln(size) / ln(2^32 - 1)) rounds and the
    slices taken in that order (jax.random.permutation's construction); `independent`
    shuffles each 1-D slice along `axis` on its own."""
    xnp = _np()
    if isinstance(x, (int, np.integer)):
        return _shuffle(k, xnp.arange(int(x), dtype="int32"), 0)
    arr = as_tracer(x)
    if arr.ndim == 0:
        raise trace_error("xlc.random.permutation: x must be an int or an array of rank >= 1")
    axis = axis % arr.ndim
    if independent or arr.ndim == 1:
        return _shuffle(k, arr, axis)
    order = _shuffle(k, xnp.arange(arr.shape[axis], dtype="int32"), 0)
    return xnp.take(arr, order, axis=axis)


def _shuffle(k: Any, arr: Tracer, axis: int) -> Tracer:
    # jax's count: ceil(3 ln(size) / ln(2**32 - 1)) rounds, over the whole array's size
    rounds = int(np.ceil(3 * np.log(max(1, math.prod(arr.shape))) / np.log(2.0 ** 32 - 1)))
    cur = k
    for _ in range(rounds):
        cur, sub = _split2(cur)
        keys = bits(sub, arr.shape, "uint32")
        _keys, arr = _lax.sort([keys, arr], dimension=axis, num_keys=1)
    return arr


def shuffle(k: Any, x: Any, axis: int = 0) -> Tracer:
    """Deprecated (removed from jax): each 1-D slice of `x` along `axis` shuffled on its own;
    use `permutation(k, x, axis, independent=True)`."""
    arr = as_tracer(x)
    return _shuffle(k, arr, axis % max(1, arr.ndim))


# The distributions, in their own modules (imported last: they build on the samplers above).
from xlc.frontend.random_dists import *  # noqa: E402,F401,F403
from xlc.frontend.random_dists import __all__ as _dists_all  # noqa: E402
from xlc.frontend.random_gamma import *  # noqa: E402,F401,F403
from xlc.frontend.random_gamma import __all__ as _gamma_all  # noqa: E402

__all__ += _dists_all + _gamma_all

_NOT_ARRAYS = {"key_impl", "key_dtype"}  # return names/dtypes, not arrays


def _eager_outside_traces() -> None:
    """Outside a trace every sampler runs eagerly on the evaluator and returns numpy arrays,
    as jax.random's functions run eagerly (`xlc.frontend.eager`)."""
    from xlc.frontend.eager import eager_ok

    g = globals()
    for name in __all__:
        fn = g.get(name)
        if callable(fn) and not isinstance(fn, type) and name not in _NOT_ARRAYS:
            g[name] = eager_ok(fn)


_eager_outside_traces()
