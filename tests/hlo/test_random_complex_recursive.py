"""Random programs of the two classes the generator lacked (issue 11): complex (c64/c128)
elementwise programs with complex constants, checked on the interpreter, the CPU backend and
the GPU kernels (emulated) against the evaluator, or refused with UnsupportedOpError where a
backend has no complex rule (the GPU by default runs such instructions on the host, checked
too); and modules with recursive calls, which the verifier must reject
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
    if prog.unsupported and _cpu_refuses(prog.text):   # (not when folded into a constant)
        message = (rf"no elemental generator for '[a-z]+' on {prog.ty} "
                   rf"\(({'|'.join(prog.unsupported)})\)")
        with pytest.raises(UnsupportedOpError, match=message):
            xlc.compile(prog.text, backend="cpu")
        with pytest.raises(UnsupportedOpError, match=message):
            compile_text(prog.text, gpu_host_fallback=False)
        exe = compile_text(prog.text)   # the fusions without GPU code run on the host
        assert any(t.kind == "host_call" for t in exe.all_thunks())
        _assert_close(Emulator(exe).run(prog.args), want, prog.tolerance, "gpu\n" + prog.text)
        return
    _assert_close(list(xlc.compile(prog.text, backend="cpu")(*prog.args)), want,
                  prog.tolerance, "cpu\n" + prog.text)
    _assert_close(Emulator(compile_text(prog.text)).run(prog.args), want, prog.tolerance,
                  "gpu\n" + prog.text)


def _cpu_refuses(text: str) -> bool:
    try:
        xlc.compile(text, backend="cpu")
    except UnsupportedOpError:
        return True
    return False


@pytest.mark.parametrize("ty", ["c64", "c128"])
def test_complex_division_by_zero_gives_numpys_infinities(ty: str) -> None:
    # Smith's algorithm alone gives NaN for every zero divisor (0/0 in its ratio)
    text = (f"HloModule m\nENTRY e {{\n  p0 = {ty}[6] parameter(0)\n  p1 = {ty}[6] "
            f"parameter(1)\n  ROOT v = {ty}[6] divide(p0, p1)\n}}\n")
    dt = np.complex64 if ty == "c64" else np.complex128
    a = np.array([1 + 2j, 1, 0, -3 - 1j, complex("inf"), 2 + 3j], dt)
    b = np.array([0, 0, 0, -0.0, 0, 1 + 1j], dt)
    with np.errstate(all="ignore"):
        want = a / b
    cpu = xlc.compile(text, backend="cpu")(a, b)
    for got in (cpu, Emulator(compile_text(text)).run([a, b])[0]):
        np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)


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
