"""Transposes through shared-memory tiles: unfused `transpose` and layout-changing `copy`.

When the input's physically minor dimension differs from the output's, a block of 32 x 8
threads moves a 32 x 32 tile: it reads the tile with consecutive threads on consecutive input
addresses into a padded [32][33] shared array (no bank conflicts), synchronises, and writes it
with consecutive threads on consecutive output addresses, so both sides coalesce.
Grid: (tiles along the output-minor dim, tiles along the input-minor dim, product of the other
dims). Otherwise (same minor dimension, or too many other elements) a plain loop kernel.
"""
from __future__ import annotations

import logging
from math import prod

from llvmlite import ir

from xlc.backend_gpu import nvptx
from xlc.backend_gpu.emit_loop import emit_elementwise
from xlc.backend_gpu.emitter import GpuEmitter
from xlc.backend_gpu.kernel import element_type, i64, unflatten
from xlc.backend_gpu.thunks import Thunk
from xlc.codegen import llvm_utils as lu
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import physical_order

log = logging.getLogger("xlc.backend_gpu")

TILE = 32
ROWS = 8
MAX_Z = 65535


def _source_dim(inst: HloInstruction) -> list[int]:
    """For each output logical dim, the operand logical dim it reads."""
    if inst.opcode is Opcode.TRANSPOSE:
        return [int(p) for p in inst.attrs["dimensions"]]
    return list(range(inst.shape.rank))


def emit_transpose(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """An unfused transpose (tiled when it moves the minor dimension)."""
    return emit_transpose_copy(em, inst)


def emit_transpose_copy(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """Transpose or layout-changing copy `inst` as a tiled kernel (see module docstring)."""
    src = inst.operands[0]
    pt = element_type(inst.shape, inst.name)
    src_of = _source_dim(inst)
    out_order = physical_order(inst.shape)
    od = out_order[-1]                                  # output-minor (output logical dim)
    id_ = src_of.index(physical_order(src.shape)[-1])   # input-minor, as an output dim
    others = [d for d in out_order if d not in (od, id_)]
    batch = prod(inst.shape.dims[d] for d in others)
    if od == id_ or batch > MAX_Z or inst.shape.rank < 2:
        return emit_elementwise(em, inst)
    k = em.kernel(inst, [(inst, ())], [(src, ())], max_threads=TILE * ROWS)
    b = k.b
    s_od, s_id = inst.shape.dims[od], inst.shape.dims[id_]
    st = lu.storage_type(pt)
    tile = nvptx.shared_array(b.module, "tile", st, TILE * (TILE + 1))
    k.launch((-(-s_od // TILE), -(-s_id // TILE), max(1, batch)), (TILE, ROWS, 1),
             shared_bytes=TILE * (TILE + 1) * max(1, pt.byte_size))
    tx = b.zext(nvptx.thread_idx(b, "x"), lu.I64)
    ty = b.zext(nvptx.thread_idx(b, "y"), lu.I64)
    base_od = b.mul(b.zext(nvptx.block_idx(b, "x"), lu.I64), i64(TILE))
    base_id = b.mul(b.zext(nvptx.block_idx(b, "y"), lu.I64), i64(TILE))
    z = b.zext(nvptx.block_idx(b, "z"), lu.I64)
    rest = unflatten(b, z, others, [inst.shape.dims[d] for d in others]) if others else {}

    def out_index(i_od: ir.Value, i_id: ir.Value) -> list[ir.Value]:
        parts = {**rest, od: i_od, id_: i_id}
        return [parts[d] for d in range(inst.shape.rank)]

    def src_index(out_idx: list[ir.Value]) -> list[ir.Value]:
        idx: list[ir.Value] = [i64(0)] * src.shape.rank
        for o, s in enumerate(src_of):
            idx[s] = out_idx[o]
        return idx

    def cell(row: ir.Value, col: ir.Value) -> ir.Value:
        flat = b.add(b.mul(row, i64(TILE + 1)), col)
        return nvptx.shared_elem_ptr(b, tile, flat)

    for r in range(0, TILE, ROWS):
        # read: consecutive tx along the input-minor dim
        i_id = b.add(base_id, tx)
        i_od = b.add(base_od, b.add(ty, i64(r)))
        ok = b.and_(b.icmp_unsigned("<", i_id, i64(s_id)), b.icmp_unsigned("<", i_od, i64(s_od)))
        with b.if_then(ok):
            v = k.read(src, src_index(out_index(i_od, i_id)))
            lu.store_element(b, v, cell(b.add(ty, i64(r)), tx), i64(0), pt)
    nvptx.barrier(b)
    for r in range(0, TILE, ROWS):
        # write: consecutive tx along the output-minor dim
        i_od = b.add(base_od, tx)
        i_id = b.add(base_id, b.add(ty, i64(r)))
        ok = b.and_(b.icmp_unsigned("<", i_id, i64(s_id)), b.icmp_unsigned("<", i_od, i64(s_od)))
        with b.if_then(ok):
            v = lu.load_element(b, cell(tx, b.add(ty, i64(r))), i64(0), pt)
            k.write(inst, out_index(i_od, i_id), v)
    k.finish()
    return [k.thunk()]
