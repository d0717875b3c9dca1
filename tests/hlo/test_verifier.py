"""Tests of xlc.hlo.verifier: every corpus module verifies clean; broken modules (HLO text parsed
with verify=False, or a parsed module edited through the IR API where the parser itself refuses
the text) raise VerificationError with the documented message and context lines."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import CORPUS, corpus_cases, requires_corpus
from xlc.errors import VerificationError
from xlc.hlo.attrs import Literal
from xlc.hlo.ir import HloInstruction, HloModule, IOAlias
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module
from xlc.hlo.shape import PrimitiveType, Shape
from xlc.hlo.verifier import verify_computation, verify_module


def parse(text: str) -> HloModule:
    return parse_module(text, verify=False)


def first_line(module: HloModule) -> str:
    with pytest.raises(VerificationError) as info:
        verify_module(module)
    return str(info.value).splitlines()[0]


def expect(text_or_module: str | HloModule, message: str) -> None:
    """The first line of the error equals `message` exactly."""
    module = parse(text_or_module) if isinstance(text_or_module, str) else text_or_module
    assert first_line(module) == message


# ---- the corpus ----------------------------------------------------------------------------
@requires_corpus
@pytest.mark.parametrize("case", corpus_cases())
@pytest.mark.parametrize("filename", ["module.hlo", "optimized.hlo"])
def test_corpus_verifies_clean(case: str, filename: str) -> None:
    module = parse((Path(CORPUS) / "cases" / case / filename).read_text())
    assert verify_module(module) is None
    for comp in module.computations:
        assert verify_computation(comp) is None


# ---- the error format ----------------------------------------------------------------------
ADD_MISMATCH = """HloModule m
ENTRY %main (a: f32[4], b: f32[5]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %b = f32[5]{0} parameter(1)
  %add.3 = f32[4]{0} add(%a, %b)
  ROOT %n = f32[4]{0} negate(%add.3)
}
"""


def test_error_format_with_context_lines() -> None:
    with pytest.raises(VerificationError) as info:
        verify_module(parse(ADD_MISMATCH))
    assert str(info.value) == (
        "instruction 'add.3' in computation 'main': add: operand shapes must match, got f32[4] "
        "and f32[5]\n"
        "    %a = f32[4]{0} parameter(0)\n"
        "    %b = f32[5]{0} parameter(1)\n"
        "  > %add.3 = f32[4]{0} add(%a, %b)\n"
        "    ROOT %n = f32[4]{0} negate(%add.3)")


def test_parse_module_verify_flag_raises() -> None:
    with pytest.raises(VerificationError, match=r"^instruction 'add\.3' in computation 'main'"):
        parse_module(ADD_MISMATCH, verify=True)


# ---- broken modules written as HLO text ------------------------------------------------------
BROKEN: dict[str, tuple[str, str]] = {
    "declared_shape": ("""HloModule m
ENTRY %main (a: f32[4]) -> f32[5] {
  %a = f32[4]{0} parameter(0)
  ROOT %n = f32[5]{0} negate(%a)
}""", "instruction 'n' in computation 'main': result shape does not match the inferred shape: "
      "declared f32[5] vs inferred f32[4]"),
    "operand_count": ("""HloModule m
ENTRY %main (a: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%a, %a)
}""", "instruction 'n' in computation 'main': wrong number of operands: expected 1, got 2"),
    "float_only": ("""HloModule m
ENTRY %main (a: s32[4]) -> s32[4] {
  %a = s32[4]{0} parameter(0)
  ROOT %e = s32[4]{0} exponential(%a)
}""", "instruction 'e' in computation 'main': exponential: expected a floating-point or complex "
      "operand, got s32[4]"),
    "broadcast_dims": ("""HloModule m
ENTRY %main (a: f32[3]) -> f32[3,4] {
  %a = f32[3]{0} parameter(0)
  ROOT %b = f32[3,4]{1,0} broadcast(%a), dimensions={1}
}""", "instruction 'b' in computation 'main': broadcast: operand dimension 0 (size 3) must be 1 "
      "or equal output dimension 1 (size 4), got f32[3] into f32[3,4]"),
    "dot_contracting": ("""HloModule m
