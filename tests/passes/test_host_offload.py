"""HostOffload: text rewrite checks (where the copies go), the cost model's decisions, the
device peak under the limit, numerics against the evaluator, and the CPU pipeline leaving the
module alone."""
from __future__ import annotations

import numpy as np
import pytest

import xlc
from tests.passes.filecheck import filecheck
from xlc.hlo.evaluator import evaluate
from xlc.hlo.ir import HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module
from xlc.hlo.printer import print_module
from xlc.hlo.verifier import verify_module
from xlc.options import CompileOptions
from xlc.passes.host_offload import HostOffload, host_shape
from xlc.passes.memory_budget import device_peak_bytes
from xlc.passes.optimize import OptimizedModule, optimize_module
from xlc.passes.ordering import verify_schedule

MIB4 = 4 << 20  # one f32[1024,1024]


def _dot(a: str, b: str, out: str, n: int, k: int | None = None) -> str:
    """A full-FP32 dot (operand_precision highest: 2 n^3 / 67 TFLOP/s on the H100 roofline,
    32 us at n = 1024; the offload timings below are designed around it)."""
    return (f"  {out} = f32[{n},{n}] dot({a}, {b}), lhs_contracting_dims={{1}}, "
            f"rhs_contracting_dims={{0}}, operand_precision={{highest,highest}}\n")


def program(before: int, after: int, n: int = 1024, values: int = 1) -> str:
    """`x` (and `y` when `values` is 2) made first and used last; in between a chain of
    `before` dots, the peak (a concatenate feeding a wide dot), `after` more dots."""
    text = (f"HloModule off\nENTRY e {{\n  p = f32[{n},{n}] parameter(0)\n"
            f"  w = f32[{n},{n}] parameter(1)\n  w2 = f32[{2 * n},{n}] parameter(2)\n")
    text += _dot("p", "w", "x", n)
    prev = "x"
    if values == 2:  # y = x @ w starts the chain too
        text += _dot("x", "w", "y", n)
        prev = "y"
    for i in range(1, before + 1):
        text += _dot(prev, "w", f"d{i}", n)
        prev = f"d{i}"
    text += (f"  b = f32[{n},{2 * n}] concatenate({prev}, d{before - 1}), dimensions={{1}}\n"
             f"  m = f32[{n},{n}] dot(b, w2), lhs_contracting_dims={{1}}, "
             f"rhs_contracting_dims={{0}}, operand_precision={{highest,highest}}\n")
    prev = "m"
    for i in range(before + 1, before + after + 1):
        text += _dot(prev, "w", f"d{i}", n)
        prev = f"d{i}"
    if values == 2:
        text += f"  s = f32[{n},{n}] add({prev}, y)\n"
        prev = "s"
    return text + f"  ROOT r = f32[{n},{n}] add({prev}, x)\n}}\n"


def peak_of(text: str) -> int:
    """The device peak of `text` optimized without a limit."""
    return device_peak_bytes(optimize_module(parse_module(text),
                                             CompileOptions(verify=True)).assignment)


def fit(text: str, limit: int, **kw: object) -> tuple[HloModule, OptimizedModule, HostOffload]:
    """Optimize `text` under `limit` with HostOffload(**kw) as the only budget pass."""
    m = parse_module(text)
    p = HostOffload(**kw)  # type: ignore[arg-type]
    opt = optimize_module(m, CompileOptions(verify=True, memory_limit=limit), budget_passes=[p])
    verify_module(m)
    assert m.schedule is not None
    verify_schedule(m, m.schedule)
    return m, opt, p


def _copies(m: HloModule) -> list[str]:
    assert m.entry is not None
    return [i.name for i in m.entry.instructions if i.opcode in (Opcode.COPY_START,
                                                                    Opcode.COPY_DONE)]


