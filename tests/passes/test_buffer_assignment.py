"""BufferAssignment: allocation kinds, slices, operand reuse, heap packing, stats/report/JSON,
and the validator (on good and deliberately broken assignments)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from xlc.errors import VerificationError
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module
from xlc.hlo.verifier import verify_module
from xlc.passes.buffer_assignment import assign_buffers
from xlc.passes.buffer_validator import validate_buffer_assignment
from xlc.passes.copy_insertion import CopyInsertion
from xlc.passes.ordering import (
    DependencyHloOrdering,
    PredecessorHloOrdering,
    SequentialHloOrdering,
    TimeInterval,
)
from xlc.passes.scheduler import MemoryScheduler

from .memory_builders import (
    classic,
    const,
    counting_while,
    f32,
    new_module,
    post_order_schedule,
    s32,
    tuple_,
)
from .memory_interpreter import run_with_memory


def all_orderings(m):
    return [SequentialHloOrdering(m, post_order_schedule(m)), DependencyHloOrdering(m),
            PredecessorHloOrdering(m)]


def test_classic_allocations_and_slices() -> None:
    m, d = classic()
    ba = assign_buffers(m, SequentialHloOrdering(m, post_order_schedule(m)))
    validate_buffer_assignment(ba)
    assert [a.kind for a in ba.allocations] == ["parameter", "output", "temp"]
    p, out, temp = ba.allocations
    assert p.is_readonly and not out.is_readonly and out.maybe_live_out
    assert str(ba.slice_of(d["param"])) == "{index:0, offset:0, size:16}"
    assert str(ba.slice_of(d["add"])) == "{index:1, offset:0, size:16}"
    # add's output reuses negate's dying buffer (the last use, elementwise): negate lives in
    # the output allocation; exp is the only temp
    assert ba.slice_of(d["negate"]) == ba.slice_of(d["add"])
    assert str(ba.slice_of(d["exp"])) == "{index:2, offset:0, size:16}"
    s = ba.stats()
    assert (s["parameter_bytes"], s["output_bytes"], s["temp_bytes"], s["constant_bytes"],
            s["alias_bytes"], s["peak_bytes"]) == (16, 16, 16, 0, 0, 48)
    assert s["temp_lower_bound_bytes"] == 16 and s["allocation_count"] == 3


def test_classic_without_operand_reuse() -> None:
    m, d = classic()
    ba = assign_buffers(m, SequentialHloOrdering(m, post_order_schedule(m)),
                        reuse_operands=False)
    validate_buffer_assignment(ba)
    temp = ba.allocations[2]
    neg, exp = ba.slice_of(d["negate"]), ba.slice_of(d["exp"])
    assert neg.allocation is temp and exp.allocation is temp
    # 16-byte buffers are 16-byte aligned (not 64): no padding between them
    assert {neg.offset, exp.offset} == {0, 16} and temp.size == 32
    assert ba.stats()["temp_lower_bound_bytes"] == 32
    m, d = classic(size=20)  # 80-byte buffers: the full 64-byte alignment
    ba = assign_buffers(m, SequentialHloOrdering(m, post_order_schedule(m)),
                        reuse_operands=False)
    validate_buffer_assignment(ba)
    assert sorted(ba.slice_of(d[n]).offset for n in ("negate", "exp")) == [0, 128]


CHAIN = """
HloModule chain

ENTRY main {
  x = f32[16]{0} parameter(0)
  a = f32[16]{0} negate(x)
  b = f32[16]{0} exponential(a)
  c = f32[16]{0} log(b)
  ROOT d = f32[16]{0} abs(c)
  }
