"""A small layered (Sugiyama-style) DAG layout, so the HTML page needs no graphviz.

Steps: longest-path layering (sources pulled down next to their first user), dummy nodes on
edges spanning several layers, barycenter sweeps to reduce crossings, then x placement by
isotonic regression (each node as close as possible to the mean of its neighbours while keeping
the layer's order and spacing). Top to bottom; sizes in pixels.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

H_GAP = 18.0      # between boxes of one layer
V_GAP = 34.0      # between layers
DUMMY_W = 6.0     # width reserved for an edge passing through a layer
LONG_SPAN = 30    # edges spanning more layers get no dummies (drawn as one curve)


@dataclass
class Layout:
    """`pos[id] = (x, y)` top-left corners; `paths[i]` the polyline of `edges[i]` (from the
    source's bottom centre to the target's top centre); `width`/`height` the bounding box."""

    pos: dict[str, tuple[float, float]] = field(default_factory=dict)
    paths: list[list[tuple[float, float]]] = field(default_factory=list)
    edges: list[tuple[str, str]] = field(default_factory=list)
    width: float = 0.0
    height: float = 0.0


def _layers(items: Sequence[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    preds: dict[str, list[str]] = {i: [] for i in items}
    succs: dict[str, list[str]] = {i: [] for i in items}
    for s, d in edges:
        preds[d].append(s)
        succs[s].append(d)
    indeg = {i: len(preds[i]) for i in items}
    ready = deque(i for i in items if indeg[i] == 0)
    order: list[str] = []
    while ready:
        v = ready.popleft()
        order.append(v)
        for w in succs[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    placed = set(order)
    order += [i for i in items if i not in placed]  # cycles (never in HLO): keep going
    layer: dict[str, int] = {}
    for v in order:
        layer[v] = max((layer[p] + 1 for p in preds[v] if p in layer), default=0)
    for v in reversed(order):  # pull sources down next to their first user
        if not preds[v] and succs[v]:
            layer[v] = max(layer[v], min(layer[w] for w in succs[v]) - 1)
    return layer


def _isotonic(targets: list[float]) -> list[float]:
    """Least-squares nondecreasing fit of `targets` (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, weight]
    for t in targets:
        blocks.append([t, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2 = blocks.pop()
            m1, w1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2])
    out: list[float] = []
    for mean, weight in blocks:
        out += [mean] * int(weight)
    return out


def _place(row: list[str], width: dict[str, float], desired: dict[str, float]
           ) -> dict[str, float]:
    """Centres for `row` (in order) closest to `desired` with the spacing kept."""
    offsets: list[float] = []
    acc = 0.0
    for v in row:
        offsets.append(acc + width[v] / 2)
        acc += width[v] + H_GAP
    fit = _isotonic([desired[v] - o for v, o in zip(row, offsets)])
    return {v: f + o for v, f, o in zip(row, fit, offsets)}


