"""xlc.codegen.value_range: the bounds it derives, and that the math it enables (log without
its denormal/zero/negative cases, exp without a clamp) still matches the evaluator on every
special input, fused and compiled for the CPU."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tests.backend_cpu.helpers import check
from xlc.codegen.value_range import UNKNOWN, at_least, float_range
from xlc.hlo.parser import parse_module

RANGES = """
HloModule ranges

ENTRY main {
  p = f32[8] parameter(0)
  one = f32[] constant(1)
  b1 = f32[8] broadcast(one), dimensions={}
  sq = f32[8] multiply(p, p)
  sq1 = f32[8] add(sq, b1)
  ab = f32[8] abs(p)
  nab = f32[8] negate(ab)
  e = f32[8] exponential(nab)
  c = f32[3] constant({-2, 0.5, 7})
  cs = f32[3] slice(c), slice={[0:3]}
  t = f32[8] tanh(p)
  tt = f32[8] multiply(t, b1)
  d = f32[8] subtract(b1, t)
  mx = f32[8] maximum(p, b1)
  half = f32[8] convert(p)
  h16 = f16[8] convert(sq1)
  back = f32[8] convert(h16)
  s = f32[8] sqrt(sq1)
  pr = pred[8] compare(p, b1), direction=LT
  sel = f32[8] select(pr, sq1, e)
  ROOT r = (f32[8], f32[8], f32[3]) tuple(sq1, e, cs)
}
"""


@pytest.fixture(scope="module")
def module():
    return parse_module(RANGES)


@pytest.mark.parametrize("name,want", [
    ("p", UNKNOWN), ("one", (1.0, 1.0)), ("b1", (1.0, 1.0)), ("sq", (0.0, math.inf)),
    ("sq1", (1.0, math.inf)), ("ab", (0.0, math.inf)), ("nab", (-math.inf, 0.0)),
    ("e", (0.0, 1.0)), ("c", (-2.0, 7.0)), ("cs", (-2.0, 7.0)), ("t", (-1.0, 1.0)),
    ("tt", (-1.0, 1.0)), ("d", (0.0, 2.0)), ("mx", (1.0, math.inf)), ("half", UNKNOWN),
    ("h16", UNKNOWN), ("back", UNKNOWN), ("s", (1.0, math.inf)), ("sel", (0.0, math.inf)),
])
def test_float_range(module, name: str, want: tuple[float, float]) -> None:
    assert float_range(module.entry.instruction(name)) == want


def test_at_least_needs_a_margin(module) -> None:
    tiny = 2.0 ** -126
    assert at_least(module.entry.instruction("sq1"), tiny)
    assert at_least(module.entry.instruction("s"), tiny)
    assert not at_least(module.entry.instruction("e"), tiny)  # exp can underflow to 0
    assert not at_least(module.entry.instruction("sq"), tiny)
    assert not at_least(module.entry.instruction("p"), tiny)


def test_depth_limit_gives_unknown() -> None:
    chain = "\n".join(f"  a{i + 1} = f32[4] add(a{i}, b)" for i in range(12))
    m = parse_module(f"""HloModule deep

ENTRY main {{
  one = f32[] constant(1)
  b = f32[4] broadcast(one), dimensions={{}}
  a0 = f32[4] multiply(b, b)
{chain}
  ROOT r = f32[4] log(a12)
}}
""")
    assert float_range(m.entry.instruction("a3")) == (4.0, 4.0)
    assert float_range(m.entry.instruction("a12")) == UNKNOWN


SPECIALS = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, -1e-45, 1e-20, 1.0, -3.0,
                     1e19, 3.4e38, -3.4e38, 1e-38, 0.5, 2.0], np.float32)


def test_log_of_square_plus_one_fused() -> None:
    """log(a*a + 1): the positive-normal form; NaN and inf inputs (a*a + 1 = NaN/inf) still
    give NaN/inf, as in the evaluator."""
    text = """HloModule l

ENTRY main {
  a = f32[16] parameter(0)
  sq = f32[16] multiply(a, a)
  one = f32[] constant(1)
  b = f32[16] broadcast(one), dimensions={}
  s = f32[16] add(sq, b)
  ROOT l = f32[16] log(s)
}
"""
    got = check(text, SPECIALS, rtol=1e-6, atol=0)[0]
    assert np.isnan(got[2]) and got[3] == np.inf and got[0] == 0.0


def test_log_of_square_keeps_the_zero_and_denormal_cases() -> None:
    """log(a*a) is not provably normal: a*a underflows to 0 or a denormal."""
    text = """HloModule l

ENTRY main {
  a = f32[16] parameter(0)
  sq = f32[16] multiply(a, a)
  ROOT l = f32[16] log(sq)
}
"""
    got = check(text, SPECIALS, rtol=1e-6, atol=0)[0]
    assert got[0] == -np.inf and got[5] == -np.inf
    assert got[7] == pytest.approx(np.log(np.float64(np.float32(1e-20) ** 2)), rel=1e-6)


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_exp_of_negative_abs_fused(dt: str) -> None:
    t = "f32" if dt == "float32" else "f64"
    text = f"""HloModule e

ENTRY main {{
  a = {t}[16] parameter(0)
  ab = {t}[16] abs(a)
  n = {t}[16] negate(ab)
  ROOT e = {t}[16] exponential(n)
}}
"""
    got = check(text, SPECIALS.astype(dt), rtol=1e-6, atol=0)[0]
    assert np.isnan(got[2]) and got[3] == 0.0 and got[4] == 0.0 and got[0] == 1.0