"""


def test_elementwise_chain_reuses_dying_operand_buffers() -> None:
    m = parse_module(CHAIN, verify=True)
    sched = SequentialHloOrdering(m, post_order_schedule(m))
    ba = assign_buffers(m, sched)
    validate_buffer_assignment(ba)
    e = m.entry
    # the whole chain ends in the live-out `d`: every link lives in the output allocation
    assert ba.slice_of(e.instruction("a")) == ba.slice_of(e.instruction("b")) \
        == ba.slice_of(e.instruction("c")) == ba.slice_of(e.instruction("d"))
    assert ba.stats()["temp_bytes"] == 0 and ba.temp_allocations == []
    assert len(ba.shares) == 3
    no_reuse = assign_buffers(m, sched, reuse_operands=False)
    validate_buffer_assignment(no_reuse)
    assert no_reuse.stats()["temp_bytes"] == 128  # a and c can share, b cannot
    assert no_reuse.slice_of(e.instruction("a")) != no_reuse.slice_of(e.instruction("d"))


TEMPS_BEFORE_OUTPUT = """
HloModule window

add_f32 {
  l = f32[] parameter(0)
  r = f32[] parameter(1)
  ROOT s = f32[] add(l, r)
}

ENTRY main {
  x = f32[256]{0} parameter(0)
  z = f32[] constant(0)
  big = f32[256]{0} exponential(x)
  sum = f32[] reduce(big, z), dimensions={0}, to_apply=add_f32
  b = f32[1024]{0} broadcast(sum), dimensions={}
  ROOT o = f32[1024]{0} negate(b)
}
"""


def test_temps_fill_output_allocation_before_the_output_is_defined() -> None:
    m = parse_module(TEMPS_BEFORE_OUTPUT, verify=True)
    ba = assign_buffers(m, SequentialHloOrdering(m, post_order_schedule(m)))
    validate_buffer_assignment(ba)
    out = ba.slice_of(m.entry.root).allocation
    # `big` dies (at the reduce) before `o` exists; `b` is reused by `o` itself
    assert ba.slice_of(m.entry.instruction("big")).allocation is out
    assert ba.slice_of(m.entry.instruction("b")) == ba.slice_of(m.entry.root)
    # `sum` is live while `big` dies and `b` is born: it needs a temp of its own
    assert ba.slice_of(m.entry.instruction("sum")).allocation.kind == "temp"
    assert ba.stats()["temp_bytes"] == 4


def test_alignment_parameter() -> None:
    m, d = classic(size=100)
    ba = assign_buffers(m, SequentialHloOrdering(m, post_order_schedule(m)), alignment=256,
                        reuse_operands=False)
    validate_buffer_assignment(ba)
    assert sorted(ba.slice_of(d[n]).offset for n in ("negate", "exp")) == [0, 512]
    assert ba.stats()["temp_bytes"] == 912
    # below the alignment, a buffer is aligned to the largest power of two dividing its size
    m, d = classic(size=3)
    ba = assign_buffers(m, SequentialHloOrdering(m, post_order_schedule(m)), alignment=256,
                        reuse_operands=False)
    validate_buffer_assignment(ba)
    assert sorted(ba.slice_of(d[n]).offset for n in ("negate", "exp")) == [0, 12]
    assert ba.stats()["temp_bytes"] == 24


def test_while_body_temps_share_the_whole_module_heap() -> None:
    m, d = counting_while(size=64)
    CopyInsertion().run(m)
    for ordering in all_orderings(m):
        ba = assign_buffers(m, ordering)
        validate_buffer_assignment(ba)
        # carried values share one slice: init element, body param element, body root element
        assert ba.slice_of(d["xn"]) == ba.slice_of(d["mul"]) == ba.slice_of(d["bx"]) \
            == ba.slice_of(d["result"])
        body_root = m.computation("body").root
        assert body_root is not None
        assert ba.slice_of(d["while"].operands[0]) == ba.slice_of(body_root) \
            == ba.slice_of(d["while"])
        assert ba.slice_of(d["result"]).allocation.maybe_live_out
    seq = assign_buffers(m, SequentialHloOrdering(m, post_order_schedule(m)))
    temps = seq.temp_allocations
    assert len(temps) == 1
    # the body's broadcast is a temp placed in the same combined allocation as the entry's
    # loop-state index table
    assert seq.slice_of(d["two_b"]).allocation is temps[0]
    assert seq.slice_of(d["while"]).allocation is temps[0]


FUSED = """
HloModule fused, input_output_alias={ {}: (0, {}, may-alias) }