ENTRY %main (a: f32[4,3], b: f32[4,5]) -> f32[4,5] {
  %a = f32[4,3]{1,0} parameter(0)
  %b = f32[4,5]{1,0} parameter(1)
  ROOT %d = f32[4,5]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", "instruction 'd' in computation 'main': dot: contracting dimension sizes must match, got "
      "lhs f32[4,3] dim 1 and rhs f32[4,5] dim 0"),
    "reducer_signature": ("""HloModule m
%add (x: f32[], y: f32[], z: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  %z = f32[] parameter(2)
  ROOT %s = f32[] add(%x, %y)
}
ENTRY %main (a: f32[4,8]) -> f32[4] {
  %a = f32[4,8]{1,0} parameter(0)
  %zero = f32[] constant(0)
  ROOT %r = f32[4]{0} reduce(%a, %zero), dimensions={1}, to_apply=%add
}""", "instruction 'r' in computation 'main': reduce: to_apply computation 'add' must take 2 "
      "scalar parameters (f32[], f32[]), got (f32[], f32[], f32[])"),
    "sort_comparator": ("""HloModule m
%cmp (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %d = f32[] subtract(%x, %y)
}
ENTRY %main (a: f32[8]) -> f32[8] {
  %a = f32[8]{0} parameter(0)
  ROOT %s = f32[8]{0} sort(%a), dimensions={0}, to_apply=%cmp
}""", "instruction 's' in computation 'main': sort: comparator computation 'cmp' must return "
      "pred[], got f32[]"),
    "while_body": ("""HloModule m
%cond (s: (s32[], f32[4])) -> pred[] {
  %s = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(10)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}
%body (t: (s32[], f32[4])) -> (s32[], s32[]) {
  %t = (s32[], f32[4]{0}) parameter(0)
  %i1 = s32[] get-tuple-element(%t), index=0
  ROOT %r = (s32[], s32[]) tuple(%i1, %i1)
}
ENTRY %main (x: f32[4]) -> (s32[], f32[4]) {
  %x = f32[4]{0} parameter(0)
  %z = s32[] constant(0)
  %init = (s32[], f32[4]{0}) tuple(%z, %x)
  ROOT %w = (s32[], f32[4]{0}) while(%init), condition=%cond, body=%body
}""", "instruction 'w' in computation 'main': body computation 'body' returns the wrong shape: "
      "expected (s32[], f32[4]), got (s32[], s32[])"),
    "while_condition": ("""HloModule m
%cond (s: f32[4]) -> f32[] {
  %s = f32[4]{0} parameter(0)
  ROOT %z = f32[] constant(0)
}
%body (t: f32[4]) -> f32[4] {
  ROOT %t = f32[4]{0} parameter(0)
}
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %w = f32[4]{0} while(%x), condition=%cond, body=%body
}""", "instruction 'w' in computation 'main': condition computation 'cond' returns the wrong "
      "shape: expected pred[], got f32[]"),
    "conditional_branches": ("""HloModule m
%b0 (x: f32[]) -> f32[] {
  ROOT %x = f32[] parameter(0)
}
%b1 (y: f32[]) -> f32[] {
  %y = f32[] parameter(0)
  ROOT %ny = f32[] negate(%y)
}
%b2 (z: f32[]) -> f32[] {
  %z = f32[] parameter(0)
  ROOT %ez = f32[] exponential(%z)
}
ENTRY %main (p: pred[], a: f32[]) -> f32[] {
  %p = pred[] parameter(0)
  %a = f32[] parameter(1)
  ROOT %c = f32[] conditional(%p, %a, %a, %a), branch_computations={%b0, %b1, %b2}
}""", "instruction 'c' in computation 'main': a pred conditional needs 2 branch computations: "
      "got 3"),
    "conditional_branch_param": ("""HloModule m
%b0 (x: f32[]) -> f32[] {
  ROOT %x = f32[] parameter(0)
}
%b1 (y: s32[]) -> f32[] {
  %y = s32[] parameter(0)
  ROOT %cy = f32[] convert(%y)
}
ENTRY %main (i: s32[], a: f32[]) -> f32[] {
  %i = s32[] parameter(0)
  %a = f32[] parameter(1)
  ROOT %c = f32[] conditional(%i, %a, %a), branch_computations={%b0, %b1}
}""", "instruction 'c' in computation 'main': branch 1 computation 'b1' has the wrong "
      "parameters: expected (f32[]), got (s32[])"),
    "call_params": ("""HloModule m
%f (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%x)
}
ENTRY %main (a: f32[4], b: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  ROOT %c = f32[4]{0} call(%a, %b), to_apply=%f
}""", "instruction 'c' in computation 'main': called computation 'f' has the wrong parameters: "
      "expected (f32[4], f32[4]), got (f32[4])"),
    "fusion_params": ("""HloModule m
%fused (p0: f32[4], p1: f32[]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  %p1 = f32[] parameter(1)
  %bc = f32[4]{0} broadcast(%p1), dimensions={}
  ROOT %mul = f32[4]{0} multiply(%p0, %bc)
}
ENTRY %main (a: f32[4], b: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  ROOT %f = f32[4]{0} fusion(%a, %b), kind=kLoop, calls=%fused
}""", "instruction 'f' in computation 'main': fused computation 'fused' has the wrong "
      "parameters: expected (f32[4], f32[4]), got (f32[4], f32[])"),
    "fusion_root": ("""HloModule m
%fused (p0: f32[4]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p0)
}
ENTRY %main (a: f32[4]) -> s32[4] {
  %a = f32[4]{0} parameter(0)
  ROOT %f = s32[4]{0} fusion(%a), kind=kLoop, calls=%fused
}""", "instruction 'f' in computation 'main': fused computation 'fused' returns the wrong shape: "
      "expected s32[4], got f32[4]"),
    "fusion_shared": ("""HloModule m
%fused (p0: f32[4]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p0)
}
ENTRY %main (a: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %f1 = f32[4]{0} fusion(%a), kind=kLoop, calls=%fused
  ROOT %f2 = f32[4]{0} fusion(%f1), kind=kLoop, calls=%fused
}""", "instruction 'f2' in computation 'main': fusion computation 'fused' must be called by "
      "exactly one fusion, got 'f1', 'f2'"),
    "gte_index": ("""HloModule m
ENTRY %main (a: (f32[], s32[])) -> f32[] {
  %a = (f32[], s32[]) parameter(0)
  ROOT %g = f32[] get-tuple-element(%a), index=2
}""", "instruction 'g' in computation 'main': get-tuple-element: index 2 out of range, got "
      "(f32[], s32[])"),
    "bitcast_size": ("""HloModule m
ENTRY %main (a: f32[4]) -> f32[5] {
  %a = f32[4]{0} parameter(0)
  ROOT %b = f32[5]{0} bitcast(%a)
}""", "instruction 'b' in computation 'main': bitcast must keep the byte size: f32[4] (16 bytes) "
      "to f32[5] (20 bytes)"),
    "alias_shapes": ("""HloModule m, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY %main (a: f32[4], b: f32[8]) -> f32[8] {
  %a = f32[4]{0} parameter(0)
  %b = f32[8]{0} parameter(1)
  ROOT %n = f32[8]{0} negate(%b)
}""", "module 'm': input_output_alias shapes must match: output {} <- parameter 0 {}: f32[8] vs "
      "f32[4]"),
    "alias_output_index": ("""HloModule m, input_output_alias={ {2}: (0, {}, may-alias) }
ENTRY %main (a: f32[4]) -> (f32[4], f32[4]) {
  %a = f32[4]{0} parameter(0)
  ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%a, %a)
}""", "module 'm': input_output_alias output index does not exist: output {2} <- parameter 0 "
      "{} for result (f32[4], f32[4])"),
    "dynamic_slice_index": ("""HloModule m
ENTRY %main (a: f32[8,8], i: f32[]) -> f32[2,2] {
  %a = f32[8,8]{1,0} parameter(0)
  %i = f32[] parameter(1)
  ROOT %d = f32[2,2]{1,0} dynamic-slice(%a, %i, %i), dynamic_slice_sizes={2,2}
}""", "instruction 'd' in computation 'main': dynamic-slice: start index must be an integer "
      "scalar, got f32[]"),
    "conditional_selector": ("""HloModule m
%b0 (x: f32[]) -> f32[] {
  ROOT %x = f32[] parameter(0)
}
ENTRY %main (i: f32[], a: f32[]) -> f32[] {
  %i = f32[] parameter(0)
  %a = f32[] parameter(1)
  ROOT %c = f32[] conditional(%i, %a), branch_computations={%b0}
}""", "instruction 'c' in computation 'main': conditional selector must be pred[] or s32[]: f32[]"),
    "rng_operands": ("""HloModule m
ENTRY %main (a: s32[], b: s32[]) -> f32[4] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %r = f32[4]{0} rng(%a, %b), distribution=rng_uniform
}""", "instruction 'r' in computation 'main': rng parameters must be scalars of the result type: "
      "s32[], s32[] for f32[4]"),
    "reduce_window_shape": ("""HloModule m
%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}
ENTRY %main (a: f32[8]) -> f32[3] {
  %a = f32[8]{0} parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[3]{0} reduce-window(%a, %z), window={size=2 stride=2}, to_apply=%add
}""", "instruction 'r' in computation 'main': result shape does not match the inferred shape: "
      "declared f32[3] vs inferred f32[4]"),
    "gather_shape": ("""HloModule m
ENTRY %main (a: f32[10,5], i: s32[3]) -> f32[3,4] {
  %a = f32[10,5]{1,0} parameter(0)
  %i = s32[3]{0} parameter(1)
  ROOT %g = f32[3,4]{1,0} gather(%a, %i), offset_dims={1}, collapsed_slice_dims={0},
      start_index_map={0}, index_vector_dim=1, slice_sizes={1,5}
}""", "instruction 'g' in computation 'main': result shape does not match the inferred shape: "
      "declared f32[3,4] vs inferred f32[3,5]"),
    "conv_feature_groups": ("""HloModule m
ENTRY %main (a: f32[1,8,8,4], k: f32[3,3,2,6]) -> f32[1,8,8,6] {
  %a = f32[1,8,8,4]{3,2,1,0} parameter(0)
  %k = f32[3,3,2,6]{3,2,1,0} parameter(1)
  ROOT %c = f32[1,8,8,6]{3,2,1,0} convolution(%a, %k), window={size=3x3 pad=1_1x1_1},
      dim_labels=b01f_01io->b01f, feature_group_count=3
}""", "instruction 'c' in computation 'main': convolution: input features must equal kernel input "
      "features x feature_group_count (3), got lhs f32[1,8,8,4] and rhs f32[3,3,2,6]"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_module_text(name: str) -> None:
    text, message = BROKEN[name]
    module = parse_module(text, filename="broken.hlo")
    with pytest.raises(VerificationError) as info:
        verify_module(module)
    lines = str(info.value).splitlines()
    assert lines[0] == message
    if message.startswith("instruction '"):
        culprit = re.match(r"instruction '([^']+)'", message).group(1)  # type: ignore[union-attr]
        marked = [ln for ln in lines[1:] if ln.startswith("  > ")]
        assert len(marked) == 1 and f"%{culprit} = " in marked[0]
        # The location is where the culprit is defined in the text (line, first column).
        defs = [(n, ln) for n, ln in enumerate(text.splitlines(), 1)
                if re.match(rf"\s*(ROOT )?%{re.escape(culprit)} = ", ln)]
        assert len(defs) == 1
        n, ln = defs[0]
        column = len(ln) - len(ln.lstrip()) + 1
        assert info.value.location == f"broken.hlo:{n}:{column}"
        assert (info.value.filename, info.value.line, info.value.column) == ("broken.hlo", n,
                                                                              column)
    else:
        assert info.value.location is None


def test_location_of_verification_errors() -> None:
    """Instructions built in code have no location; parsed ones keep theirs through edits."""
    text = ("HloModule m\n\nENTRY main {\n  a = f32[4] parameter(0)\n"
            "  ROOT n = f32[4] negate(a)\n}\n")
    module = parse_module(text, filename="ok.hlo")
    assert module.entry is not None
    a, n = module.entry.instructions
    assert (a.source_loc, n.source_loc) == (("ok.hlo", 4, 3), ("ok.hlo", 5, 3))
    n.shape = Shape.array("f32", (5,))
    with pytest.raises(VerificationError) as info:
        verify_module(module)
    assert info.value.location == "ok.hlo:5:3"
    n.shape = Shape.array("f32", (4,))
    built = module.entry.add(Opcode.NEGATE, Shape.array("f32", (3,)), [a])
    module.entry.set_root(built)
    with pytest.raises(VerificationError, match=r"^instruction 'negate'") as info:
        verify_module(module)
    assert info.value.location is None and built.source_loc is None


# ---- broken modules the parser refuses: built by editing a parsed module ----------------------
SIMPLE = """HloModule m
ENTRY %main (a: f32[4], b: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  %x = f32[4]{0} add(%a, %b)
  %y = f32[4]{0} multiply(%x, %b)
  ROOT %z = f32[4]{0} negate(%y)
}
"""


def test_missing_required_attribute() -> None:
    m = parse("""HloModule m
ENTRY %main (a: f32[4]) -> pred[4] {
  %a = f32[4]{0} parameter(0)
  ROOT %c = pred[4]{0} compare(%a, %a), direction=LT
}""")
    c = m.entry.instruction("c")  # type: ignore[union-attr]
    c.attrs = c.attrs.replace(direction=None)
    expect(m, "instruction 'c' in computation 'main': missing required attribute: 'direction' "
              "for compare")


def test_malformed_attribute() -> None:
    m = parse("""HloModule m
ENTRY %main (a: f32[4,2]) -> f32[2,4] {
  %a = f32[4,2]{1,0} parameter(0)
  ROOT %t = f32[2,4]{1,0} transpose(%a), dimensions={1,0}
}""")
    t = m.entry.instruction("t")  # type: ignore[union-attr]
    t.attrs = t.attrs.replace(dimensions=3)
    expect(m, "instruction 't' in computation 'main': malformed attribute 'dimensions': expected "
              "a list of integers {a,b,...}, got 3")


def test_constant_literal_mismatch() -> None:
    m = parse("""HloModule m
ENTRY %main () -> f32[2] {
  ROOT %c = f32[2]{0} constant({1, 2})
}""")
    c = m.entry.root  # type: ignore[union-attr]
    c.attrs = c.attrs.replace(literal=Literal(np.zeros(3, np.float32)))
    expect(m, "instruction 'c' in computation 'main': constant literal does not match its shape: "
              "literal has dims [3] for f32[2]")
    c.attrs = c.attrs.replace(literal=Literal(np.zeros(2, np.int32)))
    expect(m, "instruction 'c' in computation 'main': constant literal does not match its shape: "
              "literal has dtype int32 for f32[2]")
    c.attrs = c.attrs.replace(literal=Literal(elided=True))
    verify_module(m)


def test_cycle() -> None:
    m = parse(SIMPLE)
    x, y = m.entry.instruction("x"), m.entry.instruction("y")  # type: ignore[union-attr]
    x.set_operand(1, y)
    msg = first_line(m)
    assert msg.startswith("instruction '") and "cycle in the instruction graph" in msg
    assert "x -> y -> x" in msg or "y -> x -> y" in msg


def test_control_predecessor_cycle() -> None:
    m = parse(SIMPLE)
    x, z = m.entry.instruction("x"), m.entry.instruction("z")  # type: ignore[union-attr]
    x.add_control_predecessor(z)
    assert "cycle in the instruction graph" in first_line(m)


def test_parameter_gap() -> None:
    m = parse(SIMPLE)
    b = m.entry.instruction("b")  # type: ignore[union-attr]
    b.attrs = b.attrs.replace(parameter_number=2)
    m.entry.parameters = [m.entry.parameters[0], None, b]  # type: ignore[list-item,union-attr]
    expect(m, "computation 'main': parameters must be numbered 0..n-1 without gaps: "
              "no parameter(1) among 3 parameters")


def test_no_root() -> None:
    m = parse(SIMPLE)
    m.entry.root = None  # type: ignore[union-attr]
    expect(m, "computation 'main': no root instruction: 5 instructions")


def test_users_list_inconsistent() -> None:
    m = parse(SIMPLE)
    x, y = m.entry.instruction("x"), m.entry.instruction("y")  # type: ignore[union-attr]
    x.users.remove(y)
    expect(m, "instruction 'y' in computation 'main': users list of operand 'x' does not contain "
              "this instruction")


def test_operand_from_another_computation() -> None:
    m = parse("""HloModule m
%f (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %q = f32[4]{0} negate(%p)
}
ENTRY %main (a: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  ROOT %c = f32[4]{0} call(%a), to_apply=%f
}""")
    q = m.computation("f").root
    q.set_operands([m.entry.instruction("a")])  # type: ignore[union-attr]
    expect(m, "instruction 'q' in computation 'f': operand 'a' belongs to another computation: "
              "'main'")


def test_duplicate_instruction_name() -> None:
    m = parse(SIMPLE)
    comp = m.entry
    assert comp is not None
    dup = HloInstruction(Opcode.NEGATE, Shape.array("f32", (4,)), (comp.instruction("a"),),
                         name="x")
    comp.add_instruction(dup, unique_name=False)
    expect(m, "instruction 'x' in computation 'main': instruction name is not unique: also "
              "defined in computation 'main'")


def test_schedule_order() -> None:
    m = parse(SIMPLE.replace("HloModule m", "HloModule m, is_scheduled=true"))
    comp = m.entry
    assert comp is not None and m.schedule is not None
    verify_module(m)
    seq = list(m.schedule[comp])
    seq[2], seq[3] = seq[3], seq[2]  # multiply y before add x
    m.schedule[comp] = seq
    expect(m, "instruction 'y' in computation 'main': schedule places this instruction before "
              "its predecessor 'x'")
    m.schedule[comp] = seq[:-1]
    expect(m, "computation 'main': schedule is missing instructions: 'z'")


def test_called_computation_outside_module() -> None:
    text = """HloModule m
%f (p: f32[4]) -> f32[4] {
  ROOT %p = f32[4]{0} parameter(0)
}
ENTRY %main (a: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  ROOT %c = f32[4]{0} call(%a), to_apply=%f
}"""
    m, other = parse(text), parse(text)
    m.entry.root.called = (other.computation("f"),)  # type: ignore[union-attr]
    expect(m, "instruction 'c' in computation 'main': called computation 'f' does not belong to "
              "the module")


def test_no_entry() -> None:
    m = parse(SIMPLE)
    m.entry = None
    expect(m, "module 'm': no entry computation: 1 computations")


def test_alias_parameter_missing() -> None:
    m = parse(SIMPLE)
    m.input_output_alias.append(IOAlias((), 3, ()))
    expect(m, "module 'm': input_output_alias parameter does not exist: output {} <- parameter 3 "
              "{} for 2 parameters")


def test_alias_ok_and_kind() -> None:
    m = parse(SIMPLE)
    m.input_output_alias.append(IOAlias((), 1, ()))
    verify_module(m)
    m.input_output_alias[0] = IOAlias((), 1, (), "maybe")
    expect(m, "module 'm': input_output_alias kind must be may-alias or must-alias: maybe in "
              "output {} <- parameter 1 {}")


# ---- robustness: random shape corruption is caught, never crashes the verifier --------------
def _corrupt(shape: Shape, how: str) -> Shape:
    et = shape.element_type
    if how == "grow":  # one more element in the major dim (or a new dim for scalars)
        return Shape.array(et, (shape.dims[0] + 1,) + shape.dims[1:] if shape.dims else (3,))
    if how == "retype":
        return shape.with_type(PrimitiveType.S8 if et is not PrimitiveType.S8
                               else PrimitiveType.F64)
    return Shape.array(et, shape.dims + (2,))


@requires_corpus
@settings(max_examples=40, deadline=None)
@given(st.sampled_from(corpus_cases() or ["none"]),
       st.sampled_from(["module.hlo", "optimized.hlo"]), st.integers(0, 10_000),
       st.sampled_from(["grow", "retype", "rank"]))
def test_corrupted_shapes_raise_verification_error(case: str, filename: str, pick: int,
                                                   how: str) -> None:
    module = parse((Path(CORPUS) / "cases" / case / filename).read_text())
    # custom-call callees (TopK's comparator) are opaque to the verifier: leave them alone
    opaque = {id(c) for i in module.instructions() if i.opcode is Opcode.CUSTOM_CALL
              for c in i.called}
    insts = [i for c in module.computations if id(c) not in opaque
             for i in c.instructions if i.shape.is_array]
    inst = insts[pick % len(insts)]
    # a rank change that keeps the element count can be legal when only reshapes consume it
    if how == "rank" and inst.users and all(u.opcode is Opcode.RESHAPE for u in inst.users):
        how = "grow"
    # a convert may produce any type, and a value only converted may have any type
    if how == "retype" and (inst.opcode is Opcode.CONVERT or inst.users and all(
            u.opcode is Opcode.CONVERT for u in inst.users)):
        how = "grow"
    inst.shape = _corrupt(inst.shape, how)
    with pytest.raises(VerificationError, match=r"^(instruction|computation|module) '"):
        verify_module(module)


def test_fusion_calls_non_fusion_computation() -> None:
    m = parse(BROKEN["fusion_root"][0].replace("-> s32[4]", "-> f32[4]").replace(
        "ROOT %f = s32[4]{0}", "ROOT %f = f32[4]{0}"))
    verify_module(m)
    m.computation("fused").is_fusion_computation = False
    expect(m, "instruction 'f' in computation 'main': fusion calls 'fused', which is not a fusion "
              "computation: f32[4]")


def test_schedule_with_foreign_instruction() -> None:
    m = parse(SIMPLE.replace("HloModule m", "HloModule m, is_scheduled=true"))
    comp = m.entry
    assert comp is not None and m.schedule is not None
    stranger = HloInstruction(Opcode.CONSTANT, Shape.array("f32", ()),
                              attrs={"literal": Literal(np.float32(0))}, name="stranger")
    m.schedule[comp] = m.schedule[comp] + [stranger]
    expect(m, "computation 'main': schedule holds an instruction that is not in the "
              "computation: 'stranger' (in no computation)")


def test_unknown_fusion_kind() -> None:
    second = "ROOT %f2 = f32[4]{0} fusion(%f1), kind=kLoop, calls=%fused"
    m = parse(BROKEN["fusion_shared"][0].replace(second, "ROOT %f2 = f32[4]{0} negate(%f1)"))
    verify_module(m)
    f1 = m.entry.instruction("f1")  # type: ignore[union-attr]
    f1.attrs = f1.attrs.replace(kind="kWeird")
    expect(m, "instruction 'f1' in computation 'main': unknown fusion kind: kWeird (expected one "
              "of kLoop, kInput, kOutput, kCustom)")


def test_infer_instruction_shape_on_parsed_module() -> None:
    from xlc.hlo.shape_inference import infer_instruction_shape

    m = parse("""HloModule m
%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}
ENTRY %main (a: f32[4,8], i: s32[]) -> (f32[8], f32[2,8]) {
  %a = f32[4,8]{1,0} parameter(0)
  %i = s32[] parameter(1)
  %z = f32[] constant(0)
  %r = f32[8]{0} reduce(%a, %z), dimensions={0}, to_apply=%add
  %d = f32[2,8]{1,0} dynamic-slice(%a, %i, %i), dynamic_slice_sizes={2,8}
  ROOT %t = (f32[8]{0}, f32[2,8]{1,0}) tuple(%r, %d)
}""")
    comp = m.entry
    assert comp is not None
    assert infer_instruction_shape(comp.instruction("a")) is None
    assert infer_instruction_shape(comp.instruction("z")) is None
    for name in ("r", "d", "t"):
        inst = comp.instruction(name)
        inferred = infer_instruction_shape(inst)
        assert inferred is not None and inferred.compatible(inst.shape)


def test_malformed_layout() -> None:
    m = parse(SIMPLE)
    y = m.entry.instruction("y")  # type: ignore[union-attr]
    y.shape = Shape.array("f32", (4,), (1,))
    expect(m, "instruction 'y' in computation 'main': malformed layout: f32[4]{1} (minor_to_major "
              "must be a permutation of the 1 dimensions)")


def test_fusion_computation_called_by_call() -> None:
    m = parse("""HloModule m
%f (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %q = f32[4]{0} negate(%p)
}
ENTRY %main (a: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  ROOT %c = f32[4]{0} call(%a), to_apply=%f
}""")
    m.computation("f").is_fusion_computation = True
    expect(m, "instruction 'c' in computation 'main': fusion computation 'f' can only be called "
              "by a fusion instruction")
