"""The oracle must not crash where XLA runs fine: a scatter whose updates are scalars (rank-0
update, no window dims) through the evaluator, and tuple-shaped entry parameters through the
interpreter backend (the CPU backend refuses them with an UnsupportedOpError)."""
from __future__ import annotations

import numpy as np
import pytest

import xlc
from xlc.errors import ArgumentError, UnsupportedOpError
from xlc.hlo.evaluator import evaluate
from xlc.hlo.parser import parse_module

_ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}"""


def test_scatter_with_scalar_update_and_scalar_index() -> None:
    text = f"""HloModule s
{_ADD}
ENTRY main {{
  x = f32[4] parameter(0)
  i = s32[] parameter(1)
  u = f32[] parameter(2)
  ROOT s = f32[4] scatter(x, i, u), update_window_dims={{}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=0, to_apply=add
}}"""  # noqa: E501
    x = np.arange(4, dtype=np.float32)
    args = [x, np.int32(2), np.float32(10)]
    want = x.copy()
    want[2] += 10
    np.testing.assert_array_equal(evaluate(parse_module(text), args), want)
    for backend in ("interpreter", "cpu"):
        np.testing.assert_array_equal(xlc.compile(text, backend=backend)(*args), want)


def test_scatter_of_scalar_updates_into_a_matrix_with_out_of_bounds_skipped() -> None:
    text = f"""HloModule s
{_ADD}
ENTRY main {{
  x = f32[3,4] parameter(0)
  i = s32[2] parameter(1)
  u = f32[] parameter(2)
  ROOT s = f32[3,4] scatter(x, i, u), update_window_dims={{}}, inserted_window_dims={{0,1}}, scatter_dims_to_operand_dims={{0,1}}, index_vector_dim=0, to_apply=add
}}"""  # noqa: E501
    x = np.zeros((3, 4), np.float32)
    for idx, hit in (([1, 3], True), ([3, 0], False), ([-1, 2], False)):
        args = [x, np.array(idx, np.int32), np.float32(5)]
        want = x.copy()
        if hit:
            want[tuple(idx)] = 5
        np.testing.assert_array_equal(evaluate(parse_module(text), args), want)
        np.testing.assert_array_equal(xlc.compile(text, backend="cpu")(*args), want)


_TUPLE_PARAM = """HloModule t
ENTRY main {
  p = (f32[2], (s32[], f32[2])) parameter(0)
  q = f32[2] parameter(1)
  a = f32[2] get-tuple-element(p), index=0
  inner = (s32[], f32[2]) get-tuple-element(p), index=1
  b = f32[2] get-tuple-element(inner), index=1
  ab = f32[2] add(a, b)
  ROOT r = f32[2] multiply(ab, q)
}"""


def test_interpreter_runs_tuple_shaped_entry_parameters() -> None:
    a, b, q = (np.array([1, 2], np.float32), np.array([10, 20], np.float32),
               np.array([2, 3], np.float32))
    arg = (a, (np.int32(7), b))
    want = evaluate(parse_module(_TUPLE_PARAM), [arg, q])
    np.testing.assert_array_equal(want, (a + b) * q)
    got = xlc.compile(_TUPLE_PARAM, backend="interpreter")(arg, q)
    np.testing.assert_array_equal(got, want)


def test_interpreter_checks_tuple_argument_structure() -> None:
    c = xlc.compile(_TUPLE_PARAM, backend="interpreter")
    q = np.ones(2, np.float32)
    with pytest.raises(ArgumentError, match="argument 0 has pytree structure"):
        c((np.ones(2, np.float32), np.ones(2, np.float32)), q)
    with pytest.raises(ArgumentError, match="expected 2 arguments, got 1"):
        c(q)


def test_cpu_refuses_tuple_shaped_entry_parameters_clearly() -> None:
    with pytest.raises(UnsupportedOpError, match="CPU backend: tuple-shaped entry parameter p "
                                                 "is unsupported"):
        xlc.compile(_TUPLE_PARAM, backend="cpu")
