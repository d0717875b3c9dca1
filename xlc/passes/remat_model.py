"""The model rematerialization (`xlc.passes.rematerialization`) plans with, and what it may
recompute.

`Model`: the entry schedule as positions, with the temp bytes live at each one. Entry values
count by their alias sets' live ranges (`Range`); values inside while bodies and other callees
count at their caller's position. Storage handed over counts once: where the assignment wrote
a value over its dying operand (`ba.shares`), the two do not add up at that step while the
operand's range still ends there and the value's starts there (`Model.handover`). The pass
edits the model as it clones and removes instructions (`remove_dead`, `repair_ranges`,
`feeding_only`).

`recomputable` / `recomputable_member`: pure, array-valued instructions and xlc's packed GEMM
call. Never rng, custom-calls other than the GEMM, control flow, copies or side effects.
"""
from __future__ import annotations

from dataclasses import dataclass

from xlc.hlo.gemm_call import is_gemm_call
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import ASYNC_COPY_OPCODES, Opcode
from xlc.passes.buffer_assignment import BufferAssignment
from xlc.passes.dataflow import DataflowAnalysis

_NOT_RECOMPUTED = frozenset({
    Opcode.PARAMETER, Opcode.CONSTANT, Opcode.TUPLE, Opcode.GET_TUPLE_ELEMENT, Opcode.BITCAST,
    Opcode.WHILE, Opcode.CONDITIONAL, Opcode.CALL, Opcode.CUSTOM_CALL, Opcode.RNG,
    Opcode.RNG_BIT_GENERATOR, Opcode.RNG_GET_AND_UPDATE_STATE, Opcode.AFTER_ALL,
    Opcode.COPY,  # copies exist for aliasing (copy insertion); recomputing one saves nothing
    *ASYNC_COPY_OPCODES,  # host offload's transfers
})
FORWARDING = frozenset({Opcode.TUPLE, Opcode.GET_TUPLE_ELEMENT, Opcode.BITCAST})


@dataclass
class Range:
    """A live range in the model: bytes, and the instructions where it starts and ends."""

    size: int
    start: HloInstruction
    end: HloInstruction


