"""Bad arguments to `xlc.jit` and to jitted functions: each is an ArgumentError (or, inside a
trace, a TraceError at the user's line) saying which argument and why — never a bare TypeError
or OverflowError, and never a silently wrapped value."""
from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
import xlc.numpy as xnp

import xlc

X = np.ones((2, 3), np.float32)


def at_line(fn, offset: int) -> str:
    """`(at <this file>:<line>)` as a regex, for the line `offset` lines below `def fn`."""
    line = inspect.getsourcelines(fn)[1] + offset
    return re.escape(f"(at {__file__}:{line})") + "$"


def test_wrong_number_of_arguments_to_a_jitted_function() -> None:
    def f(x, y):
        return x + y

    g = xlc.jit(f)
    with pytest.raises(xlc.ArgumentError, match=r"^f: missing a required argument: 'y'$"):
        g(X)
    with pytest.raises(xlc.ArgumentError, match=r"^f: too many positional arguments$"):
        g(X, X, X)
    with pytest.raises(xlc.ArgumentError, match=r"^f: got an unexpected keyword argument 'z'$"):
        g(X, y=X, z=X)
    with pytest.raises(xlc.ArgumentError, match=r"^f: missing a required argument: 'y'$"):
        g.lower(X)
    assert g.cache_info()["size"] == 0
    np.testing.assert_array_equal(g(X, y=X), 2 * X)


def test_jit_checks_static_and_donated_argument_numbers() -> None:
    def f(x, n=1):
        return x * n

    with pytest.raises(xlc.ArgumentError, match=r"^jit\(f\): static_argnums \[2\] out of "
                                                r"range: the function takes 2 positional"):
        xlc.jit(f, static_argnums=2)
    with pytest.raises(xlc.ArgumentError, match=r"^jit\(f\): donate_argnums \[-3\] out of "
                                                r"range"):
        xlc.jit(f, donate_argnums=-3)
    with pytest.raises(xlc.ArgumentError, match=r"^jit\(f\): static_argnames \['m'\] name no "
                                                r"parameter of the function \(it has "
                                                r"\['n', 'x'\]\)$"):
        xlc.jit(f, static_argnames=("n", "m"))
    with pytest.raises(xlc.ArgumentError, match=r"^jit\(f\): argument\(s\) \[-1\] are both "
                                                r"static and donated"):
        xlc.jit(f, static_argnames="n", donate_argnums=-1)
    with pytest.raises(xlc.ArgumentError, match=r"^jit: expected a function, got int 3$"):
        xlc.jit(3)  # type: ignore[arg-type]

    def varargs(*xs, **kw):
        return xs[0] * kw["k"]

    h = xlc.jit(varargs, static_argnums=1, static_argnames="k")  # nothing to check against
    np.testing.assert_array_equal(h(X, 7, k=2), 2 * X)


def test_python_int_arguments_must_fit_s32() -> None:
    f = xlc.jit(lambda x, n: x * n)
    with pytest.raises(xlc.ArgumentError, match=r"^lambda: argument 1 \('n'\): Python int "
                                                r"1099511627776 does not fit in s32, the type "
                                                r"of Python int arguments; pass a numpy value "
                                                r"such as np\.int64\(1099511627776\)$"):
        f(X, 2**40)
    assert f(np.int64(3), np.int64(2**40)) == 3 * 2**40


def test_shape_dtype_validates() -> None:
    with pytest.raises(xlc.ArgumentError, match=r"^unsupported dtype 'float99': expected a "
                                                r"numpy dtype or type name"):
        xlc.ShapeDtype((2,), "float99")
    with pytest.raises(xlc.ArgumentError, match=r"^ShapeDtype: dimensions must be >= 0, got "
                                                r"\(2, -1\)$"):
        xlc.ShapeDtype((2, -1), np.float32)
    with pytest.raises(xlc.ArgumentError, match=r"^ShapeDtype: shape must be a sequence of "
                                                r"ints, got \(2\.5,\)$"):
        xlc.ShapeDtype((2.5,), np.float32)
    assert xlc.ShapeDtype([np.int64(2), 3], "bf16").shape == (2, 3)


def test_python_int_constants_never_wrap() -> None:
    def add_big(x):
        return x + 2**40

    with pytest.raises(xlc.TraceError, match=r"^Python int 1099511627776 does not fit in s32 "
                                             r"\(range -2147483648\.\.2147483647\), the type it "
                                             r"takes here; use an array of a wider integer type "
                       + at_line(add_big, 1)):
        xlc.jit(add_big)(np.int32(1))
    assert xlc.jit(add_big)(np.int64(1)) == 2**40 + 1  # fits s64: fine

    with pytest.raises(xlc.TraceError, match=r"^Python int -1 does not fit in u8 \(range "
                                             r"0\.\.255\)"):
        xlc.jit(lambda x: x + (-1))(np.uint8(1))
    with pytest.raises(xlc.TraceError, match=r"^Python int 300 does not fit in s8"):
        xlc.jit(lambda x: xnp.full((2,), 300, np.int8))(X)
    assert xlc.jit(lambda x: x + 255)(np.uint8(0)) == 255


