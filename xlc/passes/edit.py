"""Batched graph edits for passes that rewrite many instructions of one computation.

`HloComputation.remove_instruction` and `HloInstruction.replace_all_uses_with` each scan the
whole computation (control dependencies), which makes a pass removing k of n instructions
O(n*k). These helpers redirect uses immediately and remove instructions in one sweep.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode


def replace_uses(comp: HloComputation, old: HloInstruction, new: HloInstruction) -> None:
    """Every use of `old` in `comp` (operands, the root slot and control edges) now refers to
    `new`. `old` stays in the computation."""
    assert old is not new
    for u in list(old.users):
        u.replace_operand_with(old, new)
    if comp.root is old:
        comp.root = new
    for u in list(old.control_successors):
        u.control_predecessors = tuple(new if p is old else p for p in u.control_predecessors)


def rewrite_each(module: HloModule, matches: Callable[[HloInstruction], bool],
                 rewrite: Callable[[HloComputation, HloInstruction], object]) -> int:
    """`rewrite(comp, inst)` every instruction that `matches` in the computations outside
    fusions (the instructions are picked before any rewrite of their computation), then put
    each changed computation back in post order; returns how many were rewritten."""
    count = 0
    for comp in list(module.computations):
        if comp.is_fusion_computation:
            continue
        targets = [i for i in comp.instructions if matches(i)]
        for inst in targets:
            rewrite(comp, inst)
        if targets:
            comp.sort_post_order()
            count += len(targets)
    return count


def substitute(comp: HloComputation, old: HloInstruction, new: HloInstruction,
               first: Iterable[HloInstruction]) -> None:
    """Replace `old` by `new`, the last of the instructions a rewrite built in its place:
    `old`'s control predecessors now precede each of `first` (where the rewrite starts), its
    uses refer to `new`, `old` is removed and `new` takes its name (users and dumps keep
    seeing it)."""
    for pred in old.control_predecessors:
        for inst in first:
            inst.add_control_predecessor(pred)
    replace_uses(comp, old, new)
    old.drop_control_dependencies()
    comp.remove_instruction(old)
    new.name = old.name


def remove_instructions(comp: HloComputation, dead: Iterable[HloInstruction]) -> int:
    """Remove `dead` instructions from `comp` in one sweep; returns how many.

    Requires: none of them is the root, a parameter, or used by an instruction outside `dead`.
    Guarantees: `users` lists and control edges of the survivors no longer mention them."""
    dead_list = [d for d in dict.fromkeys(dead) if d.parent is comp]
    if not dead_list:
        return 0
    dead_ids = {id(d) for d in dead_list}
    for d in dead_list:
        assert d is not comp.root and d.opcode is not Opcode.PARAMETER, d.name
        assert all(id(u) in dead_ids for u in d.users), f"{d.name} still has users {d.users}"
        for o in set(d.operands):
            if id(o) not in dead_ids and d in o.users:
                o.users.remove(d)
        d.parent = None
    comp.instructions = [i for i in comp.instructions if id(i) not in dead_ids]
    for d in dead_list:
        d.control_predecessors = ()
        for i in list(d.control_successors):
            i.control_predecessors = tuple(p for p in i.control_predecessors
                                           if id(p) not in dead_ids)
    return len(dead_list)
