"""Row fusions (`xlc.passes.row_fusion`): a kLoop fusion whose per-row reductions live inside.

Emitted as one loop over the kept (row) index k, split over the threads by rows for big
inputs; per row:
1. every reduce of the fused computation, in dependency order (post order), is folded over the
   reduced dims into a register (an accumulator the loop vectoriser turns into several vector
   partial results: the reducer is called with `reassoc`, error bound as in `emit_reduce`; long
   float sums add blocks pairwise, `emit_reduce_blocked`);
   from then on the reduce is a *leaf* of the elemental emitter that returns that so
   a later reduce (the sum of a softmax reads its max) and the root read it without recomputing;
2. the root(s) are evaluated over the reduced dims at (k, d) and stored.
Per-row values computed from the reduces (`log(sum)` of a log-softmax) are loop-invariant in
step 2 and hoisted by LLVM. A row of a big softmax therefore streams once from memory and then
twice more from L1/L2.

A full-space value computed for the last reduce and read again by the root (softmax's
`exp(x - max)`, summed and then divided) is computed once: the fold loop also stores it into
the output row, and step 2 reads it back from there (L1) instead of recomputing it
(`_shared_value` says when that is safe).
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from llvmlite import ir

from xlc.backend_cpu.emit_loops import operand_buffers, output_buffers
from xlc.backend_cpu.emit_reduce_blocked import block_plan, emit_blocked_sums
from xlc.backend_cpu.emitter import (
    CpuEmitter,
    FnCtx,
    Kernel,
    LeafEmitter,
    element_type,
    loop_over,
    overlaps_an_operand,
    split_of,
)
from xlc.codegen import llvm_utils as lu
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Shape

log = logging.getLogger("xlc.backend_cpu")


def _merge(kept_idx: list, red_idx: list) -> list[ir.Value]:
    return [x if x is not None else y for x, y in zip(kept_idx, red_idx)]


def _constant_leaf(value: ir.Value):  # noqa: ANN202 - a leaf reader
    return lambda _index: value


def _fold_row(em: CpuEmitter, k: Kernel, gen: LeafEmitter, red: HloInstruction,
              kidx: list, rdims: list[int],
              keep: Callable[[list[ir.Value], ir.Value], None] | None = None) -> ir.Value:
    """The reduce `red` at row `kidx` (None at reduced positions) as a register value;
    `keep(index, x)` is also called with every element folded in."""
    b = k.b
    operand, init = red.operands
    fn = em.scalar_function(red.called[0], reassoc=True)
    gen.clear_cache()
    init_v = gen.generate(init, [])
    with b.goto_entry_block():
        slot = b.alloca(lu.value_type(element_type(red.shape, red.name)))
    b.store(init_v, slot)
    plan = block_plan([(red, [()])], operand.shape, rdims)
    if plan is not None:  # a long float sum: blocks summed pairwise, as in emit_reduce
        emit_blocked_sums(em, k, gen, [(red, [()])], kidx, [[slot]], plan,
                          None if keep is None else
                          lambda full: keep(full, gen.generate(operand, full)))
        gen.clear_cache()
        return b.load(slot)
    with loop_over(b, operand.shape, "r", dims=rdims) as ridx:
        gen.clear_cache()
        full = _merge(kidx, ridx)
        x = gen.generate(operand, full)
        if keep is not None:
            keep(full, x)
        b.store(b.call(fn, [b.load(slot), x]), slot)
    gen.clear_cache()
    return b.load(slot)


_CHEAP = {Opcode.PARAMETER, Opcode.CONSTANT, Opcode.BROADCAST, Opcode.BITCAST, Opcode.RESHAPE,
          Opcode.IOTA}


def _reads_at_same_index(root: HloInstruction, value: HloInstruction) -> bool:
    """Whether `root` reads `value`, and only at its own index: every path from the root to
    `value` goes through elementwise instructions (reduces are values of their row already,
    so paths through them do not count)."""
    found = False
    seen: set[int] = set()
    stack = [root]
    while stack:
        i = stack.pop()
        if i is value:
            found = True
            continue
        if i.uid in seen or i.opcode is Opcode.REDUCE:
            continue
        seen.add(i.uid)
        if not i.opcode.is_elementwise and value.uid in {o.uid for o in _closure(i)}:
            return False
        stack.extend(i.operands)
    return found


def _closure(inst: HloInstruction) -> list[HloInstruction]:
    """`inst`'s operands, transitively, not looking through reduces."""
    out: list[HloInstruction] = []
    seen: set[int] = set()
    stack = list(inst.operands)
    while stack:
        i = stack.pop()
        if i.uid in seen:
            continue
        seen.add(i.uid)
        out.append(i)
        if i.opcode is not Opcode.REDUCE:
            stack.extend(i.operands)
    return out


