"""@xlc.jit: pytrees, static/donated arguments, the signature cache, lower/compile stages,
xlc.compile on HLO text, metadata, and ArgumentError messages."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
import xlc.numpy as xnp

import xlc
from tests.frontend.helpers import assert_close
from xlc.hlo.ir import IOAlias

X = np.arange(6, dtype=np.float32).reshape(2, 3)


def test_pytrees_in_and_out():
    @xlc.jit
    def f(params, xs, extra=None):
        w, b = params["w"], params["b"]
        return {"y": [xs[0] @ w + b, xs[1] * 2], "none": None, "t": (w.sum(),)}

    w = np.ones((3, 2), np.float32)
    b = np.array([1, 2], np.float32)
    got = f({"w": w, "b": b}, (X, np.int32(4)))
    assert_close(got, {"y": [X @ w + b, np.int32(8)], "none": None, "t": (np.float32(6),)})


def test_decorator_with_arguments_and_static_argnums():
    calls = []

    @xlc.jit(static_argnums=(1,), static_argnames=("mode",))
    def f(x, n, mode="sum"):
        calls.append((n, mode))
        y = x * n
        return y.sum() if mode == "sum" else y.max()

    assert_close(f(X, 3), np.float32(X.sum() * 3))
    assert_close(f(X, 3), np.float32(X.sum() * 3))
    assert_close(f(X, 2, mode="max"), np.float32(X.max() * 2))
    assert calls == [(3, "sum"), (2, "max")]
    assert f.cache_info() == {"hits": 1, "misses": 2, "size": 2}


def test_cache_is_per_signature():
    traces = []

    @xlc.jit
    def f(x, s):
        traces.append(1)
        return x * s

    f(X, 2.0)
    f(X + 1, 3.0)  # same signature: python floats are weak f32 by dtype, not value
    f(X.astype(np.float64), 2.0)  # new dtype
    f(X[0], 2.0)  # new shape
    f(X, np.float32(2.0))  # strong f32 scalar differs from weak python float
    assert len(traces) == 4
    assert f.cache_info()["hits"] == 1


def test_static_by_name_from_signature_and_kwargs():
    @xlc.jit(static_argnames="k")
    def f(x, k):
        return x[:, :k]

    assert_close(f(X, 2), X[:, :2])
    assert_close(f(X, k=1), X[:, :1])


def test_python_scalars_are_weak():
    f = xlc.jit(lambda x, s: (x * s, x * 2, s * 2))
    out = f(X, 3)
    assert out[0].dtype == np.float32 and out[1].dtype == np.float32
    assert out[2].dtype == np.int32


def test_lower_with_shape_dtype_and_compile():
    f = xlc.jit(lambda a, b: xnp.tanh(a) + b)
    lowered = f.lower(xlc.ShapeDtype((2, 3), np.float32), xlc.ShapeDtype((3,), "f32"))
    text = lowered.as_text()
    assert text.startswith("HloModule jit_lambda")
    assert "tanh(" in text and "parameter(1)" in text
    compiled = lowered.compile()
    assert [s.to_text(layout=False) for s in compiled.input_shapes] == ["f32[2,3]", "f32[3]"]
    assert_close(compiled(X, np.ones(3, np.float32)), np.tanh(X) + 1, rtol=1e-6)
    optimized = compiled.as_text()
    assert optimized.startswith("HloModule jit_lambda, is_scheduled=true")
    assert compiled.module is lowered.module and lowered.as_text() == text  # untouched
    stats = compiled.memory_stats()
    assert stats["parameter_bytes"] == 4 * 9 and stats["output_bytes"] == 4 * 6
    assert set(stats) >= {"temp_bytes", "constant_bytes", "peak_bytes"}
    assert isinstance(compiled.buffer_assignment_report(), str)


def test_compiled_rejects_wrong_arguments():
    c = xlc.jit(lambda x, y: x + y).lower(X, X).compile()
    with pytest.raises(xlc.ArgumentError, match=r"^lambda: expected 2 positional arguments, "
                                                r"got 1$"):
        c(X)
    with pytest.raises(xlc.ArgumentError, match=r"^lambda: argument 1 \('y'\): expected "
                                                r"f32\[2,3\], got f32\[3,2\]$"):
        c(X, X.T.copy())
    with pytest.raises(xlc.ArgumentError, match=r"^lambda: argument 0 \('x'\): expected "
                                                r"f32\[2,3\], got s32\[2,3\]$"):
        c(X.astype(np.int32), X)
    d = xlc.jit(lambda p: p["a"] * 2).lower({"a": X}).compile()
    with pytest.raises(xlc.ArgumentError, match=r"^lambda: argument 0 \('p'\) has pytree "
                                                r"structure \{'b': \*\}, expected \{'a': \*\}$"):
        d({"b": X})
    e = xlc.jit(lambda p: p[1]).lower((X, X)).compile()
    with pytest.raises(xlc.ArgumentError, match=r"^lambda: argument 0 \('p'\)\[1\]: expected "
                                                r"f32\[2,3\], got f32\[3\]$"):
        e((X, X[0]))


def test_unsupported_and_unhashable_arguments():
    with pytest.raises(xlc.ArgumentError, match=r"^lambda: argument 0 \('x'\): unsupported "
                                                r"argument type str"):
        xlc.jit(lambda x: x)("hello")
    with pytest.raises(xlc.ArgumentError, match=r"^f: static argument 1 must be hashable, got "
                                                r"unhashable list \[1, 2\]"):
        def f(x, n):
            return x
        xlc.jit(f, static_argnums=1)(X, [1, 2])
    with pytest.raises(xlc.ArgumentError, match=r"ShapeDtype arguments are only accepted by "
                                                r"lower\(\)"):
        xlc.jit(lambda x: x)(xlc.ShapeDtype((2,), np.float32))


def test_donate_argnums_records_input_output_alias():
    def step(params, grads, lr):
        return params - lr * grads, grads.sum()

    f = xlc.jit(step, donate_argnums=(0,))
    low = f.lower(X, X, 0.1)
    assert low.module.input_output_alias == [IOAlias((0,), 0, ())]
    assert "input_output_alias={ {0}: (0, {}, may-alias) }" in low.as_text()
    assert_close(f(X, X, 0.5), (X - 0.5 * X, np.float32(X.sum())))
    g = xlc.jit(lambda a, b: a * 2, donate_argnums=1)
    assert g.lower(X, X).module.input_output_alias == [IOAlias((), 1, ())]
    h = xlc.jit(lambda a: a.sum(), donate_argnums=0)  # no matching output: nothing aliased
    assert h.lower(X).module.input_output_alias == []


def test_metadata_points_at_user_line():
    def f(x):
        return x + 1.0  # the line recorded in metadata

    line = inspect.getsourcelines(f)[1] + 1
    text = xlc.jit(f).lower(X).as_text()
    assert f'op_name="jit(f)/add" source_file="{__file__}" source_line={line}' in text


def test_compile_hlo_text_and_module():
    text = """HloModule m

