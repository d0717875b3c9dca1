"""Shape manipulation, creation, indexing (basic, integer-array, traced) and .at[] updates."""
from __future__ import annotations

import numpy as np
import pytest
import xlc.numpy as xnp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import xlc
from tests.frontend.helpers import assert_close, jit_run

SETTINGS = settings(max_examples=30, deadline=None)
X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("fn, ref", [
    (lambda a: xnp.reshape(a, (4, -1)), lambda a: np.reshape(a, (4, -1))),
    (lambda a: xnp.transpose(a), np.transpose),
    (lambda a: xnp.transpose(a, (1, 0, 2)), lambda a: np.transpose(a, (1, 0, 2))),
    (lambda a: xnp.swapaxes(a, 0, 2), lambda a: np.swapaxes(a, 0, 2)),
    (lambda a: xnp.moveaxis(a, 0, -1), lambda a: np.moveaxis(a, 0, -1)),
    (lambda a: xnp.expand_dims(a, (0, 2)), lambda a: np.expand_dims(a, (0, 2))),
    (lambda a: xnp.squeeze(a[:1]), lambda a: np.squeeze(a[:1])),
    (lambda a: xnp.broadcast_to(a[0, 0], (3, 4)), lambda a: np.broadcast_to(a[0, 0], (3, 4))),
    (lambda a: xnp.concatenate([a, a], axis=-1), lambda a: np.concatenate([a, a], -1)),
    (lambda a: xnp.stack([a, a + 1], axis=1), lambda a: np.stack([a, a + 1], 1)),
    (lambda a: xnp.pad(a, ((0, 1), (2, 0), (1, 1))),
     lambda a: np.pad(a, ((0, 1), (2, 0), (1, 1)))),
    (lambda a: xnp.pad(a, 1, constant_values=7), lambda a: np.pad(a, 1, constant_values=7)),
    (lambda a: xnp.flip(a, 1), lambda a: np.flip(a, 1)),
    (lambda a: xnp.ravel(a), np.ravel),
    (lambda a: xnp.split(a, 2, axis=2), lambda a: np.split(a, 2, axis=2)),
    (lambda a: xnp.tile(a[0, 0], (2, 2)), lambda a: np.tile(a[0, 0], (2, 2))),
    (lambda a: xnp.repeat(a[0], 2, axis=1), lambda a: np.repeat(a[0], 2, axis=1)),
    (lambda a: xnp.hstack([a[0], a[1]]), lambda a: np.hstack([a[0], a[1]])),
    (lambda a: xnp.vstack([a[0, 0], a[1, 1]]), lambda a: np.vstack([a[0, 0], a[1, 1]])),
])
def test_shape_ops(fn, ref):
    got = jit_run(fn, X)
    want = ref(X)
    assert_close(list(got) if isinstance(want, list) else got, want)


def test_creation():
    got = jit_run(lambda: (xnp.zeros((2, 3)), xnp.ones(4, np.int32), xnp.full((2,), 7.5),
                           xnp.arange(5), xnp.arange(1, 2, 0.25), xnp.eye(3, k=1),
                           xnp.linspace(0, 1, 5)))
    want = (np.zeros((2, 3), np.float32), np.ones(4, np.int32), np.full((2,), 7.5, np.float32),
            np.arange(5, dtype=np.int32), np.arange(1, 2, 0.25, dtype=np.float32),
            np.eye(3, k=1, dtype=np.float32), np.linspace(0, 1, 5, dtype=np.float32))
    assert_close(got, want, rtol=1e-6)


def test_like_creation_keeps_dtype():
    x = np.ones((2, 2), np.int8)
    got = jit_run(lambda a: (xnp.zeros_like(a), xnp.ones_like(a), xnp.full_like(a, 3)), x)
    assert_close(got, (np.zeros_like(x), np.ones_like(x), np.full_like(x, 3)))


BASIC_INDICES = [
    1, -1, (0, 2), (slice(None), 1), (Ellipsis, 3), (1, Ellipsis, None), (None, 0, 1, 2),
    slice(None, None, -1), (slice(None), slice(None, None, -2)), (0, slice(2, 0, -1), 1),
    (slice(1, 5), slice(-2, None), slice(None, None, 3)), (slice(3, 1),),
]


