"""The huge-argument path of sin/cos/tan runs only when some lane needs it
(`xlc.codegen.trig_guard`, issue 11 item 21's follow-up): a vectorised loop branches around
the Payne-Hanek reduction on an or-reduction of its lanes' compare (before, every element paid
for it: unbounded f32 sin 1.93 vs 0.67 ns/element, f64 7.5 vs 1.3), and vectors with a single
huge lane among small ones (or NaN/inf lanes) still get every lane right, on CPU (scalar loops
vectorised by LLVM, explicit 512-bit vectors) and in GPU kernels (PTX through ptxas, the
emulator), against numpy in float64 (f32) / long double (f64)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from llvmlite import ir

from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.helpers import compile_text, requires_ptxas
from tests.codegen.kernel_helpers import KernelModule
from tests.codegen.test_math import MAX_ULP, ulp_error
from xlc.backend_gpu import nvptx
from xlc.codegen import trig_reduction as tr
from xlc.hlo.shape import PrimitiveType as P

NAMES = ("sin", "cos", "tan")


@pytest.fixture(scope="module", params=[0, 512], ids=["scalar", "vector512"])
def trig(request: pytest.FixtureRequest) -> KernelModule:
    from xlc.codegen import math as xm

    km = KernelModule("trig_guard", vector_bits=request.param)
    for name in NAMES:
        for pt in (P.F32, P.F64):
            km.add(f"{name}_{pt.text}", [pt], pt, lambda b, v, n=name: getattr(xm, n)(b, v[0]))
    km.compile()
    return km


def _mixed(dt: type, n_blocks: int = 64) -> np.ndarray:
    """Blocks of 16 small arguments; block j has one huge argument in lane j % 16 (j < 48),
    then blocks with a NaN or inf lane, and all-small blocks; a tail that is no whole vector
    (the loops' scalar remainder) with one huge argument."""
    rng = np.random.default_rng(7)
    top = 38 if dt == np.float32 else 307
    x = rng.uniform(-100, 100, (n_blocks, 16))
    huge = 10.0 ** rng.uniform(10, top, n_blocks) * rng.choice([-1.0, 1.0], n_blocks)
    for j in range(48):
        x[j, j % 16] = huge[j]
    x[48, 3], x[49, 15], x[50, 0] = np.nan, np.inf, -np.inf
    x[51, 5], x[51, 6] = np.inf, huge[51]
    tail = rng.uniform(-100, 100, 7)
    tail[4] = huge[-1]
    return np.concatenate([x.ravel(), tail]).astype(dt)


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", NAMES)
def test_one_huge_lane_among_small_ones(trig: KernelModule, name: str, dt: type) -> None:
    x = _mixed(dt)
    got = trig(f"{name}_{'f32' if dt == np.float32 else 'f64'}", x)
    hp = x.astype(np.float64 if dt == np.float32 else np.longdouble)
    with np.errstate(invalid="ignore"):
        ref = getattr(np, name)(hp).astype(np.longdouble)
    err = ulp_error(got, ref, dt)
    worst = int(np.argmax(err))
    assert err.max() <= MAX_ULP[name][0 if dt == np.float32 else 1], (
        f"{name}: {err.max():.2f} ulp at element {worst}, x={x[worst]!r}: got {got[worst]!r}, "
        f"want {ref[worst]!r}")


@pytest.mark.parametrize("tag", ["f32", "f64"])
def test_vectorised_loop_branches_around_the_huge_reduction(trig: KernelModule,
                                                            tag: str) -> None:
    """The optimised loop of a scalar-element sin (what the CPU backend emits) or-reduces the
    vector compare (a bitcast of the <n x i1> mask to an integer) and calls the out-of-line
    huge form behind that branch; the 2/pi chunks are not in the loop itself."""
    if trig.vector_bits:
        pytest.skip("checked on the loop LLVM vectorises")
    sym = trig.kernels[f"sin_{tag}"][0]
    loop = str(trig.ref.get_function(sym))
    masks = re.findall(r"= bitcast <(\d+) x i1> %[\w.]+ to i(\d+)", loop)
    assert masks and all(a == b for a, b in masks), loop[:2000]
    assert re.search(rf"call fastcc <\d+ x (float|double)> @\"?xlc\.sin_huge\.{tag}x", loop)
    branches = [ln for ln in loop.splitlines() if re.match(r"\s*br i1 .*!prof", ln)]
    assert len(branches) >= len(masks)
    assert "fmul <" in loop and "@llvm.rint" in loop  # the vector Cody-Waite path is inline
    chunk = ir.Constant(ir.DoubleType(), tr.CHUNKS[1]).get_reference().upper()[2:]
    assert chunk in str(trig.ref) and chunk not in loop
    assert "xlc.two_over_pi.f64" not in loop


def _gpu_module(name: str, t: str, n: int, bounded: bool) -> str:
    src = ([f"  p = s16[{n}] parameter(0)", f"  a = {t}[{n}] convert(p)"] if bounded
           else [f"  a = {t}[{n}] parameter(0)"])
    op = {"sin": "sine", "cos": "cosine", "tan": "tan"}[name]
    return "\n".join(["HloModule m", "ENTRY e {", *src,
                      f"  ROOT r = {t}[{n}] {op}(a)", "}", ""])


@requires_ptxas
@pytest.mark.parametrize("t", ["f32", "f64"])
def test_gpu_kernel_branches_around_the_huge_reduction(t: str) -> None:
    """On the GPU each thread branches (the warp diverges only where some thread needs the
    huge path): the unbounded kernel has more conditional branches than one whose argument
    value ranges bound; its PTX assembles, and the emulator gets mixed warps right."""
    dt = np.float32 if t == "f32" else np.float64
    x = _mixed(dt)
    exe = compile_text(_gpu_module("sin", t, x.size, bounded=False))
    small = compile_text(_gpu_module("sin", t, x.size, bounded=True))
    assert len(re.findall(r"@%p\d+ bra", exe.ptx)) > len(re.findall(r"@%p\d+ bra", small.ptx))
    assert nvptx.ptxas(exe.ptx, 80)[:4] == b"\x7fELF"
    got = Emulator(exe).run([x])[0]
    with np.errstate(invalid="ignore"):
        ref = np.sin(x.astype(np.float64 if dt == np.float32 else np.longdouble))
    err = ulp_error(got, ref.astype(np.longdouble), dt)
    assert err.max() <= MAX_ULP["sin"][0 if t == "f32" else 1], x[int(np.argmax(err))]
