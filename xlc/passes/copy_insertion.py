"""Copy insertion: add the copies that must-alias buffers need to be correct (XLA's
CopyInsertion), conservatively first, then remove the unnecessary ones.

Must-alias (see `dataflow.py`) makes every value carried by a `while`, every in-place operand
(dynamic-update-slice, scatter, in-place fusions) and every conditional branch result share one
buffer. That is only correct when the shared storage is not needed elsewhere, so this pass:
1. adds a copy of every leaf of every while's init and body root, of every in-place operand,
   of every conditional branch root that is a parameter or constant, and of every entry result
   leaf io-aliased to a parameter (`input_output_alias`, donation: the result is written into
   the parameter's storage, like a while body root into its loop state);
2. removes each added while/in-place/aliased-output copy whose source value is provably dead
   when the aliasing consumer overwrites it: no read-only source (constant, entry parameter
   unless donated to where the consumer's result goes, the parameter of a called computation),
   no other reader that may run later (dependency order), the value does not reach its
   computation's root, and, for a body root or an aliased output, the old value (loop state,
   donated parameter) is last read no later than the new value is defined, by an instruction
   that may write its result over its operand (`can_share_operand_buffer`) - a reader merely
   unordered with the new value's writers gets a control edge to them instead (an SGD step's
   backward `dh @ w.T` runs before the update of donated `w`, and `w` is never copied);
3. copies live-out entry parameters (unless io-aliased to that output) and constants, and values
   that appear twice in the entry result (the special cases; these stay), then orders each kept
   body-root / aliased-output copy after every other reader of the old value.
Token leaves are never copied (a token has no storage).
It first flattens the call graph (`FlattenCallGraph`), like XLA's CopyInsertion. Works on
modules with or without a schedule (new instructions are scheduled as early as their operands
allow). Guarantees evaluator semantics are unchanged.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import ShapeIndex
from xlc.passes.dataflow import (
    CONTROL,
    DataflowAnalysis,
    can_share_operand_buffer,
    computation_kinds,
    in_place_pairs,
    value_readers,
    value_source,
)
from xlc.passes.flatten_call_graph import FlattenCallGraph
from xlc.passes.ordering import DependencyHloOrdering

log = logging.getLogger("xlc.passes.copy_insertion")


@dataclass
class _Added:
    """A copy added in phase 1 and why: "while_init" (of `consumer`, a while), "body_root"
    (at `index` of the body root), "entry_root" (at `index` of the entry root, io-aliased to a
    parameter), "in_place" (operand of `consumer`). `slot` is where the storage the copy
    writes holds the old value: (body parameter, index) of a body root, (entry parameter,
    parameter index) of an aliased output."""

    copy: HloInstruction
    kind: str
    consumer: HloInstruction | None = None
    index: ShapeIndex = ()
    slot: tuple[HloInstruction, ShapeIndex] | None = None


def _is_read_only_source(module: HloModule, kinds: dict, src: HloInstruction) -> bool:
    if src.opcode is Opcode.CONSTANT:
        return True
    if src.opcode is not Opcode.PARAMETER:
        return False
    comp = src.parent
    assert comp is not None
    if comp is module.entry:
        return True
    if kinds.get(comp) != CONTROL:
        return True
    callers = [i for c in module.computations for i in c.instructions if comp in i.called]
    # a while body's parameter is the loop's own state; anything else belongs to a caller
    return not all(c.opcode is Opcode.WHILE and c.called[1] is comp for c in callers)


# ---- the pass -------------------------------------------------------------------------------
class CopyInsertion:
    """Pass "copy_insertion" (see the module docstring)."""

    name = "copy_insertion"

    def run(self, module: HloModule) -> bool:
        """Insert (and prune) copies; True when the module changed."""
        flattened = FlattenCallGraph().run(module)
        added: list[_Added] = []
        special = 0
        kinds = computation_kinds(module)
        for comp in module.computations:
            if kinds.get(comp) not in ("entry", CONTROL):
                continue
            for inst in list(comp.instructions):
                if inst.opcode is Opcode.WHILE:
                    added += self._copy_while(inst)
                elif inst.opcode is Opcode.CONDITIONAL:
                    special += self._copy_branch_roots(module, inst)
                for k, _oi, _ui in in_place_pairs(inst):
                    if k < inst.operand_count:
                        added.append(self._copy_operand(inst, k))
        added += self._copy_aliased_outputs(module)
        removed = self._remove_unnecessary(module, kinds, added)
        special += self._copy_entry_root(module)
        kept_roots = [a for a in added if a.slot is not None and a.copy.parent is not None]
        _order_root_copies(kept_roots)
        changed = flattened or bool(added) or special > 0  # removed copies rebuilt tuples
        if changed:
            for comp in module.computations:
                _collapse_identity_tuples(comp)
                comp.sort_post_order()
        if changed and module.schedule is not None:
            _reschedule(module)
        log.debug("%s: %d copies added, %d removed, %d special", module.name, len(added),
                  removed, special)
        return changed

    # ---- phase 1 -------------------------------------------------------------------------
    def _copy_while(self, w: HloInstruction) -> list[_Added]:
        out: list[_Added] = []
        comp = w.parent
        assert comp is not None
        old_init = w.operands[0]
        new_init, copies = _deep_copy(comp, old_init)
        w.set_operand(0, new_init)
        _drop_if_dead(old_init)
        out += [_Added(c, "while_init", w, idx) for idx, c in copies]
        body = w.called[1]
        root = body.root
        assert root is not None
        new_root, copies = _deep_copy(body, root)
        body.set_root(new_root)
        _drop_if_dead(root)
        out += [_Added(c, "body_root", w, idx, (body.parameter(0), idx)) for idx, c in copies]
        return out

    def _copy_aliased_outputs(self, module: HloModule) -> list[_Added]:
        """Copy every entry result leaf io-aliased to a parameter (XLA's
        AddCopiesForAliasedInputOutputs): the result is written into the parameter's storage,
        which other instructions may still read (a reverse or a transpose reads what it
        overwrites). Phase 2 removes the copy where writing in place is safe."""
        entry = module.entry
        assert entry is not None and entry.root is not None
        root = entry.root
        slots = {a.output_index: (entry.parameter(a.param_number), a.param_index)
                 for a in module.input_output_alias if a.param_number < entry.num_parameters}
        need = {idx for idx, _ in root.shape.leaves() if idx in slots}
        if not need:
            return []
        new_root, copies = _deep_copy(entry, root, need)
        entry.set_root(new_root)
        _drop_if_dead(root)
        return [_Added(c, "entry_root", None, idx, slots[idx]) for idx, c in copies]

    def _copy_operand(self, inst: HloInstruction, k: int) -> _Added:
        comp = inst.parent
        assert comp is not None
        op = inst.operands[k]
        copy = comp.add(Opcode.COPY, op.shape, (op,), name=f"{op.name}.copy")
        inst.set_operand(k, copy)
        return _Added(copy, "in_place", inst)

    def _copy_branch_roots(self, module: HloModule, cond: HloInstruction) -> int:
        n = 0
        for branch in cond.called:
            root = branch.root
            assert root is not None
            need = [idx for idx, s in root.shape.leaves()
                    if value_source(root, idx)[0].opcode in (Opcode.PARAMETER, Opcode.CONSTANT)]
            if need:
                new_root, copies = _deep_copy(branch, root, set(need))
                branch.set_root(new_root)
                _drop_if_dead(root)
                n += len(copies)
        return n

    def _copy_entry_root(self, module: HloModule) -> int:
        """Copy every result leaf that may hold a constant, a non-donated entry parameter, or
        a buffer already seen at another result leaf (XLA's AddSpecialCaseCopies)."""
        entry = module.entry
        assert entry is not None and entry.root is not None
        root = entry.root
        df = DataflowAnalysis(module)
        donated = {(a.param_number, a.param_index, a.output_index)
                   for a in module.input_output_alias}
        need: set[ShapeIndex] = set()
        seen: set[int] = set()
        for idx, _ in root.shape.leaves():
            bufs = df.buffers_at(root, idx)
            for b in bufs:
                inst = b.instruction
                if inst.opcode is Opcode.CONSTANT or b.id in seen:
                    need.add(idx)
                elif inst.opcode is Opcode.PARAMETER and inst.parent is entry and \
                        (inst.parameter_number, b.index, idx) not in donated:
                    need.add(idx)
            seen.update(b.id for b in bufs)
        if not need:
            return 0
        new_root, copies = _deep_copy(entry, root, need)
        entry.set_root(new_root)
        _drop_if_dead(root)
        return len(copies)

    # ---- phase 2 -------------------------------------------------------------------------
    def _remove_unnecessary(self, module: HloModule, kinds: dict, added: list[_Added]) -> int:
        removed = 0
        priority = {"in_place": 0, "body_root": 1, "entry_root": 1, "while_init": 2}
        for a in sorted(added, key=lambda a: priority[a.kind]):
            ordering = DependencyHloOrdering(module)
            if self._removable(module, kinds, ordering, a):
                _bypass(a.copy)
                removed += 1
        return removed

    def _removable(self, module: HloModule, kinds: dict, ordering: DependencyHloOrdering,
                   a: _Added) -> bool:
        src, sidx = value_source(a.copy.operands[0])
        if a.slot is not None:
            return self._slot_update_removable(module, kinds, ordering, a, src, sidx)
        if a.kind == "while_init" and _loop_never_writes(a):
            return True  # the loop only reads this element: sharing the init is safe
        donated = _donated_output(module, src, sidx) if a.kind == "in_place" else None
        if donated is None and _is_read_only_source(module, kinds, src):
            return False
        if src.parent is not a.copy.parent:
            return False
        readers, at_root = value_readers(src, sidx)
        if at_root:
            return False
        assert a.consumer is not None
        for r in readers:
            if r is a.copy:
                continue
            if not ordering.executes_before(r, a.consumer):
                return False
        if a.kind == "in_place" and src.opcode is Opcode.PARAMETER:
            # updating loop slot i (or a donated parameter) in place is only right if the
            # result goes back to slot i (the output the parameter is aliased with)
            return _result_slots(a.consumer) == [sidx if donated is None else donated]
        return True

    def _slot_update_removable(self, module: HloModule, kinds: dict,
                               ordering: DependencyHloOrdering, a: _Added,
                               src: HloInstruction, sidx: ShapeIndex) -> bool:
        """May the new value (src, sidx) be computed straight into the storage `a.slot` that
        holds the old value (a loop's state, a donated parameter) instead of being copied
        there at the end?"""
        comp = a.copy.parent
        assert comp is not None and a.slot is not None
        param, pidx = a.slot
        if src is param:
            return sidx == pidx  # the element passes through unchanged
        if src.parent is not comp or _is_read_only_source(module, kinds, src):
            return False
        if _in_place_origin(src, sidx) not in (None, (param, pidx)):
            return False  # the value updates another slot's (or a caller's) storage in place
        readers, at_root = value_readers(src, sidx)
        if at_root:
            return False  # the new value is also placed at another index of the result
        if any(r is not a.copy and r.opcode is Opcode.WHILE for r in readers):
            return False
        old_readers, old_at_root = value_readers(param, pidx)
        if old_at_root:
            return False  # the old value is a result too: it must survive to the end
        # without the copy, every instruction that writes the new value's storage writes the
        # slot: each must run after the last read of the old value, or read it in place. A
        # reader that is merely unordered with a writer (the backward pass's `dh @ w.T` and
        # the update `w - lr * dw` of a donated weight) gets a control edge to it instead of
        # the copy, which would keep a second full copy of the slot live all along; only a
        # reader that depends on the writer keeps the copy.
        edges: list[tuple[HloInstruction, HloInstruction]] = []
        for w, widx in _storage_writers(src, sidx):
            for r in old_readers:
                if r is w:
                    # w reads the old value and writes the new one: it must be able to do that
                    # in place (elementwise or an in-place op)
                    slots = [k for k, op in enumerate(w.operands)
                             if value_source(op) == (param, pidx)]
                    if not slots or not all(can_share_operand_buffer(w.operands[k], w, (), widx)
                                            for k in slots):
                        return False
                elif not ordering.executes_before(r, w):
                    if r.parent is not w.parent or ordering.executes_before(w, r):
                        return False
                    edges.append((r, w))
        for r, w in edges:
            w.add_control_predecessor(r)
        return True


def _donated_output(module: HloModule, src: HloInstruction, sidx: ShapeIndex
                    ) -> ShapeIndex | None:
    """The entry result index that entry parameter position (src, sidx) is io-aliased to
    (donated), or None."""
    if src.opcode is not Opcode.PARAMETER or src.parent is not module.entry:
        return None
    for al in module.input_output_alias:
        if al.param_number == src.parameter_number and al.param_index == sidx:
            return al.output_index
    return None


def _result_slots(inst: HloInstruction) -> list[ShapeIndex]:
    """Root indices that `inst`'s value reaches, directly or through (root) copies."""
    slots: list[ShapeIndex] = []
    work = [inst]
    while work:
        v = work.pop()
        readers, at_root = value_readers(v, ())
        slots += at_root
        work += [r for r in readers if r.opcode is Opcode.COPY]
    return sorted(set(slots))


def _storage_writers(src: HloInstruction, sidx: ShapeIndex
                     ) -> list[tuple[HloInstruction, ShapeIndex]]:
    """The instructions (with output indices) of `src`'s computation that write the storage
    the value (src, sidx) is computed in: `src`, and, following what it is built on in that
    same storage (the updated operand of an in-place op, the initial value of a while), those
    values' writers - e.g. the reduce-window under `dynamic-update-slice(reduce-window(p),
    ...)`. Parameters (storage the chain updates in place) write nothing."""
    out: list[tuple[HloInstruction, ShapeIndex]] = []
    work = [(src, sidx)]
    seen: set[tuple[int, ShapeIndex]] = set()
    while work:
        inst, idx = work.pop()
        if (inst.uid, idx) in seen or inst.opcode is Opcode.PARAMETER:
            continue
        seen.add((inst.uid, idx))
        out.append((inst, idx))
        if inst.opcode is Opcode.WHILE:
            work.append(value_source(inst.operands[0], idx))
        work += [value_source(inst.operands[k], oi) for k, oi, ui in in_place_pairs(inst)
                 if ui == idx and k < inst.operand_count]
    return out


def _in_place_origin(src: HloInstruction, sidx: ShapeIndex
                     ) -> tuple[HloInstruction, ShapeIndex] | None:
    """Follow in-place ops back to where their storage comes from: a parameter position, or
    None when the chain starts at a value defined in this computation."""
    seen = 0
    while seen < 1000:
        seen += 1
        if src.opcode is Opcode.PARAMETER:
            return src, sidx
        pairs = [(k, oi) for k, oi, ui in in_place_pairs(src) if ui == sidx]
        if not pairs or pairs[0][0] >= src.operand_count:
            return None
        k, oi = pairs[0]
        src, sidx = value_source(src.operands[k], oi)
        if src.opcode is Opcode.COPY and not sidx:
            return None  # a fresh copy owns its storage
    return None


def _order_root_copies(kept: list[_Added]) -> None:
    """A kept body-root (aliased-output) copy writes loop slot i (the donated parameter's
    storage), which still holds the old value: every other reader of the old value must run
    first (a control edge). When that would close a cycle (e.g. two slots swapped), the old
    value is first copied out at the top of the computation (XLA's parameter copy with a
    control edge to the root copy)."""
    for a in kept:
        body = a.copy.parent
        assert body is not None and a.slot is not None
        param, pidx = a.slot
        readers, _ = value_readers(param, pidx)
        readers = [r for r in readers if r is not a.copy]
        if not readers:
            continue
        ordering = DependencyHloOrdering(body.module) if body.module is not None else None
        assert ordering is not None
        if not any(ordering.executes_before(a.copy, r) for r in readers):
            for r in readers:
                if not ordering.executes_before(r, a.copy):
                    a.copy.add_control_predecessor(r)
            continue
        if not pidx:
            gtes = [param]
        else:
            gtes = [g for g in param.users if g.opcode is Opcode.GET_TUPLE_ELEMENT
                    and (g.tuple_index,) == pidx]
        if not gtes or len(pidx) > 1:
            log.warning("cannot order the root copy %s after the readers of the old value",
                        a.copy.name)
            continue
        saved = body.add(Opcode.COPY, gtes[0].shape, (gtes[0],), name=f"{gtes[0].name}.copy")
        for g in gtes:
            for u in list(g.users):
                if u is not saved:
                    u.replace_operand_with(g, saved)
            if g.is_root:
                body.set_root(saved)
        a.copy.add_control_predecessor(saved)


def _loop_never_writes(a: _Added) -> bool:
    """The while's body passes element `a.index` through unchanged, and no other init element
    holds the same value."""
    assert a.consumer is not None
    body = a.consumer.called[1]
    root = body.root
    assert root is not None
    if value_source(root, a.index) != (body.parameter(0), a.index):
        return False
    readers, _ = value_readers(body.parameter(0), a.index)
    if any(in_place_pairs(r) for r in readers):
        return False
    src = value_source(a.copy.operands[0])
    init = a.consumer.operands[0]
    others = [idx for idx, _ in init.shape.leaves()
              if idx != a.index and value_source(init, idx) == src]
    return not others


# ---- graph helpers --------------------------------------------------------------------------
def _deep_copy(comp: HloComputation, value: HloInstruction,
               only: set[ShapeIndex] | None = None
               ) -> tuple[HloInstruction, list[tuple[ShapeIndex, HloInstruction]]]:
    """A value equal to `value` whose array leaves (all, or those in `only`) are fresh copies
    (tokens carry no data and have no storage: they are never copied)."""
    copies: list[tuple[ShapeIndex, HloInstruction]] = []

    def build(v: HloInstruction, idx: ShapeIndex) -> HloInstruction:
        if not v.shape.is_tuple:
            if (only is not None and idx not in only) or v.shape.is_token:
                return v
            c = comp.add(Opcode.COPY, v.shape, (v,), name=f"{v.name}.copy")
            copies.append((idx, c))
            return c
        if only is not None and not any(o[:len(idx)] == idx for o in only):
            return v
        assert v.shape.tuple_shapes is not None
        elems = []
        for i, s in enumerate(v.shape.tuple_shapes):
            if v.opcode is Opcode.TUPLE:
                e = v.operands[i]
            else:
                e = comp.add(Opcode.GET_TUPLE_ELEMENT, s, (v,), {"index": i},
                             name=f"{v.name}.gte{i}")
            elems.append(build(e, idx + (i,)))
        return comp.add(Opcode.TUPLE, v.shape, elems, name=f"{v.name}.tuple")

    return build(value, ()), copies


def _drop_if_dead(inst: HloInstruction) -> None:
    """Remove a tuple/get-tuple-element left without users by a rewrite."""
    comp = inst.parent
    if comp is None or inst.users or inst is comp.root or \
            inst.opcode not in (Opcode.TUPLE, Opcode.GET_TUPLE_ELEMENT):
        return
    operands = list(inst.operands)
    comp.remove_instruction(inst)
    for op in operands:
        _drop_if_dead(op)


def _bypass(copy: HloInstruction) -> None:
    comp = copy.parent
    assert comp is not None
    src = copy.operands[0]
    copy.replace_all_uses_with(src)
    comp.remove_instruction(copy)


def _collapse_identity_tuples(comp: HloComputation) -> None:
    """tuple(gte(v, 0), ..., gte(v, n-1)) -> v (left behind when every copy of a deep copy
    was removed)."""
    for inst in list(comp.instructions):
        if inst.parent is not comp or inst.opcode is not Opcode.TUPLE or not inst.operands:
            continue
        ops = inst.operands
        v = ops[0].operands[0] if ops[0].opcode is Opcode.GET_TUPLE_ELEMENT else None
        if v is None or v.shape != inst.shape or not all(
                o.opcode is Opcode.GET_TUPLE_ELEMENT and o.operands[0] is v
                and o.tuple_index == i for i, o in enumerate(ops)):
            continue
        inst.replace_all_uses_with(v)
        _drop_if_dead(inst)


def _reschedule(module: HloModule) -> None:
    """Keep an existing schedule valid: each sequence becomes its old order with new
    instructions placed as early as their operands allow."""
    assert module.schedule is not None
    sched = module.schedule
    for comp in module.computations:
        if comp not in sched:
            continue
        old = [i for i in sched[comp] if i.parent is comp]
        sched[comp] = _merge(old, comp.post_order())


def _merge(old: list[HloInstruction], order: list[HloInstruction]) -> list[HloInstruction]:
    placed: set[int] = set()
    out: list[HloInstruction] = []

    def place(i: HloInstruction) -> None:
        if i.uid in placed:
            return
        for p in i.operands + i.control_predecessors:
            if p.parent is i.parent:
                place(p)
        placed.add(i.uid)
        out.append(i)

    for i in old:
        place(i)
    for i in order:
        place(i)
    return out
