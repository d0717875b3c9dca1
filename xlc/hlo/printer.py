"""The HLO text printer: XLA's current syntax (`%` names, no operand shapes, `/*index=N*/` every
five tuple elements/operands, callees before callers).

Contract: for any module `m` that the parser produced, `print_module(parse_module(
print_module(m))) == print_module(m)`.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from xlc.hlo.attrs import ConvDimLabels, Literal, PaddingConfig, SliceDim, Window
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule, IOAlias
from xlc.hlo.lexer import encode_string
from xlc.hlo.literals import literal_to_text
from xlc.hlo.opcodes import CALLED_COMPUTATION_KEYS, Opcode
from xlc.hlo.parse_attrs import ATTR_PRINT_ORDER
from xlc.hlo.shape import PrimitiveType, Shape

__all__ = ["print_module", "print_computation", "print_instruction", "literal_to_text",
           "shape_to_text"]

_ORDER = {k: i for i, k in enumerate(ATTR_PRINT_ORDER)}


# ---- shapes ---------------------------------------------------------------------------------
def shape_to_text(shape: Shape, layout: bool = True) -> str:
    """A shape as XLA prints it: tuples get `/*index=N*/` before every fifth element; arrays
    without a layout print the default one (so text -> module -> text is stable)."""
    if shape.tuple_shapes is None:
        if layout and shape.layout is None and shape.dims and not shape.is_token:
            shape = shape.with_default_layout()  # the parser always assigns one
        return shape.to_text(layout)
    parts = []
    for i, s in enumerate(shape.tuple_shapes):
        text = shape_to_text(s, layout)
        parts.append(f"/*index={i}*/{text}" if i and i % 5 == 0 else text)
    return "(" + ", ".join(parts) + ")"


def _shape_index(index: tuple[int, ...]) -> str:
    return "{" + ",".join(str(i) for i in index) + "}"


# ---- attribute values -----------------------------------------------------------------------
def _padding(p: PaddingConfig) -> str:
    interior = any(it for _, _, it in p.dims)
    return "x".join(f"{lo}_{hi}_{it}" if interior else f"{lo}_{hi}" for lo, hi, it in p.dims)


def _slice_text(dims: tuple[SliceDim, ...]) -> str:
    """XLA prints every stride when any stride is not 1: `{[0:8:1], [2:14:3]}`."""
    strides = any(d.stride != 1 for d in dims)
    return "{" + ", ".join(f"[{d.start}:{d.limit}:{d.stride}]" if strides else
                           f"[{d.start}:{d.limit}]" for d in dims) + "}"


def _value_text(key: str, value: Any) -> str:
    """Typed attribute value -> text."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, str):
        return encode_string(value) if key == "custom_call_target" else value
    if isinstance(value, PaddingConfig):
        return _padding(value)
    if isinstance(value, (Window, ConvDimLabels)):
        return str(value)
    if isinstance(value, tuple):
        if value and isinstance(value[0], SliceDim):
            return _slice_text(value)
        return "{" + ",".join(str(int(v)) for v in value) + "}"
    if isinstance(value, list):
        return _value_text(key, tuple(value))
    raise TypeError(f"cannot print attribute {key}={value!r}")


def _typed_attrs(inst: HloInstruction) -> list[str]:
    out = []
    keys = [k for k in inst.attrs if k not in ("parameter_number", "literal")]
    keys.sort(key=lambda k: (_ORDER.get(k, len(_ORDER)), k))
    for k in keys:
        out.append(f"{k}={_value_text(k, inst.attrs[k])}")
    return out


def _comp_ref(c: HloComputation) -> str:
    return "%" + c.name


def _comp_list(comps: tuple[HloComputation, ...] | list[HloComputation]) -> str:
    return "{" + ", ".join(_comp_ref(c) for c in comps) + "}"


