"""The jax.lax functions of lax_more / lax_elementwise / lax_scatter / lax_conv / lax_misc
against jax.lax (skipped without jax) and numpy, traced with xlc.jit."""
from __future__ import annotations

import numpy as np
import pytest
import xlc.lax as lax
import xlc.numpy as xnp

import xlc
from tests.frontend.helpers import assert_close, jit_run

R = np.random.default_rng(7)


def _jl():
    return pytest.importorskip("jax").lax


def _close(got, want, **kw) -> None:
    """Compare pytrees leaf by leaf as numpy arrays (jax results included), dtypes too."""
    import jax.tree_util as tu

    for g, w in zip(tu.tree_leaves(got), tu.tree_leaves(want)):
        w = np.asarray(w)
        assert np.asarray(g).shape == w.shape and np.asarray(g).dtype == w.dtype, (g, w)
        np.testing.assert_allclose(np.asarray(g), w, **kw)


# ---- shapes -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", [np.float32, np.int32])
def test_shape_helpers_match_jax(dt):
    jl = _jl()
    x = np.arange(24).reshape(2, 3, 4).astype(dt)

    def f(L, a):
        return (L.broadcast(a, (2,)), L.broadcast_to_rank(a[0], 4), L.expand_dims(a, (0, -1)),
                L.squeeze(a[:1], (0,)), L.collapse(a, 1), L.collapse(a, 0, 2),
                L.tile(a, (2, 1, 3)), L.stack([a, a * 2], 1), L.unstack(a, 2),
                L.split(a, (1, 0, 3), 2), L.slice_in_dim(a, 0, -1, 2, 2),
                L.slice_in_dim(a, None, None, 1, 1), L.index_in_dim(a, -1, 1, False),
                L.index_in_dim(a, 0, 0), L.full((2, 2), 3.0, dt), L.full_like(a, 5),
                L.broadcast_like(a[0, 0], a),
                L.index_take(a, (np.array([0, 1, -1]), np.array([2, 5, 1])), (0, 2)))

    _close(jit_run(lambda a: f(lax, a), x), f(jl, x))
    assert lax.broadcast_shapes((2, 1, 3), (4, 3)) == jl.broadcast_shapes((2, 1, 3), (4, 3))
    empty = jit_run(lambda: lax.empty((2, 3), dt))
    assert empty.shape == (2, 3) and empty.dtype == dt


def test_full_keeps_weak_types_and_dtype_helper():
    got = jit_run(lambda a: (a + lax.full((2,), 2.0), a + lax.full_like(a, 1, np.int32)),
                  np.ones(2, np.float16))
    assert got[0].dtype == np.float16 and got[1].dtype == np.float16
    assert lax.dtype(1) == np.int32 and lax.dtype(1.0) == np.float32
    assert lax.dtype(np.zeros(2, np.int8)) == np.int8 and lax.dtype("float64") == np.float64


@pytest.mark.parametrize("call,msg", [
    (lambda a: lax.squeeze(a, (1,)), r"squeeze: dimensions \[1\] of f32\[2,3\] do not have "
                                     r"size 1"),
    (lambda a: lax.split(a, (1, 1), 1), r"split: sizes \[1, 1\] must be non-negative and sum "
                                        r"to 3"),
    (lambda a: lax.index_in_dim(a, 2), r"index_in_dim: index 2 is out of bounds"),
    (lambda a: lax.tile(a, (2,)), r"tile: reps \[2\] must have one entry per dim"),
])
def test_shape_errors(call, msg):
    with pytest.raises(xlc.TraceError, match=msg):
        xlc.jit(call)(np.zeros((2, 3), np.float32))


