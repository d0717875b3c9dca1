"""Donated (io-aliased) parameters on the CPU backend: a result written into a donated
parameter's storage must never clobber values still to be read (issue 11 item 1), through
`xlc.jit(donate_argnums=...)`, `xlc.compile` of JAX's `input_output_alias` HLO, `xlc run` and
loaded `.xlc` files; and what copy insertion leaves behind compiles and runs (item 26)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xlc.numpy as xnp

import xlc
from xlc.backend_cpu.executable import aligned_empty
from xlc.cli import main as cli_main
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.parser import parse_module


def donatable(a: np.ndarray) -> np.ndarray:
    """A 64-byte aligned, writeable copy of `a`: the executable uses it as the output's
    storage in place (so clobbering shows in the result)."""
    out = aligned_empty(a.nbytes).view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


X8 = np.arange(8, dtype=np.float32)
X44 = np.arange(16, dtype=np.float32).reshape(4, 4)


@pytest.mark.parametrize("fn, x, want", [
    (lambda x: x[::-1], X8, X8[::-1]),
    (lambda x: xnp.cumsum(x), X8, np.cumsum(X8)),
    (lambda x: x.T, X44, X44.T),
    (lambda x: x[xnp.array([3, 0, 2, 1])], X44, X44[[3, 0, 2, 1]]),
], ids=["reverse", "cumsum", "transpose", "gather"])
def test_jit_with_donated_argument_matches_numpy(fn, x: np.ndarray, want: np.ndarray) -> None:
    """Reversing a donated arange(8) gave [7 6 5 4 4 5 6 7]: the reverse wrote the donated
    buffer while still reading it."""
    f = xlc.jit(fn, donate_argnums=0)
    arg = donatable(x)
    got = f(arg)
    np.testing.assert_array_equal(got, want)


ABS_AND_SELF = """HloModule jit_f, input_output_alias={ {0}: (0, {}, may-alias) }

ENTRY main.4 {
  Arg_0.1 = f32[8]{0} parameter(0)
  abs.2 = f32[8]{0} abs(Arg_0.1)
  ROOT tuple.3 = (f32[8]{0}, f32[8]{0}) tuple(abs.2, Arg_0.1)
}
"""
"""What JAX hands XLA for `jax.jit(lambda a: (jnp.abs(a), a), donate_argnums=0)`."""

REVERSE = """HloModule jit_rev, input_output_alias={ {}: (0, {}, may-alias) }

ENTRY main {
  a = f32[8]{0} parameter(0)
  ROOT r = f32[8]{0} reverse(a), dimensions={0}
}
"""


@pytest.mark.parametrize("text", [ABS_AND_SELF, REVERSE], ids=["abs_and_self", "reverse"])
def test_input_output_alias_hlo_matches_evaluator(text: str) -> None:
    x = -np.arange(8, dtype=np.float32)
    want = flatten_result(evaluate(parse_module(text), [x.copy()]))
    got = xlc.compile(text)(donatable(x))
    for g, w in zip(got if isinstance(got, tuple) else (got,), want):
        np.testing.assert_array_equal(g, w)


LOOP_CHAIN = """HloModule loop_chain

cond {
  cp = (s32[], f32[8]{0}) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  lim = s32[] constant(2)
  ROOT lt = pred[] compare(ci, lim), direction=LT
}

body {
  bp = (s32[], f32[8]{0}) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  one = s32[] constant(1)
  inc = s32[] add(bi, one)
  bx = f32[8]{0} get-tuple-element(bp), index=1
  r = f32[8]{0} reverse(bx), dimensions={0}
  u = f32[1]{0} constant({-1})
  d = f32[8]{0} dynamic-update-slice(r, u, bi)
  ROOT br = (s32[], f32[8]{0}) tuple(inc, d)
}

ENTRY main {
  x = f32[8]{0} parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[8]{0}) tuple(zero, x)
  w = (s32[], f32[8]{0}) while(init), condition=cond, body=body
  ROOT o = f32[8]{0} get-tuple-element(w), index=1
}
"""
"""The same hole in a while body: the new state, a dynamic-update-slice in place on
reverse(old state), made the reverse write the loop state it reads ([7 -1 5 4 4 5 6 7])."""

DONATED_CHAIN = """HloModule donated_chain, input_output_alias={ {}: (0, {}, may-alias) }

add {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] add(x, y)
}

ENTRY e {
  p0 = s32[6] parameter(0)
  z = s32[] constant(0)
  c = s32[6] reduce-window(p0, z), window={size=6 pad=5_0}, to_apply=add
  u = s32[5] slice(c), slice={[0:5]}
  i = s32[] constant(-1)
  ROOT d = s32[6] dynamic-update-slice(c, u, i)
}
"""
"""Found by the random aliasing programs: the cumulative sum was computed into the donated
parameter's storage (under the in-place dynamic-update-slice) while reading it."""


