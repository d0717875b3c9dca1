"""Per-opcode semantics of the numpy reference evaluator, against hand-computed numpy results
(edge cases of XLA's operation semantics included)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlc.errors import ArgumentError, EvaluationError, UnsupportedOpError
from xlc.hlo.evaluator import DISPATCH, Evaluator, evaluate, evaluate_computation, flatten_result
from xlc.hlo.evaluator_rng import philox4x32, threefry2x32
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module

I32_MIN = np.iinfo(np.int32).min
I32_MAX = np.iinfo(np.int32).max


def run(text: str, *args: object) -> object:
    """Parse an HLO module and evaluate it."""
    return evaluate(parse_module(text), [np.asarray(a) for a in args])


def unary(op: str, ty: str, x: np.ndarray, out_ty: str | None = None, attrs: str = "") -> object:
    n = x.size
    out_ty = out_ty or ty
    return run(f"""HloModule m
ENTRY e {{
  p = {ty}[{n}] parameter(0)
  ROOT r = {out_ty}[{n}] {op}(p){attrs}
}}""", x.reshape(n))


def binary(op: str, ty: str, a: np.ndarray, b: np.ndarray, out_ty: str | None = None,
           attrs: str = "") -> object:
    n = a.size
    out_ty = out_ty or ty
    return run(f"""HloModule m
ENTRY e {{
  a = {ty}[{n}] parameter(0)
  b = {ty}[{n}] parameter(1)
  ROOT r = {out_ty}[{n}] {op}(a, b){attrs}
}}""", a, b)


def test_dispatch_covers_every_opcode() -> None:
    assert set(DISPATCH) == set(Opcode)
    assert set(Evaluator().dispatch) == set(Opcode)


# ---- arguments ----------------------------------------------------------------------------------
ADD_MODULE = """HloModule m
ENTRY e {
  a = f32[4,8] parameter(0)
  b = f32[4,8] parameter(1)
  ROOT r = f32[4,8] add(a, b)
}"""


def test_argument_shape_error() -> None:
    x = np.zeros((4, 8), np.float32)
    with pytest.raises(ArgumentError, match=r"argument 1: expected f32\[4,8\], got "
                                            r"float32\[4,9\]"):
        run(ADD_MODULE, x, np.zeros((4, 9), np.float32))


def test_argument_dtype_and_count_errors() -> None:
    x = np.zeros((4, 8), np.float32)
    with pytest.raises(ArgumentError, match=r"argument 0: expected f32\[4,8\], got "
                                            r"float64\[4,8\]"):
        run(ADD_MODULE, x.astype(np.float64), x)
    with pytest.raises(ArgumentError, match="expected 2 arguments, got 1"):
        run(ADD_MODULE, x)


def test_evaluate_computation_and_flatten() -> None:
    m = parse_module("""HloModule m
