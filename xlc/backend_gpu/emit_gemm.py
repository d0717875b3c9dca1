"""Dot as a shared-memory tiled GEMM kernel (our own kernel: no cuBLAS).

Any dot_general: batch dims, any number of contracting / free dims, any layouts. The output
is viewed as [B, M, N] (batch, lhs free, rhs free) and the contraction as K. A block of
16 x 16 threads computes one (16 R) x (16 R) output tile, R = 4 when M and N are >= 64 (each
thread holds 4 x 4 accumulators in registers: 8 shared loads per 16 FMAs instead of 2 per 1),
else R = 1: per K step of 16 it stages the lhs and rhs tiles in shared memory (out-of-range
elements read as 0 through clamped addresses and selects, no divergent loads),
synchronises, and every thread accumulates its outputs with FMAs over the staged tiles.
Thread (tx, ty) owns rows ty + 16 i and columns tx + 16 j, so shared reads are broadcasts or
conflict-free and the stores coalesce. Grid: (ceil(N / 16R), ceil(M / 16R), B).
f16/bf16 accumulate in f32 and round once; integers wrap; complex is unsupported.
Dots of two f16 or two bf16 operands on sm_80+ go to a tensor-core kernel: the pipelined one
(emit_mma_pipe.py) when both operands are matrices with 16-byte rows, else emit_mma.py.
"""
from __future__ import annotations

import logging
from math import prod

from llvmlite import ir

from xlc.backend_gpu import nvptx
from xlc.backend_gpu.emitter import GpuEmitter, operand_buffers
from xlc.backend_gpu.kernel import GpuKernel, element_type, i64, unflatten
from xlc.backend_gpu.thunks import Thunk
from xlc.codegen import llvm_utils as lu
from xlc.codegen.convert import convert_value
from xlc.codegen.ir_array import LeafEmitter
from xlc.codegen.scalar_types import from_compute, to_compute
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.precision import LEVELS, dot_precision
from xlc.hlo.shape import PrimitiveType, Shape, default_layout
from xlc.passes.gemm_epilogue import Step, epilogue_steps, fused_dot

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


def linear_offset(b: ir.IRBuilder, parts: dict[int, ir.Value], st: list[int]) -> ir.Value:
    """sum(parts[d] * st[d]): the element offset of a (partial) index given dim strides."""
    acc: ir.Value = i64(0)
    for d, v in parts.items():
        if st[d] == 0:
            continue
        t = v if st[d] == 1 else b.mul(v, i64(st[d]), flags=["nsw"])
        acc = t if isinstance(acc, ir.Constant) else b.add(acc, t, flags=["nsw"])
    return acc


class GemmOutput:
    """Where a GEMM kernel reads its operands and puts its results: the dot's own buffers, or,
    for the dot of a kOutput fusion (`gemm_epilogue.py`), the fusion's operands and output,
    each result element passed through the fused epilogue (`steps`: the dot-index -> root-index
    map) before it is stored."""

    def __init__(self, dot: HloInstruction, fusion: HloInstruction | None = None,
                 steps: list[Step] | None = None):
        self.dot, self.fusion, self.steps = dot, fusion, steps or []
        self.buffer = fusion if fusion is not None else dot
        """The instruction whose (array) buffer the kernel writes."""
        self._strides = strides(dot.shape)
        self._pt = element_type(dot.shape, dot.name)

    def operand(self, op: HloInstruction) -> HloInstruction:
        """The instruction whose buffer holds dot operand `op`."""
        if self.fusion is None:
            return op
        return self.fusion.operands[op.parameter_number]

    def store(self, k: GpuKernel, parts: dict[int, ir.Value], value: ir.Value) -> None:
        """Store result element `parts` (dot dim -> index) of value `value` (the dot's
        element type): at its place in the dot's buffer, or through the epilogue."""
        b = k.b
        if self.fusion is None:
            lu.store_element(b, value, k.ptr(self.dot), linear_offset(b, parts, self._strides),
                             self._pt)
            return
        idx: list[ir.Value] = [parts.get(d, i64(0)) for d in range(self.dot.shape.rank)]
        for step in self.steps:
            idx = _move(b, step, idx)
        fusion = self.fusion
        gen = LeafEmitter(b, lambda n, ix: k.read(fusion.operands[n], ix),
                          {self.dot.uid: lambda _ix: value})
        root = fusion.fused_computation.root
        assert root is not None
        k.write(fusion, idx, gen.generate(root, idx))


def _move(b: ir.IRBuilder, step: Step, idx: list[ir.Value]) -> list[ir.Value]:
    """A logical index through one epilogue step (transpose or reshape)."""
    if step[0] == "transpose":
        return [idx[int(p)] for p in step[1]]
    in_dims, out_dims = step[1], step[2]
    linear: ir.Value = i64(0)
    for v, n in zip(idx, in_dims):
        linear = b.add(b.mul(linear, i64(n)), v)
    parts = unflatten(b, linear, list(range(len(out_dims))), list(out_dims))
    return [parts.get(d, i64(0)) for d in range(len(out_dims))]


