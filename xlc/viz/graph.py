"""The drawable graph of an HloModule, shared by the DOT and HTML renderers.

`build_graph` turns a module (optionally with its BufferAssignment) into plain nodes, edges and
clusters:
- every instruction of the entry and of the computations it reaches through control flow
  (while / conditional / call) is a node with its name, opcode and shape;
- a fusion is a *cluster* holding its fused computation (its own id, `n<uid>`, names the
  cluster); the fusion's operand k feeds the fused parameter k, the fused root feeds the
  fusion's users;
- a control-flow callee is a cluster of kind "computation" with dashed call edges from its
  caller;
- scalar constants are folded into their users' labels (`operand 1 = 0.5`) when
  `collapse_constants`; tuple / get-tuple-element plumbing is skipped when `hide_plumbing`
  (edges then run from the real producer, labelled with the tuple index);
- label lines are capped at `max_label` characters;
- with `group_repeats`, back-to-back copies of one instruction pattern (a layer traced in a
  Python loop; `xlc.viz.repeats`) become clusters of kind "layer", one per copy.
Every node and cluster carries hover `details` (with the user's source line and the
instruction's HLO text) and a lower-case `search` text (name, opcode, op_name, source line).
Embedded computations (reduce/sort/map bodies) are not drawn: their caller's label names them.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xlc.errors import XlcError
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.printer import print_instruction
from xlc.hlo.shape import Shape
from xlc.viz.repeats import find_repeats

if TYPE_CHECKING:
    from xlc.passes.buffer_assignment import BufferAssignment

log = logging.getLogger("xlc.viz")

# Node kinds (they pick the colour / shape in both renderers).
INPUT = "input"            # entry parameter
PARAMETER = "parameter"    # parameter of a called computation or a fused computation
OUTPUT = "output"          # entry root
ROOT = "root"              # root of another computation
CONSTANT = "constant"
PLUMBING = "plumbing"      # tuple / get-tuple-element / bitcast
CONTROL = "control"        # while / conditional / call
HEAVY = "heavy"            # dot / convolution / reduce / sort ...
OP = "op"

_HEAVY_OPS = frozenset({Opcode.DOT, Opcode.CONVOLUTION, Opcode.REDUCE, Opcode.REDUCE_WINDOW,
                        Opcode.SORT, Opcode.SCATTER, Opcode.GATHER, Opcode.CUSTOM_CALL,
                        Opcode.SELECT_AND_SCATTER})
_PLUMBING_OPS = frozenset({Opcode.TUPLE, Opcode.GET_TUPLE_ELEMENT, Opcode.BITCAST})
_CONTROL_OPS = frozenset({Opcode.WHILE, Opcode.CONDITIONAL, Opcode.CALL})


@dataclass
class VizNode:
    """One drawn instruction. `lines` is the capped label; `details` the full hover text;
    `search` what the page's search box matches (lower case)."""

    id: str
    inst: HloInstruction
    kind: str
    lines: list[str]
    details: list[tuple[str, str]]
    cluster: str | None  # id of the innermost cluster holding it (None: top level)
    search: str = ""


@dataclass
class VizCluster:
    """A fusion (kind "fusion", id = the fusion's node id), a called computation (kind
    "computation") or one copy of a repeated layer (kind "layer"). `nodes` are its direct
    members, `children` its nested clusters; `search` as for VizNode."""

    id: str
    kind: str
    title: str
    subtitle: str
    details: list[tuple[str, str]]
    parent: str | None
    comp: HloComputation
    inst: HloInstruction | None = None
    nodes: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    search: str = ""


@dataclass(frozen=True)
class VizEdge:
    """`style` is "data", "control" (control predecessor) or "call" (caller -> callee)."""

    src: str
    dst: str
    label: str = ""
    style: str = "data"


