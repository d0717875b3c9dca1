"""The `__xlc$sort` custom-call: a sort with a workspace output (like `__xlc$gemm`,
`gemm_call.py`: the scratch a library-style kernel needs becomes an output that buffer
assignment places).

    s.sort = (f32[64,16384], s32[64,16384], u8[S]) custom-call(keys, values),
             custom_call_target="__xlc$sort", called_computations={%compare},
             backend_config="dimensions={1};is_stable=true"

Outputs 0..n-1 are `sort(operands...)` along `dimensions` with the comparator, exactly as the
sort instruction (one operand: output {0} is the sorted array); output {n} is S bytes of
scratch with unspecified contents. As with sort, output {k} may take operand k's buffer
(sorted in place). The CPU backend's `sort-workspace` pass makes these calls; the evaluator
runs them as the sort (workspace zeros).
"""
from __future__ import annotations

import re

from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Shape

SORT_TARGET = "__xlc$sort"
"""The custom-call target of a sort with a workspace output."""

_DIMS = re.compile(r"dimensions=\{([\d,]*)\}")
_STABLE = re.compile(r"is_stable=(true|false)")


def is_sort_call(inst: HloInstruction) -> bool:
    """Whether `inst` is a `__xlc$sort` custom-call."""
    return inst.opcode is Opcode.CUSTOM_CALL and \
        inst.attrs.get("custom_call_target") == SORT_TARGET


def encode_sort(sort: HloInstruction) -> str:
    """The sort's attributes as the custom-call's backend_config text (quoted)."""
    dims = ",".join(str(int(d)) for d in sort.attrs.get("dimensions", ()))
    stable = "true" if sort.attrs.get("is_stable") else "false"
    return f'"dimensions={{{dims}}};is_stable={stable}"'


def sort_result_shape(call: HloInstruction) -> Shape:
    """The shape of the sort a `__xlc$sort` call stands for (its outputs without the
    workspace: an array for one operand, else a tuple)."""
    elements = list(call.shape.tuple_shapes or ())[:-1]
    return elements[0] if len(elements) == 1 else Shape.tuple_of(elements)


def sort_call_sort(call: HloInstruction) -> HloInstruction:
    """The sort a `__xlc$sort` custom-call stands for, as a detached instruction (part of no
    computation, registered with no operand) over the call's operands and comparator."""
    raw = (call.get_extra("backend_config") or "").strip('"')
    dims = _DIMS.search(raw)
    stable = _STABLE.search(raw)
    attrs = {"dimensions": tuple(int(d) for d in dims.group(1).split(",") if d) if dims
             else (), "is_stable": bool(stable and stable.group(1) == "true")}
    return HloInstruction(Opcode.SORT, sort_result_shape(call), call.operands, attrs,
                          called=call.called, name=call.name)
