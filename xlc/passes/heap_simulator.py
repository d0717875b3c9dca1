"""Heap simulator: choose offsets for buffers with known live intervals (XLA's
GlobalDecreasingSizeBestFitHeap, spatial and temporal orders, keep the smaller heap).

A `HeapBuffer` is a group of must-share intervals (one chunk for all of them): an alias set's
live range plus the ranges of buffers that reuse a dying operand's storage. Placement walks the
groups in decreasing-size (spatial) or decreasing-span (temporal) order and puts each one in the
smallest aligned gap left by already-placed groups whose intervals overlap in time (best fit), or
at the aligned end of the highest of them.

`temp_heap_buffers` builds the groups from a module's live ranges, `no_fragmentation_peak` is the
lower bound (max over time of live bytes) used by the schedulers and the report.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from xlc.errors import ArgumentError
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.passes.dataflow import AliasSet, DataflowAnalysis, can_share_operand_buffer
from xlc.passes.ordering import LiveRanges, TimeInterval

log = logging.getLogger("xlc.passes.heap_simulator")

DEFAULT_ALIGNMENT = 64
"""The slice alignment when no backend names one (tests, pictures); each backend passes its
own `Backend.alignment` to buffer assignment."""


@dataclass(frozen=True)
class Chunk:
    """A placed piece of the heap: [offset, offset + size)."""

    offset: int
    size: int

    @property
    def end(self) -> int:
        """One past the last byte."""
        return self.offset + self.size

    def overlaps(self, other: Chunk) -> bool:
        """True when the byte ranges intersect."""
        return self.offset < other.end and other.offset < self.end


@dataclass
class HeapBuffer:
    """One group to place: `size` bytes live during every interval in `intervals` (all share
    one chunk). `key` identifies it in the result; `members` carries the caller's objects
    (alias sets) whose intervals these are."""

    key: int
    size: int
    intervals: list[TimeInterval]
    members: list[object] = field(default_factory=list)
    alignment: int = 0
    """This group's offset alignment; 0 means the heap's alignment."""

    @property
    def start(self) -> int:
        """First time step of any interval."""
        return min(iv.start for iv in self.intervals)

    @property
    def end(self) -> int:
        """Last time step of any interval."""
        return max(iv.end for iv in self.intervals)

    def overlaps(self, other: HeapBuffer) -> bool:
        """True when some interval of each group shares a time step."""
        if self.start > other.end or other.start > self.end:
            return False
        return any(a.overlaps(b) for a in self.intervals for b in other.intervals)


@dataclass
class HeapResult:
    """Chunks per HeapBuffer key, the heap size and the algorithm that produced them."""

    chunks: dict[int, Chunk]
    heap_size: int
    algorithm: str

    def fragmentation(self, buffers: Iterable[HeapBuffer]) -> int:
        """Heap size minus the no-fragmentation peak of `buffers`."""
        return self.heap_size - no_fragmentation_peak(buffers)


def _align(x: int, alignment: int) -> int:
    return (x + alignment - 1) // alignment * alignment


def check_alignment(alignment: int) -> None:
    """Raise ArgumentError unless `alignment` is a positive power of two (bytes)."""
    if not isinstance(alignment, int) or alignment < 1 or alignment & (alignment - 1):
        raise ArgumentError(f"alignment must be a positive power of two, got {alignment!r}")


def chunk_alignment(size: int, alignment: int) -> int:
    """The offset alignment a buffer of `size` bytes needs when the backend's alignment is
    `alignment` (a power of two): the full `alignment` for buffers of at least that many
    bytes (vector code), otherwise the largest power of two dividing `size` (a multiple of the
    element size, and of any vector width whose multiple the size is) capped at `alignment`;
    1 for empty buffers. E.g. (64 backend) f32[] -> 4, f32[4] -> 16, f32[3] -> 4, f32[100] -> 64."""
    if size <= 0:
        return 1
    if size >= alignment:
        return alignment
    return min(alignment, size & -size)


def _spatial_key(b: HeapBuffer) -> tuple[int, int, int]:
    return (-b.size, -(b.end - b.start), b.key)


def _temporal_key(b: HeapBuffer) -> tuple[int, int, int]:
    return (-(b.end - b.start), -b.size, b.key)


ORDERS: dict[str, Callable[[HeapBuffer], tuple[int, int, int]]] = {
    "spatial": _spatial_key,
    "temporal": _temporal_key,
}


def global_decreasing_size_best_fit(buffers: Iterable[HeapBuffer],
                                    alignment: int = DEFAULT_ALIGNMENT,
                                    order: str = "spatial") -> HeapResult:
    """Place every buffer (XLA's GlobalDecreasingSizeBestFitHeap). Requires alignment >= 1 and
    unique keys. Guarantees: every offset is a multiple of the buffer's own `alignment` when
    set (non-zero), else of `alignment`; buffers whose intervals overlap in time get disjoint
    chunks; zero-size buffers get (0, 0)."""
    check_alignment(alignment)
    items = sorted(buffers, key=ORDERS[order])
    # placed groups as parallel arrays: time hull, chunk, and the group (for exact checks)
    lo = np.empty(len(items), np.int64)
    hi = np.empty(len(items), np.int64)
    offs = np.empty(len(items), np.int64)
    ends = np.empty(len(items), np.int64)
    placed: list[HeapBuffer] = []
    chunks: dict[int, Chunk] = {}
    heap_size = 0
    for buf in items:
        if buf.size == 0:
            chunks[buf.key] = Chunk(0, 0)
            continue
        b_lo, b_hi = buf.start, buf.end
        n = len(placed)
        hits = np.nonzero((lo[:n] <= b_hi) & (hi[:n] >= b_lo))[0]
        multi = len(buf.intervals) > 1
        used = sorted(((int(offs[i]), int(ends[i])) for i in hits
                       if not (multi or len(placed[i].intervals) > 1)
                       or buf.overlaps(placed[i])), key=lambda c: c[0])
        offset = _best_fit(used, buf.size, buf.alignment or alignment)
        chunk = Chunk(offset, buf.size)
        chunks[buf.key] = chunk
        lo[n], hi[n], offs[n], ends[n] = b_lo, b_hi, offset, chunk.end
        placed.append(buf)
        heap_size = max(heap_size, chunk.end)
    return HeapResult(chunks, heap_size, order)


def _best_fit(used: list[tuple[int, int]], size: int, alignment: int) -> int:
    """Smallest aligned gap between `used` (offset, end) chunks, sorted by offset, that fits
    `size`, else the aligned end of the highest one."""
    best: int | None = None
    best_gap = 0
    cursor = 0
    for off, end in used:
        if off > cursor:
            gap = off - cursor
            if gap >= size and (best is None or gap < best_gap):
                best, best_gap = cursor, gap
        cursor = max(cursor, _align(end, alignment))
    return best if best is not None else cursor


def best_fit_heap(buffers: Iterable[HeapBuffer], alignment: int = DEFAULT_ALIGNMENT) -> HeapResult:
    """XLA's default: run the spatial and the temporal orders, keep the smaller heap (ties go
    to spatial)."""
    items = list(buffers)
    results = [global_decreasing_size_best_fit(items, alignment, o) for o in ("spatial",
                                                                             "temporal")]
    return min(results, key=lambda r: r.heap_size)


def no_fragmentation_peak(buffers: Iterable[HeapBuffer]) -> int:
    """Max over time of the bytes of groups live at that time (a group counts once)."""
    events: list[tuple[int, int, int]] = []
    for b in buffers:
        if b.size == 0:
            continue
        for iv in _merged(b.intervals):
            events.append((iv.start, 0, b.size))
            events.append((iv.end + 1, -1, -b.size))
    events.sort(key=lambda e: (e[0], e[1]))
    live = peak = 0
    for _, _, delta in events:
        live += delta
        peak = max(peak, live)
    return peak


def _merged(intervals: list[TimeInterval]) -> list[TimeInterval]:
    out: list[TimeInterval] = []
    for iv in sorted(intervals, key=lambda i: i.start):
        if out and iv.start <= out[-1].end + 1:
            out[-1] = TimeInterval(out[-1].start, max(out[-1].end, iv.end))
        else:
            out.append(iv)
    return out


def check_heap(buffers: Iterable[HeapBuffer], result: HeapResult, alignment: int) -> list[str]:
    """Brute-force check of a heap result: returns a list of problems (empty when valid)."""
    items = list(buffers)
    problems = []
    for b in items:
        c = result.chunks.get(b.key)
        if c is None:
            problems.append(f"buffer {b.key} has no chunk")
        elif c.size and (c.offset % (b.alignment or alignment) or c.end > result.heap_size):
            problems.append(f"buffer {b.key} chunk {c} misaligned or outside the heap")
    for i, a in enumerate(items):
        for b in items[i + 1:]:
            ca, cb = result.chunks.get(a.key), result.chunks.get(b.key)
            if ca and cb and ca.size and cb.size and ca.overlaps(cb) and a.overlaps(b):
                problems.append(f"buffers {a.key} and {b.key} overlap in time and memory")
    return problems


# ---- building groups from a module -----------------------------------------------------------
@dataclass
class SharedUse:
    """Record of an operand reuse: `user_set` was placed into `operand_set`'s storage because
    its defining instruction consumed the operand's last use."""

    operand_set: AliasSet
    user_set: AliasSet
    user: HloInstruction