def _called_conditional(inst: HloInstruction) -> list[str]:
    pred = bool(inst.operands) and inst.operands[0].shape.element_type is PrimitiveType.PRED
    if pred and len(inst.called) == 2:
        return [f"true_computation={_comp_ref(inst.called[0])}",
                f"false_computation={_comp_ref(inst.called[1])}"]
    return [f"branch_computations={_comp_list(inst.called)}"]


def _called_custom_call(inst: HloInstruction) -> list[str]:
    return [f"called_computations={_comp_list(inst.called)}"]


_CALLED_PRINTERS: dict[Opcode, Callable[[HloInstruction], list[str]]] = {
    Opcode.CONDITIONAL: _called_conditional,
    Opcode.CUSTOM_CALL: _called_custom_call,
}


def _called_attrs(inst: HloInstruction) -> list[str]:
    if not inst.called:
        return []
    special = _CALLED_PRINTERS.get(inst.opcode)
    if special is not None:
        return special(inst)
    keys = CALLED_COMPUTATION_KEYS.get(inst.opcode, ())
    if len(keys) == len(inst.called):
        return [f"{k}={_comp_ref(c)}" for k, c in zip(keys, inst.called)]
    if len(inst.called) == 1:
        return [f"to_apply={_comp_ref(inst.called[0])}"]
    return [f"called_computations={_comp_list(inst.called)}"]


# ---- instructions -----------------------------------------------------------------------------
def _operands_text(inst: HloInstruction) -> str:
    if inst.opcode is Opcode.PARAMETER:
        return str(inst.attrs.get("parameter_number", 0))
    if inst.opcode is Opcode.CONSTANT:
        lit = inst.attrs.get("literal")
        return literal_to_text(lit, inst.shape) if isinstance(lit, Literal) else "{...}"
    parts = []
    for i, o in enumerate(inst.operands):
        parts.append(f"/*index={i}*/%{o.name}" if i and i % 5 == 0 else f"%{o.name}")
    return ", ".join(parts)


# Raw attributes XLA prints before `control-predecessors` (the others come after it).
_BEFORE_CONTROL = frozenset({"sharding", "frontend_attributes", "statistics"})


def print_instruction(inst: HloInstruction, print_metadata: bool = True) -> str:
    """One instruction line without indentation or `ROOT`:
    `%name = shape opcode(%a, %b), typed attrs, called computations, [sharding,
    frontend_attributes,] control-predecessors, other raw attributes` (raw attributes keep
    their original relative order; `print_metadata=False` drops `metadata=`)."""
    text = (f"%{inst.name} = {shape_to_text(inst.shape)} {inst.opcode.text}"
            f"({_operands_text(inst)})")
    attrs = _typed_attrs(inst) + _called_attrs(inst)
    extra = [(k, v) for k, v in inst.extra if print_metadata or k != "metadata"]
    attrs += [f"{k}={v}" for k, v in extra if k in _BEFORE_CONTROL]
    if inst.control_predecessors:
        attrs.append("control-predecessors={" +
                     ", ".join(f"%{p.name}" for p in inst.control_predecessors) + "}")
    attrs += [f"{k}={v}" for k, v in extra if k not in _BEFORE_CONTROL]
    if attrs:
        text += ", " + ", ".join(attrs)
    return text


# ---- computations and modules -------------------------------------------------------------
def _root(comp: HloComputation) -> HloInstruction | None:
    """The root, or the last instruction when none was set (the parser's rule)."""
    if comp.root is not None:
        return comp.root
    return comp.instructions[-1] if comp.instructions else None


def _signature(comp: HloComputation) -> str:
    params = ", ".join(f"{p.name}: {shape_to_text(p.shape, False)}" for p in comp.parameters
                       if p is not None)
    root = _root(comp)
    result = shape_to_text(root.shape, False) if root is not None else "()"
    return f"({params}) -> {result}"


