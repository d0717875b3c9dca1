"""Benchmark the CPU backend against numpy and JAX/XLA, side by side in one run.

Usage: python tools/bench_cpu.py [--reps N] [--small] [--sums] [--sort] [--json out.json] [case ...]
       python tools/bench_cpu.py --under-load [--reps N]
       python tools/bench_cpu.py --big [--reps N]

For each corpus case (the four `bench_*` cases by default; `--small` adds the others) it
prints the xlc time and, measured in the same rounds, the time of XLA compiling the very same
program (the case's `module.stablehlo.mlir`, as JAX handed it to XLA) when `jax` is
importable, and of a hand-written numpy equivalent for the `bench_*` cases. Contenders are
called in turn, round after round (`timeit_interleaved`), so drift in the rest of the machine
hits them alike: read the ratios. Also: effective GB/s (input + output bytes / time), GFLOP/s
(XLA's cost-analysis flops / time), xlc and XLA compile times, and the per-call overhead of a
tiny function. Times are medians over `--reps` rounds after a warm-up call. `--sums` adds
time and accuracy of f32 sums at 1M and 16M elements against XLA and numpy, idle and with
one competing busy process (`tools/bench_sums.py`). `--sort` times only sort and top-k against
XLA and numpy (`tools/bench_sort.py`; its case names replace the corpus cases).

`--under-load` times a ~25 us multi-threaded kernel, the elementwise chain and the transformer
block (tools/bench_models.py) with xlc and JAX, first on an otherwise idle machine, then with
one competing process busy on a core, side by side. `--big` times the elementwise chain at
16M and 64M elements (where fresh output memory costs page faults) against JAX.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("XLC_CORPUS", ROOT.parent / "shared" / "corpus"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(CORPUS))

from xlc.backend_cpu import compile_cpu  # noqa: E402
from xlc.hlo.parser import parse_module  # noqa: E402


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


NUMPY: dict[str, Callable[..., np.ndarray]] = {
    "bench_elementwise_chain":
        lambda a, b, c: np.tanh(a * b + c) * np.exp(-np.abs(c)) + np.log(a * a + 1),
    "bench_softmax": _softmax,
    "bench_matmul": lambda a, b: a @ b,
    "bench_mlp": lambda x, w1, b1, w2, b2: np.maximum(x @ w1 + b1, 0) @ w2 + b2,
}


WARM_S = 0.15


def timeit(fn: Callable[[], object], reps: int) -> float:
    """Median seconds of `reps` calls after a warm-up call."""
    return timeit_interleaved([fn], reps)[0]


def timeit_interleaved(fns: list[Callable[[], object]], reps: int,
                       rounds: int = 3) -> list[float]:
    """Median seconds per call of each of `fns`. The calls are grouped in `rounds` rounds; in
    each round every function runs one block: untimed calls for at least `WARM_S` (the first
    call after a switch pays for cold caches, for idle cores of this VM waking up and for the
    previous contender's worker threads, which OpenBLAS and Eigen keep spinning for a while
    after a call returns), then about reps / rounds timed calls. Drift in what the rest of the
    machine does thus touches every contender alike: read the ratios."""
    per_block = max(1, -(-reps // rounds))
    ts: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            while time.perf_counter() - start < WARM_S:
                fn()
            for _ in range(per_block):
                t = time.perf_counter()
                fn()
                ts[k].append(time.perf_counter() - t)
    return [statistics.median(t) for t in ts]


def xla_runner(name: str, inputs: list[np.ndarray]) -> tuple[Callable[[], object], float] | None:
    """(run, compile seconds) of XLA:CPU on the case's StableHLO, or None without jax. A
    donated argument is consumed by each call, so donating programs get fresh device copies of
    their inputs per call (made outside the timed region: a pool refilled between calls)."""
    try:
        import jax
        from jax._src.lib import xla_client as xc
        from jax.extend import backend as jb
    except ImportError:
        return None
    backend = jb.get_backend("cpu")
    dev = backend.local_devices()[0]
    text = (CORPUS / "cases" / name / "module.stablehlo.mlir").read_text()
    t0 = time.perf_counter()
    try:
        exe = backend.compile_and_load(text, xc.DeviceList((dev,)), xc.CompileOptions())
    except Exception as e:  # jaxlib's compile API moves between versions
        print(f"  (XLA: cannot compile {name}: {type(e).__name__}: {e})", file=sys.stderr)
        return None
    compile_s = time.perf_counter() - t0
    donates = "tf.aliasing_output" in text or "jax.buffer_donor" in text
    fixed = [jax.device_put(a, dev) for a in inputs]
    pool: list[list[Any]] = []

    def run() -> None:
        if donates:
            args = pool.pop() if pool else [jax.device_put(a, dev) for a in inputs]
        else:
            args = fixed
        for out in exe.execute(args):
            out.block_until_ready()
        if donates:  # refill for the next call; not part of the next call's time
            pool.append([jax.device_put(a, dev) for a in inputs])
    return run, compile_s


def bench_case(name: str, reps: int) -> dict[str, Any]:
    """Time one corpus case; prints a row and returns its figures."""
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    t0 = time.perf_counter()
    exe = compile_cpu(parse_module(case.module_text))
    compile_s = time.perf_counter() - t0
    args = case.inputs
    labels = ["xlc"]
    contenders: list[Callable[[], object]] = [lambda: exe.run(args)]
    xla = xla_runner(name, args)
    if xla is not None:
        labels.append("xla")
        contenders.append(xla[0])
    if name in NUMPY:
        labels.append("numpy")
        contenders.append(lambda: NUMPY[name](*args))
    times = dict(zip(labels, timeit_interleaved(contenders, reps)))
    t_xlc = times["xlc"]
    nbytes = sum(a.nbytes for a in args) + sum(o.nbytes for o in exe.run(args))
    flops = float((case.meta.get("cost_analysis") or {}).get("flops", 0.0))
    row = [f"{name:24s}", f"xlc {_fmt(t_xlc)}", f"{nbytes / t_xlc / 1e9:6.1f} GB/s",
           f"{flops / t_xlc / 1e9:6.1f} GFLOP/s", f"compile {compile_s * 1e3:6.1f} ms"]
    for label in labels[1:]:
        row.append(f"{label} {_fmt(times[label])} ({times[label] / t_xlc:5.2f}x)")
    if xla is not None:
        row.append(f"xla compile {xla[1] * 1e3:6.1f} ms")
    print("  ".join(row), flush=True)
    return {"case": name, "times_s": times, "bytes": nbytes, "flops": flops,
            "compile_s": compile_s, "xla_compile_s": xla[1] if xla else None}


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e3:8.3f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:8.1f} us"


def call_overhead(reps: int) -> dict[str, float]:
    """Per-call time of a compiled f32[1] add next to numpy's ufunc."""
    text = """HloModule tiny
ENTRY e {
  a = f32[1] parameter(0)
  b = f32[1] parameter(1)
  ROOT r = f32[1] add(a, b)
}"""
    exe = compile_cpu(parse_module(text))
    a = np.ones(1, np.float32)
    t, t_np = timeit_interleaved([lambda: exe.run([a, a]), lambda: np.add(a, a)],
                                 max(reps, 2000))
    print(f"per-call overhead (f32[1] add): xlc {t * 1e6:.2f} us, numpy ufunc {t_np * 1e6:.2f} us")
    out = {"xlc_s": t, "numpy_s": t_np}
    out.update(jit_call_overhead(reps))
    return out


