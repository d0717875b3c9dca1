"""How far xlc's peak memory is from the optimum: an exact (ILP) reference on small graphs.

For each corpus case (`--hlo` file, `--mlp` training step) whose optimized entry has at most
`--max-instructions` instructions: run xlc's pipeline (the backend's passes, CPU by default),
model the entry computation as a DAG (`build_graph`) and solve with HiGHS
(`scipy.optimize.milp`; the accounting and the ILP are in `tools/memory_optimum_ilp.py`):

a. the least peak over all orders without recomputation, against xlc's schedule (`ILP dev`:
   that order packed by buffer assignment); `floor`: the least peak at any recompute cost;
b. per `--budget-fraction` f: xlc with `memory_limit = f x` its device peak, followed by
   rematerialization alone (`--backend-budget-passes`: the backend's list; the ILP then adopts
   the workspace sizes it chose), against the least peak whose recompute cost is no higher.
Each solve starts from a known schedule: xlc's order, or xlc's remat plan mapped onto the
unconstrained graph (`map_plan`). When the time limit stops HiGHS (`*`) that, or the best it
found, is the answer; `gap%` compares xlc with it, `max%` with HiGHS's proven lower bound.

**The model.** Nodes: the entry's scheduled instructions but parameters and constants.
Storage is per alias set (`DataflowAnalysis.alias_sets`): one holding an entry parameter is
static (counted throughout, as in `device_peak_bytes`), one holding a constant counts nothing
(as there); any other belongs to the first node in xlc's schedule defining one of its buffers
(instructions in while / conditional / call bodies map to the caller) and is read by every
node using or holding it (get-tuple-element, bitcast and tuple forward) and by its other
definers (in-place updates). So forwarders define nothing and a returned value lives from its
definition to the end. A set nothing else reads (a workspace, a temp inside a loop body) is a
transient of its node; inside control flow, the peak of such sets under xlc's schedule of the
bodies (`LiveRanges`). An output may take over a dying operand's storage where buffer
assignment would (`_share_pairs`). Unlike `device_peak_bytes`: no fragmentation or alignment.

**Recompute cost** is the bytes a node reads and writes (its operands' and results' leaf sizes,
less outputs nobody reads, such as workspaces): after fusion nearly every kernel is bandwidth-
bound, so bytes track run time better than FLOPs and price a dot and a fusion alike. Never
recomputed: parameters, constants, rng, custom-calls but xlc's packed GEMM (a dot, which the
remat pass recomputes too), control flow, side effects (also inside fusions), forwarders, and
members of in-place chains. xlc's cost is what its nodes cost beyond the unconstrained
module's (`clone_cost`: clones count, moves do not). Not modelled: host offload, recomputing
part of a fusion; the ILP's remat plan is not turned back into HLO. Usage (see `--help`):

    python tools/memory_optimum.py [--cases NAME ...] [--hlo FILE ...] [--mlp L ...]
        [--time-limit S] [--budget-fraction F ...] [--no-fusion] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.memory_optimum_ilp import (  # noqa: E402
    IlpResult,
    MemoryGraph,
    remat_candidates,
    simulate,
    solve,
    solve_lexicographic,
)
from xlc.api import optimize_module  # noqa: E402
from xlc.backends import get_backend  # noqa: E402
from xlc.hlo.ir import HloInstruction, HloModule  # noqa: E402
from xlc.hlo.opcodes import Opcode  # noqa: E402
from xlc.hlo.parser import parse_module  # noqa: E402
from xlc.hlo.shape import Shape  # noqa: E402
from xlc.options import default_options  # noqa: E402
from xlc.passes.buffer_assignment import assign_buffers  # noqa: E402
from xlc.passes.dataflow import (  # noqa: E402
    CONTROL,
    AliasSet,
    DataflowAnalysis,
    can_share_operand_buffer,
)
from xlc.passes.memory_budget import device_peak_bytes  # noqa: E402
from xlc.passes.optimize import OptimizedModule  # noqa: E402
from xlc.passes.optimize import optimize_module as optimize_passes  # noqa: E402
from xlc.passes.ordering import LiveRanges, SequentialHloOrdering  # noqa: E402
from xlc.passes.remat_model import recomputable_member  # noqa: E402
from xlc.passes.rematerialization import Rematerialization  # noqa: E402

CONTROL_FLOW = frozenset({Opcode.WHILE, Opcode.CONDITIONAL, Opcode.CALL})
STATIC = frozenset({Opcode.PARAMETER, Opcode.CONSTANT})
FORWARDERS = frozenset({Opcode.GET_TUPLE_ELEMENT, Opcode.BITCAST, Opcode.TUPLE, Opcode.DOMAIN,
                        Opcode.OPT_BARRIER, Opcode.ADD_DEPENDENCY})
DEFAULT_FRACTIONS = (0.5, 0.6, 0.7, 0.8)


@dataclass
class ModuleGraph:
    """`build_graph`'s result: the MemoryGraph, node i's instruction, and the number of
    instructions in the entry's schedule (parameters and constants included)."""

    graph: MemoryGraph
    nodes: list[HloInstruction]
    instructions: int

    def xlc_peak(self) -> int:
        """The model's peak of xlc's own schedule (the node order)."""
        return simulate(self.graph, range(self.graph.n)).peak

    def total_cost(self) -> int:
        """The summed cost of every node (one run each)."""
        return sum(self.graph.cost)


