"""custom-call on the GPU: targets with a host implementation (JAX's LAPACK targets, Python
targets of `xlc.ffi`, `xlc.pure_callback`, `xlc.debug`) run on the host inside the
executable, as a `HostCallThunk`: the runtime waits for the thunk's stream, copies the
operands to the host, runs the call (`xlc.hlo.host_calls`) and copies the results back.
Executables holding one are not captured into CUDA graphs (the host is in the loop, as with
while loops). Any other target is an UnsupportedOpError naming it."""
from __future__ import annotations

from typing import TYPE_CHECKING

from xlc.backend_gpu.thunks import HostCallThunk, Thunk
from xlc.errors import UnsupportedOpError
from xlc.hlo.host_calls import describe, handler_for, result_shapes
from xlc.hlo.ir import HloInstruction

if TYPE_CHECKING:
    from xlc.backend_gpu.emitter import GpuEmitter


def emit_custom_call(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """A host call thunk for a target with a host implementation (module docstring)."""
    target = str(inst.attrs.get("custom_call_target", ""))
    if handler_for(target, "gpu") is None:
        raise UnsupportedOpError(
            f"GPU backend cannot compile 'custom-call' target '{target}' ({inst.name}): it has "
            "no device implementation and no host implementation (JAX's LAPACK targets and "
            "Python targets run on the host)")
    results = [(inst, (i,)) for i in range(len(result_shapes(inst)))] if inst.shape.is_tuple \
        else [(inst, ())]
    return [HostCallThunk(inst.name, desc=describe(inst, "gpu"),
                          operands=[em.buffer_slice(o) for o in inst.operands],
                          results=[em.buffer_slice(x, i) for x, i in results])]
