"""Stream assignment and the event plan of a thunk schedule (XLA's 2019 multi-stream design).

Default (`gpu_streams == 1`): every thunk on stream 0, in the memory-minimising schedule,
buffers assigned under SequentialHloOrdering; no events.

Several streams (`prepare_multi_stream` before emission, `plan_streams` after):
* `assign_streams`: walking the entry in BFS order, a dot, or an instruction whose operands
  come from no thunk (it starts a new chain), takes the lowest stream that no instruction it
  may run concurrently with (no path either way) already uses; every other instruction takes
  the highest stream of its operands' producers (walking through thunk-less ops);
* the entry is re-sequenced in **BFS launch order** (Kahn, FIFO) and buffers are assigned under
  a **PredecessorHloOrdering** whose predecessors are the data edges plus the previous
  instruction on the same stream, so buffers of concurrently running thunks never share bytes;
* `plan_streams`: each thunk waits for the last thunk of each operand producer on another
  stream (an event recorded after the producer), dropping edges already implied by an earlier
  wait (`last_dependency[s1][s2]`); at the end stream 0 waits for every other stream.
`validate_plan` re-checks the result with vector clocks (used by the tests).

Asynchronous copies (copy-start / copy-done, from host offload): every top-level copy-start
runs on one more stream, the **copy stream** (number `gpu_streams`), so a transfer overlaps the
kernels; its copy-done stays on a compute stream and waits for the copy's event. With one
compute stream buffers were assigned under the total order, so a copy-start also waits for the
compute thunk issued right before it (`ordered_copies`: the bytes it writes may have been used
by any earlier thunk); with several, the PredecessorHloOrdering covers the copy stream's chain
like any other and the data / control edges decide the waits.
"""
from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from xlc.backend_gpu.thunks import SequentialThunk, Thunk
from xlc.errors import ArtifactError, LoweringError
from xlc.hlo.ir import HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.passes.buffer_assignment import BufferAssignment, assign_buffers
from xlc.passes.ordering import PredecessorHloOrdering

log = logging.getLogger("xlc.backend_gpu")

_THUNKLESS = (Opcode.PARAMETER, Opcode.CONSTANT, Opcode.TUPLE, Opcode.GET_TUPLE_ELEMENT,
              Opcode.BITCAST, Opcode.AFTER_ALL)


