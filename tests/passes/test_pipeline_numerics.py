"""The whole pass list (`interpreter_passes`: the same list as the CPU backend's `cpu_passes`),
pass by pass: every pass that changes a module keeps its numerics (evaluated after each pass
against XLA's outputs for the corpus, against the unoptimized module for random programs), and
the buffer assignment of the optimized module passes the validator under all three orderings
and computes the right values when every value is written to and read from its slice."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import corpus_cases, requires_corpus
from tests.passes.filecheck import flatten, parse, random_args
from tests.passes.memory_interpreter import run_with_memory
from tests.passes.test_copy_insertion import build_random_loop
from tests.passes.test_multi_output_fusion import random_programs as fusion_programs
from tests.passes.test_passes_corpus import random_programs as shape_programs
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.ir import HloModule
from xlc.options import CompileOptions
from xlc.passes.buffer_assignment import BufferAssignment, assign_buffers
from xlc.passes.buffer_validator import validate_buffer_assignment
from xlc.passes.optimize import interpreter_passes, optimize_module
from xlc.passes.ordering import (
    DependencyHloOrdering,
    PredecessorHloOrdering,
    SequentialHloOrdering,
    verify_schedule,
)
from xlc.passes.pipeline import FixedPoint, Pipeline

VERIFY = CompileOptions(verify=True)
SMALL = corpus_cases(include_benchmarks=False)
ALL = corpus_cases()


def _entry_name(entry) -> str:
    return entry.name if isinstance(entry, FixedPoint) else getattr(entry, "name", str(entry))


def _assign_under_all_orderings(m: HloModule) -> dict[str, BufferAssignment]:
    """Buffer assignments of scheduled module `m` under the sequential ordering (its schedule),
    the dependency ordering and a predecessor ordering (the schedule's consecutive pairs as
    explicit predecessors), each validated."""
    assert m.schedule is not None
    verify_schedule(m, m.schedule)
    preds = {seq[i]: [seq[i - 1]] for seq in m.schedule.values() for i in range(1, len(seq))}
    out = {"sequential": assign_buffers(m, SequentialHloOrdering(m)),
           "dependency": assign_buffers(m, DependencyHloOrdering(m)),
           "predecessor": assign_buffers(m, PredecessorHloOrdering(m, preds))}
    for ba in out.values():
        validate_buffer_assignment(ba)
    seq = out["sequential"].stats()
    assert seq["temp_bytes"] >= seq["temp_lower_bound_bytes"]
    return out


def _close(got: list[np.ndarray], want: list[np.ndarray], rtol: float, atol: float,
           what: str) -> None:
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (what, i, g.shape, w.shape)
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=f"{what}: out{i}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what}: out{i}")


def _run_pass_by_pass(m: HloModule, args, want, rtol: float, atol: float) -> list[str]:
    """Run the interpreter pass list one entry at a time (verifier on); after every entry that
    changed `m`, evaluate it and compare with `want`. Returns the names of the changing
    entries."""
    changed = []
    for entry in interpreter_passes(VERIFY):
        name = _entry_name(entry)
        if Pipeline("interpreter", [entry]).run(m, VERIFY):
            changed.append(name)
            _close(flatten_result(evaluate(m, args)), want, rtol, atol, f"after {name}")
    return changed


def _check_memory(m: HloModule, args, want, rtol: float, atol: float) -> None:
    """Run `m` through each assignment, in an execution order its ordering allows (the
    predecessor ordering was built from the schedule: run the schedule)."""
    for name, ba in _assign_under_all_orderings(m).items():
        sched = m.schedule if name == "predecessor" else None
        got = flatten_result(run_with_memory(ba, None, args, sched))
        _close(got, want, rtol, atol, f"through memory ({name} ordering)")


@requires_corpus
@pytest.mark.parametrize("name", SMALL)
def test_every_pass_keeps_corpus_numerics_and_memory_is_valid(name: str) -> None:
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    m = parse(case.module_text)
    changed = _run_pass_by_pass(m, case.inputs, case.outputs, case.rtol, case.atol)
    assert "memory_scheduler" in changed
    _check_memory(m, case.inputs, case.outputs, case.rtol, case.atol)


@requires_corpus
@pytest.mark.parametrize("name", ALL)
def test_optimized_corpus_module_validates_under_all_orderings(name: str) -> None:
    """Benchmark cases too (their arrays are too large to evaluate here)."""
    from corpus import load_case  # type: ignore[import-not-found]

    m = parse(load_case(name).module_text)
    optimize_module(m, VERIFY, passes=interpreter_passes(VERIFY), name="interpreter")
    _assign_under_all_orderings(m)


def _check_random(text: str, seed: int) -> None:
    before = parse(text)
    args = random_args(before, seed)
    want = flatten(evaluate(before, args))
    m = parse(text)
    _run_pass_by_pass(m, args, want, rtol=1e-5, atol=1e-5)
    _check_memory(m, args, want, rtol=1e-5, atol=1e-5)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fusion_programs(), st.integers(0, 2**16))
def test_random_fusion_programs_through_the_whole_pipeline(text: str, seed: int) -> None:
    """Elementwise DAGs with broadcasts, reductions, selects and in-place updates."""
    _check_random(text, seed)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape_programs(), st.integers(0, 2**16))
def test_random_shape_programs_through_the_whole_pipeline(text: str, seed: int) -> None:
    """Reshapes, transposes, slices, converts, dots and reductions."""
    _check_random(text, seed)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["keep", "move", "add", "dus", "chain"]),
                          st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=4),
       st.lists(st.integers(0, 9), min_size=4, max_size=4),
       st.lists(st.integers(0, 9), min_size=1, max_size=4))
def test_random_loops_through_the_whole_pipeline(slots, init_src, outs) -> None:
    """While loops whose carried values stay, move between slots, or are recomputed (in
    place, or through temps that may live in the slot while the loop does not need it)."""
    _check_random(build_random_loop(slots, init_src, outs).to_text(), 0)
