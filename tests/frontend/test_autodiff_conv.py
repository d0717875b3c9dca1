"""Derivatives of convolutions (strides, padding, lhs/rhs dilation, feature and batch groups,
layouts), reduce-window (sum, max/min pooling with dilations, products, arbitrary and
two-operand reducers) and select-and-scatter (grad of grad of max pooling), first and second
order, against finite differences and jax.grad (see `autodiff_harness.py`).

Each convolution case differentiates input and kernel at once: x is both, flattened and
concatenated, so the Hessian-vector products include the input-kernel cross terms."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import xlc.lax
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xlc
from tests.frontend.autodiff_cases import Case
from tests.frontend.autodiff_harness import check, inputs, x64_jax, xlc_run


@pytest.fixture(scope="module")
def jax_x64() -> Iterator[Any]:
    """jax with x64 enabled for this module's tests, or None without jax."""
    with x64_jax() as jax:
        yield jax


def conv_case(lhs: tuple[int, ...], rhs: tuple[int, ...], **kw: Any) -> Case:
    """conv_general_dilated(lhs, rhs, **kw), both cut from one flat x."""
    n = int(np.prod(lhs))

    def call(f: Any, x: Any, ns: Any) -> Any:
        a = ns.np.reshape(x[:n], lhs)
        b = ns.np.reshape(x[n:], rhs)
        return ns.lax.conv_general_dilated(a, b, **kw)

    return Case(call, (n + int(np.prod(rhs)),), -1.0, 1.0)


CONV: dict[str, Case] = {
    "conv:valid": conv_case((2, 3, 6, 5), (4, 3, 3, 2), window_strides=(1, 1), padding="VALID"),
    "conv:stride_pad": conv_case((2, 3, 7, 6), (4, 3, 3, 2), window_strides=(2, 3),
                                 padding=[(1, 2), (0, 1)]),
    "conv:same": conv_case((1, 2, 5, 6), (3, 2, 3, 3), window_strides=(2, 2), padding="SAME"),
    "conv:dilations": conv_case((1, 2, 9, 8), (3, 2, 2, 3), window_strides=(2, 1),
                                padding=[(1, 2), (2, 0)], lhs_dilation=(2, 1),
                                rhs_dilation=(1, 2)),
    "conv:feature_groups": conv_case((2, 4, 6, 5), (6, 2, 3, 2), window_strides=(1, 2),
                                     padding="SAME", feature_group_count=2),
    "conv:depthwise": conv_case((1, 3, 5, 5), (6, 1, 2, 2), window_strides=(1, 1),
                                padding="VALID", feature_group_count=3),
    "conv:batch_groups": conv_case((4, 3, 6, 5), (6, 3, 3, 2), window_strides=(1, 1),
                                   padding="VALID", batch_group_count=2),
    "conv:nhwc": conv_case((2, 6, 5, 3), (3, 2, 3, 4), window_strides=(1, 2), padding="SAME",
                           dimension_numbers=("NHWC", "HWIO", "NHWC")),
    "conv:1d": conv_case((2, 3, 9), (4, 3, 3), window_strides=(2,), padding=[(2, 1)],
                         rhs_dilation=(2,)),
    "conv:3d": conv_case((1, 2, 4, 3, 4), (2, 2, 2, 2, 3), window_strides=(1, 2, 1),
                         padding=[(0, 1), (1, 0), (1, 1)]),
    "conv:negative_pad": conv_case((1, 2, 5, 4), (2, 2, 2, 2), window_strides=(1, 1),
                                   padding=[(3, 1), (-1, 2)]),
}


def window_case(init: float, op: str, win: tuple[int, ...], strides: tuple[int, ...],
                pad: Any, base: Any = None, wdil: Any = None, jax: bool = True) -> Case:
    """reduce_window of a 6x7 input with reducer `op` (a jax.lax / xlc.lax name)."""
    def call(f: Any, x: Any, ns: Any) -> Any:
        return ns.lax.reduce_window(x, init, getattr(ns.lax, op), win, strides, pad, base, wdil)
    return Case(call, (6, 7), jax="" if jax else None)


def _logaddexp(ns: Any) -> Any:
    return lambda a, b: ns.np.logaddexp(a, b)


def _gather_pool(f: Any, x: Any, ns: Any) -> Any:
    """select_and_gather_add (the transpose of select-and-scatter, a two-operand
    reduce-window) of x * x at the maxima of x's 2x2 windows."""
    from xlc.frontend import lax_autodiff_ops as ops
    from xlc.frontend.staging import trace_scalar_computation

    select, _ = trace_scalar_computation("select", lambda a, b: ns.np.greater_equal(a, b),
                                         [x.ptype, x.ptype], "select")
    window = ops.window_of((2, 2), (1, 2), [(0, 1), (1, 0)])
    return ops.select_and_gather_add(x * x, x, select, window)


