"""Rematerialization under `memory_limit`: the peak drops below the limit where recomputation
can reach it, values are unchanged when every value is written to and read from its assigned
slice (so a recomputation reading storage that an in-place update overwrote would show), rng
and side effects are never recomputed, and a limit that cannot be met warns or (strict) raises
MemoryLimitError."""
from __future__ import annotations

import logging
import re

import numpy as np
import pytest
import xlc.numpy as xnp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xlc
from tests.conftest import corpus_cases, requires_corpus
from tests.passes.filecheck import flatten, parse, random_args
from tests.passes.memory_interpreter import run_with_memory
from tests.passes.test_multi_output_fusion import random_programs as fusion_programs
from tests.passes.test_passes_corpus import random_programs as shape_programs
from xlc.errors import ArgumentError, MemoryLimitError
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.verifier import verify_module
from xlc.options import CompileOptions, parse_bytes, parse_flags
from xlc.passes.buffer_validator import validate_buffer_assignment
from xlc.passes.memory_budget import device_peak_bytes
from xlc.passes.optimize import OptimizedModule, interpreter_passes, optimize_module
from xlc.passes.ordering import verify_schedule

VERIFY = CompileOptions(verify=True)
UNFUSED = VERIFY.replace(fusion=False)  # one instruction per value: every value a candidate

# four activations kept for a "backward" pass that reads them in reverse order: without a
# limit all four are live at once; each is one cheap fusion of a parameter
CHAIN = """
HloModule chain
ENTRY main {
  x = f32[64,64] parameter(0)
  a = f32[64,64] exponential(x)
  b = f32[64,64] tanh(a)
  c = f32[64,64] sine(b)
  d = f32[64,64] cosine(c)
  e = f32[64,64] multiply(d, d)
  f = f32[64,64] add(e, c)
  g = f32[64,64] multiply(f, b)
  h = f32[64,64] add(g, a)
  ROOT r = f32[64,64] negate(h)
}
"""


def _optimize(text: str, limit_fraction: float | None, strict: bool = False,
              base: CompileOptions = UNFUSED) -> tuple[OptimizedModule, int]:
    """Optimize `text` without a limit, then with limit_fraction x that peak; returns the
    limited result and the unconstrained peak."""
    free = optimize_module(parse(text), base, passes=interpreter_passes(base),
                           name="interpreter")
    peak = device_peak_bytes(free.assignment)
    if limit_fraction is None:
        return free, peak
    opts = base.replace(memory_limit=int(limit_fraction * peak), memory_limit_strict=strict)
    m = parse(text)
    return optimize_module(m, opts, passes=interpreter_passes(opts), name="interpreter"), peak


