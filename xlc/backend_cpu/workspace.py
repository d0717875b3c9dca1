"""What the CPU's workspace passes share (`gemm_workspace.py`, `sort_workspace.py`): each
replaces instructions of one opcode whose kernels need scratch memory by an xlc custom-call
whose last output is a u8 workspace, so buffer assignment places the scratch like any temp
(as XLA gives library calls a workspace output) and no kernel allocates memory.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape


class WorkspacePass(ABC):
    """Base of a workspace pass: `run` visits every instruction of `opcode` in the module's
    non-fusion computations and calls `rewrite`, which a subclass implements (True when it
    replaced the instruction). Instructions stay in a topological order."""

    name = "workspace"
    opcode = Opcode.CUSTOM_CALL

    def __init__(self, threads: int):
        """`threads`: the threads the CPU kernels run on (`parallel.host_threads`)."""
        self.threads = threads

    def run(self, module: HloModule) -> bool:
        """Rewrite every non-fusion computation; True if an instruction was replaced."""
        changed = False
        for comp in module.computations:
            if comp.is_fusion_computation:
                continue
            edited = False
            for inst in list(comp.instructions):
                if inst.opcode is self.opcode:
                    edited |= self.rewrite(comp, inst)
            if edited:
                comp.sort_post_order()
            changed |= edited
        if changed:
            module.schedule = None  # a schedule parsed from the input no longer fits; the
            # memory scheduler at the end of the pipeline makes the new one
        return changed

    @abstractmethod
    def rewrite(self, comp: HloComputation, inst: HloInstruction) -> bool:
        """Replace `inst` when it needs a workspace; True if it did."""


def add_workspace_call(comp: HloComputation, inst: HloInstruction, results: list[Shape],
                       nbytes: int, target: str, config: str, suffix: str) -> HloInstruction:
    """Add `(results..., u8[nbytes]) custom-call(inst's operands)` with `target`, the quoted
    `config` as backend_config, `inst`'s called computations and metadata, named
    `<inst>.<suffix>`; returns it."""
    shape = Shape.tuple_of(results + [Shape.array(PrimitiveType.U8, (nbytes,))])
    extra = [("backend_config", config)]
    metadata = inst.get_extra("metadata")
    if metadata is not None:
        extra.append(("metadata", metadata))
    return comp.add(Opcode.CUSTOM_CALL, shape, inst.operands, {"custom_call_target": target},
                    called=inst.called, name=f"{inst.name}.{suffix}", extra=extra)


def replace_keeping_name(comp: HloComputation, old: HloInstruction,
                         new: HloInstruction) -> HloInstruction:
    """Add detached `new` (named like `old`: the name is the module's already, so it is not
    made unique) and let it replace `old`."""
    comp.add_instruction(new, unique_name=False)
    return comp.replace_instruction(old, new)
