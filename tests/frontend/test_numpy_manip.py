"""xlc.numpy manipulation, creation, selection and index routines (numpy_manip, numpy_select)
against numpy (values) and jax.numpy (values and dtypes), traced through xlc.jit; a few eagerly.
The jax comparisons are skipped when jax is not installed."""
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

A = np.arange(12, dtype=np.float32).reshape(3, 4)
X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
V = np.array([3.0, 0.0, 1.0, 0.0, 2.0], np.float32)
SQ = np.arange(9, dtype=np.int32).reshape(3, 3)


def tree(x: Any) -> Any:
    """Lists and tuples (also named tuples) as lists of numpy arrays, for comparing."""
    if isinstance(x, (list, tuple)):
        return [tree(v) for v in x]
    return np.asarray(x)


def check(fn: Any, *args: Any, ref: Any = None, jax_ref: Any = None, use_jax: bool = True,
          rtol: float | None = None, atol: float | None = None) -> None:
    """fn(m, *args) with m = xlc.numpy under xlc.jit, against ref(np, *args) (values) and
    jax_ref(jnp, *args) (values and dtypes); ref and jax_ref default to fn."""
    got = tree(jit_run(lambda *a: fn(xnp, *a), *args))
    assert_close(got, tree((ref or fn)(np, *args)), rtol, atol, check_dtype=False)
    if jnp is not None and use_jax:  # one jax.jit compile instead of many eager ops
        want = jax.jit(lambda *a: (jax_ref or fn)(jnp, *a))(*args)
        assert_close(got, tree(want), rtol, atol)


