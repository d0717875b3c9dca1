"""xlc.numpy set routines, sorting helpers, bit packing and trim_zeros (numpy_sets) against
numpy (values) and jax.numpy (values and dtypes), traced through xlc.jit with static `size=`,
and eagerly without it. The jax comparisons are skipped when jax is not installed."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import xlc.numpy as xnp
from hypothesis import given, settings
from hypothesis import strategies as st

import xlc
from tests.frontend.helpers import assert_close, jit_run

jax: Any
jnp: Any
try:
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover - jax is optional
    jax = jnp = None

A = np.array([3, 1, 3, 2, 7, 1, 1, 5], np.int32)
B = np.array([1, 9, 5, 5, 4], np.int32)
F = np.array([2.5, np.nan, 1.0, 2.5, np.nan, -1.0], np.float32)
R = np.array([[1, 2], [0, 5], [1, 2], [0, 5], [0, 1]], np.int32)


def tree(x: Any) -> Any:
    """Lists and tuples (also named tuples) as lists of numpy arrays, for comparing."""
    if isinstance(x, (list, tuple)):
        return [tree(v) for v in x]
    return np.asarray(x)


def check(fn: Any, *args: Any, ref: Any = None, use_numpy: bool = True,
          use_jax: bool = True) -> None:
    """fn(m, *args) with m = xlc.numpy under xlc.jit, against ref(np, *args) (values, NaNs in
    the same places) and jax.jit of fn(jnp, *args) (values and dtypes)."""
    got = tree(jit_run(lambda *a: fn(xnp, *a), *args))
    if use_numpy:
        assert_close(got, tree((ref or fn)(np, *args)), check_dtype=False)
    if jnp is not None and use_jax:
        assert_close(got, tree(jax.jit(lambda *a: fn(jnp, *a))(*args)))


def pad(x: Any, size: int, fill: Any) -> np.ndarray:
    x = np.asarray(x)
    return np.concatenate([x, np.full(max(size - x.size, 0), fill, x.dtype)])[:size]


def test_array_equal_and_equiv():
    n = np.array([1.0, np.nan], np.float32)
    check(lambda m, a, n: (m.array_equal(a, a), m.array_equal(a, a[:3]),
                           m.array_equal(a, a + 0.0), m.array_equal(n, n),
                           m.array_equal(n, n, equal_nan=True), m.array_equiv(a, a[:1] * 0 + a),
                           m.array_equiv(R, R[:1]), m.array_equiv(R[:1], R[:1, :1] * 0 + R[:1])),
          A, n)
    assert not xnp.array_equiv(A, A[:3]) and not np.array_equiv(A, A[:3])  # no broadcasting


def test_isin():
    check(lambda m, a, b: (m.isin(a, b), m.isin(a.reshape(2, 4), b, invert=True),
                           m.isin(a, b.astype(np.float32) + 0.5), m.isin(a, b[:0])), A, B)


# ---- unique --------------------------------------------------------------------------------------
def test_unique_with_size_equal_to_the_count():
    check(lambda m, a: m.unique(a, return_index=True, return_inverse=True, return_counts=True,
                                size=5), A,
          ref=lambda m, a: m.unique(a, return_index=True, return_inverse=True,
                                    return_counts=True))
    check(lambda m, r: m.unique(r, axis=0, return_inverse=True, return_counts=True, size=3), R,
          ref=lambda m, r: m.unique(r, axis=0, return_inverse=True, return_counts=True))
    check(lambda m, r: m.unique(r, axis=1, size=2), R, ref=lambda m, r: m.unique(r, axis=1))
    check(lambda m, f: (m.unique(f, size=4), m.unique_values(f, size=5)), F,
          ref=lambda m, f: (m.unique(f), m.unique_values(f)))


@pytest.mark.parametrize("size, fill", [(7, None), (7, -1), (3, None), (0, None)])
def test_unique_padded_like_jax(size, fill):
    def fn(m, a):
        return m.unique(a, return_index=True, return_inverse=True, return_counts=True,
                        size=size, fill_value=fill)
    vals, idx, _, counts = np.unique(A, return_index=True, return_inverse=True,
                                     return_counts=True)
    want = [pad(vals, size, vals[0] if fill is None else fill), pad(idx, size, idx[0]),
            np.unique(A, return_inverse=True)[1], pad(counts, size, 0)]
    check(fn, A, ref=lambda m, a: want)


def test_unique_array_api_variants():
    def fn(m, a):
        return (m.unique_values(a, size=5), m.unique_counts(a, size=6),
                m.unique_inverse(a.reshape(2, 4), size=5), m.unique_all(a, size=5))
    check(fn, A, use_numpy=False)
    got = jit_run(lambda a: fn(xnp, a), A)
    assert type(got[3]).__name__ == "UniqueAllResult" and got[3].counts.tolist() == [3, 1, 2,
                                                                                       1, 1]
    assert_close(tree(got[2]), tree(np.unique_inverse(A.reshape(2, 4))), check_dtype=False)


def test_unique_eagerly_without_size():
    for args, kw in [((A,), {}), ((A,), dict(return_index=True, return_inverse=True,
                                             return_counts=True)),
                     ((R,), dict(axis=0, return_counts=True)), ((F,), {}),
                     ((F,), dict(equal_nan=False)), ((R,), dict(return_inverse=True))]:
        assert_close(tree(xnp.unique(*args, **kw)), tree(np.unique(*args, **kw)),
                     check_dtype=False)
    ua = xnp.unique_all(A)
    assert_close(tree(ua), tree(np.unique_all(A)), check_dtype=False)
    assert ua.values.dtype == np.int32 and ua.counts.dtype == np.int32


def test_unique_with_empty_input():
    got = jit_run(lambda a: xnp.unique(a[:0], return_counts=True, size=2, fill_value=9), A)
    assert_close(tree(got), [np.array([9, 9], np.int32), np.array([0, 0], np.int32)])
    with pytest.raises(xlc.TraceError, match="unique: an empty input .* needs a fill_value"):
        xlc.jit(lambda a: xnp.unique(a[:0], size=2))(A)


# ---- set operations ------------------------------------------------------------------------------
def test_set_operations_with_exact_sizes():
    check(lambda m, a, b: (m.intersect1d(a, b, size=2), m.union1d(a, b, size=7),
                           m.setdiff1d(a, b, size=3), m.setxor1d(a, b, size=5)), A, B,
          ref=lambda m, a, b: (m.intersect1d(a, b), m.union1d(a, b), m.setdiff1d(a, b),
                               m.setxor1d(a, b)), use_jax=False)  # jax: the padded test
    check(lambda m, a, b: m.intersect1d(a, b, return_indices=True, size=2), A, B,
          ref=lambda m, a, b: m.intersect1d(a, b, return_indices=True), use_jax=False)
    u = np.array([4, 1, 6, 3], np.int32)
    check(lambda m, a, b: (m.setdiff1d(a, b, assume_unique=True, size=3),
                           m.intersect1d(a, b, assume_unique=True, size=1),
                           m.setxor1d(a, b, assume_unique=True, size=5)), u, B[:3],
          ref=lambda m, a, b: (m.setdiff1d(a, b, assume_unique=True),
                               m.intersect1d(a, b, assume_unique=True),
                               m.setxor1d(a, b, assume_unique=True)))


@pytest.mark.parametrize("fill", [None, -7])
def test_set_operations_padded_like_jax(fill):
    def fn(m, a, b):
        return (m.intersect1d(a, b, size=4, fill_value=fill),
                m.intersect1d(a, b, return_indices=True, size=3, fill_value=fill),
                m.setdiff1d(a, b, size=6, fill_value=fill), m.setxor1d(a, b, size=9,
                                                                       fill_value=fill),
                m.union1d(a, b, size=10, fill_value=fill), m.intersect1d(a, b + 50, size=2,
                                                                         fill_value=fill))
    check(fn, A, B, use_numpy=False)


def test_set_operations_eagerly_without_size():
    for name in ("intersect1d", "union1d", "setdiff1d", "setxor1d"):
        assert_close(getattr(xnp, name)(A, B), getattr(np, name)(A, B), check_dtype=False)
    f2 = np.array([np.nan, 1.0, 3.0], np.float32)
    assert_close(xnp.setxor1d(F, f2), np.setxor1d(F, f2))
    assert_close(xnp.setdiff1d(F, f2), np.setdiff1d(F, f2))
    assert_close(tree(xnp.intersect1d(A, B, return_indices=True)),
                 tree(np.intersect1d(A, B, return_indices=True)), check_dtype=False)


@pytest.mark.parametrize("call", [
    lambda a, b: xnp.unique(a), lambda a, b: xnp.unique_counts(a),
    lambda a, b: xnp.intersect1d(a, b), lambda a, b: xnp.union1d(a, b),
    lambda a, b: xnp.setdiff1d(a, b), lambda a, b: xnp.setxor1d(a, b),
    lambda a, b: xnp.unique_values(a), lambda a, b: xnp.unique_all(a),
], ids=["unique", "unique_counts", "intersect1d", "union1d", "setdiff1d", "setxor1d",
        "unique_values", "unique_all"])
def test_sets_need_size_under_jit(call, request):
    name = request.node.callspec.id
    with pytest.raises(xlc.TraceError, match=rf"^{name}: the size of the result depends on the "
                                             r"values .* pass a static size="):
        xlc.jit(call)(A, B)


N = 15  # 9 + 6 values: one trace serves every example


@xlc.jit
def set_ops(x, y):
    return (xnp.unique(x, return_counts=True, size=N, fill_value=99),
            xnp.intersect1d(x, y, size=N, fill_value=99),
            xnp.setdiff1d(x, y, size=N, fill_value=99), xnp.setxor1d(x, y, size=N, fill_value=99),
            xnp.isin(x, y))


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(-4, 4), min_size=9, max_size=9),
       st.lists(st.integers(-4, 4), min_size=6, max_size=6))
def test_set_operations_property(a, b):
    a, b = np.array(a, np.int32), np.array(b, np.int32)
    n = N
    got = set_ops(a, b)
    vals, counts = np.unique(a, return_counts=True)
    want = [[pad(vals, n, 99), pad(counts, n, 0)], pad(np.intersect1d(a, b), n, 99),
            pad(np.setdiff1d(a, b), n, 99), pad(np.setxor1d(a, b), n, 99), np.isin(a, b)]
    assert_close(tree(got), want, check_dtype=False)


# ---- sorting helpers ---------------------------------------------------------------------------
def test_lexsort():
    k1 = np.array([1, 0, 1, 0, 1, 0], np.int32)
    k2 = np.array([2.0, 2.0, 1.0, 1.0, 2.0, 0.0], np.float32)
    check(lambda m, a, b: (m.lexsort((a, b)), m.lexsort((b, a)), m.lexsort([a]),
                           m.lexsort(m.stack([a, a[::-1]])), m.lexsort((R, R + 1), axis=0)),
          k1, k2)


@pytest.mark.parametrize("kth", [0, 3, -1])
def test_partition_and_argpartition(kth):
    x = np.array([[7, 1, 5, 3, 9, 1], [0, -2, 8, 8, 4, 6]], np.float32)
    part, arg = jit_run(lambda v: (xnp.partition(v, kth), xnp.argpartition(v, kth)), x)
    for row, prow, arow in zip(x, part, arg):
        k = kth % row.size
        assert prow[k] == np.partition(row, k)[k] == row[arow[k]]
        assert (prow[:k] <= prow[k]).all() and (prow[k + 1:] >= prow[k]).all()
        assert sorted(row[arow].tolist()) == sorted(row.tolist())
    with pytest.raises(xlc.TraceError, match="partition: kth must be"):
        xlc.jit(lambda v: xnp.partition(v, 6))(x)


def test_sort_complex():
    c = np.array([1 + 2j, 1 - 1j, -3 + 0j, 1 - 1j, 0 + 5j], np.complex64)
    check(lambda m, c: m.sort_complex(c), c)
    check(lambda m, a: m.sort_complex(a), A)


# ---- bit packing and trim_zeros ---------------------------------------------------------------
def test_packbits_and_unpackbits():
    bits = (np.arange(30).reshape(3, 10) % 3 == 0)
    check(lambda m, b: (m.packbits(b), m.packbits(b, axis=1), m.packbits(b, 0, "little"),
                        m.packbits(b.astype(np.int32) * 5, axis=-1)), bits)
    byts = np.array([[0, 255, 7], [128, 1, 42]], np.uint8)
    check(lambda m, x: (m.unpackbits(x), m.unpackbits(x, axis=1), m.unpackbits(x, 0, 5),
                        m.unpackbits(x, 1, 30, "little"), m.unpackbits(x, 1, -3)), byts)
    with pytest.raises(xlc.TraceError, match="unpackbits: needs a uint8 array"):
        xlc.jit(xnp.unpackbits)(A)


def test_trim_zeros_eagerly():
    z = np.array([0, 0, 3, 0, 4, 0], np.int32)
    z2 = np.zeros((4, 5), np.float32)
    z2[1, 2], z2[2, 3] = 1.0, 2.0
    for args in [(z,), (z, "f"), (z, "b"), (z * 0,), (z2,), (z2, "fb", 1)]:
        assert_close(xnp.trim_zeros(*args), np.trim_zeros(*args))
    with pytest.raises(xlc.TraceError, match="trim_zeros: the size of the result depends"):
        xlc.jit(xnp.trim_zeros)(z)
