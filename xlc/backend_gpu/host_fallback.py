"""Instructions the GPU cannot compile run on the host, inside the same executable.

When an emitter raises UnsupportedOpError (an opcode without a GPU emitter such as `fft`, a
complex dot, a complex transcendental in a fusion) and `CompileOptions.gpu_host_fallback` is
on, `GpuEmitter.emit_instruction` drops whatever that emitter had added to the LLVM module
(`checkpoint` / `rollback`) and emits a `HostCallThunk` of the `xlc$evaluate` target instead
(`host_thunk`): at run time the runtime waits for the thunk's stream, copies the operands to
the host, runs the instruction there with the reference evaluator (the instruction as a
standalone module: `host_calls.describe_evaluation`) and copies the results back. The
compiler logs one warning per program naming every instruction that fell back and why.

What cannot fall back (`runs_on_host`): control flow and tuple plumbing, custom-calls (their
own rules decide: `emit_custom_call.py`), stateful ops, and instructions with token or
nested-tuple operands or results. Those keep raising UnsupportedOpError.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xlc.backend_gpu.thunks import HostCallThunk
from xlc.hlo.host_calls import describe_evaluation, distinct_operands, result_shapes
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode

if TYPE_CHECKING:
    from xlc.backend_gpu.emitter import GpuEmitter

NEVER_ON_HOST = frozenset({
    Opcode.WHILE, Opcode.CONDITIONAL, Opcode.CALL, Opcode.PARAMETER, Opcode.TUPLE,
    Opcode.GET_TUPLE_ELEMENT, Opcode.CUSTOM_CALL, Opcode.RNG_GET_AND_UPDATE_STATE,
    Opcode.COPY_START, Opcode.COPY_DONE, Opcode.AFTER_ALL})
"""Opcodes that never run as a host thunk (see the module docstring)."""


def runs_on_host(inst: HloInstruction) -> bool:
    """Whether `inst` can run on the host through the evaluator (array operands; an array or
    a flat tuple of arrays as its result; not in NEVER_ON_HOST)."""
    if inst.opcode in NEVER_ON_HOST:
        return False
    if not all(o.shape.is_array for o in inst.operands):
        return False
    return all(s.is_array for s in result_shapes(inst))


def host_thunk(em: GpuEmitter, inst: HloInstruction) -> HostCallThunk:
    """The host thunk running `inst` through the evaluator."""
    results = [(inst, (i,)) for i in range(len(result_shapes(inst)))] if inst.shape.is_tuple \
        else [(inst, ())]
    return HostCallThunk(inst.name, desc=describe_evaluation(inst, "gpu"),
                         operands=[em.buffer_slice(o) for o in distinct_operands(inst)],
                         results=[em.buffer_slice(x, i) for x, i in results])


def checkpoint(em: GpuEmitter) -> tuple[Any, ...]:
    """What `rollback` needs to undo an emitter's additions to the LLVM module: the sizes of
    the module's tables (each grows at its end), taken before every instruction, so O(1)."""
    m = em.llmod
    named = {k: len(v.operands) for k, v in m.namedmetadata.items()}
    return (len(m.globals), named, len(m.metadata), len(m._metadatacache),
            len(em.kernel_names), len(em.ffi_modules))


def _tail(d: dict[Any, Any], n: int) -> list[Any]:
    """The keys of insertion-ordered dict `d` added after its first `n`."""
    return list(d)[n:]


def rollback(em: GpuEmitter, mark: tuple[Any, ...]) -> None:
    """Remove the functions, globals, kernel annotations and kernel names added since
    `mark`, and give their names back to the module's name scope."""
    nglobals, named, nmeta, ncache, nkernels, nffi = mark
    m = em.llmod
    for name in _tail(m.globals, nglobals):
        del m.globals[name]
        m.scope._useset.discard(name)   # an intrinsic declared again later keeps its name
    for key, nmd in list(m.namedmetadata.items()):
        if key not in named:
            del m.namedmetadata[key]
        else:
            del nmd.operands[named[key]:]
    for md in m.metadata[nmeta:]:   # unnamed nodes are numbered: give their numbers back
        m.scope._useset.discard(md.name)
    del m.metadata[nmeta:]
    for key in _tail(m._metadatacache, ncache):
        del m._metadatacache[key]
    del em.kernel_names[nkernels:]
    for key in _tail(em.ffi_modules, nffi):
        del em.ffi_modules[key]
