"""Property tests (hypothesis) of `xlc.lax` and `xlc.nn` over random shapes, dimension numbers
and dtypes, against numpy formulations of XLA's semantics."""
from __future__ import annotations

import itertools

import numpy as np
import xlc.lax as lax
import xlc.nn as nn
import xlc.numpy as xnp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.frontend.helpers import assert_close, jit_run
from xlc.hlo.opcodes import Opcode

SETTINGS = settings(max_examples=20, deadline=None)
FLOAT_INT = [np.float32, np.float64, np.int32]


def elements(dtype):
    if np.dtype(dtype).kind == "f":
        return st.floats(-4, 4, width=np.finfo(dtype).bits, allow_nan=False)
    return st.integers(-9, 9)


@st.composite
def dot_general_case(draw):
    """Operands with random batch / contracting / free dims in random positions."""
    dt = draw(st.sampled_from(FLOAT_INT))
    nb, nc = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    nfl, nfr = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    size = st.integers(1, 3)
    batch = [draw(size) for _ in range(nb)]
    contract = [draw(size) for _ in range(nc)]
    lhs_roles = ["b"] * nb + ["c"] * nc + ["f"] * nfl
    rhs_roles = ["b"] * nb + ["c"] * nc + ["f"] * nfr
    lhs_perm = draw(st.permutations(range(len(lhs_roles))))
    rhs_perm = draw(st.permutations(range(len(rhs_roles))))
    lf = [draw(size) for _ in range(nfl)]
    rf = [draw(size) for _ in range(nfr)]

    def layout(roles, perm, free):
        sizes = batch + contract + free
        dims = [sizes[p] for p in perm]
        where = {p: i for i, p in enumerate(perm)}  # role index -> operand dim
        b = [where[i] for i in range(nb)]
        c = [where[nb + i] for i in range(nc)]
        return dims, b, c

    ldims, lb, lc = layout(lhs_roles, lhs_perm, lf)
    rdims, rb, rc = layout(rhs_roles, rhs_perm, rf)
    a = draw(hnp.arrays(dt, tuple(ldims), elements=elements(dt)))
    b = draw(hnp.arrays(dt, tuple(rdims), elements=elements(dt)))
    return a, b, ((lc, rc), (lb, rb))


def np_dot_general(a, b, dn):
    (lc, rc), (lb, rb) = dn
    letters = iter("abcdefghijklmnop")
    la = [""] * a.ndim
    ra = [""] * b.ndim
    for i, j in zip(lb, rb):
        la[i] = ra[j] = next(letters)
    for i, j in zip(lc, rc):
        la[i] = ra[j] = next(letters)
    for v in (la, ra):
        for i in range(len(v)):
            v[i] = v[i] or next(letters)
    out = ([la[i] for i in lb] + [la[i] for i in range(a.ndim) if i not in lb + lc]
           + [ra[i] for i in range(b.ndim) if i not in rb + rc])
    return np.einsum(f"{''.join(la)},{''.join(ra)}->{''.join(out)}", a, b).astype(a.dtype)


@SETTINGS
@given(case=dot_general_case())
def test_dot_general_dimension_numbers(case):
    a, b, dn = case
    got = jit_run(lambda x, y: lax.dot_general(x, y, dn), a, b)
    assert_close(got, np_dot_general(a, b, dn), rtol=1e-5, atol=1e-4)


@SETTINGS
@given(x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=2, max_side=3),
                    elements=st.floats(-4, 4, width=32)), data=st.data())
def test_broadcast_in_dim(x, data):
    out_rank = data.draw(st.integers(max(x.ndim, 1), x.ndim + 2))
    bdims = sorted(data.draw(st.lists(st.integers(0, out_rank - 1), min_size=x.ndim,
                                      max_size=x.ndim, unique=True)))
    shape = [data.draw(st.integers(1, 3)) for _ in range(out_rank)]
    for i, d in enumerate(bdims):  # operand dims keep their size (or are 1 and broadcast)
        if x.shape[i] != 1:
            shape[d] = x.shape[i]
    got = jit_run(lambda a: lax.broadcast_in_dim(a, tuple(shape), tuple(bdims)), x)
    expanded = x.reshape([x.shape[bdims.index(d)] if d in bdims else 1 for d in range(out_rank)])
    assert_close(got, np.broadcast_to(expanded, shape))


@SETTINGS
@given(x=st.sampled_from(FLOAT_INT).flatmap(lambda dt: hnp.arrays(
    dt, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), elements=elements(dt))),
    data=st.data())
def test_reduce_with_opcode_and_python_reducers(x, data):
    dims = tuple(data.draw(st.lists(st.integers(0, x.ndim - 1), unique=True)))
    init = x.dtype.type(0)
    low = x.dtype.type(-100)
    got = jit_run(lambda a: (lax.reduce(a, init, Opcode.ADD, dims),
                             lax.reduce(a, low, lambda s, v: xnp.maximum(s, v), dims)), x)
    want = (x.sum(axis=dims).astype(x.dtype), np.maximum(x.max(axis=dims, initial=-100), low)
            if x.size else np.full([n for i, n in enumerate(x.shape) if i not in dims], low))
    assert_close(got, want, rtol=1e-5, atol=1e-5)


