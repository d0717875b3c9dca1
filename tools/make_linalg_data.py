"""Regenerate tests/data/linalg: JAX's HLO text and outputs for linear-algebra programs
(cholesky-solve, LU solve, QR, eigh, SVD, triangular solve, a non-positive-definite
Cholesky) and a sharding constraint, which the tests run on the evaluator and the CPU.

Usage: python tools/make_linalg_data.py   (needs jax; writes <name>.hlo and <name>.npz with
the inputs `arg0..` and JAX's outputs `out0..`)."""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "linalg"


def programs() -> dict[str, tuple[Callable[..., Any], list[np.ndarray]]]:
    """name -> (function, arguments)."""
    import jax
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 5))
    spd = (x @ x.T + 5 * np.eye(5)).astype(np.float32)
    b = rng.standard_normal((5, 2)).astype(np.float32)
    a = rng.standard_normal((5, 5)).astype(np.float32)
    mesh = Mesh(np.array(jax.devices()[:1]), ("x",))

    def constrained(v: Any) -> Any:
        w = jax.lax.with_sharding_constraint(v * 2.0, NamedSharding(mesh, P("x")))
        return w + 1.0

    return {
        "cho_solve_f32": (lambda m, r: jsl.cho_solve(jsl.cho_factor(m), r), [spd, b]),
        "cholesky_not_pd_f32": (jnp.linalg.cholesky, [-spd]),
        "solve_f64": (jnp.linalg.solve, [a.astype(np.float64), b.astype(np.float64)]),
        "qr_c64": (jnp.linalg.qr, [(a + 1j * a.T).astype(np.complex64)]),
        "eigh_f64": (jnp.linalg.eigh, [spd.astype(np.float64)]),
        "svd_f32": (lambda m: jnp.linalg.svd(m, full_matrices=False), [a[:, :3].copy()]),
        "solve_triangular_c128": (
            lambda m, r: jsl.solve_triangular(m, r, lower=False, trans="C"),
            [(np.triu(a) + 5 * np.eye(5) + 1j * np.triu(a.T)).astype(np.complex128),
             (b + 1j).astype(np.complex128)]),
        "inv_batched_f32": (jnp.linalg.inv, [np.stack([a, a.T + np.eye(5, dtype=np.float32)])]),
        "sharding_constraint_f32": (constrained, [a]),
    }


def main() -> int:
    import jax

    jax.config.update("jax_enable_x64", True)
    OUT.mkdir(parents=True, exist_ok=True)
    for name, (fn, args) in programs().items():
        jitted = jax.jit(fn)
        text = jitted.lower(*args).compiler_ir("hlo").as_hlo_text()
        outs = jax.tree_util.tree_leaves(jitted(*args))
        (OUT / f"{name}.hlo").write_text(text)
        np.savez(OUT / f"{name}.npz", **{f"arg{i}": v for i, v in enumerate(args)},
                 **{f"out{i}": np.asarray(v) for i, v in enumerate(outs)})
        print(name, len(text), "chars")
    return 0


if __name__ == "__main__":
    sys.exit(main())