def _bytes(shape: Shape) -> int:
    """Bytes of the arrays in `shape` (tuple index tables not counted)."""
    return sum(s.byte_size() for _, s in shape.leaves() if s.is_array)


def recompute_cost(inst: HloInstruction, scratch: int = 0) -> int:
    """Bytes `inst` reads and writes, less `scratch` (bytes of outputs nobody reads, such as a
    GEMM workspace); 0 for forwarders, parameters and constants."""
    if inst.opcode in FORWARDERS or inst.opcode in STATIC:
        return 0
    return sum(_bytes(o.shape) for o in inst.operands) + _bytes(inst.shape) - scratch


def may_recompute(inst: HloInstruction) -> bool:
    """The rematerialization pass's own rules (`recomputable_member`: pure, no control flow,
    rng, copies or custom-calls other than xlc's packed GEMM), less the forwarders
    (get-tuple-element), which the model treats as free."""
    return inst.opcode not in FORWARDERS and recomputable_member(inst)


def _top_level_map(seq: list[HloInstruction], df: DataflowAnalysis) -> dict[int, int]:
    """uid -> position in `seq` of the top-level instruction it belongs to (bodies of
    control-flow instructions map to the caller)."""
    top: dict[int, int] = {}
    for k, inst in enumerate(seq):
        top[inst.uid] = k
        work = [c for c in inst.called if df.kinds.get(c) == CONTROL]
        seen: set[int] = set()
        while work:
            comp = work.pop()
            if id(comp) in seen:
                continue
            seen.add(id(comp))
            for sub in comp.instructions:
                top.setdefault(sub.uid, k)
                work += [c for c in sub.called if df.kinds.get(c) == CONTROL]
    return top


def _transient(sets: list[AliasSet], live: LiveRanges) -> int:
    """The peak of the summed sizes of `sets` over the flattened schedule."""
    events: dict[int, int] = {}
    for aset in sets:
        for iv in live.set_intervals(aset):
            events[iv.start] = events.get(iv.start, 0) + aset.size
            events[iv.end + 1] = events.get(iv.end + 1, 0) - aset.size
    peak = cur = 0
    for t in sorted(events):
        cur += events[t]
        peak = max(peak, cur)
    return peak


@dataclass
class _SetInfo:
    """One alias set of the device heap as the model sees it."""

    aset: AliasSet
    owner: int  # node id
    readers: frozenset[int]  # node ids
    out: bool


