"""Algebraic simplifier: every named rewrite as HLO text before + CHECK lines after, with the
rewrite counted and numerics compared on the evaluator; plus rewrites that must not fire."""
from __future__ import annotations

import pytest

from tests.passes.filecheck import assert_same_numerics, filecheck, printed, run_passes
from xlc.hlo.printer import print_computation
from xlc.passes import AlgebraicSimplifier, DeadCodeElimination
from xlc.passes.simplify import REWRITES

REDUCERS = """
add_f32 {
  ax = f32[] parameter(0)
  ay = f32[] parameter(1)
  ROOT as = f32[] add(ax, ay)
}

max_s32 {
  mx = s32[] parameter(0)
  my = s32[] parameter(1)
  ROOT ms = s32[] maximum(mx, my)
}
"""


def hlo(body: str) -> str:
    return f"HloModule t\n{REDUCERS}\nENTRY main {{\n{body}\n}}\n"


def simplify(body: str) -> tuple[str, AlgebraicSimplifier, object, object]:
    simp = AlgebraicSimplifier()
    before, after, _ = run_passes(hlo(body), [simp, DeadCodeElimination()])
    return printed(after), simp, before, after


# (rewrite name, entry body, CHECK lines on the simplified module)
CASES = [
    ("add-zero", """
  p = f32[2,3] parameter(0)
  z = f32[] constant(0)
  b = f32[2,3] broadcast(z), dimensions={}
  ROOT a = f32[2,3] add(p, b)""", """
  CHECK: ROOT %p = f32[2,3]{1,0} parameter(0)
  CHECK-NOT: add("""),
    ("add-zero", """
  p = s32[4] parameter(0)
  z = s32[4] constant({0, 0, 0, 0})
  ROOT a = s32[4] add(z, p)""", """
  CHECK: ROOT %p = s32[4]{0} parameter(0)"""),
    ("add-update-slice", """
  acc = f32[8,3] parameter(0)
  u = f32[2,3] parameter(1)
  i = s32[] parameter(2)
  z = f32[] constant(0)
  zs = f32[8,3] broadcast(z), dimensions={}
  j = s32[] constant(0)
  d = f32[8,3] dynamic-update-slice(zs, u, i, j)
  ROOT a = f32[8,3] add(acc, d)""", """
  CHECK: dynamic-slice(%acc
  CHECK: add(
  CHECK: ROOT {{.*}}dynamic-update-slice(%acc
  CHECK-NOT: broadcast("""),
    ("add-update-slice", """
  u = f32[2,3] parameter(0)
  v = f32[2,3] parameter(1)
  i = s32[] parameter(2)
  z = f32[] constant(0)
  zs = f32[8,3] broadcast(z), dimensions={}
  j = s32[] constant(0)
  d1 = f32[8,3] dynamic-update-slice(zs, u, i, j)
  d2 = f32[8,3] dynamic-update-slice(zs, v, i, j)
  ROOT a = f32[8,3] add(d1, d2)""", """
  CHECK: add(%u, %v)
  CHECK: ROOT {{.*}}dynamic-update-slice(
  CHECK-NOT: add("""),
    ("sub-zero", """
  p = f32[3] parameter(0)
  z = f32[] constant(0)
  b = f32[3] broadcast(z), dimensions={}
  ROOT a = f32[3] subtract(p, b)""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("mul-one", """
  p = f32[3] parameter(0)
  one = f32[] constant(1)
  b = f32[3] broadcast(one), dimensions={}
  ROOT m = f32[3] multiply(b, p)""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("int-mul-zero", """
  p = s32[3] parameter(0)
  z = s32[] constant(0)
  b = s32[3] broadcast(z), dimensions={}
  ROOT m = s32[3] multiply(p, b)""", """
  CHECK: %z = s32[] constant(0)
  CHECK-NEXT: ROOT %b = s32[3]{0} broadcast(%z), dimensions={}
  CHECK-NOT: multiply"""),
    ("div-one", """
  p = f32[3] parameter(0)
  one = f32[] constant(1)
  b = f32[3] broadcast(one), dimensions={}
  ROOT d = f32[3] divide(p, b)""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("div-const-to-mul", """
  p = f32[3] parameter(0)
  c = f32[3] constant({2, 4, 8})
  ROOT d = f32[3] divide(p, c)""", """
  CHECK: %constant = f32[3]{0} constant({0.5, 0.25, 0.125})
  CHECK-NEXT: ROOT %multiply = f32[3]{0} multiply(%p, %constant)
  CHECK-NOT: divide"""),
    ("div-broadcast-to-mul", """
  p = f32[2,3] parameter(0)
  c = f32[] constant(8)
  b = f32[2,3] broadcast(c), dimensions={}
  ROOT d = f32[2,3] divide(p, b)""", """
  CHECK: %constant = f32[] constant(0.125)
  CHECK-NEXT: %broadcast = f32[2,3]{1,0} broadcast(%constant), dimensions={}
  CHECK-NEXT: ROOT %multiply = f32[2,3]{1,0} multiply(%p, %broadcast)"""),
    ("negate-negate", """
  p = f32[3] parameter(0)
  n1 = f32[3] negate(p)
  n2 = f32[3] negate(n1)
  ROOT e = f32[3] exponential(n2)""", """
  CHECK: %p = {{.*}}parameter(0)
  CHECK-NEXT: ROOT %e = f32[3]{0} exponential(%p)"""),
    ("not-not", """
  p = pred[3] parameter(0)
  n1 = pred[3] not(p)
  ROOT n2 = pred[3] not(n1)""", """
  CHECK: ROOT %p = pred[3]{0} parameter(0)"""),
    ("max-same", """
  p = f32[3] parameter(0)
  ROOT m = f32[3] maximum(p, p)""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("min-same", """
  p = s32[3] parameter(0)
  ROOT m = s32[3] minimum(p, p)""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("select-same", """
  c = pred[3] parameter(0)
  p = f32[3] parameter(1)
  ROOT s = f32[3] select(c, p, p)""", """
  CHECK: ROOT %p = {{.*}}parameter(1)"""),
    ("select-const-pred", """
  p = f32[3] parameter(0)
  q = f32[3] parameter(1)
  t = pred[] constant(true)
  b = pred[3] broadcast(t), dimensions={}
  ROOT s = f32[3] select(b, p, q)""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("select-const-pred", """
  p = f32[3] parameter(0)
  q = f32[3] parameter(1)
  f = pred[3] constant({false, false, false})
  ROOT s = f32[3] select(f, p, q)""", """
  CHECK: ROOT %q = {{.*}}parameter(1)"""),
    ("exp-zero", """
  p = f32[2] parameter(0)
  z = f32[] constant(0)
  b = f32[2] broadcast(z), dimensions={}
  e = f32[2] exponential(b)
  ROOT a = f32[2] add(p, e)""", """
  CHECK: %constant = f32[] constant(1)
  CHECK-NEXT: %broadcast = f32[2]{0} broadcast(%constant), dimensions={}
  CHECK-NEXT: ROOT %a = f32[2]{0} add(%p, %broadcast)
  CHECK-NOT: exponential"""),
    ("log-exp", """
  p = f32[3] parameter(0)
  e = f32[3] exponential(p)
  ROOT l = f32[3] log(e)""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("compare-same", """
  p = s32[3] parameter(0)
  ROOT c = pred[3] compare(p, p), direction=GE""", """
  CHECK: %constant = pred[] constant(true)
  CHECK-NEXT: ROOT %broadcast = pred[3]{0} broadcast(%constant), dimensions={}"""),
    ("compare-same", """
  p = s32[] parameter(0)
  ROOT c = pred[] compare(p, p), direction=NE""", """
  CHECK: ROOT %constant = pred[] constant(false)"""),
    ("convert-same-type", """
  p = f32[3] parameter(0)
  ROOT c = f32[3] convert(p)""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("convert-convert", """
  p = f32[3] parameter(0)
  c1 = f64[3] convert(p)
  ROOT c2 = f32[3] convert(c1)""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("convert-convert", """
  p = s8[3] parameter(0)
  c1 = s32[3] convert(p)
  ROOT c2 = f32[3] convert(c1)""", """
  CHECK: %p = s8[3]{0} parameter(0)
  CHECK-NEXT: ROOT %convert = f32[3]{0} convert(%p)"""),
    ("gte-tuple", """
  p = f32[3] parameter(0)
  q = s32[] parameter(1)
  t = (f32[3], s32[]) tuple(p, q)
  ROOT g = s32[] get-tuple-element(t), index=1""", """
  CHECK: ROOT %q = s32[] parameter(1)
  CHECK-NOT: tuple"""),
    ("reshape-noop", """
  p = f32[2,3] parameter(0)
  ROOT r = f32[2,3] reshape(p)""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("reshape-reshape", """
  p = f32[2,3] parameter(0)
  r1 = f32[6] reshape(p)
  ROOT r2 = f32[3,2] reshape(r1)""", """
  CHECK: %p = {{.*}}parameter(0)
  CHECK-NEXT: ROOT %reshape = f32[3,2]{1,0} reshape(%p)"""),
    ("reshape-broadcast-scalar", """
  p = f32[] parameter(0)
  b = f32[2,3] broadcast(p), dimensions={}
  ROOT r = f32[6] reshape(b)""", """
  CHECK: %p = {{.*}}parameter(0)
  CHECK-NEXT: ROOT %broadcast = f32[6]{0} broadcast(%p), dimensions={}"""),
    ("transpose-identity", """
  p = f32[2,3] parameter(0)
  ROOT t = f32[2,3] transpose(p), dimensions={0,1}""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("transpose-transpose", """
  p = f32[2,3,4] parameter(0)
  t1 = f32[3,4,2] transpose(p), dimensions={1,2,0}
  ROOT t2 = f32[4,2,3] transpose(t1), dimensions={1,2,0}""", """
  CHECK: ROOT %transpose = f32[4,2,3]{2,1,0} transpose(%p), dimensions={2,0,1}"""),
    ("transpose-transpose", """
  p = f32[2,3] parameter(0)
  t1 = f32[3,2] transpose(p), dimensions={1,0}
  ROOT t2 = f32[2,3] transpose(t1), dimensions={1,0}""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("transpose-broadcast-scalar", """
  p = f32[] parameter(0)
  b = f32[2,3] broadcast(p), dimensions={}
  ROOT t = f32[3,2] transpose(b), dimensions={1,0}""", """
  CHECK: ROOT %broadcast = f32[3,2]{1,0} broadcast(%p), dimensions={}"""),
    ("transpose-elementwise", """
  p = f32[2,3,4] parameter(0)
  t1 = f32[2,4,3] transpose(p), dimensions={0,2,1}
  z = f32[] constant(0)
  b = f32[2,4,3] broadcast(z), dimensions={}
  m = f32[2,4,3] maximum(t1, b)
  ROOT t2 = f32[2,3,4] transpose(m), dimensions={0,2,1}""", """
  CHECK: %p = f32[2,3,4]{2,1,0} parameter(0)
  CHECK: ROOT %maximum{{.*}} = f32[2,3,4]{2,1,0} maximum(%p, %broadcast{{.*}})
  CHECK-NOT: transpose"""),
    ("broadcast-noop", """
  p = f32[2,3] parameter(0)
  ROOT b = f32[2,3] broadcast(p), dimensions={0,1}""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("broadcast-broadcast", """
  p = f32[3] parameter(0)
  b1 = f32[2,3] broadcast(p), dimensions={1}
  ROOT b2 = f32[4,2,5,3] broadcast(b1), dimensions={1,3}""", """
  CHECK: ROOT %broadcast = f32[4,2,5,3]{3,2,1,0} broadcast(%p), dimensions={3}"""),
    ("slice-full", """
  p = f32[2,3] parameter(0)
  ROOT s = f32[2,3] slice(p), slice={[0:2], [0:3]}""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("slice-slice", """
  p = f32[20] parameter(0)
  s1 = f32[8] slice(p), slice={[2:18:2]}
  ROOT s2 = f32[2] slice(s1), slice={[1:7:3]}""", """
  CHECK: ROOT %slice = f32[2]{0} slice(%p), slice={[4:11:6]}"""),
    ("concat-single", """
  p = f32[2,3] parameter(0)
  ROOT c = f32[2,3] concatenate(p), dimensions={1}""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("concat-flatten", """
  p = f32[2] parameter(0)
  q = f32[3] parameter(1)
  c1 = f32[5] concatenate(p, q), dimensions={0}
  ROOT c2 = f32[10] concatenate(q, c1, p), dimensions={0}""", """
  CHECK: ROOT %concatenate = f32[10]{0} concatenate(%q, %p, %q, %p), dimensions={0}"""),
    ("pad-zero", """
  p = f32[2,3] parameter(0)
  z = f32[] constant(0)
  ROOT d = f32[2,3] pad(p, z), padding=0_0x0_0""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("copy-noop", """
  p = f32[2,3] parameter(0)
  c = f32[2,3] copy(p)
  ROOT n = f32[2,3] negate(c)""", """
  CHECK: ROOT %n = f32[2,3]{1,0} negate(%p)"""),
    ("reverse-trivial", """
  p = f32[2,1] parameter(0)
  ROOT r = f32[2,1] reverse(p), dimensions={1}""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("reduce-trivial", """
  p = f32[4,1] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce(p, z), dimensions={1}, to_apply=add_f32""", """
  CHECK: ROOT %reshape = f32[4]{0} reshape(%p)
  CHECK-NOT: reduce("""),
    ("reduce-trivial", """
  p = s32[1,3] parameter(0)
  i = s32[] constant(2)
  ROOT r = s32[3] reduce(p, i), dimensions={0}, to_apply=max_s32""", """
  CHECK: %reshape = s32[3]{0} reshape(%p)
  CHECK: %broadcast = s32[3]{0} broadcast(%i), dimensions={}
  CHECK-NEXT: ROOT %maximum = s32[3]{0} maximum(%broadcast, %reshape)"""),
    ("reduce-trivial", """
  p = f32[3] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[3] reduce(p, z), dimensions={}, to_apply=add_f32""", """
  CHECK: ROOT %p = {{.*}}parameter(0)"""),
    ("dot-to-multiply", """
  a = f32[4,1] parameter(0)
  b = f32[1,3] parameter(1)
  ROOT d = f32[4,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}""", """
  CHECK: %reshape = f32[4]{0} reshape(%a)
  CHECK: %reshape.1 = f32[3]{0} reshape(%b)
  CHECK: %broadcast = f32[4,3]{1,0} broadcast(%reshape), dimensions={0}
  CHECK-NEXT: %broadcast.1 = f32[4,3]{1,0} broadcast(%reshape.1), dimensions={1}
  CHECK-NEXT: ROOT %multiply = f32[4,3]{1,0} multiply(%broadcast, %broadcast.1)
  CHECK-NOT: dot("""),
    ("dot-to-multiply", """
  a = f32[2,4] parameter(0)
  b = f32[2,3] parameter(1)
  ROOT d = f32[2,4,3] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}""", """
  CHECK: %broadcast = f32[2,4,3]{2,1,0} broadcast(%a), dimensions={0,1}
  CHECK-NEXT: %broadcast.1 = f32[2,4,3]{2,1,0} broadcast(%b), dimensions={0,2}
  CHECK-NEXT: ROOT %multiply = f32[2,4,3]{2,1,0} multiply(%broadcast, %broadcast.1)"""),
    ("dot-vector-to-reduce", """
  a = f32[8] parameter(0)
  b = f32[8] parameter(1)
  ROOT d = f32[] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}""", """
  CHECK: %multiply = f32[8]{0} multiply(%a, %b)
  CHECK-NEXT: %constant = f32[] constant(0)
  CHECK-NEXT: ROOT %reduce = f32[] reduce(%multiply, %constant), dimensions={0}, to_apply=%add_f32
  CHECK-NOT: dot("""),
    ("dot-vector-to-reduce", """
  a = s32[2,3,4] parameter(0)
  b = s32[2,3,4] parameter(1)
  ROOT d = s32[2] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0},
                             lhs_contracting_dims={1,2}, rhs_contracting_dims={1,2}""", """
  CHECK: %add_s32 (lhs: s32[], rhs: s32[]) -> s32[] {
  CHECK: %multiply = s32[2,3,4]{2,1,0} multiply(%a, %b)
  CHECK-NEXT: %constant = s32[] constant(0)
  CHECK-NEXT: ROOT %reduce = s32[2]{0} reduce({{.*}}), dimensions={1,2}, to_apply=%add_s32"""),
]


@pytest.mark.parametrize("name, body, checks", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rewrite(name, body, checks):
    text, simp, before, after = simplify(body)
    assert simp.stats[name] >= 1, dict(simp.stats)
    filecheck(text, checks)
    assert_same_numerics(before, after)


def test_every_listed_rewrite_is_tested():
    import xlc.passes.simplify as simplify_module

    listed = set()
    for line in simplify_module.__doc__.splitlines():
        parts = line.split()
        if parts and parts[0].rstrip(".").isdigit():
            listed.update(p for p in parts[1:4] if "-" in p and p.islower())
    tested = {c[0] for c in CASES}
    assert len(listed) >= 30
    assert listed <= tested, listed - tested
    assert set(REWRITES)  # dispatch table is non-empty


NOT_REWRITTEN = {
    "float-mul-zero": """
  p = f32[3] parameter(0)
  z = f32[] constant(0)
  b = f32[3] broadcast(z), dimensions={}
  ROOT m = f32[3] multiply(p, b)""",
    "int-divide-by-const": """
  p = s32[3] parameter(0)
  c = s32[] constant(2)
  b = s32[3] broadcast(c), dimensions={}
  ROOT d = s32[3] divide(p, b)""",
    "float-compare-same": """
  p = f32[3] parameter(0)
  ROOT c = pred[3] compare(p, p), direction=EQ""",
    "lossy-convert-chain": """
  p = f32[3] parameter(0)
  c1 = s32[3] convert(p)
  ROOT c2 = f32[3] convert(c1)""",
    "identity-transpose-changing-layout": """
  p = f32[2,3]{1,0} parameter(0)
  ROOT t = f32[2,3]{0,1} transpose(p), dimensions={0,1}""",
    "relayout-copy": """
  p = f32[2,3]{1,0} parameter(0)
  ROOT c = f32[2,3]{0,1} copy(p)""",
    "copy-to-host-memory": """
  p = f32[2,3]{1,0} parameter(0)
  ROOT c = f32[2,3]{1,0:S(5)} copy(p)""",
    "reduce-of-non-unit-dims": """
  p = f32[4,2] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce(p, z), dimensions={1}, to_apply=add_f32""",
    "dot-with-real-contraction": """
  a = f32[4,2] parameter(0)
  b = f32[2,3] parameter(1)
  ROOT d = f32[4,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}""",
    "nonzero-pad": """
  p = f32[2] parameter(0)
  z = f32[] constant(0)
  ROOT d = f32[3] pad(p, z), padding=0_1""",
}


@pytest.mark.parametrize("body", NOT_REWRITTEN.values(), ids=NOT_REWRITTEN.keys())
def test_not_rewritten(body):
    text, simp, before, after = simplify(body)
    assert not simp.stats, dict(simp.stats)
    assert print_computation(before.entry) == print_computation(after.entry)


def test_new_instruction_keeps_layout_of_replaced_one():
    text, simp, before, after = simplify("""
  p = f32[2,3,4] parameter(0)
  t1 = f32[3,4,2] transpose(p), dimensions={1,2,0}
  ROOT t2 = f32[4,2,3]{0,1,2} transpose(t1), dimensions={1,2,0}""")
    filecheck(text, "CHECK: ROOT %transpose = f32[4,2,3]{0,1,2} transpose(%p), dimensions={2,0,1}")
    assert_same_numerics(before, after)


def test_chains_collapse_to_a_fixed_point():
    from xlc.passes import FixedPoint

    text = hlo("""
  p = f32[2,3] parameter(0)
  n1 = f32[2,3] negate(p)
  n2 = f32[2,3] negate(n1)
  n3 = f32[2,3] negate(n2)
  n4 = f32[2,3] negate(n3)
  r1 = f32[6] reshape(n4)
  r2 = f32[3,2] reshape(r1)
  ROOT r3 = f32[2,3] reshape(r2)""")
    before, after, changed = run_passes(text, [FixedPoint([AlgebraicSimplifier(),
                                                           DeadCodeElimination()])])
    assert changed
    filecheck(printed(after), """
        CHECK: ENTRY
        CHECK-NEXT: ROOT %p = f32[2,3]{1,0} parameter(0)
        CHECK-NEXT: }""")
    assert_same_numerics(before, after)


def test_disabled_rewrite_does_not_fire():
    simp = AlgebraicSimplifier(disabled=frozenset({"dot-to-multiply"}))
    before, after, changed = run_passes(hlo("""
  a = f32[4,1] parameter(0)
  b = f32[1,3] parameter(1)
  ROOT d = f32[4,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}"""), [simp])
    assert changed is False and not simp.stats
    assert printed(after) == printed(before)
