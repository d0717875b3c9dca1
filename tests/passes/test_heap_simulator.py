"""Heap simulator: best-fit placement, orders, alignment, colocations, brute-force checks."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlc.errors import ArgumentError
from xlc.passes.dataflow import DataflowAnalysis
from xlc.passes.heap_simulator import (
    Chunk,
    HeapBuffer,
    best_fit_heap,
    check_heap,
    global_decreasing_size_best_fit,
    minimum_memory,
    no_fragmentation_peak,
)
from xlc.passes.ordering import TimeInterval

from .memory_builders import classic, post_order_schedule


def hb(key: int, size: int, *ranges: tuple[int, int]) -> HeapBuffer:
    return HeapBuffer(key, size, [TimeInterval(a, b) for a, b in ranges])


def test_disjoint_lifetimes_reuse_offset_zero() -> None:
    bufs = [hb(0, 100, (0, 1)), hb(1, 100, (2, 3)), hb(2, 100, (4, 5))]
    r = global_decreasing_size_best_fit(bufs, alignment=64)
    assert {k: c.offset for k, c in r.chunks.items()} == {0: 0, 1: 0, 2: 0}
    assert r.heap_size == 100


def test_best_fit_picks_the_smallest_gap() -> None:
    # Spatial order places A, B, C, D at 0, 256, 384, 512. When N is placed, only B and D are
    # live: the holes are [0, 256) and [384, 512); best fit takes the smaller one.
    bufs = [hb(0, 200, (0, 1)), hb(1, 100, (0, 10)), hb(2, 80, (0, 1)), hb(3, 64, (0, 10)),
            hb(4, 64, (3, 4))]
    r = global_decreasing_size_best_fit(bufs, alignment=64, order="spatial")
    assert [r.chunks[k].offset for k in range(5)] == [0, 256, 384, 512, 384]
    assert r.heap_size == 576 and not check_heap(bufs, r, 64)


def test_alignment_rounds_offsets() -> None:
    bufs = [hb(0, 10, (0, 3)), hb(1, 10, (0, 3)), hb(2, 10, (0, 3))]
    r64 = global_decreasing_size_best_fit(bufs, alignment=64)
    r256 = global_decreasing_size_best_fit(bufs, alignment=256)
    assert sorted(c.offset for c in r64.chunks.values()) == [0, 64, 128]
    assert sorted(c.offset for c in r256.chunks.values()) == [0, 256, 512]
    assert r256.heap_size == 522
    with pytest.raises(ArgumentError, match="alignment must be a positive power of two, got 0"):
        global_decreasing_size_best_fit(bufs, alignment=0)
    with pytest.raises(ArgumentError, match="alignment must be a positive power of two, got 48"):
        global_decreasing_size_best_fit(bufs, alignment=48)


def test_temporal_order_can_beat_spatial() -> None:
    # A case where placing the long-lived small buffer first avoids fragmentation.
    bufs = [hb(0, 64, (0, 10)), hb(1, 128, (0, 2)), hb(2, 192, (3, 10)), hb(3, 128, (1, 4))]
    sp = global_decreasing_size_best_fit(bufs, 64, "spatial")
    tm = global_decreasing_size_best_fit(bufs, 64, "temporal")
    best = best_fit_heap(bufs, 64)
    assert best.heap_size == min(sp.heap_size, tm.heap_size)
    for r in (sp, tm, best):
        assert not check_heap(bufs, r, 64)


def test_colocated_intervals_share_a_chunk() -> None:
    grp = hb(0, 64, (0, 2), (2, 5))  # an operand reused by its user at time 2
    other = hb(1, 64, (3, 4))
    r = best_fit_heap([grp, other], 64)
    assert r.chunks[0] != r.chunks[1]
    assert no_fragmentation_peak([grp, other]) == 128
    assert no_fragmentation_peak([hb(0, 64, (0, 2), (2, 5))]) == 64


def test_zero_size_buffers() -> None:
    r = best_fit_heap([hb(0, 0, (0, 5)), hb(1, 8, (0, 5))], 64)
    assert r.chunks[0] == Chunk(0, 0) and r.chunks[1] == Chunk(0, 8) and r.heap_size == 8


def test_minimum_memory_of_classic_schedule() -> None:
    m, d = classic()
    df = DataflowAnalysis(m)
    # param (16, whole program) + negate + exp live together, then add reuses a dying operand
    assert minimum_memory(m, post_order_schedule(m), df) == 48


intervals = st.lists(
    st.tuples(st.integers(0, 512), st.integers(0, 30), st.integers(0, 8),
              st.one_of(st.none(), st.integers(1, 6))),
    min_size=1, max_size=25)


@settings(max_examples=40, deadline=None)
@given(intervals, st.sampled_from([1, 8, 64, 256]))
def test_random_intervals_never_overlap(items: list, alignment: int) -> None:
    bufs = []
    for key, (size, start, length, gap) in enumerate(items):
        ranges = [(start, start + length)]
        if gap is not None:  # a colocated second interval (e.g. a while's carried value)
            ranges.append((start + length + gap, start + length + 2 * gap))
        bufs.append(hb(key, size, *ranges))
    peak = no_fragmentation_peak(bufs)
    results = [global_decreasing_size_best_fit(bufs, alignment, o)
               for o in ("spatial", "temporal")]
    best = best_fit_heap(bufs, alignment)
    for r in results + [best]:
        assert check_heap(bufs, r, alignment) == []
        assert r.heap_size >= peak
    assert best.heap_size == min(r.heap_size for r in results)
    # brute force: at every time, the live chunks are pairwise disjoint
    horizon = max(b.end for b in bufs)
    for t in range(horizon + 1):
        live = [best.chunks[b.key] for b in bufs
                if b.size and any(iv.start <= t <= iv.end for iv in b.intervals)]
        for i, a in enumerate(live):
            assert all(not a.overlaps(c) for c in live[i + 1:])


def test_chunk_alignment_small_buffers_get_their_natural_alignment() -> None:
    from xlc.passes.heap_simulator import chunk_alignment

    assert [chunk_alignment(n, 64) for n in (0, 1, 2, 4, 8, 12, 16, 48, 64, 96, 400)] == \
        [1, 1, 2, 4, 8, 4, 16, 16, 64, 64, 64]
    assert chunk_alignment(128, 256) == 128 and chunk_alignment(512, 256) == 256


def test_per_buffer_alignment_packs_small_buffers_tightly() -> None:
    bufs = [HeapBuffer(0, 4, [TimeInterval(0, 3)], alignment=4),
            HeapBuffer(1, 4, [TimeInterval(0, 3)], alignment=4),
            HeapBuffer(2, 16, [TimeInterval(0, 3)], alignment=16),
            hb(3, 100, (0, 3))]
    r = global_decreasing_size_best_fit(bufs, alignment=64)
    assert {k: c.offset for k, c in r.chunks.items()} == {3: 0, 2: 112, 0: 100, 1: 104}
    assert r.heap_size == 128 and check_heap(bufs, r, 64) == []
