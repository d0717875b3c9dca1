"""THE GPU emitter table, built explicitly in one place (no registration by import side effect).

`EMITTERS` maps every opcode the GPU backend compiles to its emitter function
(`fn(emitter, inst) -> list[Thunk]`); opcodes absent from it are listed with a reason in
`UNSUPPORTED`. The GpuEmitter is constructed with both (`compiler.compile_gpu`). Fusions
dispatch on their kind through `FUSION_EMITTERS`. Every opcode with an elemental rule
(elementwise math, data movement) and no dedicated emitter is emitted as
one grid-stride loop kernel over its output (`emit_elementwise`).
"""
from __future__ import annotations

import logging

from xlc.backend_gpu.emit_async_copy import emit_copy_done, emit_copy_start
from xlc.backend_gpu.emit_control import (
    emit_call,
    emit_conditional,
    emit_nothing,
    emit_passthrough,
    emit_while,
)
from xlc.backend_gpu.emit_conv import emit_convolution
from xlc.backend_gpu.emit_custom_call import emit_custom_call
from xlc.backend_gpu.emit_gemm import emit_dot, emit_output_fusion
from xlc.backend_gpu.emit_loop import emit_copy, emit_dus, emit_elementwise, emit_loop_fusion
from xlc.backend_gpu.emit_misc import (
    emit_all_reduce,
    emit_device_id,
    emit_gather,
    emit_map,
    emit_reduce_window,
    emit_scatter,
)
from xlc.backend_gpu.emit_reduce import emit_input_fusion, emit_reduce
from xlc.backend_gpu.emit_rng import emit_rng_bit_generator
from xlc.backend_gpu.emit_row_fusion import emit_row_fusion
from xlc.backend_gpu.emit_select_scatter import emit_select_and_scatter
from xlc.backend_gpu.emit_sort import emit_sort, emit_topk
from xlc.backend_gpu.emit_transpose import emit_transpose
from xlc.backend_gpu.emitter import EmitFn, GpuEmitter
from xlc.backend_gpu.thunks import Thunk
from xlc.codegen.indexing import has_elemental_ir_rule
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.passes.row_fusion import is_row_fusion

log = logging.getLogger("xlc.backend_gpu")

UNSUPPORTED: dict[Opcode, str] = {
    Opcode.RNG: "the stateful 'rng' op is not supported (XLA expands it; JAX emits "
                "rng-bit-generator, which is supported)",
    Opcode.RNG_GET_AND_UPDATE_STATE: "the stateful 'rng' ops are not supported (XLA expands "
                                     "them; use rng-bit-generator)",
    Opcode.FFT: "FFT is not implemented by the GPU backend (XLA calls cuFFT; the interpreter "
                "backend runs it)",
}
"""Opcodes with no GPU emitter and why (the coverage test checks EMITTERS + UNSUPPORTED)."""

def emit_kloop_fusion(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """A kLoop fusion: a row fusion (reduces inside, `row_fusion.is_row_fusion`) is one
    block-per-row kernel (`emit_row_fusion`); any other one grid-stride loop kernel."""
    if is_row_fusion(inst):
        return emit_row_fusion(em, inst)
    return emit_loop_fusion(em, inst)


FUSION_EMITTERS: dict[str, EmitFn] = {
    "kLoop": emit_kloop_fusion,
    "kInput": emit_input_fusion,
    # a dot with its elementwise / transposing epilogue (gemm_epilogue.py): the GEMM kernel
    # stores every result through the epilogue
    "kOutput": emit_output_fusion,
}
"""Fusion kind -> emitter."""


def emit_fusion(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """Dispatch a fusion by its kind (`FUSION_EMITTERS`); UnsupportedOpError for other kinds."""
    kind = str(inst.attrs.get("kind", "kLoop"))
    fn = FUSION_EMITTERS.get(kind)
    if fn is None:
        raise UnsupportedOpError(f"GPU backend has no emitter for {kind} fusion ({inst.name})")
    return fn(em, inst)


_DEDICATED: dict[Opcode, EmitFn] = {
    # no thunk: values live in slices the buffer assignment already gave
    Opcode.PARAMETER: emit_nothing,
    Opcode.CONSTANT: emit_nothing,
    Opcode.TUPLE: emit_nothing,
    Opcode.GET_TUPLE_ELEMENT: emit_nothing,
    Opcode.BITCAST: emit_nothing,
    Opcode.AFTER_ALL: emit_nothing,
    # forward their operand: device-to-device copies only where slices differ
    Opcode.OPT_BARRIER: emit_passthrough,
    Opcode.ADD_DEPENDENCY: emit_passthrough,
    Opcode.DOMAIN: emit_passthrough,
    # control flow (thunks on the host)
    Opcode.WHILE: emit_while,
    Opcode.CONDITIONAL: emit_conditional,
    Opcode.CALL: emit_call,
    # kernels
    Opcode.FUSION: emit_fusion,
    Opcode.COPY: emit_copy,
    Opcode.DYNAMIC_UPDATE_SLICE: emit_dus,
    Opcode.TRANSPOSE: emit_transpose,
    Opcode.DOT: emit_dot,
    Opcode.CONVOLUTION: emit_convolution,
    Opcode.REDUCE: emit_reduce,
    Opcode.REDUCE_WINDOW: emit_reduce_window,
    Opcode.GATHER: emit_gather,
    Opcode.SCATTER: emit_scatter,
    Opcode.SELECT_AND_SCATTER: emit_select_and_scatter,
    Opcode.SORT: emit_sort,
    Opcode.TOPK: emit_topk,
    Opcode.MAP: emit_map,
    Opcode.RNG_BIT_GENERATOR: emit_rng_bit_generator,
    # one device: ids are 0, all-reduce is a copy
    Opcode.REPLICA_ID: emit_device_id,
    Opcode.PARTITION_ID: emit_device_id,
    Opcode.ALL_REDUCE: emit_all_reduce,
    # targets with a host implementation (LAPACK, Python) run on the host between kernels
    Opcode.CUSTOM_CALL: emit_custom_call,
    # asynchronous copies (host offload): a copy on the copy stream, a wait for it
    Opcode.COPY_START: emit_copy_start,
    Opcode.COPY_DONE: emit_copy_done,
}


def build_emitters() -> dict[Opcode, EmitFn]:
    """The dedicated emitters plus `emit_elementwise` for every other opcode with an
    elemental rule."""
    table: dict[Opcode, EmitFn] = {op: emit_elementwise for op in Opcode
                                   if has_elemental_ir_rule(op) and op not in _DEDICATED}
    table.update(_DEDICATED)
    return table


EMITTERS: dict[Opcode, EmitFn] = build_emitters()
"""Opcode -> GPU emitter (see the module docstring)."""
