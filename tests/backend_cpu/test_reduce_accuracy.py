"""Long f32 sums on the CPU stay accurate (issue 11, item 3): row reductions add blocks of
elements pairwise (`emit_reduce_blocked.py`) instead of n / 64 elements per partial sum, column
reductions blocks of rows (`emit_reduce_column.py`) instead of n rows per output.

Constant data is the hard case: every add rounds the same way, so a plain reassociated loop
over 4M copies of 0.1f is off by about 1e-3 (XLA's and numpy's tree sums: < 1e-7)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tests.backend_cpu.helpers import check
from xlc.backend_cpu import compile_cpu
from xlc.backend_cpu.emit_reduce_blocked import BLOCK, block_plan
from xlc.backend_cpu.emit_reduce_column import ROWS, WIDTH, column_plan
from xlc.hlo.parser import parse_module

SUM = """HloModule m
add {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT s = {t}[] add(a, b)
}}
ENTRY e {{
  x = {t}[{shape}] parameter(0)
  z = {t}[] constant({init})
  ROOT r = {t}[{out}] reduce(x, z), dimensions={{{dims}}}, to_apply=add
}}
"""

LAYER_STATS = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4,300000] parameter(0)
  z = f32[] constant(0)
  s = f32[4] reduce(x, z), dimensions={1}, to_apply=add
  sq = f32[4,300000] multiply(x, x)
  q = f32[4] reduce(sq, z), dimensions={1}, to_apply=add
  ROOT t = (f32[4], f32[4]) tuple(s, q)
}
"""


def _rel_err(got: np.ndarray, x: np.ndarray, axis: tuple[int, ...] | None = None) -> float:
    exact = np.sum(x.astype(np.float64), axis=axis)  # f64 pairwise: exact to ~1e-16 here
    return float(np.max(np.abs(got.astype(np.float64) - exact) / np.abs(exact)))


def test_sum_of_4m_constants_is_accurate() -> None:
    n = 1 << 22
    x = np.full(n, 0.1, np.float32)
    exe = compile_cpu(parse_module(SUM.format(t="f32", shape=n, out="", dims="0", init="0")))
    (got,) = exe.run([x])
    exact = math.fsum(x.astype(np.float64))
    assert abs(float(got) - exact) / exact < 2e-7  # was 1.3e-3


@pytest.mark.parametrize("shape,dims,out", [
    ("8,262144", "1", "8"),        # rows, threads over the kept dim
    ("64,32,512", "0,1,2", ""),    # split at the middle dim
    ("3001,7", "0,1", ""),         # split at the major dim, a partial last chunk
    ("16,3001,7", "1,2", "16"),    # kept major dim, partial chunks
])
def test_blocked_sums_are_accurate_and_match_the_evaluator(shape: str, dims: str,
                                                            out: str) -> None:
    dims_t = tuple(int(d) for d in dims.split(","))
    x = np.full([int(s) for s in shape.split(",")], 1.1, np.float32)
    x += np.random.default_rng(0).uniform(0, 1e-3, x.shape).astype(np.float32)
    text = SUM.format(t="f32", shape=shape, out=out, dims=dims, init="0.25")
    module = parse_module(text)
    in_shape = module.entry.instruction("x").shape
    assert block_plan([(module.entry.root, [()])], in_shape, list(dims_t)) is not None
    (got,) = check(text, x, rtol=1e-6, atol=0)
    assert _rel_err(got - np.float32(0.25), x, dims_t) < 3e-7


def test_f64_sums_are_blocked_too() -> None:
    n = 1 << 20
    x = np.full(n, 0.1, np.float64)
    (got,) = check(SUM.format(t="f64", shape=n, out="", dims="0", init="0"), x, rtol=1e-15)
    assert abs(float(got) - n * 0.1) / (n * 0.1) < 1e-15


def test_fused_sums_with_a_shared_input_are_accurate() -> None:
    x = np.full((4, 300000), 1.1, np.float32)
    s, q = check(LAYER_STATS, x, rtol=1e-6, atol=0)
    assert _rel_err(s, x, (1,)) < 3e-7 and _rel_err(q, x * x, (1,)) < 3e-7


def test_short_and_non_sum_reductions_keep_the_plain_loop() -> None:
    short = parse_module(SUM.format(t="f32", shape=f"4,{2 * BLOCK - 1}", out="4", dims="1",
                                    init="0"))
    root = short.entry.root
    assert block_plan([(root, [()])], root.operands[0].shape, [1]) is None
    ints = parse_module(SUM.format(t="s32", shape="1000000", out="", dims="0", init="0"))
    root = ints.entry.root
    assert block_plan([(root, [()])], root.operands[0].shape, [0]) is None


