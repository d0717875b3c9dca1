"""Integer and boolean inputs to derivatives, as JAX defines them: `grad(..., allow_int=True)`
and `vjp` give them float0 zero cotangents, `jvp` takes float0 tangents for them and returns
float0 tangents for integer outputs; float0 arrays pass through jit outputs, arguments and
serialized executables without reaching the program."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xlc.numpy as xnp

import xlc
from xlc.errors import TraceError

F0 = xlc.dtypes.float0
X = np.arange(3, dtype=np.int32)
Y = np.array([1.0, 2.0, 3.0], np.float32)


def _f(x, y):  # type: ignore[no-untyped-def]
    return xnp.sum(x * y * y)


def _is_float0(a: object, shape: tuple[int, ...]) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == F0 and a.shape == shape


def test_float0_is_jaxs_dtype() -> None:
    assert F0 == np.dtype([("float0", np.void, 0)]) and F0.itemsize == 0
    jax = pytest.importorskip("jax")
    assert F0 == jax.dtypes.float0


def test_grad_allow_int_gives_float0_zeros() -> None:
    gx, gy = xlc.grad(_f, argnums=(0, 1), allow_int=True)(X, Y)
    assert _is_float0(gx, (3,))
    np.testing.assert_array_equal(gy, 2 * X * Y)
    gb = xlc.grad(lambda b, y: xnp.sum(xnp.where(b, y, 0.0)), argnums=(0, 1),
                  allow_int=True)(np.array([True, False, True]), Y)
    assert _is_float0(gb[0], (3,)) and gb[1].tolist() == [1.0, 0.0, 1.0]


def test_grad_of_integer_input_without_allow_int_is_an_error() -> None:
    with pytest.raises(TraceError, match=r"xlc.grad of _f: differentiating with respect to "
                       r"argument 0 needs float inputs, got s32\[3\] \(allow_int=True gives "
                       r"integer and boolean inputs float0 zero gradients\)"):
        xlc.grad(_f)(X, Y)


def test_vjp_gives_integer_primals_float0_and_takes_float0_cotangents() -> None:
    @xlc.jit
    def pull(x, y):  # type: ignore[no-untyped-def]
        (i, s), back = xlc.vjp(lambda x, y: (x + 1, xnp.sum(x * y)), x, y)
        return back((np.zeros(i.shape, F0), xnp.ones_like(s)))

    cx, cy = pull(X, Y)
    assert _is_float0(cx, (3,))
    np.testing.assert_array_equal(cy, X.astype(np.float32))


def test_jvp_with_integer_primals() -> None:
    (o1, o2), (t1, t2) = xlc.jvp(lambda x, y: (x * 2, y * x), (X, Y), (np.zeros(3, F0), Y))
    np.testing.assert_array_equal(o1, X * 2)
    assert _is_float0(t1, (3,))
    np.testing.assert_array_equal(t2, Y * X)
    with pytest.raises(TraceError, match=r"xlc.jvp: primal 0 is s32\[3\]; the tangent of an "
                       r"integer or boolean primal must be a float0 array \(numpy.zeros\(shape, "
                       r"xlc.dtypes.float0\)\), as in JAX, got int32"):
        xlc.jvp(lambda x: x * 2, (X,), (X,))
    with pytest.raises(TraceError, match=r"xlc.jvp: primal 0 is f32\[3\], its tangent must be "
                       r"an array of that dtype, got a float0 array"):
        xlc.jvp(lambda y: y * 2, (Y,), (np.zeros(3, F0),))


def test_same_as_jax() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    want = jax.grad(lambda x, y: jnp.sum(x * y * y), argnums=(0, 1), allow_int=True)(X, Y)
    got = xlc.grad(_f, argnums=(0, 1), allow_int=True)(X, Y)
    assert got[0].dtype == np.asarray(want[0]).dtype and got[0].shape == want[0].shape
    np.testing.assert_array_equal(got[1], want[1])
    jt = jax.jvp(lambda x: x.astype(jnp.float32) * x, (X,), (np.zeros(3, F0),))[1]
    xt = xlc.jvp(lambda x: x.astype(np.float32) * x, (X,), (np.zeros(3, F0),))[1]
    np.testing.assert_array_equal(xt, jt)


def test_float0_through_jit_arguments_outputs_and_files(tmp_path: Path) -> None:
    def step(t, y):  # type: ignore[no-untyped-def]
        return t, y * 2

    c = xlc.jit(step).lower(np.zeros((2, 3), F0), Y).compile()
    t, y = c(np.zeros((2, 3), F0), Y)
    assert _is_float0(t, (2, 3)) and y.tolist() == [2.0, 4.0, 6.0]
    assert len(c.in_avals) == 1  # the float0 argument is not a parameter
    c.serialize(str(tmp_path / "step.xlc"))
    t2, y2 = xlc.load(str(tmp_path / "step.xlc"))(np.zeros((2, 3), F0), Y)
    assert _is_float0(t2, (2, 3)) and y2.tolist() == y.tolist()
