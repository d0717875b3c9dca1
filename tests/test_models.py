"""The benchmark models of tools/bench_models.py (a transformer block, a conv net, an MLP with
norms) compiled for the CPU agree with the reference evaluator running the same traced
program: the dot/convolution lowerings and fusions on realistic layer shapes."""
from __future__ import annotations

import numpy as np
import pytest
import xlc.lax
import xlc.numpy as xnp

import xlc
from tools.bench_models import models


@pytest.mark.parametrize("name", sorted(models()))
def test_model_matches_the_evaluator(name: str) -> None:
    fn, params, x = models()[name]

    def f(p, x):  # noqa: ANN001, ANN202 - a traced model
        return fn(xnp, xlc.nn, xlc.lax, p, x)

    cpu = xlc.jit(f, backend="cpu")(params, x)
    ref = xlc.jit(f, backend="interpreter")(params, x)
    np.testing.assert_allclose(np.asarray(cpu), np.asarray(ref), rtol=2e-4, atol=2e-4)
