"""TransposeFolding: transpose operands of dot folded into its dimension numbers (rewrite +
numerics on the evaluator)."""
from __future__ import annotations

from tests.passes.filecheck import assert_same_numerics, filecheck, printed, run_passes
from xlc.passes.transpose_folding import TransposeFolding

MATMUL_BT = """HloModule bt

ENTRY main {
  a = f32[3,4] parameter(0)
  b = f32[5,4] parameter(1)
  bt = f32[4,5]{0,1} transpose(b), dimensions={1,0}
  ROOT d = f32[3,5] dot(a, bt), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_rhs_transpose_folds_into_contracting_dims() -> None:
    before, after, changed = run_passes(MATMUL_BT, [TransposeFolding()])
    assert changed
    filecheck(printed(after), """
        CHECK: %b = f32[5,4]{1,0} parameter(1)
        CHECK-NOT: transpose
        CHECK: ROOT %d = f32[3,5]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_{{.*}}={1}
    """)
    assert_same_numerics(before, after)


BATCHED_BOTH = """HloModule both

ENTRY main {
  a = f32[4,2,3] parameter(0)
  at = f32[2,3,4] transpose(a), dimensions={1,2,0}
  b = f32[5,2,4] parameter(1)
  bt = f32[2,4,5] transpose(b), dimensions={1,2,0}
  ROOT d = f32[2,3,5] dot(at, bt), lhs_batch_dims={0}, lhs_contracting_dims={2},
                                   rhs_batch_dims={0}, rhs_contracting_dims={1}
}
"""


def test_both_sides_with_batch_dims_and_a_transpose_kept_for_another_user() -> None:
    text = BATCHED_BOTH
    before, after, changed = run_passes(text, [TransposeFolding()])
    assert changed
    filecheck(printed(after), """
        CHECK-NOT: transpose
        CHECK: ROOT %d = f32[2,3,5]{2,1,0} dot(%a, %b), lhs_batch_dims={1}
    """)
    d = after.entry.root
    assert [d.attrs[f"{s}_{k}_dims"] for s in ("lhs", "rhs") for k in ("batch", "contracting")] \
        == [(1,), (0,), (1,), (2,)]
    assert_same_numerics(before, after)
    shared = text.replace("ROOT d = f32[2,3,5]", "d = f32[2,3,5]").replace(
        "rhs_contracting_dims={1}\n", "rhs_contracting_dims={1}\n  n = f32[2,3,4] negate(at)\n"
        "  ROOT t = (f32[2,3,5], f32[2,3,4]) tuple(d, n)\n")
    before, after, changed = run_passes(shared, [TransposeFolding()])
    assert changed
    filecheck(printed(after), """
        CHECK: %at = f32[2,3,4]{2,1,0} transpose(%a), dimensions={1,2,0}
        CHECK: dot(%a, %b)
    """)
    assert_same_numerics(before, after)


REORDERING = """HloModule reorder

ENTRY main {
  x = f32[2,3,4] parameter(0)
  xt = f32[4,3,2] transpose(x), dimensions={2,1,0}
  y = f32[4,5] parameter(1)
  ROOT d = f32[3,2,5] dot(xt, y), lhs_contracting_dims={0}, rhs_contracting_dims={0}
}
"""


def test_transpose_that_reorders_free_dims_is_kept() -> None:
    # xt's free dims (1, 2) are x's dims (1, 0): folding would swap the result's dims
    _, after, changed = run_passes(REORDERING, [TransposeFolding()])
    assert not changed
    filecheck(printed(after), """
        CHECK: transpose(%x), dimensions={2,1,0}
        CHECK: dot(%xt, %y)
    """)
