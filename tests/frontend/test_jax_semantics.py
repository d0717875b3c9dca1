"""Where `xlc.numpy` / `xlc.lax` must agree with `jax.numpy` / `jax.lax` beyond numpy: weakly
typed loop carries, invalid index types, negative dynamic-slice starts, integer division by zero.
Each result is computed on the evaluator and the CPU (`jit_run`) and compared with jax when it is
installed (values and dtypes)."""
from __future__ import annotations

import numpy as np
import pytest
import xlc.lax as lax
import xlc.numpy as xnp

import xlc
from tests.frontend.helpers import assert_close, jit_run

X = np.arange(12, dtype=np.float32).reshape(3, 4)


def _jax() -> tuple:
    jax = pytest.importorskip("jax")
    return jax, jax.numpy, jax.lax


# ---- item 4: weakly typed loop carries ---------------------------------------------------------
def test_fori_loop_promotes_a_weak_int_carry_instead_of_truncating():
    got = lax.fori_loop(0, 3, lambda i, a: a * 0.5, 1)  # eagerly, outside jit
    assert_close(got, np.float32(0.125))
    assert_close(jit_run(lambda: lax.fori_loop(0, 3, lambda i, a: a * 0.5, 1)), np.float32(0.125))


CARRY_CASES = {
    "fori_weak_int_times_float": lambda L, np_: L.fori_loop(0, 3, lambda i, a: a * 0.5, 1),
    "fori_weak_float_times_f16": lambda L, np_: L.fori_loop(
        0, 3, lambda i, a: a * np_.float16(2), 1.0),
    "fori_weak_int_plus_int8": lambda L, np_: L.fori_loop(0, 3, lambda i, a: a + np_.int8(1), 1),
    "fori_weak_int_plus_float": lambda L, np_: L.fori_loop(0, 3, lambda i, a: a + 1.5, 1),
    "fori_weak_float_times_complex": lambda L, np_: L.fori_loop(
        0, 3, lambda i, a: a * 1j, 1.0),
    "fori_pytree": lambda L, np_: L.fori_loop(0, 3, lambda i, a: (a[0] * 0.5, a[1] + 1), (1, 2)),
    "fori_astype_f16": lambda L, np_: L.fori_loop(
        0, 3, lambda i, a: (a * 0.5).astype(np_.float16), 1),
    "while_weak_int": lambda L, np_: L.while_loop(lambda a: a < 10, lambda a: a * 2.5, 1),
    "scan_weak_int_carry": lambda L, np_: L.scan(lambda c, x: (c + x, c), 0,
                                                 np_.arange(3.0, dtype=np_.float32)),
    "scan_weak_float_carry_int_xs": lambda L, np_: L.scan(lambda c, x: (c * x, c + x), 1.0,
                                                          np_.arange(1, 4, dtype=np_.int32)),
    # the result's weak type follows the body's output, as in jax
    "weak_result_adapts": lambda L, np_: L.fori_loop(
        0, 3, lambda i, a: a * 2, 1.0) * np_.float16(1),
    "strong_result_stays": lambda L, np_: L.fori_loop(
        0, 3, lambda i, a: a * np_.float32(2), 1.0) * np_.float16(1),
}


