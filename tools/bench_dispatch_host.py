"""The host side of a GPU call without a GPU: xlc's own per-call time and the driver calls it
makes, measured against a null CUDA driver (every call succeeds at once and does nothing).

Usage: python tools/bench_dispatch_host.py [--reps N] [--json out.json]

For a chain of 1 and 10 kernels (outputs of 1 KiB and 64 MiB) it prints, per call mode
(device-resident asynchronous, with a CUDA graph, numpy in and out):
* `xlc us`: host microseconds per call spent in xlc's Python code (the time per call less the
  null driver's own cost per driver call, calibrated at the start);
* the driver calls of one call in steady state, by name;
* `est. us`: xlc's time plus those calls priced with the per-call costs measured on an H100
  VM (`../shared/reference/gpu-h100.md`: launch with packed parameters 5.5 us, with a tuple
  11.5, graph launch 2.7, event record 2.2, stream synchronise 2.6, context switch 3.0,
  cuMemAlloc + cuMemFree 7.3, a copy ~5): an estimate of the call's host cost on that
  machine, for comparing versions of the runtime without a GPU. `tools/bench_gpu.py`
  measures the real thing on a GPU.
"""
from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from xlc.backend_gpu import compile_gpu, cuda  # noqa: E402
from xlc.hlo.parser import parse_module  # noqa: E402
from xlc.options import CompileOptions  # noqa: E402

COST_US = {"cuLaunchKernel": 5.5, "cuGraphLaunch": 2.7, "cuEventRecord": 2.2,
           "cuStreamSynchronize": 2.6, "cuEventSynchronize": 2.6, "cuCtxSetCurrent": 3.0,
           "cuMemAlloc": 3.65, "cuMemFree": 3.65, "cuMemcpyHtoDAsync": 5.0,
           "cuMemcpyDtoHAsync": 5.0, "cuMemcpyDtoDAsync": 5.0, "cuStreamWaitEvent": 1.0,
           "cuGraphExecKernelNodeSetParams": 1.0}
"""Host microseconds per driver call on the H100 VM (gpu-h100.md; copies and graph-node
updates estimated)."""
TUPLE_LAUNCH_US = 11.5
"""A launch whose kernelParams are a tuple of ctypes values (built per call)."""


class _Enum:
    def __getattr__(self, name: str) -> int:
        return 0


class NullDriver:
    """A CUDA driver where every call succeeds at once: handles are counters, memory is
    never touched (allocations return distinct 256-byte aligned addresses)."""

    CUresult = type("CUresult", (), {"CUDA_SUCCESS": 0})
    CUstream_flags = CUevent_flags = CUstreamCaptureMode = CUgraphNodeType = _Enum()
    CUdevice_attribute = type("A", (), {"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR": 1,
                                        "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR": 2})

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.tuple_launches = 0
        self.arity: dict[Any, int] = {}
        """Kernel function -> its argument count (for reading packed parameters)."""
        self._next = itertools.count(1 << 32, 1 << 28)
        self._graph: list[tuple[Any, tuple[int, ...]]] = []
        self._capturing = False
        self._keep: Any = None
        self._calls: dict[str, Any] = {
            "cuDeviceGetCount": lambda: (0, 1),
            "cuDeviceGetAttribute": lambda attr, dev: (0, 9 if attr == 1 else 0),
            "cuLaunchKernel": self._launch,
            "cuStreamBeginCapture": self._begin,
            "cuStreamEndCapture": self._end,
            "cuGraphGetNodes": lambda g, n: (0, list(range(len(self._graph)))[:n],
                                             len(self._graph)),
            "cuGraphNodeGetType": lambda node: (0, 0),   # every captured node is a kernel
            "cuGraphKernelNodeGetParams": self._node_params}
        """The calls that answer something particular; the others return a fresh handle."""

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("cu"):
            raise AttributeError(name)
        self.calls[name] += 1
        return self._calls.get(name) or (lambda *a: (0, next(self._next)))

    def _launch(self, f: Any, *a: Any) -> tuple[int]:
        params = a[-2]
        if not isinstance(params, int):
            self.tuple_launches += 1
        if self._capturing:
            n = self.arity.get(f, 0)
            if isinstance(params, int):
                slots = (ctypes.c_void_p * max(1, n)).from_address(params)
                args = tuple(ctypes.c_uint64.from_address(slots[i] or 0).value
                             for i in range(n))
            else:
                args = tuple(params[0])
            self._graph.append((f, args))
        return (0,)

    def _begin(self, s: Any, mode: Any) -> tuple[int]:
        self._capturing, self._graph = True, []
        return (0,)

    def _end(self, s: Any) -> tuple[int, Any]:
        self._capturing = False
        return (0, "graph")

    def _node_params(self, node: int) -> tuple[int, Any]:
        f, args = self._graph[node]
        values = (ctypes.c_uint64 * max(1, len(args)))(*args)
        slots = (ctypes.c_void_p * max(1, len(args)))(
            *[ctypes.addressof(values) + 8 * i for i in range(max(1, len(args)))])
        self._keep = (values, slots)
        return (0, type("P", (), {"func": f, "kernelParams": ctypes.addressof(slots)})())


