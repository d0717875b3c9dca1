"""xlc.vmap: every op family vmapped equals a Python loop over the batch (the stack of the
per-example results), across in_axes/out_axes variants; nested vmap, vmap inside and around
jit, vmap of grad (per-example gradients) and grad of vmap; unbatched values stay unbatched;
JAX-like errors; the batching-rule table covers every opcode; checked against jax.vmap when
JAX is installed. Runs on the interpreter (the reference evaluator) except where noted."""
from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xlc.lax as xl
import xlc.numpy as xnp
import xlc.random as xr
from hypothesis import given, settings
from hypothesis import strategies as st

import xlc
from tests.frontend.helpers import assert_close, jit_run
from xlc.errors import TraceError
from xlc.frontend.vmap_rules import ALWAYS, BATCH_RULES, NO_RULE
from xlc.hlo.opcodes import Opcode

RNG = np.random.default_rng(0)
B = 3


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _run(f: Callable[..., Any], *args: Any) -> Any:
    return xlc.jit(f, backend="interpreter")(*args)


# ---- the loop reference ---------------------------------------------------------------------
def _slice(spec: Any, arg: Any, i: int) -> Any:
    """Example i of `arg` under its in_axes entry `spec` (a pytree prefix)."""
    if spec is None:
        return arg
    if isinstance(spec, int):
        if isinstance(arg, dict):
            return {k: _slice(spec, v, i) for k, v in arg.items()}
        if isinstance(arg, (tuple, list)):
            return type(arg)(_slice(spec, v, i) for v in arg)
        return np.take(np.asarray(arg), i, axis=spec)
    if isinstance(spec, dict):
        return {k: _slice(spec[k], arg[k], i) for k in arg}
    return type(arg)(_slice(s, a, i) for s, a in zip(spec, arg))


def _stack(spec: Any, outs: list[Any]) -> Any:
    """Per-example outputs stacked along their out_axes entry."""
    first = outs[0]
    if isinstance(first, dict):
        return {k: _stack(spec[k] if isinstance(spec, dict) else spec, [o[k] for o in outs])
                for k in first}
    if isinstance(first, (tuple, list)):
        specs = spec if isinstance(spec, (tuple, list)) else [spec] * len(first)
        return type(first)(_stack(s, [o[j] for o in outs]) for j, s in enumerate(specs))
    if spec is None:
        return np.asarray(first)
    return np.stack([np.asarray(o) for o in outs], axis=spec)


def loop(f: Callable[..., Any], args: tuple, in_axes: Any = 0, out_axes: Any = 0,
         n: int = B) -> Any:
    specs = in_axes if isinstance(in_axes, (tuple, list)) else [in_axes] * len(args)
    per = xlc.jit(f, backend="interpreter")
    outs = [per(*[_slice(s, a, i) for s, a in zip(specs, args)]) for i in range(n)]
    return _stack(out_axes, outs)


def check(f: Callable[..., Any], args: tuple, in_axes: Any = 0, out_axes: Any = 0,
          rtol: float | None = None, atol: float | None = None) -> Any:
    got = _run(xlc.vmap(f, in_axes, out_axes), *args)
    assert_close(got, loop(f, args, in_axes, out_axes), rtol, atol)
    return got


# ---- op families: (f(m, lax), args, in_axes, out_axes) with m = xlc.numpy or jax.numpy -------
def _conv(lax: Any, groups: int = 1) -> Callable[..., Any]:
    return lambda x, k: lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                                 feature_group_count=groups)