class Model:
    """Entry positions, the temp ranges live over them, and per-value ranges."""

    def __init__(self, module: HloModule, ba: BufferAssignment):
        assert module.entry is not None and module.schedule is not None
        self.entry: HloComputation = module.entry
        self.seq: list[HloInstruction] = module.schedule[module.entry]
        self.df: DataflowAnalysis = ba.dataflow
        live = ba.live_ranges
        assert live is not None
        # flattened time -> the entry instruction whose step covers it (callees run first)
        covering: list[HloInstruction] = []
        for inst in self.seq:
            t = live.time(inst)
            while len(covering) <= t:
                covering.append(inst)
        temp_sets: set[int] = set()
        for alloc in ba.temp_allocations:
            if alloc.color == 0:
                temp_sets.update(self.df.alias_set(buf).id for buf in alloc.assigned)
        self.ranges: list[Range] = []
        self.of_set: dict[int, Range] = {}    # alias set id -> its range
        self.own: dict[int, Range] = {}  # clone uid -> its range
        self.defined: dict[int, list[Range]] = {}  # uid -> ranges of sets only it defines
        self.clones: set[int] = set()
        for aset in self.df.alias_sets:
            hull = live.set_range(aset) if aset.id in temp_sets else None
            if hull is None:
                continue
            last = len(covering) - 1
            r = Range(aset.size, covering[min(hull.start, last)], covering[min(hull.end, last)])
            self.ranges.append(r)
            self.of_set[aset.id] = r
            owners = {b.instruction for b in aset.buffers}
            if len(owners) == 1:  # dropped with its instruction (see remove_dead)
                self.defined.setdefault(aset.buffers[0].instruction.uid, []).append(r)
        # operand reuse (`ba.shares`): a value written over its dying operand's storage by an
        # entry instruction does not add its bytes where the operand's range ends (`curve`)
        self.handovers: dict[int, list[tuple[Range, Range, HloInstruction]]] = {}
        for sh in ba.shares:
            a, b = self.of_set.get(sh.operand_set.id), self.of_set.get(sh.user_set.id)
            if a is not None and b is not None and sh.user.parent is self.entry:
                self.add_handover(a, b, sh.user)
        self.renumber()

    def add_handover(self, a: Range, b: Range, user: HloInstruction) -> None:
        """Record that `user` writes the value of range `b` over range `a`'s storage."""
        self.handovers.setdefault(id(a), []).append((a, b, user))

    def _holds(self, a: Range, b: Range, user: HloInstruction, live: set[int]) -> bool:
        """A handover still stands: `a` ends and `b` starts at `user`, which is scheduled,
        and both ranges are in the model (`live`: their ids)."""
        return (a.end is user and b.start is user and user.uid in self.pos
                and id(a) in live and id(b) in live)

    def handover(self, r: Range) -> HloInstruction | None:
        """The instruction that writes a value over `r`'s storage as `r` ends, while that
        handover still holds; else None."""
        entries = self.handovers.get(id(r), [])
        live = {id(x) for x in self.ranges} if entries else set()
        return next((u for a, b, u in entries if self._holds(a, b, u, live)), None)

    def renumber(self) -> None:
        self.pos = {inst.uid: i for i, inst in enumerate(self.seq)}

    def curve(self) -> list[int]:
        """Temp bytes live at each entry position."""
        delta = [0] * (len(self.seq) + 1)
        for r in self.ranges:
            delta[self.pos[r.start.uid]] += r.size
            delta[self.pos[r.end.uid] + 1] -= r.size
        live = {id(r) for r in self.ranges}
        for entries in self.handovers.values():
            for a, b, user in entries:
                if self._holds(a, b, user, live):
                    p = self.pos[user.uid]
                    delta[p] -= min(a.size, b.size)
                    delta[p + 1] += min(a.size, b.size)
        out, acc = [], 0
        for d in delta[:-1]:
            acc += d
            out.append(acc)
        return out

    def value_range(self, inst: HloInstruction) -> Range | None:
        """The range of the storage holding `inst`'s value when that storage holds nothing
        else (a singleton alias set; a clone's own range), else None."""
        if inst.uid in self.clones:
            return self.own.get(inst.uid)
        bufs = self.df.buffers_at(inst, ())
        if len(bufs) != 1 or len(self.df.alias_set(bufs[0]).buffers) != 1:
            return None
        return self.of_set.get(self.df.alias_set(bufs[0]).id)

    def operand_ranges(self, o: HloInstruction) -> list[Range]:
        """The temp ranges holding what `o` reads from (none for parameters, constants and
        outputs, which live throughout)."""
        if o.uid in self.clones:
            own = self.own.get(o.uid)
            return [own] if own is not None else []
        out = []
        for buf in self.df.buffers_at(o, ()):
            r = self.of_set.get(self.df.alias_set(buf).id)
            if r is not None and r not in out:
                out.append(r)
        return out

    def next_writer(self, inst: HloInstruction) -> int | None:
        """The earliest position after `inst`'s at which an instruction defines a buffer that
        shares storage with one `inst` may hold (an in-place update, e.g. of a donated
        parameter): a recomputation reading `inst` must run before it. None: no such
        writer."""
        if inst.uid in self.clones:
            return None
        p = self.pos[inst.uid]
        first: int | None = None
        for buf in self.df.buffers_at(inst, ()):
            for other in self.df.alias_set(buf).buffers:
                owner = other.instruction
                while owner.parent is not self.entry:  # a callee's buffer: its caller's step
                    callers = self.df.callers.get(owner.parent, [])  # type: ignore[arg-type]
                    if not callers:
                        return p
                    owner = callers[0]
                q = self.pos.get(owner.uid)
                if q is None:
                    return p
                if q > p and (first is None or q < first):
                    first = q
        return first



