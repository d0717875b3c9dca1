"""ForwardingLayouts: tuple elements and get-tuple-elements declared in another layout than the
value they forward get a relayout copy (rewrite, numerics on the evaluator, and the CPU backend
against the evaluator)."""
from __future__ import annotations

import numpy as np

from tests.backend_cpu.helpers import check, rand
from tests.passes.filecheck import assert_same_numerics, filecheck, printed, run_passes
from xlc.passes.forwarding_layouts import ForwardingLayouts

ROOT_TUPLE = """HloModule root_layouts

ENTRY main {
  a = f32[3,4]{1,0} parameter(0)
  e = f32[3,4]{1,0} exponential(a)
  ROOT t = (f32[3,4]{0,1}, f32[3,4]{1,0}) tuple(e, a)
}
"""

GTE = """HloModule gte_layouts

ENTRY main {
  a = f32[2,3]{1,0} parameter(0)
  b = f32[2,3]{1,0} negate(a)
  t = (f32[2,3]{1,0}, f32[2,3]{1,0}) tuple(a, b)
  g = f32[2,3]{0,1} get-tuple-element(t), index=1
  ROOT r = f32[6]{0} bitcast(g)
}
"""


def test_root_tuple_element_in_another_layout_gets_a_copy() -> None:
    before, after, changed = run_passes(ROOT_TUPLE, [ForwardingLayouts()])
    assert changed
    filecheck(printed(after), """
        CHECK: %e.relayout = f32[3,4]{0,1} copy(%e)
        CHECK: ROOT %t = (f32[3,4]{0,1}, f32[3,4]{1,0}) tuple(%e.relayout, %a)
    """)
    assert_same_numerics(before, after)


def test_get_tuple_element_takes_its_elements_layout_and_a_copy_relayouts_it() -> None:
    before, after, changed = run_passes(GTE, [ForwardingLayouts()])
    assert changed
    filecheck(printed(after), """
        CHECK: %g = f32[2,3]{1,0} get-tuple-element(%t), index=1
        CHECK-NEXT: %g.relayout = f32[2,3]{0,1} copy(%g)
        CHECK: ROOT %r = f32[6]{0} bitcast(%g.relayout)
    """)
    assert_same_numerics(before, after)


def test_matching_layouts_are_left_alone() -> None:
    text = ROOT_TUPLE.replace("(f32[3,4]{0,1}, f32[3,4]{1,0}) tuple",
                              "(f32[3,4]{1,0}, f32[3,4]{1,0}) tuple")
    _, after, changed = run_passes(text, [ForwardingLayouts()])
    assert not changed and "copy" not in printed(after)


def test_cpu_results_follow_the_declared_layouts() -> None:
    """The backend forwards buffers unchanged: without the copies the {0,1} result would be
    the {1,0} buffer read in the wrong physical order (a bitcast of the gte reads it raw)."""
    a = rand(3, 4)
    got = check(ROOT_TUPLE, a)
    np.testing.assert_allclose(got[0], np.exp(a), rtol=1e-6)
    x = rand(2, 3, seed=1)
    (r,) = check(GTE, x)
    np.testing.assert_array_equal(r, (-x).T.reshape(6))
