"""Sort and top-k.

* sort: lines longer than INSERTION_MAX whose comparator orders by one totally ordered key
  (`emit_radix_sort.sort_key`: JAX's and xlc's own float/int comparators) are radix-sorted,
  lines split over the threads (`emit_radix_sort.py`); a single 32/64-bit operand ordered by
  its own value goes through the vectorised key sort first (`emit_vsort.py`, AVX-512 hosts).
  Otherwise the operands are copied into the output buffers (unless already there), then
  every 1-D line along the sort dimension is sorted in place with the comparator computation
  (a scalar function), stably: lines of up to INSERTION_MAX elements by insertion sort
  (swapping only on `less(x[j], x[j-1])`), longer lines by a bottom-up merge sort of a
  permutation (O(n log n)), which is then applied to every output. Sorts with lines longer
  than INSERTION_MAX come as `__xlc$sort` custom-calls (`sort_workspace.py`) whose last output
  is the radix or merge sort's scratch, so no kernel allocates memory.
* topk: one pass per row keeping a k-element heap (`emit_topk.py`).
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from llvmlite import ir

from xlc.backend_cpu.emit_gemm import emit_gemm_call
from xlc.backend_cpu.emit_loops import operand_buffers, output_buffers
from xlc.backend_cpu.emit_radix_sort import emit_radix_sort, radix_scratch_bytes, sort_key
from xlc.backend_cpu.emit_topk import emit_topk
from xlc.backend_cpu.emit_vsort import emit_vsort_line, vsort_applies
from xlc.backend_cpu.emitter import (
    CpuEmitter,
    FnCtx,
    Kernel,
    element_type,
    i64,
    loop_over,
    slices_overlap,
    split_of,
)
from xlc.backend_cpu.parallel import share_count, share_of
from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import multi_to_linear
from xlc.errors import LoweringError, UnsupportedOpError
from xlc.hlo.gemm_call import GEMM_TARGET
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType, ShapeIndex
from xlc.hlo.sort_call import SORT_TARGET, sort_call_sort

log = logging.getLogger("xlc.backend_cpu")


def _with(index: list, d: int, v: ir.Value) -> list:
    out = list(index)
    out[d] = v
    return out


def emit_sort(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """A sort instruction: lines of up to INSERTION_MAX elements (longer ones come as
    `__xlc$sort` custom-calls with their workspace, `emit_sort_call`)."""
    _emit_sort(em, ctx, inst, output_buffers(inst), None)


def emit_sort_call(em: CpuEmitter, ctx: FnCtx, call: HloInstruction) -> None:
    """A `__xlc$sort` custom-call (`xlc/hlo/sort_call.py`): the sort it stands for, with the
    radix or merge sort's scratch in its last output."""
    n = len(call.operands)
    _emit_sort(em, ctx, sort_call_sort(call), [(call, (i,)) for i in range(n)], (call, (n,)))


Buffer = tuple[HloInstruction, ShapeIndex]


def _emit_sort(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction, outs: list[Buffer],
               workspace: Buffer | None) -> None:
    """Sort every line along `inst`'s dimension into `outs` (see module doc); `inst` is the
    sort (possibly detached, standing for a custom-call whose buffers `outs` and `workspace`
    are)."""
    ops = list(inst.operands)
    if workspace is not None and _emit_radix(em, ctx, inst, outs, workspace):
        return
    extra = [workspace] if workspace is not None else []
    k = em.kernel(ctx, inst.name, outs + operand_buffers(inst) + extra)
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
    if n > INSERTION_MAX:
        if workspace is None:
            raise LoweringError(
                f"CPU backend: sort {inst.name} has lines of {n} > {INSERTION_MAX} elements "
                "and no workspace (the CPU pipeline's sort-workspace pass gives it one)")
        held, needed = em.slice(*workspace).size, merge_scratch_bytes(inst)
        if held < needed:
            raise LoweringError(f"CPU backend: the workspace of sort {inst.name} holds {held} "
                                f"bytes, its merge sort needs {needed}")
        _merge_sort(k, outs, pts, shape, d, n, less_fn, k.ptr(*workspace))
        k.finish()
        return
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


