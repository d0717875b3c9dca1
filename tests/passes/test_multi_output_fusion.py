"""MultiOutputFusion: sibling and producer-consumer multi-output fusion, written as HLO text, with
the verifier after every pass and numerics against the evaluator (corpus included), plus random
programs (hypothesis) through InstructionFusion + MultiOutputFusion."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import corpus_cases, requires_corpus
from tests.passes.filecheck import assert_same_numerics, filecheck, parse, printed, run_passes
from xlc.hlo.opcodes import Opcode
from xlc.passes.fusion import InstructionFusion
from xlc.passes.fusion_utils import fusion_counts
from xlc.passes.multi_output_fusion import MultiOutputFusion, Reachability, would_create_cycle
from xlc.passes.pipeline import FixedPoint


def fusions(module, kind=None):
    return [i for i in module.entry.instructions
            if i.opcode is Opcode.FUSION and (kind is None or i.attrs["kind"] == kind)]


def fused_opcodes(fusion):
    return sorted(i.opcode.text for i in fusion.fused_computation.instructions
                  if i.opcode is not Opcode.PARAMETER)


def root_opcodes(fusion):
    root = fusion.fused_computation.root
    return [o.opcode.text for o in root.operands] if root.opcode is Opcode.TUPLE else \
        [root.opcode.text]


REDUCERS = """
max_f32 {
  mx_x = f32[] parameter(0)
  mx_y = f32[] parameter(1)
  ROOT mx_r = f32[] maximum(mx_x, mx_y)
}
add_f32 {
  add_x = f32[] parameter(0)
  add_y = f32[] parameter(1)
  ROOT add_r = f32[] add(add_x, add_y)
}
"""

SOFTMAX = "HloModule softmax\n" + REDUCERS + """
ENTRY main {
  p = f32[16,64] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[16] reduce(p, ninf), dimensions={1}, to_apply=max_f32
  mxb = f32[16,64] broadcast(mx), dimensions={0}
  d = f32[16,64] subtract(p, mxb)
  e = f32[16,64] exponential(d)
  zero = f32[] constant(0)
  sm = f32[16] reduce(e, zero), dimensions={1}, to_apply=add_f32
  smb = f32[16,64] broadcast(sm), dimensions={0}
  ROOT r = f32[16,64] divide(e, smb)
}
"""


def test_softmax_exp_and_sum_become_one_multi_output_fusion():
    before, after, changed = run_passes(SOFTMAX, [InstructionFusion(), MultiOutputFusion()])
    assert changed
    inputs = fusions(after, "kInput")
    loops = fusions(after, "kLoop")
    assert len(inputs) == 2 and len(loops) == 1
    by_roots = {tuple(root_opcodes(f)): f for f in inputs}
    assert set(by_roots) == {("reduce",), ("reduce", "exponential")}
    mo = by_roots[("reduce", "exponential")]
    assert mo.shape.is_tuple
    assert fused_opcodes(mo) == ["broadcast", "constant", "exponential", "reduce", "subtract",
                                 "tuple"]
    # The divide reads both outputs through get-tuple-element: exp is written once, never
    # recomputed, and the input `p` is read by the max and by the exp/sum fusion.
    (div,) = loops
    assert fusion_counts(after) == {"total": 3, "multi_output": 1, "kInput": 2, "kLoop": 1}
    assert sorted(o.opcode.text for o in div.operands) == ["get-tuple-element"] * 2
    assert {o.tuple_index for o in div.operands} == {0, 1}
    assert printed(after).count("exponential(") == 1
    filecheck(printed(after), """
      CHECK: ENTRY
      CHECK: %input_fusion{{.*}} = f32[16]{0} fusion(%p), kind=kInput
      CHECK: = (f32[16]{0}, f32[16,64]{1,0}) fusion(%p, %input_fusion{{.*}}), kind=kInput
      CHECK: get-tuple-element(
      CHECK: ROOT %loop_fusion = f32[16,64]{1,0} fusion(
    """)
    assert_same_numerics(before, after, rtol=1e-5, atol=1e-6)


TWO_REDUCTIONS = "HloModule two\n" + REDUCERS + """
ENTRY main {
  p = f32[32,64] parameter(0)
  zero = f32[] constant(0)
  s = f32[32] reduce(p, zero), dimensions={1}, to_apply=add_f32
  sq = f32[32,64] multiply(p, p)
  ss = f32[32] reduce(sq, zero), dimensions={1}, to_apply=add_f32
  ninf = f32[] constant(-inf)
  m = f32[32] reduce(p, ninf), dimensions={1}, to_apply=max_f32
  ROOT t = (f32[32], f32[32], f32[32]) tuple(s, ss, m)
}
"""


def test_sibling_reductions_share_one_read_of_the_input():
    before, after, _ = run_passes(TWO_REDUCTIONS, [InstructionFusion(), MultiOutputFusion()])
    (f,) = fusions(after)
    assert f.attrs["kind"] == "kInput"
    assert root_opcodes(f) == ["reduce", "reduce", "reduce"]
    assert [o.name for o in f.operands] == ["p"]
    root = after.entry.root
    assert all(o.opcode is Opcode.GET_TUPLE_ELEMENT and o.operands[0] is f for o in root.operands)
    assert_same_numerics(before, after, rtol=1e-4, atol=1e-5)


def test_max_reductions_limit():
    _, after, _ = run_passes(TWO_REDUCTIONS,
                             [InstructionFusion(), MultiOutputFusion(max_reductions=2)])
    assert sorted(len(root_opcodes(f)) for f in fusions(after)) == [1, 2]


def test_small_shared_operand_is_not_worth_it():
    _, after, _ = run_passes(TWO_REDUCTIONS,
                             [InstructionFusion(), MultiOutputFusion(min_shared_bytes=1 << 20)])
    assert len(fusions(after)) == 3
    assert all(not f.shape.is_tuple for f in fusions(after))


def test_different_reduced_dimensions_do_not_merge():
    text = "HloModule dims\n" + REDUCERS + """
ENTRY main {
  p = f32[32,64] parameter(0)
  zero = f32[] constant(0)
  rows = f32[32] reduce(p, zero), dimensions={1}, to_apply=add_f32
  cols = f32[64] reduce(p, zero), dimensions={0}, to_apply=add_f32
  ROOT t = (f32[32], f32[64]) tuple(rows, cols)
}
"""
    _, after, _ = run_passes(text, [InstructionFusion(), MultiOutputFusion()])
    assert len(fusions(after)) == 2
    assert all(not f.shape.is_tuple for f in fusions(after))


def test_cycle_is_prevented():
    # `mx` and the exp fusion both read `p`, but the exp fusion also depends on `mx`: merging
    # them would make the fusion its own operand.
    before, after, _ = run_passes(SOFTMAX, [InstructionFusion(), MultiOutputFusion()])
    mx_fusion = next(f for f in fusions(after, "kInput") if not f.shape.is_tuple)
    assert root_opcodes(mx_fusion) == ["reduce"]
    m = parse(SOFTMAX)
    InstructionFusion().run(m)
    reach = Reachability(m.entry)
    mx = next(f for f in fusions(m) if f.fused_computation.root.opcode is Opcode.REDUCE
              and f.fused_computation.root.to_apply.name == "max_f32")
    exp = next(f for f in fusions(m) if f.fused_computation.root.opcode is Opcode.EXP)
    assert reach.reaches(mx, exp) and not reach.reaches(exp, mx)
    assert would_create_cycle(mx, exp, reach) is False  # direct edge only: fine to merge
    p = m.entry.instruction("p")
    assert would_create_cycle(p, exp, reach) is True  # p -> mx -> exp
    assert MultiOutputFusion().sibling_error(mx, exp, p, reach) == "cycle"


def test_producer_exported_to_a_non_fusible_user():
    text = "HloModule export\n" + REDUCERS + """
ENTRY main {
  p = f32[32,64] parameter(0)
  w = f32[64,8] parameter(1)
  t = f32[32,64] tanh(p)
  zero = f32[] constant(0)
  s = f32[32] reduce(t, zero), dimensions={1}, to_apply=add_f32
  d = f32[32,8] dot(t, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = (f32[32], f32[32,8]) tuple(s, d)
}
"""
    before, after, _ = run_passes(text, [InstructionFusion(), MultiOutputFusion()])
    (f,) = fusions(after)
    assert root_opcodes(f) == ["reduce", "tanh"]
    d = after.entry.instruction("d")
    assert d.operands[0].opcode is Opcode.GET_TUPLE_ELEMENT and d.operands[0].operands[0] is f
    assert printed(after).count("tanh(") == 1
    assert_same_numerics(before, after, rtol=1e-4, atol=1e-5)


def test_nothing_to_do_returns_false():
    text = """
HloModule single
ENTRY main {
  p = f32[64] parameter(0)
  ROOT n = f32[64] negate(p)
}
"""
    _, after, changed = run_passes(text, [MultiOutputFusion()])
    assert not changed and not fusions(after)


def test_loop_siblings_merge_when_shapes_match():
    text = """
HloModule siblings
ENTRY main {
  p = f32[64,32] parameter(0)
  q = f32[64,32] parameter(1)
  a = f32[64,32] add(p, q)
  e = f32[64,32] exponential(a)
  n = f32[64,32] negate(p)
  l = f32[64,32] log(n)
  ROOT t = (f32[64,32], f32[64,32]) tuple(e, l)
}
"""
    before, after, _ = run_passes(text, [InstructionFusion(), MultiOutputFusion()])
    (f,) = fusions(after)
    assert f.attrs["kind"] == "kLoop"
    assert sorted(root_opcodes(f)) == ["exponential", "log"]
    assert [o.name for o in f.operands] == ["p", "q"]
    assert_same_numerics(before, after)


@requires_corpus
@pytest.mark.parametrize("name", corpus_cases(include_benchmarks=False))
def test_corpus_numerics_after_multi_output_fusion(name):
    from corpus import load_case  # type: ignore[import-not-found]

    from xlc.hlo.parser import parse_module
    from xlc.options import CompileOptions
    from xlc.passes.call_inliner import CallInliner
    from xlc.passes.pipeline import Pipeline

    case = load_case(name)
    before = parse_module(case.module_text)
    after = parse_module(case.module_text)
    Pipeline("mof-test", [CallInliner(), InstructionFusion(), MultiOutputFusion()]).run(
        after, CompileOptions(verify=True))
    again = parse_module(after.to_text(), verify=True)  # prints and re-parses
    assert_same_numerics(before, again, case.inputs, rtol=1e-5, atol=1e-5)


def test_reduce_window_roots_stay_single_output():
    text = "HloModule rw\n" + REDUCERS + """
ENTRY main {
  p = f32[32,32] parameter(0)
  zero = f32[] constant(0)
  a = f32[16,16] reduce-window(p, zero), window={size=2x2 stride=2x2}, to_apply=add_f32
  ninf = f32[] constant(-inf)
  b = f32[16,16] reduce-window(p, ninf), window={size=2x2 stride=2x2}, to_apply=max_f32
  ROOT t = (f32[16,16], f32[16,16]) tuple(a, b)
}
"""
    before, after, _ = run_passes(text, [InstructionFusion(fuse_reduce_window=True),
                                         MultiOutputFusion()])
    assert len(fusions(after)) == 2
    assert all(not f.shape.is_tuple for f in fusions(after))
    assert_same_numerics(before, after)


def test_operand_limit_blocks_sibling_fusion():
    _, after, _ = run_passes(TWO_REDUCTIONS,
                             [InstructionFusion(), MultiOutputFusion(max_fusion_operands=2)])
    assert len(fusions(after)) == 3


def test_in_place_update_is_never_multi_output_fused():
    text = """
HloModule dus
ENTRY main {
  buf = f32[64,64] parameter(0)
  u = f32[8,64] parameter(1)
  i = s32[] parameter(2)
  e = f32[8,64] exponential(u)
  z = s32[] constant(0)
  d = f32[64,64] dynamic-update-slice(buf, e, i, z)
  n = f32[64,64] negate(buf)
  ROOT t = (f32[64,64], f32[64,64], f32[8,64]) tuple(d, n, e)
}
"""
    before, after, _ = run_passes(text, [InstructionFusion(), MultiOutputFusion()])
    for f in fusions(after):
        root = f.fused_computation.root
        assert root.opcode is not Opcode.TUPLE or Opcode.DYNAMIC_UPDATE_SLICE not in {
            o.opcode for o in root.operands}
    assert after.entry.instruction("e").opcode is Opcode.EXP
    assert_same_numerics(before, after)


# ---- random programs ------------------------------------------------------------------------

RANDOM_REDUCERS = """
add_f32 {
  rx = f32[] parameter(0)
  ry = f32[] parameter(1)
  ROOT rs = f32[] add(rx, ry)
}
max_f32 {
  mx = f32[] parameter(0)
  my = f32[] parameter(1)
  ROOT mm = f32[] maximum(mx, my)
}
"""
_UNARY = ("negate", "tanh", "exponential", "abs", "sine")
_BINARY = ("add", "multiply", "maximum", "subtract")


@st.composite
def random_programs(draw):
    """HLO text of a random DAG of elementwise ops, broadcasts and reductions over f32[8,32]
    matrices and f32[8] vectors, returning a tuple of a few values (so some have several
    users)."""
    shapes = {"m": "f32[8,32]", "v": "f32[8]", "s": "f32[2,4]"}
    lines = ["  p0 = f32[8,32] parameter(0)", "  p1 = f32[8,32] parameter(1)",
             "  p2 = f32[8] parameter(2)", "  i = s32[] parameter(3)",
             "  zero = f32[] constant(0)",
             "  ninf = f32[] constant(-inf)", "  half = f32[] constant(0.5)"]
    values = [("p0", "m"), ("p1", "m"), ("p2", "v")]
    for k in range(draw(st.integers(3, 14))):
        name = f"v{k}"
        choice = draw(st.sampled_from(["unary", "binary", "binary", "broadcast", "reduce",
                                       "scale", "select", "slice"]))
        a, kind = draw(st.sampled_from(values))
        if choice == "slice" and kind == "m":
            lines.append(f"  {name} = f32[2,4] dynamic-slice({a}, i, i), "
                         "dynamic_slice_sizes={2,4}")
            kind = "s"
        elif choice == "slice" and kind == "s":
            b = draw(st.sampled_from([n for n, kd in values if kd == "m"]))
            lines.append(f"  {name} = f32[8,32] dynamic-update-slice({b}, {a}, i, i)")
            kind = "m"
        elif choice == "select":
            b = draw(st.sampled_from([n for n, kd in values if kd == kind]))
            pred = shapes[kind].replace("f32", "pred")
            lines.append(f"  {name}.c = {pred} compare({a}, {b}), direction=GT")
            lines.append(f"  {name} = {shapes[kind]} select({name}.c, {b}, {a})")
        elif choice == "unary" or choice == "slice":
            op = draw(st.sampled_from(_UNARY))
            lines.append(f"  {name} = {shapes[kind]} {op}({a})")
        elif choice == "binary":
            b = draw(st.sampled_from([n for n, kd in values if kd == kind]))
            op = draw(st.sampled_from(_BINARY))
            lines.append(f"  {name} = {shapes[kind]} {op}({a}, {b})")
        elif choice == "scale":
            lines.append(f"  {name}.b = {shapes[kind]} broadcast(half), dimensions={{}}")
            lines.append(f"  {name} = {shapes[kind]} multiply({a}, {name}.b)")
        elif choice == "broadcast" or kind != "m":
            if kind != "v":
                continue
            lines.append(f"  {name} = f32[8,32] broadcast({a}), dimensions={{0}}")
            kind = "m"
        else:
            red, init = draw(st.sampled_from([("add_f32", "zero"), ("max_f32", "ninf")]))
            lines.append(f"  {name} = f32[8] reduce({a}, {init}), dimensions={{1}}, "
                         f"to_apply={red}")
            kind = "v"
        values.append((name, kind))
    outs = [values[-1]] + draw(st.lists(st.sampled_from(values), max_size=2))
    outs = list(dict.fromkeys(outs))
    shape = ", ".join(shapes[kd] for _, kd in outs)
    lines.append(f"  ROOT out = ({shape}) tuple({', '.join(n for n, _ in outs)})")
    return "HloModule random\n" + RANDOM_REDUCERS + "ENTRY main {\n" + "\n".join(lines) + "\n}\n"


@settings(max_examples=40, deadline=None)
@given(random_programs())
def test_random_programs_keep_numerics(text):
    before, after, _ = run_passes(text, [FixedPoint([InstructionFusion(), MultiOutputFusion(
        min_shared_bytes=32)], max_iters=4)])
    assert_same_numerics(before, after, rtol=1e-5, atol=1e-5)
    # Nothing left to fuse: another round is a no-op (one round may not be: merging siblings
    # can leave a producer with one user, fusible into the merged fusion).
    assert InstructionFusion().run(after) is False
    assert MultiOutputFusion(min_shared_bytes=32).run(after) is False
