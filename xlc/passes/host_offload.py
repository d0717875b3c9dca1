"""HostOffload: under a memory limit, values idle across the peak wait in pinned host memory.

A budget pass (`memory_budget.BudgetPass`): `fit_to_budget` runs it when
`CompileOptions.memory_limit` is set and the device peak is above it. It walks the entry
schedule, finds values that are live across the peak but idle there (no use between the last
use before the peak and the next one after it) and, when the transfers hide behind the kernels
in between, moves each one out and back (XLA's syntax and semantics):

    x = f32[N] ...                                        (last use before the idle stretch)
    cs = (f32[N]{0:S(5)}, f32[N], u32[]) copy-start(x)    device -> host, on the copy stream
    ... kernels hiding the transfer ...
    cd = f32[N]{0:S(5)} copy-done(cs)                     x's device buffer is free after this
    ... the peak ...
    cs2 = (f32[N], f32[N]{0:S(5)}, u32[]) copy-start(cd)  host -> device (prefetch)
    ... kernels hiding the transfer ...
    cd2 = f32[N] copy-done(cs2)                           the next use reads cd2
    y = ... use(cd2) ...

The cost model, per offloaded value of B bytes: each direction takes B / `pcie_bytes_per_s`
(plus the transfers of other copies whose windows overlap, since one copy stream carries them
one after the other); the kernels between copy-start and copy-done must take at least that
long, each estimated by `device.seconds` (bytes accessed / HBM bandwidth vs FLOPs / peak,
`xlc.hlo.cost_analysis`). Control flow (while, conditional, call) counts as no time, so the
estimate errs on the side of not offloading. Values are picked greedily: at the highest point
of the device live-bytes curve (no fragmentation), the largest value idle there whose
transfers hide; then the curve is recomputed, until the estimated peak is lower by the
measured excess over `limit` (`fit_to_budget` assigns buffers again and, while that lowers the
peak, runs the pass again to make up for the heap's fragmentation).

Candidates: array values of the entry computation in a device temp (not parameters,
constants, outputs, nor anything carried through tuples or control flow), at least
`min_bytes` big, each offloaded once (a value with a copy-start user is not a candidate).
Each action line names the value, its bytes, where it leaves (after which instruction, the
copy-done before which) and where it returns.

Requires: a verified module with `module.schedule` covering every control-flow computation
(`optimize_module` gives one). Guarantees: the module stays verified, `module.schedule` stays
a valid schedule (copies placed as described) and the entry's instruction list follows it;
both copy-dones and the prefetching copy-start carry a control predecessor (the instruction
scheduled before them), so a re-sequencing (the GPU's multi-stream BFS order) keeps the
overlap.

On the CPU this pass is not run: host memory is the only memory there, so `S(5)` and device
memory are the same DRAM and a copy frees nothing. Spilling to a memory-mapped file instead
would move the program's working set to disk at a few GB/s, which the OS's paging already does
for anonymous memory, and a program larger than RAM would first need its parameters and
outputs spilled, which buffer assignment does not model. The CPU and the interpreter still run
`copy-start` / `copy-done` (plain copies), so XLA text with them works everywhere.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from xlc.hlo.cost_analysis import H100, Device, instruction_cost
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import ASYNC_COPY_OPCODES, Opcode
from xlc.hlo.shape import Layout, PrimitiveType, Shape
from xlc.passes.buffer_assignment import BufferAssignment
from xlc.passes.dataflow import CONTROL, ENTRY, AliasSet, DataflowAnalysis, LogicalBuffer
from xlc.passes.memory_budget import HOST_MEMORY_SPACE, device_peak_bytes
from xlc.passes.ordering import LiveRanges

log = logging.getLogger("xlc.passes.host_offload")

DEFAULT_PCIE_BYTES_PER_S = 25e9
"""Host <-> device bandwidth per direction (pinned memory over PCIe; no measured figure in
../shared/reference/gpu-h100.md yet)."""


@dataclass(frozen=True)
class Offload:
    """One planned offload of `value` (entry positions in the current schedule): out after
    position `leave`, copy-done after `out_end` (the last kernel hiding the D2H copy), the
    prefetch before `in_start` (the first kernel hiding the H2D copy), back before `back`."""

    value: HloInstruction
    size: int
    leave: int
    out_end: int
    in_start: int
    back: int
    transfer_s: float
    out_s: float
    in_s: float


class HostOffload:
    """The host offload budget pass (see the module docstring). `device` is the roofline the
    kernels are estimated with, `pcie_bytes_per_s` the host <-> device copy bandwidth per
    direction, `min_bytes` the smallest value worth moving, `max_offloads` a bound on the
    values moved per call, `matmul_precision` the compile's default_matmul_precision (at
    "highest" f32 dots are priced at the FP32 peak, as the GPU then runs them)."""

    name = "host-offload"

    def __init__(self, device: Device = H100,
                 pcie_bytes_per_s: float = DEFAULT_PCIE_BYTES_PER_S,
                 min_bytes: int = 1 << 16, max_offloads: int = 64,
                 matmul_precision: str = "default"):
        self.device = device
        self.matmul_precision = matmul_precision
        self.pcie_bytes_per_s = pcie_bytes_per_s
        self.min_bytes = min_bytes
        self.max_offloads = max_offloads
        self.actions: list[str] = []

    def run_budget(self, module: HloModule, assignment: BufferAssignment, limit: int) -> bool:
        """Offload values until the estimated device peak is lower by the measured excess
        over `limit` (see the module docstring); appends one line per value to `actions` and
        returns whether the module changed. `fit_to_budget` runs it again on the new
        assignment while that lowers the peak."""
        entry = module.entry
        if entry is None or module.schedule is None or entry not in module.schedule:
            return False
        excess = device_peak_bytes(assignment) - limit
        if excess <= 0:
            return False
        model = _Model(module, self)
        goal = model.peak - excess
        moved = 0
        while model.peak > goal and moved < self.max_offloads:
            plan = model.best()
            if plan is None:
                break
            self.actions.append(_apply(module, entry, model.seq, plan))
            log.info("%s", self.actions[-1])
            moved += 1
            model = _Model(module, self)
        return moved > 0

    def transfer_seconds(self, nbytes: int) -> float:
        """The time one direction of a copy of `nbytes` takes."""
        return nbytes / self.pcie_bytes_per_s

    def kernel_seconds(self, inst: HloInstruction) -> float:
        """The roofline estimate of `inst`'s kernel (0 for copies and control flow)."""
        if inst.opcode in ASYNC_COPY_OPCODES or inst.opcode.is_control_flow:
            return 0.0
        return self.device.seconds(instruction_cost(inst, self.matmul_precision))


