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
from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import multi_to_linear
from xlc.codegen.rng import ALGORITHMS, check_rng_bit_generator, next_state
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import Shape

log = logging.getLogger("xlc.backend_cpu")


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


def emit_rng_bit_generator(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """rng-bit-generator(state) -> (new_state, bits) (see the module docstring)."""
    algo, data, n_state = check_rng_bit_generator(inst, "CPU backend")
    gen = ALGORITHMS[algo]
    shapes = inst.shape.tuple_shapes or ()
    state = inst.operands[0]
    pt = data.element_type
    assert pt is not None
    bits = pt.byte_size * 8
    wide = bits == 64
    k = em.kernel(ctx, inst.name, [(inst, (0,)), (inst, (1,)), (state, ())])
    b = k.b
    st = [k.read(state, [i64(j)]) for j in range(n_state)]
    used = 0
    with loop_over(b, data, "r") as idx:  # rank 0: the body runs once with idx == []
        raw, used = gen(b, st, idx, tuple(data.dims), wide)
        store_bits(k, inst, data, idx, raw, bits, (1,))
    new = next_state(b, algo, st, used)
    for j, v in enumerate(new):
        lu.store_element(b, v, k.ptr(inst, (0,)), i64(j), element_type(shapes[0], inst.name))
    k.finish()
