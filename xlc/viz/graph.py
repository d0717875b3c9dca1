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
- label lines are capped at `max_label` characters.
Embedded computations (reduce/sort/map bodies) are not drawn: their caller's label names them.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xlc.errors import XlcError
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Shape

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
    """One drawn instruction. `lines` is the capped label; `details` the full hover text."""

    id: str
    inst: HloInstruction
    kind: str
    lines: list[str]
    details: list[tuple[str, str]]
    cluster: str | None  # id of the innermost cluster holding it (None: top level)


@dataclass
class VizCluster:
    """A fusion (kind "fusion", id = the fusion's node id) or a called computation (kind
    "computation"). `nodes` are its direct members, `children` its nested clusters."""

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
                 collapse_constants: bool, hide_plumbing: bool):
        self.g = VizGraph(module)
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
        op_name = inst.metadata.get("op_name")
        if op_name:
            out.append(("op_name", op_name))
        return out

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
        for inst in comp.instructions:
            if self.collapsed(inst) or self.hidden(inst):
                continue
            nid = node_id(inst)
            if inst.opcode is Opcode.FUSION:
                self.add_fusion(inst, cluster)
                continue
            self.g.nodes[nid] = VizNode(nid, inst, self.kind(inst, comp), self.label(inst),
                                        self.details(inst), cluster)
            self.member(cluster).append(nid)

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
        c = VizCluster(node_id(inst), "fusion", title, subtitle, details, parent, fused, inst)
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
                       cap(f"called by {caller.name}", self.max_label), details, parent, comp)
        self.add_cluster(c)
        self.add_computation(comp, cid)
        self.add_callees(comp, cid, seen)

    def add_callees(self, comp: HloComputation, cluster: str | None, seen: set[int]) -> None:
        for inst in comp.instructions:
            if inst.opcode not in _CONTROL_OPS:
                continue
            for k, callee in enumerate(inst.called):
                self.add_callee(callee, call_role(inst, k), inst, cluster, seen)

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


def build_graph(module: HloModule, assignment: BufferAssignment | None = None, *,
                max_label: int = 40, collapse_constants: bool = True,
                hide_plumbing: bool = False) -> VizGraph:
    """The drawable graph of `module` (see the module docstring).

    Requires a module with an entry computation. Guarantees: every edge's endpoints are nodes
    of the result; every fusion drawn has a cluster with its fused computation's nodes."""
    if module.entry is None:
        raise XlcError(f"module '{module.name}' has no entry computation to draw")
    b = _Builder(module, assignment, max_label, collapse_constants, hide_plumbing)
    b.add_computation(module.entry, None)
    b.add_callees(module.entry, None, {id(module.entry)})
    b.add_edges()
    log.debug("graph of %s: %d nodes, %d clusters, %d edges", module.name, len(b.g.nodes),
              len(b.g.clusters), len(b.g.edges))
    return b.g


def details_text(details: list[tuple[str, str]]) -> str:
    """`key: value` lines (hover text)."""
    return "\n".join(f"{k}: {v}" for k, v in details)