# ---- the model: entry positions, the device live-bytes curve, candidates --------------------
class _Model:
    """The entry schedule with its device live-bytes curve (`curve[k]`: bytes of device temps
    live at entry position k), kernel time estimates and the open copy windows."""

    def __init__(self, module: HloModule, owner: HostOffload):
        assert module.entry is not None and module.schedule is not None
        self.owner = owner
        self.entry = module.entry
        self.seq = list(module.schedule[module.entry])
        self.pos = {inst.uid: k for k, inst in enumerate(self.seq)}
        self.df = DataflowAnalysis(module)
        live = LiveRanges(module, module.schedule, self.df)
        at = _entry_positions(live, self.seq)
        self.temps = _device_temps(self.df)
        diff = [0] * (len(self.seq) + 1)
        last = len(at) - 1
        for aset in self.temps:
            spans = sorted((at[iv.start], at[min(iv.end, last)])
                           for iv in live.set_intervals(aset))
            merged: list[list[int]] = []
            for a, b in spans:  # loop gaps inside one while map to one entry position
                if merged and a <= merged[-1][1] + 1:
                    merged[-1][1] = max(merged[-1][1], b)
                else:
                    merged.append([a, b])
            for a, b in merged:
                diff[a] += aset.size
                diff[b + 1] -= aset.size
        self.curve: list[int] = []
        total = 0
        for d in diff[:-1]:
            total += d
            self.curve.append(total)
        self.peak = max(self.curve, default=0)
        self.seconds = [owner.kernel_seconds(i) for i in self.seq]
        self.windows = _copy_windows(self.seq, self.pos)

    def best(self) -> Offload | None:
        """The largest value idle across the highest point of the curve whose transfers hide
        (None when there is none)."""
        if not self.seq:
            return None
        top = self.curve.index(self.peak)
        plans = [p for aset in self.temps if (p := self._plan(aset, top)) is not None]
        if not plans:
            log.debug("no value idle across position %d (%s) can be offloaded", top,
                      self.seq[top].name)
            return None
        return max(plans, key=lambda p: (p.size, p.back - p.leave, -p.value.uid))

    def _plan(self, aset: AliasSet, top: int) -> Offload | None:
        buf = _candidate_buffer(self.df, aset, self.entry, self.owner.min_bytes)
        if buf is None:
            return None
        value = buf.instruction
        times = sorted({self.pos[u.user.uid] for u in self.df.uses(buf)})
        stops = [self.pos[value.uid]] + times
        gap = next(((a, b) for a, b in zip(stops, stops[1:]) if a < top < b), None)
        if gap is None:
            return None
        leave, back = gap
        need = self.owner.transfer_seconds(buf.size)
        out = self._hide(range(leave + 1, top), need, leave)
        inn = self._hide(range(back - 1, top, -1), need, back)
        if out is None or inn is None:
            log.debug("%s (%d bytes): the transfers (%.2g s each way) do not hide between "
                      "%s and %s", value.name, buf.size, need, self.seq[leave].name,
                      self.seq[back].name)
            return None
        (out_end, out_s), (in_start, in_s) = out, inn
        return Offload(value, buf.size, leave, out_end, in_start, back, need, out_s, in_s)

    def _hide(self, positions: range, need: float, anchor: int) -> tuple[int, float] | None:
        """Walk `positions` (away from `anchor`) until the kernels passed take `need` seconds
        plus the transfers of open copy windows overlapping the stretch: the last position
        and the kernel time, or None when the stretch runs out."""
        acc = 0.0
        for k in positions:
            acc += self.seconds[k]
            lo, hi = min(anchor, k), max(anchor, k)
            busy = sum(s for a, b, s in self.windows if a <= hi and lo <= b)
            if acc >= need + busy / self.owner.pcie_bytes_per_s:
                return k, acc
        return None


