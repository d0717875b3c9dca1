"""copy-start / copy-done: XLA's text (parse, print, round trip), shape inference, the
verifier's pair rules, the evaluator, dataflow and liveness, and the CPU and interpreter
backends running them as plain copies."""
from __future__ import annotations

import numpy as np
import pytest

import xlc
from xlc.errors import ShapeError, VerificationError
from xlc.hlo.evaluator import evaluate
from xlc.hlo.opcodes import ASYNC_COPY_OPCODES, Opcode
from xlc.hlo.parser import parse_module, parse_shape
from xlc.hlo.printer import print_module
from xlc.hlo.shape_inference import infer_copy_done, infer_copy_start
from xlc.passes.dataflow import DataflowAnalysis, value_readers, value_source
from xlc.passes.ordering import LiveRanges
from xlc.passes.scheduler import default_memory_schedule

# XLA's own parser test (hlo_parser_test.cc, "CopyStartAndCopyDone"), as XLA prints it
XLA_TEXT = """\
HloModule CopyStartAndCopyDone_module, entry_computation_layout={(f32[], f32[2,3]{1,0:S(1)})\
->(f32[], f32[2,3]{1,0:S(2)})}

ENTRY %CopyStartAndCopyDone (v1: f32[], v2: f32[2,3]) -> (f32[], f32[2,3]) {
  %v1 = f32[] parameter(0)
  %copy-start.1 = (f32[], f32[], u32[]) copy-start(%v1), cross_program_prefetch_index=0
  %copy-done.1 = f32[] copy-done(%copy-start.1)
  %v2 = f32[2,3]{1,0:S(1)} parameter(1)
  %copy-start.2 = (f32[2,3]{1,0:S(2)}, f32[2,3]{1,0:S(1)}, u32[]) copy-start(%v2)
  %copy-done.2 = f32[2,3]{1,0:S(2)} copy-done(%copy-start.2)
  ROOT %tuple = (f32[], f32[2,3]{1,0:S(2)}) tuple(%copy-done.1, %copy-done.2)
}

"""

# host offload and prefetch back, in JAX's spelling (operand shapes, no `%`)
OFFLOAD = """
HloModule offload, is_scheduled=true
ENTRY main {
  p = f32[8,16]{1,0} parameter(0)
  a = f32[8,16]{1,0} exponential(p)
  cs = (f32[8,16]{1,0:S(5)}, f32[8,16]{1,0}, u32[]) copy-start(f32[8,16]{1,0} a)
  b = f32[8,16]{1,0} tanh(p)
  cd = f32[8,16]{1,0:S(5)} copy-done((f32[8,16]{1,0:S(5)}, f32[8,16]{1,0}, u32[]) cs)
  c = f32[8,16]{1,0} multiply(b, b)
  cs2 = (f32[8,16]{1,0}, f32[8,16]{1,0:S(5)}, u32[]) copy-start(cd), is_cross_program_prefetch=true
  cd2 = f32[8,16]{1,0} copy-done(cs2)
  ROOT r = f32[8,16]{1,0} add(c, cd2)
}
"""


# the same without operand shapes (the verifier tests change the declared shapes)
PLAIN = """
HloModule offload
ENTRY main {
  p = f32[8,16]{1,0} parameter(0)
  a = f32[8,16]{1,0} exponential(p)
  cs = (f32[8,16]{1,0:S(5)}, f32[8,16]{1,0}, u32[]) copy-start(a)
  b = f32[8,16]{1,0} tanh(p)
  cd = f32[8,16]{1,0:S(5)} copy-done(cs)
  c = f32[8,16]{1,0} multiply(b, b)
  cs2 = (f32[8,16]{1,0}, f32[8,16]{1,0:S(5)}, u32[]) copy-start(cd)
  cd2 = f32[8,16]{1,0} copy-done(cs2)
  ROOT r = f32[8,16]{1,0} add(c, cd2)
}
"""


def test_xla_text_round_trips_exactly() -> None:
    m = parse_module(XLA_TEXT, verify=True)
    assert print_module(m) == XLA_TEXT
    assert [i.opcode for i in m.entry.instructions[1:3]] == [Opcode.COPY_START, Opcode.COPY_DONE]
    assert m.entry.instruction("copy-start.1").get_extra("cross_program_prefetch_index") == "0"