ENTRY e {
  a = f32[2] parameter(0)
  n = f32[2] negate(a)
  t = (f32[2], f32[2]) tuple(a, n)
  ROOT r = ((f32[2], f32[2]), f32[2]) tuple(t, a)
}""")
    x = np.array([1, -2], np.float32)
    res = evaluate_computation(m.entry, [x])
    assert isinstance(res, tuple) and isinstance(res[0], tuple)
    leaves = flatten_result(res)
    assert [v.tolist() for v in leaves] == [[1, -2], [-1, 2], [1, -2]]


# ---- integer arithmetic edge cases --------------------------------------------------------------
def test_int_divide_remainder_edge_cases() -> None:
    a = np.array([7, -7, 7, -7, 5, -5, I32_MIN, I32_MIN, 0], np.int32)
    b = np.array([2, 2, -2, -2, 0, 0, -1, 0, 3], np.int32)
    q = binary("divide", "s32", a, b)
    r = binary("remainder", "s32", a, b)
    assert q.tolist() == [3, -3, -3, 3, -1, -1, I32_MIN, -1, 0]
    assert r.tolist() == [1, -1, 1, -1, 5, -5, 0, I32_MIN, 0]


def test_unsigned_divide_by_zero_is_all_ones() -> None:
    a = np.array([7, 200, 9], np.uint8)
    b = np.array([2, 0, 0], np.uint8)
    assert binary("divide", "u8", a, b).tolist() == [3, 255, 255]
    assert binary("remainder", "u8", a, b).tolist() == [1, 200, 9]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(-2**31, 2**31 - 1), st.integers(-2**31, 2**31 - 1)),
                min_size=1, max_size=8))
def test_int_divide_matches_c_semantics(pairs: list[tuple[int, int]]) -> None:
    a = np.array([p[0] for p in pairs], np.int32)
    b = np.array([p[1] for p in pairs], np.int32)
    q, r = binary("divide", "s32", a, b), binary("remainder", "s32", a, b)
    for x, y, qi, ri in zip(a.tolist(), b.tolist(), q.tolist(), r.tolist()):
        if y == 0:
            assert (qi, ri) == (-1, x)
        elif x == I32_MIN and y == -1:
            assert (qi, ri) == (I32_MIN, 0)
        else:
            tq = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
            assert (qi, ri) == (tq, x - tq * y)


def test_shifts_saturate_at_bit_width() -> None:
    a = np.array([1, 1, -8, -8, -8, 5], np.int32)
    b = np.array([3, 32, 1, 32, -1, 31], np.int32)
    assert binary("shift-left", "s32", a, b).tolist() == [8, 0, -16, 0, 0, I32_MIN]
    assert binary("shift-right-arithmetic", "s32", a, b).tolist() == [0, 0, -4, -1, -1, 0]
    assert binary("shift-right-logical", "s32", a, b).tolist() == [0, 0, 2147483644, 0, 0, 0]
    u = np.array([0x80, 0xFF, 3], np.uint8)
    s = np.array([7, 8, 1], np.uint8)
    assert binary("shift-right-logical", "u8", u, s).tolist() == [1, 0, 1]
    assert binary("shift-right-arithmetic", "u8", u, s).tolist() == [255, 255, 1]


def test_integer_power() -> None:
    a = np.array([2, 3, 1, 2, -1, 0, -2], np.int32)
    b = np.array([10, 0, -3, -1, -1, 0, 3], np.int32)
    assert binary("power", "s32", a, b).tolist() == [1024, 1, 1, 0, 0, 1, -8]


def test_integer_wraps() -> None:
    a = np.array([I32_MAX, I32_MIN], np.int32)
    assert binary("add", "s32", a, np.array([1, -1], np.int32)).tolist() == [I32_MIN, I32_MAX]
    assert unary("negate", "s32", a).tolist() == [-I32_MAX, I32_MIN]
    assert unary("abs", "s32", a).tolist() == [I32_MAX, I32_MIN]


# ---- float elementwise --------------------------------------------------------------------------
def test_max_min_propagate_nan() -> None:
    a = np.array([1, np.nan, 3, -0.0], np.float32)
    b = np.array([np.nan, 2, 1, 0.0], np.float32)
    mx, mn = binary("maximum", "f32", a, b), binary("minimum", "f32", a, b)
    assert np.isnan(mx[:2]).all() and np.isnan(mn[:2]).all()
    assert mx[2] == 3 and mn[2] == 1


def test_rounding_modes() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -0.3, 3.7], np.float32)
    afz = unary("round-nearest-afz", "f32", x)
    even = unary("round-nearest-even", "f32", x)
    np.testing.assert_array_equal(afz, [1, 2, 3, -1, -3, 0, -0.0, 4])
    np.testing.assert_array_equal(even, [0, 2, 2, -0.0, -2, 0, -0.0, 4])
    assert np.signbit(afz[6])
    np.testing.assert_array_equal(unary("floor", "f32", x)[:3], [0, 1, 2])
    np.testing.assert_array_equal(unary("ceil", "f32", x)[:3], [1, 2, 3])


def test_sign() -> None:
    x = np.array([-2.5, -0.0, 0.0, 3, np.nan, -np.inf], np.float32)
    s = unary("sign", "f32", x)
    np.testing.assert_array_equal(s[[0, 3, 5]], [-1, 1, -1])
    assert s[1] == 0 and np.signbit(s[1]) and s[2] == 0 and not np.signbit(s[2])
    assert np.isnan(s[4])
    assert unary("sign", "s32", np.array([-5, 0, 9], np.int32)).tolist() == [-1, 0, 1]


def test_transcendentals_against_numpy() -> None:
    x = np.linspace(-3, 3, 13).astype(np.float32)
    for op, fn in [("exponential", np.exp), ("tanh", np.tanh), ("sine", np.sin),
                   ("cosine", np.cos), ("exponential-minus-one", np.expm1),
                   ("logistic", lambda v: 1 / (1 + np.exp(-v.astype(np.float64))))]:
        np.testing.assert_allclose(unary(op, "f32", x), fn(x), rtol=1e-6, atol=1e-7)
    pos = np.array([0.5, 1, 4, 9], np.float32)
    np.testing.assert_allclose(unary("rsqrt", "f32", pos), 1 / np.sqrt(pos), rtol=1e-6)
    np.testing.assert_allclose(unary("log-plus-one", "f32", pos), np.log1p(pos), rtol=1e-6)
    np.testing.assert_allclose(unary("cbrt", "f32", np.array([-8, 27], np.float32)), [-2, 3])
    import math
    np.testing.assert_allclose(unary("erf", "f32", x), [math.erf(v) for v in x], rtol=1e-6,
                               atol=1e-7)
    np.testing.assert_allclose(binary("atan2", "f32", x, x[::-1].copy()),
                               np.arctan2(x, x[::-1]), rtol=1e-6)


def test_bf16_and_f16_arithmetic() -> None:
    bf = ml_dtypes.bfloat16
    a = np.array([1.0, 3.0, 256.0], bf)
    b = np.array([1 / 3, 1 / 3, 1.0], bf)
    r = binary("add", "bf16", a, b)
    assert r.dtype == np.dtype(bf)
    expect = (a.astype(np.float32) + b.astype(np.float32)).astype(bf)
    np.testing.assert_array_equal(r, expect)
    h = binary("multiply", "f16", np.array([300, 2], np.float16), np.array([300, 3], np.float16))
    assert h.dtype == np.float16 and np.isinf(h[0]) and h[1] == 6


def test_popcnt_clz_is_finite_not() -> None:
    x = np.array([0, 1, -1, I32_MIN, 0x00F0F0F0, 255], np.int32)
    assert unary("popcnt", "s32", x).tolist() == [0, 1, 32, 1, 12, 8]
    assert unary("count-leading-zeros", "s32", x).tolist() == [32, 31, 0, 0, 8, 24]
    u = np.array([0, 1, 128, 16], np.uint8)
    assert unary("count-leading-zeros", "u8", u).tolist() == [8, 7, 0, 3]
    f = np.array([1, np.inf, -np.inf, np.nan], np.float32)
    assert unary("is-finite", "f32", f, "pred").tolist() == [True, False, False, False]
    assert unary("not", "s32", np.array([0, -1, 5], np.int32)).tolist() == [-1, 0, -6]
    assert unary("not", "pred", np.array([True, False])).tolist() == [False, True]


def test_convert_saturates_and_nan_to_zero() -> None:
    x = np.array([1.9, -1.9, 3e9, -3e9, np.nan, np.inf, -np.inf, 2147483520.0], np.float32)
    r = unary("convert", "f32", x, "s32")
    assert r.tolist() == [1, -1, I32_MAX, I32_MIN, 0, I32_MAX, I32_MIN, 2147483520]
    assert unary("convert", "f32", np.array([-5, 300, 7.9], np.float32), "u8").tolist() == \
        [0, 255, 7]
    assert unary("convert", "pred", np.array([True, False]), "f32").tolist() == [1.0, 0.0]
    assert unary("convert", "s32", np.array([0, 3, -1], np.int32), "pred").tolist() == \
        [False, True, True]
    assert unary("convert", "s32", np.array([300, -1], np.int32), "u8").tolist() == [44, 255]
    bf = unary("convert", "f32", np.array([1.00390625, 3.0], np.float32), "bf16")
    assert bf.dtype == np.dtype(ml_dtypes.bfloat16) and bf.astype(np.float32).tolist() == [1, 3]


def test_compare_directions_and_types() -> None:
    a = np.array([1, 2, 3], np.int32)
    b = np.array([2, 2, 2], np.int32)
    for d, fn in [("EQ", np.equal), ("NE", np.not_equal), ("LT", np.less),
                  ("LE", np.less_equal), ("GT", np.greater), ("GE", np.greater_equal)]:
        r = binary("compare", "s32", a, b, "pred", f", direction={d}")
        assert r.tolist() == fn(a, b).tolist()
    s = np.array([-1, 1], np.int32)
    t = np.array([1, -1], np.int32)
    assert binary("compare", "s32", s, t, "pred", ", direction=LT, type=UNSIGNED").tolist() == \
        [False, True]
    nan = np.float32(np.nan)
    neg_nan = -np.abs(np.array([nan], np.float32))[0]
    vals = np.array([neg_nan, -np.inf, -1, -0.0, 0.0, 1, np.inf, nan], np.float32)
    lt = binary("compare", "f32", vals[:-1].copy(), vals[1:].copy(), "pred",
                ", direction=LT, type=TOTALORDER")
    assert lt.all()
    eq = binary("compare", "f32", vals, vals, "pred", ", direction=EQ, type=TOTALORDER")
    assert eq.all()
    feq = binary("compare", "f32", vals, vals, "pred", ", direction=EQ")
    assert feq.tolist() == [False, True, True, True, True, True, True, False]


def test_select_and_clamp() -> None:
    r = run("""HloModule m
