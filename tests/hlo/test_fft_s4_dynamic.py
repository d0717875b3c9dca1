"""What the parser used to refuse although XLA prints it (issue 11 item 27): the `fft` opcode,
4-bit integers (`s4`, `u4`) and bounded dynamic dimensions (`f32[<=8]`). Each parses, prints
back identically and verifies; the evaluator and the interpreter run fft and s4/u4 (checked
against numpy and jax); what a backend cannot run is refused at compile time with an
UnsupportedOpError naming the backend and the instruction."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlc
from tests.backend_gpu.helpers import compile_text
from xlc.errors import ParseError, UnsupportedOpError, VerificationError
from xlc.hlo.evaluator import evaluate
from xlc.hlo.parser import parse_module, parse_shape
from xlc.hlo.printer import print_module
from xlc.hlo.verifier import verify_module

RNG = np.random.default_rng(27)


def _round_trip(text: str) -> None:
    printed = print_module(parse_module(text, verify=True))
    assert print_module(parse_module(printed)) == printed


# ---- fft -------------------------------------------------------------------------------------
_FFT_CASES = [
    ("c64[3,8]", "c64[3,8]", "FFT", "{8}", lambda x: np.fft.fft(x)),
    ("c64[4,6]", "c64[4,6]", "IFFT", "{4,6}", lambda x: np.fft.ifft2(x)),
    ("f32[2,8]", "c64[2,5]", "RFFT", "{8}", lambda x: np.fft.rfft(x)),
    ("c128[2,5]", "f64[2,8]", "IRFFT", "{8}", lambda x: np.fft.irfft(x, 8)),
    ("f64[2,4,6]", "c128[2,4,4]", "RFFT", "{4,6}", lambda x: np.fft.rfft2(x)),
]


def _fft_text(i: str, o: str, kind: str, lengths: str) -> str:
    return (f"HloModule f\nENTRY main {{\n  x = {i} parameter(0)\n"
            f"  ROOT y = {o} fft(x), fft_type={kind}, fft_length={lengths}\n}}")


@pytest.mark.parametrize("i, o, kind, lengths, ref", _FFT_CASES)
def test_fft_parses_evaluates_and_runs_on_the_interpreter(i: str, o: str, kind: str,
                                                          lengths: str, ref: object) -> None:
    text = _fft_text(i, o, kind, lengths)
    _round_trip(text)
    assert f"fft(%x), fft_type={kind}, fft_length={lengths}" in print_module(parse_module(text))
    shape = parse_shape(i)
    x = RNG.standard_normal(shape.dims)
    if shape.element_type.is_complex:  # type: ignore[union-attr]
        x = x + 1j * RNG.standard_normal(shape.dims)
    x = x.astype(shape.dtype)
    got = evaluate(parse_module(text), [x])
    assert got.dtype == parse_shape(o).dtype
    tol = 1e-5 if got.dtype in (np.complex64, np.float32) else 1e-12
    np.testing.assert_allclose(got, ref(x), rtol=tol, atol=tol)  # type: ignore[operator]
    np.testing.assert_array_equal(xlc.compile(text, backend="interpreter")(x), got)


def test_fft_is_refused_by_the_cpu_and_runs_on_the_host_for_the_gpu() -> None:
    from tests.backend_gpu.emulator import Emulator

    text = _fft_text("c64[3,8]", "c64[3,8]", "FFT", "{8}")
    with pytest.raises(UnsupportedOpError, match=r"CPU backend cannot compile 'fft' \(y\): FFT "
                                                 r"is not implemented by the CPU backend"):
        xlc.compile(text, backend="cpu")
    with pytest.raises(UnsupportedOpError, match=r"GPU backend cannot compile 'fft' \(y\): FFT "
                                                 r"is not implemented by the GPU backend"):
        compile_text(text, gpu_host_fallback=False)
    exe = compile_text(text)   # by default the GPU executable runs the fft on the host
    assert [t.kind for t in exe.all_thunks()] == ["sequential", "host_call"]
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((3, 8)) + 1j * rng.standard_normal((3, 8))).astype(np.complex64)
    (got,) = Emulator(exe).run([x])
    np.testing.assert_allclose(got, np.fft.fft(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("i, o, kind, lengths, message", [
    ("f32[8]", "f32[8]", "FFT", "{8}", r"fft: FFT requires a complex operand, got f32\[8\]"),
    ("c64[8]", "c64[5]", "RFFT", "{8}", r"fft: RFFT requires an f32 or f64 operand, got c64\[8\]"),
    ("c64[6]", "f32[8]", "IRFFT", "{8}",
     r"fft: IRFFT needs inner dimensions \{5\} for fft_length \{8\}, got c64\[6\]"),
    ("c64[8]", "c64[8]", "DCT", "{8}", "fft: fft_type must be one of FFT, IFFT, RFFT, IRFFT"),
    ("c64[2,2,2,2]", "c64[2,2,2,2]", "FFT", "{2,2,2,2}",
     "fft: fft_length must name 1 to 3 inner dimensions"),
])
def test_fft_shape_rules(i: str, o: str, kind: str, lengths: str, message: str) -> None:
    with pytest.raises(VerificationError, match=message):
        verify_module(parse_module(_fft_text(i, o, kind, lengths)))


def test_jax_fft_module_with_a_complex_constant_matches_jax() -> None:
    """The HLO text JAX itself prints for rfft / fft * (1+2j): calls to fft computations and a
    `c64[] constant((1, 2))`."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def f(x):  # type: ignore[no-untyped-def]
        return jnp.fft.rfft(x), jnp.fft.fft(x.astype(jnp.complex64)) * (1 + 2j)

    x = RNG.standard_normal(8).astype(np.float32)
    text = jax.jit(f).lower(x).compiler_ir("hlo").as_hlo_text()
    assert "fft(" in text and "constant((1, 2))" in text
    _round_trip(text)
    want = f(x)
    for got in (evaluate(parse_module(text), [x]),
                xlc.compile(text, backend="interpreter")(x)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, np.asarray(w), rtol=1e-5, atol=1e-5)


