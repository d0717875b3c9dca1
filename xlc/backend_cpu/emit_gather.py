"""Scatter as a simple loop (XLA semantics: out-of-bounds update windows skipped). Gather has
an elemental rule (`ElementalIrEmitter._gather`, start indices clamped) and is emitted like any
elementwise op, fused or not.

scatter: the operand is copied into the output (unless they share the slice, in place), then
a loop over the updates in order applies the update computation (a scalar function) to every
in-bounds target element.
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.backend_cpu.emit_loops import operand_buffers, output_buffers
from xlc.backend_cpu.emitter import (
    CpuEmitter,
    FnCtx,
    Kernel,
    element_type,
    i64,
    loop_over,
)
from xlc.codegen import llvm_utils as lu
from xlc.codegen.convert import convert_value
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType

log = logging.getLogger("xlc.backend_cpu")


def _ints(inst: HloInstruction, key: str) -> list[int]:
    return [int(v) for v in inst.attrs.get(key, ())]


def _clamp(b: ir.IRBuilder, v: ir.Value, hi: int) -> ir.Value:
    v = b.select(b.icmp_signed("<", v, i64(0)), i64(0), v)
    return b.select(b.icmp_signed(">", v, i64(hi)), i64(hi), v)


def _read_index(k: Kernel, indices: HloInstruction, batch: list[ir.Value], ivd: int,
                comp: int) -> ir.Value:
    """Component `comp` of the index vector at batch position `batch` (as i64)."""
    full = list(batch)
    if ivd < indices.shape.rank:
        full.insert(ivd, i64(comp))
    pt = element_type(indices.shape, indices.name)
    return convert_value(k.b, k.read(indices, full), pt, PrimitiveType.S64)


def emit_scatter(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """A (single-operand) scatter applied in update order (see the module docstring)."""
    if len(inst.operands) != 3 or inst.shape.is_tuple:
        raise UnsupportedOpError(f"CPU backend: variadic scatter is unsupported ({inst.name})")
    if _ints(inst, "input_batching_dims"):
        raise UnsupportedOpError(f"CPU backend: scatter with batching dims ({inst.name})")
    operand, indices, updates = inst.operands
    window = _ints(inst, "update_window_dims")
    inserted = set(_ints(inst, "inserted_window_dims"))
    to_operand = _ints(inst, "scatter_dims_to_operand_dims")
    ivd = int(inst.attrs["index_vector_dim"])
    outs = output_buffers(inst)
    k = em.kernel(ctx, inst.name, outs + operand_buffers(inst))
    b = k.b
    if em.slice(operand) != em.slice(inst):
        with loop_over(b, operand.shape, "cp") as idx:
            k.write(inst, idx, k.read(operand, idx))
    fn = em.scalar_function(inst.called[0])
    wdims = [d for d in range(operand.shape.rank) if d not in inserted]
    wsize = [1] * operand.shape.rank
    for d, pos in zip(wdims, window):
        wsize[d] = updates.shape.dims[pos]
    with loop_over(b, updates.shape, "u") as uidx:
        batch = [v for pos, v in enumerate(uidx) if pos not in window]
        woffs = [uidx[pos] for pos in window]
        tgt: list[ir.Value] = [i64(0)] * operand.shape.rank
        for d, o in zip(wdims, woffs):
            tgt[d] = o
        ok: ir.Value = ir.Constant(lu.I1, 1)
        for comp, d in enumerate(to_operand):
            start = _read_index(k, indices, batch, ivd, comp)
            tgt[d] = b.add(tgt[d], start)
            # the whole window must be in bounds (XLA skips out-of-bounds windows)
            ok = b.and_(ok, b.icmp_signed(">=", start, i64(0)))
            ok = b.and_(ok, b.icmp_signed("<=", start, i64(operand.shape.dims[d] - wsize[d])))
        with b.if_then(ok):
            old = k.read(inst, tgt)
            new = b.call(fn, [old, k.read(updates, uidx)])
            k.write(inst, tgt, new)
    k.finish()
