"""Blocked, pairwise accumulation of long float sums in CPU row reductions.

A row reduction's inner loop adds with `reassoc`, so LLVM keeps VF x interleave partial sums
(64 with AVX-512); each of them still adds n / 64 elements one after the other, and its
rounding errors grow with n: summing 16M copies of 0.1f this way is off by 2.5e-3, where XLA
(whose CPU pipeline rewrites long reductions into a tree of 32-element windows) and numpy
(pairwise, blocks of 128) are off by less than 1e-7.

Here the reduced elements of each output are cut into blocks of about `BLOCK` consecutive
elements (in physical order). A block is summed from -0.0 by the same vectorised loop as
before (partial sums of ~BLOCK / 64 elements), and the block sums are combined pairwise with a
binary counter (cascade summation): block j first absorbs the stacked sums of the
`cttz(j + 1)` previous levels, then takes the next level, so after all blocks the stack holds
sums of 2^l blocks for each set bit l of the block count, which are added to the init value.
Error bound: about (BLOCK / 64 + log2(64) + log2(n / BLOCK)) eps sum|x_i| instead of
(n / 64) eps sum|x_i|; the cost is a few instructions per block.

Used for reductions whose reducers are all a single float `add` (-0.0 is their exact
identity) over at least 2 x `BLOCK` elements; others keep the plain loop of `emit_reduce`.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from llvmlite import ir

from xlc.backend_cpu.emitter import CpuEmitter, Kernel, LeafEmitter, element_type
from xlc.codegen import llvm_utils as lu
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape, ShapeIndex, physical_order
from xlc.passes.simplify_util import simple_reducer

BLOCK = 1024
"""Elements per block: the vectorised loop's partial sums each add BLOCK / 64 of them."""

_SUM_TYPES = frozenset({PrimitiveType.F32, PrimitiveType.F64})

Hero = tuple[HloInstruction, list[ShapeIndex]]


class BlockPlan:
    """How the reduced dims of a row reduction are cut into blocks: `order` (reduced dims,
    major to minor), the position `split` of the dim cut into chunks of `chunk` indices (the
    dims before it loop around the blocks, the dims after it run whole inside each block)."""

    __slots__ = ("order", "split", "chunk", "blocks")

    def __init__(self, order: list[int], split: int, chunk: int, blocks: int):
        self.order = order
        self.split = split
        self.chunk = chunk
        self.blocks = blocks


def sums_only(heroes: list[Hero]) -> bool:
    """Whether every reduction is a non-variadic f32/f64 sum (a single `add` reducer)."""
    for red, _ in heroes:
        if len(red.operands) != 2 or simple_reducer(red.called[0]) is not Opcode.ADD:
            return False
        if element_type(red.operands[0].shape, red.name) not in _SUM_TYPES:
            return False
    return True


