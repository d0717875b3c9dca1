"""Train the 4-layer MLP and the small transformer of tests/frontend/test_training.py for 200
steps with xlc.grad + Adam (xlc.numpy) and with JAX, and print the loss curves' agreement:

    python tools/train_vs_jax.py
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    import jax
    import jax.numpy as jnp
    import xlc.numpy as xnp

    import xlc
    from tests.frontend import test_training as tt

    print(f"{'model':<12} {'steps':>5} {'first loss':>11} {'last loss':>10} "
          f"{'max rel diff':>13} {'xlc s':>7} {'jax s':>7}")
    for name, (make, data) in sorted(tt.MODELS.items()):
        params, batch = data()
        t0 = time.perf_counter()
        mine = tt._train(xnp, xlc.nn, xlc.grad, xlc.jit, make(xnp, xlc.nn), params, batch)
        t1 = time.perf_counter()
        theirs = tt._train(jnp, jax.nn, jax.grad, jax.jit, make(jnp, jax.nn), params, batch)
        t2 = time.perf_counter()
        rel = np.max(np.abs(np.array(mine) - theirs) / np.abs(theirs))
        print(f"{name:<12} {len(mine):5d} {mine[0]:11.5f} {mine[-1]:10.5f} {rel:13.2e} "
              f"{t1 - t0:7.2f} {t2 - t1:7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
