"""InstructionFusion: rewrite tests written as HLO text (CHECK lines and structural asserts),
numerics against the evaluator, and every public corpus case before/after fusion."""
from __future__ import annotations

import pytest

from tests.conftest import corpus_cases, requires_corpus
from tests.passes.filecheck import (
    assert_same_numerics,
    filecheck,
    parse,
    printed,
    random_args,
    run_passes,
)
from xlc.hlo.opcodes import Opcode
from xlc.passes.fusion import InstructionFusion, creates_cycle, fusion_priority


def fusions(module, kind=None):
    """Fusion instructions of the entry (optionally of one kind)."""
    return [i for i in module.entry.instructions
            if i.opcode is Opcode.FUSION and (kind is None or i.attrs["kind"] == kind)]


def fused_opcodes(fusion):
    return sorted(i.opcode.text for i in fusion.fused_computation.instructions
                  if i.opcode is not Opcode.PARAMETER)


def fuse(text, **kw):
    before, after, changed = run_passes(text, [InstructionFusion(**kw)])
    return before, after, changed


CHAIN = """
HloModule chain
ENTRY main {
  a = f32[8,16] parameter(0)
  b = f32[8,16] parameter(1)
  c = f32[] constant(2)
  cb = f32[8,16] broadcast(c), dimensions={}
  m = f32[8,16] multiply(a, cb)
  s = f32[8,16] add(m, b)
  n = f32[8,16] negate(s)
  ROOT t = f32[8,16] tanh(n)
}
"""


def test_elementwise_chain_becomes_one_loop_fusion():
    before, after, changed = fuse(CHAIN)
    assert changed
    filecheck(printed(after), """
      CHECK: %fused_computation
      CHECK: parameter(0)
      CHECK: parameter(1)
      CHECK: constant(2)
      CHECK: broadcast(
      CHECK: multiply(
      CHECK: add(
      CHECK: negate(
      CHECK: ROOT %t = f32[8,16]{1,0} tanh(
      CHECK: ENTRY
      CHECK-NEXT: parameter(0)
      CHECK-NEXT: parameter(1)
      CHECK-NEXT: ROOT %loop_fusion = f32[8,16]{1,0} fusion(%a, %b), kind=kLoop, calls=%fused_comp
      CHECK-NEXT: }
    """)
    (f,) = fusions(after)
    fc = f.fused_computation
    assert fc.is_fusion_computation
    assert [p.parameter_number for p in fc.parameters] == [0, 1]
    assert [p.shape for p in fc.parameters] == [o.shape for o in f.operands]
    comps = after.computations
    assert comps.index(fc) < comps.index(after.entry)
    assert_same_numerics(before, after)


def test_fusing_into_a_fusion_deduplicates_operands():
    text = """
HloModule dedupe
ENTRY main {
  p = f32[8] parameter(0)
  q = f32[8] parameter(1)
  x = f32[8] add(p, q)
  y = f32[8] multiply(x, p)
  ROOT z = f32[8] subtract(y, q)
}
"""
    before, after, _ = fuse(text)
    (f,) = fusions(after)
    assert [o.name for o in f.operands] == ["p", "q"]
    fc = f.fused_computation
    assert [p.parameter_number for p in fc.parameters] == [0, 1]
    assert all(p.name.startswith(f"param_{k}") for k, p in enumerate(fc.parameters))
    assert fused_opcodes(f) == ["add", "multiply", "subtract"]
    assert_same_numerics(before, after)


def test_second_run_changes_nothing():
    _, after, _ = fuse(CHAIN)
    assert InstructionFusion().run(after) is False


SOFTMAX = """
HloModule softmax
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


def test_softmax_input_and_loop_fusions():
    before, after, _ = fuse(SOFTMAX)
    inputs = fusions(after, "kInput")
    loops = fusions(after, "kLoop")
    assert len(inputs) == 2 and len(loops) == 2
    assert [fused_opcodes(f) for f in inputs] in (
        [["constant", "reduce"], ["constant", "reduce"]],)
    by_root = {f.fused_computation.root.opcode: f for f in loops}
    assert fused_opcodes(by_root[Opcode.EXP]) == ["broadcast", "exponential", "subtract"]
    assert fused_opcodes(by_root[Opcode.DIVIDE]) == ["broadcast", "divide"]
    # The exponential has two users (the sum and the divide): expensive, never duplicated.
    assert printed(after).count("exponential(") == 1
    # Reducer computations are never fused into.
    for name in ("max_f32", "add_f32"):
        comp = after.computation(name)
        assert all(i.opcode is not Opcode.FUSION for i in comp.instructions)
    assert_same_numerics(before, after)


def test_dot_is_not_a_producer():
    text = """
