"""spmd-annotations: sharding annotations become the identity on one device.

`jax.lax.with_sharding_constraint` lowers to `custom-call(x), custom_call_target="Sharding",
sharding={...}`, and shard_map to `SPMDFullToShardShape` / `SPMDShardToFullShape`
(`xlc/hlo/spmd.py`). xlc runs a program on one device, where the shard is the whole array:
each annotation is replaced by its operand (by a copy when it declares another layout).

Requires: a module whose annotation custom-calls have one operand. Guarantees: no annotation
custom-call is left; values are unchanged. An annotation whose shape differs from its
operand's (a shard shape of a multi-device mesh) is an UnsupportedOpError naming it.
"""
from __future__ import annotations

import logging

from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.spmd import SPMD_TARGETS
from xlc.passes.edit import remove_instructions, replace_uses

log = logging.getLogger("xlc.passes")


def is_annotation(inst: HloInstruction) -> bool:
    """Whether `inst` is one of the sharding annotation custom-calls."""
    return (inst.opcode is Opcode.CUSTOM_CALL
            and inst.attrs.get("custom_call_target") in SPMD_TARGETS)


class SpmdAnnotations:
    """Replace sharding annotations by their operand (see the module docstring)."""

    name = "spmd-annotations"

    def run(self, module: HloModule) -> bool:
        """Rewrite every computation; True if an annotation was removed."""
        changed = False
        for comp in module.computations:
            gone = []
            for inst in [i for i in comp.instructions if is_annotation(i)]:
                target = inst.attrs["custom_call_target"]
                if len(inst.operands) != 1:
                    raise UnsupportedOpError(f"custom-call '{inst.name}' ({target}) needs one "
                                             f"operand, got {len(inst.operands)}")
                x = inst.operands[0]
                if x.shape.to_text(False) != inst.shape.to_text(False):
                    raise UnsupportedOpError(
                        f"custom-call '{inst.name}' ({target}) changes {x.shape} to "
                        f"{inst.shape}: shards of a multi-device mesh are not supported (xlc "
                        "runs a program on one device)")
                new = x
                if x.shape != inst.shape:  # another layout: a relayout copy
                    new = comp.add(Opcode.COPY, inst.shape, (x,), name=f"{inst.name}.copy")
                    comp.instructions.remove(new)  # right before the annotation
                    comp.instructions.insert(comp.instructions.index(inst), new)
                replace_uses(comp, inst, new)
                gone.append(inst)
                log.debug("spmd-annotations: %s (%s) removed", inst.name, target)
            changed |= remove_instructions(comp, gone) > 0
        return changed
