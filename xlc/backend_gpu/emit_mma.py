"""Tensor-core GEMM for f16/bf16 dots: `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}`.

Used by emit_gemm for dots whose operands are both f16 or both bf16 (f32, f16 or bf16 result;
accumulation in f32) on sm_80+. A block of 4 warps computes a 64 x 64 output tile, each warp a
32 x 32 quarter as 2 x 4 mma tiles of 16 x 8. Per K step of 16 the block stages lhs[64][16] and
rhs[16][64] in shared memory (raw 16-bit elements, zero outside the matrix), then every lane
assembles its fragments as the PTX ISA lays them out (groupID = lane / 4, t = lane % 4):
  A (16 x 16, row): regs {A[g][2t..2t+1]}, {A[g+8][2t..]}, {A[g][2t+8..]}, {A[g+8][2t+8..]};
  B (16 x 8, col):  regs {B[2t..2t+1][g]}, {B[2t+8..2t+9][g]};
  C/D (16 x 8 f32): D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1];
each register packing two 16-bit values, the first in the low half. The mma itself sits in
one small internal function per element type (`xlc_mma_f16` / `xlc_mma_bf16`, inlined by
LLVM) taking a pointer to its 10 words (4 A regs, 2 B regs, 4 C floats, D written over C), so
it is the single place that holds the inline PTX.
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.backend_gpu import nvptx
from xlc.backend_gpu.emit_gemm import DotPlan, linear_offset
from xlc.backend_gpu.emitter import GpuEmitter, operand_buffers
from xlc.backend_gpu.kernel import GpuKernel, element_type, i32, i64, unflatten
from xlc.backend_gpu.thunks import Thunk
from xlc.codegen import llvm_utils as lu
from xlc.codegen.convert import convert_value
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType

log = logging.getLogger("xlc.backend_gpu")

MMA_TYPES = {PrimitiveType.F16: "f16", PrimitiveType.BF16: "bf16"}
BM = BN = 64
BK = 16
THREADS = 128
MI, NI = 2, 4          # mma tiles per warp along M (16 rows each) and N (8 columns each)


def mma_applicable(inst: HloInstruction, plan: DotPlan, sm: int) -> bool:
    """Whether dot `inst` can use the tensor-core kernel."""
    lhs, rhs = inst.operands
    lpt, rpt = lhs.shape.element_type, rhs.shape.element_type
    return (sm >= 80 and lpt is rpt and lpt in MMA_TYPES
            and inst.shape.element_type in (PrimitiveType.F32, PrimitiveType.F16,
                                            PrimitiveType.BF16)
            and plan.M >= 16 and plan.N >= 8 and plan.K >= 16 and plan.B <= 65535)


MMA_SHAPES = {"f16": "m16n8k16", "bf16": "m16n8k16", "tf32": "m16n8k8"}
"""The mma shape of each operand type (the fragment words and slots are the same: 4 A words,
2 B words, 4 f32 accumulators; emit_mma_pipe uses tf32)."""


def mma_function(module: ir.Module, kind: str) -> ir.Function:
    """`void xlc_mma_<kind>(ptr frag)`: D = A * B + C on the words at `frag` (see above). For
    tf32 the A and B words are f32 values, rounded to TF32 (`cvt.rna`) first."""
    name = f"xlc_mma_{kind}"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(lu.VOID, [lu.PTR]), name=name)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    frag = fn.args[0]
    words = [b.load(b.gep(frag, [i32(q)], source_etype=lu.I32), typ=lu.I32) for q in range(6)]
    if kind == "tf32":
        cvt = ir.InlineAsm(ir.FunctionType(lu.I32, [lu.F32]), "cvt.rna.tf32.f32 $0, $1;",
                           "=r,f", side_effect=False)
        words = [b.call(cvt, [b.bitcast(w, lu.F32)]) for w in words]
    cs = [b.load(b.gep(frag, [i32(6 + q)], source_etype=lu.F32), typ=lu.F32) for q in range(4)]
    res_ty = ir.LiteralStructType([lu.F32] * 4)
    asm = ir.InlineAsm(
        ir.FunctionType(res_ty, [lu.I32] * 6 + [lu.F32] * 4),
        f"mma.sync.aligned.{MMA_SHAPES[kind]}.row.col.f32.{kind}.{kind}.f32 "
        "{$0,$1,$2,$3}, {$4,$5,$6,$7}, {$8,$9}, {$10,$11,$12,$13};",
        "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f", side_effect=False)
    res = b.call(asm, words + cs)
    for q in range(4):
        b.store(b.extract_value(res, q), b.gep(frag, [i32(6 + q)], source_etype=lu.F32))
    b.ret_void()
    return fn


def emit_dot_mma(em: GpuEmitter, inst: HloInstruction, plan: DotPlan) -> list[Thunk]:
    """The tensor-core GEMM kernel of dot `inst` (see the module docstring)."""
    lhs, rhs = inst.operands
    pt = element_type(lhs.shape, lhs.name)
    out_pt = element_type(inst.shape, inst.name)
    kind = MMA_TYPES[pt]
    buf = plan.out.buffer
    k = em.kernel(buf, [(buf, ())], operand_buffers(buf), max_threads=THREADS)
    b = k.b
    mma = mma_function(b.module, kind)
    a_sh = nvptx.shared_array(b.module, "mma_a", lu.I16, BM * BK)   # [m][k]
    b_sh = nvptx.shared_array(b.module, "mma_b", lu.I16, BK * BN)   # [k][n]
    k.launch((-(-plan.N // BN), -(-plan.M // BM), max(1, plan.B)), (THREADS, 1, 1),
             shared_bytes=2 * (BM * BK + BK * BN))
    t = b.zext(nvptx.thread_idx(b), lu.I64)
    lane, warp = b.and_(t, i64(31)), b.lshr(t, i64(5))
    wm, wn = b.lshr(warp, i64(1)), b.and_(warp, i64(1))
    g, tq = b.lshr(lane, i64(2)), b.and_(lane, i64(3))
    n0 = b.mul(b.zext(nvptx.block_idx(b, "x"), lu.I64), i64(BN))
    m0 = b.mul(b.zext(nvptx.block_idx(b, "y"), lu.I64), i64(BM))
    bz = b.zext(nvptx.block_idx(b, "z"), lu.I64)
    bi = unflatten(b, bz, list(range(len(plan.bsizes))), plan.bsizes) if plan.bsizes else {}
    with b.goto_entry_block():
        frag = b.alloca(ir.ArrayType(lu.I32, 10))
        accs = [[[b.alloca(lu.F32) for _ in range(4)] for _ in range(NI)] for _ in range(MI)]
    for row in accs:
        for cell in row:
            for slot in cell:
                b.store(lu.const(lu.F32, 0), slot)
    stager = _Stager(k, plan, bi, pt)
    with lu.for_range(b, i64(plan.K), step=BK, name="k0") as k0:
        for q in range(BM * BK // THREADS):
            e = b.add(t, i64(THREADS * q))
            mm, kk = b.udiv(e, i64(BK)), b.urem(e, i64(BK))
            b.store(stager.raw(lhs, b.add(m0, mm), b.add(k0, kk), True),
                    nvptx.shared_elem_ptr(b, a_sh, e))
            kk, nn = b.udiv(e, i64(BN)), b.urem(e, i64(BN))
            b.store(stager.raw(rhs, b.add(n0, nn), b.add(k0, kk), False),
                    nvptx.shared_elem_ptr(b, b_sh, e))
        nvptx.barrier(b)

        def pair(gv: ir.GlobalVariable, first: ir.Value, second: ir.Value) -> ir.Value:
            lo = b.zext(b.load(nvptx.shared_elem_ptr(b, gv, first)), lu.I32)
            hi = b.zext(b.load(nvptx.shared_elem_ptr(b, gv, second)), lu.I32)
            return b.or_(lo, b.shl(hi, i32(16)))

        def a_at(r: ir.Value, c: ir.Value) -> ir.Value:
            base = b.add(b.mul(r, i64(BK)), c)
            return pair(a_sh, base, b.add(base, i64(1)))

        def b_at(r: ir.Value, c: ir.Value) -> ir.Value:
            base = b.add(b.mul(r, i64(BN)), c)
            return pair(b_sh, base, b.add(base, i64(BN)))

        c0 = b.mul(tq, i64(2))
        a_regs = []
        for mi in range(MI):
            r0 = b.add(b.add(b.mul(wm, i64(32)), i64(16 * mi)), g)
            r1 = b.add(r0, i64(8))
            a_regs.append([a_at(r0, c0), a_at(r1, c0), a_at(r0, b.add(c0, i64(8))),
                           a_at(r1, b.add(c0, i64(8)))])
        b_regs = []
        for ni in range(NI):
            n = b.add(b.add(b.mul(wn, i64(32)), i64(8 * ni)), g)
            b_regs.append([b_at(c0, n), b_at(b.add(c0, i64(8)), n)])
        for mi in range(MI):
            for ni in range(NI):
                mma_accumulate(b, mma, frag, a_regs[mi] + b_regs[ni], accs[mi][ni])
        nvptx.barrier(b)
    write_accumulators(k, plan, bi, out_pt, accs, m0, n0, b.mul(wm, i64(32)),
                       b.mul(wn, i64(32)), lane)
    k.finish()
    return [k.thunk()]


class _Stager:
    """Reads one raw 16-bit operand element (zero outside the matrix) for the shared tiles."""

    def __init__(self, k: GpuKernel, plan: DotPlan, bi: dict[int, ir.Value],
                 pt: PrimitiveType):
        self.k, self.plan, self.bi, self.pt = k, plan, bi, pt

    def raw(self, operand: HloInstruction, f: ir.Value, kk: ir.Value, is_lhs: bool
            ) -> ir.Value:
        b, plan = self.k.b, self.plan
        free, batch, contracting, st = (plan.lf, plan.lb, plan.lc, plan.ls) if is_lhs else \
            (plan.rf, plan.rb, plan.rc, plan.rs)
        f_total, f_sizes = (plan.M, plan.msizes) if is_lhs else (plan.N, plan.nsizes)
        f_ok = b.icmp_unsigned("<", f, i64(f_total))
        k_ok = b.icmp_unsigned("<", kk, i64(plan.K))
        f_c, k_c = b.select(f_ok, f, i64(0)), b.select(k_ok, kk, i64(0))

        def split(v: ir.Value, sizes: list[int]) -> dict[int, ir.Value]:
            return unflatten(b, v, list(range(len(sizes))), sizes) if sizes else {}

        parts = {**{batch[j]: v for j, v in self.bi.items()},
                 **{free[j]: v for j, v in split(f_c, f_sizes).items()},
                 **{contracting[j]: v for j, v in split(k_c, plan.ksizes).items()}}
        v = lu.load_element(b, self.k.ptr(plan.out.operand(operand)),
                            linear_offset(b, parts, st), self.pt)
        bits = v if self.pt is PrimitiveType.BF16 else b.bitcast(v, lu.I16)
        return b.select(b.and_(f_ok, k_ok), bits, ir.Constant(lu.I16, 0))


def mma_accumulate(b: ir.IRBuilder, mma: ir.Function, frag: ir.Value, words: list[ir.Value],
                   acc: list[ir.Value]) -> None:
    """acc += A * B for one 16 x 8 tile: the 6 operand `words` and the 4 accumulator slots
    `acc` through the 10-word fragment `frag` of `mma_function` (promoted to registers once
    the wrapper is inlined)."""
    for q, w in enumerate(words):
        b.store(w, b.gep(frag, [i32(0), i32(q)]))
    for q, slot in enumerate(acc):
        b.store(b.bitcast(b.load(slot), lu.I32), b.gep(frag, [i32(0), i32(6 + q)]))
    b.call(mma, [frag])
    for q, slot in enumerate(acc):
        b.store(b.bitcast(b.load(b.gep(frag, [i32(0), i32(6 + q)])), lu.F32), slot)


def write_accumulators(k: GpuKernel, plan: DotPlan, bi: dict[int, ir.Value],
                       out_pt: PrimitiveType,
                       accs: list[list[list[ir.Value]]], m0: ir.Value, n0: ir.Value,
                       warp_m0: ir.Value, warp_n0: ir.Value, lane: ir.Value) -> None:
    """Store a warp's mma accumulators: tile (mi, ni) of the warp covers rows
    m0 + warp_m0 + 16 mi .. + 16 and columns n0 + warp_n0 + 8 ni .. + 8; slot q of a lane
    holds D[g + 8 (q // 2)][2 t + (q & 1)] (g = lane / 4, t = lane % 4). Outside the result
    nothing is written; values are rounded once to the result type."""
    b = k.b
    g, tq = b.lshr(lane, i64(2)), b.and_(lane, i64(3))
    rows0 = b.add(m0, b.add(warp_m0, g))
    cols0 = b.add(n0, b.add(warp_n0, b.mul(tq, i64(2))))
    for mi, row_accs in enumerate(accs):
        for ni, cell in enumerate(row_accs):
            for q in range(4):
                row = b.add(rows0, i64(16 * mi + 8 * (q // 2)))
                col = b.add(cols0, i64(8 * ni + (q & 1)))
                ok = b.and_(b.icmp_unsigned("<", row, i64(plan.M)),
                            b.icmp_unsigned("<", col, i64(plan.N)))
                with b.if_then(ok):
                    mi_idx = unflatten(b, row, list(range(len(plan.msizes))), plan.msizes) \
                        if plan.msizes else {}
                    ni_idx = unflatten(b, col, list(range(len(plan.nsizes))), plan.nsizes) \
                        if plan.nsizes else {}
                    parts = {**{plan.ob[j]: v for j, v in bi.items()},
                             **{plan.om[j]: v for j, v in mi_idx.items()},
                             **{plan.on[j]: v for j, v in ni_idx.items()}}
                    v = b.load(cell[q])
                    if out_pt is not PrimitiveType.F32:
                        v = convert_value(b, v, PrimitiveType.F32, out_pt)
                    plan.out.store(k, parts, v)
