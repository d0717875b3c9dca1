"""HloOrdering: which instruction executes before which, and which buffers may interfere.

Three orderings, as in XLA (`hlo_ordering.h`):
- `DependencyHloOrdering`: a runs before b iff a data/control path a -> b exists (the most
  pessimistic liveness; allows any parallel execution),
- `PredecessorHloOrdering`: explicit predecessor edges (plus data dependencies), transitively
  closed,
- `SequentialHloOrdering`: a total order per computation (the HloSchedule).

`executes_before` works across computations by lifting both instructions to their nearest
ancestors in one computation (while: condition before body; conditional: branch j before branch k
for j < k; a callee's instructions before the caller instruction itself).

`LiveRanges` (XLA's HloLiveRange) flattens a sequential schedule into logical times and gives
every buffer a [start, end] interval (inclusive).
"""
from __future__ import annotations

import abc
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from xlc.errors import VerificationError
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.passes.dataflow import (
    CONTROL,
    ENTRY,
    AliasSet,
    BufferUse,
    DataflowAnalysis,
    LogicalBuffer,
    call_sites,
    can_share_operand_buffer,
    computation_kinds,
    value_readers,
    value_source,
)

log = logging.getLogger("xlc.passes.ordering")

Schedule = Mapping[HloComputation, list[HloInstruction]]


class HloOrdering(abc.ABC):
    """Base class: cross-computation logic on top of `_executes_before_same(a, b)`."""

    def __init__(self, module: HloModule):
        self.module = module
        self.callers = call_sites(module)
        self.kinds = computation_kinds(module)
        self._dataflow: DataflowAnalysis | None = None

    @property
    def dataflow(self) -> DataflowAnalysis:
        """The module's dataflow (built on first use; rebuild the ordering after edits)."""
        if self._dataflow is None:
            self._dataflow = DataflowAnalysis(self.module)
        return self._dataflow

    # ---- what each ordering defines ----------------------------------------------------------
    @abc.abstractmethod
    def _executes_before_same(self, a: HloInstruction, b: HloInstruction) -> bool:
        """Whether `a` runs before `b`, both in one computation."""

    # ---- cross-computation -------------------------------------------------------------------
    def _chain(self, inst: HloInstruction
               ) -> dict[HloComputation, tuple[HloInstruction, HloComputation | None]]:
        """computation -> (ancestor of `inst` in it, the callee it was lifted from)."""
        out: dict[HloComputation, tuple[HloInstruction, HloComputation | None]] = {}
        via: HloComputation | None = None
        cur: HloInstruction | None = inst
        seen: set[int] = set()
        while cur is not None and cur.parent is not None and id(cur.parent) not in seen:
            comp = cur.parent
            seen.add(id(comp))
            out[comp] = (cur, via)
            callers = self.callers.get(comp, [])
            if comp is self.module.entry or not callers:
                break
            via, cur = comp, callers[0]
        return out

    def executes_before(self, a: HloInstruction, b: HloInstruction) -> bool:
        """True iff `a` is guaranteed to finish before `b` starts (false for a == b)."""
        if a is b:
            return False
        chain_a = self._chain(a)
        for comp, (b_anc, via_b) in self._chain(b).items():  # noqa: B007 (used after break)
            if comp in chain_a:
                a_anc, via_a = chain_a[comp]
                break
        else:
            return False
        if a_anc is b_anc:
            if via_a is not None and via_b is None:
                return True  # a inside a callee of b: runs before b completes
            if via_a is None or via_b is None:
                return False
            if a_anc.opcode is Opcode.WHILE:
                return via_a is a_anc.called[0] and via_b is a_anc.called[1]
            if a_anc.opcode is Opcode.CONDITIONAL:
                return a_anc.called.index(via_a) < a_anc.called.index(via_b)
            return False
        return self._executes_before_same(a_anc, b_anc)

    # ---- buffers -------------------------------------------------------------------------
    def is_defined_before(self, a: LogicalBuffer, b: LogicalBuffer) -> bool:
        """Entry parameters first, then by `executes_before` of the defining instructions."""
        a_param = _is_entry_param(self.module, a.instruction)
        b_param = _is_entry_param(self.module, b.instruction)
        if a_param or b_param:
            return a_param and not b_param
        return self.executes_before(a.instruction, b.instruction)

    def uses_before_definition(self, uses: Iterable[BufferUse], b: LogicalBuffer) -> bool:
        """Every use runs before `b` is defined (a use by b's own instruction counts when it
        may share the operand's buffer; a use by while/call/conditional precedes definitions
        inside its callees)."""
        for use in uses:
            user = use.user
            if user is b.instruction:
                operand = user.operands[use.operand_number]
                if not can_share_operand_buffer(operand, user, use.operand_index, b.index):
                    return False
                continue
            if user.opcode in (Opcode.WHILE, Opcode.CALL, Opcode.CONDITIONAL) and \
                    _nested_in(self, b.instruction, user):
                continue
            if not self.executes_before(user, b.instruction):
                return False
        return True

    def live_range_strictly_before(self, a: LogicalBuffer, b: LogicalBuffer,
                                   dataflow: DataflowAnalysis | None = None) -> bool:
        """a's whole live range ends before b is defined (`dataflow` defaults to the
        ordering's own; pass the one `a` and `b` come from)."""
        dataflow = dataflow or self.dataflow
        if not self.is_defined_before(a, b):
            return False
        if dataflow.is_live_out(a):
            return False
        enclosing = set(self._chain(b.instruction))
        for inst, _ in dataflow.positions(a):
            if inst.is_root and inst.parent in enclosing:
                return False
        return self.uses_before_definition(dataflow.uses(a), b)

    def may_interfere(self, a: LogicalBuffer, b: LogicalBuffer,
                      dataflow: DataflowAnalysis | None = None) -> bool:
        """True unless one buffer's live range is strictly before the other's."""
        dataflow = dataflow or self.dataflow
        return (not self.live_range_strictly_before(a, b, dataflow)
                and not self.live_range_strictly_before(b, a, dataflow))

    def sequential_order(self, comp: HloComputation) -> list[HloInstruction] | None:
        """The total order of `comp`, if this ordering has one."""
        return None