add_f32 {
  l = f32[] parameter(0)
  r = f32[] parameter(1)
  ROOT s = f32[] add(l, r)
}

fc {
  p = f32[8]{0} parameter(0)
  q = f32[8]{0} negate(p)
  ROOT e = f32[8]{0} exponential(q)
}

ENTRY main {
  x = f32[8]{0} parameter(0)
  f = f32[8]{0} fusion(x), kind=kLoop, calls=fc
  z = f32[] constant(0)
  sum = f32[] reduce(f, z), dimensions={0}, to_apply=add_f32
  b = f32[8]{0} broadcast(sum), dimensions={}
  ROOT o = f32[8]{0} add(f, b)
}
"""


def test_fusion_bodies_unassigned_reduce_bodies_thread_local_and_io_alias() -> None:
    m = parse_module(FUSED, verify=True)
    CopyInsertion().run(m)
    for ordering in all_orderings(m):
        ba = assign_buffers(m, ordering)
        validate_buffer_assignment(ba)
        fc = m.computation("fc")
        with pytest.raises(VerificationError, match="no slices for 'q' at index"):
            ba.slice_of(fc.instruction("q"))
        add = m.computation("add_f32")
        tl = ba.slice_of(add.instruction("s")).allocation
        assert tl.kind == "thread_local" and tl.is_thread_local
        # the output is donated into parameter 0
        px = ba.slice_of(m.entry.instruction("x")).allocation
        assert px.kind == "parameter" and not px.is_readonly and px.aliased_with_output
        assert ba.slice_of(m.entry.root) == ba.slice_of(m.entry.instruction("x"))
        assert ba.slice_of(m.entry.instruction("z")).allocation.kind == "constant"
        s = ba.stats()
        assert s["alias_bytes"] == 32 and s["output_bytes"] == 32 and s["constant_bytes"] == 4
        assert s["peak_bytes"] == 32 + s["temp_bytes"]


def test_report_and_json() -> None:
    m, _ = classic()
    ba = assign_buffers(m, SequentialHloOrdering(m, post_order_schedule(m)),
                        reuse_operands=False)
    text = ba.report()
    lines = text.splitlines()
    assert lines[0] == "BufferAssignment:"
    assert lines[1] == "allocation 0: size 16, parameter 0, shape |f32[4]{0}| at ShapeIndex {}:"
    assert lines[2] == " value: <0 param @0> (size=16,offset=0): f32[4]{0}"
    assert "allocation 1: size 16, output shape is |f32[4]{0}|, maybe-live-out:" in lines
    assert "allocation 2: size 32, preallocated-temp:" in lines
    assert "     preallocated temp allocation:        32B" in lines
    assert "  preallocated temp fragmentation:         0B (0.00%)" in lines
    js = ba.to_json()
    json.dumps(js)
    assert [a["kind"] for a in js["allocations"]] == ["parameter", "output", "temp"]
    assert js["allocations"][2]["heap_algorithm"] in ("spatial", "temporal")
    assert js["stats"]["temp_bytes"] == 32
    assert js["timeline"] == ["param", "negate", "exp", "add"]
    exp = next(b for a in js["allocations"] for b in a["assigned"] if b["instruction"] == "exp")
    assert exp["live"] == [[2, 3]] and exp["shape"] == "f32[4]{0}"


def test_default_ordering_schedules_without_touching_the_module() -> None:
    m, d = classic()
    ba = assign_buffers(m)
    validate_buffer_assignment(ba)
    assert m.schedule is None
    assert isinstance(ba.ordering, SequentialHloOrdering)


COLORS = """
HloModule colors

