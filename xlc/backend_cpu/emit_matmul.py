"""Register-blocked matmul kernel for f32/f64 dots (C[m, n] = sum_k A[m, k] B[k, n]).

Requirements (checked by `matmul_applicable`): one lhs free dim m, one rhs free dim n, one
contracting dim k (batch dims allowed), B and C contiguous along n, N >= one tile width.
Structure (BLIS-like, shapes are static so every bound is a constant):
* loop over n panels of NR = 4 vectors (64 floats with AVX-512), then k blocks of KC;
* the B block (KC x NR) is packed into a 64-byte-aligned stack buffer (removes the 4 KiB
  stride cache-set conflicts of row-major B);
* for every MR = 6 rows of A: a 6 x 4-vector tile of C is loaded (or zeroed on the first k
  block), updated with `llvm.fma` over the KC packed rows (24 vector accumulators kept in
  registers, A elements broadcast), and stored back;
* rows left over (M % 6) use a smaller tile; columns left over (N % NR) use a scalar loop.
"""
from __future__ import annotations

import logging
from typing import Any

from llvmlite import ir

from xlc.backend_cpu.emitter import Kernel, element_type, i64
from xlc.backend_cpu.parallel import PARALLEL_FLOPS, run_parallel
from xlc.codegen import llvm_utils as lu
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType

log = logging.getLogger("xlc.backend_cpu")

MR = 6
NV = 4  # vectors per tile row
KC = 256
MIN_FLOPS = 2 * 96 ** 3
"""Smaller dots use the plain vectorised loop nest (emit_dot): as fast there, and the
register-blocked kernel's code costs ~30 ms of LLVM time per dot."""
MAX_FLOPS = 2 * 512 ** 3
"""Bigger dots go to the packed GEMM (`xlc.backend_cpu.gemm`), which blocks for the caches and
splits over m as well: 1000^3 and 1024^3 run at ~360 GFLOP/s there on the 2-core test VM, vs
~330 here (and 48 GFLOP/s for 1000^3, whose n is no multiple of the tile)."""


def _vw(pt: PrimitiveType) -> int:
    return 64 // pt.byte_size


def matmul_applicable(inst: HloInstruction, plan: Any, threads: int = 1) -> bool:
    """Whether `emit_matmul` handles this dot, and is the better of the two kernels: n a
    multiple of the tile width (a remainder would run in a slow scalar loop), MIN_FLOPS <=
    flops <= MAX_FLOPS, and enough n panels to give every thread one when it runs threaded
    (it splits over n only). Measured against the packed GEMM on the 2-core test VM: faster
    for 128^3 .. 512^3 and flat shapes like 30x512x2048 (e.g. 256^3: 84 vs 100 us)."""
    pt = inst.shape.element_type
    if pt not in (PrimitiveType.F32, PrimitiveType.F64):
        return False
    if any(op.shape.element_type is not pt for op in inst.operands):
        return False
    p = plan
    if not (len(p.msizes) == 1 and len(p.nsizes) == 1 and len(p.ksizes) == 1):
        return False
    n_rhs, n_out = p.rs[p.rf[0]], p.os[p.on[0]]
    flops = 2 * p.msizes[0] * p.nsizes[0] * p.ksizes[0] * _prod(p.bsizes)
    nr = NV * _vw(pt)
    panels = p.nsizes[0] // nr
    return n_rhs == 1 and n_out == 1 and panels >= 1 and p.nsizes[0] % nr == 0 \
        and MIN_FLOPS <= flops <= MAX_FLOPS and (flops < PARALLEL_FLOPS or panels >= threads)