CASES: dict[str, tuple[Callable[[Any, Any], Callable[..., Any]], tuple, Any, Any]] = {
    "elementwise_broadcast": (lambda m, lax: lambda x, y: m.sin(x) * y + m.exp(-x * x) / 2,
                              (_f32(B, 4), _f32(4)), (0, None), 0),
    "compare_where_clip": (lambda m, lax: lambda x, y: m.where(x > y, m.clip(x, -0.5, 0.5), y),
                           (_f32(B, 4), _f32(B, 4)), 0, 0),
    "clamp_batched_bounds": (lambda m, lax: lambda lo, x: lax.clamp(lo, x, lo + 1.0),
                             (_f32(B), _f32(B, 5)), 0, 0),
    "convert_bitcast": (lambda m, lax: lambda x: lax.bitcast_convert_type(
        x.astype(m.float32), m.int32) + x.astype(m.int32), (_f32(B, 3) * 4,), 0, 0),
    "broadcast_reshape_transpose": (lambda m, lax: lambda x: m.broadcast_to(
        x.reshape(2, 3).T, (4, 3, 2)) * 2, (_f32(6, B),), 1, 0),
    "reductions": (lambda m, lax: lambda x: (m.sum(x, axis=0), m.max(x), m.argmax(x, axis=1),
                                             m.mean(x * x, axis=-1)),
                   (_f32(B, 3, 4),), 0, (0, 0, 1, -1)),
    "cumsum_reduce_window": (lambda m, lax: lambda x: (m.cumsum(x, axis=1), lax.reduce_window(
        x, -np.inf, lax.max, (2, 2), (1, 1), "VALID")), (_f32(B, 3, 4),), 0, 0),
    "dot_both": (lambda m, lax: lambda a, b: a @ b, (_f32(B, 2, 3), _f32(B, 3, 4)), 0, 0),
    "dot_lhs_with_batch": (lambda m, lax: lambda a, b: m.einsum("bij,bjk->bik", a, b),
                           (_f32(2, B, 2, 3), _f32(2, 3, 4)), (1, None), 2),
    "dot_rhs": (lambda m, lax: lambda a, b: m.einsum("ij,bjk->kbi", a, b),
                (_f32(2, 3), _f32(2, 3, B, 4)), (None, 2), 0),
    "conv_lhs": (lambda m, lax: _conv(lax), (_f32(B, 1, 2, 5, 5), _f32(3, 2, 3, 3)),
                 (0, None), 0),
    "conv_rhs": (lambda m, lax: _conv(lax), (_f32(1, 2, 5, 5), _f32(B, 3, 2, 3, 3)),
                 (None, 0), 0),
    "conv_both": (lambda m, lax: _conv(lax), (_f32(1, 2, 5, 5, B), _f32(B, 3, 2, 3, 3)),
                  (4, 0), 0),
    "conv_grouped_rhs": (lambda m, lax: _conv(lax, 2), (_f32(1, 4, 5, 5), _f32(B, 6, 2, 3, 3)),
                         (None, 0), 0),
    "conv_grouped_both": (lambda m, lax: _conv(lax, 2),
                          (_f32(B, 1, 4, 5, 5), _f32(B, 6, 2, 3, 3)), 0, 0),
    "slice_concat_pad_rev": (lambda m, lax: lambda x: m.concatenate(
        [x[1:, ::2], m.pad(x, 1)[:2, :2], x[::-1, :2]], axis=0), (_f32(B, 3, 4),), 0, 0),
    "pad_batched_value": (lambda m, lax: lambda x, v: lax.pad(x, v, [(1, 2, 1)]),
                          (_f32(B, 3), _f32(B)), 0, 0),
    "iota": (lambda m, lax: lambda x: m.arange(4.0, dtype=m.float32) * x, (_f32(B, 1),), 0, 0),
    "sort_topk": (lambda m, lax: lambda x: (m.sort(x, axis=0), m.argsort(x[0]),
                                            lax.top_k(x, 2)[0]), (_f32(B, 3, 4),), 0, 0),
    "ds_batched_index": (lambda m, lax: lambda x, i: lax.dynamic_slice(x, (i, 1), (2, 2)),
                         (_f32(B, 5, 4), np.array([0, 2, 7], np.int32)), 0, 0),
    "ds_unbatched_array": (lambda m, lax: lambda x, i: lax.dynamic_slice(x, (i,), (2,)),
                           (_f32(5), np.array([-1, 2, 3], np.int32)), (None, 0), 0),
    "ds_unbatched_index": (lambda m, lax: lambda x, i: lax.dynamic_slice(x, (i,), (2,)),
                           (_f32(B, 5), np.int32(2)), (0, None), 0),
    "dus_batched_index": (lambda m, lax: lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 0)),
                          (_f32(4, 3), _f32(B, 2, 3), np.array([3, 0, -1], np.int32)),
                          (None, 0, 0), 0),
    "dus_unbatched_index": (lambda m, lax: lambda x, u, i: lax.dynamic_update_slice(x, u, (i,)),
                            (_f32(B, 5), _f32(2), np.int32(1)), (0, None, None), 0),
    "gather_both": (lambda m, lax: lambda x, i: x[i] * 2, (_f32(B, 5, 2),
                                                           np.array([[0, 4], [1, 1], [3, 2]])),
                    0, 0),
    "gather_indices": (lambda m, lax: lambda x, i: m.take(x, i, axis=1),
                       (_f32(2, 5), np.array([[0, 4], [1, 1], [3, 2]])), (None, 0), 0),
    "gather_operand": (lambda m, lax: lambda x, i: x[:, i], (_f32(B, 2, 5), np.array([4, 0])),
                       (0, None), 0),
    "scatter_both": (lambda m, lax: lambda x, i, u: x.at[i].add(u),
                     (_f32(B, 5), np.array([[0, 4], [1, 1], [3, 2]]), _f32(B, 2)), 0, 0),
    "scatter_indices": (lambda m, lax: lambda x, i: m.asarray(x).at[i].set(1.0),
                        (_f32(5), np.array([[0, 4], [1, 1], [3, 2]])), (None, 0), 0),
    "scatter_operand": (lambda m, lax: lambda x, u: x.at[np.array([1, 3])].multiply(u),
                        (_f32(B, 5), _f32(2)), (0, None), 0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_family_equals_loop(name: str) -> None:
    make, args, in_axes, out_axes = CASES[name]
    check(make(xnp, xl), args, in_axes, out_axes, atol=1e-5)


@pytest.mark.parametrize("name", ["gather_both", "scatter_both", "ds_batched_index",
                                  "dus_batched_index", "conv_grouped_both", "dot_lhs_with_batch",
                                  "sort_topk", "pad_batched_value"])
def test_op_family_on_the_cpu(name: str) -> None:
    """The batched forms compile and agree on the default backend too."""
    make, args, in_axes, out_axes = CASES[name]
    jit_run(xlc.vmap(make(xnp, xl), in_axes, out_axes), *args)


def _jax() -> Any:
    return pytest.importorskip("jax")


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_family_matches_jax(name: str) -> None:
    jax = _jax()
    make, args, in_axes, out_axes = CASES[name]
    want = jax.vmap(make(jax.numpy, jax.lax), in_axes, out_axes)(*args)
    got = _run(xlc.vmap(make(xnp, xl), in_axes, out_axes), *args)
    want = jax.tree_util.tree_map(np.asarray, want)
    assert_close(got, type(got)(want) if isinstance(got, (tuple, list)) else want,
                 1e-5, 1e-5, check_dtype=False)


# ---- control flow, random numbers, custom-calls --------------------------------------------------
def test_while_with_batched_predicate_runs_each_example_its_trips() -> None:
    def f(n: Any, x: Any) -> Any:
        return xl.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2.0 + c[0]),
                             (0, x))
    check(f, (np.array([0, 3, 1], np.int32), _f32(B, 2)))


