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
