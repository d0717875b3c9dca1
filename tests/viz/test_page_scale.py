"""The graph page at about 30, 300 and 3000 instructions in headless Chromium: collapsed by
default, no overlapping boxes, labels inside their boxes, a fusion opens, the search finds a
node by its source line; screenshots go to $XLC_VIZ_SHOTS (default: a temporary directory).
Also the header's memory numbers against `Compiled.memory_analysis()` (no browser needed)."""
from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import requires_corpus
from tests.viz.browser import assert_legible, load, requires_browser
from tests.viz.helpers import optimized_case, page_graph, write
from tools.viz_screenshots import long_program, transformer_block_module, transformer_stack_module
from xlc.viz import to_html


@functools.cache
def block() -> tuple[str, Any]:
    module, ba, compiled = transformer_block_module()
    return to_html(module, ba), compiled


@functools.cache
def stack_page() -> str:
    return to_html(*transformer_stack_module())


def top_level(graph: dict) -> tuple[int, int]:
    return (sum(1 for n in graph["nodes"] if n["p"] is None),
            sum(1 for c in graph["clusters"] if c["p"] is None))


def depth(graph: dict, item: dict) -> int:
    parent = {c["id"]: c["p"] for c in graph["clusters"]}
    d, cur = 0, item["p"]
    while cur is not None:
        d, cur = d + 1, parent[cur]
    return d


@requires_browser
def test_transformer_block_collapsed_then_a_fusion_opened(tmp_path: Path) -> None:
    page, _ = block()
    graph = page_graph(page)
    path = write(tmp_path, "block.html", page)
    attrs, _ = load(path, tmp_path, "check", shot="transformer_block_collapsed")
    nodes, clusters = top_level(graph)
    insts = int(re.search(r'data-stat="instructions"[^>]*><div class="k">instructions</div>'
                          r'<div class="v">(\d+)', page).group(1))
    assert 25 <= insts <= 45
    assert attrs["data-open-clusters"] == "0"
    assert (int(attrs["data-drawn-nodes"]), int(attrs["data-drawn-clusters"])) == \
        (nodes, clusters)
    assert nodes < len(graph["nodes"]) / 2  # the fusions' insides are hidden
    assert_legible(attrs)
    fusion = max((c for c in graph["clusters"] if c["k"] == "fusion"), key=lambda c: c["n"])
    inside = sum(1 for n in graph["nodes"] if n["p"] == fusion["id"])
    attrs, dom = load(path, tmp_path, f"open={fusion['id']}&check",
                      shot="transformer_block_fusion_open")
    assert attrs["data-open-clusters"] == "1"
    assert int(attrs["data-drawn-nodes"]) == nodes + inside
    assert re.search(rf'<g class="cluster open fusion" id="{fusion["id"]}"', dom)
    assert_legible(attrs)


@requires_browser
def test_search_finds_a_fused_node_by_source_line(tmp_path: Path) -> None:
    page, _ = block()
    graph = page_graph(page)
    fusions = {c["id"] for c in graph["clusters"] if c["k"] == "fusion"}
    fused = [n for n in graph["nodes"] if n["p"] in fusions and "source: " in n["t"]]
    assert fused, "fused instructions keep the user's source line"
    line = re.search(r"source: (\S+)", fused[0]["t"]).group(1)
    assert re.fullmatch(r"bench_models\.py:\d+", line)
    items = graph["nodes"] + graph["clusters"]
    hits = [it for it in items if line.lower() in it["s"]]
    first = sorted(hits, key=lambda it: depth(graph, it))[0]  # shallowest first, data order
    attrs, dom = load(write(tmp_path, "block.html", page), tmp_path,
                      f"search={line}&check", shot="transformer_block_search")
    assert attrs["data-search-hits"] == str(len(hits))
    assert attrs["data-search-current"] == first["id"]
    assert re.search(rf'<g class="[^"]*\bcurrent\b[^"]*" id="{first["id"]}"', dom) or \
        re.search(rf'<g class="[^"]*" id="{first["id"]}"[^>]*>', dom)
    assert int(attrs["data-open-clusters"]) == depth(graph, first)
    assert_legible(attrs)


