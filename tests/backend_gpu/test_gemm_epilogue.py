"""GEMM epilogue fusion (passes/gemm_epilogue.py, issue 13): a dot and the elementwise /
transposing work on its result are one kOutput fusion, one kernel on the GPU (every GEMM
kernel stores through the epilogue). Checked in the host emulator against the evaluator, on
the pass's own rules, and by the kernel count of a transformer block."""
from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import xlc.lax
import xlc.nn
import xlc.numpy as xnp

import xlc
from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.helpers import compile_text
from xlc.backend_gpu.thunks import KernelThunk
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.parser import parse_module
from xlc.options import CompileOptions
from xlc.passes.gemm_epilogue import GemmEpilogueFusion, epilogue_steps, fused_dot
from xlc.passes.optimize import standard_passes
from xlc.passes.pipeline import Pipeline

NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32}

BIAS_GELU = """
HloModule m
ENTRY e {{
  x = {t}[{m},{k}] parameter(0)
  w = {t}[{k},{n}] parameter(1)
  bias = {t}[{n}] parameter(2)
  d = {t}[{m},{n}] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  bb = {t}[{m},{n}] broadcast(bias), dimensions={{1}}
  s = {t}[{m},{n}] add(d, bb)
  th = {t}[{m},{n}] tanh(s)
  ROOT r = {t}[{m},{n}] multiply(s, th)
}}"""
"""Bias and a tanh-gated activation: the dot's value is used twice at the same index."""

HEADS = """
HloModule m
ENTRY e {{
  x = {t}[{m},{k}] parameter(0)
  w = {t}[{k},{n}] parameter(1)
  d = {t}[{m},{n}] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  r = {t}[2,{half},4,{quarter}] reshape(d)
  ROOT t = {t}[2,4,{half},{quarter}] transpose(r), dimensions={{0,2,1,3}}
}}"""
"""Attention's head split: (b t) x (h d) -> b, h, t, d, written by the GEMM."""

RESIDUAL = """
HloModule m
ENTRY e {{
  x = {t}[{m},{k}] parameter(0)
  w = {t}[{k},{n}] parameter(1)
  res = {t}[{m},{n}] parameter(2)
  d = {t}[{m},{n}] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT s = {t}[{m},{n}] add(res, d)
}}"""


def _run(text: str, seed: int = 0, **kw: object) -> tuple[list[np.ndarray], list[np.ndarray],
                                                          list[KernelThunk]]:
    exe = compile_text(text, default_matmul_precision="highest", **kw)
    mod = parse_module(text)
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(p.shape.dims).astype(NP[p.shape.element_type.text])
            for p in mod.entry.parameters]
    got = Emulator(exe).run([a.copy() for a in args])
    want = flatten_result(evaluate(parse_module(text), args))
    kernels = [t for t in exe.all_thunks() if isinstance(t, KernelThunk)]
    return got, want, kernels


def _close(got: list[np.ndarray], want: list[np.ndarray], tol: float) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                   rtol=tol, atol=tol)


@pytest.mark.parametrize("t,m,n,k", [
    ("f32", 20, 24, 16),      # CUDA-core GEMM (f32 at highest precision)
    ("f16", 40, 24, 32),      # pipelined tensor-core GEMM
    ("bf16", 36, 20, 20),     # simple tensor-core GEMM (rows not 16-byte multiples)
])
def test_bias_and_activation_in_the_gemm(t: str, m: int, n: int, k: int) -> None:
    got, want, kernels = _run(BIAS_GELU.format(t=t, m=m, n=n, k=k))
    assert len(kernels) == 1
    _close(got, want, {"f32": 1e-5, "f16": 4e-3, "bf16": 3e-2}[t])


@pytest.mark.parametrize("t", ["f32", "f16"])
def test_head_split_transpose_in_the_gemm(t: str) -> None:
    got, want, kernels = _run(HEADS.format(t=t, m=32, n=32, k=16, half=16, quarter=8))
    assert len(kernels) == 1
    _close(got, want, 1e-5 if t == "f32" else 4e-3)


