"""Printer tests: literal formatting, attribute spelling, module layout, schedules."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlc.hlo.attrs import Attrs, ConvDimLabels, Literal, PaddingConfig, SliceDim, Window, WindowDim
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule, IOAlias
from xlc.hlo.literals import format_scalar
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module
from xlc.hlo.printer import literal_to_text, print_computation, print_instruction, print_module
from xlc.hlo.shape import PrimitiveType, Shape

F32 = PrimitiveType.F32


@pytest.mark.parametrize("value,et,text", [
    (np.float32(1.0), F32, "1"),
    (np.float32(-2.5), F32, "-2.5"),
    (np.float32(1e-5), F32, "1e-05"),
    (np.float32(-1e9), F32, "-1e+09"),
    (np.float32(0.1), F32, "0.1"),
    (np.float32(0.797884583), F32, "0.797884583"),  # %.6g does not round-trip: %.9g
    (np.float32(3.14159274), F32, "3.14159274"),
    (np.float32(np.inf), F32, "inf"),
    (np.float32(-np.inf), F32, "-inf"),
    (np.float32(np.nan), F32, "nan"),
    (-np.float32(np.nan), F32, "-nan"),
    (np.float32(-0.0), F32, "-0"),
    (np.float64(0.1), PrimitiveType.F64, "0.1"),
    (np.float64(1 / 3), PrimitiveType.F64, "0.33333333333333331"),
    (np.float16(0.1), PrimitiveType.F16, "0.1"),
    (ml_dtypes.bfloat16(3.140625), PrimitiveType.BF16, "3.141"),
    (True, PrimitiveType.PRED, "true"),
    (False, PrimitiveType.PRED, "false"),
    (2**64 - 1, PrimitiveType.U64, "18446744073709551615"),
    (-128, PrimitiveType.S8, "-128"),
])
def test_format_scalar(value: object, et: PrimitiveType, text: str) -> None:
    assert format_scalar(value, et) == text


def test_literal_to_text_ranks() -> None:
    assert literal_to_text(Literal(np.float32(2)), Shape.array(F32)) == "2"
    assert literal_to_text(Literal(np.array([1, 2], np.int32)),
                           Shape.array("s32", (2,))) == "{1, 2}"
    two = np.array([[1, 2], [3, 4]], np.float32)
    assert literal_to_text(Literal(two), Shape.array(F32, (2, 2))) == "{ { 1, 2 }, { 3, 4 } }"
    three = np.arange(8, dtype=np.int32).reshape(2, 2, 2)
    assert literal_to_text(Literal(three), Shape.array("s32", (2, 2, 2))) == (
        "{ { /*i0=0*/ {0, 1}, {2, 3} }, { /*i0=1*/ {4, 5}, {6, 7} } }")
    four = np.arange(4, dtype=np.float32).reshape(2, 2, 1, 1)
    assert literal_to_text(Literal(four), Shape.array(F32, (2, 2, 1, 1))) == (
        "{ { /*i0=0*/ { /*i1=0*/ {0} }, { /*i1=1*/ {1} } }, "
        "{ /*i0=1*/ { /*i1=0*/ {2} }, { /*i1=1*/ {3} } } }")
    assert literal_to_text(Literal(elided=True), Shape.array(F32, (4,))) == "{...}"
    tup = Literal(elements=(Literal(np.array([1.5], np.float32)), Literal(np.array(True))))
    shape = Shape.tuple_of([Shape.array(F32, (1,)), Shape.array("pred")])
    assert literal_to_text(tup, shape) == "( {1.5}, true )"


@pytest.mark.parametrize("dims", [(3,), (2, 3), (2, 1, 3), (1, 2, 2, 2), (0,), (2, 0)])
def test_literal_text_parses_back(dims: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    arr = rng.standard_normal(dims).astype(np.float32)
    shape = Shape.array(F32, dims)
    text = (f"HloModule m\nENTRY e {{\n  ROOT c = {shape} constant("
            f"{literal_to_text(Literal(arr), shape)})\n}}\n")
    got = parse_module(text).entry.root.attrs["literal"].array  # type: ignore[union-attr]
    assert got.shape == dims and got.tobytes() == arr.tobytes()


def _module_with(inst_builder) -> tuple[HloModule, HloComputation]:  # type: ignore[no-untyped-def]
    m = HloModule("m")
    comp = m.new_computation("main", entry=True)
    inst_builder(comp)
    return m, comp


def test_print_instruction_attrs_in_canonical_order() -> None:
    def build(c: HloComputation) -> None:
        x = c.add_parameter(0, Shape.array(F32, (1, 8, 8, 3)), "x")
        k = c.add_parameter(1, Shape.array(F32, (3, 3, 3, 4)), "k")
        attrs = Attrs({"feature_group_count": 1,
                       "dim_labels": ConvDimLabels.from_text("b01f_01io->b01f"),
                       "window": Window((WindowDim(3, 2, 1, 1), WindowDim(3, 2, 1, 1)))})
        c.add(Opcode.CONVOLUTION, Shape.array(F32, (1, 4, 4, 4)), (x, k), attrs, name="conv",
              extra=(("metadata", '{op_name="conv"}'),))

    _, comp = _module_with(build)
    conv = comp.instruction("conv")
    assert print_instruction(conv) == (
        "%conv = f32[1,4,4,4]{3,2,1,0} convolution(%x, %k), "
        "window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, "
        'feature_group_count=1, metadata={op_name="conv"}')
    assert print_instruction(conv, print_metadata=False).endswith("feature_group_count=1")


def test_print_slice_pad_compare_gte() -> None:
    def build(c: HloComputation) -> None:
        x = c.add_parameter(0, Shape.array(F32, (4, 6)), "x")
        c.add(Opcode.SLICE, Shape.array(F32, (2, 6)), (x,),
              {"slice": (SliceDim(0, 2), SliceDim(0, 6))}, name="s1")
        c.add(Opcode.SLICE, Shape.array(F32, (2, 3)), (x,),
              {"slice": (SliceDim(0, 4, 2), SliceDim(0, 6, 2))}, name="s2")
        z = c.add(Opcode.CONSTANT, Shape.array(F32), (), {"literal": Literal(np.float32(0))},
                  name="z")
        c.add(Opcode.PAD, Shape.array(F32, (6, 6)), (x, z),
              {"padding": PaddingConfig(((1, 1, 0), (0, 0, 0)))}, name="p1")
        c.add(Opcode.PAD, Shape.array(F32, (7, 6)), (x, z),
              {"padding": PaddingConfig(((0, 0, 1), (1, -1, 0)))}, name="p2")
        c.add(Opcode.COMPARE, Shape.array("pred", (4, 6)), (x, x),
              {"type": "TOTALORDER", "direction": "LT"}, name="lt")
        t = c.add(Opcode.TUPLE, Shape.tuple_of([x.shape] * 6), (x,) * 6, name="t")
        c.add(Opcode.GET_TUPLE_ELEMENT, x.shape, (t,), {"index": 5}, name="g")

    _, comp = _module_with(build)
    text = {i.name: print_instruction(i) for i in comp.instructions}
    assert text["s1"].endswith("slice={[0:2], [0:6]}")
    assert text["s2"].endswith("slice={[0:4:2], [0:6:2]}")
    assert text["z"] == "%z = f32[] constant(0)"
    assert text["p1"].endswith("padding=1_1x0_0")
    assert text["p2"].endswith("padding=0_0_1x1_-1_0")
    assert text["lt"].endswith("compare(%x, %x), direction=LT, type=TOTALORDER")
    assert text["t"] == ("%t = (f32[4,6]{1,0}, f32[4,6]{1,0}, f32[4,6]{1,0}, f32[4,6]{1,0}, "
                         "f32[4,6]{1,0}, /*index=5*/f32[4,6]{1,0}) tuple(%x, %x, %x, %x, %x, "
                         "/*index=5*/%x)")
    assert text["g"] == "%g = f32[4,6]{1,0} get-tuple-element(%t), index=5"


HLO = """HloModule sched, is_scheduled=true, input_output_alias={ {}: (0, {}, may-alias) }, entry_computation_layout={(f32[4]{0})->f32[4]{0}}, replica_count=1