def print_computation(comp: HloComputation, print_metadata: bool = True,
                      order: list[HloInstruction] | None = None, is_entry: bool | None = None
                      ) -> str:
    """`[ENTRY ]%name (p: f32[4]) -> f32[4] {` + one indented line per instruction + `}`.
    `order` overrides the instruction order (the module printer passes the schedule)."""
    if is_entry is None:
        is_entry = comp.module is not None and comp.module.entry is comp
    root = _root(comp)
    head = ("ENTRY " if is_entry else "") + f"%{comp.name} {_signature(comp)} {{"
    lines = [head]
    for inst in (order if order is not None else comp.instructions):
        prefix = "  ROOT " if inst is root else "  "
        lines.append(prefix + print_instruction(inst, print_metadata))
    lines.append("}")
    text = "\n".join(lines)
    if comp.execution_thread and comp.execution_thread != "main":
        text += f", execution_thread={encode_string(comp.execution_thread)}"
    return text


def _alias_text(aliases: list[IOAlias]) -> str:
    items = [f"{_shape_index(a.output_index)}: ({a.param_number}, "
             f"{_shape_index(a.param_index)}, {a.kind})" for a in aliases]
    return "{ " + ", ".join(items) + " }"


def entry_layout_text(module: HloModule) -> str:
    """`{(f32[8]{0}, s32[])->f32[8]{0}}` regenerated from the entry computation."""
    entry = module.entry
    assert entry is not None
    root = _root(entry)
    assert root is not None
    params = shape_to_text(Shape.tuple_of([p.shape for p in entry.parameters if p is not None]))
    return "{" + params + "->" + shape_to_text(root.shape) + "}"


def _scheduled_order(comp: HloComputation, sequence: list[HloInstruction]
                     ) -> list[HloInstruction]:
    """The schedule's sequence, minus instructions no longer in `comp`, plus (at the end, in
    list order) any instruction a pass added without scheduling it, so nothing is lost."""
    members = {id(i) for i in comp.instructions}
    order = [i for i in sequence if id(i) in members]
    if len(order) != len(comp.instructions):
        listed = {id(i) for i in order}
        order += [i for i in comp.instructions if id(i) not in listed]
    return order


def computation_print_order(module: HloModule) -> list[HloComputation]:
    """Callees before callers, otherwise in `module.computations` order (what XLA's
    `MakeComputationPostOrder` gives, so XLA's own dumps print back identically). Computations
    only reachable through calls but missing from the list are included too."""
    order: list[HloComputation] = []
    seen: set[int] = set()

    def visit(c: HloComputation) -> None:
        if id(c) in seen:
            return
        seen.add(id(c))
        for callee in c.called_computations():
            visit(callee)
        order.append(c)

    for c in module.computations:
        visit(c)
    if module.entry is not None:
        visit(module.entry)
    return order


def print_module(module: HloModule, print_metadata: bool = True) -> str:
    """The whole module: header (`is_scheduled`, `input_output_alias`,
    `entry_computation_layout`, then other header attributes verbatim), the stack-frame tables,
    then every computation callees-first, separated by blank lines. Scheduled computations list
    their instructions in schedule order."""
    header = f"HloModule {module.name}"
    if module.schedule is not None:
        header += ", is_scheduled=true"
    if module.input_output_alias:
        header += f", input_output_alias={_alias_text(module.input_output_alias)}"
    if module.entry is not None and module.entry.instructions:
        header += f", entry_computation_layout={entry_layout_text(module)}"
    for k, v in module.header_extra:
        header += f", {k}={v}"
    parts = [header + "\n"]
    if module.stack_frames:
        parts.append(module.stack_frames + "\n\n")
    for comp in computation_print_order(module):
        order = None
        if module.schedule is not None and comp in module.schedule:
            order = _scheduled_order(comp, module.schedule[comp])
        parts.append(print_computation(comp, print_metadata, order, comp is module.entry)
                     + "\n")
    return "\n".join(parts) + "\n"
