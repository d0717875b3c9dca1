"""Dataflow: LogicalBuffers, points-to sets and must-alias buffer sets (XLA's semantics).

A **LogicalBuffer** is an (instruction, ShapeIndex) that *defines* a value. The analysis is
module-scoped (like XLA's HloDataflowAnalysis in non-SSA mode): `tuple` and `copy` define only
their top-level index table, `get-tuple-element` / `bitcast` / `domain` / `opt-barrier` forward,
`while` / `call` / `conditional` define nothing (their values flow in from operands and callee
roots) and the parameters of control-flow callees hold the caller's values. `copy-start`
defines its index table, the destination `{0}` (coloured by its layout's memory space, e.g.
the host's `S(5)`) and the context `{2}`; its `{1}` is the operand's value (so the source stays
live until the `copy-done`, which uses the whole tuple); `copy-done` forwards `{0}`. The
context gets no storage (size 0): no emitter reads or writes it.

**Alias sets** (XLA's HloBuffer) group the buffers that *must* share storage: everything carried
through a `while` (init, body/condition parameter, body root, result), the branch roots of a
`conditional`, in-place operands (dynamic-update-slice, scatter, fusions whose fused root is an
in-place op on a fused parameter, `output_to_operand_aliasing`) and the module's
`input_output_alias` pairs.

`can_share_operand_buffer` answers XLA's CanShareOperandBufferWithUser: may a user's output
*optionally* reuse the buffer of a dying operand (it and the in-place rules live in
`alias_rules.py`; this module re-exports them).
"""
from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import EMBEDDED_CALLERS, Opcode
from xlc.hlo.shape import POINTER_SIZE, Shape, ShapeIndex
from xlc.passes.alias_rules import (  # re-exported: the module's historical API
    InPlacePair,
    can_share_operand_buffer,
    in_place_pairs,
    value_readers,
    value_source,
)

log = logging.getLogger("xlc.passes.dataflow")

PointsTo = dict[ShapeIndex, frozenset["LogicalBuffer"]]


@dataclass(eq=False)
class LogicalBuffer:
    """A value defined by `instruction` at `index`. Hashes by identity; `id` is dense and
    deterministic (definition order over computations callees-first)."""

    id: int
    instruction: HloInstruction
    index: ShapeIndex
    shape: Shape
    size: int
    color: int = 0

    @property
    def computation(self) -> HloComputation:
        """The computation of the defining instruction."""
        assert self.instruction.parent is not None
        return self.instruction.parent

    @property
    def is_tuple(self) -> bool:
        """True for a tuple's index table."""
        return self.shape.is_tuple

    def __repr__(self) -> str:
        idx = "{" + ",".join(str(i) for i in self.index) + "}" if self.index else ""
        return f"<{self.id} {self.instruction.name}{idx} @{self.color}>"


@dataclass(frozen=True)
class BufferUse:
    """`user` reads the buffer as operand `operand_number` at `operand_index`."""

    user: HloInstruction
    operand_number: int
    operand_index: ShapeIndex


@dataclass(eq=False)
class AliasSet:
    """Buffers that must share one storage location (XLA's HloBuffer)."""

    id: int
    buffers: list[LogicalBuffer] = field(default_factory=list)

    @property
    def size(self) -> int:
        """Bytes the shared storage needs (the largest member)."""
        return max(b.size for b in self.buffers)

    @property
    def color(self) -> int:
        """Memory space of the set (its first buffer's)."""
        return self.buffers[0].color

    def __repr__(self) -> str:
        return f"AliasSet({self.id}: {self.buffers})"


# ---- call graph -----------------------------------------------------------------------------
CONTROL = "control"
EMBEDDED = "embedded"
ENTRY = "entry"
UNREACHABLE = "unreachable"


def computation_kinds(module: HloModule) -> dict[HloComputation, str]:
    """Classify every computation: the entry, `control` (reached only through call / while /
    conditional from the entry: shares the caller's buffers), `embedded` (fusion, reduce, map,
    sort, ... bodies: thread-local) or `unreachable`. A callee of an embedded computation is
    embedded."""
    kinds: dict[HloComputation, str] = {}
    if module.entry is not None:
        kinds[module.entry] = ENTRY
        work = [module.entry]
        while work:
            comp = work.pop()
            for inst in comp.instructions:
                for callee in inst.called:
                    kind = EMBEDDED if (inst.opcode in EMBEDDED_CALLERS
                                        or kinds[comp] == EMBEDDED) else CONTROL
                    if kinds.get(callee) in (None, CONTROL) and kinds.get(callee) != kind:
                        kinds[callee] = kind
                        work.append(callee)
    for comp in module.computations:
        kinds.setdefault(comp, UNREACHABLE)
    return kinds


