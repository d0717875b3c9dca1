"""Forwarding layouts: tuples and get-tuple-elements whose declared layouts differ from the
values they forward get a layout-changing `copy` (the part of XLA's layout assignment xlc needs).

XLA's text before layout assignment may give a `tuple` element, or a `get-tuple-element`, a
layout other than its operand's (JAX prints result layouts on the root tuple this way). The
backends forward such values' buffers unchanged, so a reader using the declared layout would see
the buffer in the wrong physical order.

Requires: a verified module, before fusion. Guarantees: every array element of every tuple has
its operand's layout, and every array-shaped get-tuple-element has its tuple element's layout;
values keep their logical contents (the copies only relayout); instructions stay in a
topological order; nothing else changes.
"""
from __future__ import annotations

import logging

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode

log = logging.getLogger("xlc.passes")


def _differs(declared: object, actual: object) -> bool:
    """Two array shapes whose printed forms (layouts included) differ."""
    return getattr(declared, "is_array", False) and getattr(actual, "is_array", False) and \
        declared.to_text() != actual.to_text()  # type: ignore[attr-defined]


def _fix_tuple(comp: HloComputation, inst: HloInstruction) -> bool:
    """Copy each tuple operand whose layout differs from its declared element's into it."""
    changed = False
    elements = inst.shape.tuple_shapes or ()
    for i, (op, declared) in enumerate(zip(inst.operands, elements)):
        if _differs(declared, op.shape):
            copy = comp.add(Opcode.COPY, declared, (op,), name=f"{op.name}.relayout")
            inst.set_operand(i, copy)
            changed = True
    return changed


def _fix_gte(comp: HloComputation, inst: HloInstruction) -> bool:
    """Give a get-tuple-element its element's layout and relayout its users' view by a copy."""
    elements = inst.operands[0].shape.tuple_shapes or ()
    index = int(inst.attrs["index"])
    if index >= len(elements) or not _differs(inst.shape, elements[index]):
        return False
    declared, users = inst.shape, list(inst.users)
    inst.shape = elements[index]
    copy = comp.add(Opcode.COPY, declared, (inst,), name=f"{inst.name}.relayout")
    for user in users:
        user.replace_operand_with(inst, copy)
    if comp.root is inst:
        comp.root = copy
    return True


class ForwardingLayouts:
    """Insert layout-changing copies where a tuple or get-tuple-element would forward a buffer
    under another layout (see the module docstring)."""

    name = "forwarding-layouts"

    def run(self, module: HloModule) -> bool:
        """Rewrite every non-fusion computation; True if a copy was inserted."""
        changed = False
        for comp in module.computations:
            if comp.is_fusion_computation:
                continue
            edited = False
            for inst in list(comp.instructions):
                if inst.opcode is Opcode.TUPLE:
                    edited |= _fix_tuple(comp, inst)
                elif inst.opcode is Opcode.GET_TUPLE_ELEMENT:
                    edited |= _fix_gte(comp, inst)
            if edited:
                comp.sort_post_order()  # the copies sit right after the values they relayout
            changed |= edited
        if changed:
            log.debug("forwarding-layouts: relayout copies inserted in %s", module.name)
        return changed
