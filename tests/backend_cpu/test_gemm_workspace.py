"""gemm-workspace: dots on the packed GEMM take their packing scratch from the buffer
assignment (a u8 workspace output of a `__xlc$gemm` custom-call), not from malloc per call."""
from __future__ import annotations

import numpy as np
import pytest

import xlc
from tests.backend_cpu.helpers import check, rand
from tests.passes.filecheck import assert_same_numerics, filecheck, printed, run_passes
from xlc.backend_cpu.gemm import (
    GemmSpec,
    compile_gemm,
    recommended_threads,
    scratch_bytes,
    writes_over_a,
)
from xlc.backend_cpu.gemm_workspace import GemmWorkspace
from xlc.hlo.gemm_call import GEMM_TARGET, gemm_call_dot
from xlc.hlo.parser import parse_module

DOT = """HloModule gemm
ENTRY e {
  a = f32[300,200] parameter(0)
  b = f32[250,200] parameter(1)
  ROOT d = f32[300,250] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={1},
                                   metadata={op_name="mm"}
}
"""

TWO = """HloModule two
ENTRY e {
  a = f32[2,130,90] parameter(0)
  b = f32[2,90,70] parameter(1)
  c = f32[70,110] parameter(2)
  d = f32[2,130,70] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2},
                               rhs_batch_dims={0}, rhs_contracting_dims={1}
  e = f32[2,130,70] tanh(d)
  ROOT f = f32[2,130,110] dot(e, c), lhs_contracting_dims={2}, rhs_contracting_dims={0}
}
"""

SMALL = """HloModule small
ENTRY e {
  a = f32[8,8] parameter(0)
  ROOT d = f32[8,8] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def _scratch(m: int, n: int, k: int, threads: int) -> int:
    spec = GemmSpec(m, n, k, 1, (0, k, 1), (0, 1, k), (0, n, 1))
    return scratch_bytes(spec, recommended_threads(spec, threads))


@pytest.mark.parametrize("threads", [1, 2])
def test_a_gemm_dot_becomes_a_custom_call_with_its_workspace(threads: int) -> None:
    before, after, changed = run_passes(DOT, [GemmWorkspace(threads)])
    assert changed
    size = _scratch(300, 250, 200, threads)
    config = ("lhs_batch_dims={};rhs_batch_dims={};lhs_contracting_dims={1};"
              "rhs_contracting_dims={1}")
    call = (f"%d.gemm = (f32[300,250]{{1,0}}, u8[{size}]{{0}}) custom-call(%a, %b), "
            f'custom_call_target="{GEMM_TARGET}", backend_config="{config}", '
            'metadata={op_name="mm"}')
    assert call in printed(after), printed(after)
    filecheck(printed(after), """
        CHECK: %d.gemm = {{.*}} custom-call(%a, %b)
        CHECK-NEXT: ROOT %d = f32[300,250]{1,0} get-tuple-element(%d.gemm), index=0
    """)
    assert_same_numerics(before, after)  # the evaluator runs the custom-call as the dot
    dot = gemm_call_dot(after.entry.root.operands[0])
    assert dict(dot.attrs) == {"lhs_contracting_dims": (1,), "rhs_contracting_dims": (1,)}


def test_small_dots_and_text_round_trip() -> None:
    _, after, changed = run_passes(SMALL, [GemmWorkspace(2)])
    assert not changed and "custom-call" not in printed(after)
    _, after, _ = run_passes(DOT, [GemmWorkspace(2)])
    assert printed(parse_module(printed(after))) == printed(after)


def test_workspace_is_a_temp_of_the_assignment_and_no_call_mallocs() -> None:
    """memory_stats() counts the packing scratch (it said 0 while the kernel malloc'ed
    megabytes per call), and the generated code calls no allocator."""
    exe = xlc.compile(DOT, backend="cpu")
    stats = exe.memory_stats()
    from xlc.backend_cpu.parallel import host_threads

    threads = host_threads(0)
    assert stats["temp_bytes"] >= _scratch(300, 250, 200, threads) > 0
    from xlc.backend_cpu import compile_cpu

    cpu = compile_cpu(parse_module(DOT))
    assert "@malloc" not in cpu.llvm_ir and "@free" not in cpu.llvm_ir
    assert "xlc_gemm_f32_shares" in cpu.llvm_ir
    a, b = rand(300, 200), rand(250, 200, seed=1)
    np.testing.assert_allclose(exe(a, b), a @ b.T, rtol=1e-4, atol=1e-4)


def test_two_gemms_share_workspace_memory_and_match_the_evaluator() -> None:
    from xlc.backend_cpu import compile_cpu

    cpu = compile_cpu(parse_module(TWO))
    calls = [i for i in cpu.module.entry.instructions if i.opcode.text == "custom-call"]
    assert len(calls) == 2
    ba = cpu.assignment
    w0, w1 = (ba.slice_of(c, (1,)) for c in calls)
    assert w0.index == w1.index  # both in the one temp block, never live at once
    assert cpu.memory_stats()["temp_bytes"] < w0.size + w1.size + 2 * 130 * 70 * 4 + 1024
    check(TWO, rand(2, 130, 90), rand(2, 90, 70, seed=1), rand(70, 110, seed=2),
          rtol=1e-4, atol=1e-4)


def test_hand_written_gemm_calls_are_checked() -> None:
    """`__xlc$gemm` in HLO text is verified as the dot it stands for, its workspace as u8[S]
    of at least the GEMM's scratch (an error naming the call, never a wrong answer)."""
    call = ('ROOT d = ({out}) custom-call(a, b), custom_call_target="__xlc$gemm", '
            'backend_config="lhs_batch_dims={{}};rhs_batch_dims={{}};'
            'lhs_contracting_dims={{1}};rhs_contracting_dims={{{rc}}}"')
    head = "HloModule m\nENTRY e {\n  a = f32[300,200] parameter(0)\n" \
           "  b = f32[250,200] parameter(1)\n  "

    def text(out: str, rc: int) -> str:
        return head + call.format(out=out, rc=rc) + "\n}\n"

    with pytest.raises(xlc.VerificationError, match="the dot this '__xlc\\$gemm' custom-call "
                       "stands for is invalid: dot: contracting dimension sizes must match"):
        xlc.compile(text("f32[300,250], u8[64]", 0), backend="cpu")
    with pytest.raises(xlc.VerificationError, match="a '__xlc\\$gemm' custom-call returns a "
                       "tuple ending in a u8\\[S\\] workspace, not \\(f32\\[300,250\\], f32"):
        xlc.compile(text("f32[300,250], f32[64]", 1), backend="cpu")
    with pytest.raises(xlc.LoweringError, match="the workspace of d holds 64 bytes, its GEMM "
                       "needs"):
        xlc.compile(text("f32[300,250], u8[64]", 1), backend="cpu")
    # the same call with its workspace compiles and runs as the dot
    a, b = rand(300, 200), rand(250, 200, seed=1)
    size = _scratch(300, 250, 200, 2) + (1 << 20)
    np.testing.assert_allclose(xlc.compile(text(f"f32[300,250], u8[{size}]", 1),
                                           backend="cpu")(a, b)[0], a @ b.T, rtol=1e-4,
                               atol=1e-4)