# ---- s4 / u4 ---------------------------------------------------------------------------------
_S4 = """HloModule s4
ENTRY main {
  x = s4[6] parameter(0)
  y = s4[6] parameter(1)
  a = s4[6] add(x, y)
  m = s4[6] multiply(x, y)
  d = s4[6] divide(x, y)
  n = s4[6] negate(x)
  f = f32[6] constant({1.7, -9.5, 100, -100, 7.9, 0})
  fc = s4[6] convert(f)
  c = u4[3] constant({0, 9, 15})
  w = s32[6] convert(a)
  ROOT t = (s4[6], s4[6], s4[6], s4[6], s4[6], u4[3], s32[6]) tuple(a, m, d, n, fc, c, w)
}"""


def test_s4_u4_parse_round_trip_and_evaluate_with_4_bit_wrapping() -> None:
    _round_trip(_S4)
    assert "u4[3]{0} constant({0, 9, 15})" in print_module(parse_module(_S4))
    x = np.array([7, -8, 3, -1, 5, 0]).astype(ml_dtypes.int4)
    y = np.array([1, -1, 0, 2, 3, 4]).astype(ml_dtypes.int4)
    want = [[-8, 7, 3, 1, -8, 4],   # 7+1 and 5+3 wrap to -8, -8-1 to 7
            [7, -8, 0, -2, -1, 0],  # -8*-1 = 8 wraps to -8, 5*3 = 15 to -1
            [7, -8, -1, 0, 1, 0],   # x/0 = -1, INT_MIN/-1 = INT_MIN, truncation
            [-7, -8, -3, 1, -5, 0],  # negate(-8) = -8
            [1, -8, 7, -8, 7, 0],   # float -> s4 saturates
            [0, 9, 15], [-8, 7, 3, 1, -8, 4]]
    for backend_result in (evaluate(parse_module(_S4), [x, y]),
                           xlc.compile(_S4, backend="interpreter")(x, y)):
        assert [v.astype(np.int64).tolist() for v in backend_result] == want
        assert backend_result[0].dtype == np.dtype(ml_dtypes.int4)
        assert backend_result[5].dtype == np.dtype(ml_dtypes.uint4)


def test_s4_literal_out_of_range_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="value 8 is out of range for s4"):
        parse_module("HloModule m\nENTRY e {\n  ROOT c = s4[2] constant({1, 8})\n}")


def test_native_backends_refuse_4_bit_types() -> None:
    msg = (r"{} backend: element type s4 is not supported: instruction 'x' \(parameter\) in "
           r"computation 'main' has shape s4\[6\]")
    with pytest.raises(UnsupportedOpError, match=msg.format("CPU")):
        xlc.compile(_S4, backend="cpu")
    with pytest.raises(UnsupportedOpError, match=msg.format("GPU")):
        compile_text(_S4)


# ---- bounded dynamic dimensions --------------------------------------------------------------
_DYNAMIC = """HloModule d
ENTRY main {
  x = f32[<=8,3]{1,0} parameter(0)
  ROOT n = f32[<=8,3]{1,0} negate(x)
}"""


def test_bounded_dynamic_dimensions_parse_and_print() -> None:
    _round_trip(_DYNAMIC)
    shape = parse_shape("f32[<=8,3]{1,0}")
    assert shape.dims == (8, 3) and shape.dynamic_dims == (0,) and not shape.is_static
    assert shape.to_text() == "f32[<=8,3]{1,0}"
    assert "ROOT %n = f32[<=8,3]{1,0} negate(%x)" in print_module(parse_module(_DYNAMIC))
    with pytest.raises(ParseError, match=r"unbounded dynamic dimensions \('\?'\) are not "
                                         r"supported"):
        parse_shape("f32[?]")


@pytest.mark.parametrize("backend", ["CPU", "GPU", "interpreter"])
def test_dynamic_dimensions_are_refused_at_compile_time(backend: str) -> None:
    msg = (rf"{backend} backend: dynamic dimensions are not supported: instruction 'x' "
           r"\(parameter\) in computation 'main' has shape f32\[<=8,3\]")
    with pytest.raises(UnsupportedOpError, match=msg):
        if backend == "GPU":
            compile_text(_DYNAMIC)
        else:
            xlc.compile(_DYNAMIC, backend=backend.lower())
    with pytest.raises(UnsupportedOpError, match="evaluator: dynamic dimensions"):
        evaluate(parse_module(_DYNAMIC), [np.zeros((8, 3), np.float32)])
