"""The HTML page: self-contained, graph data and timeline present, one rectangle per buffer,
the memory numbers explained; repeated layers found (`xlc.viz.repeats`)."""
from __future__ import annotations

import re

import pytest

from tests.conftest import requires_corpus
from tests.viz.helpers import CASES, optimized_case, page_graph
from tests.viz.test_dot import SIMPLE_HLO, WHILE_HLO
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module
from xlc.passes.buffer_assignment import assign_buffers
from xlc.viz import build_timeline, to_html
from xlc.viz.graph import human_bytes

BUF_RE = re.compile(r'<rect class="buf cat-(\w+)"[^>]*data-inst="(n\d+)"')


def expected_rects(ba) -> int:
    """Distinct buffers (alias set at one offset) with a live range in the temp allocations
    and in output allocations that also hold temps, computed from the assignment."""
    df, live = ba.dataflow, ba.live_ranges
    count = 0
    for alloc in ba.allocations:
        sets = {}
        for buf, (offset, _) in alloc.assigned.items():
            sets.setdefault((df.alias_set(buf).id, offset), []).append(buf)
        if alloc.kind == "output" and len({k[0] for k in sets}) < 2:
            continue
        if alloc.kind not in ("temp", "output"):
            continue
        count += sum(1 for bufs in sets.values() if any(b in live.buffer_ranges for b in bufs))
    return count


def assert_self_contained(page: str) -> None:
    assert "<link" not in page and "<img" not in page and " src=" not in page
    urls = set(re.findall(r"https?://[^\s\"')]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls
    assert page.count("<script>") == 1 and "<style>" in page
    assert page.count('<script type="application/json" id="graph-data">') == 1


@requires_corpus
@pytest.mark.parametrize("name", CASES)
def test_page_on_optimized_corpus(name: str) -> None:
    module, ba = optimized_case(name)
    page = to_html(module, ba)
    assert_self_contained(page)
    assert '<svg id="graph"' in page
    rects = BUF_RE.findall(page)
    assert len(rects) == expected_rects(ba)
    graph = page_graph(page)
    ids = {n["id"] for n in graph["nodes"]} | {c["id"] for c in graph["clusters"]}
    for _, inst_id in rects:
        assert inst_id in ids, f"timeline buffer points at missing graph element {inst_id}"
    fusions = [i for i in module.entry.instructions if i.opcode is Opcode.FUSION]
    kinds = {c["id"]: c["k"] for c in graph["clusters"]}
    for f in fusions:
        assert kinds[f"n{f.uid}"] == "fusion"
    assert all(n["p"] is None or n["p"] in kinds for n in graph["nodes"])
    assert all(e[0] in ids and e[1] in ids for e in graph["edges"])
    stats = ba.stats()
    assert re.search(r'data-stat="peak" title="[^"]*" data-bytes="(\d+)"><div class="k">peak'
                     r'</div><div class="v">' + re.escape(human_bytes(stats["peak_bytes"])),
                     page)
    tips = {n["id"]: n["t"] for n in graph["nodes"]}
    for p in module.entry.parameters:
        assert f"slice: alloc #{ba.slice_of(p).index}" in tips[f"n{p.uid}"]
    assert page.count('<tr class="alloc k-') == len(ba.allocations)
    if rects:
        assert page.count('<svg class="timeline"') >= 1
        assert "peak-line" in page and "peak " in page


@requires_corpus
@pytest.mark.parametrize("name", ["power_iteration", "reductions", "attention_single_head"])
def test_timeline_peak_and_no_overlap(name: str) -> None:
    _, ba = optimized_case(name)
    tl = build_timeline(ba)
    assert tl is not None and tl.panels
    assert len(tl.times) == ba.live_ranges.end_time + 1
    for panel in tl.panels:
        alloc = ba.allocations[panel.alloc_index]
        assert 0 < panel.peak <= alloc.size
        for r in panel.rects:
            assert 0 <= r.offset and r.offset + r.size <= alloc.size
            assert 0 <= r.start <= r.end <= ba.live_ranges.end_time
        # buffers live at the same time never overlap in bytes, unless one reuses the other's
        # chunk at the very step where the other dies
        for i, a in enumerate(panel.rects):
            for b in panel.rects[i + 1:]:
                overlap_t = a.start <= b.end and b.start <= a.end
                overlap_b = a.offset < b.offset + b.size and b.offset < a.offset + a.size
                if overlap_t and overlap_b:
                    assert a.end == b.start or b.end == a.start, (a, b)
        t = panel.peak_time
        assert panel.live[t] == panel.peak
    temp = [p for p in tl.panels if p.kind == "temp"]
    if temp:
        assert temp[0].peak <= ba.stats()["temp_bytes"]


def test_page_without_assignment_still_has_graph() -> None:
    module = parse_module(SIMPLE_HLO)
    page = to_html(module, compute_assignment=False)
    assert_self_contained(page)
    assert "No buffer assignment: no memory timeline." in page
    graph = page_graph(page)
    assert len(graph["nodes"]) == 3  # parameter, broadcast, multiply; no constant
    assert "operand 0 = 2.0" in page


def test_page_with_computed_assignment_and_while_panels() -> None:
    module = parse_module(WHILE_HLO)
    page = to_html(module)
    ba = assign_buffers(module)
    graph = page_graph(page)
    comps = [c for c in graph["clusters"] if c["k"] == "computation"]
    assert sorted(c["l"][0] for c in comps) == ["while body: body", "while condition: cond"]
    calls = [e for e in graph["edges"] if e[3] == "call"]
    assert len(calls) == 2
    (w,) = [n for n in graph["nodes"] if n["t"].startswith("name: w\n")]
    assert all(e[0] == w["id"] for e in calls) and all(c["p"] is None for c in comps)
    assert len(BUF_RE.findall(page)) == expected_rects(ba)


def test_text_is_escaped() -> None:
    module = parse_module(SIMPLE_HLO.replace("HloModule simple", "HloModule a_b"))
    module.name = "<script>x</script>"
    page = to_html(module, compute_assignment=False, title="t<&>")
    assert "<script>x</script>" not in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page and "<title>t&lt;&amp;&gt;</title>" in page