IN_PLACE = """HloModule in_place
ENTRY e {
  x = f32[64,64] parameter(0)
  w = f32[64,64] parameter(1)
  v = f32[64,96] parameter(2)
  q = f32[64,64] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[64,64] tanh(q)
  ROOT r = f32[64,96] dot(t, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_small_products_read_in_place_with_no_workspace() -> None:
    """Small row-major products run on the GEMM microkernel reading A and B in place: the
    gemm-workspace pass leaves them dots, the program has no temp beyond `t`, and the
    results match the evaluator."""
    _, after, changed = run_passes(IN_PLACE, [GemmWorkspace(2)])
    assert not changed and "custom-call" not in printed(after)
    exe = xlc.compile(IN_PLACE, backend="cpu")
    assert exe.memory_stats()["temp_bytes"] <= 64 * 64 * 4 + 64
    from xlc.backend_cpu import compile_cpu

    assert "xlc_gemm_f32_shares" in compile_cpu(parse_module(IN_PLACE)).llvm_ir
    check(IN_PLACE, rand(64, 64), rand(64, 64, seed=1), rand(64, 96, seed=2),
          rtol=1e-4, atol=1e-4)


WIDE = """HloModule wide
ENTRY e {
  a = f32[196,256] parameter(0)
  b = f32[256,4096] parameter(1)
  ROOT d = f32[196,4096] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_shrunk_gemm_workspace_takes_the_most_threads_that_fit_else_the_smallest() -> None:
    """gemm-workspace-shrink under a share: the workspace of the most threads whose scratch
    fits, else the smallest one. The scratch is not monotonic in the threads (split along n,
    one thread packs a KC x NC block of B, several each a narrower one), so one thread is not
    always the smallest."""
    from xlc.backend_cpu.gemm_workspace import GemmWorkspaceShrink

    _, after, _ = run_passes(WIDE, [GemmWorkspace(8)])
    call = next(i for i in after.entry.instructions
                if i.attrs.get("custom_call_target") == GEMM_TARGET)
    spec = GemmSpec(196, 4096, 256, 1, (0, 256, 1), (0, 4096, 1), (0, 4096, 1))
    sizes = {n: scratch_bytes(spec, n) for n in range(1, 9)}
    assert sizes[1] > sizes[8] > sizes[3] > sizes[2]  # one thread packs the most
    shrink = GemmWorkspaceShrink(8)
    assert shrink.smaller(call, sizes[8]) == (sizes[8], "8 thread(s)")
    assert shrink.smaller(call, sizes[3]) == (sizes[3], "3 thread(s)")
    assert shrink.smaller(call, sizes[2] - 1) == (sizes[2], "2 thread(s)")  # none fits


def _square(m: int, k: int, dtype: str = "float32", **kw: object) -> GemmSpec:
    """C = A @ B for row-major A (m x k) and B (k x k), C row-major like A."""
    return GemmSpec(m, k, k, 1, (0, k, 1), (0, k, 1), (0, k, 1), np.dtype(dtype), **kw)


def test_which_gemms_may_store_c_over_a() -> None:
    """C may lie over A only where each A row is packed by the share owning that row before
    the same C row is stored: one block of k, of n and of packed B, rows split among the
    shares, A packed (not read in place), C with A's strides."""
    assert writes_over_a(_square(2048, 256)) and writes_over_a(_square(300, 100))
    assert not writes_over_a(_square(2048, 300))         # two k blocks: A read again later
    assert not writes_over_a(_square(2048, 256, "float64"))  # two column blocks of packed B
    assert not writes_over_a(_square(2048, 256, accumulate=True))
    assert not writes_over_a(_square(40, 256))           # split along n: shares share rows
    assert not writes_over_a(_square(2048, 32))          # one NR panel: A read in place
    assert not writes_over_a(_square(16, 16))            # the plain loop nest
    rect = GemmSpec(2048, 128, 256, 1, (0, 256, 1), (0, 128, 1), (0, 128, 1))
    assert not writes_over_a(rect)
    at = GemmSpec(2048, 256, 256, 1, (0, 1, 2048), (0, 256, 1), (0, 256, 1))
    assert not writes_over_a(at)                         # A column-major: other strides


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("m,k", [(2048, 256), (300, 100), (1001, 64), (230, 256)])
def test_gemm_stores_c_over_a_correctly(m: int, k: int, threads: int) -> None:
    """Where `writes_over_a`, the GEMM called with C = A (one array) gives A @ B, on one
    thread and on two (several shares per thread)."""
    spec = _square(m, k)
    assert writes_over_a(spec)
    a, b = rand(m, k), rand(k, k, seed=1)
    want = a.astype(np.float64) @ b.astype(np.float64)
    g = compile_gemm(spec, threads)
    got = g(a, b, a)
    assert got is a
    np.testing.assert_allclose(a, want, rtol=2e-4, atol=2e-4)


BACKWARD = """HloModule backward
ENTRY e {
  g = f32[1024,256] parameter(0)
  w = f32[256,256] parameter(1)
  dz = f32[1024,256] tanh(g)
  dh = f32[1024,256] dot(dz, w), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  ROOT r = f32[1024,256] exponential(dh)
}
"""


def test_a_layers_backward_gemm_writes_over_its_dying_lhs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """dh = dz @ w.T with a square w: the GEMM's result takes dz's buffer (dz dies there),
    one activation-sized buffer less; the values match the evaluator. The emitter refuses
    a result over an operand its GEMM cannot write over."""
    from xlc.backend_cpu import compile_cpu, emit_gemm

    exe = compile_cpu(parse_module(BACKWARD))
    call = next(i for i in exe.module.entry.instructions if i.opcode.text == "custom-call")
    assert "output_may_reuse_lhs={1}" in call.to_text()
    assert exe.assignment.slice_of(call, (0,)) == exe.assignment.slice_of(call.operands[0])
    check(BACKWARD, rand(1024, 256), rand(256, 256, seed=1), rtol=1e-4, atol=1e-4)
    from xlc.backend_cpu.gemm_dot import DotGemm, gemm_plan_for_dot

    class Refusing(DotGemm):  # the emitter's plan says no, the assignment has shared
        @property
        def writes_over_lhs(self) -> bool:
            return False

    def refusing_plan(dot: object) -> DotGemm | None:
        plan = gemm_plan_for_dot(dot)  # type: ignore[arg-type]
        return None if plan is None else Refusing(plan.spec, plan.loops)
    monkeypatch.setattr(emit_gemm, "gemm_plan_for_dot", refusing_plan)
    with pytest.raises(xlc.LoweringError, match=r"^CPU backend: the result of dh\.gemm "
                       r"overlaps its lhs dz, which its GEMM cannot do$"):
        compile_cpu(parse_module(BACKWARD))


def test_a_hand_written_reuse_flag_the_gemm_cannot_honour_is_refused() -> None:
    """`output_may_reuse_lhs={1}` written by hand on a call whose GEMM would read A again
    after storing C (k = 300: two k blocks): the assignment takes the flag at its word, the
    emitter refuses, naming the call - never a wrong answer."""
    size = _scratch(1024, 300, 300, 2) + (1 << 20)
    text = f"""HloModule m
ENTRY e {{
  g = f32[1024,300] parameter(0)
  w = f32[300,300] parameter(1)
  dz = f32[1024,300] tanh(g)
  c = (f32[1024,300], u8[{size}]) custom-call(dz, w), custom_call_target="__xlc$gemm",
      backend_config="lhs_batch_dims={{}};rhs_batch_dims={{}};lhs_contracting_dims={{1}};rhs_contracting_dims={{0}};output_may_reuse_lhs={{1}}"
  d = f32[1024,300] get-tuple-element(c), index=0
  ROOT r = f32[1024,300] exponential(d)
}}
"""
    with pytest.raises(xlc.LoweringError, match=r"^CPU backend: the result of c overlaps its "
                       r"lhs dz, which its GEMM cannot do$"):
        xlc.compile(text, backend="cpu")
