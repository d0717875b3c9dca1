"""WidenNarrowReductions: f16/bf16 add/multiply reductions accumulate in f32 (issue 11, item 2).

The rewrite itself (text checks), and the numerics on the CPU backend and on the GPU backend
(through the kernel emulator) against the evaluator, which accumulates these in f32."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tests.backend_cpu.helpers import check as cpu_check
from tests.passes.filecheck import assert_same_numerics, filecheck, printed, run_passes
from xlc.backend_cpu import compile_cpu
from xlc.hlo.parser import parse_module
from xlc.passes.widen_reductions import WidenNarrowReductions

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {"bf16": BF16, "f16": np.dtype(np.float16)}
# One unit in the last place of a result near 1, per type: results are rounded once from f32.
ULP = {"bf16": 2.0 ** -7, "f16": 2.0 ** -10}

REDUCE = """HloModule m
{op} {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT s = {t}[] {op}(a, b)
}}
ENTRY e {{
  x = {t}[{shape}] parameter(0)
  z = {t}[] constant({init})
  ROOT r = {t}[{out}] reduce(x, z), dimensions={{{dims}}}, to_apply={op}
}}
"""

CUMSUM = """HloModule m
add {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT s = {t}[] add(a, b)
}}
ENTRY e {{
  x = {t}[4,{n}] parameter(0)
  z = {t}[] constant(0)
  ROOT r = {t}[4,{n}] reduce-window(x, z), window={{size=1x{n} pad=0_0x{m}_0}}, to_apply=add
}}
"""

SOFTMAX = """HloModule m
add {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT s = {t}[] add(a, b)
}}
mx {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT s = {t}[] maximum(a, b)
}}
ENTRY e {{
  x = {t}[8,{n}] parameter(0)
  z = {t}[] constant(0)
  ninf = {t}[] constant(-inf)
  m = {t}[8] reduce(x, ninf), dimensions={{1}}, to_apply=mx
  mb = {t}[8,{n}] broadcast(m), dimensions={{0}}
  d = {t}[8,{n}] subtract(x, mb)
  ex = {t}[8,{n}] exponential(d)
  s = {t}[8] reduce(ex, z), dimensions={{1}}, to_apply=add
  sb = {t}[8,{n}] broadcast(s), dimensions={{0}}
  ROOT r = {t}[8,{n}] divide(ex, sb)
}}
"""


def _sum_of_ones(t: str, n: int, shape: str, dims: str, out: str) -> tuple[str, np.ndarray]:
    text = REDUCE.format(op="add", t=t, shape=shape, out=out, dims=dims, init="0")
    return text, np.ones([int(s) for s in shape.split(",")], DTYPES[t])


@pytest.mark.parametrize("t,n", [("bf16", 1000), ("f16", 3000)])
@pytest.mark.parametrize("layout", ["all", "row", "column"])
def test_sum_of_ones_is_exact_on_cpu(t: str, n: int, layout: str) -> None:
    # bf16 accumulation stalls at 256 (f16 at 2048); XLA and the evaluator give n.
    shape, dims, out = {"all": (f"{n}", "0", ""), "row": (f"4,{n}", "1", "4"),
                        "column": (f"{n},4", "0", "4")}[layout]
    text, x = _sum_of_ones(t, n, shape, dims, out)
    (got,) = compile_cpu(parse_module(text)).run([x])
    np.testing.assert_array_equal(got.astype(np.float64), float(n))
    cpu_check(text, x, rtol=0, atol=0)


@pytest.mark.parametrize("t", ["bf16", "f16"])
@pytest.mark.parametrize("dims,out", [("1", "2000"), ("0", "16"), ("0,1", "")])
def test_random_sums_match_the_evaluator_on_cpu(t: str, dims: str, out: str) -> None:
    text = REDUCE.format(op="add", t=t, shape="2000,16", out=out, dims=dims, init="0.5")
    x = np.random.default_rng(1).uniform(0, 1, (2000, 16)).astype(DTYPES[t])
    cpu_check(text, x, rtol=ULP[t], atol=0)


@pytest.mark.parametrize("t", ["bf16", "f16"])
def test_product_accumulates_in_f32_on_cpu(t: str) -> None:
    # 1 + 4 ulp: each 16-bit step rounds the product (XLA's CPU too); f32 does not.
    text = REDUCE.format(op="multiply", t=t, shape="4,300", out="4", dims="1", init="1")
    x = np.full((4, 300), 1 + 4 * ULP[t] / 2, DTYPES[t])
    cpu_check(text, x, rtol=2 * ULP[t], atol=0)


@pytest.mark.parametrize("t", ["bf16", "f16"])
def test_cumsum_reduce_window_accumulates_in_f32_on_cpu(t: str) -> None:
    n = 3000
    x = np.ones((4, n), DTYPES[t])
    (got,) = cpu_check(CUMSUM.format(t=t, n=n, m=n - 1), x, rtol=0, atol=0)
    np.testing.assert_array_equal(got[:, -1], np.asarray(n, DTYPES[t]))


@pytest.mark.parametrize("t", ["bf16", "f16"])
def test_row_fused_softmax_sums_in_f32_on_cpu(t: str) -> None:
    x = np.zeros((8, 3000), DTYPES[t])  # each row sums 3000 ones: 256 in bf16 steps
    (got,) = cpu_check(SOFTMAX.format(t=t, n=3000), x, rtol=ULP[t], atol=0)
    np.testing.assert_allclose(got.astype(np.float64), 1 / 3000, rtol=ULP[t])


@pytest.mark.parametrize("t,n", [("bf16", 1000), ("f16", 3000)])
@pytest.mark.parametrize("layout", ["row", "column"])
def test_sum_of_ones_is_exact_on_gpu(t: str, n: int, layout: str) -> None:
    from tests.backend_gpu.emulator import Emulator
    from tests.backend_gpu.helpers import compile_text

    shape, dims = (f"4,{n}", "1") if layout == "row" else (f"{n},4", "0")
    text, x = _sum_of_ones(t, n, shape, dims, "4")
    (got,) = Emulator(compile_text(text)).run([x])
    np.testing.assert_array_equal(got.astype(np.float64), float(n))


def test_rewrite_converts_around_an_f32_reduce() -> None:
    text = REDUCE.format(op="add", t="bf16", shape="8,16", out="8", dims="1", init="0")
    before, after, changed = run_passes(text, [WidenNarrowReductions()])
    assert changed
    filecheck(printed(after), """
        CHECK: (lhs: f32[], rhs: f32[]) -> f32[]
        CHECK: ROOT %add{{.*}} = f32[] add(%lhs, %rhs)
        CHECK: %x.f32 = f32[8,16]{1,0} convert(%x)
        CHECK: %z.f32 = f32[] convert(%z)
        CHECK: %r.f32 = f32[8]{0} reduce(%x.f32, %z.f32), dimensions={1}, to_apply=%add_f32
        CHECK: ROOT %r = bf16[8]{0} convert(%r.f32)
    """)
    assert_same_numerics(before, after, rtol=ULP["bf16"])


@pytest.mark.parametrize("op,t", [("maximum", "bf16"), ("add", "f32"), ("add", "s32")])
def test_exact_and_wide_reductions_are_left_alone(op: str, t: str) -> None:
    text = REDUCE.format(op=op, t=t, shape="8,16", out="8", dims="1", init="0")
    _, _, changed = run_passes(text, [WidenNarrowReductions()])
    assert not changed
