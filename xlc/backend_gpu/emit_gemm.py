"""Dot as a shared-memory tiled GEMM kernel (our own kernel: no cuBLAS).

Any dot_general: batch dims, any number of contracting / free dims, any layouts. The output
is viewed as [B, M, N] (batch, lhs free, rhs free) and the contraction as K. A block of
TILE x TILE threads computes one TILE x TILE output tile: per K step it stages a TILE x TILE
tile of lhs and of rhs in shared memory (out-of-range elements read as 0 through clamped
addresses and selects, no divergent loads), synchronises, and every thread accumulates its
element with FMAs over the staged tiles. Grid: (ceil(N/TILE), ceil(M/TILE), B).
f16/bf16 accumulate in f32 and round once; integers wrap; complex is unsupported.
"""
from __future__ import annotations

import logging
from math import prod

from llvmlite import ir

from xlc.backend_gpu import nvptx
from xlc.backend_gpu.emitter import GpuEmitter, operand_buffers, register
from xlc.backend_gpu.kernel import element_type, i32, i64, unflatten
from xlc.backend_gpu.thunks import Thunk
from xlc.codegen import llvm_utils as lu
from xlc.codegen.convert import convert_value
from xlc.codegen.scalar_types import from_compute, to_compute
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape, default_layout

log = logging.getLogger("xlc.backend_gpu")

TILE = 16


def strides(shape: Shape) -> list[int]:
    """Element stride of every logical dim of `shape` in its physical layout."""
    lay = shape.layout or default_layout(shape.rank)
    out = [0] * shape.rank
    s = 1
    for d in lay.minor_to_major:
        out[d] = s
        s *= shape.dims[d]
    return out


def _offset(b: ir.IRBuilder, parts: dict[int, ir.Value], st: list[int]) -> ir.Value:
    acc: ir.Value = i64(0)
    for d, v in parts.items():
        if st[d] == 0:
            continue
        t = v if st[d] == 1 else b.mul(v, i64(st[d]), flags=["nsw"])
        acc = t if isinstance(acc, ir.Constant) else b.add(acc, t, flags=["nsw"])
    return acc


class DotPlan:
    """Dimension bookkeeping of one dot: [B, M, N] x K views and physical strides."""

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
        self.B, self.M = prod(self.bsizes), prod(self.msizes)
        self.N, self.K = prod(self.nsizes), prod(self.ksizes)


