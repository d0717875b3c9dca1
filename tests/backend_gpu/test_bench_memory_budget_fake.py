"""tools/bench_memory_budget.py --backend gpu without a GPU: the fake driver (host memory and
the kernel emulator) runs the tiny MLP step (`--small`) unconstrained and under half its peak
(host offload, then rematerialization), and the report is complete. The real figures need a
GPU machine."""
from __future__ import annotations

from typing import Any

import pytest

from tests.backend_gpu.fake_driver import FakeDriver
from tools import bench_memory_budget as bench
from xlc.backend_gpu import cuda


def test_gpu_mode_runs_through_the_runtime(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    drv = FakeDriver(compute_capability=90)
    monkeypatch.setattr(cuda, "_driver", drv)
    monkeypatch.setattr(cuda, "_context", None)
    compile_step = bench._compile

    def compile_and_register(*a: Any, **kw: Any) -> Any:
        compiled = compile_step(*a, **kw)
        drv.add(compiled._exe)  # PTX only: the fake tells programs apart by it
        return compiled

    monkeypatch.setattr(bench, "_compile", compile_and_register)
    assert bench.main(["--backend", "gpu", "--small", "--repeats", "1", "mlp16"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert [r[0] for r in rows] == ["mlp16"]
    for r in rows:
        assert r[3] == "50%" and float(r[9]) == 0.0  # limited run == unconstrained run
    assert drv.launches  # the kernels ran in the emulator
