"""Benchmark the CPU backend against numpy (and JAX/XLA when importable), side by side.

Usage: python tools/bench_cpu.py [--reps N] [--small] [case ...]

For the four `bench_*` corpus cases it prints xlc time, numpy time (a hand-written numpy
equivalent), JAX time when `jax` is importable, effective GB/s (input + output bytes / time),
GFLOP/s (XLA's cost-analysis flops / time) and compile time. With --small it adds the small
corpus cases (xlc time and compile time next to the figures XLA recorded in meta.json, which
come from another run and are for orientation only). It ends with the per-call overhead of a
tiny function. Times are medians of `--reps` calls after one warm-up call.
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


def timeit(fn: Callable[[], object], reps: int) -> float:
    """Median seconds of `reps` calls after a warm-up call."""
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def _jax_fn(text_name: str, args: list[np.ndarray]) -> Callable[[], object] | None:
    try:
        import jax  # noqa: F401
        import jax.numpy as jnp
    except ImportError:
        return None
    ref = NUMPY.get(text_name)
    if ref is None:
        return None
    fns = {
        "bench_elementwise_chain":
            lambda a, b, c: jnp.tanh(a * b + c) * jnp.exp(-jnp.abs(c)) + jnp.log(a * a + 1),
        "bench_softmax": lambda x: jax.nn.softmax(x, axis=1),
        "bench_matmul": lambda a, b: a @ b,
        "bench_mlp": lambda x, w1, b1, w2, b2: jnp.maximum(x @ w1 + b1, 0) @ w2 + b2,
    }
    f = jax.jit(fns[text_name])
    dev = [jax.device_put(a) for a in args]
    return lambda: f(*dev).block_until_ready()


def bench_case(name: str, reps: int) -> None:
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    t0 = time.perf_counter()
    exe = compile_cpu(parse_module(case.module_text))
    compile_s = time.perf_counter() - t0
    args = case.inputs
    t_xlc = timeit(lambda: exe.run(args), reps)
    out_bytes = sum(o.nbytes for o in exe.run(args))
    nbytes = sum(a.nbytes for a in args) + out_bytes
    flops = float((case.meta.get("cost_analysis") or {}).get("flops", 0.0))
    row = [f"{name:26s}", f"xlc {t_xlc * 1e3:9.3f} ms", f"{nbytes / t_xlc / 1e9:7.1f} GB/s",
           f"{flops / t_xlc / 1e9:7.1f} GFLOP/s", f"compile {compile_s * 1e3:7.1f} ms"]
    if name in NUMPY:
        t_np = timeit(lambda: NUMPY[name](*args), reps)
        row.append(f"numpy {t_np * 1e3:9.3f} ms ({t_np / t_xlc:5.2f}x)")
        jf = _jax_fn(name, args)
        if jf is not None:
            t_jax = timeit(jf, reps)
            row.append(f"jax {t_jax * 1e3:9.3f} ms ({t_jax / t_xlc:5.2f}x)")
    else:
        xla = (case.meta.get("xla_run_time_s") or {}).get("median")
        nump = (case.meta.get("numpy_run_time_s") or {})
        nump = nump.get("median") if isinstance(nump, dict) else nump
        if xla:
            row.append(f"(recorded: xla {xla * 1e6:8.1f} us")
            row.append(f"numpy {nump * 1e6:8.1f} us)" if nump else ")")
    print("  ".join(row), flush=True)


def call_overhead(reps: int) -> None:
    text = """HloModule tiny
ENTRY e {
  a = f32[1] parameter(0)
  b = f32[1] parameter(1)
  ROOT r = f32[1] add(a, b)
}"""
    exe = compile_cpu(parse_module(text))
    a = np.ones(1, np.float32)
    t = timeit(lambda: exe.run([a, a]), max(reps, 2000))
    t_np = timeit(lambda: np.add(a, a), max(reps, 2000))
    print(f"per-call overhead (f32[1] add): xlc {t * 1e6:.2f} us, numpy ufunc {t_np * 1e6:.2f} us")


def main() -> None:
    from corpus import case_names  # type: ignore[import-not-found]

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--small", action="store_true", help="also the small corpus cases")
    ns = ap.parse_args()
    names = ns.cases or [n for n in case_names() if n.startswith("bench_")]
    if ns.small and not ns.cases:
        names += case_names(include_benchmarks=False)
    import os

    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores; > ~1 means the figures "
          "below are inflated by other work)")
    for name in names:
        bench_case(name, ns.reps)
    call_overhead(ns.reps)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