@dataclass
class VizGraph:
    """Nodes, clusters and edges in drawing order; `top` are the top-level node ids and
    `top_clusters` the top-level cluster ids."""

    module: HloModule
    nodes: dict[str, VizNode] = field(default_factory=dict)
    clusters: dict[str, VizCluster] = field(default_factory=dict)
    edges: list[VizEdge] = field(default_factory=list)
    top: list[str] = field(default_factory=list)
    top_clusters: list[str] = field(default_factory=list)

    def owner(self, item_id: str) -> str | None:
        """The cluster directly containing node or cluster `item_id` (None: top level)."""
        if item_id in self.nodes:
            return self.nodes[item_id].cluster
        return self.clusters[item_id].parent


def node_id(inst: HloInstruction) -> str:
    """The id of an instruction in every rendering (fusions: their cluster)."""
    return f"n{inst.uid}"


def cap(text: str, limit: int) -> str:
    """`text` shortened to at most `limit` characters (an ellipsis marks the cut)."""
    if limit <= 1 or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def human_bytes(n: int) -> str:
    """1536 -> '1.5 KiB'."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def shape_text(shape: Shape) -> str:
    """The shape without layouts."""
    return shape.to_text(layout=False)


def constant_value(inst: HloInstruction) -> str | None:
    """The printed value of a scalar (one-element) constant, else None."""
    if inst.opcode is not Opcode.CONSTANT or not inst.shape.is_array:
        return None
    lit = inst.attrs.get("literal")
    arr = getattr(lit, "array", None)
    if arr is None or getattr(lit, "elided", False) or arr.size != 1:
        return None
    value = arr.reshape(-1)[0]
    text = str(value.item() if hasattr(value, "item") else value)
    return text if len(text) <= 16 else f"{float(value):.6g}"


class _Builder:
    def __init__(self, module: HloModule, assignment: BufferAssignment | None, max_label: int,
                 collapse_constants: bool, hide_plumbing: bool, group_repeats: bool = False):
        self.g = VizGraph(module)
        self.group = group_repeats
        self.where: dict[int, str | None] = {}  # instruction uid -> the cluster it is drawn in
        self.assignment = assignment
        self.max_label = max_label
        self.collapse = collapse_constants
        self.hide = hide_plumbing

    # ---- classification ----------------------------------------------------------------------
    def collapsed(self, inst: HloInstruction) -> bool:
        return (self.collapse and not inst.is_root and constant_value(inst) is not None)

    def hidden(self, inst: HloInstruction) -> bool:
        return (self.hide and inst.opcode in _PLUMBING_OPS and not inst.is_root)

    def kind(self, inst: HloInstruction, comp: HloComputation) -> str:
        module = self.g.module
        if inst.opcode is Opcode.PARAMETER:
            return INPUT if comp is module.entry else PARAMETER
        if inst.is_root:
            return OUTPUT if comp is module.entry else ROOT
        if inst.opcode is Opcode.CONSTANT:
            return CONSTANT
        if inst.opcode in _PLUMBING_OPS:
            return PLUMBING
        if inst.opcode in _CONTROL_OPS:
            return CONTROL
        if inst.opcode in _HEAVY_OPS:
            return HEAVY
        return OP

    # ---- text ------------------------------------------------------------------------------
    def slice_text(self, inst: HloInstruction) -> str | None:
        if self.assignment is None:
            return None
        try:
            s = self.assignment.slice_of(inst, ())
        except XlcError:
            return None
        return f"alloc #{s.index} ({s.allocation.kind}) @{s.offset} +{s.size}"

    def opcode_line(self, inst: HloInstruction) -> str:
        op = inst.opcode.text
        if inst.opcode is Opcode.PARAMETER:
            return f"parameter {inst.parameter_number}"
        if inst.opcode is Opcode.GET_TUPLE_ELEMENT:
            return f"get-tuple-element {inst.tuple_index}"
        if inst.opcode is Opcode.FUSION:
            return f"fusion {inst.attrs.get('kind', '')}".strip()
        if inst.opcode is Opcode.CONSTANT:
            value = constant_value(inst)
            return f"constant {value}" if value is not None else "constant"
        for key in ("comparison_direction", "direction"):
            if key in inst.attrs:
                return f"{op} {inst.attrs[key]}"
        if inst.called and inst.opcode not in _CONTROL_OPS:
            root = inst.called[0].root
            return f"{op} ({root.opcode.text})" if root is not None else op
        return op

    def details(self, inst: HloInstruction) -> list[tuple[str, str]]:
        out = [("name", inst.name), ("opcode", inst.opcode.text),
               ("shape", str(inst.shape)),
               ("bytes", f"{inst.shape.byte_size()} ({human_bytes(inst.shape.byte_size())})")]
        sl = self.slice_text(inst)
        if sl is not None:
            out.append(("slice", sl))
        if inst.called:
            out.append(("calls", ", ".join(c.name for c in inst.called)))
        meta = inst.metadata
        src = source_text(inst)
        if src:
            out.append(("source", src))
        if meta.get("op_name"):
            out.append(("op_name", meta["op_name"]))
        out.append(("hlo", cap(print_instruction(inst, print_metadata=False), 400)))
        return out

    def search_text(self, inst: HloInstruction) -> str:
        meta = inst.metadata
        parts = [inst.name, inst.opcode.text, meta.get("op_name", ""), source_text(inst)]
        if inst.opcode is Opcode.FUSION:
            parts += [i.opcode.text for i in inst.fused_computation.instructions]
        return " ".join(p for p in parts if p).lower()

    def label(self, inst: HloInstruction) -> list[str]:
        lines = [inst.name, self.opcode_line(inst), shape_text(inst.shape)]
        for k, o in enumerate(inst.operands):
            if self.collapsed(o):
                lines.append(f"operand {k} = {constant_value(o)}")
        sl = self.slice_text(inst)
        if sl is not None:
            lines.append(sl)
        return [cap(line, self.max_label) for line in lines]

    # ---- structure ---------------------------------------------------------------------------
    def add_computation(self, comp: HloComputation, cluster: str | None) -> None:
        layer_of = self.layers(comp, cluster) if self.group else {}
        for inst in comp.instructions:
            if self.collapsed(inst) or self.hidden(inst):
                continue
            nid = node_id(inst)
            home = layer_of.get(inst.uid, cluster)
            self.where[inst.uid] = home
            if inst.opcode is Opcode.FUSION:
                self.add_fusion(inst, home)
                continue
            self.g.nodes[nid] = VizNode(nid, inst, self.kind(inst, comp), self.label(inst),
                                        self.details(inst), home, self.search_text(inst))
            self.member(home).append(nid)

    def layers(self, comp: HloComputation, cluster: str | None) -> dict[int, str]:
        """Clusters of kind "layer" for the repeated stretches of `comp` (in a topological
        order, parameters left out, so that each stretch is convex); uid -> layer id."""
        schedule = self.g.module.schedule
        order = schedule.get(comp) if schedule is not None else None
        seq = [i for i in (order or comp.post_order())
               if i.opcode is not Opcode.PARAMETER and not self.collapsed(i)
               and not self.hidden(i)]
        out: dict[int, str] = {}
        pos = {inst.uid: k for k, inst in enumerate(seq)}
        # the same step of two copies also takes its operands from the same distance back
        sigs = [signature(inst) + tuple(k - pos[o.uid] if o.uid in pos else -1
                                        for o in inst.operands)
                for k, inst in enumerate(seq)]
        for rep in find_repeats(sigs):
            for k in range(rep.count):
                part = seq[rep.start + k * rep.period: rep.start + (k + 1) * rep.period]
                lid = f"l{part[0].uid}"
                lines = sorted({int(i.metadata["source_line"]) for i in part
                                if i.metadata.get("source_line", "").isdigit()})
                where = "" if not lines else f" · line {lines[0]}" if len(lines) == 1 \
                    else f" · lines {lines[0]}-{lines[-1]}"
                title = cap(f"layer {k + 1} of {rep.count}", self.max_label)
                sub = cap(f"{rep.period} instructions{where}", self.max_label)
                details = [("layer", f"{k + 1} of {rep.count} repeated copies"),
                           ("instructions", str(rep.period)),
                           ("first", part[0].name), ("last", part[-1].name)]
                src = source_text(part[0])
                if src:
                    details.append(("source", src))
                c = VizCluster(lid, "layer", title, sub, details, cluster, comp,
                               search=f"layer {k + 1} {src}".lower())
                self.add_cluster(c)
                out.update((i.uid, lid) for i in part)
        return out

    def member(self, cluster: str | None) -> list[str]:
        return self.g.clusters[cluster].nodes if cluster is not None else self.g.top

    def add_cluster(self, c: VizCluster) -> None:
        self.g.clusters[c.id] = c
        if c.parent is None:
            self.g.top_clusters.append(c.id)
        else:
            self.g.clusters[c.parent].children.append(c.id)

    def add_fusion(self, inst: HloInstruction, parent: str | None) -> None:
        fused = inst.fused_computation
        n_ops = sum(1 for i in fused.instructions if i.opcode is not Opcode.PARAMETER)
        title = cap(f"{inst.name}", self.max_label)
        subtitle = cap(f"{self.opcode_line(inst)} · {shape_text(inst.shape)}", self.max_label)
        details = self.details(inst) + [("fused ops", str(n_ops))]
        c = VizCluster(node_id(inst), "fusion", title, subtitle, details, parent, fused, inst,
                       search=self.search_text(inst))
        self.add_cluster(c)
        self.add_computation(fused, c.id)

    def add_callee(self, comp: HloComputation, role: str, caller: HloInstruction,
                   parent: str | None, seen: set[int]) -> None:
        if id(comp) in seen:
            return
        seen.add(id(comp))
        cid = f"c{len(self.g.clusters)}_{caller.uid}"
        details = [("computation", comp.name), ("role", role), ("called by", caller.name),
                   ("instructions", str(len(comp.instructions)))]
        c = VizCluster(cid, "computation", cap(f"{role}: {comp.name}", self.max_label),
                       cap(f"called by {caller.name}", self.max_label), details, parent, comp,
                       search=f"{comp.name} {role}".lower())
        self.add_cluster(c)
        self.add_computation(comp, cid)
        self.add_callees(comp, cid, seen)

    def add_callees(self, comp: HloComputation, cluster: str | None, seen: set[int]) -> None:
        for inst in comp.instructions:
            if inst.opcode not in _CONTROL_OPS:
                continue
            for k, callee in enumerate(inst.called):
                home = self.where.get(inst.uid, cluster) if self.group else cluster
                self.add_callee(callee, call_role(inst, k), inst, home, seen)

    # ---- edges -------------------------------------------------------------------------------
    def sources(self, inst: HloInstruction, label: str = "") -> list[tuple[str, str]]:
        """The drawn node(s) standing for `inst`'s value, with an edge label."""
        if self.collapsed(inst):
            return []
        if inst.opcode is Opcode.FUSION:
            root = inst.fused_computation.root
            return self.sources(root, label) if root is not None else []
        if self.hidden(inst):
            if inst.opcode is Opcode.GET_TUPLE_ELEMENT:
                return self.sources(inst.operands[0], f"{{{inst.tuple_index}}}{label}")
            out: list[tuple[str, str]] = []
            for o in inst.operands:
                out += self.sources(o, label)
            return out
        return [(node_id(inst), label)]

    def target(self, user: HloInstruction, k: int) -> str | None:
        if user.opcode is Opcode.FUSION:
            fused = user.fused_computation
            if k >= len(fused.parameters) or fused.parameters[k] is None:
                return None
            return self.target_param(fused.parameters[k])
        nid = node_id(user)
        return nid if nid in self.g.nodes else None

    def target_param(self, param: HloInstruction) -> str | None:
        nid = node_id(param)
        return nid if nid in self.g.nodes else None

    def add_edges(self) -> None:
        seen: set[tuple[str, str, str]] = set()
        drawn = [n.inst for n in self.g.nodes.values()] + \
            [c.inst for c in self.g.clusters.values() if c.inst is not None]
        for user in drawn:
            for k, operand in enumerate(user.operands):
                dst = self.target(user, k)
                if dst is None:
                    continue
                for src, label in self.sources(operand):
                    self.add_edge(seen, VizEdge(src, dst, label))
            for pred in user.control_predecessors:
                dst = self.target(user, 0) if user.opcode is Opcode.FUSION else node_id(user)
                for src, _ in self.sources(pred):
                    if dst is not None:
                        self.add_edge(seen, VizEdge(src, dst, "", "control"))
            if user.opcode in _CONTROL_OPS and node_id(user) in self.g.nodes:
                for k, callee in enumerate(user.called):
                    entry_node = self.first_node(callee)
                    if entry_node is not None:
                        self.add_edge(seen, VizEdge(node_id(user), entry_node,
                                                    call_role(user, k), "call"))

    def first_node(self, comp: HloComputation) -> str | None:
        for inst in list(comp.parameters) + list(comp.instructions):
            if inst is not None and node_id(inst) in self.g.nodes:
                return node_id(inst)
        return None

    def add_edge(self, seen: set[tuple[str, str, str]], edge: VizEdge) -> None:
        key = (edge.src, edge.dst, edge.style)
        if key in seen or edge.src not in self.g.nodes or edge.dst not in self.g.nodes:
            return
        seen.add(key)
        self.g.edges.append(edge)