ENTRY main {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  s = f32[3] add(a, b)
  ROOT t = (f32[3], f32[3]) tuple(s, a)
}
"""
    c = xlc.compile(text)
    x = np.arange(3, dtype=np.float32)
    got = c(x, x)
    assert isinstance(got, tuple)
    assert_close(got, (2 * x, x))
    with pytest.raises(xlc.ArgumentError, match=r"^m: argument 1: expected f32\[3\], got "
                                                r"f32\[4\]$"):
        c(x, np.zeros(4, np.float32))
    lowered = xlc.jit(lambda a: a * 3).lower(x)
    assert_close(xlc.compile(lowered.module)(x), 3 * x)


def test_backends():
    from xlc.backend_gpu.runtime import primary_context

    f = xlc.jit(lambda x: x * 2, backend="gpu")
    compiled = f.lower(X).compile()  # compiling needs no GPU
    assert compiled.backend == "gpu" and ".entry" in compiled._exe.ptx
    try:
        primary_context()
    except xlc.XlcError:  # no GPU here: running is a clear error (tests/backend_gpu for more)
        with pytest.raises(xlc.XlcError, match=r"^no CUDA device available: "):
            f(X)
    else:
        assert_close(f(X), X * 2)
    with pytest.raises(xlc.ArgumentError, match=r"unknown backend 'tpu' \(known: cpu, gpu, "
                                                r"interpreter\)"):
        xlc.jit(lambda x: x, backend="tpu")
    with pytest.raises(xlc.ArtifactError, match=r"model.xlc: no such file"):
        xlc.load("model.xlc")


def test_nested_jit_inlines_and_constants_as_outputs():
    inner = xlc.jit(lambda a: a * 2)
    f = xlc.jit(lambda a: (inner(a) + 1, 5, np.float32(1.5)))
    assert_close(f(X), (X * 2 + 1, np.int32(5), np.float32(1.5)))


def test_public_namespace():
    import xlc.lax
    import xlc.nn
    import xlc.numpy as xnp2

    assert xnp2 is xlc.numpy and xlc.lax.cond is not None and xlc.nn.relu is not None
    assert xlc.__version__ == "0.1.0"
    assert issubclass(xlc.TraceError, xlc.XlcError) and xlc.errors.ShapeError
    assert xlc.CompileOptions().backend == "cpu"


def test_traced_module_round_trips_through_hlo_text():
    import xlc.lax as lax
    import xlc.nn as nn

    from xlc.hlo.evaluator import evaluate
    from xlc.hlo.parser import parse_module
    from xlc.hlo.printer import print_module

    def f(x, i):
        y = lax.fori_loop(0, 2, lambda k, c: lax.cond(c.sum() > 0, lambda: c * 0.5,
                                                      lambda: c + 1.0), x)
        z = y.at[i].add(1.0)[np.array([1, 0])]
        s = xnp.sort(z, axis=1) + xnp.cumsum(z, axis=0) + xnp.argmax(z, axis=0)
        img = lax.conv(x[None, None], xnp.ones((1, 1, 2, 2)), (1, 1), "SAME")
        return (s, nn.softmax(img), lax.switch(i, [lambda: x[0], lambda: x[1]]),
                xnp.einsum("ij,kj->ik", x, x))

    args = [X, np.int32(1)]
    module = xlc.jit(f).lower(*args).module
    text = print_module(module)
    again = parse_module(text)
    assert print_module(again) == text
    for a, b in zip(evaluate(module, args), evaluate(again, args)):
        np.testing.assert_allclose(a, b)
