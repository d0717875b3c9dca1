"""The pipelined tensor-core GEMM (emit_mma_pipe.py, issue 13): f16/bf16 dots whose operands
have 16-byte rows use cp.async -> shared -> ldmatrix -> mma.sync with 3 stages. Checked in the
host emulator against the evaluator for every operand orientation, ragged edges, batch dims
and result types; its PTX assembles within register and shared-memory budgets."""
from __future__ import annotations

import re
import subprocess

import ml_dtypes
import numpy as np
import pytest

from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.helpers import compile_text, requires_ptxas
from xlc.backend_gpu import emit_mma_pipe, nvptx
from xlc.backend_gpu.thunks import KernelThunk
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.parser import parse_module
from xlc.hlo.shape import PrimitiveType

NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32}


def _dot(m: int, n: int, k: int, lhs_layout: str = "{1,0}", rhs_layout: str = "{1,0}",
         t: str = "f16", out: str = "f32", batch: int = 0) -> str:
    if batch:
        la = "{2,1,0}" if lhs_layout == "{1,0}" else "{1,2,0}"
        ra = "{2,1,0}" if rhs_layout == "{1,0}" else "{1,2,0}"
        return f"""
HloModule m
ENTRY e {{
  a = {t}[{batch},{m},{k}]{la} parameter(0)
  b = {t}[{batch},{k},{n}]{ra} parameter(1)
  ROOT d = {out}[{batch},{m},{n}] dot(a, b), lhs_batch_dims={{0}}, rhs_batch_dims={{0}},
      lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}}
}}"""
    return f"""
HloModule m
ENTRY e {{
  a = {t}[{m},{k}]{lhs_layout} parameter(0)
  b = {t}[{k},{n}]{rhs_layout} parameter(1)
  ROOT d = {out}[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""


def _check(text: str, seed: int = 0) -> str:
    """Run `text` in the emulator against the evaluator; returns the PTX."""
    exe = compile_text(text)
    mod = parse_module(text)
    rng = np.random.default_rng(seed)
    params = mod.entry.parameters
    args = [rng.standard_normal(p.shape.dims).astype(NP[p.shape.element_type.text])
            for p in params]
    got = Emulator(exe).run(args)
    want = flatten_result(evaluate(parse_module(text), args))
    out_t = mod.entry.root.shape.element_type.text
    tol = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}[out_t]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol,
                                   atol=tol * 8)
    return exe.ptx


@pytest.mark.parametrize("lhs_layout,rhs_layout,t,out,sms", [
    ("{1,0}", "{1,0}", "f16", "f32", 2),      # k-major lhs, n-major rhs: ldmatrix / .trans
    ("{0,1}", "{0,1}", "bf16", "bf16", 2),    # m-major lhs, k-major rhs: .trans / ldmatrix
    ("{1,0}", "{0,1}", "f16", "f16", None),   # 32 x 64 tiles (few blocks: SKINNY)
    ("{0,1}", "{1,0}", "bf16", "f32", None),
])
def test_pipelined_gemm_matches_the_evaluator(lhs_layout: str, rhs_layout: str, t: str,
                                              out: str, sms: int | None,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    if sms is not None:     # 2 SMs: the 2 blocks of 64 x 64 tiles are enough (SMALL)
        monkeypatch.setattr(emit_mma_pipe, "SM_COUNT", {80: sms})
    # ragged in M, N and K (zero-filled partial chunks and rows)
    text = _dot(72, 40, 56, lhs_layout, rhs_layout, t, out)
    (k,) = [t for t in compile_text(text).all_thunks() if isinstance(t, KernelThunk)]
    assert k.grid == ((1, 2, 1) if sms else (1, 3, 1))
    ptx = _check(text)
    assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group 1;" in ptx
    assert ("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx) == \
        (lhs_layout == "{0,1}" or rhs_layout == "{1,0}")
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32" in ptx


def test_pipelined_gemm_with_batch_dims() -> None:
    _check(_dot(24, 16, 40, "{0,1}", "{1,0}", batch=2), seed=1)


def test_large_tiles_match_the_evaluator(monkeypatch: pytest.MonkeyPatch) -> None:
    """128 x 128 tiles with 8 warps (chosen when there are enough blocks for every SM: here
    the device is made to have one SM so that one block is enough)."""
    monkeypatch.setattr(emit_mma_pipe, "SM_COUNT", {80: 1})
    text = _dot(128, 120, 48, "{1,0}", "{0,1}")
    (k,) = [t for t in compile_text(text).all_thunks() if isinstance(t, KernelThunk)]
    assert k.block == (256, 1, 1) and k.shared_bytes == 3 * (128 + 128) * 32 * 2 == 49152
    _check(text, seed=2)


def test_unaligned_rows_keep_the_simple_tensor_core_kernel() -> None:
    """A row of 36 f16 elements is not 16-byte aligned: no cp.async, still mma."""
    ptx = compile_text(_dot(64, 64, 36)).ptx
    assert "cp.async" not in ptx and "ldmatrix" not in ptx and "mma.sync" in ptx


def test_tile_choice_follows_the_block_count() -> None:
    small = compile_text(_dot(1024, 1024, 64)).all_thunks()
    large = compile_text(_dot(2048, 2048, 64)).all_thunks()
    (ks,) = [t for t in small if isinstance(t, KernelThunk)]
    (kl,) = [t for t in large if isinstance(t, KernelThunk)]
    assert ks.block == (128, 1, 1) and ks.grid == (16, 16, 1)     # 64 blocks < 108 SMs
    assert kl.block == (256, 1, 1) and kl.grid == (16, 16, 1)     # 256 blocks of 128 x 128
    # the mlp's 256 x 1024 products: 64 blocks of 64 x 64, 128 of 32 x 64
    (kk,) = [t for t in compile_text(_dot(256, 1024, 1024)).all_thunks()
             if isinstance(t, KernelThunk)]
    assert kk.block == (128, 1, 1) and kk.grid == (16, 8, 1)


@requires_ptxas
@pytest.mark.parametrize("m,t,sm,max_regs,cfg", [
    (1024, "f16", 80, 128, "SMALL"), (4096, "f16", 80, 128, "LARGE"),
    (4096, "f16", 90, 128, "LARGE"), (256, "f16", 90, 128, "SKINNY"),
    # TF32: over 128 registers (one 256-thread block per SM), still no spills
    (4096, "f32", 80, 160, "LARGE"), (4096, "f32", 90, 160, "LARGE"),
])
def test_pipelined_gemm_resources(m: int, t: str, sm: int, max_regs: int, cfg: str) -> None:
    """No spills, registers within the budget (f16: two 256-thread blocks per SM), the
    static shared memory of the tile configuration (48 KiB for 128 x 128 tiles)."""
    n = k = 1024 if m == 256 else m
    ptx = compile_text(_dot(m, n, k, t=t), gpu_sm=sm).ptx
    path = nvptx.ptxas_path()
    assert path is not None
    proc = subprocess.run([path, f"-arch=sm_{sm}", "-v", "-", "-o", "/dev/null"], input=ptx,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", proc.stderr)]
    regs = [int(x) for x in re.findall(r"Used (\d+) registers", proc.stderr)]
    smem = [int(x) for x in re.findall(r"(\d+) bytes smem", proc.stderr)]
    assert spills == [0] and regs and regs[0] <= max_regs, proc.stderr
    kind = emit_mma_pipe.KINDS[PrimitiveType.F16 if t == "f16" else PrimitiveType.F32]
    assert smem == [getattr(emit_mma_pipe, cfg).shared_bytes(kind)]


def _tf32_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    from tests.backend_gpu.emulator import _tf32

    return _tf32(a).astype(np.float64) @ _tf32(b).astype(np.float64)


@pytest.mark.parametrize("lhs_layout,rhs_layout", [("{1,0}", "{1,0}"), ("{0,1}", "{0,1}")])
def test_f32_dots_use_tf32_tensor_cores_by_default(lhs_layout: str, rhs_layout: str) -> None:
    """DEFAULT precision: operands rounded to TF32 (cvt.rna), products summed in f32, as XLA
    on Ampere and later. k-major tiles go through ldmatrix, f-major ones scalar loads."""
    text = _dot(40, 24, 36, lhs_layout, rhs_layout, t="f32")
    exe = compile_text(text)
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in exe.ptx
    assert "cvt.rna.tf32.f32" in exe.ptx and "cp.async.cg.shared.global" in exe.ptx
    rng = np.random.default_rng(7)
    a = rng.standard_normal((40, 36)).astype(np.float32)
    b = rng.standard_normal((36, 24)).astype(np.float32)
    (got,) = Emulator(exe).run([a, b])
    np.testing.assert_allclose(got, _tf32_product(a, b), rtol=1e-5, atol=1e-5)
    # TF32 keeps 10 mantissa bits: about 1e-3 relative per product, well under 1e-2 here
    want = flatten_result(evaluate(parse_module(text), [a, b]))[0]
    err = np.abs(got - want).max() / np.abs(want).max()
    assert 1e-6 < err < 1e-2


def test_large_tf32_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(emit_mma_pipe, "SM_COUNT", {80: 1})
    text = _dot(128, 128, 24, "{0,1}", "{1,0}", t="f32")
    exe = compile_text(text)
    (k,) = [t for t in exe.all_thunks() if isinstance(t, KernelThunk)]
    assert k.block == (256, 1, 1) and k.shared_bytes == 3 * (128 + 128) * 16 * 4
    rng = np.random.default_rng(8)
    a = rng.standard_normal((128, 24)).astype(np.float32)
    b = rng.standard_normal((24, 128)).astype(np.float32)
    (got,) = Emulator(exe).run([a, b])
    np.testing.assert_allclose(got, _tf32_product(a, b), rtol=1e-5, atol=1e-5)


HIGHEST_DOT = """
HloModule m
ENTRY e {
  a = f32[64,64] parameter(0)
  b = f32[64,64] parameter(1)
  ROOT d = f32[64,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},
      operand_precision={highest,highest}
}"""


def test_highest_precision_keeps_full_fp32() -> None:
    """`operand_precision={highest,...}` (lax's Precision.HIGHEST), the compile option
    `default_matmul_precision="highest"`, a TF32-free algorithm or an architecture without
    TF32 keep the FP32 CUDA-core kernel, which matches the evaluator to f32 rounding."""
    assert "tf32" not in compile_text(HIGHEST_DOT).ptx
    plain = _dot(64, 64, 64, t="f32")
    assert "tf32" not in compile_text(plain, default_matmul_precision="highest").ptx
    assert "tf32" not in compile_text(plain, gpu_sm=75).ptx
    algo = plain.replace("rhs_contracting_dims={0}",
                         "rhs_contracting_dims={0}, algorithm=dot_f32_f32_f32")
    assert "tf32" not in compile_text(algo).ptx
    assert "tf32" in compile_text(plain, default_matmul_precision="high").ptx
    _check(HIGHEST_DOT)


def test_grouped_block_order_covers_every_tile() -> None:
    """10 row tiles x 2 column tiles: blocks walk groups of 8 row tiles down a column (the
    last group has 2); every output tile is computed exactly once."""
    text = _dot(296, 128, 16)
    (k,) = [t for t in compile_text(text).all_thunks() if isinstance(t, KernelThunk)]
    assert k.grid == (2, 10, 1)
    _check(text, seed=9)
