"""tools/bench_dispatch_host.py: a GPU call's host side against a null driver. The table lists
the driver calls of one steady-state call, so the benchmark itself checks what the fake-driver
tests check: one launch and one event record for a device-resident one-kernel call."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import bench_dispatch_host as bench
from xlc.backend_gpu import cuda, launch


def test_the_table_counts_the_driver_calls_of_a_call(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cuda, "_driver", None)   # restored after the tool installs its own
    monkeypatch.setattr(cuda, "_context", None)
    out = tmp_path / "rows.json"
    assert bench.main(["--reps", "5", "--json", str(out)]) == 0
    rows = {(r["kernels"], r["bytes"], r["mode"]): r for r in json.loads(out.read_text())}
    # per call: the launches, one event record per group of calls and, as the null device is
    # never behind, one wait per half ring of groups (back-pressure on an event that is done)
    group = 1 / launch.GROUP
    half_ring = 1 / (launch.MAX_IN_FLIGHT // 2)
    for key, launches in (((1, 1024, "device"), 1), ((10, 64 << 20, "device"), 10)):
        assert rows[key]["calls"] == {"cuLaunchKernel": launches, "cuEventRecord": group,
                                      "cuEventSynchronize": half_ring}
    graph = rows[(10, 1024, "graph")]["calls"]
    assert graph["cuGraphLaunch"] == 1 and "cuLaunchKernel" not in graph
    assert "cuMemAlloc" not in rows[(1, 64 << 20, "device")]["calls"]
    for r in rows.values():
        assert r["estimate_us"] > r["xlc_us"] > 0
    assert "driver calls" in capsys.readouterr().out
