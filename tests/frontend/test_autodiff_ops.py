"""Every differentiable public function of xlc.numpy, xlc.lax and xlc.nn (the table in
`autodiff_cases.py`): xlc.grad of a weighted-sum loss, checked against central finite
differences in float64, against jax.grad (when jax is importable), and to second order
(Hessian-vector products against finite differences and jax); see `autodiff_harness.py`.

Cases run in groups, one traced program per group run as it is by the reference evaluator
(`test_rules_on_the_cpu_backend` runs a sample through the CPU backend's pipeline)."""
from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import xlc.lax
import xlc.numpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xlc
import xlc.ffi
from tests.frontend.autodiff_cases import NOT_DIFFERENTIABLE, PENDING, TABLE, Case
from tests.frontend.autodiff_harness import (
    NAMESPACES,
    check,
    compare,
    inputs,
    jax_run,
    x64_jax,
    xlc_run,
)


def public_functions() -> set[str]:
    """'namespace.name' of every public function of xlc.numpy, xlc.lax (with its lazily
    resolved elementwise spellings) and xlc.nn, and 'np.linalg.name' / 'lax.linalg.name' of
    the functions xlc.numpy.linalg and xlc.lax.linalg export."""
    names = set()
    for ns, mod in NAMESPACES.items():
        for name in dir(mod):
            obj = getattr(mod, name)
            if name.startswith("_") or isinstance(obj, (ModuleType, type)) or not callable(obj):
                continue
            names.add(f"{ns}.{name}")
    names |= {f"lax.{k}" for k in xlc.lax._ELEMENTWISE_ALIASES}
    for ns, mod in (("np.linalg", xlc.numpy.linalg), ("lax.linalg", xlc.lax.linalg)):
        names |= {f"{ns}.{name}" for name in mod.__all__}
    return names


@pytest.fixture(scope="module")
def jax_x64() -> Iterator[Any]:
    """jax with x64 enabled for this module's tests, or None without jax."""
    with x64_jax() as jax:
        yield jax


GROUP = 24
KEYS = sorted(set(TABLE) - set(PENDING))
CHUNKS = [KEYS[i:i + GROUP] for i in range(0, len(KEYS), GROUP)]


# ---- the tests -------------------------------------------------------------------------------
def test_every_public_function_is_differentiated_or_excused() -> None:
    public = public_functions()
    missing = sorted(public - set(TABLE) - set(NOT_DIFFERENTIABLE))
    assert not missing, f"functions neither in TABLE nor in NOT_DIFFERENTIABLE: {missing}"
    both = sorted(set(TABLE) & set(NOT_DIFFERENTIABLE))
    assert not both, f"listed twice: {both}"
    stale = sorted(k for k in TABLE if k not in public)
    assert not stale, f"TABLE names that xlc does not have: {stale}"


@pytest.mark.parametrize("chunk", range(len(CHUNKS)),
                         ids=[f"{c[0]}..{c[-1]}" for c in CHUNKS])
def test_gradients(chunk: int, jax_x64: Any) -> None:
    """First and second derivatives of every TABLE case against finite differences and
    jax."""
    problems = check(CHUNKS[chunk], jax_x64)
    assert not problems, "\n".join(problems)


def test_pending() -> None:
    """Cases with a known problem in the function itself (see PENDING) run as one group
    (finite differences only, to keep it cheap): an expected failure while any still fails."""
    problems = check(sorted(PENDING), None)
    if problems:
        pytest.xfail("\n".join(problems))


CPU_SAMPLE = ["lax.conv_general_dilated", "lax.cumprod", "lax.reduce", "lax.reduce_window",
              "lax.scatter", "lax.sort", "lax.top_k"]


def test_rules_on_the_cpu_backend() -> None:
    """A sample of the structured rules compiled by the CPU backend gives the evaluator's
    numbers."""
    data = [inputs(k, TABLE[k]) for k in CPU_SAMPLE]
    cpu = xlc_run(CPU_SAMPLE, data, "cpu")
    ref = xlc_run(CPU_SAMPLE, data)
    for key, a, b in zip(CPU_SAMPLE, cpu, ref):
        for u, w in zip(a, b):
            np.testing.assert_allclose(u, w, rtol=1e-10, atol=1e-12, err_msg=key)