def _share_pairs(df: DataflowAnalysis, sets: list[_SetInfo], nodes: list[HloInstruction]
                 ) -> list[tuple[int, int, int]]:
    """(node j, index of the operand set, index of the output set) for every output of j that
    may take over the storage of an operand set dying at j: the heap simulator's rule
    (`heap_simulator._reusable_operand`, which buffer assignment also runs for output sets):
    the operand set is a temp (not live-out) of the output's size and colour, j defines the
    output itself and is not a copy, the output is no index table, and
    `can_share_operand_buffer` allows it."""
    index = {info.aset.id: k for k, info in enumerate(sets)}
    pairs = []
    for k, info in enumerate(sets):
        user = nodes[info.owner]
        if user.opcode is Opcode.COPY:
            continue
        for buf in info.aset.buffers:
            if buf.instruction is not user or buf.shape.is_tuple:
                continue
            for operand in user.operands:
                for ob in df.buffers_at(operand, ()):
                    src = index.get(df.alias_set(ob).id)
                    if src is None or src == k:
                        continue
                    other = sets[src]
                    if (other.out or other.aset.size != info.aset.size
                            or other.aset.color != info.aset.color
                            or info.owner not in other.readers):
                        continue
                    if can_share_operand_buffer(operand, user, (), buf.index):
                        pairs.append((info.owner, src, k))
    return sorted(set(pairs))


def build_graph(module: HloModule) -> ModuleGraph:
    """The DAG of `module`'s scheduled entry computation (see the module docstring).

    Requires `module.schedule` to cover the entry and its control-flow callees. Guarantees a
    MemoryGraph whose node order is xlc's schedule (a topological order) and that passes
    `MemoryGraph.check`."""
    entry = module.entry
    assert entry is not None and module.schedule is not None
    seq = list(module.schedule[entry])
    df = DataflowAnalysis(module)
    top = _top_level_map(seq, df)
    node_of: dict[int, int] = {}
    nodes: list[HloInstruction] = []
    for k, inst in enumerate(seq):
        if inst.opcode not in STATIC:
            node_of[k] = len(nodes)
            nodes.append(inst)
    n = len(nodes)
    shared: set[int] = set()
    internal: list[list[AliasSet]] = [[] for _ in range(n)]
    transient = [0] * n
    scratch = [0] * n
    static = 0
    sets: list[_SetInfo] = []
    for aset in df.alias_sets:
        members = [b for b in aset.buffers if b.instruction.uid in top]
        if not members:
            continue  # fused / thread-local / unreachable: not in the device heap
        if any(b.instruction.opcode is Opcode.PARAMETER and b.computation is entry
               for b in members):
            static += aset.size
            continue
        tops = sorted({top[b.instruction.uid] for b in members})
        if any(b.instruction.opcode is Opcode.CONSTANT for b in members) or tops[0] not in node_of:
            continue
        readers = set(tops[1:])
        for b in members:
            readers |= {top[u.user.uid] for u in df.uses(b) if u.user.uid in top}
            readers |= {top[p.uid] for p, _ in df.positions(b) if p.uid in top}
        readers.discard(tops[0])
        owner = node_of[tops[0]]
        out = any(df.is_live_out(b) for b in members)
        if len(tops) > 1:
            shared.update(node_of[t] for t in tops if t in node_of)
        if not readers and not out:  # scratch: live only while its owner runs
            if nodes[owner].opcode in CONTROL_FLOW:
                internal[owner].append(aset)
            else:
                transient[owner] += aset.size
                scratch[owner] += aset.size
        elif aset.size:  # 0 bytes (an index table without storage): order edges suffice
            sets.append(_SetInfo(aset, owner, frozenset(node_of[r] for r in readers
                                                        if r in node_of), out))
    if any(internal):
        live = LiveRanges(module, module.schedule, df)
        for i, group in enumerate(internal):
            transient[i] += _transient(group, live) if group else 0
    pairs = _share_pairs(df, sets, nodes)
    # one value per (owner, readers, live-out) unless a set takes part in a share
    in_pairs = {p[1] for p in pairs} | {p[2] for p in pairs}
    value_of: dict[tuple[Any, ...], int] = {}
    set_value: list[int] = []
    owner_v: list[int] = []
    size_v: list[int] = []
    for k, info in enumerate(sets):
        key = (info.owner, info.readers, info.out, k if k in in_pairs else -1)
        if key not in value_of:
            value_of[key] = len(size_v)
            owner_v.append(info.owner)
            size_v.append(0)
        set_value.append(value_of[key])
        size_v[value_of[key]] += info.aset.size
    reads: list[set[int]] = [set() for _ in range(n)]
    live_out: set[int] = set()
    for k, info in enumerate(sets):
        for r in info.readers:
            reads[r].add(set_value[k])
        if info.out:
            live_out.add(set_value[k])
    order_deps = []
    for j, inst in enumerate(nodes):
        preds = {top[o.uid] for o in inst.operands + tuple(inst.control_predecessors)
                 if o.uid in top}
        order_deps.append(frozenset(node_of[p] for p in preds if p in node_of) - {j})
    remat = [may_recompute(inst) and j not in shared for j, inst in enumerate(nodes)]
    cost = [recompute_cost(inst, scratch[j]) for j, inst in enumerate(nodes)]
    graph = MemoryGraph(tuple(i.name for i in nodes), tuple(cost),
                        tuple(remat), tuple(transient), tuple(frozenset(r) for r in reads),
                        tuple(order_deps), tuple(owner_v), tuple(size_v), frozenset(live_out),
                        static, tuple((j, set_value[a], set_value[b]) for j, a, b in pairs))
    graph.check()
    return ModuleGraph(graph, nodes, len(seq))