def _entry_positions(live: LiveRanges, seq: list[HloInstruction]) -> list[int]:
    """Flattened logical time -> entry position (a callee's times map to its caller)."""
    at = [0] * (live.end_time + 1)
    prev = -1
    for k, inst in enumerate(seq):
        t = live.first.get(inst.uid, prev)
        for u in range(prev + 1, min(t, live.end_time) + 1):
            at[u] = k
        prev = max(prev, t)
    for u in range(prev + 1, live.end_time + 1):
        at[u] = len(seq) - 1
    return at


def _device_temps(df: DataflowAnalysis) -> list[AliasSet]:
    """The alias sets buffer assignment puts into a device temp heap: reachable through the
    entry or control flow only, not an entry parameter, constant or live-out value, and not
    in host memory."""
    out = []
    for aset in df.alias_sets:
        if aset.color == HOST_MEMORY_SPACE:
            continue
        if any(df.kinds[b.computation] not in (ENTRY, CONTROL) for b in aset.buffers):
            continue
        if any(b.instruction.opcode in (Opcode.PARAMETER, Opcode.CONSTANT)
               or df.is_live_out(b) for b in aset.buffers):
            continue
        out.append(aset)
    return out


def _candidate_buffer(df: DataflowAnalysis, aset: AliasSet, entry: HloComputation,
                      min_bytes: int) -> LogicalBuffer | None:
    """The set's one buffer when it is an offloadable value: an array defined at the top
    level of `entry` (not by a copy), read directly by entry instructions only, never
    forwarded (tuple, bitcast, control flow), at least `min_bytes`, not offloaded yet."""
    if len(aset.buffers) != 1:
        return None
    buf = aset.buffers[0]
    inst = buf.instruction
    if buf.index or not inst.shape.is_array or inst.parent is not entry \
            or inst.opcode in ASYNC_COPY_OPCODES or buf.size < min_bytes:
        return None
    if df.positions(buf) != [(inst, ())]:
        return None
    uses = df.uses(buf)
    if not uses or any(u.user.parent is not entry or u.operand_index
                       or u.user.opcode is Opcode.COPY_START for u in uses):
        return None
    return buf


