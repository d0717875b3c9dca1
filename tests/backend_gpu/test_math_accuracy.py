"""Accuracy of the transcendentals as the GPU backend compiles them: each function as an HLO
elementwise op, compiled to NVPTX (the shared elemental emitter and xlc.codegen.math; no
libdevice, no approximate PTX instructions), checked against numpy in ulps with the limits of
the CPU tests (tests/codegen/test_math.py: random bit patterns over the whole range, dense
in-domain samples, special values).

Device-free through the emulator, which runs the same NVPTX IR on the host: LLVM's NVPTX
target emits `.rn` arithmetic (ptxas does not contract it into FMAs), so the host executes the
same operations. The `gpu` variants run the kernels on the device."""
from __future__ import annotations

import numpy as np
import pytest

from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.helpers import compile_text
from tests.codegen.test_math import (
    DOMAIN,
    MAX_ULP,
    TRIG_LIMIT,
    _binary_samples,
    _reference,
    _samples,
    ulp_error,
)
from xlc.backend_gpu.executable import GpuExecutable
from xlc.errors import XlcError

OPCODE = {"exp": "exponential", "expm1": "exponential-minus-one", "log": "log",
          "log1p": "log-plus-one", "tanh": "tanh", "logistic": "logistic", "erf": "erf",
          "sin": "sine", "cos": "cosine", "tan": "tan", "sqrt": "sqrt", "rsqrt": "rsqrt",
          "cbrt": "cbrt", "pow": "power", "atan2": "atan2"}
BINARY = ("pow", "atan2")


def _gpu_available() -> bool:
    try:
        from xlc.backend_gpu.cuda import primary_context

        primary_context()
    except XlcError:
        return False
    return True


RUNNERS = ["emulator", pytest.param("gpu", marks=[
    pytest.mark.gpu, pytest.mark.skipif(not _gpu_available(),
                                        reason="no CUDA device available (GPU + cuda-python)")])]


def _run(exe: GpuExecutable, runner: str, args: list[np.ndarray]) -> np.ndarray:
    if runner == "gpu":
        return exe.run(args)[0]
    return Emulator(exe).run(args)[0]


def _module(name: str, t: str, n: int) -> str:
    params = [f"  a = {t}[{n}] parameter(0)"]
    if name in BINARY:
        params.append(f"  b = {t}[{n}] parameter(1)")
    ops = "a, b" if name in BINARY else "a"
    return "\n".join(["HloModule m", "ENTRY e {", *params,
                      f"  ROOT r = {t}[{n}] {OPCODE[name]}({ops})", "}", ""])


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(OPCODE))
def test_transcendental_accuracy_on_the_gpu_path(name: str, dt: type, runner: str) -> None:
    t = "f32" if dt == np.float32 else "f64"
    limit = MAX_ULP[name][0 if dt == np.float32 else 1]
    if name in BINARY:
        x, y = _binary_samples(dt, name)
        args = [y, x] if name == "atan2" else [x, y]
    else:
        args = [_samples(dt, *DOMAIN[name])]
    exe = compile_text(_module(name, t, args[0].size))
    got = _run(exe, runner, args)
    ref = _reference(name, args, dt)
    check = np.ones(got.shape, bool)
    x = args[0]
    if name in ("sin", "cos", "tan"):
        check = np.abs(x) <= TRIG_LIMIT[dt]
        assert np.all(np.isnan(got[~np.isfinite(x)]))
    err = ulp_error(got[check], ref[check], dt)
    if limit is None:  # f64 pow: relative error ~(4 + 2 |y ln x|) ulp (see test_math.py)
        with np.errstate(all="ignore"):
            bound = 4 + 2 * np.abs(args[1].astype(np.longdouble) *
                                   np.log(np.abs(args[0].astype(np.longdouble))))
        bound = np.where(np.isfinite(bound), bound, 4)[check]
    else:
        bound = np.full(err.shape, limit)
    worst = int(np.argmax(err - bound))
    assert np.all(err <= bound), (
        f"{name} {t} ({runner}): {err[worst]:.2f} ulp at {[a[check][worst] for a in args]} "
        f"got {got[check][worst]!r} want {ref[check][worst]!r}")


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_half_precision_transcendentals_round_once(t: str, runner: str) -> None:
    """f16/bf16 compute in f32 and round once: every result is the correctly rounded value or
    one of its two neighbours (dense in-domain samples)."""
    import ml_dtypes

    dt = np.dtype(np.float16) if t == "f16" else np.dtype(ml_dtypes.bfloat16)
    rng = np.random.default_rng(3)
    for name in ("exp", "expm1", "log", "tanh", "logistic", "sin", "cos", "sqrt", "rsqrt", "erf"):
        lo, hi = DOMAIN[name]
        if name in ("exp", "expm1"):
            lo, hi = -10, 10
        if name in ("log", "sqrt", "rsqrt"):
            lo = 1e-3
        x = rng.uniform(lo, hi, 4096).astype(dt)
        got = _run(compile_text(_module(name, t, x.size)), runner, [x])
        want = _reference(name, [x.astype(np.float32)], np.float32).astype(np.float64)
        steps = np.abs(got.view(np.int16).astype(np.int32) -
                       want.astype(dt).view(np.int16).astype(np.int32))
        worst = int(np.argmax(steps))
        assert steps.max() <= 1, (f"{name} {t}: {steps.max()} ulp from the rounded value at "
                                  f"x={x[worst]!r}: got {got[worst]!r}, want {want[worst]!r}")
