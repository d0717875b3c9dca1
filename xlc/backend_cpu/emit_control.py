"""Control flow and no-code instructions.

* parameter, constant, tuple, get-tuple-element, bitcast and friends emit nothing: their values
  already live in the slices the BufferAssignment gave them (constants are LLVM globals,
  bitcast/GTE forward their operand's buffer, tuple index tables are never read because every
  buffer is resolved statically).
* while / conditional / call are real control flow: each called computation is a
  `void(ptr table)` function over the same buffer table; carried values must-alias, so no copies
  are made here (copy insertion already added the needed ones).
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.backend_cpu.emitter import CpuEmitter, FnCtx, element_type, i64
from xlc.codegen import llvm_utils as lu
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType

log = logging.getLogger("xlc.backend_cpu")


def emit_nothing(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """Instructions whose value needs no code (see the module docstring)."""


def _load_scalar(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> ir.Value:
    pt = element_type(inst.shape, inst.name)
    return lu.load_element(ctx.b, em.address(ctx, inst), i64(0), pt)


def emit_while(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """`while (cond(table)) body(table);` - the condition's root is a pred buffer."""
    cond, body = inst.called[0], inst.called[1]
    cf = em.computation_function(cond)
    bf = em.computation_function(body)
    b = ctx.b
    head = b.append_basic_block(f"{inst.name}.cond")
    loop = b.append_basic_block(f"{inst.name}.body")
    done = b.append_basic_block(f"{inst.name}.done")
    b.branch(head)
    b.position_at_end(head)
    b.call(cf, [ctx.table])
    assert cond.root is not None
    pred = _load_scalar(em, ctx, cond.root)
    b.cbranch(pred, loop, done)
    b.position_at_end(loop)
    b.call(bf, [ctx.table])
    b.branch(head)
    b.position_at_end(done)


def emit_conditional(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """Branch on a pred (true -> branch 0) or an s32 index (out of range -> last branch)."""
    b = ctx.b
    sel = inst.operands[0]
    value = _load_scalar(em, ctx, sel)
    branches = list(inst.called)
    fns = [em.computation_function(c) for c in branches]
    done = b.append_basic_block(f"{inst.name}.done")
    blocks = [b.append_basic_block(f"{inst.name}.b{k}") for k in range(len(fns))]
    if sel.shape.element_type is PrimitiveType.PRED:
        b.cbranch(value, blocks[0], blocks[1])
    else:
        sw = b.switch(value, blocks[-1])
        for k, blk in enumerate(blocks[:-1]):
            sw.add_case(ir.Constant(value.type, k), blk)
    for fn, blk in zip(fns, blocks):
        b.position_at_end(blk)
        b.call(fn, [ctx.table])
        b.branch(done)
    b.position_at_end(done)


def emit_call(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """A call to its computation's function (its parameters hold the caller's values)."""
    ctx.b.call(em.computation_function(inst.called[0]), [ctx.table])
