"""Convolution as a direct loop nest (XLA semantics, like `jax.lax.conv_general_dilated`).

For every output element (batch b, output feature o, spatial s): with G = feature_group_count
* batch_group_count groups and og = output features / G, group g = o // og; the sum runs over
the kernel's input features c and window positions k of
`lhs[batch', feature', pos] * rhs[o, c, k']` where
* batch' = g * (N / batch_group_count) + b when batch_group_count > 1, else b;
* feature' = g * (kernel input features) + c when feature_group_count > 1 (else c);
* pos = s * stride + k * window_dilation - pad_low, which must be a multiple of the base
  (lhs) dilation and inside the input, else the term is 0 (padding / dilation holes);
* k' = size - 1 - k for reversed window dims.
Floats accumulate in f32 (f64 for f64 results) and round once; integers wrap.
Plain and simple: no blocking or vectorisation beyond what LLVM finds (future work).
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.backend_cpu.emit_dot import load_as
from xlc.backend_cpu.emit_loops import operand_buffers
from xlc.backend_cpu.emitter import CpuEmitter, FnCtx, element_type, i64, loop_over
from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import multi_to_linear, window_position
from xlc.codegen.scalar_types import from_compute
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType

log = logging.getLogger("xlc.backend_cpu")


def emit_convolution(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """A convolution (see the module docstring)."""
    lhs, rhs = inst.operands
    out_pt = element_type(inst.shape, inst.name)
    if out_pt.is_complex or out_pt is PrimitiveType.PRED:
        raise UnsupportedOpError(
            f"CPU backend: {out_pt.text} convolution is unsupported ({inst.name})")
    dl = inst.attrs["dim_labels"]
    fgc = int(inst.attrs.get("feature_group_count", 1))
    bgc = int(inst.attrs.get("batch_group_count", 1))
    nsp = len(dl.input_spatial)
    window = inst.attrs.get("window")
    wdims = list(window.dims) if window is not None else []
    if len(wdims) != nsp:
        raise UnsupportedOpError(f"CPU backend: convolution {inst.name} window rank mismatch")
    groups = fgc * bgc
    o_total = rhs.shape.dims[dl.kernel_output_feature]
    og = o_total // groups
    cg = rhs.shape.dims[dl.kernel_input_feature]
    n_out = lhs.shape.dims[dl.input_batch] // bgc
    k = em.kernel(ctx, inst.name, [(inst, ())] + operand_buffers(inst))
    b = k.b
    cty = (lu.F64 if out_pt is PrimitiveType.F64 else lu.F32) if out_pt.is_float \
        else lu.value_type(out_pt)
    with b.goto_entry_block():
        acc = b.alloca(cty)
    zero = lu.const(cty, 0)
    with loop_over(b, inst.shape, "o") as oidx:
        bo, o = oidx[dl.output_batch], oidx[dl.output_feature]
        g = b.sdiv(o, i64(og)) if groups > 1 else i64(0)
        in_b = b.add(b.mul(g, i64(n_out)), bo) if bgc > 1 else bo
        b.store(zero, acc)
        sizes = [cg] + [w.size for w in wdims]
        with lu.for_nest(b, sizes, "w") as ws:
            c, kpos = ws[0], ws[1:]
            in_f = b.add(b.mul(g, i64(cg)), c) if fgc > 1 else c
            ok: ir.Value = ir.Constant(lu.I1, 1)
            lidx: list[ir.Value] = [i64(0)] * lhs.shape.rank
            ridx: list[ir.Value] = [i64(0)] * rhs.shape.rank
            lidx[dl.input_batch], lidx[dl.input_feature] = in_b, in_f
            ridx[dl.kernel_output_feature], ridx[dl.kernel_input_feature] = o, c
            for i, wd in enumerate(wdims):
                inside, pos = window_position(b, oidx[dl.output_spatial[i]], kpos[i], wd,
                                              lhs.shape.dims[dl.input_spatial[i]])
                ok = b.and_(ok, inside)
                pos = b.select(ok, pos, i64(0))
                lidx[dl.input_spatial[i]] = pos
                ridx[dl.kernel_spatial[i]] = b.sub(i64(wd.size - 1), kpos[i]) if wd.reversal \
                    else kpos[i]
            x = load_as(k, b, lhs, multi_to_linear(b, lidx, lhs.shape), out_pt)
            y = load_as(k, b, rhs, multi_to_linear(b, ridx, rhs.shape), out_pt)
            if lu.is_float_type(cty):
                term = b.fmul(_widen(b, x, cty), _widen(b, y, cty))
                term = b.select(ok, term, zero)
                new = b.fadd(b.load(acc), term)
            else:
                term = b.select(ok, b.mul(x, y), zero)
                new = b.add(b.load(acc), term)
            b.store(new, acc)
        res = b.load(acc)
        if out_pt.is_float and out_pt is not PrimitiveType.F64:
            res = from_compute(b, res, out_pt)
        k.write(inst, oidx, res)
    k.finish()


def _widen(b: ir.IRBuilder, v: ir.Value, cty: ir.Type) -> ir.Value:
    return b.fpext(v, cty) if v.type != cty and lu.float_bits(v.type) < lu.float_bits(cty) else v