def test_offload_text_parses_and_prints_xla_syntax() -> None:
    m = parse_module(OFFLOAD, verify=True)
    text = print_module(m)
    assert "%cs = (f32[8,16]{1,0:S(5)}, f32[8,16]{1,0}, u32[]) copy-start(%a)" in text
    assert "%cd = f32[8,16]{1,0:S(5)} copy-done(%cs)" in text
    assert "copy-start(%cd), is_cross_program_prefetch=true" in text
    assert print_module(parse_module(text, verify=True)) == text
    cs = m.entry.instruction("cs")
    assert cs.shape.tuple_shapes[0].layout.memory_space == 5
    assert cs.shape.tuple_shapes[1].layout.memory_space == 0


def test_the_opcode_table_knows_the_pair() -> None:
    assert Opcode.from_text("copy-start") is Opcode.COPY_START
    assert Opcode.COPY_DONE.arity == 1 and not Opcode.COPY_START.is_elementwise
    assert ASYNC_COPY_OPCODES == {Opcode.COPY_START, Opcode.COPY_DONE}


def test_unknown_attribute_is_refused() -> None:
    bad = OFFLOAD.replace("copy-start(cd), is_cross_program_prefetch=true",
                          "copy-start(cd), dimensions={0}")
    with pytest.raises(xlc.errors.ParseError, match="unknown attribute 'dimensions' for "
                                                     "copy-start"):
        parse_module(bad)


# ---- shape inference and the verifier ---------------------------------------------------------
def test_shape_inference() -> None:
    s = infer_copy_start(parse_shape("f32[4,2]{0,1}"))
    assert s.to_text(False) == "(f32[4,2], f32[4,2], u32[])"
    assert infer_copy_done(parse_shape("(f32[4]{0:S(5)}, f32[4], u32[])")).to_text() == \
        "f32[4]{0}"
    with pytest.raises(ShapeError, match=r"^copy-start: expected an array operand, got "
                                         r"\(f32\[4\]\)$"):
        infer_copy_start(parse_shape("(f32[4])"))
    with pytest.raises(ShapeError, match=r"^copy-done: operand must be a copy-start's "
                                         r"\(destination, source, u32\[\]\) tuple, got "
                                         r"\(f32\[4\], f32\[5\], u32\[\]\)$"):
        infer_copy_done(parse_shape("(f32[4], f32[5], u32[])"))


@pytest.mark.parametrize("old,new,message", [
    ("cs = (f32[8,16]{1,0:S(5)}, f32[8,16]{1,0}, u32[])",
     "cs = (f32[8,16]{1,0:S(5)}, f32[8,16]{1,0}, s32[])",
     "result shape does not match the inferred shape"),
    ("cs = (f32[8,16]{1,0:S(5)}, f32[8,16]{1,0}, u32[])",
     "cs = (f32[8,16]{0,1:S(5)}, f32[8,16]{1,0}, u32[])",
     "copy-start: the source element must have the operand's layout and the destination its "
     "minor-to-major order"),
    ("cd = f32[8,16]{1,0:S(5)} copy-done(", "cd = f32[8,16]{1,0} copy-done(",
     r"copy-done: the result must have the destination's layout f32\[8,16\]\{1,0:S\(5\)\}"),
    ("c = f32[8,16]{1,0} multiply(b, b)", "c = f32[8,16]{1,0} multiply(b, b)\n"
     "  t = ((f32[8,16]{1,0:S(5)}, f32[8,16]{1,0}, u32[])) tuple(cs)",
     "copy-start: every user must be a copy-done, got t"),
])
def test_verifier_rules(old: str, new: str, message: str) -> None:
    parse_module(PLAIN, verify=True)
    assert old in PLAIN
    with pytest.raises(VerificationError, match=message):
        parse_module(PLAIN.replace(old, new), verify=True)


def test_copy_done_must_take_a_copy_start() -> None:
    text = """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  z = u32[] constant(0)
  t = (f32[4], f32[4], u32[]) tuple(p, q, z)
  ROOT d = f32[4] copy-done(t)
}
"""
    with pytest.raises(VerificationError, match=r"instruction 'd' in computation 'e': "
                                                r"copy-done: the operand must be a copy-start, "
                                                r"got tuple 't'"):
        parse_module(text, verify=True)


