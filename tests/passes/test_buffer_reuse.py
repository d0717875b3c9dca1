"""Buffer assignment: a value computed in place of an operand that dies there, when that operand
is a must-alias set of several buffers (an in-place update chain) or when the value is a while
loop's new state computed from a temp that lives only in the loop slot's gap. Written as HLO
text with an explicit schedule; each assignment is validated and executed through memory."""
from __future__ import annotations

import numpy as np

from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.parser import parse_module
from xlc.passes.buffer_assignment import assign_buffers
from xlc.passes.buffer_validator import validate_buffer_assignment
from xlc.passes.copy_insertion import CopyInsertion
from xlc.passes.ordering import DependencyHloOrdering, SequentialHloOrdering

from .memory_builders import post_order_schedule
from .memory_interpreter import run_with_memory


def _check_runs(m, ba, args) -> None:
    validate_buffer_assignment(ba)
    want = flatten_result(evaluate(m, args))
    got = flatten_result(run_with_memory(ba, None, args))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


IN_PLACE_CHAIN = """
HloModule chain
add_f32 {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY main {
  table = f32[50,16]{1,0} parameter(0)
  ids = s32[8,1]{1,0} parameter(1)
  upd = f32[8,16]{1,0} parameter(2)
  sc = f32[50,16]{1,0} scatter(table, ids, upd), update_window_dims={1},
       inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,
       to_apply=add_f32
  ROOT half = f32[50,16]{1,0} multiply(sc, sc)
}
"""


def test_in_place_chain_hands_its_buffer_to_the_live_out_result() -> None:
    """table.copy -> scatter (must alias: one set of two buffers) -> multiply (elementwise,
    live out): the copy and the scatter are computed in the output allocation, no temp."""
    m = parse_module(IN_PLACE_CHAIN.replace(",\n       ", ", "), verify=True)
    CopyInsertion().run(m)
    ba = assign_buffers(m, SequentialHloOrdering(m, post_order_schedule(m)))
    out = ba.slice_of(m.entry.root)
    assert out.allocation.maybe_live_out
    assert ba.slice_of(m.entry.instruction("sc")) == out
    assert ba.slice_of(m.entry.instruction("table.copy")) == out
    assert ba.stats()["temp_bytes"] == 0
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((50, 16)).astype(np.float32),
            rng.integers(0, 50, (8, 1)).astype(np.int32),
            rng.standard_normal((8, 16)).astype(np.float32)]
    _check_runs(m, ba, args)
    _check_runs(m, assign_buffers(m, DependencyHloOrdering(m)), args)


ST = "(s32[], f32[16,64]{1,0}, f32[16,32]{1,0}, f32[32,64]{1,0}, f32[64,64]{1,0})"
RNN = """
HloModule rnn
cond {
  cp = ST parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(ci, n), direction=LT
}
body {
  bp = ST parameter(0)
  i = s32[] get-tuple-element(bp), index=0
  h = f32[16,64]{1,0} get-tuple-element(bp), index=1
  x = f32[16,32]{1,0} get-tuple-element(bp), index=2
  wx = f32[32,64]{1,0} get-tuple-element(bp), index=3
  wh = f32[64,64]{1,0} get-tuple-element(bp), index=4
  hw = f32[16,64]{1,0} dot(h, wh), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  xw = f32[16,64]{1,0} dot(x, wx), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  s = f32[16,64]{1,0} add(xw, hw)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT bt = ST tuple(i1, s, x, wx, wh)
}
ENTRY main {
  h0 = f32[16,64]{1,0} parameter(0)
  x = f32[16,32]{1,0} parameter(1)
  wx = f32[32,64]{1,0} parameter(2)
  wh = f32[64,64]{1,0} parameter(3)
  zero = s32[] constant(0)
  hn = f32[16,64]{1,0} negate(h0)
  init = ST tuple(zero, hn, x, wx, wh)
  w = ST while(init), condition=cond, body=body
  ROOT r = f32[16,64]{1,0} get-tuple-element(w), index=1
}
""".replace("ST", ST)


def _with_first(comp, first: str, then: str) -> list:
    """The post order of `comp` with instruction `then` moved right after `first`."""
    order = [i for i in comp.post_order() if i.name != then]
    k = next(n for n, i in enumerate(order) if i.name == first)
    return order[:k + 1] + [comp.instruction(then)] + order[k + 1:]


def test_new_loop_state_is_computed_in_place_of_a_temp_living_in_the_slot_gap() -> None:
    """RNN step: once `hw` has read the old `h`, the loop slot is free until `s` defines the
    new state; `xw` lives only in that gap, so it is placed in the slot and `s` = add(xw, hw)
    takes it over. Temps: `hw` and the counter only (XLA needs both dot results as temps)."""
    m = parse_module(RNN, verify=True)
    CopyInsertion().run(m)
    body = m.computation("body")
    sched = post_order_schedule(m)
    sched[body] = _with_first(body, "hw", "xw")
    ba = assign_buffers(m, SequentialHloOrdering(m, sched))
    slot = ba.slice_of(body.instruction("s"))
    assert slot == ba.slice_of(m.entry.root) and slot.allocation.maybe_live_out
    assert ba.slice_of(body.instruction("xw")) == slot
    assert ba.slice_of(body.instruction("hw")) != slot
    assert any(sh.user is body.instruction("s") for sh in ba.shares)
    assert ba.stats()["temp_bytes"] <= 16 * 64 * 4 + 64
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) * 0.1
            for s in ((16, 64), (16, 32), (32, 64), (64, 64))]
    _check_runs(m, ba, args)
    # the other order (xw before hw reads h) leaves no gap: both dot results are temps
    sched[body] = _with_first(body, "xw", "hw")
    other = assign_buffers(m, SequentialHloOrdering(m, sched))
    assert other.slice_of(body.instruction("xw")) != other.slice_of(body.instruction("s"))
    assert other.stats()["temp_bytes"] >= 2 * 16 * 64 * 4
    _check_runs(m, other, args)