def test_asarray_of_lists_checks_the_values() -> None:
    with pytest.raises(xlc.TraceError, match=r"^asarray: Python int 1099511627776 does not fit "
                                             r"in s32 \(range -2147483648\.\.2147483647\); pass "
                                             r"a dtype that holds it"):
        xlc.jit(lambda x: xnp.asarray([1, 2**40]) + x)(np.int32(0))
    got = xlc.jit(lambda x: xnp.asarray([1, 2**40], dtype=np.int64) + x)(np.int32(0))
    assert got.dtype == np.int64 and got.tolist() == [1, 2**40]
    with pytest.raises(xlc.TraceError, match=r"^asarray: Python int -1 does not fit in u8"):
        xlc.jit(lambda x: xnp.asarray([-1, 2], dtype=np.uint8))(X)
    with pytest.raises(xlc.TraceError, match=r"^asarray: cannot make a numeric array of "
                                             r"\[1, 1180591620717411303424\]"):
        xlc.jit(lambda x: xnp.asarray([1, 2**70]))(X)
    with pytest.raises(xlc.TraceError, match=r"^asarray: .*inhomogeneous"):
        xlc.jit(lambda x: xnp.asarray([[1], [2, 3]]))(X)


def test_unknown_dtype_is_a_trace_error_at_the_users_line() -> None:
    def f(x):
        return x.astype("float99")

    with pytest.raises(xlc.TraceError, match=r"^unsupported dtype 'float99': .*"
                       + at_line(f, 1)):
        xlc.jit(f)(X)


def test_index_arrays_that_do_not_broadcast() -> None:
    x = np.zeros((3, 3, 3), np.float32)
    with pytest.raises(xlc.TraceError, match=r"^index: shapes \[2\] and \[\] and \[3\] cannot be "
                                             r"broadcast together"):
        xlc.jit(lambda a: a[np.array([0, 1]), 0, np.array([0, 1, 2])])(x)
    with pytest.raises(xlc.TraceError, match=r"^index: shapes \[2\] and \[3\] cannot be "
                                             r"broadcast together"):
        xlc.jit(lambda a: a.at[np.array([0, 1]), np.array([0, 1, 2])].set(1.0))(x)


def test_sign_of_unsigned_integers() -> None:
    x = np.array([0, 1, 200], np.uint8)
    got = xlc.jit(xnp.sign, backend="interpreter")(x)
    assert got.dtype == np.uint8 and got.tolist() == [0, 1, 1]


def test_interpreter_backend_runs_the_evaluator() -> None:
    f = xlc.jit(lambda a, b: (a @ b.T, xnp.tanh(a).sum(axis=1)), backend="interpreter")
    compiled = f.lower(X, X).compile()
    assert compiled.backend == "interpreter"
    mm, th = compiled(X, X)
    np.testing.assert_allclose(mm, X @ X.T)
    np.testing.assert_allclose(th, np.tanh(X).sum(axis=1), rtol=1e-6)
    assert f(X, X)[0].shape == (2, 2) and f.cache_info() == {"hits": 0, "misses": 1, "size": 1}


# ---- the per-signature fast path -------------------------------------------------------------
def test_repeated_calls_build_no_shapes_or_labels(monkeypatch) -> None:
    """A signature checked once is called without avals, labels or Shape text (the checked
    path built a Shape and its text per argument per call: 22 us against jax.jit's 5)."""
    import xlc.api
    from xlc.hlo.shape import Shape

    f = xlc.jit(lambda p, x: x * p["a"] + p["b"][0])
    p = {"b": [X + 1], "a": X * 2}
    first = f(p, X)
    np.testing.assert_array_equal(f({"a": X * 2, "b": [X + 1]}, X), first)  # key order

    def forbidden(*args, **kwargs):
        raise AssertionError("the checked path ran for a known signature")

    for name in ("convert_arg", "leaf_aval", "leaf_labels"):
        monkeypatch.setattr(xlc.api, name, forbidden)
    monkeypatch.setattr(Shape, "array", forbidden)
    for _ in range(3):
        np.testing.assert_array_equal(f(p, X), first)
        np.testing.assert_array_equal(f({"a": X * 2, "b": [X + 1]}, X), first)  # key order
    assert f.cache_info() == {"hits": 7, "misses": 1, "size": 1}


def test_fast_path_keeps_signatures_apart() -> None:
    f = xlc.jit(lambda x, n: x * n, static_argnums=1)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    for _ in range(2):
        np.testing.assert_array_equal(f(a, 2), a * 2)
        np.testing.assert_array_equal(f(a, 3), a * 3)
        np.testing.assert_array_equal(f(a.astype(np.float64), 3), a * 3)
        assert f(a.astype(np.float64), 3).dtype == np.float64
        np.testing.assert_array_equal(f(a[:1], 2), a[:1] * 2)
        np.testing.assert_array_equal(f(a.T, 2), a.T * 2)  # a strided argument
    assert f.cache_info()["size"] == 5
    g = xlc.jit(lambda t: t[0] + (t[1] if t[1] is not None else 0))
    np.testing.assert_array_equal(g((a, None)), a)
    np.testing.assert_array_equal(g((a, a)), 2 * a)
    np.testing.assert_array_equal(g((a, None)), a)
    np.testing.assert_array_equal(g([a, a]), 2 * a)


