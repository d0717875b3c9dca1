"""`rng-bit-generator` for the reference evaluator: XLA's counter-based bit generators.

The operand is the u64 state vector; the result is `(new_state, bits)`. As XLA expands it
(RngBitGeneratorExpander + the builder library's bit generators):

- `rng_three_fry`: key = state[0], counter = state[1]. Threefry-2x32 (20 rounds) is applied to
  counter + linear index (split into low/high 32-bit words) under the key's two 32-bit halves.
  32-bit outputs: the shape is split in half along its first even dim (else its largest dim);
  each Threefry call yields the two neighbouring elements along that dim. 64-bit outputs: one
  call per element, low word first. Narrower types use the low bits of the 32-bit path.
  New state: counter + number of Threefry calls.
- `rng_philox` (also what `rng_default` means on CPU): key = state[0]; the 128-bit counter is
  (state[1], state[2]) (low, high) for a state of 3+ words, else (state[1], state[0]).
  Philox-4x32 (10 rounds) on counter + i yields 4 words per call, taken round-robin; 64-bit
  outputs pair words (0,1) and (2,3). New state: counter + number of calls (for a 2-word state
  only the low counter word is written back).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction

if TYPE_CHECKING:
    from xlc.hlo.evaluator import Evaluator

_U32 = np.uint32
_U64 = np.uint64
_MASK32 = _U64(0xFFFFFFFF)


def _lo_hi(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=_U64)
    return (x & _MASK32).astype(_U32), (x >> _U64(32)).astype(_U32)


def _join(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return lo.astype(_U64) | (hi.astype(_U64) << _U64(32))


def _rotl(v: np.ndarray, d: int) -> np.ndarray:
    return (v << _U32(d)) | (v >> _U32(32 - d))


def threefry2x32(x0: np.ndarray, x1: np.ndarray, k0: Any, k1: Any
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32 with 20 rounds (Salmon et al., SC'11) on uint32 arrays."""
    with np.errstate(over="ignore"):
        return _threefry2x32(x0, x1, k0, k1)


def _threefry2x32(x0: np.ndarray, x1: np.ndarray, k0: Any, k1: Any
                  ) -> tuple[np.ndarray, np.ndarray]:
    rot = (13, 15, 26, 6, 17, 29, 16, 24)
    ks = (_U32(k0), _U32(k1), _U32(0x1BD11BDA) ^ _U32(k0) ^ _U32(k1))
    x0 = np.asarray(x0, _U32) + ks[0]
    x1 = np.asarray(x1, _U32) + ks[1]
    for group in range(5):
        for r in rot[(group % 2) * 4:(group % 2) * 4 + 4]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + ks[(group + 1) % 3]
        x1 = x1 + ks[(group + 2) % 3] + _U32(group + 1)
    return x0, x1


def philox4x32(c: list[np.ndarray], k0: Any, k1: Any) -> list[np.ndarray]:
    """Philox-4x32 with 10 rounds on four uint32 counter arrays."""
    ma, mb = _U64(0xD2511F53), _U64(0xCD9E8D57)
    keys = [(int(k0) + r * 0x9E3779B9) & 0xFFFFFFFF for r in range(10)]
    keys1 = [(int(k1) + r * 0xBB67AE85) & 0xFFFFFFFF for r in range(10)]
    x = [np.asarray(v, _U32) for v in c]
    for r in range(10):
        p0 = x[0].astype(_U64) * ma
        p1 = x[2].astype(_U64) * mb
        x = [(p1 >> _U64(32)).astype(_U32) ^ x[1] ^ _U32(keys[r]), (p1 & _MASK32).astype(_U32),
             (p0 >> _U64(32)).astype(_U32) ^ x[3] ^ _U32(keys1[r]), (p0 & _MASK32).astype(_U32)]
    return x


def _split_dim(dims: tuple[int, ...]) -> int:
    for i, d in enumerate(dims):
        if d % 2 == 0:
            return i
    return max(range(len(dims)), key=lambda i: (dims[i], -i))


