"""tools/chain_optimum.py: the least recomputations of a layer chain's training step in a
given number of activation slots."""
from __future__ import annotations

import math

from tools.chain_optimum import fewest_recomputations, main


def test_known_counts_and_monotone_in_memory() -> None:
    # the 16-layer MLP of tools/bench_memory_budget.py under half its peak: 5 slots with
    # dz and the backward GEMM written in place (what xlc's pass reaches: 14)
    assert fewest_recomputations(16, 5)[0] == 14
    assert fewest_recomputations(16, 6, dz_in_place=False, gemm_in_place=False)[0] == 12
    assert fewest_recomputations(16, 18)[0] == 0            # every activation kept
    assert math.isinf(fewest_recomputations(16, 2)[0])      # a forward step needs two slots
    counts = [fewest_recomputations(12, s)[0] for s in range(3, 14)]
    assert counts == sorted(counts, reverse=True) and counts[-1] == 0


def test_schedule_recomputes_what_it_counts(capsys) -> None:  # type: ignore[no-untyped-def]
    cost, kept, plan = fewest_recomputations(8, 4)
    steps = sum(int(b) - int(a) for a, b in
                (p[1:].split("->x") for p in plan if p.startswith("x")))
    assert steps == cost and all(0 < k < 8 for k in kept)
    assert [p for p in plan if p.startswith("layer")] == [f"layer {j}" for j in range(8, 0, -1)]
    assert main(["--layers", "16", "--slots", "5", "2"]) == 0
    out = capsys.readouterr().out
    assert "16 layers in 5 slots: 14 recomputed steps" in out
    assert "16 layers in 2 slots: no schedule fits" in out
