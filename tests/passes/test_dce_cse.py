"""DCE and CSE: text rewrite checks, structural asserts and numerics."""
from __future__ import annotations

from tests.passes.filecheck import assert_same_numerics, filecheck, parse, printed, run_passes
from xlc.hlo.opcodes import Opcode
from xlc.passes import CommonSubexpressionElimination, DeadCodeElimination

DEAD = """HloModule dead

unused_comp {
  u0 = f32[] parameter(0)
  ROOT u1 = f32[] negate(u0)
}

add_f32 {
  ax = f32[] parameter(0)
  ay = f32[] parameter(1)
  ROOT as = f32[] add(ax, ay)
}

ENTRY main {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  dead1 = f32[4] exponential(p)
  dead2 = f32[4] add(dead1, q)
  z = f32[] constant(0)
  r = f32[] reduce(p, z), dimensions={0}, to_apply=add_f32
  ROOT n = f32[] negate(r)
}
"""


def test_dce_removes_dead_chain_and_unreachable_computation():
    before, after, changed = run_passes(DEAD, [DeadCodeElimination()])
    assert changed
    text = printed(after)
    filecheck(text, """
        CHECK: %add_f32
        CHECK: ENTRY %main
        CHECK-NEXT: %p = f32[4]{0} parameter(0)
        CHECK-NEXT: %q = f32[4]{0} parameter(1)
        CHECK-NEXT: %z = f32[] constant(0)
        CHECK-NEXT: %r = f32[] reduce(%p, %z)
        CHECK-NEXT: ROOT %n = f32[] negate(%r)
    """)
    assert "unused_comp" not in text and "exponential" not in text
    assert_same_numerics(before, after)


def test_dce_keeps_parameters_root_and_is_idempotent():
    m = parse(DEAD)
    assert DeadCodeElimination().run(m) is True
    assert DeadCodeElimination().run(m) is False
    assert [p.name for p in m.entry.parameters] == ["p", "q"]
    assert m.entry.root.name == "n"


def test_dce_keeps_side_effects():
    text = """HloModule se
ENTRY main {
  p = f32[4] parameter(0)
  cc = f32[4] custom-call(p), custom_call_target="log_it"
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  rn = f32[4] rng(lo, hi), distribution=rng_uniform
  ROOT n = f32[4] negate(p)
}
"""
    m = parse(text)
    assert DeadCodeElimination().run(m) is False
    assert {i.opcode for i in m.entry.instructions} >= {Opcode.CUSTOM_CALL, Opcode.RNG}


def test_dce_inside_called_computations():
    text = """HloModule inner

body {
  bp = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(bp), index=0
  x = f32[4] get-tuple-element(bp), index=1
  junk = f32[4] exponential(x)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[4]) tuple(i1, x)
}

cond {
  cp = (s32[], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(ci, n), direction=LT
}

ENTRY main {
  p = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, p)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
}
"""
    before, after, changed = run_passes(text, [DeadCodeElimination()])
    assert changed
    assert "junk" not in printed(after)
    assert_same_numerics(before, after)


CSE_TEXT = """HloModule cse
ENTRY main {
  p = f32[4] parameter(0)
  c1 = f32[] constant(2)
  c2 = f32[] constant(2)
  c3 = f32[] constant(3)
  b1 = f32[4] broadcast(c1), dimensions={}
  b2 = f32[4] broadcast(c2), dimensions={}
  m1 = f32[4] multiply(p, b1)
  m2 = f32[4] multiply(p, b2)
  e1 = f32[4] exponential(m1)
  e2 = f32[4] exponential(m2)
  b3 = f32[4] broadcast(c3), dimensions={}
  s = f32[4] add(e1, e2)
  ROOT t = (f32[4], f32[4]) tuple(s, b3)
}
"""


def test_cse_merges_constants_then_identical_chains():
    before, after, changed = run_passes(CSE_TEXT, [CommonSubexpressionElimination()])
    assert changed
    filecheck(printed(after), """
        CHECK: %p = f32[4]{0} parameter(0)
        CHECK-NEXT: %c1 = f32[] constant(2)
        CHECK-NEXT: %c3 = f32[] constant(3)
        CHECK-NEXT: %b1 = f32[4]{0} broadcast(%c1)
        CHECK-NEXT: %m1 = f32[4]{0} multiply(%p, %b1)
        CHECK-NEXT: %e1 = f32[4]{0} exponential(%m1)
        CHECK-NEXT: %b3 = f32[4]{0} broadcast(%c3)
        CHECK-NEXT: %s = f32[4]{0} add(%e1, %e1)
        CHECK-NOT: c2
    """)
    assert_same_numerics(before, after)
    assert CommonSubexpressionElimination().run(after) is False


