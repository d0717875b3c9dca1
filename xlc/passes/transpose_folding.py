"""Transpose folding (XLA's TransposeFolding, dot part): a `transpose` operand of a `dot` is
folded into the dot's dimension numbers, so the transposed copy is never materialized.

For `dot(..., transpose(X, perm), ...)`: dimension d of the transpose is dimension perm[d] of X,
so the batch and contracting dimension lists of that side are mapped through `perm` and the dot
reads X directly. The dot's result orders the free (non-batch, non-contracting) dimensions of
each side by increasing dimension number, so the fold is legal only when the mapped free
dimensions stay increasing (always true for a rank-2 operand with one contracting dim, the
`A @ B.T` case). The transpose is removed when the dot was its last user.

Requires: a verified module. Guarantees: the same values; dot shapes unchanged; every dot
emitter that honours arbitrary batch/contracting dims (CPU and GPU do) needs nothing new.
"""
from __future__ import annotations

import logging

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode

log = logging.getLogger("xlc.passes.transpose_folding")

_SIDES = ("lhs", "rhs")


def foldable_transpose(dot: HloInstruction, side: int) -> bool:
    """True when operand `side` (0 lhs, 1 rhs) of `dot` is a transpose that can be folded into
    the dot's dimension numbers (its mapped free dimensions stay in increasing order)."""
    op = dot.operands[side]
    if op.opcode is not Opcode.TRANSPOSE:
        return False
    perm = tuple(op.attrs["dimensions"])
    prefix = _SIDES[side]
    fixed = set(dot.attrs.get(f"{prefix}_batch_dims", ())) \
        | set(dot.attrs.get(f"{prefix}_contracting_dims", ()))
    mapped_free = [perm[d] for d in range(len(perm)) if d not in fixed]
    return mapped_free == sorted(mapped_free)


def fold_dot_transposes(comp: HloComputation, dot: HloInstruction) -> bool:
    """Fold every foldable transpose operand of `dot` (a dot of `comp`); True if changed."""
    operands = list(dot.operands)
    updates: dict[str, tuple[int, ...]] = {}
    folded: list[HloInstruction] = []
    for side in (0, 1):
        if not foldable_transpose(dot, side):
            continue
        t = dot.operands[side]
        perm = tuple(t.attrs["dimensions"])
        prefix = _SIDES[side]
        for key in (f"{prefix}_batch_dims", f"{prefix}_contracting_dims"):
            if key in dot.attrs:
                updates[key] = tuple(perm[d] for d in dot.attrs[key])
        operands[side] = t.operands[0]
        folded.append(t)
    if not folded:
        return False
    # in place: the dot keeps its name, users and position
    dot.attrs = dot.attrs.replace(**updates)
    dot.set_operands(operands)
    for t in folded:
        if t.parent is comp and not t.users and not t.is_root:
            comp.remove_instruction(t)
    log.debug("folded %d transpose(s) into %s", len(folded), dot.name)
    return True


class TransposeFolding:
    """The HloPass: fold transpose operands into every dot outside fused computations."""

    name = "transpose-folding"

    def run(self, module: HloModule) -> bool:
        """Rewrite in place; True if any dot changed."""
        changed = False
        for comp in module.computations:
            if comp.is_fusion_computation:
                continue
            for inst in list(comp.instructions):
                if inst.opcode is Opcode.DOT and inst.parent is comp:
                    changed |= fold_dot_transposes(comp, inst)
        return changed
