"""Benchmark the GPU backend (needs an NVIDIA GPU and cuda-python; run it on a GPU machine).

Usage: python tools/bench_gpu.py [--reps N] [--sm XX] [--json out.json]

Prints, measured side by side in one run (medians of `--reps` calls after one warm-up call):
* `bench_elementwise_chain` and `bench_softmax` with inputs and outputs on the device: time per
  call, effective bandwidth (input + output bytes / time) and that bandwidth as a fraction of a
  device-to-device copy moving the same number of bytes (the goal is >= 90%);
* `bench_matmul` (f32 1024^3) and `bench_mlp`: GFLOP/s, next to cuBLAS through torch or cupy
  when importable (SGEMM of the same size);
* per-call overhead of a tiny function, host arrays in and out, with and without CUDA graph
  replay (and with device-resident arguments);
* dispatch: host time per call of a chain of 1 or 10 kernels whose output is 1 KiB to
  256 MiB, device-resident (asynchronous calls queued back to back, none waiting), with and
  without a CUDA graph, next to the same call waited for, numpy in and out, and JAX's
  dispatch of the same chain (`jax.jit`, device arrays) in the same run;
* JAX times of the same corpus programs (their StableHLO, compiled by jaxlib for the GPU) when
  jax with a CUDA backend is importable.
The architecture defaults to the device's (`--sm` overrides it). Without a GPU or cuda-python
it exits with status 1 and says why.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(CORPUS))

from xlc.backend_gpu import compile_gpu  # noqa: E402
from xlc.backend_gpu.executable import GpuExecutable  # noqa: E402
from xlc.backend_gpu.runtime import (  # noqa: E402
    check,
    compute_capability,
    device_alloc,
    device_free,
    driver,
    to_device,
)
from xlc.errors import XlcError  # noqa: E402
from xlc.hlo.parser import parse_module  # noqa: E402
from xlc.options import CompileOptions  # noqa: E402

BANDWIDTH_CASES = ("bench_elementwise_chain", "bench_softmax")
GEMM_CASES = ("bench_matmul", "bench_mlp")


def median_time(fn: Callable[[], object], reps: int) -> float:
    """Median seconds of `fn()` over `reps` calls after one warm-up call (fn synchronises)."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def d2d_copy_time(nbytes: int, reps: int) -> float:
    """Median time of one device-to-device copy of `nbytes` (it reads and writes nbytes)."""
    drv = driver()
    src, dst = device_alloc(nbytes), device_alloc(nbytes)

    def copy() -> None:
        check(drv.cuMemcpyDtoD(dst, src, nbytes), "cuMemcpyDtoD")
        check(drv.cuCtxSynchronize(), "cuCtxSynchronize")
    try:
        return median_time(copy, reps)
    finally:
        device_free(src)
        device_free(dst)


def compile_case(name: str, sm: int, **kw: Any) -> tuple[GpuExecutable, Any]:
    """(executable, corpus case) for corpus case `name` compiled for `sm_<sm>` (with a cubin
    when ptxas is on the PATH)."""
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    exe = compile_gpu(parse_module(case.module_text),
                      CompileOptions(backend="gpu", gpu_sm=sm, **kw), assemble=True)
    return exe, case


def bench_case(name: str, reps: int, sm: int) -> dict[str, float]:
    """Time corpus case `name` with device-resident inputs and outputs; bytes moved."""
    exe, case = compile_case(name, sm)
    args = [to_device(a) for a in case.inputs]
    t = median_time(lambda: exe.run_on_device(args)[0].block_until_ready(), reps)
    out_bytes = sum(o.slice.size for o in exe.outputs)
    in_bytes = sum(a.nbytes for a in case.inputs)
    return {"time_s": t, "bytes": float(in_bytes + out_bytes),
            "flops": float(case.meta.get("cost_analysis", {}).get("flops", 0.0)),
            "shapes": [list(a.shape) for a in case.inputs]}


def jax_time(name: str, reps: int) -> float | None:
    """JAX time of the corpus case's StableHLO compiled for the GPU, when jax with a CUDA
    backend is importable (None otherwise)."""
    try:
        import jax  # type: ignore[import-not-found]
        from jax._src.lib import xla_client as xc  # type: ignore[import-not-found]
        from jax.extend import backend as jb  # type: ignore[import-not-found]

        be = jb.get_backend("gpu")
        dev = be.local_devices()[0]
    except Exception:
        return None
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    text = (CORPUS / "cases" / name / "module.stablehlo.mlir").read_text()
    try:
        exe = be.compile_and_load(text, xc.DeviceList((dev,)), xc.CompileOptions())
    except Exception as e:  # jaxlib's compile API moves between versions
        print(f"  (JAX: cannot compile {name}: {type(e).__name__}: {e})", file=sys.stderr)
        return None
    args = [jax.device_put(a, dev) for a in case.inputs]

    def run() -> None:
        for out in exe.execute(args):
            out.block_until_ready()
    return median_time(run, reps)


