"""The CPU compiler: HLO pass pipeline, buffer assignment, LLVM emission, O3 for the host CPU,
MCJIT. `compile_cpu(module, options)` is the backend factory for `xlc.api`.
"""
from __future__ import annotations

import logging
from pathlib import Path

import llvmlite.binding as llvm

from xlc.backend_cpu import jit
from xlc.backend_cpu.backend import CPU_ALIGNMENT
from xlc.backend_cpu.dedupe import dedupe_functions
from xlc.backend_cpu.emitter import CpuEmitter
from xlc.backend_cpu.executable import CpuExecutable
from xlc.backend_cpu.gemm_workspace import GemmWorkspace, GemmWorkspaceShrink
from xlc.backend_cpu.parallel import host_threads
from xlc.backend_cpu.profile_lib import ProfileEmit
from xlc.backend_cpu.registry import EMITTERS
from xlc.backend_cpu.sort_workspace import SortWorkspace, SortWorkspaceShrink
from xlc.codegen import llvm_utils as lu
from xlc.compile_stages import Stages, gc_paused
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloModule
from xlc.hlo.support import FOUR_BIT_TYPES, check_runnable
from xlc.options import CompileOptions, default_options
from xlc.passes.buffer_assignment import BufferAssignment
from xlc.passes.complex_dot import ComplexDotExpander
from xlc.passes.conv_to_dot import ConvToDot
from xlc.passes.copy_insertion import CopyInsertion
from xlc.passes.optimize import OptimizedModule, optimize_module, standard_passes
from xlc.passes.pipeline import FixedPoint, HloPass, dump_text
from xlc.passes.rematerialization import Rematerialization

log = logging.getLogger("xlc.backend_cpu")

STAGES = ("hlo-passes", "emit", "llvm-optimize", "llvm-codegen")
"""The stages of a CPU compile, as logged on `xlc.compile` (`xlc.compile_stages`)."""


def cpu_passes(options: CompileOptions) -> list[HloPass | FixedPoint]:
    """The CPU HLO pipeline: convolutions as dots, complex dots as real ones, then the
    standard list (simplification, transpose folding, loop/input and multi-output fusion, row
    fusion, cleanup, copy insertion, memory scheduling), with row fusion (`emit_row_fusion`)
    and gather fusion (the elemental gather rule) on, and the GEMM and sort workspaces."""
    standard = standard_passes(options, row_fusion=True, fuse_gather=True)
    at = next(i for i, p in enumerate(standard) if p.name == CopyInsertion.name)
    return [
        # Convolutions as sums of patches @ kernel slices on the packed GEMM (im2col, per
        # window position or in between: a cost model and the memory limit choose); first, so
        # that the transposes/slices it creates are simplified and fused like any others.
        ConvToDot(options.memory_limit, host_threads(options.threads)),
        # Complex matrix products (also any the line above made) as four real ones on the
        # packed GEMM (the CPU has no complex GEMM); before simplification and fusion, which
        # then see the real dots and their splits.
        ComplexDotExpander(),
        *standard[:at],
        # Dots on the packed GEMM become custom-calls with a workspace output, so the GEMM's
        # packing scratch is a buffer of the assignment; after fusion (dots are never fused
        # producers), before copy insertion and scheduling see the final instructions.
        GemmWorkspace(host_threads(options.threads)),
        # Likewise the radix / merge sorts' scratch (sorts of lines longer than 48).
        SortWorkspace(host_threads(options.threads)),
        *standard[at:],
    ]


def run_cpu_passes(module: HloModule, options: CompileOptions) -> OptimizedModule:
    """Run the CPU pipeline on `module` (in place), schedule it and assign its buffers."""
    # Under a memory limit: recompute values first, then shrink GEMM workspaces (slower GEMMs),
    # then sort workspaces (one line at a time, or the merge sort)
    threads = host_threads(options.threads)
    return optimize_module(module, options, passes=cpu_passes(options),
                           alignment=CPU_ALIGNMENT, name="cpu",
                           budget_passes=[Rematerialization(), GemmWorkspaceShrink(threads),
                                          SortWorkspaceShrink(threads)])