def call_sites(module: HloModule) -> dict[HloComputation, list[HloInstruction]]:
    """Every instruction that calls each computation, in module order."""
    out: dict[HloComputation, list[HloInstruction]] = {c: [] for c in module.computations}
    for comp in module.computations:
        for inst in comp.instructions:
            for callee in inst.called:
                out.setdefault(callee, []).append(inst)
    return out



__all__ = [
    "AliasSet", "BufferUse", "DataflowAnalysis", "InPlacePair", "LogicalBuffer", "call_sites",
    "can_share_operand_buffer", "computation_kinds", "in_place_pairs", "value_readers",
    "value_source",
]


# ---- the analysis ---------------------------------------------------------------------------
_FORWARDS_ALL = frozenset({Opcode.GET_TUPLE_ELEMENT, Opcode.BITCAST, Opcode.WHILE, Opcode.CALL,
                           Opcode.CONDITIONAL, Opcode.DOMAIN, Opcode.OPT_BARRIER,
                           Opcode.ADD_DEPENDENCY})
_TOP_LEVEL_ONLY = frozenset({Opcode.TUPLE, Opcode.COPY})
_ASYNC_COPY = frozenset({Opcode.COPY_START, Opcode.COPY_DONE})
_COPY_START_DEFINES: tuple[ShapeIndex, ...] = ((), (0,), (2,))


def _union(*sets: PointsTo) -> PointsTo:
    out: PointsTo = {}
    for s in sets:
        for idx, bufs in s.items():
            out[idx] = out.get(idx, frozenset()) | bufs
    return out


