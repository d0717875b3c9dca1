"""The verifier and parser follow XLA's rules in both directions: modules XLA rejects are
rejected (call-graph cycles, unknown attributes, int64-overflowing shapes, unknown rng
algorithms, negative reduce-precision bits), and modules XLA accepts are accepted and run
(mixed-width integer dots, unsorted broadcast dimensions, float pad values of another
precision) on the evaluator, the interpreter, the CPU backend and the GPU kernels (emulated)."""
from __future__ import annotations

import numpy as np
import pytest

import xlc
from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.helpers import compile_text
from xlc.errors import ParseError, VerificationError
from xlc.hlo.evaluator import evaluate
from xlc.hlo.parser import parse_module
from xlc.hlo.shape import PrimitiveType
from xlc.hlo.verifier import verify_module


def _first_line(text: str) -> str:
    with pytest.raises(VerificationError) as info:
        verify_module(parse_module(text))
    return str(info.value).splitlines()[0]


# ---- item 10: call-graph cycles ------------------------------------------------------------
_SELF_CALL = """HloModule rec
f {
  p = f32[] parameter(0)
  ROOT c = f32[] call(p), to_apply=f
}
ENTRY main {
  x = f32[] parameter(0)
  ROOT r = f32[] call(x), to_apply=f
}"""

_MUTUAL = """HloModule rec2
g {
  p = f32[] parameter(0)
  ROOT c = f32[] call(p), to_apply=f
}
f {
  p = f32[] parameter(0)
  n = f32[] negate(p)
  ROOT c = f32[] call(n), to_apply=g
}
ENTRY main {
  x = f32[] parameter(0)
  ROOT r = f32[] call(x), to_apply=f
}"""


def test_self_recursive_call_is_rejected() -> None:
    assert _first_line(_SELF_CALL) == (
        "module 'rec': call graph has a cycle: f -> f (instruction 'c' in computation 'f' "
        "calls 'f')")


def test_mutually_recursive_calls_are_rejected() -> None:
    assert _first_line(_MUTUAL) == (
        "module 'rec2': call graph has a cycle: f -> g -> f (instruction 'c' in computation "
        "'g' calls 'f')")


def test_recursion_through_while_body_is_rejected_and_compile_does_not_hang() -> None:
    text = """HloModule loop
cond {
  s = s32[] parameter(0)
  z = s32[] constant(3)
  ROOT lt = pred[] compare(s, z), direction=LT
}
body {
  s = s32[] parameter(0)
  ROOT w = s32[] while(s), condition=cond, body=body
}
ENTRY main {
  x = s32[] parameter(0)
  ROOT r = s32[] while(x), condition=cond, body=body
}"""
    assert _first_line(text).startswith(
        "module 'loop': call graph has a cycle: body -> body (instruction 'w'")
    with pytest.raises(VerificationError, match="call graph has a cycle"):
        xlc.compile(text, backend="interpreter")


# ---- item 13: what XLA rejects -------------------------------------------------------------
def test_unknown_attribute_is_a_parse_error() -> None:
    text = ("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n"
            "  ROOT a = f32[2] add(x, x), foo=bar\n}")
    with pytest.raises(ParseError, match=r"4:30: unknown attribute 'foo' for add \(it takes "
                                         r"only a key every instruction may carry"):
        parse_module(text)


def test_attribute_of_another_opcode_is_a_parse_error() -> None:
    text = ("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n"
            "  ROOT r = f32[2] reverse(x), dimensions={0}, direction=LT\n}")
    with pytest.raises(ParseError, match=r"unknown attribute 'direction' for reverse \(expected "
                                         r"one of dimensions or a key"):
        parse_module(text)


def test_attributes_xla_prints_are_still_accepted() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[2]{0} parameter(0), sharding={replicated}, metadata={op_name="x"}
  ROOT a = f32[2]{0} add(x, x), metadata={op_name="jit(f)/add" source_file="f.py" source_line=3}, backend_config={"k":1}, frontend_attributes={a="b"}
}"""  # noqa: E501
    module = parse_module(text, verify=True)
    assert module.entry.root.get_extra("backend_config") == '{"k":1}'  # type: ignore[union-attr]


def test_unknown_attribute_added_through_the_ir_is_a_verification_error() -> None:
    module = parse_module("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n"
                          "  ROOT n = f32[2] negate(x)\n}")
    module.entry.root.with_extra("foo", "1")  # type: ignore[union-attr]
    assert _first_line_of(module) == (
        "instruction 'n' in computation 'e': unknown attribute 'foo' for negate: it takes only "
        "a key every instruction may carry, such as metadata")


def _first_line_of(module: object) -> str:
    with pytest.raises(VerificationError) as info:
        verify_module(module)  # type: ignore[arg-type]
    return str(info.value).splitlines()[0]


def test_element_count_overflowing_int64_is_rejected() -> None:
    text = "HloModule m\nENTRY e {\n  ROOT x = f32[4294967296,4294967296,4] parameter(0)\n}"
    assert _first_line(text) == (
        "instruction 'x' in computation 'e': shape is too large: "
        "f32[4294967296,4294967296,4]{2,1,0} has 73786976294838206464 elements; its byte size "
        "overflows int64")


def test_unknown_rng_algorithm_is_rejected() -> None:
    text = """HloModule m