def jit_call_overhead(reps: int) -> dict[str, float]:
    """Per-call time of `xlc.jit` and `jax.jit` of `lambda a, b: a + b` on f32[4] arrays (a
    tiny function: the time is the call's overhead), measured side by side; also with a dict
    of arrays as argument (the pytree path)."""
    import xlc

    a = np.ones(4, np.float32)
    params = {f"w{i}": np.ones(4, np.float32) for i in range(8)}

    def tree_sum(p: dict, x: Any) -> Any:
        return x + p["w0"] + p["w7"]

    f, ft = xlc.jit(lambda a, b: a + b), xlc.jit(tree_sum)
    fns = [lambda: f(a, a), lambda: ft(params, a)]
    labels = ["xlc.jit", "xlc.jit (dict of 8 arrays)"]
    try:
        import jax
    except ImportError:
        jax = None
    if jax is not None:
        g, gt = jax.jit(lambda a, b: a + b), jax.jit(tree_sum)
        da, dp = jax.device_put(a), jax.device_put(params)
        fns += [lambda: g(da, da).block_until_ready(), lambda: gt(dp, da).block_until_ready()]
        labels += ["jax.jit", "jax.jit (dict of 8 arrays)"]
    times = timeit_interleaved(fns, max(reps, 2000))
    print("per-call overhead of jit (f32[4] add): " + ", ".join(
        f"{lab} {t * 1e6:.2f} us" for lab, t in zip(labels, times)))
    return {f"{lab}_s": t for lab, t in zip(labels, times)}


