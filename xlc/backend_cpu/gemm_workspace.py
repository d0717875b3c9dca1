"""gemm-workspace: dots that run on the packed GEMM get their packing scratch from the buffer
assignment (as XLA gives a library call's workspace an extra output).

The packed GEMM (`xlc/backend_cpu/gemm.py`) packs panels of A and B into scratch memory: per
thread slot, plus all of B once where the shares split m (`scratch_bytes(spec, threads)`).
Before this pass the kernel took it from `malloc` on every call, outside the assignment. Here
each such dot

    d = f32[m,n] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}

becomes

    d.gemm = (f32[m,n], u8[S]) custom-call(a, b), custom_call_target="__xlc$gemm",
             backend_config="lhs_batch_dims={};rhs_batch_dims={};lhs_contracting_dims={1};..."
    d = f32[m,n] get-tuple-element(d.gemm), index=0

and the buffer assignment places the u8[S] workspace like any temp, live only during the call
(the heap simulator reuses it for the next GEMM's workspace and for other temps). Where the
GEMM can store its result over A (`gemm.writes_over_a`: a square weight, n == k <= KC, rows
split among the shares: an MLP's backward `dh @ w.T`), the backend_config also says
`output_may_reuse_lhs={1}`, and the result may take a's buffer when a dies there.
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

from xlc.backend_cpu.workspace import (
    WorkspacePass,
    WorkspaceShrink,
    add_workspace_call,
    replace_keeping_name,
)
from xlc.hlo.gemm_call import GEMM_TARGET, encode_config, gemm_call_dot
from xlc.hlo.ir import HloComputation, HloInstruction
from xlc.hlo.opcodes import Opcode

log = logging.getLogger("xlc.backend_cpu")


class GemmWorkspace(WorkspacePass):
    """Replace packed-GEMM dots by `__xlc$gemm` custom-calls with a workspace output (see the
    module docstring)."""

    name = "gemm-workspace"
    opcode = Opcode.DOT

    def rewrite(self, comp: HloComputation, dot: HloInstruction) -> bool:
        """Replace `dot` if it runs on the packed GEMM; True if it did."""
        from xlc.backend_cpu.emit_dot import packed_gemm_plan
        from xlc.backend_cpu.gemm import recommended_threads, scratch_bytes

        plan = packed_gemm_plan(dot, self.threads)
        if plan is None:
            return False
        nbytes = scratch_bytes(plan.spec, recommended_threads(plan.spec, self.threads))
        if nbytes == 0:
            return False
        call = add_workspace_call(comp, dot, [dot.shape], nbytes, GEMM_TARGET,
                                  encode_config(dot, plan.writes_over_lhs), "gemm")
        out = replace_keeping_name(comp, dot, HloInstruction(
            Opcode.GET_TUPLE_ELEMENT, dot.shape, (call,), {"index": 0}, name=dot.name))
        log.debug("gemm-workspace: %s packs into %d bytes of workspace", out.name, nbytes)
        return True


class GemmWorkspaceShrink(WorkspaceShrink):
    """Budget pass "gemm-workspace-shrink" (`WorkspaceShrink`): under a memory limit, a packed
    GEMM's workspace (one packing slot per thread, plus B packed once when several threads
    split m) may be what holds the peak up. A workspace above the share is given the slots of
    the most threads whose scratch fits in it, else the smallest one; the emitter runs the
    GEMM on as many threads as its workspace has slots. Trades GEMM speed for memory, so it
    runs after rematerialization.

    Requires: a scheduled, assigned module after GemmWorkspace. Guarantees: only workspace
    sizes change (values, schedule and every other shape stay); `actions` names each call."""

    name = "gemm-workspace-shrink"
    target = GEMM_TARGET

    def smaller(self, call: HloInstruction, share: int) -> tuple[int, str] | None:
        """The workspace of the most threads whose scratch fits `share`, else the smallest
        (of the fewest bytes, then the most threads)."""
        from xlc.backend_cpu.emit_dot import packed_gemm_plan
        from xlc.backend_cpu.gemm import recommended_threads, scratch_bytes

        plan = packed_gemm_plan(gemm_call_dot(call), self.threads)
        if plan is None:
            return None
        # not monotonic in the threads: split along n, one thread packs a whole KC x NC block
        # of B, several threads each a block of their narrower share of the columns
        sizes = {n: scratch_bytes(plan.spec, n)
                 for n in range(1, recommended_threads(plan.spec, self.threads) + 1)}
        fits = [n for n, size in sizes.items() if size <= share]
        n = max(fits) if fits else min(sizes, key=lambda n: (sizes[n], -n))
        return sizes[n], f"{n} thread(s)"