def cublas_gflops(m: int, k: int, n: int, reps: int) -> tuple[str, float] | None:
    """(library, GFLOP/s) of an f32 [m,k] x [k,n] GEMM through torch or cupy, if importable."""
    try:
        import torch  # type: ignore[import-not-found]

        a = torch.randn(m, k, device="cuda")
        b = torch.randn(k, n, device="cuda")

        def mm() -> None:
            torch.mm(a, b)
            torch.cuda.synchronize()
        return "torch", 2 * m * k * n / median_time(mm, reps) / 1e9
    except Exception:
        pass
    try:
        import cupy  # type: ignore[import-not-found]

        a2 = cupy.random.rand(m, k, dtype=cupy.float32)
        b2 = cupy.random.rand(k, n, dtype=cupy.float32)

        def mm2() -> None:
            a2 @ b2
            cupy.cuda.Device().synchronize()
        return "cupy", 2 * m * k * n / median_time(mm2, reps) / 1e9
    except Exception:
        return None


TINY = """
HloModule tiny
ENTRY e {
  a = f32[16] parameter(0)
  b = f32[16] negate(a)
  c = f32[16] exponential(b)
  ROOT d = f32[16] add(a, c)
}
"""


def overhead(reps: int, sm: int) -> dict[str, float]:
    """Per-call time of a tiny three-kernel function: host arrays without / with CUDA graph
    replay, and device-resident arguments and results."""
    exe = compile_gpu(parse_module(TINY), CompileOptions(backend="gpu", gpu_sm=sm,
                                                         fusion=False), assemble=True)
    x = [np.ones(16, np.float32)]
    dx = [to_device(x[0])]
    return {"host": median_time(lambda: exe.run(x, graph=False), reps),
            "host_graph": median_time(lambda: exe.run(x, graph=True), reps),
            "device": median_time(lambda: exe.run_on_device(dx, graph=False)[0]
                                  .block_until_ready(), reps)}


DISPATCH_SIZES = (1 << 10, 1 << 20, 16 << 20, 256 << 20)
"""Output bytes of the dispatch measurements (f32 chains)."""
DISPATCH_KERNELS = (1, 10)


def chain_text(n: int, kernels: int) -> str:
    """HLO of `kernels` dependent doublings of f32[n] (compiled without fusion: one kernel
    each)."""
    lines = ["HloModule chain", "ENTRY e {", f"  v0 = f32[{n}] parameter(0)"]
    for k in range(1, kernels + 1):
        root = "ROOT " if k == kernels else ""
        lines.append(f"  {root}v{k} = f32[{n}] add(v{k - 1}, v{k - 1})")
    return "\n".join(lines + ["}", ""])


def queued_time(call: Callable[[], Any], wait: Callable[[Any], None], reps: int) -> float:
    """Host seconds per call of `reps` asynchronous calls issued back to back (the device
    catches up afterwards; the caller makes sure none waits for an older one)."""
    wait(call())
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            out = call()
        times.append((time.perf_counter() - t0) / reps)
        wait(out)
        del out
    return min(times)


def jax_dispatch(n: int, kernels: int, reps: int) -> tuple[float, float] | None:
    """(queued host s/call, waited s/call) of JAX's jit of the same chain, or None."""
    try:
        import jax  # type: ignore[import-not-found]

        dev = jax.devices("gpu")[0]
    except Exception:
        return None

    def chain(x: Any) -> Any:
        for _ in range(kernels):
            x = -x
            x = jax.lax.optimization_barrier(x)  # one kernel per op, as xlc's chain
        return x
    f = jax.jit(chain)
    x = jax.device_put(np.ones(n, np.float32), dev)
    queued = queued_time(lambda: f(x), lambda o: o.block_until_ready(), reps)
    waited = median_time(lambda: f(x).block_until_ready(), reps)
    return queued, waited


def dispatch(reps: int, sm: int) -> list[dict[str, Any]]:
    """Host cost per call of the chains (see the module docstring); one row per size and
    kernel count, seconds."""
    from xlc.backend_gpu import launch

    depth = launch.MAX_IN_FLIGHT
    launch.MAX_IN_FLIGHT = max(depth, reps + 2)  # runtimes made now: no call waits for another
    try:
        return _dispatch_rows(reps, sm)
    finally:
        launch.MAX_IN_FLIGHT = depth