def test_residual_add_may_write_over_the_residual() -> None:
    """`add(dot, param)`: the output may take the residual's buffer (alias_rules' kOutput
    rule); every thread reads its residual element before it writes the same element."""
    text = RESIDUAL.format(t="f16", m=32, n=40, k=24)
    exe = compile_text(text)
    (fusion,) = [i for i in exe.module.entry.instructions if i.opcode.text == "fusion"]
    assert fusion.attrs["kind"] == "kOutput"
    got, want, kernels = _run(text)
    assert len(kernels) == 1
    _close(got, want, 4e-3)


def _optimized(text: str) -> object:
    mod = parse_module(text)
    opts = CompileOptions(verify=True)
    Pipeline("gpu-like", standard_passes(opts, row_fusion=True, gemm_epilogues=True)).run(
        mod, opts)
    return mod


def test_the_pass_rejects_what_is_not_one_element_per_element() -> None:
    # a reduce of the dot (softmax-like): not an epilogue
    text = """
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[8,8] parameter(0)
  d = f32[8,8] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = f32[] constant(0)
  ROOT r = f32[8] reduce(d, z), dimensions={1}, to_apply=add
}"""
    mod = _optimized(text)
    assert not any(i.attrs.get("kind") == "kOutput" for i in mod.entry.instructions)
    # the dot's value at two different indices (d + d^T)
    text2 = """
HloModule m
ENTRY e {
  x = f32[8,8] parameter(0)
  d = f32[8,8] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[8,8] transpose(d), dimensions={1,0}
  ROOT s = f32[8,8] add(d, t)
}"""
    mod = _optimized(text2)
    assert not any(i.attrs.get("kind") == "kOutput" for i in mod.entry.instructions)
    # two users: the dot stays a dot
    text3 = """
HloModule m
ENTRY e {
  x = f32[8,8] parameter(0)
  d = f32[8,8] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  e = f32[8,8] exponential(d)
  ROOT t = (f32[8,8], f32[8,8]) tuple(d, e)
}"""
    mod = _optimized(text3)
    assert not any(i.attrs.get("kind") == "kOutput" for i in mod.entry.instructions)


def test_the_pass_fuses_and_records_the_index_map() -> None:
    mod = _optimized(HEADS.format(t="f32", m=32, n=32, k=16, half=16, quarter=8))
    (fusion,) = [i for i in mod.entry.instructions if i.opcode.text == "fusion"]
    dot = fused_dot(fusion)
    assert dot is not None
    assert epilogue_steps(fusion.fused_computation, dot) == [
        ("reshape", (32, 32), (2, 16, 4, 8)), ("transpose", (0, 2, 1, 3))]
    assert not GemmEpilogueFusion().run(mod)      # idempotent


def test_transformer_block_kernel_count() -> None:
    """The pre-norm transformer block of tools/bench_models.py: 11 kernels (XLA: 15-17; was
    17 before epilogues: the q/k/v head splits, the attention output's transpose, the GELU
    and the final residual add each cost a loop kernel)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tools.bench_models import models, transformer_block

    _, p, x = models()["transformer_block"]
    f = xlc.jit(lambda p, x: transformer_block(xnp, xlc.nn, xlc.lax, p, x), backend="gpu")
    exe = f.lower(p, x).compile().executable()
    kernels = [t for t in exe.all_thunks() if isinstance(t, KernelThunk)]
    assert len(kernels) == 11


def test_small_transformer_block_in_the_emulator() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tools.bench_models import _params, transformer_block

    d = 32
    p = _params(dict(wq=(d, d), wk=(d, d), wv=(d, d), wo=(d, d), w1=(d, 2 * d), w2=(2 * d, d)))
    p.update(g1=np.ones(d, np.float32), b1=np.zeros(d, np.float32),
             g2=np.ones(d, np.float32), b2=np.zeros(d, np.float32))
    x = np.random.default_rng(4).standard_normal((1, 16, d)).astype(np.float32)
    fn = xlc.jit(lambda p, x: transformer_block(xnp, xlc.nn, xlc.lax, p, x))
    text = fn.lower(p, x).as_text()
    exe = compile_text(text, default_matmul_precision="highest")
    assert any(i.attrs.get("kind") == "kOutput" for i in exe.module.entry.instructions)
    args = [np.asarray(a) for a in xlc.tree_util.tree_leaves((p, x))]
    got = Emulator(exe).run([a.copy() for a in args])
    want = flatten_result(evaluate(parse_module(text), args))
    _close(got, want, 2e-4)
