"""Dot: batch dims, any number of contracting and free dims, any layouts.

Output dims are [batch..., lhs free..., rhs free...] (XLA's DotGeneral). Two loop nests:
* f32/f64/integer results accumulate in the output buffer in `b, m, k, n` order: the innermost
  loop runs along the rhs/output free dims, contiguous for row-major operands, and vectorises
  (`contract` lets LLVM form FMAs); the k/n loops are blocked so the rhs panel stays in L2;
* f16/bf16 results accumulate each output element in f32 registers (`b, m, n, k`) and round
  once; so do f32/f64 matrix-vector products, whose k loop vectorises as a `reassoc`
  reduction;
* large f32/f64 matmuls (contiguous rhs/out rows) use the register-blocked, B-packing,
  threaded kernel of `emit_matmul`;
* the other f32/f64 dots of at least GEMM_MIN_FLOPS run on the packed GEMM: the
  `gemm-workspace` pass (`gemm_workspace.py`) turns them into `__xlc$gemm` custom-calls with
  a workspace output before buffer assignment (`packed_gemm_plan` decides which), so no dot
  reaching `emit_dot` needs scratch memory; small ones that read their operands in place
  (`gemm.reads_in_place`) or multiply A by a B stored as Bᵀ (`gemm.uses_row_dots`: tiled
  dot products of rows) need no workspace and stay dots, run on the GEMM here.
Complex dots are unsupported (UnsupportedOpError). A packed AVX-512 microkernel is future work.
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.backend_cpu.emit_gemm import emit_gemm_dot
from xlc.backend_cpu.emit_loops import operand_buffers
from xlc.backend_cpu.emit_matmul import emit_matmul, matmul_applicable
from xlc.backend_cpu.emitter import (
    CpuEmitter,
    FnCtx,
    Kernel,
    element_type,
    i64,
    overlaps_an_operand,
)
from xlc.backend_cpu.gemm import packs_nothing
from xlc.backend_cpu.gemm_dot import DotGemm, gemm_plan_for_dot
from xlc.codegen import llvm_utils as lu
from xlc.codegen.convert import convert_value
from xlc.codegen.scalar_types import from_compute, to_compute
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType, Shape, default_layout

log = logging.getLogger("xlc.backend_cpu")

USE_CODEGEN_GEMM = True
"""f32/f64 dots that emit_matmul does not take (`matmul_applicable`: its sweet spot of sizes and
layouts) go to the packed GEMM of xlc.backend_cpu.gemm (a run-time library call, emit_gemm.py)."""
GEMM_MIN_FLOPS = 2 * 40 ** 3
"""Smaller dots use the loop nests below. From ~40^3 the packed GEMM wins despite its packing
(2-core test VM: 48^3 8.4 -> 5.2 us, 64^3 8.7 -> 6.5 us, 80^3 21.8 -> 10.1 us)."""
K_BLOCK = 128
N_BLOCK = 512


def strides(shape: Shape) -> list[int]:
    """Element stride of every logical dim of `shape` in its physical layout."""
    lay = shape.layout or default_layout(shape.rank)
    out = [0] * shape.rank
    s = 1
    for d in lay.minor_to_major:
        out[d] = s
        s *= shape.dims[d]
    return out


def _offset(b: ir.IRBuilder, terms: list[tuple[ir.Value, int]]) -> ir.Value:
    acc: ir.Value = i64(0)
    for v, s in terms:
        if s == 0:
            continue
        t = v if s == 1 else b.mul(v, i64(s), flags=["nsw"])
        acc = t if isinstance(acc, ir.Constant) else b.add(acc, t, flags=["nsw"])
    return acc


class _DotPlan:
    """Dimension bookkeeping of one dot."""

    def __init__(self, inst: HloInstruction):
        lhs, rhs = inst.operands
        a = inst.attrs
        self.lb = [int(d) for d in a.get("lhs_batch_dims", ())]
        self.rb = [int(d) for d in a.get("rhs_batch_dims", ())]
        self.lc = [int(d) for d in a.get("lhs_contracting_dims", ())]
        self.rc = [int(d) for d in a.get("rhs_contracting_dims", ())]
        self.lf = [d for d in range(lhs.shape.rank) if d not in self.lb + self.lc]
        self.rf = [d for d in range(rhs.shape.rank) if d not in self.rb + self.rc]
        self.ls, self.rs, self.os = strides(lhs.shape), strides(rhs.shape), strides(inst.shape)
        nb, nm = len(self.lb), len(self.lf)
        self.ob = list(range(nb))
        self.om = list(range(nb, nb + nm))
        self.on = list(range(nb + nm, nb + nm + len(self.rf)))
        self.bsizes = [lhs.shape.dims[d] for d in self.lb]
        self.msizes = [lhs.shape.dims[d] for d in self.lf]
        self.nsizes = [rhs.shape.dims[d] for d in self.rf]
        self.ksizes = [lhs.shape.dims[d] for d in self.lc]

    def lhs_off(self, b: ir.IRBuilder, bi: list, mi: list, ki: list) -> ir.Value:
        return _offset(b, [(v, self.ls[d]) for v, d in zip(bi + mi + ki,
                                                            self.lb + self.lf + self.lc)])

    def rhs_off(self, b: ir.IRBuilder, bi: list, ni: list, ki: list) -> ir.Value:
        return _offset(b, [(v, self.rs[d]) for v, d in zip(bi + ni + ki,
                                                            self.rb + self.rf + self.rc)])

    def out_off(self, b: ir.IRBuilder, bi: list, mi: list, ni: list) -> ir.Value:
        return _offset(b, [(v, self.os[d]) for v, d in zip(bi + mi + ni,
                                                            self.ob + self.om + self.on)])


def _mul_add(b: ir.IRBuilder, acc: ir.Value, x: ir.Value, y: ir.Value,
             reassoc: bool = False) -> ir.Value:
    if lu.is_float_type(acc.type):
        p = b.fmul(x, y)
        p.flags.append("contract")
        s = b.fadd(acc, p)
        s.flags.append("contract")
        if reassoc:
            s.flags.append("reassoc")
        return s
    return b.add(acc, b.mul(x, y))


def load_as(k: Kernel, b: ir.IRBuilder, inst: HloInstruction, off: ir.Value,
             out_pt: PrimitiveType) -> ir.Value:
    pt = element_type(inst.shape, inst.name)
    v = lu.load_element(b, k.ptr(inst), off, pt)
    if pt is not out_pt:
        v = convert_value(b, v, pt, out_pt)
    return to_compute(b, v, out_pt) if out_pt.is_float else v


def _memory_accumulate(k: Kernel, inst: HloInstruction, plan: _DotPlan,
                       out_pt: PrimitiveType) -> None:
    b = k.b
    lhs, rhs = inst.operands
    zero = lu.const(lu.value_type(out_pt), 0)
    with lu.for_nest(b, plan.bsizes, "b") as bi, lu.for_nest(b, plan.msizes, "m") as mi:
        with lu.for_nest(b, plan.nsizes, "z") as ni:
            lu.store_element(b, zero, k.ptr(inst), plan.out_off(b, bi, mi, ni), out_pt)
        with lu.for_nest(b, plan.ksizes, "k") as ki:
            a = load_as(k, b, lhs, plan.lhs_off(b, bi, mi, ki), out_pt)
            with lu.for_nest(b, plan.nsizes, "n") as ni:
                y = load_as(k, b, rhs, plan.rhs_off(b, bi, ni, ki), out_pt)
                o = plan.out_off(b, bi, mi, ni)
                acc = lu.load_element(b, k.ptr(inst), o, out_pt)
                lu.store_element(b, _mul_add(b, acc, a, y), k.ptr(inst), o, out_pt)


def _blocked_matmul(k: Kernel, inst: HloInstruction, plan: _DotPlan) -> None:
    """Single batch/m/n/k dims, f32/f64: n and k blocked so the rhs panel stays in cache."""
    b = k.b
    lhs, rhs = inst.operands
    pt = element_type(inst.shape, inst.name)
    (msize,), (nsize,), (ksize,) = plan.msizes, plan.nsizes, plan.ksizes
    nb = min(N_BLOCK, nsize)
    kb = min(K_BLOCK, ksize)
    zero = lu.const(lu.value_type(pt), 0)
    with lu.for_nest(b, plan.bsizes, "b") as bi:
        with lu.for_range(b, msize, name="zm") as m, lu.for_range(b, nsize, name="zn") as n:
            lu.store_element(b, zero, k.ptr(inst), plan.out_off(b, bi, [m], [n]), pt)
        with lu.for_range(b, i64(nsize), step=nb, name="n0") as n0, \
                lu.for_range(b, i64(ksize), step=kb, name="k0") as k0:
            nend = _min(b, b.add(n0, i64(nb)), nsize)
            kend = _min(b, b.add(k0, i64(kb)), ksize)
            with lu.for_range(b, msize, name="m") as m, \
                    lu.for_range(b, kend, start=k0, name="k") as kk:
                a = load_as(k, b, lhs, plan.lhs_off(b, bi, [m], [kk]), pt)
                with lu.for_range(b, nend, start=n0, name="n") as n:
                    y = load_as(k, b, rhs, plan.rhs_off(b, bi, [n], [kk]), pt)
                    o = plan.out_off(b, bi, [m], [n])
                    acc = lu.load_element(b, k.ptr(inst), o, pt)
                    lu.store_element(b, _mul_add(b, acc, a, y), k.ptr(inst), o, pt)


def _flops(plan: _DotPlan) -> int:
    return 2 * _prod(plan.bsizes) * _prod(plan.msizes) * _prod(plan.nsizes) * \
        _prod(plan.ksizes)


def _prod(xs: list[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def _min(b: ir.IRBuilder, v: ir.Value, hi: int) -> ir.Value:
    return b.select(b.icmp_signed("<", v, i64(hi)), v, i64(hi))


def _register_accumulate(k: Kernel, inst: HloInstruction, plan: _DotPlan,
                         out_pt: PrimitiveType, reassoc: bool = False) -> None:
    """One register accumulator per output element (`b, m, n, k` order); with `reassoc` the
    k loop vectorises as a reduction (matrix-vector products and dot products)."""
    b = k.b
    lhs, rhs = inst.operands
    cty = lu.F32 if out_pt in (PrimitiveType.F16, PrimitiveType.BF16) else lu.value_type(out_pt)
    with b.goto_entry_block():
        slot = b.alloca(cty)
    with lu.for_nest(b, plan.bsizes, "b") as bi, lu.for_nest(b, plan.msizes, "m") as mi, \
            lu.for_nest(b, plan.nsizes, "n") as ni:
        b.store(lu.const(cty, 0), slot)
        with lu.for_nest(b, plan.ksizes, "k") as ki:
            x = load_as(k, b, lhs, plan.lhs_off(b, bi, mi, ki), out_pt)
            y = load_as(k, b, rhs, plan.rhs_off(b, bi, ni, ki), out_pt)
            b.store(_mul_add(b, b.load(slot), x, y, reassoc), slot)
        res = b.load(slot)
        if out_pt.is_float:
            res = from_compute(b, res, out_pt)
        lu.store_element(b, res, k.ptr(inst), plan.out_off(b, bi, mi, ni), out_pt)


def packed_gemm_plan(inst: HloInstruction, threads: int) -> DotGemm | None:
    """The packed-GEMM plan the CPU runs dot `inst` with on `threads` threads, or None where
    another kernel is better or applies (16-bit and integer results, the register-blocked
    `emit_matmul` kernel's shapes, matrix-vector products, fewer than GEMM_MIN_FLOPS, dims
    that do not merge). Decided before buffer assignment by the `gemm-workspace` pass, so the
    GEMM's packing scratch is a buffer of the assignment."""
    if not USE_CODEGEN_GEMM or inst.shape.element_type not in (PrimitiveType.F32,
                                                                PrimitiveType.F64):
        return None
    if any(op.shape.element_type is not inst.shape.element_type for op in inst.operands):
        return None
    plan = _DotPlan(inst)
    if matmul_applicable(inst, plan, threads) or _prod(plan.nsizes) <= 1 or \
            _flops(plan) < GEMM_MIN_FLOPS:
        return None
    return gemm_plan_for_dot(inst)


