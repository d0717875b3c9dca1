"""gemm-workspace: dots that run on the packed GEMM get their packing scratch from the buffer
assignment (as XLA gives a library call's workspace an extra output).

The packed GEMM (`xlc/codegen/gemm.py`) packs panels of A and B into scratch memory: per
thread slot, plus all of B once where the shares split m (`scratch_bytes(spec, threads)`).
Before this pass the kernel took it from `malloc` on every call, outside the assignment. Here
each such dot

    d = f32[m,n] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}

becomes

    d.gemm = (f32[m,n], u8[S]) custom-call(a, b), custom_call_target="__xlc$gemm",
             backend_config="lhs_batch_dims={};rhs_batch_dims={};lhs_contracting_dims={1};..."
    d = f32[m,n] get-tuple-element(d.gemm), index=0

and the buffer assignment places the u8[S] workspace like any temp, live only during the call
(the heap simulator reuses it for the next GEMM's workspace and for other temps).
`emit_gemm.emit_gemm_call` emits the custom-call; `xlc/hlo/gemm_call.py` defines it (the
evaluator runs it as the dot).

Requires: a verified module after fusion, and the thread count the module is compiled for
(the workspace's size depends on it). Guarantees: every dot of a non-fusion computation for
which `emit_dot.packed_gemm_plan` gives a plan is replaced as above (same values; the dot's
name moves to the get-tuple-element, its metadata to the custom-call); nothing else changes;
instructions stay in a topological order.
"""
from __future__ import annotations

import logging

from xlc.hlo.gemm_call import GEMM_TARGET, encode_dims
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape

log = logging.getLogger("xlc.backend_cpu")

class GemmWorkspace:
    """Replace packed-GEMM dots by `__xlc$gemm` custom-calls with a workspace output (see the
    module docstring)."""

    name = "gemm-workspace"

    def __init__(self, threads: int):
        """`threads`: the threads the CPU kernels run on (`parallel.host_threads`)."""
        self.threads = threads

    def run(self, module: HloModule) -> bool:
        """Rewrite every non-fusion computation; True if a dot was replaced."""
        changed = False
        for comp in module.computations:
            if comp.is_fusion_computation:
                continue
            edited = False
            for inst in list(comp.instructions):
                if inst.opcode is Opcode.DOT:
                    edited |= self._rewrite(comp, inst)
            if edited:
                comp.sort_post_order()
            changed |= edited
        return changed

    def _rewrite(self, comp: HloComputation, dot: HloInstruction) -> bool:
        from xlc.backend_cpu.emit_dot import packed_gemm_plan
        from xlc.codegen.gemm import recommended_threads, scratch_bytes

        plan = packed_gemm_plan(dot, self.threads)
        if plan is None:
            return False
        nbytes = scratch_bytes(plan.spec, recommended_threads(plan.spec, self.threads))
        if nbytes == 0:
            return False
        shape = Shape.tuple_of([dot.shape, Shape.array(PrimitiveType.U8, (nbytes,))])
        extra = [("backend_config", encode_dims(dot))]
        metadata = dot.get_extra("metadata")
        if metadata is not None:
            extra.append(("metadata", metadata))
        call = comp.add(Opcode.CUSTOM_CALL, shape, dot.operands,
                        {"custom_call_target": GEMM_TARGET}, name=f"{dot.name}.gemm",
                        extra=extra)
        # the get-tuple-element takes over the dot's name (already the module's: not renamed)
        out = comp.add_instruction(HloInstruction(Opcode.GET_TUPLE_ELEMENT, dot.shape, (call,),
                                                  {"index": 0}, name=dot.name),
                                   unique_name=False)
        comp.replace_instruction(dot, out)
        log.debug("gemm-workspace: %s packs into %d bytes of workspace", out.name, nbytes)
        return True