def _copy_windows(seq: list[HloInstruction], pos: dict[int, int]
                  ) -> list[tuple[int, int, int]]:
    """(copy-start position, copy-done position, bytes) of every copy pair already placed."""
    out = []
    for inst in seq:
        if inst.opcode is Opcode.COPY_DONE:
            start = inst.operands[0]
            if start.uid in pos:
                out.append((pos[start.uid], pos[inst.uid], inst.shape.byte_size()))
    return out


# ---- the rewrite ------------------------------------------------------------------------------
def host_shape(shape: Shape) -> Shape:
    """`shape` in host memory: its layout with `S(5)` appended (`f32[8]{0:S(5)}`)."""
    lay = shape.layout or Layout(tuple(range(shape.rank - 1, -1, -1)))
    return Shape(shape.element_type, shape.dims, Layout(lay.minor_to_major,
                                                        lay.tail + f"S({HOST_MEMORY_SPACE})"),
                 None, shape.dynamic_dims)


def _apply(module: HloModule, entry: HloComputation, seq: list[HloInstruction],
           p: Offload) -> str:
    """Insert the two copy pairs of `p`, rewrite the uses from `p.back` on, update the
    schedule; returns the action line."""
    v = p.value
    dev, host = v.shape, host_shape(v.shape)
    ctx = Shape.array(PrimitiveType.U32, ())
    cs_out = entry.add(Opcode.COPY_START, Shape.tuple_of([host, dev, ctx]), [v],
                       name=f"copy-start.offload.{v.name}")
    cd_out = entry.add(Opcode.COPY_DONE, host, [cs_out], name=f"copy-done.offload.{v.name}")
    cs_in = entry.add(Opcode.COPY_START, Shape.tuple_of([dev, host, ctx]), [cd_out],
                      name=f"copy-start.prefetch.{v.name}")
    cd_in = entry.add(Opcode.COPY_DONE, dev, [cs_in], name=f"copy-done.prefetch.{v.name}")
    later = {inst.uid for inst in seq[p.back:]}
    for user in list(v.users):
        if user.uid in later:
            user.replace_operand_with(v, cd_in)
    # pin the waits and the prefetch where the cost model put them
    cd_out.add_control_predecessor(seq[p.out_end])
    cs_in.add_control_predecessor(seq[p.in_start - 1])
    cd_in.add_control_predecessor(seq[p.back - 1])
    new = (seq[:p.leave + 1] + [cs_out] + seq[p.leave + 1:p.out_end + 1] + [cd_out]
           + seq[p.out_end + 1:p.in_start] + [cs_in] + seq[p.in_start:p.back] + [cd_in]
           + seq[p.back:])
    assert module.schedule is not None
    module.schedule[entry] = new
    entry.instructions = list(new)
    us = 1e6
    return (f"offloaded {v.name} ({p.size} bytes) to host memory S({HOST_MEMORY_SPACE}): "
            f"leaves after {seq[p.leave].name} (copy done before "
            f"{seq[p.out_end + 1].name}), returns before {seq[p.back].name} (prefetched "
            f"after {seq[p.in_start - 1].name}); {p.transfer_s * us:.1f} us each way behind "
            f"{p.out_s * us:.1f} / {p.in_s * us:.1f} us of kernels")
