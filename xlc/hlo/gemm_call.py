"""The `__xlc$gemm` custom-call: a dot with a workspace output (what XLA does for library
GEMM calls, whose scratch becomes an extra output that buffer assignment places).

    d.gemm = (f32[m,n], u8[S]) custom-call(a, b), custom_call_target="__xlc$gemm",
             backend_config="lhs_batch_dims={};rhs_batch_dims={};lhs_contracting_dims={1};..."

Output {0} is `dot(a, b)` with the dimension numbers in `backend_config`; output {1} is S bytes
of scratch whose contents are unspecified. `output_may_reuse_lhs={1}` in `backend_config` says
that the backend's GEMM stores output {0} correctly over `a` (`xlc.backend_cpu.gemm.
writes_over_a`): the buffer assignment may then give the output a's buffer where a dies at the
call (`xlc.passes.alias_rules`). The CPU backend's `gemm-workspace` pass makes these
calls; the evaluator runs them as the dot (workspace zeros), so every optimized CPU module
stays evaluable.
"""
from __future__ import annotations

import re

from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode

GEMM_TARGET = "__xlc$gemm"
"""The custom-call target of a dot with a workspace output."""

DIM_KEYS = ("lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims", "rhs_contracting_dims")
_ENTRY = re.compile(r"(\w+)=\{([\d,]*)\}")


REUSE_LHS_KEY = "output_may_reuse_lhs"
"""The backend_config entry (`{1}`) of a call whose output may be stored over its lhs."""


def encode_config(dot: HloInstruction, reuse_lhs: bool = False) -> str:
    """The custom-call's backend_config text (quoted): the dot's dimension numbers, and
    REUSE_LHS_KEY when `reuse_lhs`."""
    parts = [f"{key}={{{','.join(str(int(d)) for d in dot.attrs.get(key, ()))}}}"
             for key in DIM_KEYS]
    if reuse_lhs:
        parts.append(f"{REUSE_LHS_KEY}={{1}}")
    return '"' + ";".join(parts) + '"'


def is_gemm_call(inst: HloInstruction) -> bool:
    """Whether `inst` is a `__xlc$gemm` custom-call."""
    return inst.opcode is Opcode.CUSTOM_CALL and \
        inst.attrs.get("custom_call_target") == GEMM_TARGET


def may_reuse_lhs(call: HloInstruction) -> bool:
    """Whether `__xlc$gemm` custom-call `call` may store its output {0} over its lhs."""
    raw = call.get_extra("backend_config") or ""
    return any(m.group(1) == REUSE_LHS_KEY and m.group(2) == "1" for m in _ENTRY.finditer(raw))


def gemm_call_dot(call: HloInstruction) -> HloInstruction:
    """The dot a `__xlc$gemm` custom-call stands for, as a detached instruction (part of no
    computation, registered with no operand) over the call's operands."""
    raw = (call.get_extra("backend_config") or "").strip('"')
    dims = {m.group(1): tuple(int(d) for d in m.group(2).split(",") if d)
            for m in _ENTRY.finditer(raw)}
    attrs = {key: dims[key] for key in DIM_KEYS if dims.get(key)}
    assert call.shape.tuple_shapes is not None
    return HloInstruction(Opcode.DOT, call.shape.tuple_shapes[0], call.operands, attrs,
                          name=call.name)
