"""Load time of `.xlc` files against compile time, on every corpus case.

For each case (`module.hlo`): compile it for the CPU, serialize it, load the file back, and
compile it twice more through a fresh compile cache (the second time is a cache hit). Prints
the totals and the median ratios; a load must cost a small fraction of a compile, and a cache
hit about a load. The run-time libraries (GEMM, thread pool) are built once before timing, as
they are once per process.

    python tools/bench_load.py [--corpus ../shared/corpus]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import xlc  # noqa: E402
from xlc.options import CompileOptions  # noqa: E402


def _timed(f: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    r = f()
    return r, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    args = ap.parse_args()
    cases = sorted(p for p in (args.corpus / "cases").iterdir() if (p / "module.hlo").exists())
    if not cases:
        sys.exit(f"no corpus cases under {args.corpus}")
    with tempfile.TemporaryDirectory() as tmp:
        opts = CompileOptions(backend="cpu", cache_dir=f"{tmp}/cache")
        # a case with a dot, so the GEMM library is built here and not inside a timing
        first = next((c for c in cases if c.name == "bench_mlp"), cases[0])
        warm = xlc.compile((first / "module.hlo").read_text(), backend="cpu")
        warm.serialize(f"{tmp}/warm.xlc")
        xlc.load(f"{tmp}/warm.xlc")
        rows = []
        for case in cases:
            text = (case / "module.hlo").read_text()
            path = f"{tmp}/{case.name}.xlc"
            compiled, t_compile = _timed(lambda t=text: xlc.compile(t, backend="cpu"))
            compiled.serialize(path)
            _, t_load = _timed(lambda p=path: xlc.load(p))
            xlc.compile(text, backend="cpu", options=opts)
            _, t_hit = _timed(lambda t=text: xlc.compile(t, backend="cpu", options=opts))
            rows.append((case.name, t_compile, t_load, t_hit))
            print(f"{case.name:28s} compile {t_compile * 1e3:8.1f} ms  load "
                  f"{t_load * 1e3:6.1f} ms  cache hit {t_hit * 1e3:6.1f} ms")
    total = [sum(r[i] for r in rows) * 1e3 for i in (1, 2, 3)]
    print(f"{len(rows)} cases: compile {total[0]:.0f} ms, load {total[1]:.0f} ms, cache hit "
          f"{total[2]:.0f} ms; median compile/load "
          f"{statistics.median(r[1] / r[2] for r in rows):.1f}x, median hit/load "
          f"{statistics.median(r[3] / r[2] for r in rows):.2f}x")


if __name__ == "__main__":
    main()
