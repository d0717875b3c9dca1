"""The fewest recomputations a layer chain's training step needs in a given memory: an exact
(dynamic programming) reference for checkpointing long chains, which the ILP of
`tools/memory_optimum.py` cannot solve at their size (a 16-layer MLP step has ~150
instructions; the ILP stops at ~60).

**The model** (a dense layer chain, as `tools/bench_memory_budget.py`'s mlp16): layer j computes
x_j = f(x_{j-1} @ W_j + b_j) (one GEMM and one elementwise kernel: a *step*); x_0 is an input,
held anyway. Memory is counted in activation-sized *slots*; everything smaller (weights,
gradients of weights, GEMM workspaces) is left out, so `--slots` is what the temp budget holds
once those are taken away. The backward pass visits j = L .. 1 with dx_j live:
1. dz_j = dx_j * f'(x_j) (over dx_j's storage with `--dz-in-place`, as xlc's input fusion
   does next to the bias gradient): x_j dies;
2. x_{j-1} must be live: held since the forward pass or recomputed from the nearest held
   x_c by steps c+1 .. j-1, keeping any of those as new checkpoints;
3. dW_j = x_{j-1}^T dz_j and dx_{j-1} = dz_j @ W_j^T (over dz_j's storage with
   `--gemm-in-place`, xlc's `gemm.writes_over_a`).
Peaks: a forward step holds the checkpoints, its input and its output; step 1 holds dx_j (dz_j),
x_j and the checkpoints; a recompute step holds dz_j, the checkpoints, its input and output;
step 3 holds dz_j, x_{j-1}, dx_{j-1} (not with `--gemm-in-place`) and the checkpoints.
The answer is the least number of recomputed steps (each one GEMM), and a schedule reaching it.

    python tools/chain_optimum.py --layers 16 --slots 5 [--dz-in-place] [--gemm-in-place]
"""
from __future__ import annotations

import argparse
import functools
import itertools

INF = float("inf")


def fewest_recomputations(layers: int, slots: int, dz_in_place: bool = True,
                          gemm_in_place: bool = True) -> tuple[float, tuple[int, ...],
                                                               tuple[str, ...]]:
    """(least recomputed steps, checkpoints kept in the forward pass, backward schedule) for
    `layers` layers in `slots` activation slots (the module docstring's model); inf when no
    schedule fits."""
    dz_step = 2 if dz_in_place else 3   # dx_j (becoming dz_j) and x_j, + dz_j if a new slot
    reverse = 2 if gemm_in_place else 3  # dz_j, x_{j-1}, + dx_{j-1} if a new slot

    @functools.cache
    def best(j: int, held: frozenset[int]) -> tuple[float, tuple[str, ...]]:
        """From backward position j (dz_j live, x_j gone), checkpoints `held` in 1 .. j-1."""
        if j - 1 in held or j == 1:
            rest = held - {j - 1}
            if reverse + len(rest) > slots:
                return INF, ()
            if j == 1:
                return 0, ("layer 1",)
            if dz_step + len(rest) > slots:
                return INF, ()
            cost, plan = best(j - 1, frozenset(rest))
            return cost, (f"layer {j}",) + plan
        out: tuple[float, tuple[str, ...]] = (INF, ())
        start = max(held | {0})
        for stop in range(start + 1, j):
            # dz_j, the checkpoints, and the step's input (unless held) and output
            if 1 + len(held) + (1 if stop == start + 1 else 2) > slots:
                continue
            cost, plan = best(j, held | {stop})
            if cost + stop - start < out[0]:
                out = (cost + stop - start, (f"x{start}->x{stop}",) + plan)
        return out

    result: tuple[float, tuple[int, ...], tuple[str, ...]] = (INF, (), ())
    for count in range(layers):
        if count + 2 > slots:  # a forward step: the checkpoints, its input and output
            break
        for kept in itertools.combinations(range(1, layers), count):
            # the loss gradient dx_L beside x_L, then dz_L: the checkpoints and two slots
            cost, plan = best(layers, frozenset(kept))
            if cost < result[0]:
                result = (cost, kept, plan)
    return result


def main(argv: list[str] | None = None) -> int:
    """Print the least recomputations (and a schedule) for the arguments' chain."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--slots", type=int, nargs="+", default=[5])
    ap.add_argument("--dz-in-place", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--gemm-in-place", action=argparse.BooleanOptionalAction, default=True)
    a = ap.parse_args(argv)
    for slots in a.slots:
        cost, kept, plan = fewest_recomputations(a.layers, slots, a.dz_in_place,
                                                 a.gemm_in_place)
        if cost == INF:
            print(f"{a.layers} layers in {slots} slots: no schedule fits")
            continue
        print(f"{a.layers} layers in {slots} slots: {int(cost)} recomputed steps; forward "
              f"keeps x{', x'.join(map(str, kept)) if kept else ' nothing'}")
        print("  backward: " + " ".join(plan))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
