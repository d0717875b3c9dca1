"""Graphviz DOT export of an HloModule (and SVG through graphviz's `dot`, when installed).

Drawing rules come from `xlc.viz.graph.build_graph`: fusions are filled clusters holding their
fused computations, while/conditional/call callees are dashed clusters reached by dashed call
edges, entry parameters are green "input" houses, the entry root a double-bordered red "output"
box, scalar constants are folded into their users' labels.
"""
from __future__ import annotations

import logging
import shutil
import subprocess
from typing import TYPE_CHECKING

from xlc.errors import XlcError
from xlc.hlo.ir import HloModule
from xlc.viz import graph as vg

if TYPE_CHECKING:
    from xlc.passes.buffer_assignment import BufferAssignment

log = logging.getLogger("xlc.viz")

# kind -> node attributes
_NODE_STYLE: dict[str, str] = {
    vg.INPUT: 'shape=invhouse, fillcolor="#d8f3dc", color="#2d6a4f"',
    vg.PARAMETER: 'shape=invhouse, fillcolor="#edf6f0", color="#52796f"',
    vg.OUTPUT: 'shape=box, peripheries=2, fillcolor="#ffd6d6", color="#b23a48"',
    vg.ROOT: 'shape=box, fillcolor="#ffe8d6", color="#b5651d"',
    vg.CONSTANT: 'shape=box, fillcolor="#f1f1f1", color="#888888"',
    vg.PLUMBING: 'shape=box, fillcolor="#f8f9fa", color="#adb5bd", fontcolor="#6c757d"',
    vg.CONTROL: 'shape=hexagon, fillcolor="#e0d7ff", color="#5a4fcf"',
    vg.HEAVY: 'shape=box, fillcolor="#cfe2ff", color="#1d4ed8"',
    vg.OP: 'shape=box, fillcolor="#ffffff", color="#495057"',
}
_CLUSTER_STYLE: dict[str, str] = {
    "fusion": 'style="rounded,filled"; fillcolor="#fff4d6"; color="#d4a017";',
    "computation": 'style="rounded,dashed"; fillcolor="#fbfbff"; color="#5a4fcf";',
}
_EDGE_STYLE: dict[str, str] = {
    "data": 'color="#495057"',
    "control": 'style=dotted, color="#868e96"',
    "call": 'style=dashed, color="#5a4fcf", fontcolor="#5a4fcf"',
}


def quote(text: str) -> str:
    """A DOT double-quoted string (backslashes and quotes escaped, newlines as \\n)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _node_line(node: vg.VizNode, indent: str) -> str:
    label = quote("\n".join(node.lines))
    tooltip = quote(vg.details_text(node.details))
    return f"{indent}{node.id} [label={label}, tooltip={tooltip}, {_NODE_STYLE[node.kind]}];"


def _cluster_lines(g: vg.VizGraph, cid: str, depth: int) -> list[str]:
    c = g.clusters[cid]
    pad = "  " * depth
    lines = [f"{pad}subgraph cluster_{c.id} {{",
             f"{pad}  label={quote(c.title + chr(10) + c.subtitle)}; "
             f"tooltip={quote(vg.details_text(c.details))}; {_CLUSTER_STYLE[c.kind]}"]
    lines += [_node_line(g.nodes[n], pad + "  ") for n in c.nodes]
    for child in c.children:
        lines += _cluster_lines(g, child, depth + 1)
    lines.append(f"{pad}}}")
    return lines


def graph_to_dot(g: vg.VizGraph) -> str:
    """Render an already built `VizGraph` as DOT text."""
    out = [f"digraph {quote(g.module.name)} {{",
           '  graph [rankdir=TB, compound=true, newrank=true, fontname="Helvetica", '
           'fontsize=11, nodesep=0.25, ranksep=0.35, labeljust=l];',
           '  node [style="filled,rounded", fontname="Helvetica", fontsize=10, '
           'margin="0.08,0.03", height=0.3];',
           '  edge [fontname="Helvetica", fontsize=9, arrowsize=0.6];']
    out += [_node_line(g.nodes[n], "  ") for n in g.top]
    for cid in g.top_clusters:
        out += _cluster_lines(g, cid, 1)
    for e in g.edges:
        attrs = [_EDGE_STYLE[e.style]]
        if e.label:
            attrs.append(f"label={quote(e.label)}")
        if e.style == "call":
            owner = g.nodes[e.dst].cluster
            if owner is not None:
                attrs.append(f"lhead=cluster_{owner}")
        out.append(f"  {e.src} -> {e.dst} [{', '.join(attrs)}];")
    out.append("}")
    return "\n".join(out) + "\n"


def to_dot(module: HloModule, assignment: BufferAssignment | None = None, max_label: int = 40,
           collapse_constants: bool = True, hide_plumbing: bool = False) -> str:
    """DOT text for `module`: one node per drawn instruction (name, opcode, shape and, with an
    `assignment`, its allocation slice), fusions and control-flow callees as clusters.

    Requires a module with an entry computation. Guarantees: well-formed DOT (every edge's
    endpoints are declared nodes, clusters properly nested); no graphviz needed."""
    return graph_to_dot(vg.build_graph(module, assignment, max_label=max_label,
                                       collapse_constants=collapse_constants,
                                       hide_plumbing=hide_plumbing))


def find_dot() -> str | None:
    """Path of graphviz's `dot` executable, or None."""
    return shutil.which("dot")


def dot_to_svg(dot_text: str, timeout: float = 120.0) -> str:
    """Run graphviz `dot -Tsvg` on `dot_text`. Raises XlcError when graphviz is missing or
    fails."""
    exe = find_dot()
    if exe is None:
        raise XlcError("graphviz 'dot' is not on the PATH: install graphviz to get SVG, "
                       "or write .dot or .html instead")
    try:
        proc = subprocess.run([exe, "-Tsvg"], input=dot_text.encode(), capture_output=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        raise XlcError(f"graphviz 'dot' took longer than {timeout:.0f} s") from e
    if proc.returncode != 0:
        msg = proc.stderr.decode(errors="replace").strip().splitlines()
        raise XlcError(f"graphviz 'dot' failed: {msg[0] if msg else f'exit {proc.returncode}'}")
    return proc.stdout.decode()


def to_svg(module: HloModule, assignment: BufferAssignment | None = None, max_label: int = 40,
           collapse_constants: bool = True, hide_plumbing: bool = False) -> str:
    """SVG of `to_dot(...)` laid out by graphviz. Raises XlcError without graphviz."""
    text = to_dot(module, assignment, max_label, collapse_constants, hide_plumbing)
    log.debug("running dot on %d bytes of DOT", len(text))
    return dot_to_svg(text)
