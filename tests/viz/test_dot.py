"""DOT export: well-formed on optimized corpus modules, clusters, markers, label rules."""
from __future__ import annotations

import re
import shutil

import pytest

from tests.conftest import corpus_cases, requires_corpus
from tests.viz.helpers import CASES, corpus_text, optimized_case, page_graph
from xlc.errors import XlcError
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module
from xlc.viz import dot as viz_dot
from xlc.viz import render, to_dot, to_html, to_svg, write

NODE_RE = re.compile(r"^\s*(n\d+) \[label=\"((?:[^\"\\]|\\.)*)\"", re.M)
EDGE_RE = re.compile(r"^\s*(n\d+) -> (n\d+) \[", re.M)
CLUSTER_RE = re.compile(r"subgraph (cluster_[\w]+) \{")

WHILE_HLO = """
HloModule loop

cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  v = f32[4] get-tuple-element(s), index=1
  v2 = f32[4] multiply(v, v)
  ROOT t = (s32[], f32[4]) tuple(i2, v2)
}

ENTRY main {
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, x)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
}
"""

SIMPLE_HLO = """
HloModule simple

ENTRY main {
  a_parameter_with_a_really_long_name_that_goes_on = f32[8] parameter(0)
  two = f32[] constant(2)
  b = f32[8] broadcast(two), dimensions={}
  ROOT m = f32[8] multiply(a_parameter_with_a_really_long_name_that_goes_on, b)
}
"""


def unquoted(text: str) -> str:
    """`text` with every double-quoted string removed."""
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)


def check_well_formed(text: str) -> tuple[set[str], list[tuple[str, str]], list[str]]:
    """Balanced braces, every edge endpoint declared; returns (nodes, edges, clusters)."""
    bare = unquoted(text)
    depth = 0
    for ch in bare:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0, "a '}' closes nothing"
    assert depth == 0, "unbalanced braces"
    assert bare.lstrip().startswith("digraph") and bare.rstrip().endswith("}")
    nodes = {m.group(1) for m in NODE_RE.finditer(text)}
    edges = [(m.group(1), m.group(2)) for m in EDGE_RE.finditer(text)]
    for s, d in edges:
        assert s in nodes and d in nodes, f"edge {s} -> {d} has an undeclared endpoint"
    clusters = CLUSTER_RE.findall(text)
    assert len(clusters) == len(set(clusters)), "duplicate cluster ids"
    return nodes, edges, clusters


@requires_corpus
@pytest.mark.parametrize("name", CASES)
def test_dot_well_formed_on_optimized_corpus(name: str) -> None:
    module, ba = optimized_case(name)
    text = to_dot(module, ba)
    nodes, edges, clusters = check_well_formed(text)
    assert edges, "an optimized corpus module has data edges"
    drawn = [module.entry] + [c for c in module.computations if any(
        i.opcode in (Opcode.WHILE, Opcode.CONDITIONAL, Opcode.CALL) and c in i.called
        for cc in module.computations for i in cc.instructions)]
    fusions = [i for c in drawn for i in c.instructions if i.opcode is Opcode.FUSION]
    for f in fusions:
        assert f"cluster_n{f.uid}" in clusters, f"fusion {f.name} has no cluster"
        for inner in f.fused_computation.instructions:
            if inner.opcode is Opcode.PARAMETER:
                assert f"n{inner.uid}" in nodes
    for p in module.entry.parameters:
        assert re.search(rf"^\s*n{p.uid} \[.*shape=invhouse", text, re.M)
    root = module.entry.root
    if root.opcode is not Opcode.FUSION:
        assert re.search(rf"^\s*n{root.uid} \[.*peripheries=2", text, re.M)
    # with the assignment, every entry parameter shows its allocation slice
    for p in module.entry.parameters:
        s = ba.slice_of(p)
        assert f"alloc #{s.index} (parameter)" in text


