"""Convolution algorithms on the CPU side by side: im2col (one patch matrix, one GEMM), row
groups (one patch matrix per row of the window), per-position GEMMs (no patch matrix) and
XLA:CPU (jax, when importable); what `ConvToDot`'s cost model picks; each one's temp bytes.

Usage: python tools/bench_conv.py [--reps N] [--threads T] [--shape NAME ...] [--memory]

Every shape is one `convolution` instruction in HLO text (f32). Times are medians of --reps
calls taken round-robin (`timeit_round_robin`: each round calls every contender once untimed,
once timed), so drift on this shared, noisy machine touches all alike; read the ratios, and
repeat the run: they move by ~5% between runs on the idle 2-core VM, by up to 30% while other
jobs load it (memory bandwidth contention then costs per-position's adds 30-50% more).
`temp` is the buffer assignment's temp bytes (XLA: its memory analysis).

`--memory` prints temp bytes of whole programs instead (`memory_table`): single convolutions,
`bench_models.conv_block` and SGD training steps, against XLA's figure; `im2col` there also
lowers the base-dilated convolutions of the training steps (the input gradients of strided
convolutions), which the im2col-only pass left to the direct emitter. The shared corpus
(`tools/memory_vs_xla.py`) holds no convolution, hence these.
"""
from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from xlc.backend_cpu import compiler  # noqa: E402
from xlc.backend_cpu.compiler import compile_cpu  # noqa: E402
from xlc.hlo.parser import parse_module  # noqa: E402
from xlc.options import default_options  # noqa: E402
from xlc.passes import conv_to_dot  # noqa: E402
from xlc.passes.conv_lowering import geometry  # noqa: E402

# name: (lhs dims, rhs dims, window, dim_labels (jax's NHWC/HWIO or NCHW/OIHW), strides, pad)
SHAPES: dict[str, tuple[tuple[int, ...], tuple[int, ...], str, str]] = {
    "nhwc 8x32x32x32 3x3 ->64": ((8, 32, 32, 32), (3, 3, 32, 64), "3x3 s1 p1", "b01f_01io->b01f"),
    "nhwc 8x32x32x32 3x3/2 ->64": ((8, 32, 32, 32), (3, 3, 32, 64), "3x3 s2 p1",
                                   "b01f_01io->b01f"),
    "nhwc 8x16x16x128 3x3 ->128": ((8, 16, 16, 128), (3, 3, 128, 128), "3x3 s1 p1",
                                   "b01f_01io->b01f"),
    "nhwc 1x16x16x8 3x3 ->16": ((1, 16, 16, 8), (3, 3, 8, 16), "3x3 s1 p1", "b01f_01io->b01f"),
    "nchw 8x32x32x32 3x3 ->64": ((8, 32, 32, 32), (64, 32, 3, 3), "3x3 s1 p1",
                                 "bf01_oi01->bf01"),
    "nchw 16x16x32x32 3x3 ->32": ((16, 16, 32, 32), (32, 16, 3, 3), "3x3 s1 p1",
                                  "bf01_oi01->bf01"),
    "nchw 1x8x16x16 3x3 ->16": ((1, 8, 16, 16), (16, 8, 3, 3), "3x3 s1 p1", "bf01_oi01->bf01"),
    "nwc 8x256x64 k5 ->64": ((8, 256, 64), (5, 64, 64), "5 s1 p2", "b0f_0io->b0f"),
}


