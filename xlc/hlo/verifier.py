"""The HLO verifier: checks that a module obeys HLO's structural, shape and attribute rules.

`verify_module(module)` / `verify_computation(comp)` return None or raise `VerificationError`.
Message format (API, tests assert it): the first line is one of

    instruction '<name>' in computation '<comp>': <rule>: <details>
    computation '<comp>': <rule>: <details>
    module '<module>': <rule>: <details>

Shape-inference failures are wrapped with their own message in place of `<rule>: <details>`
(`instruction 'add.3' in computation 'main': add: operand shapes must match, got f32[4] and
f32[5]`). Instruction errors are followed by a few lines of module text around the offending
instruction, which is marked with `>`:

    instruction 'add.3' in computation 'main': add: operand shapes must match, got ...
        %b = f32[5]{0} parameter(1)
      > %add.3 = f32[4]{0} add(%a, %b)
        ROOT %t = ...

Checked: operand counts (the opcode table's arity), required and well-formed attributes,
result shapes against `infer_instruction_shape` (ignoring layouts), operands and control
predecessors in the same computation, consistent users lists, a root, parameters numbered
0..n-1, no cycles, unique instruction and computation names, called computations that belong
to the module with the right signatures (scalar lambdas, fusion, while, conditional, call),
a call graph without cycles (no computation calls itself, directly or not), fusion
computations called by exactly one fusion, input_output_alias entries, the schedule, and
constant literals.
"""
from __future__ import annotations

import logging

from xlc.errors import ShapeError, VerificationError
from xlc.hlo.gemm_call import GEMM_TARGET, gemm_call_dot
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.lapack import check as lapack_check
from xlc.hlo.lapack import is_lapack_target
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape, ShapeIndex
from xlc.hlo.shape_inference import infer_instruction_shape
from xlc.hlo.shape_inference_util import fmt
from xlc.hlo.sort_call import SORT_TARGET, sort_call_sort
from xlc.hlo.verifier_checks import (
    Violation,
    check_attributes,
    check_called_count,
    check_layout,
    check_operand_count,
    check_specific,
)

log = logging.getLogger("xlc.hlo")

_CONTEXT_LINES = 2


# ---- message formatting --------------------------------------------------------------------
def _inst_text(inst: HloInstruction) -> str:
    try:
        from xlc.hlo.printer import print_instruction
    except ImportError:  # the printer is optional for the verifier
        return repr(inst)
    try:
        text = print_instruction(inst, print_metadata=False).strip()
    except Exception:  # noqa: BLE001 - a broken module may not print; fall back to repr
        return repr(inst)
    return "ROOT " + text if inst.is_root and not text.startswith("ROOT") else text


def _context(inst: HloInstruction) -> str:
    comp = inst.parent
    if comp is None or inst not in comp.instructions:
        return "  > " + _inst_text(inst)
    i = comp.instructions.index(inst)
    lo, hi = max(0, i - _CONTEXT_LINES), min(len(comp.instructions), i + _CONTEXT_LINES + 1)
    return "\n".join(("  > " if j == i else "    ") + _inst_text(comp.instructions[j])
                     for j in range(lo, hi))


def instruction_error(inst: HloInstruction, message: str,
                      comp: HloComputation | None = None) -> VerificationError:
    """`VerificationError` naming `inst` and its computation, with the text around it."""
    where = comp or inst.parent
    cname = where.name if where is not None else "?"
    loc = inst.source_loc
    return VerificationError(f"instruction '{inst.name}' in computation '{cname}': {message}\n"
                             + _context(inst), *(loc or ()))


def _comp_error(comp: HloComputation, rule: str, details: str) -> VerificationError:
    return VerificationError(f"computation '{comp.name}': {rule}: {details}")


def _module_error(module: HloModule, rule: str, details: str) -> VerificationError:
    return VerificationError(f"module '{module.name}': {rule}: {details}")


# ---- computation structure -----------------------------------------------------------------
def _check_structure(comp: HloComputation) -> None:
    members = set(map(id, comp.instructions))
    if len(members) != len(comp.instructions):
        raise _comp_error(comp, "instruction listed twice", ", ".join(
            i.name for i in comp.instructions if comp.instructions.count(i) > 1))
    for inst in comp.instructions:
        if inst.parent is not comp:
            owner = inst.parent.name if inst.parent else "none"
            raise instruction_error(inst, f"instruction has the wrong parent: '{owner}'", comp)
        for o in inst.operands:
            if id(o) not in members:
                owner = o.parent.name if o.parent else "none"
                raise instruction_error(inst, f"operand '{o.name}' belongs to another "
                                              f"computation: '{owner}'", comp)
            if inst not in o.users:
                raise instruction_error(inst, f"users list of operand '{o.name}' does not "
                                              f"contain this instruction", comp)
        for p in inst.control_predecessors:
            if id(p) not in members:
                raise instruction_error(inst, f"control predecessor '{p.name}' belongs to "
                                              f"another computation", comp)
        for u in inst.users:
            if inst not in u.operands:
                raise instruction_error(inst, f"user '{u.name}' does not use this instruction",
                                        comp)
            if id(u) not in members:
                raise instruction_error(inst, f"user '{u.name}' belongs to another computation",
                                        comp)
    if comp.root is None:
        raise _comp_error(comp, "no root instruction", f"{len(comp.instructions)} instructions")
    if id(comp.root) not in members:
        raise _comp_error(comp, "root instruction is not in the computation", comp.root.name)
    _check_parameters(comp)
    _check_acyclic(comp)