ENTRY e {
  p = pred[4] parameter(0)
  x = f32[4] parameter(1)
  lo = f32[] constant(-1)
  hi = f32[] constant(2)
  c = f32[4] clamp(lo, x, hi)
  n = f32[4] negate(x)
  ROOT s = f32[4] select(p, c, n)
}""", np.array([True, False, True, True]), np.array([-5, 1, 1.5, 9], np.float32))
    assert r.tolist() == [-1, -1, 1.5, 2]


def test_reduce_precision_matches_bf16_rounding() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(64).astype(np.float32) * 1e3,
                        np.array([np.nan, np.inf, -np.inf, 1e-40, 3.4e38], np.float32)])
    r = unary("reduce-precision", "f32", x, attrs=", exponent_bits=8, mantissa_bits=7")
    expect = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(r[:-1], expect[:-1])
    assert np.isinf(r[-1])  # 3.4e38 rounds past bf16's max
    h = unary("reduce-precision", "f32", np.array([1e5, 1e-6, 1.0009765625], np.float32),
              attrs=", exponent_bits=5, mantissa_bits=10")
    np.testing.assert_array_equal(h, np.array([np.inf, 0, 1.0009765625], np.float32))


# ---- data movement ------------------------------------------------------------------------------
def test_broadcast_reshape_transpose() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    r = run("""HloModule m
ENTRY e {
  p = f32[2,3] parameter(0)
  b = f32[3,4,2] broadcast(p), dimensions={2,0}
  t = f32[2,3,4] transpose(b), dimensions={2,0,1}
  ROOT r = f32[6,4] reshape(t)
}""", x)
    b = np.broadcast_to(x.T[:, None, :], (3, 4, 2))
    np.testing.assert_array_equal(r, np.transpose(b, (2, 0, 1)).reshape(6, 4))


def test_slice_strides_and_reverse_and_iota() -> None:
    x = np.arange(40, dtype=np.int32).reshape(5, 8)
    r = run("""HloModule m
ENTRY e {
  p = s32[5,8] parameter(0)
  s = s32[2,3] slice(p), slice={[1:5:2], [0:8:3]}
  v = s32[2,3] reverse(s), dimensions={0,1}
  i = s32[2,3] iota(), iota_dimension=1
  ROOT a = s32[2,3] add(v, i)
}""", x)
    np.testing.assert_array_equal(r, x[1:5:2, 0:8:3][::-1, ::-1] + np.arange(3))


def test_dynamic_slice_and_update_clamp_start_indices() -> None:
    text = """HloModule m
ENTRY e {
  p = f32[6,5] parameter(0)
  i = s32[] parameter(1)
  j = s32[] parameter(2)
  u = f32[2,3] parameter(3)
  ds = f32[2,3] dynamic-slice(p, i, j), dynamic_slice_sizes={2,3}
  dus = f32[6,5] dynamic-update-slice(p, u, i, j)
  ROOT t = (f32[2,3], f32[6,5]) tuple(ds, dus)
}"""
    x = np.arange(30, dtype=np.float32).reshape(6, 5)
    u = -np.ones((2, 3), np.float32)
    for i, j, ci, cj in [(1, 1, 1, 1), (10, -3, 4, 0), (-2, 4, 0, 2)]:
        ds, dus = run(text, x, np.int32(i), np.int32(j), u)
        np.testing.assert_array_equal(ds, x[ci:ci + 2, cj:cj + 3])
        expect = x.copy()
        expect[ci:ci + 2, cj:cj + 3] = u
        np.testing.assert_array_equal(dus, expect)


def test_concatenate_and_pad_negative_interior() -> None:
    r = run("""HloModule m
ENTRY e {
  a = f32[2,2] parameter(0)
  b = f32[2,1] parameter(1)
  c = f32[2,3] concatenate(a, b), dimensions={1}
  z = f32[] constant(9)
  ROOT p = f32[3,5] pad(c, z), padding=1_0x-1_1_1
}""", np.array([[1, 2], [3, 4]], np.float32), np.array([[5], [6]], np.float32))
    # dim 0: low 1, high 0 -> 3 rows; dim1: interior 1 on 3 cols -> 5, low -1, high 1 -> 5
    expect = np.array([[9, 9, 9, 9, 9],
                       [9, 2, 9, 5, 9],
                       [9, 4, 9, 6, 9]], np.float32)
    assert r.shape == (3, 5)
    np.testing.assert_array_equal(r, expect)


def test_bitcast_honours_layouts() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    # x held with layout {0,1} (column-major): physical order is x.T.ravel().
    r = run("""HloModule m
ENTRY e {
  p = f32[2,3]{0,1} parameter(0)
  ROOT b = f32[6]{0} bitcast(p)
}""", x)
    np.testing.assert_array_equal(r, x.T.ravel())
    r2 = run("""HloModule m
ENTRY e {
  p = f32[2,3]{1,0} parameter(0)
  ROOT b = f32[3,2]{0,1} bitcast(p)
}""", x)
    np.testing.assert_array_equal(r2, x.reshape(2, 3).T)
    c = run("""HloModule m
