"""copy-start / copy-done on the CPU: a plain copy (host memory is the only memory here).

`copy-start` copies its operand into the destination element `{0}` of its tuple (a buffer of
the layout's memory space: on the CPU, `S(5)` is just another temp block of the same DRAM);
`copy-done` emits nothing, since dataflow forwards the destination to it. There is nothing
asynchronous to overlap on one memory, so the CPU pipeline never creates these pairs (host
offload is a GPU budget pass); they come from XLA text.
"""
from __future__ import annotations

from xlc.backend_cpu.emitter import CpuEmitter, FnCtx, loop_over, split_of
from xlc.hlo.ir import HloInstruction


def emit_copy_start(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """`dest[i] = source[i]` over the operand, in the destination's physical order."""
    src = inst.operands[0]
    dest = inst.shape.subshape((0,))
    k = em.kernel(ctx, inst.name, [(inst, (0,)), (src, ())], split_of(dest))
    with loop_over(k.b, dest, outer=k.outer) as idx:
        k.write(inst, idx, k.read(src, idx), (0,))
    k.finish()
