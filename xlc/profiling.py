"""Run-time profiles as data: events, the Chrome trace-event JSON, per-kernel statistics, and
the machine's limits that achieved rates are compared with.

Backend-independent: a backend's recorder (the CPU's is `xlc.backend_cpu.profiler`, the GPU's
`xlc.backend_gpu.profile`) hands over
`RawEvent`s - one per call of a program (id 0), per unit it ran (a fused kernel, a GEMM, a
sort, a custom call, a loop) and per pool share of a split kernel - with start and end on
CLOCK_MONOTONIC in nanoseconds. `Profile.chrome_trace()` writes them as the trace-event format
that Perfetto (ui.perfetto.dev) and chrome://tracing open: complete events (`ph: "X"`, `ts`
and `dur` in microseconds) on the process's pid and one tid per thread, with thread-name
metadata events; `args` carry the program, opcode, computation, bytes accessed and FLOPs of
each event (`xlc.hlo.cost_analysis`'s counts, per call of the unit). Device events (`device`
set: GPU thunks and calls, `thread` = the stream) go on a pid of their own per device
(`DEVICE_PID_BASE + device`) with one tid per stream.

Machine limits (`machine_limits`): the copy bandwidth (GB/s, bytes read + written by a large
numpy copy) and the f32 matrix-product peak (GFLOP/s, numpy's BLAS on every core), measured
once and cached in `<cache>/machine_limits.json` (`XLC_CACHE_DIR`, else `$XDG_CACHE_HOME/xlc`
or `~/.cache/xlc`), keyed by CPU and core count. `XLC_MACHINE_LIMITS="copy_gbs=20,gflops=200"`
gives them instead (no measuring; tests use it). A GPU profile is compared with
`device_limits` (the GPU cost model's roofline, or `XLC_DEVICE_LIMITS`).
"""
from __future__ import annotations

import json
import logging
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlc.errors import ArgumentError

if TYPE_CHECKING:
    from xlc.hlo.cost_analysis import Device

log = logging.getLogger("xlc.profile")

WORKER_TID_BASE = 1 << 30
"""Trace tids of threads that are not Python threads (the pool's workers): this plus k."""

DEVICE_PID_BASE = 1 << 24
"""Trace pid of device d's track (GPU events): this plus d (above any Linux process id)."""

DEVICE_ARGS = ("thunk", "kernel", "stream", "grid", "block")
"""Table keys of GPU units that go into a trace event's `args` as well."""


@dataclass(frozen=True)
class RawEvent:
    """One recorded span: `program` (module name), `kid` (0: the whole call, else a unit),
    `info` (the unit's table entry: name, opcode, computation, top, instructions, flops,
    transcendentals, bytes), `thread` (pthread id; for device events the stream index),
    `t0`/`t1` (monotonic ns), `share` (the pool share, -1 for a unit or a call), `device`
    (None on the host, else the GPU the span ran on: the call's device span, or a thunk)."""

    program: str
    kid: int
    info: dict[str, Any]
    thread: int
    t0: int
    t1: int
    share: int
    device: int | None = None

    @property
    def kind(self) -> str:
        """"call", "kernel" or "share"."""
        return "share" if self.share >= 0 else ("call" if self.kid == 0 else "kernel")


@dataclass
class KernelStat:
    """A unit's time over the profile: `calls` events, `total_ns`, and its table entry."""

    program: str
    kid: int
    info: dict[str, Any]
    calls: int = 0
    total_ns: int = 0

    @property
    def mean_ns(self) -> float:
        """Mean duration of one event."""
        return self.total_ns / max(self.calls, 1)


