"""The exact side of `tools/memory_optimum.py`: a DAG memory model, its simulator and its ILP.

Nothing here knows HLO. A `MemoryGraph` has *nodes* (instructions) and *values* (storage each
node defines). `tools/memory_optimum.py` builds one from an optimized module.

**Accounting** (the same for every schedule, xlc's or the ILP's): a schedule is a sequence of
node ids, one per *stage*; a node appearing again is recomputed, and a reader reads the latest
computation of each value. A computed value occupies its bytes from its stage to the stage of
its last reader (both included; to the end for the last computation of a live-out value; only
its own stage when nothing reads it). The memory of a stage is `static_bytes` + the bytes of
every value occupying it + the running node's `transient`, less the bytes of each *share*
taken: when node j is the last reader of value a, its output b may take over a's storage
(`shares`, the heap simulator's optional operand reuse; each a and each b in one share at
most). The peak is the maximum over stages. Nothing is packed: no fragmentation or alignment.

**The ILP** (`solve`): Checkmate's stage formulation (Jain et al., MLSys 2020) with the order
left free as well (one node per stage, as in MONeT): `T = n + k` stages; binaries `R[t,i]`
(stage t computes node i; at most one node per stage, empty stages last) and `Z[t,s]` (share
s taken at stage t); continuous `S[t,v]` in [0, 1] (value v kept into stage t: `S[t+1,v] <=
S[t,v] + R[t,owner(v)]`, `S[0,v] = 0`). Node j may run at stage t only if every value it reads
is kept into t (`R[t,j] <= S[t,v]`) and its order deps ran before t. Every node runs at least
once (exactly once unless `remat[i]`); a live-out value is kept to the end (`S[T,v] = 1`). A
share needs its node to run and its operand to die (`Z <= R[t,j]`, `Z <= 1 - S[t+1,a]`). Stage
t's memory `static + sum_v size_v S[t,v] + sum_i (defined_i + transient_i) R[t,i] -
sum_s saving_s Z[t,s] <= M`; recompute cost `sum_i cost_i (runs_i - 1) <= budget`; minimise M.
S may be fractional: at integral R and Z, rounding every fractional S down keeps a feasible
plan of no more memory, so the optimum is exact. With `k = 0` it is the best topological order
without recomputation; otherwise the best with at most `k` recomputations. To help HiGHS:
without recomputation, cumulative liveness cuts (`C[t,i]` = node i ran by stage t; a value
read by j is kept while its owner has run and j has not); `lower_bound` bounds M below; a
known schedule (an incumbent: xlc's) bounds it above, and is the answer when it meets the
lower bound or HiGHS finds nothing better in time.

Not modelled: host offload (a value copied to host and back); the ILP's remat plan is not
turned back into HLO.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

MIP_REL_GAP = 1e-7
"""HiGHS stops at this relative gap: under one byte for peaks below 10 MB (an exact optimum)."""


@dataclass(frozen=True)
class MemoryGraph:
    """Nodes in a topological order and the values they define.

    Node i: `names[i]`, `cost[i]` (the price of recomputing it), `remat[i]` (may it be
    recomputed), `transient[i]` (bytes live only while it runs), `reads[i]` (values that must be
    resident while it runs), `order_deps[i]` (nodes that must have run before it, their values
    not read: operand edges through value-less forwarders, control predecessors). Value v:
    `owner[v]` defines it, `size[v]` bytes, returned by the program when in `live_out`.
    `static_bytes` are live throughout (entry parameters). `shares` are (node j, value a,
    value b): j defines b, reads a (not live-out), and may put b in a's storage when a dies
    at j. Every value
    a node reads and every order dep belongs to an earlier node."""

    names: tuple[str, ...]
    cost: tuple[int, ...]
    remat: tuple[bool, ...]
    transient: tuple[int, ...]
    reads: tuple[frozenset[int], ...]
    order_deps: tuple[frozenset[int], ...]
    owner: tuple[int, ...]
    size: tuple[int, ...]
    live_out: frozenset[int]
    static_bytes: int
    shares: tuple[tuple[int, int, int], ...] = ()

    @property
    def n(self) -> int:
        """Number of nodes."""
        return len(self.names)

    def defined_bytes(self, i: int) -> int:
        """The bytes node i defines (its values' sizes)."""
        return sum(s for o, s in zip(self.owner, self.size) if o == i)

    def saving(self, share: tuple[int, int, int]) -> int:
        """Bytes a share saves: the smaller of its two values."""
        return min(self.size[share[1]], self.size[share[2]])

    def check(self) -> None:
        """Raise ValueError unless the fields agree and the node order is topological."""
        n = self.n
        for name in ("cost", "remat", "transient", "reads", "order_deps"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"MemoryGraph.{name} has {len(getattr(self, name))} entries, "
                                 f"expected {n}")
        if len(self.owner) != len(self.size) or not all(0 <= o < n for o in self.owner):
            raise ValueError("MemoryGraph.owner / size disagree or name unknown nodes")
        for j in range(n):
            bad = [i for i in {self.owner[v] for v in self.reads[j]} | self.order_deps[j]
                   if not 0 <= i < j]
            if bad:
                raise ValueError(f"node {j} ({self.names[j]}) depends on later nodes {bad}")
        for j, a, b in self.shares:
            if a not in self.reads[j] or self.owner[b] != j or a in self.live_out:
                raise ValueError(f"share {(j, a, b)}: node {j} must read {a} (not live-out) "
                                 f"and define {b}")


@dataclass
class Simulation:
    """A schedule's peak under the module docstring's accounting, its recompute cost (the cost
    of every run after a node's first) and the memory of each stage."""

    peak: int
    recompute_cost: int
    stage_bytes: list[int] = field(default_factory=list)


def _best_shares(graph: MemoryGraph, options: list[tuple[int, int, int]]) -> int:
    """The largest saving of shares with distinct operand and distinct output values."""
    if len(options) > 12:  # greedy by saving (never reached by the small graphs here)
        options = sorted(options, key=graph.saving, reverse=True)
        used_a, used_b, total = set(), set(), 0
        for s in options:
            if s[1] not in used_a and s[2] not in used_b:
                used_a.add(s[1])
                used_b.add(s[2])
                total += graph.saving(s)
        return total
    best = 0
    for r in range(1, len(options) + 1):
        for combo in itertools.combinations(options, r):
            if len({s[1] for s in combo}) == r and len({s[2] for s in combo}) == r:
                best = max(best, sum(graph.saving(s) for s in combo))
    return best


def simulate(graph: MemoryGraph, sequence: Sequence[int]) -> Simulation:
    """Simulate `sequence` (node ids, repeats are recomputations).

    Raises ValueError naming the stage when a node runs before a node it depends on, or when a
    node never runs. Guarantees the minimum peak of that exact sequence: values are freed right
    after their last reader and the best shares are taken."""
    n, t_end = graph.n, len(sequence)
    owned: list[list[int]] = [[] for _ in range(n)]
    for v, o in enumerate(graph.owner):
        owned[o].append(v)
    last_run: list[int | None] = [None] * n
    occupied: dict[tuple[int, int], int] = {}  # (value, stage computed) -> last stage occupied
    current: list[dict[int, int]] = []  # per stage: value -> stage of the instance read
    for t, j in enumerate(sequence):
        for i in {graph.owner[v] for v in graph.reads[j]} | graph.order_deps[j]:
            if last_run[i] is None:
                raise ValueError(f"stage {t}: {graph.names[j]} runs before {graph.names[i]}")
        seen: dict[int, int] = {}
        for v in graph.reads[j]:
            s = last_run[graph.owner[v]]
            assert s is not None
            occupied[(v, s)] = max(occupied[(v, s)], t)
            seen[v] = s
        current.append(seen)
        last_run[j] = t
        for v in owned[j]:
            occupied[(v, t)] = t
    missing = [graph.names[i] for i in range(n) if last_run[i] is None]
    if missing:
        raise ValueError(f"never scheduled: {', '.join(missing)}")
    for v in graph.live_out:
        s = last_run[graph.owner[v]]
        assert s is not None
        occupied[(v, s)] = t_end - 1
    delta = np.zeros(t_end + 1, dtype=np.int64)
    for (v, s), e in occupied.items():
        delta[s] += graph.size[v]
        delta[e + 1] -= graph.size[v]
    stage = np.cumsum(delta)[:t_end] + graph.static_bytes
    by_node: dict[int, list[tuple[int, int, int]]] = {}
    for share in graph.shares:
        by_node.setdefault(share[0], []).append(share)
    for t, j in enumerate(sequence):
        stage[t] += graph.transient[j]
        dying = [s for s in by_node.get(j, []) if occupied[(s[1], current[t][s[1]])] == t]
        stage[t] -= _best_shares(graph, dying)
    runs = np.bincount(np.asarray(sequence, dtype=np.int64), minlength=n)
    cost = int(sum(graph.cost[i] * (int(runs[i]) - 1) for i in range(n)))
    stages = [int(x) for x in stage]
    return Simulation(max(stages, default=graph.static_bytes), cost, stages)


def prune(graph: MemoryGraph, sequence: Sequence[int]) -> list[int]:
    """`sequence` without the runs whose results nobody reads (keeping a live-out value's last
    computation, and the first run of a node none of whose runs is read). Requires a sequence
    `simulate` accepts; guarantees one it accepts, with no larger recompute cost."""
    seq = list(sequence)
    live_out_nodes = {graph.owner[v] for v in graph.live_out}
    while True:
        last_run: dict[int, int] = {}
        first_run: dict[int, int] = {}
        keep: set[int] = set()
        for t, j in enumerate(seq):
            keep |= {last_run[i] for i in {graph.owner[v] for v in graph.reads[j]}
                     | graph.order_deps[j]}
            first_run.setdefault(j, t)
            last_run[j] = t
        keep |= {last_run[i] for i in live_out_nodes}
        kept_nodes = {seq[t] for t in keep}
        keep |= {t for j, t in first_run.items() if j not in kept_nodes}
        if len(keep) == len(seq):
            return seq
        seq = [j for t, j in enumerate(seq) if t in keep]


@dataclass
class IlpResult:
    """What `solve` found. `status`: "optimal", "time limit" (a feasible schedule, perhaps not
    optimal), "no solution" (time ran out before one) or "infeasible". `schedule` is the best
    sequence found (pruned), `peak` its simulated peak (None without one), `objective` the
    ILP's value (the peak, or the recompute cost with `peak_limit`), `bound` HiGHS's proven
    lower bound on the objective, `gap` the relative MIP gap (0 when optimal)."""

    status: str
    peak: int | None
    objective: float | None
    bound: float
    gap: float
    schedule: list[int]
    recompute_cost: int
    seconds: float
    stages: int
    variables: int
    constraints: int


def ancestors(graph: MemoryGraph) -> list[set[int]]:
    """For each node, every node that must run before its first run."""
    anc: list[set[int]] = []
    for j in range(graph.n):
        a: set[int] = set()
        for i in {graph.owner[v] for v in graph.reads[j]} | graph.order_deps[j]:
            a |= anc[i] | {i}
        anc.append(a)
    return anc


def lower_bound(graph: MemoryGraph, recompute: bool = False) -> int:
    """A peak no schedule goes below: for each node j, the static bytes, what j reads and
    defines, its transient, less every share j could take; without `recompute` also every
    value that must be live across j (defined by an ancestor of j, read by a descendant or
    returned)."""
    n = graph.n
    anc = ancestors(graph)
    readers: list[set[int]] = [set() for _ in graph.size]
    for j in range(n):
        for v in graph.reads[j]:
            readers[v].add(j)
    best = graph.static_bytes
    for j in range(n):
        live = set(graph.reads[j]) | {v for v, o in enumerate(graph.owner) if o == j}
        if not recompute:
            live |= {v for v, o in enumerate(graph.owner) if o in anc[j] and (
                v in graph.live_out or any(j in anc[r] for r in readers[v]))}
        saved = sum(graph.saving(sh) for sh in graph.shares if sh[0] == j)
        best = max(best, graph.static_bytes + sum(graph.size[v] for v in live)
                   + graph.transient[j] - saved)
    return best


def remat_candidates(graph: MemoryGraph) -> list[int]:
    """The nodes a schedule may recompute: `remat` and defining some bytes."""
    return [i for i in range(graph.n) if graph.remat[i] and graph.defined_bytes(i) > 0]


class _Rows:
    """A sparse constraint matrix built one row at a time: `lb <= a.x <= ub`."""

    def __init__(self) -> None:
        self.r: list[int] = []
        self.c: list[int] = []
        self.v: list[float] = []
        self.lb: list[float] = []
        self.ub: list[float] = []

    def add(self, coeffs: Sequence[tuple[int, float]], lb: float, ub: float) -> None:
        row = len(self.lb)
        for col, val in coeffs:
            self.r.append(row)
            self.c.append(col)
            self.v.append(val)
        self.lb.append(lb)
        self.ub.append(ub)


def solve(graph: MemoryGraph, max_recomputes: int = 0, cost_budget: float | None = None,
          time_limit: float = 20.0, peak_limit: float | None = None,
          incumbent: Sequence[int] | None = None, cuts: bool = True) -> IlpResult:
    """Minimise the peak over schedules of `graph` with at most `max_recomputes` extra runs of
    `remat` nodes, of total recompute cost <= `cost_budget` (None: unbounded). With
    `peak_limit`, minimise the recompute cost instead among schedules of peak <= it.

    `incumbent` (minimising the peak only) is a known schedule within those limits, e.g. xlc's:
    the ILP then looks only for schedules no worse, and returns the incumbent (status "time
    limit", or "optimal" when `lower_bound` proves it) if it finds none. `cuts` adds the
    cumulative liveness inequalities of the recompute-free case (a tighter relaxation).

    Requires `graph.check()` to pass and scipy. Guarantees: `schedule` (when found) is accepted
    by `simulate`, whose peak is <= the objective (equal when optimal and minimising the peak);
    `bound` is a proven lower bound on the objective.
    """
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    graph.check()
    n, nvals, nsh = graph.n, len(graph.size), len(graph.shares)
    own = [graph.defined_bytes(i) for i in range(n)]
    remat_nodes = remat_candidates(graph)
    k = max_recomputes if remat_nodes else 0
    if cost_budget is not None and remat_nodes:
        if min(graph.cost[i] for i in remat_nodes) > cost_budget:
            k = 0
    T = n + k
    known = _incumbent(graph, incumbent, k, cost_budget) if peak_limit is None else None
    floor = lower_bound(graph, k > 0)
    if known is not None and floor >= known.peak:  # proved optimal without a solve
        return IlpResult("optimal", known.peak, float(known.peak), float(floor), 0.0,
                         list(incumbent or []), known.recompute_cost, 0.0, T, 0, 0)
    r0, s0, z0 = 0, T * n, T * n + (T + 1) * nvals
    c0 = z0 + T * nsh
    use_cuts = cuts and k == 0
    M = c0 + (T * n if use_cuts else 0)
    nv = M + 1

    def C(t: int, i: int) -> int:
        return c0 + t * n + i

    def R(t: int, i: int) -> int:
        return r0 + t * n + i

    def S(t: int, v: int) -> int:
        return s0 + t * nvals + v

    def Z(t: int, s: int) -> int:
        return z0 + t * nsh + s

    rows = _Rows()
    for t in range(T):  # one node per stage; empty stages (recompute slack) last
        rows.add([(R(t, i), 1.0) for i in range(n)], 0.0 if k else 1.0, 1.0)
        if k and t + 1 < T:
            rows.add([(R(t + 1, i), 1.0) for i in range(n)]
                     + [(R(t, i), -1.0) for i in range(n)], -np.inf, 0.0)
    for i in range(n):  # every node runs; exactly once unless it may be recomputed
        once = k == 0 or i not in remat_nodes
        rows.add([(R(t, i), 1.0) for t in range(T)], 1.0, 1.0 if once else np.inf)
    for t in range(T):
        for v in range(nvals):  # keep only what was kept or computed
            rows.add([(S(t + 1, v), 1.0), (S(t, v), -1.0), (R(t, graph.owner[v]), -1.0)],
                     -np.inf, 0.0)
        for j in range(n):
            for v in graph.reads[j]:
                rows.add([(R(t, j), 1.0), (S(t, v), -1.0)], -np.inf, 0.0)
            for i in graph.order_deps[j] - {graph.owner[v] for v in graph.reads[j]}:
                rows.add([(R(t, j), 1.0)] + [(R(s, i), -1.0) for s in range(t)], -np.inf, 0.0)
        for s, (j, a, _) in enumerate(graph.shares):
            rows.add([(Z(t, s), 1.0), (R(t, j), -1.0)], -np.inf, 0.0)
            rows.add([(Z(t, s), 1.0), (S(t + 1, a), 1.0)], -np.inf, 1.0)
        for col in (1, 2):  # each operand and each output in one share at most
            groups: dict[int, list[int]] = {}
            for s, share in enumerate(graph.shares):
                groups.setdefault(share[col], []).append(s)
            for members in groups.values():
                if len(members) > 1:
                    rows.add([(Z(t, s), 1.0) for s in members], -np.inf, 1.0)
        mem = [(S(t, v), float(graph.size[v])) for v in range(nvals) if graph.size[v]]
        mem += [(R(t, i), float(own[i] + graph.transient[i])) for i in range(n)
                if own[i] + graph.transient[i]]
        mem += [(Z(t, s), -float(graph.saving(sh))) for s, sh in enumerate(graph.shares)]
        rows.add(mem + [(M, -1.0)], -np.inf, -float(graph.static_bytes))
    if use_cuts:  # C[t,i]: node i ran by stage t; a value is kept until its readers ran
        for t in range(T):
            rows.add([(C(t, i), 1.0), (R(t, i), -1.0)] + ([(C(t - 1, i), -1.0)] if t else []),
                     0.0, 0.0)
        for t in range(1, T):
            for v in range(nvals):
                o = graph.owner[v]
                for j in range(n):
                    if v in graph.reads[j]:
                        rows.add([(S(t, v), 1.0), (C(t - 1, o), -1.0), (C(t - 1, j), 1.0)],
                                 0.0, np.inf)
    recompute = [(R(t, i), float(graph.cost[i])) for t in range(T) for i in remat_nodes]
    base = float(sum(graph.cost[i] for i in remat_nodes))
    if k and cost_budget is not None:
        rows.add(recompute, -np.inf, base + cost_budget)
    lo, hi = np.zeros(nv), np.ones(nv)
    lo[M] = floor
    anc = ancestors(graph)
    desc = [sum(1 for j in range(n) if i in anc[j]) for i in range(n)]
    for i in range(n):  # no node runs before its ancestors (nor, run once, after its
        for t in range(T):  # descendants)
            if t < len(anc[i]) or (k == 0 and t > T - 1 - desc[i]):
                hi[R(t, i)] = 0.0
    hi[S(0, 0):S(1, 0)] = 0.0  # nothing is kept into the first stage
    for v in graph.live_out:
        lo[S(T, v)] = 1.0
    hi[M] = min(np.inf if peak_limit is None else peak_limit,
                np.inf if known is None else known.peak)
    c = np.zeros(nv)
    if peak_limit is None:
        c[M] = 1.0
    else:
        for col, val in recompute:
            c[col] = val
    integrality = np.zeros(nv)
    integrality[r0:s0] = 1
    integrality[z0:M] = 1
    a = coo_matrix((rows.v, (rows.r, rows.c)), shape=(len(rows.lb), nv)).tocsr()
    start = time.perf_counter()
    with _quiet_stdout():
        res = milp(c, integrality=integrality, bounds=Bounds(lo, hi),
                   constraints=LinearConstraint(a, np.array(rows.lb), np.array(rows.ub)),
                   options={"time_limit": float(time_limit), "disp": False,
                            "mip_rel_gap": MIP_REL_GAP})
    seconds = time.perf_counter() - start
    offset = 0.0 if peak_limit is None else base
    out = _result(graph, res, T, seconds, nv, len(rows.lb), offset)
    if peak_limit is None:
        out.bound = max(floor, out.bound) if not np.isnan(out.bound) else float(floor)
    if known is not None and (out.peak is None or out.peak >= known.peak):  # keep a tie
        assert incumbent is not None
        out.peak, out.objective = known.peak, float(known.peak)
        out.schedule, out.recompute_cost = list(incumbent), known.recompute_cost
        if out.status != "optimal":
            out.status = "time limit"
            out.gap = (known.peak - out.bound) / known.peak
    return out


def _incumbent(graph: MemoryGraph, schedule: Sequence[int] | None, k: int,
               cost_budget: float | None) -> Simulation | None:
    """The simulation of `schedule` when it is within `k` recomputations and the budget."""
    if schedule is None or len(schedule) - graph.n > k:
        return None
    sim = simulate(graph, schedule)
    if cost_budget is not None and sim.recompute_cost > cost_budget:
        return None
    return sim


def _result(graph: MemoryGraph, res: object, T: int, seconds: float, nv: int, nc: int,
            offset: float) -> IlpResult:
    """scipy's OptimizeResult as an IlpResult (the schedule read off R); `offset` is taken off
    the objective and its bound (the first runs' cost when minimising the cost)."""
    n = graph.n
    x = getattr(res, "x", None)
    code = int(getattr(res, "status", 4))
    raw_bound = getattr(res, "mip_dual_bound", None)
    bound = float("nan") if raw_bound is None else float(raw_bound) - offset
    if x is None:
        status = "infeasible" if code == 2 else "no solution"
        return IlpResult(status, None, None, bound, float("nan"), [], 0, seconds, T, nv, nc)
    r = np.asarray(x[:T * n]).reshape(T, n)
    schedule = prune(graph, [int(np.argmax(r[t])) for t in range(T) if r[t].max() > 0.5])
    sim = simulate(graph, schedule)
    objective = float(getattr(res, "fun", np.nan)) - offset
    gap = 0.0 if code == 0 else float(getattr(res, "mip_gap", None) or float("nan"))
    return IlpResult("optimal" if code == 0 else "time limit", sim.peak, objective, bound, gap,
                     schedule, sim.recompute_cost, seconds, T, nv, nc)


def solve_lexicographic(graph: MemoryGraph, max_recomputes: int, cost_budget: float | None,
                        time_limit: float = 20.0, incumbent: Sequence[int] | None = None
                        ) -> IlpResult:
    """`solve` for the least peak, then (with recomputation allowed) again for the cheapest
    schedule of that peak: the result keeps the first solve's status, bound and gap, and
    takes the second's schedule and cost when it found one no worse. `seconds` is the sum."""
    first = solve(graph, max_recomputes, cost_budget, time_limit, incumbent=incumbent)
    if first.peak is None or not max_recomputes or first.recompute_cost == 0 \
            or (incumbent is not None and first.schedule == list(incumbent)):
        return first  # nothing recomputed, or no better than the known schedule
    second = solve(graph, max_recomputes, cost_budget, time_limit, peak_limit=first.peak)
    first.seconds += second.seconds
    if second.peak is not None and second.peak <= first.peak \
            and second.recompute_cost <= first.recompute_cost:
        first.schedule, first.recompute_cost = second.schedule, second.recompute_cost
    return first


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Silence file descriptor 1: HiGHS prints a few messages from C even with disp=False."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