CASES = {
    "append": (lambda m, a: (m.append(a, a[:1], axis=0), m.append(a[0], 5.0)), A),
    "array_split": (lambda m, a: m.array_split(a, 3, axis=1), A),
    "array_split_at": (lambda m, a: m.array_split(a, [1, 3], axis=1), A),
    "atleast": (lambda m, a: (m.atleast_1d(a[0, 0]), m.atleast_2d(a[0]), m.atleast_3d(a[0]),
                              m.atleast_3d(a), m.atleast_3d(a[0, 0]), m.atleast_2d(a[0, 0], a)),
                A),
    "block": (lambda m, a: m.block([[a, a[:, :1]], [a[:1], a[:1, :1]]]), A),
    "block_1d": (lambda m, a: m.block([a[0], a[1, :2]]), A),
    "column_stack": (lambda m, a: (m.column_stack([a[0], a[1]]), m.column_stack([a, a[:, 0]])),
                     A),
    "dstack": (lambda m, a: (m.dstack([a, a]), m.dstack([a[0], a[1]])), A),
    "concat": (lambda m, a: m.concat([a, a], axis=1), A),
    "copy": (lambda m, a: m.copy(a), A),
    "delete": (lambda m, a: (m.delete(a, 1, axis=1), m.delete(a, np.array([0, 2]), axis=1),
                             m.delete(a, slice(0, None, 2)), m.delete(a, -1, axis=0),
                             m.delete(a, np.array([True, False, True]), axis=0)), A),
    "insert": (lambda m, a: (m.insert(a, 1, 9.0, axis=1),
                             m.insert(a, 2, np.array([1.0, 2, 3]), axis=1),
                             m.insert(a, np.array([1, 1, 4]), np.array([7.0, 8, 9]), axis=1),
                             m.insert(a, 5, 100.0), m.insert(a, slice(0, 2), -1.0, axis=0),
                             m.insert(a, -1, a[0], 0)), A),
    "splits": (lambda m, x: (m.hsplit(x, 3), m.vsplit(x, [1]), m.dsplit(x, 2),
                             m.hsplit(x[0, 0], 2)), X),
    "identity_tri": (lambda m: (m.identity(3), m.identity(2, dtype=np.int32), m.tri(3, 4, k=1),
                                m.tri(3, dtype=np.int32), m.tri(2, 3, -1)),),
    "meshgrid": (lambda m, a: (m.meshgrid(a[0], a[1, :3]), m.meshgrid(a[0], a[1, :3], a[2, :2],
                                                                       indexing="ij"),
                               m.meshgrid(a[0], a[1, :2], sparse=True)), A),
    "flips": (lambda m, x: (m.fliplr(x), m.flipud(x), m.flipud(x[0, 0])), X),
    "rot90": (lambda m, x: (m.rot90(x), m.rot90(x, 2), m.rot90(x, 3, axes=(1, 2)),
                            m.rot90(x, -1, axes=(2, 0))), X),
    "roll": (lambda m, x: (m.roll(x, 2), m.roll(x, -1, axis=1), m.roll(x, (1, 5), axis=(0, 2)),
                           m.roll(x, 3, axis=(1, 2))), X),
    "rollaxis": (lambda m, x: (m.rollaxis(x, 2), m.rollaxis(x, 0, 3), m.rollaxis(x, 2, 1),
                               m.rollaxis(x, 1, -1)), X),
    "transposes": (lambda m, x: (m.permute_dims(x, (2, 0, 1)), m.matrix_transpose(x)), X),
    "unstack": (lambda m, x: m.unstack(x, axis=1), X),
    "resize": (lambda m, a: (m.resize(a, (5, 3)), m.resize(a[0], 7), m.resize(a, (2, 2))), A),
    "spacing": (lambda m, a: (m.logspace(0.0, 2.0, 5), m.logspace(a[0], a[1], 3, base=2.0,
                                                                    axis=1),
                              m.geomspace(1.0, 1000.0, 4), m.geomspace(-1.0, -16.0, 4, False),
                              m.geomspace(a[0] + 1, a[2] + 1, 3, axis=-1),
                              m.logspace(0, 3, 4, endpoint=False)), A),
    "apply_over_axes": (lambda m, x: m.apply_over_axes(m.sum, x, [0, 2]), X),
    # selection (numpy_select)
    "choose": (lambda m, a: (m.choose(np.array([[0, 1, 2, 1]] * 3), [a, a * 10, -a],
                                      mode="clip"),
                             m.choose(np.array([3, -1, 1, 0]), [a[0], a[1]], mode="wrap")), A),
    "select": (lambda m, a: m.select([a < 3, a > 8], [a, a * 10], default=-1.0), A),
    "indices": (lambda m: (m.indices((2, 3)), m.indices((2, 3), sparse=True),
                           m.indices((3,), dtype=np.int8)),),
    "ix_": (lambda m, a: a[m.ix_(np.array([0, 2]), np.array([1, 3, 0]))], A),
    "ravel_multi_index": (lambda m, i, j: (m.ravel_multi_index((i, j), (3, 4), mode="clip"),
                                           m.ravel_multi_index((i * 3, j - 4), (3, 4),
                                                               mode="wrap", order="F")),
                          np.array([0, 2, 1], np.int32), np.array([3, 1, 0], np.int32)),
    "unravel_index": (lambda m, i: m.unravel_index(i, (3, 4)), np.array([0, 5, 11, 7], np.int32)),
    "diag": (lambda m, a: (m.diag(a), m.diag(a, 1), m.diag(a, -2), m.diag(a[0]),
                           m.diag(a[0], 2), m.diag(a[1], -1), m.diagflat(a[:2, :2], 1)), A),
    "diagonal": (lambda m, x: (m.diagonal(x), m.diagonal(x, 1, 1, 2), m.diagonal(x, -1, 2, 1),
                               m.diagonal(x, 5)), X),
    "trace": (lambda m, x, s: (m.trace(x), m.trace(x, 1, 1, 2), m.trace(s), m.trace(s, -1)),
              X, SQ),
    "diag_indices": (lambda m, s: (m.diag_indices(3), m.diag_indices(2, 3),
                                   m.diag_indices_from(s)), SQ),
    "tri_indices": (lambda m, a: (m.tril_indices(3), m.triu_indices(3, 1, 4),
                                  m.tril_indices(4, -1, 2), m.tril_indices_from(a),
                                  m.triu_indices_from(a, -1)), A),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_numpy_and_jax(name):
    fn, *args = CASES[name]
    check(fn, *args, rtol=1e-5, atol=1e-5)


def test_empty_and_empty_like_are_zeros():
    got = jit_run(lambda a: (xnp.empty((2, 3)), xnp.empty(2, np.int32), xnp.empty_like(a),
                             xnp.empty_like(a, np.int8, (4,))), A)
    want = [np.zeros((2, 3), np.float32), np.zeros(2, np.int32), np.zeros_like(A),
            np.zeros(4, np.int8)]
    assert_close(tree(got), want)
    if jnp is not None:
        assert_close(tree(got), tree((jnp.empty((2, 3)), jnp.empty(2, np.int32),
                                      jnp.empty_like(A), jnp.empty_like(A, np.int8, (4,)))))


def test_fromfunction():
    check(lambda m: (m.fromfunction(lambda i, j: i * 10 + j, (3, 4)),
                     m.fromfunction(lambda i, j: i - j, (2, 3), dtype=int)))
    got = jit_run(lambda: xnp.fromfunction(lambda i, j: 1.5, (2, 2)))  # broadcast, as JAX
    assert_close(got, np.full((2, 2), 1.5, np.float32))


def test_roll_with_traced_shift():
    for shift in (np.int32(2), np.int32(-7), np.array([1, -2], np.int32)):
        axis = (0, 2) if np.ndim(shift) else 1
        got = jit_run(lambda x, s, axis=axis: xnp.roll(x, s, axis=axis), X, shift)
        assert_close(got, np.roll(X, tuple(np.atleast_1d(shift)) if np.ndim(shift) else
                                  int(shift), axis=axis))
    assert_close(jit_run(lambda x, s: xnp.roll(x, s), X, np.int32(5)), np.roll(X, 5))


def test_delete_with_traced_indices():
    obj = np.array([3, 0, -1], np.int32)
    got = jit_run(lambda a, o: xnp.delete(a, o, assume_unique_indices=True), A, obj)
    assert_close(got, np.delete(A, obj))
    got = jit_run(lambda a, o: xnp.delete(a, o, axis=1, assume_unique_indices=True), A, obj[:2])
    assert_close(got, np.delete(A, obj[:2], axis=1))
    with pytest.raises(xlc.TraceError, match="delete: .*assume_unique_indices=True"):
        xlc.jit(lambda a, o: xnp.delete(a, o))(A, obj)


def test_insert_with_traced_indices():
    obj = np.array([4, 0, 2], np.int32)
    got = jit_run(lambda a, o: xnp.insert(a, o, -1.0, axis=1), A, obj)
    assert_close(got, np.insert(A, obj, -1.0, axis=1))


# ---- apply_along_axis / vectorize through each mapping path -------------------------------------
def fake_vmap(f):
    """A stand-in for xlc.vmap: f per leading index, stacked (static loop; tests only)."""
    def mapped(*xs):
        outs = [f(*(x[i] for x in xs)) for i in range(xs[0].shape[0])]
        if isinstance(outs[0], tuple):
            return tuple(xnp.stack(o) for o in zip(*outs))
        return xnp.stack(outs)
    return mapped


@pytest.fixture(params=["vmap", "fake_vmap", "no_vmap"])
def mapping(request, monkeypatch):
    if request.param == "vmap" and not hasattr(xlc, "vmap"):
        pytest.skip("xlc.vmap is not available")
    if request.param == "fake_vmap":
        monkeypatch.setattr(xlc, "vmap", fake_vmap, raising=False)
    if request.param == "no_vmap":
        monkeypatch.delattr(xlc, "vmap", raising=False)
    return request.param


def test_apply_along_axis(mapping):
    check(lambda m, x: (m.apply_along_axis(lambda r: r.sum() * 2, 1, x),
                        m.apply_along_axis(lambda r: r[::-1] - r[0], 0, x),
                        m.apply_along_axis(lambda r, k: r[:2] * k, 2, x, 3.0)), X)


def test_vectorize(mapping):
    check(lambda m, a: (m.vectorize(lambda x, y: x * 2 + y)(a, a[0]),
                        m.vectorize(lambda x, p: x ** p, excluded={1})(a, 2),
                        m.vectorize(lambda r, w: (r * w).sum(), signature="(n),(n)->()")(a, a[0]),
                        m.vectorize(lambda r: (r[::-1], r.max()),
                                    signature="(n)->(n),()")(a)), A)


def test_vectorize_signature_errors():
    f = xnp.vectorize(lambda r, w: (r * w).sum(), signature="(n),(n)->()")
    with pytest.raises(xlc.TraceError, match="core dim 'n' has sizes 4 and 3"):
        xlc.jit(f)(A, A[0, :3])
    with pytest.raises(xlc.TraceError, match="not a valid gufunc signature"):
        xnp.vectorize(abs, signature="(n->()")


def test_vectorize_and_apply_eagerly():
    assert_close(xnp.vectorize(lambda x, y: x - y)(A, A[0]), A - A[0])
    assert_close(xnp.apply_along_axis(lambda r: r.max(), 0, A), A.max(0))


# ---- nonzero family: static size= ---------------------------------------------------------------
M = np.array([[0, 2, 0, 1], [3, 0, 0, 4], [0, 0, 5, 0]], np.float32)


@pytest.mark.parametrize("size, fill", [(5, None), (3, None), (8, None), (8, -1), (0, None)])
def test_nonzero_family_with_size(size, fill):
    def fn(m, x):
        return (m.nonzero(x, size=size, fill_value=fill), m.argwhere(x, size=size,
                                                                         fill_value=fill),
                m.flatnonzero(x, size=size, fill_value=fill))
    got = tree(jit_run(lambda x: fn(xnp, x), M))
    rows, cols = np.nonzero(M)
    pad = max(size - rows.size, 0)
    fv = 0 if fill is None else fill
    r = np.concatenate([rows, np.full(pad, fv)])[:size]
    c = np.concatenate([cols, np.full(pad, fv)])[:size]
    f = np.concatenate([np.flatnonzero(M), np.full(pad, fv)])[:size]
    assert_close(got, [[r, c], np.stack([r, c], -1), f], check_dtype=False)
    if jnp is not None:
        assert_close(got, tree(fn(jnp, M)))


def test_nonzero_eagerly_without_size():
    assert_close(tree(xnp.nonzero(M)), tree(np.nonzero(M)), check_dtype=False)
    assert_close(xnp.argwhere(M > 2), np.argwhere(M > 2), check_dtype=False)
    assert_close(xnp.flatnonzero([0, 3, 0, 1]), np.array([1, 3]), check_dtype=False)
    assert_close(xnp.argwhere(np.float32(3)), np.argwhere(np.float32(3)), check_dtype=False)
    cond = np.array([1, 0, 1, 0, 0])  # longer than the axis: the extra entries must be 0
    assert_close(xnp.compress(cond, A[:, 0]), np.compress(cond, A[:, 0]))
    with pytest.raises(xlc.TraceError, match="compress: condition has True entries beyond"):
        xnp.compress(V, A[:, 0])
    assert_close(xnp.extract(A > 6, A), np.extract(A > 6, A))


@pytest.mark.parametrize("call", [
    lambda x: xnp.nonzero(x), lambda x: xnp.argwhere(x), lambda x: xnp.flatnonzero(x),
    lambda x: xnp.compress(x[0] > 0, x), lambda x: xnp.extract(x > 0, x),
    lambda x: xnp.mask_indices(3, xnp.triu),
], ids=["nonzero", "argwhere", "flatnonzero", "compress", "extract", "mask_indices"])
def test_value_dependent_sizes_need_size_under_jit(call, request):
    name = request.node.callspec.id
    with pytest.raises(xlc.TraceError, match=rf"^{name}: the size of the result depends on the "
                                             r"values .* pass a static size="):
        xlc.jit(call)(M)


def test_compress_and_extract():
    cond = np.array([True, False, True])
    check(lambda m, a: m.compress(cond, a, axis=0, size=2), A,
          ref=lambda m, a: m.compress(cond, a, axis=0))
    check(lambda m, a: m.compress(np.array([0, 1, 1, 0]), a, axis=1, size=2), A,
          ref=lambda m, a: m.compress(np.array([0, 1, 1, 0]), a, axis=1))
    check(lambda m, a: m.compress(cond[:2], a[1:], size=2, fill_value=-1), A,
          ref=lambda m, a: np.array([4, -1], np.float32))
    check(lambda m, a: m.extract(a % 3 == 0, a, size=4), A,
          ref=lambda m, a: m.extract(a % 3 == 0, a))
    with pytest.raises(xlc.TraceError, match="compress: size must not exceed"):
        xlc.jit(lambda a: xnp.compress(cond, a, size=4))(A)  # the condition's length, as JAX


def test_mask_indices():
    assert_close(tree(xnp.mask_indices(3, xnp.triu)), tree(np.mask_indices(3, np.triu)),
                 check_dtype=False)
    check(lambda m: m.mask_indices(3, m.tril, -1, size=3), use_jax=True,
          ref=lambda m: m.mask_indices(3, m.tril, -1))


def test_choose_raise_mode():
    idx = np.array([1, 0, 1, 1])
    assert_close(xnp.choose(idx, [A[0], A[1]]), np.choose(idx, [A[0], A[1]]))
    with pytest.raises(xlc.TraceError, match="choose: invalid entry"):
        xnp.choose(idx + 1, [A[0], A[1]])
    with pytest.raises(xlc.TraceError, match="choose: mode='raise' .* mode='clip'"):
        xlc.jit(lambda i: xnp.choose(i, [A[0], A[1]]))(idx)


def test_piecewise():
    funcs = [lambda x: -x, lambda x: x * 10, 5.0]
    check(lambda m, v: m.piecewise(v, [v < 1, v > 2], funcs), V)
    check(lambda m, v: m.piecewise(v, [v < 1, v >= 1], [lambda x: x + 1, 7]), V)
    check(lambda m, v: m.piecewise(v, [v > 0.5, v > 1.5], [1, 2]), V)  # the last true wins


# ---- functional updates -------------------------------------------------------------------------
def _np_update(fn):
    def ref(m, a, *args):
        b = a.copy()
        fn(b, *args)
        return b
    return ref


def test_put():
    ind, v = np.array([0, 5, -1], np.int32), np.array([-1.0, -2.0], np.float32)
    check(lambda m, a, i, v: m.put(a, i, v, inplace=False), A, ind, v,
          ref=_np_update(np.put))
    for mode in ("clip", "wrap"):
        oob = np.array([1, 15, -20], np.int32)
        check(lambda m, a, i, v, mode=mode: m.put(a, i, v, mode=mode, inplace=False), A, oob, v,
              ref=_np_update(lambda b, i, v, mode=mode: np.put(b, i, v, mode=mode)))
    with pytest.raises(xlc.TraceError, match="put: .*pass inplace=False"):
        xlc.jit(lambda a: xnp.put(a, 0, 1.0))(A)


def test_put_along_axis_and_place():
    idx = np.array([[3], [0], [1]], np.int32)
    check(lambda m, a, i: m.put_along_axis(a, i, -5.0, axis=1, inplace=False), A, idx,
          ref=_np_update(lambda b, i: np.put_along_axis(b, i, -5.0, axis=1)))
    idx2 = np.array([[2, 0, 1, 2]], np.int32)
    check(lambda m, a, i: m.put_along_axis(a, i, a[:1] * 10, axis=0, inplace=False), A, idx2,
          ref=lambda m, a, i: _np_update(lambda b: np.put_along_axis(b, i, a[:1] * 10, 0))(m, a))
    mask = (A % 3 == 1)
    check(lambda m, a, k: m.place(a, k, np.array([-1.0, -2.0, -3.0]), inplace=False), A, mask,
          ref=_np_update(lambda b, k: np.place(b, k, [-1.0, -2.0, -3.0])))
    check(lambda m, s: m.fill_diagonal(s, 7, inplace=False), SQ,
          ref=_np_update(lambda b: np.fill_diagonal(b, 7)))
    check(lambda m, a: m.fill_diagonal(a, a[0, :3] * 0 - 1, inplace=False), A,
          ref=_np_update(lambda b: np.fill_diagonal(b, [-1.0, -1.0, -1.0])))
    with pytest.raises(xlc.TraceError, match="place: .*inplace=False"):
        xlc.jit(lambda a: xnp.place(a, a > 0, 1.0))(A)


def test_index_conversions():
    ind = np.array([[0, 2, 1], [3, 1, 0]], np.int32)
    check(lambda m, i, j: m.ravel_multi_index((i, j), (3, 4), mode="clip"), ind[0], ind[1])
    assert_close(xnp.ravel_multi_index((ind[0], ind[1]), (3, 4)),
                 np.ravel_multi_index((ind[0], ind[1]), (3, 4)), check_dtype=False)
    with pytest.raises(xlc.TraceError, match="ravel_multi_index: invalid entry"):
        xnp.ravel_multi_index((ind[1], ind[0]), (3, 4))
    with pytest.raises(xlc.TraceError, match="ravel_multi_index: mode='raise' needs concrete"):
        xlc.jit(lambda i, j: xnp.ravel_multi_index((i, j), (3, 4)))(ind[0], ind[1])
    # out-of-range flat indices clip, as in JAX
    got = jit_run(lambda i: xnp.unravel_index(i, (3, 4)), np.array([-1, 12, -13, 40], np.int32))
    assert_close(tree(got), [np.array([2, 2, 0, 2]), np.array([3, 3, 0, 3])], check_dtype=False)
    if jnp is not None:
        assert_close(tree(got), tree(jnp.unravel_index(np.array([-1, 12, -13, 40]), (3, 4))))


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=1, max_size=12), st.integers(1, 4))
def test_roll_and_resize_property(values, shift):
    x = np.array(values, np.int32)
    got = jit_run(lambda v: (xnp.roll(v, shift), xnp.resize(v, (2, len(values) + 1))), x)
    assert_close(tree(got), [np.roll(x, shift), np.resize(x, (2, len(values) + 1))])
