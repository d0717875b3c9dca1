"""xlc.numpy sum/prod/mean/var/cumsum of f16/bf16 against jax.numpy (issue 11, item 2): the
same result dtypes, computed in f32 as jax.numpy does (no 16-bit accumulator, no f16 element
count that overflows past 65,504)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import xlc.numpy as xnp

from tests.frontend.helpers import jit_run

jnp = pytest.importorskip("jax.numpy")

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {"bf16": BF16, "f16": np.dtype(np.float16)}
ULP = {"bf16": 2.0 ** -7, "f16": 2.0 ** -10}


def _check(got: object, want: object, t: str, ulps: float = 1) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=ulps * ULP[t], atol=0)


@pytest.mark.parametrize("t", ["bf16", "f16"])
@pytest.mark.parametrize("name", ["sum", "mean", "var"])
def test_reductions_of_16bit_floats_match_jax(t: str, name: str) -> None:
    x = np.random.default_rng(3).uniform(0.5, 1.5, (4, 3000)).astype(DTYPES[t])
    for axis in (None, 1, 0):
        got = jit_run(lambda a, axis=axis: getattr(xnp, name)(a, axis=axis), x)
        want = getattr(jnp, name)(x, axis=axis)
        _check(got, want, t, ulps=2)


@pytest.mark.parametrize("t", ["bf16", "f16"])
def test_prod_of_16bit_floats_matches_jax(t: str) -> None:
    x = np.full((4, 300), 1 + 2 * ULP[t], DTYPES[t])
    _check(jit_run(lambda a: xnp.prod(a, axis=1), x), jnp.prod(x, axis=1), t, ulps=2)


@pytest.mark.parametrize("t", ["bf16", "f16"])
def test_sum_of_ones_is_exact(t: str) -> None:
    x = np.ones(1000, DTYPES[t])  # bf16 accumulation stops at 256
    got = jit_run(xnp.sum, x)
    assert got.dtype == DTYPES[t] and float(got) == 1000.0 == float(jnp.sum(x))


def test_mean_and_var_of_more_than_65504_f16_elements_are_finite() -> None:
    x = np.random.default_rng(4).uniform(-1, 1, 100_000).astype(np.float16) + np.float16(2)
    for name in ("mean", "var"):
        got = jit_run(getattr(xnp, name), x)
        want = getattr(jnp, name)(x)
        assert np.isfinite(got), (name, got)
        _check(got, want, "f16", ulps=2)


@pytest.mark.parametrize("t", ["bf16", "f16"])
def test_cumsum_of_16bit_floats_matches_jax(t: str) -> None:
    x = np.ones((2, 3000), DTYPES[t])
    got = jit_run(lambda a: xnp.cumsum(a, axis=1), x)
    _check(got, jnp.cumsum(x, axis=1), t)


@pytest.mark.parametrize("t", ["bf16", "f16"])
def test_sum_with_16bit_dtype_of_f32_input_rounds_once(t: str) -> None:
    x = np.random.default_rng(5).uniform(0, 1, 5000).astype(np.float32)
    got = jit_run(lambda a: xnp.sum(a, dtype=DTYPES[t]), x)
    _check(got, jnp.sum(x, dtype=DTYPES[t]), t)
