"""What run-time profiling costs and how well it covers a call (docs/profiling.md).

Usage: python tools/bench_profile.py [--reps N]

For the transformer block of tools/bench_models.py and for a chain of 200 tiny kernels it
prints the median call time profiled and unprofiled (alternating blocks,
`bench_cpu.timeit_interleaved`), the overhead per recorded event, and the share of each call's
own span that its top-level kernels cover (issue 19 asks for 90 % at least).
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import xlc.lax as lax  # noqa: E402
import xlc.nn as nn  # noqa: E402
import xlc.numpy as xnp  # noqa: E402

from tools.bench_cpu import timeit_interleaved  # noqa: E402
from tools.bench_models import models, transformer_block  # noqa: E402
from xlc.api import Jitted  # noqa: E402
from xlc.backend_cpu import profiler  # noqa: E402
from xlc.options import default_options  # noqa: E402


def chain(x: Any) -> Any:
    """200 dependent tiny kernels (64 elements each, kept apart by optimization barriers):
    the hooks' cost dominates."""
    for k in range(200):
        x = xnp.exp(-x) + np.float32(k % 3)
        x = lax.optimization_barrier(x)
    return x


def measure(name: str, fn: Any, args: tuple, reps: int) -> None:
    """Print profiled vs unprofiled time, per-event cost and kernel coverage of `fn(*args)`."""
    plain = Jitted(fn).lower(*args).compile()
    prof = Jitted(fn, options=default_options().replace(profile=True)).lower(*args).compile()
    np.testing.assert_array_equal(np.asarray(prof(*args)), np.asarray(plain(*args)))
    t_plain, t_prof = timeit_interleaved([lambda: plain(*args), lambda: prof(*args)], reps)
    profiler.collect()
    for _ in range(reps):
        prof(*args)
    profile = profiler.collect()
    calls = profile.calls()
    events = len(profile.events) / max(len(calls), 1)
    cover = [sum(k.t1 - k.t0 for k in profile.kernels_in(c)) / (c.t1 - c.t0) for c in calls]
    print(f"{name}: unprofiled {t_plain * 1e6:9.1f} us, profiled {t_prof * 1e6:9.1f} us "
          f"({100 * (t_prof / t_plain - 1):+.1f} %), {events:.0f} events/call "
          f"({(t_prof - t_plain) * 1e9 / events:+.0f} ns/event); top-level kernels cover "
          f"{100 * statistics.median(cover):.1f} % of the call (min {100 * min(cover):.1f} %)")


def main() -> None:
    import logging

    logging.getLogger("xlc.profile").setLevel(logging.ERROR)  # the timing loops fill the buffer
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ns = ap.parse_args()
    _, p, x = models()["transformer_block"]
    measure("transformer_block", lambda p, x: transformer_block(xnp, nn, lax, p, x), (p, x),
            ns.reps)
    measure("chain_200", chain, (np.linspace(0, 1, 64, dtype=np.float32),), ns.reps * 10)


if __name__ == "__main__":
    main()
