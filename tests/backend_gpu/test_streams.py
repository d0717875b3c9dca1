"""Stream assignment and event plans, checked structurally: every dependency across streams
is ordered by events, same-stream order respects data dependencies, redundant waits are
dropped, and the buffer assignment is valid under the PredecessorHloOrdering of the streams."""
from __future__ import annotations

import pytest

from tests.backend_gpu.helpers import compile_text, compiled_case
from tests.conftest import corpus_cases, requires_corpus
from xlc.backend_gpu.streams import StreamPlan, plan_streams, validate_plan
from xlc.backend_gpu.thunks import KernelThunk, SequentialThunk
from xlc.errors import LoweringError
from xlc.passes.buffer_validator import validate_buffer_assignment
from xlc.passes.ordering import PredecessorHloOrdering, SequentialHloOrdering

TWO_DOTS = """
HloModule two_dots
ENTRY e {
  a = f32[64,64] parameter(0)
  b = f32[64,64] parameter(1)
  c = f32[64,64] parameter(2)
  d1 = f32[64,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  d2 = f32[64,64] dot(b, c), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT s = f32[64,64] add(d1, d2)
}
"""


def test_single_stream_is_the_default() -> None:
    exe = compile_text(TWO_DOTS)
    assert exe.plan.num_streams == 1 and exe.plan.num_events == 0
    assert isinstance(exe.assignment.ordering, SequentialHloOrdering)
    assert all(t.stream == 0 and not t.wait_events for t in exe.all_thunks())


def test_independent_dots_run_on_two_streams_joined_by_an_event() -> None:
    exe = compile_text(TWO_DOTS, gpu_streams=2, fusion=False)
    by = {t.hlo: t for t in exe.thunks.thunks}
    assert {by["d1"].stream, by["d2"].stream} == {0, 1}
    join = by["s"]
    # the join runs on the higher operand stream and waits for the dot on the other one
    assert join.stream == 1
    assert by["d1"].record_event is not None
    assert join.wait_events == [by["d1"].record_event]
    assert exe.plan.final_waits == [join.record_event]
    validate_plan(exe.module, exe.plan)
    assert isinstance(exe.assignment.ordering, PredecessorHloOrdering)
    validate_buffer_assignment(exe.assignment)
    # d1 and d2 may run concurrently: their outputs must not share bytes
    s1, s2 = exe.assignment.slice_of(exe.module.entry.instructions[3]), \
        exe.assignment.slice_of(exe.module.entry.instructions[4])
    assert s1.index != s2.index or s1.offset + s1.size <= s2.offset or \
        s2.offset + s2.size <= s1.offset


CHAIN = """
HloModule chain
ENTRY e {
  p = f32[1024] parameter(0)
  a = f32[1024] negate(p)
  b = f32[1024] exponential(a)
  ROOT c = f32[1024] add(a, b)
}
"""


def test_redundant_waits_are_dropped() -> None:
    exe = compile_text(CHAIN, fusion=False)
    mod = exe.module
    uid = {i.name: i.uid for i in mod.entry.instructions}
    seq = SequentialThunk("main", thunks=[KernelThunk(t.hlo, kernel=t.kernel, args=t.args)
                                          for t in exe.thunks.thunks])
    plan = plan_streams(mod, seq, 2, {uid["a"]: 1, uid["b"]: 1, uid["c"]: 0})
    by = {t.hlo: t for t in seq.thunks}
    # c reads a and b (both on stream 1): waiting for b (later on stream 1) implies a
    assert by["c"].wait_events == [by["b"].record_event]
    assert by["a"].record_event is None
    assert plan.final_waits == [by["b"].record_event]
    validate_plan(mod, plan)


def test_validate_plan_catches_a_missing_event() -> None:
    exe = compile_text(CHAIN, fusion=False)
    mod = exe.module
    uid = {i.name: i.uid for i in mod.entry.instructions}
    seq = SequentialThunk("main", thunks=[KernelThunk(t.hlo, kernel=t.kernel, args=t.args)
                                          for t in exe.thunks.thunks])
    plan = plan_streams(mod, seq, 2, {uid["a"]: 1, uid["b"]: 1, uid["c"]: 0})
    for t in seq.thunks:
        t.wait_events = []
    with pytest.raises(LoweringError, match=r"thunk c \(stream 0\) may run before its "
                                            r"operand a \(stream 1\) finished"):
        validate_plan(mod, StreamPlan(2, seq, plan.num_events, plan.final_waits))


@requires_corpus
@pytest.mark.parametrize("name", corpus_cases(include_benchmarks=False))
def test_corpus_multi_stream_plans_are_valid(name: str) -> None:
    exe = compiled_case(name, streams=4)
    validate_plan(exe.module, exe.plan)
    assert isinstance(exe.assignment.ordering, PredecessorHloOrdering)
    validate_buffer_assignment(exe.assignment)
    # same-stream thunks keep the BFS launch order of the entry schedule
    order = {i.name: k for k, i in enumerate(exe.module.schedule[exe.module.entry])}
    for s in range(exe.plan.num_streams):
        names = [t.hlo for t in exe.thunks.thunks if t.stream == s and t.hlo in order]
        assert [order[n] for n in names] == sorted(order[n] for n in names)
    assert all(0 <= t.stream < 4 for t in exe.all_thunks())


@requires_corpus
def test_multi_stream_uses_several_streams_where_the_graph_allows() -> None:
    exe = compiled_case("attention_single_head", streams=4)
    assert len({t.stream for t in exe.thunks.thunks}) >= 2
    assert exe.plan.num_events >= 1
