"""FlattenCallGraph: give every control-flow call site (call / while / conditional) its own
callee, cloning computations that are called from several places (XLA's pass of the same name).

Buffer assignment needs it: a callee's parameters and values live in the caller's buffers, so a
computation reached from two call sites would need two different slices for one instruction.
Embedded computations (fusion bodies, reduce/sort/map lambdas) are thread-local and may stay
shared. Guarantees: after the pass every computation reachable from the entry through control
flow has exactly one calling instruction and appears once in it; numerics are unchanged.
"""
from __future__ import annotations

import logging

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import EMBEDDED_CALLERS, Opcode

log = logging.getLogger("xlc.passes.flatten_call_graph")


def clone_computation(module: HloModule, comp: HloComputation) -> HloComputation:
    """A copy of `comp` (fresh unique names) added to `module` before its callers. It calls
    the same computations, except that each fusion gets a clone of its fused computation (a
    fused computation belongs to exactly one fusion, as the verifier requires)."""
    new = HloComputation(module.unique_name(comp.name))
    new.is_fusion_computation = comp.is_fusion_computation
    new.execution_thread = comp.execution_thread
    new.module = module
    mapping: dict[int, HloInstruction] = {}
    for inst in comp.instructions:
        called = inst.called
        if inst.opcode is Opcode.FUSION:
            called = tuple(clone_computation(module, c) for c in called)
        clone = HloInstruction(inst.opcode, inst.shape, [mapping[o.uid] for o in inst.operands],
                               inst.attrs, called, module.unique_name(inst.name), inst.extra)
        for p in inst.control_predecessors:
            clone.add_control_predecessor(mapping[p.uid])
        new.add_instruction(clone, unique_name=False)
        mapping[inst.uid] = clone
    assert comp.root is not None
    new.root = mapping[comp.root.uid]
    module.computations.insert(module.computations.index(comp) + 1, new)
    return new


class FlattenCallGraph:
    """Pass "flatten_call_graph" (see the module docstring)."""

    name = "flatten_call_graph"

    def run(self, module: HloModule) -> bool:
        """Clone shared control-flow callees; True when anything was cloned."""
        if module.entry is None:
            return False
        changed = False
        seen: set[int] = set()
        work = [module.entry]
        while work:
            comp = work.pop()
            for inst in comp.instructions:
                if inst.opcode in EMBEDDED_CALLERS:
                    continue
                called = list(inst.called)
                for k, callee in enumerate(called):
                    if id(callee) in seen:
                        called[k] = clone_computation(module, callee)
                        changed = True
                    seen.add(id(called[k]))
                    work.append(called[k])
                inst.called = tuple(called)
        if changed:
            log.debug("%s: cloned computations to flatten the call graph", module.name)
            if module.schedule is not None:
                for c in module.computations:
                    if c not in module.schedule and not c.is_fusion_computation:
                        module.schedule[c] = c.post_order()
        return changed