def run_xlc(text: str, backend: str = "cpu", memory_limit: int | None = None,
            fusion: bool = True, remat_only: bool = True) -> OptimizedModule:
    """Parse `text` and run `backend`'s pipeline on it (without fusion when `fusion` is
    false). With `memory_limit`, the budget passes follow: rematerialization alone when
    `remat_only`, else the backend's own list (the CPU's also shrinks GEMM workspaces)."""
    opts = default_options().replace(backend=backend, memory_limit=memory_limit, fusion=fusion)
    module = parse_module(text)
    if not remat_only:
        return optimize_module(module, backend, opts)
    target = get_backend(backend)
    return optimize_passes(module, opts, passes=target.passes(opts), alignment=target.alignment,
                           name=backend, budget_passes=[Rematerialization()])


def clone_cost(base: ModuleGraph, after: ModuleGraph) -> int:
    """The recompute cost of the plan that turned `base` into `after`: what `after`'s nodes
    cost beyond `base`'s (a clone costs its cost, a moved instruction nothing; scratch outputs
    are not in the cost, so resized workspaces change nothing)."""
    return max(after.total_cost() - base.total_cost(), 0)


def map_plan(base: ModuleGraph, after: ModuleGraph, graph: MemoryGraph) -> list[int] | None:
    """xlc's rematerialized schedule as a schedule of `base`'s nodes (a clone or a moved
    instruction `x.remat...` stands for `x`), or None when a name has no counterpart or the
    sequence is not a valid schedule of `graph` (`base`'s graph, workspaces adopted)."""
    index = {name: i for i, name in enumerate(base.graph.names)}
    seq = [index.get(name.split(".remat")[0], -1) for name in after.graph.names]
    if -1 in seq:
        return None
    try:
        simulate(graph, seq)
    except ValueError:
        return None
    return seq


def adopt_workspaces(base: ModuleGraph, after: ModuleGraph) -> MemoryGraph:
    """`base`'s graph with the transient bytes of its custom-calls (GEMM and sort workspaces)
    as `after` has them, so the ILP plans with the workspaces a budget pass chose."""
    transient = dict(zip(after.graph.names, after.graph.transient))
    new = [transient.get(name, t) if inst.opcode is Opcode.CUSTOM_CALL else t
           for name, inst, t in zip(base.graph.names, base.nodes, base.graph.transient)]
    return replace(base.graph, transient=tuple(new))


def packed_peak_of_order(opt: OptimizedModule, mg: ModuleGraph, order: list[int],
                         backend: str = "cpu") -> int:
    """`device_peak_bytes` of `opt.module` scheduled in `order` (node ids, each once; parameters
    and constants first, in xlc's order). Requires a recompute-free order of `mg`'s nodes;
    does not modify the module."""
    module = opt.module
    assert module.entry is not None and module.schedule is not None
    static = [i for i in module.schedule[module.entry] if i.opcode in STATIC]
    schedule = dict(module.schedule)
    schedule[module.entry] = static + [mg.nodes[i] for i in order]
    ordering = SequentialHloOrdering(module, schedule)
    return device_peak_bytes(assign_buffers(module, ordering,
                                            alignment=get_backend(backend).alignment))


def _gap(ours: float | None, best: float | None) -> float | None:
    """(ours - best) / best in percent (with a proven lower bound as `best`: the most the gap
    can be); None when either is missing."""
    if ours is None or best is None or not best:
        return None
    return 100.0 * (ours - best) / best


