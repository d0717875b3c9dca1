"""Copy insertion: which copies stay, numerics unchanged, buffer assignment valid afterwards."""
from __future__ import annotations

import numpy as np
import pytest

from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module
from xlc.hlo.verifier import verify_module
from xlc.passes.buffer_assignment import assign_buffers
from xlc.passes.buffer_validator import validate_buffer_assignment
from xlc.passes.copy_insertion import CopyInsertion, value_readers, value_source
from xlc.passes.ordering import DependencyHloOrdering, SequentialHloOrdering
from xlc.passes.scheduler import MemoryScheduler

from .memory_builders import counting_while


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
    for ordering in (None, DependencyHloOrdering(m)):
        validate_buffer_assignment(assign_buffers(m, ordering))
    MemoryScheduler().run(m)
    validate_buffer_assignment(assign_buffers(m, SequentialHloOrdering(m)))
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
    assert copies_of(m) == ["body:a", "body:b", "main:zero"]


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
