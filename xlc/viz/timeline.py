"""The memory timeline of a BufferAssignment: data model and SVG.

x axis: logical time (the module schedule flattened, callees inlined: `LiveRanges.sequence`);
y axis: offset inside the allocation. Each buffer placed in a temp allocation (or a temp
sharing an output allocation) is one rectangle spanning its live range x [offset,
offset + size). The live-bytes curve below it marks the peak. Values offloaded to host memory
(`S(5)`, host offload) are drawn as category "offload": their host-resident stretch in the
host allocation's panel and the copies bringing them back in the device panel. Values
recomputed under a memory limit (rematerialization's `.remat` clones) are category "remat".
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xlc.hlo.opcodes import ASYNC_COPY_OPCODES, Opcode
from xlc.passes.memory_budget import HOST_MEMORY_SPACE
from xlc.passes.rematerialization import is_rematerialized
from xlc.viz.graph import cap, human_bytes, node_id, shape_text

if TYPE_CHECKING:
    from xlc.passes.buffer_assignment import BufferAllocation, BufferAssignment
    from xlc.passes.dataflow import LogicalBuffer

# category -> (fill, stroke, legend text)
CATEGORIES: dict[str, tuple[str, str, str]] = {
    "fusion": ("#f6c453", "#b7860b", "fusion output"),
    "heavy": ("#7aa6f5", "#2f5fc4", "dot / reduce / sort ..."),
    "copy": ("#f28e8e", "#b83b3b", "copy"),
    "control": ("#b9a7f5", "#6246c7", "while / conditional / call"),
    "tuple": ("#c8ccd2", "#7b828c", "tuple index table"),
    "op": ("#7fd1b9", "#2a8f73", "other op"),
    "offload": ("#d9e2ec", "#3b6fa0", "offloaded to host / copied back"),
    "remat": ("#f7a8d8", "#a8327a", "recomputed (rematerialization)"),
}
_HEAVY = frozenset({Opcode.DOT, Opcode.CONVOLUTION, Opcode.REDUCE, Opcode.REDUCE_WINDOW,
                    Opcode.SORT, Opcode.SCATTER, Opcode.GATHER, Opcode.CUSTOM_CALL})
_CONTROL = frozenset({Opcode.WHILE, Opcode.CONDITIONAL, Opcode.CALL})
_CATEGORY_OF: dict[Opcode, str] = {Opcode.FUSION: "fusion", Opcode.COPY: "copy",
                                   Opcode.TUPLE: "tuple",
                                   **{op: "heavy" for op in _HEAVY},
                                   **{op: "control" for op in _CONTROL}}


@dataclass
class BufferRect:
    """One buffer (alias set) in an allocation: [start, end] x [offset, offset + size)."""

    label: str
    inst_id: str
    shape: str
    category: str
    offset: int
    size: int
    start: int
    end: int
    names: list[str]
    shares_start: bool = False  # takes over a dying buffer's bytes at step `start`
    shares_end: bool = False    # hands its bytes to a new buffer at step `end`


@dataclass
class TimelinePanel:
    """One allocation drawn as a timeline; `live[t]` = bytes live at time t."""

    alloc_index: int
    kind: str
    size: int
    rects: list[BufferRect] = field(default_factory=list)
    live: list[int] = field(default_factory=list)
    unplaced: int = 0  # buffers without a live range (dead code), not drawn

    @property
    def peak(self) -> int:
        return max(self.live, default=0)

    @property
    def peak_time(self) -> int:
        return self.live.index(self.peak) if self.live else 0


@dataclass
class Timeline:
    """`times[t]` names the instruction at logical time t."""

    times: list[str]
    panels: list[TimelinePanel]


def _panel_allocations(ba: BufferAssignment) -> list[BufferAllocation]:
    temps, outputs = [], []
    for alloc in ba.allocations:
        sets = {id(ba.dataflow.alias_set(b)) for b in alloc.assigned}
        if alloc.kind == "temp":
            temps.append(alloc)
        elif alloc.kind == "output" and len(sets) > 1:
            outputs.append(alloc)
    return temps + sorted(outputs, key=lambda a: -a.size)


def build_timeline(ba: BufferAssignment) -> Timeline | None:
    """The timeline of every temp allocation (and of every output allocation that also hosts
    temps). None when the assignment has no total order (no live ranges)."""
    live = ba.live_ranges
    if live is None:
        return None
    end_time = live.end_time
    times = [inst.name for inst in live.sequence]
    panels: list[TimelinePanel] = []
    for alloc in _panel_allocations(ba):
        kind = alloc.kind + (f", host S({HOST_MEMORY_SPACE})"
                             if alloc.color == HOST_MEMORY_SPACE else "")
        panel = TimelinePanel(alloc.index, kind, alloc.size)
        groups: dict[tuple[int, int], list] = {}
        for buf, (offset, _size) in alloc.assigned.items():
            aset = ba.dataflow.alias_set(buf)
            groups.setdefault((aset.id, offset), []).append(buf)
        for (_, offset), bufs in sorted(groups.items(), key=lambda kv: kv[0]):
            ranges = [live.buffer_ranges[b] for b in bufs if b in live.buffer_ranges]
            if not ranges:
                panel.unplaced += 1
                continue
            bufs.sort(key=lambda b: b.id)
            first = bufs[0]
            idx = "{" + ",".join(map(str, first.index)) + "}" if first.index else ""
            inst = first.instruction
            panel.rects.append(BufferRect(
                label=f"{inst.name}{idx}", inst_id=node_id(inst),
                shape=shape_text(first.shape),
                category=_category(first),
                offset=offset, size=max(b.size for b in bufs),
                start=min(r.start for r in ranges), end=max(r.end for r in ranges),
                names=sorted({b.instruction.name for b in bufs})))
        mark_shared_steps(panel.rects)
        panel.live = live_bytes(panel.rects, end_time)
        panels.append(panel)
    return Timeline(times, panels)


def _category(buf: LogicalBuffer) -> str:
    """The legend category of a buffer: offload for host-resident values and copies, remat for
    values a rematerialization recomputed, else by the defining opcode."""
    if buf.color == HOST_MEMORY_SPACE or buf.instruction.opcode in ASYNC_COPY_OPCODES:
        return "offload"
    if is_rematerialized(buf.instruction):
        return "remat"
    return "tuple" if buf.is_tuple else _CATEGORY_OF.get(buf.instruction.opcode, "op")


def mark_shared_steps(rects: list[BufferRect]) -> None:
    """Flag pairs where one buffer ends at the step another starts in overlapping bytes
    (operand-buffer reuse): the drawing splits that step between them."""
    by_start: dict[int, list[BufferRect]] = {}
    for r in rects:
        by_start.setdefault(r.start, []).append(r)
    for a in rects:
        for b in by_start.get(a.end, []):
            if b is not a and a.offset < b.offset + b.size and b.offset < a.offset + a.size:
                a.shares_end = b.shares_start = True


def live_bytes(rects: list[BufferRect], end_time: int) -> list[int]:
    """Bytes occupied at each time 0..end_time: the union of the live rectangles' byte ranges
    (a buffer reusing a dying operand's chunk at the same time step is not counted twice)."""
    at: list[list[tuple[int, int]]] = [[] for _ in range(end_time + 1)]
    for r in rects:
        for t in range(max(r.start, 0), min(r.end, end_time) + 1):
            at[t].append((r.offset, r.offset + r.size))
    out = []
    for spans in at:
        total, cursor = 0, -1
        for lo, hi in sorted(spans):
            if hi > cursor:
                total += hi - max(lo, cursor)
                cursor = hi
        out.append(total)
    return out


# ---- SVG -------------------------------------------------------------------------------------
_W = 1180.0         # total width
_LEFT = 78.0        # y-axis labels
_RIGHT = 16.0
_TOP = 26.0
_CHART_H = 300.0
_CURVE_H = 70.0
_GAP = 14.0


def _ticks(limit: int, count: int = 5) -> list[int]:
    """0..limit in about `count` steps of a whole number."""
    if limit <= 0:
        return [0]
    step = max(1, limit // count)
    return list(range(0, limit + 1, step))


def byte_ticks(limit: int) -> list[int]:
    """0..limit in power-of-two steps (3 to 8 ticks): 0, 256, 512, ... bytes."""
    if limit <= 0:
        return [0]
    step = 1
    while limit // (step * 2) >= 3:
        step *= 2
    return list(range(0, limit + 1, step))


def panel_svg(panel: TimelinePanel, times: list[str]) -> str:
    """An <svg> for one panel: buffer rectangles (class "buf"), the peak line, the live-bytes
    curve and axes. Rect hover text and `data-inst` (graph node id) feed the page's JS."""
    nt = max(len(times), 1)
    plot_w = _W - _LEFT - _RIGHT
    slot = plot_w / nt
    size = max(panel.size, 1)
    label_h = 110.0 if nt <= 90 else 30.0
    height = _TOP + _CHART_H + _GAP + _CURVE_H + label_h

    def ty(offset: float) -> float:  # offset 0 at the bottom of the chart
        return _TOP + _CHART_H - offset / size * _CHART_H

    esc = html.escape
    out = [f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{_W:.0f}" '
           f'height="{height:.0f}" viewBox="0 0 {_W:.0f} {height:.0f}" '
           f'data-alloc="{panel.alloc_index}">']
    out.append(f'<rect class="plot-bg" x="{_LEFT}" y="{_TOP}" width="{plot_w:.1f}" '
               f'height="{_CHART_H}"/>')
    for tick in byte_ticks(size):
        y = ty(tick)
        out.append(f'<line class="grid" x1="{_LEFT}" x2="{_LEFT + plot_w:.1f}" y1="{y:.1f}" '
                   f'y2="{y:.1f}"/><text class="axis" x="{_LEFT - 6}" y="{y + 4:.1f}" '
                   f'text-anchor="end">{esc(human_bytes(tick))}</text>')
    for r in panel.rects:
        # one column per step; a step shared by a dying buffer and the buffer reusing its
        # bytes is split between the two
        x0 = r.start + (0.5 if r.shares_start else 0.0)
        x1 = r.end + (0.5 if r.shares_end else 1.0)
        x = _LEFT + x0 * slot
        w = max((x1 - x0) * slot, 1.5)
        y1, y0 = ty(r.offset + r.size), ty(r.offset)
        h = max(y0 - y1, 3.0)
        tip = "\n".join([f"buffer: {r.label}", f"shape: {r.shape}",
                         f"bytes: {r.size} ({human_bytes(r.size)})",
                         f"offset: {r.offset} .. {r.offset + r.size}",
                         f"live: t={r.start} .. {r.end}",
                         f"defined by: {', '.join(r.names)}"])
        out.append(f'<rect class="buf cat-{r.category}" x="{x:.1f}" y="{y1:.1f}" '
                   f'width="{w:.1f}" height="{h:.1f}" rx="2" data-inst="{r.inst_id}" '
                   f'data-tip="{esc(tip)}"/>')
        if w > 46 and h > 13:
            out.append(f'<text class="buf-label" x="{x + 4:.1f}" y="{y1 + 11:.1f}">'
                       f'{esc(cap(r.label, int(w / 6.2)))}</text>')
    # live-bytes curve
    top_curve = _TOP + _CHART_H + _GAP
    peak = max(panel.peak, 1)
    base_y = top_curve + _CURVE_H
    pts = [f"{_LEFT:.1f},{base_y:.1f}"]
    for t, v in enumerate(panel.live):  # a step per column, like the rectangles
        y = base_y - v / peak * _CURVE_H
        pts += [f"{_LEFT + t * slot:.1f},{y:.1f}", f"{_LEFT + (t + 1) * slot:.1f},{y:.1f}"]
    pts.append(f"{_LEFT + len(panel.live) * slot:.1f},{base_y:.1f}")
    out.append(f'<rect class="plot-bg" x="{_LEFT}" y="{top_curve:.1f}" width="{plot_w:.1f}" '
               f'height="{_CURVE_H}"/>')
    out.append(f'<polygon class="live-curve" points="{" ".join(pts)}"/>')
    out.append(f'<text class="axis" x="{_LEFT - 6}" y="{top_curve + 10:.1f}" '
               f'text-anchor="end">{esc(human_bytes(panel.peak))}</text>'
               f'<text class="axis" x="{_LEFT - 6}" y="{top_curve + _CURVE_H:.1f}" '
               f'text-anchor="end">live</text>')
    # the peak
    if panel.rects:
        px = _LEFT + (panel.peak_time + 0.5) * slot
        who = times[panel.peak_time] if panel.peak_time < len(times) else ""
        anchor = "end" if px > _LEFT + plot_w * 0.7 else "start"
        dx = -6 if anchor == "end" else 6
        out.append(f'<line class="peak-line" x1="{px:.1f}" x2="{px:.1f}" y1="{_TOP - 8}" '
                   f'y2="{top_curve + _CURVE_H:.1f}"/>')
        out.append(f'<text class="peak-label" x="{px + dx:.1f}" y="{_TOP - 10}" '
                   f'text-anchor="{anchor}">peak {esc(human_bytes(panel.peak))} at '
                   f't={panel.peak_time} ({esc(cap(who, 32))})</text>')
    # allocation size line and x labels
    out.append(f'<line class="heap-top" x1="{_LEFT}" x2="{_LEFT + plot_w:.1f}" '
               f'y1="{_TOP:.1f}" y2="{_TOP:.1f}"/>')
    every = max(1, nt // 90) if nt > 90 else 1
    base = top_curve + _CURVE_H + 8
    for t, name in enumerate(times):
        if t % every:
            continue
        x = _LEFT + (t + 0.5) * slot
        if label_h > 40:
            out.append(f'<text class="tick" transform="translate({x:.1f},{base:.1f}) '
                       f'rotate(-55)" text-anchor="end">{esc(cap(name, 18))}</text>')
    if label_h <= 40:
        for t in _ticks(nt - 1, 10):
            x = _LEFT + (t + 0.5) * slot
            out.append(f'<text class="tick" x="{x:.1f}" y="{base + 10:.1f}" '
                       f'text-anchor="middle">{t}</text>')
    out.append("</svg>")
    return "\n".join(out)