def _shared_value(em: CpuEmitter, inst: HloInstruction, roots: list[HloInstruction],
                  last: HloInstruction, space: Shape) -> HloInstruction | None:
    """The operand of the last reduce when the single root reads it again at the same index,
    it has the output's dims and element type, is not a cheap read, and the output buffer
    overlaps no operand (so writing output rows early clobbers nothing still to be read)."""
    value = last.operands[0]
    if len(roots) != 1 or value.opcode in _CHEAP or not value.shape.is_array \
            or tuple(value.shape.dims) != tuple(space.dims) \
            or value.shape.element_type != space.element_type \
            or not _reads_at_same_index(roots[0], value):
        return None
    return None if overlaps_an_operand(em, inst) else value


def emit_row_fusion(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """Emit row fusion `inst` (requires `row_fusion_error(inst) is None`; see the module
    docstring). Guarantees every reduce is evaluated once per row."""
    fc = inst.called[0]
    root = fc.root
    assert root is not None
    roots = list(root.operands) if root.opcode is Opcode.TUPLE else [root]
    outs = output_buffers(inst)
    space: Shape = inst.shape.subshape(outs[0][1])
    reduces = [i for i in fc.post_order() if i.opcode is Opcode.REDUCE]
    rdims = sorted(int(d) for d in reduces[0].attrs["dimensions"])
    kept = [d for d in range(space.rank) if d not in rdims]
    for r in roots:
        if tuple(r.shape.dims) != tuple(space.dims):
            raise UnsupportedOpError(
                f"CPU backend: row fusion {inst.name} has an output outside its space ({r.name})")
    split = split_of(space, dims=kept, elements=space.num_elements) if kept else 0
    k = em.kernel(ctx, inst.name, outs + operand_buffers(inst), split)
    ops = inst.operands
    gen = LeafEmitter(k.b, lambda n, idx: k.read(ops[n], idx), {}, scalar_fn=k.scalar_fn)
    shared = _shared_value(em, inst, roots, reduces[-1], space)
    out0, sidx0 = outs[0]
    with loop_over(k.b, space, "row", dims=kept, outer=k.outer) as kidx:
        for red in reduces:
            keep = None
            if shared is not None and red is reduces[-1]:
                def keep(index: list[ir.Value], x: ir.Value) -> None:
                    k.write(out0, index, x, sidx0)
            gen.leaves[red.uid] = _constant_leaf(_fold_row(em, k, gen, red, kidx, rdims, keep))
        if shared is not None:
            gen.leaves[shared.uid] = lambda index: k.read(out0, index, sidx0)
        with loop_over(k.b, space, "c", dims=rdims) as ridx:
            full = _merge(kidx, ridx)
            gen.clear_cache()
            # all outputs' elements first: an output may share an operand's buffer
            values = [gen.generate(r, full) for r in roots]
            for v, (o, sidx) in zip(values, outs):
                k.write(o, full, v, sidx)
        gen.clear_cache()
        if shared is not None:
            del gen.leaves[shared.uid]
    k.finish()
    log.debug("row fusion %s: %d reduces over dims %s%s", inst.name, len(reduces), rdims,
              f", {shared.name} computed once" if shared is not None else "")