def _is_entry_param(module: HloModule, inst: HloInstruction) -> bool:
    return inst.opcode is Opcode.PARAMETER and inst.parent is module.entry


def _nested_in(ordering: HloOrdering, inst: HloInstruction, caller: HloInstruction) -> bool:
    chain = ordering._chain(inst)
    return caller.parent in chain and chain[caller.parent][0] is caller and \
        chain[caller.parent][1] is not None


class PredecessorHloOrdering(HloOrdering):
    """a before b iff a is a transitive predecessor of b, through data/control edges and the
    explicit `predecessors` edges (per instruction, same computation)."""

    def __init__(self, module: HloModule,
                 predecessors: Mapping[HloInstruction, Iterable[HloInstruction]] | None = None):
        super().__init__(module)
        self._extra = {inst: tuple(p) for inst, p in (predecessors or {}).items()}
        self._reach: dict[HloComputation, tuple[dict[int, int], dict[int, int]]] = {}

    def _reachability(self, comp: HloComputation) -> tuple[dict[int, int], dict[int, int]]:
        if comp not in self._reach:
            index: dict[int, int] = {}
            anc: dict[int, int] = {}
            order = _topological(comp, self._extra)
            for i, inst in enumerate(order):
                index[inst.uid] = i
                mask = 0
                for p in inst.operands + inst.control_predecessors + self._extra.get(inst, ()):
                    if p.uid in index:
                        mask |= anc[p.uid] | (1 << index[p.uid])
                anc[inst.uid] = mask
            self._reach[comp] = (index, anc)
        return self._reach[comp]

    def _executes_before_same(self, a: HloInstruction, b: HloInstruction) -> bool:
        assert a.parent is not None
        index, anc = self._reachability(a.parent)
        return bool(anc.get(b.uid, 0) >> index[a.uid] & 1) if a.uid in index else False


def _topological(comp: HloComputation,
                 extra: Mapping[HloInstruction, tuple[HloInstruction, ...]]
                 ) -> list[HloInstruction]:
    if not extra:
        return comp.post_order()
    done: set[int] = set()
    order: list[HloInstruction] = []
    for start in comp.instructions:
        stack = [(start, 0)]
        if start.uid in done:
            continue
        done.add(start.uid)
        while stack:
            inst, i = stack[-1]
            preds = inst.operands + inst.control_predecessors + extra.get(inst, ())
            if i < len(preds):
                stack[-1] = (inst, i + 1)
                p = preds[i]
                if p.uid not in done and p.parent is comp:
                    done.add(p.uid)
                    stack.append((p, 0))
            else:
                stack.pop()
                order.append(inst)
    return order