def _check_entry(module: HloModule, ba: BufferAssignment) -> None:
    assert module.entry is not None
    for p in module.entry.parameters:
        if not p.shape.is_array:
            raise UnsupportedOpError(
                f"CPU backend: tuple-shaped entry parameter {p.name} is unsupported")


def compile_cpu(module: HloModule, options: CompileOptions | None = None, *,
                clone: bool = True) -> CpuExecutable:
    """Compile `module` for the host CPU. The module is cloned (the caller's stays as is),
    unless `clone=False`: then it is optimized in place (for callers that pass a private copy,
    as `xlc.api` does; cloning goes through the module's text, ~12 ms per transformer layer).

    Raises UnsupportedOpError naming the instruction for anything without a CPU emitter, and
    LoweringError when the generated LLVM IR fails verification."""
    options = options or default_options()
    check_runnable(module, "CPU backend", FOUR_BIT_TYPES)
    stages = Stages(f"{module.name} [cpu]", STAGES)
    with gc_paused():
        mod = module.clone() if clone else module
        with stages.run("hlo-passes", "hlo_passes_s"):
            optimized = run_cpu_passes(mod, options)
            ba = optimized.assignment
            _check_entry(mod, ba)
        entry_name = lu.unique_symbol(f"xlc_{_ident(mod.name)}")
        with stages.run("emit", "emit_s"):
            emitter = CpuEmitter(mod, ba, entry_name, EMITTERS, host_threads(options.threads))
            if options.profile:  # run-time profiling hooks (profile_lib.py)
                emitter.profile = ProfileEmit(emitter)
            llmod = emitter.emit()
            if emitter.profile is not None:
                emitter.profile.finish()
            dedupe_functions(llmod)
            llvm_ir = str(llmod)  # printed once: llvmlite's printer costs like emission
        with stages.run("llvm-optimize", "llvm_s"):
            ref = lu.parse_and_verify(llvm_ir, entry_name)
            optimize_cpu(ref, options.opt_level)
        with stages.run("llvm-codegen", "llvm_s"):
            jit.jit_engine().add_module(ref)
    timings = dict(stages.timings)
    exe = CpuExecutable(mod, ba, entry_name, jit.jit_engine().address(entry_name),
                        llvm_ir=llvm_ir, optimized_ir=str(ref), timings=timings,
                        optimized=optimized)
    if options.dump_to:
        dump_cpu_stages(options, exe)
    log.debug("compiled %s: %s", mod.name, timings)
    return exe


def dump_cpu_stages(options: CompileOptions, exe: CpuExecutable) -> None:
    """Write the code stages of `exe` into `options.dump_to`, named as XLA names them:
    `<module>.ir-no-opt.ll` (as emitted), `<module>.ir-with-opt.ll` (after LLVM's pipeline)
    and `<module>.o` (host object code)."""
    name = exe.module.name
    dump_text(options, name, "ir-no-opt.ll", exe.llvm_ir)
    path = dump_text(options, name, "ir-with-opt.ll", exe.optimized_ir)
    if path is not None:
        Path(path[: -len("ir-with-opt.ll")] + "o").write_bytes(exe.object_code())


def optimize_cpu(ref: llvm.ModuleRef, level: int) -> None:
    """The new-pass-manager pipeline at O`level` for the host CPU with loop and SLP
    vectorisation and interleaving, but without (full) loop unrolling: the kernels' static
    trip counts otherwise make LLVM unroll every small loop nest completely, multiplying code
    size and compile time (shape_ops: 268 KB of IR, ~10x the compile time) for no speed."""
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    if level >= 2:
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_interleaving = True
    pto.loop_unrolling = False
    pb = llvm.create_pass_builder(lu.target_machine(), pto)
    pb.getModulePassManager().run(ref, pb)
    if level >= 2:
        lu.inline_vector_variants(ref, pb)


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)[:40] or "module"
