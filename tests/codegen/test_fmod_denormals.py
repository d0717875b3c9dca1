"""`remainder` is exact on every backend, and denormals follow one rule everywhere (issue 11,
item 24).

The rule (docs/cpu.md and docs/gpu.md, "Numerics"): IEEE gradual underflow. Denormal inputs are
used as they are and denormal results are kept, on the CPU, on the GPU (no `.ftz` PTX) and in
the evaluator, as numpy does. XLA:GPU does the same by default (`xla_gpu_ftz=false`); XLA:CPU
flushes denormals to zero while it runs (so jax on CPU gives 0 for `x * 2` of 1e-40).

The GPU cases run in the kernel emulator, which lowers `frem` as LLVM's NVPTX target does
(`x - trunc(x / y) * y` in floating point), so it computes what a GPU would."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.helpers import compile_text
from xlc.backend_cpu import compile_cpu
from xlc.backend_gpu import nvptx
from xlc.hlo.parser import parse_module

NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def special_values(t: str) -> np.ndarray:
    """30 special values of type `t`: signed zeros, denormals, the smallest normal, small and
    large magnitudes, the largest finite, infinities and NaN."""
    dt = NP[t]
    fi = ml_dtypes.finfo(dt) if t == "bf16" else np.finfo(dt)
    vals = [0.0, -0.0, fi.smallest_subnormal, -fi.smallest_subnormal, fi.smallest_subnormal * 7,
            fi.tiny, -fi.tiny / 3, 1e-30, -7.3e-31, 1.1e-30, 0.5, -1.0, 1.0, 1.5, 3.0, -3.0,
            np.pi, 7.0, 1e7, 16777217.0, -1e10, 3.3e15, 1e20, 1e30, float(fi.max),
            -float(fi.max), np.inf, -np.inf, np.nan, 2.5e-38]
    with np.errstate(all="ignore"):
        return np.array(vals, np.float64).astype(dt)


def run(text: str, args: list[np.ndarray], backend: str) -> np.ndarray:
    if backend == "cpu":
        return compile_cpu(parse_module(text)).run(args)[0]
    return Emulator(compile_text(text)).run(args)[0]


def assert_same_bits(got: np.ndarray, want: np.ndarray, what: str, x: np.ndarray,
                     y: np.ndarray | None = None) -> None:
    """Bit-equal (signed zeros included) or both NaN."""
    u = UINT[want.dtype.itemsize]
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    same = (got.view(u) == want.view(u)) | (np.isnan(g64) & np.isnan(w64))
    bad = np.flatnonzero(~same)
    detail = [(x[i], None if y is None else y[i], got[i], want[i]) for i in bad[:5]]
    assert bad.size == 0, f"{what}: {bad.size} of {got.size} wrong, e.g. (x, y, got, want) " \
                          f"{detail}"


@pytest.mark.parametrize("backend", ["cpu", "gpu-emulator"])
@pytest.mark.parametrize("t", ["f32", "f64", "f16", "bf16"])
def test_remainder_of_special_values_is_exact(t: str, backend: str) -> None:
    """Every pair of 30 special values (900): bit-equal to numpy.fmod. On the GPU path f32 gave
    e.g. remainder(3.4e38, 1.1e-30) = -1.8e-08 (fmod: 9.98e-31) and lost the sign of zeros
    (245 of 900 wrong in f32, 241 in f64)."""
    v = special_values(t)
    x, y = np.repeat(v, v.size), np.tile(v, v.size)
    n = x.size
    text = (f"HloModule m\nENTRY e {{\n  a = {t}[{n}] parameter(0)\n  b = {t}[{n}] "
            f"parameter(1)\n  ROOT r = {t}[{n}] remainder(a, b)\n}}\n")
    with np.errstate(all="ignore"):
        want = np.fmod(x.astype(np.float64), y.astype(np.float64)).astype(NP[t]) \
            if t in ("f16", "bf16") else np.fmod(x, y)
    assert_same_bits(run(text, [x, y], backend), want, f"remainder {t} {backend}", x, y)


def test_remainder_with_huge_quotients_is_exact_on_the_gpu_path() -> None:
    """Random f32 pairs whose quotients span the whole exponent range."""
    rng = np.random.default_rng(24)
    x = (rng.standard_normal(2000) * 10.0 ** rng.integers(-38, 38, 2000)).astype(np.float32)
    y = (rng.standard_normal(2000) * 10.0 ** rng.integers(-44, 38, 2000)).astype(np.float32)
    y[y == 0] = 1
    text = ("HloModule m\nENTRY e {\n  a = f32[2000] parameter(0)\n  b = f32[2000] "
            "parameter(1)\n  ROOT r = f32[2000] remainder(a, b)\n}\n")
    assert_same_bits(run(text, [x, y], "gpu-emulator"), np.fmod(x, y), "remainder", x, y)


DENORMAL_OPS = {
    "multiply": ("multiply(a, h)", lambda a: a * a.dtype.type(0.5)),
    "add": ("add(a, a)", lambda a: a + a),
    "divide": ("divide(a, t)", lambda a: a / a.dtype.type(3)),
    "sqrt": ("sqrt(a)", np.sqrt),
    "compare": ("compare(a, z), direction=GT", lambda a: a > 0),
}


@pytest.mark.parametrize("backend", ["cpu", "gpu-emulator"])
@pytest.mark.parametrize("op", sorted(DENORMAL_OPS))
@pytest.mark.parametrize("t", ["f32", "f64"])
def test_denormals_are_kept(t: str, op: str, backend: str) -> None:
    """Denormal inputs are not treated as zero and denormal results are not flushed: the
    results are bit-equal to numpy's (IEEE gradual underflow)."""
    dt = NP[t]
    fi = np.finfo(dt)
    a = np.array([fi.smallest_subnormal, -fi.smallest_subnormal * 5, fi.tiny, fi.tiny / 2,
                  -fi.tiny / 1024, fi.tiny * 3, 1.0, 0.0], dt)
    expr, ref = DENORMAL_OPS[op]
    ot = "pred" if op == "compare" else t
    text = (f"HloModule m\nENTRY e {{\n  a = {t}[8] parameter(0)\n  h = {t}[8] constant({{"
            f"{', '.join(['0.5'] * 8)}}})\n  t = {t}[8] constant({{{', '.join(['3'] * 8)}}})\n"
            f"  z = {t}[8] constant({{{', '.join(['0'] * 8)}}})\n  ROOT r = {ot}[8] {expr}\n}}\n")
    with np.errstate(all="ignore"):
        want = ref(a)
    got = run(text, [a], backend)
    if op == "compare":
        np.testing.assert_array_equal(got, want)
    else:
        assert_same_bits(got, want, f"{op} {t} {backend}", a)


def test_gpu_code_does_not_flush_denormals() -> None:
    """No `.ftz` arithmetic in the PTX (ptxas would flush f32 denormals there)."""
    text = ("HloModule m\nENTRY e {\n  a = f32[64] parameter(0)\n  b = f32[64] parameter(1)\n"
            "  m = f32[64] multiply(a, b)\n  s = f32[64] add(m, a)\n  d = f32[64] divide(s, b)\n"
            "  q = f32[64] sqrt(d)\n  ROOT r = f32[64] remainder(q, b)\n}\n")
    ptx = compile_text(text).ptx
    assert ".ftz" not in ptx
    if nvptx.ptxas_path() is not None:
        assert nvptx.ptxas(ptx)
