"""Property tests (hypothesis) of the `xlc.numpy` functions the other files test on fixed inputs:
each over random shapes and dtypes against numpy (computed in the dtype xlc promotes to)."""
from __future__ import annotations

import string

import numpy as np
import pytest
import xlc.numpy as xnp
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.frontend.helpers import assert_close, jit_run
from xlc.frontend import dtypes

SETTINGS = settings(max_examples=20, deadline=None)
DTYPES = [np.float32, np.float64, np.int32, np.int8, np.uint8, np.int64, np.bool_]
NUMERIC = [d for d in DTYPES if d is not np.bool_]


def elements(dtype):
    kind = np.dtype(dtype).kind
    if kind == "f":
        return st.floats(-8, 8, width=np.finfo(dtype).bits, allow_nan=False)
    if kind == "b":
        return st.booleans()
    return st.integers(0 if kind == "u" else -20, 20)


def arrays(dtypes_=DTYPES, min_dims=0, max_dims=3, min_side=1, max_side=4):
    return st.sampled_from(dtypes_).flatmap(lambda dt: hnp.arrays(
        dt, hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                             max_side=max_side), elements=elements(dt)))


def promoted(*xs: np.ndarray) -> np.dtype:
    """The dtype xlc (JAX's lattice, 64-bit kept) gives an op on these strong arrays."""
    return xnp.result_type(*xs)


# ---- elementwise --------------------------------------------------------------------------------
@pytest.mark.parametrize("name, ref", [("abs", np.abs), ("sign", np.sign),
                                       ("negative", np.negative), ("square", np.square)])
@SETTINGS
@given(x=arrays(NUMERIC))
def test_unary_on_every_numeric_dtype(name, ref, x):
    want = ref(x)
    if x.dtype == np.uint8 and name == "negative":
        want = (-x.astype(np.int64)).astype(np.uint8)  # wraps, as numpy does silently
    assert_close(jit_run(getattr(xnp, name), x), want.astype(x.dtype))


@st.composite
def mixed_pair(draw, dtypes_=NUMERIC):
    """Two arrays of independently drawn dtypes and mutually broadcastable shapes."""
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4))
    a, b = (draw(st.sampled_from(dtypes_)) for _ in range(2))
    return (draw(hnp.arrays(a, shapes.input_shapes[0], elements=elements(a))),
            draw(hnp.arrays(b, shapes.input_shapes[1], elements=elements(b))))


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "maximum", "minimum", "less",
                                  "equal", "greater_equal"])
@SETTINGS
@given(xy=mixed_pair())
def test_binary_promotes_across_dtypes(name, xy):
    x, y = xy
    rt = promoted(x, y)
    assume(rt.kind != "f" or x.dtype.kind == "f" or y.dtype.kind == "f")  # u64+s64 -> f32
    got = jit_run(getattr(xnp, name), x, y)
    with np.errstate(over="ignore"):
        want = getattr(np, name)(x.astype(rt), y.astype(rt))
    assert_close(got, want)


def test_promotion_matches_jax_for_every_strong_pair():
    jnp = pytest.importorskip("jax.numpy")
    import jax

    types = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
             np.float16, np.float32, np.float64]
    with jax.enable_x64(True):
        for a in types:
            for b in types:
                want = jnp.promote_types(a, b)
                got = dtypes.result_type((dtypes.to_ptype(a), False),
                                         (dtypes.to_ptype(b), False))[0].dtype
                assert got == want, (a, b, got, want)


@st.composite
def where_args(draw):
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=4))
    dt = draw(st.sampled_from(DTYPES))
    c = draw(hnp.arrays(np.bool_, shapes.input_shapes[0]))
    x = draw(hnp.arrays(dt, shapes.input_shapes[1], elements=elements(dt)))
    y = draw(hnp.arrays(dt, shapes.input_shapes[2], elements=elements(dt)))
    return c, x, y


@SETTINGS
@given(args=where_args())
def test_where_broadcasts_three_ways(args):
    c, x, y = args
    assert_close(jit_run(xnp.where, c, x, y), np.where(c, x, y))


@SETTINGS
@given(x=arrays(NUMERIC), lo=st.integers(-5, 2), width=st.integers(0, 6),
       array_bounds=st.booleans())
def test_clip(x, lo, width, array_bounds):
    hi = lo + width
    if x.dtype.kind == "u":
        lo, hi = abs(lo), abs(lo) + width
    if array_bounds:  # bounds as arrays of x's dtype, broadcast against x
        lo_v = np.full(x.shape[-1:] if x.ndim else (), lo, x.dtype)
        hi_v = np.full((), hi, x.dtype)
        got = jit_run(lambda a, l, h: xnp.clip(a, l, h), x, lo_v, hi_v)
        want = np.clip(x, lo_v, hi_v)
    else:  # Python scalars are weak: the result keeps x's dtype
        got = jit_run(lambda a: xnp.clip(a, lo, hi), x)
        want = np.clip(x, lo, hi).astype(x.dtype)
    assert_close(got, want)


