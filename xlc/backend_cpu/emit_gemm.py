"""Dots through the shared packed GEMM generator (`xlc.backend_cpu.gemm`, BLIS-style: packed A and
B panels, 14 x 32 AVX-512 register tiles, split over m or n panels into `gemm_shares` shares,
several per thread, that any thread of the pool takes; packing scratch is per thread slot).

Used for f32/f64 dots whose contracting dims merge into one (`gemm_plan_for_dot`): batch and
free dims that merge become the GEMM's batch/m/n dims, the others loops around its call; any
strides and layouts (transposed operands need no copy).

Such dots reach the emitter as `__xlc$gemm` custom-calls made by the `gemm-workspace` pass
(`gemm_workspace.py`, before buffer assignment): output {0} is the dot's result, output {1} a
u8 workspace of `scratch_bytes(spec, threads)` bytes - the GEMM's packing buffers, one set per
thread slot plus B packed once where the shares split m. The buffer assignment places the
workspace like any temp (live only during the call), so `memory_stats()` counts it and a call
allocates nothing.
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.backend_cpu.emitter import CpuEmitter, FnCtx, Kernel, i64, slices_overlap
from xlc.backend_cpu.gemm import (
    emit_gemm,
    emit_gemm_entry,
    gemm_shares,
    packs_b_once,
    recommended_threads,
    scratch_bytes,
)
from xlc.backend_cpu.gemm_dot import DotGemm, gemm_plan_for_dot
from xlc.codegen import llvm_utils as lu
from xlc.errors import LoweringError
from xlc.hlo.gemm_call import GEMM_TARGET, gemm_call_dot
from xlc.hlo.ir import HloInstruction

log = logging.getLogger("xlc.backend_cpu")

def emit_gemm_call(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """A `__xlc$gemm` custom-call (see the module docstring): the dot it stands for as the GEMM
    calls of its plan, packing into the workspace output {1}."""
    dot = gemm_call_dot(inst)
    plan = gemm_plan_for_dot(dot)
    if plan is None:
        raise LoweringError(f"CPU backend: {inst.name} is a '{GEMM_TARGET}' custom-call whose "
                            "dot is no packed GEMM")
    lhs, rhs = inst.operands
    out = em.slice(inst, (0,))
    # the result may lie over its lhs only where the GEMM stores it correctly there
    over_lhs = em.slice(lhs) == out and plan.writes_over_lhs
    for what, operand in (("lhs", lhs), ("rhs", rhs)):
        if slices_overlap(out, em.slice(operand)) and not (what == "lhs" and over_lhs):
            raise LoweringError(f"CPU backend: the result of {inst.name} overlaps its {what} "
                                f"{operand.name}, which its GEMM cannot do")
    k = em.kernel(ctx, inst.name, [(inst, (0,)), (inst, (1,)), (lhs, ()), (rhs, ())])
    emit_gemm_dot(em, k, inst.name, plan, [k.ptr(lhs), k.ptr(rhs), k.ptr(inst, (0,))],
                  k.ptr(inst, (1,)), inst.shape.tuple_shapes[1].dims[0])  # type: ignore[index]
    k.finish()


def emit_gemm_dot(em: CpuEmitter, k: Kernel, label: str, plan: DotGemm,
                  bases: list[ir.Value], scratch: ir.Value, scratch_size: int) -> None:
    """The GEMM calls of `plan` (`xlc.backend_cpu.gemm_dot.gemm_plan_for_dot`) into kernel `k`,
    on the lhs, rhs and output addresses `bases`, packing into `scratch` (`scratch_size`
    bytes, at least `scratch_bytes(spec, threads)`): `plan.loops` become loops around the
    call, offsetting the three pointers."""
    spec = plan.spec
    module = em.llmod
    name = module.get_unique_name(f"{em.entry_name}.gemm.{label}")
    emit_gemm(module, name, spec)
    gemm_fn = module.globals[name]
    gemm_fn.linkage = "internal"
    if (pack_fn := module.globals.get(f"{name}.pack")) is not None:
        pack_fn.linkage = "internal"
    nthreads = recommended_threads(spec, em.threads)
    # a workspace shrunk under a memory limit (GemmWorkspaceShrink) holds fewer thread slots
    while nthreads > 1 and scratch_bytes(spec, nthreads) > scratch_size:
        nthreads -= 1
    if scratch_bytes(spec, nthreads) > scratch_size:
        raise LoweringError(f"CPU backend: the workspace of {label} holds {scratch_size} "
                            f"bytes, its GEMM needs {scratch_bytes(spec, nthreads)} on "
                            f"{nthreads} threads (compiled for other thread counts?)")
    b = k.b
    ety = lu.value_type(spec.dtype)
    entry = None
    if nthreads > 1 or packs_b_once(spec):
        entry = emit_gemm_entry(module, f"{name}.mt", name, spec)
        entry.linkage = "internal"
    with lu.for_nest(b, [size for size, *_ in plan.loops], name="gl") as idx:
        offs = [i64(0)] * 3
        for v, (_, *strides) in zip(idx, plan.loops):
            offs = [b.add(o, b.mul(v, i64(st))) for o, st in zip(offs, strides)]
        args = [b.gep(p, [o], inbounds=True, source_etype=ety) for p, o in zip(bases, offs)]
        if entry is not None:
            b.call(entry, args + [scratch, i64(gemm_shares(spec, nthreads)), i64(nthreads)])
        else:
            b.call(gemm_fn, args + [scratch, i64(0), i64(1), i64(0)])