def chain(n: int, kernels: int) -> str:
    """`kernels` dependent doublings of f32[n] (one kernel each without fusion)."""
    lines = ["HloModule chain", "ENTRY e {", f"  v0 = f32[{n}] parameter(0)"]
    for k in range(1, kernels + 1):
        lines.append(f"  {'ROOT ' if k == kernels else ''}v{k} = f32[{n}] add(v{k - 1}, "
                     f"v{k - 1})")
    return "\n".join(lines + ["}", ""])


def null_call_s(drv: NullDriver, n: int = 20000) -> float:
    """Seconds one null driver call costs (what `measure` takes off per driver call)."""
    args = (None, 1, 1, 1, 32, 1, 1, 0, None, 0, 0)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            drv.cuLaunchKernel(*args)
        best = min(best, (time.perf_counter() - t0) / n)
    drv.calls["cuLaunchKernel"] -= 3 * n
    drv.tuple_launches -= 3 * n
    return best


def measure(drv: NullDriver, call: Any, reps: int) -> tuple[float, dict[str, float], float]:
    """(host s per call, driver calls per call in steady state (averaged over 16 calls: some
    are made once per group of calls), tuple launches per call)."""
    for _ in range(16):
        call()
    before, tuples = Counter(drv.calls), drv.tuple_launches
    for _ in range(16):
        call()
    per_call = {k: v / 16 for k, v in (drv.calls - before).items()}
    one_tuples = (drv.tuple_launches - tuples) / 16
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            call()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best, per_call, one_tuples


def estimate_us(host_s: float, calls: dict[str, float], tuples: float) -> float:
    """xlc's host time plus the driver calls priced at COST_US."""
    us = 1e6 * host_s
    for name, n in calls.items():
        us += n * COST_US.get(name, 0.5)
    return us + tuples * (TUPLE_LAUNCH_US - COST_US["cuLaunchKernel"])


def _rows(drv: NullDriver, exe: Any, n: int, kernels: int, nbytes: int,
          reps: int, null_s: float) -> list[dict[str, Any]]:
    host = np.ones(n, np.float32)
    dx = cuda.to_device(host)
    modes = {"device": lambda: exe.run_on_device([dx]),
             "graph": lambda: exe.run_on_device([dx], graph=True)}
    if nbytes <= 1 << 20:
        modes["numpy"] = lambda: exe.run([host])
    rt = exe.runtime()
    drv.arity = {rt.functions[t.kernel]: len(t.args)
                 for t in exe.all_thunks() if hasattr(t, "kernel")}
    rows = []
    for mode, call in modes.items():
        host_s, one, tuples = measure(drv, call, reps)
        host_s = max(0.0, host_s - null_s * sum(one.values()))
        est = estimate_us(host_s, one, tuples)
        text = ", ".join(f"{k.removeprefix('cu')} {v:g}" for k, v in sorted(one.items()))
        size = f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"
        print(f"{kernels:>7}{size:>9}  {mode:<8}{1e6 * host_s:>8.1f}{est:>9.1f}  {text}")
        rows.append({"kernels": kernels, "bytes": nbytes, "mode": mode,
                     "xlc_us": 1e6 * host_s, "estimate_us": est, "calls": dict(one)})
    return rows


def main(argv: list[str] | None = None) -> int:
    """Measure and print the table (and write --json)."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    drv = NullDriver()
    cuda._driver, cuda._context = drv, None
    rows = []
    null_s = null_call_s(drv)
    print(f"null driver call: {1e6 * null_s:.2f} us (taken off xlc's time per driver call)")
    print(f"{'kernels':>7}{'output':>9}  {'mode':<8}{'xlc us':>8}{'est. us':>9}  driver calls")
    for kernels in (1, 10):
        for nbytes in (1 << 10, 64 << 20):
            n = nbytes // 4
            exe = compile_gpu(parse_module(chain(n, kernels)),
                              CompileOptions(backend="gpu", gpu_sm=90, fusion=False))
            rows += _rows(drv, exe, n, kernels, nbytes, args.reps, null_s)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
