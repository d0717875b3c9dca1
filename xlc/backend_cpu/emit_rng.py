"""`rng-bit-generator` on CPU, bit-exact with the evaluator (`xlc.hlo.evaluator_rng`, whose
docstring defines the layout of the bits and the state update):

* `rng_three_fry`: Threefry-2x32 on counter state[1] + i under key state[0]; 64-bit outputs one
  call per element; 32-bit (and narrower: low bits) outputs two neighbouring elements along the
  split dim per call;
* `rng_philox` and `rng_default` (XLA's default on CPU is Philox): Philox-4x32 on a 128-bit
  counter, 4 words per call taken round-robin (64-bit outputs pair words (0,1) and (2,3)).

The generated kernel reads the whole state into registers first (the new state may be written
in place over the old one), then computes every output element independently from its
row-major linear index, and finally writes the new state.
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.backend_cpu.emitter import CpuEmitter, FnCtx, Kernel, element_type, i64, loop_over
from xlc.backend_cpu.rng_ir import join64, philox4x32, split64, threefry2x32
from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import multi_to_linear
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType, Shape

log = logging.getLogger("xlc.backend_cpu")

_INT_OR_FLOAT = {PrimitiveType.S8, PrimitiveType.S16, PrimitiveType.S32, PrimitiveType.S64,
                 PrimitiveType.U8, PrimitiveType.U16, PrimitiveType.U32, PrimitiveType.U64,
                 PrimitiveType.F16, PrimitiveType.F32, PrimitiveType.F64}


def row_major_linear(b: ir.IRBuilder, index: list[ir.Value], dims: tuple[int, ...] | list[int]
                     ) -> ir.Value:
    """The row-major (logical) linear number of `index` in an array of `dims`."""
    linear: ir.Value = i64(0)
    stride = 1
    for d in reversed(range(len(dims))):
        if dims[d] != 1:
            linear = b.add(linear, b.mul(index[d], i64(stride)))
        stride *= dims[d]
    return linear


def split_dim(dims: tuple[int, ...] | list[int]) -> int:
    """The dim a 32-bit Threefry output is split along (the evaluator's `_split_dim`)."""
    for i, d in enumerate(dims):
        if d % 2 == 0:
            return i
    return max(range(len(dims)), key=lambda i: (dims[i], -i))


def store_bits(k: Kernel, inst: HloInstruction, shape: Shape, index: list[ir.Value],
               raw: ir.Value, bits: int, shape_index: tuple[int, ...]) -> None:
    """Store the low `bits` bits of integer `raw` as element `index` of `inst`'s buffer."""
    b = k.b
    ity = ir.IntType(bits)
    if raw.type.width > bits:
        raw = b.trunc(raw, ity)
    linear = multi_to_linear(b, index, shape) if index else i64(0)
    ptr = b.gep(k.ptr(inst, shape_index), [linear], inbounds=True, source_etype=ity)
    b.store(raw, ptr, align=bits // 8)


def _threefry(b: ir.IRBuilder, st: list[ir.Value], idx: list[ir.Value], dims: tuple[int, ...],
              wide: bool) -> tuple[ir.Value, int]:
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
    hidx[sd] = b.lshr(idx[sd], i64(1))
    ctr = b.add(st[1], row_major_linear(b, hidx, half))
    y0, y1 = threefry2x32(b, *split64(b, ctr), k0, k1)
    odd = b.trunc(idx[sd], lu.I1)
    return b.select(odd, y1, y0), _prod(half)


def _philox_counter(st: list[ir.Value]) -> tuple[ir.Value, ir.Value]:
    return (st[1], st[2]) if len(st) >= 3 else (st[1], st[0])


def _philox(b: ir.IRBuilder, st: list[ir.Value], idx: list[ir.Value], dims: tuple[int, ...],
            wide: bool) -> tuple[ir.Value, int]:
    k0, k1 = split64(b, st[0])
    lo, hi = _philox_counter(st)
    j = row_major_linear(b, idx, dims)
    per = 2 if wide else 4
    call = b.udiv(j, i64(per))
    which = b.urem(j, i64(per))
    clo = b.add(lo, call)
    chi = b.add(hi, b.zext(b.icmp_unsigned("<", clo, lo), lu.I64))
    words = philox4x32(b, [*split64(b, clo), *split64(b, chi)], k0, k1)
    if wide:
        pairs = [join64(b, words[0], words[1]), join64(b, words[2], words[3])]
        value = b.select(b.icmp_unsigned("==", which, i64(0)), pairs[0], pairs[1])
    else:
        value = words[3]
        for w in (2, 1, 0):
            value = b.select(b.icmp_unsigned("==", which, i64(w)), words[w], value)
    n_words = _prod(dims) * (2 if wide else 1)
    return value, (n_words + 3) // 4


def _prod(dims: tuple[int, ...] | list[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


_ALGORITHMS = {"rng_three_fry": _threefry, "rng_philox": _philox, "rng_default": _philox}


def emit_rng_bit_generator(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """rng-bit-generator(state) -> (new_state, bits) (see the module docstring)."""
    algo = str(inst.attrs.get("algorithm", "rng_default"))
    gen = _ALGORITHMS.get(algo)
    if gen is None:
        raise UnsupportedOpError(f"CPU backend: rng-bit-generator {inst.name}: unknown "
                                 f"algorithm {algo!r}")
    shapes = inst.shape.tuple_shapes or ()
    state = inst.operands[0]
    if len(shapes) != 2 or not state.shape.is_array or state.shape.rank != 1:
        raise UnsupportedOpError(
            f"CPU backend: rng-bit-generator {inst.name} must map u64[n] to (state, bits)")
    data = shapes[1]
    pt = data.element_type
    if pt not in _INT_OR_FLOAT:
        raise UnsupportedOpError(f"CPU backend: rng-bit-generator {inst.name}: unsupported "
                                 f"element type {pt}")
    n_state = state.shape.dims[0]
    if n_state < 2:
        raise UnsupportedOpError(f"CPU backend: rng-bit-generator {inst.name} needs a u64[2+] "
                                 f"state")
    bits = pt.byte_size * 8
    wide = bits == 64
    k = em.kernel(ctx, inst.name, [(inst, (0,)), (inst, (1,)), (state, ())])
    b = k.b
    st = [k.read(state, [i64(j)]) for j in range(n_state)]
    used = 0
    with loop_over(b, data, "r") as idx:  # rank 0: the body runs once with idx == []
        raw, used = gen(b, st, idx, tuple(data.dims), wide)
        store_bits(k, inst, data, idx, raw, bits, (1,))
    if gen is _threefry:
        new = [st[0], b.add(st[1], i64(used))] + st[2:]
    else:
        lo, hi = _philox_counter(st)
        new_lo = b.add(lo, i64(used))
        new_hi = b.add(hi, b.zext(b.icmp_unsigned("<", new_lo, lo), lu.I64))
        new = [st[0], new_lo, new_hi] + st[3:] if n_state >= 3 else [st[0], new_lo]
    for j, v in enumerate(new):
        lu.store_element(b, v, k.ptr(inst, (0,)), i64(j), element_type(shapes[0], inst.name))
    k.finish()
