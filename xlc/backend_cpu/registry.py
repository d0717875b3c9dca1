"""THE CPU emitter table, built explicitly in one place (no registration by import side effect).

`EMITTERS` maps every opcode the CPU backend compiles to its emitter function
(`fn(emitter, ctx, inst)`); opcodes absent from it are listed with a reason in
`emitter.UNSUPPORTED`. Fusions dispatch on their kind through `FUSION_EMITTERS`; a kLoop fusion
that satisfies the row-fusion contract (`xlc.passes.row_fusion.is_row_fusion`) goes to the
row-fusion emitter. Every opcode with an elemental rule (elementwise math, data movement,
gather) and no dedicated emitter is emitted as one loop over its output (`emit_elementwise`).
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from xlc.backend_cpu.emit_async_copy import emit_copy_start
from xlc.backend_cpu.emit_control import emit_call, emit_conditional, emit_nothing, emit_while
from xlc.backend_cpu.emit_conv import emit_convolution
from xlc.backend_cpu.emit_dot import emit_dot
from xlc.backend_cpu.emit_gather import emit_scatter
from xlc.backend_cpu.emit_loops import emit_dus, emit_elementwise, emit_loop_fusion
from xlc.backend_cpu.emit_misc import emit_all_reduce, emit_device_id, emit_map
from xlc.backend_cpu.emit_reduce import emit_input_fusion, emit_reduce, emit_reduce_window
from xlc.backend_cpu.emit_rng import emit_rng_bit_generator
from xlc.backend_cpu.emit_row_fusion import emit_row_fusion
from xlc.backend_cpu.emit_select_scatter import emit_select_and_scatter
from xlc.backend_cpu.emit_sort import emit_custom_call, emit_sort, emit_topk
from xlc.backend_cpu.emitter import CpuEmitter, EmitFn, FnCtx
from xlc.codegen.indexing import has_elemental_ir_rule
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.passes.row_fusion import is_row_fusion

log = logging.getLogger("xlc.backend_cpu")


def emit_kloop_fusion(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """A kLoop fusion: the row-fusion emitter when it has row reductions inside, else one
    loop nest over its output."""
    if is_row_fusion(inst):
        emit_row_fusion(em, ctx, inst)
    else:
        emit_loop_fusion(em, ctx, inst)


FUSION_EMITTERS: dict[str, EmitFn] = {
    "kLoop": emit_kloop_fusion,
    "kInput": emit_input_fusion,
}
"""Fusion kind -> emitter."""


def emit_fusion(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """Dispatch a fusion by its kind (`FUSION_EMITTERS`)."""
    kind = str(inst.attrs.get("kind", "kLoop"))
    fn = FUSION_EMITTERS.get(kind)
    if fn is None:
        raise UnsupportedOpError(f"CPU backend has no emitter for {kind} fusion ({inst.name})")
    fn(em, ctx, inst)


_DEDICATED: dict[Opcode, EmitFn] = {
    # no code: values live in their assigned buffers already
    Opcode.PARAMETER: emit_nothing,
    Opcode.CONSTANT: emit_nothing,
    Opcode.TUPLE: emit_nothing,
    Opcode.GET_TUPLE_ELEMENT: emit_nothing,
    Opcode.BITCAST: emit_nothing,
    Opcode.OPT_BARRIER: emit_nothing,
    Opcode.DOMAIN: emit_nothing,
    Opcode.ADD_DEPENDENCY: emit_nothing,
    Opcode.AFTER_ALL: emit_nothing,
    # control flow
    Opcode.WHILE: emit_while,
    Opcode.CONDITIONAL: emit_conditional,
    Opcode.CALL: emit_call,
    # kernels
    Opcode.FUSION: emit_fusion,
    Opcode.DYNAMIC_UPDATE_SLICE: emit_dus,
    Opcode.DOT: emit_dot,
    Opcode.CONVOLUTION: emit_convolution,
    Opcode.REDUCE: emit_reduce,
    Opcode.REDUCE_WINDOW: emit_reduce_window,
    Opcode.SCATTER: emit_scatter,
    Opcode.SELECT_AND_SCATTER: emit_select_and_scatter,
    Opcode.SORT: emit_sort,
    Opcode.TOPK: emit_topk,
    Opcode.CUSTOM_CALL: emit_custom_call,
    Opcode.MAP: emit_map,
    Opcode.RNG_BIT_GENERATOR: emit_rng_bit_generator,
    Opcode.REPLICA_ID: emit_device_id,
    Opcode.PARTITION_ID: emit_device_id,
    Opcode.ALL_REDUCE: emit_all_reduce,
    # asynchronous copies are plain copies on the CPU (one memory): copy-done is the copy's
    # destination already
    Opcode.COPY_START: emit_copy_start,
    Opcode.COPY_DONE: emit_nothing,
}


def build_emitters() -> dict[Opcode, EmitFn]:
    """The dedicated emitters plus `emit_elementwise` for every other opcode with an
    elemental rule."""
    table: dict[Opcode, Callable] = {op: emit_elementwise for op in Opcode
                                     if has_elemental_ir_rule(op) and op not in _DEDICATED}
    table.update(_DEDICATED)
    return table


EMITTERS: dict[Opcode, EmitFn] = build_emitters()
"""Opcode -> CPU emitter (see the module docstring)."""
