"""Memory schedulers: valid topological sequences, memory-aware choices, the pass."""
from __future__ import annotations

import pytest

from xlc.errors import ArgumentError
from xlc.hlo.parser import parse_module
from xlc.passes.buffer_assignment import assign_buffers
from xlc.passes.buffer_validator import validate_buffer_assignment
from xlc.passes.copy_insertion import CopyInsertion
from xlc.passes.dataflow import DataflowAnalysis
from xlc.passes.heap_simulator import minimum_memory
from xlc.passes.ordering import SequentialHloOrdering, verify_schedule
from xlc.passes.scheduler import (
    SCHEDULERS,
    MemoryScheduler,
    default_memory_schedule,
    dfs_memory_schedule,
    list_memory_schedule,
    post_order_schedule,
    schedule_peaks,
)

from .memory_builders import counting_while

# Two independent chains: a big temp (f32[1024]) reduced to a scalar, and a second one.
# Finishing one chain before starting the other keeps only one big temp live.
TWO_CHAINS = """
HloModule two_chains

add_f32 {
  l = f32[] parameter(0)
  r = f32[] parameter(1)
  ROOT s = f32[] add(l, r)
}

ENTRY main {
  x = f32[1024]{0} parameter(0)
  y = f32[1024]{0} parameter(1)
  z = f32[] constant(0)
  a1 = f32[1024]{0} exponential(x)
  b1 = f32[1024]{0} exponential(y)
  a2 = f32[1024]{0} negate(a1)
  b2 = f32[1024]{0} negate(b1)
  ra = f32[] reduce(a2, z), dimensions={0}, to_apply=add_f32
  rb = f32[] reduce(b2, z), dimensions={0}, to_apply=add_f32
  ROOT total = f32[] add(ra, rb)
}
"""


def names(seq) -> list[str]:
    return [i.name for i in seq]


@pytest.mark.parametrize("algorithm", sorted(SCHEDULERS))
def test_every_scheduler_gives_a_valid_schedule(algorithm: str) -> None:
    for text in (TWO_CHAINS,):
        m = parse_module(text, verify=True)
        sched = SCHEDULERS[algorithm](m, None)
        verify_schedule(m, sched)
    m, _ = counting_while()
    sched = SCHEDULERS[algorithm](m, None)
    verify_schedule(m, sched)
    assert set(sched) == set(m.computations)


def test_list_scheduler_finishes_one_chain_first() -> None:
    m = parse_module(TWO_CHAINS, verify=True)
    seq = names(list_memory_schedule(m)[m.entry])
    # after a1 starts, its chain (a2, ra) completes before the other big temp appears
    assert seq.index("ra") < seq.index("b1") or seq.index("rb") < seq.index("a1")
    df = DataflowAnalysis(m)
    peaks = schedule_peaks(m)
    # parameters 8 KiB + one chain's two 4 KiB temps (a1 and a2 share) + scalars
    assert peaks["list"] == minimum_memory(m, list_memory_schedule(m, df), df)
    assert peaks["list"] <= peaks["post_order"]


def test_dfs_scheduler_visits_heavier_operands_first() -> None:
    m = parse_module(TWO_CHAINS, verify=True)
    seq = names(dfs_memory_schedule(m)[m.entry])
    assert seq[-1] == "total"
    # a DFS finishes each reduce's chain before the other
    assert seq.index("ra") < seq.index("b1") or seq.index("rb") < seq.index("a1")


def test_default_keeps_the_lowest_peak_and_pass_sets_schedule() -> None:
    m = parse_module(TWO_CHAINS, verify=True)
    peaks = schedule_peaks(m)
    best = default_memory_schedule(m)
    df = DataflowAnalysis(m)
    assert minimum_memory(m, best, df) == min(peaks.values())
    assert post_order_schedule(m)[m.entry] == m.entry.post_order()
    p = MemoryScheduler()
    assert p.name == "memory_scheduler"
    assert p.run(m) is True
    assert m.schedule is not None and set(m.schedule) == set(m.computations)
    assert p.run(m) is False  # same schedule again
    ba = assign_buffers(m, SequentialHloOrdering(m))
    validate_buffer_assignment(ba)


def test_scheduled_while_module_assigns_and_validates() -> None:
    m, _ = counting_while(size=256)
    CopyInsertion().run(m)
    for algorithm in ["default", *SCHEDULERS]:
        MemoryScheduler(algorithm).run(m)
        verify_schedule(m, m.schedule)
        validate_buffer_assignment(assign_buffers(m))


def test_unknown_algorithm() -> None:
    with pytest.raises(ArgumentError, match=r"^unknown scheduler 'fifo' \(known: default, list, "
                                             r"dfs, post_order\)$"):
        MemoryScheduler("fifo")
