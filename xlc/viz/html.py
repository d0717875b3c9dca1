"""One self-contained HTML page: the HLO graph (collapsible clusters, left-to-right layered
layout, search, hover cards with the user's source line) and the memory picture (header stats,
a bar saying what each number counts, the timeline of the temp allocation).

No graphviz, no network: the graph goes into the page as JSON (`graph_json`) and the page's
script (`xlc.viz.html_script`) lays it out (`xlc.viz.layout`) and draws it as inline SVG, so
that opening a fusion, a while/conditional body or a repeated layer re-lays the graph out. The
timeline is drawn here (`xlc.viz.timeline`).
"""
from __future__ import annotations

import html
import json
import logging
from typing import TYPE_CHECKING, Any

from xlc.hlo.ir import HloModule
from xlc.hlo.opcodes import Opcode
from xlc.viz import graph as vg
from xlc.viz.html_script import SCRIPT_JS
from xlc.viz.html_template import CSS
from xlc.viz.layout import LAYOUT_JS
from xlc.viz.timeline import CATEGORIES, Timeline, build_timeline, panel_svg

if TYPE_CHECKING:
    from xlc.passes.buffer_assignment import BufferAssignment

log = logging.getLogger("xlc.viz")

_esc = html.escape


def _inside(g: vg.VizGraph, cid: str) -> int:
    """Instructions drawn inside cluster `cid` (nested clusters counted by their contents;
    a fusion inside counts its fused instructions)."""
    c = g.clusters[cid]
    return len(c.nodes) + sum(_inside(g, k) for k in c.children)


def graph_json(g: vg.VizGraph) -> dict[str, Any]:
    """The graph as the page's script reads it: `nodes` [{id, k: kind, l: label lines, p:
    parent cluster or null, t: hover text, s: search text}], `clusters` [{id, k, l: [title,
    subtitle], p, t, s, n: instructions inside}], `edges` [[src, dst, label, style]] (node ids)
    and the entry's `title`."""
    entry = g.module.entry
    nodes = [{"id": n.id, "k": n.kind, "l": n.lines, "p": n.cluster,
              "t": vg.details_text(n.details), "s": n.search} for n in g.nodes.values()]
    clusters = [{"id": c.id, "k": c.kind, "l": [c.title, c.subtitle], "p": c.parent,
                 "t": vg.details_text(c.details), "s": c.search, "n": _inside(g, c.id)}
                for c in g.clusters.values()]
    edges = [[e.src, e.dst, e.label, e.style] for e in g.edges]
    return {"title": f"ENTRY {entry.name if entry is not None else ''}", "nodes": nodes,
            "clusters": clusters, "edges": edges}


def _json_script(data: dict[str, Any]) -> str:
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    # nothing in a <script> may close it early
    text = text.replace("<", "\\u003c")  # '<' only occurs inside JSON strings
    return f'<script type="application/json" id="graph-data">{text}</script>'


def graph_svg() -> str:
    """The empty <svg id="graph"> the script draws into (arrow marker defined)."""
    return ('<svg id="graph" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 100" '
            'preserveAspectRatio="xMidYMid meet"><defs><marker id="arrow" viewBox="0 0 10 10" '
            'refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
            '<path d="M0,0 L10,5 L0,10 z" fill="#8792a2"/></marker></defs></svg>')


# ---- page -----------------------------------------------------------------------------------
# (stats key, card label, what it counts): the same numbers as Compiled.memory_analysis()
_STAT_KEYS = (
    ("parameter_bytes", "parameters", "entry parameter allocations (argument_size_in_bytes)"),
    ("output_bytes", "outputs", "the result's buffers (output_size_in_bytes)"),
    ("alias_bytes", "aliased", "outputs living in a donated parameter (alias_size_in_bytes)"),
    ("temp_bytes", "temp allocation", "the temp allocation: every intermediate buffer, placed "
     "by the heap simulator (temp_size_in_bytes)"),
    ("temp_lower_bound_bytes", "peak live temps", "the most temp bytes live at one time (the "
     "timeline's peak): a lower bound for the temp allocation"),
    ("constant_bytes", "constants", "constant allocations (not in the peak)"),
    ("peak_bytes", "peak", "parameters + outputs - aliased + temp allocation "
     "(peak_memory_in_bytes)"))


def _stats_html(module: HloModule, ba: BufferAssignment | None) -> str:
    insts = sum(len(c.instructions) for c in module.computations if not c.is_fusion_computation)
    fusions = sum(1 for c in module.computations for i in c.instructions
                  if i.opcode is Opcode.FUSION)
    cards: list[tuple[str, str, str, int | None]] = [
        ("instructions", str(insts), "instructions outside fusions", None),
             ("fusions", str(fusions), "fusion instructions", None)]
    if ba is not None:
        stats = ba.stats()
        cards += [(label, vg.human_bytes(stats[key]), what, stats[key])
                  for key, label, what in _STAT_KEYS
                  if key in stats and (key != "alias_bytes" or stats[key])]
        cards.append(("allocations", str(len(ba.allocations)), "buffer allocations", None))
    return '<div class="stats">' + "".join(
        f'<div class="stat{" peak" if k == "peak" else ""}" data-stat="{_esc(k)}" '
        f'title="{_esc(what)}"' + (f' data-bytes="{n}"' if n is not None else "") +
        f'><div class="k">{_esc(k)}</div><div class="v">{_esc(v)}</div></div>'
        for k, v, what, n in cards) + "</div>"