ENTRY main {
  x = f32[4]{0} parameter(0)
  a = f32[4]{0:S(1)} negate(x)
  b = f32[4]{0} exponential(a)
  ROOT r = f32[4]{0} add(b, x)
}
"""


def test_colors_get_separate_temp_allocations() -> None:
    m = parse_module(COLORS, verify=True)
    ba = assign_buffers(m)
    validate_buffer_assignment(ba)
    # `a` lives in memory space 1: its own temp allocation of color 1; `b` (color 0) is reused
    # by the output `r`; nothing of color 1 may land in a color-0 allocation
    assert [a.color for a in ba.temp_allocations] == [1]
    assert ba.slice_of(m.entry.instruction("a")).allocation.color == 1
    assert ba.slice_of(m.entry.instruction("b")) == ba.slice_of(m.entry.root)
    assert all(b.color == alloc.color for alloc in ba.allocations for b in alloc.assigned)


# ---- validator negative cases ----------------------------------------------------------------
def _classic_assignment():
    m, d = classic()
    ba = assign_buffers(m, SequentialHloOrdering(m, post_order_schedule(m)),
                        reuse_operands=False)
    temp = ba.temp_allocations[0]
    neg = ba.dataflow.defined_at(d["negate"])
    exp = ba.dataflow.defined_at(d["exp"])
    return ba, temp, neg, exp, d


def test_validator_rejects_overlapping_live_buffers() -> None:
    ba, temp, neg, exp, _ = _classic_assignment()
    temp.assigned[exp] = temp.assigned[neg]
    with pytest.raises(VerificationError, match=r"buffers <1 negate @0> and <2 exp @0> may be "
                                                r"live at the same time but overlap"):
        validate_buffer_assignment(ba)


def test_validator_rejects_out_of_bounds_misaligned_and_missing() -> None:
    ba, temp, neg, exp, _ = _classic_assignment()
    temp.assigned[exp] = (24, 16)
    with pytest.raises(VerificationError, match="lies outside allocation 2 of size 32"):
        validate_buffer_assignment(ba)
    temp.assigned[exp] = (8, 16)
    with pytest.raises(VerificationError, match="is not aligned to 16"):
        validate_buffer_assignment(ba)
    del temp.assigned[exp]
    del ba._alloc_of[exp]
    with pytest.raises(VerificationError, match=r"buffer <2 exp @0> \(f32\[4\]\{0\}\) has no "
                                                r"allocation"):
        validate_buffer_assignment(ba)


def test_validator_rejects_live_out_in_temp_and_written_parameter() -> None:
    ba, temp, neg, exp, d = _classic_assignment()
    add = ba.dataflow.defined_at(d["add"])
    out = ba.allocation_of(add)
    del out.assigned[add]
    temp.assigned[add] = (0, 16)
    temp.assigned.pop(neg)
    temp.assigned[neg] = (16, 16)
    temp.assigned.pop(exp)
    with pytest.raises(VerificationError, match="live-out buffer <3 add @0> is in temp"):
        validate_buffer_assignment(ba)
    ba, temp, neg, exp, d = _classic_assignment()
    param_alloc = ba.allocations[0]
    param_alloc.assigned[neg] = (0, 16)
    with pytest.raises(VerificationError, match="read-only parameter allocation 0 is written "
                                                "by 'negate'"):
        validate_buffer_assignment(ba)


# ---- execution through the assigned memory ---------------------------------------------------
_UNARY = [Opcode.NEGATE, Opcode.ABS, Opcode.SIN, Opcode.COS, Opcode.TANH]
_BINARY = [Opcode.ADD, Opcode.SUBTRACT, Opcode.MULTIPLY, Opcode.MAXIMUM, Opcode.MINIMUM]

programs = st.lists(st.tuples(st.sampled_from(["unary", "binary", "dus"]), st.integers(0, 99),
                              st.integers(0, 99), st.integers(0, 5)), min_size=1, max_size=14)


def build_random(ops: list, outs: list[int], n_params: int):
    """A random flat program over f32[8] values (elementwise ops and in-place updates)."""
    m, e = new_module("random")
    vals = [e.add_parameter(i, f32(8), f"p{i}") for i in range(n_params)]
    upd = e.add_parameter(n_params, f32(2), "upd")
    for n, (kind, a, b, c) in enumerate(ops):
        x, y = vals[a % len(vals)], vals[b % len(vals)]
        if kind == "unary":
            v = e.add(_UNARY[c % len(_UNARY)], f32(8), (x,), name=f"u{n}")
        elif kind == "binary":
            v = e.add(_BINARY[c % len(_BINARY)], f32(8), (x, y), name=f"b{n}")
        else:
            k = const(e, c, s32(), f"k{n}")
            v = e.add(Opcode.DYNAMIC_UPDATE_SLICE, f32(8), (x, upd, k), name=f"d{n}")
        vals.append(v)
    picks = [vals[i % len(vals)] for i in outs]
    e.set_root(picks[0] if len(picks) == 1 else tuple_(e, picks, "out"))
    return m


def _random_topological(comp, rng) -> list:
    done: set[int] = set()
    order = []
    pending = list(comp.instructions)
    while pending:
        ready = [i for i in pending if all(o.uid in done for o in i.operands)]
        pick = ready[int(rng.integers(len(ready)))]
        pending.remove(pick)
        done.add(pick.uid)
        order.append(pick)
    return order


@settings(max_examples=30, deadline=None)
@example(ops=[("unary", 0, 0, 0), ("unary", 1, 0, 0)], outs=[1], n_params=1, seed=0)
@given(programs, st.lists(st.integers(0, 99), min_size=1, max_size=3), st.integers(1, 3),
       st.integers(0, 2**31))
def test_random_programs_run_correctly_through_their_memory(ops, outs, n_params, seed) -> None:
    m = build_random(ops, outs, n_params)
    verify_module(m)
    rng = np.random.default_rng(seed)
    args = [rng.uniform(-2, 2, 8).astype(np.float32) for _ in range(n_params)]
    args.append(rng.uniform(-2, 2, 2).astype(np.float32))
    want = flatten_result(evaluate(m, args))
    CopyInsertion().run(m)
    verify_module(m)
    MemoryScheduler().run(m)
    assert m.schedule is not None and m.entry is not None
    runs = [(assign_buffers(m), m.schedule[m.entry])]
    dep = assign_buffers(m, DependencyHloOrdering(m))
    runs += [(dep, _random_topological(m.entry, rng)) for _ in range(2)]
    runs.append((assign_buffers(m, reuse_operands=False), m.schedule[m.entry]))
    for ba, order in runs:
        validate_buffer_assignment(ba)
        got = run_with_memory(ba, order, args)
        got_leaves = list(got) if isinstance(got, tuple) else [got]
        for a, b in zip(want, got_leaves):
            np.testing.assert_array_equal(a, b)


GAP_LOOP = """
HloModule gap

