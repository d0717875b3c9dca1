"""The machinery of the derivative tests (`test_autodiff_ops.py`, `test_autodiff_conv.py`):
run a group of `Case`s as one traced program (loss, gradient and Hessian-vector product of
each), the same through jax, and compare with finite differences and with jax."""
from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable, Iterator
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import xlc.lax
import xlc.nn
import xlc.numpy as xnp

import xlc
from tests.frontend.autodiff_cases import TABLE, Case
from xlc.frontend import pytree
from xlc.hlo.evaluator import evaluate

Data = list[tuple[np.ndarray, np.ndarray]]
"""(x, direction v) of each case of a group."""

EPS = 1e-4
XNS = SimpleNamespace(np=xnp, lax=xlc.lax, nn=xlc.nn, xlc=True)
NAMESPACES: dict[str, ModuleType] = {"np": xnp, "lax": xlc.lax, "nn": xlc.nn}


@contextlib.contextmanager
def x64_jax() -> Iterator[Any]:
    """jax with x64 enabled (restored afterwards), or None when jax is not installed."""
    try:
        import jax
    except ImportError:
        yield None
        return
    old = jax.config.jax_enable_x64  # type: ignore[attr-defined]
    jax.config.update("jax_enable_x64", True)
    try:
        yield jax
    finally:
        jax.config.update("jax_enable_x64", old)


# ---- the harness -----------------------------------------------------------------------------
def leaves(out: Any) -> list[Any]:
    """The arrays of a (nested) tuple/list/dict result."""
    if isinstance(out, dict):
        return [leaf for k in sorted(out) for leaf in leaves(out[k])]
    if isinstance(out, (tuple, list)):
        return [leaf for o in out for leaf in leaves(o)]
    return [out]


def weights(shape: tuple[int, ...], salt: int) -> np.ndarray:
    """Fixed pseudo-random weights of `shape` (the same on both sides of a comparison)."""
    n = int(np.prod(shape, dtype=np.int64))
    return np.cos(np.arange(n) * 1.37 + 0.4 + salt).reshape(shape)


def loss(out: Any, m: Any) -> Any:
    """sum(out * w) over the float leaves of `out` (real and imaginary parts of complex
    ones); integer and bool leaves carry no derivative."""
    total: Any = 0.0
    for k, leaf in enumerate(leaves(out)):
        kind = np.dtype(leaf.dtype).kind
        if kind == "c":
            w = weights(tuple(leaf.shape), k)
            total = total + m.sum(m.real(leaf) * w) + m.sum(m.imag(leaf) * (1.0 - w))
        elif kind == "f":
            total = total + m.sum(leaf * weights(tuple(leaf.shape), k))
    return total


