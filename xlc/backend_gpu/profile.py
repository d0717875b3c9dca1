"""Run-time profiles of GPU executables: CUDA events around every thunk (docs/profiling.md).

An executable compiled with `CompileOptions.profile` (`GpuExecutable.profile`) gets a
`ThunkProfiler` in its `GpuRuntime`. Per call:

* `begin`: the host clock (CLOCK_MONOTONIC ns, `time.monotonic_ns`) is read and a *base*
  event recorded on stream 0, before anything of the schedule is issued;
* `around`: every thunk but a sequential one (kernel launches, memsets, device copies,
  copy-start / copy-done, host calls, and while / conditional as a whole) is issued between
  two events recorded on the thunk's stream (after the waits for its `wait_events`, before
  its own `record_event`);
* `end`: one more event on stream 0 after the final waits: the call's device span;
* `finish` (after the call's synchronisation): `cuEventElapsedTime(base, e)` places every
  event on the device timeline; the host time read in `begin` anchors it on CLOCK_MONOTONIC
  (so GPU and CPU events share a clock; the device may reach the base event later than the
  host issued it, when earlier work such as the argument uploads is still queued).

Events are created with timing enabled (no `CU_EVENT_DISABLE_TIMING`) once per executable:
a pool sized for the schedule (loops with a known trip count included, up to
`INITIAL_PAIRS` pairs) that grows only when a call needs more (an uncounted loop running
longer than before) and then keeps its size. Graph mode is off while profiling (the runtime
issues the schedule directly). Unprofiled executables have no profiler and issue exactly the
driver calls they did before.

The recorded `xlc.profiling.RawEvent`s (device 0, `thread` = the stream index) collect in
one buffer per process: `collect()` takes them as a `Profile`; with
`XLC_FLAGS=--profile=DIR` those still uncollected at exit go to
`DIR/xlc-<pid>.gpu.trace.json`.
"""
from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from xlc.backend_gpu.cuda import check, compute_capability
from xlc.backend_gpu.thunks import (
    ConditionalThunk,
    CopyStartThunk,
    DeviceToDeviceCopyThunk,
    HostCallThunk,
    KernelThunk,
    Memset32Thunk,
    MemzeroThunk,
    SequentialThunk,
    Thunk,
    WhileThunk,
)
from xlc.profiling import Profile, RawEvent, write_uncollected

if TYPE_CHECKING:
    from xlc.backend_gpu.executable import GpuExecutable

log = logging.getLogger("xlc.profile")

CAPACITY = 1 << 20
"""Events the process buffer holds; later ones are counted as dropped until `collect()`."""

INITIAL_PAIRS = 4096
"""Most event pairs created up front per executable (the pool grows past it on demand)."""

DEVICE = 0
"""The device the runtime runs on (device 0's primary context)."""

_lock = threading.Lock()
_events: list[RawEvent] = []
_dropped = 0
_devices: dict[int, str] = {}
_writer_registered = False


