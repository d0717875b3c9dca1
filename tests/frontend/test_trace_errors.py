"""Trace errors: Python control flow / conversions on traced values and shape errors, each
pointing at the user's file:line. The messages are API."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
import xlc.lax as lax
import xlc.numpy as xnp

import xlc

X = np.ones((2, 3), np.float32)
HINT = (r"its value is not known while tracing\. Use xlc\.lax\.cond / xlc\.lax\.switch for "
        r"value-dependent branches, xlc\.lax\.while_loop / xlc\.lax\.fori_loop for loops, or "
        r"mark the argument static with static_argnums")


def at_line(fn, offset):
    """`(at <this file>:<line>)` for the line `offset` lines below `def fn`."""
    line = inspect.getsourcelines(fn)[1] + offset
    return rf" \(at {__file__}:{line}\)$"


def test_python_if_on_traced_value():
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    msg = r"^Python control flow \(if/while/and/or/bool\(\)\) of a traced value pred\[\]: "
    with pytest.raises(xlc.TraceError, match=msg + HINT + at_line(f, 1)):
        xlc.jit(f)(X)


def test_python_while_on_traced_value():
    def f(x):
        while x.max() < 10:
            x = x * 2
        return x

    with pytest.raises(xlc.TraceError, match=r"^Python control flow .* of a traced value "
                                             r"pred\[\]: .*xlc\.lax\.while_loop.*" + at_line(f, 1)):
        xlc.jit(f)(X)


@pytest.mark.parametrize("conv, what", [(int, r"int\(\)"), (float, r"float\(\)"),
                                        (bool, r"Python control flow \(if/while/and/or/bool\(\)\)"),
                                        (np.asarray, r"np\.asarray\(\)/numpy conversion")])
def test_conversions(conv, what):
    def f(x):
        return conv(x[0, 0])

    shape = r"f32\[\]"
    with pytest.raises(xlc.TraceError, match=rf"^{what} of a traced value {shape}: " + HINT
                       + at_line(f, 1)):
        xlc.jit(f)(X)


def test_len_and_iteration():
    def f(x):
        return len(x) + len(x[0]) + sum(1 for _ in x), len(x[0, 0])

    with pytest.raises(xlc.TraceError, match=r"^len\(\) of an unsized \(rank-0\) traced value "
                                             r"f32\[\]" + at_line(f, 1)):
        xlc.jit(f)(X)
    g = xlc.jit(lambda x: len(x) + len(x[0]) + sum(1 for _ in x) + x[0, 0])
    assert g(X) == np.float32(2 + 3 + 2 + 1)


def test_index_with_traced_value_in_python_range():
    def f(x, n):
        return x[: int(n)]

    with pytest.raises(xlc.TraceError, match=r"^int\(\) of a traced value s32\[\]"):
        xlc.jit(f)(X, 1)
    assert xlc.jit(f, static_argnums=1)(X, 1).shape == (1, 3)


def test_broadcast_shape_error_names_op_shapes_and_line():
    def f(x, y):
        return x * y

    with pytest.raises(xlc.TraceError, match=r"^multiply: shapes cannot be broadcast together: "
                                             r"f32\[2,3\] and f32\[4\]" + at_line(f, 1)):
        xlc.jit(f)(X, np.ones(4, np.float32))


def test_shape_inference_errors_are_trace_errors_at_user_line():
    def f(x):
        return lax.dynamic_slice(x, (0,), (1,))

    with pytest.raises(xlc.TraceError, match=r"dynamic-slice: .*f32\[2,3\].*" + at_line(f, 1)):
        xlc.jit(f)(X)

    def g(x):
        return lax.broadcast_in_dim(x, (4, 3), (0, 1))

    with pytest.raises(xlc.TraceError, match=r"^broadcast: .*f32\[2,3\].*" + at_line(g, 1)):
        xlc.jit(g)(X)


def test_other_shape_errors():
    cases = [
        (lambda x: x.reshape(5), r"^reshape: cannot reshape f32\[2,3\] into shape \(5,\)"),
        (lambda x: xnp.concatenate([x, x[0]]),
         r"^concatenate: shapes must match except along axis 0, got f32\[2,3\] and f32\[3\]"),
        (lambda x: xnp.stack([x, x.T]),
         r"^stack: all arrays must have the same shape, got f32\[2,3\] and f32\[3,2\]"),
        (lambda x: xnp.transpose(x, (0, 0)),
         r"^transpose: axes \(0, 0\) are not a permutation of the dims of f32\[2,3\]"),
        (lambda x: xnp.squeeze(x, 0), r"^squeeze: cannot squeeze axis 0 of size 2 of f32\[2,3\]"),
        (lambda x: xnp.broadcast_to(x, (3, 3)),
         r"^broadcast_to: cannot broadcast f32\[2,3\] to shape \[3, 3\]"),
        (lambda x: x & x, r"^bitwise_and: needs integer or bool operands, got f32\[2,3\] and "
                          r"f32\[2,3\]"),
        (lambda x: xnp.where(x > 0), r"^where\(condition\) with one argument has a "
                                     r"data-dependent shape"),
        (lambda x: xnp.arange(x[0, 0]), r"^arange: start/stop/step must be static Python "
                                        r"numbers, got a traced value"),
    ]
    for fn, msg in cases:
        with pytest.raises(xlc.TraceError, match=msg + r".* \(at .*test_trace_errors\.py:\d+\)$"):
            xlc.jit(fn)(X)


def test_escaped_tracer():
    leaked = []
    xlc.jit(lambda x: leaked.append(x) or x)(X)
    with pytest.raises(xlc.TraceError, match=r"^a traced value f32\[2,3\] escaped from the "
                                             r"function that created it"):
        xlc.jit(lambda y: y + leaked[0])(X)


def test_outputs_must_be_arrays():
    with pytest.raises(xlc.TraceError, match=r"^function lambda returned a str at output "
                                             r"\[1\]; only arrays, scalars and "
                                             r"tuples/lists/dicts of them can be returned"):
        xlc.jit(lambda x: (x, "label"))(X)