SHAPE_GENERIC = ["np.prod", "np.max", "np.sort", "np.cumprod", "np.median", "nn.logsumexp"]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(dims=st.lists(st.integers(2, 4), min_size=1, max_size=3))
def test_gradients_over_shapes(dims: list[int], jax_x64: Any) -> None:
    """Shape-generic cases on hypothesis-drawn shapes (all in one program per shape)."""
    shape = tuple(dims)
    data = [inputs(k, TABLE[k], shape) for k in SHAPE_GENERIC]
    mine = xlc_run(SHAPE_GENERIC, data)
    theirs = jax_run(SHAPE_GENERIC, data, jax_x64) if jax_x64 is not None else [None] * len(
        SHAPE_GENERIC)
    problems = [compare(k, v, m, t) for k, (_, v), m, t in zip(SHAPE_GENERIC, data, mine,
                                                               theirs)]
    assert not [p for p in problems if p], f"{shape}: {[p for p in problems if p]}"


def _scatter_case(mode: str, idx: np.ndarray, jax: str | None = "") -> Case:
    """x.at[idx].<mode>(u): operand (5, 4) and updates (len(idx), 4) both cut from x."""
    def call(f: Any, x: Any, ns: Any) -> Any:
        operand = ns.np.reshape(x[:20], (5, 4))
        updates = ns.np.reshape(x[20:], (len(idx), 4))
        ref = operand.at[idx]
        if mode == "multiply" and not ns.xlc:
            return ref.multiply(updates, unique_indices=True)
        return getattr(ref, mode)(updates)
    return Case(call, (20 + 4 * len(idx),), jax=jax)


def _xla_scatter(combiner: Any) -> Case:
    """xlc.lax.scatter with an out-of-bounds window (skipped, as XLA does) and a repeated
    row; finite differences only."""
    def call(f: Any, x: Any, ns: Any) -> Any:
        operand, updates = x[:4], x[4:] * x[4:]
        return xlc.lax.scatter(operand, np.array([[1], [7], [1], [-1]]), updates, (1,), (0,),
                               (0,), 1, combiner)
    return Case(call, (8, 3), jax=None)


def _complex_chain(f: Any, x: Any, ns: Any) -> Any:
    z = ns.lax.complex(x[0], x[1])
    w = ns.np.exp(z) * ns.np.conj(z) / (z + 2.0)
    return ns.np.abs(w) + ns.np.real(w * w) - ns.np.imag(ns.np.sqrt(z) * 1j)


def _integer_paths(f: Any, x: Any, ns: Any) -> Any:
    """Integer values computed from x (argsort, argmax, astype) select and scale floats; no
    cotangent reaches them."""
    order = ns.np.argsort(x[:, 0])
    best = ns.np.argmax(x, axis=1)
    picked = ns.np.take_along_axis(x, best[:, None], axis=1)
    counts = ns.np.astype(x * 3.0, np.int32).astype(x.dtype)
    return x[order] * picked + counts * x + ns.np.power(x, 3)


SPECIAL: dict[str, Case] = {
    **{f"scatter:{m}_repeated": _scatter_case(m, np.array([0, 3, 3]))
       for m in ("set", "add", "min", "max")},
    "scatter:multiply_unique": _scatter_case("multiply", np.array([4, 1, 2])),
    "scatter:multiply_repeated": _scatter_case("multiply", np.array([0, 3, 3]), jax=None),
    "scatter:xla_add_out_of_bounds": _xla_scatter(xlc.lax.Opcode.ADD),
    "scatter:xla_set_out_of_bounds": _xla_scatter(None),
    "complex:chain": Case(_complex_chain, (2, 3, 4)),
    "ints:paths": Case(_integer_paths, (4, 3)),
}


def test_special_cases(jax_x64: Any) -> None:
    """Scatter with repeated and out-of-bounds indices, complex intermediates (jax's
    conjugation convention) and integer values derived from the input."""
    problems = check(sorted(SPECIAL), jax_x64, cases=SPECIAL)
    assert not problems, "\n".join(problems)


def test_unsupported_derivatives_name_the_op() -> None:
    """An op without a derivative (a user's FFI custom-call) is an UnsupportedOpError naming
    its target."""
    def f(a: Any) -> Any:
        return xlc.numpy.sum(xlc.ffi.call("my_kernel", xlc.ShapeDtype((3,), np.float64), a))

    with pytest.raises(xlc.UnsupportedOpError,
                       match=r"no derivative rule for custom-call 'my_kernel'"):
        xlc.jit(xlc.grad(f)).lower(np.ones(3))