NORMALIZE = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4,300000] parameter(0)
  z = f32[] constant(0)
  s = f32[4] reduce(x, z), dimensions={1}, to_apply=add
  sb = f32[4,300000] broadcast(s), dimensions={0}
  ROOT r = f32[4,300000] divide(x, sb)
}
"""


def test_row_fusion_sums_are_blocked() -> None:
    x = np.full((4, 300000), 0.1, np.float32)
    exe = compile_cpu(parse_module(NORMALIZE))
    assert "reduce(" in exe.module.to_text() and "kind=kLoop" in exe.module.to_text()
    (got,) = exe.run([x])
    np.testing.assert_allclose(got.astype(np.float64) * 300000, 1.0, rtol=3e-7)  # was 4.1e-5


SOFTMAX = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(a, b)
}
ENTRY e {
  x = f32[4,5000] parameter(0)
  z = f32[] constant(0)
  ninf = f32[] constant(-inf)
  m = f32[4] reduce(x, ninf), dimensions={1}, to_apply=mx
  mb = f32[4,5000] broadcast(m), dimensions={0}
  d = f32[4,5000] subtract(x, mb)
  ex = f32[4,5000] exponential(d)
  s = f32[4] reduce(ex, z), dimensions={1}, to_apply=add
  sb = f32[4,5000] broadcast(s), dimensions={0}
  ROOT r = f32[4,5000] divide(ex, sb)
}
"""


def test_row_fused_softmax_with_a_blocked_sum_matches_the_evaluator() -> None:
    # the sum's input exp(x - max) is kept in the output while summing (the `each` callback)
    x = np.random.default_rng(2).standard_normal((4, 5000)).astype(np.float32)
    (got,) = check(SOFTMAX, x, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(got.sum(axis=1, dtype=np.float64), 1.0, rtol=1e-6)


@pytest.mark.parametrize("shape,dims,out", [
    ("262144,16", "0", "16"),       # a column sum of 256K rows
    ("3,1000,5", "1", "3,5"),       # kept dims on both sides of the reduced one
    ("7,50,9,3", "1,2", "7,3"),     # two reduced dims, a partial last block
    ("100,10,3,70", "0,1", "3,70"),
])
def test_blocked_column_sums_are_accurate_and_match_the_evaluator(shape: str, dims: str,
                                                                   out: str) -> None:
    dims_t = tuple(int(d) for d in dims.split(","))
    x = np.full([int(s) for s in shape.split(",")], 1.1, np.float32)
    x += np.random.default_rng(1).uniform(0, 1e-3, x.shape).astype(np.float32)
    text = SUM.format(t="f32", shape=shape, out=out, dims=dims, init="0.25")
    root = parse_module(text).entry.root
    kept = [d for d in range(x.ndim) if d not in dims_t]
    assert column_plan([(root, [()])], root.operands[0].shape, list(dims_t)) is not None, kept
    (got,) = check(text, x, rtol=2e-6, atol=0)
    assert _rel_err(got - np.float32(0.25), x, dims_t) < 4e-7


COLUMN_STATS = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[100000,24] parameter(0)
  z = f32[] constant(0)
  s = f32[24] reduce(x, z), dimensions={0}, to_apply=add
  sq = f32[100000,24] multiply(x, x)
  q = f32[24] reduce(sq, z), dimensions={0}, to_apply=add
  ROOT t = (f32[24], f32[24], f32[100000,24]) tuple(s, q, sq)
}
"""


@pytest.mark.parametrize("layout", ["column", "row"])
def test_fused_sums_with_an_elementwise_output_are_accurate(layout: str) -> None:
    # one kInput fusion: two sums plus x*x written at every element (the `each` callback)
    text, x, axis = COLUMN_STATS, np.full((100000, 24), 1.1, np.float32), 0
    if layout == "row":
        text = text.replace("f32[100000,24]", "f32[24,100000]").replace("dimensions={0}",
                                                                         "dimensions={1}")
        x, axis = np.ascontiguousarray(x.T), 1
    s, q, sq = check(text, x, rtol=1e-6, atol=0)
    assert _rel_err(s, x, (axis,)) < 4e-7 and _rel_err(q, x * x, (axis,)) < 4e-7
    np.testing.assert_array_equal(sq, x * x)


def test_wide_or_short_columns_keep_the_plain_pass() -> None:
    for shape, dims in [(f"4096,{WIDTH + 1}", [0]), (f"{2 * ROWS - 1},16", [0])]:
        text = SUM.format(t="f32", shape=shape, out=shape.split(",")[1], dims="0", init="0")
        root = parse_module(text).entry.root
        assert column_plan([(root, [()])], root.operands[0].shape, dims) is None


def test_evaluator_column_sums_are_accurate() -> None:
    # the oracle: numpy's add.reduce over a major axis adds row after row (3e-3 off here)
    from xlc.hlo.evaluator import evaluate

    x = np.full((262144, 4), 1.1, np.float32)
    got = evaluate(parse_module(SUM.format(t="f32", shape="262144,4", out="4", dims="0",
                                           init="0")), [x])
    assert _rel_err(np.asarray(got), x, (0,)) < 2e-7