def _check_values(opt: OptimizedModule, text: str, seed: int = 0) -> None:
    """The limited module, run through its buffer assignment, equals the original module."""
    verify_module(opt.module)
    assert opt.module.schedule is not None
    verify_schedule(opt.module, opt.module.schedule)
    validate_buffer_assignment(opt.assignment)
    before = parse(text)
    args = random_args(before, seed)
    want = flatten(evaluate(before, args))
    got = flatten_result(run_with_memory(opt.assignment, None, args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_chain_fits_by_recomputing_and_keeps_values() -> None:
    # 0.8: parameter + output + two live temps, the least any order reaches (h = g + a)
    opt, peak = _optimize(CHAIN, 0.8)
    assert opt.budget is not None and opt.budget.fits
    assert device_peak_bytes(opt.assignment) <= 0.8 * peak < peak
    assert opt.budget.peak_before == peak
    acts = opt.budget.steps[0][2]
    assert acts and all(a.startswith(("recomputed ", "moved ")) for a in acts)
    assert any(".remat" in i.name for i in opt.module.entry.instructions)
    _check_values(opt, CHAIN)


def test_no_limit_means_no_report_and_a_met_limit_changes_nothing() -> None:
    free, peak = _optimize(CHAIN, None)
    assert free.budget is None
    roomy, _ = _optimize(CHAIN, 1.0)
    assert roomy.budget is not None and roomy.budget.fits and not roomy.budget.steps
    assert roomy.budget.summary() == (f"memory limit {peak} bytes: peak {peak} -> {peak} bytes "
                                      "(fits; none)")


def test_unreachable_limit_warns_or_raises(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="xlc.passes.optimize"):
        opt, peak = _optimize(CHAIN, 0.1)
    assert opt.budget is not None and not opt.budget.fits
    assert opt.budget.peak_after < peak  # it still got as low as it could
    assert f"cannot fit under memory_limit={int(0.1 * peak)} bytes: the smallest peak " \
           f"reached is {opt.budget.peak_after} bytes (from {peak}; tried " \
           "rematerialization)" in caplog.text
    _check_values(opt, CHAIN)
    with pytest.raises(MemoryLimitError, match=r"chain: cannot fit under memory_limit=\d+ "
                       r"bytes: the smallest peak reached is \d+ bytes \(from \d+; tried "
                       r"rematerialization\)"):
        _optimize(CHAIN, 0.1, strict=True)


RNG = """
HloModule rng
ENTRY main {
  s = u64[2] parameter(0)
  x = f32[64,64] parameter(1)
  g = (u64[2], u32[64,64]) rng-bit-generator(s), algorithm=rng_three_fry
  bits = u32[64,64] get-tuple-element(g), index=1
  fb = f32[64,64] convert(bits)
  a = f32[64,64] exponential(x)
  b = f32[64,64] tanh(a)
  c = f32[64,64] sine(b)
  d = f32[64,64] add(c, fb)
  e = f32[64,64] add(d, b)
  ROOT r = f32[64,64] add(e, a)
}
"""


def test_rng_is_never_recomputed() -> None:
    opt, _ = _optimize(RNG, 0.3)
    assert opt.budget is not None
    names = " ".join(a for _, _, acts in opt.budget.steps for a in acts)
    assert "rng" not in names and " g " not in names and "bits" not in names
    rngs = [i for i in opt.module.entry.instructions if i.opcode.text == "rng-bit-generator"]
    assert len(rngs) == 1
    _check_values(opt, RNG)


# a donated parameter updated in place ("p" aliases output 0): a recomputed value that reads
# p must run before the update
DONATED = """
HloModule donated, input_output_alias={ {0}: (0, {}, must-alias) }
ENTRY main {
  p = f32[64,64] parameter(0)
  x = f32[64,64] parameter(1)
  a = f32[64,64] multiply(p, x)
  b = f32[64,64] tanh(a)
  c = f32[64,64] exponential(b)
  d = f32[64,64] add(c, b)
  newp = f32[64,64] add(p, d)
  e = f32[64,64] multiply(d, a)
  ROOT t = (f32[64,64], f32[64,64]) tuple(newp, e)
}
"""


def test_recomputation_never_reads_storage_an_in_place_update_overwrote() -> None:
    for fraction in (0.9, 0.8, 0.7, 0.6):
        opt, _ = _optimize(DONATED, fraction)
        _check_values(opt, DONATED)


def _check_random(text: str, seed: int, fraction: float) -> None:
    opt, peak = _optimize(text, fraction, base=VERIFY)
    assert opt.budget is not None
    assert opt.budget.peak_after <= peak
    _check_values(opt, text, seed)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fusion_programs(), st.integers(0, 2**16), st.sampled_from([0.5, 0.7, 0.9]))
def test_random_fusion_programs_under_a_limit(text: str, seed: int, fraction: float) -> None:
    """Elementwise DAGs with broadcasts, reductions, selects and in-place updates."""
    _check_random(text, seed, fraction)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape_programs(), st.integers(0, 2**16), st.sampled_from([0.5, 0.7, 0.9]))
def test_random_shape_programs_under_a_limit(text: str, seed: int, fraction: float) -> None:
    """Reshapes, transposes, slices, converts, dots and reductions."""
    _check_random(text, seed, fraction)


@requires_corpus
@pytest.mark.parametrize("name", corpus_cases(include_benchmarks=False))
def test_corpus_under_60_percent(name: str) -> None:
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    free = optimize_module(parse(case.module_text), VERIFY, passes=interpreter_passes(VERIFY),
                           name="interpreter")
    peak = device_peak_bytes(free.assignment)
    opts = VERIFY.replace(memory_limit=int(0.6 * peak))
    opt = optimize_module(parse(case.module_text), opts, passes=interpreter_passes(opts),
                          name="interpreter")
    assert opt.budget is not None and opt.budget.peak_after <= peak
    validate_buffer_assignment(opt.assignment)
    got = flatten_result(run_with_memory(opt.assignment, None, case.inputs))
    for g, w in zip(got, case.outputs):
        np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol)


