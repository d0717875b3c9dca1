"""One self-contained HTML page: the HLO graph (own layered layout, fusion clusters, pan/zoom,
hover cards) and the memory timeline of the buffer assignment, with stats and a legend.

No graphviz, no network: the layout is computed here (`xlc.viz.layout`), drawn as inline SVG;
CSS and JS come inline from `xlc.viz.html_template`. Every control-flow computation is its own
panel to the right of the entry; fusions are boxes holding their fused computation.
"""
from __future__ import annotations

import html
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xlc.hlo.ir import HloModule
from xlc.hlo.opcodes import Opcode
from xlc.viz import graph as vg
from xlc.viz.html_template import CSS, JS
from xlc.viz.layout import Layout, layered_layout, svg_path
from xlc.viz.timeline import CATEGORIES, Timeline, build_timeline, panel_svg

if TYPE_CHECKING:
    from xlc.passes.buffer_assignment import BufferAssignment

log = logging.getLogger("xlc.viz")

CHAR_W = 6.3       # average glyph width at 11px
LINE_H = 14.0
PAD = 12.0         # inside a cluster
HEAD = 34.0        # cluster title block
PANEL_GAP = 70.0

_esc = html.escape


@dataclass
class _Group:
    """A laid-out level: a panel (top level or a called computation) or a fusion cluster."""

    members: list[str]
    layout: Layout
    sizes: dict[str, tuple[float, float]]
    labels: dict[tuple[str, str], str] = field(default_factory=dict)


