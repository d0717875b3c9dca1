"""Custom derivative rules survive xlc.vmap: grad(vmap(f)) and jvp(vmap(f)) use the user's
custom_vjp / custom_jvp rule (vmapped), and the cotangent of an argument shared by every
example is the sum over the batch."""
import numpy as np
import pytest
import xlc.numpy as xnp

import xlc


@xlc.custom_vjp
def _scaled(x, w):
    return xnp.sin(x) * w


_scaled.defvjp(lambda x, w: (_scaled(x, w), (x, w)),
               lambda r, ct: (ct * 10.0, xnp.sum(ct * r[0])))


@xlc.custom_jvp
def _half(x):
    return xnp.log1p(xnp.exp(x))


_half.defjvps(lambda t, out, x: t * 0.5)


def test_custom_vjp_rule_under_vmap_with_a_shared_argument():
    x = np.arange(6.0).reshape(3, 2)
    gx, gw = xlc.grad(lambda x, w: xnp.sum(xlc.vmap(_scaled, in_axes=(0, None))(x, w)),
                      argnums=(0, 1))(x, np.float64(2.0))
    np.testing.assert_array_equal(gx, np.full((3, 2), 10.0))   # the rule, not cos(x) * w
    assert float(gw) == x.sum()                                  # summed over the batch


def test_custom_jvp_rule_under_vmap_in_both_modes():
    x = np.linspace(-1.0, 1.0, 6).reshape(3, 2)
    np.testing.assert_array_equal(xlc.grad(lambda v: xnp.sum(xlc.vmap(_half)(v)))(x),
                                  np.full((3, 2), 0.5))
    _, t = xlc.jvp(xlc.vmap(_half), (x,), (np.ones_like(x),))
    np.testing.assert_array_equal(t, np.full((3, 2), 0.5))


def test_grad_of_vmapped_cholesky_matches_jax():
    a = np.stack([np.eye(3) * 2.0, np.eye(3) * 3.0])
    a[0, 0, 1] = a[0, 1, 0] = 0.5
    got = xlc.grad(lambda m: xnp.sum(xlc.vmap(xnp.linalg.cholesky)(m)))(a)
    unbatched = xlc.grad(lambda m: xnp.sum(xnp.linalg.cholesky(m)))(a)
    np.testing.assert_allclose(got, unbatched, rtol=1e-12)
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    with jax.enable_x64(True):
        want = jax.grad(lambda m: jnp.sum(jax.vmap(jnp.linalg.cholesky)(m)))(a)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10)
