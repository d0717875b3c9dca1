"""The HLO text parser (XLA's `hlo_parser` grammar, as JAX/XLA print it).

    module      ::= 'HloModule' name (',' key '=' value)* stack_frames? computation+
    computation ::= ['ENTRY'] name ['(' (pname ':' shape),* ')' '->' shape]
                    '{' instruction+ '}' [',' 'execution_thread="..."']
    instruction ::= ['ROOT'] name '=' shape opcode '(' operands ')' (',' key '=' value)*

`parse_module(text)` returns an `HloModule`; malformed text raises `ParseError` carrying the
1-based line and column of the offending token. Typed attributes follow `xlc.hlo.attrs`; other
attributes XLA knows for the opcode (`metadata`, `backend_config`, ...; `xlc.hlo.attr_keys`)
are kept as raw text in `inst.extra`, and keys XLA does not know for the opcode are refused.
Called computations may be referenced before their definition; the module's computation list
is reordered so callees come first.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from xlc.hlo.attr_keys import allowed_attribute_keys, unknown_attribute_message
from xlc.hlo.attrs import Attrs
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule, IOAlias
from xlc.hlo.lexer import Cursor
from xlc.hlo.literals import parse_literal
from xlc.hlo.opcodes import (
    CALLED_COMPUTATION_KEYS,
    COMPARISON_DIRECTIONS,
    COMPARISON_TYPES,
    FUSION_KINDS,
    Opcode,
)
from xlc.hlo.parse_attrs import (
    ATTR_PARSERS,
    COMPUTATION_KEYS,
    COMPUTATION_LIST_KEYS,
    parse_computation_list,
    parse_computation_ref,
    parse_shape_at,
    parse_shape_index,
)
from xlc.hlo.shape import Shape

log = logging.getLogger("xlc.hlo")

__all__ = ["parse_module", "parse_shape"]

_STACK_FRAME_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_LINE_REST = re.compile(r"[^\n]*")
_ATTR_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_\-]*)\s*=")
_ALIAS_KINDS = ("may-alias", "must-alias")


@dataclass
class _CalleeRef:
    """A called-computation reference waiting for resolution."""

    inst: HloInstruction
    key: str
    names: list[tuple[str, int]]


@dataclass
class _ParseState:
    module: HloModule
    comps: dict[str, HloComputation] = field(default_factory=dict)
    callee_refs: list[_CalleeRef] = field(default_factory=list)
    result_checks: list[tuple[HloComputation, Shape, int]] = field(default_factory=list)
    inst_names: set[str] = field(default_factory=set)
    param_limit: int = -1  # occurrences of `parameter(` in the text, computed on first use


def parse_shape(text: str) -> Shape:
    """Parse a shape spelled as in HLO text (`f32[8,128]{1,0}`, `(f32[], s32[2])`, `token[]`).
    Raises ParseError for malformed text or trailing garbage."""
    cur = Cursor(text, "<shape>")
    shape = parse_shape_at(cur)
    if not cur.at_end():
        cur.error(f"unexpected {cur.describe()} after shape")
    return shape


def parse_module(text: str, filename: str = "<hlo>", verify: bool = False) -> HloModule:
    """Parse HLO module text. Requires: XLA HLO text (names with or without `%`, optional
    signatures, optional ENTRY/ROOT). Guarantees: a module whose computations list callees
    before callers, fusion callees marked `is_fusion_computation`, `schedule` set (textual order)
    when the header says `is_scheduled=true`. With `verify=True` the verifier runs too."""
    cur = Cursor(text, filename)
    if not cur.keyword("HloModule"):
        cur.error(f"expected 'HloModule' but found {cur.describe()}")
    module = HloModule(cur.name("module name"))
    state = _ParseState(module)
    header = _parse_header(cur, module)
    _parse_stack_frames(cur, module)
    entry: HloComputation | None = None
    computations: list[HloComputation] = []
    while not cur.at_end():
        comp, is_entry, pos = _parse_computation(cur, state)
        computations.append(comp)
        if is_entry:
            if entry is not None:
                cur.error(f"multiple ENTRY computations: '{entry.name}' and '{comp.name}'", pos)
            entry = comp
    if not computations:
        cur.error("module has no computations")
    _resolve_callees(cur, state)
    module.entry = entry if entry is not None else computations[-1]
    module.computations = _callees_first(computations)
    for comp, want, pos in state.result_checks:
        assert comp.root is not None
        if not want.compatible(comp.root.shape):
            cur.error(f"computation '{comp.name}' returns {want.to_text(False)} but its root "
                      f"'{comp.root.name}' has shape {comp.root.shape.to_text(False)}", pos)
    _apply_header(cur, module, header)
    if verify:
        from xlc.hlo.verifier import verify_module

        verify_module(module)
    return module


# ---- module header --------------------------------------------------------------------------
def _parse_header(cur: Cursor, module: HloModule) -> dict[str, tuple[Any, int]]:
    """`, key=value` pairs after the module name. Known keys are parsed; the rest go raw into
    `module.header_extra`."""
    known: dict[str, tuple[Any, int]] = {}
    while cur.accept(","):
        cur.skip()
        pos = cur.pos
        m = cur.match(_ATTR_KEY)
        if not m:
            cur.error(f"expected attribute name but found {cur.describe()}")
        key = m.group(1)
        if key == "is_scheduled":
            word = cur.bare()
            if word not in ("true", "false"):
                cur.error("is_scheduled must be true or false")
            known[key] = (word == "true", pos)
        elif key == "entry_computation_layout":
            known[key] = (_parse_entry_layout(cur), pos)
        elif key == "input_output_alias":
            known[key] = (_parse_aliases(cur), pos)
        else:
            module.header_extra.append((key, cur.raw_value()))
    return known


def _parse_entry_layout(cur: Cursor) -> tuple[list[Shape], Shape]:
    """`{(f32[8]{0}, s32[])->f32[8]{0}}`."""
    cur.expect("{")
    cur.expect("(")
    params: list[Shape] = []
    if not cur.accept(")"):
        while True:
            params.append(parse_shape_at(cur))
            if cur.accept(")"):
                break
            cur.expect(",")
    cur.expect("->")
    result = parse_shape_at(cur)
    cur.expect("}")
    return params, result


def _parse_aliases(cur: Cursor) -> list[IOAlias]:
    """`{ {0}: (0, {}, may-alias), {1}: (1, {}) }`."""
    cur.expect("{")
    out: list[IOAlias] = []
    if cur.accept("}"):
        return out
    while True:
        out_index = parse_shape_index(cur)
        cur.expect(":")
        cur.expect("(")
        param = cur.integer("parameter number")
        cur.expect(",")
        param_index = parse_shape_index(cur)
        kind = "may-alias"
        if cur.accept(","):
            cur.skip()
            kind_pos = cur.pos
            word = cur.bare()
            if word not in _ALIAS_KINDS:
                cur.error(f"bad alias kind '{word}': expected may-alias or must-alias", kind_pos)
            kind = word
        cur.expect(")")
        out.append(IOAlias(out_index, param, param_index, kind))
        if cur.accept("}"):
            return out
        cur.expect(",")


def _parse_stack_frames(cur: Cursor, module: HloModule) -> None:
    """Keep the FileNames/FunctionNames/FileLocations/StackFrames tables verbatim."""
    cur.skip()
    start = cur.pos
    end = start
    while cur.peek_name() in _STACK_FRAME_TABLES:
        cur.name()
        while cur.peek_integer():
            cur.match(_LINE_REST)
        end = cur.pos
    if end > start:
        module.stack_frames = cur.text[start:end].rstrip()


def _apply_header(cur: Cursor, module: HloModule, header: dict[str, tuple[Any, int]]) -> None:
    """Schedule, entry layout check and aliasing from the header."""
    entry = module.entry
    assert entry is not None and entry.root is not None
    if "is_scheduled" in header and header["is_scheduled"][0]:
        module.schedule = {c: list(c.instructions) for c in module.computations
                           if not c.is_fusion_computation}
    if "entry_computation_layout" in header:
        (params, result), pos = header["entry_computation_layout"]
        if len(params) != len(entry.parameters):
            cur.error(f"entry_computation_layout has {len(params)} parameters but entry "
                      f"computation '{entry.name}' has {len(entry.parameters)}", pos)
        for i, (want, p) in enumerate(zip(params, entry.parameters)):
            if not want.compatible(p.shape):
                cur.error(f"entry_computation_layout parameter {i} {want.to_text(False)} is not "
                          f"compatible with parameter shape {p.shape.to_text(False)}", pos)
        if not result.compatible(entry.root.shape):
            cur.error(f"entry_computation_layout result {result.to_text(False)} is not "
                      f"compatible with root shape {entry.root.shape.to_text(False)}", pos)
    if "input_output_alias" in header:
        aliases, pos = header["input_output_alias"]
        for a in aliases:
            if not 0 <= a.param_number < len(entry.parameters):
                cur.error(f"input_output_alias refers to parameter {a.param_number} but the "
                          f"entry has {len(entry.parameters)}", pos)
        module.input_output_alias = aliases


# ---- computations ---------------------------------------------------------------------------
def _parse_computation(cur: Cursor, state: _ParseState) -> tuple[HloComputation, bool, int]:
    is_entry = cur.keyword("ENTRY")
    cur.skip()
    pos = cur.pos
    name = cur.name("computation name")
    if name in state.comps:
        cur.error(f"duplicate computation name '{name}'", pos)
    comp = HloComputation(name)
    state.comps[name] = comp
    state.module.add_computation(comp)
    result_shape, sig_pos = _parse_signature(cur)
    body_pos = cur.expect("{")
    names: dict[str, HloInstruction] = {}
    root: HloInstruction | None = None
    pending_control: list[tuple[HloInstruction, list[tuple[str, int]]]] = []
    while not cur.accept("}"):
        if cur.at_end():
            cur.error(f"expected '}}' at the end of computation '{name}' but found end of input")
        inst_pos = cur.pos
        inst, is_root, control = _parse_instruction(cur, state, comp, names)
        if is_root:
            if root is not None:
                cur.error(f"computation '{name}' has more than one ROOT instruction", inst_pos)
            root = inst
        if control:
            pending_control.append((inst, control))
    if not comp.instructions:
        cur.error(f"computation '{name}' has no instructions", body_pos)
    for inst, control in pending_control:
        preds = []
        for pname, ppos in control:
            if pname not in names:
                cur.error(f"control predecessor '{pname}' is not defined in computation "
                          f"'{name}'", ppos)
            preds.append(names[pname])
        inst.control_predecessors = tuple(preds)
    comp.root = root if root is not None else comp.instructions[-1]
    for i, p in enumerate(comp.parameters):
        if p is None:
            cur.error(f"computation '{name}' is missing parameter {i}", body_pos)
    if result_shape is not None:
        state.result_checks.append((comp, result_shape, sig_pos))
    if cur.accept(","):
        cur.skip()
        key_pos = cur.pos
        m = cur.match(_ATTR_KEY)
        if not m or m.group(1) != "execution_thread":
            cur.error("expected execution_thread=\"...\" after computation "
                      f"'{name}'", key_pos)
        comp.execution_thread = cur.string()
    return comp, is_entry, pos


def _parse_signature(cur: Cursor) -> tuple[Shape | None, int]:
    """Optional `(p: shape, ...) -> shape`: parameter names/shapes are not checked (as in
    XLA); returns the result shape (checked against the root later) and its position."""
    if not cur.accept("("):
        return None, 0
    if not cur.accept(")"):
        while True:
            cur.name("parameter name")
            cur.expect(":")
            parse_shape_at(cur)
            if cur.accept(")"):
                break
            cur.expect(",")
    cur.expect("->")
    cur.skip()
    pos = cur.pos
    return parse_shape_at(cur), pos


def _parse_instruction(cur: Cursor, state: _ParseState, comp: HloComputation,
                       names: dict[str, HloInstruction]
                       ) -> tuple[HloInstruction, bool, list[tuple[str, int]]]:
    cur.skip()
    start = cur.pos
    is_root = cur.keyword("ROOT")
    cur.skip()
    name_pos = cur.pos
    name = cur.name("instruction name")
    if name in names:
        cur.error(f"duplicate instruction name '{name}'", name_pos)
    cur.expect("=")
    shape = parse_shape_at(cur)
    cur.skip()
    op_pos = cur.pos
    op_text = cur.name("opcode")
    try:
        opcode = Opcode.from_text(op_text)
    except KeyError:
        cur.error(f"unknown opcode '{op_text}'", op_pos)
    cur.expect("(")
    operands: list[HloInstruction] = []
    attrs: dict[str, Any] = {}
    if opcode is Opcode.PARAMETER:
        if not cur.peek_integer():
            cur.error("missing parameter number")
        num_pos = cur.pos
        number = cur.integer()
        # Parameters are numbered 0..n-1, so a number beyond the count of `parameter(` in the
        # whole text can never be valid (and must not make us allocate a huge list).
        if state.param_limit < 0:
            state.param_limit = cur.text.count("parameter(")
        if number < 0 or number > state.param_limit:
            cur.error(f"bad parameter number {number}", num_pos)
        if number < len(comp.parameters) and comp.parameters[number] is not None:
            cur.error(f"duplicate parameter number {number} in computation '{comp.name}'",
                      num_pos)
        attrs["parameter_number"] = number
        cur.expect(")")
    elif opcode is Opcode.CONSTANT:
        if shape.is_token:
            cur.error("constant cannot have a token shape", op_pos)
        _skip_literal_shape(cur, shape)
        attrs["literal"] = parse_literal(cur, shape)
        cur.expect(")")
    elif not cur.accept(")"):
        while True:
            operands.append(_parse_operand(cur, comp, names))
            if cur.accept(")"):
                break
            cur.expect(",")
    called: list[tuple[str, list[tuple[str, int]]]] = []
    extra: list[tuple[str, str]] = []
    control: list[tuple[str, int]] = []
    attr_pos: dict[str, int] = {}
    allowed_keys = allowed_attribute_keys(opcode)
    while cur.accept(","):
        cur.skip()
        key_pos = cur.pos
        m = cur.match(_ATTR_KEY)
        if not m:
            cur.error(f"expected attribute name but found {cur.describe()}")
        key = m.group(1)
        if key in attrs or any(k == key for k, _ in called) or any(k == key for k, _ in extra):
            cur.error(f"duplicate attribute '{key}'", key_pos)
        if key not in allowed_keys:
            cur.error(unknown_attribute_message(opcode, key), key_pos)
        parser = ATTR_PARSERS.get(key)
        if parser is not None:
            cur.skip()
            attr_pos[key] = cur.pos
            if cur.pos >= len(cur.text) or cur.text[cur.pos] in ",\n":
                cur.error("expected attribute value")
            attrs[key] = parser(cur)
        elif key in COMPUTATION_KEYS:
            called.append((key, parse_computation_ref(cur)))
        elif key in COMPUTATION_LIST_KEYS:
            called.append((key, parse_computation_list(cur)))
        elif key == "control-predecessors":
            control = parse_computation_list(cur)
        else:
            cur.skip()
            if cur.pos >= len(cur.text) or cur.text[cur.pos] in ",\n":
                cur.error("expected attribute value")
            extra.append((key, cur.raw_value()))
    _check_attrs(cur, opcode, attrs, called, op_pos, attr_pos)
    unique = name
    if name in state.inst_names:
        # Same name in an earlier computation: instruction names are unique per module in our
        # IR, so this one gets the next free `name.N` (operands still refer to it as `name`).
        unique = state.module.unique_name(name)
        log.debug("renamed instruction %s in %s to %s", name, comp.name, unique)
    state.inst_names.add(unique)
    inst = HloInstruction(opcode, shape, operands, Attrs(attrs), (), unique, extra)
    inst.source_loc = (cur.filename, *cur.line_col(start))
    comp.add_instruction(inst, unique_name=False)
    state.module.reserve_name(unique)
    names[name] = inst
    if called:
        state.callee_refs.append(_CalleeRef(inst, ",".join(k for k, _ in called),
                                            _order_called(opcode, called)))
    return inst, is_root, control


def _skip_literal_shape(cur: Cursor, shape: Shape) -> None:
    """Older XLA prints `constant(f32[2] {1, 2})`: accept (and check) that shape prefix."""
    cur.skip()
    nm = cur.peek_name()
    if nm is None or not cur.text.startswith("[", cur.pos + len(nm)):
        return
    pos = cur.pos
    written = parse_shape_at(cur)
    if not written.compatible(shape):
        cur.error(f"constant literal has shape {written.to_text(False)} but the instruction "
                  f"has shape {shape.to_text(False)}", pos)


def _parse_operand(cur: Cursor, comp: HloComputation,
                   names: dict[str, HloInstruction]) -> HloInstruction:
    """`%name` or `f32[4]{0} %name` (the inline shape is checked against the definition)."""
    cur.skip()
    text = cur.text
    shape: Shape | None = None
    shape_pos = cur.pos
    if text.startswith("(", cur.pos):
        shape = parse_shape_at(cur)
    else:
        nm = cur.peek_name()
        if nm is not None and text.startswith("[", cur.pos + len(nm)):
            shape = parse_shape_at(cur)
    cur.skip()
    pos = cur.pos
    name = cur.name("operand name")
    if cur.peek() == "(":
        cur.error("nested instructions as operands are not supported", pos)
    inst = names.get(name)
    if inst is None:
        cur.error(f"operand '{name}' is not defined in computation '{comp.name}'", pos)
    if shape is not None and not shape.compatible(inst.shape):
        cur.error(f"operand '{name}' is written with shape {shape.to_text(False)} but has "
                  f"shape {inst.shape.to_text(False)}", shape_pos)
    return inst


def _order_called(opcode: Opcode, called: list[tuple[str, list[tuple[str, int]]]]
                  ) -> list[tuple[str, int]]:
    """Flatten called computation references in the order `inst.called` needs."""
    by_key = dict(called)
    order = CALLED_COMPUTATION_KEYS.get(opcode)
    if order is None:
        order = ("true_computation", "false_computation", "branch_computations", "to_apply",
                 "called_computations", "calls", "condition", "body", "select", "scatter")
    out: list[tuple[str, int]] = []
    for key in order:
        out.extend(by_key.pop(key, []))
    for refs in by_key.values():  # keys this opcode does not expect: keep them, in text order
        out.extend(refs)
    return out


_REQUIRED: dict[Opcode, tuple[str, ...]] = {
    Opcode.GET_TUPLE_ELEMENT: ("index",),
    Opcode.FUSION: ("kind", "calls"),
    Opcode.COMPARE: ("direction",),
    Opcode.WHILE: ("condition", "body"),
    Opcode.IOTA: ("iota_dimension",),
    Opcode.CUSTOM_CALL: ("custom_call_target",),
}


_ENUM_ATTRS: dict[Opcode, tuple[tuple[str, tuple[str, ...], str], ...]] = {
    Opcode.COMPARE: (("direction", COMPARISON_DIRECTIONS, "comparison direction"),
                     ("type", COMPARISON_TYPES, "comparison type")),
    Opcode.FUSION: (("kind", FUSION_KINDS, "fusion kind"),),
}


def _check_attrs(cur: Cursor, opcode: Opcode, attrs: dict[str, Any],
                 called: list[tuple[str, list[tuple[str, int]]]], op_pos: int,
                 attr_pos: dict[str, int]) -> None:
    """Attributes an opcode cannot do without (the verifier checks the rest)."""
    have = set(attrs) | {k for k, _ in called}
    for key in _REQUIRED.get(opcode, ()):
        if key not in have:
            cur.error(f"{opcode.text} is missing attribute '{key}'", op_pos)
    if opcode in CALLED_COMPUTATION_KEYS and opcode is not Opcode.FUSION:
        for key in CALLED_COMPUTATION_KEYS[opcode]:
            if key not in have:
                cur.error(f"{opcode.text} is missing attribute '{key}'", op_pos)
    for key, allowed, what in _ENUM_ATTRS.get(opcode, ()):
        if key in attrs and attrs[key] not in allowed:
            cur.error(f"unknown {what} '{attrs[key]}': expected one of {', '.join(allowed)}",
                      attr_pos[key])
    if opcode is Opcode.CONDITIONAL and not (
            "branch_computations" in have
            or {"true_computation", "false_computation"} <= have):
        cur.error("conditional needs branch_computations or true_computation and "
                  "false_computation", op_pos)


def _resolve_callees(cur: Cursor, state: _ParseState) -> None:
    for ref in state.callee_refs:
        comps = []
        for cname, pos in ref.names:
            comp = state.comps.get(cname)
            if comp is None:
                key = ref.key if "," not in ref.key else _key_of(cur, pos)
                cur.error(f"unknown computation '{cname}' in {key}", pos)
            comps.append(comp)
        ref.inst.called = tuple(comps)
        if ref.inst.opcode is Opcode.FUSION:
            comps[0].is_fusion_computation = True


def _key_of(cur: Cursor, pos: int) -> str:
    """The attribute key whose value contains `pos` (for error messages)."""
    keys = list(re.finditer(r"([A-Za-z_][A-Za-z0-9_\-]*)=", cur.text[:pos]))
    return keys[-1].group(1) if keys else "attribute"


def _callees_first(computations: list[HloComputation]) -> list[HloComputation]:
    """Stable reorder: each computation after everything it calls (text order otherwise)."""
    order: list[HloComputation] = []
    seen: set[int] = set()

    def visit(c: HloComputation) -> None:
        if id(c) in seen:
            return
        seen.add(id(c))
        for callee in c.called_computations():
            visit(callee)
        order.append(c)

    for c in computations:
        visit(c)
    return order
