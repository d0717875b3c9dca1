"""select-and-scatter as GPU kernels, with the evaluator's (XLA's) semantics.

A loop kernel fills the output with the init value; then every source element selects its
window's element (window order, padding / base-dilation holes skipped, a later element `x`
replaces the selected `s` when `select(s, x)` is false) and combines the source value into the
output there. With a plain `add` scatter on f32/f64/s32/u32/s64/u64 the source elements run in
parallel and combine with atomics; otherwise one thread applies them in row-major order (any
scatter computation, deterministic; the CPU backend's order).
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.backend_gpu.emit_misc import _ATOMIC_TYPES, each_element, serial
from xlc.backend_gpu.emitter import GpuEmitter, operand_buffers
from xlc.backend_gpu.kernel import element_type, i64
from xlc.backend_gpu.thunks import Thunk
from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import multi_to_linear, window_dims, window_positions
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloComputation, HloInstruction
from xlc.hlo.opcodes import Opcode

log = logging.getLogger("xlc.backend_gpu")


def _is_add(comp: HloComputation) -> bool:
    root = comp.root
    return (root is not None and root.opcode is Opcode.ADD and len(comp.parameters) == 2
            and {op.uid for op in root.operands} == {p.uid for p in comp.parameters})


def emit_select_and_scatter(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """select-and-scatter(operand, source, init) (see the module docstring)."""
    operand, source, init = inst.operands
    pt = element_type(operand.shape, inst.name)
    opt = element_type(inst.shape, inst.name)
    if element_type(source.shape, inst.name) is not opt:
        raise UnsupportedOpError(f"GPU backend: {inst.name}: source type "
                                 f"{source.shape.element_type} differs from output {opt}")
    wdims = window_dims(inst, operand.shape.rank, "GPU")
    select, scatter = inst.called[0], inst.called[1]
    fill = em.kernel(inst, [(inst, ())], [(init, ())], max_threads=128,
                     label=f"{inst.name}_init")
    init_v = fill.read(init, [])
    with each_element(fill, inst.shape) as idx:
        fill.write(inst, idx, init_v)
    fill.finish()
    atomic = _ATOMIC_TYPES.get(opt) if _is_add(scatter) else None
    k = em.kernel(inst, [(inst, ())], operand_buffers(inst), max_threads=128)
    b = k.b
    vty = lu.value_type(pt)
    with b.goto_entry_block():
        sel_val, sel_pos, has = b.alloca(vty), b.alloca(lu.I64), b.alloca(lu.I1)
    ctx = serial(k, source.shape) if atomic is None else each_element(k, source.shape)
    with ctx as sidx:
        b.store(ir.Constant(lu.I1, 0), has)
        b.store(lu.const(vty, 0), sel_val)
        b.store(i64(0), sel_pos)
        with lu.for_nest(b, [w.size for w in wdims], name="w") as widx:
            ok, src = window_positions(b, sidx, widx, wdims, operand.shape.dims)
            with b.if_then(ok):
                x = k.read(operand, src)
                keep = em.apply(b, select, [b.load(sel_val), x])[0]
                if keep.type != lu.I1:
                    keep = b.icmp_unsigned("!=", keep, ir.Constant(keep.type, 0))
                with b.if_then(b.or_(b.not_(b.load(has)), b.not_(keep))):
                    b.store(x, sel_val)
                    b.store(multi_to_linear(b, src, inst.shape) if src else i64(0), sel_pos)
                    b.store(ir.Constant(lu.I1, 1), has)
        with b.if_then(b.load(has)):
            tgt = b.load(sel_pos)
            upd = k.read(source, sidx)
            if atomic is not None:
                ptr = b.gep(k.ptr(inst), [tgt], inbounds=True, source_etype=lu.storage_type(opt))
                b.atomic_rmw(atomic, ptr, upd, "monotonic")
            else:
                cur = lu.load_element(b, k.ptr(inst), tgt, opt)
                lu.store_element(b, em.apply(b, scatter, [cur, upd])[0], k.ptr(inst), tgt, opt)
    k.finish()
    return [fill.thunk(), k.thunk()]
