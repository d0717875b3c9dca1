"""Kernel time of xlc's GPU programs against the hardware's limits and the references, in one
run (issue 13). Needs an NVIDIA GPU and cuda-python; exits 1 saying why without them.

Usage: python tools/bench_gpu_kernels.py [--reps N] [--sm XX] [--quick] [--only RE]
                                         [--json out.json]

Each xlc time is device time: CUDA events recorded on the calling thread's stream around
`--reps` back-to-back device-resident calls (after a warm-up call), divided by `--reps`; host
overhead is `tools/bench_gpu.py`'s dispatch table. Rows:
* bandwidth (sizes well past the 50 MiB L2): an elementwise chain, softmax, layer norm, RMS
  norm, row and column sums; GB/s of input + output bytes, and that as a fraction of a
  device-to-device copy of the same bytes timed the same way (the copy limit);
* GEMMs: f32 at `highest` (full FP32), f32 at DEFAULT (TF32), bf16 and f16, square at
  1024/4096/8192 (`--quick`: 1024 and 4096) and the mlp's 256 x 1024 x 1024; TFLOP/s, next
  to cuBLAS through torch at the same precision (torch.cuda events) when torch is importable;
* models: the transformer blocks of tools/bench_models.py (B8 T128 d256 and B4 T512 d1024)
  and a two-layer mlp, parameters on the device, at DEFAULT and `highest` precision.
JAX (jax.jit on its GPU, same functions and precision) is timed when importable: wall time of
`--reps` back-to-back asynchronous calls and one wait, divided by `--reps` (device-bound for
these sizes, where its dispatch hides behind the kernels).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import xlc.lax  # noqa: E402
import xlc.nn  # noqa: E402
import xlc.numpy as xnp  # noqa: E402

import xlc  # noqa: E402
from xlc.backend_gpu import cuda  # noqa: E402
from xlc.backend_gpu.runtime import check, device_alloc, device_free, driver  # noqa: E402
from xlc.errors import XlcError  # noqa: E402


@dataclass
class Case:
    """One benchmark row: a function over numpy-like modules (`np_`, `nn`, `lax`, precision)
    and its inputs; `flops` for GEMM-like rows, else the row is rated by bytes moved."""

    name: str
    group: str
    fn: Callable[..., Any]
    args: list[Any]
    precision: str = "default"
    flops: float = 0.0
    torch: tuple[int, int, int, str] | None = None   # (m, k, n, dtype) for a cuBLAS row


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def bandwidth_cases(scale: int) -> list[Case]:
    """Elementwise chain, softmax, norms, row / column sums (f32; `scale` rows of 1024)."""
    r = _rng()
    x = r.standard_normal((scale, 1024)).astype(np.float32)
    g = np.ones(1024, np.float32)

    def chain(np_: Any, nn: Any, lax: Any, a: Any, b: Any, c: Any) -> Any:
        return np_.tanh(a) * np_.exp(b) + np_.log(np_.abs(c) + 1.0)

    def softmax(np_: Any, nn: Any, lax: Any, x: Any) -> Any:
        return nn.softmax(x, axis=-1)

    def layer_norm(np_: Any, nn: Any, lax: Any, x: Any, g: Any) -> Any:
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np_.sqrt(v + 1e-5) * g

    def rms_norm(np_: Any, nn: Any, lax: Any, x: Any, g: Any) -> Any:
        return x / np_.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g

    def row_sum(np_: Any, nn: Any, lax: Any, x: Any) -> Any:
        return x.sum(-1)

    def column_sum(np_: Any, nn: Any, lax: Any, x: Any) -> Any:
        return x.sum(0)

    return [Case("elementwise chain", "bandwidth", chain, [x, x + 1, x - 1]),
            Case("softmax", "bandwidth", softmax, [x]),
            Case("layer norm", "bandwidth", layer_norm, [x, g]),
            Case("rms norm", "bandwidth", rms_norm, [x, g]),
            Case("row sum", "bandwidth", row_sum, [x]),
            Case("column sum", "bandwidth", column_sum, [x])]


def _matmul(np_: Any, nn: Any, lax: Any, a: Any, b: Any, precision: str = "default") -> Any:
    return lax.dot(a, b, precision=precision)


GEMM_TYPES = (("f32 highest", np.float32, "highest"), ("f32 tf32", np.float32, "default"),
              ("bf16", "bfloat16", "default"), ("f16", np.float16, "default"))


def gemm_cases(sizes: tuple[int, ...]) -> list[Case]:
    """Square GEMMs of every type at `sizes`, and the mlp's 256 x 1024 x 1024."""
    import ml_dtypes

    out = []
    shapes = [(n, n, n) for n in sizes] + [(256, 1024, 1024)]
    for label, dt, prec in GEMM_TYPES:
        dtype = ml_dtypes.bfloat16 if dt == "bfloat16" else dt
        for m, k, n in shapes:
            a = _rng(1).standard_normal((m, k)).astype(dtype)
            b = _rng(2).standard_normal((k, n)).astype(dtype)
            out.append(Case(f"gemm {label} {m}x{k}x{n}", "gemm", _matmul, [a, b], prec,
                            2.0 * m * k * n, (m, k, n, label)))
    return out