class DependencyHloOrdering(PredecessorHloOrdering):
    """a before b iff a data or control dependency path a -> b exists."""

    def __init__(self, module: HloModule):
        super().__init__(module, None)


class SequentialHloOrdering(HloOrdering):
    """A total order per computation from an HloSchedule ({computation: [instructions]});
    computations without a sequence (fused bodies) fall back to data dependencies."""

    def __init__(self, module: HloModule, schedule: Schedule | None = None):
        super().__init__(module)
        sched = schedule if schedule is not None else module.schedule
        if sched is None:
            raise VerificationError(
                f"SequentialHloOrdering needs a schedule: module '{module.name}' has none")
        self.schedule: dict[HloComputation, list[HloInstruction]] = dict(sched)
        self._pos: dict[int, int] = {}
        for seq in self.schedule.values():
            for i, inst in enumerate(seq):
                self._pos[inst.uid] = i
        self._fallback = DependencyHloOrdering(module)

    def _executes_before_same(self, a: HloInstruction, b: HloInstruction) -> bool:
        if a.uid in self._pos and b.uid in self._pos:
            return self._pos[a.uid] < self._pos[b.uid]
        return self._fallback._executes_before_same(a, b)

    def sequential_order(self, comp: HloComputation) -> list[HloInstruction] | None:
        """The scheduled sequence of `comp` (None for fused computations)."""
        return self.schedule.get(comp)

    def live_ranges(self, dataflow: DataflowAnalysis | None = None) -> LiveRanges:
        """Logical-time live ranges of every buffer under this total order."""
        return LiveRanges(self.module, self.schedule, dataflow or self.dataflow)


def verify_schedule(module: HloModule, schedule: Schedule) -> None:
    """Every non-fusion computation reachable from the entry has a sequence that is a
    permutation of its instructions respecting operand and control edges; raises
    VerificationError otherwise."""
    kinds = computation_kinds(module)
    for comp in module.computations:
        if comp.is_fusion_computation or kinds[comp] not in (ENTRY, CONTROL):
            continue
        seq = schedule.get(comp)
        if seq is None:
            raise VerificationError(f"schedule has no sequence for computation '{comp.name}'")
        if len(seq) != len(comp.instructions) or {i.uid for i in seq} != \
                {i.uid for i in comp.instructions}:
            raise VerificationError(
                f"schedule of '{comp.name}' is not a permutation of its instructions")
        seen: set[int] = set()
        for inst in seq:
            for p in inst.operands + inst.control_predecessors:
                if p.uid not in seen:
                    raise VerificationError(
                        f"schedule of '{comp.name}': '{inst.name}' comes before its "
                        f"operand '{p.name}'")
            seen.add(inst.uid)


# ---- live ranges ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TimeInterval:
    """Inclusive logical-time interval [start, end]."""

    start: int
    end: int

    def overlaps(self, other: TimeInterval) -> bool:
        """True when the (inclusive) intervals share a time step."""
        return self.start <= other.end and other.start <= self.end