def _check_parameters(comp: HloComputation) -> None:
    for i, p in enumerate(comp.parameters):
        if p is None:
            raise _comp_error(comp, "parameters must be numbered 0..n-1 without gaps",
                              f"no parameter({i}) among {len(comp.parameters)} parameters")
        if p.parent is not comp or p.opcode is not Opcode.PARAMETER:
            raise _comp_error(comp, "parameter list holds a foreign instruction", p.name)
        if p.attrs.get("parameter_number") != i:
            raise instruction_error(p, f"parameter number {p.attrs.get('parameter_number')} "
                                       f"is listed at position {i}", comp)
    listed = set(map(id, comp.parameters))
    for inst in comp.instructions:
        if inst.opcode is Opcode.PARAMETER and id(inst) not in listed:
            raise instruction_error(inst, "parameter is not registered in the computation's "
                                          "parameter list", comp)


def _check_acyclic(comp: HloComputation) -> None:
    """DFS over operand and control edges; raises on a back edge."""
    state: dict[int, int] = {}  # 1 = on stack, 2 = done
    for start in comp.instructions:
        if id(start) in state:
            continue
        stack: list[tuple[HloInstruction, int]] = [(start, 0)]
        state[id(start)] = 1
        while stack:
            inst, i = stack[-1]
            preds = inst.operands + inst.control_predecessors
            if i < len(preds):
                stack[-1] = (inst, i + 1)
                p = preds[i]
                s = state.get(id(p))
                if s == 1:
                    path = [x.name for x, _ in stack]
                    cycle = path[path.index(p.name):] + [p.name]
                    raise instruction_error(p, "cycle in the instruction graph: "
                                               + " -> ".join(reversed(cycle)), comp)
                if s is None and p.parent is comp:
                    state[id(p)] = 1
                    stack.append((p, 0))
            else:
                state[id(inst)] = 2
                stack.pop()


# ---- instructions --------------------------------------------------------------------------
def verify_instruction(inst: HloInstruction) -> None:
    """Check one instruction's operand count, attributes, called computations and result
    shape. Requires its operands to be well formed (verify_computation checks those first)."""
    try:
        check_operand_count(inst)
        check_called_count(inst)
        check_layout(inst)
        check_attributes(inst)
        check_specific(inst)
        expected = infer_instruction_shape(inst)
    except Violation as v:
        raise instruction_error(inst, f"{v.rule}: {v.details}") from None
    except ShapeError as e:
        raise instruction_error(inst, str(e)) from None
    if expected is not None and not inst.shape.compatible(expected):
        raise instruction_error(inst, f"result shape does not match the inferred shape: "
                                      f"declared {fmt(inst.shape)} vs inferred {fmt(expected)}")
    _verify_workspace_call(inst)
    _verify_async_copy(inst)


def _verify_async_copy(inst: HloInstruction) -> None:
    """copy-start / copy-done pairs (XLA's rules): a copy-start's source element has the
    operand's layout and the destination its minor-to-major order (the memory space may
    differ: that is the point); every user of a copy-start is a copy-done, whose operand is a
    copy-start and whose shape is the destination's, memory space included."""
    if inst.opcode is Opcode.COPY_START:
        op = inst.operands[0].shape
        dest, src = (inst.shape.tuple_shapes or ())[:2]
        if src.layout != op.layout or _m2m(dest) != _m2m(op):
            raise instruction_error(inst, f"copy-start: the source element must have the "
                                          f"operand's layout and the destination its "
                                          f"minor-to-major order, got {inst.shape} for "
                                          f"operand {op}")
        bad = [u.name for u in inst.users if u.opcode is not Opcode.COPY_DONE]
        if bad:
            raise instruction_error(inst, f"copy-start: every user must be a copy-done, got "
                                          f"{', '.join(bad)}")
    elif inst.opcode is Opcode.COPY_DONE:
        start = inst.operands[0]
        if start.opcode is not Opcode.COPY_START:
            raise instruction_error(inst, f"copy-done: the operand must be a copy-start, got "
                                          f"{start.opcode.text} '{start.name}'")
        dest = (start.shape.tuple_shapes or ())[0]
        if inst.shape.layout != dest.layout:
            raise instruction_error(inst, f"copy-done: the result must have the destination's "
                                          f"layout {dest}, got {inst.shape}")