def model_cases() -> list[Case]:
    """The transformer blocks of tools/bench_models.py and a two-layer mlp, at DEFAULT and
    `highest` precision."""
    from tools.bench_models import _params, transformer_block

    out = []
    for bsz, t, d in ((8, 128, 256), (4, 512, 1024)):
        p = _params(dict(wq=(d, d), wk=(d, d), wv=(d, d), wo=(d, d), w1=(d, 4 * d),
                         w2=(4 * d, d)))
        p.update(g1=np.ones(d, np.float32), b1=np.zeros(d, np.float32),
                 g2=np.ones(d, np.float32), b2=np.zeros(d, np.float32))
        x = _rng(3).standard_normal((bsz, t, d)).astype(np.float32)
        flops = 2.0 * bsz * t * d * d * 12 + 4.0 * bsz * t * t * d
        for prec in ("default", "highest"):
            out.append(Case(f"transformer B{bsz} T{t} d{d} {prec}", "model",
                            lambda np_, nn, lax, p, x: transformer_block(np_, nn, lax, p, x),
                            [p, x], prec, flops))
    w1 = _rng(4).standard_normal((1024, 1024)).astype(np.float32) / 32
    w2 = _rng(5).standard_normal((1024, 1024)).astype(np.float32) / 32
    xm = _rng(6).standard_normal((256, 1024)).astype(np.float32)

    def mlp(np_: Any, nn: Any, lax: Any, x: Any, w1: Any, w2: Any) -> Any:
        return np_.maximum(x @ w1, 0.0) @ w2
    for prec in ("default", "highest"):
        out.append(Case(f"mlp 256x1024 x2 {prec}", "model", mlp, [xm, w1, w2], prec,
                        2 * 2.0 * 256 * 1024 * 1024))
    return out


def _leaves(args: list[Any]) -> list[np.ndarray]:
    return [np.asarray(a) for a in xlc.tree_util.tree_leaves(args)]


def compile_case(case: Case, sm: int | None) -> Any:
    """The GPU executable of `case` (its dots at the case's precision)."""
    opts = xlc.CompileOptions(backend="gpu", gpu_sm=sm, default_matmul_precision=case.precision)
    fn = xlc.jit(lambda *a: case.fn(xnp, xlc.nn, xlc.lax, *a))
    return xlc.compile(fn.lower(*case.args).as_text(), backend="gpu", options=opts).executable()


def event_time(issue: Callable[[], Any], reps: int) -> float:
    """Device seconds per `issue()` from CUDA events on this thread's stream around `reps`
    back-to-back calls (after one warm-up call, waited for)."""
    drv, stream = driver(), cuda.thread_stream()
    for out in issue():
        out.block_until_ready()
    start, end = (check(drv.cuEventCreate(0), "cuEventCreate") for _ in range(2))
    try:
        check(drv.cuEventRecord(start, stream), "cuEventRecord")
        for _ in range(reps):
            outs = issue()
        check(drv.cuEventRecord(end, stream), "cuEventRecord")
        check(drv.cuEventSynchronize(end), "cuEventSynchronize")
        ms = check(drv.cuEventElapsedTime(start, end), "cuEventElapsedTime")
        del outs
        return float(ms) / 1e3 / reps
    finally:
        for ev in (start, end):
            drv.cuEventDestroy(ev)


def copy_time(nbytes: int, reps: int) -> float:
    """Device seconds of a device-to-device copy moving `nbytes` in total (read + write)."""
    drv, stream = driver(), cuda.thread_stream()
    half = max(16, nbytes // 2)
    src, dst = device_alloc(half), device_alloc(half)

    class _Done:
        def block_until_ready(self) -> None:
            check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize")

    def issue() -> list[Any]:
        check(drv.cuMemcpyDtoDAsync(dst, src, half, stream), "cuMemcpyDtoDAsync")
        return [_Done()]
    try:
        return event_time(issue, reps)
    finally:
        device_free(src)
        device_free(dst)


def torch_time(m: int, k: int, n: int, label: str, reps: int) -> float | None:
    """cuBLAS seconds of an [m,k] x [k,n] GEMM of `label`'s type and precision through torch
    (torch.cuda events), or None without torch / CUDA."""
    try:
        import torch  # type: ignore[import-not-found]

        if not torch.cuda.is_available():
            return None
    except Exception:
        return None
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}.get(label, torch.float32)
    torch.backends.cuda.matmul.allow_tf32 = label == "f32 tf32"
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    torch.mm(a, b)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        torch.mm(a, b)
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end)) / 1e3 / reps