class DotPlan:
    """Dimension bookkeeping of one dot: [B, M, N] x K views and physical strides, and where
    its kernel reads and writes (`out`)."""

    def __init__(self, inst: HloInstruction, out: GemmOutput | None = None):
        self.out = out or GemmOutput(inst)
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


def mul_add(b: ir.IRBuilder, acc: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
    """acc + x * y (float: `contract`ed into an FMA; integers wrap)."""
    if lu.is_float_type(acc.type):
        p = b.fmul(x, y)
        p.flags.append("contract")
        s = b.fadd(acc, p)
        s.flags.append("contract")
        return s
    return b.add(acc, b.mul(x, y))


def to_accumulator(b: ir.IRBuilder, v: ir.Value, pt: PrimitiveType, out_pt: PrimitiveType
                   ) -> ir.Value:
    """Element `v` of type `pt` converted to `out_pt`'s accumulation type (f32 for f16/bf16)."""
    if pt is not out_pt:
        v = convert_value(b, v, pt, out_pt)
    return to_compute(b, v, out_pt) if out_pt.is_float else v


def register_block(plan: DotPlan) -> int:
    """Outputs per thread along each of M and N: 4 (64 x 64 block tiles) for big enough
    GEMMs, else 1 (16 x 16)."""
    return 4 if plan.M >= 64 and plan.N >= 64 else 1


def uses_tf32(em: GpuEmitter, inst: HloInstruction, plan: DotPlan) -> bool:
    """Whether f32 dot `inst` may compute in TF32: sm_80+, f32 operands and result, the
    higher of its own precision and the compile's `default_matmul_precision` below
    `highest`, and big enough for 16 x 8 x 8 tensor-core tiles."""
    lhs, rhs = inst.operands
    f32 = PrimitiveType.F32
    if em.sm < 80 or not lhs.shape.element_type is rhs.shape.element_type is \
            inst.shape.element_type is f32:
        return False
    wanted = max(dot_precision(inst), em.matmul_precision, key=LEVELS.index)
    return wanted != "highest" and plan.M >= 16 and plan.N >= 8 and plan.K >= 8 \
        and plan.B <= 65535


def emit_dot(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """A dot as one tiled GEMM kernel (see the module docstring)."""
    return emit_gemm(em, inst, GemmOutput(inst))


def emit_output_fusion(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """A kOutput fusion of `gemm_epilogue.py`: its dot's GEMM kernel, storing every result
    element through the fused epilogue."""
    dot = fused_dot(inst)
    steps = None if dot is None else epilogue_steps(inst.fused_computation, dot)
    if dot is None or steps is None:
        raise UnsupportedOpError(f"GPU backend: kOutput fusion {inst.name} is not a dot with "
                                 "an elementwise epilogue")
    return emit_gemm(em, dot, GemmOutput(dot, inst, steps))


def emit_gemm(em: GpuEmitter, inst: HloInstruction, out: GemmOutput) -> list[Thunk]:
    """The GEMM kernel of dot `inst`, reading and writing where `out` says."""
    out_pt = element_type(inst.shape, inst.name)
    lhs, rhs = inst.operands
    lpt, rpt = element_type(lhs.shape, lhs.name), element_type(rhs.shape, rhs.name)
    if out_pt.is_complex or out_pt is PrimitiveType.PRED:
        raise UnsupportedOpError(
            f"GPU backend: dot {inst.name} with {out_pt.text} result is unsupported")
    plan = DotPlan(inst, out)
    # (these modules import this one)
    from xlc.backend_gpu.emit_mma import emit_dot_mma, mma_applicable
    from xlc.backend_gpu.emit_mma_pipe import emit_dot_pipelined, pipe_config

    half = mma_applicable(inst, plan, em.sm)
    if half or uses_tf32(em, inst, plan):
        piped = pipe_config(em, inst, plan)
        if piped is not None:
            return emit_dot_pipelined(em, inst, plan, *piped)
        if half:
            return emit_dot_mma(em, inst, plan)
    r = register_block(plan)
    tm = tn = TILE * r                       # block tile: tm x tn outputs, K step TILE
    k = em.kernel(out.buffer, [(out.buffer, ())], operand_buffers(out.buffer),
                  max_threads=TILE * TILE)
    b = k.b
    acc_ty = lu.value_type(out_pt) if not out_pt.is_float else \
        (lu.F64 if out_pt is PrimitiveType.F64 else lu.F32)
    acc_bytes = acc_ty.width // 8 if isinstance(acc_ty, ir.IntType) else \
        lu.float_bits(acc_ty) // 8
    zero = lu.const(acc_ty, 0)
    a_sh = nvptx.shared_array(b.module, "gemm_a", acc_ty, tm * TILE)   # [m][k]
    b_sh = nvptx.shared_array(b.module, "gemm_b", acc_ty, TILE * tn)   # [k][n]
    k.launch((-(-plan.N // tn), -(-plan.M // tm), max(1, plan.B)), (TILE, TILE, 1),
             shared_bytes=(tm + tn) * TILE * acc_bytes)
    tx = b.zext(nvptx.thread_idx(b, "x"), lu.I64)
    ty = b.zext(nvptx.thread_idx(b, "y"), lu.I64)
    t = b.add(b.mul(ty, i64(TILE)), tx)
    n0 = b.mul(b.zext(nvptx.block_idx(b, "x"), lu.I64), i64(tn))
    m0 = b.mul(b.zext(nvptx.block_idx(b, "y"), lu.I64), i64(tm))
    bz = b.zext(nvptx.block_idx(b, "z"), lu.I64)
    bi = unflatten(b, bz, list(range(len(plan.bsizes))), plan.bsizes) if plan.bsizes else {}

    def split(v: ir.Value, sizes: list[int]) -> dict[int, ir.Value]:
        return unflatten(b, v, list(range(len(sizes))), sizes) if sizes else {}

    def clamp(v: ir.Value, n: int) -> tuple[ir.Value, ir.Value]:
        ok = b.icmp_unsigned("<", v, i64(n))
        return ok, b.select(ok, v, i64(0))

    def load_tile(operand: HloInstruction, pt: PrimitiveType, free: list[int],
                  batch: list[int], contracting: list[int], st: list[int],
                  f: ir.Value, f_size: list[int], f_total: int, kk: ir.Value) -> ir.Value:
        f_ok, f_c = clamp(f, f_total)
        k_ok, k_c = clamp(kk, plan.K)
        parts = {**{batch[j]: v for j, v in bi.items()},
                 **{free[j]: v for j, v in split(f_c, f_size).items()},
                 **{contracting[j]: v for j, v in split(k_c, plan.ksizes).items()}}
        raw = lu.load_element(b, k.ptr(out.operand(operand)), linear_offset(b, parts, st), pt)
        v = to_accumulator(b, raw, pt, out_pt)
        return b.select(b.and_(f_ok, k_ok), v, zero)

    with b.goto_entry_block():
        accs = [[b.alloca(acc_ty) for _ in range(r)] for _ in range(r)]
    for row in accs:
        for slot in row:
            b.store(zero, slot)
    with lu.for_range(b, i64(plan.K), step=TILE, name="k0") as k0:
        # stage lhs[m0:m0+tm, k0:k0+16] and rhs[k0:k0+16, n0:n0+tn]; consecutive threads
        # take consecutive k (lhs) / n (rhs) so row-major operands load coalesced
        for q in range(r):
            e = b.add(t, i64(TILE * TILE * q))
            mm, kk = b.udiv(e, i64(TILE)), b.urem(e, i64(TILE))
            v = load_tile(lhs, lpt, plan.lf, plan.lb, plan.lc, plan.ls, b.add(m0, mm),
                          plan.msizes, plan.M, b.add(k0, kk))
            b.store(v, _sh(b, a_sh, e))
            kk, nn = b.udiv(e, i64(tn)), b.urem(e, i64(tn))
            v = load_tile(rhs, rpt, plan.rf, plan.rb, plan.rc, plan.rs, b.add(n0, nn),
                          plan.nsizes, plan.N, b.add(k0, kk))
            b.store(v, _sh(b, b_sh, e))
        nvptx.barrier(b)
        acc = [[b.load(slot) for slot in row] for row in accs]
        for kk_ in range(TILE):
            xs = [b.load(_sh(b, a_sh, b.add(b.mul(b.add(ty, i64(TILE * i)), i64(TILE)),
                                             i64(kk_))), typ=acc_ty) for i in range(r)]
            ys = [b.load(_sh(b, b_sh, b.add(i64(kk_ * tn), b.add(tx, i64(TILE * j)))),
                         typ=acc_ty) for j in range(r)]
            acc = [[mul_add(b, acc[i][j], xs[i], ys[j]) for j in range(r)] for i in range(r)]
        for i in range(r):
            for j in range(r):
                b.store(acc[i][j], accs[i][j])
        nvptx.barrier(b)
    for i in range(r):
        for j in range(r):
            m_ok, m_c = clamp(b.add(m0, b.add(ty, i64(TILE * i))), plan.M)
            n_ok, n_c = clamp(b.add(n0, b.add(tx, i64(TILE * j))), plan.N)
            with b.if_then(b.and_(m_ok, n_ok)):
                res = b.load(accs[i][j])
                if out_pt.is_float:
                    res = from_compute(b, res, out_pt)
                out_parts = {**{plan.ob[q]: v for q, v in bi.items()},
                             **{plan.om[q]: v for q, v in split(m_c, plan.msizes).items()},
                             **{plan.on[q]: v for q, v in split(n_c, plan.nsizes).items()}}
                out.store(k, out_parts, res)
    k.finish()
    return [k.thunk()]


def _sh(b: ir.IRBuilder, gv: ir.GlobalVariable, idx: ir.Value) -> ir.Value:
    return nvptx.shared_elem_ptr(b, gv, idx)
