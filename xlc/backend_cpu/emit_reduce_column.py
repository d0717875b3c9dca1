"""Blocked, pairwise accumulation of long float sums in CPU column reductions.

A column reduction (the physically minor dimension is kept) passes over its input in physical
order doing `out[o] += x`, vectorised along the kept elements: each output adds its n reduced
elements one after the other, so its error grows with n (a [1M, 16] -> [16] sum of 0.1f is off
by 1e-2, XLA by 1.5e-7). Here the reduced rows are cut into blocks of about `ROWS` rows. A
block is summed into a row of accumulators, one per kept inner element (from -0.0, the exact
identity of float add; vectorised along the row as before), and the block sums are combined
pairwise with a binary counter as in `emit_reduce_blocked`, one stack row per level: block j
is summed straight into the row of level t = cttz(j + 1), then absorbs the t rows below. Each
output is written once: its init value plus the stacked levels. Error bound: about
(ROWS + log2(n / ROWS)) eps sum|x_i| instead of n eps sum|x_i|.

Used when the input's physical order is [kept..., reduced..., kept...] (the reduced dims
together, major to at most `WIDTH` kept inner elements), every reducer is a single f32/f64
`add` and there are at least 2 x ROWS reduced elements per output; other column reductions
keep the plain pass of `emit_reduce`.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from llvmlite import ir

from xlc.backend_cpu.emit_reduce_blocked import Hero, cut, sums_only
from xlc.backend_cpu.emitter import CpuEmitter, Kernel, LeafEmitter, element_type
from xlc.codegen import llvm_utils as lu
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import Shape, physical_order

WIDTH = 512
"""The most kept inner elements a blocked column reduction handles: its block accumulators
and each stack level (native stack arrays) hold that many values. Wider rows keep the plain
pass: cutting them into tiles would read the input in strided pieces (4096 x 4096: 3.3x
slower), and whole rows per level would not fit the native stack."""

ROWS = 32
"""Reduced rows per block (each accumulator adds this many elements in turn)."""


class ColumnPlan:
    """`outer`, `reduced`, `inner`: the input's dims in physical order (kept, reduced, kept);
    the reduced nest is cut at position `split` into chunks of `chunk` indices (`blocks`
    blocks); `width` kept inner elements per output row."""

    __slots__ = ("outer", "reduced", "inner", "split", "chunk", "blocks", "width")

    def __init__(self, outer: list[int], reduced: list[int], inner: list[int],
                 cut_at: tuple[int, int, int], width: int):
        self.outer, self.reduced, self.inner = outer, reduced, inner
        self.split, self.chunk, self.blocks = cut_at
        self.width = width


def column_plan(heroes: list[Hero], in_shape: Shape, rdims: list[int]) -> ColumnPlan | None:
    """The blocking of a column reduction (module doc), or None for the plain pass."""
    if not sums_only(heroes):
        return None
    order = physical_order(in_shape)
    pos = sorted(order.index(d) for d in rdims)
    if not pos or pos[-1] - pos[0] + 1 != len(pos) or pos[-1] == len(order) - 1:
        return None
    dims = in_shape.dims
    outer, reduced, inner = order[:pos[0]], order[pos[0]:pos[-1] + 1], order[pos[-1] + 1:]
    width = math.prod(dims[d] for d in inner)
    if math.prod(dims[d] for d in reduced) < 2 * ROWS or width > WIDTH:
        return None
    return ColumnPlan(outer, reduced, inner, cut(reduced, dims, ROWS), width)


def _i64(v: int) -> ir.Constant:
    return ir.Constant(lu.I64, v)


def _min(b: ir.IRBuilder, a: ir.Value, c: int) -> ir.Value:
    return b.select(b.icmp_signed("<", a, _i64(c)), a, _i64(c))


@contextmanager
def _row(b: ir.IRBuilder, inner: list[int], name: str
         ) -> Iterator[tuple[ir.Value, list[ir.Value]]]:
    """Loops over the kept inner dims (sizes `inner`): (linear position, indices)."""
    with lu.for_nest(b, inner, name=name) as ivs:
        lin = _i64(0)
        for size, v in zip(inner, ivs):
            lin = b.add(b.mul(lin, _i64(size)), v)
        yield lin, ivs


def _at(b: ir.IRBuilder, arr: ir.Value, index: ir.Value) -> ir.Value:
    return b.gep(arr, [_i64(0), index], inbounds=True)


def emit_blocked_columns(em: CpuEmitter, k: Kernel, gen: LeafEmitter, out: HloInstruction,
                         heroes: list[Hero], kept: list[int], plan: ColumnPlan,
                         each: Callable[[list[ir.Value]], None] | None = None) -> None:
    """The whole column reduction of `heroes` into `out` (module doc); `each(index)` runs at
    every input element after its adds (a kInput fusion's elementwise outputs)."""
    from xlc.backend_cpu.emit_reduce import _call_reducer

    b = k.b
    dims = heroes[0][0].operands[0].shape.dims
    levels = plan.blocks.bit_length()
    tys = [lu.value_type(element_type(red.operands[1].shape, red.name)) for red, _ in heroes]
    with b.goto_entry_block():
        stacks = [b.alloca(ir.ArrayType(t, levels * plan.width), name="block_stack")
                  for t in tys]
        count = b.alloca(lu.I64, name="blocks_done")
    inner = [dims[d] for d in plan.inner]
    rsplit = plan.reduced[plan.split]
    full: list[ir.Value | None] = [None] * len(dims)
    with lu.for_nest(b, [dims[d] for d in plan.outer], name="co") as oiv:
        for d, v in zip(plan.outer, oiv):
            full[d] = v
        b.store(_i64(0), count)
        with lu.for_nest(b, [dims[d] for d in plan.reduced[:plan.split]], name="cr") as riv, \
                lu.for_range(b, -(-dims[rsplit] // plan.chunk), name="cc") as c:
            # the block's sum goes straight into the level it will hold: cttz(count + 1)
            top = b.mul(b.cttz(b.add(b.load(count), _i64(1)), ir.Constant(lu.I1, 1)),
                        _i64(plan.width))
            with _row(b, inner, "cz") as (lin, _):
                for st, ty in zip(stacks, tys):
                    b.store(ir.Constant(ty, -0.0), _at(b, st, b.add(top, lin)))
            r0 = b.mul(c, _i64(plan.chunk))
            r1 = _min(b, b.add(r0, _i64(plan.chunk)), dims[rsplit])
            with lu.for_range(b, r1, start=r0, name="cs") as r, \
                    lu.for_nest(b, [dims[d] for d in plan.reduced[plan.split + 1:]],
                                name="cq") as qiv, \
                    _row(b, inner, "ce") as (lin, kiv):
                for d, v in zip([*plan.reduced, *plan.inner], [*riv, r, *qiv, *kiv]):
                    full[d] = v
                gen.clear_cache()
                for (red, _), st in zip(heroes, stacks):
                    x = gen.generate(red.operands[0], list(full))
                    p = _at(b, st, b.add(top, lin))
                    b.store(_call_reducer(em, b, red, [b.load(p)], [x])[0], p)
                if each is not None:
                    each(list(full))
            _merge_levels(em, b, heroes, stacks, count, top, plan.width, inner)
        with _row(b, inner, "cw") as (lin, kiv):
            for d, v in zip(plan.inner, kiv):
                full[d] = v
            oidx = [full[d] for d in kept]
            gen.clear_cache()
            for (red, sidxs), st in zip(heroes, stacks):
                acc = gen.generate(red.operands[1], [])
                for level in reversed(range(levels)):
                    if (plan.blocks >> level) & 1:
                        v = b.load(_at(b, st, b.add(lin, _i64(level * plan.width))))
                        acc = _call_reducer(em, b, red, [acc], [v])[0]
                k.write(out, oidx, acc, sidxs[0])


def _merge_levels(em: CpuEmitter, b: ir.IRBuilder, heroes: list[Hero], stacks: list[ir.Value],
                  count: ir.Value, top: ir.Value, width: int, inner: list[int]) -> None:
    """Block number `count`, summed into stack row `top` (level t = cttz(count + 1)), absorbs
    the t levels below it, which hold the previous 2^t - 1 blocks (a loop: one mispredicted
    branch per ROWS x width elements)."""
    from xlc.backend_cpu.emit_reduce import _call_reducer

    nxt = b.add(b.load(count), _i64(1))
    merges = b.cttz(nxt, ir.Constant(lu.I1, 1))
    with lu.for_range(b, merges, name="cm") as lvl, _row(b, inner, "cn") as (lin, _):
        row = b.add(b.mul(lvl, _i64(width)), lin)
        for (red, _), st in zip(heroes, stacks):
            p = _at(b, st, b.add(top, lin))
            b.store(_call_reducer(em, b, red, [b.load(_at(b, st, row))], [b.load(p)])[0], p)
    b.store(nxt, count)