ENTRY e {
  p = f32[2,3]{1,0} parameter(0)
  ROOT c = f32[2,3]{0,1} copy(p)
}""", x)
    np.testing.assert_array_equal(c, x)


def test_bitcast_convert_width_changes() -> None:
    x = np.array([1.0, -2.5], np.float32)
    r = run("""HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  b = u8[2,4] bitcast-convert(p)
  i = s32[2] bitcast-convert(p)
  back = f32[2] bitcast-convert(b)
  ROOT t = (u8[2,4], s32[2], f32[2]) tuple(b, i, back)
}""", x)
    np.testing.assert_array_equal(r[0], x.view(np.uint8).reshape(2, 4))
    np.testing.assert_array_equal(r[1], x.view(np.int32))
    np.testing.assert_array_equal(r[2], x)


# ---- reductions ---------------------------------------------------------------------------------
SUM = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def test_reduce_several_dims_fast_and_general_paths() -> None:
    x = np.random.default_rng(1).standard_normal((3, 4, 5)).astype(np.float32)
    r = run(f"""HloModule m
{SUM}
selmax {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = pred[] compare(a, b), direction=GT
  ROOT d = f32[] select(c, a, b)
}}
ENTRY e {{
  p = f32[3,4,5] parameter(0)
  z = f32[] constant(1)
  s = f32[4] reduce(p, z), dimensions={{0,2}}, to_apply=add
  g = f32[3,4] reduce(p, z), dimensions={{2}}, to_apply=selmax
  ROOT t = (f32[4], f32[3,4]) tuple(s, g)
}}""", x)
    np.testing.assert_allclose(r[0], x.sum(axis=(0, 2)) + 1, rtol=1e-5)
    np.testing.assert_array_equal(r[1], np.maximum(x.max(axis=2), 1))


def test_reduce_argmax_variadic() -> None:
    x = np.array([[1, 5, 5, 2], [7, 0, 7, 7], [-1, -3, -2, -1]], np.float32)
    r = run("""HloModule m
argmax {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(av, bv), direction=GT
  eq = pred[] compare(av, bv), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  take_a = pred[] or(gt, tie)
  v = f32[] select(take_a, av, bv)
  i = s32[] select(take_a, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  p = f32[3,4] parameter(0)
  io = s32[3,4] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[3], s32[3]) reduce(p, io, ninf, zero), dimensions={1}, to_apply=argmax
}""", x)
    np.testing.assert_array_equal(r[0], x.max(axis=1))
    np.testing.assert_array_equal(r[1], x.argmax(axis=1))
    assert r[1].dtype == np.int32


def test_reduce_empty_dimension_gives_init() -> None:
    r = run(f"""HloModule m
{SUM}
ENTRY e {{
  p = f32[3,0] parameter(0)
  z = f32[] constant(2.5)
  ROOT s = f32[3] reduce(p, z), dimensions={{1}}, to_apply=add
}}""", np.zeros((3, 0), np.float32))
    np.testing.assert_array_equal(r, [2.5, 2.5, 2.5])


def test_reduce_window_max_pool_and_cumsum() -> None:
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    r = run(f"""HloModule m
{SUM}
max {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}}
ENTRY e {{
  p = f32[4,5] parameter(0)
  ninf = f32[] constant(-inf)
  z = f32[] constant(0)
  mp = f32[2,3] reduce-window(p, ninf), window={{size=2x2 stride=2x2 pad=0_0x0_1}}, to_apply=max
  cs = f32[4,5] reduce-window(p, z), window={{size=1x5 pad=0_0x4_0}}, to_apply=add
  ROOT t = (f32[2,3], f32[4,5]) tuple(mp, cs)
}}""", x)
    padded = np.pad(x, ((0, 0), (0, 1)), constant_values=-np.inf)
    expect = padded.reshape(2, 2, 3, 2).max(axis=(1, 3))
    np.testing.assert_array_equal(r[0], expect)
    np.testing.assert_array_equal(r[1], np.cumsum(x, axis=1))


def test_reduce_window_dilations() -> None:
    x = np.arange(6, dtype=np.float32)
    r = run(f"""HloModule m
{SUM}
ENTRY e {{
  p = f32[6] parameter(0)
  z = f32[] constant(0)
  a = f32[4] reduce-window(p, z), window={{size=2 rhs_dilate=2}}, to_apply=add
  b = f32[10] reduce-window(p, z), window={{size=2 lhs_dilate=2}}, to_apply=add
  ROOT t = (f32[4], f32[10]) tuple(a, b)
}}""", x)
    np.testing.assert_array_equal(r[0], x[:4] + x[2:6])
    dil = np.zeros(11, np.float32)
    dil[::2] = x
    np.testing.assert_array_equal(r[1], dil[:-1] + dil[1:])


def test_select_and_scatter_max_pool_gradient() -> None:
    x = np.array([[1, 5, 2, 0], [3, 4, 8, 6]], np.float32)
    src = np.array([[10, 20]], np.float32)
    r = run(f"""HloModule m
{SUM}
ge {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT g = pred[] compare(a, b), direction=GE
}}
ENTRY e {{
  p = f32[2,4] parameter(0)
  s = f32[1,2] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[2,4] select-and-scatter(p, s, z), window={{size=2x2 stride=2x2}}, select=ge,
      scatter=add
}}""", x, src)
    np.testing.assert_array_equal(r, [[0, 10, 0, 0], [0, 0, 20, 0]])


# ---- dot / convolution --------------------------------------------------------------------------
def test_dot_batch_and_contracting_dims() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    b = rng.standard_normal((5, 3, 6)).astype(np.float32)
    r = run("""HloModule m
ENTRY e {
  a = f32[3,4,5] parameter(0)
  b = f32[5,3,6] parameter(1)
  ROOT d = f32[3,4,6] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={1}, lhs_contracting_dims={2},
      rhs_contracting_dims={0}
}""", a, b)
    np.testing.assert_allclose(r, np.einsum("bmk,kbn->bmn", a, b), rtol=1e-5, atol=1e-5)


def test_dot_mixed_types() -> None:
    a = np.array([[100, -100]], np.int8)
    b = np.array([[100], [-100]], np.int8)
    r = run("""HloModule m