def _mul_add(b: ir.IRBuilder, acc: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
    if lu.is_float_type(acc.type):
        p = b.fmul(x, y)
        p.flags.append("contract")
        s = b.fadd(acc, p)
        s.flags.append("contract")
        return s
    return b.add(acc, b.mul(x, y))


def _to_acc(b: ir.IRBuilder, v: ir.Value, pt: PrimitiveType, out_pt: PrimitiveType
            ) -> ir.Value:
    if pt is not out_pt:
        v = convert_value(b, v, pt, out_pt)
    return to_compute(b, v, out_pt) if out_pt.is_float else v


@register(Opcode.DOT)
def emit_dot(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """A dot as one tiled GEMM kernel (see the module docstring)."""
    out_pt = element_type(inst.shape, inst.name)
    lhs, rhs = inst.operands
    lpt, rpt = element_type(lhs.shape, lhs.name), element_type(rhs.shape, rhs.name)
    if out_pt.is_complex or out_pt is PrimitiveType.PRED:
        raise UnsupportedOpError(
            f"GPU backend: dot {inst.name} with {out_pt.text} result is unsupported")
    plan = DotPlan(inst)
    k = em.kernel(inst, [(inst, ())], operand_buffers(inst), max_threads=TILE * TILE)
    b = k.b
    acc_ty = lu.value_type(out_pt) if not out_pt.is_float else \
        (lu.F64 if out_pt is PrimitiveType.F64 else lu.F32)
    zero = lu.const(acc_ty, 0)
    a_sh = nvptx.shared_array(b.module, "gemm_a", acc_ty, TILE * TILE)
    b_sh = nvptx.shared_array(b.module, "gemm_b", acc_ty, TILE * TILE)
    k.launch((-(-plan.N // TILE), -(-plan.M // TILE), max(1, plan.B)), (TILE, TILE, 1),
             shared_bytes=2 * TILE * TILE * (acc_ty.width // 8 if isinstance(acc_ty, ir.IntType)
                                             else lu.float_bits(acc_ty) // 8))
    tx = b.zext(nvptx.thread_idx(b, "x"), lu.I64)
    ty = b.zext(nvptx.thread_idx(b, "y"), lu.I64)
    n = b.add(b.mul(b.zext(nvptx.block_idx(b, "x"), lu.I64), i64(TILE)), tx)
    m = b.add(b.mul(b.zext(nvptx.block_idx(b, "y"), lu.I64), i64(TILE)), ty)
    bz = b.zext(nvptx.block_idx(b, "z"), lu.I64)
    bi = unflatten(b, bz, list(range(len(plan.bsizes))), plan.bsizes) if plan.bsizes else {}
    m_ok = b.icmp_unsigned("<", m, i64(plan.M))
    n_ok = b.icmp_unsigned("<", n, i64(plan.N))
    m_c = b.select(m_ok, m, i64(0))
    n_c = b.select(n_ok, n, i64(0))
    mi = unflatten(b, m_c, list(range(len(plan.msizes))), plan.msizes) if plan.msizes else {}
    ni = unflatten(b, n_c, list(range(len(plan.nsizes))), plan.nsizes) if plan.nsizes else {}
    lhs_base = {**{plan.lb[j]: v for j, v in bi.items()}, **{plan.lf[j]: v for j, v in mi.items()}}
    rhs_base = {**{plan.rb[j]: v for j, v in bi.items()}, **{plan.rf[j]: v for j, v in ni.items()}}
    with b.goto_entry_block():
        acc_slot = b.alloca(acc_ty)
    b.store(zero, acc_slot)
    slot_a = b.add(b.mul(ty, i64(TILE)), tx)   # As[ty][tx]
    with lu.for_range(b, i64(plan.K), step=TILE, name="k0") as k0:
        # stage lhs(m, k0 + tx) and rhs(k0 + ty, n)
        ka = b.add(k0, tx)
        kb = b.add(k0, ty)
        ka_ok = b.icmp_unsigned("<", ka, i64(plan.K))
        kb_ok = b.icmp_unsigned("<", kb, i64(plan.K))
        kai = unflatten(b, b.select(ka_ok, ka, i64(0)), list(range(len(plan.ksizes))),
                        plan.ksizes) if plan.ksizes else {}
        kbi = unflatten(b, b.select(kb_ok, kb, i64(0)), list(range(len(plan.ksizes))),
                        plan.ksizes) if plan.ksizes else {}
        loff = _offset(b, {**lhs_base, **{plan.lc[j]: v for j, v in kai.items()}}, plan.ls)
        roff = _offset(b, {**rhs_base, **{plan.rc[j]: v for j, v in kbi.items()}}, plan.rs)
        av = _to_acc(b, lu.load_element(b, k.ptr(lhs), loff, lpt), lpt, out_pt)
        bv = _to_acc(b, lu.load_element(b, k.ptr(rhs), roff, rpt), rpt, out_pt)
        av = b.select(b.and_(m_ok, ka_ok), av, zero)
        bv = b.select(b.and_(n_ok, kb_ok), bv, zero)
        b.store(av, _sh(b, a_sh, slot_a))
        b.store(bv, _sh(b, b_sh, slot_a))
        nvptx.barrier(b)
        acc = b.load(acc_slot)
        for kk in range(TILE):
            x = b.load(_sh(b, a_sh, b.add(b.mul(ty, i64(TILE)), i64(kk))), typ=acc_ty)
            y = b.load(_sh(b, b_sh, b.add(i64(kk * TILE), tx)), typ=acc_ty)
            acc = _mul_add(b, acc, x, y)
        b.store(acc, acc_slot)
        nvptx.barrier(b)
    with b.if_then(b.and_(m_ok, n_ok)):
        res = b.load(acc_slot)
        if out_pt.is_float:
            res = from_compute(b, res, out_pt)
        out_parts = {**{plan.ob[j]: v for j, v in bi.items()},
                     **{plan.om[j]: v for j, v in mi.items()},
                     **{plan.on[j]: v for j, v in ni.items()}}
        lu.store_element(b, res, k.ptr(inst), _offset(b, out_parts, plan.os), out_pt)
    k.finish()
    return [k.thunk()]


def _sh(b: ir.IRBuilder, gv: ir.GlobalVariable, idx: ir.Value) -> ir.Value:
    return nvptx.shared_elem_ptr(b, gv, idx)