def _clamped(starts, sizes, shape):
    """jax.lax's starts: a negative start counts from the end, then XLA clamps into range."""
    return [int(min(max(s + n if s < 0 else s, 0), n - k))
            for s, k, n in zip(starts, sizes, shape)]


@SETTINGS
@given(x=hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                    elements=st.integers(-9, 9)), data=st.data())
def test_dynamic_slice_and_update_clamp(x, data):
    sizes = [data.draw(st.integers(0, n)) for n in x.shape]
    starts = [np.int32(data.draw(st.integers(-6, 6))) for _ in x.shape]
    upd = np.full(sizes, 77, np.int32)
    got = jit_run(lambda a, u, *s: (lax.dynamic_slice(a, s, sizes),
                                    lax.dynamic_update_slice(a, u, s)), x, upd, *starts)
    c = _clamped(starts, sizes, x.shape)
    window = tuple(slice(s, s + k) for s, k in zip(c, sizes))
    updated = x.copy()
    updated[window] = 77
    assert_close(got, (x[window], updated))


@SETTINGS
@given(keys=hnp.arrays(np.int32, st.integers(1, 8), elements=st.integers(0, 3)),
       data=st.data())
def test_multi_operand_sort(keys, data):
    second = data.draw(hnp.arrays(np.float32, keys.shape, elements=st.floats(-2, 2, width=32)))
    payload = np.arange(keys.size, dtype=np.int32)
    got = jit_run(lambda k, s, p: lax.sort((k, s, p), num_keys=2), keys, second, payload)
    order = np.lexsort((payload, second, keys))  # stable: ties keep input order
    assert_close(got, (keys[order], second[order], payload[order]))


@SETTINGS
@given(xs=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4),
                     elements=st.floats(-3, 3, width=32)),
       reverse=st.booleans(), start=st.integers(-2, 2), n=st.integers(0, 5))
def test_scan_fori_while_cond(xs, reverse, start, n):
    def f(xs):
        def step(c, x):
            c = c + x
            return c, c * 2

        carry, ys = lax.scan(step, xnp.zeros(xs.shape[1:], xs.dtype), xs, reverse=reverse)
        total = lax.fori_loop(start, start + n, lambda i, acc: acc + i, 0)
        count = lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2), (0, 1))[1]
        picked = lax.cond(carry.sum() > 0, lambda c: c, lambda c: -c, carry)
        return carry, ys, total, count, picked

    seq = xs[::-1] if reverse else xs
    ys = np.cumsum(seq, axis=0) * 2
    ys = ys[::-1] if reverse else ys
    carry = seq.sum(axis=0)
    want = (carry, ys, np.int32(sum(range(start, start + n))), np.int32(2 ** n),
            carry if carry.sum() > 0 else -carry)
    assert_close(jit_run(f, xs), want, rtol=1e-5, atol=1e-5)


@SETTINGS
@given(i=st.integers(-3, 5), x=hnp.arrays(np.float32, (3,), elements=st.floats(-2, 2,
                                                                                width=32)))
def test_switch_clamps_the_index(i, x):
    branches = [lambda v: v + 1, lambda v: v * 3, lambda v: -v]
    got = jit_run(lambda j, v: lax.switch(j, branches, v), np.int32(i), x)
    assert_close(got, branches[min(max(i, 0), 2)](x))


