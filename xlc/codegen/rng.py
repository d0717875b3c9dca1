"""Counter-based bit generators in LLVM IR for `rng-bit-generator`, shared by the CPU and GPU
backends and bit-exact with `xlc.hlo.evaluator_rng` (whose docstring defines the layout of the
bits and the state update).

* `threefry2x32(b, x0, x1, k0, k1)` (20 rounds) and `philox4x32(b, c, k0, k1)` (10 rounds) work
  on i32 values; `split64` / `join64` move between one u64 and its (low, high) 32-bit words.
* `ALGORITHMS[name](b, state, index, dims, wide) -> (raw bits, calls)`: the bits of output
  element `index` (logical multi-index into `dims`) from the state words, as an i32 (or i64
  when `wide`, for 64-bit outputs), and the number of generator calls the whole output uses.
  Every element is independent of the others, so any loop or thread order works.
* `next_state(b, algorithm, state, calls)`: the new state words.
* `check_rng_bit_generator(inst, backend)`: the operand/result checks both backends make.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from xlc.codegen import llvm_utils as lu
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType, Shape

_ROT = (13, 15, 26, 6, 17, 29, 16, 24)

RNG_ELEMENT_TYPES = frozenset({
    PrimitiveType.S8, PrimitiveType.S16, PrimitiveType.S32, PrimitiveType.S64,
    PrimitiveType.U8, PrimitiveType.U16, PrimitiveType.U32, PrimitiveType.U64,
    PrimitiveType.F16, PrimitiveType.F32, PrimitiveType.F64})
"""Element types `rng-bit-generator` can produce (the bits are stored as they are)."""


def _c32(v: int) -> ir.Constant:
    return ir.Constant(lu.I32, v & 0xFFFFFFFF)


def _i64(v: int) -> ir.Constant:
    return ir.Constant(lu.I64, v)


def split64(b: ir.IRBuilder, v: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(low, high) i32 words of i64 `v`."""
    return b.trunc(v, lu.I32), b.trunc(b.lshr(v, ir.Constant(lu.I64, 32)), lu.I32)


def join64(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value) -> ir.Value:
    """The i64 `lo | hi << 32` of two i32 words."""
    return b.or_(b.zext(lo, lu.I64), b.shl(b.zext(hi, lu.I64), ir.Constant(lu.I64, 32)))


def _rotl(b: ir.IRBuilder, v: ir.Value, d: int) -> ir.Value:
    return b.or_(b.shl(v, _c32(d)), b.lshr(v, _c32(32 - d)))


def threefry2x32(b: ir.IRBuilder, x0: ir.Value, x1: ir.Value, k0: ir.Value, k1: ir.Value
                 ) -> tuple[ir.Value, ir.Value]:
    """Threefry-2x32, 20 rounds, on i32 words under key (k0, k1) (the evaluator's algorithm)."""
    ks = (k0, k1, b.xor(b.xor(_c32(0x1BD11BDA), k0), k1))
    x0 = b.add(x0, ks[0])
    x1 = b.add(x1, ks[1])
    for group in range(5):
        for r in _ROT[(group % 2) * 4:(group % 2) * 4 + 4]:
            x0 = b.add(x0, x1)
            x1 = b.xor(_rotl(b, x1, r), x0)
        x0 = b.add(x0, ks[(group + 1) % 3])
        x1 = b.add(b.add(x1, ks[(group + 2) % 3]), _c32(group + 1))
    return x0, x1


def philox4x32(b: ir.IRBuilder, c: Sequence[ir.Value], k0: ir.Value, k1: ir.Value
               ) -> list[ir.Value]:
    """Philox-4x32, 10 rounds, on four i32 counter words under key (k0, k1)."""
    ma, mb = ir.Constant(lu.I64, 0xD2511F53), ir.Constant(lu.I64, 0xCD9E8D57)
    sh = ir.Constant(lu.I64, 32)
    x = list(c)
    for r in range(10):
        key0 = b.add(k0, _c32(r * 0x9E3779B9))
        key1 = b.add(k1, _c32(r * 0xBB67AE85))
        p0 = b.mul(b.zext(x[0], lu.I64), ma)
        p1 = b.mul(b.zext(x[2], lu.I64), mb)
        x = [b.xor(b.xor(b.trunc(b.lshr(p1, sh), lu.I32), x[1]), key0), b.trunc(p1, lu.I32),
             b.xor(b.xor(b.trunc(b.lshr(p0, sh), lu.I32), x[3]), key1), b.trunc(p0, lu.I32)]
    return x


def row_major_linear(b: ir.IRBuilder, index: Sequence[ir.Value],
                     dims: tuple[int, ...] | list[int]) -> ir.Value:
    """The row-major (logical) linear number of i64 `index` in an array of `dims`."""
    linear: ir.Value = _i64(0)
    stride = 1
    for d in reversed(range(len(dims))):
        if dims[d] != 1:
            linear = b.add(linear, b.mul(index[d], _i64(stride)))
        stride *= dims[d]
    return linear


def split_dim(dims: tuple[int, ...] | list[int]) -> int:
    """The dim a 32-bit Threefry output is split along (the evaluator's `_split_dim`)."""
    for i, d in enumerate(dims):
        if d % 2 == 0:
            return i
    return max(range(len(dims)), key=lambda i: (dims[i], -i))