# ---- shapes ------------------------------------------------------------------------------------
@SETTINGS
@given(x=arrays(min_dims=1), data=st.data())
def test_swapaxes_expand_dims_squeeze(x, data):
    a1 = data.draw(st.integers(-x.ndim, x.ndim - 1))
    a2 = data.draw(st.integers(-x.ndim, x.ndim - 1))
    new_axis = data.draw(st.integers(-x.ndim - 1, x.ndim))
    unit = tuple(i for i, n in enumerate(x.shape) if n == 1)
    squeeze_axes = data.draw(st.lists(st.sampled_from(unit), unique=True).map(tuple)
                             if unit else st.just(()))
    got = jit_run(lambda a: (xnp.swapaxes(a, a1, a2), xnp.expand_dims(a, new_axis),
                             xnp.squeeze(a), xnp.squeeze(a, squeeze_axes)), x)
    want = (np.swapaxes(x, a1, a2), np.expand_dims(x, new_axis), np.squeeze(x),
            np.squeeze(x, squeeze_axes))
    assert_close(got, want)


@SETTINGS
@given(x=arrays(max_dims=2), data=st.data())
def test_broadcast_to(x, data):
    lead = data.draw(st.lists(st.integers(1, 3), max_size=2))
    tail = [data.draw(st.sampled_from([1, 3])) if n == 1 else n for n in x.shape]
    shape = tuple(lead + tail)
    assert_close(jit_run(lambda a: xnp.broadcast_to(a, shape), x), np.broadcast_to(x, shape))


@st.composite
def same_rank_arrays(draw, vary_axis=True):
    """2-3 arrays of one rank >= 1, equal dims except possibly along `axis`, mixed dtypes."""
    base = list(draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3)))
    axis = draw(st.integers(-len(base), len(base) - 1))
    out = []
    for _ in range(draw(st.integers(2, 3))):
        shape = list(base)
        if vary_axis:
            shape[axis] = draw(st.integers(0, 3))
        dt = draw(st.sampled_from(DTYPES))
        out.append(draw(hnp.arrays(dt, tuple(shape), elements=elements(dt))))
    return out, axis


@SETTINGS
@given(case=same_rank_arrays())
def test_concatenate(case):
    xs, axis = case
    rt = promoted(*xs)
    assume(rt.kind != "f" or any(x.dtype.kind == "f" for x in xs))
    got = jit_run(lambda *a: xnp.concatenate(a, axis=axis), *xs)
    assert_close(got, np.concatenate([x.astype(rt) for x in xs], axis=axis))


@SETTINGS
@given(case=same_rank_arrays(vary_axis=False), data=st.data())
def test_stack(case, data):
    xs, _ = case
    rt = promoted(*xs)
    assume(rt.kind != "f" or any(x.dtype.kind == "f" for x in xs))
    axis = data.draw(st.integers(-xs[0].ndim - 1, xs[0].ndim))
    got = jit_run(lambda *a: xnp.stack(a, axis=axis), *xs)
    assert_close(got, np.stack([x.astype(rt) for x in xs], axis=axis))


@SETTINGS
@given(x=arrays(NUMERIC, min_dims=1), data=st.data())
def test_pad_constant(x, data):
    widths = tuple((data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2)))
                   for _ in range(x.ndim))
    value = data.draw(st.integers(0, 5))
    got = jit_run(lambda a: xnp.pad(a, widths, constant_values=value), x)
    assert_close(got, np.pad(x, widths, constant_values=value))


@SETTINGS
@given(x=arrays(min_dims=1), data=st.data())
def test_take(x, data):
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)))
    n = x.size if axis is None else x.shape[axis]
    idx = np.array(data.draw(st.lists(st.integers(-n, n - 1), min_size=0, max_size=4)),
                   np.int32).reshape(data.draw(st.sampled_from([(-1,), (1, -1)])))
    got = jit_run(lambda a, i: xnp.take(a, i, axis=axis), x, idx)
    assert_close(got, np.take(x, idx, axis=axis))


@SETTINGS
@given(x=arrays(), to=st.sampled_from(DTYPES + [np.float16, np.uint32]))
def test_astype(x, to):
    if np.dtype(to).kind in "iu" and x.dtype.kind == "f":
        x = np.trunc(x)  # float -> int of in-range values (numpy leaves out-of-range undefined)
        if np.dtype(to).kind == "u":
            x = np.abs(x)
    want = x.astype(to)
    got = jit_run(lambda a: a.astype(to), x)
    assert_close(got, want, rtol=1e-3 if to is np.float16 else None)


# ---- creation -----------------------------------------------------------------------------------
@SETTINGS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
       dt=st.sampled_from(DTYPES), fill=st.integers(0, 9))