ENTRY e {
  s = u64[2] parameter(0)
  ROOT r = (u64[2], u32[4]) rng-bit-generator(s), algorithm=rng_bogus
}"""
    assert _first_line(text) == (
        "instruction 'r' in computation 'e': unknown rng algorithm: rng_bogus (expected one of "
        "rng_default, rng_three_fry, rng_philox)")


@pytest.mark.parametrize("bits, message", [
    ("exponent_bits=8, mantissa_bits=-3", "reduce-precision needs mantissa_bits >= 0: got -3"),
    ("exponent_bits=0, mantissa_bits=3", "reduce-precision needs exponent_bits >= 1: got 0"),
    ("exponent_bits=8", "missing required attribute: 'mantissa_bits' for reduce-precision"),
])
def test_reduce_precision_bits(bits: str, message: str) -> None:
    text = ("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n"
            f"  ROOT r = f32[2] reduce-precision(x), {bits}\n}}")
    assert _first_line(text) == f"instruction 'r' in computation 'e': {message}"


# ---- item 27: what XLA accepts -------------------------------------------------------------
def _run_everywhere(text: str, args: list[np.ndarray], want: np.ndarray) -> None:
    """The evaluator gives `want`; the interpreter, the CPU backend and the emulated GPU
    kernels give exactly what the evaluator gives."""
    module = parse_module(text, verify=True)
    ref = evaluate(module, args)
    assert ref.dtype == want.dtype
    np.testing.assert_array_equal(ref, want)
    for backend in ("interpreter", "cpu"):
        got = xlc.compile(text, backend=backend)(*args)
        assert got.dtype == ref.dtype
        np.testing.assert_array_equal(got, ref, err_msg=backend)
    (got,) = Emulator(compile_text(text)).run(args)
    np.testing.assert_array_equal(got, ref, err_msg="gpu")


def _ints(t: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    dt = PrimitiveType.from_text(t).dtype
    info = np.iinfo(dt)
    rng = np.random.default_rng(seed)
    return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dt)


@pytest.mark.parametrize("lt, rt, out", [("s8", "s16", "s32"), ("u8", "s8", "s32"),
                                         ("s16", "s8", "s64"), ("u8", "u16", "u32")])
def test_mixed_width_integer_dot(lt: str, rt: str, out: str) -> None:
    text = f"""HloModule m
ENTRY e {{
  x = {lt}[3,40] parameter(0)
  y = {rt}[40,5] parameter(1)
  ROOT d = {out}[3,5] dot(x, y), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""
    x, y = _ints(lt, (3, 40), 1), _ints(rt, (40, 5), 2)
    want = (x.astype(np.int64) @ y.astype(np.int64)).astype(PrimitiveType.from_text(out).dtype)
    _run_everywhere(text, [x, y], want)


def test_mixed_integer_dot_needs_a_wide_enough_result() -> None:
    text = """HloModule m
ENTRY e {
  x = s8[2,3] parameter(0)
  y = s16[3,2] parameter(1)
  ROOT d = s8[2,2] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
    assert _first_line(text) == (
        "instruction 'd' in computation 'e': dot: result element type s8 does not fit the "
        "operands, got s8[2,3] and s16[3,2]")


def test_unsorted_broadcast_dimensions_transpose() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  b = f32[3,4,2] broadcast(x), dimensions={2,0}
  ROOT n = f32[3,4,2] negate(b)
}"""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = -np.broadcast_to(x.T[:, None, :], (3, 4, 2))
    _run_everywhere(text, [x], want)


@pytest.mark.parametrize("xt, vt, out", [("f32", "bf16", "f32"), ("bf16", "f32", "f32"),
                                         ("f16", "bf16", "bf16"), ("f16", "f32", "f32")])
def test_pad_value_of_another_float_type(xt: str, vt: str, out: str) -> None:
    """XLA: SameElementTypeIgnoringFpPrecision, result of the higher-precision type (more range
    first: bf16 over f16)."""
    text = f"""HloModule m
ENTRY e {{
  x = {xt}[3] parameter(0)
  v = {vt}[] constant(1.5)
  p = {out}[7] pad(x, v), padding=1_1_1
  ROOT n = {out}[7] negate(p)
}}"""
    x = np.array([0.25, 1.25, 2.25]).astype(PrimitiveType.from_text(xt).dtype)
    want = -np.array([1.5, 0.25, 1.5, 1.25, 1.5, 2.25, 1.5]).astype(
        PrimitiveType.from_text(out).dtype)
    _run_everywhere(text, [x], want)


def test_pad_value_must_still_be_a_float_for_a_float_operand() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[3] parameter(0)
  v = s32[] constant(1)
  ROOT p = f32[5] pad(x, v), padding=1_1
}"""
    assert _first_line(text) == (
        "instruction 'p' in computation 'e': pad: padding value must be a scalar of the "
        "operand's type, got f32[3] and s32[]")