def temp_heap_buffers(dataflow: DataflowAnalysis, live: LiveRanges,
                      temps: Iterable[AliasSet], reuse_operands: bool = True
                      ) -> tuple[list[HeapBuffer], list[SharedUse]]:
    """Group the temp alias sets into HeapBuffers from their live ranges.

    With `reuse_operands`, a set whose buffer is defined by instruction I at the start of one of
    the set's intervals shares the chunk of an operand's set (a temp of equal size, not live
    out) that dies exactly at I, when XLA's CanShareOperandBufferWithUser allows it (never for
    `copy`). Sets are visited in order of their first definition; a set of several buffers (a
    while loop's carried element) may then still join a later chunk: when its new value is
    defined after a loop gap (see `LiveRanges.set_intervals`) from a temp that lives only
    inside the gap, the new value is computed in place of that temp, in the slot the old value
    left. Chunks shared this way must be free at all other times of the joining group."""
    temps = [s for s in temps if live.set_range(s) is not None]
    temp_ids = {s.id for s in temps}
    group_of: dict[int, HeapBuffer] = {}
    shares: list[SharedUse] = []
    consumed: set[int] = set()
    ordered = sorted(temps, key=lambda s: (live.set_range(s).start, s.id))  # type: ignore
    for s in ordered:
        target = _reusable_operand(dataflow, live, s, temp_ids, consumed, group_of,
                                   live.set_intervals(s)) if reuse_operands else None
        if target is None:
            group_of[s.id] = HeapBuffer(len(group_of), s.size, live.set_intervals(s), [s])
            continue
        grp = group_of[target[0].id]
        grp.intervals += live.set_intervals(s)
        grp.members.append(s)
        group_of[s.id] = grp
        consumed.add(target[0].id)
        shares.append(SharedUse(target[0], s, target[1]))
    for s in ordered if reuse_operands else []:
        own = group_of[s.id]
        if len(s.buffers) == 1 or own.members[0] is not s:
            continue
        target = _reusable_operand(dataflow, live, s, temp_ids, consumed, group_of,
                                   own.intervals)
        if target is None or group_of[target[0].id] is own:
            continue
        grp = group_of[target[0].id]
        grp.intervals += own.intervals
        grp.members += own.members
        for m in own.members:
            group_of[m.id] = grp  # type: ignore[attr-defined]
        consumed.add(target[0].id)
        shares.append(SharedUse(target[0], s, target[1]))
    unique: dict[int, HeapBuffer] = {}
    for g in group_of.values():
        unique[id(g)] = g
    groups = list(unique.values())
    for i, g in enumerate(groups):
        g.key = i
    return groups, shares