@pytest.mark.parametrize("idx", BASIC_INDICES, ids=repr)
def test_basic_indexing(idx):
    assert_close(jit_run(lambda a: a[idx], X), X[idx])


@st.composite
def basic_index(draw):
    parts = []
    for n in X.shape:
        kind = draw(st.sampled_from(["int", "slice", "full"]))
        if kind == "int":
            parts.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            parts.append(slice(draw(st.one_of(st.none(), st.integers(-n - 1, n + 1))),
                               draw(st.one_of(st.none(), st.integers(-n - 1, n + 1))),
                               draw(st.sampled_from([None, 1, 2, -1, -2, 3]))))
        else:
            parts.append(slice(None))
    return tuple(parts)


@SETTINGS
@given(idx=basic_index())
def test_basic_indexing_property(idx):
    assert_close(jit_run(lambda a: a[idx], X), X[idx])


ADV_INDICES = [
    np.array([1, 0, 1]), (np.array([0, -1]), 2), (slice(None), np.array([[2, 0], [1, 1]])),
    (0, slice(None), np.array([3, 0])), (np.array([1, 0]), slice(None), np.array([0, 3])),
    (Ellipsis, np.array([1, 2])), ([1, 0], [2, 2]), (None, np.array([1]), 0),
]


@pytest.mark.parametrize("idx", ADV_INDICES, ids=repr)
def test_integer_array_indexing(idx):
    want = X[idx if not isinstance(idx, tuple) else tuple(
        np.asarray(i) if isinstance(i, list) else i for i in idx)]
    assert_close(jit_run(lambda a: a[idx], X), want)


def test_traced_indices():
    i = np.int32(-1)
    j = np.array([2, 0], np.int32)
    got = jit_run(lambda a, i, j: (a[i], a[:, i], a[0, j], a[i, 1:, j]), X, i, j)
    want = (X[-1], X[:, -1], X[0, [2, 0]], X[-1, 1:, [2, 0]])
    assert_close(got, want)


def test_take_and_take_along_axis():
    idx = np.array([[0, 2], [1, 1]], np.int32)
    got = jit_run(lambda a, k: (xnp.take(a, k, axis=1), xnp.take(a, np.array([5, 0])),
                                xnp.take_along_axis(a[0], xnp.argsort(a[0], axis=1), 1)),
                  X, idx)
    want = (np.take(X, idx, axis=1), np.take(X, [5, 0]),
            np.take_along_axis(X[0], np.argsort(X[0], axis=1), 1))
    assert_close(got, want)


AT_CASES = [
    ((1, slice(0, 2)), "set"), ((0,), "add"), ((Ellipsis, 1), "multiply"),
    ((np.array([0, 1, 0]),), "add"), ((slice(None), np.array([1, 1])), "set"),
    ((1, np.array([2]), 3), "max"), ((0, 1, slice(1, 3)), "min"),
]


@pytest.mark.parametrize("idx, mode", AT_CASES, ids=repr)
def test_at_updates(idx, mode):
    v = np.float32(5.0)
    got = jit_run(lambda a: getattr(a.at[idx], mode)(v), X)
    want = X.copy()
    ufunc = {"set": None, "add": np.add, "multiply": np.multiply, "max": np.maximum,
             "min": np.minimum}[mode]
    if ufunc is None:
        want[idx] = v
    else:
        ufunc.at(want, idx, v)
    assert_close(got, want)


def test_at_with_traced_index_and_array_update():
    x = np.zeros((4, 3), np.float32)
    rows = np.array([3, 1], np.int32)
    upd = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = jit_run(lambda a, r, u: (a.at[r].set(u), a.at[r[0], 1].add(2.0), a.at[1].get()),
                  x, rows, upd)
    w1 = x.copy()
    w1[rows] = upd
    w2 = x.copy()
    w2[3, 1] += 2
    assert_close(got, (w1, w2, x[1]))


