"""tools/bench_gpu.py: without a GPU it exits 1 and says why; with the fake driver (host memory +
the kernel emulator, tiny stand-in programs) every measurement runs and the report is complete.
The real figures need a GPU machine (see docs/gpu.md)."""
from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tests.backend_gpu.fake_driver import FakeDriver
from tests.backend_gpu.helpers import gpu_available, load_tool
from xlc.backend_gpu import compile_gpu, cuda
from xlc.hlo.parser import parse_module
from xlc.options import CompileOptions


def _bench() -> ModuleType:
    return load_tool("bench_gpu")


@pytest.mark.skipif(gpu_available(), reason="a GPU is available here")
def test_without_a_gpu_the_benchmark_fails_clearly(capsys: pytest.CaptureFixture[str]) -> None:
    assert _bench().main(["--reps", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bench_gpu: no CUDA device available: ")
    assert "this benchmark needs an NVIDIA GPU and cuda-python" in err


PROGRAMS = {
    "chain": ("HloModule chain\nENTRY e {\n  a = f32[64,32] parameter(0)\n"
              "  b = f32[64,32] parameter(1)\n  m = f32[64,32] multiply(a, b)\n"
              "  ROOT t = f32[64,32] tanh(m)\n}\n", [(64, 32), (64, 32)], 2048.0),
    "gemm": ("HloModule gemm\nENTRY e {\n  a = f32[16,16] parameter(0)\n"
             "  b = f32[16,16] parameter(1)\n  ROOT d = f32[16,16] dot(a, b), "
             "lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n", [(16, 16), (16, 16)],
             2.0 * 16 ** 3),
}


def test_every_measurement_runs_through_the_runtime(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    drv = FakeDriver(compute_capability=90)
    monkeypatch.setattr(cuda, "_driver", drv)
    monkeypatch.setattr(cuda, "_context", None)

    def compile_and_register(module: Any, options: CompileOptions, **kw: Any) -> Any:
        exe = compile_gpu(module, options)  # PTX only: the fake tells programs apart by it
        drv.add(exe)
        return exe

    def compile_case(name: str, sm: int, **kw: Any) -> tuple[Any, Any]:
        text, shapes, flops = PROGRAMS[name]
        rng = np.random.default_rng(0)
        case = SimpleNamespace(inputs=[rng.standard_normal(s).astype(np.float32)
                                       for s in shapes],
                               meta={"cost_analysis": {"flops": flops}})
        return compile_and_register(parse_module(text), CompileOptions(backend="gpu",
                                                                       gpu_sm=sm)), case

    monkeypatch.setattr(bench, "compile_gpu", compile_and_register)
    monkeypatch.setattr(bench, "compile_case", compile_case)
    monkeypatch.setattr(bench, "BANDWIDTH_CASES", ("chain",))
    monkeypatch.setattr(bench, "GEMM_CASES", ("gemm",))
    monkeypatch.setattr(bench, "DISPATCH_SIZES", (1 << 10, 1 << 12))
    out = tmp_path / "bench.json"
    assert bench.main(["--reps", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["device_sm"] == 90 and report["sm"] == 90
    chain, gemm = report["cases"]["chain"], report["cases"]["gemm"]
    assert chain["bytes"] == 3 * 64 * 32 * 4 and chain["fraction_of_d2d"] > 0
    assert gemm["gflops"] > 0 and gemm["cublas"] is None
    assert set(report["overhead_s"]) == {"host", "host_graph", "device"}
    assert drv.graph_launches >= 1  # the graph variant replayed a captured schedule
    rows = report["dispatch"]
    assert [(r["kernels"], r["bytes"]) for r in rows] == [(1, 1024), (1, 4096), (10, 1024),
                                                          (10, 4096)]
    for r in rows:
        assert all(r[k] > 0 for k in ("queued_s", "graph_queued_s", "waited_s", "numpy_s"))
        assert r["jax_queued_s"] is None   # no JAX GPU backend here
    out_text = capsys.readouterr().out
    assert "dispatch, us per call" in out_text