@requires_corpus
@pytest.mark.parametrize("name", corpus_cases())
def test_xla_optimized_hlo_draws(name: str) -> None:
    """XLA's own optimized modules (kCustom fusions, schedules, metadata) draw as well."""
    module = parse_module(corpus_text(name, "optimized"))
    _, _, clusters = check_well_formed(to_dot(module, hide_plumbing=True))
    fusions = [i for i in module.entry.instructions if i.opcode is Opcode.FUSION]
    assert len([c for c in clusters if c.startswith("cluster_n")]) >= len(fusions)
    page = to_html(module, compute_assignment=False)
    kinds = {c["id"]: c["k"] for c in page_graph(page)["clusters"]}
    assert all(kinds[f"n{f.uid}"] == "fusion" for f in fusions)


@requires_corpus
@pytest.mark.parametrize("name", ["power_iteration", "cond_switch"])
def test_control_flow_callees_are_clusters_with_call_edges(name: str) -> None:
    module, _ = optimized_case(name)
    text = to_dot(module)
    check_well_formed(text)
    callers = [i for i in module.entry.instructions
               if i.opcode in (Opcode.WHILE, Opcode.CONDITIONAL)]
    assert callers
    for inst in callers:
        for callee in inst.called:
            assert f": {callee.name}" in text
        calls = re.findall(rf"^\s*n{inst.uid} -> n\d+ \[style=dashed.*lhead=cluster_c",
                           text, re.M)
        assert len(calls) == len(inst.called)


def test_while_roles_and_hidden_plumbing() -> None:
    module = parse_module(WHILE_HLO)
    text = to_dot(module)
    check_well_formed(text)
    assert "while condition: cond" in text and "while body: body" in text
    assert "get-tuple-element 1" in text
    hidden = to_dot(module, hide_plumbing=True)
    nodes, edges, _ = check_well_formed(hidden)
    plumbing = [i for c in module.computations for i in c.instructions
                if i.opcode in (Opcode.GET_TUPLE_ELEMENT, Opcode.TUPLE) and not i.is_root]
    assert len(plumbing) == 4
    for g in plumbing:
        assert f"n{g.uid}" not in nodes
    # r = gte(w, 1) is the entry root, so it stays; in the body v2 reads s{1} directly
    body = module.computation("body")
    s, v2 = body.parameters[0], body.instruction("v2")
    assert re.search(rf"n{s.uid} -> n{v2.uid} \[.*label=\"\{{1\}}\"", hidden)


def test_collapsed_constants_and_label_cap() -> None:
    module = parse_module(SIMPLE_HLO)
    two = module.entry.instruction("two")
    b = module.entry.instruction("b")
    text = to_dot(module, max_label=20)
    nodes, _, _ = check_well_formed(text)
    assert f"n{two.uid}" not in nodes
    label = dict((m.group(1), m.group(2)) for m in NODE_RE.finditer(text))[f"n{b.uid}"]
    assert "operand 0 = 2.0" in label
    for lab in dict((m.group(1), m.group(2)) for m in NODE_RE.finditer(text)).values():
        for line in lab.split("\\n"):
            assert len(line) <= 20, line
    assert "a_parameter_with_a_…" in text
    full = to_dot(module, collapse_constants=False, max_label=200)
    nodes, edges, _ = check_well_formed(full)
    assert f"n{two.uid}" in nodes and (f"n{two.uid}", f"n{b.uid}") in edges
    assert "a_parameter_with_a_really_long_name_that_goes_on" in full


def test_quote_escapes() -> None:
    assert viz_dot.quote('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'


def test_to_svg_without_graphviz_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(viz_dot.shutil, "which", lambda _name: None)
    with pytest.raises(XlcError, match="graphviz 'dot' is not on the PATH"):
        to_svg(parse_module(SIMPLE_HLO))


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz 'dot' not installed")
def test_to_svg_with_graphviz() -> None:
    module = parse_module(WHILE_HLO)
    svg = to_svg(module)
    assert "<svg" in svg and "while body: body" in svg
    assert svg.count('class="cluster"') >= 2


def test_write_picks_format_by_suffix(tmp_path) -> None:
    module = parse_module(SIMPLE_HLO)
    path = write(module, tmp_path / "g.dot")
    check_well_formed(path.read_text())
    page = write(module, tmp_path / "g.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    with pytest.raises(XlcError, match=r"cannot tell the picture format of 'g\.png'"):
        write(module, tmp_path / "g.png")
    with pytest.raises(XlcError, match="unknown picture format 'pdf'"):
        render(module, "pdf")