@dataclass
class StreamPlan:
    """The streams of an entry thunk sequence: `num_streams`, the number of events, and the
    events stream 0 waits for at the end (`final_waits`)."""

    num_streams: int
    thunks: SequentialThunk
    num_events: int = 0
    final_waits: list[int] = field(default_factory=list)
    stream_of: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for the artifact (the thunks themselves serialise separately)."""
        return {"num_streams": self.num_streams, "num_events": self.num_events,
                "final_waits": list(self.final_waits), "stream_of": dict(self.stream_of)}

    @staticmethod
    def from_dict(d: dict[str, Any], thunks: SequentialThunk) -> StreamPlan:
        """Inverse of `to_dict`, given the entry thunks (`thunk_from_dict`). Raises
        ArtifactError when an event or stream number is out of range."""
        plan = StreamPlan(int(d["num_streams"]), thunks, int(d["num_events"]),
                          [int(e) for e in d["final_waits"]],
                          {str(k): int(v) for k, v in d["stream_of"].items()})
        for t in thunks.walk():
            events = [*t.wait_events, *([] if t.record_event is None else [t.record_event])]
            if not 0 <= t.stream < max(1, plan.num_streams) or \
                    any(not 0 <= e < plan.num_events for e in events):
                raise ArtifactError(f"thunk {t.hlo} names a stream or event the plan lacks")
        if any(not 0 <= e < plan.num_events for e in plan.final_waits):
            raise ArtifactError("the stream plan waits for an event it does not have")
        return plan


def producers(inst: HloInstruction) -> list[HloInstruction]:
    """The thunk-producing instructions whose results `inst` reads (walking through tuple,
    get-tuple-element, bitcast; parameters and constants produce nothing)."""
    out: list[HloInstruction] = []
    seen: set[int] = set()
    stack = list(inst.operands) + list(inst.control_predecessors)
    while stack:
        p = stack.pop()
        if p.uid in seen:
            continue
        seen.add(p.uid)
        if p.opcode in _THUNKLESS:
            stack.extend(p.operands)
        else:
            out.append(p)
    return out


def has_async_copies(module: HloModule) -> bool:
    """Whether the entry computation holds a copy-start (it then needs a copy stream)."""
    assert module.entry is not None
    return any(i.opcode is Opcode.COPY_START for i in module.entry.instructions)


def copy_streams(module: HloModule, copy_stream: int) -> dict[int, int]:
    """The stream map of a one-stream plan with a copy stream: every entry copy-start on
    `copy_stream`, everything else on stream 0 (by instruction uid)."""
    assert module.entry is not None
    return {i.uid: copy_stream for i in module.entry.instructions
            if i.opcode is Opcode.COPY_START}


def bfs_order(module: HloModule) -> list[HloInstruction]:
    """The entry's instructions in BFS (Kahn, FIFO) order; ties keep the current schedule's
    order."""
    entry = module.entry
    assert entry is not None
    base = list(module.schedule[entry]) if module.schedule and entry in module.schedule \
        else entry.post_order()
    pos = {i.uid: k for k, i in enumerate(base)}
    users: dict[int, list[HloInstruction]] = {i.uid: [] for i in base}
    indeg: dict[int, int] = {}
    for i in base:
        preds = {p.uid for p in list(i.operands) + list(i.control_predecessors)}
        indeg[i.uid] = len(preds)
        for p in preds:
            users[p].append(i)
    ready = deque(sorted((i for i in base if indeg[i.uid] == 0), key=lambda i: pos[i.uid]))
    order: list[HloInstruction] = []
    while ready:
        i = ready.popleft()
        order.append(i)
        for u in sorted(users[i.uid], key=lambda u: pos[u.uid]):
            indeg[u.uid] -= 1
            if indeg[u.uid] == 0:
                ready.append(u)
    if len(order) != len(base):
        raise LoweringError(f"entry of {module.name} has a cycle")
    return order


def _reachability(order: list[HloInstruction]) -> dict[int, int]:
    index = {i.uid: k for k, i in enumerate(order)}
    anc: dict[int, int] = {}
    for i in order:
        mask = 0
        for p in list(i.operands) + list(i.control_predecessors):
            mask |= anc[p.uid] | (1 << index[p.uid])
        anc[i.uid] = mask
    return anc


def assign_streams(module: HloModule, num_streams: int,
                   copy_stream: int | None = None) -> dict[int, int]:
    """Stream (0..num_streams-1) of every thunk-producing entry instruction, by uid; with
    `copy_stream`, every copy-start goes there and its copy-done to the stream of the copied
    value's producer."""
    order = bfs_order(module)
    index = {i.uid: k for k, i in enumerate(order)}
    anc = _reachability(order)
    stream: dict[int, int] = {}
    for inst in order:
        if inst.opcode in _THUNKLESS:
            continue
        prods = producers(inst)
        if copy_stream is not None and inst.opcode is Opcode.COPY_START:
            stream[inst.uid] = copy_stream
            continue
        if copy_stream is not None and inst.opcode is Opcode.COPY_DONE:
            source = [stream.get(p.uid, 0) for p in producers(inst.operands[0])]
            stream[inst.uid] = max([s for s in source if s != copy_stream], default=0)
            continue
        if inst.opcode is Opcode.DOT or not prods:
            busy: dict[int, int] = {}
            for other, s in stream.items():
                if not (anc[inst.uid] >> index[other] & 1):  # may run concurrently
                    busy[s] = busy.get(s, 0) + 1
            free = [s for s in range(num_streams) if s not in busy]
            stream[inst.uid] = free[0] if free else min(range(num_streams),
                                                        key=lambda s: busy.get(s, 0))
        else:
            stream[inst.uid] = max(stream.get(p.uid, 0) for p in prods)
    return stream


def prepare_multi_stream(module: HloModule, num_streams: int, alignment: int
                         ) -> tuple[BufferAssignment, dict[int, int]]:
    """Re-sequence the entry in BFS launch order, assign streams and assign buffers under the
    PredecessorHloOrdering of the streams. Requires a scheduled module. Returns the
    assignment and the streams (by instruction uid)."""
    entry = module.entry
    assert entry is not None and module.schedule is not None
    order = bfs_order(module)
    module.schedule[entry] = order
    streams = assign_streams(module, num_streams,
                             num_streams if has_async_copies(module) else None)
    preds: dict[HloInstruction, list[HloInstruction]] = {}
    last: dict[int, HloInstruction] = {}
    for inst in order:
        s = streams.get(inst.uid)
        if s is None:
            continue
        if s in last:
            preds[inst] = [last[s]]
        last[s] = inst
    ordering = PredecessorHloOrdering(module, preds)
    return assign_buffers(module, ordering=ordering, alignment=alignment), streams


def _set_stream(t: Thunk, s: int) -> None:
    for x in t.walk():
        x.stream = s