class _GraphDrawer:
    def __init__(self, g: vg.VizGraph):
        self.g = g
        self.groups: dict[str | None, _Group] = {}
        self.size: dict[str, tuple[float, float]] = {}
        self.abs: dict[str, tuple[float, float]] = {}
        self.anchor: dict[str, tuple[float, float]] = {}  # computation panel -> call target
        self.out: list[str] = []

    # ---- sizes and layouts (bottom-up) -----------------------------------------------------
    def node_size(self, nid: str) -> tuple[float, float]:
        lines = self.g.nodes[nid].lines
        return (max(len(s) for s in lines) * CHAR_W + 18, len(lines) * LINE_H + 10)

    def members(self, key: str | None) -> list[str]:
        if key is None:
            nodes, clusters = self.g.top, self.g.top_clusters
        else:
            c = self.g.clusters[key]
            nodes, clusters = c.nodes, c.children
        return list(nodes) + [c for c in clusters if self.g.clusters[c].kind == "fusion"]

    def rep(self, item: str, members: set[str]) -> str | None:
        cur: str | None = item
        while cur is not None and cur not in members:
            cur = self.g.owner(cur)
        return cur

    def layout_group(self, key: str | None) -> tuple[float, float]:
        members = self.members(key)
        sizes: dict[str, tuple[float, float]] = {}
        for m in members:
            sizes[m] = self.node_size(m) if m in self.g.nodes else self.layout_group(m)
        mset = set(members)
        edges: list[tuple[str, str]] = []
        labels: dict[tuple[str, str], str] = {}
        for e in self.g.edges:
            if e.style == "call":
                continue
            s, d = self.rep(e.src, mset), self.rep(e.dst, mset)
            if s is None or d is None or s == d:
                continue
            edges.append((s, d))
            if e.label:
                labels[(s, d)] = e.label
        lay = layered_layout(members, sizes, edges)
        self.groups[key] = _Group(members, lay, sizes, labels)
        if key is None or self.g.clusters[key].kind == "computation":
            w, h = lay.width, lay.height
        else:
            c = self.g.clusters[key]
            title_w = max(len(c.title), len(c.subtitle)) * CHAR_W + 2 * PAD
            w, h = max(lay.width + 2 * PAD, title_w), lay.height + HEAD + PAD
        self.size[key or ""] = (w, h)
        return (w, h)

    # ---- drawing (top-down, absolute coordinates) ------------------------------------------
    def draw_group(self, key: str | None, ox: float, oy: float) -> None:
        grp = self.groups[key]
        lay = grp.layout
        for (s, d), pts in zip(lay.edges, lay.paths):
            self.out.append(f'<path class="edge" d="{svg_path(pts, ox, oy)}" '
                            f'marker-end="url(#arrow)"/>')
            label = grp.labels.get((s, d))
            if label:
                lx, ly = pts[-1]
                self.out.append(f'<text class="edge-label" x="{lx + ox + 4:.1f}" '
                                f'y="{ly + oy - 5:.1f}">{_esc(label)}</text>')
        for m in grp.members:
            x, y = lay.pos[m]
            x, y = x + ox, y + oy
            w, h = grp.sizes[m]
            self.abs[m] = (x + w, y + h / 2)
            if m in self.g.nodes:
                self.draw_node(self.g.nodes[m], x, y, w, h)
            else:
                self.draw_cluster(m, x, y, w, h)

    def draw_node(self, n: vg.VizNode, x: float, y: float, w: float, h: float) -> None:
        tip = _esc(vg.details_text(n.details))
        parts = [f'<g class="node k-{n.kind}" id="{n.id}" data-tip="{tip}" '
                 f'data-cx="{x + w / 2:.1f}" data-cy="{y + h / 2:.1f}" '
                 f'transform="translate({x:.1f},{y:.1f})">',
                 f'<rect width="{w:.1f}" height="{h:.1f}" rx="5"/>']
        for i, line in enumerate(n.lines):
            cls = "op" if i == 1 else "dim" if i != 0 else "name"
            parts.append(f'<text class="{cls}" x="9" y="{17 + i * LINE_H:.0f}">{_esc(line)}</text>')
        parts.append("</g>")
        self.out.append("".join(parts))

    def draw_cluster(self, cid: str, x: float, y: float, w: float, h: float) -> None:
        c = self.g.clusters[cid]
        tip = _esc(vg.details_text(c.details))
        self.out.append(
            f'<g class="cluster {c.kind}" id="{c.id}" data-tip="{tip}" '
            f'data-cx="{x + w / 2:.1f}" data-cy="{y + h / 2:.1f}">'
            f'<rect class="frame" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
            f'rx="9"/><text class="title" x="{x + PAD:.1f}" y="{y + 15:.1f}">'
            f'{_esc(c.title)}</text><text class="dim" x="{x + PAD:.1f}" y="{y + 28:.1f}">'
            f'{_esc(c.subtitle)}</text></g>')
        self.draw_group(cid, x + PAD, y + HEAD)

    def panels(self) -> list[str | None]:
        out: list[str | None] = [None]
        out += [cid for cid, c in self.g.clusters.items() if c.kind == "computation"]
        return out

    def draw(self) -> tuple[str, float, float]:
        """All panels side by side; returns (svg body, width, height)."""
        x = 0.0
        height = 0.0
        for key in self.panels():
            w, h = self.layout_group(key)
            entry = self.g.module.entry
            title = f"ENTRY {entry.name if entry is not None else ''}" if key is None \
                else self.g.clusters[key].title
            sub = "" if key is None else self.g.clusters[key].subtitle
            w = max(w, len(title) * 7.5)
            if key is None:
                self.out.append(f'<text class="panel-title" x="{x:.1f}" y="14" '
                                f'font-weight="700">{_esc(title)}</text>')
            else:
                c = self.g.clusters[key]
                self.anchor[key] = (x - PAD, 10.0)
                tip = _esc(vg.details_text(c.details))
                self.out.append(
                    f'<g class="cluster computation" id="{c.id}" data-tip="{tip}" '
                    f'data-cx="{x + w / 2:.1f}" data-cy="{h / 2:.1f}"><rect class="frame" '
                    f'x="{x - PAD:.1f}" y="-6" width="{w + 2 * PAD:.1f}" '
                    f'height="{h + HEAD + PAD + 6:.1f}" rx="10"/>'
                    f'<text class="title" x="{x:.1f}" y="12">{_esc(title)}</text>'
                    f'<text class="dim" x="{x:.1f}" y="25">{_esc(sub)}</text></g>')
            self.draw_group(key, x, HEAD)
            x += w + PANEL_GAP
            height = max(height, h + HEAD + PAD)
        calls: list[str] = []  # drawn first, under the panels
        for e in self.g.edges:
            if e.style != "call" or e.src not in self.abs:
                continue
            owner = self.g.nodes[e.dst].cluster
            while owner is not None and self.g.clusters[owner].kind != "computation":
                owner = self.g.clusters[owner].parent
            if owner is None or owner not in self.anchor:
                continue
            sx, sy = self.abs[e.src]
            tx, ty = self.anchor[owner]
            mx = (sx + tx) / 2
            calls.append(f'<path class="edge call" d="M{sx:.1f},{sy:.1f} C{mx:.1f},{sy:.1f} '
                         f'{mx:.1f},{ty:.1f} {tx:.1f},{ty:.1f}" marker-end="url(#arrow)"/>')
        return "\n".join(calls + self.out), max(x - PANEL_GAP, 1.0), max(height, 1.0)


