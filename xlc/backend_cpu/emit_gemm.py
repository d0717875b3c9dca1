"""Dots through the shared packed GEMM generator (`xlc.codegen.gemm`, BLIS-style: packed A and
B panels, 14 x 32 AVX-512 register tiles, threads split over m or n panels).

Used for f32/f64 dots with one lhs free dim, one rhs free dim, one contracting dim and at most
one batch dim, with any strides (transposed operands need no copy). The generator's packing
scratch (`scratch_bytes`, per call) is malloc'ed and freed inside the kernel: after the first
call glibc serves it from the heap, so it costs ~1 us and no page faults - and it is not a
buffer of the BufferAssignment (no other instruction ever sees it).
"""
from __future__ import annotations

import logging
from typing import Any

from llvmlite import ir

from xlc.backend_cpu.emitter import CpuEmitter, Kernel, i64
from xlc.codegen import llvm_utils as lu
from xlc.codegen.gemm import GemmSpec, emit_gemm, recommended_threads, scratch_bytes
from xlc.codegen.parallel import emit_threaded_entry
from xlc.errors import XlcError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType

log = logging.getLogger("xlc.backend_cpu")

def gemm_spec(inst: HloInstruction, plan: Any) -> GemmSpec | None:
    """The GemmSpec of dot `inst` (plan: emit_dot's _DotPlan), or None when the generator does
    not apply (types, dimension counts)."""
    pt = inst.shape.element_type
    if pt not in (PrimitiveType.F32, PrimitiveType.F64) or \
            any(op.shape.element_type is not pt for op in inst.operands):
        return None
    p = plan
    if not (len(p.msizes) == len(p.nsizes) == len(p.ksizes) == 1) or len(p.bsizes) > 1:
        return None
    batch = p.bsizes[0] if p.bsizes else 1
    sa = p.ls[p.lb[0]] if p.lb else 0
    sb = p.rs[p.rb[0]] if p.rb else 0
    sc = p.os[p.ob[0]] if p.ob else 0
    try:
        return GemmSpec(p.msizes[0], p.nsizes[0], p.ksizes[0], batch,
                        (sa, p.ls[p.lf[0]], p.ls[p.lc[0]]),
                        (sb, p.rs[p.rc[0]], p.rs[p.rf[0]]),
                        (sc, p.os[p.om[0]], p.os[p.on[0]]), pt)
    except XlcError:
        return None


def emit_gemm_dot(em: CpuEmitter, k: Kernel, inst: HloInstruction, spec: GemmSpec) -> None:
    """C = A @ B for `spec` into kernel `k` (which holds inst and its two operands)."""
    module = em.llmod
    name = module.get_unique_name(f"{em.entry_name}.gemm.{inst.name}")
    emit_gemm(module, name, spec)
    gemm_fn = module.globals[name]
    gemm_fn.linkage = "internal"
    nthreads = recommended_threads(spec, em.threads)
    b = k.b
    lhs, rhs = inst.operands
    args = [k.ptr(lhs), k.ptr(rhs), k.ptr(inst)]
    nbytes = scratch_bytes(spec, nthreads)
    malloc = _declare(module, "malloc", ir.FunctionType(lu.PTR, [lu.I64]))
    free = _declare(module, "free", ir.FunctionType(lu.VOID, [lu.PTR]))
    scratch = b.call(malloc, [i64(nbytes)]) if nbytes else ir.Constant(lu.PTR, None)
    if nthreads > 1:
        entry = emit_threaded_entry(module, f"{name}.mt", gemm_fn, 4)
        entry.linkage = "internal"
        b.call(entry, args + [scratch, i64(nthreads)])
    else:
        b.call(gemm_fn, args + [scratch, i64(0), i64(1)])
    if nbytes:
        b.call(free, [scratch])


def _declare(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, fnty, name=name)
