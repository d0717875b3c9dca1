"""Small GEMMs read in place vs packed: the measurement behind `gemm.IN_PLACE_BYTES` and
`gemm.IN_PLACE_FLOPS`.

For each shape m x n x k (f32, row-major A and B, one thread) it compiles the packed GEMM twice,
once with the in-place mode off (A and B packed into scratch) and once forced on (the
microkernel reads A's and B's rows where they are), times both interleaved (best of 9 rounds
of `--calls` calls, Python call overhead included in both) and prints the ratio in-place /
packed. With `--bt`, B is stored as Bᵀ (`a @ b.T`, B contiguous along k): the in-place
column is then the row-dot kernel (`gemm.uses_row_dots`, `gemm_rowdot.py`), the measurement
behind `gemm.ROWDOT_FLOPS` and `gemm.ROWDOT_MIN_K`. Usage:

    python tools/bench_gemm_in_place.py [--calls 1000] [--bt] [MxNxK ...]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from xlc.backend_cpu import gemm as G  # noqa: E402

BT_SHAPES = ["64x64x64", "48x48x96", "32x64x256", "64x64x128", "128x64x64", "64x64x32",
             "128x128x32", "96x96x64", "128x128x64"]
SHAPES = ["48x64x48", "64x64x64", "32x64x256", "48x96x200", "128x64x128", "64x64x250",
          "96x128x96", "128x128x128", "256x128x64", "64x256x128"]


def compile_pair(m: int, n: int, k: int, bt: bool = False) -> list[G.CompiledGemm]:
    """The packed and the in-place (with `bt`: row-dot, B stored as Bᵀ) GEMM of one shape
    (distinct specs: the batch stride, unused with one batch, differs, so neither reuses the
    other's machine code)."""
    saved = G.IN_PLACE_BYTES, G.IN_PLACE_FLOPS, G.ROWDOT_FLOPS, G.ROWDOT_MIN_K
    out = []
    b_st = (k * n, 1, k) if bt else (k * n, n, 1)
    try:
        for mode, limit in ((0, 0), (1, 1 << 62)):
            G.IN_PLACE_BYTES = G.IN_PLACE_FLOPS = G.ROWDOT_FLOPS = limit
            G.ROWDOT_MIN_K = 1 << 62 if limit == 0 else 1
            spec = G.GemmSpec(m, n, k, 1, (m * k + mode, k, 1), b_st, (m * n, n, 1))
            out.append(G.compile_gemm(spec, nthreads=1))
    finally:
        G.IN_PLACE_BYTES, G.IN_PLACE_FLOPS, G.ROWDOT_FLOPS, G.ROWDOT_MIN_K = saved
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shapes", nargs="*", help="MxNxK (default: a sweep)")
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--bt", action="store_true", help="B stored as B^T: row dots vs packed")
    args = ap.parse_args()
    shapes = args.shapes or (BT_SHAPES if args.bt else SHAPES)
    rng = np.random.default_rng(0)
    print(f"{'shape':>12} {'KiB':>5} {'MFLOP':>6} {'packed us':>10} {'in-place us':>12} "
          f"{'ratio':>6} {'chosen':>8}")
    for text in shapes:
        m, n, k = (int(x) for x in text.split("x"))
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        if args.bt:
            b = np.ascontiguousarray(b.T).T  # the same values, stored as B^T
        c = np.empty((m, n), np.float32)
        pair = compile_pair(m, n, k, args.bt)
        for g in pair:
            np.testing.assert_allclose(g(a, b), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
        best = [float("inf")] * 2
        for _ in range(9):
            for i, g in enumerate(pair):
                t = time.perf_counter()
                for _ in range(args.calls):
                    g(a, b, c)
                best[i] = min(best[i], (time.perf_counter() - t) / args.calls)
        spec = G.GemmSpec.for_arrays(a, b)
        chosen = ("row-dot" if G.uses_row_dots(spec) else "in-place" if G.reads_in_place(spec)
                  else "packed")
        print(f"{text:>12} {(m * k + k * n) * 4 >> 10:5d} {2 * m * n * k / 1e6:6.2f} "
              f"{best[0] * 1e6:10.2f} {best[1] * 1e6:12.2f} {best[1] / best[0]:6.2f} "
              f"{chosen:>8}")


if __name__ == "__main__":
    main()
