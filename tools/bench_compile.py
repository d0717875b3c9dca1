"""Compile time of stacked transformer blocks and of a conv block, xlc against jax.jit.

Usage: python tools/bench_compile.py [--blocks 1,2,4,8,16] [--no-conv] [--profile] [--baseline]
                                    [--repeat N] [--cpu-time]

Each model is traced once per compiler from the same source (`tools/bench_models.py`); the
time is `lower(...).compile()` for xlc (the persistent compile cache off) and
`jit(...).lower(...).compile()` for JAX, in one process, so both see the same machine load.
Shapes are those of bench_models (d=256, batch 8 x 128 tokens) so each block is one real
transformer layer. `--profile` prints xlc's own stage times (HLO passes, emission, LLVM) as
recorded by the executable. With `--repeat N` each time is the best of N compiles (the least
disturbed by other work on the machine). `--baseline` also times xlc as it was before
identical kernels were shared at emission and merged and the garbage collector paused (all
three switched off by patching), in the same run. `--cpu-time` reports the process's CPU
time (all its threads) instead of wall time: on a machine shared with other work, wall time
mostly measures the others.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.pop("XLC_CACHE_DIR", None)

import xlc.lax  # noqa: E402
import xlc.numpy as xnp  # noqa: E402

import xlc  # noqa: E402
from tools.bench_models import conv_block, models, transformer_block  # noqa: E402


def stacked(n: int) -> Any:
    """A model applying `n` transformer blocks, each with its own parameters."""
    def model(np_: Any, nn: Any, lax: Any, ps: list, x: Any) -> Any:
        for p in ps:
            x = transformer_block(np_, nn, lax, p, x)
        return x
    return model


CLOCK = time.perf_counter


def _xlc_compile(fn: Any, params: Any, x: np.ndarray) -> tuple[float, dict]:
    f = xlc.jit(lambda p, x: fn(xnp, xlc.nn, xlc.lax, p, x))
    lowered = f.lower(params, x)
    t0 = CLOCK()
    compiled = lowered.compile()
    dt = CLOCK() - t0
    return dt, dict(getattr(compiled._exe, "timings", None) or {})


@contextlib.contextmanager
def _without_dedupe_and_gc_pause() -> Any:
    """xlc's CPU compile without kernel sharing, function merging or pausing the collector."""
    from xlc.backend_cpu import compiler
    from xlc.backend_cpu.emitter import CpuEmitter

    saved = compiler.dedupe_functions, compiler.gc_paused
    compiler.dedupe_functions = lambda _m: 0  # type: ignore[assignment]
    compiler.gc_paused = contextlib.nullcontext  # type: ignore[assignment]
    CpuEmitter.share_units = False
    try:
        yield
    finally:
        compiler.dedupe_functions, compiler.gc_paused = saved
        CpuEmitter.share_units = True


def _jax_compile(fn: Any, params: Any, x: np.ndarray) -> float | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    g = jax.jit(lambda p, x: fn(jnp, jax.nn, jax.lax, p, x))
    lowered = g.lower(params, x)
    t0 = CLOCK()
    lowered.compile()
    return CLOCK() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", default="1,2,4,8,16")
    ap.add_argument("--no-conv", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--baseline", action="store_true")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--cpu-time", action="store_true")
    ns = ap.parse_args()
    global CLOCK
    if ns.cpu_time:
        CLOCK = time.process_time
    table = models()
    _fn, tb, x = table["transformer_block"]
    cases: list[tuple[str, Any, Any, np.ndarray]] = [
        (f"transformer x{n}", stacked(n), [dict(tb) for _ in range(n)], x)
        for n in (int(s) for s in ns.blocks.split(",") if s)]
    if not ns.no_conv:
        _c, cb, cx = table["conv_block"]
        cases.append(("conv_block", conv_block, cb, cx))
    # warm-up: one-time costs (run-time libraries, JAX's backend start) are not per model
    _xlc_compile(cases[0][1], cases[0][2], cases[0][3])
    _jax_compile(cases[0][1], cases[0][2], cases[0][3])
    head = f"{'model':16s} {'xlc ms':>9s} {'jax ms':>9s} {'xlc/jax':>8s}"
    print(head + (f" {'before ms':>10s} {'before/now':>10s}" if ns.baseline else ""), flush=True)
    for name, fn, params, inp in cases:
        tx, stages = min((_xlc_compile(fn, params, inp) for _ in range(ns.repeat)),
                         key=lambda r: r[0])
        tjs = [_jax_compile(fn, params, inp) for _ in range(ns.repeat)]
        tj = min(tjs) if tjs[0] is not None else None  # type: ignore[type-var]
        row = f"{name:16s} {tx * 1e3:9.1f} "
        row += f"{tj * 1e3:9.1f} {tx / tj:8.2f}" if tj else f"{'-':>9s} {'-':>8s}"
        if ns.baseline:
            with _without_dedupe_and_gc_pause():
                tb = min(_xlc_compile(fn, params, inp)[0] for _ in range(ns.repeat))
            row += f" {tb * 1e3:10.1f} {tb / tx:10.2f}"
        if ns.profile and stages:
            row += "  " + " ".join(f"{k}={v * 1e3:.0f}ms" for k, v in stages.items())
        print(row, flush=True)


if __name__ == "__main__":
    main()