@pytest.mark.parametrize("text, x", [(LOOP_CHAIN, X8),
                                     (DONATED_CHAIN, np.array([15, -12, -18, 23, -15, -18],
                                                              np.int32))],
                         ids=["loop_chain", "donated_chain"])
def test_in_place_chain_over_a_reader_of_the_old_value(text: str, x: np.ndarray) -> None:
    want = flatten_result(evaluate(parse_module(text), [x.copy()]))
    got = xlc.compile(text)(donatable(x))
    np.testing.assert_array_equal(got, want[0])


@pytest.mark.parametrize("via", ["hlo", "xlc"])
def test_xlc_run_and_loaded_artifact_with_aliasing(tmp_path: Path, via: str) -> None:
    src = tmp_path / "m.hlo"
    src.write_text(ABS_AND_SELF)
    x = -np.arange(8, dtype=np.float32)
    np.savez(tmp_path / "in.npz", in0=x)
    path = src
    if via == "xlc":
        path = tmp_path / "m.xlc"
        xlc.compile(ABS_AND_SELF).serialize(str(path))
        loaded = xlc.load(str(path))
        out0, out1 = loaded(donatable(x))
        np.testing.assert_array_equal(out0, np.abs(x))
        np.testing.assert_array_equal(out1, x)
    assert cli_main(["run", str(path), "--inputs", str(tmp_path / "in.npz"),
                     "--output", str(tmp_path / "out.npz")]) == 0
    out = np.load(tmp_path / "out.npz")
    np.testing.assert_array_equal(out["out0"], np.abs(x))
    np.testing.assert_array_equal(out["out1"], x)


# ---- issue 11 item 26 -----------------------------------------------------------------------
SHARED_BODY = """HloModule shared_body

cond {
  cp = (s32[], f32[8]{0}) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  lim = s32[] constant(3)
  ROOT lt = pred[] compare(ci, lim), direction=LT
}

body {
  bp = (s32[], f32[8]{0}) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  one = s32[] constant(1)
  inc = s32[] add(bi, one)
  bx = f32[8]{0} get-tuple-element(bp), index=1
  e = f32[8]{0} exponential(bx)
  n = f32[8]{0} negate(e)
  m = f32[8]{0} multiply(n, bx)
  ROOT br = (s32[], f32[8]{0}) tuple(inc, m)
}

ENTRY main {
  x = f32[8]{0} parameter(0)
  y = f32[8]{0} parameter(1)
  zero = s32[] constant(0)
  i1 = (s32[], f32[8]{0}) tuple(zero, x)
  i2 = (s32[], f32[8]{0}) tuple(zero, y)
  w1 = (s32[], f32[8]{0}) while(i1), condition=cond, body=body
  w2 = (s32[], f32[8]{0}) while(i2), condition=cond, body=body
  r1 = f32[8]{0} get-tuple-element(w1), index=1
  r2 = f32[8]{0} get-tuple-element(w2), index=1
  ROOT t = (f32[8]{0}, f32[8]{0}) tuple(r1, r2)
}
"""

TOKEN_BRANCH = """HloModule token_branch

b0 {
  p0 = (token[], f32[4]{0}) parameter(0)
  t0 = token[] get-tuple-element(p0), index=0
  v0 = f32[4]{0} get-tuple-element(p0), index=1
  n0 = f32[4]{0} negate(v0)
  ROOT r0 = (token[], f32[4]{0}) tuple(t0, n0)
}

b1 {
  ROOT p1 = (token[], f32[4]{0}) parameter(0)
}

ENTRY main {
  c = pred[] parameter(0)
  x = f32[4]{0} parameter(1)
  t = token[] after-all()
  a = (token[], f32[4]{0}) tuple(t, x)
  k = (token[], f32[4]{0}) conditional(c, a, a), true_computation=b0, false_computation=b1
  ROOT o = f32[4]{0} get-tuple-element(k), index=1
}
"""


def test_two_loops_sharing_a_fused_body_compile_with_verification() -> None:
    """Failed in the verifier after copy insertion: "fusion computation 'fused_computation'
    must be called by exactly one fusion" (the cloned body kept the original's fusion)."""
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    y = np.linspace(0, 2, 8, dtype=np.float32)
    got = xlc.compile(SHARED_BODY, options=xlc.CompileOptions(verify=True))(x, y)
    want = flatten_result(evaluate(parse_module(SHARED_BODY), [x, y]))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("flag", [True, False])
def test_token_through_a_conditional_runs(flag: bool) -> None:
    """Failed with "copy: expected an array operand, got token[]" (with --verify) and
    "CPU backend: t0.copy needs an array shape" without."""
    x = np.arange(4, dtype=np.float32)
    for verify in (True, False):
        got = xlc.compile(TOKEN_BRANCH, options=xlc.CompileOptions(verify=verify))(
            np.array(flag), x)
        np.testing.assert_array_equal(got, -x if flag else x)