def graph_svg(g: vg.VizGraph) -> str:
    """The graph as an inline <svg id="graph"> (viewBox set by the page's JS)."""
    body, w, h = _GraphDrawer(g).draw()
    return (f'<svg id="graph" xmlns="http://www.w3.org/2000/svg" data-size="{w:.0f} {h:.0f}" '
            f'viewBox="0 0 {w:.0f} {h:.0f}" preserveAspectRatio="xMidYMid meet">'
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
            'fill="#8792a2"/></marker></defs>\n' + body + "\n</svg>")


# ---- page -----------------------------------------------------------------------------------
_STAT_KEYS = (("parameter_bytes", "parameters"), ("output_bytes", "outputs"),
              ("temp_bytes", "temp allocation"), ("constant_bytes", "constants"),
              ("temp_lower_bound_bytes", "temp lower bound"), ("peak_bytes", "peak"))


def _stats_html(module: HloModule, ba: BufferAssignment | None) -> str:
    insts = sum(len(c.instructions) for c in module.computations if not c.is_fusion_computation)
    fusions = sum(1 for c in module.computations for i in c.instructions
                  if i.opcode is Opcode.FUSION)
    cards = [("instructions", str(insts)), ("fusions", str(fusions))]
    if ba is not None:
        stats = ba.stats()
        cards += [(label, vg.human_bytes(stats[key])) for key, label in _STAT_KEYS
                  if key in stats]
        cards.append(("allocations", str(len(ba.allocations))))
    return '<div class="stats">' + "".join(
        f'<div class="stat{" peak" if k == "peak" else ""}" data-stat="{_esc(k)}">'
        f'<div class="k">{_esc(k)}</div><div class="v">{_esc(v)}</div></div>'
        for k, v in cards) + "</div>"


def _timeline_html(tl: Timeline | None, ba: BufferAssignment | None) -> str:
    if ba is None:
        return '<div class="note">No buffer assignment: no memory timeline.</div>'
    if tl is None:
        return ('<div class="note">The buffer assignment has no total order (no schedule): '
                'there is no timeline to draw.</div>')
    if not tl.panels:
        return ('<div class="note">No temp allocation: every buffer lives in a parameter, '
                'output or constant allocation.</div>')
    legend = '<div class="legend">' + "".join(
        f'<span><span class="sw" style="background:{fill};border-color:{stroke}"></span>'
        f'{_esc(text)}</span>' for fill, stroke, text in CATEGORIES.values()) + \
        '<span><span class="sw" style="background:#d62839"></span>peak</span>' \
        '<span>x: schedule position · y: offset in the allocation · click a buffer to find ' \
        'it in the graph</span></div>'
    parts = [legend]
    for p in tl.panels:
        extra = f" · {p.unplaced} dead buffers not drawn" if p.unplaced else ""
        parts.append(f'<div class="timeline-wrap"><h3>allocation #{p.alloc_index} ({p.kind}, '
                     f'{_esc(vg.human_bytes(p.size))}) · {len(p.rects)} buffers · peak live '
                     f'{_esc(vg.human_bytes(p.peak))}{extra}</h3>{panel_svg(p, tl.times)}</div>')
    return "\n".join(parts)