def _m2m(shape: Shape) -> tuple[int, ...] | None:
    return shape.layout.minor_to_major if shape.layout is not None else None


def _verify_workspace_call(inst: HloInstruction) -> None:
    """xlc's `__xlc$gemm` / `__xlc$sort` custom-calls (`gemm_call.py`, `sort_call.py`): a
    tuple whose last element is a u8[S] workspace, the rest exactly what the dot or sort they
    stand for (decoded from backend_config) gives."""
    target = inst.attrs.get("custom_call_target") if inst.opcode is Opcode.CUSTOM_CALL else None
    if isinstance(target, str) and is_lapack_target(target):
        why = lapack_check(inst)
        if why is not None:
            raise instruction_error(inst, why)
        return
    if target not in (GEMM_TARGET, SORT_TARGET):
        return
    elements = inst.shape.tuple_shapes or ()
    last = elements[-1] if elements else None
    if last is None or not last.is_array or last.element_type is not PrimitiveType.U8 \
            or last.rank != 1 or len(elements) < 2:
        raise instruction_error(inst, f"a '{target}' custom-call returns a tuple ending in a "
                                      f"u8[S] workspace, not {fmt(inst.shape)}")
    stands_for = gemm_call_dot(inst) if target == GEMM_TARGET else sort_call_sort(inst)
    try:
        verify_instruction(stands_for)
    except VerificationError as e:
        detail = str(e).split("\n", 1)[0].split(": ", 1)[-1]
        raise instruction_error(inst, f"the {stands_for.opcode.text} this '{target}' "
                                      f"custom-call stands for is invalid: {detail}") from None


def verify_computation(comp: HloComputation) -> None:
    """Check a computation's structure (parent links, users lists, root, parameter numbering,
    no cycles) and then every instruction in post order. Raises VerificationError."""
    _check_structure(comp)
    for inst in comp.post_order():
        verify_instruction(inst)


# ---- module-level rules --------------------------------------------------------------------
def _check_names(module: HloModule) -> None:
    seen_comps: set[str] = set()
    for comp in module.computations:
        if comp.name in seen_comps:
            raise _module_error(module, "computation names must be unique", f"'{comp.name}'")
        seen_comps.add(comp.name)
    owner: dict[str, HloComputation] = {}
    for comp in module.computations:
        for inst in comp.instructions:
            if inst.name in owner:
                raise instruction_error(inst, f"instruction name is not unique: also defined in "
                                              f"computation '{owner[inst.name].name}'", comp)
            owner[inst.name] = comp


def _check_calls(module: HloModule) -> None:
    members = set(map(id, module.computations))
    fusion_callers: dict[int, list[HloInstruction]] = {}
    all_callers: dict[int, list[HloInstruction]] = {}
    for comp in module.computations:
        for inst in comp.instructions:
            for callee in inst.called:
                if id(callee) not in members:
                    raise instruction_error(inst, f"called computation '{callee.name}' does not "
                                                  f"belong to the module")
                if callee is module.entry:
                    raise instruction_error(inst, "the entry computation cannot be called")
                all_callers.setdefault(id(callee), []).append(inst)
                if inst.opcode is Opcode.FUSION:
                    fusion_callers.setdefault(id(callee), []).append(inst)
                elif callee.is_fusion_computation:
                    raise instruction_error(inst, f"fusion computation '{callee.name}' can only "
                                                  f"be called by a fusion instruction")
    for key, fusions in fusion_callers.items():
        callers = all_callers[key]
        if len(callers) > 1:
            names = ", ".join(f"'{c.name}'" for c in callers)
            raise instruction_error(callers[1], f"fusion computation "
                                                f"'{fusions[0].called[0].name}' must be called "
                                                f"by exactly one fusion, got {names}")


def _check_call_graph(module: HloModule) -> None:
    """No computation calls itself, directly or through others (XLA's call graph is a DAG);
    raises naming the computations of the first cycle found and the instruction closing it."""
    state: dict[int, int] = {}  # 1 = on the DFS stack, 2 = done
    for start in module.computations:
        if id(start) in state:
            continue
        state[id(start)] = 1
        stack: list[tuple[HloComputation, list[tuple[HloInstruction, HloComputation]]]] = [
            (start, [(i, c) for i in start.instructions for c in i.called])]
        while stack:
            comp, edges = stack[-1]
            if not edges:
                state[id(comp)] = 2
                stack.pop()
                continue
            inst, callee = edges.pop(0)
            seen = state.get(id(callee))
            if seen == 1:
                names = [c.name for c, _ in stack]
                cycle = names[names.index(callee.name):] + [callee.name]
                raise _module_error(module, "call graph has a cycle",
                                    " -> ".join(cycle) + f" (instruction '{inst.name}' in "
                                    f"computation '{comp.name}' calls '{callee.name}')")
            if seen is None:
                state[id(callee)] = 1
                stack.append((callee, [(i, c) for i in callee.instructions for c in i.called]))


