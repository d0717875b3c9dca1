"""Call inlining: nested JAX-style helpers, fresh names, dead callees removed, numerics."""
from __future__ import annotations

from tests.passes.filecheck import assert_same_numerics, filecheck, parse, printed, run_passes
from xlc.hlo.opcodes import Opcode
from xlc.passes import CallInliner

NESTED = """HloModule jit_f

add_f32 {
  ax = f32[] parameter(0)
  ay = f32[] parameter(1)
  ROOT as = f32[] add(ax, ay)
}

_inner.1 {
  Arg_0.1 = f32[8] parameter(0)
  ex.1 = f32[8] exponential(Arg_0.1)
  z.1 = f32[] constant(0)
  ROOT r.1 = f32[] reduce(ex.1, z.1), dimensions={0}, to_apply=add_f32
}

_outer.2 {
  Arg_0.2 = f32[8] parameter(0)
  Arg_1.2 = f32[] parameter(1)
  ex.2 = f32[8] negate(Arg_0.2)
  c.2 = f32[] call(ex.2), to_apply=_inner.1
  ROOT m.2 = f32[] multiply(c.2, Arg_1.2)
}

ENTRY main.3 {
  x.3 = f32[8] parameter(0)
  y.3 = f32[] parameter(1)
  call.3 = f32[] call(x.3, y.3), to_apply=_outer.2
  call.4 = f32[] call(x.3, y.3), to_apply=_outer.2
  ROOT out.3 = f32[] add(call.3, call.4)
}
"""


def test_nested_calls_inlined_with_fresh_names():
    before, after, changed = run_passes(NESTED, [CallInliner()])
    assert changed
    text = printed(after)
    assert "call(" not in text
    assert [c.name for c in after.computations] == ["add_f32", "main.3"]
    filecheck(text, """
        CHECK: ENTRY %main.3
        CHECK-NEXT: %x.3 = f32[8]{0} parameter(0)
        CHECK-NEXT: %y.3 = f32[] parameter(1)
        CHECK-NEXT: %ex.{{[0-9]+}} = f32[8]{0} negate(%x.3)
        CHECK-NEXT: %ex.{{[0-9]+}} = f32[8]{0} exponential(%ex.
        CHECK: reduce({{.*}}to_apply=%add_f32
        CHECK-NEXT: %m.{{[0-9]+}} = f32[] multiply(%r.{{[0-9]+}}, %y.3)
        CHECK: negate(%x.3)
        CHECK: ROOT %out.3 = f32[] add(%m.{{[0-9]+}}, %m.{{[0-9]+}})
    """)
    names = [i.name for c in after.computations for i in c.instructions]
    assert len(names) == len(set(names))
    assert_same_numerics(before, after)


def test_callee_returning_parameter_and_call_as_root():
    text = """HloModule ident

_id {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  ROOT r = f32[4] add(a, b)
}

_pass {
  q0 = f32[4] parameter(0)
  ROOT q1 = f32[4] parameter(1)
}

ENTRY main {
  p = f32[4] parameter(0)
  s = f32[4] parameter(1)
  k = f32[4] call(p, s), to_apply=_pass
  ROOT c = f32[4] call(k, p), to_apply=_id
}
"""
    before, after, changed = run_passes(text, [CallInliner()])
    assert changed
    filecheck(printed(after), """
        CHECK: ENTRY %main
        CHECK: ROOT %r{{.*}} = f32[4]{0} add(%s, %p)
    """)
    assert len(after.computations) == 1
    assert_same_numerics(before, after)


def test_callee_still_used_elsewhere_is_kept():
    text = """HloModule shared

add_f32 {
  ax = f32[] parameter(0)
  ay = f32[] parameter(1)
  ROOT as = f32[] add(ax, ay)
}

ENTRY main {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  c = f32[] call(p, q), to_apply=add_f32
  v = f32[4] broadcast(c), dimensions={}
  z = f32[] constant(0)
  ROOT r = f32[] reduce(v, z), dimensions={0}, to_apply=add_f32
}
"""
    before, after, changed = run_passes(text, [CallInliner()])
    assert changed
    assert [c.name for c in after.computations] == ["add_f32", "main"]
    assert not any(i.opcode is Opcode.CALL for i in after.instructions())
    assert_same_numerics(before, after)


def test_no_calls_means_unchanged():
    m = parse("""HloModule plain
ENTRY main {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
""")
    assert CallInliner().run(m) is False
