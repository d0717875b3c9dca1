"""Dots through the shared packed GEMM generator (`xlc.codegen.gemm`, BLIS-style: packed A and
B panels, 14 x 32 AVX-512 register tiles, split over m or n panels into `gemm_shares` shares,
several per thread, that any thread of the pool takes; packing scratch is per thread slot).

Used for f32/f64 dots whose contracting dims merge into one (`gemm_plan_for_dot`): batch and
free dims that merge become the GEMM's batch/m/n dims, the others loops around its call; any
strides and layouts (transposed operands need no copy). The generator's packing
scratch (`scratch_bytes`, per call) is malloc'ed and freed inside the kernel: after the first
call glibc serves it from the heap, so it costs ~1 us and no page faults - and it is not a
buffer of the BufferAssignment (no other instruction ever sees it).
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.backend_cpu.emitter import CpuEmitter, Kernel, i64
from xlc.codegen import llvm_utils as lu
from xlc.codegen.gemm import (
    emit_gemm,
    emit_gemm_entry,
    gemm_shares,
    recommended_threads,
    scratch_bytes,
)
from xlc.codegen.gemm_dot import DotGemm
from xlc.hlo.ir import HloInstruction

log = logging.getLogger("xlc.backend_cpu")

def emit_gemm_dot(em: CpuEmitter, k: Kernel, inst: HloInstruction, plan: DotGemm) -> None:
    """The dot `inst` as the GEMM calls of `plan` (`xlc.codegen.gemm_dot.gemm_plan_for_dot`)
    into kernel `k` (which holds inst and its two operands): `plan.loops` become loops around
    the call, offsetting the three pointers."""
    spec = plan.spec
    module = em.llmod
    name = module.get_unique_name(f"{em.entry_name}.gemm.{inst.name}")
    emit_gemm(module, name, spec)
    gemm_fn = module.globals[name]
    gemm_fn.linkage = "internal"
    if (pack_fn := module.globals.get(f"{name}.pack")) is not None:
        pack_fn.linkage = "internal"
    nthreads = recommended_threads(spec, em.threads)
    b = k.b
    lhs, rhs = inst.operands
    ety = lu.value_type(spec.dtype)
    bases = [k.ptr(lhs), k.ptr(rhs), k.ptr(inst)]
    nbytes = scratch_bytes(spec, nthreads)
    malloc = _declare(module, "malloc", ir.FunctionType(lu.PTR, [lu.I64]))
    free = _declare(module, "free", ir.FunctionType(lu.VOID, [lu.PTR]))
    scratch = b.call(malloc, [i64(nbytes)]) if nbytes else ir.Constant(lu.PTR, None)
    entry = None
    if nthreads > 1:
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
    if nbytes:
        b.call(free, [scratch])


def _declare(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, fnty, name=name)