@requires_browser
def test_three_hundred_instructions_of_repeated_layers(tmp_path: Path) -> None:
    page = stack_page()
    graph = page_graph(page)
    layers = [c for c in graph["clusters"] if c["k"] == "layer"]
    assert len(layers) >= 4 and all(c["p"] is None for c in layers)
    path = write(tmp_path, "stack.html", page)
    attrs, _ = load(path, tmp_path, "check", shot="transformer_stack_300_collapsed")
    assert (int(attrs["data-drawn-nodes"]), int(attrs["data-drawn-clusters"])) == \
        top_level(graph)
    assert_legible(attrs)
    attrs, _ = load(path, tmp_path, "open=all&check", shot="transformer_stack_300_open")
    assert int(attrs["data-drawn-nodes"]) == len(graph["nodes"])
    assert int(attrs["data-open-clusters"]) == len(graph["clusters"])
    assert_legible(attrs)


@requires_browser
def test_three_thousand_instructions(tmp_path: Path) -> None:
    module = long_program()
    n = sum(len(c.instructions) for c in module.computations)
    assert n >= 3000
    page = to_html(module)
    graph = page_graph(page)
    attrs, _ = load(write(tmp_path, "long.html", page), tmp_path, "check",
                    shot="long_program_3000")
    assert (int(attrs["data-drawn-nodes"]), int(attrs["data-drawn-clusters"])) == \
        top_level(graph)
    assert int(attrs["data-drawn-nodes"]) > 2500
    assert_legible(attrs)


@requires_browser
@requires_corpus
def test_corpus_attention(tmp_path: Path) -> None:
    module, ba = optimized_case("attention_single_head")
    page = to_html(module, ba)
    attrs, _ = load(write(tmp_path, "attention.html", page), tmp_path, "check",
                    shot="attention_single_head")
    assert (int(attrs["data-drawn-nodes"]), int(attrs["data-drawn-clusters"])) == \
        top_level(page_graph(page))
    assert_legible(attrs)


def stat_bytes(page: str, label: str) -> int:
    m = re.search(rf'data-stat="{label}" title="[^"]*" data-bytes="(\d+)"', page)
    assert m, label
    return int(m.group(1))


def test_header_and_memory_picture_agree_with_memory_analysis() -> None:
    page, compiled = block()
    ma = compiled.memory_analysis()
    assert stat_bytes(page, "parameters") == ma.argument_size_in_bytes
    assert stat_bytes(page, "outputs") == ma.output_size_in_bytes
    assert stat_bytes(page, "temp allocation") == ma.temp_size_in_bytes
    assert stat_bytes(page, "peak") == ma.peak_memory_in_bytes == \
        ma.argument_size_in_bytes + ma.output_size_in_bytes - ma.alias_size_in_bytes + \
        ma.temp_size_in_bytes
    mem = re.search(r'<div class="memory" data-peak="(\d+)" data-temp="(\d+)" '
                    r'data-live-peak="(\d+)">', page)
    assert mem and (int(mem[1]), int(mem[2])) == (ma.peak_memory_in_bytes,
                                                  ma.temp_size_in_bytes)
    # the timeline's peak is the live temp bytes: at most the temp allocation, and the
    # number the text and the temp panel's header show
    stats = compiled.optimized().assignment.stats()
    live = int(mem[3])
    assert 0 < live <= ma.temp_size_in_bytes
    from xlc.viz.graph import human_bytes
    assert f"whose live bytes peak at <b>{human_bytes(live)}</b>" in page
    assert re.search(r"\(temp, [^)]*\) · \d+ buffers · peak of the live bytes in this "
                     rf"allocation {re.escape(human_bytes(live))}", page)
    assert stats["temp_lower_bound_bytes"] == stat_bytes(page, "peak live temps")
    for label in ("parameters", "outputs", "temp"):
        assert re.search(rf'<div class="seg-{label}" style="width:[\d.]+%" data-bytes="\d+"',
                         page)


@pytest.mark.parametrize("field", ["source", "hlo"])
def test_hover_card_has_source_line_and_attributes(field: str) -> None:
    page, compiled = block()
    graph = page_graph(page)
    module = compiled.optimized().module
    dots = [i for c in module.computations for i in c.instructions
            if i.opcode.text == "dot" and "source_line" in i.metadata]
    assert dots
    inst = dots[0]
    tip = next(n["t"] for n in graph["nodes"] if n["id"] == f"n{inst.uid}")
    if field == "source":
        assert f"source: bench_models.py:{inst.metadata['source_line']}" in tip
        assert f"bench_models.py:{inst.metadata['source_line']}" in next(
            n["s"] for n in graph["nodes"] if n["id"] == f"n{inst.uid}")
    else:
        assert re.search(rf"hlo: %{re.escape(inst.name)} = \S+ dot\(.*lhs_contracting_dims=",
                         tip)
