"""`bitcast` reinterprets the physical buffer (XLA's semantics): when it changes the layout it
is a transpose, not a reshape. The evaluator, the interpreter, the CPU backend (row fusion
included, which used to treat every bitcast of a per-row value as a reshape) and the GPU
kernels (emulated) agree with a numpy model of the physical buffer."""
from __future__ import annotations

import numpy as np
import pytest

import xlc
from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.helpers import compile_text
from xlc.hlo.evaluator import evaluate
from xlc.hlo.parser import parse_module, parse_shape
from xlc.hlo.shape import bitcast_is_reshape

RNG = np.random.default_rng(25)
_ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}"""


def _physical(x: np.ndarray, minor_to_major: tuple[int, ...]) -> np.ndarray:
    return np.transpose(x, tuple(reversed(minor_to_major))).ravel()


def _logical(buf: np.ndarray, dims: tuple[int, ...], minor_to_major: tuple[int, ...]) -> np.ndarray:
    major = tuple(reversed(minor_to_major))
    return np.transpose(buf.reshape([dims[d] for d in major]), np.argsort(major))


def _check_everywhere(text: str, args: list[np.ndarray], want: np.ndarray) -> None:
    ref = evaluate(parse_module(text), args)
    np.testing.assert_allclose(ref, want, rtol=1e-6)
    for backend in ("interpreter", "cpu"):
        np.testing.assert_allclose(xlc.compile(text, backend=backend)(*args), ref, rtol=1e-5,
                                   atol=1e-5, err_msg=backend)
    (got,) = Emulator(compile_text(text)).run(args)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5, err_msg="gpu")


@pytest.mark.parametrize("src, m2m_src, dst, m2m_dst", [
    ((2, 3), (1, 0), (3, 2), (0, 1)),
    ((2, 3), (0, 1), (6,), (0,)),
    ((2, 3, 4), (1, 2, 0), (4, 6), (0, 1)),
])
def test_layout_changing_bitcast_reinterprets_the_buffer(src: tuple[int, ...],
                                                         m2m_src: tuple[int, ...],
                                                         dst: tuple[int, ...],
                                                         m2m_dst: tuple[int, ...]) -> None:
    def spell(dims: tuple[int, ...], m2m: tuple[int, ...]) -> str:
        return f"f32[{','.join(map(str, dims))}]{{{','.join(map(str, m2m))}}}"
    text = f"""HloModule b
ENTRY main {{
  x = {spell(src, m2m_src)} parameter(0)
  b = {spell(dst, m2m_dst)} bitcast(x)
  ROOT e = {spell(dst, tuple(range(len(dst) - 1, -1, -1)))} exponential(b)
}}"""
    x = RNG.standard_normal(src).astype(np.float32)
    want = np.exp(_logical(_physical(x, m2m_src), dst, m2m_dst))
    _check_everywhere(text, [x], want)


def test_transposing_bitcast_of_a_row_reduction_in_a_row_fusion() -> None:
    """reduce -> bitcast {1,0} to {0,1} -> broadcast back over the rows: the row fusion must not
    take the bitcast for a reshape (the CPU result was off by up to 2.2 before)."""
    text = f"""HloModule rowbitcast
{_ADD}
ENTRY main {{
  x = f32[4,4,16]{{2,1,0}} parameter(0)
  z = f32[] constant(0)
  r = f32[4,4]{{1,0}} reduce(x, z), dimensions={{2}}, to_apply=add
  b = f32[4,4]{{0,1}} bitcast(r)
  n = f32[4,4]{{1,0}} negate(b)
  bb = f32[4,4,16]{{2,1,0}} broadcast(n), dimensions={{0,1}}
  ROOT d = f32[4,4,16]{{2,1,0}} add(x, bb)
}}"""
    x = RNG.standard_normal((4, 4, 16)).astype(np.float32)
    want = x - x.sum(axis=2).T[:, :, None]
    _check_everywhere(text, [x], want)


def test_row_major_bitcast_of_a_row_reduction_stays_a_row_move() -> None:
    text = f"""HloModule rowreshape
{_ADD}
ENTRY main {{
  x = f32[8,4,16]{{2,1,0}} parameter(0)
  z = f32[] constant(0)
  r = f32[8,4]{{1,0}} reduce(x, z), dimensions={{2}}, to_apply=add
  b = f32[32]{{0}} bitcast(r)
  n = f32[32]{{0}} negate(b)
  b2 = f32[8,4]{{1,0}} bitcast(n)
  bb = f32[8,4,16]{{2,1,0}} broadcast(b2), dimensions={{0,1}}
  ROOT d = f32[8,4,16]{{2,1,0}} add(x, bb)
}}"""
    x = RNG.standard_normal((8, 4, 16)).astype(np.float32)
    _check_everywhere(text, [x], x - x.sum(axis=2)[:, :, None])


@pytest.mark.parametrize("src, dst, same", [
    ("f32[4,4]{1,0}", "f32[4,4]{0,1}", False),
    ("f32[2,3]{1,0}", "f32[6]{0}", True),
    ("f32[2,3]{0,1}", "f32[6]{0}", False),
    ("f32[2,3]{0,1}", "f32[3,2]{1,0}", False),
    ("f32[4,1,4]{2,1,0}", "f32[4,4]{1,0}", True),
    ("f32[4,1,4]{0,1,2}", "f32[4,4]{0,1}", True),
    ("f32[1,4]{0,1}", "f32[4]{0}", True),
    ("f32[4,4]{1,0}", "s32[4,4]{1,0}", False),
])
def test_bitcast_is_reshape(src: str, dst: str, same: bool) -> None:
    assert bitcast_is_reshape(parse_shape(src), parse_shape(dst)) is same