def _chain(np_: Any, a: Any, b: Any, c: Any) -> Any:
    return np_.tanh(a * b + c) * np_.exp(-np_.abs(c)) + np_.log(a * a + 1)


def _load_contenders() -> list[tuple[str, Callable[[], object], Callable[[], object] | None]]:
    """(name, xlc call, jax call or None) for `under_load`."""
    import xlc.numpy as xnp

    import xlc
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None
    rng = np.random.default_rng(0)
    out = []
    x = rng.standard_normal((256, 512)).astype(np.float32)
    f = xlc.jit(xnp.tanh)
    g = jax.jit(jnp.tanh) if jax else None
    dx = jax.device_put(x) if jax else None
    out.append(("tanh f32[256,512] (~25 us, 2 threads)", lambda: f(x),
                (lambda: g(dx).block_until_ready()) if g else None))
    abc = [rng.standard_normal(1 << 22).astype(np.float32) for _ in range(3)]
    fc = xlc.jit(lambda a, b, c: _chain(xnp, a, b, c))
    gc = jax.jit(lambda a, b, c: _chain(jnp, a, b, c)) if jax else None
    dabc = [jax.device_put(v) for v in abc] if jax else []
    out.append(("elementwise chain (3 x 4M f32)", lambda: fc(*abc),
                (lambda: gc(*dabc).block_until_ready()) if gc else None))
    from tools.bench_models import models, transformer_block

    _, params, xt = models()["transformer_block"]
    ft = xlc.jit(lambda p, x: transformer_block(xnp, xlc.nn, xlc.lax, p, x))
    if jax:
        gt = jax.jit(lambda p, x: transformer_block(jnp, jax.nn, jax.lax, p, x))
        dp, dxt = jax.device_put(params), jax.device_put(xt)
    out.append(("transformer block (8 x 128 x 256)", lambda: ft(params, xt),
                (lambda: gt(dp, dxt).block_until_ready()) if jax else None))
    for _, a, b in out:  # compile outside the timed blocks
        a()
        if b is not None:
            b()
    return out


def under_load(reps: int) -> dict[str, Any]:
    """Idle and loaded (one busy process) times of xlc and JAX, side by side."""
    import subprocess

    cases = _load_contenders()
    fns = [fn for _, a, b in cases for fn in (a, b) if fn is not None]
    idle = timeit_interleaved(fns, reps)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        loaded = timeit_interleaved(fns, reps)
    finally:
        hog.kill()
        hog.wait()
    print(f"{'':40s} {'xlc idle':>10s} {'loaded':>10s} {'ratio':>6s} | {'jax idle':>10s} "
          f"{'loaded':>10s} {'ratio':>6s} | loaded jax/xlc")
    rows: dict[str, Any] = {}
    k = 0
    for name, _, b in cases:
        xi, xl = idle[k], loaded[k]
        row = f"{name:40s} {_fmt(xi)} {_fmt(xl)} {xl / xi:5.2f}x"
        rows[name] = {"xlc_idle_s": xi, "xlc_loaded_s": xl}
        k += 1
        if b is not None:
            ji, jl = idle[k], loaded[k]
            row += f" | {_fmt(ji)} {_fmt(jl)} {jl / ji:5.2f}x | {jl / xl:5.2f}x"
            rows[name].update(jax_idle_s=ji, jax_loaded_s=jl)
            k += 1
        print(row, flush=True)
    return rows


