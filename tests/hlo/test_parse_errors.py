"""Malformed HLO text: each case asserts the ParseError message, line and column."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlc.errors import ParseError
from xlc.hlo.parser import parse_module, parse_shape
from xlc.hlo.printer import print_module

H = "HloModule m\n"

# (id, text, message, line, column)
CASES = [
    ('unknown_opcode',
     H + ('ENTRY e {\n'
      '  p = f32[] parameter(0)\n'
      '  ROOT r = f32[] foo(p)\n'
      '}\n'),
     "unknown opcode 'foo'", 4, 18),
    ('expected_paren',
     H + ('ENTRY e {\n'
      '  p = f32[] parameter(0)\n'
      '  ROOT r = f32[] add(p, p, \n'
      '}\n'),
     "expected operand name but found '}'", 5, 1),
    ('expected_close',
     H + ('ENTRY e {\n'
      '  p = f32[4] parameter(0)\n'
      '  ROOT r = f32[4] negate(p p)\n'
      '}\n'),
     "expected ',' but found 'p'", 4, 28),
    ('undefined_operand',
     H + ('ENTRY main {\n'
      '  p = f32[] parameter(0)\n'
      '  ROOT r = f32[] add(p, x)\n'
      '}\n'),
     "operand 'x' is not defined in computation 'main'", 4, 25),
    ('unknown_comp',
     H + ('ENTRY main {\n'
      '  p = f32[4] parameter(0)\n'
      '  z = f32[] constant(0)\n'
      '  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=region_9\n'
      '}\n'),
     "unknown computation 'region_9' in to_apply", 5, 57),
    ('unknown_prim',
     H + ('ENTRY e {\n'
      '  ROOT p = f33[4] parameter(0)\n'
      '}\n'),
     "unknown primitive type 'f33'", 3, 12),
    ('dup_inst',
     H + ('ENTRY e {\n'
      '  add.1 = f32[] parameter(0)\n'
      '  add.1 = f32[] negate(add.1)\n'
      '}\n'),
     "duplicate instruction name 'add.1'", 4, 3),
    ('const_count',
     H + ('ENTRY e {\n'
      '  ROOT c = f32[4] constant({1, 2, 3})\n'
      '}\n'),
     'constant has 3 elements but shape f32[4] needs 4', 3, 28),
    ('unterminated',
     H + ('ENTRY e {\n'
      '  ROOT c = f32[4] custom-call(), custom_call_target="abc\n'
      '}\n'),
     'unterminated string', 3, 53),
    ('attr_value',
     H + ('ENTRY e {\n'
      '  p = f32[4] parameter(0)\n'
      '  ROOT r = f32[4] negate(p), metadata=\n'
      '}\n'),
     'expected attribute value', 5, 1),
    ('bad_layout',
     H + ('ENTRY e {\n'
      '  ROOT p = f32[4,2]{1,1} parameter(0)\n'
      '}\n'),
     'bad layout {1,1} for rank 2', 3, 20),
    ('bad_layout2',
     H + ('ENTRY e {\n'
      '  ROOT p = f32[4,2]{1,x} parameter(0)\n'
      '}\n'),
     'bad layout', 3, 23),
    ('missing_param',
     H + ('ENTRY e {\n'
      '  ROOT p = f32[4] parameter()\n'
      '}\n'),
     'missing parameter number', 3, 29),
    ('dim_labels',
     H + ('ENTRY e {\n'
      '  a = f32[1,4,4,1] parameter(0)\n'
      '  k = f32[2,2,1,1] parameter(1)\n'
      '  ROOT c = f32[1,3,3,1] convolution(a, k), window={size=2x2}, dim_labels=b01f_01xo->b01f\n'
      '}\n'),
     "bad dim_labels 'b01f_01xo->b01f': dim_labels part '01xo' needs exactly one 'i' and one 'o'", 5, 74),  # noqa: E501
    ('no_header',
     ('ENTRY e {\n'
      '  ROOT p = f32[] parameter(0)\n'
      '}\n'),
     "expected 'HloModule' but found 'ENTRY'", 1, 1),
    ('const_nesting',
     H + ('ENTRY e {\n'
      '  ROOT c = f32[2,2] constant({1, 2, 3, 4})\n'
      '}\n'),
     'constant literal nesting does not match shape f32[2,2]', 3, 30),
    ('bad_float',
     H + ('ENTRY e {\n'
      '  ROOT c = f32[2] constant({1, abc})\n'
      '}\n'),
     "bad f32 literal value 'abc'", 3, 32),
    ('int_range',
     H + ('ENTRY e {\n'
      '  ROOT c = s8[2] constant({1, 300})\n'
      '}\n'),
     'value 300 is out of range for s8', 3, 31),
    ('dup_param',
     H + ('ENTRY e {\n'
      '  a = f32[] parameter(0)\n'
      '  b = f32[] parameter(0)\n'
      '  ROOT r = f32[] add(a, b)\n'
      '}\n'),
     "duplicate parameter number 0 in computation 'e'", 4, 23),
    ('missing_param_gap',
     H + ('ENTRY e {\n'
      '  a = f32[] parameter(0)\n'
      '  b = f32[] parameter(2)\n'
      '  ROOT r = f32[] add(a, b)\n'
      '}\n'),
     "computation 'e' is missing parameter 1", 2, 9),
    ('two_roots',
     H + ('ENTRY e {\n'
      '  ROOT a = f32[] parameter(0)\n'
      '  ROOT b = f32[] negate(a)\n'
      '}\n'),
     "computation 'e' has more than one ROOT instruction", 4, 3),
    ('two_entries',
     H + ('ENTRY e {\n'
      '  ROOT a = f32[] parameter(0)\n'
      '}\n'
      'ENTRY f {\n'
      '  ROOT a = f32[] parameter(0)\n'
      '}\n'),
     "multiple ENTRY computations: 'e' and 'f'", 5, 7),
    ('ecl',
     ('HloModule m, entry_computation_layout={(f32[8]{0})->f32[8]{0}}\n'
      'ENTRY e {\n'
      '  ROOT a = f32[4] parameter(0)\n'
      '}\n'),
     'entry_computation_layout parameter 0 f32[8] is not compatible with parameter shape f32[4]', 1, 14),  # noqa: E501
    ('padding',
     H + ('ENTRY e {\n'
      '  a = f32[4] parameter(0)\n'
      '  z = f32[] constant(0)\n'
      '  ROOT p = f32[6] pad(a, z), padding=1-1\n'
      '}\n'),
     "bad padding '1-1': expected low_high[_interior]x...", 5, 38),
    ('window',
     H + ('ENTRY e {\n'
      '  a = f32[4] parameter(0)\n'
      '  z = f32[] constant(0)\n'
      '  ROOT r = f32[2] reduce-window(a, z), window={size=2 strde=2}, to_apply=e\n'
      '}\n'),
     "unknown window field 'strde'", 5, 55),
    ('gte_index',
     H + ('ENTRY e {\n'
      '  a = (f32[], f32[]) parameter(0)\n'
      '  ROOT g = f32[] get-tuple-element(a)\n'
      '}\n'),
     "get-tuple-element is missing attribute 'index'", 4, 18),
    ('missing_brace',
     H + ('ENTRY e {\n'
      '  ROOT a = f32[] parameter(0)\n'),
     "expected '}' at the end of computation 'e' but found end of input", 4, 1),
    ('dup_attr',
     H + ('ENTRY e {\n'
      '  a = f32[4] parameter(0)\n'
      '  ROOT b = f32[4] broadcast(a), dimensions={0}, dimensions={0}\n'
      '}\n'),
     "duplicate attribute 'dimensions'", 4, 49),
    ('result_sig',
     H + ('ENTRY e (a: f32[4]) -> f32[8] {\n'
      '  ROOT a = f32[4] parameter(0)\n'
      '}\n'),
     "computation 'e' returns f32[8] but its root 'a' has shape f32[4]", 2, 24),
    ('alias_kind',
     ('HloModule m, input_output_alias={ {}: (0, {}, maybe) }\n'
      'ENTRY e {\n'
      '  ROOT a = f32[4] parameter(0)\n'
      '}\n'),
     "bad alias kind 'maybe': expected may-alias or must-alias", 1, 47),
    ('operand_shape',
     H + ('ENTRY e {\n'
      '  a = f32[4] parameter(0)\n'
      '  ROOT b = f32[4] negate(f32[5] a)\n'
      '}\n'),
     "operand 'a' is written with shape f32[5] but has shape f32[4]", 4, 26),
    ('bool',
     H + ('ENTRY e {\n'
      '  a = f32[4] parameter(0)\n'
      '  ROOT s = f32[4] sort(a), dimensions={0}, is_stable=yes, to_apply=e\n'
      '}\n'),
     "expected 'true' or 'false' but found 'yes'", 4, 54),
    ('slice',
     H + ('ENTRY e {\n'
      '  a = f32[4] parameter(0)\n'
      '  ROOT s = f32[2] slice(a), slice={[0,2]}\n'
      '}\n'),
     "expected ':' but found ','", 4, 38),
    ('empty_comp',
     H + ('ENTRY e {\n'
      '}\n'),
     "computation 'e' has no instructions", 2, 9),
    ('fusion_kind_missing',
     H + ('f {\n'
      '  ROOT q = f32[] parameter(0)\n'
      '}\n'
      'ENTRY e {\n'
      '  a = f32[] parameter(0)\n'
      '  ROOT b = f32[] fusion(a), calls=f\n'
      '}\n'),
     "fusion is missing attribute 'kind'", 7, 18),
    ('compare_dir_missing',
     H + ('ENTRY e {\n'
      '  a = f32[] parameter(0)\n'
      '  ROOT b = pred[] compare(a, a)\n'
      '}\n'),
     "compare is missing attribute 'direction'", 4, 19),
    ('while_body',
     H + ('ENTRY e {\n'
      '  a = f32[] parameter(0)\n'
      '  ROOT b = f32[] while(a), condition=e\n'
      '}\n'),
     "while is missing attribute 'body'", 4, 18),
    ('dyn_dim',  # bounded ones (f32[<=4]) parse; unbounded ones do not
     H + ('ENTRY e {\n'
      '  ROOT a = f32[?] parameter(0)\n'
      '}\n'),
     "unbounded dynamic dimensions ('?') are not supported; give a bound ('<=N')", 3, 16),
    ('unknown_comp_branch',
     H + ('ENTRY e {\n'
      '  i = s32[] parameter(0)\n'
      '  ROOT c = f32[] conditional(i), branch_computations={b0, b1}\n'
      '}\n'
      'b0 {\n'
      ' ROOT z = f32[] constant(0)\n'
      '}\n'),
     "unknown computation 'b1' in branch_computations", 4, 59),
    ('paren',
     H + ('ENTRY e {\n'
      '  ROOT p = f32[] parameter(0, 1)\n'
      '}\n'),
     "expected ')' but found ','", 3, 29),
    ('bad_direction',
     H + ('ENTRY e {\n'
          '  p0 = f32[] parameter(0)\n'
          '  ROOT c = pred[] compare(p0, p0), direction=LQ\n'
          '}\n'),
     "unknown comparison direction 'LQ': expected one of EQ, NE, LT, LE, GT, GE", 4, 46),
    ('bad_fusion_kind',
     H + ('f {\n'
          '  ROOT p = f32[] parameter(0)\n'
          '}\n'
          'ENTRY e {\n'
          '  p0 = f32[] parameter(0)\n'
          '  ROOT c = f32[] fusion(p0), kind=kLoopy, calls=f\n'
          '}\n'),
     "unknown fusion kind 'kLoopy': expected one of kLoop, kInput, kOutput, kCustom", 7, 35),
    ('dup_inst_same_comp_after_other_comp',
     H + ('f {\n'
          '  ROOT p = f32[] parameter(0)\n'
          '}\n'
          'ENTRY e {\n'
          '  p = f32[] parameter(0)\n'
          '  p = f32[] negate(p)\n'
          '}\n'),
     "duplicate instruction name 'p'", 7, 3),
    ('unknown_comp_in_calls',
     H + ('ENTRY e {\n'
          '  p0 = f32[] parameter(0)\n'
          '  ROOT c = f32[] fusion(p0), kind=kLoop, calls=%fused.3\n'
          '}\n'),
     "unknown computation 'fused.3' in calls", 4, 48),
    ('huge_parameter_number',
     H + ('ENTRY e {\n'
          '  ROOT a = f32[] parameter(99999999999)\n'
          '}\n'),
     "bad parameter number 99999999999", 3, 28),
    ('control_pred_undefined',
     H + ('ENTRY e {\n'
          '  p0 = f32[] parameter(0)\n'
          '  ROOT c = f32[] negate(p0), control-predecessors={q}\n'
          '}\n'),
     "control predecessor 'q' is not defined in computation 'e'", 4, 52),
]


@pytest.mark.parametrize("text,message,line,column", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_parse_error(text: str, message: str, line: int, column: int) -> None:
    with pytest.raises(ParseError, match=re.escape(message)) as info:
        parse_module(text, filename="bad.hlo")
    err = info.value
    assert (err.line, err.column) == (line, column)
    assert err.message == message
    assert str(err) == f"bad.hlo:{line}:{column}: {message}"


def test_at_least_22_cases() -> None:
    assert len(CASES) >= 22


@pytest.mark.parametrize("text,message,column", [
    ("f32[4", "expected ',' but found end of input", 6),
    ("f32[4]x", "unexpected 'x' after shape", 7),
    ("(f32[], s32[]", "expected ',' but found end of input", 14),
    ("f33[2]", "unknown primitive type 'f33'", 1),
    ("f32[2,3]{0,0}", "bad layout {0,0} for rank 2", 9),
])
def test_parse_shape_errors(text: str, message: str, column: int) -> None:
    with pytest.raises(ParseError, match=re.escape(message)) as info:
        parse_shape(text)
    assert (info.value.line, info.value.column) == (1, column)


def test_elided_constant_parses_but_is_marked() -> None:
    m = parse_module(H + "ENTRY e {\n  ROOT c = f32[4] constant({...})\n}\n")
    assert m.entry is not None and m.entry.root is not None
    assert m.entry.root.attrs["literal"].elided


_SEED_TEXT = """HloModule fuzz, entry_computation_layout={(f32[4]{0}, s32[])->(f32[4]{0}, pred[])}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[4], i: s32[]) -> (f32[4], pred[]) {
  %x = f32[4]{0} parameter(0)
  %i = s32[] parameter(1)
  %c = f32[4]{0} constant({1, -2.5, nan, 1e-05}), metadata={op_name="c" source_line=3}
  %z = f32[] constant(0)
  %r = f32[] reduce(%x, %z), dimensions={0}, to_apply=%add
  %p = pred[] compare(%r, %z), direction=GT
  %ds = f32[2]{0} dynamic-slice(%c, %i), dynamic_slice_sizes={2}
  %pd = f32[4]{0} pad(%ds, %z), padding=1_1
  %m = f32[4]{0} multiply(%pd, %x), backend_config={"k": [1, 2]}
  ROOT %t = (f32[4]{0}, pred[]) tuple(%m, %p)
}
"""
_PIECES = ["{", "}", "(", ")", "[", "]", ",", "=", ":", "%", '"', "/*", "*/", "-", "1", " ",
           "\n", "x", "ROOT ", "{...}", "->", "f32", "T(8)"]


@settings(max_examples=50, deadline=None)
@given(edits=st.lists(st.tuples(st.integers(0, len(_SEED_TEXT)), st.integers(0, 2),
                                st.sampled_from(_PIECES)), min_size=1, max_size=3))
def test_mutated_text_raises_only_parse_error(edits: list[tuple[int, int, str]]) -> None:
    """Corrupted text either parses (and then round-trips) or raises ParseError — never a bare
    Python exception."""
    text = _SEED_TEXT
    for pos, kind, piece in edits:
        pos = min(pos, len(text))
        text = (text[:pos] + text[pos + 3:] if kind == 0 else
                text[:pos] + piece + text[pos:] if kind == 1 else text[:pos])
    try:
        module = parse_module(text)
    except ParseError:
        return
    printed = print_module(module)
    assert print_module(parse_module(printed)) == printed
