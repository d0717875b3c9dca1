"""RowFusion: softmax / log-softmax become one kLoop fusion with their row reductions inside
(rewrite checks, the contract validator, refusals, numerics on the evaluator)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.passes.filecheck import (
    assert_same_numerics,
    filecheck,
    printed,
    random_args,
    run_passes,
)
from xlc.hlo.opcodes import Opcode
from xlc.passes.fusion import InstructionFusion
from xlc.passes.multi_output_fusion import MultiOutputFusion
from xlc.passes.row_fusion import RowFusion, is_row_fusion, row_fusion_error

REDUCERS = """
add_f32 {
  al = f32[] parameter(0)
  ar = f32[] parameter(1)
  ROOT as = f32[] add(al, ar)
}

max_f32 {
  ml = f32[] parameter(0)
  mr = f32[] parameter(1)
  ROOT mm = f32[] maximum(ml, mr)
}
"""

SOFTMAX = "HloModule softmax\n" + REDUCERS + """
ENTRY main {
  x = f32[8,16]{1,0} parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[8]{0} reduce(x, ninf), dimensions={1}, to_apply=max_f32
  mxb = f32[8,16]{1,0} broadcast(mx), dimensions={0}
  d = f32[8,16]{1,0} subtract(x, mxb)
  e = f32[8,16]{1,0} exponential(d)
  zero = f32[] constant(0)
  s = f32[8]{0} reduce(e, zero), dimensions={1}, to_apply=add_f32
  sb = f32[8,16]{1,0} broadcast(s), dimensions={0}
  ROOT q = f32[8,16]{1,0} divide(e, sb)
}
"""

LOG_SOFTMAX = "HloModule log_softmax\n" + REDUCERS + """
ENTRY main {
  x = f32[8,16]{1,0} parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[8]{0} reduce(x, ninf), dimensions={1}, to_apply=max_f32
  mxb = f32[8,16]{1,0} broadcast(mx), dimensions={0}
  d = f32[8,16]{1,0} subtract(x, mxb)
  e = f32[8,16]{1,0} exponential(d)
  zero = f32[] constant(0)
  s = f32[8]{0} reduce(e, zero), dimensions={1}, to_apply=add_f32
  s1 = f32[8,1]{1,0} reshape(s)
  l = f32[8,1]{1,0} log(s1)
  l8 = f32[8]{0} reshape(l)
  lb = f32[8,16]{1,0} broadcast(l8), dimensions={0}
  ROOT o = f32[8,16]{1,0} subtract(d, lb)
}
"""

FUSE = [InstructionFusion(), MultiOutputFusion()]


def _root_fusion(module):
    root = module.entry.root
    assert root.opcode is Opcode.FUSION
    return root


def test_softmax_becomes_one_loop_fusion_with_both_reductions_inside():
    before, after, changed = run_passes(SOFTMAX, FUSE + [RowFusion()])
    assert changed
    f = _root_fusion(after)
    assert [i.opcode for i in after.entry.instructions] == [Opcode.PARAMETER, Opcode.FUSION]
    assert f.attrs["kind"] == "kLoop" and is_row_fusion(f) and row_fusion_error(f) is None
    filecheck(printed(after), """
        CHECK: reduce({{.*}}), dimensions={1}, to_apply=%max_f32
        CHECK: reduce({{.*}}), dimensions={1}, to_apply=%add_f32
        CHECK: ROOT {{.*}} divide(
        CHECK: ENTRY %main
        CHECK-NEXT: %x = f32[8,16]{1,0} parameter(0)
        CHECK-NEXT: ROOT {{.*}} = f32[8,16]{1,0} fusion(%x), kind=kLoop
    """)
    assert_same_numerics(before, after)
    # without RowFusion: several kernels (max, exp + sum, divide) and [8] temps between them
    _, plain, _ = run_passes(SOFTMAX, FUSE)
    assert sum(i.opcode is Opcode.FUSION for i in plain.entry.instructions) >= 3


def test_log_softmax_merges_the_per_row_log_through_size_one_reshapes():
    before, after, changed = run_passes(LOG_SOFTMAX, FUSE + [RowFusion()])
    assert changed
    f = _root_fusion(after)
    assert is_row_fusion(f)
    assert [o.name for o in f.operands] == ["x"]
    assert_same_numerics(before, after)


def test_column_reductions_are_not_row_fused():
    col = SOFTMAX.replace("{1,0}", "{0,1}")
    before, after, _ = run_passes(col, FUSE)
    assert RowFusion().run(after) is False
    assert not any(is_row_fusion(i) for i in after.entry.instructions)
    assert_same_numerics(before, after)


def test_row_values_read_out_of_row_order_or_by_others_are_not_merged():
    # the row sums are read reversed: row r of the output needs the sum of row 7-r
    rev = SOFTMAX.replace("  sb = f32[8,16]{1,0} broadcast(s), dimensions={0}",
                          "  sr = f32[8]{0} reverse(s), dimensions={0}\n"
                          "  sb = f32[8,16]{1,0} broadcast(sr), dimensions={0}")
    before, after, _ = run_passes(rev, FUSE + [RowFusion()])
    root = after.entry.root
    assert not any(i.opcode is Opcode.REDUCE for i in root.fused_computation.instructions)
    assert_same_numerics(before, after)
    # the row maxima are also an output: their fusion stays (its users are not only the root)
    shared = SOFTMAX.replace("ROOT q = f32[8,16]{1,0} divide(e, sb)",
                             "q = f32[8,16]{1,0} divide(e, sb)\n"
                             "  ROOT t = (f32[8,16]{1,0}, f32[8]{0}) tuple(q, mx)")
    before, after, _ = run_passes(shared, FUSE + [RowFusion()])
    for f in (i for i in after.entry.instructions if i.opcode is Opcode.FUSION):
        assert f.attrs["kind"] != "kLoop" or row_fusion_error(f) is None
    assert any(i.opcode is Opcode.FUSION and i.attrs["kind"] == "kInput"
               for i in after.entry.instructions)
    assert_same_numerics(before, after)


def test_validator_names_the_broken_rule():
    _, after, _ = run_passes(SOFTMAX, FUSE + [RowFusion()])
    f = _root_fusion(after)
    red = next(i for i in f.fused_computation.instructions if i.opcode is Opcode.REDUCE)
    f.attrs = f.attrs.replace(kind="kInput")
    assert row_fusion_error(f) == f"{f.name} is not a kLoop fusion"
    f.attrs = f.attrs.replace(kind="kLoop")
    red.attrs = red.attrs.replace(dimensions=(0,))
    assert "is not a row reduction" in (row_fusion_error(f) or "")


def _row_program(dims: list[int], nred: int, f: str, r1: str, g: str, r2: str, per_row: str
                 ) -> str:
    """x -> r1-reduce over the nred minor dims -> broadcast back -> g(x, .) -> f ->
    r2-reduce -> per-row op -> broadcast back -> g(f(...), .)."""
    rank = len(dims)
    full = f"f32[{','.join(map(str, dims))}]"
    kept = list(range(rank - nred))
    row = f"f32[{','.join(str(dims[d]) for d in kept)}]"
    red = "{" + ",".join(str(d) for d in range(rank - nred, rank)) + "}"
    bdims = "{" + ",".join(map(str, kept)) + "}"
    init = {"max_f32": "-inf", "add_f32": "0"}
    row_op = f"  pr = {row} {per_row}(s)\n" if per_row else f"  pr = {row} negate(s)\n"
    return "HloModule rows\n" + REDUCERS + f"""
ENTRY main {{
  x = {full} parameter(0)
  i1 = f32[] constant({init[r1]})
  a = {row} reduce(x, i1), dimensions={red}, to_apply={r1}
  ab = {full} broadcast(a), dimensions={bdims}
  c = {full} {g}(x, ab)
  e = {full} {f}(c)
  i2 = f32[] constant({init[r2]})
  s = {row} reduce(e, i2), dimensions={red}, to_apply={r2}
{row_op}  sb = {full} broadcast(pr), dimensions={bdims}
  ROOT o = {full} {g}(e, sb)
}}
"""


@settings(max_examples=30, deadline=None)
@given(dims=st.lists(st.integers(1, 5), min_size=2, max_size=3),
       nred=st.integers(1, 2), f=st.sampled_from(["exponential", "tanh", "negate", "abs"]),
       r1=st.sampled_from(["max_f32", "add_f32"]), r2=st.sampled_from(["max_f32", "add_f32"]),
       g=st.sampled_from(["subtract", "add", "multiply", "maximum"]),
       per_row=st.sampled_from(["", "exponential", "sine"]), seed=st.integers(0, 3))
def test_random_row_programs_keep_numerics_and_the_contract(dims, nred, f, r1, g, r2,
                                                            per_row, seed):
    nred = min(nred, len(dims) - 1)
    text = _row_program(dims, nred, f, r1, g, r2, per_row)
    before, after, _ = run_passes(text, FUSE + [RowFusion()])
    # the whole program is one row fusion
    assert [i.opcode for i in after.entry.instructions] == [Opcode.PARAMETER, Opcode.FUSION]
    assert is_row_fusion(after.entry.root)
    assert_same_numerics(before, after, random_args(before, seed), rtol=1e-4, atol=1e-5)


ARGMAX_PLUS_ONE = """HloModule argmax_plus_one
argmax_f32 {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v0, v1), direction=GT
  eq = pred[] compare(v0, v1), direction=EQ
  lt = pred[] compare(i0, i1), direction=LT
  tie = pred[] and(eq, lt)
  take = pred[] or(gt, tie)
  v = f32[] select(take, v0, v1)
  i = s32[] select(take, i0, i1)
  ROOT t = (f32[], s32[]) tuple(v, i)
}

ENTRY main {
  x = f32[4,8]{1,0} parameter(0)
  iota = s32[4,8]{1,0} iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  r = (f32[4]{0}, s32[4]{0}) reduce(x, iota, ninf, zero), dimensions={1}, to_apply=argmax_f32
  idx = s32[4]{0} get-tuple-element(r), index=1
  one = s32[] constant(1)
  ones = s32[4]{0} broadcast(one), dimensions={}
  ROOT o = s32[4]{0} add(idx, ones)
}
"""


def test_elementwise_use_of_a_variadic_reduce_is_not_row_fused():
    # argmax's reduce has a tuple-shaped output: its outputs are not fused instructions, and
    # row fusion used to index past `roots(producer)` (IndexError) when the consumer read one
    before, after, _ = run_passes(ARGMAX_PLUS_ONE, FUSE + [RowFusion()])
    assert any(i.opcode is Opcode.FUSION and i.attrs["kind"] == "kInput"
               for i in after.entry.instructions)
    assert not any(is_row_fusion(i) for i in after.entry.instructions)
    assert_same_numerics(before, after)