def test_fori_loop_and_scan_with_batched_carry() -> None:
    def f(x: Any, w: Any) -> Any:
        y = xl.fori_loop(0, 3, lambda i, c: xnp.tanh(c @ w) + i, x)
        carry, ys = xl.scan(lambda c, r: (c + r, c * r), xnp.zeros(2, xnp.float32), x)
        return y, carry, ys
    check(f, (_f32(B, 3, 2), _f32(2, 2)), (0, None))


def test_while_carry_becomes_batched_through_the_body() -> None:
    # c[1] starts unbatched (a constant) and picks up x through c[2] one trip later
    def f(x: Any) -> Any:
        return xl.fori_loop(0, 3, lambda i, c: (c[0] + 1.0, c[1] + c[2], c[2] * 0 + x),
                            (np.float32(0), np.float32(0), np.float32(0)))
    check(f, (_f32(B),))


def test_cond_and_switch() -> None:
    def f(p: Any, i: Any, x: Any) -> Any:
        a = xl.cond(p > 0, lambda v: v * 2.0, lambda v: v - 1.0, x)
        b = xl.switch(i, [lambda v: v, lambda v: xnp.sin(v), lambda v: v * v], x)
        return a, b
    check(f, (_f32(B), np.array([0, 2, 5], np.int32), _f32(B, 2)))
    # unbatched predicate, batched operand: stays a conditional
    check(lambda p, x: xl.cond(p, lambda v: v.sum(), lambda v: v.max(), x),
          (np.bool_(True), _f32(B, 3)), (None, 0))


