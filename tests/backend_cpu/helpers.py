"""Helpers for the CPU backend tests: compile HLO text on CPU and compare with the evaluator."""
from __future__ import annotations

import numpy as np

from xlc.backend_cpu import compile_cpu
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.parser import parse_module


def check(text: str, *args: np.ndarray, rtol: float = 1e-5, atol: float = 1e-6) -> list:
    """Compile `text` on CPU, run on `args`, assert the outputs match the evaluator's; returns
    the CPU outputs."""
    module = parse_module(text)
    exe = compile_cpu(module)
    got = exe.run(list(args))
    want = flatten_result(evaluate(parse_module(text), list(args)))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if g.dtype.kind in "fc" or g.dtype.name == "bfloat16":
            np.testing.assert_allclose(g.astype(np.float64) if g.dtype.kind != "c" else g,
                                       w.astype(np.float64) if w.dtype.kind != "c" else w,
                                       rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)
    return got


def rand(*shape: int, dtype: str = "float32", seed: int = 0) -> np.ndarray:
    """Reproducible standard-normal test data of `dtype`."""
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(dtype)


def conv_text(lhs: str, rhs: str, out: str, attrs: str) -> str:
    """An HLO module of one convolution `c = out convolution(a: lhs, k: rhs), attrs`."""
    return f"""HloModule m
ENTRY e {{
  a = {lhs} parameter(0)
  k = {rhs} parameter(1)
  ROOT c = {out} convolution(a, k), {attrs}
}}"""


def shape_dims(s: str) -> list[int]:
    """The dims of a shape spelled `f32[2,3,9,9]`."""
    return [int(v) for v in s[s.index("[") + 1:s.index("]")].split(",")]