def _ilp_fields(res: IlpResult, prefix: str) -> dict[str, Any]:
    """The JSON fields of one ILP result, names starting with `prefix`."""
    bound = None if math.isnan(res.bound) else res.bound
    gap = None if math.isnan(res.gap) else res.gap
    return {f"{prefix}peak": res.peak, f"{prefix}status": res.status, f"{prefix}bound": bound,
            f"{prefix}mip_gap": gap, f"{prefix}seconds": res.seconds,
            f"{prefix}recompute_cost": res.recompute_cost,
            f"{prefix}schedule": [int(i) for i in res.schedule]}


def compare_case(name: str, text: str, fractions: tuple[float, ...] = DEFAULT_FRACTIONS,
                 time_limit: float = 20.0, max_instructions: int = 60,
                 max_recomputes: int | None = None, backend: str = "cpu",
                 fusion: bool = True, remat_only: bool = True) -> dict[str, Any]:
    """One case's comparison as a JSON-able dict (see the module docstring); `skipped` says
    why when the optimized entry has more than `max_instructions` instructions.

    Fields: the entry's `instructions` and model `nodes`; `xlc_peak` (model) and
    `xlc_device_peak` of xlc's schedule; `ilp_*` the best order without recomputation, with
    `ilp_packed` its device peak; `floor_*` the least peak with recomputation at any cost
    (and the least cost reaching it); per fraction in `budgets`: the limit, xlc's peaks,
    `fits` and recompute cost under it, and `ilp_*` the least peak at no more cost; `gap_pct`
    = (xlc - ILP) / ILP in percent. `max_recomputes` caps the ILP's extra stages (default:
    the number of nodes it may recompute); `fusion=False` runs the pipeline without fusion;
    `remat_only=False` runs the backend's own budget passes (the ILP then gets the workspace
    sizes they chose: `adopt_workspaces`)."""
    t0 = time.perf_counter()
    base = run_xlc(text, backend, fusion=fusion, remat_only=remat_only)
    mg = build_graph(base.module)
    row: dict[str, Any] = {"case": name, "instructions": mg.instructions, "nodes": mg.graph.n}
    if mg.instructions > max_instructions:
        row["skipped"] = f"{mg.instructions} entry instructions > {max_instructions}"
        return row
    device0 = device_peak_bytes(base.assignment)
    row.update(xlc_peak=mg.xlc_peak(), xlc_device_peak=device0,
               static_bytes=mg.graph.static_bytes)
    xlc_order = list(range(mg.graph.n))
    order = solve(mg.graph, 0, None, time_limit, incumbent=xlc_order)
    row.update(_ilp_fields(order, "ilp_"))
    row["ilp_packed"] = packed_peak_of_order(base, mg, order.schedule, backend)
    row["gap_pct"] = _gap(row["xlc_peak"], order.peak)
    row["gap_max_pct"] = _gap(row["xlc_peak"], row["ilp_bound"])
    k = len(remat_candidates(mg.graph)) if max_recomputes is None else max_recomputes
    cache: dict[tuple[int, tuple[int, ...], int], IlpResult] = {
        (0, mg.graph.transient, k): order}  # nothing to recompute: the best order
    budgets = []
    for f in fractions:
        limit = int(f * device0)
        opt = run_xlc(text, backend, limit, fusion, remat_only)
        after = build_graph(opt.module)
        cost = clone_cost(mg, after)
        graph = adopt_workspaces(mg, after)
        plan = map_plan(mg, after, graph)
        kk = k if plan is None else max(k, len(plan) - mg.graph.n)
        key = (cost, graph.transient, k if cost == 0 else kk)
        if key not in cache:
            starts = [order.schedule] + ([plan] if plan is not None else [])
            start = min(starts, key=lambda sched: simulate(graph, sched).peak)
            if simulate(graph, start).recompute_cost > cost:
                start = order.schedule
            cache[key] = solve_lexicographic(graph, kk, float(cost), time_limit, start)
        res = cache[key]
        entry: dict[str, Any] = {
            "fraction": f, "limit": limit, "xlc_peak": after.xlc_peak(),
            "xlc_device_peak": device_peak_bytes(opt.assignment),
            "fits": None if opt.budget is None else bool(opt.budget.fits),
            "xlc_recompute_cost": cost, "xlc_instructions": after.instructions,
            "xlc_actions": [] if opt.budget is None else opt.budget.lines()[1:],
            "workspaces_changed": graph != mg.graph,
            "xlc_plan_in_base_model": None if plan is None else simulate(graph, plan).peak}
        entry.update(_ilp_fields(res, "ilp_"))
        entry["gap_pct"] = _gap(entry["xlc_peak"], res.peak)
        entry["gap_max_pct"] = _gap(entry["xlc_peak"], entry["ilp_bound"])
        budgets.append(entry)
    row["budgets"] = budgets
    # the floor last, starting from the best schedule the budgeted solves found
    known = [order.schedule] + [r.schedule for r in cache.values() if r.schedule]
    start = min(known, key=lambda sched: (simulate(mg.graph, sched).peak, len(sched)))
    k = max(k, len(start) - mg.graph.n)
    row.update(_ilp_fields(solve_lexicographic(mg.graph, k, None, time_limit, start), "floor_"))
    row["seconds"] = time.perf_counter() - t0
    return row