cond {
  cp = (s32[], f32[256]{0}) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  lim = s32[] constant(3)
  ROOT lt = pred[] compare(ci, lim), direction=LT
}

body {
  bp = (s32[], f32[256]{0}) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  one = s32[] constant(1)
  inc = s32[] add(bi, one)
  old = f32[256]{0} get-tuple-element(bp), index=1
  t = f32[256]{0} exponential(old)
  a = f32[256]{0} sine(t)
  b = f32[256]{0} reverse(a), dimensions={0}
  new = f32[256]{0} add(b, t)
  ROOT br = (s32[], f32[256]{0}) tuple(inc, new)
}

ENTRY main {
  x = f32[256]{0} parameter(0)
  zero = s32[] constant(0)
  xn = f32[256]{0} negate(x)
  init = (s32[], f32[256]{0}) tuple(zero, xn)
  w = (s32[], f32[256]{0}) while(init), condition=cond, body=body
  ROOT r = f32[256]{0} get-tuple-element(w), index=1
}
"""


def test_loop_slot_is_free_between_last_read_and_new_value() -> None:
    m = parse_module(GAP_LOOP, verify=True)
    CopyInsertion().run(m)
    body = m.computation("body")
    order = ["bp", "bi", "one", "inc", "old", "t", "a", "b", "new"]
    sched = post_order_schedule(m)
    sched[body] = [body.instruction(n) for n in order] + [body.root]
    seq = SequentialHloOrdering(m, sched)
    ba = assign_buffers(m, seq)
    validate_buffer_assignment(ba)
    live = ba.live_ranges
    assert live is not None
    slot = ba.dataflow.alias_set(ba.dataflow.defined_at(body.instruction("new")))
    times = {n: live.time(body.instruction(n)) for n in order}
    assert live.gaps[slot.id] == [TimeInterval(times["t"] + 1, times["new"] - 1)]
    assert len(live.set_intervals(slot)) == 2
    # `b` lives only inside the gap and `new` = add(b, t) may compute in place of it: `b` is
    # placed in the loop slot's (output) allocation and hands it over to `new`
    out = ba.slice_of(m.entry.root)
    assert ba.slice_of(body.instruction("b")) == out
    assert ba.slice_of(body.instruction("a")) != out and ba.slice_of(body.instruction("t")) != out
    assert any(sh.user is body.instruction("new") for sh in ba.shares)
    assert ba.stats()["temp_bytes"] <= 2 * 1024 + 64   # t and a (+ the counter)
    x = np.linspace(-1, 1, 256).astype(np.float32)
    want = evaluate(m, [x])
    np.testing.assert_array_equal(run_with_memory(ba, None, [x]), want)


def test_unreachable_computations_get_no_memory() -> None:
    m = parse_module("""