# ---- elementwise --------------------------------------------------------------------------------
def _ulps(got, want, dt):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    ok = (np.abs(want) > np.finfo(dt).tiny) & (np.abs(want) < np.finfo(dt).max)
    return np.abs(got[ok] - want[ok]) / np.spacing(np.abs(want[ok]).astype(dt)).astype(float)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_transcendentals_in_ulps(dt):
    big = 89.0 if dt is np.float32 else 710.0
    x = np.concatenate([np.linspace(-big, big, 801), np.geomspace(1e-30, 1, 40),
                        -np.geomspace(1e-30, 1, 40)]).astype(dt)
    u = np.linspace(-1, 1, 301).astype(dt)
    e = (x.astype(np.float64) / 60 * 150).astype(dt)  # 2**e spans the whole range
    got = jit_run(lambda a, b, c: (lax.sinh(a), lax.cosh(a), lax.exp2(c),
                                   lax.asin(b), lax.acos(b), lax.atan(a), lax.asinh(a),
                                   lax.acosh(xnp.abs(a) + 1), lax.atanh(b * 0.999)), x, u, e)
    x64, u64, e2 = x.astype(np.float64), u.astype(np.float64), e.astype(np.float64)
    with np.errstate(over="ignore"):
        wants = [np.sinh(x64), np.cosh(x64), np.exp2(e2), np.arcsin(u64), np.arccos(u64),
                 np.arctan(x64), np.arcsinh(x64), np.arccosh((np.abs(x) + dt(1)).astype(float)),
                 np.arctanh((u * dt(0.999)).astype(float))]
    for name, g, w, bound in zip(["sinh", "cosh", "exp2", "asin", "acos", "atan", "asinh",
                                  "acosh", "atanh"], got, wants, [4, 4, 2, 6, 6, 4, 4, 4, 4]):
        assert _ulps(g, w, dt).max() <= bound, name
    edges = jit_run(lambda a: (lax.sinh(a), lax.cosh(a), lax.exp2(a)),
                    np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, -1e4, 1e4], dt))
    np.testing.assert_array_equal(edges[0], np.array([np.inf, -np.inf, np.nan, 0, -0.0,
                                                      -np.inf, np.inf], dt))
    np.testing.assert_array_equal(edges[2], np.array([np.inf, 0, np.nan, 1, 1, 0, np.inf], dt))


