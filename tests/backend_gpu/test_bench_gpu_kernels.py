"""tools/bench_gpu_kernels.py (issue 13's kernel table): without a GPU it exits 1 and says why;
on the timed fake driver (virtual clock, kernels in the emulator) every kind of row runs and
is timed by CUDA events on the calling thread's stream. The real figures need a GPU."""
from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tests.backend_gpu.fake_driver import OP_NS, TimedFakeDriver
from tests.backend_gpu.helpers import gpu_available, load_tool
from xlc.backend_gpu import cuda


def _bench() -> ModuleType:
    return load_tool("bench_gpu_kernels")


@pytest.mark.skipif(gpu_available(), reason="a GPU is available here")
def test_without_a_gpu_it_fails_clearly(capsys: pytest.CaptureFixture[str]) -> None:
    assert _bench().main(["--reps", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bench_gpu_kernels: no CUDA device available: ")
    assert "needs an NVIDIA GPU and cuda-python" in err


def test_the_rows_are_timed_by_events(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    drv = TimedFakeDriver(compute_capability=80)
    monkeypatch.setattr(cuda, "_driver", drv)
    monkeypatch.setattr(cuda, "_context", None)
    original = bench.compile_case

    def compile_and_register(case: Any, sm: int | None) -> Any:
        exe = original(case, sm)
        drv.add(exe)
        return exe

    x = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
    rows = [bench.Case("softmax tiny", "bandwidth", bench.bandwidth_cases(1)[1].fn, [x]),
            bench.Case("gemm f32 tf32 16x32x16", "gemm", bench._matmul, [x, x.T.copy()],
                       "default", 2.0 * 16 * 32 * 16, (16, 32, 16, "f32 tf32"))]
    monkeypatch.setattr(bench, "compile_case", compile_and_register)
    monkeypatch.setattr(bench, "cases", lambda quick: rows)
    out = tmp_path / "k.json"
    assert bench.main(["--reps", "3", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    soft, gemm = report["rows"]
    # one kernel per call on the virtual clock: 3 launches between the events
    assert soft["kernels"] == 1 and soft["time_s"] == pytest.approx(OP_NS["launch"] / 1e9)
    assert soft["bytes"] == 2 * x.nbytes and 0 < soft["fraction_of_copy"]
    assert gemm["tflops"] > 0 and gemm["cublas_time_s"] is None and gemm["jax_time_s"] is None
    text = capsys.readouterr().out
    assert "CUDA events" in text and "softmax tiny" in text and "% of copy" in text
