"""Compile time of stacked layers (issue 11 item 30): each distinct kernel is emitted once
(`xlc/backend_cpu/kernel_reuse.py`) and multi-output fusion keeps its reachability map up to
date instead of rebuilding it after every fusion."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import xlc.lax
import xlc.numpy as xnp
from llvmlite import ir

import xlc
from tests.backend_cpu.helpers import check, rand
from tests.backend_cpu.test_compile_time import stacked
from tools.bench_models import transformer_block
from xlc.backend_cpu import compile_cpu
from xlc.backend_cpu.compiler import cpu_passes, run_cpu_passes
from xlc.backend_cpu.dedupe import dedupe_functions
from xlc.backend_cpu.emitter import CpuEmitter
from xlc.backend_cpu.registry import EMITTERS
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.parser import parse_module
from xlc.options import default_options
from xlc.passes import multi_output_fusion as mof
from xlc.passes.pipeline import Pipeline


def _emit(module: HloModule) -> tuple[ir.Module, CpuEmitter]:
    """The LLVM module as emitted (before functions are merged) and its emitter."""
    optimized = run_cpu_passes(module, default_options())
    em = CpuEmitter(module, optimized.assignment, "t", EMITTERS, threads=2)
    return em.emit(), em


def _kernels(llmod: ir.Module) -> list[str]:
    return [f.name for f in llmod.functions if f.blocks and ".k." in f.name]


def test_stacked_layers_emit_each_kernel_once() -> None:
    three, _ = _emit(parse_module(stacked(3)))
    sixteen, em = _emit(parse_module(stacked(16)))
    # the inner layers' kernels are the same functions: the count does not grow with depth
    assert _kernels(sixteen) and len(_kernels(sixteen)) == len(_kernels(three))
    assert max(em.unit_uses.values()) >= 14
    check(stacked(16), *([rand(64, 256)] + [rand(256, 256, seed=s) / 16 for s in range(16)]),
          rtol=1e-4)


def _params(n: int, d: int = 32) -> tuple[list[dict[str, np.ndarray]], np.ndarray]:
    rng = np.random.default_rng(3)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

    layers = [{"g1": 1 + w(d) / 4, "b1": w(d) / 4, "wq": w(d, d), "wk": w(d, d), "wv": w(d, d),
               "wo": w(d, d), "g2": 1 + w(d) / 4, "b2": w(d) / 4, "w1": w(d, 2 * d),
               "w2": w(2 * d, d)} for _ in range(n)]
    return layers, rng.standard_normal((2, 16, d)).astype(np.float32)


def _model(p: list[dict[str, Any]], x: Any, np_: Any = xnp, nn: Any = xlc.nn,
           lax: Any = xlc.lax) -> Any:
    for layer in p:
        x = transformer_block(np_, nn, lax, layer, x)
    return x


def test_stacked_transformer_emits_each_kernel_once() -> None:
    def emitted(n: int) -> tuple[ir.Module, CpuEmitter]:
        params, x = _params(n)
        return _emit(xlc.jit(_model).lower(params, x).module.clone())

    three, _ = emitted(3)
    sixteen, em = emitted(16)
    assert len(_kernels(sixteen)) == len(_kernels(three)), (_kernels(sixteen), _kernels(three))
    # What the merging pass still finds does not grow with depth: units whose keys differ
    # (the first layer reads a parameter where the others read a fusion) but whose code came
    # out the same.
    assert dedupe_functions(sixteen) <= 2 and dedupe_functions(three) <= 2


def test_stacked_transformer_matches_evaluator_and_unshared_emission(
        monkeypatch: pytest.MonkeyPatch) -> None:
    params, x = _params(16)
    got = np.asarray(xlc.jit(_model)(params, x))
    want = np.asarray(xlc.jit(_model, backend="interpreter")(params, x))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)
    monkeypatch.setattr(CpuEmitter, "share_units", False)
    alone = np.asarray(xlc.jit(_model)(params, x))
    np.testing.assert_array_equal(got, alone)  # sharing changes no bit of the result
    jax = pytest.importorskip("jax")
    ref = np.asarray(jax.jit(lambda p, x: _model(p, x, jax.numpy, jax.nn, jax.lax))(params, x))
    np.testing.assert_allclose(got, ref, rtol=2e-4, atol=2e-4)


def _reaches(a: HloInstruction, b: HloInstruction) -> bool:
    stack, seen = [b], set()
    while stack:
        inst = stack.pop()
        if inst is a:
            return True
        if inst.uid not in seen:
            seen.add(inst.uid)
            stack.extend(inst.operands + inst.control_predecessors)
    return False


def test_multi_output_fusion_updates_reachability_without_rebuilding(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every answer equals a graph search on the current computation, and the entry's post
    order is not recomputed per fusion (that made the pass quadratic in the depth)."""
    answers: list[bool] = []
    real_reaches = mof.Reachability.reaches

    def checked(self: mof.Reachability, a: HloInstruction, b: HloInstruction) -> bool:
        got = real_reaches(self, a, b)
        assert got == _reaches(a, b), (a.name, b.name, got)
        answers.append(got)
        return got

    orders: list[str] = []
    real_post_order = HloComputation.post_order

    def counted(self: HloComputation) -> list[HloInstruction]:
        orders.append(self.name)
        return real_post_order(self)

    monkeypatch.setattr(mof.Reachability, "reaches", checked)
    params, x = _params(8)
    module = xlc.jit(_model).lower(params, x).module.clone()
    run_cpu_passes(module, default_options())  # fuses up to multi-output fusion and beyond
    assert True in answers and False in answers
    module = xlc.jit(_model).lower(params, x).module.clone()
    entry = module.entry
    assert entry is not None
    passes = cpu_passes(default_options())
    at = next(k for k, p in enumerate(passes) if p.name == "fusion-rounds")
    fusion, multi = passes[at].passes  # type: ignore[union-attr]
    assert isinstance(multi, mof.MultiOutputFusion)
    Pipeline("before", [*passes[:at], fusion]).run(module)
    monkeypatch.setattr(HloComputation, "post_order", counted)
    assert multi.run(module)
    # one sweep order per round plus the final sort, not one per fusion
    assert orders.count(entry.name) <= 8, orders.count(entry.name)


def test_units_differing_only_in_buffer_sharing_stay_apart() -> None:
    """Two equal instructions, one writing over its operand (the output aliases parameter 0)
    and one not: the buffer facts are part of the key, so each gets its own code."""
    text = """HloModule inplace, input_output_alias={ {0}: (0, {}, may-alias) }
ENTRY e {
  p0 = f32[4096] parameter(0)
  p1 = f32[4096] parameter(1)
  e0 = f32[4096] exponential(p0)
  e1 = f32[4096] exponential(p1)
  ROOT t = (f32[4096], f32[4096]) tuple(e0, e1)
}"""
    module = parse_module(text)
    _, em = _emit(module)
    e0, e1 = (module.entry.instruction(n) for n in ("e0", "e1"))  # type: ignore[union-attr]
    assert em.ba.slice_of(e0) == em.ba.slice_of(e0.operands[0])  # in place
    assert em.ba.slice_of(e1) != em.ba.slice_of(e1.operands[0])
    assert sorted(em.unit_uses.values()) == [1, 1]
    x, y = rand(4096), rand(4096, seed=1)
    want = flatten_result(evaluate(parse_module(text), [x, y]))
    # copies: parameter 0 is donated, so the call may overwrite it
    got = compile_cpu(parse_module(text)).run([x.copy(), y.copy()])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-6)