def test_square_reciprocal_integer_pow_nextafter_match_jax():
    jl = _jl()
    x = np.linspace(-3, 3, 13).astype(np.float32)
    n = np.arange(-4, 5, dtype=np.int32)

    def f(L, a, i):
        return (L.square(a), L.reciprocal(a + 10), L.integer_pow(a, 3), L.integer_pow(a, -2),
                L.integer_pow(i, 5), L.integer_pow(a, 0), L.nextafter(a, np.float32(0)))

    _close(jit_run(lambda a, i: f(lax, a, i), x, n), f(jl, x, n), rtol=1e-6)
    with pytest.raises(xlc.TraceError, match="integer_pow: a negative exponent"):
        xlc.jit(lambda i: lax.integer_pow(i, -1))(n)


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.int32, np.uint32])
def test_bit_ops_match_jax(dt):
    jl = _jl()
    info = np.iinfo(dt)
    x = np.array([0, 1, 5, info.max, info.min, info.max // 3, 7, 100 % (info.max + 1)], dt)
    y = x[::-1].copy()
    s = np.array([0, 1, 3, 7, 8, 9, 31 % (8 * x.itemsize + 2), 2], dt)

    def f(L, a, b, k):
        return (L.clz(a), L.population_count(a), L.shift_right_arithmetic(a, k),
                L.shift_right_logical(a, k), L.mulhi(a, b))

    _close(jit_run(lambda a, b, k: f(lax, a, b, k), x, y, s), f(jl, x, y, s))


@pytest.mark.parametrize("dt", [np.int64, np.uint64])
def test_mulhi_64_bit_against_python_ints(dt):
    info = np.iinfo(dt)
    vals = [0, 1, 3, info.max, info.min, info.max // 7, 12345678901234567, info.min // 3 or 9]
    x = np.array(vals, dt)
    y = np.array(vals[::-1], dt)
    got = jit_run(lax.mulhi, x, y)
    want = [(int(a) * int(b)) >> 64 for a, b in zip(x, y)]
    want = np.array([w % (1 << 64) for w in want], np.uint64).view(dt)
    np.testing.assert_array_equal(got, want)


# ---- reductions, selection, sorting ------------------------------------------------------------
@pytest.mark.parametrize("dt", [np.float32, np.int32, np.bool_])
def test_reductions_match_numpy(dt):
    x = (R.standard_normal((3, 4, 5)) * 4).astype(dt)
    fs = [("reduce_sum", np.sum), ("reduce_prod", np.prod), ("reduce_max", np.max),
          ("reduce_min", np.min)]
    if dt is not np.float32:
        fs += [("reduce_and", np.logical_and.reduce if dt is np.bool_ else np.bitwise_and.reduce),
               ("reduce_or", np.logical_or.reduce if dt is np.bool_ else np.bitwise_or.reduce),
               ("reduce_xor", np.logical_xor.reduce if dt is np.bool_ else
                np.bitwise_xor.reduce)]
    if dt is np.bool_:
        fs = fs[2:]
    got = jit_run(lambda a: [getattr(lax, n)(a, (0, 2)) for n, _ in fs], x)
    for (name, ref), g in zip(fs, got):
        want = ref(ref(x, axis=2), axis=0) if "and" in name or "or" in name else \
            ref(x, axis=(0, 2))
        assert_close(g, np.asarray(want, dt), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("index_dtype", [np.int32, np.uint8])
def test_argmax_argmin_match_jax(index_dtype):
    jl = _jl()
    x = R.standard_normal((4, 6)).astype(np.float32)
    x[1, 2] = x[1, 4] = np.nan
    x[2, :] = 1.0
    xi = R.integers(-3, 3, (4, 6)).astype(np.int32)

    def f(L, a, b):
        return (L.argmax(a, 1, index_dtype), L.argmin(a, 0, index_dtype),
                L.argmax(b, 0, index_dtype), L.argmin(b, 1, index_dtype))

    _close(jit_run(lambda a, b: f(lax, a, b), x, xi), f(jl, x, xi))


def test_select_n_sort_key_val_batch_matmul_match_jax():
    jl = _jl()
    cases = [R.standard_normal((2, 5)).astype(np.float32) for _ in range(5)]
    which = R.integers(0, 5, (2, 5)).astype(np.int32)
    pred = which > 2
    keys = R.standard_normal((3, 6)).astype(np.float32)
    a = R.standard_normal((2, 3, 4)).astype(np.float32)
    b = R.standard_normal((2, 4, 5)).astype(np.float32)

    def f(L, w, p, k, c0, c1, c2, c3, c4, m1, m2):
        return (L.select_n(w, c0, c1, c2, c3, c4), L.select_n(p, c0, c1), L.select_n(p, c0),
                L.select_n(np.int32(3), c0, c1, c2, c3), L.sort_key_val(k, -k, 0),
                L.sort_key_val(k, k * 2), L.batch_matmul(m1, m2))

    args = (which, pred, keys, *cases, a, b)
    _close(jit_run(lambda *xs: f(lax, *xs), *args), f(jl, *args), rtol=1e-5, atol=1e-6)


# ---- scatter / gather --------------------------------------------------------------------------
def test_scatter_family_matches_jax():
    jl = _jl()
    x = R.standard_normal((5, 4)).astype(np.float32)
    idx = np.array([[0], [2], [2], [4], [7], [-1]], np.int32)
    upd = R.standard_normal((6, 4)).astype(np.float32)
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    jdn = jl.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))

    def f(L, d, a, i, u):
        out = [getattr(L, n)(a, i, u, d, mode=m) for n in ("scatter_add", "scatter_sub",
                                                         "scatter_mul", "scatter_min",
                                                         "scatter_max", "scatter")
               for m in (None, "clip")]
        out.append(L.scatter_apply(a, i, lambda v: v * 2 + 1, d, update_shape=(6, 4)))
        return out

    _close(jit_run(lambda a, i, u: f(lax, dn, a, i, u), x, idx, upd), f(jl, jdn, x, idx, upd),
           rtol=1e-5, atol=1e-6)


def test_scatter_with_batching_dims_and_windows_match_jax():
    jl = _jl()
    x = np.zeros((3, 6, 2), np.float32)
    idx = np.array([[[1], [4]], [[0], [5]], [[2], [2]]], np.int32)  # batch 3, 2 points each
    upd = R.standard_normal((3, 2, 2, 2)).astype(np.float32)  # window 2 along dim 1

    def f(L, a, i, u):
        d = L.ScatterDimensionNumbers(update_window_dims=(2, 3), inserted_window_dims=(),
                                      scatter_dims_to_operand_dims=(1,),
                                      operand_batching_dims=(0,),
                                      scatter_indices_batching_dims=(0,))
        return L.scatter_add(a, i, u[:, :, :1], d), L.scatter_add(a, i, u[:, :, :1], d,
                                                                  mode="clip")

    _close(jit_run(lambda a, i, u: f(lax, a, i, u), x, idx, upd), f(jl, x, idx, upd),
           rtol=1e-6)


def test_jax_style_gather_fill_and_clip():
    jl = _jl()
    x = R.standard_normal((5, 3)).astype(np.float32)
    xi = np.arange(15, dtype=np.int32).reshape(5, 3)
    idx = np.array([[0], [4], [5], [-1], [3]], np.int32)

    def f(L, a, b, i):
        d = L.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                     start_index_map=(0,))
        return (L.gather(a, i, d, (1, 3)), L.gather(a, i, d, (1, 3), mode="clip"),
                L.gather(a, i, d, (1, 3), mode="fill"), L.gather(b, i, d, (1, 2), mode="drop"),
                L.gather(a, i, d, (1, 3), mode="fill", fill_value=-7.0))

    _close(jit_run(lambda a, b, i: f(lax, a, b, i), x, xi, idx), f(jl, x, xi, idx))
    # the XLA-style signature still works
    got = jit_run(lambda a, i: lax.gather(a, i, (1,), (0,), (0,), 1, (1, 3)), x, idx[:2])
    assert_close(got, x[[0, 4]])


# ---- convolutions ------------------------------------------------------------------------------
def test_conv_helpers_match_jax():
    jl = _jl()
    specs = ("NCHW", "OIWH", "NHWC")
    assert tuple(lax.conv_dimension_numbers((1, 2, 3, 4), (5, 2, 3, 3), specs)) == \
        tuple(jl.conv_dimension_numbers((1, 2, 3, 4), (5, 2, 3, 3), specs))
    assert lax.conv_general_permutations(specs) == jl.conv_general_permutations(specs)
    dn = ("NCHW", "OIHW", "NCHW")
    for pads in ("SAME", "VALID", [(1, 1), (0, 2)]):
        assert lax.conv_general_shape_tuple((2, 3, 9, 8), (4, 3, 3, 2), (2, 1), pads, dn) == \
            tuple(int(v) for v in jl.conv_general_shape_tuple((2, 3, 9, 8), (4, 3, 3, 2),
                                                               (2, 1), pads, dn))
    nhwc = ("NHWC", "HWIO", "NHWC")
    for pads in ("SAME", "VALID"):
        assert lax.conv_transpose_shape_tuple((2, 9, 8, 3), (3, 2, 3, 4), (2, 1), pads, nhwc) == \
            tuple(int(v) for v in jl.conv_transpose_shape_tuple((2, 9, 8, 3), (3, 2, 3, 4),
                                                                 (2, 1), pads, nhwc))
    for p in ("SAME", "SAME_LOWER", "VALID"):
        assert lax.padtype_to_pads((9, 8), (3, 2), (2, 1), p) == \
            [tuple(v) for v in jl.padtype_to_pads((9, 8), (3, 2), (2, 1), p)]
    args = ((9, 8), (3, 2), (2, 1), [(1, 0), (0, 1)], (2, 1), (1, 2))
    assert lax.reduce_window_shape_tuple(*args) == jl.reduce_window_shape_tuple(*args)
    assert lax.conv_shape_tuple((2, 3, 9, 8), (4, 3, 3, 2), (2, 1), [(1, 1), (0, 0)]) == \
        tuple(int(v) for v in jl.conv_shape_tuple((2, 3, 9, 8), (4, 3, 3, 2), (2, 1),
                                                  [(1, 1), (0, 0)]))


def test_convolutions_match_jax():
    jl = _jl()
    x = R.standard_normal((2, 3, 7, 6)).astype(np.float32)          # NCHW
    w = R.standard_normal((4, 3, 2, 3)).astype(np.float32)          # OIWH: spatial W first
    xh = R.standard_normal((1, 5, 4, 3)).astype(np.float32)         # NHWC
    wt = R.standard_normal((3, 2, 3, 2)).astype(np.float32)         # HWIO
    wt2 = R.standard_normal((3, 2, 2, 3)).astype(np.float32)        # I/O swapped below

    def f(L, a, k, b, kt, kt2):
        dn = L.conv_dimension_numbers(a.shape, k.shape, ("NCHW", "OIWH", "NHWC"))
        return (L.conv_general_dilated(a, k, (1, 2), "SAME", dimension_numbers=dn),
                L.conv_general_dilated(a, k, (2, 1), [(1, 0), (0, 1)], (1, 2), (2, 1),
                                       ("NCHW", "OIWH", "NCHW")),
                L.conv_with_general_padding(a, k[:, :, :, :2], (1, 1), "VALID", (1, 1),
                                            (1, 1)),
                L.conv_transpose(b, kt, (2, 2), "SAME"),
                L.conv_transpose(b, kt2, (2, 1), "VALID", transpose_kernel=True),
                L.conv_transpose(b, kt, (1, 2), [(1, 0), (2, 1)], rhs_dilation=(2, 1)),
                L.conv_general_dilated_patches(a, (2, 3), (1, 2), "VALID"),
                L.conv_general_dilated_patches(b, (3, 2), (2, 1), "SAME",
                                               dimension_numbers=("NHWC", "OIHW", "NCHW")))

    _close(jit_run(lambda *v: f(lax, *v), x, w, xh, wt, wt2), f(jl, x, w, xh, wt, wt2),
           rtol=2e-5, atol=2e-5)


def test_local_convolution_and_ragged_dot_match_jax():
    jl = _jl()
    x = R.standard_normal((2, 3, 6, 5)).astype(np.float32)
    k = R.standard_normal((3, 6, 4, 18)).astype(np.float32)    # out W, out H, O, I = 3 * 6
    lhs = R.standard_normal((7, 3)).astype(np.float32)
    rhs = R.standard_normal((3, 3, 2)).astype(np.float32)
    sizes = np.array([2, 0, 3], np.int32)

    def f(L, a, b, m1, m2, g):
        return (L.conv_general_dilated_local(a, b, (2, 1), "SAME", (2, 3),
                                             dimension_numbers=("NCHW", "WHOI", "NHWC")),
                L.ragged_dot(m1, m2, g))

    _close(jit_run(lambda *v: f(lax, *v), x, k, lhs, rhs, sizes),
           f(jl, x, k, lhs, rhs, sizes), rtol=2e-5, atol=2e-5)


# ---- control flow and friends ------------------------------------------------------------------
def test_associative_scan_matches_jax():
    jl = _jl()
    import jax.numpy as jnp

    x = R.standard_normal((7, 3)).astype(np.float32)
    m = R.standard_normal((6, 2, 2)).astype(np.float32)

    def affine(p, q):  # (a1, b1) then (a2, b2): x -> a2 (a1 x + b1) + b2
        return p[0] * q[0], q[0] * p[1] + q[1]

    def f(L, np_, a, mats):
        return (L.associative_scan(np_.add, a), L.associative_scan(np_.add, a, reverse=True),
                L.associative_scan(np_.maximum, a, axis=1),
                L.associative_scan(affine, (a, a * 2), reverse=True, axis=0),
                L.associative_scan(np_.matmul, mats), L.associative_scan(np_.add, a[:1]))

    _close(jit_run(lambda a, b: f(lax, xnp, a, b), x, m), f(jl, jnp, x, m), rtol=1e-5,
           atol=1e-5)


def test_map_with_and_without_batches():
    x = R.standard_normal((7, 3)).astype(np.float32)

    def g(v):
        return {"s": v.sum(), "sq": v * v}

    for bs in (None, 3, 7, 10):
        got = jit_run(lambda a, bs=bs: lax.map(g, a, batch_size=bs), x)
        assert_close(got, {"s": x.sum(1), "sq": x * x}, rtol=1e-6, atol=1e-6)


def test_custom_root_and_linear_solve_forward():
    a = np.array([[4.0, 1.0], [1.0, 3.0]], np.float32)
    b = np.array([1.0, 2.0], np.float32)

    def newton(f, x0):
        return lax.fori_loop(0, 30, lambda i, x: x - f(x) / (3 * x * x), x0)

    def solve(mv, rhs):
        return xnp.linalg.solve(a, rhs)

    got = jit_run(lambda c, r: (lax.custom_root(lambda x: x ** 3 - c, c, newton, None),
                                lax.custom_linear_solve(lambda v: a @ v, r, solve)),
                  np.float32(8.0), b)
    assert_close(got, (np.float32(2.0), np.linalg.solve(a, b)), rtol=1e-5, atol=1e-6)


def test_barrier_sharding_tokens_and_other_annotations():
    def f(a):
        tok = lax.after_all(lax.create_token(), lax.create_token())
        del tok
        y = lax.with_sharding_constraint(a * 2, None)
        p, q = lax.optimization_barrier((y, a))
        z = lax.platform_dependent(p, default=lambda v: v + 1, cuda=lambda v: v - 1)
        c = lax.composite(lambda v, k=2: v * k, "my.scale")(q, k=3)
        return z + c + lax.stop_gradient(a)

    x = np.arange(4, dtype=np.float32)
    assert_close(jit_run(f, x), x * 2 + 1 + x * 3 + x)
    text = xlc.jit(f).lower(x).as_text()
    assert 'custom_call_target="Sharding"' in text and "sharding={replicated}" in text
    assert "opt-barrier(" in text and "after-all(" in text
    assert_close(jit_run(lambda a: lax.platform_dependent(a, cpu=lambda v: v * 5,
                                                          cuda=lambda v: v), x), x * 5)
    grad = xlc.grad(lambda a: (lax.stop_gradient(a) * a).sum())(x)
    assert_close(grad, x)


@pytest.mark.parametrize("algorithm", ["RNG_DEFAULT", "RNG_PHILOX", "RNG_THREE_FRY"])
@pytest.mark.parametrize("dt,shape", [(np.uint32, (3, 4)), (np.uint8, (5,)), (np.uint16, (2, 3))])
def test_rng_bit_generator_matches_jax(algorithm, dt, shape):
    jl = _jl()
    key = np.array([1, 2, 3, 4], np.uint32)
    want = jl.rng_bit_generator(key, shape, dtype=dt,
                                algorithm=getattr(jl.RandomAlgorithm, algorithm))
    got = jit_run(lambda k: lax.rng_bit_generator(k, shape, dt,
                                                  getattr(lax.RandomAlgorithm, algorithm)), key)
    _close(got, want)


def test_rng_uniform_on_the_evaluator():
    got = xlc.jit(lambda: lax.rng_uniform(np.float32(2), np.float32(3), (1000,)),
                  backend="interpreter")()
    assert got.dtype == np.float32 and got.shape == (1000,)
    assert got.min() >= 2 and got.max() < 3 and 2.4 < got.mean() < 2.6


def test_eager_calls_outside_jit():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_close(lax.tile(x, (1, 2)), np.tile(x, (1, 2)))
    assert_close(lax.argmax(x, 1, np.int32), np.array([2, 2], np.int32))
    assert_close(lax.erfc(np.float32(0.0)), np.float32(1.0))


def test_approx_top_k_is_exact_like_jax_on_cpu():
    jl = _jl()
    x = R.standard_normal((4, 7)).astype(np.float32)

    def f(L, a):
        return (L.approx_max_k(a, 3), L.approx_min_k(a, 2, reduction_dimension=0),
                L.approx_max_k(a, 1, 0, recall_target=0.5))

    _close(jit_run(lambda a: f(lax, a), x), f(jl, x))
    u = np.array([[3, 250, 7, 0]], np.uint8)
    vals, idx = jit_run(lambda a: lax.approx_min_k(a, 2), u)
    assert vals.tolist() == [[0, 3]] and idx.tolist() == [[3, 0]]
