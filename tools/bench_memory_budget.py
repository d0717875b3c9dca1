"""Training steps under a memory budget on the CPU: peak bytes, fit, correctness and time with
`memory_limit` = a fraction of the unconstrained peak (rematerialization, then GEMM workspace
shrinking; docs/memory.md).

Programs (SGD steps with donated parameters, f32):
- `mlp16`: a 16-layer tanh MLP, width 256, batch 2048, written with xlc.numpy + xlc.grad;
- `transformer4`: 4 pre-norm transformer blocks (single-head causal attention, ReLU MLP),
  batch 8, sequence 128, width 128, hidden 512, with xlc.grad;
- `jax_mlp16`: the same MLP step traced by JAX (`jax.jit(...).lower().as_text(dialect="hlo")`)
  and compiled from its HLO (skipped without jax).

For each: the unconstrained compile's temp bytes beside XLA's for the same step traced by JAX
(`memory_analysis().temp_size_in_bytes`, when jax is importable) and its peak_bytes, then for
each `--fractions` value the
constrained compile's peak, whether it fits, the largest absolute difference of its outputs
from the unconstrained run's (same inputs), and the median call time of both, measured
interleaved (`--repeats` rounds of one call each) so that load on this shared machine hits both
alike; the ratio is the figure to read. With `--backend gpu` (a GPU and cuda-python) the steps
compile for the GPU, where host offload runs before rematerialization (`host MiB`: what was
moved to pinned host memory), and each call's arguments are device arrays made before the
clock starts. `--small` runs tiny versions of the programs (a check of the tool). Usage:

    python tools/bench_memory_budget.py [--fractions 0.5 0.7] [--repeats 15] [--backend gpu]
        [--small] [program ...]
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def mlp_step(m: Any, layers: int = 16, width: int = 256, batch: int = 2048
             ) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """(step(params, x, y) -> new params, example arguments) for the MLP over numpy-like `m`."""
    rng = np.random.default_rng(0)
    params = [(rng.normal(0, 1 / np.sqrt(width), (width, width)).astype(np.float32),
               np.zeros(width, np.float32)) for _ in range(layers)]
    x = rng.normal(size=(batch, width)).astype(np.float32)
    y = rng.normal(size=(batch, width)).astype(np.float32)

    def loss(params: Any, x: Any, y: Any) -> Any:
        h = x
        for w, b in params:
            h = m.tanh(h @ w + b)
        return m.mean((h - y) ** 2)

    def step(params: Any, x: Any, y: Any, grad: Callable[..., Any]) -> Any:
        g = grad(loss)(params, x, y)
        return [(w - 0.1 * gw, b - 0.1 * gb) for (w, b), (gw, gb) in zip(params, g)]

    return step, (params, x, y)


def transformer_step(m: Any, nn: Any, layers: int = 4, batch: int = 8, seq: int = 128,
                     d: int = 128, ff: int = 512) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """(step(params, x, y) -> new params, example arguments) for the transformer blocks."""
    rng = np.random.default_rng(1)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

    params = [{"wq": w(d, d), "wk": w(d, d), "wv": w(d, d), "wo": w(d, d), "w1": w(d, ff),
               "w2": w(ff, d), "g1": np.ones(d, np.float32), "g2": np.ones(d, np.float32)}
              for _ in range(layers)]
    x = rng.standard_normal((batch, seq, d)).astype(np.float32)
    y = rng.standard_normal((batch, seq, d)).astype(np.float32)
    causal = np.tril(np.ones((seq, seq), bool))

    def norm(h: Any, g: Any) -> Any:
        mu = m.mean(h, axis=-1, keepdims=True)
        var = m.mean((h - mu) ** 2, axis=-1, keepdims=True)
        return (h - mu) / m.sqrt(var + 1e-5) * g

    def loss(params: Any, x: Any, y: Any) -> Any:
        h = x
        for p in params:
            a = norm(h, p["g1"])
            q, k, v = a @ p["wq"], a @ p["wk"], a @ p["wv"]
            s = m.einsum("bqd,bkd->bqk", q, k) / float(np.sqrt(d))  # weak: stays f32
            s = m.where(causal, s, -1e9)
            h = h + m.einsum("bqk,bkd->bqd", nn.softmax(s, axis=-1), v) @ p["wo"]
            h = h + nn.relu(norm(h, p["g2"]) @ p["w1"]) @ p["w2"]
        return m.mean((h - y) ** 2)

    def step(params: Any, x: Any, y: Any, grad: Callable[..., Any]) -> Any:
        g = grad(loss)(params, x, y)
        return [{k: p[k] - 0.01 * gp[k] for k in p} for p, gp in zip(params, g)]

    return step, (params, x, y)


SMALL = {"mlp": dict(layers=4, width=16, batch=32),
         "transformer": dict(layers=1, batch=2, seq=8, d=16, ff=32)}
"""Sizes of `--small`: the same programs, tiny (a check of the tool without a GPU)."""


def _sizes(kind: str, small: bool) -> dict[str, int]:
    return SMALL[kind] if small else {}


def _programs(small: bool = False) -> dict[str, Callable[[], tuple[Any, tuple[Any, ...]]]]:
    """name -> () -> (something `_compile` takes, example arguments)."""
    import xlc.numpy as xnp

    import xlc

    def ours(make: Callable[..., Any]) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
        def build() -> tuple[Any, tuple[Any, ...]]:
            step, args = make()
            return (lambda p, x, y: step(p, x, y, xlc.grad)), args
        return build

    def jax_mlp() -> tuple[Any, tuple[Any, ...]]:
        import jax
        import jax.numpy as jnp

        step, args = mlp_step(jnp, **_sizes("mlp", small))
        lowered = jax.jit(lambda p, x, y: step(p, x, y, jax.grad),
                          donate_argnums=0).lower(*args)
        return lowered.as_text(dialect="hlo"), args

    progs = {"mlp16": ours(lambda: mlp_step(xnp, **_sizes("mlp", small))),
             "transformer4": ours(lambda: transformer_step(xnp, xlc.nn,
                                                           **_sizes("transformer", small)))}
    try:
        import jax  # noqa: F401
        progs["jax_mlp16"] = jax_mlp
    except ImportError:
        pass
    return progs


def xla_temp_bytes(name: str, small: bool = False) -> int | None:
    """XLA's temp_size_in_bytes for program `name`'s step traced by JAX (x64 off, as JAX runs
    it, on JAX's default device), None without jax."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    if name == "transformer4":
        step, args = transformer_step(jnp, jax.nn, **_sizes("transformer", small))
    else:
        step, args = mlp_step(jnp, **_sizes("mlp", small))
    compiled = jax.jit(lambda p, x, y: step(p, x, y, jax.grad), donate_argnums=0).lower(
        *args).compile()
    return int(compiled.memory_analysis().temp_size_in_bytes)


def _compile(fn: Any, args: tuple[Any, ...], limit: int | None, backend: str = "cpu") -> Any:
    """A Compiled for `fn` (a Python step, or HLO text) under `limit` bytes (None: none)."""
    import xlc
    from xlc.options import default_options

    if isinstance(fn, str):
        opts = default_options() if limit is None else default_options().replace(
            memory_limit=limit)
        return xlc.compile(fn, backend=backend, options=opts)
    return xlc.jit(fn, donate_argnums=0, memory_limit=limit, backend=backend).lower(
        *args).compile()


def _flat(x: Any) -> list[np.ndarray]:
    import xlc

    return [np.asarray(v) for v in xlc.tree_util.tree_leaves(x)]


def _call(c: Any, fn: Any, args: tuple[Any, ...], backend: str = "cpu"
          ) -> tuple[float, list[np.ndarray]]:
    """(seconds, outputs) of one call of `c` on fresh copies of `args` (the parameters are
    donated). On the GPU the copies are device arrays made before the clock starts, and the
    clock stops when the outputs are ready: the figure is the step's own time."""
    import xlc

    fresh: list[Any] = [a.copy() for a in _flat(args)]
    if backend == "gpu":
        fresh = [xlc.DeviceArray.from_numpy(a) for a in fresh]
    if not isinstance(fn, str):
        fresh = list(xlc.tree_util.tree_unflatten(xlc.tree_util.tree_structure(args), fresh))
    t0 = time.perf_counter()
    out = xlc.block_until_ready(c(*fresh))
    return time.perf_counter() - t0, _flat(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("programs", nargs="*")
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.5])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--backend", choices=("cpu", "gpu"), default="cpu",
                    help="gpu: host offload, then rematerialization (needs a GPU)")
    ap.add_argument("--small", action="store_true",
                    help="tiny versions of the programs (checks the tool, not the figures)")
    a = ap.parse_args(argv)
    progs = _programs(a.small)
    names = a.programs or list(progs)
    print(f"{'program':<14} {'temp MiB':>8} {'XLA temp':>8} {'budget':>6} {'peak MiB':>9} "
          f"{'limit MiB':>9} {'got MiB':>8} {'host MiB':>8} "
          f"{'fits':>4} {'max |diff|':>10} {'free ms':>8} {'limited ms':>10} {'ratio':>6} "
          f"{'actions':>7}")
    for name in names:
        fn, args = progs[name]()
        free = _compile(fn, args, None, a.backend)
        peak = free.memory_stats()["peak_bytes"]
        temp = free.memory_stats()["temp_bytes"] / 2**20
        xla = xla_temp_bytes(name, a.small)
        xla_text = "-" if xla is None else f"{xla / 2**20:.2f}"
        for frac in a.fractions:
            limit = int(frac * peak)
            lim = _compile(fn, args, limit, a.backend)
            got = lim.memory_stats()["peak_bytes"]
            host = lim.memory_stats()["host_temp_bytes"] / 2**20
            budget = getattr(lim.executable(), "optimized", None)
            report = getattr(budget, "budget", None)
            actions = sum(len(s[2]) for s in report.steps) if report is not None else 0
            t_free, t_lim = [], []
            out_free: list[np.ndarray] = []
            out_lim: list[np.ndarray] = []
            for _ in range(a.repeats):
                t, out_free = _call(free, fn, args, a.backend)
                t_free.append(t)
                t, out_lim = _call(lim, fn, args, a.backend)
                t_lim.append(t)
            diff = max(float(np.max(np.abs(p - q))) for p, q in zip(out_free, out_lim))
            mf, ml = 1e3 * float(np.median(t_free)), 1e3 * float(np.median(t_lim))
            print(f"{name:<14} {temp:8.2f} {xla_text:>8} {frac:6.0%} {peak / 2**20:9.2f} "
                  f"{limit / 2**20:9.2f} {got / 2**20:8.2f} {host:8.2f} "
                  f"{'yes' if got <= limit else 'NO':>4} {diff:10.2e} "
                  f"{mf:8.2f} {ml:10.2f} {ml / mf:6.2f} {actions:7d}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