def _dispatch_rows(reps: int, sm: int) -> list[dict[str, Any]]:
    rows = []
    for kernels in DISPATCH_KERNELS:
        for nbytes in DISPATCH_SIZES:
            n = max(1, nbytes // 4)
            exe = compile_gpu(parse_module(chain_text(n, kernels)),
                              CompileOptions(backend="gpu", gpu_sm=sm, fusion=False),
                              assemble=True)
            rows.append(_dispatch_row(exe, n, kernels, nbytes, reps))
    return rows


def _dispatch_row(exe: GpuExecutable, n: int, kernels: int, nbytes: int,
                  reps: int) -> dict[str, Any]:
    host = np.ones(n, np.float32)
    dx = [to_device(host)]

    def wait(outs: Any) -> None:
        outs[0].block_until_ready()
    row: dict[str, Any] = {"kernels": kernels, "bytes": nbytes}
    row["queued_s"] = queued_time(lambda: exe.run_on_device(dx), wait, reps)
    row["graph_queued_s"] = queued_time(lambda: exe.run_on_device(dx, graph=True), wait, reps)
    row["waited_s"] = median_time(lambda: wait(exe.run_on_device(dx)), reps)
    row["numpy_s"] = median_time(lambda: exe.run([host]), reps)
    jx = jax_dispatch(n, kernels, reps)
    row["jax_queued_s"], row["jax_waited_s"] = jx if jx else (None, None)
    return row


def _us(v: float | None) -> str:
    return "-" if v is None else f"{1e6 * v:.1f}"


def main(argv: list[str] | None = None) -> int:
    """Run every measurement and print the table (and write --json)."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--sm", type=int, default=None, help="architecture (default: the GPU's)")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args(argv)
    try:
        cc = compute_capability()
    except XlcError as e:
        print(f"bench_gpu: {e}\nbench_gpu: this benchmark needs an NVIDIA GPU and cuda-python "
              "(pip install cuda-python); run it on a GPU machine", file=sys.stderr)
        return 1
    sm = args.sm or cc
    print(f"device: sm_{cc}; code for sm_{sm}; {args.reps} reps (medians)")
    report: dict[str, Any] = {"device_sm": cc, "sm": sm, "cases": {}}
    print(f"\n{'case':<26}{'time':>12}{'GB/s':>10}{'% of D2D':>10}{'JAX':>12}")
    for name in BANDWIDTH_CASES:
        r = bench_case(name, args.reps, sm)
        copy = d2d_copy_time(int(r["bytes"]) // 2, args.reps)
        gbs, copy_gbs = r["bytes"] / r["time_s"] / 1e9, r["bytes"] / copy / 1e9
        jt = jax_time(name, args.reps)
        report["cases"][name] = {**r, "gbs": gbs, "d2d_gbs": copy_gbs,
                                 "fraction_of_d2d": gbs / copy_gbs, "jax_time_s": jt}
        print(f"{name:<26}{1e6 * r['time_s']:>10.1f}us{gbs:>10.1f}{100 * gbs / copy_gbs:>9.1f}%"
              f"{(f'{1e6 * jt:.1f}us' if jt else '-'):>12}")
    print(f"\n{'case':<26}{'time':>12}{'GFLOP/s':>10}{'cuBLAS':>18}{'JAX':>12}")
    for name in GEMM_CASES:
        r = bench_case(name, args.reps, sm)
        gflops = r["flops"] / r["time_s"] / 1e9
        ref = None
        if name == "bench_matmul":  # cuBLAS on the same [m,k] x [k,n]
            (m, k), (_, n) = r["shapes"][0], r["shapes"][1]
            ref = cublas_gflops(m, k, n, args.reps)
        jt = jax_time(name, args.reps)
        report["cases"][name] = {**r, "gflops": gflops, "jax_time_s": jt,
                                 "cublas": None if ref is None else {"library": ref[0],
                                                                      "gflops": ref[1]}}
        ref_text = f"{ref[1]:.0f} ({ref[0]}, {100 * gflops / ref[1]:.0f}%)" if ref else "-"
        print(f"{name:<26}{1e6 * r['time_s']:>10.1f}us{gflops:>10.0f}{ref_text:>18}"
              f"{(f'{1e6 * jt:.1f}us' if jt else '-'):>12}")
    ov = overhead(args.reps * 5, sm)
    report["overhead_s"] = ov
    print(f"\nper-call overhead (tiny fn, 3 kernels): {1e6 * ov['host']:.1f} us host in/out, "
          f"{1e6 * ov['host_graph']:.1f} us with CUDA graph, {1e6 * ov['device']:.1f} us "
          "device-resident")
    rows = dispatch(args.reps * 5, sm)
    report["dispatch"] = rows
    print("\ndispatch, us per call (queued: host time of back-to-back asynchronous calls; "
          "waited: call + block_until_ready)")
    print(f"{'kernels':>7}{'output':>10}{'queued':>9}{'graph':>9}{'waited':>9}{'numpy':>9}"
          f"{'JAX q':>9}{'JAX w':>9}")
    for r in rows:
        size = f"{r['bytes'] >> 20} MiB" if r["bytes"] >= 1 << 20 else f"{r['bytes'] >> 10} KiB"
        print(f"{r['kernels']:>7}{size:>10}{_us(r['queued_s']):>9}{_us(r['graph_queued_s']):>9}"
              f"{_us(r['waited_s']):>9}{_us(r['numpy_s']):>9}{_us(r['jax_queued_s']):>9}"
              f"{_us(r['jax_waited_s']):>9}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
