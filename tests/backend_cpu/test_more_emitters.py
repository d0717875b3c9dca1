"""CPU emitters for select-and-scatter, the random number generators and row fusions, compared
with the reference evaluator (bit-exactly where the semantics are deterministic)."""
from __future__ import annotations

import re

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


@pytest.mark.parametrize("lhs,rhs,out,dims,loops,spec", [
    # [B, T, D] @ [D, E]: the two lhs free dims merge into one m of B*T rows
    ("f32[8,128,64]", "f32[64,96]", "f32[8,128,96]",
     "lhs_contracting_dims={2}, rhs_contracting_dims={0}", 0, (1024, 96, 64, 1)),
    # attention scores: batch dims (b, h) are not nested in q/k, so b becomes a loop around an
    # 8-batch GEMM over h
    ("f32[4,64,8,32]", "f32[4,64,8,32]", "f32[4,8,64,64]",
     "lhs_batch_dims={0,2}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, "
     "rhs_contracting_dims={3}", 1, (64, 64, 32, 8)),
    # attention output: probabilities [b, h, t, s] times v [b, s, h, d]
    ("f32[4,8,64,64]", "f32[4,64,8,32]", "f32[4,8,64,32]",
     "lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, "
     "rhs_contracting_dims={1}", 1, (64, 32, 64, 8)),
])
def test_dots_with_unmergeable_dims_run_as_gemm_calls(lhs: str, rhs: str, out: str, dims: str,
                                                       loops: int, spec: tuple) -> None:
    """Dims that no single stride describes become loops around GEMM calls (these were
    scalar loop nests, 10-90x slower)."""
    from xlc.backend_cpu.gemm_dot import gemm_plan_for_dot
    from xlc.hlo.parser import parse_module

    text = f"""HloModule m
ENTRY e {{
  a = {lhs} parameter(0)
  b = {rhs} parameter(1)
  ROOT d = {out} dot(a, b), {dims}
}}"""
    plan = gemm_plan_for_dot(parse_module(text).entry.root)
    assert plan is not None and len(plan.loops) == loops
    assert (plan.spec.m, plan.spec.n, plan.spec.k, plan.spec.batch) == spec

    def shape(s: str) -> tuple[int, ...]:
        return tuple(int(d) for d in s[4:-1].split(","))

    check(text, rand(*shape(lhs)), rand(*shape(rhs), seed=1), rtol=1e-4, atol=1e-4)


def test_dot_between_temps_uses_the_gemm() -> None:
    """Every temp lives in the one temp allocation: a dot reading and writing temps must not
    be mistaken for an in-place one (that sent transformer layers to a loop nest 10x
    slower)."""
    from xlc.backend_cpu import compile_cpu
    from xlc.hlo.parser import parse_module

    text = """HloModule m
ENTRY e {
  x = f32[256,200] parameter(0)
  w = f32[200,300] parameter(1)
  v = f32[300,200] parameter(2)
  t = f32[256,200] exponential(x)
  d = f32[256,300] dot(t, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  e = f32[256,300] tanh(d)
  f = f32[256,200] dot(e, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = f32[256,200] add(f, t)
}"""
    exe = compile_cpu(parse_module(text))
    ba = exe.assignment
    t_slice, d_slice = (ba.slice_of(exe.module.entry.instruction(n)) for n in ("t", "d"))
    assert t_slice.index == d_slice.index  # both in the temp block
    # both dots run on the library GEMM: one call per GEMM function (with one more per block
    # of B where B is packed once block by block, `gemm.b_blocks`)
    kernels = re.findall(r'define [^@]*@"[^"]*\.gemm\.([df])\.gemm(?:\.k\d+)?"', exe.llvm_ir)
    assert sorted(set(kernels)) == ["d", "f"]
    assert exe.llvm_ir.count("call void @\"xlc_gemm_f32_shares\"") == len(kernels)
    check(text, rand(256, 200) * 0.1, rand(200, 300, seed=1), rand(300, 200, seed=2),
          rtol=1e-4, atol=1e-4)
