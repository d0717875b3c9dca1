"""Sort (bitonic per row in shared memory) and top-k.

**sort**: one block per row (block stride over rows). The row's keys and values plus each
element's original position are staged in shared memory, padded to a power of two P; the
bitonic network runs over P with a barrier per stage. The order used is the comparator with
the original position as tie-break (so the result is stable whatever `is_stable` says) and
padding elements sorting last. Rows too long for 48 KiB of shared memory fall back to a
per-row insertion sort in the output buffers (correct, slow).

**topk**: one thread per row; output j is the best element strictly after output j-1 in the
order (value descending for largest=true, ascending otherwise; ties by lower index; floats by
IEEE total order so NaNs are ordered too). O(k n) per row, no scratch memory.
"""
from __future__ import annotations

import logging
from math import prod

from llvmlite import ir

from xlc.backend_gpu import nvptx
from xlc.backend_gpu.emitter import GpuEmitter, array_buffers, operand_buffers
from xlc.backend_gpu.kernel import (
    MAX_BLOCKS,
    GpuKernel,
    element_type,
    grid_stride,
    i32,
    i64,
    loop_launch,
    strided,
    unflatten,
)
from xlc.backend_gpu.thunks import Thunk
from xlc.codegen import llvm_utils as lu
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType, Shape, ShapeIndex, physical_order

log = logging.getLogger("xlc.backend_gpu")

SHARED_LIMIT = 48 * 1024
SORT_THREADS = 256


def _row_index(b: ir.IRBuilder, shape: Shape, dim: int, row: ir.Value,
               ) -> dict[int, ir.Value]:
    others = [d for d in physical_order(shape) if d != dim]
    sizes = [shape.dims[d] for d in others]
    return unflatten(b, row, others, sizes) if others else {}


def _full(ridx: dict[int, ir.Value], dim: int, i: ir.Value, rank: int) -> list[ir.Value]:
    return [i if d == dim else ridx[d] for d in range(rank)]


class _Order:
    """lt(x, y) on (values..., position) tuples: comparator, position tie-break, pads last."""

    def __init__(self, em: GpuEmitter, inst: HloInstruction, b: ir.IRBuilder):
        self.em, self.comp, self.b = em, inst.called[0], b

    def cmp(self, x: list[ir.Value], y: list[ir.Value]) -> ir.Value:
        args: list[ir.Value] = []
        for xv, yv in zip(x, y):
            args += [xv, yv]
        return self.em.apply(self.b, self.comp, args)[0]

    def lt(self, x: list[ir.Value], xi: ir.Value, y: list[ir.Value], yi: ir.Value) -> ir.Value:
        b = self.b
        x_pad = b.icmp_signed("<", xi, i32(0))
        y_pad = b.icmp_signed("<", yi, i32(0))
        fwd, back = self.cmp(x, y), self.cmp(y, x)
        tie = b.and_(b.not_(back), b.icmp_signed("<", xi, yi))
        real = b.or_(fwd, tie)
        return b.and_(b.not_(x_pad), b.or_(y_pad, real))


def emit_sort(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """Sort along `dimensions[0]` (keys and values; see the module docstring)."""
    outs = array_buffers(inst)
    ops = inst.operands
    shape = ops[0].shape
    dim = int(inst.attrs["dimensions"][0])
    length = shape.dims[dim]
    rows = prod(shape.dims) // max(1, length)
    pts = [element_type(op.shape, op.name) for op in ops]
    complex_ops = [op.name for op in ops
                   if op.shape.element_type is not None and op.shape.element_type.is_complex]
    if complex_ops:
        raise UnsupportedOpError(f"GPU backend: sort {inst.name} of complex operands "
                                 f"({', '.join(complex_ops)}) is unsupported")
    p2 = 1
    while p2 < length:
        p2 *= 2
    need = p2 * (4 + sum(lu.storage_type(pt).width // 8 if isinstance(
        lu.storage_type(pt), ir.IntType) else lu.float_bits(lu.storage_type(pt)) // 8
        for pt in pts))
    k = em.kernel(inst, outs, operand_buffers(inst), max_threads=SORT_THREADS)
    if need <= SHARED_LIMIT and length > 1:
        _bitonic(em, k, inst, outs, dim, length, rows, p2, pts, need)
    else:
        _insertion(em, k, inst, outs, dim, length, rows, pts)
    k.finish()
    return [k.thunk()]


