"""Random HLO programs (the CPU backend's hypothesis strategies: elementwise chains over several
dtypes, reductions over random dimension sets) compiled for the GPU and run in the host
emulator match the reference evaluator."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from tests.backend_cpu.test_random_programs import programs, reduce_programs
from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.helpers import compile_text
from xlc.hlo.evaluator import evaluate
from xlc.hlo.parser import parse_module


def _check(text: str, args: list[np.ndarray], tol: float) -> None:
    got = Emulator(compile_text(text)).run(args)
    want = evaluate(parse_module(text), args)
    want = list(want) if isinstance(want, tuple) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        if g.dtype.kind == "f" or g.dtype.name == "bfloat16":
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol,
                                       atol=tol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)


@settings(max_examples=40, deadline=None)
@given(programs())
def test_random_elementwise_program_on_emulated_gpu(prog: tuple) -> None:
    text, args, ty = prog
    _check(text, args, {"f16": 2e-3, "bf16": 2e-2}.get(ty, 2e-4))


@settings(max_examples=30, deadline=None)
@given(reduce_programs())
def test_random_reduction_on_emulated_gpu(prog: tuple) -> None:
    text, args, ty = prog
    _check(text, args, 1e-5)