def _mlp(layers: int = 12, width: int = 64, batch: int = 512) -> tuple:
    rng = np.random.default_rng(0)
    params = [(rng.normal(0, 0.2, (width, width)).astype(np.float32),
               np.zeros(width, np.float32)) for _ in range(layers)]
    x = rng.normal(size=(batch, width)).astype(np.float32)
    y = rng.normal(size=(batch, width)).astype(np.float32)

    def loss(params, x, y):  # type: ignore[no-untyped-def]
        h = x
        for w, b in params:
            h = xnp.tanh(h @ w + b)
        return xnp.mean((h - y) ** 2)

    def step(params, x, y):  # type: ignore[no-untyped-def]
        g = xlc.grad(loss)(params, x, y)
        return [(w - 0.1 * gw, b - 0.1 * gb) for (w, b), (gw, gb) in zip(params, g)]

    return step, params, x, y


def test_training_step_fits_half_its_peak_on_the_cpu() -> None:
    """A 16-layer MLP's training step (xlc.grad, donated parameters) under 50 % of its peak:
    fits, recomputes forward activations (GEMMs included), same results bit for bit. (With
    12 layers of width 64, parameters, gradients and the last activations already take
    about 51 % of the peak: 1.13 of 2.23 MB.)"""
    step, params, x, y = _mlp(layers=16)
    free = xlc.jit(step, donate_argnums=0).lower(params, x, y).compile()
    peak = free.memory_stats()["peak_bytes"]
    limited = xlc.jit(step, donate_argnums=0, memory_limit=peak // 2).lower(
        params, x, y).compile()
    assert limited.memory_stats()["peak_bytes"] <= peak // 2
    budget = limited._exe.optimized.budget
    assert budget.fits and any("dot" in a for _, _, acts in budget.steps for a in acts)
    want = free([(w.copy(), b.copy()) for w, b in params], x, y)
    got = limited([(w.copy(), b.copy()) for w, b in params], x, y)
    for (gw, gb), (ww, wb) in zip(got, want):
        np.testing.assert_array_equal(gw, ww)
        np.testing.assert_array_equal(gb, wb)


def test_memory_limit_spellings() -> None:
    assert parse_flags("--memory-limit=1.5GiB --memory-limit-strict") == {
        "memory_limit": 3 << 29, "memory_limit_strict": True}
    assert [parse_bytes(t, "x") for t in ("4096", "64KiB", "2MB", "512m", "1g")] == [
        4096, 65536, 2_000_000, 512 << 20, 1 << 30]
    with pytest.raises(ArgumentError, match=r"^jit: memory_limit: expected a byte count such "
                       r"as 1073741824, 512MiB or 2GB, got 'lots'$"):
        xlc.jit(lambda a: a, memory_limit="lots")
    f = xlc.jit(lambda a: a * 2, memory_limit="1MiB")
    assert f.options.memory_limit == 1 << 20
    with pytest.raises(ArgumentError, match=r"^CompileOptions: memory_limit=-1: Input should "
                       r"be greater than or equal to 0$"):
        CompileOptions().replace(memory_limit=-1)


def test_memory_timeline_marks_recomputed_values() -> None:
    from xlc.viz.html import to_html
    from xlc.viz.timeline import build_timeline

    opt, _ = _optimize(CHAIN, 0.8)
    timeline = build_timeline(opt.assignment)
    assert timeline is not None
    cats = {r.label: r.category for p in timeline.panels for r in p.rects}
    remat = {label for label, cat in cats.items() if cat == "remat"}
    assert remat and all(".remat" in label for label in remat)
    assert all(cat != "remat" for label, cat in cats.items() if ".remat" not in label)
    page = to_html(opt.module, opt.assignment)
    assert "cat-remat" in page and "recomputed (rematerialization)" in page


