"""Common subexpression elimination (XLA's HloCSE).

Per computation: first merge constants with equal shapes (layouts included) and equal literals
(elided `{...}` constants are never merged); then, in post order, replace each instruction that is
`identical` to an earlier one (same opcode, shape, operands, attributes, called computations) by
that earlier one.

Requires: consistent `users`. Guarantees: numerics unchanged; never merges `copy` instructions
(copy insertion's business), side-effecting instructions (`has_side_effect`, including control
flow calling side effects), parameters or instructions with control dependencies; a duplicate
root is replaced by its twin, which becomes the root.
"""
from __future__ import annotations

import logging

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.passes.dce import has_side_effect
from xlc.passes.edit import remove_instructions, replace_uses

log = logging.getLogger("xlc.passes")

# Copies are copy insertion's business: two copies of one value may be needed as distinct buffers.
_NEVER_CSE = frozenset({Opcode.PARAMETER, Opcode.AFTER_ALL, Opcode.RNG_BIT_GENERATOR,
                        Opcode.COPY})


def _has_control_deps(inst: HloInstruction) -> bool:
    return bool(inst.control_predecessors or inst.control_successors)


def _cse_key(inst: HloInstruction) -> tuple:
    key: tuple = (inst.opcode, inst.shape, tuple(id(o) for o in inst.operands), inst.attrs,
                  tuple(id(c) for c in inst.called))
    try:
        hash(key)
    except TypeError:  # an unhashable attribute value: bucket without attrs, `identical` decides
        key = key[:3] + key[4:]
    return key


def _replace(comp: HloComputation, dup: HloInstruction, canon: HloInstruction,
             removed: list[HloInstruction]) -> None:
    # `dup` has no control edges (checked by the callers), so only data uses move.
    replace_uses(comp, dup, canon)
    removed.append(dup)


def _merge_constants(comp: HloComputation) -> int:
    seen: dict[tuple, HloInstruction] = {}
    removed: list[HloInstruction] = []
    for inst in list(comp.instructions):
        if inst.opcode is not Opcode.CONSTANT or _has_control_deps(inst):
            continue
        lit = inst.attrs.get("literal")
        if lit is None or getattr(lit, "elided", False):
            continue
        key = (inst.shape, lit)
        canon = seen.get(key)
        if canon is None:
            seen[key] = inst
        else:
            _replace(comp, inst, canon, removed)
    return remove_instructions(comp, removed)


def _merge_identical(comp: HloComputation) -> int:
    table: dict[tuple, list[HloInstruction]] = {}
    removed: list[HloInstruction] = []
    for inst in comp.post_order():
        if (inst.parent is not comp or inst.opcode in _NEVER_CSE
                or inst.opcode is Opcode.CONSTANT or _has_control_deps(inst)
                or has_side_effect(inst)):
            continue
        bucket = table.setdefault(_cse_key(inst), [])
        canon = next((c for c in bucket if c.identical(inst)), None)
        if canon is None:
            bucket.append(inst)
        else:
            _replace(comp, inst, canon, removed)
    return remove_instructions(comp, removed)


class CommonSubexpressionElimination:
    """Merge equal constants and identical instructions within each computation."""

    name = "cse"

    def run(self, module: HloModule) -> bool:
        """Returns True iff some instruction was merged into another."""
        total = 0
        for comp in module.computations_post_order():
            total += _merge_constants(comp)
            total += _merge_identical(comp)
        if total:
            log.debug("cse: merged %d instructions", total)
        return bool(total)
