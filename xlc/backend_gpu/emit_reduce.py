"""Reduction kernels: unfused (variadic) reduce and kInput fusions (a reduce root, or a tuple
root of reduces sharing one iteration space plus elementwise outputs over that space).

* **row** (the physically minor input dimension is reduced): one block per output row (block
  stride over rows), each thread folds a strided part of the row, then warp butterfly shuffles
  (`shfl.sync.bfly`) and one shared-memory round across warps; thread 0 writes the result.
  When the init is the reducer's identity (`has_identity_init`: a sum from 0, a max from -inf,
  ...) every partial starts at it and combines unconditionally; otherwise partials carry a
  `valid` flag (shuffled along) instead of starting from the init value, so the reducer sees
  the init value exactly once.
* **column** (the minor dimension is kept): a block of 32 x 8 threads per 32 consecutive
  outputs, 8 threads folding every 8th element of each column (neighbouring threads read
  neighbouring addresses, so loads coalesce), the 8 partials combined in order through shared
  memory (was one thread per output: 1024 threads for a [n, 1024] bias gradient).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from math import prod

from llvmlite import ir

from xlc.backend_gpu import nvptx
from xlc.backend_gpu.emit_loop import install_vector_reads
from xlc.backend_gpu.emitter import GpuEmitter, array_buffers, operand_buffers
from xlc.backend_gpu.kernel import (
    MAX_BLOCKS,
    GpuKernel,
    element_type,
    i64,
    strided,
    unflatten,
)
from xlc.backend_gpu.thunks import Thunk
from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import linear_to_multi
from xlc.codegen.ir_array import LeafEmitter, fusion_generator, operand_generator
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Shape, ShapeIndex, physical_order
from xlc.passes.simplify_util import identity_value, is_splat_of, simple_reducer

log = logging.getLogger("xlc.backend_gpu")

Hero = tuple[HloInstruction, list[ShapeIndex]]
ROW_THREADS = 256
WARP_ROW_MAX = 1024
"""Rows of at most this many elements get a warp each (8 rows per block); longer a block."""


def _n(red: HloInstruction) -> int:
    return len(red.operands) // 2


def emit_reduction(em: GpuEmitter, k: GpuKernel, gen: LeafEmitter, out: HloInstruction,
                   heroes: list[Hero], loops: list[tuple[HloInstruction, ShapeIndex]]) -> None:
    """Fill kernel `k` with reductions `heroes` and elementwise outputs `loops` (instructions
    over the reduce input shape) of `out`."""
    first = heroes[0][0]
    in_shape = first.operands[0].shape
    rdims = sorted(int(d) for d in first.attrs["dimensions"])
    for red, _ in heroes:
        if tuple(red.operands[0].shape.dims) != tuple(in_shape.dims) or \
                sorted(int(d) for d in red.attrs["dimensions"]) != rdims:
            raise UnsupportedOpError(
                f"GPU backend: reductions of {out.name} do not share one iteration space")
    for inst, _ in loops:
        if tuple(inst.shape.dims) != tuple(in_shape.dims):
            raise UnsupportedOpError(
                f"GPU backend: output {inst.name} of {out.name} is not over the reduce input")
    order = physical_order(in_shape)
    kept = [d for d in order if d not in rdims]
    red_order = [d for d in order if d in rdims]
    row = not kept or (bool(rdims) and order[-1] in rdims)
    if row:
        _row(em, k, gen, out, heroes, loops, kept, red_order)
    else:
        _column(em, k, gen, out, heroes, loops, kept, red_order)
    k.finish()


def has_identity_init(red: HloInstruction) -> bool:
    """Whether `red` is a one-value reduce whose reducer is one commutative op of its two
    parameters (`simple_reducer`) and whose init is known to be that op's identity
    (`identity_value`: 0, 1, -inf / the type's minimum, +inf / maximum, all ones). Partials
    may then start at the init and combine without validity flags: f(init, x) == x for every
    x (an add's +0 init only turns a -0 total into +0, which the serial fold does too)."""
    if red.opcode is not Opcode.REDUCE or _n(red) != 1:
        return False
    op = simple_reducer(red.called[0])
    init = red.operands[1]
    et = init.shape.element_type
    ident = None if op is None or et is None else identity_value(op, et)
    return ident is not None and is_splat_of(init, ident)


def combine_partials(em: GpuEmitter, b: ir.IRBuilder, red: HloInstruction,
                     accs: list[ir.Value], xs: list[ir.Value]) -> list[ir.Value]:
    """`red`'s reducer applied to partial results `accs` and values `xs`."""
    return em.apply(b, red.called[0], accs + xs)


@dataclass
class _RowPlan:
    """What every row of a row reduction shares: sizes, launch shape, per-thread state."""

    kept: list[int]
    red_order: list[int]
    kept_sizes: list[int]
    red_sizes: list[int]
    kdim: int
    threads: int
    warps: int
    types: list[list[ir.Type]]
    slots: list[list[ir.Value]]
    valid_slot: ir.Value
    shared: list[list[ir.GlobalVariable]]
    tid: ir.Value
    lane: ir.Value
    warp: ir.Value
    active: ir.Value | None = None
    """False in a warp past the last row of its block's group (warp per row): no writes."""
    vec: int = 1
    """Consecutive elements per thread and step (row_vector_width)."""


def _row(em: GpuEmitter, k: GpuKernel, gen: LeafEmitter, out: HloInstruction,
         heroes: list[Hero], loops: list[tuple[HloInstruction, ShapeIndex]], kept: list[int],
         red_order: list[int]) -> None:
    b = k.b
    in_shape = heroes[0][0].operands[0].shape
    kept_sizes = [in_shape.dims[d] for d in kept]
    red_sizes = [in_shape.dims[d] for d in red_order]
    rows = prod(kept_sizes)
    kdim = prod(red_sizes)
    types = [[lu.value_type(element_type(red.operands[_n(red) + j].shape, red.name))
              for j in range(_n(red))] for red, _ in heroes]
    tid = b.zext(nvptx.thread_idx(b), lu.I64)
    lane, warp = b.and_(tid, i64(31)), b.lshr(tid, i64(5))
    blk, nblk = (b.zext(f(b), lu.I64) for f in (nvptx.block_idx, nvptx.grid_dim))
    if kdim <= WARP_ROW_MAX:
        # a warp per row, 8 rows per block (XLA packs short rows so): no shared memory
        per_block = max(1, min(ROW_THREADS // 32, rows))
        threads, warps, groups = 32, 1, -(-rows // per_block)
        k.launch((max(1, min(groups, MAX_BLOCKS)), 1, 1), (32 * per_block, 1, 1))
        row_tid = lane
    else:
        per_block, groups = 1, rows
        threads = min(ROW_THREADS, max(32, -(-kdim // 32) * 32))
        warps = threads // 32
        shared_bytes = sum(warps * max(1, element_type(red.operands[_n(red) + j].shape,
                                                       red.name).byte_size)
                           for red, _ in heroes for j in range(_n(red))) if warps > 1 else 0
        k.launch((max(1, min(rows, MAX_BLOCKS)), 1, 1), (threads, 1, 1), shared_bytes)
        row_tid = tid
    # per-thread partials in allocas (promoted to registers), plus a validity flag
    with b.goto_entry_block():
        slots = [[b.alloca(t) for t in ts] for ts in types]
        valid_slot = b.alloca(lu.I1)
    shared = [[nvptx.shared_array(b.module, f"red{h}_{j}", t, warps) for j, t in enumerate(ts)]
              for h, ts in enumerate(types)] if warps > 1 else []
    # every warp of a block runs the same iterations (uniform shuffles and barriers); a warp
    # past the last row of its group recomputes the last row and writes nothing
    with strided(b, i64(groups), blk, nblk, name="row") as group:
        if per_block > 1:
            want = b.add(b.mul(group, i64(per_block)), warp)
            active: ir.Value | None = b.icmp_unsigned("<", want, i64(rows))
            row = b.select(active, want, i64(rows - 1))
        else:
            active, row = None, group
        plan = _RowPlan(kept, red_order, kept_sizes, red_sizes, kdim, threads, warps, types,
                        slots, valid_slot, shared, row_tid, lane, warp, active,
                        row_vector_width(out, in_shape, kept + red_order, kdim))
        _one_row(em, k, gen, out, heroes, loops, plan, row)


def _one_row(em: GpuEmitter, k: GpuKernel, gen: LeafEmitter, out: HloInstruction,
             heroes: list[Hero], loops: list[tuple[HloInstruction, ShapeIndex]],
             p: _RowPlan, row: ir.Value) -> None:
    """One block reduces row `row`: strided fold, warp shuffles, shared memory, thread 0
    writes."""
    b = k.b
    kept, red_order, slots, valid_slot = p.kept, p.red_order, p.slots, p.valid_slot
    tid, lane, warp, warps, types, shared = p.tid, p.lane, p.warp, p.warps, p.types, p.shared
    kidx = unflatten(b, row, kept, p.kept_sizes) if kept else {}
    inits = _identity_inits(gen, heroes)
    if inits is not None:       # partials start at the identity: no validity flags
        for ss, vals in zip(slots, inits):
            for s, v in zip(ss, vals):
                b.store(v, s)
    b.store(ir.Constant(lu.I1, 0), valid_slot)
    in_shape = heroes[0][0].operands[0].shape
    vec = p.vec
    def scalar_index(r: ir.Value) -> list[ir.Value]:
        ridx = unflatten(b, r, red_order, p.red_sizes)
        return [kidx[d] if d in kidx else ridx[d] for d in range(len(kept) + len(red_order))]

    with lu.for_range(b, i64(p.kdim // vec), start=tid, step=p.threads, name="r") as c:
        gen.clear_cache()
        indices, _, done = row_step(k, gen, out, in_shape, row, p.kdim, c, vec, scalar_index)
        for full in indices:
            valid = b.load(valid_slot)
            for (red, _), ss in zip(heroes, slots):
                xs = [gen.generate(red.operands[j], full) for j in range(_n(red))]
                accs = [b.load(s) for s in ss]
                new = combine_partials(em, b, red, accs, xs)
                for s, x, v in zip(ss, xs, new):
                    b.store(v if inits is not None else b.select(valid, v, x), s)
            if inits is None:
                b.store(ir.Constant(lu.I1, 1), valid_slot)
            values = [(gen.generate(inst, full), sidx) for inst, sidx in loops]
            with (b.if_then(p.active) if p.active is not None and values else nullcontext()):
                for v, sidx in values:
                    k.write(out, full, v, sidx)
        done()
    gen.clear_cache()
    accs = [[b.load(s) for s in ss] for ss in slots]
    valid = b.load(valid_slot)
    accs, valid = block_reduce(em, b, heroes, accs, valid, shared, types, lane, warp, warps,
                               inits)
    writer = b.icmp_unsigned("==", tid, i64(0))
    if p.active is not None:
        writer = b.and_(writer, p.active)
    with b.if_then(writer):
        gen.clear_cache()
        oidx = [kidx[d] for d in sorted(kept)]
        for (red, sidxs), vals in zip(heroes, accs):
            if inits is not None:   # the init is already in every partial
                for sidx, r_v in zip(sidxs, vals):
                    k.write(out, oidx, r_v, sidx)
                continue
            init_vs = [gen.generate(red.operands[_n(red) + j], []) for j in range(_n(red))]
            res = combine_partials(em, b, red, init_vs, vals)
            for sidx, r_v, init in zip(sidxs, res, init_vs):
                k.write(out, oidx, b.select(valid, r_v, init), sidx)
    gen.clear_cache()


ROW_VECTOR = 4
"""Elements per thread and step of a row fold when they can be one 128-bit (f32) load."""


def row_vector_width(out: HloInstruction, space: Shape, order: list[int], width: int) -> int:
    """ROW_VECTOR when a row fold of fusion `out` over `space` may step by ROW_VECTOR
    consecutive elements (rows physically contiguous: `order`, the kept then the reduced
    dims, is the physical order; the row length a multiple), else 1. Which operands are then
    read with one vector load is `install_vector_reads`'s decision (same dims and layout as
    `space`, 16-byte aligned)."""
    if out.opcode is not Opcode.FUSION or width % ROW_VECTOR \
            or list(physical_order(space)) != list(order):
        return 1
    return ROW_VECTOR


def row_step(k: GpuKernel, gen: LeafEmitter, fusion: HloInstruction, space: Shape,
             row: ir.Value, width: int, step: ir.Value, vec: int,
             scalar_index: Callable[[ir.Value], list[ir.Value]]
             ) -> tuple[list[list[ir.Value]], ir.Value, Callable[[], None]]:
    """The element indices of step `step` of a row loop over `space` (a fusion's iteration
    space, rows of `width` contiguous elements), the physical offset of its first element,
    and what to call when the step's body is done. With `vec` > 1 the step covers `vec`
    consecutive elements whose fusion operands `gen` reads with one vector load each
    (`install_vector_reads`); with 1, the element `scalar_index(step)`."""
    b = k.b
    first = b.add(b.mul(row, i64(width)), b.mul(step, i64(vec)) if vec > 1 else step)
    if vec == 1:
        return [scalar_index(step)], first, lambda: None
    lanes = [first] + [b.add(first, i64(q)) for q in range(1, vec)]
    restore = install_vector_reads(k, gen, list(fusion.operands), space, lanes, vec)
    return [linear_to_multi(b, lin, space) for lin in lanes], first, restore


def _identity_inits(gen: LeafEmitter, heroes: list[Hero]) -> list[list[ir.Value]] | None:
    """Every hero's init values when all inits are their reducers' identities (generated
    where the builder is, so they dominate what follows), else None."""
    if not all(has_identity_init(red) for red, _ in heroes):
        return None
    gen.clear_cache()
    values = [[gen.generate(red.operands[_n(red) + j], []) for j in range(_n(red))]
              for red, _ in heroes]
    gen.clear_cache()
    return values


def _shared_ptr(b: ir.IRBuilder, gv: ir.GlobalVariable, idx: ir.Value) -> ir.Value:
    return nvptx.shared_elem_ptr(b, gv, idx)


def block_reduce(em: GpuEmitter, b: ir.IRBuilder, heroes: list[Hero],
                 accs: list[list[ir.Value]], valid: ir.Value,
                 shared: list[list[ir.GlobalVariable]], types: list[list[ir.Type]],
                 lane: ir.Value, warp: ir.Value, warps: int,
                 inits: list[list[ir.Value]] | None = None
                 ) -> tuple[list[list[ir.Value]], ir.Value]:
    """Every thread's partials to the totals of its warp (`warps` == 1) or block, in every
    thread: warp shuffles; with several warps, lane 0 of each publishes to `shared` (one array
    of `warps` elements per partial) and every warp combines the published partials. Ends with
    a barrier, so the caller may reuse `shared` at once. Must be reached by the whole block.
    With `inits` (identity init values, `has_identity_init`) every partial is valid and lanes
    past the warps take the init: no validity flags."""
    accs, valid = warp_reduce(em, b, heroes, accs, valid, inits is not None)
    if warps > 1:
        with b.if_then(b.icmp_unsigned("==", lane, i64(0))):
            for h, vals in enumerate(accs):
                for j, v in enumerate(vals):
                    b.store(v, _shared_ptr(b, shared[h][j], warp))
        nvptx.barrier(b)
        in_range = b.icmp_unsigned("<", lane, i64(warps))
        safe_lane = b.select(in_range, lane, i64(0))
        accs = [[b.load(_shared_ptr(b, shared[h][j], safe_lane), typ=types[h][j])
                 for j in range(len(types[h]))] for h in range(len(heroes))]
        if inits is not None:
            accs = [[b.select(in_range, v, i) for v, i in zip(vals, ivs)]
                    for vals, ivs in zip(accs, inits)]
        accs, valid = warp_reduce(em, b, heroes, accs, in_range, inits is not None)
        nvptx.barrier(b)
    return accs, valid


def warp_reduce(em: GpuEmitter, b: ir.IRBuilder, heroes: list[Hero],
                 accs: list[list[ir.Value]], valid: ir.Value, all_valid: bool = False
                 ) -> tuple[list[list[ir.Value]], ir.Value]:
    """Butterfly-combine partials across the 32 lanes; every lane ends with the warp's total
    (and whether any lane had a valid partial). With `all_valid` every partial counts (they
    started at an identity init): no flags are shuffled."""
    if all_valid:
        for mask in (16, 8, 4, 2, 1):
            accs = [combine_partials(em, b, red, vals,
                                     [nvptx.shuffle_xor(b, v, mask) for v in vals])
                    for (red, _), vals in zip(heroes, accs)]
        return accs, ir.Constant(lu.I1, 1)
    for mask in (16, 8, 4, 2, 1):
        other_valid = b.trunc(nvptx.shuffle_xor(b, b.zext(valid, lu.I32), mask), lu.I1)
        new_accs = []
        for (red, _), vals in zip(heroes, accs):
            others = [nvptx.shuffle_xor(b, v, mask) for v in vals]
            comb = combine_partials(em, b, red, vals, others)
            picked = []
            for v, o, c in zip(vals, others, comb):
                # both valid: combined; only one valid: that one
                picked.append(b.select(valid, b.select(other_valid, c, v), o))
            new_accs.append(picked)
        accs = new_accs
        valid = b.or_(valid, other_valid)
    return accs, valid


COL_TILE = 32
"""Outputs per block of a column reduction (consecutive kept elements: coalesced loads)."""
COL_LANES = 8
"""Threads folding each output's column (every COL_LANES-th reduced element each); a block
has COL_TILE * COL_LANES == ROW_THREADS threads (the kernels' maxntid)."""


def _column(em: GpuEmitter, k: GpuKernel, gen: LeafEmitter, out: HloInstruction,
            heroes: list[Hero], loops: list[tuple[HloInstruction, ShapeIndex]],
            kept: list[int], red_order: list[int]) -> None:
    """Blocks of COL_TILE x COL_LANES threads: thread (x, y) folds elements y, y + 8, ... of
    column x of the block's tile of 32 outputs (a warp reads 32 neighbouring addresses); the
    8 partials of a column meet in shared memory and thread (x, 0) combines them in order with
    the init value and writes. Partials start at an identity init, else carry a `valid` flag
    (through shared memory too), as in row reductions."""
    b = k.b
    in_shape = heroes[0][0].operands[0].shape
    kept_sizes = [in_shape.dims[d] for d in kept]
    red_sizes = [in_shape.dims[d] for d in red_order]
    n_out, n_red = prod(kept_sizes), prod(red_sizes)
    tiles = -(-n_out // COL_TILE)
    types = [[lu.value_type(element_type(red.operands[_n(red) + j].shape, red.name))
              for j in range(_n(red))] for red, _ in heroes]
    cells = COL_TILE * COL_LANES
    flags = not all(has_identity_init(red) for red, _ in heroes)
    shared_bytes = cells * (int(flags) + sum(max(1, element_type(
        red.operands[_n(red) + j].shape, red.name).byte_size)
        for red, _ in heroes for j in range(_n(red))))
    k.launch((max(1, min(tiles, MAX_BLOCKS)), 1, 1), (COL_TILE, COL_LANES, 1), shared_bytes)
    shared = [[nvptx.shared_array(b.module, f"col{h}_{j}", t, cells) for j, t in enumerate(ts)]
              for h, ts in enumerate(types)]
    shared_valid = nvptx.shared_array(b.module, "col_valid", lu.I8, cells) if flags else None
    tx = b.zext(nvptx.thread_idx(b, "x"), lu.I64)
    ty = b.zext(nvptx.thread_idx(b, "y"), lu.I64)
    cell = b.add(b.mul(ty, i64(COL_TILE)), tx)
    blk, nblk = (b.zext(f(b), lu.I64) for f in (nvptx.block_idx, nvptx.grid_dim))
    with b.goto_entry_block():
        slots = [[b.alloca(t) for t in ts] for ts in types]
        valid_slot = b.alloca(lu.I1)
    with strided(b, i64(tiles), blk, nblk, name="tile") as tile:
        o = b.add(b.mul(tile, i64(COL_TILE)), tx)
        ok = b.icmp_unsigned("<", o, i64(n_out))
        kidx = unflatten(b, b.select(ok, o, i64(0)), kept, kept_sizes)
        inits = _identity_inits(gen, heroes)
        if inits is not None:       # partials start at the identity: no validity flags
            for ss, vals in zip(slots, inits):
                for s, v in zip(ss, vals):
                    b.store(v, s)
        b.store(ir.Constant(lu.I1, 0 if inits is None else 1), valid_slot)
        with strided(b, b.select(ok, i64(n_red), i64(0)), ty, i64(COL_LANES), name="c") as r:
            ridx = unflatten(b, r, red_order, red_sizes)
            full = [kidx[d] if d in kidx else ridx[d] for d in range(in_shape.rank)]
            gen.clear_cache()
            valid = b.load(valid_slot)
            for (red, _), ss in zip(heroes, slots):
                xs = [gen.generate(red.operands[j], full) for j in range(_n(red))]
                new = combine_partials(em, b, red, [b.load(s) for s in ss], xs)
                for s, x, v in zip(ss, xs, new):
                    b.store(v if inits is not None else b.select(valid, v, x), s)
            if inits is None:
                b.store(ir.Constant(lu.I1, 1), valid_slot)
            # every output's element first, then the stores: an elementwise output may take
            # the buffer of an operand another output reads at this index (`alias_rules`)
            values = [(gen.generate(inst, full), sidx) for inst, sidx in loops]
            for v, sidx in values:
                k.write(out, full, v, sidx)
        gen.clear_cache()
        for ss, arrs in zip(slots, shared):
            for s, gv in zip(ss, arrs):
                b.store(b.load(s), _shared_ptr(b, gv, cell))
        if shared_valid is not None:
            b.store(b.zext(b.load(valid_slot), lu.I8), _shared_ptr(b, shared_valid, cell))
        nvptx.barrier(b)
        with b.if_then(b.and_(ok, b.icmp_unsigned("==", ty, i64(0)))):
            accs = [[gen.generate(red.operands[_n(red) + j], []) for j in range(_n(red))]
                    for red, _ in heroes]
            for lane in range(COL_LANES):
                at = b.add(tx, i64(COL_TILE * lane))
                has = None if shared_valid is None else \
                    b.trunc(b.load(_shared_ptr(b, shared_valid, at)), lu.I1)
                new_accs = []
                for (red, _), vals, arrs, ts in zip(heroes, accs, shared, types):
                    part = [b.load(_shared_ptr(b, gv, at), typ=t) for gv, t in zip(arrs, ts)]
                    comb = combine_partials(em, b, red, vals, part)
                    new_accs.append(comb if has is None else
                                    [b.select(has, c, v) for c, v in zip(comb, vals)])
                accs = new_accs
            oidx = [kidx[d] for d in sorted(kept)]
            for (_red, sidxs), vals in zip(heroes, accs):
                for sidx, v in zip(sidxs, vals):
                    k.write(out, oidx, v, sidx)
        gen.clear_cache()
        nvptx.barrier(b)


def _heroes(inst: HloInstruction) -> tuple[list[Hero], list[tuple[HloInstruction, ShapeIndex]]]:
    root = inst.called[0].root
    assert root is not None
    outs = array_buffers(inst)
    heroes: list[Hero] = []
    loops: list[tuple[HloInstruction, ShapeIndex]] = []
    if root.opcode is Opcode.REDUCE:
        heroes.append((root, [s for _, s in outs]))
    elif root.opcode is Opcode.TUPLE:
        for j, r in enumerate(root.operands):
            if r.opcode is Opcode.REDUCE and not r.shape.is_tuple:
                heroes.append((r, [(j,)]))
            elif r.opcode is Opcode.REDUCE or not r.shape.is_array:
                raise UnsupportedOpError(
                    f"GPU backend: variadic reduce inside multi-output fusion {inst.name}")
            else:
                loops.append((r, (j,)))
    else:
        raise UnsupportedOpError(
            f"GPU backend: kInput fusion {inst.name} has root '{root.opcode.text}'")
    if not heroes:
        raise UnsupportedOpError(f"GPU backend: kInput fusion {inst.name} has no reduce root")
    return heroes, loops


def emit_input_fusion(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """A kInput fusion: reduce root, or a tuple root of reduces and elementwise outputs."""
    heroes, loops = _heroes(inst)
    k = em.kernel(inst, array_buffers(inst), operand_buffers(inst), max_threads=ROW_THREADS)
    emit_reduction(em, k, fusion_generator(k, inst), inst, heroes, loops)
    return [k.thunk()]


def emit_reduce(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """An unfused (possibly variadic) reduce."""
    outs = array_buffers(inst)
    k = em.kernel(inst, outs, operand_buffers(inst), max_threads=ROW_THREADS)
    emit_reduction(em, k, operand_generator(k, inst), inst, [(inst, [s for _, s in outs])], [])
    return [k.thunk()]