def _threefry_bits(key: int, counter: int, dims: tuple[int, ...], bits: int
                   ) -> tuple[np.ndarray, int]:
    k0, k1 = _lo_hi(np.array(key, _U64))
    if bits == 64:
        n = int(np.prod(dims, dtype=np.int64))
        ctr = _U64(counter) + np.arange(n, dtype=_U64)
        lo, hi = _lo_hi(ctr)
        y0, y1 = threefry2x32(lo, hi, k0, k1)
        return _join(y0, y1).reshape(dims), n
    if not dims:
        lo, hi = _lo_hi(np.array([counter], _U64))
        y0, _ = threefry2x32(lo, hi, k0, k1)
        return y0.reshape(()), 1
    sd = _split_dim(dims)
    half = list(dims)
    half[sd] = (dims[sd] + 1) // 2
    n = int(np.prod(half, dtype=np.int64))
    ctr = (_U64(counter) + np.arange(n, dtype=_U64)).reshape(half)
    lo, hi = _lo_hi(ctr)
    y0, y1 = threefry2x32(lo, hi, k0, k1)
    both = np.stack([y0, y1], axis=sd + 1)
    full = list(dims)
    full[sd] = 2 * half[sd]
    out = both.reshape(full)
    return out[tuple(slice(0, d) for d in dims)], n


def _philox_bits(key: int, ctr_lo: int, ctr_hi: int, n_words: int
                 ) -> tuple[list[np.ndarray], int, int]:
    k0, k1 = _lo_hi(np.array(key, _U64))
    n4 = (n_words + 3) // 4
    i = np.arange(n4, dtype=_U64)
    lo = _U64(ctr_lo) + i
    hi = np.where(lo < _U64(ctr_lo), _U64(ctr_hi) + _U64(1), _U64(ctr_hi)).astype(_U64)
    a, b = _lo_hi(lo)
    c, d = _lo_hi(hi)
    words = philox4x32([a, b, c, d], k0, k1)
    new_lo = (ctr_lo + n4) & 0xFFFFFFFFFFFFFFFF
    new_hi = (ctr_hi + (1 if new_lo < ctr_lo else 0)) & 0xFFFFFFFFFFFFFFFF
    return words, new_lo, new_hi


def rng_bit_generator(state: np.ndarray, algorithm: str, dims: tuple[int, ...],
                      dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """(new_state, bits) of XLA's rng-bit-generator for a u64 state vector."""
    st = [int(v) for v in np.asarray(state, _U64).reshape(-1)]
    bits = dtype.itemsize * 8
    ubits = 64 if bits == 64 else 32
    n = int(np.prod(dims, dtype=np.int64))
    if algorithm == "rng_three_fry":
        if len(st) < 2:
            raise UnsupportedOpError("rng-bit-generator rng_three_fry needs a u64[2] state")
        raw, used = _threefry_bits(st[0], st[1], tuple(dims), ubits)
        new_state = [st[0], (st[1] + used) & 0xFFFFFFFFFFFFFFFF] + st[2:]
    elif algorithm in ("rng_philox", "rng_default"):
        if len(st) < 2:
            raise UnsupportedOpError("rng-bit-generator rng_philox needs a u64[2+] state")
        lo, hi = (st[1], st[2]) if len(st) >= 3 else (st[1], st[0])
        words, new_lo, new_hi = _philox_bits(st[0], lo, hi, n * (2 if ubits == 64 else 1))
        if ubits == 64:
            pairs = [_join(words[0], words[1]), _join(words[2], words[3])]
            raw = np.stack(pairs, axis=1).reshape(-1)[:n].reshape(dims)
        else:
            raw = np.stack(words, axis=1).reshape(-1)[:n].reshape(dims)
        new_state = ([st[0], new_lo, new_hi] + st[3:]) if len(st) >= 3 else [st[0], new_lo]
    else:
        raise UnsupportedOpError(f"rng-bit-generator: unknown algorithm {algorithm!r}")
    if bits < 32:
        raw = raw.astype(np.dtype(f"uint{bits}"))
    out = np.ascontiguousarray(raw).view(dtype).reshape(dims)
    return np.array(new_state, dtype=_U64), out


def rng_bit_generator_handler(ev: Evaluator, inst: HloInstruction, ops: list[Any]) -> Any:
    """Handler of `rng-bit-generator`: (new u64 state, bits of the result's element type)."""
    algo = str(inst.attrs.get("algorithm", "rng_default"))
    shapes = inst.shape.tuple_shapes
    if not shapes or len(shapes) != 2:
        raise UnsupportedOpError(f"rng-bit-generator '{inst.name}' must return (state, bits)")
    data = shapes[1]
    if data.dtype.kind not in "uif" or data.dtype == np.bool_:
        raise UnsupportedOpError(f"rng-bit-generator '{inst.name}': unsupported element type "
                                 f"{data.element_type}")
    try:
        new_state, bits = rng_bit_generator(np.asarray(ops[0]), algo, data.dims, data.dtype)
    except UnsupportedOpError as e:
        raise UnsupportedOpError(f"rng-bit-generator '{inst.name}': {e}") from None
    return new_state.astype(shapes[0].dtype), bits
