"""The optimization entry point every backend uses: run a pass list, schedule, assign buffers.

`standard_passes()` is the backend-independent pipeline (the start of the CPU/GPU lists):
simplification, transpose folding, fusion, multi-output fusion, cleanup, copy insertion and the
memory scheduler. Fusions that need emitter support are flags of it (`row_fusion`,
`fuse_gather`); `interpreter_passes()` is the interpreter's list with all of them on. A backend
passes its own list (written as data in its compiler module) to `optimize_module`; nothing here
branches on the target.

Emitter contracts the memory passes rely on (every backend, flags or not):
* a tuple value read only through get-tuple-element gets no index table: never write it
  (`DataflowAnalysis.tables_without_storage`);
* slices of buffers smaller than the backend alignment are aligned only to the largest power of
  two dividing their size (`heap_simulator.chunk_alignment`): check the offset before using
  vector accesses wider than that;
* a kInput row-reduction output may share the buffer of a per-row operand
  (`alias_rules._share_fusion`): read operand element i, for every output, before writing
  output element i (accumulate in registers, write each row's result last).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from xlc.errors import MemoryLimitError
from xlc.hlo.ir import HloModule
from xlc.hlo.verifier import verify_module
from xlc.options import CompileOptions, default_options
from xlc.passes import simplification_passes
from xlc.passes.batched_indexing import BatchedIndexing
from xlc.passes.buffer_assignment import BufferAssignment, assign_buffers
from xlc.passes.buffer_validator import validate_buffer_assignment
from xlc.passes.copy_insertion import CopyInsertion
from xlc.passes.cse import CommonSubexpressionElimination
from xlc.passes.dce import DeadCodeElimination
from xlc.passes.forwarding_layouts import ForwardingLayouts
from xlc.passes.fusion import InstructionFusion
from xlc.passes.gemm_epilogue import GemmEpilogueFusion
from xlc.passes.heap_simulator import DEFAULT_ALIGNMENT
from xlc.passes.memory_budget import BudgetPass, BudgetReport, fit_to_budget
from xlc.passes.multi_output_fusion import MultiOutputFusion
from xlc.passes.pipeline import FixedPoint, HloPass, PassTiming, Pipeline, dump_text
from xlc.passes.rematerialization import Rematerialization
from xlc.passes.row_fusion import RowFusion
from xlc.passes.scheduler import MemoryScheduler
from xlc.passes.spmd import SpmdAnnotations
from xlc.passes.transpose_folding import TransposeFolding
from xlc.passes.widen_reductions import WidenNarrowReductions

log = logging.getLogger("xlc.passes.optimize")

MEMORY_STATS_KEYS = ("parameter_bytes", "output_bytes", "temp_bytes", "constant_bytes",
                     "alias_bytes", "peak_bytes")


def standard_passes(options: CompileOptions, row_fusion: bool = False,
                    fuse_gather: bool = False, gemm_epilogues: bool = False
                    ) -> list[HloPass | FixedPoint]:
    """The backend-independent pass list, in order, each entry with the reason it sits there.

    The flags turn on fusions that need emitter support (see `InstructionFusion`): a backend
    enables each once its emitter honours the contract. `interpreter_passes` enables all."""
    passes: list[HloPass | FixedPoint] = []
    # Sharding annotations are the identity on one device; gathers and scatters with batching
    # dims become plain ones (extra iota index components), which every emitter handles.
    passes += [SpmdAnnotations(), BatchedIndexing()]
    # Tuples and get-tuple-elements declaring another layout than the value they forward get a
    # relayout copy first: every later pass and emitter may then forward buffers unchanged.
    passes.append(ForwardingLayouts())
    # Inline calls and simplify to a fixed point first: fusion decisions need the final graph.
    passes += simplification_passes(options)
    # f16/bf16 add/multiply reductions accumulate in f32 (the evaluator's and jax.numpy's
    # semantics); after simplification, whose rewrites can create reductions, and before
    # fusion, which puts the converts it adds into the reduction's kernel.
    passes.append(WidenNarrowReductions())
    # Transposes feeding a dot become its dimension numbers (never materialized); before
    # fusion, which would otherwise leave them as standalone copies.
    passes.append(TransposeFolding())
    if options.fusion:
        # Producer-consumer fusion (loop and input fusions), then siblings reading one operand;
        # again while that changes anything (merging siblings can leave a producer with one
        # user, which is then fusible into the merged fusion).
        passes.append(FixedPoint([InstructionFusion(fuse_gather=fuse_gather),
                                  MultiOutputFusion()], max_iters=4, name="fusion-rounds"))
        if row_fusion:
            # Row-wise softmax & co. as one kLoop fusion with its reductions inside.
            passes.append(RowFusion())
        if gemm_epilogues:
            # A dot and the elementwise / transposing loop fusion reading it as one kOutput
            # fusion (the GEMM stores the final values); after the loop fusions are final.
            passes.append(GemmEpilogueFusion())
        # Fusion can leave duplicates (cloned cheap producers) and dead instructions.
        passes += [FixedPoint([CommonSubexpressionElimination(), DeadCodeElimination()],
                              name="fusion-cleanup")]
    # Copies that while loops, in-place ops and live-out parameters/constants need; after all
    # graph rewrites so that nothing moves them again.
    passes.append(CopyInsertion())
    # Last: the memory-minimising schedule that buffer assignment packs against.
    passes.append(MemoryScheduler(options.scheduler))
    return passes


def interpreter_passes(options: CompileOptions) -> list[HloPass | FixedPoint]:
    """`standard_passes` with every emitter-dependent fusion on (the evaluator runs any fused
    computation): gather fusion and row fusion - today the same list as the CPU backend's
    `cpu_passes` (the one `tools/memory_vs_xla.py` reports by default)."""
    return standard_passes(options, row_fusion=True, fuse_gather=True)


@dataclass
class OptimizedModule:
    """The result of `optimize_module`: the optimized, scheduled module and its buffers."""

    module: HloModule
    assignment: BufferAssignment
    timings: list[PassTiming] = field(default_factory=list)
    seconds: float = 0.0
    budget: BudgetReport | None = None  # what fitting under memory_limit did (None: no limit)

    def memory_stats(self) -> dict[str, int]:
        """Parameter / output / temp / constant / alias / peak bytes (and counts)."""
        return dict(self.assignment.stats())

    def timing_report(self) -> str:
        lines = [f"{t.name:<32} {1e3 * t.seconds:9.2f} ms{'  (changed)' if t.changed else ''}"
                 for t in self.timings]
        lines.append(f"{'total':<32} {1e3 * self.seconds:9.2f} ms")
        return "\n".join(lines)


def optimize_module(module: HloModule, options: CompileOptions | None = None,
                    passes: list[HloPass | FixedPoint] | None = None,
                    alignment: int = DEFAULT_ALIGNMENT,
                    name: str = "standard", budget_passes: list[BudgetPass] | None = None,
                    **overrides: Any) -> OptimizedModule:
    """Run `passes` (default `standard_passes`) on `module` in place, then assign buffers;
    with `options.memory_limit`, then run `budget_passes` (default: rematerialization) until
    the device peak fits (`memory_budget.fit_to_budget`): a warning when it cannot, a
    MemoryLimitError with `memory_limit_strict`.

    Requires a verified module. Guarantees: `module.schedule` is set, the returned assignment
    covers every buffer, and (when `options.verify`) the buffer-assignment validator passed.
    `overrides` replace CompileOptions fields (e.g. `dump_to=`)."""
    opts = (options or default_options())
    if overrides:
        opts = opts.replace(**overrides)
    t0 = time.perf_counter()
    pipeline = Pipeline(name, passes if passes is not None else standard_passes(opts))
    pipeline.run(module, opts)
    if module.schedule is None:
        MemoryScheduler(opts.scheduler).run(module)
    t1 = time.perf_counter()
    assignment = assign_buffers(module, alignment=alignment)
    t2 = time.perf_counter()
    timings = list(pipeline.timings) + [PassTiming("buffer_assignment", t2 - t1, False)]
    budget = None
    if opts.memory_limit is not None:
        assignment, budget = _fit(module, assignment, opts, alignment, budget_passes)
        timings.append(PassTiming("memory_budget", time.perf_counter() - t2,
                                  bool(budget.steps)))
    if opts.verify:
        validate_buffer_assignment(assignment)
    if opts.dump_to:
        from xlc.hlo.printer import print_module

        dump_text(opts, module.name, "after_optimizations.hlo", print_module(module))
        dump_text(opts, module.name, "buffer-assignment.txt", assignment.report())
    log.info("optimized %s in %.1f ms", module.name, 1e3 * (time.perf_counter() - t0))
    return OptimizedModule(module, assignment, timings, time.perf_counter() - t0, budget)


def _fit(module: HloModule, assignment: BufferAssignment, opts: CompileOptions, alignment: int,
         budget_passes: list[BudgetPass] | None) -> tuple[BufferAssignment, BudgetReport]:
    assert opts.memory_limit is not None
    passes: list[BudgetPass] = (budget_passes if budget_passes is not None
                                else [Rematerialization()])
    assignment, report = fit_to_budget(module, assignment, opts.memory_limit, passes,
                                       lambda m: assign_buffers(m, alignment=alignment))
    if opts.verify:
        verify_module(module)
    if not report.fits:
        msg = (f"{module.name}: cannot fit under memory_limit={opts.memory_limit} bytes: the "
               f"smallest peak reached is {report.peak_after} bytes (from "
               f"{report.peak_before}; tried {', '.join(p.name for p in passes) or 'nothing'})")
        if opts.memory_limit_strict:
            raise MemoryLimitError(msg)
        log.warning("%s", msg)
    else:
        log.info("%s", report.summary())
    return assignment, report