%body (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p)
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %a = f32[4]{0} call(%x), to_apply=%body
  %b = f32[4]{0} exponential(%x)
  ROOT %c = f32[4]{0} add(%a, %b)
}

"""  # noqa: E501


def test_module_text_is_identical_and_schedule_order_is_used() -> None:
    m = parse_module(HLO)
    assert print_module(m) == HLO
    assert m.input_output_alias == [IOAlias((), 0, (), "may-alias")]
    assert m.schedule is not None
    entry = m.entry
    assert entry is not None
    a, b = entry.instruction("a"), entry.instruction("b")
    order = m.schedule[entry]
    order[1], order[2] = b, a
    text = print_module(m)
    assert text.index("%b = f32[4]{0} exponential") < text.index("%a = f32[4]{0} call")
    m.schedule = None
    assert "is_scheduled" not in print_module(m)


def test_computation_added_later_prints_before_its_caller() -> None:
    m = parse_module(HLO)
    entry = m.entry
    assert entry is not None
    helper = HloComputation("helper")
    hp = helper.add_parameter(0, Shape.array(F32, (4,)), "hp")
    helper.add(Opcode.ABS, hp.shape, (hp,), name="habs")
    m.add_computation(helper)
    call = HloInstruction(Opcode.CALL, hp.shape, (entry.instruction("b"),), called=(helper,),
                          name="c2")
    entry.add_instruction(call)
    text = print_module(m)
    assert text.index("%helper (hp: f32[4]) -> f32[4]") < text.index("ENTRY %main")
    assert "call(%b), to_apply=%helper" in text
    assert print_module(parse_module(text)) == text


def test_print_computation_signature_and_entry_layout_regenerated() -> None:
    m = parse_module(HLO.replace("entry_computation_layout={(f32[4]{0})->f32[4]{0}}, ", ""))
    assert "entry_computation_layout={(f32[4]{0})->f32[4]{0}}" in print_module(m)
    body = print_computation(m.computation("body"))
    assert body.splitlines()[0] == "%body (p: f32[4]) -> f32[4] {"
    assert body.splitlines()[-1] == "}"
    assert print_computation(m.computation("main")).startswith("ENTRY %main (x: f32[4])")


def test_conditional_pred_form_prints_true_false_computations() -> None:
    text = """HloModule c