HloModule unreachable

dead {
  a = f32[4]{0} parameter(0)
  ROOT n = f32[4]{0} negate(a)
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  ROOT e = f32[4]{0} exponential(x)
}
""", verify=True)
    ba = assign_buffers(m)
    validate_buffer_assignment(ba)
    assert [a.kind for a in ba.allocations] == ["parameter", "output"]
    with pytest.raises(VerificationError, match="no slices for 'n' at index"):
        ba.slice_of(m.computation("dead").root)


MULTI_OUTPUT = """
HloModule multi_output

fmo {
  p = f32[] parameter(0)
  n = f32[] negate(p)
  e = f32[] exponential(p)
  ROOT t = (f32[], f32[]) tuple(n, e)
}

ENTRY main {
  x = f32[] parameter(0)
  f = (f32[], f32[]) fusion(x), kind=kLoop, calls=fmo
  a = f32[] get-tuple-element(f), index=0
  b = f32[] get-tuple-element(f), index=1
  s = f32[] add(a, b)
  m = f32[] multiply(a, b)
  ROOT r = (f32[], f32[]) tuple(s, m)
}
"""


def test_gte_only_tuple_index_table_gets_no_storage() -> None:
    m = parse_module(MULTI_OUTPUT, verify=True)
    CopyInsertion().run(m)
    MemoryScheduler().run(m)
    ba = assign_buffers(m)
    validate_buffer_assignment(ba)
    f, r = m.entry.instruction("f"), m.entry.instruction("r")
    table = ba.dataflow.defined_at(f)
    assert table is not None and table.size == 0
    assert ba.dataflow.tables_without_storage == {table}
    # the live-out root tuple keeps its 2-pointer index table
    assert ba.dataflow.defined_at(r).size == 16
    # f's elements: one fills the idle output slot of m, the other is the only temp (4 bytes:
    # no 64-byte slot, no pointer table)
    assert ba.slice_of(f, (0,)) != ba.slice_of(f, (1,))
    assert ba.stats()["temp_bytes"] == 4
    x = np.float32(0.5)
    got = run_with_memory(ba, None, [np.array(x)])
    assert np.allclose(got, (-x + np.exp(x), -x * np.exp(x)))


def test_tuple_flowing_into_a_tuple_or_the_output_keeps_its_index_table() -> None:
    text = MULTI_OUTPUT.replace("ROOT r = (f32[], f32[]) tuple(s, m)",
                                "ROOT r = ((f32[], f32[]), f32[]) tuple(f, s)")
    m = parse_module(text, verify=True)
    CopyInsertion().run(m)
    ba = assign_buffers(m)
    validate_buffer_assignment(ba)
    assert ba.dataflow.defined_at(m.entry.instruction("f")).size == 16
    assert not ba.dataflow.tables_without_storage


SOFTMAX_FUSED = """
HloModule softmax_fused

