"""tools/memory_optimum.py: the DAG memory model, its simulator and the exact (ILP) optima.

Hand-written modules whose optimum is worked out in the comments; schedules are the text order
(`_scheduled`) unless a test runs xlc's pipeline (`compare_case`)."""
from __future__ import annotations

import pytest

pytest.importorskip("scipy")

from tools.memory_optimum import ModuleGraph, build_graph, compare_case  # noqa: E402
from tools.memory_optimum_ilp import (  # noqa: E402
    MemoryGraph,
    lower_bound,
    prune,
    simulate,
    solve,
    solve_lexicographic,
)
from xlc.hlo.ir import HloModule  # noqa: E402
from xlc.hlo.parser import parse_module  # noqa: E402
from xlc.passes.buffer_assignment import assign_buffers  # noqa: E402
from xlc.passes.memory_budget import device_peak_bytes  # noqa: E402

# p: 16 B (static). a, b, a2, b2: 1024 B each; as, bs, r: 16 B. reverse shares no buffer.
# Breadth first (the text order): a, b, a2 (a, b, a2 live) -> 16 + 3 x 1024 = 3088.
# Depth first: the second reverse runs with its input, its output and one 16-byte slice of
# the first branch live: 16 + 2 x 1024 + 16 = 2080, the optimum (the first branch's result
# must be kept across the second branch in some form, at least `as`).
FAN_OUT = """
HloModule fan_out
ENTRY main {
  p = f32[4]{0} parameter(0)
  a = f32[64,4]{1,0} broadcast(p), dimensions={1}
  b = f32[64,4]{1,0} broadcast(p), dimensions={1}
  a2 = f32[64,4]{1,0} reverse(a), dimensions={0}
  b2 = f32[64,4]{1,0} reverse(b), dimensions={0}
  as = f32[1,4]{1,0} slice(a2), slice={[0:1], [0:4]}
  bs = f32[1,4]{1,0} slice(b2), slice={[0:1], [0:4]}
  ROOT r = f32[1,4]{1,0} add(as, bs)
}
"""

# `a` (1024 B, recompute cost 16 + 1024 = 1040 bytes moved) feeds `c` early and `u` late. Kept
# throughout, it is live at c2: 16 + a 1024 + c 2048 + c2 2048 = 5136 in every order. Recomputed
# after c2 (cost 1040), the peak is c + c2 + p = 4112.
REMAT = """
HloModule remat
ENTRY main {
  p = f32[4]{0} parameter(0)
  a = f32[64,4]{1,0} broadcast(p), dimensions={1}
  c = f32[128,4]{1,0} concatenate(a, a), dimensions={0}
  c2 = f32[128,4]{1,0} reverse(c), dimensions={0}
  cs = f32[1,4]{1,0} slice(c2), slice={[0:1], [0:4]}
  csr = f32[4]{0} reshape(cs)
  cb = f32[64,4]{1,0} broadcast(csr), dimensions={1}
  u = f32[64,4]{1,0} add(a, cb)
  ROOT r = f32[1,4]{1,0} slice(u), slice={[0:1], [0:4]}
}
"""

# Elementwise chain: each op may take over its dying operand's buffer (a share), so one 1 KiB
# buffer suffices besides the parameter: 1024 + 1024 = 2048 (without shares: 3072).
CHAIN = """
HloModule chain
ENTRY main {
  p = f32[256]{0} parameter(0)
  e = f32[256]{0} exponential(p)
  n = f32[256]{0} negate(e)
  ROOT s = f32[256]{0} sine(n)
}
"""

# The CPU pipeline turns the dot into xlc's packed GEMM: a custom-call with a u8 workspace.
MATMUL = """
HloModule matmul
ENTRY main {
  a = f32[64,32]{1,0} parameter(0)
  b = f32[64,32]{1,0} parameter(1)
  ROOT d = f32[64,64]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={1}
}
"""
"""a @ b.T with k = 32: packed (a plain a @ b this small reads its operands in place and
a @ b.T with k >= 48 runs as row dots, both with no workspace)"""