%t (a: f32[]) -> f32[] {
  ROOT %a = f32[] parameter(0)
}
%f (b: f32[]) -> f32[] {
  %b = f32[] parameter(0)
  ROOT %n = f32[] negate(%b)
}
ENTRY %e (p: pred[], x: f32[]) -> f32[] {
  %p = pred[] parameter(0)
  %x = f32[] parameter(1)
  ROOT %c = f32[] conditional(%p, %x, %x), true_computation=%t, false_computation=%f
}
"""
    m = parse_module(text)
    assert [c.name for c in m.entry.root.called] == ["t", "f"]  # type: ignore[union-attr]
    printed = print_module(m)
    assert "conditional(%p, %x, %x), true_computation=%t, false_computation=%f" in printed
    assert print_module(parse_module(printed)) == printed


def test_hlo_module_clone_and_to_text() -> None:
    m = parse_module(HLO)
    c = m.clone("copy")
    assert c.name == "copy" and print_module(c) == HLO.replace("HloModule sched", "HloModule copy")
    assert m.entry.root.to_text() == "%c = f32[4]{0} add(%a, %b)"  # type: ignore[union-attr]


_DTYPES = [PrimitiveType.F32, PrimitiveType.F64, PrimitiveType.F16, PrimitiveType.BF16,
           PrimitiveType.S8, PrimitiveType.S32, PrimitiveType.S64, PrimitiveType.U8,
           PrimitiveType.U32, PrimitiveType.U64, PrimitiveType.PRED]


@settings(max_examples=40, deadline=None)
@given(et=st.sampled_from(_DTYPES),
       dims=st.lists(st.integers(0, 3), min_size=0, max_size=4),
       seed=st.integers(0, 2**32 - 1))
def test_literal_round_trip_is_bit_exact(et: PrimitiveType, dims: list[int], seed: int) -> None:
    """Random bits of every dtype (NaNs aside) print and parse back to the same bytes."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(dims)) if dims else 1
    raw = rng.integers(0, 256, size=n * et.byte_size, dtype=np.uint8)
    arr = raw.view(et.dtype).reshape(dims) if et is not PrimitiveType.PRED else \
        (raw % 2).astype(bool).reshape(dims)
    if et.is_float:
        arr = np.where(np.isnan(arr.astype(np.float64)), np.zeros_like(arr), arr)
    shape = Shape.array(et, tuple(dims))
    text = (f"HloModule m\nENTRY e {{\n  ROOT c = {shape} constant("
            f"{literal_to_text(Literal(arr), shape)})\n}}\n")
    got = parse_module(text).entry.root.attrs["literal"].array  # type: ignore[union-attr]
    assert got.dtype == et.dtype and got.shape == tuple(dims)
    assert got.tobytes() == np.ascontiguousarray(arr).tobytes()


def test_shape_without_layout_prints_default_layout() -> None:
    m = HloModule("m")
    comp = m.new_computation("main", entry=True)
    p = comp.add_parameter(0, Shape(F32, (2, 3), None), "p")
    comp.add(Opcode.NEGATE, Shape(F32, (2, 3), None), (p,), name="n")
    text = print_module(m)
    assert "%n = f32[2,3]{1,0} negate(%p)" in text
    assert print_module(parse_module(text)) == text


def test_scalar_memory_space_round_trips() -> None:
    """A scalar's only layout is its tail: `f32[]{:S(5)}` (host memory) is printed as parsed,
    while a plain scalar prints no braces."""
    text = ("HloModule m\n\nENTRY e {\n  p = f32[] parameter(0)\n"
            "  ROOT c = f32[]{:S(5)} copy(p)\n}\n")
    m = parse_module(text)
    assert m.entry.root.shape.to_text() == "f32[]{:S(5)}"
    assert m.entry.root.shape.layout.memory_space == 5
    assert m.entry.parameters[0].shape.to_text() == "f32[]"
    printed = print_module(m)
    assert "ROOT %c = f32[]{:S(5)} copy(%p)" in printed
    assert print_module(parse_module(printed)) == printed
