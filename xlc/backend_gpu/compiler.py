"""The GPU compiler: HLO pass pipeline (as data), buffer assignment (256-byte alignment),
kernel + thunk emission, PTX through llvmlite's NVPTX target, optionally a cubin via ptxas.

`compile_gpu(module, options) -> GpuExecutable` is the backend factory for `xlc.api`.
Kernels and thunks come from the GpuEmitter over the explicit opcode table of registry.py.
Compiling never needs a GPU or cuda-python; running does (see cuda.py and runtime.py).
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field

from xlc.backend_gpu import nvptx
from xlc.backend_gpu.backend import GPU_ALIGNMENT
from xlc.backend_gpu.emit_async_copy import check_host_buffers
from xlc.backend_gpu.emitter import GpuEmitter
from xlc.backend_gpu.executable import GpuExecutable
from xlc.backend_gpu.registry import EMITTERS, UNSUPPORTED
from xlc.backend_gpu.streams import (
    StreamPlan,
    copy_streams,
    has_async_copies,
    plan_streams,
    prepare_multi_stream,
)
from xlc.errors import ArgumentError, UnsupportedOpError
from xlc.hlo.cost_analysis import H100
from xlc.hlo.ir import HloModule
from xlc.hlo.support import FOUR_BIT_TYPES, check_runnable
from xlc.options import CompileOptions, default_options
from xlc.passes.complex_dot import ComplexDotExpander
from xlc.passes.host_offload import HostOffload
from xlc.passes.memory_budget import BudgetPass
from xlc.passes.optimize import OptimizedModule, optimize_module, standard_passes
from xlc.passes.pipeline import FixedPoint, HloPass, dump_text
from xlc.passes.rematerialization import Rematerialization

log = logging.getLogger("xlc.backend_gpu")



def gpu_passes(options: CompileOptions) -> list[HloPass | FixedPoint]:
    """The GPU HLO pipeline, in order: the standard list (simplification to a fixed point,
    producer/consumer + multi-output fusion, cleanup, copy insertion, memory scheduler). GPU
    fusion rules equal the shared ones today; GPU-only passes go here, never into the shared
    pipeline."""
    return [
        # complex matrix products as four real ones: the GPU has no complex GEMM, and the
        # real dots take its tiled and tensor-core kernels (first: simplification then sees
        # the real dots, and fusion their real/imag splits)
        ComplexDotExpander(),
        # simplify, fuse (kLoop/kInput), multi-output fuse, row fusion (softmax / norms as one
        # kernel: `emit_row_fusion`), dots with their epilogues (kOutput: bias, activation,
        # residual, transpose: `gemm_epilogue.py`), clean up, insert copies, schedule
        *standard_passes(options, row_fusion=True, gemm_epilogues=True),
    ]


PCIE_BYTES_PER_S = 25e9
"""Host <-> device copy bandwidth per direction (pinned memory, PCIe 4/5 x16 in practice;
not yet measured on the lent H100, see ../shared/reference/gpu-h100.md)."""


OFFLOAD_MIN_BYTES = 1 << 16
"""Values smaller than this stay on the device (each copy also costs a few microseconds of
driver and DMA latency, which the cost model does not count)."""


def gpu_budget_passes(options: CompileOptions | None = None) -> list[BudgetPass]:
    """What fits a GPU program under `CompileOptions.memory_limit`, in order: host offload
    first (values idle across the peak wait in pinned host memory when the transfers hide
    behind the kernels between, which costs no compute), then rematerialization (recomputes
    what is cheap to recompute). Kernels are priced as `options` compiles them (f32 dots in
    TF32 unless default_matmul_precision is "highest")."""
    precision = options.default_matmul_precision if options is not None else "default"
    return [HostOffload(device=H100, pcie_bytes_per_s=PCIE_BYTES_PER_S,
                        min_bytes=OFFLOAD_MIN_BYTES, matmul_precision=precision),
            Rematerialization()]


@dataclass
class GpuCompileResult:
    """What emission produced: the PTX, optional cubin, kernel names, constants, the
    (unoptimised) NVPTX LLVM IR text and the PTX ISA version (x10)."""

    ptx: str
    cubin: bytes | None
    kernel_names: list[str]
    constants: dict[int, bytes]
    llvm_ir: str = ""
    ptx_version: int = nvptx.DEFAULT_PTX_VERSION
    ffi_modules: dict[str, dict[str, str]] = field(default_factory=dict)


def run_gpu_passes(module: HloModule, options: CompileOptions
                   ) -> tuple[OptimizedModule, dict[int, int] | None]:
    """Run the GPU pipeline on `module` in place and assign buffers (256-byte aligned).

    With `options.gpu_streams > 1` the entry is re-scheduled in BFS launch order, buffers
    are assigned under the PredecessorHloOrdering of the stream assignment, and that
    assignment (instruction uid -> stream) is returned second (else None)."""
    opt = optimize_module(module, options, passes=gpu_passes(options),
                          alignment=GPU_ALIGNMENT, name="gpu",
                          budget_passes=gpu_budget_passes(options))
    streams = None
    if options.gpu_streams > 1:
        opt.assignment, streams = prepare_multi_stream(module, options.gpu_streams,
                                                       GPU_ALIGNMENT)
    return opt, streams


def optimize_gpu(module: HloModule, options: CompileOptions) -> OptimizedModule:
    """The GPU pipeline and buffer assignment of `module` (in place), as `compile_gpu` runs
    them (256-byte alignment; multi-stream ordering when `options.gpu_streams > 1`)."""
    options = resolve_target(options)
    check_gpu_options(options)
    return run_gpu_passes(module, options)[0]


DEFAULT_SM = 80
"""The architecture GPU code targets when `gpu_sm` is None and no GPU is usable here."""


def target_sm(options: CompileOptions) -> int:
    """`options.gpu_sm`, or when it is None the architecture of the GPU of this machine
    (`cuda.device_sm()`), or DEFAULT_SM without a usable GPU."""
    if options.gpu_sm is not None:
        return options.gpu_sm
    from xlc.backend_gpu.cuda import device_sm

    return device_sm() or DEFAULT_SM


def resolve_target(options: CompileOptions) -> CompileOptions:
    """`options` with `gpu_sm` set (`target_sm`)."""
    return options if options.gpu_sm is not None else options.replace(gpu_sm=target_sm(options))


def check_gpu_options(options: CompileOptions, ptx_version: int | None = None) -> int:
    """Validate the GPU fields of `options` before anything is compiled; returns the PTX ISA
    version (x10) to emit. ArgumentError for an unknown `gpu_sm`, a PTX version that cannot
    target it, or `gpu_streams < 1`."""
    if options.gpu_streams < 1:
        raise ArgumentError(f"gpu_streams must be at least 1, got {options.gpu_streams}")
    if ptx_version is None:
        ptx_version = options.gpu_ptx_version
    return nvptx.ptx_version_for(target_sm(options), ptx_version)


def compile_gpu(module: HloModule, options: CompileOptions | None = None,
                ptx_version: int | None = None,
                assemble: bool = False) -> GpuExecutable:
    """Compile `module` (cloned; the caller's stays as is) for `sm_<options.gpu_sm>` (None:
    this machine's GPU, else sm_80: `target_sm`), emitting
    PTX ISA `ptx_version` (x10; default `options.gpu_ptx_version`, else
    `nvptx.ptx_version_for(sm)`). `options.gpu_graphs` makes `run` replay a CUDA graph.

    Returns a GpuExecutable holding the optimized module, buffer assignment, thunk schedule
    and PTX (plus a cubin when `assemble` and ptxas is on the PATH). Raises ArgumentError for
    an unsupported architecture / PTX version, UnsupportedOpError naming the instruction for
    anything without a GPU emitter and LoweringError when LLVM or ptxas rejects a kernel."""
    options = resolve_target(options or default_options())
    sm = target_sm(options)
    ptx_version = check_gpu_options(options, ptx_version)
    check_runnable(module, "GPU backend", FOUR_BIT_TYPES)
    t0 = time.perf_counter()
    mod = module.clone()
    opt, streams = run_gpu_passes(mod, options)
    _check_entry(mod)
    t1 = time.perf_counter()
    em = GpuEmitter(mod, opt.assignment, EMITTERS, UNSUPPORTED, sm=sm,
                    host_fallback=options.gpu_host_fallback,
                    matmul_precision=options.default_matmul_precision)
    seq = em.emit()
    if em.fallbacks:  # one warning per program (host_fallback.py)
        log.warning("%s: %d instruction(s) run on the host (no GPU code): %s", mod.name,
                    len(em.fallbacks), "; ".join(f"{i.name}: {why}" for i, why in em.fallbacks))
    check_host_buffers(opt.assignment.allocations, seq)
    num_streams, ordered = options.gpu_streams, False
    if has_async_copies(mod):  # one more stream for the transfers (streams.py)
        num_streams += 1
        if streams is None:
            streams, ordered = copy_streams(mod, options.gpu_streams), True
    plan: StreamPlan = plan_streams(mod, seq, num_streams, streams, ordered_copies=ordered)
    llvm_ir = str(em.llmod)
    t2 = time.perf_counter()
    ptx = nvptx.compile_ptx(llvm_ir, sm, ptx_version,
                            opt_level=max(1, options.opt_level))
    t3 = time.perf_counter()
    cubin = None
    if assemble and nvptx.ptxas_path() is not None:
        cubin = nvptx.ptxas(ptx, sm)
    t4 = time.perf_counter()
    # named stages: hlo -> opt.hlo (optimize_module) -> .ll -> .ptx (-> .cubin)
    dump_text(options, mod.name, f"sm_{sm}.ll", llvm_ir)
    ptx_path = dump_text(options, mod.name, f"sm_{sm}.ptx", ptx)
    if ptx_path is not None and cubin is not None:
        with open(ptx_path[:-len("ptx")] + "cubin", "wb") as f:
            f.write(cubin)
    dump_text(options, mod.name, "thunks.json", json.dumps(plan.thunks.to_dict(), indent=1))
    timings = {"hlo_passes_s": t1 - t0, "emit_s": t2 - t1, "ptx_s": t3 - t2,
               "ptxas_s": t4 - t3}
    log.debug("compiled %s for sm_%d: %s", mod.name, sm, timings)
    return GpuExecutable(opt, plan, GpuCompileResult(ptx, cubin, em.kernel_names,
                                                     em.constants, llvm_ir, ptx_version,
                                                     em.ffi_modules),
                         sm=sm, timings=timings, graphs=options.gpu_graphs,
                         profile=options.profile)


def _check_entry(module: HloModule) -> None:
    assert module.entry is not None
    for p in module.entry.parameters:
        if not p.shape.is_array:
            raise UnsupportedOpError(
                f"GPU backend: tuple-shaped entry parameter {p.name} is unsupported")