def test_zeros_ones_full(shape, dt, fill):
    got = jit_run(lambda: (xnp.zeros(shape, dt), xnp.ones(shape, dt), xnp.full(shape, fill, dt),
                           xnp.full(shape, fill)))
    want = (np.zeros(shape, dt), np.ones(shape, dt), np.full(shape, fill, dt),
            np.full(shape, fill, np.int32))
    assert_close(got, want)


@SETTINGS
@given(start=st.integers(-5, 5), length=st.integers(0, 6), step=st.sampled_from([1, 2, -1, 3]),
       dt=st.sampled_from([None, np.int32, np.float32, np.int64, np.float64]))
def test_arange(start, length, step, dt):
    stop = start + length * step
    got = jit_run(lambda: (xnp.arange(start, stop, step, dtype=dt), xnp.arange(length)))
    want = (np.arange(start, stop, step, dtype=dt or np.int32),
            np.arange(length, dtype=np.int32))
    assert_close(got, want)


# ---- dot and einsum ----------------------------------------------------------------------------
@SETTINGS
@given(ranks=st.tuples(st.integers(0, 3), st.integers(0, 3)),
       dt=st.sampled_from([np.float32, np.float64, np.int32]), data=st.data())
def test_dot(ranks, dt, data):
    ra, rb = ranks  # rank 0 on either side: dot is a multiply
    k = data.draw(st.integers(1, 4))
    sa = tuple(data.draw(st.integers(1, 3)) for _ in range(ra - 1)) + ((k,) if ra else ())
    if rb >= 2:
        sb = tuple(data.draw(st.integers(1, 3)) for _ in range(rb - 2)) + (k,) + (
            data.draw(st.integers(1, 3)),)
    else:
        sb = (k,) if rb == 1 else ()
    a = data.draw(hnp.arrays(dt, sa, elements=elements(dt)))
    b = data.draw(hnp.arrays(dt, sb, elements=elements(dt)))
    got = jit_run(xnp.dot, a, b)
    assert_close(got, np.asarray(np.dot(a, b), dt), rtol=1e-5, atol=1e-4)


@st.composite
def einsum_case(draw):
    """A random two-operand einsum without repeated indices within one operand: contractions,
    batch dims, outer products, sums over a single operand's dims, transposed outputs."""
    letters = draw(st.lists(st.sampled_from(string.ascii_lowercase[:7]), min_size=1,
                            max_size=5, unique=True))
    sizes = {c: draw(st.integers(1, 3)) for c in letters}
    a = draw(st.lists(st.sampled_from(letters), max_size=3, unique=True))
    b = draw(st.lists(st.sampled_from(letters), max_size=3, unique=True))
    used = sorted(set(a) | set(b))
    out = draw(st.permutations(used).flatmap(
        lambda p: st.integers(0, len(p)).map(lambda n: p[:n])))
    explicit = draw(st.booleans())
    spec = f"{''.join(a)},{''.join(b)}" + (f"->{''.join(out)}" if explicit else "")
    dt = draw(st.sampled_from([np.float32, np.int32]))
    xa = draw(hnp.arrays(dt, tuple(sizes[c] for c in a), elements=elements(dt)))
    xb = draw(hnp.arrays(dt, tuple(sizes[c] for c in b), elements=elements(dt)))
    return spec, xa, xb


@SETTINGS
@given(case=einsum_case())
def test_einsum_two_operands(case):
    spec, a, b = case
    got = jit_run(lambda x, y: xnp.einsum(spec, x, y), a, b)
    assert_close(got, np.asarray(np.einsum(spec, a, b), a.dtype), rtol=1e-5, atol=1e-4)


# ---- indexing and .at[] on every dtype -----------------------------------------------------------
@st.composite
def indexed(draw):
    x = draw(arrays(min_dims=1, max_dims=3, min_side=1))
    parts = []
    length = draw(st.integers(1, 3))  # index arrays must broadcast together
    for n in x.shape:
        kind = draw(st.sampled_from(["int", "slice", "array"]))
        if kind == "int":
            parts.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            parts.append(slice(draw(st.one_of(st.none(), st.integers(-n, n))),
                               draw(st.one_of(st.none(), st.integers(-n, n)))))
        else:
            parts.append(np.array(draw(st.lists(st.integers(-n, n - 1), min_size=length,
                                                max_size=length)), np.int32))
    return x, tuple(parts[:draw(st.integers(1, len(parts)))])


@SETTINGS
@given(case=indexed())
def test_integer_array_and_basic_indexing_every_dtype(case):
    x, idx = case
    assert_close(jit_run(lambda a: a[idx], x), x[idx])


@SETTINGS
@given(case=indexed(), mode=st.sampled_from(["set", "add"]))
def test_at_set_add_every_dtype(case, mode):
    x, idx = case
    if x.dtype == np.bool_ and mode == "add":
        mode = "set"
    v = x.dtype.type(1)
    got = jit_run(lambda a: getattr(a.at[idx], mode)(v), x)
    want = x.copy()
    if mode == "set":
        want[idx] = v
    else:
        np.add.at(want, idx, v)
    assert_close(got, want)
