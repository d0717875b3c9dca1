"""Benchmark the generated GEMM (`xlc.backend_cpu.gemm`) against numpy, side by side.

Usage: python tools/bench_gemm.py [--sizes 256 512 1024 2048] [--shapes MxNxK ...]
       [--threads 1 2] [--reps N] [--dtype f32|f64] [--python-threads] [--peak]

For every problem it prints GFLOP/s (2 m n k / time; median and best of --reps) of xlc's GEMM
on each thread count and of numpy's matmul (OpenBLAS as configured by the environment, e.g.
OPENBLAS_CORETYPE) on the same thread count (set through OpenBLAS's own set_num_threads by
ctypes; if that is not found numpy runs with its default threads and a footnote says so), plus
the compile time and the error. With --python-threads the multi-threaded xlc figure is taken by
calling the per-thread kernel from Python threads through ctypes instead of the generated
pthread entry (not for products that pack B once, block by block: they need the entry's pack
phases between the shares).

--block-bytes B1 B2 ... (instead of the table): the GEMM compiled with each value of
`gemm.PACKED_BLOCK_BYTES` (the block of B packed once), calls alternated in one process:
median (best) GFLOP/s and scratch bytes of each, the price of a smaller scratch.

--xla (instead of the table; needs jax): xlc's GEMM against XLA's (`jax.jit(jnp.matmul)`),
calls alternated in one process. XLA uses every core, so compare at --threads = cores.

--peak (for shared, noisy machines): also runs a register-only FMA loop (24 independent
<16 x float> FMA chains; ~245 GFLOP/s per idle Zen 5 core) on the same threads right before
and after every timed call, and prints the medians of xlc/peak and numpy/peak: the fraction of
the FMA throughput the machine gives us at that moment that each GEMM reaches.
"""
from __future__ import annotations

import argparse
import ctypes
import functools
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from xlc.backend_cpu.gemm import (  # noqa: E402
    CompiledGemm,
    GemmSpec,
    compile_gemm,
    packs_b_once,
)


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


def _peak_kernel() -> Callable[[int], float]:
    """JIT a register-only FMA loop `float peak(i64 iters)`: 24 chains x 16 lanes x 2 flop."""
    from llvmlite import ir

    from xlc.backend_cpu import jit
    from xlc.codegen import llvm_utils as lu

    sym = lu.unique_symbol("bench_peak")
    mod = lu.new_module(sym)
    vty = ir.VectorType(lu.F32, 16)
    fn = ir.Function(mod, ir.FunctionType(lu.F32, [lu.I64]), name=sym)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    slots = []
    for i in range(24):
        slot = b.alloca(vty)
        slot.type = lu.PTR
        b.store(lu.const(vty, 0.001 * i), slot)
        slots.append(slot)
    x, y = lu.const(vty, 0.999), lu.const(vty, 1e-4)
    with lu.for_range(b, fn.args[0]):
        for slot in slots:
            b.store(lu.intrinsic(b, "llvm.fma", [b.load(slot, typ=vty), x, y]), slot)
    total = b.load(slots[0], typ=vty)
    for slot in slots[1:]:
        total = b.fadd(total, b.load(slot, typ=vty))
    b.ret(b.extract_element(total, ir.Constant(lu.I32, 0)))
    jit.compile_module(mod, sym)
    return ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(  # type: ignore[no-any-return]
        jit.jit_engine().address(sym))


PEAK_FLOPS_PER_ITER = 24 * 16 * 2


def _peak_gflops(peak: Callable[[int], float], flops: float, nthreads: int) -> float:
    """GFLOP/s of the FMA loop on `nthreads` threads doing `flops` in total."""
    iters = max(1, int(flops / PEAK_FLOPS_PER_ITER / nthreads))
    ths = [threading.Thread(target=peak, args=(iters,)) for _ in range(nthreads - 1)]
    t = time.perf_counter()
    for th in ths:
        th.start()
    peak(iters)
    for th in ths:
        th.join()
    return nthreads * iters * PEAK_FLOPS_PER_ITER / (time.perf_counter() - t) / 1e9


def _vs_peak(run: Callable[[], object], peak: Callable[[int], float], flops: float,
             nthreads: int, reps: int) -> float:
    """Median over reps of (GFLOP/s of run) / (best FMA-loop GFLOP/s just before and after)."""
    run()
    ratios = []
    for _ in range(reps):
        p0 = _peak_gflops(peak, flops, nthreads)
        t = time.perf_counter()
        run()
        g = flops / (time.perf_counter() - t) / 1e9
        ratios.append(g / max(p0, _peak_gflops(peak, flops, nthreads)))
    return statistics.median(ratios)


