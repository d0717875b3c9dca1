"""Rematerialization: recompute values at the memory peak instead of keeping them live (XLA's
HloRematerialization, on the entry computation of a scheduled, assigned module).

A budget pass (`memory_budget.BudgetPass`): given the buffer assignment and a limit on the
device peak, it models the entry schedule as positions with the temp bytes live at each one
(entry values by their alias sets' live ranges; values inside while bodies and other callees
count at their caller's position), and while the modelled peak is above the target:
1. takes the peak position P and the values live across it: defined before P, read again after
   it, nothing else sharing their storage (a singleton alias set, no forwarding users);
2. keeps those whose instruction can be recomputed: a pure fusion (no rng, custom-call or side
   effect inside) or a pure, non-control instruction of an array shape; every operand an array
   whose storage nobody overwrites after it is defined;
3. scores each by recompute time (`hlo.cost_analysis` bytes and flops over a nominal machine)
   per byte saved at P, where the bytes saved are the value's size less the operands whose
   live range must now be extended across P; takes the cheapest with a positive saving;
   Chains (operands that died before P recomputed too) are at most FIRST_CHAIN long at
   first, then twice as long whenever no shorter one helps;
4. clones it (a fusion with its own fused computation) right before its first use after P,
   points every later use at the clone, and updates the model.
A value with no use left before P is moved rather than copied. Values the clone reads become
live longer: a later round may recompute them too, so chains of cheap ops are rebuilt one at a
time.
5. Once under the target, a value recomputed twice (inside an earlier chain, and again for its
   own later uses: an MLP's early activations rebuilt for a later layer's chain and then for
   their own backward step) keeps only the earlier copy when stretching it to the later uses
   keeps the modelled peak under the target; the later copy and the chain that only fed it
   are dropped (`_share_clones`; "reused ..." in `actions`).
The model counts storage handed over once: where the assignment wrote a value over its dying
operand (`ba.shares`), the two do not add up at that step while the operand's range still ends
there, and a plan that extends such an operand pays for the handover it breaks. A value the
pass moved is not moved again (two moved values would trade places round after round).
The target starts at the limit less the non-temp bytes (parameters, outputs) and is
scaled by the packing overhead the heap simulator showed (allocation size / modelled peak).

Requires: `module.schedule` covering the entry and `assignment` computed from it. Guarantees:
the module stays verified and scheduled (clones are placed in the entry sequence), values are
unchanged (only pure instructions are recomputed, from operands nobody has overwritten), and
`actions` names every recomputed value and where its copy runs. Never recomputes rng,
custom-calls (GEMM workspaces included), while/conditional/call or side-effecting ops.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from xlc.hlo.cost_analysis import instruction_cost
from xlc.hlo.ir import HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.passes.buffer_assignment import BufferAssignment
from xlc.passes.dataflow import in_place_pairs
from xlc.passes.flatten_call_graph import clone_computation
from xlc.passes.memory_budget import device_peak_bytes
from xlc.passes.remat_model import (
    FORWARDING,
    Model,
    Range,
    defined_bytes,
    feeding_only,
    recomputable,
    recomputable_member,
    remove_dead,
    repair_ranges,
)

log = logging.getLogger("xlc.passes.rematerialization")

BYTES_PER_SECOND = 20e9
"""Nominal memory bandwidth of the recompute-time estimate (only ratios matter)."""
FLOPS_PER_SECOND = 50e9
"""Nominal arithmetic rate of the recompute-time estimate."""
MAX_CLONES = 4096
"""Upper bound on recomputations per call (each one costs an O(n) model update)."""
MAX_STALLED = 8
"""Recomputations in a row that lower neither the modelled peak nor the number of positions at
it, after which longer chains are tried (or the pass stops)."""
FIRST_CHAIN = 2
"""Chains of at most this many instructions (get-tuple-elements not counted) are tried first;
the bound doubles (up to MAX_CHAIN) when no chain that short lowers the peak, so that a long
chain of layers is cut into segments recomputed from kept values (checkpoints) instead of
each value being rebuilt from the start of the chain."""
MAX_CHAIN = 32
"""The most instructions recomputed together for one kept value."""

_REMAT_NAME = re.compile(r"\.remat(\.\d+)?$")


def is_rematerialized(inst: HloInstruction) -> bool:
    """Whether `inst` is a recomputed copy this pass made (named `<original>.remat`, with a
    `.N` suffix when the name was taken, as XLA names its clones)."""
    return _REMAT_NAME.search(inst.name) is not None


def recompute_seconds(inst: HloInstruction) -> float:
    """The nominal time to run `inst` again (bytes and flops over the nominal rates)."""
    c = instruction_cost(inst)
    return (c.bytes_accessed / BYTES_PER_SECOND
            + (c.flops + 10 * c.transcendentals) / FLOPS_PER_SECOND)


@dataclass
class _Plan:
    """One candidate: recompute `members` (schedule order, the kept value last) before
    `first`, the first use of the value after the peak."""

    value: HloInstruction
    members: list[HloInstruction]
    later: list[HloInstruction]
    saved: int
    seconds: float


class Rematerialization:
    """Budget pass "rematerialization" (see the module docstring)."""

    name = "rematerialization"

    def __init__(self) -> None:
        self.actions: list[str] = []
        self.recomputed_seconds = 0.0
        self.depth = FIRST_CHAIN
        self.origin: dict[int, int] = {}  # clone uid -> uid of the value it recomputes
        self.moved: set[int] = set()  # uids of clones a move made (never moved again)

    def run_budget(self, module: HloModule, assignment: BufferAssignment, limit: int) -> bool:
        """Recompute values at the modelled peak until it is under the target; True when
        anything changed."""
        if module.entry is None or module.schedule is None or assignment.live_ranges is None:
            return False
        model = Model(module, assignment)
        temp = sum(a.size for a in assignment.temp_allocations if a.color == 0)
        fixed = device_peak_bytes(assignment) - temp
        curve = model.curve()
        modelled = max(curve, default=0)
        if modelled <= 0:
            return False
        # the heap packs with some overhead: aim the model below the limit by that ratio (a
        # limit below the fixed bytes cannot be met: then get as low as recomputation can)
        target = int(max(limit - fixed, 0) * min(1.0, modelled / max(temp, 1)))
        changed = False
        self.depth = FIRST_CHAIN
        best = (max(curve, default=0), curve.count(max(curve, default=0)))
        stalled = 0
        for _ in range(MAX_CLONES):
            peak = max(curve, default=0)
            if peak <= target:
                break
            plan = self._best(model, curve.index(peak)) if stalled < MAX_STALLED else None
            if plan is None:
                if self.depth >= MAX_CHAIN:
                    break
                self.depth *= 2  # longer chains only when the short ones are used up
                stalled = 0
                continue
            self._apply(module, model, plan)
            changed = True
            curve = model.curve()
            now = (max(curve, default=0), curve.count(max(curve, default=0)))
            stalled = 0 if now < best else stalled + 1  # e.g. two values moved past each other
            best = min(best, now)
        if changed:
            self._share_clones(module, model, target)
        return changed

    def _share_clones(self, module: HloModule, model: Model, target: int) -> None:
        """Where a value was recomputed twice (once inside an earlier chain, once for its own
        later uses), let the earlier copy serve the later uses too and drop the later copy
        with the chain that only fed it, whenever that does not raise the modelled peak."""
        groups: dict[int, list[HloInstruction]] = {}
        for inst in model.seq:
            if inst.uid in self.origin and inst.uid in model.own:
                groups.setdefault(self.origin[inst.uid], []).append(inst)
        # consumers first: dropping a later copy of a value drops the chain that fed it
        for copies in sorted(groups.values(), key=lambda cs: -model.pos[cs[-1].uid]):
            keep = copies[0]
            for later in copies[1:]:
                if later.uid not in model.pos or keep.uid not in model.pos:
                    continue
                if self._share(module, model, keep, later, target):
                    continue
                keep = later

    def _share(self, module: HloModule, model: Model, keep: HloInstruction,
               later: HloInstruction, target: int) -> bool:
        """Point the users of clone `later` at the equal, earlier clone `keep` and remove
        what only fed `later`, if the modelled peak does not rise; True when done."""
        users = [u for u in later.users if u is not later]
        if not users or later.is_root:
            return False
        if any(u.operands[k] is later for u in users for k, _, _ in in_place_pairs(u)):
            return False  # an in-place update of the copy would clobber `keep` for its readers
        own = model.own[keep.uid]
        end = max(model.pos[u.uid] for u in users)
        dead = feeding_only(model, later)
        curve = model.curve()
        new = list(curve)
        for p in range(model.pos[own.end.uid] + 1, end + 1):
            new[p] += own.size
        for d in dead:
            r = model.own.get(d.uid)
            if r is not None:
                for p in range(model.pos[r.start.uid], model.pos[r.end.uid] + 1):
                    new[p] -= r.size
        if max(new, default=0) > max(target, max(curve, default=0)):
            return False
        for u in users:
            u.replace_operand_with(later, keep)
        if end > model.pos[own.end.uid]:
            own.end = model.seq[end]
        saved = sum(recompute_seconds(d) for d in dead)
        before = list(model.seq)
        remove_dead(module, model, later)
        repair_ranges(model, before)
        self.recomputed_seconds -= saved
        self.actions.append(f"reused {keep.name} for the uses of {later.name} (dropping "
                            f"{len(dead)} recomputed instruction(s))")
        log.debug("%s", self.actions[-1])
        return True

    def _best(self, model: Model, at: int) -> _Plan | None:
        best: _Plan | None = None
        for i in range(at):
            inst = model.seq[i]
            r = model.value_range(inst)
            if r is None or model.pos[r.end.uid] <= at or not recomputable(inst):
                continue
            if any(u.opcode in FORWARDING or u.parent is not model.entry for u in inst.users):
                continue
            later = [u for u in inst.users if model.pos[u.uid] > at]
            if not later:
                continue
            for deep in (False, True):
                plan = self._plan(model, inst, r, later, at, deep)
                if plan is not None and plan.seconds == 0 and inst.uid in self.moved:
                    continue  # two moved values would only swap places, round after round
                if plan is not None and (best is None or plan.seconds * best.saved
                                         < best.seconds * plan.saved):
                    best = plan
        return best

    def _plan(self, model: Model, value: HloInstruction, r: Range,
              later: list[HloInstruction], at: int, deep: bool) -> _Plan | None:
        """The chain ending in `value`: operands whose storage dies before `at` are recomputed
        too when `deep` (up to MAX_CHAIN instructions), else kept alive."""
        members: dict[int, HloInstruction] = {}
        extra: dict[int, int] = {}
        use = min(model.pos[u.uid] for u in later)
        work = [value]
        while work:
            inst = work.pop()
            if inst.uid in members:
                continue
            members[inst.uid] = inst
            if inst.opcode is Opcode.GET_TUPLE_ELEMENT:  # forwards its operand's storage
                if not recomputable_member(inst.operands[0]) or _work(members) >= self.depth:
                    return None
                work.append(inst.operands[0])
                continue
            for o in inst.operands:
                if o.uid in members:
                    continue
                writer = model.next_writer(o)
                if writer is not None and writer < use:
                    return None
                # ranges that now reach across `at`: those ending before it, and one ending
                # at it by handing its storage over (kept longer, the storage is not shared)
                short = [x for x in model.operand_ranges(o) if model.pos[x.end.uid] < at
                         or (model.pos[x.end.uid] == at and model.handover(x) is not None)]
                if not short:
                    continue
                if deep and recomputable_member(o) and _work(members) < self.depth and \
                        o.parent is model.entry:
                    work.append(o)
                else:
                    for x in short:
                        extra[id(x)] = x.size
        if deep and len(members) == 1:
            return None  # the same plan as the shallow one
        saved = r.size - sum(extra.values())
        if saved <= 0:
            return None
        order = sorted(members.values(), key=lambda m: model.pos[m.uid])
        # a member whose every use moves to the clones runs once, just later: it costs nothing
        moving = {id(u) for u in later} | {id(m) for m in order}
        stays = [m for m in order if m.is_root or any(id(u) not in moving for u in m.users)]
        return _Plan(value, order, later, saved, sum(recompute_seconds(m) for m in stays))

    def _apply(self, module: HloModule, model: Model, plan: _Plan) -> None:
        entry = model.entry
        first = min(plan.later, key=lambda u: model.pos[u.uid])
        at = model.pos[first.uid]
        clones: dict[int, HloInstruction] = {}
        for m in plan.members:
            called = tuple(clone_computation(module, c) for c in m.called) \
                if m.opcode is Opcode.FUSION else m.called
            ops = [clones.get(o.uid, o) for o in m.operands]
            base = m.name.split(".remat")[0]
            clone = HloInstruction(m.opcode, m.shape, ops, m.attrs, called, f"{base}.remat",
                                   m.extra)
            entry.add_instruction(clone)
            clones[m.uid] = clone
            self.origin[clone.uid] = self.origin.get(m.uid, m.uid)
            model.seq.insert(at, clone)
            at += 1
        value, root = plan.value, clones[plan.value.uid]
        for u in plan.later:
            u.replace_operand_with(value, root)
        model.renumber()
        r = model.value_range(value)
        assert r is not None
        last = max(plan.later, key=lambda u: model.pos[u.uid])
        for m in plan.members:
            c = clones[m.uid]
            model.clones.add(c.uid)
            users = [u for u in c.users if u is not c]
            end = last if m is value else max(users, key=lambda u: model.pos[u.uid])
            size = r.size if m is value else defined_bytes(m)
            nr = Range(size, c, end)
            model.ranges.append(nr)
            model.own[c.uid] = nr
            if m is value:  # a later user that wrote over the value now writes over the clone
                for _, b, u in list(model.handovers.get(id(r), [])):
                    if u in plan.later:
                        model.add_handover(nr, b, u)
            for o in set(c.operands):
                for orange in model.operand_ranges(o):
                    if model.pos[orange.end.uid] < model.pos[c.uid]:
                        orange.end = c
        if value.opcode is Opcode.GET_TUPLE_ELEMENT and value.operands[0].uid in clones:
            # the clone's value is element {0} of its GEMM clone (one storage from the GEMM
            # on, as in the assignment): the GEMM's own range keeps only the scratch
            gemm = clones[value.operands[0].uid]
            model.own[gemm.uid].size -= r.size
            model.own[gemm.uid].end = gemm
            model.own[root.uid].start = gemm
        earlier = [u for u in value.users]
        if earlier or value.is_root:
            r.end = max(earlier, key=lambda u: model.pos[u.uid]) if earlier else r.end
            verb = "recomputed"
        else:
            verb = "moved"
            self.moved.add(root.uid)
            model.ranges.remove(r)
            before = list(model.seq)
            remove_dead(module, model, value)
            # the producers that went with it may have been the last readers of other ranges
            repair_ranges(model, before)
        model.renumber()
        self.recomputed_seconds += plan.seconds
        chain = "" if len(plan.members) == 1 else \
            f" with {', '.join(m.name for m in plan.members[:-1])}"
        self.actions.append(f"{verb} {value.name} ({r.size} bytes, {value.opcode.text}){chain} "
                            f"as {root.name} before {first.name}")
        log.debug("%s", self.actions[-1])


def _work(members: dict[int, HloInstruction]) -> int:
    """Instructions of a chain that run code (get-tuple-elements only forward)."""
    return sum(m.opcode is not Opcode.GET_TUPLE_ELEMENT for m in members.values())
