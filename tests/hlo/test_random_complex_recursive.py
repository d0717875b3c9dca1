"""Random programs of the two classes the generator lacked (issue 11): complex (c64/c128)
elementwise programs with complex constants, checked on the interpreter, the CPU backend and
the GPU kernels (emulated) against the evaluator, or refused with UnsupportedOpError where a
backend has no complex rule; and modules with recursive calls, which the verifier must reject
(they used to make compile and run hang)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import xlc
from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.helpers import compile_text
from tests.hlo_programs_complex import (
    ComplexProgram,
    RecursiveProgram,
    complex_programs,
    recursive_programs,
)
from xlc.errors import UnsupportedOpError, VerificationError
from xlc.hlo.evaluator import evaluate
from xlc.hlo.parser import parse_module
from xlc.hlo.verifier import verify_module

_SETTINGS = settings(max_examples=15, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow])


def _assert_close(got: list[np.ndarray], want: tuple, tol: float, where: str) -> None:
    assert len(got) == len(want), where
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, where
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True, err_msg=where)


def _run_everywhere(prog: ComplexProgram) -> None:
    module = parse_module(prog.text, verify=True)
    want = evaluate(module, prog.args)
    _assert_close(list(xlc.compile(prog.text, backend="interpreter")(*prog.args)), want,
                  prog.tolerance, "interpreter\n" + prog.text)
    if prog.unsupported:
        message = (rf"no elemental generator for '[a-z]+' on {prog.ty} "
                   rf"\(({'|'.join(prog.unsupported)})\)")
        with pytest.raises(UnsupportedOpError, match=message):
            xlc.compile(prog.text, backend="cpu")
        with pytest.raises(UnsupportedOpError, match=message):
            compile_text(prog.text)
        return
    _assert_close(list(xlc.compile(prog.text, backend="cpu")(*prog.args)), want,
                  prog.tolerance, "cpu\n" + prog.text)
    _assert_close(Emulator(compile_text(prog.text)).run(prog.args), want, prog.tolerance,
                  "gpu\n" + prog.text)


@_SETTINGS
@given(complex_programs())
def test_random_complex_programs_with_constants(prog: ComplexProgram) -> None:
    _run_everywhere(prog)


@_SETTINGS
@given(complex_programs(transcendental=True))
def test_random_complex_programs_refuse_what_backends_lack(prog: ComplexProgram) -> None:
    _run_everywhere(prog)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(recursive_programs())
def test_random_recursive_programs_are_rejected(prog: RecursiveProgram) -> None:
    module = parse_module(prog.text)
    with pytest.raises(VerificationError) as info:
        verify_module(module)
    first = str(info.value).splitlines()[0]
    assert first.startswith("module 'recursive': call graph has a cycle: "), first
    cycle = first.split(": ", 2)[2]
    for name in prog.cycle:
        assert re.search(rf"\b{name}\b", cycle), (name, first)
    with pytest.raises(VerificationError, match="call graph has a cycle"):
        xlc.compile(prog.text, backend="cpu")
