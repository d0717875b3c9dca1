"""Custom-calls that run in Python on the host ("host calls"): which targets are, how a call
is described, and how it runs on arrays. Both backends use this: the CPU from compiled code
through a callback (`backend_cpu/host_call.py`), the GPU as a thunk with copies around it
(`backend_gpu/emit_custom_call.py`).

Host targets: JAX's LAPACK targets (`lapack.py`, on scipy) and the Python targets of the
`xlc.ffi` registry (`xlc.ffi.register(python=...)`, `xlc.pure_callback`, `xlc.debug`). One
more, `xlc$evaluate` (`EVALUATE`), is how a backend runs an instruction it has no code for:
its descriptor holds the instruction as a standalone HLO module (`describe_evaluation`),
which the reference evaluator runs on the host.

A call is described by a JSON string (`describe`): its target, backend_config and every
operand and result shape with its layout. The descriptor is plain data, so it can be stored
in code or in an executable file; `decode` turns it back into the shapes and the handler, and
`logical_view` / `to_physical` move between a buffer's bytes (in its layout) and the logical
array a handler works on.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from xlc.errors import CustomCallError, UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import Shape, parse_shape_text, physical_order

Handler = Callable[[dict[str, Any], list[np.ndarray], list[Shape]], Sequence[np.ndarray]]
"""handler(call description, operand arrays (logical, copies), result shapes) -> results."""


def _lapack(call: dict[str, Any], operands: list[np.ndarray],
            results: list[Shape]) -> Sequence[np.ndarray]:
    from xlc.hlo import lapack

    return lapack.run(lapack.decode_target(call["target"], call.get("config")), operands,
                      results)


def _python_target(fn: Callable[..., Any]) -> Handler:
    def run(call: dict[str, Any], operands: list[np.ndarray],
            results: list[Shape]) -> Sequence[np.ndarray]:
        out = fn(*operands)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(results):
            raise ValueError(f"returned {len(outs)} array(s), the custom-call has "
                             f"{len(results)} result(s)")
        for k, (o, s) in enumerate(zip(outs, results)):
            if np.shape(o) != s.dims:
                raise ValueError(f"result {k} has shape {np.shape(o)}, the custom-call "
                                 f"declares {s}")
        return outs
    return run


EVALUATE = "xlc$evaluate"
"""The host target of instructions a backend runs through the evaluator (module docstring)."""


@lru_cache(maxsize=64)
def _standalone(text: str) -> Any:
    from xlc.hlo.parser import parse_module

    return parse_module(text)


def _evaluate(call: dict[str, Any], operands: list[np.ndarray],
              results: list[Shape]) -> Sequence[np.ndarray]:
    from xlc.hlo.evaluator import evaluate

    value = evaluate(_standalone(call["hlo"]), operands)
    return list(value) if isinstance(value, tuple) else [value]


def standalone_text(inst: HloInstruction) -> str:
    """HLO text of a module whose entry computes `inst` alone: one parameter per distinct
    operand (in `distinct_operands` order), the computations `inst` calls (and theirs), and
    `inst` as the root. Metadata is left out."""
    from xlc.hlo.printer import print_computation, print_instruction, shape_to_text

    comps: list[Any] = []

    def visit(c: Any) -> None:
        if c in comps:
            return
        for callee in c.called_computations():
            visit(callee)
        comps.append(c)
    for c in inst.called:
        visit(c)
    lines = [f"HloModule host_{inst.name}", ""]
    lines += [print_computation(c, print_metadata=False, is_entry=False) + "\n" for c in comps]
    lines.append("ENTRY %main {")
    for k, o in enumerate(distinct_operands(inst)):
        lines.append(f"  %{o.name} = {shape_to_text(o.shape)} parameter({k})")
    lines.append("  ROOT " + print_instruction(inst, print_metadata=False))
    lines.append("}")
    return "\n".join(lines) + "\n"


def distinct_operands(inst: HloInstruction) -> list[HloInstruction]:
    """`inst`'s operands, each once, in first-use order."""
    out: list[HloInstruction] = []
    for o in inst.operands:
        if o not in out:
            out.append(o)
    return out


def describe_evaluation(inst: HloInstruction, backend: str) -> str:
    """The descriptor of running `inst` on the host through the evaluator (`EVALUATE`); its
    operands are `distinct_operands(inst)`, its results the leaves of `inst`'s shape."""
    return json.dumps({"target": EVALUATE, "config": None, "backend": backend,
                       "instruction": inst.name, "opcode": inst.opcode.text,
                       "hlo": standalone_text(inst),
                       "operands": [o.shape.to_text() for o in distinct_operands(inst)],
                       "results": [s.to_text() for s in result_shapes(inst)]}, sort_keys=True)


def handler_for(target: str, backend: str = "cpu") -> Handler | None:
    """The handler of `target` (a LAPACK target, or a Python target registered for
    `backend`, or the evaluator for `EVALUATE`), or None when no host implementation
    exists."""
    from xlc.hlo.ffi_registry import lookup
    from xlc.hlo.lapack import is_lapack_target

    if target == EVALUATE:
        return _evaluate
    if is_lapack_target(target):
        return _lapack
    registered = lookup(target, backend)
    if registered is None and backend != "cpu":  # Python targets serve every backend
        registered = lookup(target, "cpu")
    if registered is not None and registered.kind == "python" and registered.python:
        return _python_target(registered.python)
    return None


