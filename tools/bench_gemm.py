"""Benchmark the generated f32 GEMM (`xlc.codegen.gemm`) against numpy, side by side.

Usage: python tools/bench_gemm.py [--sizes 256 512 1024 2048] [--threads 1 2] [--reps N]
       [--dtype f32|f64] [--python-threads]

For every square size n it prints GFLOP/s (2 n^3 / time; median and best of
--reps) of xlc's GEMM on each thread
count and of numpy's matmul (OpenBLAS as configured by the environment, e.g.
OPENBLAS_CORETYPE) on the same thread count (set through OpenBLAS's own
set_num_threads by ctypes; if that is not found numpy runs with its default threads and the column
says so), plus the compile time. With
--python-threads the multi-threaded xlc figure is taken by calling the per-thread kernel from
Python threads through ctypes instead of the generated pthread entry.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from xlc.codegen.gemm import CompiledGemm, GemmSpec, compile_gemm  # noqa: E402


def timeit(fn: Callable[[], object], reps: int) -> tuple[float, float]:
    """(median, minimum) seconds of `reps` calls after two warm-up calls."""
    fn()
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts), min(ts)


def _python_threaded(g: CompiledGemm, a: np.ndarray, b: np.ndarray, c: np.ndarray
                     ) -> Callable[[], None]:
    """Call the (tid, nthreads) kernel from g.nthreads Python threads (ctypes drops the GIL)."""
    proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 4), ctypes.c_int64, ctypes.c_int64)
    fn = proto(g.kernel_address)
    args = (a.ctypes.data, b.ctypes.data, c.ctypes.data, g._scratch_ptr)
    nt = g.nthreads

    def run() -> None:
        ths = [threading.Thread(target=fn, args=(*args, t, nt)) for t in range(1, nt)]
        for th in ths:
            th.start()
        fn(*args, 0, nt)
        for th in ths:
            th.join()
    return run


class _OpenBlas:
    """numpy's bundled OpenBLAS (scipy-openblas), to set its thread count through ctypes."""

    def __init__(self) -> None:
        libs = sorted((Path(np.__file__).parent.parent / "numpy.libs").glob("*openblas*.so*"))
        self.lib = ctypes.CDLL(str(libs[0])) if libs else None
        self.set = getattr(self.lib, "scipy_openblas_set_num_threads64_", None)
        core = getattr(self.lib, "scipy_openblas_get_corename64_", None)
        if core is not None:
            core.restype = ctypes.c_char_p
        self.corename = core().decode() if core is not None else "?"

    def threads(self, n: int) -> bool:
        """Set OpenBLAS's thread count; False when that is not possible."""
        if self.set is None:
            return False
        self.set(ctypes.c_int(n))
        return True


def main() -> None:
    """Parse arguments, run the benchmark, print one row per (size, threads)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--dtype", default="f32", choices=["f32", "f64"])
    ap.add_argument("--python-threads", action="store_true")
    args = ap.parse_args()
    dt = np.float32 if args.dtype == "f32" else np.float64
    rng = np.random.default_rng(0)
    blas = _OpenBlas()
    env = {k: os.environ.get(k, "-") for k in ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS")}
    print(f"numpy OpenBLAS core: {blas.corename} ({env}); load average "
          f"{os.getloadavg()[0]:.2f}; GFLOP/s from median times (best in brackets)")
    print(f"{'n':>5} {'thr':>3} {'xlc GF/s (best)':>15} {'numpy GF/s (best)':>17} {'ratio':>6} "
          f"{'compile ms':>10} {'max rel err':>11}")
    for n in args.sizes:
        a = rng.standard_normal((n, n)).astype(dt)
        b = rng.standard_normal((n, n)).astype(dt)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        flops = 2.0 * n ** 3
        reps = max(3, args.reps if n <= 1024 else args.reps // 2)
        for nt in args.threads:
            t0 = time.perf_counter()
            g = compile_gemm(GemmSpec.for_arrays(a, b), nthreads=nt)
            ctime = (time.perf_counter() - t0) * 1e3
            c = np.empty((n, n), dt)
            run = _python_threaded(g, a, b, c) if args.python_threads and nt > 1 \
                else (lambda: g(a, b, c))
            tx = timeit(run, reps)
            err = float(np.abs(c - ref).max() / np.abs(ref).max())
            note = "" if blas.threads(nt) else "*"
            out = np.empty((n, n), dt)
            tn = timeit(lambda: np.matmul(a, b, out=out), reps)
            gx, gn = flops / tx[0] / 1e9, flops / tn[0] / 1e9
            bx, bn = flops / tx[1] / 1e9, flops / tn[1] / 1e9
            print(f"{n:>5} {nt:>3} {gx:>7.1f} ({bx:>5.1f}) {gn:>7.1f} ({bn:>5.1f}){note or ' '}"
                  f" {gx / gn:>6.2f} {ctime:>10.1f} {err:>11.2e}", flush=True)
    if blas.set is None:
        print("* numpy ran with its default thread count (OpenBLAS thread control not found)")


if __name__ == "__main__":
    main()