def _contiguous_vector_matrix(plan: _DotPlan) -> bool:
    """A vector (m = 1) times a matrix whose contracting dim is its contiguous one, as is the
    vector's: each output element is a unit-stride dot product."""
    return (_prod(plan.msizes) == 1 and len(plan.lc) == 1 and len(plan.rc) == 1
            and plan.ls[plan.lc[0]] == 1 and plan.rs[plan.rc[0]] == 1)


def _in_place_gemm(em: CpuEmitter, inst: HloInstruction) -> DotGemm | None:
    """The packed-GEMM plan of `inst` when it reads its operands in place
    or as row dot products (`gemm.packs_nothing`: no packing, no workspace) and its output
    overlaps neither operand; else None."""
    gemm = packed_gemm_plan(inst, em.threads)
    if gemm is None or not packs_nothing(gemm.spec) or overlaps_an_operand(em, inst):
        return None
    return gemm


def emit_dot(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """A dot as a loop nest (see the module docstring)."""
    out_pt = element_type(inst.shape, inst.name)
    for op in inst.operands:
        if element_type(op.shape, op.name).is_complex:
            raise UnsupportedOpError(f"CPU backend: complex dot is unsupported ({inst.name})")
    if out_pt.is_complex or out_pt is PrimitiveType.PRED:
        raise UnsupportedOpError(f"CPU backend: {out_pt.text} dot is unsupported ({inst.name})")
    plan = _DotPlan(inst)
    k = em.kernel(ctx, inst.name, [(inst, ())] + operand_buffers(inst))
    if out_pt in (PrimitiveType.F16, PrimitiveType.BF16):
        _register_accumulate(k, inst, plan, out_pt)
    elif matmul_applicable(inst, plan, em.threads) and not overlaps_an_operand(em, inst):
        emit_matmul(k, inst, plan, em.threads)
    elif (gemm := _in_place_gemm(em, inst)) is not None:
        # a small product on the GEMM microkernel, reading A and B in place (no workspace, so
        # the gemm-workspace pass left it a dot)
        emit_gemm_dot(em, k, inst.name, gemm, [k.ptr(op) for op in inst.operands] +
                      [k.ptr(inst)], ir.Constant(lu.PTR, None), 0)
    elif out_pt in (PrimitiveType.F32, PrimitiveType.F64) and (
            _prod(plan.nsizes) == 1 or _contiguous_vector_matrix(plan)):
        # matrix-vector / dot product / vector times a matrix read along its rows (h @ w.T,
        # reverse-mode matvecs): a contiguous reduction along k per output element
        _register_accumulate(k, inst, plan, out_pt, reassoc=True)
    elif (out_pt in (PrimitiveType.F32, PrimitiveType.F64) and len(plan.msizes) == 1
          and len(plan.nsizes) == 1 and len(plan.ksizes) == 1):
        _blocked_matmul(k, inst, plan)
    else:
        _memory_accumulate(k, inst, plan, out_pt)
    k.finish()