ENTRY e {
  a = s8[1,2] parameter(0)
  b = s8[2,1] parameter(1)
  ROOT d = s32[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", a, b)
    assert r.tolist() == [[20000]]
    bf = ml_dtypes.bfloat16
    x = np.array([[1.5, 2.0]], bf)
    y = np.array([[3.0], [0.25]], bf)
    r2 = run("""HloModule m
ENTRY e {
  a = bf16[1,2] parameter(0)
  b = bf16[2,1] parameter(1)
  ROOT d = f32[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", x, y)
    assert r2.dtype == np.float32 and r2.tolist() == [[5.0]]


def _naive_conv(x: np.ndarray, w: np.ndarray, stride: int, pad: tuple[int, int],
                groups: int) -> np.ndarray:
    """NCW input, OIW kernel, feature groups."""
    n, c, width = x.shape
    o, ig, k = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), pad))
    ow = (xp.shape[2] - k) // stride + 1
    out = np.zeros((n, o, ow), np.float64)
    og = o // groups
    for b in range(n):
        for oc in range(o):
            g = oc // og
            for i in range(ow):
                patch = xp[b, g * ig:(g + 1) * ig, i * stride:i * stride + k]
                out[b, oc, i] = np.sum(patch * w[oc])
    return out


def test_convolution_1d_with_groups_stride_padding() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 7, 4)).astype(np.float32)  # b0f
    w = rng.standard_normal((3, 2, 6)).astype(np.float32)  # 0io, 2 groups of 2 in-features
    r = run("""HloModule m
ENTRY e {
  x = f32[2,7,4] parameter(0)
  w = f32[3,2,6] parameter(1)
  ROOT c = f32[2,4,6] convolution(x, w), window={size=3 stride=2 pad=1_1},
      dim_labels=b0f_0io->b0f, feature_group_count=2
}""", x, w)
    expect = _naive_conv(x.transpose(0, 2, 1), w.transpose(2, 1, 0), 2, (1, 1), 2)
    np.testing.assert_allclose(r, expect.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)


def test_convolution_2d_nchw_dilation() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 2, 2)).astype(np.float32)
    r = run("""HloModule m
ENTRY e {
  x = f32[1,2,5,5] parameter(0)
  w = f32[3,2,2,2] parameter(1)
  ROOT c = f32[1,3,3,3] convolution(x, w), window={size=2x2 rhs_dilate=2x2},
      dim_labels=bf01_oi01->bf01
}""", x, w)
    expect = np.zeros((1, 3, 3, 3))
    for o in range(3):
        for i in range(3):
            for j in range(3):
                expect[0, o, i, j] = np.sum(x[0, :, i:i + 3:2, j:j + 3:2] * w[o])
    np.testing.assert_allclose(r, expect, rtol=1e-5, atol=1e-5)


# ---- gather / scatter ---------------------------------------------------------------------------
def test_gather_rows_like_take() -> None:
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    idx = np.array([[2], [0], [7], [-1]], np.int32)
    r = run("""HloModule m
ENTRY e {
  x = f32[4,3] parameter(0)
  i = s32[4,1] parameter(1)
  ROOT g = f32[4,3] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0},
      index_vector_dim=1, slice_sizes={1,3}
}""", x, idx)
    np.testing.assert_array_equal(r, x[np.clip(idx[:, 0], 0, 3)])


def test_gather_2d_windows_with_clamping_and_offset_position() -> None:
    x = np.arange(30, dtype=np.int32).reshape(5, 6)
    idx = np.array([[0, 0], [4, 5], [1, 2]], np.int32)
    r = run("""HloModule m
ENTRY e {
  x = s32[5,6] parameter(0)
  i = s32[3,2] parameter(1)
  ROOT g = s32[2,3,3] gather(x, i), offset_dims={0,2}, collapsed_slice_dims={},
      start_index_map={0,1}, index_vector_dim=1, slice_sizes={2,3}
}""", x, idx)
    for b, (i, j) in enumerate(idx):
        i, j = min(max(i, 0), 3), min(max(j, 0), 3)
        np.testing.assert_array_equal(r[:, b, :], x[i:i + 2, j:j + 3])


def test_gather_with_batching_dims() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)  # batch 2
    idx = np.array([[1, 3], [2, 0]], np.int32)  # per batch, 2 indices into dim 2
    r = run("""HloModule m
ENTRY e {
  x = f32[2,3,4] parameter(0)
  i = s32[2,2] parameter(1)
  ROOT g = f32[2,2,3] gather(x, i), offset_dims={2}, collapsed_slice_dims={2},
      start_index_map={2}, operand_batching_dims={0}, start_indices_batching_dims={0},
      index_vector_dim=2, slice_sizes={1,3,1}
}""", x, idx)
    for b in range(2):
        for k in range(2):
            np.testing.assert_array_equal(r[b, k], x[b, :, idx[b, k]])


SCATTER_TEXT = """HloModule m
{combiner}
ENTRY e {{
  x = f32[5] parameter(0)
  i = s32[4,1] parameter(1)
  u = f32[4] parameter(2)
  ROOT s = f32[5] scatter(x, i, u), update_window_dims={{}}, inserted_window_dims={{0}},
      scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=f
}}"""


def test_scatter_add_assign_and_general_combiner_in_order() -> None:
    x = np.array([1, 1, 1, 1, 1], np.float32)
    idx = np.array([[1], [3], [1], [9]], np.int32)  # 9 is out of bounds: skipped
    u = np.array([10, 20, 30, 40], np.float32)
    add = run(SCATTER_TEXT.format(combiner=SUM.replace("add {", "f {")), x, idx, u)
    np.testing.assert_array_equal(add, [1, 41, 1, 21, 1])
    assign = run(SCATTER_TEXT.format(combiner="""f {
  a = f32[] parameter(0)
  ROOT b = f32[] parameter(1)
}"""), x, idx, u)
    np.testing.assert_array_equal(assign, [1, 30, 1, 20, 1])
    # f(old, new) = new - old, applied in index order: slot 1: 10-1=9, then 30-9=21.
    sub = run(SCATTER_TEXT.format(combiner="""f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] subtract(b, a)
}"""), x, idx, u)
    np.testing.assert_array_equal(sub, [1, 21, 1, 19, 1])


def test_scatter_window_rows() -> None:
    x = np.zeros((4, 3), np.float32)
    idx = np.array([2, 0, 2], np.int32)
    u = np.arange(9, dtype=np.float32).reshape(3, 3)
    r = run(f"""HloModule m
{SUM}
ENTRY e {{
  x = f32[4,3] parameter(0)
  i = s32[3] parameter(1)
  u = f32[3,3] parameter(2)
  ROOT s = f32[4,3] scatter(x, i, u), update_window_dims={{1}}, inserted_window_dims={{0}},
      scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=add
}}""", x, idx, u)
    expect = np.zeros((4, 3), np.float32)
    np.add.at(expect, idx, u)
    np.testing.assert_array_equal(r, expect)


# ---- sort / topk --------------------------------------------------------------------------------
def test_sort_multi_operand_custom_comparator_is_stable() -> None:
    keys = np.array([[3, 1, 2, 1, 3, 0, 2, 1, 5]], np.float32)
    vals = np.arange(9, dtype=np.int32)[None, :]
    r = run("""HloModule m
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  na = f32[] negate(a)
  nb = f32[] negate(b)
  ROOT lt = pred[] compare(na, nb), direction=LT
}
ENTRY e {
  k = f32[1,9] parameter(0)
  v = s32[1,9] parameter(1)
  ROOT s = (f32[1,9], s32[1,9]) sort(k, v), dimensions={1}, is_stable=true, to_apply=cmp
}""", keys, vals)
    order = sorted(range(9), key=lambda i: -keys[0, i])  # Python's sort is stable
    np.testing.assert_array_equal(r[0][0], keys[0, order])
    np.testing.assert_array_equal(r[1][0], order)


def test_sort_simple_comparator_and_total_order() -> None:
    x = np.array([[0.5, -0.0, np.nan, -1, 0.0, -np.inf], [3, 2, 1, 0, -1, -2]], np.float32)
    r = run("""HloModule m
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT, type=TOTALORDER
}
ENTRY e {
  k = f32[2,6] parameter(0)
  ROOT s = f32[2,6] sort(k), dimensions={1}, to_apply=cmp
}""", x)
    assert r[0, :5].tolist() == [-np.inf, -1, 0, 0, 0.5] and np.isnan(r[0, 5])
    assert np.signbit(r[0, 2]) and not np.signbit(r[0, 3])
    np.testing.assert_array_equal(r[1], np.sort(x[1]))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(-5, 5), min_size=1, max_size=40), st.sampled_from(["LT", "GT"]))
def test_general_comparator_sort_matches_stable_python_sort(xs: list[int], direction: str
                                                            ) -> None:
    x = np.array(xs, np.int32)
    n = len(xs)
    r = run(f"""HloModule m