# ---- where the copies go ------------------------------------------------------------------------
def test_idle_value_leaves_before_the_peak_and_returns_after_it() -> None:
    text = program(8, 8)
    peak = peak_of(text)
    m, opt, p = fit(text, peak - 1)
    assert opt.budget is not None and opt.budget.fits
    assert device_peak_bytes(opt.assignment) == peak - MIB4 < peak - 1
    filecheck(print_module(m), """
      CHECK: %x = f32[1024,1024]{1,0} dot(%p, %w)
      CHECK-NEXT: %d1 = {{.*}} dot(%x, %w)
      CHECK-NEXT: %copy-start.offload.x = (f32[1024,1024]{1,0:S(5)}, {{.*}}) copy-start(%x)
      CHECK-NEXT: %d2 =
      CHECK: %d7 =
      CHECK-NEXT: %copy-done.offload.x = {{.*}}:S(5)} copy-done({{.*}}), control-predecessors={%d7}
      CHECK-NEXT: %d8 =
      CHECK-NEXT: %b = f32[1024,2048]{1,0} concatenate
      CHECK-NEXT: %m = {{.*}} dot(%b, %w2)
      CHECK: %d10 =
      CHECK-NEXT: %copy-start.prefetch.x = (f32[1024,1024]{1,0}, {{.*}}:S(5)}, u32[]) copy-start(
      CHECK-NOT: copy
      CHECK: %d16 =
      CHECK-NEXT: %copy-done.prefetch.x = f32[1024,1024]{1,0} copy-done(%copy-start.prefetch.x)
      CHECK-NEXT: ROOT %r = f32[1024,1024]{1,0} add(%d16, %copy-done.prefetch.x)
    """)
    assert m.entry is not None
    cs_in = m.entry.instruction("copy-start.prefetch.x")
    assert [o.name for o in cs_in.operands] == ["copy-done.offload.x"]
    assert [p.name for p in cs_in.control_predecessors] == ["d10"]
    assert [p.name for p in m.entry.instruction("copy-done.prefetch.x").control_predecessors] \
        == ["d16"]


    # the earlier use keeps reading x on the device
    assert m.entry is not None and m.entry.instruction("d1").operands[0].name == "x"
    (action,) = p.actions
    assert action.startswith("offloaded x (4194304 bytes) to host memory S(5): leaves after d1 "
                             "(copy done before d8), returns before r (prefetched after d10); "
                             "167.8 us each way behind ")
    assert opt.budget.steps[0][2] == p.actions
    # the host copy is a temp of its own colour, outside the device peak
    (host,) = [a for a in opt.assignment.allocations if a.color == 5]
    assert host.kind == "temp" and host.size == MIB4


def test_the_printed_module_round_trips() -> None:
    m, _, _ = fit(program(8, 8), peak_of(program(8, 8)) - 1)
    text = print_module(m)
    again = parse_module(text, verify=True)
    assert print_module(again) == text
    assert again.schedule is not None


# ---- the cost model -----------------------------------------------------------------------------
@pytest.mark.parametrize("before,after,moved", [
    (8, 8, True),    # 8 dots of ~32 us hide 4 MiB at 25 GB/s (168 us) in both directions
    (5, 8, False),   # 5 dots before the peak are too few to hide the copy out
    (8, 3, False),   # ... and the wide dot + 3 after the peak to hide the prefetch
])
def test_transfers_must_hide_behind_the_kernels(before: int, after: int, moved: bool) -> None:
    text = program(before, after)
    peak = peak_of(text)
    m, opt, p = fit(text, peak - 1)
    assert opt.budget is not None
    assert bool(_copies(m)) is moved and bool(p.actions) is moved
    assert opt.budget.fits is moved
    if not moved:  # nothing worth moving: the module is left as it was
        assert print_module(m) == print_module(optimize_module(parse_module(text),
                                                               CompileOptions()).module)


@pytest.mark.parametrize("pcie,moved", [(25e9, True), (12e9, False), (1e12, True)])
def test_pcie_bandwidth_decides(pcie: float, moved: bool) -> None:
    text = program(8, 8)
    m, _, _ = fit(text, peak_of(text) - 1, pcie_bytes_per_s=pcie)
    assert bool(_copies(m)) is moved


def test_two_values_share_one_copy_stream() -> None:
    """x and y both idle across the peak: their copies run one after the other on the copy
    stream, so the second must hide behind the kernels of both transfers. With 8 dots on
    each side there is time for one, with 16 for both."""
    one = program(8, 8, values=2)
    m, opt, p = fit(one, peak_of(one) - 2 * MIB4)
    assert len(p.actions) == 1 and len(_copies(m)) == 4
    both = program(16, 16, values=2)
    peak = peak_of(both)
    m, opt, p = fit(both, peak - 2 * MIB4)
    assert [a.split()[1] for a in p.actions] == ["x", "y"]
    behind = [float(a.split(" behind ")[1].split(" / ")[0]) for a in p.actions]
    assert 167.8 <= behind[0] < 2 * 167.8 <= behind[1]
    assert device_peak_bytes(opt.assignment) <= peak - MIB4