def layered_layout(items: Sequence[str], sizes: dict[str, tuple[float, float]],
                   edges: Sequence[tuple[str, str]], sweeps: int = 6) -> Layout:
    """Lay out `items` (ids with (width, height) in `sizes`) and the `edges` between them.

    Edges with an unknown endpoint or a self loop are ignored (not in `Layout.edges`).
    Guarantees: boxes of one layer do not overlap; every kept edge has a path."""
    known = set(items)
    kept: list[tuple[str, str]] = []
    for s, d in edges:
        if s in known and d in known and s != d and (s, d) not in kept:
            kept.append((s, d))
    layer = _layers(items, kept)
    nlayers = max(layer.values(), default=-1) + 1
    rows: list[list[str]] = [[] for _ in range(nlayers)]
    for v in items:
        rows[layer[v]].append(v)
    width = {v: sizes[v][0] for v in items}
    chains: list[list[str]] = []  # per kept edge: src, dummies..., dst
    up: dict[str, list[str]] = {v: [] for v in items}
    down: dict[str, list[str]] = {v: [] for v in items}
    for k, (s, d) in enumerate(kept):
        lo, hi = layer[s], layer[d]
        if hi < lo:  # back edge (cycle): draw it straight
            lo, hi = hi, lo
        if hi - lo > LONG_SPAN:  # drawn straight: dummies would cost O(span) each
            chains.append([s, d])
            continue
        chain = [s]
        for li in range(lo + 1, hi):
            dummy = f"\0{k}.{li}"
            width[dummy] = DUMMY_W
            rows[li].append(dummy)
            up[dummy], down[dummy] = [], []
            chain.append(dummy)
        chain.append(d)
        for a, b in zip(chain, chain[1:]):
            down[a].append(b)
            up[b].append(a)
        chains.append(chain)
    # crossing reduction: barycenter sweeps
    for it in range(sweeps):
        forward = it % 2 == 0
        rng = range(1, nlayers) if forward else range(nlayers - 2, -1, -1)
        for li in rng:
            ref = rows[li - 1] if forward else rows[li + 1]
            rank = {v: i for i, v in enumerate(ref)}
            here = {v: i for i, v in enumerate(rows[li])}

            def key(v: str, rank: dict[str, int] = rank, here: dict[str, int] = here,
                    forward: bool = forward) -> float:
                nbrs = [rank[u] for u in (up[v] if forward else down[v]) if u in rank]
                return sum(nbrs) / len(nbrs) if nbrs else float(here[v])

            rows[li].sort(key=key)
    # x placement: start packed, then pull towards neighbours
    x: dict[str, float] = {}
    for row in rows:
        x.update(_place(row, width, {v: 0.0 for v in row}))
    for it in range(8):
        order = range(nlayers) if it % 2 == 0 else range(nlayers - 1, -1, -1)
        for li in order:
            row = rows[li]
            desired = {}
            for v in row:
                nbrs = [x[u] for u in up[v] + down[v]]
                desired[v] = sum(nbrs) / len(nbrs) if nbrs else x[v]
            x.update(_place(row, width, desired))
    # y placement: layers stacked, boxes centred in their band
    heights = [max((sizes[v][1] for v in row if v in sizes), default=0.0) for row in rows]
    tops: list[float] = []
    acc = 0.0
    for h in heights:
        tops.append(acc)
        acc += h + V_GAP
    left = min((x[v] - width[v] / 2 for v in x), default=0.0)
    out = Layout(edges=kept)
    for v in items:
        w, h = sizes[v]
        li = layer[v]
        out.pos[v] = (x[v] - w / 2 - left, tops[li] + (heights[li] - h) / 2)
    for chain in chains:
        s, d = chain[0], chain[-1]
        sx, sy = out.pos[s]
        dx, dy = out.pos[d]
        pts = [(sx + sizes[s][0] / 2, sy + sizes[s][1])]
        for dummy in chain[1:-1]:
            li = int(dummy.rsplit(".", 1)[1])
            cx = x[dummy] - left
            pts += [(cx, tops[li]), (cx, tops[li] + heights[li])]
        pts.append((dx + sizes[d][0] / 2, dy))
        out.paths.append(pts)
    out.width = max((p[0] + sizes[v][0] for v, p in out.pos.items()), default=0.0)
    out.height = max(acc - V_GAP, 0.0)
    return out


def svg_path(points: list[tuple[float, float]], dx: float = 0.0, dy: float = 0.0) -> str:
    """A smooth SVG path `d` through `points` (vertical cubic segments), shifted by (dx, dy)."""
    if not points:
        return ""
    (x0, y0) = points[0]
    parts = [f"M{x0 + dx:.1f},{y0 + dy:.1f}"]
    for (ax, ay), (bx, by) in zip(points, points[1:]):
        my = (ay + by) / 2
        parts.append(f"C{ax + dx:.1f},{my + dy:.1f} {bx + dx:.1f},{my + dy:.1f} "
                     f"{bx + dx:.1f},{by + dy:.1f}")
    return " ".join(parts)