def test_random_draws_equal_a_loop_over_keys() -> None:
    keys = _run(lambda: xr.split(xr.key(42), B))
    check(lambda k: (xr.uniform(k, (4,)), xr.normal(k, (2,)), xr.randint(k, (3,), 0, 9),
                     xr.split(k, 2)), (keys,))
    # an unbatched key gives every example the same draws, as in JAX
    same = _run(xlc.vmap(lambda k, x: xr.uniform(k, (2,)) + 0 * x, (None, 0)), keys[0],
                _f32(B))
    assert (same == same[0]).all()


def test_linalg_custom_calls_batch_and_callbacks_loop() -> None:
    a = _f32(B, 3, 3)
    spd = a @ np.swapaxes(a, 1, 2) + 3 * np.eye(3, dtype=np.float32)
    check(lambda m, b: (xnp.linalg.cholesky(m), xnp.linalg.solve(m, b),
                        xnp.linalg.eigh(m)[0]), (spd, _f32(3)), (0, None), rtol=1e-4,
          atol=1e-4)
    calls: list[tuple[int, ...]] = []

    def host(x: np.ndarray) -> np.ndarray:
        calls.append(x.shape)
        return np.cumsum(x)
    check(lambda x: xlc.pure_callback(host, xlc.ShapeDtype((4,), np.float32), x) + 1,
          (_f32(B, 4),))
    assert set(calls) == {(4,)}


def test_debug_print_runs_once_per_example(capsys: pytest.CaptureFixture[str]) -> None:
    def f(x: Any) -> Any:
        xlc.debug.print("x={}", x)
        return x + 1
    _run(xlc.vmap(f), np.arange(3, dtype=np.float32))
    assert capsys.readouterr().out.split() == ["x=0.0", "x=1.0", "x=2.0"]


def _call_sin_times(x: Any, w: Any) -> Any:
    """x -> call(callee)(x, w) with callee(a, b) = sin(a) * b: HLO `call` (which the frontend
    does not trace itself)."""
    from xlc.frontend.staging import new_sub_builder
    from xlc.frontend.tracer import Tracer, as_tracer, emit, push_builder

    x, w = as_tracer(x), as_tracer(w)
    b = new_sub_builder("callee", "callee")
    with push_builder(b):
        a = Tracer(b.comp.add_parameter(0, x.aval), b)
        c = Tracer(b.comp.add_parameter(1, w.aval), b)
        b.comp.root = (xnp.sin(a) * c).inst
    return emit(Opcode.CALL, x.aval, [x, w], called=[b.comp])


def _rng_bits(state: Any) -> Any:
    """(new state, u32[3] bits) of HLO `rng-bit-generator`."""
    from xlc.frontend.tracer import as_tracer, emit
    from xlc.hlo.shape import Shape

    s = as_tracer(state)
    shape = Shape.tuple_of([s.aval, Shape.array("u32", (3,))])
    r = emit(Opcode.RNG_BIT_GENERATOR, shape, [s], {"algorithm": "rng_three_fry"})
    return xl.get_tuple_element(r, 0), xl.get_tuple_element(r, 1)


def test_call_and_rng_bit_generator() -> None:
    check(_call_sin_times, (_f32(B, 4), _f32(4)), (0, None))
    check(_call_sin_times, (_f32(4), _f32(B, 4)), (None, 0))
    states = np.array([[1, 2], [3, 4], [1, 2]], np.uint64)
    got = check(_rng_bits, (states,))
    assert (got[1][0] == got[1][2]).all() and (got[1][0] != got[1][1]).any()


# ---- axes, nesting and composition --------------------------------------------------------------
def test_in_axes_and_out_axes_variants() -> None:
    def f(p: Any, x: Any) -> Any:
        return {"y": x @ p["w"] + p["b"], "n": xnp.sum(p["w"])}
    p = {"w": _f32(3, 2), "b": _f32(B, 2)}
    check(f, (p, _f32(3, B)), ({"w": None, "b": 0}, -1), {"y": 1, "n": None})
    check(lambda x, y: (x * y, x - y), (_f32(4, B), _f32(B, 4)), [-1, 0], (-1, 1))
    check(lambda t: t[0] + t[1], ((_f32(B, 2), _f32(2, B)),), ((0, 1),))
    # no mapped argument: axis_size gives the batch size, outputs are broadcast
    got = _run(xlc.vmap(lambda x: x * 2, in_axes=None, axis_size=3), np.float32(1.5))
    assert_close(got, np.full(3, 3.0, np.float32))
    # keyword arguments map over axis 0
    got = _run(lambda x, y: xlc.vmap(lambda a, b: a - b)(x, b=y), _f32(B, 2), _f32(B, 2))
    assert got.shape == (B, 2)