def _prod(dims: tuple[int, ...] | list[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def threefry_bits(b: ir.IRBuilder, st: list[ir.Value], idx: list[ir.Value],
                  dims: tuple[int, ...], wide: bool) -> tuple[ir.Value, int]:
    """`rng_three_fry`: (bits of element `idx`, number of Threefry calls)."""
    k0, k1 = split64(b, st[0])
    if wide:
        ctr = b.add(st[1], row_major_linear(b, idx, dims))
        y0, y1 = threefry2x32(b, *split64(b, ctr), k0, k1)
        return join64(b, y0, y1), _prod(dims)
    if not dims:
        y0, _ = threefry2x32(b, *split64(b, st[1]), k0, k1)
        return y0, 1
    sd = split_dim(dims)
    half = list(dims)
    half[sd] = (dims[sd] + 1) // 2
    hidx = list(idx)
    hidx[sd] = b.lshr(idx[sd], _i64(1))
    ctr = b.add(st[1], row_major_linear(b, hidx, half))
    y0, y1 = threefry2x32(b, *split64(b, ctr), k0, k1)
    odd = b.trunc(idx[sd], lu.I1)
    return b.select(odd, y1, y0), _prod(half)


def philox_counter(st: list[ir.Value]) -> tuple[ir.Value, ir.Value]:
    """The (low, high) words of Philox's 128-bit counter in the state."""
    return (st[1], st[2]) if len(st) >= 3 else (st[1], st[0])


def philox_bits(b: ir.IRBuilder, st: list[ir.Value], idx: list[ir.Value],
                dims: tuple[int, ...], wide: bool) -> tuple[ir.Value, int]:
    """`rng_philox`: (bits of element `idx`, number of Philox calls)."""
    k0, k1 = split64(b, st[0])
    lo, hi = philox_counter(st)
    j = row_major_linear(b, idx, dims)
    per = 2 if wide else 4
    call = b.udiv(j, _i64(per))
    which = b.urem(j, _i64(per))
    clo = b.add(lo, call)
    chi = b.add(hi, b.zext(b.icmp_unsigned("<", clo, lo), lu.I64))
    words = philox4x32(b, [*split64(b, clo), *split64(b, chi)], k0, k1)
    if wide:
        pairs = [join64(b, words[0], words[1]), join64(b, words[2], words[3])]
        value = b.select(b.icmp_unsigned("==", which, _i64(0)), pairs[0], pairs[1])
    else:
        value = words[3]
        for w in (2, 1, 0):
            value = b.select(b.icmp_unsigned("==", which, _i64(w)), words[w], value)
    n_words = _prod(dims) * (2 if wide else 1)
    return value, (n_words + 3) // 4


BitsFn = Callable[[ir.IRBuilder, list[ir.Value], list[ir.Value], tuple[int, ...], bool],
                  tuple[ir.Value, int]]
ALGORITHMS: dict[str, BitsFn] = {"rng_three_fry": threefry_bits, "rng_philox": philox_bits,
                                 "rng_default": philox_bits}
"""Algorithm attribute -> element generator (XLA's `rng_default` is Philox on CPU and GPU)."""


def next_state(b: ir.IRBuilder, algorithm: str, st: list[ir.Value], calls: int
               ) -> list[ir.Value]:
    """The state words after a `rng-bit-generator` that made `calls` generator calls."""
    if ALGORITHMS[algorithm] is threefry_bits:
        return [st[0], b.add(st[1], _i64(calls))] + st[2:]
    lo, hi = philox_counter(st)
    new_lo = b.add(lo, _i64(calls))
    new_hi = b.add(hi, b.zext(b.icmp_unsigned("<", new_lo, lo), lu.I64))
    return [st[0], new_lo, new_hi] + st[3:] if len(st) >= 3 else [st[0], new_lo]


def check_rng_bit_generator(inst: HloInstruction, backend: str) -> tuple[str, Shape, int]:
    """(algorithm, data shape, state words) of `rng-bit-generator` `inst`; UnsupportedOpError
    naming `backend` (e.g. "CPU backend") for anything the emitters cannot produce."""
    algo = str(inst.attrs.get("algorithm", "rng_default"))
    if algo not in ALGORITHMS:
        raise UnsupportedOpError(f"{backend}: rng-bit-generator {inst.name}: unknown "
                                 f"algorithm {algo!r}")
    shapes = inst.shape.tuple_shapes or ()
    state = inst.operands[0]
    if len(shapes) != 2 or not state.shape.is_array or state.shape.rank != 1:
        raise UnsupportedOpError(
            f"{backend}: rng-bit-generator {inst.name} must map u64[n] to (state, bits)")
    data = shapes[1]
    if data.element_type not in RNG_ELEMENT_TYPES:
        raise UnsupportedOpError(f"{backend}: rng-bit-generator {inst.name}: unsupported "
                                 f"element type {data.element_type}")
    n_state = state.shape.dims[0]
    if n_state < 2:
        raise UnsupportedOpError(f"{backend}: rng-bit-generator {inst.name} needs a u64[2+] "
                                 f"state")
    return algo, data, n_state
