"""Memory-minimising schedulers (XLA's hlo_memory_scheduler): post-order, DFS, list; the
default runs all three on the whole module and keeps the lowest simulated peak.

A schedule is `{computation: [instructions]}` for every non-fusion computation; each sequence is
a topological order of its computation (operands and control predecessors first).
"""
from __future__ import annotations

import heapq
import logging
from collections.abc import Callable

from xlc.errors import ArgumentError
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.printer import computation_print_order
from xlc.passes.dataflow import DataflowAnalysis, LogicalBuffer
from xlc.passes.heap_simulator import minimum_memory

log = logging.getLogger("xlc.passes.scheduler")

Schedule = dict[HloComputation, list[HloInstruction]]
_CAP = 1 << 62


def _schedulable(module: HloModule) -> list[HloComputation]:
    return [c for c in module.computations_post_order() if not c.is_fusion_computation]


def _ignored(inst: HloInstruction) -> bool:
    return inst.opcode in (Opcode.PARAMETER, Opcode.CONSTANT)


# ---- post order ---------------------------------------------------------------------------
def post_order_schedule(module: HloModule, dataflow: DataflowAnalysis | None = None) -> Schedule:
    """Each computation in post order (operands first; XLA's PostOrderScheduler)."""
    return {c: c.post_order() for c in _schedulable(module)}


# ---- DFS ------------------------------------------------------------------------------------
def _dfs_computation(comp: HloComputation, df: DataflowAnalysis) -> list[HloInstruction]:
    order = comp.post_order()
    extra: dict[int, int] = {}
    total: dict[int, int] = {}
    for inst in order:
        e = max(len(inst.users) - 1, 0)
        t = sum(b.size for b in df.defines(inst))
        for op in inst.operands:
            if op.parent is comp:
                e += extra.get(op.uid, 0)
                t += total.get(op.uid, 0)
        extra[inst.uid] = min(e, _CAP)
        total[inst.uid] = min(t, _CAP)

    def key(i: HloInstruction) -> tuple[int, int, str]:
        return (-extra[i.uid], -total[i.uid], i.name)

    done: set[int] = set()
    out: list[HloInstruction] = []
    roots = [comp.root] if comp.root is not None else []
    roots += [i for i in comp.instructions if not i.users and i is not comp.root]
    for start in roots + comp.instructions:
        if start.uid in done:
            continue
        done.add(start.uid)
        stack = [(start, sorted(_preds(start, comp), key=key), 0)]
        while stack:
            inst, preds, i = stack[-1]
            if i < len(preds):
                stack[-1] = (inst, preds, i + 1)
                p = preds[i]
                if p.uid not in done:
                    done.add(p.uid)
                    stack.append((p, sorted(_preds(p, comp), key=key), 0))
            else:
                stack.pop()
                out.append(inst)
    return out


def _preds(inst: HloInstruction, comp: HloComputation) -> list[HloInstruction]:
    seen: list[HloInstruction] = []
    for p in inst.operands + inst.control_predecessors:
        if p.parent is comp and p not in seen:
            seen.append(p)
    return seen


def dfs_memory_schedule(module: HloModule, dataflow: DataflowAnalysis | None = None) -> Schedule:
    """XLA's DFSMemoryScheduler: a DFS post order visiting operands with more extra users
    (sum of users - 1 over transitive operands) first, then larger cumulative output bytes,
    then by name."""
    df = dataflow or DataflowAnalysis(module)
    return {c: _dfs_computation(c, df) for c in _schedulable(module)}


