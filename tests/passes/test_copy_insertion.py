"""Copy insertion: which copies stay, numerics unchanged, buffer assignment valid afterwards."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module
from xlc.hlo.verifier import verify_module
from xlc.passes.buffer_assignment import assign_buffers
from xlc.passes.buffer_validator import validate_buffer_assignment
from xlc.passes.copy_insertion import CopyInsertion, value_readers, value_source
from xlc.passes.flatten_call_graph import FlattenCallGraph
from xlc.passes.ordering import DependencyHloOrdering, SequentialHloOrdering
from xlc.passes.scheduler import MemoryScheduler

from .memory_builders import counting_while
from .memory_interpreter import run_with_memory


def copies_of(module) -> list[str]:
    """Sorted names of the operands of every copy, computation-qualified."""
    return sorted(f"{i.parent.name}:{i.operands[0].name}" for i in module.instructions()
                  if i.opcode is Opcode.COPY)


def run_and_check(text: str, args: list[np.ndarray]):
    m = parse_module(text, verify=True)
    before = flatten_result(evaluate(m, args))
    assert CopyInsertion().run(m) in (True, False)
    verify_module(m)
    after = flatten_result(evaluate(m, args))
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)
    reparsed = parse_module(m.to_text(), verify=True)  # still valid, printable text
    assert copies_of(reparsed) == copies_of(m)
    assignments = [assign_buffers(m, o) for o in (None, DependencyHloOrdering(m))]
    MemoryScheduler().run(m)
    assignments.append(assign_buffers(m, SequentialHloOrdering(m)))
    for ba in assignments:
        validate_buffer_assignment(ba)
        # no clobbering: running through the assigned memory gives the same results
        got = flatten_result(run_with_memory(ba, None, args))
        for a, b in zip(before, got):
            np.testing.assert_array_equal(a, b)
    return m


LOOP = """
HloModule loop

cond {
  cp = (s32[], f32[4]{0}, f32[4]{0}) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  lim = s32[] constant(3)
  ROOT lt = pred[] compare(ci, lim), direction=LT
}

body {
  bp = (s32[], f32[4]{0}, f32[4]{0}) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  one = s32[] constant(1)
  inc = s32[] add(bi, one)
  bx = f32[4]{0} get-tuple-element(bp), index=1
  by = f32[4]{0} get-tuple-element(bp), index=2
  nx = f32[4]{0} add(bx, by)
  ROOT br = (s32[], f32[4]{0}, f32[4]{0}) tuple(inc, nx, by)
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  zero = s32[] constant(0)
  xn = f32[4]{0} negate(x)
  xe = f32[4]{0} exponential(x)
  init = (s32[], f32[4]{0}, f32[4]{0}) tuple(zero, xn, xe)
  w = (s32[], f32[4]{0}, f32[4]{0}) while(init), condition=cond, body=body
  r = f32[4]{0} get-tuple-element(w), index=1
  s1 = f32[4]{0} add(r, xe)
  ROOT out = f32[4]{0} add(s1, xn)
}
"""


def test_while_keeps_only_needed_copies() -> None:
    m = run_and_check(LOOP, [np.arange(4, dtype=np.float32)])
    # the constant init needs a copy; xn is read after the loop that overwrites it; xe is
    # read after the loop too but the body passes it through unchanged; the body's new values
    # are defined when the old ones die.
    assert copies_of(m) == ["main:xn", "main:zero"]


SWAP = """
HloModule swap

cond {
  cp = (s32[], f32[4]{0}, f32[4]{0}) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  lim = s32[] constant(3)
  ROOT lt = pred[] compare(ci, lim), direction=LT
}