def call_role(caller: HloInstruction, k: int) -> str:
    """'while body', 'while condition', 'true branch', 'branch 2', 'call' ..."""
    if caller.opcode is Opcode.WHILE:
        return "while condition" if k == 0 else "while body"
    if caller.opcode is Opcode.CONDITIONAL:
        pred = caller.operands[0].shape if caller.operands else None
        is_pred = pred is not None and pred.is_array and pred.element_type is not None \
            and pred.element_type.text == "pred"
        if is_pred and len(caller.called) == 2:
            return "true branch" if k == 0 else "false branch"
        return f"branch {k}"
    return "called computation"


def source_text(inst: HloInstruction) -> str:
    """`file.py:12` from the instruction's metadata (the user's source line), else ""."""
    meta = inst.metadata
    path, line = meta.get("source_file", ""), meta.get("source_line", "")
    if not path and not line:
        return ""
    return f"{path.replace(chr(92), '/').rsplit('/', 1)[-1]}:{line}" if line else path


def signature(inst: HloInstruction) -> tuple[str, ...]:
    """What must match for two instructions to count as the same step of a repeated layer:
    opcode, fusion kind and root, and the source line (the shape when there is none)."""
    meta = inst.metadata
    extra = ""
    if inst.opcode is Opcode.FUSION:
        root = inst.fused_computation.root
        extra = f"{inst.attrs.get('kind', '')}/{root.opcode.text if root is not None else ''}"
    where = meta.get("source_file", "") + ":" + meta.get("source_line", "")
    return (inst.opcode.text, extra, where if where != ":" else shape_text(inst.shape),
            meta.get("op_name", ""))


def build_graph(module: HloModule, assignment: BufferAssignment | None = None, *,
                max_label: int = 40, collapse_constants: bool = True,
                hide_plumbing: bool = False, group_repeats: bool = False) -> VizGraph:
    """The drawable graph of `module` (see the module docstring).

    Requires a module with an entry computation. Guarantees: every edge's endpoints are nodes
    of the result; every fusion drawn has a cluster with its fused computation's nodes."""
    if module.entry is None:
        raise XlcError(f"module '{module.name}' has no entry computation to draw")
    b = _Builder(module, assignment, max_label, collapse_constants, hide_plumbing,
                 group_repeats)
    b.add_computation(module.entry, None)
    b.add_callees(module.entry, None, {id(module.entry)})
    b.add_edges()
    log.debug("graph of %s: %d nodes, %d clusters, %d edges", module.name, len(b.g.nodes),
              len(b.g.clusters), len(b.g.edges))
    return b.g


def details_text(details: list[tuple[str, str]]) -> str:
    """`key: value` lines (hover text)."""
    return "\n".join(f"{k}: {v}" for k, v in details)