def _bitonic(em: GpuEmitter, k: GpuKernel, inst: HloInstruction,
             outs: list[tuple[HloInstruction, ShapeIndex]], dim: int, length: int, rows: int,
             p2: int, pts: list[PrimitiveType], need: int) -> None:
    b = k.b
    ops = inst.operands
    shape = ops[0].shape
    threads = min(SORT_THREADS, max(32, p2 // 2))
    k.launch((max(1, min(rows, MAX_BLOCKS)), 1, 1), (threads, 1, 1), shared_bytes=need)
    sh_vals = [nvptx.shared_array(b.module, f"sort_v{j}", lu.storage_type(pt), p2)
               for j, pt in enumerate(pts)]
    sh_pos = nvptx.shared_array(b.module, "sort_pos", lu.I32, p2)
    order = _Order(em, inst, b)
    tid = b.zext(nvptx.thread_idx(b), lu.I64)
    row0 = b.zext(nvptx.block_idx(b), lu.I64)
    rstep = b.zext(nvptx.grid_dim(b), lu.I64)

    def sh(gv: ir.GlobalVariable, i: ir.Value) -> ir.Value:
        return nvptx.shared_elem_ptr(b, gv, i)

    def load_all(i: ir.Value) -> tuple[list[ir.Value], ir.Value]:
        vals = [lu.load_element(b, sh(g, i64(0)), i, pt) for g, pt in zip(sh_vals, pts)]
        return vals, b.load(sh(sh_pos, i), typ=lu.I32)

    def store_all(i: ir.Value, vals: list[ir.Value], pos: ir.Value) -> None:
        for g, pt, v in zip(sh_vals, pts, vals):
            lu.store_element(b, v, sh(g, i64(0)), i, pt)
        b.store(pos, sh(sh_pos, i))

    with strided(b, i64(rows), row0, rstep, name="row") as row:
        ridx = _row_index(b, shape, dim, row)
        with lu.for_range(b, i64(p2), start=tid, step=threads, name="ld") as i:
            ok = b.icmp_unsigned("<", i, i64(length))
            src = _full(ridx, dim, b.select(ok, i, i64(0)), shape.rank)
            vals = [k.read(op, src) for op in ops]
            store_all(i, vals, b.select(ok, b.trunc(i, lu.I32), i32(-1)))
        nvptx.barrier(b)
        size = 2
        while size <= p2:
            stride = size // 2
            while stride >= 1:
                with lu.for_range(b, i64(p2 // 2), start=tid, step=threads, name="cx") as i:
                    lo = b.add(b.mul(b.udiv(i, i64(stride)), i64(2 * stride)),
                               b.urem(i, i64(stride)))
                    hi = b.add(lo, i64(stride))
                    asc = b.icmp_unsigned("==", b.and_(lo, i64(size)), i64(0))
                    a_v, a_p = load_all(lo)
                    c_v, c_p = load_all(hi)
                    c_first = order.lt(c_v, c_p, a_v, a_p)
                    a_first = order.lt(a_v, a_p, c_v, c_p)
                    swap = b.select(asc, c_first, a_first)
                    new_lo = [b.select(swap, c, a) for a, c in zip(a_v, c_v)]
                    new_hi = [b.select(swap, a, c) for a, c in zip(a_v, c_v)]
                    store_all(lo, new_lo, b.select(swap, c_p, a_p))
                    store_all(hi, new_hi, b.select(swap, a_p, c_p))
                nvptx.barrier(b)
                stride //= 2
            size *= 2
        with lu.for_range(b, i64(length), start=tid, step=threads, name="st") as i:
            vals, _ = load_all(i)
            dst = _full(ridx, dim, i, shape.rank)
            for (o, sidx), v in zip(outs, vals):
                k.write(o, dst, v, sidx)
        nvptx.barrier(b)


def _insertion(em: GpuEmitter, k: GpuKernel, inst: HloInstruction,
               outs: list[tuple[HloInstruction, ShapeIndex]], dim: int, length: int,
               rows: int, pts: list[PrimitiveType]) -> None:
    """One thread per row: copy the row to the outputs, then a stable insertion sort there."""
    b = k.b
    ops = inst.operands
    shape = ops[0].shape
    grid, block = loop_launch(rows)
    k.launch(grid, block)
    order = _Order(em, inst, b)
    with grid_stride(b, rows) as row:
        ridx = _row_index(b, shape, dim, row)
        with lu.for_range(b, i64(length), name="cp") as i:
            at = _full(ridx, dim, i, shape.rank)
            for op, (o, sidx) in zip(ops, outs):
                k.write(o, at, k.read(op, at), sidx)
        with lu.for_range(b, i64(length), start=1, name="ins") as i:
            # bubble element i down while it sorts strictly before its left neighbour
            with lu.for_range(b, i, name="j") as j:
                hi = b.sub(i, j)
                lo = b.sub(hi, i64(1))
                at_hi, at_lo = _full(ridx, dim, hi, shape.rank), _full(ridx, dim, lo, shape.rank)
                hv = [k.read(o, at_hi, s) for o, s in outs]
                lv = [k.read(o, at_lo, s) for o, s in outs]
                swap = order.cmp(hv, lv)
                for (o, s), h, lval in zip(outs, hv, lv):
                    k.write(o, at_lo, b.select(swap, h, lval), s)
                    k.write(o, at_hi, b.select(swap, lval, h), s)


def _order_key(b: ir.IRBuilder, v: ir.Value, pt: PrimitiveType) -> ir.Value:
    """A signed integer (or the value itself for integers) ordered like `v`."""
    if pt.is_float:
        width = 16 if pt in (PrimitiveType.F16, PrimitiveType.BF16) else pt.byte_size * 8
        bits = v if pt is PrimitiveType.BF16 else b.bitcast(v, ir.IntType(width))
        neg = b.ashr(bits, ir.Constant(bits.type, width - 1))
        return b.xor(bits, b.lshr(neg, ir.Constant(bits.type, 1)))
    return v


def emit_topk(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """topk(x), k, largest -> (values, s32 indices) over the last dimension."""
    x = inst.operands[0]
    pt = element_type(x.shape, x.name)
    kk = int(inst.attrs["k"])
    largest = bool(inst.attrs.get("largest", True))
    n = x.shape.dims[-1]
    rows = prod(x.shape.dims[:-1])
    outs = array_buffers(inst)
    k = em.kernel(inst, outs, operand_buffers(inst), max_threads=128)
    b = k.b
    grid, block = loop_launch(rows)
    k.launch(grid, block)
    unsigned = pt.is_unsigned_int or pt is PrimitiveType.PRED
    gt = "<" if not largest else ">"

    def better(ka: ir.Value, ia: ir.Value, kb: ir.Value, ib: ir.Value) -> ir.Value:
        """(ka, ia) comes before (kb, ib): key better, or equal key and lower index."""
        cmp = b.icmp_unsigned if unsigned else b.icmp_signed
        return b.or_(cmp(gt, ka, kb), b.and_(b.icmp_signed("==", ka, kb),
                                              b.icmp_signed("<", ia, ib)))

    with grid_stride(b, rows) as row:
        lead = unflatten(b, row, list(range(x.shape.rank - 1)), list(x.shape.dims[:-1])) \
            if x.shape.rank > 1 else {}
        lead_idx = [lead[d] for d in range(x.shape.rank - 1)]
        with b.goto_entry_block():
            prev_k = b.alloca(_order_key(b, lu.const(lu.value_type(pt), 0), pt).type)
            prev_i = b.alloca(lu.I64)
            best_k = b.alloca(prev_k.allocated_type)
            best_i = b.alloca(lu.I64)
        b.store(i64(-1), prev_i)
        with lu.for_range(b, i64(kk), name="sel") as j:
            b.store(i64(-1), best_i)
            with lu.for_range(b, i64(n), name="scan") as e:
                key = _order_key(b, k.read(x, lead_idx + [e]), pt)
                pk, pi = b.load(prev_k), b.load(prev_i)
                after_prev = b.or_(b.icmp_signed("<", pi, i64(0)), better(pk, pi, key, e))
                bk, bi = b.load(best_k), b.load(best_i)
                beats = b.or_(b.icmp_signed("<", bi, i64(0)), better(key, e, bk, bi))
                take = b.and_(after_prev, beats)
                b.store(b.select(take, key, bk), best_k)
                b.store(b.select(take, e, bi), best_i)
            bi = b.load(best_i)
            b.store(b.load(best_k), prev_k)
            b.store(bi, prev_i)
            (vo, vs), (io, isx) = outs[0], outs[1]
            k.write(vo, lead_idx + [j], k.read(x, lead_idx + [bi]), vs)
            k.write(io, lead_idx + [j], b.trunc(bi, lu.I32), isx)
    k.finish()
    return [k.thunk()]
