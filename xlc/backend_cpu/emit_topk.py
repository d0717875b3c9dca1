"""Top-k on the CPU: one pass per row keeping a k-element heap, rows split over the threads.

For each row (the last dimension) the k best elements seen so far form a binary heap whose
root is the worst of them; the heap lives in the row's own outputs (values and s32 indices),
so no scratch memory is needed. Every element is compared with the root once: only an
element better than the root enters (replacing it, then sifting down). Elements arrive in
index order, so an element equal to the root in key comes after it and never enters: ties go
to the lower index, as in XLA. At the end the heap is sorted in place (heap sort), best first.
Cost per row: n compares plus O(log k) per entry into the heap (about k ln(n/k) entries on
random data, n log k at worst), against k full passes before.

Order: floats by TOTALORDER (`-NaN < -inf < ... < -0 < +0 < ... < inf < +NaN`, the signed
integer key of XLA's TopK comparator), integers by value; `largest=false` reverses the key
order but keeps ties by the lower index.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from llvmlite import ir

from xlc.backend_cpu.emit_loops import operand_buffers, output_buffers
from xlc.backend_cpu.emitter import (
    CpuEmitter,
    FnCtx,
    Kernel,
    element_type,
    i64,
    loop_over,
    split_of,
)
from xlc.codegen import llvm_utils as lu
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType


def order_key(b: ir.IRBuilder, v: ir.Value, pt: PrimitiveType) -> ir.Value:
    """A signed integer that orders like TOTALORDER (floats) or the value (integers)."""
    if pt.is_float:
        from xlc.codegen.scalar_types import to_compute

        f = to_compute(b, v, pt) if pt in (PrimitiveType.F16, PrimitiveType.BF16) else v
        ity = ir.IntType(lu.float_bits(f.type))
        bits = b.bitcast(f, ity)
        mask = b.lshr(b.ashr(bits, ir.Constant(ity, ity.width - 1)), ir.Constant(ity, 1))
        return b.xor(bits, mask)
    if pt.is_signed_int:
        return v
    if pt.is_unsigned_int or pt is PrimitiveType.PRED:
        ity = v.type
        return b.xor(v, ir.Constant(ity, 1 << (ity.width - 1)))
    raise UnsupportedOpError(f"CPU backend: topk on {pt.text} is unsupported")


def key_type(pt: PrimitiveType) -> ir.IntType:
    """The integer type of `order_key` for elements of type `pt`."""
    if pt.is_float:
        return ir.IntType(64 if pt.byte_size > 4 else 32)
    return ir.IntType(max(1, pt.bit_width))


@contextmanager
def _while(b: ir.IRBuilder, name: str) -> Iterator[tuple[ir.Block, ir.Block]]:
    """A loop whose body (the `with` block) branches to `head` to go on or `done` to stop;
    afterwards the builder is at `done`."""
    fn = b.function
    head = fn.append_basic_block(f"{name}.head")
    done = fn.append_basic_block(f"{name}.done")
    b.branch(head)
    b.position_at_end(head)
    yield head, done
    b.position_at_end(done)


class _RowHeap:
    """The heap of one row, stored in the row's value and index outputs (positions 0..k-1)."""

    def __init__(self, k: Kernel, inst: HloInstruction, row: list, largest: bool):
        self.k, self.b, self.row = k, k.b, row
        x = inst.operands[0]
        self.x = x
        self.pt = element_type(x.shape, x.name)
        self.last = x.shape.rank - 1
        (self.vo, self.vs), (self.io, self.is_) = output_buffers(inst)
        self.largest = largest

    def at(self, pos: ir.Value) -> list:
        """The row's multi-index with `pos` in the last dimension."""
        index = list(self.row)
        index[self.last] = pos
        return index

    def key_of(self, value: ir.Value) -> ir.Value:
        """The order key of an element value."""
        return order_key(self.b, value, self.pt)

    def load(self, pos: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        """(value, key, i64 index) of heap entry `pos`."""
        v = self.k.read(self.vo, self.at(pos), self.vs)
        i = self.b.sext(self.k.read(self.io, self.at(pos), self.is_), lu.I64)
        return v, self.key_of(v), i

    def store(self, pos: ir.Value, value: ir.Value, index: ir.Value) -> None:
        """Heap entry `pos` := (value, index)."""
        self.k.write(self.vo, self.at(pos), value, self.vs)
        self.k.write(self.io, self.at(pos), self.b.trunc(index, lu.I32), self.is_)

    def worse(self, ka: ir.Value, ia: ir.Value, kb: ir.Value, ib: ir.Value) -> ir.Value:
        """Whether entry a comes after entry b in the output order (a is worse)."""
        b = self.b
        strictly = b.icmp_signed("<" if self.largest else ">", ka, kb)
        return b.or_(strictly, b.and_(b.icmp_signed("==", ka, kb), b.icmp_signed(">", ia, ib)))

    def sift_up(self, pos: ir.Value, value: ir.Value, key: ir.Value, index: ir.Value) -> None:
        """Insert (value, index) at the free position `pos` and restore the heap above it."""
        b = self.b
        with b.goto_entry_block():
            slot = b.alloca(lu.I64)
        b.store(pos, slot)
        with _while(b, "up") as (head, done):
            j = b.load(slot)
            body = b.append_basic_block("up.body")
            b.cbranch(b.icmp_signed(">", j, i64(0)), body, done)
            b.position_at_end(body)
            parent = b.sdiv(b.sub(j, i64(1)), i64(2))
            pv, pk, pi = self.load(parent)
            move = b.append_basic_block("up.move")
            b.cbranch(self.worse(key, index, pk, pi), move, done)
            b.position_at_end(move)
            self.store(j, pv, pi)
            b.store(parent, slot)
            b.branch(head)
        self.store(b.load(slot), value, index)

    def sift_down(self, size: ir.Value, value: ir.Value, key: ir.Value, index: ir.Value
                  ) -> None:
        """Put (value, index) at the root of the heap of `size` entries and sift it down."""
        b = self.b
        with b.goto_entry_block():
            slot = b.alloca(lu.I64)
        b.store(i64(0), slot)
        with _while(b, "down") as (head, done):
            j = b.load(slot)
            left = b.add(b.mul(j, i64(2)), i64(1))
            body = b.append_basic_block("down.body")
            b.cbranch(b.icmp_signed("<", left, size), body, done)
            b.position_at_end(body)
            right = b.add(left, i64(1))
            has_right = b.icmp_signed("<", right, size)
            lv, lk, li = self.load(left)
            rv, rk, ri = self.load(b.select(has_right, right, left))
            take_r = b.and_(has_right, self.worse(rk, ri, lk, li))
            cv, ck = b.select(take_r, rv, lv), b.select(take_r, rk, lk)
            ci, child = b.select(take_r, ri, li), b.select(take_r, right, left)
            move = b.append_basic_block("down.move")
            b.cbranch(self.worse(ck, ci, key, index), move, done)
            b.position_at_end(move)
            self.store(j, cv, ci)
            b.store(child, slot)
            b.branch(head)
        self.store(b.load(slot), value, index)


def emit_topk(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """topk(x), k, largest -> (values, s32 indices) over the last dimension (module doc);
    also XLA CPU's `TopK` custom call (largest)."""
    x = inst.operands[0]
    pt = element_type(x.shape, x.name)
    largest = bool(inst.attrs.get("largest", True)) if inst.opcode is Opcode.TOPK else True
    kk = int(inst.attrs.get("k", inst.shape.tuple_shapes[0].dims[-1]))  # type: ignore[index]
    last = x.shape.rank - 1
    n = x.shape.dims[last]
    row_dims = list(range(last))
    split = split_of(x.shape, row_dims) if row_dims else 0
    k = em.kernel(ctx, inst.name, output_buffers(inst) + operand_buffers(inst), split=split)
    b = k.b
    if kk == 0:
        k.finish()
        return
    with b.goto_entry_block():
        root_key = b.alloca(key_type(pt))
    better = ">" if largest else "<"
    with loop_over(b, x.shape, "row", dims=row_dims, outer=k.outer) as row:
        heap = _RowHeap(k, inst, row, largest)
        # the first k elements fill the heap
        with lu.for_range(b, kk, name="fill") as c:
            v = k.read(x, heap.at(c))
            heap.sift_up(c, v, heap.key_of(v), c)
        b.store(heap.load(i64(0))[1], root_key)
        # every other element is compared with the root (the worst kept) once
        if n > kk:
            with lu.for_range(b, n, start=kk, name="scan") as c:
                v = k.read(x, heap.at(c))
                key = heap.key_of(v)
                with b.if_then(b.icmp_signed(better, key, b.load(root_key)), likely=False):
                    heap.sift_down(i64(kk), v, key, c)
                    b.store(heap.load(i64(0))[1], root_key)
        # heap sort: the worst left goes to the end, best first in the output
        with lu.for_range(b, kk - 1, name="hsort") as t:
            end = b.sub(i64(kk - 1), t)
            rv, rk_, ri = heap.load(i64(0))
            ev, ek, ei = heap.load(end)
            heap.sift_down(end, ev, ek, ei)
            heap.store(end, rv, ri)
            del rk_
    k.finish()