INSERTION_MAX = 48
"""Lines up to this length are insertion-sorted; longer ones radix- or merge-sorted."""


def radix_slots(inst: HloInstruction, threads: int) -> int:
    """How many lines a radix sort of `inst` (a sort) may sort at the same time on `threads`
    threads: the shares of its threaded line loop (`parallel.share_count`), 1 unsplit."""
    shape = inst.operands[0].shape
    d = _sort_dim(inst)
    others = [e for e in range(shape.rank) if e != d]
    split = split_of(shape, others) if others else 0
    return share_count(split, min(threads, split)) if split > 1 and threads > 1 else 1


def _sort_dim(inst: HloInstruction) -> int:
    shape = inst.operands[0].shape
    dims = inst.attrs.get("dimensions") or (shape.rank - 1,)
    return int(dims[0])


def _emit_radix(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction, outs: list[Buffer],
                workspace: Buffer) -> bool:
    """Emit `inst` as a radix sort (`emit_radix_sort.py`) when its comparator orders by one
    totally ordered key and its lines are long; returns False (nothing emitted) otherwise.
    Lines are split over the threads, each share sorting through its own line of scratch in
    `workspace`; every output buffer must be its operand's buffer or overlap no operand (then
    each line is read from the operands and written once)."""
    ops = list(inst.operands)
    shape = ops[0].shape
    d = _sort_dim(inst)
    n = shape.dims[d]
    spec = sort_key(inst.called[0]) if INSERTION_MAX < n < (1 << 31) else None
    if spec is None:
        return False
    in_place = []
    for op, (o, sidx) in zip(ops, outs):
        out_sl = em.slice(o, sidx)
        same = em.slice(op) == out_sl
        if not same and any(slices_overlap(out_sl, em.slice(x)) for x in ops):
            return False
        in_place.append(same)
    pts = [element_type(op.shape, op.name) for op in ops]
    per_line = radix_scratch_bytes(spec, pts, n)
    slots, threads = radix_slots(inst, em.threads), em.threads
    held = em.slice(*workspace).size
    if held < slots * per_line:
        # a workspace shrunk under a memory limit (SortWorkspaceShrink): one line at a time
        # on one thread, or (less than a line) the merge sort
        if held < per_line:
            return False
        slots, threads = 1, 1
    others = [e for e in range(shape.rank) if e != d]
    split = split_of(shape, others) if others else 0
    k = em.kernel(ctx, inst.name, outs + operand_buffers(inst) + [workspace], split=split,
                  threads=threads)
    b = k.b
    slot = share_of(b, k.outer[0], split, slots) if k.outer is not None and slots > 1 \
        else i64(0)
    scratch = b.gep(k.ptr(*workspace), [b.mul(slot, i64(per_line))], inbounds=True,
                    source_etype=lu.I8)
    comp, srcs = inst.called[0], [(op, ()) for op in ops]
    with loop_over(b, shape, "rs", dims=others, outer=k.outer) as line:
        def radix(line: list = line) -> None:
            emit_radix_sort(k, comp, spec, srcs, outs, pts, in_place, d, n, line, scratch)

        if vsort_applies(spec, pts):
            # the keys go where the radix sort keeps its first key array
            emit_vsort_line(k, comp, spec, srcs[0], outs[0], pts[0], d, line, n, scratch,
                            threads if slots == 1 else 1, radix)
        else:
            radix()
    k.finish()
    return True