WINDOWS: dict[str, Case] = {
    "window:sum_dilated": window_case(0.0, "add", (2, 3), (2, 1), [(1, 0), (2, 1)], (2, 1),
                                      (1, 2)),
    "window:sum_base_dilated": window_case(0.0, "add", (3, 2), (1, 2), [(0, 1), (1, 1)],
                                           (2, 2)),
    "window:max_same": window_case(-np.inf, "max", (2, 3), (2, 2), "SAME"),
    "window:max_base_dilated": window_case(-np.inf, "max", (2, 2), (1, 2), "VALID", (2, 1)),
    "window:min_valid": window_case(np.inf, "min", (3, 2), (1, 1), "VALID"),
    # jax has no reverse-mode rule for these
    "window:max_window_dilated": window_case(-np.inf, "max", (2, 2), (1, 1), "VALID", None,
                                             (2, 3), jax=False),
    "window:mul": window_case(1.0, "mul", (2, 2), (1, 2), [(0, 1), (1, 0)], jax=False),
    "window:logaddexp": Case(lambda f, x, ns: xlc.lax.reduce_window(
        x, -np.inf, _logaddexp(ns), (3, 2), (2, 1), "SAME"), (6, 7), jax=None),
    "window:select_and_gather": Case(_gather_pool, (6, 7), jax=None),
    "window:cumlogsumexp_3d": Case(lambda f, x, ns: ns.lax.cumlogsumexp(x, axis=1),
                                   (2, 5, 3)),
}


@pytest.mark.parametrize("group", [CONV, WINDOWS], ids=["conv", "windows"])
def test_gradients(group: dict[str, Case], jax_x64: Any) -> None:
    problems = check(sorted(group), jax_x64, cases=group)
    assert not problems, "\n".join(problems)


def test_grad_of_grad_of_max_pooling_on_the_cpu_backend() -> None:
    """Second derivatives through select-and-scatter (the first derivative of max pooling)
    compiled by the CPU backend agree with the evaluator."""
    keys = ["window:max_same", "window:max_base_dilated", "conv:stride_pad"]
    cases = {**CONV, **WINDOWS}
    data = [inputs(k, cases[k]) for k in keys]
    cpu = xlc_run(keys, data, "cpu", cases)
    ref = xlc_run(keys, data, "evaluator", cases)
    for key, a, b in zip(keys, cpu, ref):
        for u, w in zip(a, b):
            np.testing.assert_allclose(u, w, rtol=1e-10, atol=1e-12, err_msg=key)


@st.composite
def conv_configs(draw: Any) -> tuple[tuple[int, ...], tuple[int, ...], dict[str, Any]]:
    """A random 2-D convolution whose output is not empty."""
    groups = draw(st.sampled_from([1, 1, 2]))
    batch_groups = draw(st.sampled_from([1, 2])) if groups == 1 else 1
    n = draw(st.integers(1, 2)) * batch_groups
    c = draw(st.integers(1, 2)) * groups
    o = draw(st.integers(1, 2)) * groups * batch_groups
    size = [draw(st.integers(3, 6)) for _ in range(2)]
    k = [draw(st.integers(1, 3)) for _ in range(2)]
    strides = tuple(draw(st.integers(1, 2)) for _ in range(2))
    ld = tuple(draw(st.integers(1, 2)) for _ in range(2))
    rd = tuple(draw(st.integers(1, 2)) for _ in range(2))
    pads = [(draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(2)]
    for i in range(2):
        span = (size[i] - 1) * ld[i] + 1 + sum(pads[i])
        if span < (k[i] - 1) * rd[i] + 1:
            pads[i] = (pads[i][0], pads[i][1] + (k[i] - 1) * rd[i] + 1 - span)
    kw = dict(window_strides=strides, padding=pads, lhs_dilation=ld, rhs_dilation=rd,
              feature_group_count=groups, batch_group_count=batch_groups)
    return (n, c, *size), (o, c // groups, *k), kw


@settings(max_examples=8, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(config=conv_configs())
def test_convolution_gradients_over_configurations(config: Any, jax_x64: Any) -> None:
    lhs, rhs, kw = config
    cases = {"conv:drawn": conv_case(lhs, rhs, **kw)}
    problems = check(["conv:drawn"], jax_x64, cases=cases)
    assert not problems, f"{lhs} {rhs} {kw}: {problems}"