add_f32 {
  al = f32[] parameter(0)
  ar = f32[] parameter(1)
  ROOT as = f32[] add(al, ar)
}

max_f32 {
  ml = f32[] parameter(0)
  mr2 = f32[] parameter(1)
  ROOT mm = f32[] maximum(ml, mr2)
}

fmax {
  mp = f32[8,16]{1,0} parameter(0)
  ninf = f32[] constant(-inf)
  ROOT mr = f32[8]{0} reduce(mp, ninf), dimensions={1}, to_apply=max_f32
}

fexp {
  fx = f32[8,16]{1,0} parameter(0)
  pm = f32[8]{0} parameter(1)
  b = f32[8,16]{1,0} broadcast(pm), dimensions={0}
  d = f32[8,16]{1,0} subtract(fx, b)
  fe = f32[8,16]{1,0} exponential(d)
  z = f32[] constant(0)
  fs = f32[8]{0} reduce(fe, z), dimensions={1}, to_apply=add_f32
  ROOT t = (f32[8]{0}, f32[8,16]{1,0}) tuple(fs, fe)
}

fdiv {
  ds = f32[8]{0} parameter(0)
  de = f32[8,16]{1,0} parameter(1)
  db = f32[8,16]{1,0} broadcast(ds), dimensions={0}
  ROOT dq = f32[8,16]{1,0} divide(de, db)
}

ENTRY main {
  x = f32[8,16]{1,0} parameter(0)
  mx = f32[8]{0} fusion(x), kind=kInput, calls=fmax
  f = (f32[8]{0}, f32[8,16]{1,0}) fusion(x, mx), kind=kInput, calls=fexp
  s = f32[8]{0} get-tuple-element(f), index=0
  e = f32[8,16]{1,0} get-tuple-element(f), index=1
  ROOT q = f32[8,16]{1,0} fusion(s, e), kind=kLoop, calls=fdiv
}
"""


def test_row_sums_reuse_the_row_max_buffer_and_run_correctly() -> None:
    from xlc.passes.dataflow import can_share_operand_buffer

    m = parse_module(SOFTMAX_FUSED, verify=True)
    e = m.entry
    mx, f = e.instruction("mx"), e.instruction("f")
    assert can_share_operand_buffer(mx, f, (), (0,))
    assert not can_share_operand_buffer(mx, f, (), (1,))  # different shape
    CopyInsertion().run(m)
    MemoryScheduler().run(m)
    ba = assign_buffers(m)
    validate_buffer_assignment(ba)
    assert ba.slice_of(f, (0,)) == ba.slice_of(mx)
    assert any(s.user is f for s in ba.shares)
    assert ba.stats()["temp_bytes"] == 32  # one f32[8] vector (XLA: two)
    x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_allclose(run_with_memory(ba, None, [x]), evaluate(m, [x]), rtol=1e-6)


def test_row_share_refused_for_column_reductions_and_other_reads() -> None:
    from xlc.passes.dataflow import can_share_operand_buffer

    def share(text: str) -> bool:
        m = parse_module(text, verify=True)
        return can_share_operand_buffer(m.entry.instruction("mx"), m.entry.instruction("f"),
                                        (), (0,))

    # the max vector is also read at a different row (reversed): element i feeds row 7-i
    rev = SOFTMAX_FUSED.replace(
        "  b = f32[8,16]{1,0} broadcast(pm), dimensions={0}\n",
        "  rv = f32[8]{0} reverse(pm), dimensions={0}\n"
        "  b = f32[8,16]{1,0} broadcast(rv), dimensions={0}\n")
    assert share(SOFTMAX_FUSED) and not share(rev)
    # a column layout: the reduced dim is the physically major one
    col = SOFTMAX_FUSED.replace("f32[8,16]{1,0}", "f32[8,16]{0,1}")
    assert not share(col)