def _python_threaded(g: CompiledGemm, a: np.ndarray, b: np.ndarray, c: np.ndarray
                     ) -> Callable[[], None]:
    """Call the (share, nshares, slot) kernel from g.nthreads Python threads, share t in slot
    t (ctypes drops the GIL)."""
    proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 4), *[ctypes.c_int64] * 3)
    fn = proto(g.kernel_address)
    args = (a.ctypes.data, b.ctypes.data, c.ctypes.data, g._scratch_ptr)
    nt = g.nthreads

    def run() -> None:
        ths = [threading.Thread(target=fn, args=(*args, t, nt, t)) for t in range(1, nt)]
        for th in ths:
            th.start()
        fn(*args, 0, nt, 0)
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


def compare_blocks(problems: list[tuple[int, int, int]], threads: list[int],
                   blocks: list[int], reps: int, dt: type) -> None:
    """For each problem and thread count: compile the GEMM once per `gemm.PACKED_BLOCK_BYTES`
    value in `blocks` and time them with calls alternated in this process (so that load on
    a shared machine hits them alike); print median and best GFLOP/s and scratch bytes."""
    from xlc.backend_cpu import gemm as G

    rng = np.random.default_rng(0)
    saved = G.PACKED_BLOCK_BYTES
    print(f"{'m x n x k':>14} {'thr':>3}  per block bytes: median GF/s (best) scratch bytes")
    for m, n, k in problems:
        a = rng.standard_normal((m, k)).astype(dt)
        b = rng.standard_normal((k, n)).astype(dt)
        c = np.empty((m, n), dt)
        for nt in threads:
            runs = []
            for size in blocks:
                G.PACKED_BLOCK_BYTES = size
                G._compiled.clear()  # the machine code is cached per spec, not per block size
                g = compile_gemm(GemmSpec.for_arrays(a, b), nthreads=nt)
                runs.append((size, g, G.scratch_bytes(g.spec, nt), []))
            G.PACKED_BLOCK_BYTES = saved
            for _, g, _, _ in runs:
                g(a, b, c)
            for _ in range(reps):
                for _, g, _, ts in runs:
                    t = time.perf_counter()
                    g(a, b, c)
                    ts.append(time.perf_counter() - t)
            flops = 2.0 * m * n * k
            cells = [f"{size}: {flops / statistics.median(ts) / 1e9:.0f} "
                     f"({flops / min(ts) / 1e9:.0f}) {scratch}" for size, _, scratch, ts in runs]
            print(f"{f'{m}x{n}x{k}':>14} {nt:>3}  " + "   ".join(cells), flush=True)
    G._compiled.clear()


