"""The GPU compiler: HLO pass pipeline (as data), buffer assignment (256-byte alignment),
kernel + thunk emission, PTX through llvmlite's NVPTX target, optionally a cubin via ptxas.

`compile_gpu(module, options) -> GpuExecutable` is the backend factory for `xlc.api`.
Compiling never needs a GPU or cuda-python; running does (see runtime.py).
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from xlc.backend_gpu import (  # noqa: F401  (importing registers the emitters)
    emit_control,
    emit_conv,
    emit_gemm,
    emit_loop,
    emit_misc,
    emit_reduce,
    emit_sort,
    emit_transpose,
    nvptx,
)
from xlc.backend_gpu.emitter import GpuEmitter
from xlc.backend_gpu.executable import GpuExecutable
from xlc.backend_gpu.streams import StreamPlan, plan_streams, prepare_multi_stream
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloModule
from xlc.options import CompileOptions, default_options
from xlc.passes.optimize import OptimizedModule, optimize_module, standard_passes
from xlc.passes.pipeline import FixedPoint, HloPass, dump_text

log = logging.getLogger("xlc.backend_gpu")

GPU_ALIGNMENT = 256
"""Every buffer slice starts on a 256-byte boundary (cudaMalloc's alignment), so kernels may
use 128-bit vector accesses on any slice."""


def gpu_passes(options: CompileOptions) -> list[HloPass | FixedPoint]:
    """The GPU HLO pipeline, in order: the standard list (simplification to a fixed point,
    producer/consumer + multi-output fusion, cleanup, copy insertion, memory scheduler). GPU
    fusion rules equal the shared ones today; GPU-only passes go here, never into the shared
    pipeline."""
    return [
        # simplify, fuse (kLoop/kInput), multi-output fuse, clean up, insert copies, schedule
        *standard_passes(options),
    ]


@dataclass
class GpuCompileResult:
    """What emission produced: the PTX, optional cubin, kernel names, constants and the
    (unoptimised) NVPTX LLVM IR text."""

    ptx: str
    cubin: bytes | None
    kernel_names: list[str]
    constants: dict[int, bytes]
    llvm_ir: str = ""


def run_gpu_passes(module: HloModule, options: CompileOptions
                   ) -> tuple[OptimizedModule, dict[int, int] | None]:
    """Run the GPU pipeline on `module` in place and assign buffers (256-byte aligned).

    With `options.gpu_streams > 1` the entry is re-scheduled in BFS launch order, buffers
    are assigned under the PredecessorHloOrdering of the stream assignment, and that
    assignment (instruction uid -> stream) is returned second (else None)."""
    opt = optimize_module(module, options, passes=gpu_passes(options),
                          alignment=GPU_ALIGNMENT, name="gpu")
    streams = None
    if options.gpu_streams > 1:
        opt.assignment, streams = prepare_multi_stream(module, options.gpu_streams,
                                                       GPU_ALIGNMENT)
    return opt, streams


def compile_gpu(module: HloModule, options: CompileOptions | None = None,
                ptx_version: int = nvptx.DEFAULT_PTX_VERSION,
                assemble: bool = False) -> GpuExecutable:
    """Compile `module` (cloned; the caller's stays as is) for `sm_<options.gpu_sm>`.

    Returns a GpuExecutable holding the optimized module, buffer assignment, thunk schedule
    and PTX (plus a cubin when `assemble` and ptxas is on the PATH). Raises UnsupportedOpError
    naming the instruction for anything without a GPU emitter and LoweringError when LLVM or
    ptxas rejects a kernel."""
    options = options or default_options()
    t0 = time.perf_counter()
    mod = module.clone()
    opt, streams = run_gpu_passes(mod, options)
    _check_entry(mod)
    t1 = time.perf_counter()
    em = GpuEmitter(mod, opt.assignment, options.gpu_sm)
    seq = em.emit()
    plan: StreamPlan = plan_streams(mod, seq, options.gpu_streams, streams)
    llvm_ir = str(em.llmod)
    t2 = time.perf_counter()
    ptx = nvptx.compile_ptx(llvm_ir, options.gpu_sm, ptx_version,
                            opt_level=max(1, options.opt_level))
    t3 = time.perf_counter()
    cubin = None
    if assemble and nvptx.ptxas_path() is not None:
        cubin = nvptx.ptxas(ptx, options.gpu_sm)
    t4 = time.perf_counter()
    # named stages: hlo -> opt.hlo (optimize_module) -> .ll -> .ptx (-> .cubin)
    dump_text(options, mod.name, f"sm_{options.gpu_sm}.ll", llvm_ir)
    dump_text(options, mod.name, f"sm_{options.gpu_sm}.ptx", ptx)
    dump_text(options, mod.name, "thunks.json", json.dumps(plan.thunks.to_dict(), indent=1))
    timings = {"hlo_passes_s": t1 - t0, "emit_s": t2 - t1, "ptx_s": t3 - t2,
               "ptxas_s": t4 - t3}
    log.debug("compiled %s for sm_%d: %s", mod.name, options.gpu_sm, timings)
    return GpuExecutable(opt, plan, GpuCompileResult(ptx, cubin, em.kernel_names,
                                                     em.constants, llvm_ir),
                         sm=options.gpu_sm, timings=timings)


def _check_entry(module: HloModule) -> None:
    assert module.entry is not None
    for p in module.entry.parameters:
        if not p.shape.is_array:
            raise UnsupportedOpError(
                f"GPU backend: tuple-shaped entry parameter {p.name} is unsupported")