def big_chain(reps: int) -> dict[str, Any]:
    """The elementwise chain at 16M and 64M elements, xlc vs JAX (fresh output memory)."""
    import xlc.numpy as xnp

    import xlc
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None
    rows: dict[str, Any] = {}
    for n in (1 << 24, 1 << 26):
        rng = np.random.default_rng(0)
        abc = [rng.standard_normal(n).astype(np.float32) for _ in range(3)]
        f = xlc.jit(lambda a, b, c: _chain(xnp, a, b, c))
        fns: list[Callable[[], object]] = [lambda f=f, abc=abc: f(*abc)]
        dabc: list[Any] = []
        if jax is not None:
            g = jax.jit(lambda a, b, c: _chain(jnp, a, b, c))
            dabc = [jax.device_put(v) for v in abc]
            fns.append(lambda g=g, dabc=dabc: g(*dabc).block_until_ready())
        times = timeit_interleaved(fns, reps)
        row = f"elementwise chain, {n >> 20}M f32: xlc {_fmt(times[0])}"
        if jax is not None:
            row += f", jax {_fmt(times[1])} ({times[1] / times[0]:.2f}x)"
        print(row, flush=True)
        rows[str(n)] = times
        del abc, fns, dabc
    return rows


def main() -> None:
    from corpus import case_names  # type: ignore[import-not-found]

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--small", action="store_true", help="also the small corpus cases")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON")
    ap.add_argument("--sums", action="store_true",
                    help="also f32 sums at 1M/16M: time and error vs XLA, numpy; idle, loaded")
    ap.add_argument("--under-load", action="store_true",
                    help="idle vs one busy process: a small kernel, the chain, a transformer")
    ap.add_argument("--big", action="store_true", help="the chain at 16M and 64M elements")
    ap.add_argument("--sort", action="store_true",
                    help="only sort and top-k vs XLA and numpy (tools/bench_sort.py cases)")
    ns = ap.parse_args()
    if ns.sort:
        from bench_sort import bench_sort  # type: ignore[import-not-found]

        figures = bench_sort(ns.cases, ns.reps)
        if ns.json:
            ns.json.write_text(json.dumps(figures, indent=1))
        return
    if ns.under_load or ns.big:
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        figures = under_load(ns.reps) if ns.under_load else big_chain(ns.reps)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        if ns.json:
            ns.json.write_text(json.dumps(figures, indent=1))
        return
    names = ns.cases or [n for n in case_names() if n.startswith("bench_")]
    if ns.small and not ns.cases:
        names += case_names(include_benchmarks=False)
    unknown = sorted(set(names) - set(case_names()))
    if unknown:
        ap.error(f"unknown corpus case(s): {', '.join(unknown)}")
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores; > ~1 means the figures "
          "below are inflated by other work)")
    rows = [bench_case(name, ns.reps) for name in names]
    overhead = call_overhead(ns.reps)
    ratios = [r["times_s"]["xla"] / r["times_s"]["xlc"] for r in rows if "xla" in r["times_s"]]
    if ratios:
        geo = float(np.exp(np.mean(np.log(ratios))))
        faster = sum(1 for q in ratios if q >= 1.0)
        print(f"xla time / xlc time: geometric mean {geo:.2f}x over {len(ratios)} cases; "
              f"xlc as fast or faster on {faster}")
    sums = None
    if ns.sums:
        from bench_sums import bench_sums  # type: ignore[import-not-found]

        sums = bench_sums([1 << 20, 1 << 24], ns.reps)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if ns.json:
        ns.json.write_text(json.dumps({"cases": rows, "call_overhead": overhead, "sums": sums},
                                      indent=1))


if __name__ == "__main__":
    main()