# ---- the evaluator ------------------------------------------------------------------------------
def test_evaluator_copy_start_yields_destination_source_context() -> None:
    m = parse_module(OFFLOAD)
    x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    from xlc.hlo.evaluator import Evaluator

    ev = Evaluator(m)
    cs = m.entry.instruction("cs")
    a = np.exp(x)
    dest, src, ctx = ev.evaluate_instruction(cs, [a])
    np.testing.assert_array_equal(dest, a)
    assert src is a and dest is not a  # a fresh buffer for the destination
    assert ctx.dtype == np.uint32 and ctx.shape == ()
    done = ev.evaluate_instruction(m.entry.instruction("cd"), [(dest, src, ctx)])
    assert done is dest
    got = evaluate(m, [x])
    want = np.tanh(x) * np.tanh(x) + np.exp(x)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_evaluator_runs_xla_example() -> None:
    m = parse_module(XLA_TEXT)
    v2 = np.arange(6, dtype=np.float32).reshape(2, 3)
    a, b = evaluate(m, [np.float32(3), v2])
    assert a == 3 and b.dtype == np.float32
    np.testing.assert_array_equal(b, v2)


# ---- dataflow and liveness ----------------------------------------------------------------------
def test_dataflow_defines_destination_and_context_and_forwards_the_source() -> None:
    m = parse_module(OFFLOAD)
    df = DataflowAnalysis(m)
    e = m.entry
    a, cs, cd, cs2, cd2 = (e.instruction(n) for n in ("a", "cs", "cd", "cs2", "cd2"))
    assert [b.index for b in df.defines(cs)] == [(), (0,), (2,)]
    assert df.defines(cd) == [] and df.defines(cd2) == []
    (dest,) = df.buffers_at(cs, (0,))
    assert dest.color == 5 and dest.size == 8 * 16 * 4
    assert df.buffers_at(cs, (1,)) == df.buffers_at(a)  # the source is the operand's value
    assert df.buffers_at(cd) == [dest]                  # copy-done forwards the destination
    assert df.buffers_at(cs2, (1,)) == [dest]
    (back,) = df.buffers_at(cd2)
    assert back.instruction is cs2 and back.index == (0,) and back.color == 0
    # neither the index table nor the context takes memory
    assert df.defined_at(cs, ()).size == 0 and df.defined_at(cs, (2,)).size == 0
    # aliasing helpers walk through the pair
    assert value_source(cd2) == (cs2, (0,))
    assert value_source(cs2, (1,)) == (cs, (0,))
    readers, _ = value_readers(a, ())
    assert {r.name for r in readers} == {"cs", "cd"}


def test_source_stays_live_until_copy_done() -> None:
    m = parse_module(OFFLOAD)
    df = DataflowAnalysis(m)
    live = LiveRanges(m, m.schedule or default_memory_schedule(m), df)
    e = m.entry
    t = {i.name: live.time(i) for i in e.instructions}
    (src,) = df.buffers_at(e.instruction("a"))
    (host,) = df.buffers_at(e.instruction("cd"))
    (back,) = df.buffers_at(e.instruction("cd2"))
    assert live.buffer_ranges[src].end == t["cd"]          # read by the copy until it is done
    r = live.buffer_ranges[host]
    assert (r.start, r.end) == (t["cs"], t["cd2"])         # host copy: out start .. back done
    assert live.buffer_ranges[back].start == t["cs2"]


# ---- backends: plain copies ---------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_backends_run_copies_as_plain_copies(backend: str) -> None:
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    want = evaluate(parse_module(OFFLOAD), [x])
    got = xlc.compile(OFFLOAD, backend=backend)(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_cpu_runs_the_xla_example() -> None:
    v2 = np.arange(6, dtype=np.float32).reshape(2, 3)
    a, b = xlc.compile(XLA_TEXT, backend="cpu")(np.float32(3), v2)
    assert float(a) == 3.0
    np.testing.assert_array_equal(b, v2)
