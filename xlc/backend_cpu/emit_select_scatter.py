"""select-and-scatter on CPU, with the evaluator's semantics (`evaluator_indexing.py`).

The output is filled with the init value. Then, for every source element in row-major order,
the window it belongs to is scanned in window order (row-major over the window dims); padding
and base-dilation holes are skipped. The first in-bounds element is selected, and a later
element `x` replaces the selected one `s` when `select(s, x)` is false. When the window holds
an in-bounds element, `out[pos] = scatter(out[pos], source)` at the selected position. Select
and scatter computations are scalar functions (`CpuEmitter.scalar_function`).
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.backend_cpu.emitter import CpuEmitter, FnCtx, element_type, i64
from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import multi_to_linear, window_dims, window_positions
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import physical_order

log = logging.getLogger("xlc.backend_cpu")


def emit_select_and_scatter(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """select-and-scatter(operand, source, init) (see the module docstring)."""
    operand, source, init = inst.operands
    pt = element_type(operand.shape, inst.name)
    spt = element_type(source.shape, inst.name)
    opt = element_type(inst.shape, inst.name)
    if spt is not opt:
        raise UnsupportedOpError(
            f"CPU backend: {inst.name}: source type {spt} differs from output {opt}")
    rank = operand.shape.rank
    wdims = window_dims(inst, rank, "CPU")
    select_fn = em.scalar_function(inst.called[0])
    scatter_fn = em.scalar_function(inst.called[1])
    bufs = [(inst, ()), (operand, ()), (source, ()), (init, ())]
    k = em.kernel(ctx, inst.name, bufs)
    b = k.b
    vty = lu.value_type(pt)
    with b.goto_entry_block():
        sel_val = b.alloca(vty, name="sel_val")
        sel_pos = b.alloca(lu.I64, name="sel_pos")
        has = b.alloca(lu.I1, name="has")
    init_v = k.read(init, [])
    with lu.for_range(b, i64(inst.shape.num_elements), name="fill") as i:
        lu.store_element(b, init_v, k.ptr(inst), i, opt)
    with lu.for_nest(b, list(source.shape.dims), name="s") as sidx:
        b.store(ir.Constant(lu.I1, 0), has)
        b.store(lu.const(vty, 0), sel_val)
        b.store(i64(0), sel_pos)
        with lu.for_nest(b, [w.size for w in wdims], name="w") as widx:
            ok, src = window_positions(b, sidx, widx, wdims, operand.shape.dims)
            with b.if_then(ok):
                linear = multi_to_linear(b, src, operand.shape) if src else i64(0)
                x = lu.load_element(b, k.ptr(operand), linear, pt)
                had = b.load(has)
                keep = b.call(select_fn, [b.load(sel_val), x])
                if keep.type != lu.I1:
                    keep = b.icmp_unsigned("!=", keep, ir.Constant(keep.type, 0))
                take = b.or_(b.not_(had), b.not_(keep))
                with b.if_then(take):
                    b.store(x, sel_val)
                    b.store(linear, sel_pos)
                    b.store(ir.Constant(lu.I1, 1), has)
        with b.if_then(b.load(has)):
            # the output has the operand's shape; its layout may differ from the operand's
            tgt = b.load(sel_pos)
            if not _same_layout(inst, operand):
                tgt = _relinearize(b, tgt, inst, operand)
            old = lu.load_element(b, k.ptr(inst), tgt, opt)
            upd = k.read(source, sidx)
            lu.store_element(b, b.call(scatter_fn, [old, upd]), k.ptr(inst), tgt, opt)
    k.finish()


def _same_layout(a: HloInstruction, b_: HloInstruction) -> bool:
    return physical_order(a.shape) == physical_order(b_.shape)


def _relinearize(b: ir.IRBuilder, linear: ir.Value, out: HloInstruction,
                 operand: HloInstruction) -> ir.Value:
    """Map a physical offset in `operand`'s layout to the same element's offset in `out`'s."""
    dims = operand.shape.dims
    idx: list[ir.Value] = [i64(0)] * len(dims)
    rest = linear
    for d in reversed(physical_order(operand.shape)):
        idx[d] = b.urem(rest, i64(dims[d]))
        rest = b.udiv(rest, i64(dims[d]))
    return multi_to_linear(b, idx, out.shape)
