"""Parser tests: every corpus file round-trips, and each syntax feature parses to the typed IR."""
from __future__ import annotations

import math
import re
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tests.conftest import CORPUS, corpus_cases, requires_corpus
from xlc.hlo.attrs import ConvDimLabels, Literal, PaddingConfig, SliceDim, Window, WindowDim
from xlc.hlo.ir import IOAlias
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module, parse_shape
from xlc.hlo.printer import print_module
from xlc.hlo.shape import Layout, PrimitiveType, Shape

CORPUS_FILES = [(c, f) for c in corpus_cases() for f in ("module.hlo", "optimized.hlo")]

_COMP_HEAD = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s*(?:\(.*\)\s*->\s*.*)?\{\s*$")
_INST_LINE = re.compile(r"^\s+(?:ROOT\s+)?%?[\w.\-]+\s*=\s")


def _text_instruction_counts(text: str) -> dict[str, int]:
    """Instructions per computation, counted straight from the text lines."""
    counts: dict[str, int] = {}
    current = None
    for line in text.splitlines():
        m = _COMP_HEAD.match(line)
        if m and not line.startswith(" "):
            current = m.group(1)
            counts[current] = 0
        elif line.startswith("}"):
            current = None
        elif current is not None and _INST_LINE.match(line):
            counts[current] += 1
    return counts


def _read(case: str, fname: str) -> str:
    return (Path(CORPUS) / "cases" / case / fname).read_text()


@requires_corpus
@pytest.mark.parametrize("case,fname", CORPUS_FILES, ids=[f"{c}/{f}" for c, f in CORPUS_FILES])
def test_corpus_round_trip(case: str, fname: str) -> None:
    text = _read(case, fname)
    elapsed = math.inf
    for _ in range(3):  # best of three: a guard against slow (quadratic) parsing, not a timer
        t0 = time.perf_counter()
        module = parse_module(text, filename=fname)
        elapsed = min(elapsed, time.perf_counter() - t0)
    printed = print_module(module)
    assert print_module(parse_module(printed)) == printed
    counts = {c.name: len(c.instructions) for c in module.computations}
    assert counts == _text_instruction_counts(text)
    assert elapsed < 0.25, f"parsing {case}/{fname} took {elapsed * 1000:.1f} ms"


@requires_corpus
@pytest.mark.parametrize("case", corpus_cases())
def test_optimized_prints_identically_to_xla(case: str) -> None:
    """XLA's own dump (current syntax) comes back byte for byte."""
    text = _read(case, "optimized.hlo")
    assert print_module(parse_module(text)) == text


@requires_corpus
def test_corpus_features() -> None:
    m = parse_module(_read("cond_switch", "optimized.hlo"))
    assert m.schedule is not None and m.entry is not None and m.entry.name == "main.7"
    assert all(not c.is_fusion_computation for c in m.schedule)
    assert m.stack_frames.startswith("FileNames\n1 \"make_corpus.py\"")
    assert m.stack_frames.rstrip().endswith("{file_location_id=11 parent_frame_id=9}")
    assert m.header_extra[0] == ("allow_spmd_sharding_propagation_to_parameters",
                                 "{true,true,true}")
    conds = [i for i in m.entry.instructions if i.opcode is Opcode.CONDITIONAL]
    assert [c.name for c in conds[-1].called] == ["region_1.2", "region_2.3"]
    assert [c.name for c in conds[0].called] == ["region_3.4", "region_4.5", "region_5.6"]
    fusion = m.entry.instruction("wrapped_clamp")
    assert fusion.attrs["kind"] == "kLoop" and fusion.called[0].is_fusion_computation
    assert fusion.get_extra("metadata").startswith('{op_name="jit(cond_switch)/')

    adam = parse_module(_read("adam_update", "module.hlo"))
    assert adam.input_output_alias[3] == IOAlias((3,), 6, (), "may-alias")
    assert len(adam.input_output_alias) == 9 and adam.schedule is None

    topk = parse_module(_read("sort_topk", "optimized.hlo"))
    cc = next(i for i in topk.instructions() if i.opcode is Opcode.CUSTOM_CALL)
    assert cc.attrs["custom_call_target"] == "TopK" and len(cc.called) == 1

    power = parse_module(_read("power_iteration", "optimized.hlo"))
    w = next(i for i in power.instructions() if i.opcode is Opcode.WHILE)
    assert [c.name for c in w.called] == ["region_2.5", "region_1.4"]
    assert '"known_trip_count":{"n":"30"}' in w.get_extra("backend_config")

    gather = next(i for i in parse_module(_read("baked_constants", "module.hlo")).instructions()
                  if i.opcode is Opcode.GATHER)
    assert gather.attrs["offset_dims"] == () and gather.attrs["collapsed_slice_dims"] == (0,)
    assert gather.attrs["index_vector_dim"] == 2 and gather.attrs["slice_sizes"] == (1,)


MINIMAL = """
HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] add(a, b)
}

main {
  x = f32[2,3] parameter(0)
  z = f32[] constant(0)
  r = f32[2] reduce(x, z), dimensions={1}, to_apply=add
}
"""


def test_optional_entry_root_signature_and_layout() -> None:
    m = parse_module(MINIMAL)
    assert m.entry is not None and m.entry.name == "main"
    assert m.entry.root is not None and m.entry.root.name == "r"
    assert m.computation("add").root.name == "s"
    assert m.entry.parameters[0].shape == Shape.array(PrimitiveType.F32, (2, 3), (1, 0))
    assert m.entry.root.called == (m.computation("add"),)


def test_forward_referenced_computation_is_resolved_and_printed_first() -> None:
    text = """HloModule fwd
ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %f = f32[4]{0} fusion(%p), kind=kLoop, calls=%fused
}
%fused (q: f32[4]) -> f32[4] {
  %q = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%q)
}
"""
    m = parse_module(text)
    assert m.entry is not None and m.entry.name == "main"
    assert [c.name for c in m.computations] == ["fused", "main"]
    assert m.computation("fused").is_fusion_computation
    printed = print_module(m)
    assert printed.index("%fused (q: f32[4])") < printed.index("ENTRY %main")


def test_typed_attributes() -> None:
    text = """HloModule attrs
%max (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}
%ge (c: f32[], d: f32[]) -> pred[] {
  %c = f32[] parameter(0)
  %d = f32[] parameter(1)
  ROOT %g = pred[] compare(%c, %d), direction=GE, type=TOTALORDER
}
ENTRY %e (x: f32[1,8,8,3], k: f32[3,3,3,4], i: s32[]) -> f32[1,4,4,4] {
  %x = f32[1,8,8,3]{3,2,1,0} parameter(0)
  %k = f32[3,3,3,4]{3,2,1,0} parameter(1)
  %i = s32[] parameter(2)
  %z = f32[] constant(-inf)
  %conv = f32[1,4,4,4]{3,2,1,0} convolution(%x, %k), window={size=3x3 stride=2x2 pad=1_1x0_1 lhs_dilate=1x1 rhs_dilate=1x2 rhs_reversal=0x1}, dim_labels=b01f_01io->b01f, feature_group_count=1
  %rw = f32[1,4,4,3]{3,2,1,0} reduce-window(%x, %z), window={size=1x2x2x1 stride=1x2x2x1}, to_apply=%max
  %sas = f32[1,8,8,3]{3,2,1,0} select-and-scatter(%x, %rw, %z), window={size=1x2x2x1 stride=1x2x2x1}, select=%ge, scatter=%max
  %sl = f32[1,4,8,3]{3,2,1,0} slice(%x), slice={[0:1], [0:8:2], [0:8], [0:3]}
  %pd = f32[1,9,10,3]{3,2,1,0} pad(%x, %z), padding=0_0x0_-1_1x1_1x0_0
  %ds = f32[1,2,2,3]{3,2,1,0} dynamic-slice(%x, %i, %i, %i, %i), dynamic_slice_sizes={1,2,2,3}
  %dt = f32[3,3,4,4]{3,2,1,0} dot(%k, %conv), lhs_batch_dims={}, lhs_contracting_dims={3}, rhs_batch_dims={}, rhs_contracting_dims={3}
  %tk = (f32[1,8,8,2]{3,2,1,0}, s32[1,8,8,2]{3,2,1,0}) topk(%x), k=2, largest=true
  %it = s32[4,5]{1,0} iota(), iota_dimension=1
  %rp = f32[1,8,8,3]{3,2,1,0} reduce-precision(%x), exponent_bits=5, mantissa_bits=10
  ROOT %out = f32[1,4,4,4]{3,2,1,0} copy(%conv)
}
"""  # noqa: E501
    m = parse_module(text)
    e = m.entry
    assert e is not None
    conv = e.instruction("conv")
    w = conv.attrs["window"]
    assert isinstance(w, Window)
    assert w.dims[1] == WindowDim(size=3, stride=2, pad_low=0, pad_high=1, window_dilation=2,
                                  base_dilation=1, reversal=True)
    assert conv.attrs["dim_labels"] == ConvDimLabels.from_text("b01f_01io->b01f")
    assert conv.attrs["feature_group_count"] == 1
    assert e.instruction("sas").called == (m.computation("ge"), m.computation("max"))
    assert e.instruction("sl").attrs["slice"][1] == SliceDim(0, 8, 2)
    assert e.instruction("pd").attrs["padding"] == PaddingConfig(
        ((0, 0, 0), (0, -1, 1), (1, 1, 0), (0, 0, 0)))
    assert e.instruction("ds").attrs["dynamic_slice_sizes"] == (1, 2, 2, 3)
    assert e.instruction("dt").attrs["lhs_contracting_dims"] == (3,)
    assert e.instruction("dt").attrs["lhs_batch_dims"] == ()
    assert e.instruction("tk").attrs["k"] == 2 and e.instruction("tk").attrs["largest"] is True
    assert e.instruction("it").attrs["iota_dimension"] == 1
    assert e.instruction("rp").attrs["mantissa_bits"] == 10
    g = m.computation("ge").root
    assert g.attrs["direction"] == "GE" and g.attrs["type"] == "TOTALORDER"
    printed = print_module(m)
    assert print_module(parse_module(printed)) == printed
    assert "padding=0_0_0x0_-1_1x1_1_0x0_0_0" in printed
    assert "slice={[0:1:1], [0:8:2], [0:8:1], [0:3:1]}" in printed


def test_literals() -> None:
    text = """HloModule lits
ENTRY %e () -> f32[] {
  %a = f32[2,2]{1,0} constant({ { 1, -2.5 }, { 1e-05, 3.40282347e+38 } })
  %b = f32[4]{0} constant({nan, -nan, inf, -inf})
  %c = u64[2]{0} constant({18446744073709551615, 0})
  %d = s8[3]{0} constant({-128, 0, 127})
  %f = bf16[2]{0} constant({0.1, 3.141})
  %g = f16[2,1,2]{2,1,0} constant({ { /*i0=0*/ {1, 2} }, { /*i0=1*/ {3, 65504} } })
  %h = pred[2]{0} constant({true, false})
  %t = (f32[2]{0}, s32[]) constant(( {1, 2}, 7 ))
  %x = f32[3]{0} constant({...})
  %z = f32[0]{0} constant({})
  ROOT %s = f32[] constant(0.1)
}
"""
    e = parse_module(text).entry
    assert e is not None

    def arr(name: str) -> np.ndarray:
        return e.instruction(name).attrs["literal"].array

    np.testing.assert_array_equal(arr("a"), np.array([[1, -2.5], [1e-05, 3.40282347e+38]],
                                                     np.float32))
    b = arr("b")
    assert np.isnan(b[0]) and not np.signbit(b[0]) and np.isnan(b[1]) and np.signbit(b[1])
    assert list(b[2:]) == [np.inf, -np.inf]
    assert arr("c").dtype == np.uint64 and int(arr("c")[0]) == 2**64 - 1
    assert list(arr("d")) == [-128, 0, 127] and arr("d").dtype == np.int8
    assert arr("f").dtype == ml_dtypes.bfloat16
    assert float(arr("f")[1]) == float(ml_dtypes.bfloat16(3.141))
    assert arr("g").shape == (2, 1, 2) and float(arr("g")[1, 0, 1]) == 65504.0
    assert arr("h").tolist() == [True, False]
    t = e.instruction("t").attrs["literal"]
    assert t.is_tuple and t.elements[0].array.tolist() == [1.0, 2.0]
    assert t.elements[1].array.shape == () and int(t.elements[1].array) == 7
    assert e.instruction("x").attrs["literal"].elided
    assert arr("z").shape == (0,)
    s = arr("s")
    assert s.shape == () and s.dtype == np.float32 and s == np.float32(0.1)


def test_f32_literal_is_exact() -> None:
    values = np.array([0.1, 1 / 3, 16777217.0, 1.17549435e-38, 1e-45], np.float32)
    text = ("HloModule m\nENTRY e {\n  ROOT c = f32[5] constant({"
            + ", ".join(f"{v:.9g}" for v in values) + "})\n}\n")
    got = parse_module(text).entry.root.attrs["literal"].array  # type: ignore[union-attr]
    assert got.tobytes() == values.tobytes()


def test_operands_with_inline_shapes_and_control_predecessors() -> None:
    text = """HloModule m
ENTRY %e (a: f32[4], b: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  %s = f32[4]{0} add(f32[4]{0} %a, f32[4]{0} %b)
  ROOT %m = f32[4]{0} multiply(f32[4]{0} %s, f32[4]{0} %b), control-predecessors={%s}
}, execution_thread="main"
"""
    m = parse_module(text)
    root = m.entry.root  # type: ignore[union-attr]
    assert root.control_predecessors == (m.entry.instruction("s"),)  # type: ignore[union-attr]
    assert m.entry.execution_thread == "main"  # type: ignore[union-attr]
    assert "control-predecessors={%s}" in print_module(m)


def test_layout_tail_and_tuple_shapes() -> None:
    s = parse_shape("f32[8,128]{1,0:T(8,128)S(1)}")
    assert s.layout == Layout((1, 0), "T(8,128)S(1)") and s.layout.memory_space == 1
    assert s.to_text() == "f32[8,128]{1,0:T(8,128)S(1)}"
    t = parse_shape("(f32[], (s32[2]{0}, pred[3]), token[])")
    assert t.is_tuple and t.tuple_shapes[1].tuple_shapes[0] == Shape.array("s32", (2,))
    assert t.tuple_shapes[2].is_token
    assert parse_shape("f32[3,4]{0,1}").layout == Layout((0, 1))


def test_custom_call_and_raw_attributes_are_kept_verbatim() -> None:
    text = """HloModule m, frontend_attributes={xla.sdy.meshes="{}"}
%cmp (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %gt = pred[] compare(%a, %b), direction=GT
}
ENTRY %e (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %c = f32[4]{0} custom-call(%x), custom_call_target="my\\"target", called_computations={%cmp}, api_version=API_VERSION_TYPED_FFI, backend_config={"a": {"b": "}"}}, operand_precision={default,highest}
}
"""  # noqa: E501
    m = parse_module(text)
    c = m.entry.root  # type: ignore[union-attr]
    assert c.attrs["custom_call_target"] == 'my"target'
    assert c.called == (m.computation("cmp"),)
    assert c.extra == (("api_version", "API_VERSION_TYPED_FFI"),
                       ("backend_config", '{"a": {"b": "}"}}'),
                       ("operand_precision", "{default,highest}"))
    assert m.header_extra == [("frontend_attributes", '{xla.sdy.meshes="{}"}')]
    printed = print_module(m)
    assert print_module(parse_module(printed)) == printed


def test_parse_literal_helpers_keep_literal_type() -> None:
    m = parse_module("HloModule m\nENTRY e {\n  ROOT c = s32[2,2] constant({{1,2},{3,4}})\n}\n")
    lit = m.entry.root.attrs["literal"]  # type: ignore[union-attr]
    assert isinstance(lit, Literal) and lit.array.tolist() == [[1, 2], [3, 4]]


def test_verify_flag_calls_verifier(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    calls = []
    fake = types.ModuleType("xlc.hlo.verifier")
    fake.verify_module = lambda module: calls.append(module.name)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "xlc.hlo.verifier", fake)
    parse_module(MINIMAL, verify=True)
    parse_module(MINIMAL)
    assert calls == ["m"]


def test_names_repeated_across_computations_are_made_unique() -> None:
    text = """HloModule m
f {
  p0 = f32[] parameter(0)
  ROOT n = f32[] negate(p0)
}
ENTRY e {
  p0 = f32[] parameter(0)
  n = f32[] call(p0), to_apply=f
  ROOT n.1 = f32[] add(n, p0)
}
"""
    m = parse_module(text)
    names = [i.name for i in m.instructions()]
    assert len(names) == len(set(names))
    e = m.entry
    assert e is not None and e.root is not None
    call = e.root.operands[0]
    assert call.opcode is Opcode.CALL and call.operands[0] is e.parameters[0]
    assert [i.name for i in m.computation("f").instructions] == ["p0", "n"]
    printed = print_module(m)
    assert print_module(parse_module(printed)) == printed


def test_100kb_module_parses_well_under_100ms() -> None:
    lines = ["HloModule big", "", "ENTRY %main (p: f32[128,256]) -> f32[128,256] {",
             "  %p = f32[128,256]{1,0} parameter(0)"]
    prev = "p"
    for i in range(900):
        lines.append(f"  %a.{i} = f32[128,256]{{1,0}} add(%{prev}, %p), "
                     f'metadata={{op_name="jit(f)/add" source_file="/x/y.py" source_line={i}}}')
        prev = f"a.{i}"
    lines += [f"  ROOT %r = f32[128,256]{{1,0}} negate(%{prev})", "}", ""]
    text = "\n".join(lines)
    assert len(text) > 100_000
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        module = parse_module(text)
        best = min(best, time.perf_counter() - t0)
    assert len(module.entry.instructions) == 902  # type: ignore[union-attr]
    assert best < 0.1, f"{best * 1000:.1f} ms"


def test_comments_header_extras_and_unscheduled() -> None:
    text = """// a leading line comment
HloModule m, is_scheduled=false, buffer_donor={ (0, {}) }, frontend_attributes={k="v"}

/* block comment */ ENTRY %e (a: f32[2], b: f32[2]) -> (f32[2], f32[2], f32[2], f32[2], f32[2], f32[2]) {
  %a = f32[2]{0} parameter(0) // trailing comment
  %b = f32[2]{0} parameter(1)
  ROOT %t = (f32[2]{0}, f32[2]{0}, f32[2]{0}, f32[2]{0}, f32[2]{0}, /*index=5*/f32[2]{0}) tuple(%a, %b, %a, %b, %a, /*index=5*/%b), sharding={{replicated}, {maximal device=0}, {replicated}, {replicated}, {replicated}, {replicated}}
}
"""  # noqa: E501
    m = parse_module(text)
    assert m.schedule is None
    assert m.header_extra == [("buffer_donor", "{ (0, {}) }"), ("frontend_attributes", '{k="v"}')]
    root = m.entry.root  # type: ignore[union-attr]
    assert [o.name for o in root.operands] == ["a", "b", "a", "b", "a", "b"]
    assert root.get_extra("sharding").startswith("{{replicated}, {maximal device=0}")
    printed = print_module(m)
    assert printed.startswith("HloModule m, entry_computation_layout={(f32[2]{0}, f32[2]{0})->"
                              "(f32[2]{0}, f32[2]{0}, f32[2]{0}, f32[2]{0}, f32[2]{0}, "
                              "/*index=5*/f32[2]{0})}, buffer_donor={ (0, {}) }, "
                              'frontend_attributes={k="v"}\n')
    assert print_module(parse_module(printed)) == printed
