"""`rng-bit-generator` as GPU kernels, bit-exact with the evaluator (XLA); the generators are
the IR the CPU backend uses too (`xlc.codegen.rng`; `xlc.hlo.evaluator_rng` defines the bits).

A bits kernel, one thread per output element (grid-strided), each computing its element from
its row-major index and the state words; then a one-thread state kernel writing the new state.
Two kernels, because the new state may be assigned the old state's slice, which every thread of
the bits kernel reads.
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.backend_gpu.emit_misc import each_element
from xlc.backend_gpu.emitter import GpuEmitter
from xlc.backend_gpu.kernel import element_type, i64
from xlc.backend_gpu.thunks import Thunk
from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import multi_to_linear
from xlc.codegen.rng import ALGORITHMS, check_rng_bit_generator, next_state
from xlc.hlo.ir import HloInstruction

log = logging.getLogger("xlc.backend_gpu")


def emit_rng_bit_generator(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """rng-bit-generator(state) -> (new_state, bits) (see the module docstring)."""
    algo, data, n_state = check_rng_bit_generator(inst, "GPU backend")
    gen = ALGORITHMS[algo]
    state = inst.operands[0]
    pt = data.element_type
    assert pt is not None
    bits = pt.byte_size * 8
    k = em.kernel(inst, [(inst, (1,))], [(state, ())], max_threads=128,
                  label=f"{inst.name}_bits")
    b = k.b
    st = [k.read(state, [i64(j)]) for j in range(n_state)]
    calls = 0
    with each_element(k, data) as idx:
        raw, calls = gen(b, st, list(idx), tuple(data.dims), bits == 64)
        ity = ir.IntType(bits)
        if raw.type.width > bits:
            raw = b.trunc(raw, ity)
        linear = multi_to_linear(b, idx, data) if data.rank else i64(0)
        b.store(raw, b.gep(k.ptr(inst, (1,)), [linear], inbounds=True, source_etype=ity),
                align=bits // 8)
    k.finish()
    s = em.kernel(inst, [(inst, (0,))], [(state, ())], max_threads=1,
                  label=f"{inst.name}_state")
    s.launch((1, 1, 1), (1, 1, 1))
    old = [s.read(state, [i64(j)]) for j in range(n_state)]
    state_pt = element_type(state.shape, state.name)
    for j, v in enumerate(next_state(s.b, algo, old, calls)):
        lu.store_element(s.b, v, s.ptr(inst, (0,)), i64(j), state_pt)
    s.finish()
    return [k.thunk(), s.thunk()]
