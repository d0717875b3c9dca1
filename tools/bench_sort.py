"""Sort and top-k on the CPU: xlc against jax.jit (XLA) and numpy, side by side in one run.

Usage: python tools/bench_sort.py [--reps N] [case ...]   (or tools/bench_cpu.py --sort)

Cases: `topk_1m` (k=10 of 1M floats), `topk_rows` (k=40 over each row of 16x32000),
`sort_1m` (1M floats), `sort_rows` (each row of 64x16384), `argsort_1m` (1M floats with their
indices, as `argsort` sorts them). numpy's contenders are `np.argpartition` + a sort of the k
survivors for top-k and `np.sort` / `np.argsort(kind="stable")` for the sorts. Times are
medians of `--reps` interleaved rounds (tools/bench_cpu.py's method); read the ratios.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import xlc.lax  # noqa: E402
import xlc.numpy as xnp  # noqa: E402

import xlc  # noqa: E402
from tools.bench_cpu import timeit_interleaved  # noqa: E402


def _np_topk(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    part = np.argpartition(-x, k - 1, axis=-1)[..., :k]
    vals = np.take_along_axis(x, part, axis=-1)
    order = np.argsort(-vals, axis=-1, kind="stable")
    return np.take_along_axis(vals, order, axis=-1), np.take_along_axis(part, order, axis=-1)


def cases() -> dict[str, tuple[np.ndarray, Callable[[Any, Any], Any], Callable[..., Any]]]:
    """name -> (input, fn(lax_module, numpy_module) traced by xlc and jax, numpy version)."""
    rng = np.random.default_rng(0)
    big = rng.standard_normal(1 << 20).astype(np.float32)
    rows = rng.standard_normal((16, 32000)).astype(np.float32)
    srows = rng.standard_normal((64, 16384)).astype(np.float32)
    return {
        "topk_1m": (big, lambda lax, np_: lambda x: lax.top_k(x, 10),
                    lambda x: _np_topk(x, 10)),
        "topk_rows": (rows, lambda lax, np_: lambda x: lax.top_k(x, 40),
                      lambda x: _np_topk(x, 40)),
        "sort_1m": (big, lambda lax, np_: lambda x: np_.sort(x), np.sort),
        "sort_rows": (srows, lambda lax, np_: lambda x: np_.sort(x, axis=-1),
                      lambda x: np.sort(x, axis=-1)),
        "argsort_1m": (big, lambda lax, np_: lambda x: np_.argsort(x),
                       lambda x: np.argsort(x, kind="stable")),
    }


def bench_sort(names: list[str], reps: int) -> list[dict[str, Any]]:
    """Time the named cases (all when empty), print one line each and return the figures."""
    table = cases()
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None
    rows = []
    for name in names or list(table):
        x, make, np_fn = table[name]
        f = xlc.jit(make(xlc.lax, xnp))
        got = f(x)
        fns: list[Callable[[], object]] = [lambda f=f, x=x: f(x),
                                           lambda fn=np_fn, x=x: fn(x)]
        same = None
        if jax is not None:
            g = jax.jit(make(jax.lax, jnp))
            dx = jax.device_put(x)
            want = g(dx)
            fns.append(lambda g=g, dx=dx: jax.block_until_ready(g(dx)))
            same = all(np.array_equal(np.asarray(a), np.asarray(b))
                       for a, b in zip(jax.tree_util.tree_leaves(got),
                                       jax.tree_util.tree_leaves(want)))
        t = timeit_interleaved(fns, reps)
        row = f"{name:11s} xlc {t[0] * 1e3:8.3f} ms  numpy {t[1] * 1e3:8.3f} ms " \
              f"({t[1] / t[0]:5.2f}x)"
        if jax is not None:
            row += f"  XLA {t[2] * 1e3:8.3f} ms ({t[2] / t[0]:5.2f}x)  same as XLA: {same}"
        print(row, flush=True)
        rows.append({"case": name, "times_s": dict(zip(("xlc", "numpy", "xla"), t)),
                     "same_as_xla": same})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--reps", type=int, default=20)
    ns = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores)")
    bench_sort(ns.cases, ns.reps)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
