"""Row fusions on the GPU (`xlc.passes.row_fusion`): softmax, log-softmax and layer/RMS norm
as ONE kernel that reads each row from memory once per reduce and writes it once.

A row fusion is a kLoop fusion whose per-row reductions live inside it. Rows of up to
WARP_ROW_MAX elements get one warp each, 8 rows per 256-thread block (no shared memory, no
barriers); a longer row gets a thread block (grid-stride over rows, `ROW_THREADS` threads).
Per row:
1. every reduce of the fused computation, in dependency order, is folded over the row by the
   block: each thread folds a strided part of the row into registers, the warps combine with
   butterfly shuffles (which leave the total in every lane: the warp-per-row case ends here),
   lane 0 of each warp publishes to shared memory, and every warp combines the published
   partials, so every thread ends with the row's value (`emit_reduce`'s
   scheme, ending in all threads instead of thread 0). From then on the reduce is a leaf of the
   elemental emitter: the softmax's sum reads its max, the root reads both, without
   recomputing;
2. the root(s) are evaluated over the row, each thread its strided part, and stored.
Barriers separate the reduces' uses of shared memory and consecutive rows.
"""
from __future__ import annotations

import logging
from math import prod

from llvmlite import ir

from xlc.backend_gpu import nvptx
from xlc.backend_gpu.emit_reduce import (
    ROW_THREADS,
    WARP_ROW_MAX,
    Hero,
    block_reduce,
    combine_partials,
    has_identity_init,
    row_step,
    row_vector_width,
)
from xlc.backend_gpu.emitter import GpuEmitter, array_buffers, operand_buffers
from xlc.backend_gpu.kernel import MAX_BLOCKS, element_type, i64, strided, unflatten
from xlc.backend_gpu.thunks import Thunk
from xlc.codegen import llvm_utils as lu
from xlc.codegen.ir_array import fusion_generator
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.passes.alias_rules import same_layout

log = logging.getLogger("xlc.backend_gpu")