def _pure_computation(comp: HloComputation, seen: set[int] | None = None) -> bool:
    seen = seen if seen is not None else set()
    if id(comp) in seen:
        return True
    seen.add(id(comp))
    for inst in comp.instructions:
        if inst.opcode.has_side_effect or inst.opcode in (
                Opcode.CUSTOM_CALL, Opcode.RNG, Opcode.RNG_BIT_GENERATOR,
                Opcode.RNG_GET_AND_UPDATE_STATE):
            return False
        if not all(_pure_computation(c, seen) for c in inst.called):
            return False
    return True


def recomputable(inst: HloInstruction) -> bool:
    """Whether `inst` may be cloned as the value a rematerialization keeps: an array-valued,
    pure, non-control instruction (a fusion whose body is pure), or a get-tuple-element of a
    packed GEMM (recomputed together with it, see `recomputable_member`)."""
    if inst.opcode is Opcode.GET_TUPLE_ELEMENT:
        return inst.shape.is_array and _is_gemm(inst.operands[0])
    if inst.opcode in _NOT_RECOMPUTED or inst.opcode.has_side_effect or \
            inst.opcode.is_control_flow:
        return False
    if not inst.shape.is_array or any(not o.shape.is_array for o in inst.operands):
        return False
    return all(_pure_computation(c) for c in inst.called)


def recomputable_member(inst: HloInstruction) -> bool:
    """Whether `inst` may be recomputed as part of a chain that ends in a kept value: what
    `recomputable` accepts, plus the packed GEMM's custom-call (a pure function of its
    operands whose second output is scratch)."""
    return recomputable(inst) or _is_gemm(inst)


def _is_gemm(inst: HloInstruction) -> bool:
    return is_gemm_call(inst) and all(o.shape.is_array for o in inst.operands)



def repair_ranges(model: Model, before: list[HloInstruction]) -> None:
    """After instructions were removed from the schedule (`before`: the old sequence): drop
    the ranges they defined, and end a range whose last reader went at the instruction
    before that reader (its other readers all ran earlier)."""
    survivor: dict[int, HloInstruction] = {}
    last: HloInstruction | None = None
    for inst in before:
        if inst.uid in model.pos:
            last = inst
        elif last is not None:
            survivor[inst.uid] = last
    keep = []
    for r in model.ranges:
        if r.start.uid not in model.pos:
            continue
        if r.end.uid not in model.pos:
            r.end = survivor.get(r.end.uid, r.start)
        keep.append(r)
    model.ranges[:] = keep


def feeding_only(model: Model, clone: HloInstruction) -> list[HloInstruction]:
    """`clone` and the clones that feed only it (transitively): what goes when `clone`
    loses its users."""
    dead = [clone]
    seen = {clone.uid}
    i = 0
    while i < len(dead):
        for o in dead[i].operands:
            if o.uid in seen or o.uid not in model.clones:
                continue
            if all(u.uid in seen for u in o.users):
                seen.add(o.uid)
                dead.append(o)
        i += 1
    return dead


def defined_bytes(inst: HloInstruction) -> int:
    if inst.shape.is_tuple:
        return sum(s.byte_size() for s in inst.shape.tuple_shapes or ())
    return 0 if inst.opcode is Opcode.GET_TUPLE_ELEMENT else inst.shape.byte_size()


def remove_dead(module: HloModule, model: Model, inst: HloInstruction) -> None:
    """Remove `inst` (now without users) and the producers it leaves without users."""
    work = [inst]
    while work:
        dead = work.pop()
        if dead.users or dead.is_root or dead.opcode is Opcode.PARAMETER or \
                dead.uid not in model.pos:
            continue
        ops = list(dead.operands)
        model.seq.remove(dead)
        gone = model.defined.pop(dead.uid, [])
        own = model.own.pop(dead.uid, None)
        for x in gone + ([own] if own is not None else []):
            if x in model.ranges:
                model.ranges.remove(x)
        model.entry.remove_instruction(dead)
        if dead.opcode is Opcode.FUSION:
            for c in dead.called:
                module.computations.remove(c)
        model.renumber()
        work += [o for o in ops if recomputable_member(o) or
                 o.opcode is Opcode.GET_TUPLE_ELEMENT]
