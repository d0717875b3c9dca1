"""copy-start / copy-done on the GPU: asynchronous copies between memory spaces.

`copy-start` is one `CopyStartThunk` (a `cuMemcpy*Async` of the source slice into the
destination element `{0}`); at the top level of the entry `streams.plan_streams` puts it on the
copy stream, so the transfer runs while the compute stream goes on. `copy-done` is a
`CopyDoneThunk` on a compute stream that waits for the copy's event. The direction comes from
the colours of the two allocations: `S(5)` (`HOST_MEMORY_SPACE`) allocations live in pinned
host memory (`runtime.GpuRuntime`), every other colour on the device. Kernels never touch
host allocations (`check_host_buffers`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from xlc.backend_gpu.thunks import CopyDoneThunk, CopyStartThunk, SequentialThunk, Thunk
from xlc.errors import LoweringError, UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.passes.allocation import BufferAllocation
from xlc.passes.memory_budget import HOST_MEMORY_SPACE

if TYPE_CHECKING:
    from xlc.backend_gpu.emitter import GpuEmitter


def is_host(alloc: BufferAllocation) -> bool:
    """Whether allocation `alloc` lives in pinned host memory (memory space `S(5)`)."""
    return alloc.color == HOST_MEMORY_SPACE


def emit_copy_start(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """The copy of the operand into the destination element `{0}` (see the module doc)."""
    src, dst = em.slice(inst.operands[0]), em.slice(inst, (0,))
    direction = {(False, True): "d2h", (True, False): "h2d", (False, False): "d2d"}.get(
        (is_host(src.allocation), is_host(dst.allocation)))
    if direction is None:
        raise UnsupportedOpError(f"GPU backend: copy-start {inst.name} copies host memory to "
                                 "host memory")
    return [CopyStartThunk(inst.name, src=src, dst=dst, direction=direction)]


def emit_copy_done(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """A wait for the copy of copy-start `inst.operands[0]` (its events come from the plan)."""
    return [CopyDoneThunk(inst.name, start=inst.operands[0].name)]


def check_host_buffers(allocations: list[BufferAllocation], seq: SequentialThunk) -> None:
    """Pinned host memory is for the copies only: UnsupportedOpError when an entry parameter,
    output or constant is in `S(5)` (the runtime binds those to device memory), and
    LoweringError naming the thunk when anything but a copy-start reads or writes a host
    allocation (a kernel would read host memory over PCIe, or fault)."""
    for a in allocations:
        if is_host(a) and a.kind not in ("temp",):
            raise UnsupportedOpError(f"GPU backend: a {a.kind} allocation in host memory "
                                     f"S({HOST_MEMORY_SPACE}) (allocation {a.index}) is "
                                     "unsupported; only temporaries may be offloaded")
    for t in seq.walk():
        if isinstance(t, (CopyStartThunk, SequentialThunk)) or t.children():
            continue
        for sl in t.reads() + t.writes():
            if is_host(sl.allocation):
                raise LoweringError(f"GPU backend: {t.kind} thunk of '{t.hlo}' touches host "
                                    f"memory (allocation {sl.index}); only copies may")