body {
  bp = (s32[], f32[4]{0}, f32[4]{0}) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  one = s32[] constant(1)
  inc = s32[] add(bi, one)
  a = f32[4]{0} get-tuple-element(bp), index=1
  b = f32[4]{0} get-tuple-element(bp), index=2
  ROOT br = (s32[], f32[4]{0}, f32[4]{0}) tuple(inc, b, a)
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  y = f32[4]{0} parameter(1)
  zero = s32[] constant(0)
  xn = f32[4]{0} negate(x)
  yn = f32[4]{0} negate(y)
  init = (s32[], f32[4]{0}, f32[4]{0}) tuple(zero, xn, yn)
  ROOT w = (s32[], f32[4]{0}, f32[4]{0}) while(init), condition=cond, body=body
}
"""


def test_swapping_loop_state_keeps_body_copies() -> None:
    m = run_and_check(SWAP, [np.arange(4, dtype=np.float32), np.ones(4, np.float32)])
    # a swap needs three copies: slot 1 gets copy(b) only after copy(a) read it (control
    # edge); slot 2 must then wait for b, so b is first saved by a copy at the top of the body
    assert copies_of(m) == ["body:a", "body:b", "body:b.copy.1", "main:zero"]
    body = m.computation("body")
    root_copies = [o for o in body.root.operands if o.opcode is Opcode.COPY]
    assert all(c.control_predecessors for c in root_copies)


DUS = """
HloModule dus

ENTRY main {
  x = f32[8]{0} parameter(0)
  u = f32[2]{0} parameter(1)
  k = s32[] parameter(2)
  d1 = f32[8]{0} dynamic-update-slice(x, u, k)
  t = f32[8]{0} negate(x)
  d2 = f32[8]{0} dynamic-update-slice(t, u, k)
  e = f32[8]{0} exponential(x)
  d3 = f32[8]{0} dynamic-update-slice(e, u, k)
  s = f32[8]{0} add(e, d3)
  ROOT r = (f32[8]{0}, f32[8]{0}, f32[8]{0}) tuple(d1, d2, s)
}
"""


def test_in_place_operands_copied_only_when_still_needed() -> None:
    args = [np.arange(8, dtype=np.float32), np.full(2, 9, np.float32), np.array(3, np.int32)]
    m = run_and_check(DUS, args)
    # x is a read-only parameter; e is read again after d3; t dies at d2
    assert copies_of(m) == ["main:e", "main:x"]


ROOTS = """
HloModule roots, input_output_alias={ {1}: (1, {}, may-alias) }

ENTRY main {
  x = f32[4]{0} parameter(0)
  y = f32[4]{0} parameter(1)
  c = f32[4]{0} constant({1, 2, 3, 4})
  n = f32[4]{0} negate(x)
  ROOT r = (f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}) tuple(x, y, c, n, n)
}
"""


def test_live_out_parameters_constants_and_duplicates_are_copied() -> None:
    m = run_and_check(ROOTS, [np.arange(4, dtype=np.float32), np.ones(4, np.float32)])
    # y is donated to output {1}: no copy; the second `n` gets its own buffer
    assert copies_of(m) == ["main:c", "main:n", "main:x"]


BRANCH = """
HloModule branch

b0 {
  a = f32[4]{0} parameter(0)
  ROOT n = f32[4]{0} negate(a)
}

b1 {
  ROOT b = f32[4]{0} parameter(0)
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  p = pred[] parameter(1)
  y = f32[4]{0} exponential(x)
  c = f32[4]{0} conditional(p, y, y), true_computation=b0, false_computation=b1
  ROOT s = f32[4]{0} add(c, y)
}
"""


@pytest.mark.parametrize("flag", [True, False])
def test_conditional_branch_returning_its_parameter_is_copied(flag: bool) -> None:
    m = run_and_check(BRANCH, [np.arange(4, dtype=np.float32), np.array(flag)])
    assert copies_of(m) == ["b1:b"]


def test_counting_while_builder_needs_constant_copy() -> None:
    m, _ = counting_while()
    with pytest.raises(Exception, match="read-only constant allocation .* is written by 'inc'"):
        validate_buffer_assignment(assign_buffers(m, DependencyHloOrdering(m)))
    assert CopyInsertion().run(m)
    validate_buffer_assignment(assign_buffers(m, DependencyHloOrdering(m)))
    assert copies_of(m) == ["main:zero"]


def test_value_source_and_readers() -> None:
    m = parse_module(LOOP, verify=True)
    body = m.computation("body")
    src, idx = value_source(body.instruction("by"))
    assert src is body.parameter(0) and idx == (2,)
    readers, at_root = value_readers(src, idx)
    assert [r.name for r in readers] == ["nx"] and at_root == [(2,)]


SHARED_CALLEE = """
HloModule shared