def test_setitem_is_a_trace_error():
    def f(a):
        a[0] = 1.0
        return a

    with pytest.raises(xlc.TraceError, match=r"traced arrays are immutable: use x = "
                                             r"x\.at\[idx\]\.set\(value\) instead"):
        jit_run(f, X)


def test_index_errors():
    with pytest.raises(xlc.TraceError, match=r"index 3 is out of bounds for axis 0 with size 2"):
        jit_run(lambda a: a[3], X)
    with pytest.raises(xlc.TraceError, match=r"too many indices for array: f32\[2,3,4\] is "
                                             r"3-dimensional, but 4 were indexed"):
        jit_run(lambda a: a[0, 0, 0, 0], X)
    with pytest.raises(xlc.TraceError, match=r"boolean mask indexing has a value-dependent "
                                             r"shape"):
        jit_run(lambda a: a[a > 3], X)


@SETTINGS
@given(x=st.sampled_from([np.float32, np.float64, np.int32, np.int8, np.uint8, np.bool_]).flatmap(
    lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4))),
       data=st.data())
def test_reshape_transpose_property(x, data):
    perm = data.draw(st.permutations(range(x.ndim)))
    got = jit_run(lambda a: (xnp.transpose(a, perm), xnp.reshape(a, (-1,)),
                             xnp.expand_dims(a, 0)), x)
    assert_close(got, (np.transpose(x, perm), x.reshape(-1), x[None]))


@st.composite
def mixed_index(draw, allow_steps=True):
    parts = []
    for n in X.shape:
        kind = draw(st.sampled_from(["int", "slice", "full", "array", "array2"]))
        if kind == "int":
            parts.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            step = draw(st.sampled_from([None, 1, 2, -1] if allow_steps else [None, 1]))
            lo = draw(st.one_of(st.none(), st.integers(-n, n)))
            hi = draw(st.one_of(st.none(), st.integers(-n, n)))
            parts.append(slice(lo, hi, step))
        elif kind == "full":
            parts.append(slice(None))
        else:
            shape = (2,) if kind == "array" else (2, 1)
            parts.append(np.array(draw(st.lists(st.integers(-n, n - 1), min_size=2,
                                                max_size=2)), np.int32).reshape(shape))
    return tuple(parts)


@SETTINGS
@given(idx=mixed_index())
def test_mixed_indexing_property(idx):
    assert_close(jit_run(lambda a: a[idx], X), X[idx])


@SETTINGS
@given(idx=mixed_index(allow_steps=False), mode=st.sampled_from(["set", "add", "max"]))
def test_at_update_property(idx, mode):
    v = np.float32(-3.0)
    got = jit_run(lambda a: getattr(a.at[idx], mode)(v), X)
    want = X.copy()
    if mode == "set":
        want[idx] = v
    else:
        {"add": np.add, "max": np.maximum}[mode].at(want, idx, v)
    assert_close(got, want)


def test_linspace_follows_the_bounds_type_and_jax():
    """Python-number bounds give f32 (xlc's default float), f64 arrays f64; array bounds
    broadcast, `axis`, `endpoint`, `retstep`, an integer dtype and num 0/1 as jax.numpy with
    x64 (jax's formula: start * (1 - t) + stop * t, the endpoint exactly stop)."""
    a, b = np.array([0.3, 1.0]), np.array([[1.7, -2.0], [4.0, 0.5]])

    def cases(m, a, b):
        return (m.linspace(a[0], b[0, 0], 5), m.linspace(a, b, 4, axis=1),
                m.linspace(a, b, 4, endpoint=False, retstep=True), m.linspace(a, b, 3, axis=-1),
                m.linspace(0, 10, 4, dtype=np.int32), m.linspace(a, b, 1),
                m.linspace(a, b, 0, axis=-1))

    got = jit_run(lambda a, b: cases(xnp, a, b), a, b)
    assert jit_run(lambda: xnp.linspace(0, 1.5, 7)).dtype == np.float32
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        want = jax.tree_util.tree_map(np.asarray, cases(jax.numpy, a, b))
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert_close(g, w, rtol=1e-15, atol=1e-15)
    assert_close(got[2][0], np.linspace(a, b, 4, endpoint=False), rtol=1e-15, atol=1e-15)