# ---- list -----------------------------------------------------------------------------------
def _list_computation(comp: HloComputation, df: DataflowAnalysis) -> list[HloInstruction]:
    insts = comp.instructions
    position = {i.uid: n for n, i in enumerate(insts)}
    defined: dict[int, list[LogicalBuffer]] = {
        i.uid: ([] if _ignored(i) else df.defines(i)) for i in insts}
    uses: dict[int, list[LogicalBuffer]] = {}
    use_count: dict[int, int] = {}
    size_of: dict[int, int] = {}
    for inst in insts:
        bufs: dict[int, LogicalBuffer] = {}
        for op in inst.operands:
            for s in df.points_to(op).values():
                for b in s:
                    if not _ignored(b.instruction):
                        bufs[b.id] = b
        uses[inst.uid] = list(bufs.values())
        for b in bufs.values():
            use_count[b.id] = use_count.get(b.id, 0) + 1
            size_of[b.id] = b.size
    if comp.root is not None:
        for s in df.points_to(comp.root).values():
            for b in s:
                use_count[b.id] = use_count.get(b.id, 0) + 1  # live out: an extra use
    waiting = {i.uid: len(set(_preds(i, comp))) for i in insts}
    successors: dict[int, list[HloInstruction]] = {i.uid: [] for i in insts}
    for inst in insts:
        for p in set(_preds(inst, comp)):
            successors[p.uid].append(inst)
    users_of: dict[int, list[HloInstruction]] = {}
    for inst in insts:
        for b in uses[inst.uid]:
            users_of.setdefault(b.id, []).append(inst)

    def key(inst: HloInstruction) -> tuple[float, int, int]:
        """Min-heap key of XLA's priority (bytes freed - bytes defined, users); effective scalars
        first; ties to the earlier instruction."""
        if inst.shape.is_array and inst.shape.num_elements == 1:
            return (float("-inf"), -len(inst.users), position[inst.uid])
        freed = sum(size_of[b.id] for b in uses[inst.uid] if use_count[b.id] == 1)
        made = sum(b.size for b in defined[inst.uid])
        return (made - freed, -len(inst.users), position[inst.uid])

    # A heap of (key, uid); an entry is stale when its key is no longer current[uid] (the
    # priority rose when one of its operand buffers got down to its last use).
    current: dict[int, tuple[float, int, int]] = {}
    heap: list[tuple[tuple[float, int, int], int]] = []
    by_uid = {i.uid: i for i in insts}

    def push(inst: HloInstruction) -> None:
        k = key(inst)
        current[inst.uid] = k
        heapq.heappush(heap, (k, inst.uid))

    for inst in insts:
        if waiting[inst.uid] == 0:
            push(inst)
    out: list[HloInstruction] = []
    while heap:
        k, uid = heapq.heappop(heap)
        if current.get(uid) != k:
            continue
        del current[uid]
        best = by_uid[uid]
        out.append(best)
        for b in uses[best.uid]:
            use_count[b.id] -= 1
            if use_count[b.id] == 1:
                for u in users_of[b.id]:
                    if u.uid in current:
                        push(u)
        for succ in successors[best.uid]:
            waiting[succ.uid] -= 1
            if waiting[succ.uid] == 0:
                push(succ)
    assert len(out) == len(insts), f"cycle in computation {comp.name}"
    return out


def list_memory_schedule(module: HloModule, dataflow: DataflowAnalysis | None = None
                         ) -> Schedule:
    """XLA's ListMemoryScheduler: greedily schedule the ready instruction with the highest
    (bytes freed - bytes defined, user count); effective scalars first. Live-out buffers count
    an extra use; parameters and constants are ignored."""
    df = dataflow or DataflowAnalysis(module)
    return {c: _list_computation(c, df) for c in _schedulable(module)}


SCHEDULERS: dict[str, Callable[[HloModule, DataflowAnalysis | None], Schedule]] = {
    "list": list_memory_schedule,
    "dfs": dfs_memory_schedule,
    "post_order": post_order_schedule,
}


def schedule_peaks(module: HloModule) -> dict[str, int]:
    """Simulated (no-fragmentation) peak of every scheduler's result."""
    df = DataflowAnalysis(module)
    return {name: minimum_memory(module, fn(module, df), df) for name, fn in SCHEDULERS.items()}


def default_memory_schedule(module: HloModule) -> Schedule:
    """Run list, DFS and post-order schedulers and keep the lowest simulated peak (ties go to
    list, then DFS)."""
    df = DataflowAnalysis(module)
    best: tuple[int, str, Schedule] | None = None
    for name, fn in SCHEDULERS.items():
        sched = fn(module, df)
        peak = minimum_memory(module, sched, df)
        log.debug("%s: %s schedule peak %d", module.name, name, peak)
        if best is None or peak < best[0]:
            best = (peak, name, sched)
    assert best is not None
    return best[2]


class MemoryScheduler:
    """Pass: sets `module.schedule` to a memory-minimising schedule of every non-fusion
    computation (`algorithm` = "default", "list", "dfs" or "post_order"). Changes no
    instruction; returns True when the schedule differs from the previous one.

    Guarantees too that the module's in-memory order is the order it prints in: every
    scheduled computation lists its instructions in schedule order and `module.computations`
    is callees-first (`computation_print_order`). Dataflow numbers buffers in that order, so
    the optimized module printed and parsed again gets exactly the same buffer assignment
    (what `.xlc` files and pictures of them rely on)."""

    name = "memory_scheduler"

    def __init__(self, algorithm: str = "default"):
        if algorithm != "default" and algorithm not in SCHEDULERS:
            raise ArgumentError(f"unknown scheduler {algorithm!r} (known: default, "
                                f"{', '.join(SCHEDULERS)})")
        self.algorithm = algorithm

    def run(self, module: HloModule) -> bool:
        """Schedule `module` (see the class docstring)."""
        if self.algorithm == "default":
            sched = default_memory_schedule(module)
        else:
            sched = SCHEDULERS[self.algorithm](module, None)
        old = module.schedule
        module.schedule = sched
        for comp, seq in sched.items():
            comp.instructions[:] = list(seq)
        module.computations[:] = computation_print_order(module)
        if old is None or set(old) != set(sched):
            return True
        return any([i.uid for i in old[c]] != [i.uid for i in sched[c]] for c in sched)
