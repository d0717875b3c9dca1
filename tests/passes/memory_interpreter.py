"""Run a flat module *through its buffer assignment*: every value is written into its slice of
a byte array per allocation and operands are read back from their slices. If two values that
are live at the same time share memory, the results differ from the plain evaluator.

Control flow (while / conditional / call) runs through memory too: callee parameters and the
while/conditional/call results hold no buffers of their own, they read the caller's slices.
Fusions, reduces and other embedded calls are evaluated as a whole by the evaluator."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from xlc.hlo.evaluator import Evaluator
from xlc.hlo.ir import HloComputation, HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import ShapeIndex
from xlc.passes.buffer_assignment import BufferAssignment

_FORWARDING = (Opcode.TUPLE, Opcode.GET_TUPLE_ELEMENT, Opcode.BITCAST)


def run_with_memory(ba: BufferAssignment, order: Sequence[HloInstruction] | None,
                    args: Sequence[np.ndarray],
                    schedule: Mapping[HloComputation, Sequence[HloInstruction]] | None = None):
    """Execute the entry computation in `order` (default: the ordering's sequence, else post
    order); while / conditional / call bodies run in their sequence in `schedule`, else their
    sequential order, else post order (pass `schedule` when the ordering constrains more than
    data dependencies without being sequential, e.g. a PredecessorHloOrdering).
    Returns the root value (tuples as tuples)."""
    module = ba.module
    assert module.entry is not None and module.entry.root is not None
    mem = {a.index: np.zeros(a.size, np.uint8) for a in ba.allocations}
    ev = Evaluator(module)

    def write(inst: HloInstruction, index: ShapeIndex, value: np.ndarray) -> None:
        s = ba.slice_of(inst, index)
        raw = np.ascontiguousarray(value).view(np.uint8).reshape(-1)
        assert raw.size <= s.size
        mem[s.index][s.offset:s.offset + raw.size] = raw

    def read(inst: HloInstruction, index: ShapeIndex = ()):
        shape = inst.shape.subshape(index)
        if shape.is_tuple:
            assert shape.tuple_shapes is not None
            return tuple(read(inst, index + (i,)) for i in range(len(shape.tuple_shapes)))
        if inst.opcode is Opcode.BITCAST:  # same bytes; the evaluator knows the layouts
            return ev.evaluate_instruction(inst, [read(inst.operands[0], index)])
        s = ba.slice_of(inst, index)
        n = shape.num_elements * shape.dtype.itemsize
        return mem[s.index][s.offset:s.offset + n].copy().view(shape.dtype).reshape(shape.dims)

    def store(inst: HloInstruction, value) -> None:
        for idx, _ in inst.shape.leaves():
            if ba.dataflow.defined_at(inst, idx) is None:
                continue
            v = value
            for i in idx:
                v = v[i]
            write(inst, idx, np.asarray(v, dtype=inst.shape.subshape(idx).dtype))

    def sequence(comp: HloComputation) -> Sequence[HloInstruction]:
        if schedule is not None and comp in schedule:
            return schedule[comp]
        seq = ba.ordering.sequential_order(comp)
        return seq if seq is not None else comp.post_order()

    def execute(seq: Sequence[HloInstruction]) -> None:
        for inst in seq:
            op = inst.opcode
            if op is Opcode.PARAMETER:
                if inst.parent is module.entry:
                    store(inst, args[inst.parameter_number])
            elif op in _FORWARDING:
                continue
            elif op is Opcode.WHILE:
                cond, body = inst.called
                while True:
                    execute(sequence(cond))
                    if not bool(read(cond.root)):
                        break
                    execute(sequence(body))
            elif op is Opcode.CONDITIONAL:
                sel = read(inst.operands[0])
                j = (0 if bool(sel) else 1) if sel.dtype == np.bool_ else \
                    min(max(int(sel), 0), len(inst.called) - 1)
                execute(sequence(inst.called[j]))
            elif op is Opcode.CALL:
                execute(sequence(inst.called[0]))
            else:
                ops = [read(o) for o in inst.operands]  # read everything before writing
                store(inst, ev.evaluate_instruction(inst, ops))

    execute(order if order is not None else sequence(module.entry))
    return read(module.entry.root)
