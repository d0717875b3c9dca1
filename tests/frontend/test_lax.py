"""xlc.lax: data movement, reduce/reduce_window/sort, conv, gather/scatter and control flow
(cond/switch/while_loop/fori_loop/scan) against Python/numpy references."""
from __future__ import annotations

import numpy as np
import pytest
import xlc.lax as lax
import xlc.numpy as xnp

import xlc
from tests.frontend.helpers import assert_close, jit_run

R = np.random.default_rng(3)
X = R.standard_normal((3, 4)).astype(np.float32)


def test_data_movement():
    got = jit_run(lambda a: (lax.broadcast_in_dim(a[0], (2, 4), (1,)),
                             lax.reshape(a, (4, 3)), lax.transpose(a, (1, 0)),
                             lax.slice(a, (0, 1), (3, 4), (2, 2)), lax.rev(a, (0, 1)),
                             lax.pad(a, 0.0, [(1, -1, 1), (0, 0, 0)]),
                             lax.concatenate([a, a], 0), lax.convert_element_type(a, np.int32),
                             lax.iota(np.int32, 4), lax.broadcasted_iota(np.int32, (2, 3), 1),
                             lax.select(a > 0, a, -a)), X)
    padded = np.zeros((5, 4), np.float32)
    padded[::2] = X
    want = (np.broadcast_to(X[0], (2, 4)), X.reshape(4, 3), X.T, X[0:3:2, 1:4:2], X[::-1, ::-1],
            np.vstack([np.zeros((1, 4), np.float32), padded])[:-1],
            np.concatenate([X, X]), X.astype(np.int32), np.arange(4, dtype=np.int32),
            np.broadcast_to(np.arange(3, dtype=np.int32), (2, 3)), np.abs(X))
    assert_close(got, want)


def test_dynamic_slice_and_update_wrap_then_clamp_like_jax_lax():
    big = np.arange(36, dtype=np.float32).reshape(6, 6)
    upd = np.ones((2, 2), np.float32)
    got = jit_run(lambda a, i, j, u: (lax.dynamic_slice(a, (i, j), (2, 3)),
                                      lax.dynamic_update_slice(a, u, (i, j))),
                  big, np.int32(5), np.int32(-1), upd)
    want_u = big.copy()
    want_u[4:6, 4:6] = 1  # -1 wraps to 5, then 5 is clamped to 4 (jax.lax)
    assert_close(got, (big[4:6, 3:6], want_u))


def test_reduce_with_python_reducer_and_variadic():
    got = jit_run(lambda a: (lax.reduce(a, 0.0, lambda x, y: x + y, (1,)),
                             lax.reduce((a, a * 2), (-np.inf, -np.inf),
                                        lambda m1, m2, v1, v2: (xnp.maximum(m1, v1),
                                                                xnp.maximum(m2, v2)), (0,))), X)
    assert_close(got, (X.sum(1), (X.max(0), (2 * X).max(0))), rtol=1e-5, atol=1e-6)


def test_reduce_window_max_pool():
    img = R.standard_normal((1, 1, 4, 6)).astype(np.float32)
    got = jit_run(lambda a: lax.reduce_window(a, -np.inf, xnp.maximum, (1, 1, 2, 2),
                                              (1, 1, 2, 2)), img)
    want = img.reshape(1, 1, 2, 2, 3, 2).max(axis=(3, 5))
    assert_close(got, want)


def _sum_pool(x: np.ndarray, window: tuple[int, int], strides: tuple[int, int],
              pads: list[tuple[int, int]]) -> np.ndarray:
    x = np.pad(x, [(max(lo, 0), max(hi, 0)) for lo, hi in pads])
    rows = (x.shape[0] - window[0]) // strides[0] + 1
    cols = (x.shape[1] - window[1]) // strides[1] + 1
    return np.array([[x[i * strides[0]:i * strides[0] + window[0],
                        j * strides[1]:j * strides[1] + window[1]].sum()
                      for j in range(cols)] for i in range(rows)], np.float32)