def jax_time(case: Case, reps: int) -> float | None:
    """JAX's seconds per call (see the module docstring), or None without a JAX GPU."""
    try:
        import jax  # type: ignore[import-not-found]
        import jax.numpy as jnp  # type: ignore[import-not-found]

        dev = jax.devices("gpu")[0]
    except Exception:
        return None
    import types

    nn = types.SimpleNamespace(softmax=jax.nn.softmax, gelu=jax.nn.gelu)
    lax = types.SimpleNamespace(dot=jax.lax.dot)
    prec = {"highest": "highest", "default": None}[case.precision]
    with jax.default_matmul_precision(prec) if prec else contextlib.nullcontext():
        f = jax.jit(lambda *a: case.fn(jnp, nn, lax, *a))
        args = jax.device_put(case.args, dev)
        jax.block_until_ready(f(*args))
        t0 = time.perf_counter()
        for _ in range(reps):
            out = f(*args)
        jax.block_until_ready(out)
    return (time.perf_counter() - t0) / reps


def measure(case: Case, reps: int, sm: int | None) -> dict[str, Any]:
    """One row: xlc's device time and rate, its limit or reference, JAX's time."""
    exe = compile_case(case, sm)
    args = [cuda.to_device(a) for a in _leaves(case.args)]
    t = event_time(lambda: exe.run_on_device(args), reps)
    in_bytes = sum(a.nbytes for a in _leaves(case.args))
    out_bytes = sum(o.slice.size for o in exe.outputs)
    row: dict[str, Any] = {"name": case.name, "group": case.group, "time_s": t,
                           "bytes": in_bytes + out_bytes, "flops": case.flops,
                           "kernels": sum(1 for th in exe.all_thunks() if th.kind == "kernel")}
    if case.group == "bandwidth":
        copy = copy_time(in_bytes + out_bytes, reps)
        row["gbs"] = row["bytes"] / t / 1e9
        row["fraction_of_copy"] = copy / t
    else:
        row["tflops"] = case.flops / t / 1e12
    if case.torch is not None:
        ref = torch_time(*case.torch, reps)
        row["cublas_time_s"] = ref
        row["fraction_of_cublas"] = None if ref is None else ref / t
    row["jax_time_s"] = jax_time(case, reps)
    return row


def _fmt(row: dict[str, Any]) -> str:
    rate = f"{row['gbs']:.0f} GB/s" if "gbs" in row else f"{row['tflops']:.1f} TF/s"
    limit = ""
    if "fraction_of_copy" in row:
        limit = f"{100 * row['fraction_of_copy']:.0f}% of copy"
    elif row.get("fraction_of_cublas") is not None:
        limit = f"{100 * row['fraction_of_cublas']:.0f}% of cuBLAS"
    jt = row["jax_time_s"]
    jax_text = f"{1e6 * jt:.1f}us ({jt / row['time_s']:.2f}x)" if jt else "-"
    return (f"{row['name']:<34}{row['kernels']:>4}{1e6 * row['time_s']:>12.1f}us"
            f"{rate:>14}{limit:>18}  {jax_text}")


def cases(quick: bool) -> list[Case]:
    """Every row, in print order."""
    return (bandwidth_cases(16384 if quick else 65536)
            + gemm_cases((1024, 4096) if quick else (1024, 4096, 8192)) + model_cases())


def main(argv: list[str] | None = None) -> int:
    """Run the rows (see the module docstring), print the table, write --json."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--sm", type=int, default=None, help="architecture (default: the GPU's)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes, no 8192 GEMMs")
    ap.add_argument("--only", default=None, help="rows whose name matches this regex")
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    args = ap.parse_args(argv)
    try:
        cc = cuda.compute_capability()
    except XlcError as e:
        print(f"bench_gpu_kernels: {e}\nbench_gpu_kernels: this benchmark needs an NVIDIA GPU "
              "and cuda-python (pip install cuda-python); run it on a GPU machine",
              file=sys.stderr)
        return 1
    print(f"device: sm_{cc}; code for sm_{args.sm or cc}; {args.reps} back-to-back calls "
          "per row, CUDA events")
    print(f"{'case':<34}{'kern':>4}{'time':>14}{'rate':>14}{'vs limit':>18}  JAX")
    rows = []
    for case in cases(args.quick):
        if args.only and not re.search(args.only, case.name):
            continue
        row = measure(case, args.reps, args.sm)
        rows.append(row)
        print(_fmt(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"device_sm": cc, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