LOOP = """
HloModule loop
cond {
  cp = (s32[], f32[64]{0}) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  lim = s32[] constant(4)
  ROOT lt = pred[] compare(ci, lim), direction=LT
}
body {
  bp = (s32[], f32[64]{0}) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bx = f32[64]{0} get-tuple-element(bp), index=1
  one = s32[] constant(1)
  inc = s32[] add(bi, one)
  bxx = f32[64]{0} multiply(bx, bx)
  ROOT br = (s32[], f32[64]{0}) tuple(inc, bxx)
}
ENTRY main {
  x = f32[64]{0} parameter(0)
  zero = s32[] constant(0)
  xn = f32[64]{0} negate(x)
  init = (s32[], f32[64]{0}) tuple(zero, xn)
  w = (s32[], f32[64]{0}) while(init), condition=cond, body=body
  ROOT res = f32[64]{0} get-tuple-element(w), index=1
}
"""


def _scheduled(text: str) -> tuple[HloModule, ModuleGraph]:
    """The module scheduled in text order, and its graph."""
    m = parse_module(text, verify=True)
    assert m.entry is not None
    m.schedule = {m.entry: list(m.entry.instructions)}
    return m, build_graph(m)


def _names(mg: ModuleGraph, schedule: list[int]) -> list[str]:
    return [mg.graph.names[i] for i in schedule]


def _assert_valid(mg: ModuleGraph, schedule: list[int]) -> None:
    """Every operand of each scheduled instruction ran before it (parameters always have)."""
    done: set[str] = set()
    for name in _names(mg, schedule):
        inst = mg.nodes[mg.graph.names.index(name)]
        missing = [o.name for o in inst.operands
                   if o.opcode.value not in ("parameter", "constant") and o.name not in done]
        assert not missing, f"{name} runs before {missing}"
        done.add(name)
    assert done == set(mg.graph.names)


def test_fan_out_optimal_order_finishes_one_branch_first() -> None:
    _, mg = _scheduled(FAN_OUT)
    assert mg.graph.static_bytes == 16
    assert mg.xlc_peak() == 3088  # the text order
    res = solve(mg.graph)
    assert res.status == "optimal" and res.peak == 2080
    order = _names(mg, res.schedule)
    first = "a2" if order.index("a2") < order.index("b2") else "b2"
    other = {"a2": "b", "b2": "a"}[first]
    assert order.index(first) < order.index(other)  # the other branch has not started


def test_recomputation_lowers_the_peak_within_its_cost_budget() -> None:
    _, mg = _scheduled(REMAT)
    g = mg.graph
    a = g.names.index("a")
    assert g.cost[a] == 1040 and g.remat[a]
    assert mg.xlc_peak() == 5136
    assert solve(g).peak == 5136  # no order avoids it without recomputation
    assert solve(g, 3, 1039.0).peak == 5136  # too little budget
    res = solve_lexicographic(g, 3, 1040.0)
    assert res.status == "optimal" and res.peak == 4112
    assert res.recompute_cost == 1040
    names = _names(mg, res.schedule)
    runs_of_a = [t for t, name in enumerate(names) if name == "a"]
    assert len(runs_of_a) == 2 and runs_of_a[1] > names.index("c2")  # recomputed after c2


@pytest.mark.parametrize("text", [FAN_OUT, REMAT, CHAIN], ids=["fan_out", "remat", "chain"])
@pytest.mark.parametrize("budget", [0.0, 1040.0, None])
def test_ilp_schedule_is_valid_and_its_simulated_peak_is_the_objective(
        text: str, budget: float | None) -> None:
    _, mg = _scheduled(text)
    res = solve(mg.graph, 3, budget)
    assert res.status == "optimal" and res.objective is not None
    _assert_valid(mg, res.schedule)
    sim = simulate(mg.graph, res.schedule)
    assert sim.peak == res.peak == round(res.objective)
    if budget is not None:
        assert sim.recompute_cost <= budget
    assert res.bound <= res.objective + 1e-6


