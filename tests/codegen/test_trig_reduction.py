"""sin/cos/tan over the whole f32 and f64 ranges (issue 11, item 21): the Payne-Hanek
reductions of `xlc.codegen.trig_reduction` (f32 from 2^25, f64 from 2^48), against numpy's
float64 (f32) and long double (f64) results in ulps. Before them, sin(1e20) and the like were
garbage clamped to [-1, 1] (often exactly -1)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from llvmlite import ir

from tests.codegen.kernel_helpers import KernelModule
from tests.codegen.test_math import MAX_ULP, ulp_error
from xlc.codegen import llvm_utils as lu
from xlc.codegen import math as xm
from xlc.codegen import trig_reduction as tr
from xlc.hlo.shape import PrimitiveType as P

# The f32 values closest to a multiple of pi/2 for each binade (found by scanning every
# mantissa of 2^-20..2^104 ulps); the first is 1.0e-9 quarter turns from one.
HARDEST = np.array([7.729178919452902e+28, 21999384576.0, 1.5458357838905804e+29,
                    43998769152.0, 252.89820861816406, 3.0916715677811608e+29,
                    4.638183382783466e+25, 1522788990976.0], np.float32)


@pytest.fixture(scope="module", params=[0, 512], ids=["scalar", "vector512"])
def trig(request: pytest.FixtureRequest) -> KernelModule:
    km = KernelModule("trig_reduction", vector_bits=request.param)
    for name in ("sin", "cos", "tan"):
        km.add(name, [P.F32], P.F32, lambda b, v, name=name: getattr(xm, name)(b, v[0]))
        km.add(f"{name}64", [P.F64], P.F64, lambda b, v, name=name: getattr(xm, name)(b, v[0]))
    km.compile()
    return km


def test_chunks_are_two_over_pi() -> None:
    """The 26-bit chunks add up to 2/pi within 2^-200 (pi from an independent series)."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.prec = 300
    total = sum((Fraction(c) for c in tr.CHUNKS), Fraction(0))
    err = abs(mpmath.mpf(total.numerator) / total.denominator - 2 / mpmath.pi)
    assert err < mpmath.mpf(2) ** -200
    assert all(Fraction(c) * 2 ** (26 * (k + 1)) == int(Fraction(c) * 2 ** (26 * (k + 1)))
               for k, c in enumerate(tr.CHUNKS))


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_huge_f32_arguments_are_accurate(trig: KernelModule, name: str) -> None:
    """Log-uniform |x| in [2^25, 2^128) with both signs, and the hardest arguments."""
    rng = np.random.default_rng(21)
    x = (np.exp2(rng.uniform(25, 128, 200_000)) * rng.choice([-1.0, 1.0], 200_000))
    x = np.concatenate([x.astype(np.float32), HARDEST, -HARDEST,
                        np.array([3.4028235e38, -3.4028235e38, 2.0 ** 25, 1e20], np.float32)])
    got = trig(name, x)
    ref = getattr(np, name)(x.astype(np.float64)).astype(np.longdouble)
    err = ulp_error(got, ref, np.float32)
    worst = int(np.argmax(err))
    assert err.max() <= MAX_ULP[name][0], (
        f"{name}: {err.max():.2f} ulp at {x[worst]!r}: got {got[worst]!r}, want {ref[worst]!r}")


def test_sin_of_1e20_is_not_clamped(trig: KernelModule) -> None:
    """The issue's example: sin(1e20) was -1."""
    x = np.array([1e20, -1e20, 1e30], np.float32)
    np.testing.assert_allclose(trig("sin", x), np.sin(x.astype(np.float64)), rtol=3e-7)


def _ir_of(arg_range: tuple[float, float]) -> str:
    mod = lu.new_module(lu.unique_symbol("probe"))
    fn = ir.Function(mod, ir.FunctionType(ir.FloatType(), [ir.FloatType()]), name="f")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(xm.sin(b, fn.args[0], arg_range=arg_range))
    return str(mod)


def test_bounded_arguments_skip_the_huge_reduction() -> None:
    """With |x| known below 2^25 (value ranges: iota, converts from small integers, f16) the
    Payne-Hanek selects are not emitted; unknown arguments get them."""
    chunk = ir.Constant(ir.DoubleType(), tr.CHUNKS[1]).get_reference()
    assert chunk in _ir_of((-np.inf, np.inf))
    assert chunk not in _ir_of((0.0, 65504.0))


def test_value_ranges_of_iota_and_integer_converts() -> None:
    """The bounds that let sin(iota * c) and sin(convert(s16)) skip the huge reduction."""
    from xlc.codegen.value_range import float_range
    from xlc.hlo.parser import parse_module

    m = parse_module("HloModule m\nENTRY e {\n  i = f32[7,300] iota(), iota_dimension=1\n"
                     "  p = s16[4] parameter(0)\n  c = f32[4] convert(p)\n"
                     "  ROOT t = (f32[7,300], f32[4]) tuple(i, c)\n}\n")
    iota, conv = m.entry.root.operands
    assert float_range(iota) == (0.0, 299.0)
    assert float_range(conv) == (-32768.0, 32767.0)


def test_f64_chunk_table_is_two_over_pi() -> None:
    """The f64 table (scaled by 2^600) adds up to 2/pi within 2^-1200."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.prec = 1400
    total = sum((Fraction(c) for c in tr.F64_TABLE), Fraction(0)) / 2 ** 600
    err = abs(mpmath.mpf(total.numerator) / total.denominator - 2 / mpmath.pi)
    assert err < mpmath.mpf(2) ** -1200


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_huge_f64_arguments_are_accurate(trig: KernelModule, name: str) -> None:
    """Log-uniform |x| in [2^40, 1.8e308] with both signs, the largest doubles and the hardest
    one, 6381956970095103 * 2^797 (2^-61 from a multiple of pi/2), against long double."""
    rng = np.random.default_rng(64)
    x = np.exp2(rng.uniform(40, 1023.9, 20_000)) * rng.choice([-1.0, 1.0], 20_000)
    x = np.concatenate([x, [6381956970095103 * 2.0 ** 797, -6381956970095103 * 2.0 ** 797,
                            np.finfo(np.float64).max, 2.0 ** 48, 1e22, 1e300]])
    got = trig(f"{name}64", x)
    ref = getattr(np, name)(x.astype(np.longdouble))
    err = ulp_error(got, ref, np.float64)
    worst = int(np.argmax(err))
    assert err.max() <= MAX_ULP[name][1], (
        f"{name}: {err.max():.2f} ulp at {x[worst]!r}: got {got[worst]!r}, want {ref[worst]!r}")
