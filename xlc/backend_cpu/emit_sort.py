"""Sort and top-k (simple, correct, allocation-free kernels).

* sort: the operands are copied into the output buffers (unless already there), then every
  1-D line along the sort dimension is insertion-sorted in place with the comparator
  computation (a scalar function); swapping only on `less(x[j], x[j-1])` makes it stable.
  O(n^2) per line: fine for the short lines seen so far; a merge sort is future work.
* topk: for each row, k selection passes; pass t picks the best element that comes strictly
  after the previous pick in the order (value by TOTALORDER descending for largest=true,
  ascending otherwise; ties by lower index), so no scratch memory is needed. O(k n) per row.
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.backend_cpu.emit_loops import operand_buffers, output_buffers
from xlc.backend_cpu.emitter import (
    CpuEmitter,
    FnCtx,
    Kernel,
    element_type,
    i64,
    loop_over,
    register,
)
from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import multi_to_linear
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType

log = logging.getLogger("xlc.backend_cpu")


def _with(index: list, d: int, v: ir.Value) -> list:
    out = list(index)
    out[d] = v
    return out


@register(Opcode.SORT)
def emit_sort(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """Stable in-place insertion sort of every line along `dimensions` (see module doc)."""
    outs = output_buffers(inst)
    ops = list(inst.operands)
    k = em.kernel(ctx, inst.name, outs + operand_buffers(inst))
    b = k.b
    for op, (o, sidx) in zip(ops, outs):
        if em.slice(op) != em.slice(o, sidx):
            with loop_over(b, op.shape, "cp") as idx:
                k.write(o, idx, k.read(op, idx), sidx)
    shape = ops[0].shape
    dims = inst.attrs.get("dimensions") or (shape.rank - 1,)
    d = int(dims[0])
    n = shape.dims[d]
    less_fn = em.scalar_function(inst.called[0])
    pts = [element_type(op.shape, op.name) for op in ops]
    others = [e for e in range(shape.rank) if e != d]
    with loop_over(b, shape, "s", dims=others) as line:
        with lu.for_range(b, n, start=1, name="ins") as i:
            fn = b.function
            head = fn.append_basic_block("sort.head")
            body = fn.append_basic_block("sort.swap")
            done = fn.append_basic_block("sort.done")
            pre = b.basic_block
            b.branch(head)
            b.position_at_end(head)
            j = b.phi(lu.I64, name="j")
            j.add_incoming(i, pre)
            jm1 = b.sub(j, i64(1))
            offs = [multi_to_linear(b, _with(line, d, j), o.shape.subshape(s) if s else o.shape)
                    for o, s in outs]
            offs_m = [multi_to_linear(b, _with(line, d, jm1),
                                      o.shape.subshape(s) if s else o.shape) for o, s in outs]
            cur = [lu.load_element(b, k.ptr(o, s), off, pt)
                   for (o, s), off, pt in zip(outs, offs, pts)]
            prev = [lu.load_element(b, k.ptr(o, s), off, pt)
                    for (o, s), off, pt in zip(outs, offs_m, pts)]
            args = []
            for c, p in zip(cur, prev):
                args += [c, p]
            less = b.call(less_fn, args)
            positive = b.icmp_signed(">", j, i64(0))
            b.cbranch(b.and_(positive, less), body, done)
            b.position_at_end(body)
            for (o, s), off, offm, c, p, pt in zip(outs, offs, offs_m, cur, prev, pts):
                lu.store_element(b, p, k.ptr(o, s), off, pt)
                lu.store_element(b, c, k.ptr(o, s), offm, pt)
            j.add_incoming(jm1, body)
            b.cbranch(b.icmp_signed(">", jm1, i64(0)), head, done)
            b.position_at_end(done)
    k.finish()


def _order_key(b: ir.IRBuilder, v: ir.Value, pt: PrimitiveType) -> ir.Value:
    """A signed integer that orders like TOTALORDER (floats) or the value (signed ints)."""
    if pt.is_float:
        from xlc.codegen.scalar_types import to_compute

        f = to_compute(b, v, pt) if pt in (PrimitiveType.F16, PrimitiveType.BF16) else v
        ity = ir.IntType(lu.float_bits(f.type))
        bits = b.bitcast(f, ity)
        mask = b.lshr(b.ashr(bits, ir.Constant(ity, ity.width - 1)), ir.Constant(ity, 1))
        return b.xor(bits, mask)
    if pt.is_signed_int:
        return v
    raise UnsupportedOpError(f"CPU backend: topk on {pt.text} is unsupported")


@register(Opcode.TOPK)
def emit_topk(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """k selection passes per row over the last dimension (see module doc)."""
    x = inst.operands[0]
    pt = element_type(x.shape, x.name)
    largest = bool(inst.attrs.get("largest", True))
    outs = output_buffers(inst)
    kk = int(inst.attrs.get("k", inst.shape.tuple_shapes[0].dims[-1]))  # type: ignore[index]
    k = em.kernel(ctx, inst.name, outs + operand_buffers(inst))
    b = k.b
    last = x.shape.rank - 1
    n = x.shape.dims[last]
    kty = ir.IntType(max(8, pt.bit_width if not pt.is_float else
                         (32 if pt.byte_size <= 4 else 64)))
    with b.goto_entry_block():
        prev_key = b.alloca(kty)
        prev_idx = b.alloca(lu.I64)
        best_key = b.alloca(kty)
        best_idx = b.alloca(lu.I64)
    worst = (-(1 << (kty.width - 1))) if largest else ((1 << (kty.width - 1)) - 1)
    better = ">" if largest else "<"
    with loop_over(b, x.shape, "row", dims=list(range(last))) as row:
        b.store(ir.Constant(kty, 0), prev_key)
        b.store(i64(-1), prev_idx)
        with lu.for_range(b, kk, name="t") as t:
            b.store(ir.Constant(kty, worst), best_key)
            b.store(i64(-1), best_idx)
            with lu.for_range(b, n, name="c") as c:
                key = _order_key(b, k.read(x, _with(row, last, c)), pt)
                pk, pi = b.load(prev_key), b.load(prev_idx)
                first = b.icmp_signed("<", pi, i64(0))
                after = b.or_(b.icmp_signed(_flip(better), key, pk),
                              b.and_(b.icmp_signed("==", key, pk), b.icmp_signed(">", c, pi)))
                ok = b.or_(first, after)
                bk, bi = b.load(best_key), b.load(best_idx)
                wins = b.or_(b.icmp_signed("<", bi, i64(0)), b.icmp_signed(better, key, bk))
                take = b.and_(ok, wins)
                b.store(b.select(take, key, bk), best_key)
                b.store(b.select(take, c, bi), best_idx)
            bi = b.load(best_idx)
            b.store(b.load(best_key), prev_key)
            b.store(bi, prev_idx)
            (vo, vs), (io, is_) = outs
            k.write(vo, _with(row, last, t), k.read(x, _with(row, last, bi)), vs)
            k.write(io, _with(row, last, t), b.trunc(bi, lu.I32), is_)
    k.finish()


def _flip(op: str) -> str:
    return {">": "<", "<": ">"}[op]