def compare_xla(problems: list[tuple[int, int, int]], threads: list[int], reps: int,
                dt: type) -> None:
    """For each problem and thread count: xlc's GEMM against XLA's (`jax.jit(jnp.matmul)` on
    operands already on the device), calls alternated in this process; median and best
    GFLOP/s and xlc/XLA of the medians. XLA's CPU client uses every core this process may
    use, whatever `threads` says."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        print("--xla needs jax (pip install jax)")
        return
    rng = np.random.default_rng(0)
    mm = jax.jit(jnp.matmul)
    print(f"{'m x n x k':>14} {'thr':>3} {'xlc GF/s (best)':>15} {'XLA GF/s (best)':>15} "
          f"{'ratio':>6}")
    for m, n, k in problems:
        a = rng.standard_normal((m, k)).astype(dt)
        b = rng.standard_normal((k, n)).astype(dt)
        c = np.empty((m, n), dt)
        ja, jb = jax.device_put(a), jax.device_put(b)
        for nt in threads:
            g = compile_gemm(GemmSpec.for_arrays(a, b), nthreads=nt)
            runs: list[tuple[Callable[[], object], list[float]]] = [
                (functools.partial(g, a, b, c), []),
                (lambda x=ja, y=jb: mm(x, y).block_until_ready(), [])]
            for run, _ in runs:
                run()
            for _ in range(reps):
                for run, ts in runs:
                    t = time.perf_counter()
                    run()
                    ts.append(time.perf_counter() - t)
            flops = 2.0 * m * n * k
            (gx, bx), (gj, bj) = ((flops / statistics.median(ts) / 1e9,
                                   flops / min(ts) / 1e9) for _, ts in runs)
            print(f"{f'{m}x{n}x{k}':>14} {nt:>3} {gx:>7.1f} ({bx:>5.1f}) {gj:>7.1f} "
                  f"({bj:>5.1f}) {gx / gj:>6.2f}", flush=True)


def main() -> None:
    """Parse arguments, run the benchmark, print one row per (size, threads)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048])
    ap.add_argument("--shapes", nargs="*", default=[],
                    help="extra problems as MxNxK (e.g. 256x1024x1024 4096x1x4096)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--dtype", default="f32", choices=["f32", "f64"])
    ap.add_argument("--python-threads", action="store_true")
    ap.add_argument("--peak", action="store_true",
                    help="also print efficiency vs an interleaved FMA-peak loop")
    ap.add_argument("--block-bytes", type=int, nargs="+", metavar="BYTES",
                    help="instead: compare these gemm.PACKED_BLOCK_BYTES values, calls "
                         "alternated in one process")
    ap.add_argument("--xla", action="store_true",
                    help="instead: xlc's GEMM against XLA's (jax), calls alternated")
    args = ap.parse_args()
    dt = np.float32 if args.dtype == "f32" else np.float64
    if args.block_bytes:
        problems = [(n, n, n) for n in args.sizes]
        problems += [tuple(int(x) for x in sh.split("x")) for sh in args.shapes]  # type: ignore
        compare_blocks(problems, args.threads, args.block_bytes, args.reps, dt)  # type: ignore
        return
    if args.xla:
        problems = [(n, n, n) for n in args.sizes]
        problems += [tuple(int(x) for x in sh.split("x")) for sh in args.shapes]  # type: ignore
        compare_xla(problems, args.threads, args.reps, dt)  # type: ignore
        return
    rng = np.random.default_rng(0)
    blas = _OpenBlas()
    peak = _peak_kernel() if args.peak else None
    env = {k: os.environ.get(k, "-") for k in ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS")}
    print(f"numpy OpenBLAS core: {blas.corename} ({env}); load average "
          f"{os.getloadavg()[0]:.2f}; GFLOP/s from median times (best in brackets)")
    print(f"{'m x n x k':>14} {'thr':>3} {'xlc GF/s (best)':>15} {'numpy GF/s (best)':>17} "
          f"{'ratio':>6} {'compile ms':>10} {'max rel err':>11}")
    problems = [(n, n, n) for n in args.sizes]
    problems += [tuple(int(x) for x in sh.split("x")) for sh in args.shapes]  # type: ignore
    for m, n, k in problems:
        a = rng.standard_normal((m, k)).astype(dt)
        b = rng.standard_normal((k, n)).astype(dt)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        flops = 2.0 * m * n * k
        reps = max(3, args.reps if flops <= 2.2e9 else args.reps // 2)
        for nt in args.threads:
            t0 = time.perf_counter()
            g = compile_gemm(GemmSpec.for_arrays(a, b), nthreads=nt)
            ctime = (time.perf_counter() - t0) * 1e3
            c = np.empty((m, n), dt)
            # B packed once block by block needs the entry's pack phases between the shares
            threaded = args.python_threads and nt > 1 and not packs_b_once(g.spec)
            run = _python_threaded(g, a, b, c) if threaded else functools.partial(g, a, b, c)
            tx = timeit(run, reps)
            err = float(np.abs(c - ref).max() / np.abs(ref).max())
            note = "" if blas.threads(nt) else "*"
            out = np.empty((m, n), dt)
            tn = timeit(functools.partial(np.matmul, a, b, out=out), reps)
            gx, gn = flops / tx[0] / 1e9, flops / tn[0] / 1e9
            bx, bn = flops / tx[1] / 1e9, flops / tn[1] / 1e9
            extra = ""
            if peak is not None:
                ex = _vs_peak(run, peak, flops, nt, reps)
                en = _vs_peak(functools.partial(np.matmul, a, b, out=out), peak, flops, nt, reps)
                extra = f"  xlc/peak {ex:.2f} numpy/peak {en:.2f}"
            print(f"{f'{m}x{n}x{k}':>14} {nt:>3} {gx:>7.1f} ({bx:>5.1f}) {gn:>7.1f} "
                  f"({bn:>5.1f}){note or ' '} {gx / gn:>6.2f} {ctime:>10.1f} {err:>11.2e}"
                  f"{extra}", flush=True)
    if blas.set is None:
        print("* numpy ran with its default thread count (OpenBLAS thread control not found)")


if __name__ == "__main__":
    main()