@pytest.mark.parametrize("padding,pads", [
    ("VALID", [(0, 0), (0, 0)]),
    ("SAME", [(0, 1), (0, 0)]),          # out = ceil(7/2), ceil(9/3): odd padding goes high
    ("same_lower", [(1, 0), (0, 0)]),
    ([(1, 0), (0, 2)], [(1, 0), (0, 2)]),
])
def test_reduce_window_padding_like_jax(padding, pads):
    x = R.standard_normal((7, 9)).astype(np.float32)
    got = jit_run(lambda a: lax.reduce_window(a, 0.0, xnp.add, (2, 3), (2, 3), padding), x)
    assert_close(got, _sum_pool(x, (2, 3), (2, 3), pads), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("padding,msg", [
    ("FULL", r"reduce_window: padding must be 'VALID', 'SAME', 'SAME_LOWER' or "
             r"\[\(lo, hi\), \.\.\.\], got 'FULL'"),
    ([(1, 1)], r"reduce_window: padding has 1 \(lo, hi\) pairs for 2 windowed dimensions"),
])
def test_reduce_window_bad_padding(padding, msg):
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(xlc.TraceError, match=msg):
        xlc.jit(lambda a: lax.reduce_window(a, 0.0, xnp.add, (2, 2), (1, 1), padding))(x)


def test_multi_operand_sort_num_keys():
    keys = np.array([[2, 1, 2, 1, 0]], np.int32)
    k2 = np.array([[5, 4, 3, 9, 1]], np.int32)
    vals = np.arange(5, dtype=np.float32)[None]
    got = jit_run(lambda a, b, c: lax.sort((a, b, c), dimension=1, num_keys=2), keys, k2, vals)
    order = np.lexsort((k2[0], keys[0]))
    assert_close(got, (keys[:, order], k2[:, order], vals[:, order]))


@pytest.mark.parametrize("padding", ["VALID", "SAME", [(1, 0), (2, 1)]])
@pytest.mark.parametrize("strides", [(1, 1), (2, 1)])
def test_conv_nchw_against_numpy(padding, strides):
    x = R.standard_normal((2, 3, 6, 5)).astype(np.float32)
    w = R.standard_normal((4, 3, 3, 2)).astype(np.float32)
    got = jit_run(lambda a, k: lax.conv_general_dilated(a, k, strides, padding), x, w)
    want = _np_conv(x, w, strides, padding)
    assert_close(got, want, rtol=1e-4, atol=1e-4)


def _np_conv(x, w, strides, padding):
    kh, kw = w.shape[2:]
    if padding == "VALID":
        pads = [(0, 0), (0, 0)]
    elif padding == "SAME":
        pads = []
        for size, k, s in zip(x.shape[2:], (kh, kw), strides):
            out = -(-size // s)
            tot = max((out - 1) * s + k - size, 0)
            pads.append((tot // 2, tot - tot // 2))
    else:
        pads = padding
    xp = np.pad(x, [(0, 0), (0, 0)] + list(pads))
    oh = (xp.shape[2] - kh) // strides[0] + 1
    ow = (xp.shape[3] - kw) // strides[1] + 1
    out = np.zeros((x.shape[0], w.shape[0], oh, ow), np.float32)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * strides[0]:i * strides[0] + kh, j * strides[1]:j * strides[1] + kw]
            out[:, :, i, j] = np.einsum("bchw,ochw->bo", patch, w)
    return out


def test_conv_feature_groups_and_nhwc():
    x = R.standard_normal((1, 4, 5, 5)).astype(np.float32)
    w = R.standard_normal((4, 2, 3, 3)).astype(np.float32)
    got = jit_run(lambda a, k: lax.conv_general_dilated(a, k, (1, 1), "VALID",
                                                        feature_group_count=2), x, w)
    want = np.concatenate([_np_conv(x[:, :2], w[:2], (1, 1), "VALID"),
                           _np_conv(x[:, 2:], w[2:], (1, 1), "VALID")], axis=1)
    assert_close(got, want, rtol=1e-4, atol=1e-4)
    xh = np.transpose(x[:, :2], (0, 2, 3, 1))
    wh = np.transpose(w[:2], (2, 3, 1, 0))
    got2 = jit_run(lambda a, k: lax.conv_general_dilated(
        a, k, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")), xh, wh)
    assert_close(got2, np.transpose(_np_conv(x[:, :2], w[:2], (1, 1), "VALID"), (0, 2, 3, 1)),
                 rtol=1e-4, atol=1e-4)


def test_gather_and_scatter_with_dimension_numbers():
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    idx = np.array([[2], [0], [2]], np.int32)
    got = jit_run(lambda t, i: (lax.gather(t, i, (1,), (0,), (0,), 1, (1, 3)),
                                lax.scatter(t, i, xnp.ones((3, 3)), (1,), (0,), (0,), 1,
                                            lax_add())), table, idx)
    want_s = table.copy()
    np.add.at(want_s, idx[:, 0], 1.0)
    assert_close(got, (table[idx[:, 0]], want_s))


def lax_add():
    from xlc.hlo.opcodes import Opcode

    return Opcode.ADD


# ---- control flow ----------------------------------------------------------------------------
@pytest.mark.parametrize("p", [True, False])
def test_cond_traced_pred_with_pytree_operands(p):
    ops = {"a": X, "b": (X[0], np.float32(2.0))}

    def f(pred, d):
        return lax.cond(pred, lambda t: {"out": t["a"] * t["b"][1], "s": t["b"][0].sum()},
                        lambda t: {"out": t["a"] - 1.0, "s": t["b"][0].max()}, d)

    got = jit_run(f, np.bool_(p), ops)
    want = {"out": X * 2 if p else X - 1, "s": X[0].sum() if p else X[0].max()}
    assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_cond_with_closure_capture_and_python_pred():
    y = R.standard_normal(4).astype(np.float32)
    got = jit_run(lambda a, b, p: (lax.cond(p > 0, lambda: a + b, lambda: a * b),
                                   lax.cond(True, lambda: a, lambda: b)), X, y, np.float32(-1))
    assert_close(got, (X * y, X))


@pytest.mark.parametrize("i", [-3, 0, 1, 2, 7])
def test_switch_clamps_index(i):
    branches = [lambda v: v + 1.0, lambda v: v * 3.0, lambda v: -v]
    got = jit_run(lambda idx, v: lax.switch(idx, branches, v), np.int32(i), X)
    assert_close(got, branches[int(np.clip(i, 0, 2))](X))


def test_while_loop_matches_python():
    def py(n, x):
        i, acc = 0, x
        while i < n:
            acc = acc * 0.5 + i
            i += 1
        return acc

    got = jit_run(lambda n, a: lax.while_loop(lambda s: s[0] < n,
                                              lambda s: (s[0] + 1, s[1] * 0.5 + s[0]),
                                              (0, a))[1], np.int32(5), X)
    assert_close(got, py(5, X).astype(np.float32), rtol=1e-6)


def test_fori_loop_with_captured_values_and_traced_bounds():
    w = R.standard_normal((4, 4)).astype(np.float32) * 0.3
    got = jit_run(lambda a, m, n: lax.fori_loop(0, n, lambda i, v: xnp.tanh(v @ m) + i, a),
                  X, w, np.int32(3))
    want = X
    for i in range(3):
        want = np.tanh(want @ w) + i
    assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_nested_loops_and_cond_inside_loop():
    def f(a):
        def outer(i, acc):
            inner = lax.fori_loop(0, 3, lambda j, t: t + a[0, 0] * j, acc)
            return lax.cond(i % 2 == 0, lambda: inner * 2.0, lambda: inner - 1.0)
        return lax.fori_loop(0, 4, outer, xnp.zeros(()))

    acc = 0.0
    for i in range(4):
        acc = acc + X[0, 0] * 3
        acc = acc * 2 if i % 2 == 0 else acc - 1
    assert_close(jit_run(f, X), np.float32(acc), rtol=1e-5)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_cumulative_and_pytrees(reverse):
    xs = {"v": X, "w": np.arange(3, dtype=np.int32)}

    def step(c, x):
        c2 = c + x["v"] * x["w"]
        return c2, (c2.sum(), x["w"] * 2)

    got = jit_run(lambda d: lax.scan(step, xnp.zeros(4), d, reverse=reverse), xs)
    c = np.zeros(4, np.float32)
    ys1, ys2 = [None] * 3, [None] * 3
    order = range(2, -1, -1) if reverse else range(3)
    for t in order:
        c = c + X[t] * t
        ys1[t], ys2[t] = c.sum(), np.int32(2 * t)
    assert_close(got, (c, (np.array(ys1, np.float32), np.array(ys2, np.int32))), rtol=1e-5,
                 atol=1e-5)


def test_scan_without_xs():
    got = jit_run(lambda a: lax.scan(lambda c, _: (c * 2, c), a, length=3), X[0])
    assert_close(got, (X[0] * 8, np.stack([X[0], X[0] * 2, X[0] * 4])))


# ---- control-flow errors ---------------------------------------------------------------------
def test_cond_branch_mismatch_names_both():
    with pytest.raises(xlc.TraceError, match=r"cond: true_fun and false_fun must have the same "
                                             r"structure, shapes and dtypes, but at the output "
                                             r"true_fun has f32\[3,4\] and false_fun has "
                                             r"f32\[4\] \(at .*test_lax.py:\d+\)"):
        jit_run(lambda p, a: lax.cond(p, lambda: a, lambda: a[0]), np.bool_(True), X)
    with pytest.raises(xlc.TraceError, match=r"cond: true_fun and false_fun must have the same "
                                             r"structure.*true_fun has structure \(\*, \*\) "
                                             r"and false_fun has structure \*"):
        jit_run(lambda p, a: lax.cond(p, lambda: (a, a), lambda: a), np.bool_(True), X)


def test_while_carry_mismatch_names_both():
    with pytest.raises(xlc.TraceError, match=r"while_loop: init_val and body_fun output must "
                                             r"have the same structure, shapes and dtypes, but "
                                             r"at \[1\] init_val has f32\[3,4\] and body_fun "
                                             r"output has f32\[4\]"):
        jit_run(lambda a: lax.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1][0]),
                                         (0, a)), X)
    with pytest.raises(xlc.TraceError, match=r"while_loop: init_val and body_fun output must "
                                             r"have the same structure, shapes and dtypes, but "
                                             r"at \[0\] init_val has s32\[\] and body_fun "
                                             r"output has f32\[\]"):
        jit_run(lambda a: lax.while_loop(lambda s: s[0] < 3, lambda s: (a[0, 0], s[1]),
                                         (np.int32(0), a)), X)
    with pytest.raises(xlc.TraceError, match=r"while_loop: cond_fun must return a scalar bool, "
                                             r"got pred\[3,4\]"):
        jit_run(lambda a: lax.while_loop(lambda s: s > 0, lambda s: s, a), X)


def test_reducer_must_not_capture():
    with pytest.raises(xlc.TraceError, match=r"the reducer function of xlc.lax.reduce must not "
                                             r"use traced values of the enclosing function"):
        jit_run(lambda a: lax.reduce(a, 0.0, lambda x, y: x + y + a[0, 0], (0,)), X)


def test_control_flow_runs_eagerly_outside_jit():
    assert_close(lax.fori_loop(0, 3, lambda i, c: c + i, np.float32(0.5)), np.float32(3.5))
    assert_close(lax.cond(np.bool_(False), lambda v: v * 2, lambda v: v - 1, X), X - 1)
    carry, ys = lax.scan(lambda c, x: (c + x, c), np.float32(0), np.arange(4, dtype=np.float32))
    assert_close((carry, ys), (np.float32(6), np.array([0, 0, 1, 3], np.float32)))
    assert_close(lax.exp(X), np.exp(X), rtol=1e-6)


def test_top_k_clamp_bitcast_dot():
    x = np.array([[3.0, 1.0, 4.0, 1.5], [9.0, 2.0, 6.0, 5.0]], np.float32)
    got = jit_run(lambda a: (*lax.top_k(a, 2), lax.clamp(0.0, a, 3.0),
                             lax.bitcast_convert_type(a, np.int32), lax.dot(a, a.T)), x)
    idx = np.argsort(-x, axis=1, kind="stable")[:, :2].astype(np.int32)
    want = (np.take_along_axis(x, idx, 1), idx, np.clip(x, 0, 3), x.view(np.int32), x @ x.T)
    assert_close(got, want, rtol=1e-6)