def emit_matmul(k: Kernel, inst: HloInstruction, plan: Any, threads: int = 1) -> None:
    """Emit the blocked kernel into `k` (which must have inst and its operands). With
    `threads` > 1 and enough work, the n panels are split over that many threads (the
    thread pool; the calling thread takes the first share)."""
    p = plan
    b = k.b
    pt = element_type(inst.shape, inst.name)
    nr = NV * _vw(pt)
    lhs, rhs = inst.operands
    (msize,), (nsize,), (ksize,) = p.msizes, p.nsizes, p.ksizes
    part = _part_function(k, inst, p, pt)
    panels = nsize // nr
    a_ptr, b_ptr, c_ptr = k.ptr(lhs), k.ptr(rhs), k.ptr(inst)
    flops = 2 * msize * nsize * ksize * max(1, _prod(p.bsizes))
    nthreads = min(threads, panels) if flops >= PARALLEL_FLOPS else 1
    if nthreads > 1:
        run_parallel(b, part, [a_ptr, b_ptr, c_ptr], panels, nthreads)
    else:
        b.call(part, [a_ptr, b_ptr, c_ptr, i64(0), i64(panels)])
    if panels * nr < nsize:
        ety = lu.value_type(pt)
        lm, lk = p.ls[p.lf[0]], p.ls[p.lc[0]]
        rk, om = p.rs[p.rc[0]], p.os[p.om[0]]
        with lu.for_nest(b, p.bsizes, "tb") as bi:
            a_base = _gep(b, a_ptr, _boff(b, bi, p.lb, p.ls), ety)
            b_base = _gep(b, b_ptr, _boff(b, bi, p.rb, p.rs), ety)
            c_base = _gep(b, c_ptr, _boff(b, bi, p.ob, p.os), ety)
            _scalar_tail(b, a_base, b_base, c_base, panels * nr, msize, nsize, ksize,
                         lm, lk, rk, om, pt)


