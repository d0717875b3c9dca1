"""Copy insertion, scheduling, buffer assignment and the validator on every corpus module
(JAX's module.hlo and XLA's optimized.hlo), under sequential and dependency orderings."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import CORPUS, corpus_cases, requires_corpus
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.parser import parse_module
from xlc.hlo.verifier import verify_module
from xlc.options import CompileOptions
from xlc.passes.buffer_assignment import assign_buffers
from xlc.passes.buffer_validator import validate_buffer_assignment
from xlc.passes.copy_insertion import CopyInsertion
from xlc.passes.ordering import (
    DependencyHloOrdering,
    PredecessorHloOrdering,
    SequentialHloOrdering,
    verify_schedule,
)
from xlc.passes.scheduler import MemoryScheduler

from .memory_interpreter import run_with_memory

CASES = corpus_cases()
SMALL = corpus_cases(include_benchmarks=False)


def _load(name: str, file: str):
    return parse_module((CORPUS / "cases" / name / file).read_text(), filename=file)


def _assign_everywhere(m) -> dict[str, int]:
    CopyInsertion().run(m)
    verify_module(m)
    MemoryScheduler().run(m)
    assert m.schedule is not None
    verify_schedule(m, m.schedule)
    seq = assign_buffers(m, SequentialHloOrdering(m))
    validate_buffer_assignment(seq)
    validate_buffer_assignment(assign_buffers(m, DependencyHloOrdering(m)))
    # a predecessor ordering that also orders each computation's instructions by the schedule
    preds = {seq[i]: [seq[i - 1]] for seq in m.schedule.values() for i in range(1, len(seq))}
    validate_buffer_assignment(assign_buffers(m, PredecessorHloOrdering(m, preds)))
    stats = seq.stats()
    assert stats["temp_bytes"] >= stats["temp_lower_bound_bytes"]
    assert seq.report().startswith("BufferAssignment:")
    json.dumps(seq.to_json())
    return stats


@requires_corpus
@pytest.mark.parametrize("name", CASES)
def test_module_hlo_assigns_and_validates(name: str) -> None:
    _assign_everywhere(_load(name, "module.hlo"))


@requires_corpus
@pytest.mark.parametrize("name", CASES)
def test_optimized_hlo_assigns_validates_and_beats_xla(name: str) -> None:
    """On XLA's own optimized module (same fusion decisions) our scheduling + assignment must
    need no more temp memory than XLA's (figures: tools/memory_vs_xla.py --xla-hlo)."""
    stats = _assign_everywhere(_load(name, "optimized.hlo"))
    meta = json.loads((CORPUS / "cases" / name / "meta.json").read_text())
    xla_temp = meta["memory_analysis"]["temp_size_in_bytes"]
    assert stats["temp_bytes"] <= xla_temp


@requires_corpus
@pytest.mark.parametrize("name", SMALL)
def test_copy_insertion_preserves_numerics(name: str) -> None:
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    m = parse_module(case.module_text)
    before = flatten_result(evaluate(m, case.inputs))
    CopyInsertion().run(m)
    after = flatten_result(evaluate(m, case.inputs))
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)


@requires_corpus
@pytest.mark.parametrize("file", ["module.hlo", "optimized.hlo"])
@pytest.mark.parametrize("name", SMALL)
def test_corpus_runs_correctly_through_its_assigned_memory(name: str, file: str) -> None:
    """Execute the module writing every value into its slice and reading operands back from
    memory (sequential and dependency orderings): the outputs must equal XLA's."""
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    m = _load(name, file)
    if file == "optimized.hlo" and "{...}" in case.optimized_text:
        pytest.skip("optimized.hlo elides constants")
    CopyInsertion().run(m)
    MemoryScheduler().run(m)
    for ordering in (None, DependencyHloOrdering(m)):
        ba = assign_buffers(m, ordering)
        got = flatten_result(run_with_memory(ba, None, case.inputs))
        assert len(got) == len(case.outputs)
        for g, want in zip(got, case.outputs):
            np.testing.assert_allclose(g, want, rtol=case.rtol, atol=case.atol)


def _interpreter_optimized(name: str):
    from xlc.passes.optimize import interpreter_passes, optimize_module

    opts = CompileOptions(verify=True)
    m = _load(name, "module.hlo")
    return m, optimize_module(m, opts, passes=interpreter_passes(opts), name="interpreter")


@requires_corpus
@pytest.mark.parametrize("name", CASES)
def test_interpreter_pipeline_temp_memory_beats_xla(name: str) -> None:
    """Through our whole pipeline (interpreter pass list: transpose folding, gather and row
    fusion, copy insertion, memory scheduler) temp bytes <= XLA's on every corpus case
    (the table: tools/memory_vs_xla.py)."""
    _, opt = _interpreter_optimized(name)
    meta = json.loads((CORPUS / "cases" / name / "meta.json").read_text())
    assert opt.memory_stats()["temp_bytes"] <= meta["memory_analysis"]["temp_size_in_bytes"]


@requires_corpus
@pytest.mark.parametrize("name", SMALL)
def test_interpreter_pipeline_runs_correctly_through_its_memory(name: str) -> None:
    """The optimized module (row fusions, gather fusions, shared operand buffers) evaluated
    plainly and through its assigned memory gives XLA's outputs."""
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    m, opt = _interpreter_optimized(name)
    for got in (flatten_result(evaluate(m, case.inputs)),
                flatten_result(run_with_memory(opt.assignment, None, case.inputs))):
        assert len(got) == len(case.outputs)
        for g, want in zip(got, case.outputs):
            np.testing.assert_allclose(g, want, rtol=case.rtol, atol=case.atol)


@requires_corpus
@pytest.mark.parametrize("name", CASES)
def test_optimized_text_reparses_to_the_same_buffer_assignment(name: str) -> None:
    """The scheduler leaves the module in its printed order, so the optimized module printed
    and parsed again (what an `.xlc` file stores) assigns exactly the same buffers to exactly
    the same allocations and offsets."""
    from xlc.hlo.printer import print_module

    _, opt = _interpreter_optimized(name)
    again = assign_buffers(parse_module(print_module(opt.module)))
    assert again.to_json()["allocations"] == opt.assignment.to_json()["allocations"]
