"""BufferAssignment: give every LogicalBuffer of a module a Slice(allocation, offset, size).

Follows XLA's `BufferAssigner` (see xla-notes section 6):
- must-alias sets (while/conditional/in-place/io-alias, from `dataflow.py`) share one slice;
- an **entry parameter** set gets its own allocation (read-only unless io-aliased), a
  **constant** set its own constant allocation, a **live-out** set (maybe_live_out) its own output
  allocation of exactly its size;
- buffers of embedded non-fusion computations (reduce/map/sort bodies) get **thread-local**
  allocations; fused computations get none (the emitter keeps them in registers);
- every other (temp) set, tuple index tables included, is placed by the heap simulator into ONE
  combined temp allocation per color (whole-module mode: while bodies and branches share the heap),
  reusing a dying operand's chunk where CanShareOperandBufferWithUser allows. Without a total
  order (Dependency/Predecessor ordering) temps are packed greedily with `may_interfere`.

`BufferAllocation` and `Slice` are defined in `allocation.py` (the one pair of types the
backends, the manifest and the runtimes share) and re-exported here.
"""
from __future__ import annotations

import logging
from typing import Any

from xlc.errors import VerificationError
from xlc.hlo.ir import HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import POINTER_SIZE, ShapeIndex
from xlc.passes.allocation import (
    CONSTANT,
    OUTPUT,
    PARAMETER,
    TEMP,
    THREAD_LOCAL,
    BufferAllocation,
    Slice,
)
from xlc.passes.dataflow import (
    CONTROL,
    EMBEDDED,
    ENTRY,
    AliasSet,
    DataflowAnalysis,
    LogicalBuffer,
)
from xlc.passes.heap_simulator import (
    DEFAULT_ALIGNMENT,
    HeapBuffer,
    SharedUse,
    best_fit_heap,
    check_alignment,
    chunk_alignment,
    no_fragmentation_peak,
    temp_heap_buffers,
)
from xlc.passes.ordering import HloOrdering, LiveRanges, SequentialHloOrdering
from xlc.passes.scheduler import default_memory_schedule

log = logging.getLogger("xlc.passes.buffer_assignment")

__all__ = ["CONSTANT", "OUTPUT", "PARAMETER", "TEMP", "THREAD_LOCAL", "BufferAllocation",
           "BufferAssignment", "Slice", "assign_buffers", "temp_lower_bound"]

