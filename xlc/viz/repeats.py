"""Repeated layers: runs of a computation's instruction sequence that repeat back to back.

A model written as `for i in range(n): x = layer(x, p[i])` traces into `n` copies of the same
instruction pattern. `find_repeats(signatures)` finds such runs in a list of per-instruction
signatures (opcode, source line, ...): maximal stretches `s[start : start + period * count]`
made of `count >= 2` equal copies of `s[start : start + period]`. The graph groups each copy
into one collapsible "layer" cluster.

Method: for every period p, `s[i] == s[i + p]` marks positions that equal the one a period
later; a run of `r` such positions starting at i means `s[i : i + p + r]` has period p, so it
holds `(p + r) // p` copies. Candidates are taken greedily by coverage (then the shorter
period), never overlapping. O(n^2 / 2) cheap comparisons, vectorised with numpy (about 0.1 s at
3000 instructions).
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

MIN_PERIOD = 2      # a fused layer can be two instructions (dot, fusion)
MIN_COVERAGE = 8    # a repeat must span at least this many instructions


@dataclass(frozen=True)
class Repeat:
    """`count` copies of a `period`-long pattern starting at `start`."""

    start: int
    period: int
    count: int

    @property
    def end(self) -> int:
        """One past the last position covered."""
        return self.start + self.period * self.count


def _runs(eq: np.ndarray) -> list[tuple[int, int]]:
    """(start, length) of every run of True in `eq`."""
    if not eq.any():
        return []
    padded = np.concatenate(([False], eq, [False])).astype(np.int8)
    diff = np.diff(padded)
    starts = np.flatnonzero(diff == 1)
    ends = np.flatnonzero(diff == -1)
    return list(zip(starts.tolist(), (ends - starts).tolist()))


def find_repeats(signatures: Sequence[Hashable], min_period: int = MIN_PERIOD,
                 min_coverage: int = MIN_COVERAGE) -> list[Repeat]:
    """Non-overlapping back-to-back repeats in `signatures`, sorted by start.

    Guarantees: for each result r, every copy `signatures[r.start + k*r.period :][:r.period]`
    (k < r.count) is equal to the first; r.count >= 2, r.period >= min_period and
    r.period * r.count >= min_coverage; results do not overlap."""
    n = len(signatures)
    if n < 2 * min_period:
        return []
    codes: dict[Hashable, int] = {}
    s = np.array([codes.setdefault(sig, len(codes)) for sig in signatures], dtype=np.int64)
    cands: list[tuple[int, int, int, int]] = []  # (-coverage, period, start, count)
    for p in range(min_period, n // 2 + 1):
        for i, r in _runs(s[:-p] == s[p:]):
            count = (p + r) // p
            if count >= 2 and p * count >= min_coverage:
                cands.append((-p * count, p, i, count))
    cands.sort()
    taken = np.zeros(n, dtype=bool)
    out: list[Repeat] = []
    for _, p, i, count in cands:
        # shrink to the copies that are still free (a copy is all or nothing)
        while count >= 2 and taken[i:i + p * count].any():
            if not taken[i:i + p].any():
                count = next(k for k in range(count) if taken[i + k * p:i + (k + 1) * p].any())
            else:
                i, count = i + p, count - 1
        if count >= 2 and p * count >= min_coverage and not taken[i:i + p * count].any():
            taken[i:i + p * count] = True
            out.append(Repeat(i, p, count))
    return sorted(out, key=lambda r: r.start)