def _frontiers(module: HloModule, seq: SequentialThunk
               ) -> tuple[list[HloInstruction | None], list[set[int]]]:
    """For each top-level thunk of `seq`: its entry instruction, and the positions of the
    thunks it must follow (the last thunk of each operand's producer, looking through
    instructions that launched nothing, e.g. a copy elided because the slices agree)."""
    entry = module.entry
    assert entry is not None
    order = list(module.schedule[entry]) if module.schedule and entry in module.schedule \
        else entry.post_order()
    positions: dict[str, list[int]] = {}
    for pos, t in enumerate(seq.thunks):
        positions.setdefault(t.hlo, []).append(pos)
    frontier: dict[int, set[int]] = {}
    insts: list[HloInstruction | None] = [None] * len(seq.thunks)
    deps: list[set[int]] = [set() for _ in seq.thunks]
    for inst in order:
        preds: set[int] = set()
        for p in list(inst.operands) + list(inst.control_predecessors):
            preds |= frontier.get(p.uid, set())
        mine = positions.get(inst.name, [])
        for pos in mine:
            insts[pos] = inst
            deps[pos] = set(preds)
        frontier[inst.uid] = {mine[-1]} if mine else preds
    return insts, deps


def plan_streams(module: HloModule, seq: SequentialThunk, num_streams: int,
                 streams: dict[int, int] | None = None,
                 ordered_copies: bool = False) -> StreamPlan:
    """Give every top-level thunk of `seq` its stream (`streams` by instruction uid, default
    `assign_streams`) and its events (see the module docstring). With `ordered_copies`, each
    copy-start also waits for the thunk issued before it on the other streams."""
    if num_streams <= 1:
        return StreamPlan(1, seq)
    if streams is None:
        streams = assign_streams(module, num_streams)
    insts, deps = _frontiers(module, seq)
    if ordered_copies:
        _order_copies(seq, insts, deps)
    last_dep = [[-1] * num_streams for _ in range(num_streams)]
    plan = StreamPlan(num_streams, seq)
    events: dict[int, int] = {}  # thunk position -> event id
    last_on_stream: dict[int, int] = {}
    for pos, t in enumerate(seq.thunks):
        inst = insts[pos]
        s = streams.get(inst.uid, 0) if inst is not None else 0
        _set_stream(t, s)
        plan.stream_of[t.hlo] = s
        latest: dict[int, int] = {}  # per other stream, only its latest dependency matters
        for j in deps[pos]:
            sj = seq.thunks[j].stream
            if sj != s:
                latest[sj] = max(latest.get(sj, -1), j)
        for sj, j in sorted(latest.items()):
            if j <= last_dep[s][sj]:
                continue  # implied by an earlier wait of this stream
            if j not in events:
                events[j] = len(events)
                seq.thunks[j].record_event = events[j]
            t.wait_events.append(events[j])
            last_dep[s][sj] = j
        last_on_stream[s] = pos
    for s, j in sorted(last_on_stream.items()):
        if s != 0:
            if j not in events:
                events[j] = len(events)
                seq.thunks[j].record_event = events[j]
            plan.final_waits.append(events[j])
    plan.num_events = len(events)
    return plan


def _order_copies(seq: SequentialThunk, insts: list[HloInstruction | None],
                  deps: list[set[int]]) -> None:
    """Make every top-level copy-start depend on the last thunk before it on another stream
    (buffers assigned under the total order: the bytes it writes were free only from then)."""
    last: int | None = None
    for pos, _t in enumerate(seq.thunks):
        inst = insts[pos]
        if inst is not None and inst.opcode is Opcode.COPY_START:
            if last is not None:
                deps[pos].add(last)
        else:
            last = pos


def validate_plan(module: HloModule, plan: StreamPlan) -> None:
    """Check that every data dependency between entry thunks is ordered: on one stream by
    position, across streams by a chain of events (vector clocks), and that stream 0 has
    observed every thunk at the end. Raises LoweringError."""
    seq = plan.thunks.thunks
    n = plan.num_streams
    clock = [[0] * n for _ in range(n)]   # clock[s] = how many thunks of each stream s saw
    recorded: dict[int, list[int]] = {}
    stamp: list[list[int]] = []
    for t in seq:
        s = t.stream
        for e in t.wait_events:
            if e not in recorded:
                raise LoweringError(f"thunk {t.hlo} waits for event {e} before it is recorded")
            clock[s] = [max(a, c) for a, c in zip(clock[s], recorded[e])]
        clock[s][s] += 1
        stamp.append(list(clock[s]))
        if t.record_event is not None:
            recorded[t.record_event] = list(clock[s])
    _, deps = _frontiers(module, plan.thunks)
    for pos, t in enumerate(seq):
        for j in sorted(deps[pos]):
            sj = seq[j].stream
            if j >= pos or stamp[pos][sj] < stamp[j][sj]:
                raise LoweringError(
                    f"thunk {t.hlo} (stream {t.stream}) may run before its operand "
                    f"{seq[j].hlo} (stream {sj}) finished: no event orders them")
    final = list(clock[0])
    for e in plan.final_waits:
        final = [max(a, c) for a, c in zip(final, recorded[e])]
    if final != [max(col) for col in zip(*stamp)] and seq:
        raise LoweringError("stream 0 does not wait for every stream at the end")
