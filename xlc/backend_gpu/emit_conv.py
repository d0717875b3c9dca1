"""Convolution as direct loops: one thread per output element.

For output element (b, o, spatial...) the thread folds over the input features of o's group
and the window: input position `p = out * stride + k * rhs_dilation - pad_low`, which must be
a multiple of `lhs_dilation` (base dilation) and in bounds after dividing by it; reversed
window dims read the kernel at `size - 1 - k`. Feature groups split input features and output
features into matching groups; batch groups split the input batch. f16/bf16 accumulate in f32
and round once (XLA's semantics, as the evaluator implements them).
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.backend_gpu.emit_gemm import mul_add, to_accumulator
from xlc.backend_gpu.emit_misc import each_element
from xlc.backend_gpu.emitter import GpuEmitter, operand_buffers
from xlc.backend_gpu.kernel import element_type, i64
from xlc.backend_gpu.thunks import Thunk
from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import window_dims, window_position
from xlc.codegen.scalar_types import from_compute
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType

log = logging.getLogger("xlc.backend_gpu")


def emit_convolution(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """A convolution (see the module docstring)."""
    out_pt = element_type(inst.shape, inst.name)
    lhs, rhs = inst.operands
    lpt, rpt = element_type(lhs.shape, lhs.name), element_type(rhs.shape, rhs.name)
    if out_pt.is_complex or out_pt is PrimitiveType.PRED:
        raise UnsupportedOpError(
            f"GPU backend: convolution {inst.name} with {out_pt.text} result is unsupported")
    dl = inst.attrs["dim_labels"]
    fgc = int(inst.attrs.get("feature_group_count", 1))
    bgc = int(inst.attrs.get("batch_group_count", 1))
    nsp = len(dl.input_spatial)
    wd = window_dims(inst, nsp, "GPU")
    c_in = lhs.shape.dims[dl.input_feature]
    o_total = inst.shape.dims[dl.output_feature]
    n_out = inst.shape.dims[dl.output_batch]
    cg = c_in // fgc
    og = o_total // (fgc * bgc)
    acc_ty = lu.value_type(out_pt) if not out_pt.is_float else \
        (lu.F64 if out_pt is PrimitiveType.F64 else lu.F32)
    zero = lu.const(acc_ty, 0)
    k = em.kernel(inst, [(inst, ())], operand_buffers(inst), max_threads=128)
    b = k.b
    with b.goto_entry_block():
        acc_slot = b.alloca(acc_ty)
    with each_element(k, inst.shape) as oidx:
        bo, o = oidx[dl.output_batch], oidx[dl.output_feature]
        group = b.udiv(o, i64(og))
        if bgc > 1:
            batch = b.add(b.mul(group, i64(n_out)), bo)
            c_base: ir.Value = i64(0)
        else:
            batch = bo
            c_base = b.mul(group, i64(cg))
        b.store(zero, acc_slot)
        with lu.for_nest(b, [cg] + [w.size for w in wd], name="cv") as ivs:
            ci, kw = ivs[0], ivs[1:]
            ok: ir.Value = ir.Constant(lu.I1, 1)
            lidx: list[ir.Value] = [i64(0)] * lhs.shape.rank
            ridx: list[ir.Value] = [i64(0)] * rhs.shape.rank
            lidx[dl.input_batch] = batch
            lidx[dl.input_feature] = b.add(c_base, ci)
            ridx[dl.kernel_input_feature] = ci
            ridx[dl.kernel_output_feature] = o
            for s, w in enumerate(wd):
                inside, pos = window_position(b, oidx[dl.output_spatial[s]], kw[s], w,
                                              lhs.shape.dims[dl.input_spatial[s]])
                ok = b.and_(ok, inside)
                lidx[dl.input_spatial[s]] = b.select(ok, pos, i64(0))
                ridx[dl.kernel_spatial[s]] = b.sub(i64(w.size - 1), kw[s]) if w.reversal \
                    else kw[s]
            for d in range(lhs.shape.rank):  # out-of-window reads stay in bounds
                lidx[d] = b.select(ok, lidx[d], i64(0))
            x = to_accumulator(b, k.read(lhs, lidx), lpt, out_pt)
            y = to_accumulator(b, k.read(rhs, ridx), rpt, out_pt)
            acc = b.load(acc_slot)
            b.store(b.select(ok, mul_add(b, acc, x, y), acc), acc_slot)
        res = b.load(acc_slot)
        k.write(inst, oidx, from_compute(b, res, out_pt) if out_pt.is_float else res)
    k.finish()
    return [k.thunk()]
