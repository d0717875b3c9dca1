"""xlc.random: Threefry-2x32 keys and samplers, bit-exact with jax.random (its default,
partitionable Threefry) for keys, split, fold_in, bits, uniform (f16/bf16/f32/f64), randint,
bernoulli, permutation and normal in f16/bf16; normal within a few ulps in f32/f64. Checked
against values JAX printed (no JAX needed), against JAX itself when installed, and for their
distributions. The other distributions: test_random_dists.py, test_random_gamma*.py."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import xlc.random as xr

import xlc
from xlc.errors import TraceError


def test_known_values_from_jax() -> None:
    """Printed by jax 0.10 (jax.random.PRNGKey(0) split, bits/uniform/randint of
    PRNGKey(7), fold_in)."""
    k0 = xlc.jit(lambda: xr.key(0))()
    assert np.asarray(xlc.jit(xr.split)(k0)).tolist() == [[1797259609, 2579123966],
                                                          [928981903, 3453687069]]
    k7 = xlc.jit(lambda: xr.PRNGKey(7))()
    assert np.asarray(xlc.jit(lambda k: xr.bits(k, (5,)))(k7)).tolist() == [
        2895194379, 4185947648, 1300703658, 1906787632, 3139134342]
    assert np.asarray(xlc.jit(lambda k: xr.uniform(k, (3,)))(k7)).view(np.uint32).tolist() \
        == [1059885352, 1064927358, 1050349136]
    assert np.asarray(xlc.jit(lambda k: xr.randint(k, (6,), 0, 10))(k7)).tolist() == [
        9, 2, 0, 7, 2, 6]
    assert np.asarray(xlc.jit(lambda k: xr.fold_in(k, 3))(k0)).tolist() == [2467461003,
                                                                            3840466878]


CASES: dict[str, tuple[Callable[[Any], Any], Callable[[Any, Any, Any], Any], bool]] = {
    # name: (xlc function of a key, jax function of (jax.random, jnp, key), needs x64)
    "split": (lambda k: xr.split(k, 5), lambda r, jnp, k: r.split(k, 5), False),
    "split_shape": (lambda k: xr.split(k, (2, 3)), lambda r, jnp, k: r.split(k, (2, 3)), False),
    "fold_in": (lambda k: xr.fold_in(k, 123), lambda r, jnp, k: r.fold_in(k, 123), False),
    "bits32": (lambda k: xr.bits(k, (3, 5)), lambda r, jnp, k: r.bits(k, (3, 5), jnp.uint32),
               False),
    "bits8": (lambda k: xr.bits(k, (7,), "uint8"), lambda r, jnp, k: r.bits(k, (7,), jnp.uint8),
              False),
    "bits64": (lambda k: xr.bits(k, (7,), "uint64"),
               lambda r, jnp, k: r.bits(k, (7,), jnp.uint64), True),
    "uniform_f32": (lambda k: xr.uniform(k, (999,), "float32", -2.0, 3.0),
                    lambda r, jnp, k: r.uniform(k, (999,), jnp.float32, -2.0, 3.0), False),
    "uniform_f64": (lambda k: xr.uniform(k, (999,), "float64"),
                    lambda r, jnp, k: r.uniform(k, (999,), jnp.float64), True),
    "uniform_f16": (lambda k: xr.uniform(k, (999,), "float16"),
                    lambda r, jnp, k: r.uniform(k, (999,), jnp.float16), False),
    "uniform_bf16": (lambda k: xr.uniform(k, (999,), "bfloat16"),
                     lambda r, jnp, k: r.uniform(k, (999,), jnp.bfloat16), False),
    "randint": (lambda k: xr.randint(k, (999,), -5, 17),
                lambda r, jnp, k: r.randint(k, (999,), -5, 17), False),
    "randint_u8_full": (lambda k: xr.randint(k, (999,), 0, 256, "uint8"),
                        lambda r, jnp, k: r.randint(k, (999,), 0, 256, jnp.uint8), False),
    "bernoulli": (lambda k: xr.bernoulli(k, 0.3, (999,)),
                  lambda r, jnp, k: r.bernoulli(k, 0.3, (999,)), False),
    "permutation": (lambda k: xr.permutation(k, 100), lambda r, jnp, k: r.permutation(k, 100),
                    False),
    "permutation_rows": (lambda k: xr.permutation(k, np.arange(12.0, dtype=np.float32)
                                                  .reshape(4, 3)),
                         lambda r, jnp, k: r.permutation(k, jnp.arange(12.0).reshape(4, 3)),
                         False),
    # 3000 > e^(ln(2^32 - 1) / 3): two sorting rounds
    "permutation_2_rounds": (lambda k: xr.permutation(k, 3000),
                             lambda r, jnp, k: r.permutation(k, 3000), False),
    "permutation_independent": (
        lambda k: xr.permutation(k, np.arange(24, dtype=np.int32).reshape(4, 6), 1, True),
        lambda r, jnp, k: r.permutation(k, jnp.arange(24).reshape(4, 6), 1, True), False),
    "normal_f16": (lambda k: xr.normal(k, (999,), "float16"),
                   lambda r, jnp, k: r.normal(k, (999,), jnp.float16), False),
    "normal_bf16": (lambda k: xr.normal(k, (999,), "bfloat16"),
                    lambda r, jnp, k: r.normal(k, (999,), jnp.bfloat16), False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bit_exact_with_jax(name: str) -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    mine, theirs, x64 = CASES[name]
    with jax.enable_x64(x64):
        key = jax.random.PRNGKey(42)
        want = np.asarray(jax.jit(lambda k: theirs(jax.random, jnp, k))(key))
    got = np.asarray(xlc.jit(mine)(np.asarray(key)))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8) if got.dtype != bool else got,
                                  want.view(np.uint8) if want.dtype != bool else want)


# f64: XLA's f64 log1p (inside erf_inv) is itself ~126 ulps off; xlc's is within 1
@pytest.mark.parametrize("dtype,ulps", [("float32", 4), ("float64", 64)])
def test_normal_close_to_jax(dtype: str, ulps: float) -> None:
    jax = pytest.importorskip("jax")
    with jax.enable_x64(dtype == "float64"):
        want = np.asarray(jax.jit(lambda k: jax.random.normal(k, (2000,), dtype))(
            jax.random.PRNGKey(1)))
    got = np.asarray(xlc.jit(lambda k: xr.normal(k, (2000,), dtype))(xr_key(1)))
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(got, want, rtol=ulps * eps, atol=ulps * eps)


def xr_key(seed: int) -> np.ndarray:
    return np.asarray(xlc.jit(lambda: xr.key(seed))())


def test_distributions() -> None:
    k = xr_key(3)
    u = np.asarray(xlc.jit(lambda k: xr.uniform(k, (100_000,), "float32", 2.0, 5.0))(k))
    assert u.min() >= 2.0 and u.max() < 5.0 and abs(u.mean() - 3.5) < 0.02
    n = np.asarray(xlc.jit(lambda k: xr.normal(k, (100_000,)))(k))
    assert abs(n.mean()) < 0.02 and abs(n.std() - 1.0) < 0.02
    r = np.asarray(xlc.jit(lambda k: xr.randint(k, (100_000,), -3, 4))(k))
    assert set(np.unique(r).tolist()) == set(range(-3, 4))
    p = np.asarray(xlc.jit(lambda k: xr.permutation(k, 1000))(k))
    assert sorted(p.tolist()) == list(range(1000))
    b = np.asarray(xlc.jit(lambda k: xr.bernoulli(k, 0.25, (100_000,)))(k))
    assert abs(b.mean() - 0.25) < 0.01


def test_keys_from_traced_seeds_and_inside_loops() -> None:
    """A seed traced as int32 gives the same key as a Python one; split inside fori_loop."""
    import xlc.lax

    assert np.array_equal(xlc.jit(xr.key)(np.int32(-7)), xlc.jit(lambda: xr.key(-7))())

    def body(i, carry):
        k, acc = carry
        k, sub = xr.split(k)
        return k, acc + xr.uniform(sub, ())

    k, total = xlc.jit(lambda k: xlc.lax.fori_loop(0, 10, body, (k, np.float32(0))))(xr_key(0))
    assert 0.0 < float(total) < 10.0 and np.asarray(k).dtype == np.uint32


def test_bad_keys_and_dtypes_are_trace_errors() -> None:
    with pytest.raises(TraceError, match=r"xlc.random.split: a key is a uint32\[2\] array "
                                         r"\(xlc.random.key\), got f32\[2\]"):
        xlc.jit(xr.split)(np.zeros(2, np.float32))
    with pytest.raises(TraceError, match=r"xlc.random.uniform: dtype must be a float type, "
                                         r"got int32"):
        xlc.jit(lambda k: xr.uniform(k, (2,), "int32"))(xr_key(0))
    with pytest.raises(TraceError, match=r"xlc.random.randint: dtype must be an integer type"):
        xlc.jit(lambda k: xr.randint(k, (2,), 0, 3, "float32"))(xr_key(0))


def test_key_helpers_and_shuffle() -> None:
    """key_data / wrap_key_data / key_impl / clone are identities on raw keys; the deprecated
    shuffle permutes each slice along its axis on its own."""
    k = xr_key(9)
    ks = np.asarray(xlc.jit(lambda k: xr.split(k, (2, 3)))(k))
    assert np.array_equal(xlc.jit(lambda k: xr.wrap_key_data(xr.key_data(k)))(ks), ks)
    assert xr.key_impl(k) == "threefry2x32" and xr.key_dtype() == np.uint32
    assert np.array_equal(xlc.jit(xr.clone)(k), k)
    x = np.arange(20, dtype=np.int32).reshape(4, 5)
    s = np.asarray(xlc.jit(lambda k: xr.shuffle(k, x, axis=1))(k))
    assert (np.sort(s, axis=1) == x).all()
    with pytest.raises(TraceError, match=r"wrap_key_data: key data is a uint32\[..., 2\]"):
        xlc.jit(xr.wrap_key_data)(np.zeros(3, np.uint32))