def conv_text(lhs: tuple[int, ...], rhs: tuple[int, ...], window: str, labels: str) -> str:
    """One convolution as an HLO module (f32; window as 'KxK sS pP': sizes, stride, pad)."""
    sizes, stride, pad = window.split()
    ks = [int(k) for k in sizes.split("x")]
    s, p = int(stride[1:]), int(pad[1:])
    lab_in, rest = labels.split("_")
    lab_k, lab_out = rest.split("->")
    spatial = [lhs[lab_in.index(str(i))] for i in range(len(ks))]
    out_sp = [(n + 2 * p - k) // s + 1 for n, k in zip(spatial, ks)]
    out = [0] * len(lhs)
    out[lab_out.index("b")] = lhs[lab_in.index("b")]
    out[lab_out.index("f")] = rhs[lab_k.index("o")]
    for i, n in enumerate(out_sp):
        out[lab_out.index(str(i))] = n
    win = (f"size={'x'.join(map(str, ks))} stride={'x'.join([str(s)] * len(ks))} "
           f"pad={'x'.join([f'{p}_{p}'] * len(ks))}")
    dims = ",".join
    return (f"HloModule conv\nENTRY e {{\n  a = f32[{dims(map(str, lhs))}] parameter(0)\n"
            f"  k = f32[{dims(map(str, rhs))}] parameter(1)\n"
            f"  ROOT c = f32[{dims(map(str, out))}] convolution(a, k), window={{{win}}}, "
            f"dim_labels={labels}\n}}\n")


def timeit_round_robin(fns: list[Callable[[], object]], reps: int) -> list[float]:
    """Median seconds per call of each of `fns`: `reps` rounds, each calling every function
    once untimed (caches, worker threads) and once timed, so that the load of the rest of
    this shared machine, which drifts by 2x within seconds, falls on every contender alike."""
    ts: list[list[float]] = [[] for _ in fns]
    for fn in fns:
        fn()
    for _ in range(reps):
        for k, fn in enumerate(fns):
            fn()
            t = time.perf_counter()
            fn()
            ts[k].append(time.perf_counter() - t)
    return [statistics.median(t) for t in ts]


@contextmanager
def forced_group(group: int | None) -> Iterator[None]:
    """Compile with ConvToDot forced to `group` positions per GEMM (None: its own choice)."""
    orig = compiler.ConvToDot
    compiler.ConvToDot = functools.partial(conv_to_dot.ConvToDot, group=group)  # type: ignore
    try:
        yield
    finally:
        compiler.ConvToDot = orig  # type: ignore[misc]


def xla_runner(lhs: np.ndarray, rhs: np.ndarray, window: str, labels: str
               ) -> tuple[Callable[[], object], int] | None:
    """(run, temp bytes) of the same convolution on XLA:CPU, or None without jax."""
    try:
        import jax
        from jax import lax
    except ImportError:
        return None
    sizes, stride, pad = window.split()
    n = len(sizes.split("x"))
    s, p = int(stride[1:]), int(pad[1:])
    lab_in, rest = labels.split("_")
    lab_k, lab_out = rest.split("->")
    jl = {"b": "N", "f": "C", "i": "I", "o": "O"}
    sp = "HWD"[:n] if n > 1 else "W"

    def spell(lab: str) -> str:
        return "".join(jl.get(c, sp[int(c)] if c.isdigit() else c) for c in lab)

    dn = (spell(lab_in), spell(lab_k), spell(lab_out))
    fn = jax.jit(lambda x, w: lax.conv_general_dilated(x, w, (s,) * n, [(p, p)] * n,
                                                       dimension_numbers=dn))
    compiled = fn.lower(lhs, rhs).compile()
    stats = compiled.memory_analysis()
    temp = int(stats.temp_size_in_bytes) if stats is not None else 0
    x, w = jax.device_put(lhs), jax.device_put(rhs)
    return (lambda: compiled(x, w).block_until_ready()), temp


def bench_shape(name: str, reps: int, threads: int) -> dict[str, Any]:
    """Time one shape under each algorithm (im2col, one window row per dot, one position
    per dot, the cost model's pick, XLA); returns {label: (ms, temp bytes)} and the pick's
    group size under "group"."""
    lhs_dims, rhs_dims, window, labels = SHAPES[name]
    text = conv_text(lhs_dims, rhs_dims, window, labels)
    rng = np.random.default_rng(0)
    lhs = rng.standard_normal(lhs_dims).astype(np.float32)
    rhs = rng.standard_normal(rhs_dims).astype(np.float32)
    conv = next(i for i in parse_module(text).entry.instructions  # type: ignore[union-attr]
                if i.opcode.text == "convolution")
    geo = geometry(conv)
    picked = conv_to_dot.ConvToDot(threads=threads).choose(conv)
    groups = {"im2col": geo.positions, "rows": geo.window[-1].size, "per-pos": 1,
              "pick": picked}
    opts = default_options().replace(threads=threads)
    labels_: list[str] = []
    runs: list[Callable[[], object]] = []
    temps: list[int] = []
    ref = None
    for label, g in groups.items():
        if label == "rows" and g in (1, geo.positions):
            continue
        with forced_group(g):
            exe = compile_cpu(parse_module(text), opts)
        out = exe.run([lhs, rhs])[0]
        if ref is None:
            ref = out
        np.testing.assert_allclose(out, ref, rtol=2e-3, atol=2e-3)
        labels_.append(label)
        runs.append(functools.partial(exe.run, [lhs, rhs]))
        temps.append(exe.optimized.memory_stats()["temp_bytes"] if exe.optimized else 0)
    xla = xla_runner(lhs, rhs, window, labels)
    if xla is not None:
        labels_.append("xla")
        runs.append(xla[0])
        temps.append(xla[1])
    times = timeit_round_robin(runs, reps)
    row: dict[str, Any] = {lab: (t * 1e3, tb) for lab, t, tb in zip(labels_, times, temps)}
    row["group"] = picked
    return row


def _programs() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """The programs of --memory: jax functions and example arguments."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from tools.bench_models import conv_block

    rng = np.random.default_rng(0)

    def f32(*s: int) -> np.ndarray:
        return (0.1 * rng.standard_normal(s)).astype(np.float32)

    def conv(x: Any, w: Any, stride: int = 1, labels: tuple[str, str, str] = ("NCHW", "OIHW",
                                                                           "NCHW")) -> Any:
        return lax.conv_general_dilated(x, w, (stride, stride), "SAME",
                                        dimension_numbers=labels)

    def block(p: Any, x: Any) -> Any:
        return conv_block(jnp, jax.nn, lax, p, x)

    def sgd(loss: Callable[..., Any]) -> Callable[..., Any]:
        def step(p: Any, *batch: Any) -> Any:
            g = jax.grad(loss)(p, *batch)
            return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g)
        return step

    nhwc = ("NHWC", "HWIO", "NHWC")

    def cnn_loss(p: Any, x: Any, y: Any) -> Any:
        h = jnp.maximum(conv(x, p["c1"], 1, nhwc), 0.0)
        h = jnp.maximum(conv(h, p["c2"], 2, nhwc), 0.0)
        return jnp.mean((h.mean(axis=(1, 2)) @ p["w"] - y) ** 2)

    cb = {"c1": f32(32, 16, 3, 3), "c2": f32(32, 32, 3, 3), "fc": f32(32, 10)}
    cnn = {"c1": f32(3, 3, 3, 16), "c2": f32(3, 3, 16, 32), "w": f32(32, 10)}
    return {
        "conv nchw 1x8x16x16 ->16": (conv, (f32(1, 8, 16, 16), f32(16, 8, 3, 3))),
        "conv nchw 8x32x32x32 ->64": (conv, (f32(8, 32, 32, 32), f32(64, 32, 3, 3))),
        "conv nhwc 8x32x32x32 ->64": (lambda x, w: conv(x, w, 1, nhwc),
                                      (f32(8, 32, 32, 32), f32(3, 3, 32, 64))),
        "conv_block (bench_models)": (block, (cb, f32(16, 16, 32, 32))),
        "conv_block sgd step": (sgd(lambda p, x: jnp.mean(block(p, x) ** 2)),
                                (cb, f32(16, 16, 32, 32))),
        "cnn nhwc sgd step": (sgd(cnn_loss), (cnn, f32(8, 32, 32, 3), f32(8, 10))),
    }


def _program_temp(text: str, group: int | None = None, limit: int | None = None) -> int:
    """xlc's temp bytes for HLO `text` on the CPU pipeline (`group` forced, `limit` set)."""
    from xlc.api import optimize_module

    opts = default_options().replace(memory_limit=limit)
    with forced_group(group):
        opt = optimize_module(parse_module(text), "cpu", opts)
    return int(opt.assignment.stats()["temp_bytes"])


def memory_table() -> None:
    """--memory: temp bytes of whole programs (jax -> HLO -> xlc's CPU pipeline) against XLA's
    memory analysis: xlc with every convolution as im2col, with the default choice (no
    limit), and with memory_limit = XLA's own peak (entry parameters + outputs + XLA temp)."""
    import jax

    print(f"{'program':28s} {'XLA temp':>10s} {'im2col':>10s} {'default':>10s} "
          f"{'limit=XLA':>10s} {'(limit)':>10s}")
    for name, (fn, args) in _programs().items():
        lowered = jax.jit(fn).lower(*args)
        text = lowered.as_text(dialect="hlo")
        stats = lowered.compile().memory_analysis()
        xla = int(stats.temp_size_in_bytes) if stats is not None else 0
        limit = conv_to_dot.entry_io_bytes(parse_module(text)) + xla

        im2col = _program_temp(text, group=1 << 20)
        print(f"{name:28s} {xla:10d} {im2col:10d} {_program_temp(text):10d} "
              f"{_program_temp(text, limit=limit):10d} {limit:10d}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Print one row per shape: median ms and temp KiB of each algorithm, the group size the
    cost model picks (g) and the time ratios per-position / im2col and pick / im2col."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all cores)")
    ap.add_argument("--shape", action="append", choices=sorted(SHAPES), help="default: all")
    ap.add_argument("--memory", action="store_true",
                    help="temp bytes of whole programs against XLA's instead of timings")
    ns = ap.parse_args(argv)
    if ns.memory:
        memory_table()
        return 0
    from xlc.backend_cpu.parallel import host_threads

    threads = host_threads(ns.threads)
    cols = ["im2col", "rows", "per-pos", "pick", "xla"]
    print(f"{'shape':28s} " + " ".join(f"{c + ' ms':>10s} {'KiB':>6s}" for c in cols)
          + "  g  pp/i2c  pick/i2c")
    for name in ns.shape or list(SHAPES):
        row = bench_shape(name, ns.reps, threads)
        cells = []
        for c in cols:
            ms, tb = row.get(c, (None, None))
            cells.append(f"{ms:10.3f} {tb / 1024:6.0f}" if ms is not None else f"{'-':>10s} "
                         f"{'-':>6s}")
        i2c = row["im2col"][0]
        ratios = f" {row['group']:2d} {row['per-pos'][0] / i2c:7.2f} {row['pick'][0] / i2c:9.2f}"
        print(f"{name:28s} " + " ".join(cells) + ratios, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
