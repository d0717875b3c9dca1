"""dtype promotion: JAX's lattice with weak Python scalars; 64-bit inputs kept as given."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import xlc.numpy as xnp

import xlc
from xlc.frontend import dtypes
from xlc.hlo.shape import PrimitiveType as PT

STRONG = [PT.PRED, PT.S8, PT.S16, PT.S32, PT.S64, PT.U8, PT.U16, PT.U32, PT.U64, PT.F16,
          PT.BF16, PT.F32, PT.F64]


@pytest.mark.parametrize("a, b, want", [
    (PT.F32, PT.F16, PT.F32), (PT.BF16, PT.F16, PT.F32), (PT.U8, PT.S8, PT.S16),
    (PT.U32, PT.S32, PT.S64), (PT.S32, PT.F16, PT.F16),
    (PT.PRED, PT.U8, PT.U8), (PT.S64, PT.F32, PT.F32), (PT.F64, PT.F32, PT.F64),
    (PT.S8, PT.U16, PT.S32), (PT.PRED, PT.PRED, PT.PRED),
])
def test_strong_promotion(a, b, want):
    assert dtypes.result_type((a, False), (b, False)) == (want, False)
    assert dtypes.result_type((b, False), (a, False)) == (want, False)


def test_u64_s64_meet_at_the_weak_float():
    assert dtypes.result_type((PT.U64, False), (PT.S64, False)) == (PT.F32, True)


def test_lattice_is_symmetric_and_associative():
    for a, b in itertools.product(STRONG, repeat=2):
        assert dtypes.result_type((a, False), (b, False)) == \
            dtypes.result_type((b, False), (a, False))
    for a, b, c in itertools.product(STRONG[::2], repeat=3):
        ab = dtypes.result_type((a, False), (b, False))
        bc = dtypes.result_type((b, False), (c, False))
        assert dtypes.result_type(ab, (c, False)) == dtypes.result_type((a, False), bc)


@pytest.mark.parametrize("strong, scalar, want", [
    (np.float16, 2, np.float16), (np.float16, 2.5, np.float16), (np.int8, 3, np.int8),
    (np.uint8, 3, np.uint8), (np.int32, 2.5, np.float32), (np.int64, 1, np.int64),
    (np.bool_, 1, np.int32), (np.bool_, 1.5, np.float32), (np.float64, 1.5, np.float64),
])
def test_weak_python_scalars(strong, scalar, want):
    x = np.ones(3, strong)
    got = xlc.jit(lambda a: a * scalar)(x)
    assert got.dtype == want
    np.testing.assert_allclose(got.astype(np.float64), np.ones(3) * scalar)


def test_64_bit_inputs_are_kept():
    x = np.arange(4, dtype=np.float64) / 3
    got = xlc.jit(lambda a: xnp.exp(a) + a.sum())(x)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.exp(x) + x.sum(), rtol=1e-14)
    assert xlc.jit(lambda a: a + np.int32(1))(np.arange(3, dtype=np.int64)).dtype == np.int64


def test_result_type_helper_and_true_divide_of_ints():
    assert xnp.result_type(np.ones(2, np.int8), 2.0) == np.float32
    got = xlc.jit(lambda a, b: a / b)(np.array([1, 3], np.int32), np.array([2, 4], np.int32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [0.5, 0.75])


def test_to_ptype_accepts_many_spellings():
    assert dtypes.to_ptype(float) is PT.F32 and dtypes.to_ptype(int) is PT.S32
    assert dtypes.to_ptype("f16") is PT.F16 and dtypes.to_ptype(np.uint16) is PT.U16
    assert dtypes.to_ptype("bfloat16") is PT.BF16


def test_bfloat16_and_preferred_element_type():
    import ml_dtypes
    import xlc.lax as lax

    a = np.full((2, 3), 1.5, ml_dtypes.bfloat16)
    b = np.ones((3, 2), np.float32)
    got = xlc.jit(lambda x, y: (x * 2, x + np.float16(1),
                                lax.dot_general(x, y.astype(ml_dtypes.bfloat16),
                                                (((1,), (0,)), ((), ())),
                                                preferred_element_type=np.float32)))(a, b)
    assert [g.dtype for g in got] == [np.dtype(ml_dtypes.bfloat16), np.float32, np.float32]
    np.testing.assert_allclose(got[2], np.full((2, 2), 4.5, np.float32))


def test_asarray_of_lists_defaults_to_32_bit():
    got = xlc.jit(lambda a: (xnp.array([1.5, 2]), xnp.asarray([1, 2]),
                             xnp.array([[a[0], 1.0], [2.0, a[1]]])))(np.array([5, 6], np.float32))
    assert [g.dtype for g in got] == [np.float32, np.int32, np.float32]
    np.testing.assert_array_equal(got[2], [[5, 1], [2, 6]])
