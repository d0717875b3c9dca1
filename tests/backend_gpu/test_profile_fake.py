"""Run-time profiles of GPU executables (docs/profiling.md, GPU section) without a GPU: the
fake driver with a virtual clock per stream (`fake_driver.TimedFakeDriver`) runs profiled
programs, whose CUDA-event spans become the Chrome trace; unprofiled programs issue the driver
calls they always did. The real-GPU check is marked `gpu`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.backend_cpu.test_profile import validate_trace
from tests.backend_gpu.fake_driver import (
    OK,
    OP_NS,
    FakeDriver,
    TimedFakeDriver,
    use,
    use_timed,
)
from tests.backend_gpu.helpers import compile_text, gpu_options, requires_gpu
from tests.backend_gpu.test_offload_fake import _args as offload_args
from tests.backend_gpu.test_offload_fake import cheap_copies, compile_over_limit  # noqa: F401
from tests.backend_gpu.test_runtime_fake import LOOP, ROW_SUMS
from tests.backend_gpu.test_streams import TWO_DOTS
from tests.passes.test_host_offload import program as offload_program
from xlc.backend_gpu import compile_gpu, cuda
from xlc.backend_gpu import profile as gpu_profile
from xlc.backend_gpu.executable import GpuExecutable
from xlc.backend_gpu.thunks import CopyStartThunk, HostCallThunk, SequentialThunk, WhileThunk
from xlc.hlo.cost_analysis import H100, instruction_cost
from xlc.hlo.parser import parse_module
from xlc.profiling import DEVICE_PID_BASE, Profile, RawEvent, device_limits, report

SMALL = ROW_SUMS

RNG = np.random.default_rng(19)


def _inputs(exe: GpuExecutable) -> list[np.ndarray]:
    return [RNG.standard_normal(p.dims).astype(np.float32) for p in exe.parameters]


def _leaves(exe: GpuExecutable) -> list[Any]:
    """The thunks that get events (all but sequential ones), pre-order."""
    return [t for t in exe.all_thunks() if not isinstance(t, SequentialThunk)]


def _profiled_run(fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch, text: str,
                  args: list[np.ndarray] | None = None, **kw: Any
                  ) -> tuple[GpuExecutable, TimedFakeDriver, list[np.ndarray], Profile]:
    """Compile `text` with profiling, run it once on a timed fake; its outputs and events."""
    exe = compile_text(text, profile=True, **kw)
    drv = use_timed(fake, exe, monkeypatch)
    gpu_profile.collect()
    out = exe.run(args if args is not None else _inputs(exe))
    return exe, drv, out, gpu_profile.collect()


# ---- the trace -------------------------------------------------------------------------------
def test_multi_stream_profile_is_a_valid_trace_with_a_tid_per_stream(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    args = [RNG.standard_normal((64, 64)).astype(np.float32) for _ in range(3)]
    exe, drv, out, profile = _profiled_run(fake, monkeypatch, TWO_DOTS, args,
                                           gpu_streams=2, fusion=False)
    # the outputs are those of the unprofiled program
    plain = compile_text(TWO_DOTS, gpu_streams=2, fusion=False)
    use(fake, plain, monkeypatch)
    np.testing.assert_array_equal(out[0], plain.run(args)[0])
    # timing events: created without CU_EVENT_DISABLE_TIMING, one pair per thunk + 2
    timing = [e for e, f in drv.event_flags.items() if f == 0]
    assert len(timing) == 2 + 2 * len(_leaves(exe))
    trace = profile.chrome_trace()
    assert validate_trace(json.loads(json.dumps(trace))) == []
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    meta = {(e["pid"], e["tid"], e["args"]["name"]) for e in trace["traceEvents"]
            if e["ph"] == "M" and e["pid"] == DEVICE_PID_BASE}
    assert meta == {(DEVICE_PID_BASE, 0, "GPU 0 (sm_80)"), (DEVICE_PID_BASE, 0, "stream 0"),
                    (DEVICE_PID_BASE, 1, "stream 1")}
    assert all(e["pid"] == DEVICE_PID_BASE for e in events)
    by = {e["name"]: e for e in events}
    assert set(by) == {"call two_dots", "d1", "d2", "s"}
    assert [by[t.hlo]["tid"] for t in _leaves(exe)] == [t.stream for t in _leaves(exe)]
    # the virtual clock: d1 and d2 run side by side, s (stream 1) after both
    launch = OP_NS["launch"] / 1e3
    assert [(by[n]["ts"], by[n]["dur"]) for n in ("d1", "d2", "s")] == \
        [(0.0, launch), (0.0, launch), (launch, launch)]
    assert (by["call two_dots"]["ts"], by["call two_dots"]["dur"]) == (0.0, 2 * launch)
    # names, costs, kernels
    insts = {i.name: i for i in exe.module.entry.instructions}  # type: ignore[union-attr]
    for t in _leaves(exe):
        args_ = by[t.hlo]["args"]
        cost = instruction_cost(insts[t.hlo])
        assert (args_["kernel"], args_["thunk"], args_["stream"]) == (t.kernel, "kernel",
                                                                      t.stream)
        assert (args_["bytes"], args_["flops"]) == (cost.bytes_accessed, cost.flops)
    assert by["d1"]["args"]["flops"] == 2 * 64 ** 3


def test_one_event_per_thunk_inside_the_call_span_every_call(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    exe, drv, _, first = _profiled_run(fake, monkeypatch, SMALL)
    created = len(drv.event_flags)
    x = _inputs(exe)
    for _ in range(3):
        exe.run(x)
    assert len(drv.event_flags) == created  # the event pool is reused, not re-created
    profile = gpu_profile.collect()
    calls = profile.calls("small")
    assert len(calls) == 3 and all(c.device == 0 for c in calls)
    assert [c.t0 for c in calls] == sorted(c.t0 for c in calls)
    for call in calls:
        inside = profile.kernels_in(call)
        assert [e.info["name"] for e in inside] == [t.hlo for t in _leaves(exe)]
        assert all(call.t0 <= e.t0 <= e.t1 <= call.t1 for e in inside)
        assert sum(e.t1 - e.t0 for e in inside) == call.t1 - call.t0
    assert len([e for e in profile.events if e.kind == "kernel"]) == 3 * len(_leaves(exe))
    assert first.calls()[0].info["bytes"] == sum(e.info["bytes"] for e in first.events
                                                 if e.kind == "kernel")


def test_loop_bodies_are_nested_in_the_while_event(fake: list[FakeDriver],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    x = RNG.standard_normal((4, 40)).astype(np.float32)
    exe, drv, out, profile = _profiled_run(fake, monkeypatch, LOOP, [x])
    plain = compile_text(LOOP)
    use(fake, plain, monkeypatch)
    np.testing.assert_array_equal(out[0], plain.run([x])[0])
    (w,) = [t for t in exe.all_thunks() if isinstance(t, WhileThunk)]
    loops = [e for e in profile.events if e.kind == "kernel" and e.info["thunk"] == "while"]
    nested = [e for e in profile.events if e.kind == "kernel" and not e.info["top"]]
    assert len(loops) == 1 and loops[0].info["top"] and w.trip_count == 3
    body = [t for t in w.body.walk() if not isinstance(t, SequentialThunk)]
    assert [e.info["name"] for e in nested] == [t.hlo for t in body] * 3
    assert all(loops[0].t0 <= e.t0 and e.t1 <= loops[0].t1 for e in nested)
    (call,) = profile.calls()
    assert sum(e.t1 - e.t0 for e in profile.kernels_in(call)) == call.t1 - call.t0


def test_an_uncounted_loop_grows_the_event_pool_once(fake: list[FakeDriver],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    text = LOOP.replace("ROOT c = pred[] compare(i, n), direction=LT",
                        "ROOT c = pred[] compare(n, i), direction=GT")
    x = RNG.standard_normal((4, 40)).astype(np.float32)
    exe, drv, out, profile = _profiled_run(fake, monkeypatch, text, [x])
    created = len(drv.event_flags)
    profiler = exe.runtime().profiler
    assert profiler is not None  # the first call outgrew the pool sized for one trip
    assert len(profiler.pool) > 2 + 2 * gpu_profile.event_pairs(exe.plan.thunks)
    np.testing.assert_array_equal(exe.run([x])[0], out[0])
    assert len(drv.event_flags) == created
    (w,) = [t for t in exe.all_thunks() if isinstance(t, WhileThunk)]
    cond = [t.hlo for t in w.condition.walk() if not isinstance(t, SequentialThunk)]
    names = [e.info["name"] for e in gpu_profile.collect().events if e.kind == "kernel"]
    assert sum(n in cond for n in names) == 4 * len(cond)  # 3 iterations + the exit test
    assert all(e.t0 <= e.t1 for e in profile.events)


@pytest.mark.usefixtures("cheap_copies")
def test_copy_start_and_done_are_events_on_their_streams(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    text = offload_program(3, 3, n=32)
    exe, _ = compile_over_limit(text, profile=True)
    drv = TimedHostFake(exe)
    fake.append(drv)
    monkeypatch.setattr(cuda, "_driver", drv)
    monkeypatch.setattr(cuda, "_context", None)
    args = offload_args()
    gpu_profile.collect()
    out = exe.run(args)
    profile = gpu_profile.collect()
    plain, _ = compile_over_limit(text)
    plain_drv = TimedHostFake(plain)
    monkeypatch.setattr(cuda, "_driver", plain_drv)
    monkeypatch.setattr(cuda, "_context", None)
    np.testing.assert_array_equal(out[0], plain.run(args)[0])
    kernels = [e for e in profile.events if e.kind == "kernel"]
    assert [(e.info["name"], e.thread) for e in kernels] == \
        [(t.hlo, t.stream) for t in _leaves(exe)]
    starts = [e for e in kernels if e.info["thunk"] == "copy_start"]
    assert len(starts) == 2 and {e.thread for e in starts} == {1}
    directions = {t.hlo: t.direction for t in _leaves(exe) if isinstance(t, CopyStartThunk)}
    for e in starts:
        assert e.info["bytes"] == 2 * 32 * 32 * 4
        assert e.t1 - e.t0 == OP_NS[directions[e.info["name"]]]
    trace = profile.chrome_trace()
    assert validate_trace(trace) == []
    assert {e["tid"] for e in trace["traceEvents"] if e.get("cat") == "kernel"} == {0, 1}


def test_host_calls_are_events_with_their_bytes(fake: list[FakeDriver],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("scipy")
    data_dir = Path(__file__).resolve().parents[1] / "data" / "linalg"
    data = np.load(data_dir / "cho_solve_f32.npz")
    exe, _, out, profile = _profiled_run(fake, monkeypatch,
                                         (data_dir / "cho_solve_f32.hlo").read_text(),
                                         [data["arg0"], data["arg1"]])
    np.testing.assert_allclose(out[0], data["out0"], rtol=1e-4, atol=1e-4)
    hosts = [t for t in _leaves(exe) if isinstance(t, HostCallThunk)]
    events = [e for e in profile.events if e.kind == "kernel"]
    assert [e.info["name"] for e in events] == [t.hlo for t in _leaves(exe)]
    got = [e for e in events if e.info["thunk"] == "host_call"]
    assert [e.info["bytes"] for e in got] == [
        sum(s.size for s in t.operands) + sum(s.size for s in t.results) for t in hosts]
    (call,) = profile.calls()
    assert all(call.t0 <= e.t0 <= e.t1 <= call.t1 for e in events)


class TimedHostFake(TimedFakeDriver):
    """The timed fake plus pinned host memory (for host offload)."""

    def cuMemHostAlloc(self, n: int, flags: int) -> tuple[int, int]:  # noqa: N802
        return self.cuMemAlloc(n)

    def cuMemFreeHost(self, ptr: int) -> tuple[int]:  # noqa: N802
        return self.cuMemFree(ptr)


# ---- unprofiled runs are unchanged -----------------------------------------------------------
class Logged(TimedFakeDriver):
    """The timed fake driver logging the name of every driver function called (`every`;
    frees left out: they come from whatever the garbage collector finalises)."""

    def __init__(self, exe: GpuExecutable):
        super().__init__(exe)
        self.every: list[str] = []

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if name.startswith("cu") and callable(value):
            every = object.__getattribute__(self, "every")

            def logged(*a: Any, **k: Any) -> Any:
                if not name.startswith("cuMemFree"):  # other tests' garbage, collected now
                    every.append(name)
                return value(*a, **k)
            return logged
        return value


# The driver calls of a second run as the runtime issued them before profiling existed (less
# the cuCtxSetCurrent every call made before the context was set once per thread).
_SMALL_CALLS = ["cuMemcpyHtoDAsync", "cuLaunchKernel", "cuMemcpyDtoHAsync",
                "cuStreamSynchronize"]
_TWO_DOTS_CALLS = ["cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync",
                   "cuMemcpyHtoDAsync", "cuEventRecord", "cuStreamWaitEvent", "cuLaunchKernel",
                   "cuEventRecord", "cuLaunchKernel", "cuStreamWaitEvent", "cuLaunchKernel",
                   "cuEventRecord", "cuStreamWaitEvent", "cuMemcpyDtoHAsync",
                   "cuStreamSynchronize"]


@pytest.mark.parametrize("text, kw, calls, events", [
    (SMALL, {}, _SMALL_CALLS, 1),
    (TWO_DOTS, {"gpu_streams": 2, "fusion": False}, _TWO_DOTS_CALLS, 3)],
    ids=["one-stream", "two-streams"])
def test_unprofiled_runs_issue_the_same_driver_calls(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch, text: str, kw: dict,
        calls: list[str], events: int) -> None:
    def log_of(profile: bool) -> tuple[list[str], list[str]]:
        exe = compile_text(text, profile=profile, **kw)
        drv = Logged(exe)
        fake.append(drv)
        monkeypatch.setattr(cuda, "_driver", drv)
        monkeypatch.setattr(cuda, "_context", None)
        x = [np.ones(p.dims, np.float32) for p in exe.parameters]
        exe.run(x)
        setup = list(drv.every)
        drv.every.clear()
        exe.run(x)
        return setup, drv.every

    setup, second = log_of(False)
    assert second == calls
    assert setup.count("cuEventCreate") == events  # the plan's events + the fork event
    assert not {"cuEventElapsedTime", "cuEventSynchronize"} & set(setup + second)
    gpu_profile.collect()
    psetup, profiled = log_of(True)
    gpu_profile.collect()
    timing = ("cuEventRecord", "cuEventElapsedTime", "cuEventSynchronize")
    assert [c for c in profiled if c not in timing] == \
        [c for c in calls if c != "cuEventRecord"]
    assert psetup.count("cuEventCreate") > events


def test_graph_mode_is_off_while_profiling(fake: list[FakeDriver],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_text(SMALL, profile=True, gpu_graphs=True)
    drv = use_timed(fake, exe, monkeypatch)
    x = _inputs(exe)
    gpu_profile.collect()
    exe.run(x)
    exe.run(x)
    assert drv.graph_launches == 0
    assert len(gpu_profile.collect().calls()) == 2


def test_events_with_timing_disabled_cannot_be_timed() -> None:
    drv = TimedFakeDriver()
    a = drv.cuEventCreate(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING)[1]
    b = drv.cuEventCreate(0)[1]
    drv.cuEventRecord(a, "s")
    drv.cuEventRecord(b, "s")
    assert drv.cuEventElapsedTime(a, b)[0] != OK
    assert drv.cuEventElapsedTime(b, b) == (OK, 0.0)


# ---- the report and the files ----------------------------------------------------------------
def test_report_compares_with_the_device_limits(fake: list[FakeDriver],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XLC_DEVICE_LIMITS", raising=False)
    _, _, _, profile = _profiled_run(fake, monkeypatch, SMALL)
    limits = device_limits(H100)
    assert (limits.copy_gbs, limits.gflops) == (2930.0, 67000.0)
    lines = report(profile, limits).splitlines()
    assert lines[0] == ("machine limits: copy 2930.0 GB/s, f32 matmul 67000.0 GFLOP/s (H100 "
                        "(measured copy bandwidth, FP32 / tensor-core peaks): the GPU cost "
                        "model's figures, not measured)")
    assert lines[1] == "program small: 1 call(s), 5.0 us per call; its kernels account for " \
                       "100.0 % of it"
    (k,) = [e for e in profile.events if e.kind == "kernel"]
    gbs = k.info["bytes"] / 5000
    assert lines[3].split()[:5] == ["5.0", "100.0%", "input_fusion", "fusion", f"{gbs:.2f}"]
    monkeypatch.setenv("XLC_DEVICE_LIMITS", "copy_gbs=3350,gflops=60000")
    assert device_limits(H100).source == "XLC_DEVICE_LIMITS"


def test_exit_writer_and_cli_profile_on_the_gpu(fake: list[FakeDriver],
                                                monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    import os

    import xlc.options
    from xlc.cli.main import main

    # XLC_FLAGS=--profile=DIR: the first profiled runtime registers the exit-time writer
    registered: list[tuple[Any, ...]] = []
    flags = xlc.options.default_options().replace(profile=True, profile_dir=str(tmp_path / "p"))
    monkeypatch.setattr(xlc.options, "default_options", lambda: flags)
    monkeypatch.setattr(gpu_profile, "_writer_registered", False)
    monkeypatch.setattr(gpu_profile.atexit, "register", lambda *a: registered.append(a))
    exe, *_ = _profiled_run(fake, monkeypatch, SMALL)
    assert registered == [(gpu_profile.write_at_exit, str(tmp_path / "p"))]
    exe.run(_inputs(exe))  # left uncollected
    gpu_profile.write_at_exit(str(tmp_path / "prof"))
    trace = json.loads((tmp_path / "prof" / f"xlc-{os.getpid()}.gpu.trace.json").read_text())
    assert validate_trace(trace) == []
    assert [e["name"] for e in trace["traceEvents"] if e.get("cat") == "call"] == ["call small"]
    # `xlc profile --backend gpu` / `xlc run --profile`: the fake serves every executable
    (tmp_path / "small.hlo").write_text(SMALL)
    x = RNG.standard_normal((6, 40)).astype(np.float32)
    np.savez(tmp_path / "in.npz", in0=x)

    # the CLI's compile has the same code (a cubin when ptxas is there): the fake runs it
    exe = compile_gpu(parse_module(SMALL), gpu_options(), assemble=True)
    monkeypatch.setattr(cuda, "_driver", TimedFakeDriver(exe))
    monkeypatch.setattr(cuda, "_context", None)
    monkeypatch.delenv("XLC_DEVICE_LIMITS", raising=False)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["profile", "small.hlo", "--inputs", "in.npz", "--backend", "gpu",
                 "--repeat", "2", "--trace", "t.json"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("machine limits: copy 2930.0 GB/s, f32 matmul 67000.0 GFLOP/s")
    assert out[1] == "program small: 2 call(s), 5.0 us per call; its kernels account for " \
                     "100.0 % of it"
    assert out[-1] == "wrote t.json"
    assert validate_trace(json.loads(Path("t.json").read_text())) == []
    assert main(["run", "small.hlo", "--inputs", "in.npz", "--backend", "gpu", "--output",
                 "out.npz", "--profile", "p.json"]) == 0
    assert capsys.readouterr().err == "wrote p.json: 2 events of 1 call(s)\n"
    want = np.tanh(x).sum(axis=1)
    np.testing.assert_allclose(np.load("out.npz")["out0"], want, rtol=1e-5, atol=1e-5)


def test_xlc_files_keep_the_profile_option(tmp_path: Path) -> None:
    import xlc
    from xlc.options import CompileOptions

    for on in (True, False):
        compiled = xlc.compile(parse_module(SMALL), backend="gpu",
                               options=CompileOptions(backend="gpu", profile=on))
        assert compiled.executable().profile is on
        compiled.serialize(str(tmp_path / f"{on}.xlc"))
        assert xlc.load(tmp_path / f"{on}.xlc").executable().profile is on


def test_cpu_profiles_keep_their_tracks() -> None:
    info = {"name": "k", "opcode": "fusion", "computation": "e", "top": True,
            "instructions": ["k"], "flops": 1, "transcendentals": 0, "bytes": 8}
    host = RawEvent("p", 1, info, 7, 100, 200, -1)
    gpu = RawEvent("p", 1, info, 7, 100, 200, -1, device=0)
    trace = Profile([host, gpu], pid=42, threads={7: (70, "main")}).chrome_trace()
    spans = [(e["pid"], e["tid"]) for e in trace["traceEvents"] if e["ph"] == "X"]
    assert sorted(spans) == [(42, 70), (DEVICE_PID_BASE, 7)]
    assert "thunk" not in trace["traceEvents"][-1]["args"]


# ---- a real GPU ------------------------------------------------------------------------------
CHAIN = """
HloModule chain
ENTRY e {
  a = f32[2048,2048] parameter(0)
  w = f32[2048,2048] parameter(1)
  d1 = f32[2048,2048] dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t1 = f32[2048,2048] tanh(d1)
  d2 = f32[2048,2048] dot(t1, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t2 = f32[2048,2048] tanh(d2)
  d3 = f32[2048,2048] dot(t2, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t3 = f32[2048,2048] tanh(d3)
}
"""


@pytest.mark.gpu
@requires_gpu
def test_real_gpu_thunk_times_add_up_to_the_call() -> None:
    exe = compile_text(CHAIN, profile=True)
    rng = np.random.default_rng(0)
    a, w = ((rng.standard_normal((2048, 2048)) / 45).astype(np.float32) for _ in range(2))
    exe.run([a, w])  # load and warm up
    gpu_profile.collect()
    for _ in range(3):
        (out,) = exe.run([a, w])
    profile = gpu_profile.collect()
    want = a.astype(np.float64)
    for _ in range(3):
        want = np.tanh(want @ w)
    np.testing.assert_allclose(out, want, rtol=2e-3, atol=2e-3)
    calls = profile.calls("chain")
    assert len(calls) == 3
    for call in calls:
        inside = profile.kernels_in(call)
        assert [e.info["name"] for e in inside] == [t.hlo for t in _leaves(exe)]
        span = call.t1 - call.t0
        assert abs(sum(e.t1 - e.t0 for e in inside) - span) <= 0.1 * span
    assert validate_trace(profile.chrome_trace()) == []
