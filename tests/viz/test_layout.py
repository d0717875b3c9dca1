"""The layered layout and the timeline's live-bytes curve."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlc.viz.layout import LONG_SPAN, _isotonic, layered_layout, svg_path
from xlc.viz.timeline import BufferRect, byte_ticks, live_bytes, mark_shared_steps


def check_layout(items, sizes, edges) -> None:
    lay = layered_layout(items, sizes, edges)
    assert set(lay.pos) == set(items)
    boxes = {v: (x, y, x + sizes[v][0], y + sizes[v][1]) for v, (x, y) in lay.pos.items()}
    for x0, y0, x1, y1 in boxes.values():
        assert x0 >= -1e-6 and y0 >= -1e-6
        assert x1 <= lay.width + 1e-6 and y1 <= lay.height + 1e-6
    vs = list(boxes)
    for i, a in enumerate(vs):  # no two boxes overlap
        for b in vs[i + 1:]:
            ax0, ay0, ax1, ay1 = boxes[a]
            bx0, by0, bx1, by1 = boxes[b]
            assert ax1 <= bx0 + 1e-6 or bx1 <= ax0 + 1e-6 or ay1 <= by0 + 1e-6 \
                or by1 <= ay0 + 1e-6, (a, b)
    assert len(lay.paths) == len(lay.edges)
    for (s, d), pts in zip(lay.edges, lay.paths):
        assert boxes[s][3] <= boxes[d][1] + 1e-6, "edges point downwards"
        assert pts[0] == pytest.approx((boxes[s][0] + sizes[s][0] / 2, boxes[s][3]))
        assert pts[-1] == pytest.approx((boxes[d][0] + sizes[d][0] / 2, boxes[d][1]))


def test_diamond_and_long_edge() -> None:
    items = ["a", "b", "c", "d", "e"]
    sizes = {v: (40.0 + 10 * i, 30.0) for i, v in enumerate(items)}
    edges = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "e"), ("a", "e"),
             ("a", "a"), ("a", "zz"), ("a", "b")]
    lay = layered_layout(items, sizes, edges)
    assert len(lay.edges) == 6  # self loop, unknown endpoint and duplicate dropped
    long = lay.paths[lay.edges.index(("a", "e"))]
    assert len(long) == 2 + 2 * 2  # through the two layers between a and e
    check_layout(items, sizes, edges)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 14).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                         max_size=3 * n),
    st.lists(st.integers(10, 120), min_size=n, max_size=n))))
def test_random_dags(spec) -> None:
    n, pairs, widths = spec
    items = [f"v{i}" for i in range(n)]
    edges = [(f"v{min(a, b)}", f"v{max(a, b)}") for a, b in pairs if a != b]
    sizes = {f"v{i}": (float(w), 20.0 + (w % 3) * 14) for i, w in enumerate(widths)}
    check_layout(items, sizes, edges)


def test_isotonic_pools_violators() -> None:
    assert _isotonic([1.0, 3.0, 2.0, 4.0]) == pytest.approx([1.0, 2.5, 2.5, 4.0])
    assert _isotonic([5.0, 1.0]) == pytest.approx([3.0, 3.0])


def test_svg_path() -> None:
    assert svg_path([(0, 0), (10, 20)]) == "M0.0,0.0 C0.0,10.0 10.0,10.0 10.0,20.0"
    assert svg_path([]) == ""


def rect(offset: int, size: int, start: int, end: int) -> BufferRect:
    return BufferRect("b", "n0", "f32[1]", "op", offset, size, start, end, ["b"])


def test_live_bytes_counts_a_shared_chunk_once() -> None:
    rects = [rect(0, 64, 0, 2), rect(0, 64, 2, 4), rect(64, 32, 1, 1)]
    assert live_bytes(rects, 5) == [64, 96, 64, 64, 64, 0]


def test_very_long_edges_are_drawn_straight() -> None:
    items = [f"c{i}" for i in range(LONG_SPAN + 10)]
    sizes = {v: (30.0, 20.0) for v in items}
    edges = [(a, b) for a, b in zip(items, items[1:])] + [(items[0], items[-1])]
    lay = layered_layout(items, sizes, edges)
    assert len(lay.paths[-1]) == 2
    check_layout(items, sizes, edges)


def test_shared_step_is_split_between_the_two_buffers() -> None:
    a, b, c = rect(0, 64, 0, 2), rect(0, 64, 2, 4), rect(64, 32, 2, 3)
    mark_shared_steps([a, b, c])
    assert a.shares_end and b.shares_start
    assert not (a.shares_start or b.shares_end or c.shares_start or c.shares_end)


def test_byte_ticks_are_powers_of_two() -> None:
    assert byte_ticks(1040) == [0, 256, 512, 768, 1024]
    assert byte_ticks(32768) == [0, 8192, 16384, 24576, 32768]
    assert byte_ticks(0) == [0]