class DataflowAnalysis:
    """Points-to sets, buffer positions/uses, alias sets and live-out buffers of a module.

    Requires a module whose computations are connected through `called` as described in
    `xlc.hlo.ir`. Guarantees: every array/tuple position of every instruction in a non-fused
    computation maps to a (non-empty, for well-formed modules) set of LogicalBuffers; buffers
    of fused computations are analysed too (they are thread-local)."""

    def __init__(self, module: HloModule, pointer_size: int = POINTER_SIZE):
        self.module = module
        self.pointer_size = pointer_size
        self.kinds = computation_kinds(module)
        self.callers = call_sites(module)
        self.buffers: list[LogicalBuffer] = []
        self._defined: dict[tuple[int, ShapeIndex], LogicalBuffer] = {}
        self._defined_by: dict[int, list[LogicalBuffer]] = {}
        self._points_to: dict[int, PointsTo] = {}
        self._order = [(c, c.post_order()) for c in module.computations_post_order()]
        self._define_buffers()
        self._propagate()
        self._positions: dict[LogicalBuffer, list[tuple[HloInstruction, ShapeIndex]]] = {
            b: [] for b in self.buffers}
        self._uses: dict[LogicalBuffer, list[BufferUse]] = {b: [] for b in self.buffers}
        self._collect_positions_and_uses()
        self.live_out: set[LogicalBuffer] = set()
        if module.entry is not None and module.entry.root is not None:
            for bufs in self.points_to(module.entry.root).values():
                self.live_out |= bufs
        self.alias_sets: list[AliasSet] = []
        self._set_of: dict[LogicalBuffer, AliasSet] = {}
        self._build_alias_sets()
        self.tables_without_storage: set[LogicalBuffer] = set()
        self._drop_unread_index_tables()
        for b in self.buffers:  # a copy's progress is tracked by the runtime, not in memory
            if b.instruction.opcode is Opcode.COPY_START and b.index == (2,):
                b.size = 0

    # ---- definition ------------------------------------------------------------------------
    def _defined_indices(self, inst: HloInstruction) -> list[ShapeIndex]:
        if inst.opcode is Opcode.PARAMETER:
            assert inst.parent is not None
            if self.kinds[inst.parent] == CONTROL:
                return []
            return [i for i, _ in inst.shape.subshapes()]
        if inst.opcode in _FORWARDS_ALL:
            return []
        if inst.opcode in _TOP_LEVEL_ONLY:
            return [()]
        if inst.opcode is Opcode.COPY_START:
            return list(_COPY_START_DEFINES)
        if inst.opcode is Opcode.COPY_DONE:
            return []
        return [i for i, _ in inst.shape.subshapes()]

    def _define_buffers(self) -> None:
        for _comp, insts in self._order:
            for inst in insts:
                pts: PointsTo = {}
                for idx in self._defined_indices(inst):
                    sub = inst.shape.subshape(idx)
                    color = sub.layout.memory_space if sub.layout is not None else 0
                    buf = LogicalBuffer(len(self.buffers), inst, idx, sub,
                                        sub.byte_size(self.pointer_size), color)
                    self.buffers.append(buf)
                    self._defined[(inst.uid, idx)] = buf
                    self._defined_by.setdefault(inst.uid, []).append(buf)
                    pts[idx] = frozenset((buf,))
                self._points_to[inst.uid] = pts

    # ---- propagation -------------------------------------------------------------------------
    def _pts(self, inst: HloInstruction | None) -> PointsTo:
        return self._points_to.get(inst.uid, {}) if inst is not None else {}

    def _flow_in(self, inst: HloInstruction) -> PointsTo:
        """The forwarded part of an instruction's points-to set."""
        op = inst.opcode
        if op is Opcode.TUPLE:
            return {(i,) + idx: s for i, o in enumerate(inst.operands)
                    for idx, s in self._pts(o).items()}
        if op is Opcode.COPY:
            return {idx: s for idx, s in self._pts(inst.operands[0]).items() if idx}
        if op is Opcode.GET_TUPLE_ELEMENT:
            k = inst.tuple_index
            return {idx[1:]: s for idx, s in self._pts(inst.operands[0]).items()
                    if idx[:1] == (k,)}
        if op in (Opcode.BITCAST, Opcode.DOMAIN, Opcode.OPT_BARRIER, Opcode.ADD_DEPENDENCY):
            return dict(self._pts(inst.operands[0]))
        if op is Opcode.WHILE:
            return _union(self._pts(inst.operands[0]), self._pts(inst.called[1].root))
        if op is Opcode.CALL:
            return dict(self._pts(inst.called[0].root))
        if op is Opcode.CONDITIONAL:
            return _union(*(self._pts(c.root) for c in inst.called))
        if op is Opcode.COPY_START:  # {1}: the source, still read by the copy
            return {(1,) + idx: s for idx, s in self._pts(inst.operands[0]).items()}
        if op is Opcode.COPY_DONE:  # the destination
            return {idx[1:]: s for idx, s in self._pts(inst.operands[0]).items()
                    if idx[:1] == (0,)}
        if op is Opcode.PARAMETER:
            return self._flow_into_parameter(inst)
        return {}

    def _flow_into_parameter(self, param: HloInstruction) -> PointsTo:
        comp = param.parent
        assert comp is not None
        if self.kinds[comp] != CONTROL:
            return {}
        n = param.parameter_number
        sets: list[PointsTo] = []
        for caller in self.callers.get(comp, []):
            if caller.opcode is Opcode.WHILE:
                sets += [self._pts(caller.operands[0]), self._pts(caller.called[1].root)]
            elif caller.opcode is Opcode.CONDITIONAL:
                j = caller.called.index(comp)
                sets.append(self._pts(caller.operands[j + 1]))
            elif n < caller.operand_count:
                sets.append(self._pts(caller.operands[n]))
        return _union(*sets)

    def _propagate(self) -> None:
        for _ in range(100):
            changed = False
            for _comp, insts in self._order:
                for inst in insts:
                    if inst.opcode not in _FORWARDS_ALL and inst.opcode not in _TOP_LEVEL_ONLY \
                            and inst.opcode not in _ASYNC_COPY \
                            and inst.opcode is not Opcode.PARAMETER:
                        continue
                    cur = self._points_to[inst.uid]
                    for idx, s in self._flow_in(inst).items():
                        if (inst.uid, idx) in self._defined:
                            continue
                        old = cur.get(idx, frozenset())
                        if not s <= old:
                            cur[idx] = old | s
                            changed = True
            if not changed:
                return
        raise AssertionError("points-to propagation did not converge")  # pragma: no cover

    def _collect_positions_and_uses(self) -> None:
        for _comp, insts in self._order:
            for inst in insts:
                for idx, bufs in self._pts(inst).items():
                    for b in bufs:
                        self._positions[b].append((inst, idx))
                for k, operand in enumerate(inst.operands):
                    for idx, bufs in self._pts(operand).items():
                        if not _may_use_operand_value(k, idx, inst):
                            continue
                        for b in bufs:
                            use = BufferUse(inst, k, idx)
                            if use not in self._uses[b]:
                                self._uses[b].append(use)

    # ---- alias sets --------------------------------------------------------------------------
    def _build_alias_sets(self) -> None:
        parent = list(range(len(self.buffers)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        def union(bufs: Iterable[LogicalBuffer]) -> None:
            ids = [find(b.id) for b in bufs]
            for i in ids[1:]:
                parent[find(i)] = find(ids[0])

        for _comp, insts in self._order:
            for inst in insts:
                if inst.opcode in (Opcode.WHILE, Opcode.CONDITIONAL):
                    for bufs in self._pts(inst).values():
                        union(bufs)
                for k, oi, ui in in_place_pairs(inst):
                    if k < inst.operand_count:
                        union(self._pts(inst.operands[k]).get(oi, frozenset())
                              | self._pts(inst).get(ui, frozenset()))
        entry = self.module.entry
        if entry is not None and entry.root is not None:
            for al in self.module.input_output_alias:
                if al.param_number >= entry.num_parameters:
                    continue
                param = entry.parameter(al.param_number)
                union(self._pts(entry.root).get(al.output_index, frozenset())
                      | self._pts(param).get(al.param_index, frozenset()))
        groups: dict[int, AliasSet] = {}
        for b in self.buffers:
            root = find(b.id)
            if root not in groups:
                groups[root] = AliasSet(len(self.alias_sets))
                self.alias_sets.append(groups[root])
            groups[root].buffers.append(b)
            self._set_of[b] = groups[root]

    def _drop_unread_index_tables(self) -> None:
        """Give size 0 to the index table of every tuple value that nothing reads as a table.

        Contract (emitters must honour it): the top-level index table of a tuple-shaped value
        defined by a non-parameter, non-root instruction of the entry or a control-flow
        computation, whose users are all get-tuple-element (or copy-done, which reads the
        copy-start's elements, never its table), that is not live-out and never flows
        anywhere else (not into a tuple, call, while or conditional: its only position is its
        defining instruction) gets NO storage; an emitter must never write it (GTE of such a
        value resolves statically to the element's own slice). The set is
        `tables_without_storage`."""
        for b in self.buffers:
            inst = b.instruction
            if b.index != () or not b.shape.is_tuple or inst.opcode is Opcode.PARAMETER:
                continue
            if self.kinds.get(b.computation) not in (ENTRY, CONTROL) or inst.is_root:
                continue
            if b in self.live_out or len(self._set_of[b].buffers) != 1:
                continue
            if self._positions[b] != [(inst, ())]:
                continue
            if all(u.opcode in (Opcode.GET_TUPLE_ELEMENT, Opcode.COPY_DONE)
                   for u in inst.users):
                b.size = 0
                self.tables_without_storage.add(b)

    # ---- queries -----------------------------------------------------------------------------
    def points_to(self, inst: HloInstruction) -> PointsTo:
        """index -> buffers that may be held at that position of `inst`."""
        return self._pts(inst)

    def buffers_at(self, inst: HloInstruction, index: ShapeIndex = ()) -> list[LogicalBuffer]:
        """The buffers `inst` may hold at `index`, sorted by id."""
        return sorted(self._pts(inst).get(tuple(index), frozenset()), key=lambda b: b.id)

    def defined_at(self, inst: HloInstruction, index: ShapeIndex = ()) -> LogicalBuffer | None:
        """The buffer `inst` defines at `index`, or None if it forwards one."""
        return self._defined.get((inst.uid, tuple(index)))

    def defines(self, inst: HloInstruction) -> list[LogicalBuffer]:
        """Every buffer `inst` defines."""
        return list(self._defined_by.get(inst.uid, ()))

    def positions(self, buf: LogicalBuffer) -> list[tuple[HloInstruction, ShapeIndex]]:
        """Every (instruction, index) where `buf` may appear (XLA's BufferAliases)."""
        return self._positions[buf]

    def uses(self, buf: LogicalBuffer) -> list[BufferUse]:
        """Every instruction that reads `buf` (a GTE or copy reads only the index table; a tuple
        only forwards pointers)."""
        return self._uses[buf]

    def alias_set(self, buf: LogicalBuffer) -> AliasSet:
        """The must-alias set holding `buf`."""
        return self._set_of[buf]

    def must_alias(self, a: LogicalBuffer, b: LogicalBuffer) -> bool:
        """True when `a` and `b` are in one alias set (must share storage)."""
        return self._set_of[a] is self._set_of[b]

    def is_live_out(self, buf: LogicalBuffer) -> bool:
        """True when `buf` may appear in the entry computation's result."""
        return buf in self.live_out


def _may_use_operand_value(k: int, index: ShapeIndex, user: HloInstruction) -> bool:
    if user.opcode in (Opcode.GET_TUPLE_ELEMENT, Opcode.COPY):
        return index == ()
    if user.opcode is Opcode.TUPLE:
        return False
    return True