def test_small_values_stay() -> None:
    text = program(8, 8)
    m, _, p = fit(text, peak_of(text) - 1, min_bytes=MIB4 + 1)
    assert not _copies(m) and not p.actions


def test_nothing_to_do_under_the_limit() -> None:
    text = program(8, 8)
    m = parse_module(text)
    opt = optimize_module(m, CompileOptions())
    before = print_module(m)
    p = HostOffload()
    assert p.run_budget(m, opt.assignment, device_peak_bytes(opt.assignment)) is False
    assert print_module(m) == before and p.actions == []


def test_live_out_and_parameters_are_not_offloaded() -> None:
    """Only temps: a parameter's or output's allocation exists for the whole run anyway."""
    text = """
HloModule m
ENTRY e {
  p = f32[1024,1024] parameter(0)
  w = f32[1024,1024] parameter(1)
  d1 = f32[1024,1024] dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  d2 = f32[1024,1024] dot(d1, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (f32[1024,1024], f32[1024,1024]) tuple(d2, p)
}
"""
    m, _, p = fit(text, 1)
    assert not _copies(m) and not p.actions


# ---- numerics -----------------------------------------------------------------------------------
def test_offloaded_module_computes_the_same() -> None:
    text = program(3, 3, n=64)
    peak = peak_of(text)
    m, opt, p = fit(text, peak - 1, pcie_bytes_per_s=1e18, min_bytes=0)
    assert p.actions and opt.budget is not None and opt.budget.fits
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((64, 64)).astype(np.float32) / 8,
            rng.standard_normal((64, 64)).astype(np.float32) / 8,
            rng.standard_normal((128, 64)).astype(np.float32) / 8]
    want = evaluate(parse_module(text), args)
    np.testing.assert_allclose(evaluate(m, args), want, rtol=1e-5, atol=1e-6)
    # the offloaded module as HLO text also runs on the CPU (copies are plain copies there);
    # unscheduled: the CPU's gemm-workspace pass does not keep an input schedule up to date
    got = xlc.compile(print_module(m).replace(", is_scheduled=true", ""), backend="cpu")(*args)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# ---- helpers and the CPU decision ---------------------------------------------------------------
def test_host_shape_appends_the_memory_space() -> None:
    from xlc.hlo.parser import parse_shape

    assert host_shape(parse_shape("f32[4,8]{0,1}")).to_text() == "f32[4,8]{0,1:S(5)}"
    assert host_shape(parse_shape("f32[4,8]{1,0:T(8,128)}")).to_text() == \
        "f32[4,8]{1,0:T(8,128)S(5)}"


def test_cpu_pipeline_never_offloads() -> None:
    """On the CPU host memory is the only memory: its budget passes do not include offload."""
    from xlc.backends import get_backend

    text = program(8, 8)
    m = parse_module(text)
    opt = get_backend("cpu").optimize(m, CompileOptions(memory_limit=peak_of(text) - 1))
    assert not _copies(opt.module)
    assert all(name != "host-offload" for name, _, _ in (opt.budget.steps if opt.budget
                                                           else []))


def test_memory_timeline_marks_offloaded_values() -> None:
    from xlc.viz.html import to_html
    from xlc.viz.timeline import build_timeline

    m, opt, _ = fit(program(8, 8), peak_of(program(8, 8)) - 1)
    timeline = build_timeline(opt.assignment)
    assert timeline is not None
    (host,) = [p for p in timeline.panels if "host S(5)" in p.kind]
    assert [(r.label, r.category) for r in host.rects] == [("copy-start.offload.x{0}",
                                                           "offload")]
    device = [r for p in timeline.panels if p is not host for r in p.rects]
    assert ("copy-start.prefetch.x{0}", "offload") in [(r.label, r.category) for r in device]
    page = to_html(m, opt.assignment)
    assert "cat-offload" in page and "offloaded to host / copied back" in page