def test_shares_match_buffer_assignment() -> None:
    m, mg = _scheduled(CHAIN)
    assert len(mg.graph.shares) == 2
    assert mg.xlc_peak() == 2048
    assert device_peak_bytes(assign_buffers(m)) == 2048
    assert solve(mg.graph).peak == 2048


def test_simulate_rejects_invalid_schedules_and_prune_drops_unread_runs() -> None:
    _, mg = _scheduled(REMAT)
    g = mg.graph
    with pytest.raises(ValueError, match="runs before"):
        simulate(g, [1, 0, 2, 3, 4, 5, 6, 7])
    with pytest.raises(ValueError, match="never scheduled"):
        simulate(g, [0, 1, 2, 3, 4, 5, 6])
    wasteful = [0, 0, 1, 2, 3, 4, 5, 6, 7]  # the first `a` is never read
    assert prune(g, wasteful) == list(range(8))
    assert simulate(g, wasteful).recompute_cost == 1040


def test_memory_graph_check_rejects_a_non_topological_order() -> None:
    bad = MemoryGraph(("x", "y"), (0, 0), (False, False), (0, 0),
                      (frozenset({1}), frozenset()), (frozenset(), frozenset()), (0, 1),
                      (4, 4), frozenset({1}), 0)
    with pytest.raises(ValueError, match="depends on later nodes"):
        bad.check()


def test_control_flow_is_never_recomputed() -> None:
    row = compare_case("loop", LOOP, fractions=(0.6,), time_limit=10.0)
    assert row["ilp_status"] == "optimal"
    m = parse_module(LOOP, verify=True)
    from xlc.api import optimize_module

    mg = build_graph(optimize_module(m, "cpu").module)
    for inst, ok in zip(mg.nodes, mg.graph.remat):
        if inst.opcode.value in ("while", "copy", "tuple", "get-tuple-element"):
            assert not ok, inst.name


def test_lower_bound_and_incumbent() -> None:
    _, mg = _scheduled(FAN_OUT)
    g = mg.graph
    # the reverse's stage: p + its input + its output; nothing forces a branch across it
    assert lower_bound(g) == 16 + 2048
    res = solve(g, incumbent=list(range(g.n)))
    assert res.status == "optimal" and res.peak == 2080 and res.bound <= 2080
    _, mg = _scheduled(CHAIN)  # xlc's order meets the bound: no solve needed
    res = solve(mg.graph, incumbent=list(range(mg.graph.n)))
    assert (res.status, res.peak, res.variables, res.schedule) == ("optimal", 2048, 0, [0, 1, 2])


def test_gemm_may_be_recomputed_and_its_workspace_is_scratch() -> None:
    from tools.memory_optimum import run_xlc

    mg = build_graph(run_xlc(MATMUL).module)
    (gemm,) = [j for j, i in enumerate(mg.nodes) if i.opcode.value == "custom-call"]
    assert mg.graph.remat[gemm] and mg.graph.transient[gemm] > 0
    assert mg.graph.cost[gemm] == (2 * 64 * 32 + 64 * 64) * 4  # two operands and the result


@pytest.mark.parametrize("text", [FAN_OUT, REMAT], ids=["fan_out", "remat"])
def test_xlc_under_a_memory_limit_is_never_better_than_the_ilp(text: str) -> None:
    # without fusion the modules keep their structure (with it, each is one fusion)
    row = compare_case("t", text, fractions=(0.5, 0.8), time_limit=10.0, fusion=False)
    assert row["ilp_status"] == "optimal"
    assert row["xlc_peak"] >= row["ilp_peak"]
    assert row["ilp_packed"] is not None
    for b in row["budgets"]:
        assert b["ilp_status"] == "optimal"
        assert b["ilp_recompute_cost"] <= b["xlc_recompute_cost"]
        assert b["xlc_peak"] >= b["ilp_peak"], b
        assert b["gap_pct"] >= 0.0
        if b["xlc_plan_in_base_model"] is not None:  # xlc's plan, replayed on the base graph
            assert b["xlc_plan_in_base_model"] == b["xlc_peak"]