def emit_row_fusion(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """Emit row fusion `inst` (requires `row_fusion.row_fusion_error(inst) is None`) as one
    kernel (see the module docstring); every reduce is evaluated once per row."""
    fc = inst.called[0]
    root = fc.root
    assert root is not None
    roots = list(root.operands) if root.opcode is Opcode.TUPLE else [root]
    outs = array_buffers(inst)
    space = inst.shape.subshape(outs[0][1]) if outs[0][1] else inst.shape
    reduces = [i for i in fc.post_order() if i.opcode is Opcode.REDUCE]
    for red in reduces:
        if red.shape.is_tuple:
            raise UnsupportedOpError(f"GPU backend: variadic reduce in row fusion {inst.name}")
    rdims = sorted(int(d) for d in reduces[0].attrs["dimensions"])
    kept = [d for d in range(space.rank) if d not in rdims]
    for r in roots:
        if tuple(r.shape.dims) != tuple(space.dims):
            raise UnsupportedOpError(
                f"GPU backend: row fusion {inst.name} has an output outside its space ({r.name})")
    kept_sizes = [space.dims[d] for d in kept]
    red_sizes = [space.dims[d] for d in rdims]
    rows, width = prod(kept_sizes), prod(red_sizes)
    types = [lu.value_type(element_type(red.shape, red.name)) for red in reduces]
    # blocks have at most ROW_THREADS threads: ptxas may budget registers for that
    k = em.kernel(inst, outs, operand_buffers(inst), max_threads=ROW_THREADS)
    b = k.b
    tid = b.zext(nvptx.thread_idx(b), lu.I64)
    lane, warp = b.and_(tid, i64(31)), b.lshr(tid, i64(5))
    blk, nblk = (b.zext(f(b), lu.I64) for f in (nvptx.block_idx, nvptx.grid_dim))
    if width <= WARP_ROW_MAX:
        # a warp per row, several rows per block: no shared memory, no barriers
        per_block = max(1, min(ROW_THREADS // 32, rows))
        threads, warps = 32 * per_block, 1
        k.launch((max(1, min(-(-rows // per_block), MAX_BLOCKS)), 1, 1), (threads, 1, 1))
        groups = -(-rows // per_block)
        row_threads, row_tid = 32, lane
    else:
        threads = min(ROW_THREADS, max(32, -(-width // 32) * 32))
        warps = threads // 32
        shared_bytes = sum(warps * max(1, element_type(red.shape, red.name).byte_size)
                           for red in reduces) if warps > 1 else 0
        k.launch((max(1, min(rows, MAX_BLOCKS)), 1, 1), (threads, 1, 1), shared_bytes)
        groups, per_block = rows, 1
        row_threads, row_tid = threads, tid
    gen = fusion_generator(k, inst)
    vec = row_vector_width(inst, space, kept + rdims, width)
    # outputs laid out like the space, 16-byte aligned, elements of at most 4 bytes: stored
    # with one vector store per step
    vector_out = [same_layout(o.shape.subshape(s), space) and not k.slice(o, s).offset % 16
                  and element_type(o.shape.subshape(s), o.name).byte_size * vec <= 16
                  and not element_type(o.shape.subshape(s), o.name).is_complex
                  for o, s in outs]
    with b.goto_entry_block():
        slots = [b.alloca(t) for t in types]
        valid_slot = b.alloca(lu.I1)
    shared = [[nvptx.shared_array(b.module, f"row{h}", t, warps)]
              for h, t in enumerate(types)] if warps > 1 else []
    # Every warp of a block runs the same iterations (shuffles and barriers stay uniform): a
    # block takes a group of `per_block` rows at a time, warp w its row w; a warp past the
    # last row recomputes the last row and writes nothing.
    with strided(b, i64(groups), blk, nblk, name="rowg") as group:
        if per_block > 1:
            want = b.add(b.mul(group, i64(per_block)), warp)
            active = b.icmp_unsigned("<", want, i64(rows))
            row = b.select(active, want, i64(rows - 1))
        else:
            active, row = ir.Constant(lu.I1, 1), group
        kidx = unflatten(b, row, kept, kept_sizes) if kept else {}

        def full_index(r: ir.Value) -> list[ir.Value]:
            ridx = unflatten(b, r, rdims, red_sizes)
            return [kidx[d] if d in kidx else ridx[d] for d in range(space.rank)]


        for h, red in enumerate(reduces):
            operand, init = red.operands
            identity = has_identity_init(red)
            gen.clear_cache()
            init_v = gen.generate(init, [])
            gen.clear_cache()
            # identity init: partials start at it, no validity flags (emit_reduce)
            b.store(init_v if identity else ir.Constant(types[h], ir.Undefined), slots[h])
            b.store(ir.Constant(lu.I1, 0), valid_slot)
            with lu.for_range(b, i64(width // vec), start=row_tid, step=row_threads,
                              name=f"f{h}") as c:
                gen.clear_cache()
                indices, _, done = row_step(k, gen, inst, space, row, width, c, vec,
                                            full_index)
                for full in indices:
                    x = gen.generate(operand, full)
                    acc = b.load(slots[h])
                    (new,) = combine_partials(em, b, red, [acc], [x])
                    b.store(new if identity else b.select(b.load(valid_slot), new, x),
                            slots[h])
                    if not identity:
                        b.store(ir.Constant(lu.I1, 1), valid_slot)
                done()
            gen.clear_cache()
            heroes: list[Hero] = [(red, [()])]
            (accs,), valid = block_reduce(em, b, heroes, [[b.load(slots[h])]],
                                          b.load(valid_slot), [shared[h]] if shared else [],
                                          [[types[h]]], lane, warp, warps,
                                          [[init_v]] if identity else None)
            if identity:
                value = accs[0]
            else:
                (total,) = combine_partials(em, b, red, [init_v], accs)
                value = b.select(valid, total, init_v)
            gen.clear_cache()
            gen.leaves[red.uid] = _constant_leaf(value)
        with lu.for_range(b, i64(width // vec), start=row_tid, step=row_threads,
                          name="out") as c:
            gen.clear_cache()
            indices, first, done = row_step(k, gen, inst, space, row, width, c, vec,
                                            full_index)
            # every output's element before any store: an output may share an operand's
            # buffer (a vector load reads all lanes' elements at the first lane)
            values = [[gen.generate(x, full) for x in roots] for full in indices]
            with b.if_then(active):
                for j, (o, sidx) in enumerate(outs):
                    lanes_j = [vals[j] for vals in values]
                    if vec > 1 and vector_out[j]:   # one 128-bit store
                        pt = element_type(o.shape.subshape(sidx), o.name)
                        v: ir.Value = ir.Constant(ir.VectorType(lanes_j[0].type, vec),
                                                  ir.Undefined)
                        for q, x in enumerate(lanes_j):
                            v = b.insert_element(v, x, ir.Constant(lu.I32, q))
                        lu.store_vector(b, v, k.ptr(o, sidx), first, pt,
                                        align=vec * pt.byte_size)
                        continue
                    for full, x in zip(indices, lanes_j):
                        k.write(o, full, x, sidx)
            done()
        gen.clear_cache()
        for red in reduces:
            del gen.leaves[red.uid]
    k.finish()
    log.debug("GPU row fusion %s: %d reduces, %d threads per row", inst.name, len(reduces),
              row_threads)
    return [k.thunk()]


def _constant_leaf(value: ir.Value):  # noqa: ANN202 - a leaf reader
    return lambda _index: value