def test_errors_are_unchanged_once_a_signature_is_known() -> None:
    f = xlc.jit(lambda x, n: x * n, static_argnums=1)
    f(X, 2)
    with pytest.raises(xlc.ArgumentError, match=r"^lambda: static argument 1 must be hashable, "
                       r"got unhashable list \[2\]"):
        f(X, [2])
    g = xlc.jit(lambda x, y: x + y)
    g(X, X)
    g(X, X)
    with pytest.raises(xlc.ArgumentError, match=r"^lambda: missing a required argument: 'y'$"):
        g(X)
    with pytest.raises(xlc.ArgumentError, match=r"^lambda: argument 1 \('y'\): unsupported "
                       r"dtype object"):
        g(X, X.astype(object))


def test_donation_through_the_fast_path() -> None:
    f = xlc.jit(lambda s: s * 2 + 1, donate_argnums=0)
    s = np.zeros((64, 64), np.float32)
    for k in range(4):
        s = f(s)
        np.testing.assert_array_equal(s, np.full((64, 64), 2.0 ** (k + 1) - 1, np.float32))


def test_fast_path_with_python_scalars(monkeypatch) -> None:
    """Weakly typed Python scalars take the fast path too: the signature is their type, the
    value is converted per call, and an int out of s32's range still gets its error."""
    import xlc.api

    f = xlc.jit(lambda x, lr, n, flag: xnp.where(flag, x * lr + n, x))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(f(a, 0.5, 2, True), a * 0.5 + 2)

    def forbidden(*args, **kwargs):
        raise AssertionError("the checked path ran for a known signature")

    with monkeypatch.context() as m:
        m.setattr(xlc.api, "leaf_labels", forbidden)
        for lr, n in ((0.25, 3), (-1.5, -7), (2.0, 0)):
            out = f(a, lr, n, True)
            assert out.dtype == np.float32
            np.testing.assert_allclose(out, a * np.float32(lr) + n)
    with pytest.raises(xlc.ArgumentError, match=r"^lambda: argument 2 \('n'\): Python int "
                       r"4294967296 does not fit in s32"):
        f(a, 0.5, 2 ** 32, True)
    np.testing.assert_allclose(f(a, 1, 2.5, True), a + 2.5)  # int lr, float n: new signature
    np.testing.assert_allclose(f(a, 1, 2.5, False), a)
    assert f.cache_info()["size"] == 2


def test_compiled_calls_take_the_fast_path_too(monkeypatch) -> None:
    """`Compiled.__call__` (from lower().compile(), xlc.compile or xlc.load) checks a numpy
    signature once; later calls with it skip the checks (Compiled called 25 us per tiny call,
    4 us now), and a different dtype, shape or a Python scalar still goes through them."""
    import xlc.api

    c = xlc.jit(lambda x, y: x + y).lower(X, X).compile()
    hlo = xlc.compile("HloModule t\nENTRY e {\n  p = (f32[2,3], f32[2,3]) parameter(0)\n"
                      "  a = f32[2,3] get-tuple-element(p), index=0\n"
                      "  b = f32[2,3] get-tuple-element(p), index=1\n"
                      "  ROOT s = f32[2,3] subtract(a, b)\n}\n", backend="interpreter")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(c(X, X), X + X)
    np.testing.assert_array_equal(hlo((a, a * 3)), -2 * a)
    checked = xlc.api.flat_call_args

    def forbidden(*args, **kwargs):
        raise AssertionError("the checked path ran for a known signature")

    with monkeypatch.context() as m:
        m.setattr(xlc.api, "flat_call_args", forbidden)
        for _ in range(2):
            np.testing.assert_array_equal(c(X * 2, X), X * 3)
            np.testing.assert_array_equal(hlo((a, a.T.copy().T)), 0 * a)
            np.testing.assert_array_equal(hlo((a, np.asfortranarray(a))), 0 * a)  # strided
    m2 = pytest.MonkeyPatch()
    calls = []
    m2.setattr(xlc.api, "flat_call_args", lambda *a, **k: calls.append(1) or checked(*a, **k))
    try:
        with pytest.raises(xlc.ArgumentError, match=r"^lambda: argument 1 \('y'\): expected "
                           r"f32\[2,3\], got f64\[2,3\]$"):
            c(X, X.astype(np.float64))
        with pytest.raises(xlc.ArgumentError, match=r"expected f32\[2,3\], got f32\[3,2\]"):
            c(X, X.T.copy())
        with pytest.raises(xlc.ArgumentError, match=r"has pytree structure"):
            hlo((a, a, a))
    finally:
        m2.undo()
    assert len(calls) == 3
