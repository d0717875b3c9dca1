"""`xlc.random`: counter-based random numbers with JAX's Threefry-2x32 keys, bit-exact with
`jax.random` (its default, "partitionable" Threefry) for keys, `split`, `fold_in`, `bits`,
`uniform`, `randint`, `bernoulli` and `permutation`; `normal` and `truncated`/`gumbel`-style
samplers that go through `log`/`erf_inv` use xlc's own math and match to a few ulps.

Keys are raw `uint32[2]` arrays (`jax.random.PRNGKey`'s form): `key(0)` / `PRNGKey(0)`,
`split(key, n)` -> `uint32[n, 2]`, `fold_in(key, data)`. Every sampler takes a key, a shape
and a dtype, and traces to plain HLO (integer adds, rotations, xors), so it runs on every
backend and inside jitted programs.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from xlc.frontend import lax as _lax
from xlc.frontend.tracer import Tracer, as_tracer, trace_error
from xlc.hlo.shape import PrimitiveType as PT

__all__ = ["key", "PRNGKey", "split", "fold_in", "bits", "uniform", "randint", "bernoulli",
           "normal", "permutation", "key_data"]

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
    all uint32, the key words scalars."""
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
    """The key's uint32[2] words (keys are raw already)."""
    return as_tracer(k)


def split(k: Any, num: int | Sequence[int] = 2) -> Tracer:
    """`num` new keys (uint32[num, 2]; a shape gives uint32[*shape, 2])."""
    shape = (int(num),) if isinstance(num, (int, np.integer)) else tuple(int(d) for d in num)
    k1, k2 = _key(k, "split")
    c1, c2 = _iota_2x32(shape)
    b1, b2 = threefry2x32(k1, k2, c1, c2)
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
    xnp = _np()
    shape = tuple(int(d) for d in shape)
    width = np.dtype(dtype).itemsize * 8
    if np.dtype(dtype).kind != "u" or width not in (8, 16, 32, 64):
        raise trace_error(f"xlc.random.bits: dtype must be uint8/16/32/64, got {dtype}")
    k1, k2 = _key(k, "bits")
    c1, c2 = _iota_2x32(shape)
    b1, b2 = threefry2x32(k1, k2, c1, c2)
    if width == 64:
        return xnp.bitwise_or(xnp.left_shift(xnp.astype(b1, "uint64"), as_tracer(32, PT.U64)),
                              xnp.astype(b2, "uint64"))
    out = xnp.bitwise_xor(b1, b2)
    return out if width == 32 else xnp.astype(out, dtype)


def uniform(k: Any, shape: Sequence[int] = (), dtype: Any = "float32", minval: Any = 0.0,
            maxval: Any = 1.0) -> Tracer:
    """Floats in [minval, maxval): random mantissa bits under the exponent of 1.0, minus 1,
    scaled (jax.random.uniform's construction, bit for bit)."""
    import ml_dtypes

    xnp = _np()
    dt = _float_dtype(dtype, "uniform")
    info = ml_dtypes.finfo(dt)
    nbits, nmant = info.bits, info.nmant
    rng_bits = 8 if nmant < 8 else nbits
    udt = f"uint{nbits}"
    shape = tuple(int(d) for d in shape)
    b = bits(k, shape, f"uint{rng_bits}")
    if rng_bits != nbits:
        b = xnp.astype(b, udt)
    one = int(np.array(1.0, dt).view(udt))
    fb = xnp.bitwise_or(xnp.right_shift(b, as_tracer(rng_bits - nmant, PT.from_dtype(udt))),
                        as_tracer(one, PT.from_dtype(udt)))
    floats = xnp.subtract(_lax.bitcast_convert_type(fb, dt), xnp.asarray(1.0, dt))
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
    xnp = _np()
    dt = _float_dtype(dtype, "normal")
    lo = np.nextafter(np.array(-1.0, dt), np.array(0.0, dt), dtype=dt)
    u = uniform(k, shape, dt, lo, np.array(1.0, dt))
    return xnp.multiply(xnp.asarray(np.sqrt(2), dt), erf_inv(u))


def erf_inv(x: Any) -> Tracer:
    """The inverse error function on (-1, 1) (Giles' single-precision approximation in f32,
    a Newton step on erf for f64)."""
    xnp = _np()
    t = as_tracer(x)
    w = xnp.negative(xnp.log1p(xnp.negative(xnp.multiply(t, t))))
    small = xnp.less(w, xnp.asarray(5.0, t.dtype))
    ws = xnp.subtract(w, xnp.asarray(2.5, t.dtype))
    wl = xnp.subtract(xnp.sqrt(w), xnp.asarray(3.0, t.dtype))
    cs = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
          -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
    cl = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
          -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)
    ps = xnp.asarray(cs[0], t.dtype)
    pl = xnp.asarray(cl[0], t.dtype)
    for a, b in zip(cs[1:], cl[1:]):
        ps = xnp.add(xnp.asarray(a, t.dtype), xnp.multiply(ps, ws))
        pl = xnp.add(xnp.asarray(b, t.dtype), xnp.multiply(pl, wl))
    y = xnp.multiply(xnp.where(small, ps, pl), t)
    if t.ptype is PT.F64:  # one Newton step on erf(y) = x for double precision
        err = xnp.subtract(xnp.erf(y), t)
        y = xnp.subtract(y, xnp.divide(err, xnp.multiply(
            xnp.asarray(2 / np.sqrt(np.pi), t.dtype), xnp.exp(xnp.negative(xnp.square(y))))))
    return y


def permutation(k: Any, x: Any, axis: int = 0, independent: bool = False) -> Tracer:
    """A random permutation of `x` along `axis` (of arange(x) for an int): the indices are
    shuffled by sorting on random keys for ceil(3 ln(n) / 32) rounds and the slices taken in
    that order (jax.random.permutation's construction); `independent` shuffles each 1-D
    slice along `axis` on its own."""
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
    n = arr.shape[axis]
    rounds = int(np.ceil(3 * np.log(max(1, n)) / 32))
    cur = k
    for _ in range(rounds):
        cur, sub = _split2(cur)
        keys = bits(sub, arr.shape, "uint32")
        _keys, arr = _lax.sort([keys, arr], dimension=axis, num_keys=1)
    return arr