def cut(order: list[int], dims: tuple[int, ...] | list[int], target: int
        ) -> tuple[int, int, int]:
    """Cut the loop nest over `dims[d] for d in order` (major to minor) into blocks of about
    `target` iterations: (position of the dim cut into chunks, chunk length, block count).
    Requires the nest to have at least `target` iterations."""
    inner = 1
    for pos in range(len(order) - 1, -1, -1):
        size = dims[order[pos]]
        if inner * size >= target:
            chunk = -(-target // inner)
            return pos, chunk, math.prod(dims[d] for d in order[:pos]) * -(-size // chunk)
        inner *= size
    raise AssertionError(f"cut: a nest of {inner} iterations has no block of {target}")


def block_plan(heroes: list[Hero], in_shape: Shape, rdims: list[int]) -> BlockPlan | None:
    """The blocking of a row reduction whose reducers are all a single f32/f64 `add` over at
    least 2 x BLOCK elements per output; None when the plain loop is used."""
    if not sums_only(heroes):
        return None
    order = [d for d in physical_order(in_shape) if d in rdims]
    if math.prod(in_shape.dims[d] for d in order) < 2 * BLOCK:
        return None
    return BlockPlan(order, *cut(order, in_shape.dims, BLOCK))


def emit_blocked_sums(em: CpuEmitter, k: Kernel, gen: LeafEmitter, heroes: list[Hero],
                      kidx: list[ir.Value | None], slots: list[list[ir.Value]],
                      plan: BlockPlan,
                      each: Callable[[list[ir.Value]], None] | None = None) -> None:
    """Inside the kept-dims loop at `kidx`: add every reduced element of each hero into its
    accumulator slot (which holds the init value), block by block (module doc). `each(index)`
    runs at every element after its adds (the plain loop's other per-element work: a kInput
    fusion's elementwise outputs, a row fusion's kept values)."""
    b = k.b
    in_shape = heroes[0][0].operands[0].shape
    dims = in_shape.dims
    split_dim = plan.order[plan.split]
    size = dims[split_dim]
    levels = plan.blocks.bit_length()
    tys = [lu.value_type(element_type(red.operands[1].shape, red.name)) for red, _ in heroes]
    with b.goto_entry_block():
        blk = [b.alloca(t, name="block_sum") for t in tys]
        stacks = [b.alloca(ir.ArrayType(t, levels), name="block_stack") for t in tys]
        count = b.alloca(lu.I64, name="blocks_done")
    b.store(ir.Constant(lu.I64, 0), count)
    for st, t in zip(stacks, tys):  # levels not yet filled are read (and not selected)
        for level in range(levels):
            b.store(ir.Constant(t, -0.0), _level_ptr(b, st, ir.Constant(lu.I64, level)))
    outer_dims = [dims[d] for d in plan.order[:plan.split]]
    with lu.for_nest(b, outer_dims, name="rb") as outer_iv, \
            lu.for_range(b, -(-size // plan.chunk), name="rc") as c:
        for s, t in zip(blk, tys):
            b.store(ir.Constant(t, -0.0), s)
        start = b.mul(c, ir.Constant(lu.I64, plan.chunk))
        end = b.add(start, ir.Constant(lu.I64, plan.chunk))
        stop = b.select(b.icmp_signed("<", end, ir.Constant(lu.I64, size)), end,
                        ir.Constant(lu.I64, size))
        inner_dims = [dims[d] for d in plan.order[plan.split + 1:]]
        with lu.for_range(b, stop, start=start, name="rs") as i, \
                lu.for_nest(b, inner_dims, name="ri") as inner_iv:
            full = list(kidx)
            for d, v in zip(plan.order, [*outer_iv, i, *inner_iv]):
                full[d] = v
            gen.clear_cache()
            for (red, _), s in zip(heroes, blk):
                x = gen.generate(red.operands[0], full)
                b.store(_call_reducer(em, b, red, [b.load(s)], [x])[0], s)
            if each is not None:
                each(full)
        _push(em, b, heroes, blk, stacks, count, levels)
    _fold(em, b, heroes, slots, stacks, plan.blocks)


def _call_reducer(em: CpuEmitter, b: ir.IRBuilder, red: HloInstruction, accs: list[ir.Value],
                  xs: list[ir.Value]) -> list[ir.Value]:
    from xlc.backend_cpu.emit_reduce import _call_reducer as call

    return call(em, b, red, accs, xs)


def _level_ptr(b: ir.IRBuilder, stack: ir.Value, level: ir.Value) -> ir.Value:
    return b.gep(stack, [ir.Constant(lu.I32, 0), level], inbounds=True)


def _push(em: CpuEmitter, b: ir.IRBuilder, heroes: list[Hero], blk: list[ir.Value],
          stacks: list[ir.Value], count: ir.Value, levels: int) -> None:
    """Block number `count` is done: merge it with the t = cttz(count + 1) stacked levels
    below (level l holds the sum of 2^l blocks) and store the result at level t. Branch-free
    (a select per level): a data-dependent loop here mispredicts once per block, which stalls
    the stream of loads of a memory-bound sum (16M elements: 1.6x slower)."""
    done = b.load(count)
    nxt = b.add(done, ir.Constant(lu.I64, 1))
    merges = b.cttz(nxt, ir.Constant(lu.I1, 1))
    carries = [b.load(s) for s in blk]
    for level in range(levels - 1):
        lvl = ir.Constant(lu.I64, level)
        take = b.icmp_unsigned("<", lvl, merges)
        for j, ((red, _), st) in enumerate(zip(heroes, stacks)):
            merged = _call_reducer(em, b, red, [b.load(_level_ptr(b, st, lvl))], [carries[j]])
            carries[j] = b.select(take, merged[0], carries[j])
    for st, c in zip(stacks, carries):
        b.store(c, _level_ptr(b, st, merges))
    b.store(nxt, count)


def _fold(em: CpuEmitter, b: ir.IRBuilder, heroes: list[Hero], slots: list[list[ir.Value]],
          stacks: list[ir.Value], blocks: int) -> None:
    """After all `blocks` blocks, the stack holds a level for each set bit of `blocks`: add
    them (largest first) to each hero's init value in its slot."""
    for level in reversed(range(blocks.bit_length())):
        if not (blocks >> level) & 1:
            continue
        lvl = ir.Constant(lu.I64, level)
        for (red, _), st, ss in zip(heroes, stacks, slots):
            merged = _call_reducer(em, b, red, [b.load(ss[0])],
                                   [b.load(_level_ptr(b, st, lvl))])
            b.store(merged[0], ss[0])