def _reusable_operand(dataflow: DataflowAnalysis, live: LiveRanges, s: AliasSet,
                      temp_ids: set[int], consumed: set[int], group_of: dict[int, HeapBuffer],
                      intervals: list[TimeInterval]
                      ) -> tuple[AliasSet, HloInstruction] | None:
    """The operand set whose chunk `s` may take over, and the instruction that does it.
    `intervals` are the times the joining group occupies its chunk."""
    own = live.set_intervals(s)
    for buf in s.buffers:
        user = buf.instruction
        if user.opcode is Opcode.COPY or buf.shape.is_tuple or user.uid not in live.first:
            continue
        t = live.time(user)
        if not any(iv.start == t for iv in own):
            continue
        for operand in user.operands:
            for ob in dataflow.buffers_at(operand, ()):
                os_ = dataflow.alias_set(ob)
                if os_.id not in temp_ids or os_.id in consumed or os_.id not in group_of:
                    continue
                if any(dataflow.is_live_out(b) for b in os_.buffers):
                    continue  # a live-out value is never dead: nothing may take its storage
                orng = live.set_range(os_)
                if orng is None or orng.end != t or os_.size != s.size:
                    continue
                if os_.color != s.color:
                    continue
                if len(s.buffers) > 1 and not _free_during(group_of[os_.id], intervals, t):
                    continue  # (a singleton starts where its operand's chain ends)
                if can_share_operand_buffer(operand, user, (), buf.index):
                    return os_, user
    return None


def _free_during(group: HeapBuffer, intervals: list[TimeInterval], t: int) -> bool:
    """No interval of `group` overlaps `intervals` except by touching at time `t` (the
    handover: the group's last reader defines the interval starting at `t`)."""
    return all(not g.overlaps(iv) or (g.end == t and iv.start == t)
               for g in group.intervals for iv in intervals)


def minimum_memory(module: HloModule, schedule: Mapping[HloComputation, list[HloInstruction]],
                   dataflow: DataflowAnalysis | None = None) -> int:
    """XLA's MinimumMemoryForModule: the no-fragmentation peak of every non-constant buffer of
    the module under `schedule` (entry parameters included), with operand reuse."""
    df = dataflow or DataflowAnalysis(module)
    live = LiveRanges(module, schedule, df)
    sets = [s for s in df.alias_sets
            if not any(b.instruction.opcode is Opcode.CONSTANT for b in s.buffers)]
    groups, _ = temp_heap_buffers(df, live, sets)
    return no_fragmentation_peak(groups)
