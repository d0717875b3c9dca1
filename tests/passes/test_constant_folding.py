"""Constant folding: what folds (checked as text and against the evaluator) and what must not."""
from __future__ import annotations

import numpy as np
import pytest

from tests.passes.filecheck import assert_same_numerics, filecheck, parse, printed, run_passes
from xlc.hlo.opcodes import Opcode
from xlc.hlo.printer import print_computation
from xlc.passes import ConstantFolding, DeadCodeElimination

ADD = """
add_f32 {
  ax = f32[] parameter(0)
  ay = f32[] parameter(1)
  ROOT as = f32[] add(ax, ay)
}
"""


def fold(body: str, limit: int = 1 << 16):
    text = f"HloModule cf\n{ADD}\nENTRY main {{\n{body}\n}}\n"
    before, after, folded = run_passes(text, [ConstantFolding(limit)])
    DeadCodeElimination().run(after)
    return before, after, folded


def test_folds_arithmetic_chain():
    before, after, changed = fold("""
  p = f32[3] parameter(0)
  a = f32[3] constant({1, 2, 3})
  b = f32[3] constant({10, 20, 30})
  s = f32[3] add(a, b)
  e = f32[3] multiply(s, s)
  ROOT r = f32[3] add(p, e)""")
    assert changed
    filecheck(printed(after), """
        CHECK: %p = f32[3]{0} parameter(0)
        CHECK-NEXT: %constant{{.*}} = f32[3]{0} constant({121, 484, 1089})
        CHECK-NEXT: ROOT %r = f32[3]{0} add(%p, %constant
    """)
    assert_same_numerics(before, after)


def test_folds_reduce_convert_reshape_and_gte():
    before, after, changed = fold("""
  p = f32[] parameter(0)
  a = f32[2,2] constant({{1, 2}, {3, 4}})
  z = f32[] constant(0)
  r = f32[2] reduce(a, z), dimensions={1}, to_apply=add_f32
  i = s32[2] convert(r)
  t = s32[1,2] reshape(i)
  tc = (f32[], s32[]) constant((5, 6))
  g = f32[] get-tuple-element(tc), index=0
  ROOT out = (s32[1,2], f32[]) tuple(t, g)""")
    assert changed
    filecheck(printed(after), """
        CHECK: s32[1,2]{1,0} constant({ { 3, 7 } })
        CHECK: f32[] constant(5)
        CHECK: ROOT %out = (s32[1,2]{1,0}, f32[]) tuple(
    """)
    assert [i.opcode for i in after.entry.instructions].count(Opcode.REDUCE) == 0
    assert_same_numerics(before, after)


@pytest.mark.parametrize("body", [
    # broadcasts of constants would bloat
    """
  c = f32[] constant(1)
  ROOT b = f32[64,64] broadcast(c), dimensions={}""",
    # rng and parameters
    """
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  ROOT r = f32[4] rng(lo, hi), distribution=rng_uniform""",
    """
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)""",
    # large iota users
    """
  i = s32[4096] iota(), iota_dimension=0
  ROOT c = f32[4096] convert(i)""",
    # copies belong to copy insertion
    """
  c = f32[2] constant({1, 2})
  ROOT k = f32[2] copy(c)""",
], ids=["broadcast", "rng", "parameter", "large-iota-user", "copy"])
def test_not_folded(body):
    before, after, changed = fold(body)
    assert changed is False
    assert print_computation(after.entry) == print_computation(before.entry)


def test_small_iota_user_is_folded():
    before, after, changed = fold("""
  i = s32[4] iota(), iota_dimension=0
  ROOT c = f32[4] convert(i)""")
    assert changed
    filecheck(printed(after), "CHECK: ROOT %constant = f32[4]{0} constant({0, 1, 2, 3})")


def test_size_limit():
    body = """
  a = f32[8] constant({1, 2, 3, 4, 5, 6, 7, 8})
  ROOT n = f32[8] negate(a)"""
    assert fold(body, limit=7)[2] is False
    before, after, changed = fold(body, limit=8)
    assert changed
    lit = after.entry.root.attrs["literal"]
    np.testing.assert_array_equal(lit.array, -np.arange(1, 9, dtype=np.float32))


def test_while_and_elided_constants_not_folded():
    text = """HloModule cfw

body {
  bp = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT a = s32[] add(bp, one)
}

cond {
  cp = s32[] parameter(0)
  n = s32[] constant(3)
  ROOT lt = pred[] compare(cp, n), direction=LT
}

ENTRY main {
  zero = s32[] constant(0)
  w = s32[] while(zero), condition=cond, body=body
  big = f32[4] constant({...})
  nb = f32[4] negate(big)
  ROOT t = (s32[], f32[4]) tuple(w, nb)
}
"""
    m = parse(text)
    assert ConstantFolding().run(m) is False
    assert {i.opcode for i in m.entry.instructions} >= {Opcode.WHILE, Opcode.NEGATE}


def test_keeps_layout_of_folded_instruction():
    before, after, changed = fold("""
  a = f32[2,3] constant({{1, 2, 3}, {4, 5, 6}})
  ROOT t = f32[3,2]{0,1} transpose(a), dimensions={1,0}""")
    assert changed
    assert after.entry.root.opcode is Opcode.CONSTANT
    assert after.entry.root.shape == before.entry.root.shape
    assert_same_numerics(before, after)


def test_integer_division_by_zero_folds_like_the_evaluator():
    before, after, changed = fold("""
  a = s32[2] constant({7, -7})
  z = s32[2] constant({0, 2})
  ROOT d = s32[2] divide(a, z)""")
    assert_same_numerics(before, after)