class LiveRanges:
    """XLA's HloLiveRange in module-scoped mode: the schedule flattened into logical times
    (callees of call/while/conditional inlined before the caller, condition before body) and an
    inclusive [start, end] per buffer and per alias set (the hull of its buffers).

    Requires a schedule covering every control-flow computation reachable from the entry.
    Buffers of embedded (fused/thread-local) computations get no range."""

    def __init__(self, module: HloModule, schedule: Schedule, dataflow: DataflowAnalysis):
        self.module = module
        self.schedule = schedule
        self.dataflow = dataflow
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.span: dict[HloComputation, TimeInterval] = {}
        self.sequence: list[HloInstruction] = []  # the flattened order (one entry per time)
        assert module.entry is not None
        self._flatten(module.entry, 0)
        self.end_time = max(len(self.sequence) - 1, 0)
        self.buffer_ranges: dict[LogicalBuffer, TimeInterval] = {}
        for buf in dataflow.buffers:
            r = self._buffer_range(buf)
            if r is not None:
                self.buffer_ranges[buf] = r
        self.gaps: dict[int, list[TimeInterval]] = {}
        self._hull: dict[int, TimeInterval | None] = {}
        self._intervals: dict[int, list[TimeInterval]] = {}
        self._find_loop_gaps()

    def _flatten(self, comp: HloComputation, depth: int) -> None:
        if depth > 64:
            raise VerificationError(f"call graph too deep (recursive?) at '{comp.name}'")
        seq = self.schedule.get(comp)
        if seq is None:
            raise VerificationError(f"schedule has no sequence for computation '{comp.name}'")
        start = len(self.sequence)
        for inst in seq:
            if inst.opcode in (Opcode.WHILE, Opcode.CALL, Opcode.CONDITIONAL):
                for callee in inst.called:
                    self._flatten(callee, depth + 1)
            t = len(self.sequence)
            self.sequence.append(inst)
            self.first.setdefault(inst.uid, t)
            self.last[inst.uid] = t
        end = max(len(self.sequence) - 1, start)
        old = self.span.get(comp)
        self.span[comp] = TimeInterval(start, end) if old is None else \
            TimeInterval(min(old.start, start), max(old.end, end))

    def time(self, inst: HloInstruction) -> int:
        """The (first) logical time of `inst`."""
        return self.first[inst.uid]

    def _buffer_range(self, buf: LogicalBuffer) -> TimeInterval | None:
        inst = buf.instruction
        if inst.uid not in self.first:
            return None
        if _is_entry_param(self.module, inst):
            return TimeInterval(0, self.end_time)
        start = self.first[inst.uid]
        end = self.last[inst.uid]
        for use in self.dataflow.uses(buf):
            if use.user.uid in self.last:
                end = max(end, self.last[use.user.uid])
        for pos, _ in self.dataflow.positions(buf):
            if pos.uid in self.last:
                end = max(end, self.last[pos.uid])
                if pos.is_root and pos.parent in self.span:
                    end = max(end, self.span[pos.parent].end)
        if self.dataflow.is_live_out(buf):
            end = self.end_time
        return TimeInterval(start, end)

    def set_range(self, aset: AliasSet) -> TimeInterval | None:
        """Hull of the ranges of the set's buffers (None if none has a range)."""
        if aset.id in self._hull:
            return self._hull[aset.id]
        rs = [self.buffer_ranges[b] for b in aset.buffers if b in self.buffer_ranges]
        hull = TimeInterval(min(r.start for r in rs), max(r.end for r in rs)) if rs else None
        self._hull[aset.id] = hull
        return hull

    def set_intervals(self, aset: AliasSet) -> list[TimeInterval]:
        """When the set's storage is occupied: its hull minus the loop gaps (inside a while
        body, after the last read of a carried element's old value and before the first
        definition of its new one, the slot holds nothing live)."""
        if aset.id in self._intervals:
            return list(self._intervals[aset.id])
        hull = self.set_range(aset)
        if hull is None:
            return []
        out = [hull]
        for gap in sorted(self.gaps.get(aset.id, []), key=lambda g: g.start):
            last = out.pop()
            if gap.start > last.start and gap.end < last.end:
                out += [TimeInterval(last.start, gap.start - 1),
                        TimeInterval(gap.end + 1, last.end)]
            else:
                out.append(last)
        self._intervals[aset.id] = out
        return list(out)

    def _find_loop_gaps(self) -> None:
        df = self.dataflow
        for w in {i.uid: i for i in self.sequence if i.opcode is Opcode.WHILE}.values():
            body = w.called[1]
            if body not in self.span or body.root is None or not body.parameters:
                continue
            param = body.parameter(0)
            span = self.span[body]
            for idx, _ in w.shape.leaves():
                if len(idx) != 1 or value_source(body.root, idx) == (param, idx):
                    continue
                sets = {df.alias_set(b).id: df.alias_set(b) for b in df.buffers_at(w, idx)}
                if len(sets) != 1 or param.uid not in self.last:
                    continue
                (aset,) = sets.values()
                readers, _ = value_readers(param, idx)
                last_read = max([self.last[param.uid]]
                                + [self.last[r.uid] for r in readers if r.uid in self.last])
                defs = [self.first[b.instruction.uid] for b in aset.buffers
                        if b.instruction.uid in self.first
                        and span.start <= self.first[b.instruction.uid] <= span.end]
                if defs and min(defs) - last_read >= 2:
                    self.gaps.setdefault(aset.id, []).append(
                        TimeInterval(last_read + 1, min(defs) - 1))