def np_conv(x, k, strides, pads, lhs_dil, rhs_dil, groups):
    """NCHW x OIHW cross-correlation by brute force (XLA's convolution semantics)."""
    n, c, *sp = x.shape
    o, ci, *ks = k.shape
    nsp = len(sp)
    dil = [(s - 1) * d + 1 for s, d in zip(sp, lhs_dil)]
    xd = np.zeros((n, c, *dil), x.dtype)
    xd[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in lhs_dil)] = x
    xp = np.pad(xd, [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in pads])
    xp = xp[(slice(None), slice(None)) + tuple(
        slice(-lo if lo < 0 else 0, xp.shape[2 + i] + (hi if hi < 0 else 0))
        for i, (lo, hi) in enumerate(pads))]
    kext = [(kk - 1) * d + 1 for kk, d in zip(ks, rhs_dil)]
    out_sp = [(xp.shape[2 + i] - kext[i]) // strides[i] + 1 for i in range(nsp)]
    out = np.zeros((n, o, *out_sp), np.float64)
    og = o // groups
    for pos in itertools.product(*[range(m) for m in out_sp]):
        win = xp[(slice(None), slice(None)) + tuple(
            slice(p * s, p * s + e, d) for p, s, e, d in zip(pos, strides, kext, rhs_dil))]
        for g in range(groups):
            xs = win[:, g * ci:(g + 1) * ci]
            ws = k[g * og:(g + 1) * og]
            axes = list(range(1, xs.ndim))
            out[(slice(None), slice(g * og, (g + 1) * og)) + pos] = np.tensordot(
                xs, ws, axes=(axes, axes))
    return out.astype(x.dtype)


@st.composite
def conv_case(draw):
    nsp = draw(st.integers(1, 2))
    groups = draw(st.integers(1, 2))
    ci, og = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    ks = [draw(st.integers(1, 3)) for _ in range(nsp)]
    rhs_dil = [draw(st.integers(1, 2)) for _ in range(nsp)]
    lhs_dil = [draw(st.integers(1, 2)) for _ in range(nsp)]
    strides = [draw(st.integers(1, 2)) for _ in range(nsp)]
    pads = [(draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(nsp)]
    sp = []
    for i in range(nsp):  # big enough for at least one output position
        need = (ks[i] - 1) * rhs_dil[i] + 1 - pads[i][0] - pads[i][1]
        sp.append(max(draw(st.integers(1, 5)), -(-(need - 1) // lhs_dil[i]) + 1, 1))
    x = draw(hnp.arrays(np.float32, (draw(st.integers(1, 2)), ci * groups, *sp),
                        elements=st.floats(-2, 2, width=32)))
    k = draw(hnp.arrays(np.float32, (og * groups, ci, *ks), elements=st.floats(-2, 2, width=32)))
    return x, k, strides, pads, lhs_dil, rhs_dil, groups


@SETTINGS
@given(case=conv_case())
def test_conv_general_dilated(case):
    x, k, strides, pads, lhs_dil, rhs_dil, groups = case
    got = jit_run(lambda a, b: lax.conv_general_dilated(
        a, b, strides, pads, lhs_dilation=lhs_dil, rhs_dilation=rhs_dil,
        feature_group_count=groups), x, k)
    assert_close(got, np_conv(x, k, strides, pads, lhs_dil, rhs_dil, groups), rtol=1e-4,
                 atol=1e-4)


# ---- xlc.nn -------------------------------------------------------------------------------------
@SETTINGS
@given(x=st.sampled_from([np.float32, np.float64]).flatmap(lambda dt: hnp.arrays(
    dt, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5), elements=elements(dt))),
    data=st.data())
def test_softmax_family_over_any_axis(x, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    keepdims = data.draw(st.booleans())
    x64 = x.astype(np.float64)
    m = x64.max(axis=axis, keepdims=True)
    lse = np.log(np.exp(x64 - m).sum(axis=axis, keepdims=True)) + m
    got = jit_run(lambda a: (nn.softmax(a, axis=axis), nn.log_softmax(a, axis=axis),
                             nn.logsumexp(a, axis=axis, keepdims=keepdims)), x)
    want = (np.exp(x64 - lse), x64 - lse, lse if keepdims else np.squeeze(lse, axis))
    tol = 1e-5 if x.dtype == np.float32 else 1e-12
    assert_close(got, tuple(w.astype(x.dtype) for w in want), rtol=tol, atol=tol)


TOL = (1e-3, 1e-3)


@SETTINGS
@given(x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1,
                                                 max_side=6),
                    elements=st.floats(-4, 4, width=32)),
       with_affine=st.booleans(), data=st.data())
def test_layer_norm(x, with_affine, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    n = x.shape[axis]
    scale = data.draw(hnp.arrays(np.float32, (n,), elements=st.floats(-2, 2, width=32)))
    bias = data.draw(hnp.arrays(np.float32, (n,), elements=st.floats(-2, 2, width=32)))
    shape = [1] * x.ndim
    shape[axis] = n
    x64 = x.astype(np.float64)
    mu = x64.mean(axis=axis, keepdims=True)
    y = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(axis=axis, keepdims=True) + 1e-5)
    if with_affine:
        got = jit_run(lambda a, s, b: nn.layer_norm(a, s.reshape(shape), b.reshape(shape),
                                                    axis=axis), x, scale, bias, cross_tol=TOL)
        y = y * scale.reshape(shape) + bias.reshape(shape)
    else:  # (x - mean) of a near-constant row is rounding noise, amplified by 1/sqrt(eps)
        got = jit_run(lambda a: nn.layer_norm(a, axis=axis), x, cross_tol=TOL)
    assert_close(got, y.astype(np.float32), *TOL)


@SETTINGS
@given(x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                    elements=st.floats(-6, 6, width=32)), approximate=st.booleans())
def test_gelu_both_forms(x, approximate):
    import math

    x64 = x.astype(np.float64)
    if approximate:
        want = 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3)))
    else:
        want = 0.5 * x64 * (1 + np.vectorize(math.erf)(x64 / np.sqrt(2)))
    got = jit_run(lambda a: nn.gelu(a, approximate=approximate), x)
    assert_close(got, want.astype(np.float32), rtol=1e-4, atol=1e-5)
