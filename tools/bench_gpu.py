"""Benchmark the GPU backend (needs an NVIDIA GPU and cuda-python; run it on a GPU machine).

Usage: python tools/bench_gpu.py [--reps N] [--sm 80|90]

Prints, measured side by side in one run:
* `bench_elementwise_chain` and `bench_softmax`: time per call with inputs and outputs on the
  device, effective bandwidth (input + output bytes / time) and that bandwidth as a fraction of
  a device-to-device copy of the same number of bytes (the goal is >= 90%);
* `bench_matmul` (1024^3 f32): GFLOP/s, next to cuBLAS through torch or cupy when importable;
* per-call overhead of a tiny function, with and without CUDA graph replay;
* JAX-GPU times for the same cases when jax with a GPU backend is importable.
Times are medians of `--reps` calls after one warm-up call.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "shared" / "corpus"))

from xlc.backend_gpu import compile_gpu  # noqa: E402
from xlc.backend_gpu.runtime import check, device_alloc, driver, to_device  # noqa: E402
from xlc.hlo.parser import parse_module  # noqa: E402
from xlc.options import CompileOptions  # noqa: E402


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
    """Median time of a device-to-device copy of `nbytes` (read + write = 2 * nbytes)."""
    drv = driver()
    src, dst = device_alloc(nbytes), device_alloc(nbytes)

    def copy() -> None:
        check(drv.cuMemcpyDtoD(dst, src, nbytes), "cuMemcpyDtoD")
        check(drv.cuCtxSynchronize(), "cuCtxSynchronize")
    return median_time(copy, reps)


def bench_case(name: str, reps: int, sm: int) -> dict[str, float]:
    """Compile corpus case `name` and time it with device-resident inputs and outputs."""
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    exe = compile_gpu(parse_module(case.module_text), CompileOptions(backend="gpu", gpu_sm=sm))
    args = [to_device(a) for a in case.inputs]
    t = median_time(lambda: exe.run_on_device(args), reps)
    out_bytes = sum(o.slice.size for o in exe.outputs)
    in_bytes = sum(a.nbytes for a in case.inputs)
    return {"time_s": t, "bytes": float(in_bytes + out_bytes)}


def jax_time(name: str, reps: int) -> float | None:
    """JAX-GPU time of the corpus case's HLO, when jax with a GPU is importable."""
    try:
        import jax  # type: ignore[import-not-found]
        import jax.numpy as jnp  # type: ignore[import-not-found]
        if not any(d.platform == "gpu" for d in jax.devices()):
            return None
    except Exception:
        return None
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    fns = {
        "bench_elementwise_chain": lambda a, b, c: jnp.tanh(a * b + c) * jnp.exp(-jnp.abs(c))
        + jnp.log(a * a + 1),
        "bench_softmax": lambda x: jax.nn.softmax(x, axis=1),
        "bench_matmul": lambda a, b: a @ b,
    }
    fn = jax.jit(fns[name])
    args = [jax.device_put(a) for a in case.inputs]
    return median_time(lambda: fn(*args).block_until_ready(), reps)


def cublas_gflops(n: int, reps: int) -> float | None:
    """cuBLAS SGEMM GFLOP/s through torch or cupy, when importable."""
    try:
        import torch  # type: ignore[import-not-found]

        a = torch.randn(n, n, device="cuda")
        b = torch.randn(n, n, device="cuda")

        def mm() -> None:
            torch.mm(a, b)
            torch.cuda.synchronize()
        return 2 * n ** 3 / median_time(mm, reps) / 1e9
    except Exception:
        pass
    try:
        import cupy  # type: ignore[import-not-found]

        a = cupy.random.rand(n, n, dtype=cupy.float32)
        b = cupy.random.rand(n, n, dtype=cupy.float32)

        def mm2() -> None:
            a @ b
            cupy.cuda.Device().synchronize()
        return 2 * n ** 3 / median_time(mm2, reps) / 1e9
    except Exception:
        return None


def overhead(reps: int, sm: int) -> tuple[float, float]:
    """Per-call time of a tiny function without / with CUDA graph replay."""
    exe = compile_gpu(parse_module("""
HloModule tiny
ENTRY e {
  a = f32[16] parameter(0)
  b = f32[16] negate(a)
  c = f32[16] exponential(b)
  ROOT d = f32[16] add(a, c)
}
"""), CompileOptions(backend="gpu", gpu_sm=sm, fusion=False))
    x = [np.ones(16, np.float32)]
    return median_time(lambda: exe.run(x), reps), median_time(lambda: exe.run(x, graph=True),
                                                              reps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--sm", type=int, default=80)
    args = ap.parse_args()
    print(f"{'case':<26}{'time':>12}{'GB/s':>10}{'% of D2D':>10}{'JAX':>12}")
    for name in ("bench_elementwise_chain", "bench_softmax"):
        r = bench_case(name, args.reps, args.sm)
        copy = d2d_copy_time(int(r["bytes"]) // 2, args.reps)
        gbs = r["bytes"] / r["time_s"] / 1e9
        copy_gbs = r["bytes"] / copy / 1e9
        jt = jax_time(name, args.reps)
        print(f"{name:<26}{1e6 * r['time_s']:>10.1f}us{gbs:>10.1f}{100 * gbs / copy_gbs:>9.1f}%"
              f"{(f'{1e6 * jt:.1f}us' if jt else '-'):>12}")
    r = bench_case("bench_matmul", args.reps, args.sm)
    gflops = 2 * 1024 ** 3 / r["time_s"] / 1e9
    ref = cublas_gflops(1024, args.reps)
    print(f"bench_matmul: {gflops:.0f} GFLOP/s"
          + (f" (cuBLAS {ref:.0f} GFLOP/s, {100 * gflops / ref:.0f}%)" if ref else ""))
    plain, graph = overhead(args.reps * 5, args.sm)
    print(f"per-call overhead (tiny fn, host in/out): {1e6 * plain:.1f} us plain, "
          f"{1e6 * graph:.1f} us with CUDA graph")


if __name__ == "__main__":
    main()
