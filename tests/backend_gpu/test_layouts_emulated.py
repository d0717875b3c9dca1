"""Non-default layouts on the GPU path (compiled for the GPU, run in the kernel emulator)
match the evaluator (issue 11, item 20): dynamic-update-slice and scatter whose operand and
output layouts differ copy the operand with a relayout kernel, not a memcpy."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from tests.backend_cpu.test_layouts import LAYOUTS, dus_args, dus_text
from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.helpers import compile_text
from tests.backend_gpu.test_random_emulated import _check
from tests.hlo_programs import Program, hlo_programs_with_layouts
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.parser import parse_module


def emulated_matches_evaluator(text: str, args: list[np.ndarray]) -> None:
    """Compile `text` for the GPU, run it in the emulator, compare exactly with the evaluator."""
    got = Emulator(compile_text(text)).run(list(args))
    want = flatten_result(evaluate(parse_module(text), list(args)))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, np.asarray(w))


@pytest.mark.parametrize("producer", ["param", "negate", "kept"])
@pytest.mark.parametrize("operand,out", [(a, o) for a, o in itertools.product(LAYOUTS, LAYOUTS)
                                         if a != o][:6])
def test_dynamic_update_slice_between_layouts_on_the_gpu_path(operand: str, out: str,
                                                             producer: str) -> None:
    emulated_matches_evaluator(dus_text(operand, "{0,1,2}", out, producer), dus_args())


def test_scatter_into_another_layout_on_the_gpu_path() -> None:
    text = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
ENTRY e {
  x = f32[3,4]{0,1} parameter(0)
  i = s32[2,1] constant({{2}, {0}})
  u = f32[2,4] parameter(1)
  s = f32[3,4]{1,0} scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
  ROOT t = (f32[3,4]{1,0}, f32[3,4]{0,1}) tuple(s, x)
}
"""
    args = [np.arange(12, dtype=np.float32).reshape(3, 4), np.ones((2, 4), np.float32)]
    emulated_matches_evaluator(text, args)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=hlo_programs_with_layouts())
def test_random_programs_with_layouts_on_the_gpu_path(prog: Program) -> None:
    with np.errstate(all="ignore"):
        _check(prog.text, prog.args, prog.tolerance, "emulator")


def test_multi_output_loop_fusion_with_different_layouts_on_the_gpu_path() -> None:
    """Both roots of a multi-output loop fusion were stored at the first output's physical
    offset, although the second output has another layout."""
    text = """HloModule m
ENTRY e {
  p = s64[7,3,7]{2,1,0} parameter(0)
  n = s64[7,3,7]{2,0,1} negate(p)
  c = s64[7,3,7]{0,1,2} popcnt(n)
  ROOT t = (s64[7,3,7]{2,0,1}, s64[7,3,7]{0,1,2}) tuple(n, c)
}
"""
    emulated_matches_evaluator(text, [np.arange(147, dtype=np.int64).reshape(7, 3, 7) - 70])
