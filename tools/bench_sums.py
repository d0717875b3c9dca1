"""Time and accuracy of long f32 sums: xlc against XLA (jax) and numpy, idle and loaded.

Usage: python tools/bench_sums.py [--reps N] [--sizes 1M,16M] [--no-load]
(also run by `tools/bench_cpu.py --sums`).

For each size it sums the same f32 vector with xlc (an HLO `reduce` of f32[n] with an `add`
reducer, compiled for the CPU), with `jax.jit(jnp.sum)` when jax is importable, and with
`np.sum`, timing them interleaved (`bench_cpu.timeit_interleaved`) and printing each one's
relative error against the exact sum (math.fsum in f64), for two inputs: uniform [0, 1)
values, and n copies of 0.1 (every add rounds the same way: the hard case for a long
accumulation). Then it does it all again with one competing busy process (`while True: pass`
in a subprocess), which is what a user's machine with other work looks like.
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cpu import _fmt, timeit_interleaved  # noqa: E402

from xlc.backend_cpu import compile_cpu  # noqa: E402
from xlc.hlo.parser import parse_module  # noqa: E402

SUM = """HloModule sum_{n}
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}
ENTRY e {{
  x = f32[{n}] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(x, z), dimensions={{0}}, to_apply=add
}}
"""


def contenders(n: int, x: np.ndarray) -> dict[str, Callable[[], Any]]:
    """name -> a call returning the f32 sum of `x` (xlc, xla when jax is importable, numpy)."""
    exe = compile_cpu(parse_module(SUM.format(n=n)))
    out: dict[str, Callable[[], Any]] = {"xlc": lambda: exe.run([x])[0]}
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None
    if jax is not None:
        f = jax.jit(jnp.sum)
        dx = jax.device_put(x)
        out["xla"] = lambda: f(dx).block_until_ready()
    out["numpy"] = lambda: np.sum(x)
    return out


def bench_sizes(sizes: list[int], reps: int, label: str) -> list[dict[str, Any]]:
    """Print and return time and relative error of each contender for each size."""
    rows = []
    for n in sizes:
        for data in ("uniform", "0.1"):
            x = (np.random.default_rng(n).uniform(0, 1, n) if data == "uniform"
                 else np.full(n, 0.1)).astype(np.float32)
            exact = math.fsum(x.astype(np.float64))
            fns = contenders(n, x)
            times = dict(zip(fns, timeit_interleaved(list(fns.values()), reps)))
            errs = {k: abs(float(np.asarray(f())) - exact) / exact for k, f in fns.items()}
            print(f"f32 sum n={n:>10,} {data:7s} {label:6s}  " + "  ".join(
                f"{k} {_fmt(times[k])} err {errs[k]:.1e}" for k in fns), flush=True)
            rows.append({"n": n, "data": data, "load": label, "times_s": times,
                         "rel_err": errs})
    return rows


def bench_sums(sizes: list[int], reps: int, loaded: bool = True) -> list[dict[str, Any]]:
    """`bench_sizes` idle, then (with `loaded`) with one busy competing process."""
    rows = bench_sizes(sizes, reps, "idle")
    if loaded:
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            rows += bench_sizes(sizes, reps, "loaded")
        finally:
            busy.kill()
            busy.wait()
    return rows


def _size(text: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20}.get(text[-1].upper(), 1)
    return int(text[:-1] if mult > 1 else text) * mult


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--sizes", default="1M,16M", help="comma-separated, K/M suffixes")
    ap.add_argument("--no-load", action="store_true", help="skip the loaded run")
    ns = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    bench_sums([_size(s) for s in ns.sizes.split(",")], ns.reps, not ns.no_load)


if __name__ == "__main__":
    main()