class BufferAssignment:
    """The result of `assign_buffers`: allocations and queries over them."""

    def __init__(self, module: HloModule, dataflow: DataflowAnalysis, ordering: HloOrdering,
                 live_ranges: LiveRanges | None, alignment: int):
        self.module = module
        self.dataflow = dataflow
        self.ordering = ordering
        self.live_ranges = live_ranges
        self.alignment = alignment
        self.allocations: list[BufferAllocation] = []
        self.shares: list[SharedUse] = []
        # buffers that get no memory: inside fusions (the emitter keeps them in registers)
        # and in computations unreachable from the entry
        self.unassigned_fused: set[LogicalBuffer] = set()
        self._alloc_of: dict[LogicalBuffer, BufferAllocation] = {}

    # ---- building ---------------------------------------------------------------------------
    def _new(self, size: int, color: int = 0, **flags: Any) -> BufferAllocation:
        alloc = BufferAllocation(len(self.allocations), size, color, **flags)
        self.allocations.append(alloc)
        return alloc

    def _put(self, alloc: BufferAllocation, aset: AliasSet, offset: int = 0) -> None:
        for b in aset.buffers:
            alloc.add(b, offset, b.size)
            self._alloc_of[b] = alloc

    # ---- queries -----------------------------------------------------------------------------
    def required_alignment(self, buf: LogicalBuffer) -> int:
        """The offset alignment `buf`'s slice has inside a temp or output allocation:
        `chunk_alignment` of its alias set's size (the backend alignment for buffers of at
        least that size, less for small ones: 4 for an f32 scalar)."""
        return chunk_alignment(self.dataflow.alias_set(buf).size, self.alignment)

    def has_allocation(self, buf: LogicalBuffer) -> bool:
        """False for buffers of fused or unreachable computations."""
        return buf in self._alloc_of

    def allocation_of(self, buf: LogicalBuffer) -> BufferAllocation:
        """The allocation holding `buf`; VerificationError if it has none."""
        try:
            return self._alloc_of[buf]
        except KeyError:
            raise VerificationError(f"buffer {buf} has no allocation") from None

    def buffer_slice(self, buf: LogicalBuffer) -> Slice:
        """The slice of one LogicalBuffer."""
        alloc = self.allocation_of(buf)
        off, size = alloc.assigned[buf]
        return Slice(alloc, off, size)

    def all_slices(self, inst: HloInstruction, index: ShapeIndex = ()) -> list[Slice]:
        """Distinct slices of every buffer `inst` may hold at `index`."""
        out: list[Slice] = []
        for b in self.dataflow.buffers_at(inst, tuple(index)):
            if b in self._alloc_of:
                s = self.buffer_slice(b)
                if s not in out:
                    out.append(s)
        return out

    def slice_of(self, inst: HloInstruction, index: ShapeIndex = ()) -> Slice:
        """The unique slice of `inst` at `index`; raises VerificationError when the position
        holds no assigned buffer (e.g. inside a fusion) or several distinct slices."""
        slices = self.all_slices(inst, index)
        if len(slices) != 1:
            what = "no" if not slices else f"{len(slices)} different"
            raise VerificationError(
                f"{what} slices for '{inst.name}' at index {{{','.join(map(str, index))}}}")
        return slices[0]

    def shares_slice(self, a: HloInstruction, b: HloInstruction,
                     a_index: ShapeIndex = (), b_index: ShapeIndex = ()) -> bool:
        """XLA's SharesSliceAtIndex: both positions have the same unique slice."""
        return self.slice_of(a, a_index) == self.slice_of(b, b_index)

    @property
    def temp_allocations(self) -> list[BufferAllocation]:
        """The combined temp allocation(s), one per color."""
        return [a for a in self.allocations if a.is_preallocated_temp]

    def stats(self) -> dict[str, int]:
        """parameter/output/temp/constant/alias/thread_local/peak bytes and counts."""
        from xlc.passes.buffer_assignment_report import compute_stats

        return compute_stats(self)

    def report(self) -> str:
        """XLA-like text dump: allocation headers, per-buffer lines, stats block."""
        from xlc.passes.buffer_assignment_report import report_text

        return report_text(self)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict: allocations with their buffers, and the stats."""
        from xlc.passes.buffer_assignment_report import report_json

        return report_json(self)


# ---- the assigner ---------------------------------------------------------------------------
def assign_buffers(module: HloModule, ordering: HloOrdering | None = None,
                   alignment: int = DEFAULT_ALIGNMENT, pointer_size: int = POINTER_SIZE,
                   reuse_operands: bool = True) -> BufferAssignment:
    """Assign every buffer of `module` (see the module docstring).

    `ordering` defaults to a SequentialHloOrdering over `module.schedule` (or over a fresh
    default memory schedule when the module has none; the module is not modified). A
    sequential ordering covering every control-flow computation uses the heap simulator in
    whole-module mode; any other ordering packs temps greedily with `may_interfere`."""
    if module.entry is None:
        raise VerificationError(f"module '{module.name}' has no entry computation")
    check_alignment(alignment)
    if ordering is None:
        ordering = SequentialHloOrdering(module, module.schedule or default_memory_schedule(module))
    df = DataflowAnalysis(module, pointer_size)
    kinds = df.kinds
    live = None
    if isinstance(ordering, SequentialHloOrdering) and all(
            c in ordering.schedule for c in module.computations
            if kinds[c] in (ENTRY, CONTROL)):
        live = LiveRanges(module, ordering.schedule, df)
    ba = BufferAssignment(module, df, ordering, live, alignment)
    io_params = {(a.param_number, a.param_index) for a in module.input_output_alias}
    temps: list[AliasSet] = []
    outputs: list[AliasSet] = []
    constants: list[AliasSet] = []
    params: list[tuple[int, ShapeIndex, AliasSet]] = []
    thread_local: list[AliasSet] = []
    for aset in df.alias_sets:
        comp_kinds = {kinds[b.computation] for b in aset.buffers}
        if comp_kinds <= {EMBEDDED, "unreachable"}:
            if all(b.computation.is_fusion_computation or _in_fusion(df, b)
                   for b in aset.buffers):
                ba.unassigned_fused.update(aset.buffers)
            elif EMBEDDED in comp_kinds:
                thread_local.append(aset)
            else:
                ba.unassigned_fused.update(aset.buffers)  # unreachable code never runs
            continue
        param = next((b for b in aset.buffers if b.instruction.opcode is Opcode.PARAMETER
                      and b.computation is module.entry), None)
        if param is not None:
            params.append((param.instruction.parameter_number, param.index, aset))
        elif any(b.instruction.opcode is Opcode.CONSTANT for b in aset.buffers):
            constants.append(aset)
        elif any(df.is_live_out(b) for b in aset.buffers):
            outputs.append(aset)
        else:
            temps.append(aset)
    for number, index, aset in sorted(params, key=lambda p: (p[0], p[1])):
        alloc = ba._new(aset.size, aset.color, is_entry_computation_parameter=True,
                        parameter_number=number, parameter_index=index,
                        aliased_with_output=(number, index) in io_params,
                        maybe_live_out=any(df.is_live_out(b) for b in aset.buffers),
                        is_tuple=aset.buffers[0].is_tuple)
        ba._put(alloc, aset)
    for aset in constants:
        ba._put(ba._new(aset.size, aset.color, is_constant=True,
                        maybe_live_out=any(df.is_live_out(b) for b in aset.buffers)), aset)
    for aset in sorted(outputs, key=lambda s: min(b.id for b in s.buffers)):
        ba._put(ba._new(aset.size, aset.color, maybe_live_out=True,
                        is_tuple=any(b.is_tuple for b in aset.buffers)), aset)
    for aset in thread_local:
        ba._put(ba._new(aset.size, aset.color, is_thread_local=True), aset)
    if live is not None:
        _assign_temps_with_heap(ba, live, temps, reuse_operands)
    else:
        _assign_temps_greedy(ba, temps)
    log.debug("assigned %d buffers of %s into %d allocations", len(df.buffers), module.name,
              len(ba.allocations))
    return ba


def _in_fusion(df: DataflowAnalysis, buf: LogicalBuffer) -> bool:
    """True when `buf` lives in a computation reached (transitively) through a fusion."""
    comp = buf.computation
    seen: set[int] = set()
    while id(comp) not in seen:
        seen.add(id(comp))
        callers = df.callers.get(comp, [])
        if not callers:
            return False
        caller = callers[0]
        if caller.opcode is Opcode.FUSION:
            return True
        assert caller.parent is not None
        comp = caller.parent
    return False


def _assign_temps_with_heap(ba: BufferAssignment, live: LiveRanges, temps: list[AliasSet],
                            reuse_operands: bool) -> None:
    """Group temps by operand reuse (a chain may end in a live-out value: the whole chain then
    lives in that output allocation), fill the idle time of output allocations with temps that
    die before the output is defined, and pack the rest with the heap simulator into one temp
    allocation per color."""
    df = ba.dataflow
    out_sets: dict[int, tuple[BufferAllocation, AliasSet]] = {}
    if reuse_operands:
        for alloc in ba.allocations:
            in_alloc = {df.alias_set(b).id: df.alias_set(b) for b in alloc.assigned}
            if alloc.kind == OUTPUT and not alloc.is_tuple and len(in_alloc) == 1:
                (aset,) = in_alloc.values()
                if live.set_range(aset) is not None:
                    out_sets[aset.id] = (alloc, aset)
    for color in sorted({s.color for s in temps}):
        sets = [s for s in temps if s.color == color]
        outs = [s for _, s in out_sets.values() if s.color == color]
        groups, shares = temp_heap_buffers(df, live, sets + outs, reuse_operands)
        for g in groups:
            g.alignment = chunk_alignment(g.size, ba.alignment)
        ba.shares += shares
        windows: dict[int, list[tuple[HeapBuffer, int]]] = {
            alloc.index: [] for alloc, s in out_sets.values() if s.color == color}
        heap_groups: list[HeapBuffer] = []
        for g in groups:
            owner = next((m for m in g.members if m.id in out_sets), None)  # type: ignore
            if owner is None:
                heap_groups.append(g)
                continue
            alloc, _ = out_sets[owner.id]  # type: ignore[attr-defined]
            for m in g.members:
                if m is not owner:
                    ba._put(alloc, m, 0)  # type: ignore[arg-type]
            windows[alloc.index].append((g, 0))
        if reuse_operands:
            heap_groups = _fill_output_windows(ba, windows, heap_groups)
        if not heap_groups and all(ba.has_allocation(s.buffers[0]) for s in sets):
            continue  # everything lives in output allocations: no temp allocation
        result = best_fit_heap(heap_groups, ba.alignment)
        alloc = ba._new(result.heap_size, color)
        alloc.heap = result
        for g in heap_groups:
            chunk = result.chunks[g.key]
            for member in g.members:
                ba._put(alloc, member, chunk.offset)  # type: ignore[arg-type]
        alloc.peak_buffers = _peak_buffers(heap_groups, live)
        # sets without a live range (dead code in unscheduled computations) go at the end
        for s in sets:
            if not ba.has_allocation(s.buffers[0]):
                off = _round_up(alloc.size, chunk_alignment(s.size, ba.alignment))
                alloc.size = off + s.size
                ba._put(alloc, s, off)


def _fill_output_windows(ba: BufferAssignment, windows: dict[int, list[tuple[HeapBuffer, int]]],
                         groups: list[HeapBuffer]) -> list[HeapBuffer]:
    """Place temp groups inside output allocations wherever they fit in space and time (an
    output allocation exists for the whole run; before its value is defined it is idle).
    Returns the groups left for the temp heap."""
    left = sorted(groups, key=lambda g: (-g.size, g.key))
    for index in sorted(windows, key=lambda i: (-ba.allocations[i].size, i)):
        alloc = ba.allocations[index]
        occupants = windows[index]
        if not occupants:
            continue
        remaining = []
        for g in left:
            used = sorted((off, o.size) for o, off in occupants if o.overlaps(g))
            offset = _first_fit(used, g.size, g.alignment or ba.alignment, alloc.size) \
                if g.size <= alloc.size else None
            if offset is None:
                remaining.append(g)
                continue
            occupants.append((g, offset))
            for m in g.members:
                ba._put(alloc, m, offset)  # type: ignore[arg-type]
        left = remaining
    return left


def _first_fit(used: list[tuple[int, int]], size: int, alignment: int, limit: int
               ) -> int | None:
    cursor = 0
    for off, sz in used:
        if off >= cursor + size:
            break
        cursor = max(cursor, _round_up(off + sz, alignment))
    return cursor if cursor + size <= limit else None


def _peak_buffers(groups: list[HeapBuffer], live: LiveRanges) -> list[LogicalBuffer]:
    """The buffers live at the time the packed groups use the most bytes."""
    peak_t = _peak_time(groups)
    out: list[LogicalBuffer] = []
    for g in groups:
        for m in g.members:
            assert isinstance(m, AliasSet)
            if any(iv.start <= peak_t <= iv.end for iv in live.set_intervals(m)):
                out += m.buffers
    return out


def _peak_time(groups: list[HeapBuffer]) -> int:
    events: list[tuple[int, int]] = []
    for g in groups:
        covered: list[tuple[int, int]] = []
        for iv in sorted(g.intervals, key=lambda iv: iv.start):
            if covered and iv.start <= covered[-1][1] + 1:
                covered[-1] = (covered[-1][0], max(covered[-1][1], iv.end))
            else:
                covered.append((iv.start, iv.end))
        for a, b in covered:
            events += [(a, g.size), (b + 1, -g.size)]
    events.sort(key=lambda e: (e[0], e[1]))
    live = best = best_t = 0
    for t, delta in events:
        live += delta
        if live > best:
            best, best_t = live, t
    return best_t


def _round_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def _assign_temps_greedy(ba: BufferAssignment, temps: list[AliasSet]) -> None:
    """No total order: bins of mutually non-interfering sets, laid out consecutively in one
    temp allocation per color."""
    df, ordering = ba.dataflow, ba.ordering
    for color in sorted({s.color for s in temps}):
        bins: list[tuple[int, list[AliasSet]]] = []
        for s in sorted((s for s in temps if s.color == color),
                        key=lambda s: (-s.size, s.id)):
            for size, members in bins:
                if s.size <= size and not any(
                        ordering.may_interfere(a, b, df)
                        for m in members for a in m.buffers for b in s.buffers):
                    members.append(s)
                    break
            else:
                bins.append((s.size, [s]))
        alloc = ba._new(0, color)
        offset = 0
        for size, members in bins:
            offset = _round_up(offset, max(chunk_alignment(m.size, ba.alignment)
                                           for m in members))
            for m in members:
                ba._put(alloc, m, offset)
            offset += size
        alloc.size = offset


def temp_lower_bound(ba: BufferAssignment) -> int:
    """Peak live temp bytes under the assignment's schedule (no fragmentation), or the temp
    size when there is no total order."""
    if ba.live_ranges is None:
        return sum(a.size for a in ba.temp_allocations)
    total = 0
    for alloc in ba.temp_allocations:
        sets = {id(ba.dataflow.alias_set(b)): ba.dataflow.alias_set(b) for b in alloc.assigned}
        groups, _ = temp_heap_buffers(ba.dataflow, ba.live_ranges, list(sets.values()))
        total += no_fragmentation_peak(groups)
    return total
