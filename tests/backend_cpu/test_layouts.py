"""Non-default layouts (`{0,1,2}`, `{1,0,2}`, ...) on parameters and intermediate values: the
CPU backend matches the evaluator (issue 11, item 20)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from tests.backend_cpu.helpers import check
from tests.hlo_programs import Program, hlo_programs_with_layouts
from xlc.hlo.parser import parse_module
from xlc.passes.alias_rules import in_place_pairs, same_layout

LAYOUTS = ["{2,1,0}", "{0,1,2}", "{1,0,2}", "{2,0,1}"]


def dus_text(operand: str, update: str, out: str, producer: str) -> str:
    """dynamic-update-slice of f32[2,3,4] (operand layout `operand`, output `out`) by an
    f32[1,2,2] update; `producer` says what the updated operand is: a parameter, a negate or
    a parameter also returned (so the update cannot happen in place)."""
    if producer == "param":
        body = f"ROOT d = f32[2,3,4]{out} dynamic-update-slice(a, u, i, i, i)"
    elif producer == "negate":
        body = (f"n = f32[2,3,4]{operand} negate(a)\n"
                f"  ROOT d = f32[2,3,4]{out} dynamic-update-slice(n, u, i, i, i)")
    else:
        body = (f"n = f32[1,2,2]{update} negate(u)\n"
                f"  d = f32[2,3,4]{out} dynamic-update-slice(a, n, i, i, i)\n"
                f"  ROOT t = (f32[2,3,4]{out}, f32[2,3,4]{operand}) tuple(d, a)")
    return (f"HloModule m\nENTRY e {{\n  a = f32[2,3,4]{operand} parameter(0)\n"
            f"  u = f32[1,2,2]{update} parameter(1)\n  i = s32[] parameter(2)\n  {body}\n}}\n")


def dus_args() -> list[np.ndarray]:
    return [np.arange(24, dtype=np.float32).reshape(2, 3, 4),
            -1 - np.arange(4, dtype=np.float32).reshape(1, 2, 2), np.int32(1)]


@pytest.mark.parametrize("producer", ["param", "negate", "kept"])
@pytest.mark.parametrize("operand,out", [(a, o) for a, o in itertools.product(LAYOUTS, LAYOUTS)
                                         if a != o] + [("{0,1,2}", "{0,1,2}")])
def test_dynamic_update_slice_between_layouts_matches_evaluator(operand: str, out: str,
                                                                producer: str) -> None:
    """The operand was updated in place although its layout differs from the output's: the
    output held the operand's elements in the operand's physical order (garbage)."""
    check(dus_text(operand, "{0,1,2}", out, producer), *dus_args(), rtol=0, atol=0)


def test_in_place_pairs_require_equal_layouts() -> None:
    """dynamic-update-slice updates its operand in place only when the physical orders agree
    (size-1 dims do not count)."""
    m = parse_module(dus_text("{0,1,2}", "{2,1,0}", "{2,1,0}", "param"))
    assert in_place_pairs(m.entry.root) == []
    m = parse_module(dus_text("{1,0,2}", "{2,1,0}", "{1,0,2}", "param"))
    assert in_place_pairs(m.entry.root) == [(0, (), ())]
    s = parse_module("HloModule m\nENTRY e {\n  ROOT a = f32[3,1,4]{2,1,0} parameter(0)\n}\n")
    t = parse_module("HloModule m\nENTRY e {\n  ROOT a = f32[3,1,4]{1,2,0} parameter(0)\n}\n")
    assert same_layout(s.entry.root.shape, t.entry.root.shape)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=hlo_programs_with_layouts())
def test_random_programs_with_layouts_match_evaluator(prog: Program) -> None:
    """Random programs over every data-movement op (dynamic-update-slice, dynamic-slice, gather,
    scatter, pad, concatenate, reverse, slice, sort, reduce, transpose, copy, dot) with random
    layouts on parameters and intermediate values."""
    tol = prog.tolerance
    with np.errstate(all="ignore"):
        check(prog.text, *prog.args, rtol=tol, atol=tol)