def test_nested_vmap_equals_double_loop() -> None:
    def f(x: Any, y: Any) -> Any:
        return xnp.dot(x, y) + xnp.max(x)
    x, y = _f32(B, 4, 5), _f32(4, 5)
    got = _run(xlc.vmap(xlc.vmap(f, (0, None)), (2, None), 1), x, y)
    per = xlc.jit(f, backend="interpreter")
    want = np.stack([np.stack([per(x[i, :, j], y) for i in range(B)]) for j in range(5)],
                    axis=1)
    assert_close(got, want, atol=1e-5)
    # an inner function closing over the outer example
    outer = _run(xlc.vmap(lambda a: xlc.vmap(lambda b: a * b)(y[0])), x[:, 0])
    assert_close(outer, x[:, 0, None, :] * y[0][None, :, None], atol=1e-6)


def test_vmap_inside_jit_closing_over_outer_values_on_the_cpu() -> None:
    @xlc.jit
    def f(x: Any, w: Any) -> Any:
        s = xnp.sum(w)
        return xlc.vmap(lambda r: xnp.tanh(r @ w) * s)(x)
    x, w = _f32(B, 3), _f32(3, 2)
    assert_close(f(x, w), np.stack([_run(lambda r: xnp.tanh(r @ w) * w.sum(), r) for r in x]),
                 1e-5, 1e-5)


def test_jit_inside_vmap_and_outside_a_trace() -> None:
    inner = xlc.jit(lambda v: v * xnp.arange(2.0, dtype=xnp.float32))
    f = xlc.vmap(lambda v: inner(v) + 1)
    assert_close(f(np.ones((B, 2), np.float32)), np.tile([1.0, 2.0], (B, 1)).astype("f4"))


def test_vmap_of_grad_gives_per_example_gradients() -> None:
    def loss(w: Any, x: Any, y: Any) -> Any:
        return xnp.mean((xnp.tanh(x @ w) - y) ** 2)
    w, x, y = _f32(3, 2), _f32(B, 4, 3), _f32(B, 4, 2)
    got = _run(xlc.vmap(xlc.grad(loss), (None, 0, 0)), w, x, y)
    want = np.stack([_run(xlc.grad(loss), w, x[i], y[i]) for i in range(B)])
    assert_close(got, want, 1e-5, 1e-5)
    jax = pytest.importorskip("jax")
    jl = jax.vmap(jax.grad(lambda w, x, y: jax.numpy.mean((jax.numpy.tanh(x @ w) - y) ** 2)),
                  (None, 0, 0))(w, x, y)
    assert_close(got, np.asarray(jl), 1e-5, 1e-5)


def test_grad_of_vmap() -> None:
    def f(x: Any) -> Any:
        return xnp.sum(xlc.vmap(lambda r: xnp.sin(r) * xnp.sum(r))(x))
    x = _f32(B, 3)
    g = _run(xlc.grad(f), x)
    s = x.sum(1, keepdims=True)
    assert_close(g, np.cos(x) * s + np.sin(x).sum(1, keepdims=True), 1e-5, 1e-5)
    # stop_gradient inside the vmapped function still stops
    g2 = _run(xlc.grad(lambda x: xnp.sum(xlc.vmap(lambda r: r * xlc.stop_gradient(r))(x))), x)
    assert_close(g2, x, 1e-6, 1e-6)


def test_unbatched_values_stay_unbatched() -> None:
    def f(x: Any, w: Any) -> Any:
        return x * xnp.sum(xnp.exp(w) @ w.T)
    x, w = _f32(B, 4), _f32(4, 4)
    text = xlc.jit(xlc.vmap(f, (0, None)), backend="interpreter").lower(x, w).as_text()
    for op in ("exponential", "dot", "reduce", "transpose"):
        shapes = re.findall(rf"= (f32\[[0-9,]*\])\S* {op}\(", text)
        assert shapes and all(f"[{B}," not in s for s in shapes), (op, shapes, text)
    check(f, (x, w), (0, None))