@dataclass
class Profile:
    """Collected events of one process (see the module docstring). `threads` maps the pthread
    ids of Python threads to (trace tid, name); `devices` the GPUs of device events to their
    track names; `dropped` counts events lost to a full buffer."""

    events: list[RawEvent]
    dropped: int = 0
    pid: int = 0
    threads: dict[int, tuple[int, str]] = field(default_factory=dict)
    devices: dict[int, str] = field(default_factory=dict)

    def calls(self, program: str | None = None) -> list[RawEvent]:
        """The whole-call events (of `program` only, if given), in time order."""
        return sorted((e for e in self.events if e.kind == "call"
                       and (program is None or e.program == program)), key=lambda e: e.t0)

    def kernels_in(self, call: RawEvent, top_only: bool = True) -> list[RawEvent]:
        """The unit events of `call`'s program on its thread (a device call: on any stream of
        its device) inside its span (top-level units of the entry computation only, unless
        `top_only` is False)."""
        return [e for e in self.events if e.kind == "kernel" and e.device == call.device
                and (call.device is not None or e.thread == call.thread)
                and e.program == call.program and call.t0 <= e.t0 and e.t1 <= call.t1
                and (e.info.get("top") or not top_only)]

    def kernel_stats(self) -> list[KernelStat]:
        """Per unit (program, id): event count and total time, the slowest first."""
        stats: dict[tuple[str, int], KernelStat] = {}
        for e in self.events:
            if e.kind != "kernel":
                continue
            s = stats.get((e.program, e.kid))
            if s is None:
                s = stats[(e.program, e.kid)] = KernelStat(e.program, e.kid, e.info)
            s.calls += 1
            s.total_ns += e.t1 - e.t0
        return sorted(stats.values(), key=lambda s: -s.total_ns)

    def _tids(self) -> dict[int, tuple[int, str]]:
        tids = dict(self.threads)
        host = [e for e in self.events if e.device is None]
        callers = {e.thread for e in host if e.kind == "call"}
        others = sorted({e.thread for e in host} - set(tids))
        for k, thread in enumerate(others):  # a caller that has ended, or a pool worker
            what = "calling thread" if thread in callers else "xlc pool worker"
            tids[thread] = (WORKER_TID_BASE + k, f"{what} {k + 1}")
        return tids

    def chrome_trace(self) -> dict[str, Any]:
        """The Chrome trace-event JSON object (`{"traceEvents": [...], ...}`): one complete
        event per recorded span, `ts` relative to the first one. Host events are on the
        process's pid, one tid per thread; device events on pid `DEVICE_PID_BASE + device`
        ("GPU 0 ..."), one tid per stream ("stream k")."""
        tids = self._tids()
        origin = min((e.t0 for e in self.events), default=0)
        out: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": self.pid,
                                      "tid": 0, "args": {"name": f"xlc (pid {self.pid})"}}]
        used = sorted({tids[e.thread] for e in self.events if e.device is None})
        for tid, name in used:
            out.append({"name": "thread_name", "ph": "M", "pid": self.pid, "tid": tid,
                        "args": {"name": name}})
        for d in sorted({e.device for e in self.events if e.device is not None}):
            out.append({"name": "process_name", "ph": "M", "pid": DEVICE_PID_BASE + d,
                        "tid": 0, "args": {"name": self.devices.get(d, f"GPU {d}")}})
            for s in sorted({e.thread for e in self.events if e.device == d}):
                out.append({"name": "thread_name", "ph": "M", "pid": DEVICE_PID_BASE + d,
                            "tid": s, "args": {"name": f"stream {s}"}})
        for e in sorted(self.events, key=lambda e: (e.t0, -e.t1)):
            info = e.info
            args: dict[str, Any] = {"program": e.program, "opcode": info["opcode"],
                                    "computation": info["computation"]}
            if e.kind == "share":
                args.update(share=e.share, kernel_bytes=info["bytes"],
                            kernel_flops=info["flops"])
            else:
                args.update(bytes=info["bytes"], flops=info["flops"],
                            transcendentals=info["transcendentals"])
            if len(info.get("instructions", ())) > 1:
                args["instructions"] = list(info["instructions"])
            args.update((k, info[k]) for k in DEVICE_ARGS if k in info)
            name = f"call {e.program}" if e.kind == "call" else info["name"]
            pid, tid = (self.pid, tids[e.thread][0]) if e.device is None else \
                (DEVICE_PID_BASE + e.device, e.thread)
            out.append({"name": name, "cat": e.kind, "ph": "X",
                        "ts": round((e.t0 - origin) / 1e3, 3),
                        "dur": round((e.t1 - e.t0) / 1e3, 3),
                        "pid": pid, "tid": tid, "args": args})
        return {"traceEvents": out, "displayTimeUnit": "ns",
                "otherData": {"producer": "xlc", "clock": "CLOCK_MONOTONIC",
                              "origin_ns": origin, "dropped_events": self.dropped}}

    def write_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Write `chrome_trace()` to `path` (atomically; parent directories are created)."""
        from xlc.fileio import write_bytes_atomic

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, json.dumps(self.chrome_trace()).encode())


# ---- the report of `xlc profile` -------------------------------------------------------------
def write_uncollected(profile: Profile, directory: str, suffix: str, what: str) -> None:
    """Write `profile` (the events no one collected) to `directory/xlc-<pid><suffix>`, nothing
    when it has none. Errors are logged, never raised: the backends' profilers call this at
    interpreter exit (`XLC_FLAGS=--profile=DIR`)."""
    try:
        if not profile.events:
            return
        path = Path(directory) / f"xlc-{os.getpid()}{suffix}"
        profile.write_chrome_trace(path)
        log.info("wrote the %s %s (%d events)", what, path, len(profile.events))
    except Exception as e:  # noqa: BLE001 - at exit, a lost profile is only worth a warning
        log.warning("could not write the %s into %s: %s", what, directory, e)


def _rate(amount: float, ns: float) -> float:
    return amount / ns if ns > 0 else 0.0  # bytes/ns = GB/s, flops/ns = GFLOP/s


def report(profile: Profile, limits: MachineLimits | None, top: int = 15) -> str:
    """The text `xlc profile` prints: per program its mean call time and how much of it the
    top-level units cover, then the `top` slowest units with time per call, share of the
    call, achieved GB/s and GFLOP/s, and (with `limits`) those as a percentage of the
    machine's copy bandwidth and matrix-product peak."""
    lines: list[str] = []
    if limits is not None:
        lines.append(f"machine limits: copy {limits.copy_gbs:.1f} GB/s, f32 matmul "
                     f"{limits.gflops:.1f} GFLOP/s ({limits.source})")
    stats = profile.kernel_stats()
    for program in sorted({e.program for e in profile.events}):
        calls = profile.calls(program)
        if not calls:
            continue
        call_ns = sum(c.t1 - c.t0 for c in calls) / len(calls)
        covered = sum(sum(k.t1 - k.t0 for k in profile.kernels_in(c)) for c in calls)
        lines.append(f"program {program}: {len(calls)} call(s), {call_ns / 1e3:.1f} us per "
                     f"call; its kernels account for {100 * covered / len(calls) / call_ns:.1f}"
                     " % of it")
        head = f"  {'us/call':>9}  {'%call':>6}  {'kernel':<28} {'opcode':<13} {'GB/s':>8}"
        head += f" {'%copy':>6} {'GFLOP/s':>8} {'%peak':>6}" if limits else f" {'GFLOP/s':>8}"
        lines.append(head)
        mine = [s for s in stats if s.program == program][:top]
        for s in mine:
            per_call = s.total_ns / len(calls)
            gbs = _rate(s.info["bytes"], s.mean_ns)
            gflops = _rate(s.info["flops"], s.mean_ns)
            name = s.info["name"] + ("" if s.info.get("top") else " (nested)")
            row = (f"  {per_call / 1e3:9.1f}  {100 * per_call / call_ns:5.1f}%  "
                   f"{name[:28]:<28} {s.info['opcode'][:13]:<13} {gbs:8.2f}")
            if limits:
                row += (f" {100 * gbs / limits.copy_gbs:5.1f}% {gflops:8.2f} "
                        f"{100 * gflops / limits.gflops:5.1f}%")
            else:
                row += f" {gflops:8.2f}"
            lines.append(row)
    if profile.dropped:
        lines.append(f"warning: {profile.dropped} events were dropped (buffer full)")
    return "\n".join(lines) + "\n"