HloModule dot_bias
ENTRY main {
  a = f32[8,32] parameter(0)
  b = f32[32,16] parameter(1)
  bias = f32[16] parameter(2)
  d = f32[8,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[8,16] broadcast(bias), dimensions={1}
  s = f32[8,16] add(d, bb)
  zero = f32[] constant(0)
  zb = f32[8,16] broadcast(zero), dimensions={}
  ROOT r = f32[8,16] maximum(s, zb)
}
"""
    before, after, _ = fuse(text)
    filecheck(printed(after), """
      CHECK: ENTRY
      CHECK: %d = f32[8,16]{1,0} dot(%a, %b)
      CHECK-NEXT: ROOT %loop_fusion = f32[8,16]{1,0} fusion(%bias, %d), kind=kLoop
    """)
    (f,) = fusions(after)
    assert fused_opcodes(f) == ["add", "broadcast", "broadcast", "constant", "maximum"]
    assert_same_numerics(before, after, rtol=1e-4, atol=1e-5)


def test_expensive_producer_with_two_users_is_not_duplicated():
    text = """
HloModule two_users
ENTRY main {
  p = f32[32] parameter(0)
  q = f32[32] parameter(1)
  e = f32[32] exponential(p)
  n = f32[32] negate(q)
  a = f32[32] add(e, n)
  m = f32[32] multiply(e, q)
  ROOT t = (f32[32], f32[32]) tuple(a, m)
}
"""
    before, after, _ = fuse(text)
    out = printed(after)
    assert out.count("exponential(") == 1
    e = after.entry.instruction("e")
    assert e.opcode is Opcode.EXP and len(e.users) == 2
    (f,) = fusions(after)
    assert fused_opcodes(f) == ["add", "negate"]
    assert_same_numerics(before, after)


def test_cheap_producer_is_duplicated_into_all_users():
    text = """
HloModule dup
ENTRY main {
  p = f32[32] parameter(0)
  q = f32[32] parameter(1)
  s = f32[32] add(p, q)
  a = f32[32] negate(s)
  b = f32[32] abs(s)
  ROOT t = (f32[32], f32[32]) tuple(a, b)
}
"""
    before, after, _ = fuse(text)
    fs = fusions(after)
    assert len(fs) == 2
    assert sorted(fused_opcodes(f) for f in fs) == [["abs", "add"], ["add", "negate"]]
    with pytest.raises(KeyError):
        after.entry.instruction("s")  # fused into both users, then dead
    assert_same_numerics(before, after)


def test_duplication_can_be_disabled():
    text = """
HloModule dup
ENTRY main {
  p = f32[32] parameter(0)
  q = f32[32] parameter(1)
  s = f32[32] add(p, q)
  a = f32[32] negate(s)
  b = f32[32] abs(s)
  ROOT t = (f32[32], f32[32]) tuple(a, b)
}
"""
    _, after, changed = fuse(text, allow_duplication=False)
    assert not changed
    assert not fusions(after)


def test_large_constants_stay_outside_scalar_constants_fuse():
    text = """
HloModule consts
ENTRY main {
  p = f32[4] parameter(0)
  k = f32[4] constant({1, 2, 3, 4})
  c = f32[] constant(3)
  cb = f32[4] broadcast(c), dimensions={}
  m = f32[4] multiply(p, k)
  ROOT r = f32[4] add(m, cb)
}
"""
    before, after, _ = fuse(text)
    (f,) = fusions(after)
    assert fused_opcodes(f) == ["add", "broadcast", "constant", "multiply"]
    assert any(o.opcode is Opcode.CONSTANT and o.shape.dims == (4,) for o in f.operands)
    assert_same_numerics(before, after)


def test_lone_constant_is_not_fused_into_unfused_op():
    text = """
HloModule scalar
ENTRY main {
  i = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT r = s32[] add(i, one)
}
"""
    _, after, changed = fuse(text)
    assert not changed and not fusions(after)


def test_expensive_producer_not_fused_through_broadcast():
    text = """
HloModule reuse
ENTRY main {
  p = f32[8] parameter(0)
  q = f32[8,128] parameter(1)
  e = f32[8] exponential(p)
  eb = f32[8,128] broadcast(e), dimensions={0}
  ROOT r = f32[8,128] add(eb, q)
}
"""
    before, after, _ = fuse(text)
    (f,) = fusions(after)
    assert fused_opcodes(f) == ["add", "broadcast"]
    assert after.entry.instruction("e") in f.operands
    assert_same_numerics(before, after)


def test_reduce_takes_its_producers_as_input_fusion():
    text = """
HloModule sumsq
add_f32 {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT add_r = f32[] add(x, y)
}
ENTRY main {
  p = f32[16,32] parameter(0)
  sq = f32[16,32] multiply(p, p)
  zero = f32[] constant(0)
  ROOT r = f32[16] reduce(sq, zero), dimensions={1}, to_apply=add_f32
}
"""
    before, after, _ = fuse(text)
    filecheck(printed(after), """
      CHECK: %fused_computation
      CHECK: multiply(
      CHECK: ROOT %r = f32[16]{0} reduce(
      CHECK: ENTRY
      CHECK: ROOT %input_fusion = f32[16]{0} fusion(%p), kind=kInput
    """)
    assert_same_numerics(before, after, rtol=1e-4, atol=1e-5)


def test_in_place_dynamic_update_slice_keeps_its_buffer():
    text = """
HloModule dus
ENTRY main {
  buf = f32[16,16] parameter(0)
  i = s32[] parameter(1)
  j = s32[] parameter(2)
  ds = f32[4,4] dynamic-slice(buf, i, j), dynamic_slice_sizes={4,4}
  one = f32[] constant(1)
  ob = f32[4,4] broadcast(one), dimensions={}
  upd = f32[4,4] add(ds, ob)
  ROOT r = f32[16,16] dynamic-update-slice(buf, upd, i, j)
}
"""
    before, after, _ = fuse(text)
    (f,) = fusions(after)
    assert f.fused_computation.root.opcode is Opcode.DYNAMIC_UPDATE_SLICE
    # The dynamic-slice reads the updated buffer: it stays outside the in-place fusion.
    assert Opcode.DYNAMIC_SLICE not in {i.opcode for i in f.fused_computation.instructions}
    assert after.entry.instruction("ds").opcode is Opcode.DYNAMIC_SLICE
    assert f.operands[0] is after.entry.instruction("buf")
    args = random_args(before)
    args[1][...] = 3
    args[2][...] = 7
    assert_same_numerics(before, after, args)


def test_operand_limit():
    text = """
HloModule wide
ENTRY main {
  a = f32[8] parameter(0)
  b = f32[8] parameter(1)
  c = f32[8] parameter(2)
  d = f32[8] parameter(3)
  x = f32[8] add(a, b)
  y = f32[8] add(c, d)
  ROOT z = f32[8] multiply(x, y)
}
"""
    _, after, _ = fuse(text, max_fusion_operands=4)
    (f,) = fusions(after)
    assert len(f.operands) + 1 <= 4
    _, unlimited, _ = fuse(text)
    (g,) = fusions(unlimited)
    assert len(g.operands) == 4


WHILE = """
HloModule loop
cond {
  cs = (s32[], f32[8]) parameter(0)
  ci = s32[] get-tuple-element(cs), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(ci, n), direction=LT
}
body {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  h = f32[] constant(0.5)
  hb = f32[8] broadcast(h), dimensions={}
  m = f32[8] multiply(x, hb)
  x1 = f32[8] add(m, x)
  ROOT bt = (s32[], f32[8]) tuple(i1, x1)
}
ENTRY main {
  p = f32[8] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[8]) tuple(z, p)
  w = (s32[], f32[8]) while(t), condition=cond, body=body
  ROOT r = f32[8] get-tuple-element(w), index=1
}
"""


def test_fuses_inside_while_body():
    before, after, _ = fuse(WHILE)
    body = after.computation("body")
    fs = [i for i in body.instructions if i.opcode is Opcode.FUSION]
    assert len(fs) == 1 and fused_opcodes(fs[0]) == ["add", "broadcast", "constant", "multiply"]
    comps = after.computations
    assert comps.index(fs[0].fused_computation) < comps.index(body)
    assert_same_numerics(before, after)


def test_priority_and_cycle_helpers():
    m = parse(CHAIN)
    t = m.entry.instruction("t")
    n = m.entry.instruction("n")
    c = m.entry.instruction("c")
    cb = m.entry.instruction("cb")
    assert fusion_priority(n, t) == 2 * 8 * 16 * 4
    assert fusion_priority(c, cb) == 0  # lone constant into an unfused op
    assert not creates_cycle(n, t)
    assert creates_cycle(c, t)
    fusion = InstructionFusion()
    assert fusion.can_fuse(n, t)
    assert fusion.fusion_legality_error(m.entry.instruction("a"), m.entry.instruction("m")) == \
        "parameter is not a fusible producer"
    assert fusion.fusion_legality_error(n, t) is None


@requires_corpus
@pytest.mark.parametrize("name", corpus_cases(include_benchmarks=False))
def test_corpus_numerics_before_and_after_fusion(name):
    from corpus import load_case  # type: ignore[import-not-found]

    from xlc.hlo.parser import parse_module
    from xlc.options import CompileOptions
    from xlc.passes.call_inliner import CallInliner
    from xlc.passes.pipeline import Pipeline

    case = load_case(name)
    before = parse_module(case.module_text)
    after = parse_module(case.module_text)
    Pipeline("fusion-test", [CallInliner(), InstructionFusion()]).run(
        after, CompileOptions(verify=True))
    assert after.to_text()  # prints
    assert_same_numerics(before, after, case.inputs, rtol=1e-5, atol=1e-5)


def test_reduce_window_takes_cheap_producers_only():
    text = """
HloModule rw
add_f32 {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT add_r = f32[] add(x, y)
}
ENTRY main {
  p = f32[16,16] parameter(0)
  n = f32[16,16] negate(p)
  e = f32[16,16] exponential(n)
  zero = f32[] constant(0)
  ROOT r = f32[8,8] reduce-window(e, zero), window={size=2x2 stride=2x2}, to_apply=add_f32
}
"""
    before, after, _ = fuse(text, fuse_reduce_window=True)
    fs = fusions(after)
    by_kind = {f.attrs["kind"]: f for f in fs}
    # Windows could overlap: the exponential is not recomputed per window element, it stays a
    # loop fusion of its own (with the negate) feeding the reduce-window input fusion.
    assert fused_opcodes(by_kind["kInput"]) == ["constant", "reduce-window"]
    assert fused_opcodes(by_kind["kLoop"]) == ["exponential", "negate"]
    _, off, _ = fuse(text)  # off by default
    assert [f.attrs["kind"] for f in fusions(off)] == ["kLoop"]
    assert_same_numerics(before, after, rtol=1e-5, atol=1e-5)


def test_bitcast_convert_fuses_only_when_elementwise():
    text = """
HloModule bc
ENTRY main {
  p = f32[8] parameter(0)
  n = f32[8] negate(p)
  b = s32[8] bitcast-convert(n)
  q = s32[8] parameter(1)
  ROOT r = s32[8] add(b, q)
}
"""
    before, after, _ = fuse(text)
    (f,) = fusions(after)
    assert fused_opcodes(f) == ["add", "bitcast-convert", "negate"]
    assert_same_numerics(before, after)
    wide = """
HloModule bcw
ENTRY main {
  p = f32[8] parameter(0)
  n = f32[8] negate(p)
  b = u8[8,4] bitcast-convert(n)
  q = u8[8,4] parameter(1)
  ROOT r = u8[8,4] add(b, q)
}
"""
    _, after2, changed = fuse(wide)
    assert not changed and not fusions(after2)  # a width-changing bitcast-convert blocks it


def test_variadic_reduce_takes_its_iota_as_input_fusion():
    text = """
HloModule argmax
argmax_f32 {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(av, bv), direction=GT
  v = f32[] select(gt, av, bv)
  i = s32[] select(gt, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY main {
  p = f32[8,32] parameter(0)
  io = s32[8,32] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  r = (f32[8], s32[8]) reduce(p, io, ninf, zero), dimensions={1}, to_apply=argmax_f32
  ROOT idx = s32[8] get-tuple-element(r), index=1
}
"""
    before, after, _ = fuse(text)
    (f,) = fusions(after)
    assert f.attrs["kind"] == "kInput" and f.shape.is_tuple
    assert fused_opcodes(f) == ["constant", "constant", "iota", "reduce"]
    assert [o.name for o in f.operands] == ["p"]
    assert after.entry.root.operands[0] is f
    # The reducer computation is never fused into.
    assert all(i.opcode is not Opcode.FUSION
               for i in after.computation("argmax_f32").instructions)
    assert_same_numerics(before, after)


GATHER = """
HloModule gather
ENTRY main {
  table = f32[10] parameter(0)
  x = f32[4,8] parameter(1)
  two = f32[] constant(2)
  twob = f32[4,8] broadcast(two), dimensions={}
  m = f32[4,8] multiply(x, twob)
  r = f32[4,8] round-nearest-even(m)
  i = s32[4,8] convert(r)
  lo = s32[] constant(0)
  hi = s32[] constant(9)
  lob = s32[4,8] broadcast(lo), dimensions={}
  hib = s32[4,8] broadcast(hi), dimensions={}
  c = s32[4,8] clamp(lob, i, hib)
  idx = s32[4,8,1] reshape(c)
  g = f32[4,8] gather(table, idx), offset_dims={}, collapsed_slice_dims={0},
               start_index_map={0}, index_vector_dim=2, slice_sizes={1}
  ROOT o = f32[4,8] add(g, x)
}
"""


def test_gather_fuses_with_its_index_computation_only_when_enabled():
    _, after, _ = fuse(GATHER)
    assert any(i.opcode is Opcode.GATHER for i in after.entry.instructions)
    before, after, changed = fuse(GATHER, fuse_gather=True)
    assert changed
    (f,) = fusions(after)
    assert f.attrs["kind"] == "kLoop" and after.entry.root is f
    assert "gather" in fused_opcodes(f) and "convert" in fused_opcodes(f)
    assert sorted(o.name for o in f.operands) == ["table", "x"]
    assert_same_numerics(before, after)