# ---- errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize("f, args, kw, match", [
    (lambda x, y: x + y, (np.ones(3), np.ones(4)), {}, r"inconsistent sizes for array axes"
                                                       r"(.|\n)*argument y"),
    (lambda x: x, (np.ones(3),), {"in_axes": 1}, r"along axis 1, which implies that its rank "
                                                  r"should be at least 2, but is only 1"),
    (lambda x: x, (np.ones(3),), {"in_axes": (0, 0)}, r"len\(in_axes\)=2, len\(args\)=1"),
    (lambda p: p[0], ((np.ones(3), np.ones(3)),), {"in_axes": ((0, 0, 0),)},
     r"in_axes specification must be a tree prefix"),
    (lambda x: x, (np.ones(3),), {"in_axes": None}, r"at least one non-None value in in_axes"),
    (lambda x: x, (np.ones(3),), {"out_axes": None}, r"mapped output but out_axes is None"),
    (lambda x: x, (np.ones(3),), {"out_axes": 2}, r"out_axes 2 is out of range"),
    (lambda x: x, (np.ones(3),), {"in_axes": "0"}, r"in_axes must be an int, None"),
    (lambda x: x, (np.ones(3),), {"axis_size": 4}, r"axis_size is 4"),
])
def test_errors(f: Callable[..., Any], args: tuple, kw: dict, match: str) -> None:
    with pytest.raises(TraceError, match=match):
        _run(xlc.vmap(f, **kw), *args)


def test_batched_reduce_init_value_is_refused() -> None:
    with pytest.raises(TraceError, match="init value that depends on the mapped axis"):
        _run(xlc.vmap(lambda x, i: xl.reduce(x, i, lambda a, b: a + b, [0])),
             _f32(B, 3), _f32(B))


# ---- the table -----------------------------------------------------------------------------------
def test_every_opcode_has_a_rule_or_a_reason() -> None:
    assert not set(BATCH_RULES) & set(NO_RULE)
    assert set(BATCH_RULES) | set(NO_RULE) == set(Opcode)
    assert all(isinstance(r, str) and len(r) > 20 for r in NO_RULE.values())
    assert ALWAYS <= set(BATCH_RULES)
    # every opcode the frontend emits with operands has a rule; those without one are leaves
    frontend = Path(xlc.__file__).parent / "frontend"
    emitted = {Opcode[m] for p in frontend.glob("*.py") if not p.name.startswith("vmap")
               for m in re.findall(r"emit\(\s*Opcode\.([A-Z_0-9]+)\b", p.read_text())}
    assert {Opcode.DOT, Opcode.GATHER, Opcode.WHILE, Opcode.CUSTOM_CALL} <= emitted
    assert {op for op in emitted if op not in BATCH_RULES} <= {Opcode.CONSTANT, Opcode.IOTA}
    assert all(op in BATCH_RULES for op in Opcode if op.is_elementwise)


# ---- property test ------------------------------------------------------------------------------
@settings(max_examples=12, deadline=None)
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=3), n=st.integers(1, 3),
       data=st.data())
def test_random_shapes_and_axes(shape: list[int], n: int, data: Any) -> None:
    """Elementwise math with an unbatched operand and an optional reduction, over random
    per-example shapes, batch sizes, in_axes and out_axes (negative ones too)."""
    rank = len(shape)
    axis = data.draw(st.integers(-rank - 1, rank), label="in_axis")
    red = data.draw(st.sampled_from([None, *range(rank)]), label="reduced")
    out_rank = rank + 1 - (red is not None)
    out = data.draw(st.integers(-out_rank, out_rank - 1), label="out_axis")

    def f(x: Any, y: Any) -> Any:
        z = xnp.tanh(x) * y + x[..., :1]
        return xnp.sum(z, axis=red) if red is not None else z
    full = list(shape)
    full.insert(axis % (rank + 1), n)
    x = RNG.standard_normal(full).astype(np.float32)
    y = RNG.standard_normal(shape).astype(np.float32)
    got = _run(xlc.vmap(f, (axis, None), out), x, y)
    assert_close(got, loop(f, (x, y), (axis % (rank + 1), None), out % out_rank, n), atol=1e-5)