@pytest.mark.parametrize("name", sorted(CARRY_CASES))
def test_loop_carries_follow_jax_weak_types(name):
    _, jnp, jlax = _jax()
    case = CARRY_CASES[name]
    got = jit_run(lambda: case(lax, xnp))
    want = case(jlax, jnp)
    if isinstance(want, tuple):
        want = tuple(tuple(np.asarray(w) for w in v) if isinstance(v, tuple) else np.asarray(v)
                     for v in want)
    else:
        want = np.asarray(want)
    assert_close(got, want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("loop", ["fori_loop", "while_loop", "scan"])
def test_a_strong_carry_whose_dtype_would_change_is_a_trace_error(loop):
    run = {
        "fori_loop": lambda a: lax.fori_loop(0, 3, lambda i, c: c * 0.5, a),
        "while_loop": lambda a: lax.while_loop(lambda c: c < 3, lambda c: c * 0.5, a),
        "scan": lambda a: lax.scan(lambda c, x: (c * 0.5, x), a, xnp.zeros(3))[0],
    }[loop]
    with pytest.raises(xlc.TraceError, match=rf"^{loop}: init_val and body_fun output must have "
                       r"the same structure, shapes and dtypes, but at the output init_val has "
                       r"s32\[\] and body_fun output has f32\[\]: the loop would change the "
                       r"carry's dtype from s32 to f32; cast init_val or the output with "
                       r"\.astype\(\) \(at .*test_jax_semantics.py:\d+\)"):
        jit_run(run, np.int32(1))


# ---- item 5: invalid index types -------------------------------------------------------------
@pytest.mark.parametrize("idx, what", [
    ("w", r"str 'w': string indexing is not supported"),
    ((0, "w"), r"str 'w': string indexing is not supported"),
    (b"w", r"bytes b'w': string indexing is not supported"),
    (1.5, r"float 1\.5: indices must be integers, slices, None, Ellipsis or integer arrays"),
    (np.float32(1), r"float32 np\.float32\(1\.0\): indices must be integers"),
    (1j, r"complex 1j: indices must be integers"),
    ({"w": 0}, r"dict \{'w': 0\}: indices must be integers"),
    (True, r"bool True: boolean scalar indices are not supported"),
    (slice(0.5), r"slice slice\(None, 0\.5, None\): slice bounds must be integers or None"),
    (slice("a", None), r"slice slice\('a', None, None\): slice bounds must be integers"),
])
def test_indexing_with_a_non_index_raises(idx, what):
    with pytest.raises(xlc.TraceError, match=rf"^cannot index f32\[3,4\] with {what}"):
        jit_run(lambda a: a[idx], X)
    with pytest.raises(xlc.TraceError, match=rf"^cannot index f32\[3,4\] with {what}"):
        jit_run(lambda a: a.at[idx].set(0.0), X)


def test_indexing_with_a_traced_slice_bound_raises():
    with pytest.raises(xlc.TraceError, match=r"slice bounds must be static integers; use "
                                             r"xlc\.lax\.dynamic_slice for traced starts"):
        jit_run(lambda a, i: a[i:], X, np.int32(1))


def test_tuple_entries_index_like_arrays():
    assert_close(jit_run(lambda a: a[((0, 2),)], X), X[np.array([0, 2])])


# ---- item 6: negative dynamic-slice starts ---------------------------------------------------
BIG = np.arange(36, dtype=np.float32).reshape(6, 6)
UPD = -np.ones((2, 2), np.float32)
STARTS = [(0, -1), (-1, -1), (-2, 1), (5, -1), (-6, -7), (-100, 3), (2, 100)]


@pytest.mark.parametrize("starts", STARTS)
def test_dynamic_slice_wraps_negative_starts_like_jax(starts):
    _, _, jlax = _jax()
    def fn(L: object) -> object:
        return lambda a, u, i, j: (
            L.dynamic_slice(a, (i, j), (2, 3)), L.dynamic_update_slice(a, u, (i, j)),
            L.dynamic_slice(a, (starts[0], starts[1]), (2, 3)),
            L.dynamic_update_slice(a, u, (starts[0], starts[1])),
            L.dynamic_index_in_dim(a, i, 1, keepdims=False),
            L.dynamic_slice_in_dim(a, j, 2, 0), L.dynamic_update_slice_in_dim(a, u, j, 1),
            L.dynamic_update_index_in_dim(a, u[0], i, 0))

    args = (BIG, UPD, np.int32(starts[0]), np.int32(starts[1]))
    got = jit_run(fn(lax), *args)
    want = tuple(np.asarray(w) for w in fn(jlax)(*args))
    assert_close(got, want)


def test_dynamic_slice_last_element_without_jax():
    v = np.arange(5, dtype=np.float32)
    assert_close(jit_run(lambda a, i: lax.dynamic_slice(a, (i,), (1,)), v, np.int32(-1)),
                 v[-1:])
    assert_close(lax.dynamic_slice(v, (-2,), (2,)), v[-2:])
    # unless negative starts are disallowed: then -1 is clamped to 0 (XLA's semantics)
    assert_close(jit_run(lambda a, i: lax.dynamic_slice(a, (i,), (1,),
                                                        allow_negative_indices=False),
                         v, np.int32(-1)), v[:1])


# ---- item 7: integer division by zero and overflow -------------------------------------------
INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def _special_pairs(dt: type) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(dt)
    vals = sorted({v for v in (0, 1, -1, 2, -2, 3, -7, info.min, info.min + 1, info.max,
                               info.max - 1) if info.min <= v <= info.max})
    a = np.array([x for x in vals for _ in vals], dt)
    b = np.array([y for _ in vals for y in vals], dt)
    return a, b


@pytest.mark.parametrize("dt", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_integer_division_matches_jax_numpy(dt):
    jax, jnp, _ = _jax()
    a, b = _special_pairs(dt)
    names = ("floor_divide", "remainder", "mod", "fmod", "divmod")

    def fn(np_: object) -> object:
        return lambda x, y: (*(getattr(np_, n)(x, y) for n in names), x // y, x % y)

    got = jit_run(fn(xnp), a, b)
    with jax.enable_x64(True):
        want = fn(jnp)(jnp.asarray(a), jnp.asarray(b))
        want = tuple(tuple(np.asarray(v) for v in w) if isinstance(w, tuple) else np.asarray(w)
                     for w in want)
    assert_close(got, want)


def test_integer_division_by_zero_without_jax():
    a = np.array([7, -7, 0, np.iinfo(np.int32).min], np.int32)
    b = np.array([0, 0, 0, -1], np.int32)
    got = jit_run(lambda x, y: (x // y, x % y, xnp.fmod(x, y), lax.div(x, y), lax.rem(x, y)),
                  a, b)
    imin = np.iinfo(np.int32).min
    want = (np.array([-2, -2, -1, imin], np.int32), np.zeros(4, np.int32),
            np.zeros(4, np.int32), np.array([-1, -1, -1, imin], np.int32),
            np.array([7, -7, 0, 0], np.int32))
    assert_close(got, want)
