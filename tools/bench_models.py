"""Benchmark whole models written with `xlc.numpy` / `xlc.nn` against the same code in JAX.

Usage: python tools/bench_models.py [--reps N] [model ...]

The corpus holds single functions; these are the layers real programs are made of, traced by
`xlc.jit` and by `jax.jit` from one source (each model is written once against a numpy-like
module `np_`, an `nn` module and a `lax` module). For each model it prints the xlc time, the JAX
time (when `jax` is importable) and their ratio, the largest difference between the two
results, and xlc's compile time and temp memory. Times are medians of `--reps` calls after
warm-up, xlc and JAX measured in alternating blocks (tools/bench_cpu.py's method).
"""
from __future__ import annotations

import argparse
import sys
import time
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


def transformer_block(np_: Any, nn: Any, lax: Any, p: dict, x: Any) -> Any:
    """A pre-norm transformer block: layer norm, 8-head attention, layer norm, GELU MLP."""
    def ln(x: Any, g: Any, b: Any) -> Any:
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np_.sqrt(v + 1e-5) * g + b
    bsz, t, d = x.shape
    heads, hd = 8, x.shape[-1] // 8
    h = ln(x, p["g1"], p["b1"])
    q, k, v = (
        (h @ p[w]).reshape(bsz, t, heads, hd).transpose(0, 2, 1, 3) for w in ("wq", "wk", "wv"))
    a = nn.softmax(q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(hd)), axis=-1)
    x = x + (a @ v).transpose(0, 2, 1, 3).reshape(bsz, t, d) @ p["wo"]
    return x + nn.gelu(ln(x, p["g2"], p["b2"]) @ p["w1"]) @ p["w2"]


def conv_block(np_: Any, nn: Any, lax: Any, p: dict, x: Any) -> Any:
    """Two 3x3 convolutions with ReLU (NCHW), then global average pooling and a linear head."""
    h = np_.maximum(lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME"), 0.0)
    h = np_.maximum(lax.conv_general_dilated(h, p["c2"], (2, 2), "SAME"), 0.0)
    return h.mean(axis=(2, 3)) @ p["fc"]


def mlp_norm(np_: Any, nn: Any, lax: Any, p: dict, x: Any) -> Any:
    """A 3-layer MLP with RMS norm and SiLU, log-softmax output."""
    for i in range(3):
        x = x * (1.0 / np_.sqrt((x * x).mean(-1, keepdims=True) + 1e-6))
        x = x @ p[f"w{i}"]
        x = x * nn.sigmoid(x) if i < 2 else x
    return nn.log_softmax(x, axis=-1)


def _params(shapes: dict[str, tuple[int, ...]], seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: (rng.standard_normal(s) / np.sqrt(s[0] if len(s) > 1 else 1)).astype(np.float32)
            for k, s in shapes.items()}


def models() -> dict[str, tuple[Callable[..., Any], dict, np.ndarray]]:
    """name -> (model, params, input)."""
    rng = np.random.default_rng(1)
    d = 256
    tb = _params(dict(wq=(d, d), wk=(d, d), wv=(d, d), wo=(d, d), w1=(d, 4 * d),
                      w2=(4 * d, d)))
    tb.update(g1=np.ones(d, np.float32), b1=np.zeros(d, np.float32),
              g2=np.ones(d, np.float32), b2=np.zeros(d, np.float32))
    cb = _params(dict(c1=(32, 16, 3, 3), c2=(64, 32, 3, 3), fc=(64, 10)))
    mn = _params(dict(w0=(512, 1024), w1=(1024, 1024), w2=(1024, 100)))
    return {
        "transformer_block": (transformer_block, tb,
                              rng.standard_normal((8, 128, d)).astype(np.float32)),
        "conv_block": (conv_block, cb, rng.standard_normal((16, 16, 32, 32)).astype(np.float32)),
        "mlp_norm": (mlp_norm, mn, rng.standard_normal((256, 512)).astype(np.float32)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--reps", type=int, default=30)
    ns = ap.parse_args()
    table = models()
    names = ns.models or list(table)
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None
    for name in names:
        fn, params, x = table[name]
        f = xlc.jit(lambda p, x, fn=fn: fn(xnp, xlc.nn, xlc.lax, p, x))
        t0 = time.perf_counter()
        compiled = f.lower(params, x).compile()
        compile_s = time.perf_counter() - t0
        out = np.asarray(compiled(params, x))
        contenders: list[Callable[[], object]] = [
            lambda c=compiled, p=params, x=x: c(p, x)]
        if jax is not None:
            g = jax.jit(lambda p, x, fn=fn: fn(jnp, jax.nn, jax.lax, p, x))
            dp, dx = jax.device_put(params), jax.device_put(x)
            ref = np.asarray(g(dp, dx))
            contenders.append(lambda g=g, dp=dp, dx=dx: g(dp, dx).block_until_ready())
        times = timeit_interleaved(contenders, ns.reps)
        row = [f"{name:18s}", f"xlc {times[0] * 1e3:8.3f} ms"]
        if jax is not None:
            row += [f"jax {times[1] * 1e3:8.3f} ms ({times[1] / times[0]:5.2f}x)",
                    f"max |xlc - jax| {np.abs(out - ref).max():.2e}"]
        row += [f"compile {compile_s * 1e3:6.1f} ms",
                f"temp {compiled.memory_stats()['temp_bytes'] / 2**20:6.2f} MiB"]
        print("  ".join(row), flush=True)


if __name__ == "__main__":
    main()
