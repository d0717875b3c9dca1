"""CPU emitters for select-and-scatter, the random number generators and row fusions, compared
with the reference evaluator (bit-exactly where the semantics are deterministic)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.backend_cpu.helpers import check, rand

GE_SELECT = """
ge_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def _sas(window: str, x_shape: str, s_shape: str) -> str:
    return f"""HloModule m
{GE_SELECT}
ENTRY e {{
  x = f32[{x_shape}] parameter(0)
  s = f32[{s_shape}] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[{x_shape}] select-and-scatter(x, s, z), window={{{window}}},
    select=ge_f32, scatter=add_f32
}}"""


@pytest.mark.parametrize("window,x_shape,s_shape", [
    ("size=2x2 stride=2x2", "8,6", "4,3"),
    ("size=3x3 stride=1x1", "7,6", "5,4"),
    ("size=3x3 stride=2x2 pad=1_1x1_1", "9,8", "5,4"),
    ("size=1x3x3x1 stride=1x2x2x1 pad=0_0x0_1x0_1x0_0", "2,7,7,3", "2,3,3,3"),
    ("size=2x3 stride=1x2 rhs_dilate=2x1", "9,9", "7,4"),
])
def test_select_and_scatter_matches_evaluator(window: str, x_shape: str, s_shape: str) -> None:
    xs = tuple(int(v) for v in x_shape.split(","))
    ss = tuple(int(v) for v in s_shape.split(","))
    check(_sas(window, x_shape, s_shape), rand(*xs), rand(*ss, seed=3))


def test_select_and_scatter_ties_and_int() -> None:
    text = """HloModule m
gt_s32 {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GT
}
max_s32 {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] maximum(a, b)
}
ENTRY e {
  x = s32[10,10] parameter(0)
  s = s32[5,5] parameter(1)
  z = s32[] constant(-7)
  ROOT r = s32[10,10] select-and-scatter(x, s, z), window={size=3x3 stride=2x2 pad=0_1x0_1},
    select=gt_s32, scatter=max_s32
}"""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 3, (10, 10)).astype(np.int32)  # many ties: first-selected rule matters
    s = rng.integers(-20, 20, (5, 5)).astype(np.int32)
    check(text, x, s)


@pytest.mark.parametrize("algorithm", ["rng_three_fry", "rng_philox", "rng_default"])
@pytest.mark.parametrize("out", ["u32[6,5]", "u64[7]", "u32[5,3]", "f32[4,4]", "u8[9]", "s64[]"])
@pytest.mark.parametrize("state", ["u64[2]", "u64[3]"])
def test_rng_bit_generator_is_bit_exact(algorithm: str, out: str, state: str) -> None:
    text = f"""HloModule m
ENTRY e {{
  s = {state} parameter(0)
  ROOT r = ({state}, {out}) rng-bit-generator(s), algorithm={algorithm}
}}"""
    n = int(state[4:-1])
    seed = np.array([0x0123456789ABCDEF, 0xFFFFFFFFFFFFFFF0, 7][:n], np.uint64)
    check(text, seed, rtol=0, atol=0)


ROW_FUSION = """HloModule m
mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ad {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
fc {
  x = f32[64,300] parameter(0)
  ninf = f32[] constant(-inf)
  m = f32[64] reduce(x, ninf), dimensions={1}, to_apply=mx
  mb = f32[64,300] broadcast(m), dimensions={0}
  d = f32[64,300] subtract(x, mb)
  ex = f32[64,300] exponential(d)
  z = f32[] constant(0)
  s = f32[64] reduce(ex, z), dimensions={1}, to_apply=ad
  sb = f32[64,300] broadcast(s), dimensions={0}
  ROOT o = f32[64,300] ROOT_EXPR
}
ENTRY e {
  x = f32[64,300] parameter(0)
  ROOT f = f32[64,300] fusion(x), kind=kLoop, calls=fc
}"""


@pytest.mark.parametrize("root,shared", [
    ("divide(ex, sb)", True),                    # softmax: exp computed once
    ("multiply(ex, ex)", True),
    ("add(x, sb)", False),                       # the root does not read ex
])
def test_row_fusion_value_computed_once(root: str, shared: bool) -> None:
    from xlc.backend_cpu.emit_row_fusion import _reads_at_same_index
    from xlc.hlo.parser import parse_module

    text = ROW_FUSION.replace("ROOT_EXPR", root)
    fc = next(c for c in parse_module(text).computations if c.name == "fc")
    assert _reads_at_same_index(fc.root, fc.instruction("ex")) is shared
    x = rand(64, 300) * 3
    check(text, x, rtol=1e-5, atol=2e-5)  # sums reassociated (vectorised)


def test_row_fusion_value_read_elsewhere_is_recomputed() -> None:
    # The root reads `ex` through a reverse (another index): it must not come from the output.
    from xlc.backend_cpu.emit_row_fusion import _reads_at_same_index
    from xlc.hlo.parser import parse_module

    text = ROW_FUSION.replace(
        "ROOT o = f32[64,300] ROOT_EXPR",
        "r = f32[64,300] reverse(ex), dimensions={1}\n  ROOT o = f32[64,300] divide(r, sb)")
    fc = next(c for c in parse_module(text).computations if c.name == "fc")
    assert not _reads_at_same_index(fc.root, fc.instruction("ex"))
    check(text, rand(64, 300) * 3, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("m,k,n,kernel", [
    (96, 96, 96, "gemm"),        # n is no multiple of the 64-wide tile: no scalar tail loop
    (200, 300, 100, "gemm"),
    (1000, 1000, 1000, "gemm"),
    (1024, 1024, 1024, "gemm"),  # big: the cache-blocked packed GEMM
    (256, 256, 256, "matmul"),
    (30, 512, 2048, "matmul"),
])
def test_dot_kernel_choice(m: int, k: int, n: int, kernel: str) -> None:
    """Which of the two f32 matmul kernels a dot gets (both are correct; the choice avoids
    the register-blocked kernel's scalar remainder loop, which made 1000^3 8x slower)."""
    from xlc.backend_cpu.emit_dot import _DotPlan
    from xlc.backend_cpu.emit_matmul import matmul_applicable
    from xlc.hlo.parser import parse_module

    text = f"""HloModule m
ENTRY e {{
  x = f32[{m},{k}] parameter(0)
  y = f32[{k},{n}] parameter(1)
  ROOT r = f32[{m},{n}] dot(x, y), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""
    dot = parse_module(text).entry.root
    assert matmul_applicable(dot, _DotPlan(dot), threads=2) is (kernel == "matmul")
    if m * k * n <= 1 << 25:
        x, y = rand(m, k), rand(k, n, seed=1)
        got = check(text, x, y, rtol=1e-4, atol=1e-3)[0]
        np.testing.assert_allclose(got, x @ y, rtol=1e-4, atol=1e-3)
