"""What an executor can run: a module check shared by the backends and the evaluator.

The parser and verifier accept everything XLA's text format has that xlc models, including
bounded dynamic dimensions (`f32[<=8]`) and 4-bit integers (`s4`, `u4`). Not every executor runs
them: `check_runnable(module, backend, unsupported_types)` raises an `UnsupportedOpError` naming
the backend, the instruction, its opcode and what is missing, before any pass touches the
module, instead of failing somewhere inside code generation.
"""
from __future__ import annotations

from collections.abc import Iterable

from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloModule
from xlc.hlo.shape import PrimitiveType

FOUR_BIT_TYPES: frozenset[PrimitiveType] = frozenset({PrimitiveType.S4, PrimitiveType.U4})
"""Element types the native backends do not run (the evaluator and interpreter do)."""


def check_runnable(module: HloModule, backend: str,
                   unsupported_types: Iterable[PrimitiveType] = ()) -> None:
    """Raise UnsupportedOpError for the first instruction of `module` whose shape has a dynamic
    dimension (no executor runs those) or an element type in `unsupported_types`; `backend` is
    the executor's name as it should appear in the message (`CPU backend`, `evaluator`)."""
    banned = frozenset(unsupported_types)
    for comp in module.computations:
        for inst in comp.instructions:
            for _, leaf in inst.shape.leaves():
                where = (f"instruction '{inst.name}' ({inst.opcode.text}) in computation "
                         f"'{comp.name}' has shape {inst.shape.to_text(False)}")
                if leaf.dynamic_dims:
                    raise UnsupportedOpError(f"{backend}: dynamic dimensions are not supported: "
                                             f"{where}")
                et = leaf.element_type
                if et is not None and et in banned:
                    raise UnsupportedOpError(f"{backend}: element type {et.text} is not "
                                             f"supported: {where}")
