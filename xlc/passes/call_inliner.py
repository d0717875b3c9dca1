"""Call inlining (XLA's CallInliner): replace every `call` by a copy of its callee's body.

JAX emits `call` for nested jitted helpers (`jit__where_.1 = call(...), to_apply=_where.1`).
Callees are processed before callers, so nested calls disappear in one run.

Requires: every `call`'s operands match its callee's parameters. Guarantees: no `call`
instruction is left; cloned instructions get fresh module-unique names (`<callee name>.N`) and keep
their attributes, metadata and called computations; callees no longer called from anywhere are
removed from the module; instruction lists stay topologically sorted.
"""
from __future__ import annotations

import logging

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode

log = logging.getLogger("xlc.passes")


def inline_call(call: HloInstruction) -> HloInstruction:
    """Inline one `call` into its parent; returns the instruction now standing for its result.

    Requires: `call` belongs to a computation of a module. Guarantees: the call is removed and
    its users (and root slot) use the clone of the callee's root (or the corresponding operand
    when the callee returns a parameter)."""
    comp = call.parent
    assert comp is not None and call.opcode is Opcode.CALL
    callee = call.to_apply
    mapping: dict[int, HloInstruction] = {}
    for p in callee.parameters:
        if p is not None:
            mapping[id(p)] = call.operands[p.parameter_number]
    for inst in callee.post_order():
        if inst.opcode is Opcode.PARAMETER:
            continue
        clone = HloInstruction(inst.opcode, inst.shape,
                               [mapping[id(o)] for o in inst.operands], inst.attrs, inst.called,
                               inst.name, inst.extra)
        comp.add_instruction(clone)
        preds = [mapping[id(p)] for p in inst.control_predecessors if id(p) in mapping]
        if not inst.operands and not inst.control_predecessors:
            preds.extend(call.control_predecessors)  # keep the call's ordering constraints
        for p in preds:
            clone.add_control_predecessor(p)
        mapping[id(inst)] = clone
    assert callee.root is not None
    result = mapping[id(callee.root)]
    call.replace_all_uses_with(result)
    comp.remove_instruction(call)
    return result


class CallInliner:
    """Inline every `call` instruction; remove callees left without callers."""

    name = "call-inliner"

    def run(self, module: HloModule) -> bool:
        """Returns True iff some call was inlined."""
        inlined: list[HloComputation] = []
        for comp in module.computations_post_order():
            calls = [i for i in comp.instructions if i.opcode is Opcode.CALL]
            for call in calls:
                inlined.append(call.to_apply)
                inline_call(call)
            if calls:
                comp.sort_post_order()
        if not inlined:
            return False
        callers = module.callers()
        for callee in dict.fromkeys(inlined):
            if callee is not module.entry and callee in module.computations \
                    and not callers.get(callee):
                module.remove_computation(callee)
        log.debug("call-inliner: inlined %d calls", len(inlined))
        return True