def test_cse_respects_attributes_shapes_and_side_effects():
    text = """HloModule cse2
ENTRY main {
  p = f32[2,3] parameter(0)
  r1 = f32[3,2] transpose(p), dimensions={1,0}
  r2 = f32[3,2] reshape(p)
  s1 = f32[1,3] slice(p), slice={[0:1], [0:3]}
  s2 = f32[1,3] slice(p), slice={[1:2], [0:3]}
  c1 = f32[2] constant({1, 2})
  c2 = s32[2] constant({1, 2})
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  n1 = f32[2] rng(lo, hi), distribution=rng_uniform
  n2 = f32[2] rng(lo, hi), distribution=rng_uniform
  ROOT t = TUPLE_SHAPE tuple(r1, r2, s1, s2, c1, c2, n1, n2)
}
""".replace("TUPLE_SHAPE", "(f32[3,2], f32[3,2], f32[1,3], f32[1,3], f32[2], s32[2], "
              "f32[2], f32[2])")
    m = parse(text)
    assert CommonSubexpressionElimination().run(m) is False
    assert len(m.entry.instructions) == 12


def test_cse_merges_across_different_layout_only_when_equal():
    text = """HloModule cse3
ENTRY main {
  p = f32[2,3] parameter(0)
  t1 = f32[3,2]{1,0} transpose(p), dimensions={1,0}
  t2 = f32[3,2]{0,1} transpose(p), dimensions={1,0}
  t3 = f32[3,2]{1,0} transpose(p), dimensions={1,0}
  ROOT t = (f32[3,2]{1,0}, f32[3,2]{0,1}, f32[3,2]{1,0}) tuple(t1, t2, t3)
}
"""
    before, after, changed = run_passes(text, [CommonSubexpressionElimination()])
    assert changed
    filecheck(printed(after), """
        CHECK: ROOT %t = {{.*}} tuple(%t1, %t2, %t1)
    """)
    assert_same_numerics(before, after)


def test_cse_merges_identical_reduces_sharing_a_computation():
    text = """HloModule cse4

add_f32 {
  ax = f32[] parameter(0)
  ay = f32[] parameter(1)
  ROOT as = f32[] add(ax, ay)
}

ENTRY main {
  p = f32[4,8] parameter(0)
  z = f32[] constant(0)
  r1 = f32[4] reduce(p, z), dimensions={1}, to_apply=add_f32
  r2 = f32[4] reduce(p, z), dimensions={1}, to_apply=add_f32
  r3 = f32[8] reduce(p, z), dimensions={0}, to_apply=add_f32
  a = f32[4] add(r1, r2)
  ROOT t = (f32[4], f32[8]) tuple(a, r3)
}
"""
    before, after, changed = run_passes(text, [CommonSubexpressionElimination()])
    assert changed
    filecheck(printed(after), """
        CHECK: %r1 = f32[4]{0} reduce(%p, %z)
        CHECK-NOT: %r2 =
        CHECK: %a = f32[4]{0} add(%r1, %r1)
    """)
    assert_same_numerics(before, after)


def test_cse_of_root_duplicate_moves_root():
    text = """HloModule cse5
ENTRY main {
  p = f32[4] parameter(0)
  e1 = f32[4] exponential(p)
  ROOT e2 = f32[4] exponential(p)
}
"""
    before, after, changed = run_passes(text, [CommonSubexpressionElimination(),
                                               DeadCodeElimination()])
    assert changed
    filecheck(printed(after), """
        CHECK: %p = f32[4]{0} parameter(0)
        CHECK-NEXT: ROOT %e1 = f32[4]{0} exponential(%p)
        CHECK-NEXT: }
    """)
    assert_same_numerics(before, after)


CONTROL = """HloModule ctrl
ENTRY main {
  p = f32[4] parameter(0)
  e1 = f32[4] exponential(p)
  e2 = f32[4] exponential(p), control-predecessors={e1}
  dead = f32[4] negate(p)
  keep = f32[4] sine(p), control-predecessors={dead}
  ROOT t = (f32[4], f32[4], f32[4]) tuple(e1, e2, keep)
}
"""


def test_cse_leaves_instructions_with_control_edges():
    m = parse(CONTROL)
    assert CommonSubexpressionElimination().run(m) is False


def test_dce_removes_dead_control_predecessor_and_its_edge():
    before, after, changed = run_passes(CONTROL, [DeadCodeElimination()])
    assert changed
    text = printed(after)
    assert "negate" not in text
    filecheck(text, """
        CHECK: %e2 = f32[4]{0} exponential(%p), control-predecessors={%e1}
        CHECK: %keep = f32[4]{0} sine(%p)
        CHECK-NOT: control-predecessors
    """)
    assert_same_numerics(before, after)


def test_cse_never_merges_copies():
    m = parse("""HloModule copies
ENTRY main {
  p = f32[4] parameter(0)
  c1 = f32[4] copy(p)
  c2 = f32[4] copy(p)
  ROOT t = (f32[4], f32[4]) tuple(c1, c2)
}
""")
    assert CommonSubexpressionElimination().run(m) is False
