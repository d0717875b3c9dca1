"""Complex constants in HLO text: XLA prints each c64/c128 element as `(re, im)`
(`Literal::GetAsString`: `StrCat("(", RoundTripFpToString(re), ", ", ..., ")")`); the parser
reads that form, the printer writes it, and programs with complex constants run the same on
the evaluator, the interpreter, the CPU backend and the GPU kernels (emulated)."""
from __future__ import annotations

import numpy as np
import pytest

import xlc
from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.helpers import compile_text
from xlc.errors import ParseError
from xlc.hlo.evaluator import evaluate
from xlc.hlo.parser import parse_module
from xlc.hlo.printer import print_module


def _program(t: str) -> str:
    return f"""HloModule complex_{t}
ENTRY main {{
  x = {t}[2,2] parameter(0)
  c = {t}[2,2] constant({{ {{ (1, 2), (3, -4.5) }}, {{ (-0, inf), (0.25, 1e-07) }} }})
  s = {t}[] constant((0.5, -0.25))
  b = {t}[2,2] broadcast(s), dimensions={{}}
  m = {t}[2,2] multiply(x, c)
  ROOT a = {t}[2,2] add(m, b)
}}"""


@pytest.mark.parametrize("t", ["c64", "c128"])
def test_complex_constants_parse_and_round_trip(t: str) -> None:
    module = parse_module(_program(t), verify=True)
    lit = module.entry.instruction("c").attrs["literal"].array  # type: ignore[union-attr]
    want = np.array([[1 + 2j, 3 - 4.5j], [complex(-0.0, np.inf), 0.25 + 1e-07j]],
                    dtype=np.dtype(t.replace("c", "complex")))
    np.testing.assert_array_equal(lit, want)
    text = print_module(module)
    assert "constant({ { (1, 2), (3, -4.5) }, { (-0, inf), (0.25, 1e-07) } })" in text
    assert "constant((0.5, -0.25))" in text
    assert print_module(parse_module(text)) == text


def test_complex_literal_errors() -> None:
    bad = _program("c64").replace("(3, -4.5)", "(3 -4.5)")
    with pytest.raises(ParseError, match=r"4:37: bad c64 literal value '\(3 -4.5\)'"):
        parse_module(bad)
    too_many = _program("c64").replace("(1, 2)", "(1, 2), (5, 6)")
    with pytest.raises(ParseError, match="constant has 5 elements but shape c64"):
        parse_module(too_many)


def test_complex_nan_payload_element() -> None:
    text = "HloModule m\nENTRY e {\n  ROOT c = c64[] constant((nan(0x1), -2))\n}"
    value = parse_module(text).entry.root.attrs["literal"].array  # type: ignore[union-attr]
    assert np.isnan(value.real) and value.imag == -2


@pytest.mark.parametrize("t", ["c64", "c128"])
@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_complex_program_with_constants_runs(t: str, backend: str) -> None:
    text = _program(t)
    x = (np.arange(4) - 1j * np.arange(4)).reshape(2, 2).astype(t.replace("c", "complex"))
    want = evaluate(parse_module(text), [x])
    c = np.array([[1 + 2j, 3 - 4.5j], [complex(-0.0, np.inf), 0.25 + 1e-07j]], x.dtype)
    np.testing.assert_allclose(want, x * c + np.array(0.5 - 0.25j, x.dtype), rtol=1e-6)
    got = xlc.compile(text, backend=backend)(x)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("t", ["c64", "c128"])
def test_complex_program_with_constants_gpu_kernels(t: str) -> None:
    """The GPU loop emitter must not build LLVM vectors of {re, im} structs (c64 is 8 bytes,
    so a 16-byte vector access would hold 2 of them): the kernels are checked in the emulator."""
    text = _program(t)
    x = (np.arange(4) + 0.5j).reshape(2, 2).astype(t.replace("c", "complex"))
    want = evaluate(parse_module(text), [x])
    (got,) = Emulator(compile_text(text)).run([x])
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)