def test_a_value_recomputed_twice_is_recomputed_once_when_it_fits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A 16-layer MLP step under half its peak: chains recompute early activations that later
    recomputations rebuild again; sharing the earlier copy drops the later one and its chain
    (fewer recomputed GEMMs), still fits, and gives the same results bit for bit."""
    from xlc.passes.rematerialization import Rematerialization

    step, params, x, y = _mlp(layers=16)
    free = xlc.jit(step, donate_argnums=0).lower(params, x, y).compile()
    peak = free.memory_stats()["peak_bytes"]

    def limited() -> tuple[object, list[str]]:
        exe = xlc.jit(step, donate_argnums=0, memory_limit=peak // 2).lower(
            params, x, y).compile()
        budget = exe._exe.optimized.budget
        assert budget.fits and exe.memory_stats()["peak_bytes"] <= peak // 2
        return exe, [a for _, _, acts in budget.steps for a in acts]

    shared, acts = limited()
    assert any(a.startswith("reused ") for a in acts)
    monkeypatch.setattr(Rematerialization, "_share_clones", lambda *a: None)
    unshared, acts_unshared = limited()
    assert not any(a.startswith("reused ") for a in acts_unshared)

    def gemms(exe: object) -> int:
        text = exe._exe.optimized.module.to_text()  # type: ignore[attr-defined]
        return len(re.findall(r" (?:dot|custom-call)\(", text))
    assert gemms(shared) < gemms(unshared)
    want = free([(w.copy(), b.copy()) for w, b in params], x, y)
    got = shared([(w.copy(), b.copy()) for w, b in params], x, y)  # type: ignore[operator]
    for (gw, gb), (ww, wb) in zip(got, want):
        np.testing.assert_array_equal(gw, ww)
        np.testing.assert_array_equal(gb, wb)


def test_the_model_counts_storage_handed_to_a_user_once() -> None:
    """Where an instruction writes its result over a dying operand (dz over dh in the bias
    gradient's fusion), the model does not count both at that step: its peak is the
    assignment's temp, not above it (which made the pass recompute more than needed)."""
    from xlc.passes.remat_model import Model

    step, params, x, y = _mlp(layers=16)
    free = xlc.jit(step, donate_argnums=0).lower(params, x, y).compile()
    opt = free._exe.optimized
    model = Model(opt.module, opt.assignment)
    temp = free.memory_stats()["temp_bytes"]
    assert model.handovers and max(model.curve()) == temp
    model.handovers = {}
    assert max(model.curve()) > temp


def test_moved_values_are_not_swapped_back_and_forth() -> None:
    """Two values moved next to the same later use would only trade places round after
    round (each move looks like a saving at the peak it left): a value the pass moved is
    never moved again. A 2-layer transformer step then fits half its peak (it stopped at
    88 % with the swaps), bit for bit."""
    import xlc.nn

    from tools.bench_memory_budget import transformer_step

    step, args = transformer_step(xnp, xlc.nn, layers=2, batch=4, seq=64, d=64, ff=256)

    def fn(p, x, y):  # type: ignore[no-untyped-def]
        return step(p, x, y, xlc.grad)
    free = xlc.jit(fn, donate_argnums=0).lower(*args).compile()
    peak = free.memory_stats()["peak_bytes"]
    limited = xlc.jit(fn, donate_argnums=0, memory_limit=peak // 2).lower(*args).compile()
    budget = limited._exe.optimized.budget
    assert budget.fits and limited.memory_stats()["peak_bytes"] <= peak // 2
    acts = [a for _, _, acts in budget.steps for a in acts]
    moves = [m.groups() for a in acts if (m := re.match(r"moved (\S+) .* as (\S+) before", a))]
    assert moves and not {value for value, _ in moves} & {made for _, made in moves}
    leaves = xlc.tree_util.tree_leaves
    want = leaves(free(*[xlc.tree_util.tree_map(np.copy, a) for a in args]))
    got = leaves(limited(*[xlc.tree_util.tree_map(np.copy, a) for a in args]))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_a_moved_value_takes_its_dead_producers_out_of_the_model() -> None:
    """Moving a recomputed value removes the clones that only fed it; a range that ended at
    one of them must end elsewhere (it kept pointing at a removed instruction: a KeyError in
    the model on a tiny transformer step). The limit cannot be met (parameters dominate);
    the compile warns, and the plan still computes the same values."""
    import xlc.nn

    from tools.bench_memory_budget import SMALL, transformer_step

    step, args = transformer_step(xnp, xlc.nn, **SMALL["transformer"])

    def fn(p, x, y):  # type: ignore[no-untyped-def]
        return step(p, x, y, xlc.grad)
    free = xlc.jit(fn, donate_argnums=0).lower(*args).compile()
    peak = free.memory_stats()["peak_bytes"]
    limited = xlc.jit(fn, donate_argnums=0, memory_limit=peak // 2).lower(*args).compile()
    assert limited.memory_stats()["peak_bytes"] < peak
    leaves = xlc.tree_util.tree_leaves
    want = leaves(free(*[xlc.tree_util.tree_map(np.copy, a) for a in args]))
    got = leaves(limited(*[xlc.tree_util.tree_map(np.copy, a) for a in args]))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