def _allocations_html(ba: BufferAssignment | None) -> str:
    """A table of every allocation: index, kind, size, buffer count, first buffers."""
    if ba is None:
        return ""
    rows = []
    for a in ba.allocations:
        names = sorted({b.instruction.name for b in a.assigned})
        shown = ", ".join(names[:4]) + (f" … (+{len(names) - 4})" if len(names) > 4 else "")
        flags = []
        if a.is_entry_computation_parameter:
            flags.append(f"parameter {a.parameter_number}")
        if a.aliased_with_output:
            flags.append("aliased with output")
        if a.maybe_live_out:
            flags.append("live out")
        if a.is_tuple:
            flags.append("tuple")
        rows.append(f'<tr class="alloc k-{_esc(a.kind)}"><td>#{a.index}</td><td>{_esc(a.kind)}'
                    f'</td><td class="num">{_esc(vg.human_bytes(a.size))}</td>'
                    f'<td class="num">{len(a.assigned)}</td><td>{_esc(", ".join(flags))}</td>'
                    f'<td class="names">{_esc(shown)}</td></tr>')
    return ('<details class="allocs"><summary>All allocations (' + str(len(ba.allocations))
            + ')</summary><table><thead><tr><th>#</th><th>kind</th><th>size</th>'
            '<th>buffers</th><th>flags</th><th>instructions</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table></details>")


def _category_css() -> str:
    return "\n".join(f"svg.timeline .buf.cat-{k} {{ fill:{fill}; stroke:{stroke}; }}"
                     for k, (fill, stroke, _) in CATEGORIES.items())


def _default_assignment(module: HloModule) -> BufferAssignment | None:
    from xlc.passes.buffer_assignment import assign_buffers

    try:
        return assign_buffers(module)
    except Exception as e:  # the page still shows the graph without it
        log.warning("no buffer assignment for %s: %s", module.name, e)
        return None


def to_html(module: HloModule, assignment: BufferAssignment | None = None, *,
            max_label: int = 40, collapse_constants: bool = True, hide_plumbing: bool = False,
            compute_assignment: bool = True, title: str | None = None) -> str:
    """A self-contained HTML page with the graph and the memory timeline of `module`.

    `assignment` defaults to `assign_buffers(module)` when `compute_assignment` (the module is
    not modified; failures only drop the timeline). Guarantees: no external resource; the
    page's script sets `body[data-rendered="ok"]` once it ran without error; one
    `rect.buf` per buffer drawn on the timeline."""
    if assignment is None and compute_assignment:
        assignment = _default_assignment(module)
    g = vg.build_graph(module, assignment, max_label=max_label,
                       collapse_constants=collapse_constants, hide_plumbing=hide_plumbing)
    tl = build_timeline(assignment) if assignment is not None else None
    name = _esc(module.name)
    head = _esc(title or f"xlc · {module.name}")
    n_bufs = sum(len(p.rects) for p in tl.panels) if tl is not None else 0
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{head}</title>
<style>{CSS}
{_category_css()}</style></head>
<body data-rendered="pending">
<header><h1>{name}</h1><div class="sub">xlc HLO graph and memory timeline ·
{len(g.nodes)} nodes · {len(g.clusters)} clusters · {len(g.edges)} edges · {n_bufs} timeline
buffers</div>{_stats_html(module, assignment)}</header>
<div id="errors"></div>
<main>
<section id="graph-section"><h2>Graph <span class="hint">drag to pan · wheel to zoom · hover for
shape, bytes and slice</span><span class="toolbar"><button id="zoom-in" title="zoom in">+</button>
<button id="zoom-out" title="zoom out">−</button><button id="zoom-fit">fit</button></span></h2>
<div id="graph-view">{graph_svg(g)}</div></section>
<section id="timeline-section"><h2>Memory timeline <span class="hint">each buffer: live range ×
[offset, offset + size)</span></h2>
{_timeline_html(tl, assignment)}
{_allocations_html(assignment)}
</section>
</main>
<footer>Generated by xlc.viz — self-contained, works offline.</footer>
<div id="tooltip"></div>
<script>{JS}</script>
</body></html>
"""