def _fmt(x: float | None, spec: str = "") -> str:
    return "-" if x is None else format(x, spec)


def _peak(r: dict[str, Any], prefix: str) -> str:
    """An ILP peak with its mark: * stopped at the time limit, ! no schedule."""
    mark = {"optimal": "", "time limit": "*"}.get(r[f"{prefix}status"], "!")
    return f"{_fmt(r[f'{prefix}peak'])}{mark}"


def format_table(rows: list[dict[str, Any]]) -> str:
    """The rows of `compare_case` as a text table with a summary (the only printer).

    `gap%` compares xlc with the ILP's best schedule, `max%` with HiGHS's proven lower bound
    (the most the gap can be; the same when the ILP is optimal)."""
    head = (f"{'case':<23} {'ins':>3} {'nod':>3} {'xlc':>9} {'xlc dev':>9} {'ILP':>9} "
            f"{'ILP dev':>9} {'floor':>9} {'gap%':>5} {'max%':>5} | {'frac':>4} {'limit':>9} "
            f"{'xlc@lim':>9} {'dev@lim':>9} {'fit':>3} {'xlc cost':>8} {'ILP@cost':>9} "
            f"{'ILP cost':>8} {'gap%':>5} {'max%':>5} {'ILP s':>6}")
    lines = [head, "-" * len(head)]
    maxima: list[float | None] = []
    seconds = 0.0
    for r in rows:
        if "budgets" not in r:
            lines.append(f"{r['case']:<23} skipped: {r.get('skipped') or r.get('error')}")
            continue
        first = (f"{r['case']:<23} {r['instructions']:>3} {r['nodes']:>3} {r['xlc_peak']:>9} "
                 f"{r['xlc_device_peak']:>9} {_peak(r, 'ilp_'):>9} "
                 f"{_fmt(r['ilp_packed']):>9} {_peak(r, 'floor_'):>9} "
                 f"{_fmt(r['gap_pct'], '.1f'):>5} {_fmt(r['gap_max_pct'], '.1f'):>5}")
        seconds += r["ilp_seconds"] + r["floor_seconds"]
        maxima.append(r["gap_max_pct"])
        if not r["budgets"]:
            lines.append(first)
        for k, b in enumerate(r["budgets"]):
            fit = {True: "yes", False: "no", None: "-"}[b["fits"]]
            lines.append((first if k == 0 else " " * len(first))
                         + f" | {b['fraction']:>4.2f} {b['limit']:>9} {b['xlc_peak']:>9} "
                         f"{b['xlc_device_peak']:>9} {fit:>3} {b['xlc_recompute_cost']:>8} "
                         f"{_peak(b, 'ilp_'):>9} {b['ilp_recompute_cost']:>8} "
                         f"{_fmt(b['gap_pct'], '.1f'):>5} {_fmt(b['gap_max_pct'], '.1f'):>5} "
                         f"{b['ilp_seconds']:>6.2f}")
            maxima.append(b["gap_max_pct"])
    done = [r for r in rows if "budgets" in r]
    proven = sum(1 for g in maxima if g is not None and g <= 10.0)
    worst = max((g for g in maxima if g is not None), default=None)
    lines.append(f"{len(done)} case(s) compared, {len(rows) - len(done)} skipped; xlc within "
                 f"10 % of the optimum (proven: max% <= 10) in {proven}/{len(maxima)} "
                 f"comparisons, largest max% {_fmt(worst, '.1f')}; ILP time (order + floor) "
                 f"{seconds:.1f} s, everything {sum(r['seconds'] for r in done):.1f} s.  "
                 "* = stopped at the time limit, ! = no schedule")
    return "\n".join(lines)