cmp {{
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  two = s32[] constant(2)
  ha = s32[] divide(a, two)
  hb = s32[] divide(b, two)
  ROOT lt = pred[] compare(ha, hb), direction={direction}
}}
ENTRY e {{
  k = s32[{n}] parameter(0)
  i = s32[{n}] iota(), iota_dimension=0
  ROOT s = (s32[{n}], s32[{n}]) sort(k, i), dimensions={{0}}, is_stable=true, to_apply=cmp
}}""", x)
    sign = 1 if direction == "LT" else -1
    order = sorted(range(n), key=lambda i: sign * int(np.trunc(xs[i] / 2)))
    assert r[1].tolist() == order
    assert r[0].tolist() == [xs[i] for i in order]


def test_topk_ties_by_lower_index() -> None:
    x = np.array([[1, 3, 3, 2, np.nan, 3]], np.float32)
    r = run("""HloModule m
ENTRY e {
  p = f32[1,6] parameter(0)
  ROOT t = (f32[1,3], s32[1,3]) topk(p), k=3, largest=true
}""", x)
    assert np.isnan(r[0][0, 0]) and r[0][0, 1:].tolist() == [3, 3]
    assert r[1].tolist() == [[4, 1, 2]] and r[1].dtype == np.int32


# ---- control flow, calls, fusion ----------------------------------------------------------------
def test_while_loop() -> None:
    r = run("""HloModule m
cond {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  t = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  v = f32[3] get-tuple-element(t), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  v2 = f32[3] add(v, v)
  ROOT r = (s32[], f32[3]) tuple(i2, v2)
}
ENTRY e {
  x = f32[3] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[3]) tuple(z, x)
  w = (s32[], f32[3]) while(init), condition=cond, body=body
  ROOT v = f32[3] get-tuple-element(w), index=1
}""", np.array([1, 2, 3], np.float32))
    assert r.tolist() == [16, 32, 48]


COND_TEXT = """HloModule m
b0 {
  a = f32[2] parameter(0)
  ROOT n = f32[2] negate(a)
}
b1 {
  a = f32[2] parameter(0)
  ROOT e = f32[2] exponential(a)
}
b2 {
  a = f32[2] parameter(0)
  ROOT s = f32[2] add(a, a)
}
ENTRY e {
  i = s32[] parameter(0)
  x = f32[2] parameter(1)
  ROOT c = f32[2] conditional(i, x, x, x), branch_computations={b0, b1, b2}
}"""


def test_conditional_index_form_out_of_range_takes_last_branch() -> None:
    x = np.array([0, 1], np.float32)
    assert run(COND_TEXT, np.int32(0), x).tolist() == [0, -1]
    np.testing.assert_allclose(run(COND_TEXT, np.int32(1), x), np.exp(x))
    assert run(COND_TEXT, np.int32(2), x).tolist() == [0, 2]
    assert run(COND_TEXT, np.int32(7), x).tolist() == [0, 2]
    assert run(COND_TEXT, np.int32(-1), x).tolist() == [0, 2]


def test_conditional_pred_form() -> None:
    text = """HloModule m
t {
  a = f32[] parameter(0)
  ROOT n = f32[] negate(a)
}
f {
  a = s32[] parameter(0)
  ROOT c = f32[] convert(a)
}
ENTRY e {
  p = pred[] parameter(0)
  x = f32[] parameter(1)
  y = s32[] parameter(2)
  ROOT c = f32[] conditional(p, x, y), true_computation=t, false_computation=f
}"""
    assert float(run(text, np.bool_(True), np.float32(2), np.int32(5))) == -2
    assert float(run(text, np.bool_(False), np.float32(2), np.int32(5))) == 5


def test_call_map_fusion() -> None:
    r = run("""HloModule m
