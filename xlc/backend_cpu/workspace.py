"""What the CPU's workspace passes share (`gemm_workspace.py`, `sort_workspace.py`): each
replaces instructions of one opcode whose kernels need scratch memory by an xlc custom-call
whose last output is a u8 workspace, so buffer assignment places the scratch like any temp
(as XLA gives library calls a workspace output) and no kernel allocates memory.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

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


class WorkspaceShrink(ABC):
    """Base of a budget pass (`xlc.passes.memory_budget.BudgetPass`) that shrinks the
    workspaces of one custom-call `target` under a memory limit: every such call of the entry
    computation whose workspace takes more than SHARE of the temp budget (the limit less
    parameters and outputs) gets the size `smaller` picks (its kernel then runs a slower
    algorithm that fits); `actions` names each call. Only workspace sizes change (values,
    schedule and every other shape stay)."""

    name = "workspace-shrink"
    target = ""
    SHARE = 1 / 8

    def __init__(self, threads: int):
        self.threads = threads
        self.actions: list[str] = []

    def run_budget(self, module: HloModule, assignment: Any, limit: int) -> bool:
        """Shrink the workspaces above the share; True when any changed."""
        from xlc.passes.memory_budget import device_peak_bytes

        if module.entry is None:
            return False
        temp = sum(a.size for a in assignment.temp_allocations if a.color == 0)
        share = int(max(limit - (device_peak_bytes(assignment) - temp), 0) * self.SHARE)
        changed = False
        for call in module.entry.instructions:
            if call.opcode is not Opcode.CUSTOM_CALL or \
                    call.attrs.get("custom_call_target") != self.target:
                continue
            parts = list(call.shape.tuple_shapes or ())
            held = parts[-1].num_elements
            if held <= share:
                continue
            got = self.smaller(call, share)
            if got is None or got[0] >= held:
                continue
            nbytes, how = got
            call.shape = Shape.tuple_of(parts[:-1] + [Shape.array(PrimitiveType.U8, (nbytes,))])
            self.actions.append(f"shrank the workspace of {call.name} from {held} to "
                                f"{nbytes} bytes ({how})")
            changed = True
        return changed

    @abstractmethod
    def smaller(self, call: HloInstruction, share: int) -> tuple[int, str] | None:
        """(bytes, what runs then) of the workspace `call` gets instead of the one it holds
        (`share`: the bytes a workspace may take); None when it has no smaller form."""
