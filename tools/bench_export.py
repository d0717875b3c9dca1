"""Per-call overhead of an exported program (`Compiled.export`) called from C, against
`Compiled.__call__` in Python, for a tiny program (f32[4] add by default).

The C side is timed in C (`clock_gettime(CLOCK_MONOTONIC)` around a loop of calls of
`NAME_run` with preallocated buffers); the best of several rounds is reported per call.

    python tools/bench_export.py [--n 4] [--calls 1000000] [--rounds 5]
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import xlc

BENCH_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tiny.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char** argv) {
  long calls = atol(argv[1]);
  int rounds = atoi(argv[2]), nthreads = atoi(argv[3]);
  void* x = aligned_alloc(64, (tiny_ARG0_BYTES + 63) / 64 * 64);
  void* y = aligned_alloc(64, (tiny_ARG1_BYTES + 63) / 64 * 64);
  void* z = aligned_alloc(64, (tiny_RESULT0_BYTES + 63) / 64 * 64);
  memset(x, 0, tiny_ARG0_BYTES);
  memset(y, 0, tiny_ARG1_BYTES);
  void* temp = tiny_alloc_temp();
  const void* args[] = {x, y};
  void* results[] = {z};
  double best = 1e30;
  for (int r = 0; r < rounds; r++) {
    double t0 = now();
    for (long i = 0; i < calls; i++)
      if (tiny_run(args, results, temp, nthreads)) return 1;
    double per = (now() - t0) / calls;
    if (per < best) best = per;
  }
  printf("%.1f\n", best * 1e9);
  return 0;
}
"""


def _c_overhead_ns(directory: Path, kind: str, calls: int, rounds: int,
                   nthreads: int) -> float:
    src = directory / "bench.c"
    src.write_text(BENCH_C)
    exe = directory / f"bench_{kind}"
    lib = [str(directory / "libtiny.a"), "-lm", "-lpthread"] if kind == "static" else \
        [f"-L{directory}", "-ltiny", f"-Wl,-rpath,{directory}"]
    subprocess.run(["cc", "-O2", f"-I{directory}", str(src), *lib, "-o", str(exe)],
                   check=True)
    out = subprocess.run([str(exe), str(calls), str(rounds), str(nthreads)], check=True,
                         capture_output=True, text=True)
    return float(out.stdout)


def _python_overhead_ns(compiled: xlc.api.Compiled, n: int, calls: int,
                        rounds: int) -> float:
    x, y = np.zeros(n, np.float32), np.zeros(n, np.float32)
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            compiled(x, y)
        best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e9


def main() -> int:
    """Print the table (ns per call)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4, help="elements of the f32 vectors")
    ap.add_argument("--calls", type=int, default=1_000_000, help="calls per C round")
    ap.add_argument("--rounds", type=int, default=5, help="rounds (best is reported)")
    args = ap.parse_args()
    if shutil.which("cc") is None:
        print("needs cc", file=sys.stderr)
        return 1
    text = (f"HloModule tiny\nENTRY e {{ x = f32[{args.n}] parameter(0) y = f32[{args.n}] "
            f"parameter(1) ROOT z = f32[{args.n}] add(x, y) }}")
    compiled = xlc.compile(text, backend="cpu")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        compiled.export(d, "tiny")
        for kind in ("static", "shared"):
            for nthreads in (0, 1):
                rows.append((f"C, lib{'tiny.a' if kind == 'static' else 'tiny.so'}, "
                             f"nthreads={nthreads}",
                             _c_overhead_ns(d, kind, args.calls, args.rounds, nthreads)))
    py_calls = max(1000, args.calls // 50)
    rows.append(("Python, Compiled.__call__", _python_overhead_ns(compiled, args.n, py_calls,
                                                                  args.rounds)))
    print(f"f32[{args.n}] add: time per call (best of {args.rounds} rounds)")
    print(f"{'caller':<34}{'ns/call':>10}")
    for label, ns in rows:
        print(f"{label:<34}{ns:>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