helper {
  h = f32[4]{0} parameter(0)
  ROOT s = f32[4]{0} sine(h)
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  a = f32[4]{0} call(x), to_apply=helper
  n = f32[4]{0} negate(x)
  b = f32[4]{0} call(n), to_apply=helper
  ROOT r = f32[4]{0} add(a, b)
}
"""


def test_call_graph_is_flattened_first() -> None:
    m = run_and_check(SHARED_CALLEE, [np.arange(4, dtype=np.float32)])
    e = m.entry
    a, b = e.instruction("a"), e.instruction("b")
    assert a.called[0] is not b.called[0]
    assert FlattenCallGraph().run(m) is False  # already flat
    ba = assign_buffers(m)
    # each call site's callee now has unambiguous slices
    pa, pb = (c.called[0].parameter(0) for c in (a, b))
    assert ba.slice_of(pa) == ba.slice_of(e.instruction("x"))
    assert ba.slice_of(pb) == ba.slice_of(e.instruction("n"))


# ---- random loops: permutations, in-place updates, values read after the loop ---------------
def build_random_loop(slots: list[tuple[str, int, int]], init_src: list[int],
                      outs: list[int]):
    """A loop over (s32[], f32[4] x n) running 3 times. Body slot j becomes: "keep" the old
    slot a, "move" old slot a, "add" slots a+b, "dus" slot a updated with slot b's head, or
    "chain" negate(dot(sine(slot a), K)) (temps that may live in the slot's loop gap).
    Init slot j is entry value init_src[j] (parameters, a negation, a constant). Outputs pick
    from loop results and entry values (outs)."""
    from xlc.hlo.ir import HloModule

    from .memory_builders import const, f32, gte, pred, s32, tup, tuple_

    n = len(slots)
    m = HloModule("rloop")
    st_ = tup(s32(), *([f32(4)] * n))
    cond = m.new_computation("cond")
    cp = cond.add_parameter(0, st_, "cp")
    ci = gte(cond, cp, 0, "ci")
    cond.set_root(cond.add(Opcode.COMPARE, pred(), (ci, const(cond, 3, s32(), "lim")),
                           {"direction": "LT"}, name="lt"))
    body = m.new_computation("body")
    bp = body.add_parameter(0, st_, "bp")
    old = [gte(body, bp, j + 1, f"old{j}") for j in range(n)]
    inc = body.add(Opcode.ADD, s32(), (gte(body, bp, 0, "bi"), const(body, 1, s32(), "one")),
                   name="inc")
    new = []
    for j, (kind, a, b) in enumerate(slots):
        x, y = old[a % n], old[b % n]
        if kind in ("keep", "move"):
            new.append(old[j] if kind == "keep" else x)
        elif kind == "add":
            new.append(body.add(Opcode.ADD, f32(4), (x, y), name=f"add{j}"))
        elif kind == "chain":
            sin = body.add(Opcode.SIN, f32(4), (x,), name=f"sin{j}")
            k = const(body, np.arange(16, dtype=np.float32).reshape(4, 4) / 16,
                      f32(4, 4), f"k{j}")
            dot = body.add(Opcode.DOT, f32(4), (sin, k), {"lhs_contracting_dims": (0,),
                                                          "rhs_contracting_dims": (0,)},
                           name=f"dot{j}")
            new.append(body.add(Opcode.NEGATE, f32(4), (dot,), name=f"neg{j}"))
        else:
            head = body.add(Opcode.SLICE, f32(2), (y,), {"slice": _slice02()}, name=f"hd{j}")
            k = const(body, 1, s32(), f"k{j}")
            new.append(body.add(Opcode.DYNAMIC_UPDATE_SLICE, f32(4), (x, head, k),
                                name=f"dus{j}"))
    body.set_root(tuple_(body, [inc, *new], "broot"))
    e = m.new_computation("main", entry=True)
    p0 = e.add_parameter(0, f32(4), "p0")
    p1 = e.add_parameter(1, f32(4), "p1")
    entry_vals = [p0, p1, e.add(Opcode.NEGATE, f32(4), (p0,), name="np0"),
                  e.add(Opcode.ABS, f32(4), (p1,), name="ap1"),
                  const(e, np.arange(4, dtype=np.float32), f32(4), "c4")]
    init = tuple_(e, [const(e, 0, s32(), "zero")] +
                  [entry_vals[i % len(entry_vals)] for i in init_src[:n]], "init")
    w = e.add(Opcode.WHILE, st_, (init,), called=(cond, body), name="w")
    results = [gte(e, w, j + 1, f"r{j}") for j in range(n)]
    picks = [(results + entry_vals)[i % (n + len(entry_vals))] for i in outs]
    e.set_root(tuple_(e, picks, "out"))
    return m


def _slice02():
    from xlc.hlo.attrs import SliceDim

    return (SliceDim(0, 2, 1),)


@settings(max_examples=30, deadline=None)
@example(slots=[("keep", 0, 0), ("move", 0, 0), ("keep", 0, 0), ("dus", 1, 0)],
         init_src=[0, 0, 0, 0], outs=[3])  # an in-place update moved to another slot
@example(slots=[("move", 1, 0), ("move", 0, 0)], init_src=[2, 3, 0, 0], outs=[0, 1, 2])
@given(st.lists(st.tuples(st.sampled_from(["keep", "move", "add", "dus", "chain"]),
                          st.integers(0, 9),
                          st.integers(0, 9)), min_size=1, max_size=4),
       st.lists(st.integers(0, 9), min_size=4, max_size=4),
       st.lists(st.integers(0, 9), min_size=1, max_size=4))
def test_random_loops_run_correctly_through_their_memory(slots, init_src, outs) -> None:
    m = build_random_loop(slots, init_src, outs)
    verify_module(m)
    args = [np.arange(4, dtype=np.float32) + 1, np.full(4, -2.5, np.float32)]
    text = m.to_text()
    run_and_check(text, args)


READ_ONLY_LOOP = """
HloModule readonly_loop

cond {
  cp = (s32[], f32[4]{0}) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  lim = s32[] constant(3)
  ROOT lt = pred[] compare(ci, lim), direction=LT
}

body {
  bp = (s32[], f32[4]{0}) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  one = s32[] constant(1)
  inc = s32[] add(bi, one)
  x = f32[4]{0} get-tuple-element(bp), index=1
  ROOT br = (s32[], f32[4]{0}) tuple(inc, x)
}

ENTRY main {
  p = f32[4]{0} parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]{0}) tuple(zero, p)
  w = (s32[], f32[4]{0}) while(init), condition=cond, body=body
  ROOT r = f32[4]{0} get-tuple-element(w), index=1
}
"""


def test_parameter_carried_read_only_through_a_loop_is_copied_at_the_output() -> None:
    m = run_and_check(READ_ONLY_LOOP, [np.arange(4, dtype=np.float32)])
    # the loop never writes slot 1, so it may share the parameter's storage, but the result
    # (that same storage) is live-out: a copy keeps the caller's input out of the output
    assert copies_of(m) == ["main:r", "main:zero"]
    ba = assign_buffers(m)
    assert ba.slice_of(m.entry.root).allocation.kind == "output"


# ---- donated (io-aliased) parameters: the result is written into the parameter's storage ----
def _aliased(body: str, alias: str, params: str = "a = f32[8]{0} parameter(0)") -> str:
    return (f"HloModule donated, input_output_alias={{ {alias} }}\n\nENTRY main {{\n"
            f"  {params}\n{body}\n}}\n")


def _control_preds(m, name: str) -> list[str]:
    return sorted(p.name for p in m.entry.instruction(name).control_predecessors)


@pytest.mark.parametrize("op", ["reverse(a), dimensions={0}", "transpose(a), dimensions={1,0}",
                                "reduce-window(a, z), window={size=1x4 pad=0_0x3_0}, "
                                "to_apply=add"])
def test_donated_parameter_read_by_its_overwriter_is_copied(op: str) -> None:
    """`donate a; return reverse(a)` (or a transpose, a cumulative sum): the op reads other
    elements than the one it writes, so it cannot write into a's storage: its result is copied
    there at the end."""
    add = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n" \
          "  ROOT s = f32[] add(x, y)\n}\n\n"
    text = _aliased(f"  z = f32[] constant(0)\n  ROOT r = f32[4,4]{{1,0}} {op}",
                    "{}: (0, {}, may-alias)", "a = f32[4,4]{1,0} parameter(0)")
    m = run_and_check(text.replace("ENTRY", add + "ENTRY"),
                      [np.arange(16, dtype=np.float32).reshape(4, 4)])
    assert copies_of(m) == ["main:r"]
    assert m.entry.root.opcode is Opcode.COPY


def test_donated_parameter_updated_elementwise_or_in_place_is_not_copied() -> None:
    elementwise = _aliased("  e = f32[8]{0} exponential(a)\n  ROOT s = f32[8]{0} add(e, a)",
                           "{}: (0, {}, may-alias)")
    assert copies_of(run_and_check(elementwise, [np.arange(8, dtype=np.float32)])) == []
    # a KV-cache update: the dynamic-update-slice writes the donated cache in place
    dus = _aliased("  u = f32[2]{0} parameter(1)\n  i = s32[] parameter(2)\n"
                   "  ROOT d = f32[8]{0} dynamic-update-slice(a, u, i)", "{}: (0, {}, may-alias)")
    args = [np.arange(8, dtype=np.float32), np.full(2, 9, np.float32), np.array(5, np.int32)]
    assert copies_of(run_and_check(dus, args)) == []


def test_donated_weight_read_by_an_unordered_reader_gets_a_control_edge_not_a_copy() -> None:
    """An SGD step: `d = x @ w` (the backward pass's reader of w) and `w' = w - 0.1 g` are
    unordered; instead of copying w' into w's storage at the end (a second full weight live
    all step), the update is ordered after the reader, and runs in place."""
    text = _aliased(
        "  x = f32[4,8]{1,0} parameter(1)\n  g = f32[8,8]{1,0} parameter(2)\n"
        "  d = f32[4,8]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
        "  k = f32[] constant(0.1)\n  c = f32[8,8]{1,0} broadcast(k), dimensions={}\n"
        "  s = f32[8,8]{1,0} multiply(g, c)\n  u = f32[8,8]{1,0} subtract(w, s)\n"
        "  ROOT t = (f32[8,8]{1,0}, f32[4,8]{1,0}) tuple(u, d)",
        "{0}: (0, {}, may-alias)", "w = f32[8,8]{1,0} parameter(0)")
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((8, 8)).astype(np.float32),
            rng.standard_normal((4, 8)).astype(np.float32),
            rng.standard_normal((8, 8)).astype(np.float32)]
    m = run_and_check(text, args)
    assert copies_of(m) == []
    assert _control_preds(m, "u") == ["d"]


def test_donated_weight_whose_reader_needs_the_update_keeps_the_copy() -> None:
    """`w' = w - g; d = x @ w + w'`: the reader of the old w depends on the new value, so no
    order lets w' overwrite w in place: the copy stays (no cycle is created)."""
    text = _aliased(
        "  x = f32[8,8]{1,0} parameter(1)\n  g = f32[8,8]{1,0} parameter(2)\n"
        "  u = f32[8,8]{1,0} subtract(w, g)\n"
        "  e = f32[8,8]{1,0} dot(x, u), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
        "  d = f32[8,8]{1,0} dot(e, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
        "  ROOT t = (f32[8,8]{1,0}, f32[8,8]{1,0}) tuple(u, d)",
        "{0}: (0, {}, may-alias)", "w = f32[8,8]{1,0} parameter(0)")
    rng = np.random.default_rng(1)
    args = [rng.standard_normal((8, 8)).astype(np.float32) for _ in range(3)]
    m = run_and_check(text, args)
    assert copies_of(m) == ["main:u"]


def test_donated_parameter_that_is_also_a_result_is_read_before_it_is_overwritten() -> None:
    """JAX's `donate a; return abs(a), a`: result 1 (a copy of a) must be taken before abs's
    result lands in a's storage (a control edge orders the two copies)."""
    text = _aliased("  b = f32[8]{0} abs(a)\n  ROOT t = (f32[8]{0}, f32[8]{0}) tuple(b, a)",
                    "{0}: (0, {}, may-alias)")
    m = run_and_check(text, [-np.arange(8, dtype=np.float32)])
    assert copies_of(m) == ["main:a", "main:b"]
    assert _control_preds(m, "b.copy") == ["a.copy"]


def test_swapped_donated_parameters_save_one_old_value_first() -> None:
    text = _aliased("  ROOT t = (f32[8]{0}, f32[8]{0}) tuple(b, a)",
                    "{0}: (0, {}, may-alias), {1}: (1, {}, may-alias)",
                    "a = f32[8]{0} parameter(0)\n  b = f32[8]{0} parameter(1)")
    m = run_and_check(text, [np.arange(8, dtype=np.float32), -np.arange(8, dtype=np.float32)])
    # b is saved, a goes into b's storage, then the saved b into a's
    assert copies_of(m) == ["main:a", "main:b", "main:b.copy.1"]
    assert _control_preds(m, "a.copy") == ["b.copy.1"]
    assert _control_preds(m, "b.copy") == ["a.copy"]


# ---- issue 11 item 26: what copy insertion leaves behind must verify --------------------------
SHARED_BODY = """
HloModule shared_body

cond {
  cp = (s32[], f32[8]{0}) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  lim = s32[] constant(3)
  ROOT lt = pred[] compare(ci, lim), direction=LT
}

fused {
  fp = f32[8]{0} parameter(0)
  fe = f32[8]{0} exponential(fp)
  ROOT fm = f32[8]{0} multiply(fe, fp)
}

body {
  bp = (s32[], f32[8]{0}) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  one = s32[] constant(1)
  inc = s32[] add(bi, one)
  bx = f32[8]{0} get-tuple-element(bp), index=1
  f = f32[8]{0} fusion(bx), kind=kLoop, calls=fused
  ROOT br = (s32[], f32[8]{0}) tuple(inc, f)
}

ENTRY main {
  x = f32[8]{0} parameter(0)
  y = f32[8]{0} parameter(1)
  zero = s32[] constant(0)
  i1 = (s32[], f32[8]{0}) tuple(zero, x)
  i2 = (s32[], f32[8]{0}) tuple(zero, y)
  w1 = (s32[], f32[8]{0}) while(i1), condition=cond, body=body
  w2 = (s32[], f32[8]{0}) while(i2), condition=cond, body=body
  r1 = f32[8]{0} get-tuple-element(w1), index=1
  r2 = f32[8]{0} get-tuple-element(w2), index=1
  ROOT t = (f32[8]{0}, f32[8]{0}) tuple(r1, r2)
}
"""


def test_cloned_loop_bodies_get_their_own_fused_computations() -> None:
    """Flattening the call graph clones the shared body; each clone's fusion must call its own
    fused computation (the verifier requires one fusion per fused computation)."""
    m = run_and_check(SHARED_BODY, [np.linspace(-1, 1, 8, dtype=np.float32),
                                    np.linspace(0, 2, 8, dtype=np.float32)])
    fusions = [i for i in m.instructions() if i.opcode is Opcode.FUSION]
    assert len(fusions) == 2 and fusions[0].called[0] is not fusions[1].called[0]


TOKEN_BRANCH = """
HloModule token_branch

b0 {
  p0 = (token[], f32[4]{0}) parameter(0)
  t0 = token[] get-tuple-element(p0), index=0
  v0 = f32[4]{0} get-tuple-element(p0), index=1
  n0 = f32[4]{0} negate(v0)
  ROOT r0 = (token[], f32[4]{0}) tuple(t0, n0)
}

b1 {
  ROOT p1 = (token[], f32[4]{0}) parameter(0)
}

ENTRY main {
  c = pred[] parameter(0)
  x = f32[4]{0} parameter(1)
  t = token[] after-all()
  a = (token[], f32[4]{0}) tuple(t, x)
  k = (token[], f32[4]{0}) conditional(c, a, a), true_computation=b0, false_computation=b1
  ROOT o = f32[4]{0} get-tuple-element(k), index=1
}
"""


@pytest.mark.parametrize("flag", [True, False])
def test_tokens_passing_through_a_conditional_are_never_copied(flag: bool) -> None:
    args = [np.array(flag), np.arange(4, dtype=np.float32)]
    m = parse_module(TOKEN_BRANCH, verify=True)
    want = evaluate(m, args)
    assert CopyInsertion().run(m)
    verify_module(m)  # a copy of a token[] fails here ("expected an array operand")
    validate_buffer_assignment(assign_buffers(m))
    np.testing.assert_array_equal(evaluate(m, args), want)
    assert copies_of(m) == ["b1:p1.gte1"]  # the f32 element only
    assert not any(i.opcode is Opcode.COPY and i.shape.is_token for i in m.instructions())


LOOP_CHAIN = """
HloModule loop_chain

cond {
  cp = (s32[], f32[8]{0}) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  lim = s32[] constant(2)
  ROOT lt = pred[] compare(ci, lim), direction=LT
}

body {
  bp = (s32[], f32[8]{0}) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  one = s32[] constant(1)
  inc = s32[] add(bi, one)
  bx = f32[8]{0} get-tuple-element(bp), index=1
  r = f32[8]{0} reverse(bx), dimensions={0}
  u = f32[1]{0} constant({-1})
  d = f32[8]{0} dynamic-update-slice(r, u, bi)
  ROOT br = (s32[], f32[8]{0}) tuple(inc, d)
}

ENTRY main {
  x = f32[8]{0} parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[8]{0}) tuple(zero, x)
  w = (s32[], f32[8]{0}) while(init), condition=cond, body=body
  ROOT o = f32[8]{0} get-tuple-element(w), index=1
}
"""


def test_new_loop_state_built_in_place_on_a_reader_of_the_old_state_is_copied() -> None:
    """The body's new state is a dynamic-update-slice *in place* on reverse(old state): without
    the root copy the reverse itself would write the loop state while reading it."""
    m = run_and_check(LOOP_CHAIN, [np.arange(8, dtype=np.float32)])
    assert "body:d" in copies_of(m)


def test_donated_parameter_under_an_in_place_chain_is_copied() -> None:
    """`donate p; return dynamic-update-slice(cumsum(p), ...)`: the cumulative sum would be
    computed into p's storage while reading p."""
    text = _aliased("  z = f32[] constant(0)\n"
                    "  c = f32[8]{0} reduce-window(a, z), window={size=8 pad=7_0}, to_apply=add\n"
                    "  u = f32[1]{0} constant({-1})\n  i = s32[] constant(3)\n"
                    "  ROOT d = f32[8]{0} dynamic-update-slice(c, u, i)", "{}: (0, {}, may-alias)")
    add = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n" \
          "  ROOT s = f32[] add(x, y)\n}\n\n"
    m = run_and_check(text.replace("ENTRY", add + "ENTRY"), [np.arange(8, dtype=np.float32)])
    assert copies_of(m) == ["main:d"]