# ---- machine limits -------------------------------------------------------------------------
@dataclass(frozen=True)
class MachineLimits:
    """Copy bandwidth (GB/s, bytes read + written) and f32 matmul peak (GFLOP/s), and where
    they came from ("measured", "cached in PATH", "XLC_MACHINE_LIMITS")."""

    copy_gbs: float
    gflops: float
    source: str


def cache_directory() -> Path:
    """The user's xlc cache directory: XLC_CACHE_DIR, else $XDG_CACHE_HOME/xlc or
    ~/.cache/xlc."""
    env = os.environ.get("XLC_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(base).expanduser() / "xlc"


def _from_env(text: str, variable: str = "XLC_MACHINE_LIMITS") -> MachineLimits:
    values: dict[str, float] = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        try:
            values[key.strip()] = float(value)
        except ValueError:
            values[key.strip()] = -1.0
    if set(values) != {"copy_gbs", "gflops"} or min(values.values()) <= 0:
        raise ArgumentError(f"{variable}: expected copy_gbs=GB/s,gflops=GFLOP/s with "
                            f"positive numbers, got {text!r}")
    return MachineLimits(values["copy_gbs"], values["gflops"], variable)


def machine_limits(measure: bool = True) -> MachineLimits | None:
    """This machine's limits: from XLC_MACHINE_LIMITS, else the cache file, else measured
    (~0.5 s) and cached when `measure`, else None."""
    env = os.environ.get("XLC_MACHINE_LIMITS")
    if env:
        return _from_env(env)
    key = f"{platform.processor() or platform.machine()}|{_cpu_name()}|{os.cpu_count()}"
    path = cache_directory() / "machine_limits.json"
    try:
        entry = json.loads(path.read_text()).get(key)
        if entry:
            return MachineLimits(float(entry["copy_gbs"]), float(entry["gflops"]),
                                 f"cached in {path}")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    if not measure:
        return None
    copy_gbs, gflops = measure_limits()
    try:
        from xlc.fileio import write_bytes_atomic

        try:
            data = json.loads(path.read_text())
            data = data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            data = {}
        data[key] = {"copy_gbs": copy_gbs, "gflops": gflops}
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, json.dumps(data, indent=1).encode())
    except OSError as e:
        log.warning("cannot cache the machine limits in %s: %s", path, e)
    return MachineLimits(copy_gbs, gflops, "measured")


