"""Constant folding (XLA's HloConstantFolding) on the reference evaluator.

An array-shaped instruction whose operands are all constants (or small iotas) is evaluated with
`xlc.hlo.evaluator.evaluate_computation` on a tiny detached computation (clones of the operands and
the instruction) and replaced by a `constant` holding the result.

Not folded: constants/parameters/leaves themselves, copies (copy insertion's business),
broadcasts (a folded broadcast bloats into a big constant; the simplifier handles broadcast
chains instead), results larger than
`constant_folding_limit` elements, iota users with results above `iota_user_limit` elements,
rng and anything with a side effect, control flow (while/conditional/call), custom-calls,
tuple-shaped results, elided `{...}` operands, instructions with control dependencies, and
anything the evaluator refuses (the error is logged, the instruction kept).

Requires: a verified module. Guarantees: numerics identical to the evaluator's; the folded
constant keeps the instruction's shape (layout included).
"""
from __future__ import annotations

import logging

import numpy as np

from xlc.errors import XlcError
from xlc.hlo.attrs import Literal
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.passes.dce import has_side_effect
from xlc.passes.edit import remove_instructions, replace_uses

log = logging.getLogger("xlc.passes")

_NOT_FOLDED = frozenset({
    Opcode.BROADCAST, Opcode.COPY, Opcode.WHILE, Opcode.CONDITIONAL, Opcode.CALL,
    Opcode.CUSTOM_CALL,
    Opcode.RNG, Opcode.RNG_BIT_GENERATOR, Opcode.RNG_GET_AND_UPDATE_STATE, Opcode.AFTER_ALL,
    Opcode.TUPLE, Opcode.OPT_BARRIER, Opcode.ADD_DEPENDENCY, Opcode.DOMAIN, Opcode.ALL_REDUCE,
    Opcode.PARTITION_ID, Opcode.REPLICA_ID,
})


def _is_foldable_operand(op: HloInstruction) -> bool:
    if op.opcode is Opcode.IOTA:
        return True
    if op.opcode is not Opcode.CONSTANT:
        return False
    lit = op.attrs.get("literal")
    return lit is not None and not _elided(lit)


def _elided(lit: Literal) -> bool:
    if lit.elided:
        return True
    return lit.elements is not None and any(_elided(e) for e in lit.elements)


def _result_array(value: object, inst: HloInstruction) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype != inst.shape.dtype:
        arr = arr.astype(inst.shape.dtype)
    return arr.reshape(inst.shape.dims)


class ConstantFolding:
    """Replace instructions computable from constants by constants (bounded size)."""

    name = "constant-folding"

    def __init__(self, limit: int | None = None, iota_user_limit: int = 1024):
        if limit is None:
            from xlc.options import default_options

            limit = default_options().constant_folding_limit
        self.limit = limit
        self.iota_user_limit = iota_user_limit

    def should_fold(self, inst: HloInstruction) -> bool:
        """The legality and size checks listed in the module docstring."""
        if (inst.opcode in _NOT_FOLDED or not inst.operands or not inst.shape.is_array
                or inst.control_predecessors or inst.control_successors):
            return False
        if not all(_is_foldable_operand(o) for o in inst.operands):
            return False
        n = inst.shape.num_elements
        if n > self.limit:
            return False
        if any(o.opcode is Opcode.IOTA for o in inst.operands) and n > self.iota_user_limit:
            return False
        return not has_side_effect(inst)

    def fold(self, inst: HloInstruction) -> np.ndarray | None:
        """Evaluate `inst` on its constant operands; None when the evaluator refuses."""
        from xlc.hlo.evaluator import evaluate_computation

        tmp = HloComputation(f"fold.{inst.name}")
        ops = [tmp.add_instruction(o.clone_with(operands=())) for o in inst.operands]
        tmp.add_instruction(inst.clone_with(operands=ops))
        tmp.root = tmp.instructions[-1]
        try:
            with np.errstate(all="ignore"):
                value = evaluate_computation(tmp, [])
            return _result_array(value, inst)
        except (XlcError, ArithmeticError, ValueError) as e:
            log.debug("constant-folding: not folding %s: %s", inst.name, e)
            return None

    def run(self, module: HloModule) -> bool:
        """Returns True iff some instruction was folded."""
        folded = 0
        for comp in module.computations_post_order():
            if comp.is_fusion_computation:
                continue
            replaced: list[HloInstruction] = []
            for inst in comp.post_order():
                if not self.should_fold(inst):
                    continue
                arr = self.fold(inst)
                if arr is None:
                    continue
                const = comp.add_instruction(HloInstruction(
                    Opcode.CONSTANT, inst.shape, (), {"literal": Literal(arr)}, name="constant",
                    extra=[kv for kv in inst.extra if kv[0] == "metadata"]))
                replace_uses(comp, inst, const)
                replaced.append(inst)
            if replaced:
                # operands of folded instructions that are now unused are left for DCE
                folded += remove_instructions(comp, replaced)
                comp.sort_post_order()
        if folded:
            log.debug("constant-folding: folded %d instructions", folded)
        return bool(folded)