sq {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  m = f32[] multiply(a, a)
  ROOT s = f32[] add(m, b)
}
helper {
  x = f32[4] parameter(0)
  ROOT y = f32[4] map(x, x), dimensions={0}, to_apply=sq
}
fused {
  p0 = f32[4] parameter(0)
  p1 = f32[] parameter(1)
  b = f32[4] broadcast(p1), dimensions={}
  ROOT m = f32[4] multiply(p0, b)
}
ENTRY e {
  x = f32[4] parameter(0)
  c = f32[4] call(x), to_apply=helper
  h = f32[] constant(0.5)
  ROOT f = f32[4] fusion(c, h), kind=kLoop, calls=fused
}""", np.array([1, 2, 3, 4], np.float32))
    assert r.tolist() == [1, 3, 6, 10]


def test_tokens_collectives_ids_and_barriers() -> None:
    r = run("""HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[3] parameter(0)
  tok = token[] after-all()
  ar = f32[3] all-reduce(x), replica_groups={}, to_apply=add
  rid = u32[] replica-id()
  pid = u32[] partition-id()
  tp = (f32[3], u32[]) tuple(ar, rid)
  ob = (f32[3], u32[]) opt-barrier(tp)
  ar2 = f32[3] get-tuple-element(ob), index=0
  ROOT t = (f32[3], u32[], u32[], token[]) tuple(ar2, rid, pid, tok)
}""", np.array([1, 2, 3], np.float32))
    assert r[0].tolist() == [1, 2, 3] and int(r[1]) == 0 and int(r[2]) == 0
    assert r[3].size == 0


def test_rng_is_seeded_from_the_module_and_in_range() -> None:
    text = """HloModule m
ENTRY e {
  a = f32[] constant(2)
  b = f32[] constant(3)
  ROOT r = f32[1000] rng(a, b), distribution=rng_uniform
}"""
    r1, r2 = run(text), run(text)
    np.testing.assert_array_equal(r1, r2)
    assert r1.dtype == np.float32 and r1.min() >= 2 and r1.max() < 3


# ---- errors -------------------------------------------------------------------------------------
def test_elided_constant_error() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[3] parameter(0)
  constant.3 = f32[3] constant({...})
  ROOT a = f32[3] add(x, constant.3)
}"""
    with pytest.raises(EvaluationError, match=r"constant 'constant.3' is elided \(\{\.\.\.\}\) "
                                              r"in the HLO text and cannot be evaluated; dump "
                                              r"it with --xla_dump_large_constants"):
        run(text, np.zeros(3, np.float32))


def test_unknown_custom_call_and_rng_bit_generator_are_refused() -> None:
    with pytest.raises(UnsupportedOpError, match=r"custom-call 'cc': unknown "
                                                 r"custom_call_target 'my_kernel'"):
        run("""HloModule m
ENTRY e {
  x = f32[3] parameter(0)
  ROOT cc = f32[3] custom-call(x), custom_call_target="my_kernel"
}""", np.zeros(3, np.float32))
    with pytest.raises(UnsupportedOpError, match=r"rng-bit-generator 'g': rng-bit-generator: "
                                                 r"unknown algorithm 'rng_mystery'"):
        run("""HloModule m
ENTRY e {
  s = u64[2] parameter(0)
  ROOT g = (u64[2], u32[4]) rng-bit-generator(s), algorithm=rng_mystery
}""", np.zeros(2, np.uint64))


def test_custom_call_topk() -> None:
    x = np.array([[4, 1, 9, 9, 0]], np.float32)
    r = run("""HloModule m
gt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT g = pred[] compare(a, b), direction=GT
}
ENTRY e {
  x = f32[1,5] parameter(0)
  ROOT cc = (f32[1,2], s32[1,2]) custom-call(x), custom_call_target="TopK", called_computations={gt}
}""", x)
    assert r[0].tolist() == [[9, 9]] and r[1].tolist() == [[2, 3]]


# ---- rng-bit-generator --------------------------------------------------------------------------
@pytest.mark.parametrize("ctr,key,expect", [
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0)),
])
def test_threefry2x32_known_answers(ctr: tuple[int, int], key: tuple[int, int],
                                    expect: tuple[int, int]) -> None:
    y = threefry2x32(np.array([ctr[0]], np.uint32), np.array([ctr[1]], np.uint32), *key)
    assert (int(y[0][0]), int(y[1][0])) == expect


@pytest.mark.parametrize("ctr,key,expect", [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6,
                                                    0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox4x32_known_answers(ctr: tuple[int, ...], key: tuple[int, int],
                                  expect: tuple[int, ...]) -> None:
    y = philox4x32([np.array([c], np.uint32) for c in ctr], *key)
    assert tuple(int(v[0]) for v in y) == expect


RBG_TEXT = """HloModule m
ENTRY e {{
  s = u64[{n}] parameter(0)
  ROOT g = (u64[{n}], {ty}) rng-bit-generator(s), algorithm={algo}
}}"""


def test_rng_bit_generator_three_fry_layout_and_state() -> None:
    key, ctr = 0x0123456789ABCDEF, 40
    st = np.array([key, ctr], np.uint64)
    new, bits = run(RBG_TEXT.format(n=2, ty="u64[3]", algo="rng_three_fry"), st)
    assert new.tolist() == [key, ctr + 3]
    lo, hi = threefry2x32(np.arange(ctr, ctr + 3, dtype=np.uint32), np.zeros(3, np.uint32),
                          key & 0xFFFFFFFF, key >> 32)
    assert bits.tolist() == (lo.astype(np.uint64) | (hi.astype(np.uint64) << 32)).tolist()
    # 32-bit: each Threefry call gives two neighbours along the first even dim.
    new32, b32 = run(RBG_TEXT.format(n=2, ty="u32[3,4]", algo="rng_three_fry"), st)
    assert new32.tolist() == [key, ctr + 6]
    lo, hi = threefry2x32(np.arange(ctr, ctr + 6, dtype=np.uint32), np.zeros(6, np.uint32),
                          key & 0xFFFFFFFF, key >> 32)
    np.testing.assert_array_equal(b32[:, 0::2].ravel(), lo)
    np.testing.assert_array_equal(b32[:, 1::2].ravel(), hi)


def test_rng_bit_generator_philox_round_robin_and_state() -> None:
    key = 7
    st3 = np.array([key, 2**64 - 1, 5], np.uint64)  # the counter carries into the high word
    new, bits = run(RBG_TEXT.format(n=3, ty="u32[6]", algo="rng_philox"), st3)
    assert new.tolist() == [key, 1, 6]
    w0 = philox4x32([np.array([0xFFFFFFFF], np.uint32)] * 2
                    + [np.array([5], np.uint32), np.array([0], np.uint32)], key, 0)
    w1 = philox4x32([np.array([0], np.uint32)] * 2
                    + [np.array([6], np.uint32), np.array([0], np.uint32)], key, 0)
    assert bits.tolist() == [int(v[0]) for v in w0] + [int(v[0]) for v in w1[:2]]
    st2 = np.array([key, 9], np.uint64)  # 2-word state: counter = (state[1], state[0])
    new2, bits2 = run(RBG_TEXT.format(n=2, ty="u32[4]", algo="rng_default"), st2)
    assert new2.tolist() == [key, 10]
    w = philox4x32([np.array([9], np.uint32), np.array([0], np.uint32),
                    np.array([key], np.uint32), np.array([0], np.uint32)], key, 0)
    assert bits2.tolist() == [int(v[0]) for v in w]


# ---- more dimension-number cases ----------------------------------------------------------------
def test_convolution_batch_group_count() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3, 5)).astype(np.float32)  # b f 0: batch 4 = 2 groups of 2
    w = rng.standard_normal((6, 3, 2)).astype(np.float32)  # o i 0: 6 outputs = 2 groups of 3
    r = run("""HloModule m
ENTRY e {
  x = f32[4,3,5] parameter(0)
  w = f32[6,3,2] parameter(1)
  ROOT c = f32[2,6,4] convolution(x, w), window={size=2}, dim_labels=bf0_oi0->bf0,
      batch_group_count=2
}""", x, w)
    expect = np.zeros((2, 6, 4))
    for o in range(6):
        g = o // 3
        for b in range(2):
            for i in range(4):
                expect[b, o, i] = np.sum(x[g * 2 + b, :, i:i + 2] * w[o])
    np.testing.assert_allclose(r, expect, rtol=1e-5, atol=1e-5)


