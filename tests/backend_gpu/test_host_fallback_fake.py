"""Every program runs on the GPU backend (issue 14): an instruction without GPU code runs on the
host through the evaluator inside the same executable (host_fallback.py), with one warning per
program; the defaults pick the device's own architecture and `backend="auto"` the GPU when one
is usable. Run on the fake driver and checked against the evaluator."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import xlc
from tests.backend_gpu.fake_driver import FakeDriver, use
from tests.backend_gpu.helpers import compile_text
from xlc.backend_gpu import cuda
from xlc.backend_gpu.backend import GpuBackend
from xlc.backend_gpu.thunks import HostCallThunk, KernelThunk
from xlc.errors import CustomCallError, UnsupportedOpError
from xlc.hlo.evaluator import evaluate
from xlc.hlo.parser import parse_module
from xlc.options import CompileOptions

RNG = np.random.default_rng(41)

MIXED = """
HloModule mixed
ENTRY e {
  a = c64[4,4] parameter(0)
  b = c64[4,4] parameter(1)
  x = f32[4] parameter(2)
  d = c64[4,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  f = c64[4,4] fft(d), fft_type=FFT, fft_length={4}
  r = f32[4,4] real(f)
  xb = f32[4,4] broadcast(x), dimensions={1}
  s = f32[4,4] add(r, xb)
  ROOT t = f32[4,4] tanh(s)
}
"""
"""An FFT (no GPU code) between kernels that have it (the complex dot becomes four real
GEMMs: complex_dot.py)."""

CEXP = """
HloModule cexp
ENTRY e {
  a = c64[8] parameter(0)
  b = c64[8] exponential(a)
  ROOT c = c64[8] multiply(b, a)
}
"""
"""A fusion of a complex exponential: the whole fusion runs on the host."""


def _complex(*shape: int) -> np.ndarray:
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(np.complex64)


def test_instructions_without_gpu_code_run_on_the_host(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="xlc.backend_gpu"):
        exe = compile_text(MIXED)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["mixed: 1 instruction(s) run on the host (no GPU code): f: GPU backend "
                        "cannot compile 'fft' (f): FFT is not implemented by the GPU backend "
                        "(XLA calls cuFFT; the interpreter backend runs it)"]
    kinds = [t.kind for t in exe.all_thunks()]
    assert kinds.count("host_call") == 1 and kinds.count("kernel") >= 5  # dots, tanh
    use(fake, exe, monkeypatch)
    args = [_complex(4, 4), _complex(4, 4), RNG.standard_normal(4).astype(np.float32)]
    want = evaluate(parse_module(MIXED), args)
    for _ in range(2):
        (got,) = exe.run(args)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_fusion_that_fails_to_compile_leaves_no_kernel_behind(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_text(CEXP)
    (host,) = [t for t in exe.all_thunks() if isinstance(t, HostCallThunk)]
    assert not [t for t in exe.all_thunks() if isinstance(t, KernelThunk)]
    assert exe.kernel_names == [] and ".entry" not in exe.ptx
    assert '"opcode": "fusion"' in host.desc
    use(fake, exe, monkeypatch)
    a = _complex(8)
    (got,) = exe.run([a])
    np.testing.assert_allclose(got, np.exp(a) * a, rtol=1e-5)


def test_without_the_fallback_the_compile_fails_naming_the_instruction() -> None:
    with pytest.raises(UnsupportedOpError, match=r"^GPU backend cannot compile 'fft' \(f\): FFT "
                                                 r"is not implemented by the GPU backend"):
        compile_text(MIXED, gpu_host_fallback=False)


def test_a_failing_host_instruction_names_itself(fake: list[FakeDriver],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from xlc.hlo import host_calls

    exe = compile_text(CEXP)
    use(fake, exe, monkeypatch)

    def broken(*_a: object) -> None:
        raise ValueError("no numpy today")
    monkeypatch.setattr(host_calls, "_standalone", broken)
    with pytest.raises(CustomCallError, match=r"^'fusion' \(\S+\), run on the host, failed: "
                                              r"ValueError: no numpy today$"):
        exe.run([_complex(8)])


def test_jit_programs_with_complex_transcendentals_run_on_the_gpu_backend(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    import xlc.numpy as xnp

    f = xlc.jit(lambda a, w: xnp.abs(xnp.exp(a)) @ w, backend="gpu")
    a = _complex(4, 6)
    w = RNG.standard_normal((6, 3)).astype(np.float32)
    compiled = f.lower(a, w).compile()
    kinds = [t.kind for t in compiled.executable().all_thunks()]
    assert "host_call" in kinds and "kernel" in kinds
    use(fake, compiled.executable(), monkeypatch)
    np.testing.assert_allclose(compiled(a, w), np.abs(np.exp(a)) @ w, rtol=1e-4, atol=1e-4)


# ---- defaults ---------------------------------------------------------------------------------
def _no_device(monkeypatch: pytest.MonkeyPatch) -> None:
    drv = FakeDriver()
    monkeypatch.setattr(drv, "cuDeviceGetCount", lambda: (0, 0))
    monkeypatch.setattr(cuda, "_driver", drv)
    monkeypatch.setattr(cuda, "_context", None)


def test_code_targets_the_devices_own_architecture(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "HloModule m\nENTRY e {\n  a = f32[4] parameter(0)\n  ROOT r = f32[4] negate(a)\n}\n"
    monkeypatch.setattr(cuda, "_driver", FakeDriver(compute_capability=90))
    monkeypatch.setattr(cuda, "_context", None)
    exe = compile_text(text)
    assert exe.sm == 90 and ".target sm_90" in exe.ptx
    assert compile_text(text, gpu_sm=80).sm == 80            # an explicit target stays
    assert GpuBackend().target(CompileOptions(backend="gpu")) == {"gpu_sm": 90}
    assert GpuBackend().target(CompileOptions(backend="gpu", gpu_sm=86)) == {}
    _no_device(monkeypatch)
    assert compile_text(text).sm == 80                       # no GPU here: sm_80


def test_auto_picks_the_gpu_when_one_is_usable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda, "_driver", FakeDriver(compute_capability=90))
    monkeypatch.setattr(cuda, "_context", None)
    assert xlc.jit(lambda x: x + 1, backend="auto").backend == "gpu"
    assert xlc.compile("HloModule m\nENTRY e {\n  ROOT a = f32[2] parameter(0)\n}\n",
                       backend="auto").backend == "gpu"
    _no_device(monkeypatch)
    f = xlc.jit(lambda x: x + 1, backend="auto")
    assert f.backend == "cpu"
    np.testing.assert_array_equal(f(np.ones(3, np.float32)), np.full(3, 2, np.float32))


def test_kernels_emitted_after_a_fallback_keep_a_valid_module(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    # the exponential's kernel was half built (annotated, intrinsics declared) when it failed;
    # the abs kernel after it must get fresh names and metadata (LLVM verifies the module)
    text = ("HloModule m\nENTRY e {\n  p0 = c128[4] parameter(0)\n"
            "  v4 = c128[4] exponential(p0)\n  v5 = f64[4] abs(v4)\n"
            "  ROOT out = (c128[4], f64[4]) tuple(v4, v5)\n}\n")
    exe = compile_text(text, fusion=False)
    assert [t.kind for t in exe.all_thunks()] == ["sequential", "host_call", "kernel"]
    use(fake, exe, monkeypatch)
    a = _complex(4).astype(np.complex128)
    e, m = exe.run([a])
    np.testing.assert_allclose(e, np.exp(a), rtol=1e-12)
    np.testing.assert_allclose(m, np.abs(np.exp(a)), rtol=1e-12)


def test_a_host_instruction_travels_in_an_executable_file(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    from pathlib import Path

    text = ("HloModule m\nENTRY e {\n  a = c64[8] parameter(0)\n"
            "  f = c64[8] fft(a), fft_type=FFT, fft_length={8}\n  ROOT r = c64[8] negate(f)\n}\n")
    path = Path(str(tmp_path)) / "fft.xlc"
    compiled = xlc.compile(text, backend="gpu", options=CompileOptions(backend="gpu",
                                                                        gpu_sm=80))
    compiled.serialize(str(path))
    loaded = xlc.load(str(path))   # another process would read the same descriptor
    assert [t.kind for t in loaded.executable().all_thunks()] == ["sequential", "host_call",
                                                                  "kernel"]
    # the fake emulates the kernels from the compiled executable's LLVM IR (a loaded one has
    # only PTX and cubin), which the loaded one's image matches
    use(fake, compiled.executable(), monkeypatch)
    a = _complex(8)
    np.testing.assert_allclose(loaded(a), -np.fft.fft(a), rtol=1e-5, atol=1e-5)
