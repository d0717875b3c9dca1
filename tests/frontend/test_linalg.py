"""matmul / dot / einsum / tensordot against numpy."""
from __future__ import annotations

import numpy as np
import pytest
import xlc.numpy as xnp
from hypothesis import given, settings
from hypothesis import strategies as st

import xlc
from tests.frontend.helpers import assert_close, jit_run

R = np.random.default_rng(7)


def rnd(*shape, dtype=np.float32):
    if np.dtype(dtype).kind in "iu":
        return R.integers(-5, 6, shape).astype(dtype)
    return R.standard_normal(shape).astype(dtype)


@settings(max_examples=25, deadline=None)
@given(b=st.lists(st.integers(1, 3), max_size=2), n=st.integers(1, 4), k=st.integers(1, 4),
       m=st.integers(1, 4), bcast=st.booleans(),
       dt=st.sampled_from([np.float32, np.float64, np.int32, np.int8]))
def test_matmul_batched_broadcast(b, n, k, m, bcast, dt):
    a = rnd(*b, n, k, dtype=dt)
    c = rnd(*([1] * len(b) if bcast else b), k, m, dtype=dt)
    assert_close(jit_run(lambda x, y: x @ y, a, c), a @ c, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sa, sb", [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 2)),
                                    ((2, 3, 4), (4,)), ((4,), (2, 4, 3))])
def test_matmul_vectors(sa, sb):
    a, b = rnd(*sa), rnd(*sb)
    assert_close(jit_run(xnp.matmul, a, b), np.matmul(a, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sa, sb", [((4,), (4,)), ((3, 4), (4, 2)), ((2, 3, 4), (4,)),
                                    ((2, 3, 4), (5, 4, 2)), ((), (3,))])
def test_dot(sa, sb):
    a, b = rnd(*sa), rnd(*sb)
    assert_close(jit_run(xnp.dot, a, b), np.asarray(np.dot(a, b), np.float32), rtol=1e-5,
                 atol=1e-5)


EINSUMS = [
    ("ij,jk->ik", (3, 4), (4, 5)), ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
    ("ij->ji", (3, 4), None), ("i,i->", (4,), (4,)), ("bhqd,bhkd->bhqk", (2, 3, 4, 5),
                                                      (2, 3, 6, 5)),
    ("ij,kj->ik", (3, 4), (5, 4)), ("i,j->ij", (3,), (4,)), ("ij->", (3, 4), None),
    ("ij->j", (3, 4), None), ("ijk,ik->j", (2, 3, 4), (2, 4)), ("ij,jk", (3, 4), (4, 2)),
    ("bqd,bkd->bqk", (2, 3, 4), (2, 5, 4)),
]


@pytest.mark.parametrize("spec, sa, sb", EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum(spec, sa, sb):
    ops = [rnd(*sa)] + ([rnd(*sb)] if sb else [])
    assert_close(jit_run(lambda *xs: xnp.einsum(spec, *xs), *ops),
                 np.asarray(np.einsum(spec, *ops), np.float32), rtol=1e-5, atol=1e-5)


def test_outer_inner_tensordot_vdot():
    a, b = rnd(2, 3), rnd(4, 3)
    got = jit_run(lambda x, y: (xnp.outer(x, y), xnp.inner(x, y),
                                xnp.tensordot(x, y, ((1,), (1,))), xnp.vdot(x, x)), a, b)
    want = (np.outer(a, b), np.inner(a, b), np.tensordot(a, b, ((1,), (1,))), np.vdot(a, a))
    assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_mixed_dtype_matmul_promotes():
    a = rnd(2, 3).astype(np.float16)
    b = rnd(3, 2)
    got = jit_run(lambda x, y: x @ y, a, b)
    assert got.dtype == np.float32
    assert_close(got, a.astype(np.float32) @ b, rtol=1e-3, atol=1e-3)


def test_matmul_shape_error_names_op_shapes_and_line():
    with pytest.raises(xlc.TraceError, match=r"matmul: contracting dimensions do not match: "
                                             r"f32\[2,3\] \(dim 1, size 3\) and f32\[4,5\] "
                                             r"\(dim 0, size 4\) \(at .*test_linalg.py:\d+\)"):
        jit_run(lambda x, y: x @ y, rnd(2, 3), rnd(4, 5))


def test_einsum_errors():
    with pytest.raises(xlc.TraceError, match=r"einsum: ellipsis \('\.\.\.'\) is not supported"):
        jit_run(lambda x: xnp.einsum("...ij->...ji", x), rnd(2, 2))
    with pytest.raises(xlc.TraceError, match=r"einsum: operand f32\[2,2\] has rank 2 but its "
                                             r"subscripts 'ijk' name 3 dims"):
        jit_run(lambda x: xnp.einsum("ijk->i", x), rnd(2, 2))