def inputs(key: str, case: Case, shape: tuple[int, ...] | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """(x, direction v) of a case, seeded by its name."""
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    shape = shape or case.shape
    x = rng.uniform(case.lo, case.hi, shape)
    if case.nan:
        x.flat[1] = np.nan
    return x, rng.standard_normal(shape)


def xlc_function(key: str) -> Callable[..., Any] | None:
    """The function a TABLE key names; None for 'group:name' cases, whose call uses `ns`."""
    if ":" in key:
        return None
    ns, *path = key.split(".")
    obj: Any = NAMESPACES[ns]
    for part in path:  # 'np.linalg.solve': a submodule's function
        obj = getattr(obj, part)
    return obj  # type: ignore[no-any-return]


def _ns_only(*args: Any) -> Any:
    raise AssertionError("a 'group:name' case calls the namespaces, not f")


def jax_function(key: str, case: Case, jax: Any) -> Callable[..., Any] | None:
    if case.jax is None:
        return None
    if ":" in key:
        return _ns_only
    import jax.numpy as jnp

    path = case.jax or key
    obj: Any = {"np": jnp, "lax": jax.lax, "nn": jax.nn, "scipy": jax.scipy}[path.split(".")[0]]
    for part in path.split(".")[1:]:
        if part == "special":
            import jax.scipy.special  # noqa: F401
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj  # type: ignore[no-any-return]


def xlc_run(keys: list[str], data: Data, backend: str = "evaluator",
            cases: dict[str, Case] = TABLE) -> list[list[np.ndarray]]:
    """For each case: the loss at x, x + EPS v and x - EPS v, its gradient at x and (for
    second-order cases) the Hessian-vector product H v at x, all in one traced program.
    backend "evaluator" runs the traced module as it is on the reference evaluator (no
    optimization passes); others go through `xlc.jit`."""
    def run(args: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> list[list[Any]]:
        res = []
        for key, (x, xp, xm), (_, v) in zip(keys, args, data):
            case, f = cases[key], xlc_function(key)

            def lossf(a: Any, case: Case = case, f: Callable | None = f) -> Any:
                return loss(case.call(f, a, XNS), xnp)

            g = xlc.grad(lossf)
            row = [lossf(x), lossf(xp), lossf(xm), g(x)]
            if case.order2:
                row.append(xlc.grad(lambda a, g=g, v=v: xnp.sum(g(a) * v))(x))
            res.append(row)
        return res

    args = [(x, x + EPS * v, x - EPS * v) for x, v in data]
    if backend == "evaluator":
        lowered = xlc.jit(run).lower(args)
        flat = evaluate(lowered.module, pytree.flatten((args,))[0])
        out = pytree.unflatten(lowered.out_tree, list(flat) if isinstance(flat, tuple)
                               else [flat])
    else:
        out = xlc.jit(run, backend=backend)(args)
    return [[np.asarray(a) for a in row] for row in out]


def jax_run(keys: list[str], data: Data, jax: Any,
            cases: dict[str, Case] = TABLE) -> list[list[np.ndarray] | None]:
    """jax's gradient and Hessian-vector product for the cases that have a counterpart, one
    program compiled without XLA's expensive optimizations (they cost more than running it)."""
    import jax.numpy as jnp

    jns = SimpleNamespace(np=jnp, lax=jax.lax, nn=jax.nn, xlc=False)
    fns = [jax_function(k, cases[k], jax) for k in keys]

    def run(xs: list[np.ndarray]) -> list[Any]:
        res: list[Any] = []
        for key, f, x, (_, v) in zip(keys, fns, xs, data):
            if f is None:
                res.append(None)
                continue
            case = cases[key]

            def lossf(a: Any, case: Case = case, f: Callable = f) -> Any:
                return loss(case.call(f, a, jns), jnp)

            g = jax.grad(lossf)
            row = [g(x)]
            if case.order2:
                row.append(jax.grad(lambda a, g=g, v=v: jnp.sum(g(a) * v))(x))
            res.append(row)
        return res

    xs = [x for x, _ in data]
    fast = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
    out = jax.jit(run).lower(xs).compile(fast)(xs)
    return [None if r is None else [np.asarray(a) for a in r] for r in out]


def compare(key: str, v: np.ndarray, mine: list[np.ndarray], theirs: list[np.ndarray] | None,
            use_fd: bool = True) -> str | None:
    """None, or what is wrong with one case's results: <grad, v> against the central
    difference of the loss along v, <H v, v> against its second difference, grad and H v
    against jax's."""
    lx, lp, lm = (float(a) for a in mine[:3])
    g = mine[3]
    fd = (lp - lm) / (2 * EPS)
    d1 = float(np.sum(g * v))
    if not np.isfinite(d1) or (use_fd and abs(d1 - fd) > 1e-6 * (1 + abs(fd))):
        return f"{key}: <grad, v> = {d1!r}, finite differences {fd!r}"
    if len(mine) > 4 and use_fd:
        fd2 = (lp - 2 * lx + lm) / EPS ** 2
        d2 = float(np.sum(mine[4] * v))
        if not np.isfinite(d2) or abs(d2 - fd2) > 1e-5 * (1 + abs(fd2)) + 1e-7 * abs(lx):
            return f"{key}: <H v, v> = {d2!r}, finite differences {fd2!r}"
    if theirs is not None:
        for what, a, b in zip(("grad", "H v"), mine[3:], theirs):
            if not np.allclose(a, b, rtol=1e-8, atol=1e-9 * (1 + np.max(np.abs(b)))):
                return f"{key}: {what} {a.ravel()[:4]}..., jax {b.ravel()[:4]}..."
    return None


def check(keys: list[str], jax: Any, backend: str = "evaluator",
          cases: dict[str, Case] = TABLE) -> list[str]:
    """Run `keys` of `cases` as one group (each alone when the group fails) and list the
    problems."""
    data = [inputs(k, cases[k]) for k in keys]
    try:
        mine = xlc_run(keys, data, backend, cases)
        theirs = jax_run(keys, data, jax, cases) if jax is not None else [None] * len(keys)
    except Exception as e:  # noqa: BLE001 - find out which case breaks the group
        if len(keys) == 1:
            return [f"{keys[0]}: {type(e).__name__}: {str(e)[:300]}"]
        return [p for k in keys for p in check([k], jax, backend, cases)]
    problems = [compare(k, v, m, t, cases[k].fd)
                for k, (_, v), m, t in zip(keys, data, mine, theirs)]
    return [p for p in problems if p is not None]


