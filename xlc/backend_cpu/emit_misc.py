"""Small emitters: map (a scalar function applied elementwise), and the single-device
collectives (replica-id / partition-id are 0, all-reduce over one replica is the identity).
"""
from __future__ import annotations

import logging

from xlc.backend_cpu.emit_loops import operand_buffers, output_buffers
from xlc.backend_cpu.emitter import CpuEmitter, FnCtx, element_type, loop_over
from xlc.codegen import llvm_utils as lu
from xlc.hlo.ir import HloInstruction

log = logging.getLogger("xlc.backend_cpu")


def emit_map(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """out[i] = f(a[i], b[i], ...) with `f` the mapped computation as a scalar function."""
    fn = em.scalar_function(inst.called[0])
    k = em.kernel(ctx, inst.name, [(inst, ())] + operand_buffers(inst))
    with loop_over(k.b, inst.shape) as idx:
        k.write(inst, idx, k.b.call(fn, [k.read(op, idx) for op in inst.operands]))
    k.finish()


def emit_device_id(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """One device: the id is 0."""
    pt = element_type(inst.shape, inst.name)
    k = em.kernel(ctx, inst.name, [(inst, ())])
    k.write(inst, [], lu.const(lu.value_type(pt), 0))
    k.finish()


def emit_all_reduce(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """All-reduce over a single replica: a copy of each operand."""
    outs = output_buffers(inst)
    k = em.kernel(ctx, inst.name, outs + operand_buffers(inst))
    for op, (o, sidx) in zip(inst.operands, outs):
        if em.slice(op) != em.slice(o, sidx):
            with loop_over(k.b, op.shape) as idx:
                k.write(o, idx, k.read(op, idx), sidx)
    k.finish()