def _memory_html(ba: BufferAssignment | None, tl: Timeline | None) -> str:
    """What the header's numbers count and how the timeline relates to them, with a bar of
    parameters | outputs | temp allocation (the live-temp peak marked inside the temp part)."""
    if ba is None:
        return ""
    st = ba.stats()
    hb = vg.human_bytes
    params, outs, alias = st["parameter_bytes"], st["output_bytes"], st["alias_bytes"]
    temp, peak = st["temp_bytes"], st["peak_bytes"]
    live = st.get("temp_lower_bound_bytes", 0)
    drawn = [p for p in tl.panels if p.kind == "temp"] if tl is not None else []
    drawn_peak = sum(p.peak for p in drawn)
    aliased = f" − aliased {hb(alias)}" if alias else ""
    text = (f"<p><b>peak {hb(peak)}</b> = parameters {hb(params)} + outputs {hb(outs)}"
            f"{aliased} + temp allocation {hb(temp)}: all device memory the program holds "
            "while it runs, the number <code>Compiled.memory_analysis().peak_memory_in_bytes"
            "</code> reports. The timeline below draws only the <b>temp allocation</b> "
            f"({hb(temp)}): the intermediate buffers, whose live bytes peak at "
            f"<b>{hb(drawn_peak if drawn else live)}</b>")
    if temp > (drawn_peak if drawn else live):
        text += (" (the rest of the allocation is fragmentation: buffers that never live at "
                 "the same time cannot all share the same bytes)")
    text += ". Parameters and outputs have their own allocations (table at the end).</p>"
    total = max(params + max(outs - alias, 0) + temp, 1)
    segs = [("parameters", params), ("outputs", max(outs - alias, 0)), ("temp", temp)]
    bar = []
    for name, n in segs:
        if not n:
            continue
        mark = ""
        if name == "temp" and temp and (drawn or live):
            at = 100.0 * min(drawn_peak if drawn else live, temp) / temp
            mark = f'<div class="live-mark" style="left:{at:.2f}%"></div>'
        bar.append(f'<div class="seg-{name}" style="width:{100.0 * n / total:.2f}%" '
                   f'data-bytes="{n}" title="{name} {hb(n)}">{name} {hb(n)}{mark}</div>')
    return (f'<div class="memory" data-peak="{peak}" data-temp="{temp}" '
            f'data-live-peak="{drawn_peak if drawn else live}">{text}'
            f'<div class="membar">{"".join(bar)}</div></div>')


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
                     f'{_esc(vg.human_bytes(p.size))}) · {len(p.rects)} buffers · peak of the '
                     f'live bytes in this allocation {_esc(vg.human_bytes(p.peak))}{extra}</h3>'
                     f'{panel_svg(p, tl.times)}</div>')
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
            group_repeats: bool = True, compute_assignment: bool = True,
            title: str | None = None) -> str:
    """A self-contained HTML page with the graph and the memory timeline of `module`.

    `assignment` defaults to `assign_buffers(module)` when `compute_assignment` (the module is
    not modified; failures only drop the timeline); `group_repeats` makes repeated layers
    clusters. Guarantees: no external resource; the page's script sets
    `body[data-rendered="ok"]` once it ran without error; one `rect.buf` per buffer drawn on
    the timeline; the header's byte counts are `assignment.stats()` (the numbers of
    `Compiled.memory_analysis()`)."""
    if assignment is None and compute_assignment:
        assignment = _default_assignment(module)
    g = vg.build_graph(module, assignment, max_label=max_label,
                       collapse_constants=collapse_constants, hide_plumbing=hide_plumbing,
                       group_repeats=group_repeats)
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
<section id="graph-section"><h2>Graph <span class="hint">click a box to open it · drag to pan ·
wheel to zoom · hover for details</span><span class="toolbar"><input id="search" type="search"
placeholder="search name, opcode, file.py:line" autocomplete="off"><span id="hits"></span>
<button id="open-all">open all</button><button id="close-all">close all</button>
<button id="zoom-in" title="zoom in">+</button><button id="zoom-out" title="zoom out">−</button>
<button id="zoom-fit">fit</button></span></h2>
<div id="graph-view">{graph_svg()}</div></section>
<section id="timeline-section"><h2>Memory <span class="hint">timeline of the temp allocation:
each buffer is its live range × [offset, offset + size)</span></h2>
{_memory_html(assignment, tl)}
{_timeline_html(tl, assignment)}
{_allocations_html(assignment)}
</section>
</main>
<footer>Generated by xlc.viz — self-contained, works offline.</footer>
<div id="tooltip"></div>
{_json_script(graph_json(g))}
<script>{LAYOUT_JS}
{SCRIPT_JS}</script>
</body></html>
"""
