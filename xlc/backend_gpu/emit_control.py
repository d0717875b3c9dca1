"""Control flow: while -> WhileThunk, conditional -> ConditionalThunk, call -> its thunks.

Buffer assignment makes a while's init, its body/condition parameters, the body root and the
while result share slices, and a conditional's/call's operands and results those of the
called computations' parameters and roots whenever it can; where two leaves did not get the
same slice, device-to-device copies move the value across the boundary.
"""
from __future__ import annotations

import logging

from xlc.backend_gpu.emitter import GpuEmitter
from xlc.backend_gpu.thunks import (
    ConditionalThunk,
    DeviceToDeviceCopyThunk,
    SequentialThunk,
    Thunk,
    WhileThunk,
)
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType

log = logging.getLogger("xlc.backend_gpu")


def copies_between(em: GpuEmitter, src: HloInstruction, dst: HloInstruction,
                   why: str) -> list[Thunk]:
    """A D2D copy per array leaf whose slices differ between `src` and `dst` (same shape)."""
    out: list[Thunk] = []
    for index, shape in src.shape.leaves():
        if not shape.is_array:
            continue
        a, b = em.buffer_slice(src, index), em.buffer_slice(dst, index)
        if a != b:
            out.append(DeviceToDeviceCopyThunk(f"{why}:{dst.name}", src=a, dst=b))
    return out


def _const_int(inst: HloInstruction) -> int | None:
    while inst.opcode is Opcode.COPY:
        inst = inst.operands[0]
    if inst.opcode is not Opcode.CONSTANT or not inst.shape.is_array:
        return None
    pt = inst.shape.element_type
    lit = inst.attrs["literal"]
    if pt is None or not pt.is_integer or lit.elided or lit.array is None or lit.array.size != 1:
        return None
    return int(lit.array.reshape(()))


def known_trip_count(inst: HloInstruction) -> int | None:
    """The trip count of a counted while loop, else None. Recognised: the init tuple holds an
    integer constant `a` at index k, the condition is `get-tuple-element(param, k) < N` with a
    constant N, and the body's root tuple has `get-tuple-element(param, k) + 1` at index k."""
    cond, body = inst.called[0], inst.called[1]
    root, broot, init = cond.root, body.root, inst.operands[0]
    if root is None or broot is None or root.opcode is not Opcode.COMPARE or \
            str(root.attrs.get("direction")) != "LT" or broot.opcode is not Opcode.TUPLE or \
            init.opcode is not Opcode.TUPLE:
        return None
    ivar, limit = root.operands
    if ivar.opcode is not Opcode.GET_TUPLE_ELEMENT or ivar.operands[0] is not cond.parameters[0]:
        return None
    k = int(ivar.attrs["index"])
    upd = broot.operands[k]
    if upd.opcode is not Opcode.ADD:
        return None
    counter = [o for o in upd.operands if o.opcode is Opcode.GET_TUPLE_ELEMENT
               and o.operands[0] is body.parameters[0] and int(o.attrs["index"]) == k]
    steps = [_const_int(o) for o in upd.operands if o not in counter]
    n, start = _const_int(limit), _const_int(init.operands[k])
    if len(counter) != 1 or steps != [1] or n is None or start is None:
        return None
    return max(0, n - start)


def emit_while(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """A while loop: condition thunks, predicate read back, body thunks; a counted loop
    (`known_trip_count`) runs its body that many times without reading anything back."""
    cond, body = inst.called[0], inst.called[1]
    assert cond.root is not None and body.root is not None
    pre = copies_between(em, inst.operands[0], inst, "while-init")
    pre += copies_between(em, inst, body.parameters[0], "while-param")
    cond_seq = em.emit_computation(cond)
    cond_seq.thunks[:0] = copies_between(em, inst, cond.parameters[0], "while-cond-param")
    body_seq = em.emit_computation(body)
    body_seq.thunks += copies_between(em, body.root, inst, "while-body-root")
    return pre + [WhileThunk(inst.name, condition=cond_seq,
                             predicate=em.buffer_slice(cond.root), body=body_seq,
                             trip_count=known_trip_count(inst))]


def emit_conditional(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """A conditional: the branch index (pred: true -> branch 0) is read back and that
    branch's thunks run."""
    index = inst.operands[0]
    pt = index.shape.element_type
    if pt not in (PrimitiveType.PRED, PrimitiveType.S32):
        raise UnsupportedOpError(f"GPU backend: conditional {inst.name} index of type {pt}")
    branches = []
    for k, comp in enumerate(inst.called):
        assert comp.root is not None
        seq = em.emit_computation(comp)
        seq.thunks[:0] = copies_between(em, inst.operands[k + 1], comp.parameters[0],
                                        "branch-param") if comp.parameters else []
        seq.thunks += copies_between(em, comp.root, inst, "branch-root")
        branches.append(seq)
    return [ConditionalThunk(inst.name, index=em.buffer_slice(index),
                             index_is_pred=pt is PrimitiveType.PRED, branches=branches)]


def emit_call(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """A call: the callee's thunks in place (with copies where slices differ)."""
    comp = inst.called[0]
    assert comp.root is not None
    thunks: list[Thunk] = []
    for op, p in zip(inst.operands, comp.parameters):
        thunks += copies_between(em, op, p, "call-param")
    thunks += em.emit_computation(comp).thunks
    thunks += copies_between(em, comp.root, inst, "call-root")
    return [SequentialThunk(inst.name, thunks=thunks)]


def emit_nothing(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """Ops that launch nothing (parameter, constant, tuple, get-tuple-element, bitcast,
    after-all): their results are slices the buffer assignment already gave."""
    return []


def emit_passthrough(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """Ops that forward their (first) operand: copies only where slices differ."""
    return copies_between(em, inst.operands[0], inst, inst.opcode.text)
