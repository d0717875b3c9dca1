"""Dead code elimination (XLA's HloDCE).

Requires: a module whose `users` lists are consistent. Guarantees: every instruction left is
used, is its computation's root, is a parameter, or has a side effect (including control flow
whose called computations contain side effects); every computation left is reachable from the
entry through called computations. Never removes the entry's root or any parameter.
"""
from __future__ import annotations

import logging

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.passes.edit import remove_instructions

log = logging.getLogger("xlc.passes")


def has_side_effect(inst: HloInstruction, _seen: set[int] | None = None) -> bool:
    """True if `inst` has a side effect itself or calls a computation containing one."""
    if inst.opcode.has_side_effect:
        return True
    if not inst.called:
        return False
    seen = _seen if _seen is not None else set()
    for comp in inst.called:
        if id(comp) in seen:
            continue
        seen.add(id(comp))
        if any(has_side_effect(i, seen) for i in comp.instructions):
            return True
    return False


def is_dead(inst: HloInstruction) -> bool:
    """No users, not the root, not a parameter and no side effect."""
    return (not inst.users and not inst.is_root and inst.opcode is not Opcode.PARAMETER
            and not has_side_effect(inst))


def remove_dead_instructions(comp: HloComputation) -> int:
    """Remove dead instructions of one computation (also chains that only feed dead ones);
    returns how many."""
    dead: set[int] = set()
    dead_list: list[HloInstruction] = []
    for inst in reversed(comp.post_order()):  # users before operands
        if (inst is not comp.root and inst.opcode is not Opcode.PARAMETER
                and all(id(u) in dead for u in inst.users) and not has_side_effect(inst)):
            dead.add(id(inst))
            dead_list.append(inst)
    return remove_instructions(comp, dead_list)


def remove_dead_computations(module: HloModule) -> int:
    """Remove computations not reachable from the entry; returns how many."""
    if module.entry is None:
        return 0
    live: set[int] = set()
    stack = [module.entry]
    while stack:
        c = stack.pop()
        if id(c) in live:
            continue
        live.add(id(c))
        stack.extend(c.called_computations())
    dead = [c for c in module.computations if id(c) not in live]
    for c in dead:
        module.remove_computation(c)
    return len(dead)


class DeadCodeElimination:
    """Remove unused side-effect-free instructions and unreachable computations."""

    name = "dce"

    def __init__(self, remove_computations: bool = True):
        self.remove_computations = remove_computations

    def run(self, module: HloModule) -> bool:
        """Returns True iff an instruction or computation was removed."""
        removed = sum(remove_dead_instructions(c) for c in module.computations_post_order()[::-1])
        dead_comps = remove_dead_computations(module) if self.remove_computations else 0
        if removed or dead_comps:
            log.debug("dce: removed %d instructions, %d computations", removed, dead_comps)
        return bool(removed or dead_comps)
