"""HloOrdering: dependency / predecessor / sequential semantics, live ranges, schedule checks."""
from __future__ import annotations

import pytest

from xlc.errors import VerificationError
from xlc.hlo.parser import parse_module
from xlc.passes.dataflow import DataflowAnalysis
from xlc.passes.ordering import (
    DependencyHloOrdering,
    LiveRanges,
    PredecessorHloOrdering,
    SequentialHloOrdering,
    TimeInterval,
    verify_schedule,
)

from .memory_builders import classic, counting_while, post_order_schedule


def test_classic_sequential_lets_param_share_exp_but_dependency_does_not() -> None:
    """Issue 3: under the sequential order {param, negate, exp, add}, param can share exp's
    buffer (negate already ran, exp is param's last, elementwise use); under the dependency
    order negate and exp are unordered, so param's buffer interferes with exp's."""
    m, d = classic()
    df = DataflowAnalysis(m)
    param, neg, exp = (df.defined_at(d[n]) for n in ("param", "negate", "exp"))
    assert param is not None and neg is not None and exp is not None
    seq = SequentialHloOrdering(m, {m.entry: [d["param"], d["negate"], d["exp"], d["add"]]})
    dep = DependencyHloOrdering(m)
    assert not seq.may_interfere(param, exp, df)
    assert dep.may_interfere(param, exp, df)
    # negate is still needed by add when exp is defined: interferes under both orders
    assert seq.may_interfere(neg, exp, df)
    assert dep.may_interfere(neg, exp, df)
    # the dataflow argument is optional: the ordering builds its own
    fresh = DependencyHloOrdering(m)
    assert fresh.may_interfere(fresh.dataflow.defined_at(d["param"]),
                               fresh.dataflow.defined_at(d["exp"]))
    # the other sequential order {param, exp, negate, add} lets param share negate instead
    seq2 = SequentialHloOrdering(m, {m.entry: [d["param"], d["exp"], d["negate"], d["add"]]})
    assert seq2.may_interfere(param, exp, df)
    assert not seq2.may_interfere(param, neg, df)


def test_executes_before_per_ordering() -> None:
    m, d = classic()
    seq = SequentialHloOrdering(m, {m.entry: [d["param"], d["negate"], d["exp"], d["add"]]})
    dep = DependencyHloOrdering(m)
    assert seq.executes_before(d["negate"], d["exp"])
    assert not dep.executes_before(d["negate"], d["exp"])
    assert not dep.executes_before(d["exp"], d["negate"])
    assert dep.executes_before(d["param"], d["add"])
    assert not dep.executes_before(d["add"], d["add"])
    pred = PredecessorHloOrdering(m, {d["exp"]: [d["negate"]]})
    assert pred.executes_before(d["negate"], d["exp"])
    assert pred.executes_before(d["param"], d["exp"])
    assert not pred.executes_before(d["exp"], d["negate"])


def test_executes_before_across_while_computations() -> None:
    m, d = counting_while()
    dep = DependencyHloOrdering(m)
    cond_root = m.computation("cond").root
    assert cond_root is not None
    assert dep.executes_before(cond_root, d["mul"])       # condition before body
    assert not dep.executes_before(d["mul"], cond_root)
    assert dep.executes_before(d["xn"], d["mul"])         # before the while: before its body
    assert dep.executes_before(d["mul"], d["result"])     # body before users of the while
    assert dep.executes_before(d["mul"], d["while"])      # a callee runs before its caller ends
    assert not dep.executes_before(d["while"], d["mul"])


BRANCHES = """
HloModule branches

b0 {
  a = f32[8]{0} parameter(0)
  ROOT n = f32[8]{0} negate(a)
}

b1 {
  b = f32[8]{0} parameter(0)
  ROOT e = f32[8]{0} exponential(b)
}

ENTRY main {
  x = f32[8]{0} parameter(0)
  i = s32[] parameter(1)
  ROOT c = f32[8]{0} conditional(i, x, x), branch_computations={b0, b1}
}
"""


def test_conditional_branches_are_exclusive() -> None:
    m = parse_module(BRANCHES, verify=True)
    dep = DependencyHloOrdering(m)
    n = m.computation("b0").instruction("n")
    e = m.computation("b1").instruction("e")
    assert dep.executes_before(n, e)   # branch 0 "before" branch 1: they never run together
    assert not dep.executes_before(e, n)
    assert dep.executes_before(n, m.entry.root)


def test_live_ranges_flatten_while_condition_before_body() -> None:
    m, d = counting_while()
    df = DataflowAnalysis(m)
    sched = post_order_schedule(m)
    live = LiveRanges(m, sched, df)
    assert SequentialHloOrdering(m, sched).live_ranges(df).buffer_ranges == live.buffer_ranges
    cond, body = m.computation("cond"), m.computation("body")
    assert live.span[cond].end < live.span[body].start
    assert live.span[body].end < live.time(d["while"])
    two_b = df.defined_at(d["two_b"])
    mul = df.defined_at(d["mul"])
    x = df.defined_at(d["x"])
    assert two_b is not None and mul is not None and x is not None
    # a body temp lives inside the body span; entry parameters and live-out values to the end
    r = live.buffer_ranges[two_b]
    assert live.span[body].start <= r.start <= r.end <= live.span[body].end
    assert r == TimeInterval(live.time(d["two_b"]), live.time(d["mul"]))
    assert live.buffer_ranges[x] == TimeInterval(0, live.end_time)
    assert live.buffer_ranges[mul].end == live.end_time
    # the carried value's set spans the whole loop
    s = live.set_range(df.alias_set(mul))
    assert s is not None and s.start == live.time(d["xn"]) and s.end == live.end_time


def test_verify_schedule_rejects_bad_orders() -> None:
    m, d = classic()
    verify_schedule(m, {m.entry: [d["param"], d["exp"], d["negate"], d["add"]]})
    with pytest.raises(VerificationError, match="'negate' comes before its operand 'param'"):
        verify_schedule(m, {m.entry: [d["negate"], d["param"], d["exp"], d["add"]]})
    with pytest.raises(VerificationError, match="not a permutation"):
        verify_schedule(m, {m.entry: [d["param"], d["exp"], d["add"]]})
    with pytest.raises(VerificationError, match="no sequence for computation 'main'"):
        verify_schedule(m, {})


def test_sequential_ordering_requires_a_schedule() -> None:
    m, _ = classic()
    with pytest.raises(VerificationError, match="needs a schedule: module 'classic' has none"):
        SequentialHloOrdering(m)