def merge_scratch_bytes(inst: HloInstruction) -> int:
    """Scratch bytes of the merge sort of `inst` (a sort): two index arrays and one line of
    values (the kernel sorts one line at a time)."""
    n = inst.operands[0].shape.dims[_sort_dim(inst)]
    width = max(element_type(op.shape, op.name).byte_size for op in inst.operands)
    return 2 * n * 8 + -(-n * max(width, 1) // 64) * 64


def _merge_sort(k: Kernel, outs: list, pts: list[PrimitiveType], shape: object, d: int, n: int,
                less_fn: ir.Function, scratch: ir.Value) -> None:
    """Stable bottom-up merge sort of every line: a permutation is sorted with the comparator
    (passes of width 1, 2, 4, ... ping-ponging between two index arrays in `scratch`, which
    holds `merge_scratch_bytes`), then applied to every output."""
    b = k.b
    bufs = [scratch, b.gep(scratch, [i64(n * 8)], inbounds=True, source_etype=lu.I8)]
    vals = b.gep(scratch, [i64(2 * n * 8)], inbounds=True, source_etype=lu.I8)
    with b.goto_entry_block():
        i_slot = b.alloca(lu.I64)
        j_slot = b.alloca(lu.I64)
        lo_slot = b.alloca(lu.I64)
        w_slot = b.alloca(lu.I64)
        src_slot = b.alloca(lu.PTR)
        dst_slot = b.alloca(lu.PTR)
    others = [e for e in range(shape.rank) if e != d]  # type: ignore[attr-defined]

    def offsets(line: list, pos: ir.Value) -> list[ir.Value]:
        return [multi_to_linear(b, _with(line, d, pos), o.shape.subshape(s) if s else o.shape)
                for o, s in outs]

    def load_all(line: list, pos: ir.Value) -> list[ir.Value]:
        return [lu.load_element(b, k.ptr(o, s), off, pt)
                for (o, s), off, pt in zip(outs, offsets(line, pos), pts)]

    with loop_over(b, shape, "ms", dims=others) as line:  # type: ignore[arg-type]
        with lu.for_range(b, n, name="init") as t:
            lu.store_element(b, t, bufs[0], t, PrimitiveType.S64)
        # passes of width 1, 2, 4, ... < n as a runtime loop (one copy of the merge code)
        b.store(bufs[0], src_slot)
        b.store(bufs[1], dst_slot)
        b.store(i64(1), w_slot)
        fn = b.function
        head = fn.append_basic_block("msort.pass")
        body = fn.append_basic_block("msort.body")
        done = fn.append_basic_block("msort.done")
        b.branch(head)
        b.position_at_end(head)
        w = b.load(w_slot)
        b.cbranch(b.icmp_signed("<", w, i64(n)), body, done)
        b.position_at_end(body)
        src, dst = b.load(src_slot, typ=lu.PTR), b.load(dst_slot, typ=lu.PTR)
        w2 = b.mul(w, i64(2))
        _merge_pass(b, src, dst, w, w2, n, i_slot, j_slot, lo_slot, line, load_all, less_fn)
        b.store(dst, src_slot)
        b.store(src, dst_slot)
        b.store(w2, w_slot)
        b.branch(head)
        b.position_at_end(done)
        perm = b.load(src_slot, typ=lu.PTR)
        for (o, s), pt in zip(outs, pts):
            oshape = o.shape.subshape(s) if s else o.shape
            with lu.for_range(b, n, name="gather") as t:
                src_pos = lu.load_element(b, perm, t, PrimitiveType.S64)
                off = multi_to_linear(b, _with(line, d, src_pos), oshape)
                lu.store_element(b, lu.load_element(b, k.ptr(o, s), off, pt), vals, t, pt)
            with lu.for_range(b, n, name="scatter") as t:
                off = multi_to_linear(b, _with(line, d, t), oshape)
                lu.store_element(b, lu.load_element(b, vals, t, pt), k.ptr(o, s), off, pt)


def _merge_pass(b: ir.IRBuilder, src: ir.Value, dst: ir.Value, w: ir.Value, w2: ir.Value,
                n: int, i_slot: ir.Value, j_slot: ir.Value, lo_slot: ir.Value, line: list,
                load_all: Callable[[list, ir.Value], list[ir.Value]], less_fn: ir.Function
                ) -> None:
    """One merge pass: runs of width `w` in `src` (permutation indices) merged into `dst`."""
    fn = b.function
    head = fn.append_basic_block("merge.run")
    body = fn.append_basic_block("merge.body")
    done = fn.append_basic_block("merge.done")
    b.store(i64(0), lo_slot)
    b.branch(head)
    b.position_at_end(head)
    lo = b.load(lo_slot)
    b.cbranch(b.icmp_signed("<", lo, i64(n)), body, done)
    b.position_at_end(body)
    mid = _smin(b, b.add(lo, w), n)
    hi = _smin(b, b.add(lo, w2), n)
    b.store(lo, i_slot)
    b.store(mid, j_slot)
    with lu.for_range(b, hi, start=lo, name="mk") as kk:
        i, j = b.load(i_slot), b.load(j_slot)
        ii = _smin_v(b, i, b.sub(mid, i64(1)))
        jj = _smin_v(b, j, b.sub(hi, i64(1)))
        pi = lu.load_element(b, src, ii, PrimitiveType.S64)
        pj = lu.load_element(b, src, jj, PrimitiveType.S64)
        args = []
        for right, left in zip(load_all(line, pj), load_all(line, pi)):
            args += [right, left]
        less = b.call(less_fn, args)
        left_done = b.icmp_signed(">=", i, mid)
        right_ok = b.icmp_signed("<", j, hi)
        take_right = b.and_(right_ok, b.or_(left_done, less))
        lu.store_element(b, b.select(take_right, pj, pi), dst, kk, PrimitiveType.S64)
        b.store(b.select(take_right, i, b.add(i, i64(1))), i_slot)
        b.store(b.select(take_right, b.add(j, i64(1)), j), j_slot)
    b.store(b.add(lo, w2), lo_slot)
    b.branch(head)
    b.position_at_end(done)


def _smin(b: ir.IRBuilder, v: ir.Value, hi: int) -> ir.Value:
    return b.select(b.icmp_signed("<", v, i64(hi)), v, i64(hi))


def _smin_v(b: ir.IRBuilder, v: ir.Value, hi: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", v, hi), v, hi)


CUSTOM_CALL_TARGETS = {"TopK": emit_topk, GEMM_TARGET: emit_gemm_call,
                       SORT_TARGET: emit_sort_call}
"""custom-call targets the CPU backend implements: XLA CPU's TopK (k largest, s32 indices) and
xlc's own `__xlc$gemm` (a dot on the packed GEMM with its workspace, `gemm_workspace.py`) and
`__xlc$sort` (a sort with its workspace, `sort_workspace.py`)."""


def emit_custom_call(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """Known custom-call targets: xlc's and XLA's own (in code), user targets registered with
    `xlc.ffi` (C functions called directly, Python functions as host calls) and JAX's LAPACK
    targets (host calls, `host_call.py`); any other raises UnsupportedOpError naming it."""
    from xlc.backend_cpu.ffi_cpu import emit_ffi_call
    from xlc.backend_cpu.host_call import emit_host_call
    from xlc.hlo.ffi_registry import lookup
    from xlc.hlo.host_calls import handler_for

    target = str(inst.attrs.get("custom_call_target", ""))
    fn = CUSTOM_CALL_TARGETS.get(target)
    if fn is not None:
        fn(em, ctx, inst)
        return
    user = lookup(target, "cpu")
    if user is not None and user.kind in ("library", "object"):
        emit_ffi_call(em, ctx, inst, user)
        return
    if handler_for(target) is not None:
        emit_host_call(em, ctx, inst)
        return
    raise UnsupportedOpError(
        f"CPU backend cannot compile 'custom-call' target '{target}' ({inst.name}): it is not "
        "registered (xlc.ffi.register) and not one xlc knows")
