"""Reductions: unfused (variadic) reduce and kInput fusions (a reduce root, or a tuple root of
reduces sharing one iteration space plus elementwise outputs over that space).

Two loop orders, chosen from the input's layout:
* **row** (the physically minor dimension is reduced): kept dims outside, reduced dims inside,
  accumulators in registers (allocas promoted by mem2reg). The reducer computation is a scalar
  function whose float add/multiply carry `reassoc`, so LLVM vectorises the inner loop with
  several partial sums (error bound: like any reassociated sum, |err| <= (n-1) eps sum|x_i|,
  the same order as the sequential bound); long float sums (single-op `add` reducers over at
  least 2 x 1024 elements) instead add blocks of 1024 elements pairwise
  (`emit_reduce_blocked`), so their error grows with log2(n) rather than n / 64;
* **column** (the minor dimension is kept): outputs initialised to the init values, then one
  pass over the input in physical order doing `out[o] = f(out[o], x)`; the inner loop runs
  along contiguous kept elements and vectorises without reassociation.
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.backend_cpu.emit_loops import (
    fusion_generator,
    operand_buffers,
    operand_generator,
    output_buffers,
)
from xlc.backend_cpu.emit_reduce_blocked import block_plan, emit_blocked_sums
from xlc.backend_cpu.emit_reduce_column import column_plan, emit_blocked_columns
from xlc.backend_cpu.emitter import (
    CpuEmitter,
    FnCtx,
    Kernel,
    LeafEmitter,
    element_type,
    loop_over,
    split_of,
)
from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import window_positions
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Shape, ShapeIndex, physical_order

log = logging.getLogger("xlc.backend_cpu")

Hero = tuple[HloInstruction, list[ShapeIndex]]


def _call_reducer(em: CpuEmitter, b: ir.IRBuilder, red: HloInstruction,
                  accs: list[ir.Value], xs: list[ir.Value]) -> list[ir.Value]:
    fn = em.scalar_function(red.called[0], reassoc=True)
    res = b.call(fn, accs + xs)
    if len(accs) == 1:
        return [res]
    return [b.extract_value(res, k) for k in range(len(accs))]


def write_all(k: Kernel, out: HloInstruction, full: list[ir.Value],
              values: list[tuple[ir.Value, ShapeIndex]]) -> None:
    """Store element `full` of several outputs of `out`, given as (value, shape index) pairs
    whose values were all generated before this call: an elementwise output may share its
    buffer with an operand that another output reads at this index (`alias_rules`)."""
    for v, sidx in values:
        k.write(out, full, v, sidx)


def _merge(a: list, c: list) -> list:
    return [x if x is not None else y for x, y in zip(a, c)]


def emit_reduction(em: CpuEmitter, k: Kernel, gen: LeafEmitter, out: HloInstruction,
                   heroes: list[Hero], loops: list[tuple[HloInstruction, ShapeIndex]]) -> None:
    """Emit reductions `heroes` ((reduce, output shape indices of `out`)) and elementwise
    outputs `loops` ((inst over the reduce input shape, output index)) into kernel `k`."""
    first = heroes[0][0]
    in_shape = first.operands[0].shape
    rdims = sorted(int(d) for d in first.attrs["dimensions"])
    for red, _ in heroes:
        if tuple(red.operands[0].shape.dims) != tuple(in_shape.dims) or \
                sorted(int(d) for d in red.attrs["dimensions"]) != rdims:
            raise UnsupportedOpError(
                f"CPU backend: reductions of {out.name} do not share one iteration space")
    for inst, _ in loops:
        if tuple(inst.shape.dims) != tuple(in_shape.dims):
            raise UnsupportedOpError(
                f"CPU backend: output {inst.name} of {out.name} is not over the reduce input")
    kept = [d for d in range(in_shape.rank) if d not in rdims]
    if _is_row(in_shape, kept, rdims):
        _row(em, k, gen, out, heroes, loops, kept, rdims)
    else:
        _column(em, k, gen, out, heroes, loops, kept)
    k.finish()


def _is_row(in_shape: Shape, kept: list[int], rdims: list[int]) -> bool:
    return not kept or (bool(rdims) and physical_order(in_shape)[-1] in rdims)


def reduction_split(heroes: list[Hero]) -> int:
    """Trip count of the outermost (kept) loop when a row reduction is big enough to be split
    over threads, else 0 (column reductions stay on one thread)."""
    first = heroes[0][0]
    in_shape = first.operands[0].shape
    rdims = sorted(int(d) for d in first.attrs["dimensions"])
    kept = [d for d in range(in_shape.rank) if d not in rdims]
    if not kept or not _is_row(in_shape, kept, rdims):
        return 0
    return split_of(in_shape, dims=kept, elements=in_shape.num_elements)


def _n(red: HloInstruction) -> int:
    return len(red.operands) // 2


def _row(em: CpuEmitter, k: Kernel, gen: LeafEmitter, out: HloInstruction, heroes: list[Hero],
         loops: list[tuple[HloInstruction, ShapeIndex]], kept: list[int],
         rdims: list[int]) -> None:
    b = k.b
    in_shape = heroes[0][0].operands[0].shape
    slots: list[list[ir.Value]] = []
    with b.goto_entry_block():
        for red, _ in heroes:
            slots.append([b.alloca(lu.value_type(element_type(red.operands[_n(red) + j].shape,
                                                              red.name)))
                          for j in range(_n(red))])
    plan = block_plan(heroes, in_shape, rdims)
    with loop_over(b, in_shape, "o", dims=kept, outer=k.outer) as kidx:
        gen.clear_cache()
        for (red, _), ss in zip(heroes, slots):
            for j, slot in enumerate(ss):
                b.store(gen.generate(red.operands[_n(red) + j], []), slot)
        if plan is not None:  # long float sums: blocks summed pairwise

            def each(full: list[ir.Value]) -> None:
                write_all(k, out, full,
                          [(gen.generate(inst, full), sidx) for inst, sidx in loops])

            emit_blocked_sums(em, k, gen, heroes, kidx, slots, plan, each)
        else:
            _row_loop(em, k, gen, out, heroes, loops, kidx, rdims, slots)
        gen.clear_cache()
        oidx = [kidx[d] for d in kept]
        for (_red, sidxs), ss in zip(heroes, slots):
            for s, sidx in zip(ss, sidxs):
                k.write(out, oidx, b.load(s), sidx)


def _row_loop(em: CpuEmitter, k: Kernel, gen: LeafEmitter, out: HloInstruction,
              heroes: list[Hero], loops: list[tuple[HloInstruction, ShapeIndex]],
              kidx: list, rdims: list[int], slots: list[list[ir.Value]]) -> None:
    """The plain inner loop of a row reduction: every reduced element, in physical order,
    into the accumulator slots."""
    b = k.b
    in_shape = heroes[0][0].operands[0].shape
    with loop_over(b, in_shape, "r", dims=rdims) as ridx:
        full = _merge(kidx, ridx)
        gen.clear_cache()
        for (red, _), ss in zip(heroes, slots):
            xs = [gen.generate(red.operands[j], full) for j in range(_n(red))]
            accs = [b.load(s) for s in ss]
            for s, v in zip(ss, _call_reducer(em, b, red, accs, xs)):
                b.store(v, s)
        write_all(k, out, full, [(gen.generate(inst, full), sidx) for inst, sidx in loops])


def _column(em: CpuEmitter, k: Kernel, gen: LeafEmitter, out: HloInstruction,
            heroes: list[Hero], loops: list[tuple[HloInstruction, ShapeIndex]],
            kept: list[int]) -> None:
    b = k.b
    in_shape = heroes[0][0].operands[0].shape
    rdims = [d for d in range(in_shape.rank) if d not in kept]
    plan = column_plan(heroes, in_shape, rdims)
    if plan is not None:  # long float sums: blocks of rows summed pairwise

        def each(full: list[ir.Value]) -> None:
            write_all(k, out, full, [(gen.generate(inst, full), sidx) for inst, sidx in loops])

        emit_blocked_columns(em, k, gen, out, heroes, kept, plan, each)
        return
    for red, sidxs in heroes:
        oshape = out.shape.subshape(sidxs[0])
        with loop_over(b, oshape, "z") as oidx:
            gen.clear_cache()
            for j, sidx in enumerate(sidxs):
                k.write(out, oidx, gen.generate(red.operands[_n(red) + j], []), sidx)
    in_shape = heroes[0][0].operands[0].shape
    with loop_over(b, in_shape, "c") as full:
        gen.clear_cache()
        oidx = [full[d] for d in kept]
        for red, sidxs in heroes:
            xs = [gen.generate(red.operands[j], full) for j in range(_n(red))]
            accs = [k.read(out, oidx, sidx) for sidx in sidxs]
            for sidx, v in zip(sidxs, _call_reducer(em, b, red, accs, xs)):
                k.write(out, oidx, v, sidx)
        write_all(k, out, full, [(gen.generate(inst, full), sidx) for inst, sidx in loops])


def emit_reduce(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """An unfused (possibly variadic) reduce."""
    outs = output_buffers(inst)
    heroes: list[Hero] = [(inst, [s for _, s in outs])]
    k = em.kernel(ctx, inst.name, outs + operand_buffers(inst), reduction_split(heroes))
    emit_reduction(em, k, operand_generator(k, inst), inst, heroes, [])


def emit_input_fusion(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """A kInput fusion: reduce root, or tuple root of reduces and elementwise outputs."""
    root = inst.called[0].root
    assert root is not None
    heroes: list[Hero] = []
    loops: list[tuple[HloInstruction, ShapeIndex]] = []
    if root.opcode is Opcode.REDUCE_WINDOW:
        outs = output_buffers(inst)
        k = em.kernel(ctx, inst.name, outs + operand_buffers(inst))
        reduce_window_body(em, k, fusion_generator(k, inst), root, inst, outs)
        return
    if root.opcode is Opcode.REDUCE:
        outs = output_buffers(inst)
        heroes.append((root, [s for _, s in outs]))
    elif root.opcode is Opcode.TUPLE:
        outs = output_buffers(inst)
        for j, r in enumerate(root.operands):
            if r.opcode is Opcode.REDUCE and not r.shape.is_tuple:
                heroes.append((r, [(j,)]))
            elif r.opcode is Opcode.REDUCE or not r.shape.is_array:
                raise UnsupportedOpError(
                    f"CPU backend: variadic reduce inside multi-output fusion {inst.name}")
            else:
                loops.append((r, (j,)))
    else:
        raise UnsupportedOpError(
            f"CPU backend: kInput fusion {inst.name} has root '{root.opcode.text}'")
    if not heroes:
        raise UnsupportedOpError(f"CPU backend: kInput fusion {inst.name} has no reduce root")
    k = em.kernel(ctx, inst.name, outs + operand_buffers(inst), reduction_split(heroes))
    emit_reduction(em, k, fusion_generator(k, inst), inst, heroes, loops)



def emit_reduce_window(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """reduce-window: per output element, the window's elements (padding and holes from base
    dilation read as the init value, as XLA pads with it) are reduced in window order."""
    outs = output_buffers(inst)
    k = em.kernel(ctx, inst.name, outs + operand_buffers(inst))
    reduce_window_body(em, k, operand_generator(k, inst), inst, inst, outs)


def reduce_window_body(em: CpuEmitter, k: Kernel, gen: LeafEmitter, inst: HloInstruction,
                       out: HloInstruction, outs: list[tuple[HloInstruction, ShapeIndex]]
                       ) -> None:
    """The loops of reduce-window `inst` (unfused, or a fusion root generated by `gen`),
    writing buffers `outs` of `out`."""
    n = _n(inst)
    b = k.b
    in_shape = inst.operands[0].shape
    wdims = inst.attrs["window"].dims
    slots = []
    with b.goto_entry_block():
        for j in range(n):
            pt = element_type(inst.operands[n + j].shape, inst.name)
            slots.append(b.alloca(lu.value_type(pt)))
    oshape = out.shape.subshape(outs[0][1])
    with loop_over(b, oshape, "o") as oidx:
        gen.clear_cache()
        inits = [gen.generate(inst.operands[n + j], []) for j in range(n)]
        for s, v in zip(slots, inits):
            b.store(v, s)
        with lu.for_nest(b, [w.size for w in wdims], "w") as widx:
            ok, pos = window_positions(b, oidx, widx, wdims, in_shape.dims)
            src = [b.select(ok, p, ir.Constant(lu.I64, 0)) for p in pos]  # reads stay in bounds
            gen.clear_cache()
            xs = [b.select(ok, gen.generate(inst.operands[j], src), inits[j]) for j in range(n)]
            accs = [b.load(s) for s in slots]
            for s, v in zip(slots, _call_reducer(em, b, inst, accs, xs)):
                b.store(v, s)
        for s, (o, sidx) in zip(slots, outs):
            k.write(o, oidx, b.load(s), sidx)
    k.finish()