def result_shapes(inst: HloInstruction) -> list[Shape]:
    """The result arrays of `inst`: a tuple's elements, else the one array."""
    return list(inst.shape.tuple_shapes or ()) if inst.shape.is_tuple else [inst.shape]


def describe(inst: HloInstruction, backend: str = "cpu") -> str:
    """The descriptor of host-call `inst` (see the module docstring)."""
    return json.dumps({"target": str(inst.attrs.get("custom_call_target", "")),
                       "config": inst.get_extra("backend_config"), "backend": backend,
                       "operands": [o.shape.to_text() for o in inst.operands],
                       "results": [s.to_text() for s in result_shapes(inst)]}, sort_keys=True)


@lru_cache(maxsize=256)
def decode(desc: str) -> tuple[dict[str, Any], list[Shape], list[Shape], Handler]:
    """(description, operand shapes, result shapes, handler) of a descriptor;
    UnsupportedOpError when this process has no handler for its target."""
    call = json.loads(desc)
    handler = handler_for(call["target"], call.get("backend", "cpu"))
    if handler is None:
        raise UnsupportedOpError(f"host call '{call['target']}' is not known to this process")
    return (call, [parse_shape_text(s) for s in call["operands"]],
            [parse_shape_text(s) for s in call["results"]], handler)


def logical_view(flat: np.ndarray, shape: Shape) -> np.ndarray:
    """The logical array over `flat`, a buffer's elements in `shape`'s layout (a view)."""
    order = physical_order(shape)
    return flat.reshape(tuple(shape.dims[d] for d in order)).transpose(np.argsort(order))


def to_physical(value: Any, shape: Shape) -> np.ndarray:
    """`value` (a logical array of `shape`) as a contiguous array in `shape`'s layout."""
    dtype = shape.element_type.dtype  # type: ignore[union-attr]
    arr = np.asarray(value, dtype=dtype).reshape(shape.dims)
    return np.ascontiguousarray(arr.transpose(physical_order(shape)))


def run(desc: str, operands: list[np.ndarray]) -> list[np.ndarray]:
    """Run the call of descriptor `desc` on logical operand arrays; its logical results."""
    call, _ops, res_shapes, handler = decode(desc)
    return [np.asarray(v) for v in handler(call, operands, res_shapes)]


def run_on_bytes(desc: str, raws: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run the call of descriptor `desc` on its operands' bytes (uint8 arrays, each buffer in
    its shape's layout); returns each result as a contiguous array in its layout, ready to
    copy into its buffer. CustomCallError (`failure`) when the call raises."""
    _call, op_shapes, res_shapes, _handler = decode(desc)
    arrays = [logical_view(raw.view(s.element_type.dtype), s).copy()  # type: ignore[union-attr]
              for raw, s in zip(raws, op_shapes)]
    try:
        values = run(desc, arrays)
    except Exception as e:  # noqa: BLE001 - reported as the call's failure
        raise failure(desc, e) from e
    return [to_physical(v, s) for v, s in zip(values, res_shapes)]


def run_handler(handler: Handler, inst: HloInstruction,
                operands: list[np.ndarray]) -> list[np.ndarray]:
    """Run host call `inst` (no descriptor: the evaluator) on logical operand arrays."""
    call = {"target": str(inst.attrs.get("custom_call_target", "")),
            "config": inst.get_extra("backend_config")}
    return [np.asarray(v) for v in handler(call, operands, result_shapes(inst))]


def failure(desc: str, error: BaseException) -> CustomCallError:
    """The CustomCallError of a host call that raised `error` (a CustomCallError as is)."""
    if isinstance(error, CustomCallError):
        return error
    call = json.loads(desc)
    target = call.get("target", "?")
    if target == EVALUATE:
        return CustomCallError(f"'{call.get('opcode')}' ({call.get('instruction')}), run on the "
                               f"host, failed: {type(error).__name__}: {error}")
    return CustomCallError(f"custom-call target '{target}' failed on the host: "
                           f"{type(error).__name__}: {error}")


def refuse_python_targets(module: Any) -> None:
    """ArtifactError if `module` calls a Python custom-call target (a Python function cannot
    be saved in an executable file)."""
    from xlc.errors import ArtifactError
    from xlc.hlo.ffi_registry import lookup
    from xlc.hlo.opcodes import Opcode

    for comp in getattr(module, "computations", ()):
        for inst in comp.instructions:
            if inst.opcode is not Opcode.CUSTOM_CALL:
                continue
            t = lookup(str(inst.attrs.get("custom_call_target", "")), "cpu")
            if t is not None and t.kind == "python":
                raise ArtifactError(f"cannot serialize: the program calls custom-call target "
                                    f"'{t.name}', a Python function (xlc.pure_callback, "
                                    "xlc.debug or xlc.ffi.register(python=...)), which cannot "
                                    "be saved; register C code or LLVM IR instead")