def mlp_step_hlo(layers: int, width: int = 128, batch: int = 512) -> str:
    """HLO text of an SGD step of a `layers`-deep tanh MLP traced with xlc.grad: a program
    whose activations are worth recomputing (the corpus's peaks are parameters and outputs)."""
    import numpy as np
    import xlc.numpy as xnp

    import xlc

    rng = np.random.default_rng(0)
    params = [(rng.normal(0, width ** -0.5, (width, width)).astype(np.float32),
               np.zeros(width, np.float32)) for _ in range(layers)]
    x, y = (rng.normal(size=(batch, width)).astype(np.float32) for _ in range(2))

    def loss(params: Any, x: Any, y: Any) -> Any:
        for w, b in params:
            x = xnp.tanh(x @ w + b)
        return xnp.mean((x - y) ** 2)

    def step(params: Any, x: Any, y: Any) -> Any:
        grads = xlc.grad(loss)(params, x, y)
        return [(w - 0.1 * gw, b - 0.1 * gb) for (w, b), (gw, gb) in zip(params, grads)]

    return str(xlc.jit(step, donate_argnums=0).lower(params, x, y).as_text())


def main(argv: list[str] | None = None) -> int:
    """Run the comparison on the corpus and print the table (JSON with `--json`)."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    ap.add_argument("--cases", nargs="*", default=[], help="case names (default: all)")
    ap.add_argument("--time-limit", type=float, default=20.0, help="seconds per ILP solve")
    ap.add_argument("--budget-fraction", type=float, nargs="*", default=list(DEFAULT_FRACTIONS),
                    help="memory_limit as fractions of xlc's unconstrained device peak")
    ap.add_argument("--max-instructions", type=int, default=60)
    ap.add_argument("--max-recomputes", type=int, default=None,
                    help="extra ILP stages for recomputation (default: the number of nodes "
                    "it may recompute)")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--backend-budget-passes", action="store_true",
                    help="under a limit run the backend's budget passes (CPU: also GEMM "
                    "workspace shrinking), not rematerialization alone")
    ap.add_argument("--no-fusion", action="store_true",
                    help="run the pipeline with fusion off (larger graphs, more to recompute)")
    ap.add_argument("--hlo", type=Path, nargs="*", default=[],
                    help="HLO text files to compare (with --mlp: instead of the corpus unless "
                    "--cases names cases too)")
    ap.add_argument("--mlp", type=int, nargs="*", default=[],
                    help="also compare generated L-layer MLP training steps (`mlp_step_hlo`)")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = ap.parse_args(argv)
    # xlc warns on every limit it cannot meet; the table's `fit` column says it instead
    logging.getLogger("xlc.passes.optimize").setLevel(logging.ERROR)
    cases = args.corpus / "cases"
    inputs: list[tuple[str, Any]] = []
    if args.cases or not (args.hlo or args.mlp):
        names = args.cases or sorted(p.name for p in cases.iterdir()
                                     if (p / "module.hlo").exists())
        inputs = [(name, (cases / name / "module.hlo").read_text) for name in names]
    inputs += [(path.stem, path.read_text) for path in args.hlo]
    inputs += [(f"mlp{n}_step", lambda n=n: mlp_step_hlo(n)) for n in args.mlp]
    rows = []
    for name, text in inputs:
        try:
            rows.append(compare_case(name, text(), tuple(args.budget_fraction),
                                     args.time_limit, args.max_instructions,
                                     args.max_recomputes, args.backend, not args.no_fusion,
                                     not args.backend_budget_passes))
        except Exception as e:  # one broken case must not hide the others
            rows.append({"case": name, "error": f"{type(e).__name__}: {e}"})
    print(format_table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