def device_limits(device: Device) -> MachineLimits:
    """The limits a GPU profile is compared with: `XLC_DEVICE_LIMITS="copy_gbs=..,gflops=.."`
    when set, else `device`'s roofline (the GPU cost model's H100 figures: device copy
    bandwidth, FP32 peak), which are not measured on the device that ran."""
    env = os.environ.get("XLC_DEVICE_LIMITS")
    if env:
        return _from_env(env, "XLC_DEVICE_LIMITS")
    return MachineLimits(device.bandwidth / 1e9, device.peak_flops / 1e9,
                         f"{device.name}: the GPU cost model's figures, not measured")


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def measure_limits(copy_mib: int = 64, n: int = 1024, reps: int = 5) -> tuple[float, float]:
    """(copy GB/s, f32 matmul GFLOP/s): the best of `reps` copies of `copy_mib` MiB (bytes read
    plus written) and of `reps` n x n x n products (2 n^3 flops), with numpy."""
    import numpy as np

    src = np.ones(copy_mib << 18, dtype=np.float32)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        np.copyto(dst, src)
        best = min(best, time.perf_counter_ns() - t0)
    copy_gbs = 2 * src.nbytes / best
    a = np.ones((n, n), dtype=np.float32)
    c = a @ a  # warm up the BLAS threads
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        np.matmul(a, a, out=c)
        best = min(best, time.perf_counter_ns() - t0)
    return copy_gbs, 2 * n ** 3 / best