# ---- the thunk table -------------------------------------------------------------------------
def thunk_table(exe: GpuExecutable) -> tuple[dict[int, int], dict[int, dict[str, Any]]]:
    """(id(thunk) -> unit id, unit id -> table entry) for every thunk of `exe`'s schedule but
    the sequential ones; unit 0 is the whole call. An entry has the keys of the CPU's unit
    table (name = the HLO instruction, opcode, computation, top, instructions, flops,
    transcendentals, bytes) plus `thunk` (its kind), `stream`, and for kernels `kernel`,
    `grid`, `block`. Kernels carry their instruction's cost (`instruction_cost`; an
    instruction run as k kernels gives each 1/k of it), memsets the bytes they write, copies
    the bytes they read and write, host calls their operand and result bytes. Thunks inside a
    while / conditional are not `top`."""
    from xlc.hlo.cost_analysis import instruction_cost

    module = exe.module
    insts = {i.name: i for c in module.computations if not c.is_fusion_computation
             for i in c.instructions}
    per_inst = Counter(t.hlo for t in exe.all_thunks() if isinstance(t, KernelThunk))
    assert module.entry is not None
    call: dict[str, Any] = {"name": module.name, "opcode": "call",
                            "computation": module.entry.name, "top": False,
                            "instructions": [], "flops": 0, "transcendentals": 0, "bytes": 0}
    kids: dict[int, int] = {}
    infos: dict[int, dict[str, Any]] = {0: call}

    def visit(t: Thunk, top: bool) -> None:
        if isinstance(t, SequentialThunk):
            for c in t.thunks:
                visit(c, top)
            return
        inst = insts.get(t.hlo)
        info: dict[str, Any] = {
            "name": t.hlo, "opcode": inst.opcode.text if inst is not None else t.kind,
            "computation": inst.parent.name if inst is not None and inst.parent else "",
            "top": top, "instructions": [t.hlo] if inst is not None else [],
            "flops": 0, "transcendentals": 0, "bytes": 0, "thunk": t.kind,
            "stream": t.stream}
        if isinstance(t, KernelThunk):
            info.update(kernel=t.kernel, grid=list(t.grid), block=list(t.block))
            if inst is not None:
                cost, k = instruction_cost(inst), per_inst[t.hlo]
                info.update(flops=cost.flops // k, transcendentals=cost.transcendentals // k,
                            bytes=cost.bytes_accessed // k)
        elif isinstance(t, (MemzeroThunk, Memset32Thunk)):
            info["bytes"] = t.dest.size
        elif isinstance(t, (DeviceToDeviceCopyThunk, CopyStartThunk)):
            info["bytes"] = 2 * t.src.size
        elif isinstance(t, HostCallThunk):
            info["bytes"] = sum(s.size for s in t.operands) + sum(s.size for s in t.results)
        kid = len(infos)
        kids[id(t)] = kid
        infos[kid] = info
        if top:
            for key in ("flops", "transcendentals", "bytes"):
                call[key] += info[key]
        for c in t.children():
            visit(c, False)

    visit(exe.plan.thunks, True)
    return kids, infos


def event_pairs(t: Thunk) -> int:
    """Event pairs one call of `t` records (an uncounted loop counted as one trip)."""
    if isinstance(t, SequentialThunk):
        return sum(event_pairs(c) for c in t.thunks)
    if isinstance(t, WhileThunk):
        if t.trip_count is not None:
            return 1 + t.trip_count * event_pairs(t.body)
        return 1 + 2 * event_pairs(t.condition) + event_pairs(t.body)
    if isinstance(t, ConditionalThunk):
        return 1 + max((event_pairs(b) for b in t.branches), default=0)
    return 1


# ---- recording -------------------------------------------------------------------------------
IssueFn = Callable[[Any, Any, Any], None]


class ThunkProfiler:
    """The CUDA events of one executable's runtime and the spans of the call in flight (see
    the module docstring). Used under the runtime's lock: one call at a time."""

    def __init__(self, exe: GpuExecutable, drv: Any, streams: list[Any]):
        """Build the thunk table and create the event pool (timing enabled). Registers the
        exit-time writer when `XLC_FLAGS=--profile=DIR` is set."""
        self.drv = drv
        self.streams = streams
        self.program = exe.module.name
        self.kids, self.infos = thunk_table(exe)
        pairs = min(event_pairs(exe.plan.thunks), INITIAL_PAIRS)
        self.pool: list[Any] = []
        self._grow(2 + 2 * pairs)
        self._next = 0
        self._spans: list[tuple[int, int, Any, Any]] = []  # (unit, stream, start, end)
        self._base: Any = None
        self._end: Any = None
        self._host_t0 = 0
        with _lock:
            _devices.setdefault(DEVICE, f"GPU {DEVICE} (sm_{compute_capability()})")
        _register_writer()

    def _grow(self, n: int) -> None:
        for _ in range(n):
            self.pool.append(check(self.drv.cuEventCreate(0), "cuEventCreate"))

    def _take(self) -> Any:
        if self._next == len(self.pool):
            log.debug("%s: profiling event pool grows past %d events", self.program,
                      len(self.pool))
            self._grow(max(16, len(self.pool) // 2))
        ev = self.pool[self._next]
        self._next += 1
        return ev

    def begin(self, s0: Any) -> None:
        """Start a call: read the host clock, record the base event on stream 0."""
        self._next = 0
        self._spans.clear()
        self._base = self._take()
        self._host_t0 = time.monotonic_ns()
        check(self.drv.cuEventRecord(self._base, s0), "cuEventRecord")

    def around(self, rt: Any, thunk: Thunk, stream: Any, issue: IssueFn) -> None:
        """Issue `thunk` (`issue(rt, thunk, stream)`) between two events on `stream`."""
        start, end = self._take(), self._take()
        check(self.drv.cuEventRecord(start, stream), "cuEventRecord")
        issue(rt, thunk, stream)
        check(self.drv.cuEventRecord(end, stream), "cuEventRecord")
        self._spans.append((self.kids[id(thunk)], thunk.stream, start, end))

    def end(self, s0: Any) -> None:
        """Record the call's end event on stream 0 (after the final waits)."""
        self._end = self._take()
        check(self.drv.cuEventRecord(self._end, s0), "cuEventRecord")

    def _at(self, ev: Any) -> int:
        ms = check(self.drv.cuEventElapsedTime(self._base, ev), "cuEventElapsedTime")
        return self._host_t0 + round(float(ms) * 1e6)

    def finish(self) -> None:
        """After the call's synchronisation: wait for the last event of every other stream
        used, turn the recorded events into RawEvents (the call, then one per thunk run) and
        add them to the process buffer."""
        if self._base is None or self._end is None:
            return
        last = {stream: end for _, stream, _, end in self._spans if stream}
        for ev in last.values():  # streams the final joins may not cover (cheap when done)
            check(self.drv.cuEventSynchronize(ev), "cuEventSynchronize")
        out = [RawEvent(self.program, 0, self.infos[0], 0, self._host_t0, self._at(self._end),
                        -1, device=DEVICE)]
        for kid, stream, start, end in self._spans:
            out.append(RawEvent(self.program, kid, self.infos[kid], stream, self._at(start),
                                self._at(end), -1, device=DEVICE))
        self._base = self._end = None
        self._spans.clear()
        add_events(out)


# ---- the process buffer ----------------------------------------------------------------------
def add_events(events: list[RawEvent]) -> None:
    """Append to the process buffer (past `CAPACITY`, count them as dropped)."""
    global _dropped
    with _lock:
        room = max(0, CAPACITY - len(_events))
        _events.extend(events[:room])
        _dropped += len(events) - min(room, len(events))


def active() -> bool:
    """Whether a profiled GPU executable has run in this process (a device is known)."""
    return bool(_devices)


def collect() -> Profile:
    """The GPU events recorded since the last `collect()` (empty when none); the buffer
    starts empty again."""
    global _dropped
    with _lock:
        events, dropped = list(_events), _dropped
        _events.clear()
        _dropped = 0
        devices = dict(_devices)
    if dropped:
        log.warning("GPU profile buffer full: %d events dropped (collect more often)", dropped)
    return Profile(events, dropped=dropped, pid=os.getpid(), devices=devices)


def _register_writer() -> None:
    global _writer_registered
    from xlc.options import default_options

    directory = default_options().profile_dir
    with _lock:
        if directory and not _writer_registered:
            atexit.register(write_at_exit, directory)
            _writer_registered = True


def write_at_exit(directory: str) -> None:
    """Write the uncollected GPU events to `directory/xlc-<pid>.gpu.trace.json` (nothing
    when there are none; errors are logged, never raised: this runs at interpreter exit)."""
    write_uncollected(collect(), directory, ".gpu.trace.json", "GPU run-time profile")