def _subshape(shape: Shape, index: ShapeIndex) -> Shape | None:
    s = shape
    for i in index:
        if s.tuple_shapes is None or not 0 <= i < len(s.tuple_shapes):
            return None
        s = s.tuple_shapes[i]
    return s


def _idx(index: ShapeIndex) -> str:
    return "{" + ",".join(str(i) for i in index) + "}"


def _check_aliases(module: HloModule) -> None:
    entry = module.entry
    assert entry is not None and entry.root is not None
    seen: set[ShapeIndex] = set()
    for a in module.input_output_alias:
        what = f"output {_idx(a.output_index)} <- parameter {a.param_number} {_idx(a.param_index)}"
        if a.kind not in ("may-alias", "must-alias"):
            raise _module_error(module, "input_output_alias kind must be may-alias or "
                                        "must-alias", f"{a.kind} in {what}")
        if a.output_index in seen:
            raise _module_error(module, "input_output_alias output index aliased twice", what)
        seen.add(a.output_index)
        out = _subshape(entry.root.shape, a.output_index)
        if out is None:
            raise _module_error(module, "input_output_alias output index does not exist",
                                f"{what} for result {fmt(entry.root.shape)}")
        if not 0 <= a.param_number < entry.num_parameters:
            raise _module_error(module, "input_output_alias parameter does not exist",
                                f"{what} for {entry.num_parameters} parameters")
        param = _subshape(entry.parameters[a.param_number].shape, a.param_index)
        if param is None:
            raise _module_error(module, "input_output_alias parameter index does not exist",
                                f"{what} for parameter "
                                f"{fmt(entry.parameters[a.param_number].shape)}")
        if not param.compatible(out):
            raise _module_error(module, "input_output_alias shapes must match",
                                f"{what}: {fmt(out)} vs {fmt(param)}")


def _check_schedule(module: HloModule) -> None:
    if module.schedule is None:
        return
    members = set(map(id, module.computations))
    for comp, seq in module.schedule.items():
        if id(comp) not in members:
            raise _module_error(module, "schedule names a computation outside the module",
                                f"'{comp.name}'")
        position: dict[int, int] = {}
        members_of_comp = set(map(id, comp.instructions))
        for n, inst in enumerate(seq):
            if id(inst) not in members_of_comp:
                where = f"computation '{inst.parent.name}'" if inst.parent else "no computation"
                raise _comp_error(comp, "schedule holds an instruction that is not in the "
                                        "computation", f"'{inst.name}' (in {where})")
            if id(inst) in position:
                raise _comp_error(comp, "schedule lists an instruction twice", f"'{inst.name}'")
            position[id(inst)] = n
        missing = [i.name for i in comp.instructions if id(i) not in position]
        if missing:
            raise _comp_error(comp, "schedule is missing instructions",
                              ", ".join(f"'{m}'" for m in missing))
        for inst in seq:
            for p in inst.operands + inst.control_predecessors:
                if position[id(p)] > position[id(inst)]:
                    raise instruction_error(inst, f"schedule places this instruction before "
                                                  f"its predecessor '{p.name}'", comp)


def verify_module(module: HloModule) -> None:
    """Check every computation (see `verify_computation`), then the module-wide rules: an entry
    computation, unique names, called computations in the module, fusion computations with one
    caller, input_output_alias entries and the schedule. Raises VerificationError on the first
    broken rule; returns None for a well-formed module."""
    if module.entry is None:
        raise _module_error(module, "no entry computation", f"{len(module.computations)} "
                                                            f"computations")
    if module.entry not in module.computations:
        raise _module_error(module, "entry computation is not in the module",
                            f"'{module.entry.name}'")
    for comp in module.computations:
        if comp.module is not None and comp.module is not module:
            raise _comp_error(comp, "computation belongs to another module",
                              f"'{comp.module.name}'")
    _check_names(module)
    for comp in module.computations:
        _check_structure(comp)
    _check_calls(module)
    _check_call_graph(module)
    for comp in module.computations_post_order():
        for inst in comp.post_order():
            verify_instruction(inst)
    _check_aliases(module)
    _check_schedule(module)
    log.debug("verified module %s (%d computations)", module.name, len(module.computations))
