"""rng-bit-generator (bit-exact) and select-and-scatter on the GPU, run in the host emulator and
compared with the reference evaluator; their PTX assembles with ptxas."""
from __future__ import annotations

import numpy as np
import pytest

from tests.backend_gpu.helpers import compile_text, requires_ptxas
from tests.backend_gpu.test_emulated import check
from xlc.backend_gpu import nvptx
from xlc.backend_gpu.thunks import KernelThunk

RNG = np.random.default_rng(5)


def _rbg(algorithm: str, out: str, state: str) -> str:
    return f"""HloModule m
ENTRY e {{
  s = {state} parameter(0)
  ROOT r = ({state}, {out}) rng-bit-generator(s), algorithm={algorithm}
}}"""


@pytest.mark.parametrize("algorithm", ["rng_three_fry", "rng_philox", "rng_default"])
@pytest.mark.parametrize("out", ["u32[6,5]", "u64[7]", "u32[5,3]", "f32[4,4]", "u8[9]", "s64[]",
                                 "u32[3,4]{0,1}"])
@pytest.mark.parametrize("state", ["u64[2]", "u64[3]"])
def test_rng_bit_generator_is_bit_exact(algorithm: str, out: str, state: str) -> None:
    n = int(state[4:-1])
    seed = np.array([0x0123456789ABCDEF, 0xFFFFFFFFFFFFFFF0, 7][:n], np.uint64)
    check(_rbg(algorithm, out, state), [seed], rtol=0, atol=0)


def test_rng_state_kernel_runs_after_the_bits_kernel() -> None:
    exe = compile_text(_rbg("rng_philox", "u32[1000]", "u64[2]"))
    kernels = [t for t in exe.all_thunks() if isinstance(t, KernelThunk)]
    assert [t.kernel for t in kernels] == ["r_bits_k", "r_state_k"]
    assert kernels[0].grid[0] * kernels[0].block[0] >= 1000 and kernels[1].block == (1, 1, 1)


SAS = """HloModule m
select {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT c = pred[] compare(a, b), direction={dir}
}}
scatter {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT s = {t}[] {comb}(a, b)
}}
ENTRY e {{
  x = {t}[{xs}] parameter(0)
  s = {t}[{ss}] parameter(1)
  z = {t}[] constant({init})
  ROOT r = {t}[{xs}] select-and-scatter(x, s, z), window={{{window}}}, select=select,
    scatter=scatter
}}"""


@pytest.mark.parametrize("window,xs,ss", [
    ("size=2x2 stride=2x2", "8,6", "4,3"),
    ("size=3x3 stride=1x1", "7,6", "5,4"),
    ("size=3x3 stride=2x2 pad=1_1x1_1", "9,8", "5,4"),
    ("size=2x3 stride=1x2 rhs_dilate=2x1", "9,9", "7,4"),
])
def test_select_and_scatter_add_uses_atomics(window: str, xs: str, ss: str) -> None:
    text = SAS.format(t="f32", dir="GE", comb="add", init="0", xs=xs, ss=ss, window=window)
    x = RNG.standard_normal(tuple(int(v) for v in xs.split(","))).astype(np.float32)
    s = RNG.standard_normal(tuple(int(v) for v in ss.split(","))).astype(np.float32)
    check(text, [x, s], rtol=1e-5, atol=1e-5)
    assert "atom.global.add.f32" in compile_text(text).ptx


def test_select_and_scatter_with_ties_and_a_max_scatter_is_serial_and_exact() -> None:
    text = SAS.format(t="s32", dir="GT", comb="maximum", init="-7", xs="10,10", ss="5,5",
                      window="size=3x3 stride=2x2 pad=0_1x0_1")
    x = RNG.integers(0, 3, (10, 10)).astype(np.int32)  # many ties: the first-selected rule
    s = RNG.integers(-20, 20, (5, 5)).astype(np.int32)
    check(text, [x, s])
    exe = compile_text(text)
    (scan,) = [t for t in exe.all_thunks() if isinstance(t, KernelThunk) and t.kernel == "r_k"]
    assert scan.grid == (1, 1, 1) and scan.block == (1, 1, 1)


@requires_ptxas
def test_rng_and_select_and_scatter_assemble() -> None:
    for text in (_rbg("rng_three_fry", "u64[64,3]", "u64[2]"),
                 SAS.format(t="f32", dir="GE", comb="add", init="0", xs="8,6", ss="4,3",
                            window="size=2x2 stride=2x2"),
                 SAS.format(t="f16", dir="GE", comb="add", init="0", xs="8,6", ss="4,3",
                            window="size=2x2 stride=2x2")):
        for sm in (80, 90):
            assert nvptx.ptxas(compile_text(text, gpu_sm=sm).ptx, sm)[:4] == b"\x7fELF"