def test_scatter_with_batching_dims_and_two_operands() -> None:
    x = np.zeros((2, 4), np.float32)
    y = np.zeros((2, 4), np.int32)
    idx = np.array([[3, 1], [0, 0]], np.int32)  # per batch row: two target columns
    u = np.array([[1, 2], [3, 4]], np.float32)
    v = np.array([[5, 6], [7, 8]], np.int32)
    r = run("""HloModule m
comb {
  a = f32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = s32[] parameter(3)
  s = f32[] add(a, c)
  t = s32[] maximum(b, d)
  ROOT r = (f32[], s32[]) tuple(s, t)
}
ENTRY e {
  x = f32[2,4] parameter(0)
  y = s32[2,4] parameter(1)
  i = s32[2,2] parameter(2)
  u = f32[2,2] parameter(3)
  v = s32[2,2] parameter(4)
  ROOT s = (f32[2,4], s32[2,4]) scatter(x, y, i, u, v), update_window_dims={},
      inserted_window_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0},
      scatter_dims_to_operand_dims={1}, index_vector_dim=2, to_apply=comb
}""", x, y, idx, u, v)
    np.testing.assert_array_equal(r[0], [[0, 2, 0, 1], [7, 0, 0, 0]])
    np.testing.assert_array_equal(r[1], [[0, 6, 0, 5], [8, 0, 0, 0]])


def test_scalar_bit_ops_keep_scalar_shapes_and_python_scalar_arguments() -> None:
    m = parse_module("""HloModule m
ENTRY e {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  s = s32[] shift-left(a, b)
  f = f32[] bitcast-convert(s)
  g = s32[] bitcast(f)
  c = s32[] popcnt(a)
  ROOT t = (s32[], f32[], s32[], s32[]) tuple(s, f, g, c)
}""")
    r = evaluate(m, [3, 2])  # Python ints take the parameters' dtypes
    assert [v.shape for v in r] == [()] * 4
    assert int(r[0]) == 12 and r[1] == np.int32(12).view(np.float32) and int(r[3]) == 2


def test_evaluate_instruction_for_constant_folding() -> None:
    m = parse_module("""HloModule m
ENTRY e {
  a = s32[3] parameter(0)
  ROOT r = s32[3] remainder(a, a)
}""")
    inst = m.entry.root
    out = Evaluator(m).evaluate_instruction(inst, [np.array([5, 0, -3], np.int32)] * 2)
    assert out.tolist() == [0, 0, 0]


def test_rank0_results_are_arrays_not_numpy_scalars() -> None:
    m = parse_module("""HloModule m
ENTRY e {
  a = s32[] parameter(0)
  p = pred[] parameter(1)
  f = f32[] parameter(2)
  n = s32[] not(a)
  q = pred[] not(p)
  x = f32[] exponential(f)
  c = pred[] compare(f, f), direction=EQ
  s = s32[] sign(a)
  ROOT t = (s32[], pred[], f32[], pred[], s32[]) tuple(n, q, x, c, s)
}""")
    r = evaluate(m, [np.int32(5), np.bool_(True), np.float32(0)])
    assert all(type(v) is np.ndarray and v.shape == () for v in r)
    assert [v.item() for v in r] == [-6, False, 1.0, True, 1]


def test_ill_typed_module_is_reported_with_both_shapes() -> None:
    with pytest.raises(EvaluationError, match=r"'n' \(negate\) evaluated to float32\[3\] but its "
                                              r"shape is f32\[4\]"):
        run("""HloModule m
ENTRY e {
  a = f32[3] parameter(0)
  ROOT n = f32[4] negate(a)
}""", np.zeros(3, np.float32))


def test_complex_ops() -> None:
    r = run("""HloModule m
ENTRY e {
  a = f32[2] parameter(0)
  b = f32[2] parameter(1)
  c = c64[2] complex(a, b)
  m = c64[2] multiply(c, c)
  ab = f32[2] abs(c)
  re = f32[2] real(m)
  im = f32[2] imag(m)
  ROOT t = (f32[2], f32[2], f32[2]) tuple(ab, re, im)
}""", np.array([3, 1], np.float32), np.array([4, -1], np.float32))
    z = np.array([3 + 4j, 1 - 1j], np.complex64)
    np.testing.assert_allclose(r[0], np.abs(z), rtol=1e-6)
    np.testing.assert_allclose(r[1], (z * z).real, rtol=1e-6)
    np.testing.assert_allclose(r[2], (z * z).imag, rtol=1e-6)
    assert r[0].dtype == np.float32
