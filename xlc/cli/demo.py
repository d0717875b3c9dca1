"""The embedded default job of `xlc demo`: trace a small MLP classifier with `@xlc.jit`,
print its HLO, run it and check the result against a plain numpy implementation."""
from __future__ import annotations

import time
from typing import TextIO

import numpy as np


def _numpy_reference(params: dict, x: np.ndarray) -> np.ndarray:
    h = np.maximum(x @ params["w1"] + params["b1"], 0.0)
    logits = h @ params["w2"] + params["b2"]
    z = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def demo_inputs(seed: int = 0) -> tuple[dict, np.ndarray]:
    """Deterministic parameters and a batch for the demo model."""
    rng = np.random.default_rng(seed)
    params = {
        "w1": (rng.standard_normal((64, 128)) / 8).astype(np.float32),
        "b1": np.zeros(128, np.float32),
        "w2": (rng.standard_normal((128, 10)) / 11).astype(np.float32),
        "b2": np.linspace(-0.5, 0.5, 10).astype(np.float32),
    }
    x = rng.standard_normal((32, 64)).astype(np.float32)
    return params, x


def run_demo(out: TextIO, backend: str | None = None, show_hlo: bool = True) -> int:
    """Trace, compile and run the demo; returns 0 when the result matches numpy."""
    import xlc
    import xlc.numpy as xnp

    def mlp(params, x):
        h = xnp.maximum(x @ params["w1"] + params["b1"], 0.0)
        logits = h @ params["w2"] + params["b2"]
        return xlc.nn.softmax(logits, axis=-1)

    params, x = demo_inputs()
    f = xlc.jit(mlp, backend=backend) if backend else xlc.jit(mlp)
    t0 = time.perf_counter()
    lowered = f.lower(params, x)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    if show_hlo:
        out.write("== HLO traced from mlp(params, x) ==\n")
        out.write(lowered.as_text() + "\n")
    y = np.asarray(compiled(params, x))
    t3 = time.perf_counter()
    ref = _numpy_reference(params, x)
    err = float(np.max(np.abs(y - ref)))
    out.write("== result ==\n")
    out.write(f"output f32{list(y.shape)}, row sums {y.sum(axis=-1)[:4].round(6)} ...\n")
    out.write(f"argmax of the first 8 rows: {y.argmax(axis=-1)[:8].tolist()}\n")
    out.write(f"max |xlc - numpy| = {err:.3g}\n")
    out.write(f"trace {1e3 * (t1 - t0):.1f} ms, compile {1e3 * (t2 - t1):.1f} ms, "
              f"run {1e3 * (t3 - t2):.1f} ms (backend {compiled.backend})\n")
    try:
        stats = compiled.memory_stats()
    except xlc.XlcError as e:  # memory stats need the buffer-assignment pipeline
        out.write(f"memory stats: unavailable ({str(e).splitlines()[0]})\n")
    else:
        out.write("memory stats: " + ", ".join(f"{k}={v}" for k, v in stats.items()) + "\n")
    ok = err < 1e-5
    out.write("OK\n" if ok else "MISMATCH\n")
    return 0 if ok else 1