def _prod(xs: list[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def _part_function(k: Kernel, inst: HloInstruction, p: Any, pt: PrimitiveType
                   ) -> ir.Function:
    """`void part(ptr a, ptr b, ptr c, i64 first_panel, i64 end_panel)`: the kernel over n
    panels [first, end) of every batch."""
    module = k.fn.module
    fn = ir.Function(module, ir.FunctionType(lu.VOID, [lu.PTR] * 3 + [lu.I64, lu.I64]),
                     name=module.get_unique_name(k.fn.name + ".part"))
    fn.linkage = "internal"
    fn.attributes.add("noinline")  # called by the worker, inline share and fallback
    for a in fn.args[:3]:
        a.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ety = lu.value_type(pt)
    vw = _vw(pt)
    nr = NV * vw
    vty = ir.VectorType(ety, vw)
    (msize,), (ksize,) = p.msizes, p.ksizes
    kc = min(KC, ksize)
    lm, lk = p.ls[p.lf[0]], p.ls[p.lc[0]]
    rk = p.rs[p.rc[0]]
    om = p.os[p.om[0]]
    a_ptr, b_ptr, c_ptr, first_panel, end_panel = fn.args
    raw = b.alloca(ir.ArrayType(ety, kc * nr))
    raw.align = 64
    raw.type = lu.PTR  # an opaque pointer for llvmlite's type checks (IR text: `ptr`)
    pack = raw
    accs = [[b.alloca(vty) for _ in range(NV)] for _ in range(MR)]
    with lu.for_nest(b, p.bsizes, "b") as bi:
        a_base = _gep(b, a_ptr, _boff(b, bi, p.lb, p.ls), ety)
        b_base = _gep(b, b_ptr, _boff(b, bi, p.rb, p.rs), ety)
        c_base = _gep(b, c_ptr, _boff(b, bi, p.ob, p.os), ety)
        with lu.for_range(b, b.mul(end_panel, i64(nr)), start=b.mul(first_panel, i64(nr)),
                          step=nr, name="n0") as n0, \
                lu.for_range(b, i64(ksize), step=kc, name="k0") as k0:
            klen = b.select(b.icmp_signed("<", b.add(k0, i64(kc)), i64(ksize)), i64(kc),
                            b.sub(i64(ksize), k0))
            # pack B[k0:k0+klen, n0:n0+nr] -> pack[kk*nr + j]
            with lu.for_range(b, klen, name="pk") as kk:
                src = b.add(b.mul(b.add(k0, kk), i64(rk)), n0)
                for v in range(NV):
                    val = lu.load_vector(b, b_base, b.add(src, i64(v * vw)), pt, vw)
                    dst = b.add(b.mul(kk, i64(nr)), i64(v * vw))
                    lu.store_vector(b, val, pack, dst, pt, align=64)
            first = b.icmp_signed("==", k0, i64(0))
            m_full = msize // MR * MR
            ctx = (a_base, c_base, pack, accs, k0, n0, klen, first, lm, lk, om, nr, vw, vty, pt)
            with lu.for_range(b, i64(m_full), step=MR, name="m0") as m0:
                _tile(b, m0, MR, ctx)
            if msize % MR:
                _tile(b, i64(m_full), msize % MR, ctx)
    b.ret_void()
    return fn


def _tile(b: ir.IRBuilder, m0: ir.Value, rows: int, ctx: tuple) -> None:
    a_base, c_base, pack, accs, k0, n0, klen, first, lm, lk, om, nr, vw, vty, pt = ctx
    ety = vty.element
    zero = ir.Constant(vty, [lu.const(ety, 0)] * vw)
    for i in range(rows):
        row = b.add(b.mul(b.add(m0, i64(i)), i64(om)), n0)
        for v in range(NV):
            old = lu.load_vector(b, c_base, b.add(row, i64(v * vw)), pt, vw)
            b.store(b.select(first, zero, old), accs[i][v])
    with lu.for_range(b, klen, name="kk") as kk:
        pk = b.mul(kk, i64(nr))
        bv = [lu.load_vector(b, pack, b.add(pk, i64(v * vw)), pt, vw,
                             align=64) for v in range(NV)]
        kidx = b.mul(b.add(k0, kk), i64(lk))
        for i in range(rows):
            aoff = b.add(b.mul(b.add(m0, i64(i)), i64(lm)), kidx)
            a = lu.splat(b, lu.load_element(b, a_base, aoff, pt), vw)
            for v in range(NV):
                acc = b.load(accs[i][v])
                b.store(lu.intrinsic(b, "llvm.fma", [a, bv[v], acc]), accs[i][v])
    for i in range(rows):
        row = b.add(b.mul(b.add(m0, i64(i)), i64(om)), n0)
        for v in range(NV):
            lu.store_vector(b, b.load(accs[i][v]), c_base, b.add(row, i64(v * vw)), pt)


def _scalar_tail(b: ir.IRBuilder, a_base: ir.Value, b_base: ir.Value, c_base: ir.Value,
                 n_from: int, msize: int, nsize: int, ksize: int, lm: int, lk: int, rk: int,
                 om: int, pt: PrimitiveType) -> None:
    ety = lu.value_type(pt)
    with lu.for_range(b, msize, name="tm") as m, \
            lu.for_range(b, i64(nsize), start=i64(n_from), name="tn") as n:
        o = b.add(b.mul(m, i64(om)), n)
        lu.store_element(b, lu.const(ety, 0), c_base, o, pt)
        with lu.for_range(b, ksize, name="tk") as kk:
            a = lu.load_element(b, a_base, b.add(b.mul(m, i64(lm)), b.mul(kk, i64(lk))), pt)
            y = lu.load_element(b, b_base, b.add(b.mul(kk, i64(rk)), n), pt)
            acc = lu.load_element(b, c_base, o, pt)
            lu.store_element(b, lu.intrinsic(b, "llvm.fma", [a, y, acc]), c_base, o, pt)


def _boff(b: ir.IRBuilder, bi: list, dims: list, strides: list) -> ir.Value:
    acc: ir.Value = i64(0)
    for v, d in zip(bi, dims):
        acc = b.add(acc, b.mul(v, i64(strides[d])))
    return acc


def _gep(b: ir.IRBuilder, base: ir.Value, off: ir.Value, ety: ir.Type) -> ir.Value:
    return b.gep(base, [off], inbounds=True, source_etype=ety)
