"""Host offload on the GPU without a GPU: a program over its memory limit compiles with
copies to pinned host memory, the copies run on the copy stream ordered by events, the device
peak is under the limit, and the program runs on the fake driver + kernel emulator with the
evaluator's results. The real-GPU run is marked `gpu`."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.backend_gpu.fake_driver import OK, FakeDriver
from tests.backend_gpu.helpers import compile_text, gpu_available
from tests.passes.test_host_offload import program
from xlc.backend_gpu import compiler, cuda
from xlc.backend_gpu.executable import GpuExecutable
from xlc.backend_gpu.streams import validate_plan
from xlc.backend_gpu.thunks import CopyDoneThunk, CopyStartThunk, KernelThunk, thunk_from_dict
from xlc.errors import UnsupportedOpError
from xlc.hlo.evaluator import evaluate
from xlc.hlo.parser import parse_module
from xlc.passes.memory_budget import device_peak_bytes


class OffloadFake(FakeDriver):
    """The fake driver plus pinned host memory, logging the stream of every copy and launch."""

    def __init__(self, exe: GpuExecutable):
        super().__init__(exe)
        self.host_blocks: dict[int, int] = {}
        self.freed_host: list[int] = []
        self.log: list[tuple[str, Any, tuple[int, ...]]] = []  # (call, stream, pointers)

    def cuMemHostAlloc(self, n: int, flags: int) -> tuple[int, int]:  # noqa: N802
        _, ptr = self.cuMemAlloc(n)
        self.host_blocks[ptr] = n
        return (OK, ptr)

    def cuMemFreeHost(self, ptr: int) -> tuple[int]:  # noqa: N802
        self.freed_host.append(ptr)
        return self.cuMemFree(ptr)

    def cuMemcpyDtoHAsync(self, dst: int, src: int, n: int, s: Any) -> tuple[int]:  # noqa: N802
        self.log.append(("d2h", s, (dst, src)))
        return super().cuMemcpyDtoHAsync(dst, src, n, s)

    def cuMemcpyHtoDAsync(self, dst: int, src: int, n: int, s: Any) -> tuple[int]:  # noqa: N802
        self.log.append(("h2d", s, (dst, src)))
        return super().cuMemcpyHtoDAsync(dst, src, n, s)

    def cuLaunchKernel(self, f: Any, gx: int, gy: int, gz: int, bx: int, by: int,  # noqa: N802
                       bz: int, shmem: int, s: Any, params: Any, extra: Any) -> tuple[int]:
        self.log.append(("launch", s, self.kernel_args(f, params)))
        return super().cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra)

    def in_host_block(self, ptr: int) -> bool:
        return any(base <= ptr < base + n for base, n in self.host_blocks.items())


def install(exe: GpuExecutable, monkeypatch: pytest.MonkeyPatch) -> OffloadFake:
    drv = OffloadFake(exe)
    monkeypatch.setattr(cuda, "_driver", drv)
    monkeypatch.setattr(cuda, "_context", None)
    return drv


@pytest.fixture
def cheap_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Transfers cost nothing and any size is worth moving, so the emulator's small shapes
    offload (the real constants need megabytes and milliseconds of kernels: see
    test_real_cost_model_offloads_a_big_program)."""
    monkeypatch.setattr(compiler, "PCIE_BYTES_PER_S", 1e18)
    monkeypatch.setattr(compiler, "OFFLOAD_MIN_BYTES", 0)


N = 32  # the emulator runs every GPU thread of a GEMM as a Python thread: keep it small


def _args(n: int = N) -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    return [(rng.standard_normal(s) / 8).astype(np.float32) for s in ((n, n), (n, n), (2 * n, n))]


def compile_over_limit(text: str, **kw: object) -> tuple[GpuExecutable, int]:
    """The program compiled for the GPU with a limit one byte under its (one-stream) peak;
    that peak. The limit applies to the memory-minimising schedule, before the multi-stream
    re-sequencing."""
    peak = device_peak_bytes(compile_text(text).assignment)
    # FP32 dots: the results are compared with the evaluator's at FP32 tolerances
    return compile_text(text, memory_limit=peak - 1, default_matmul_precision="highest",
                        **kw), peak


def _copy_thunks(exe: GpuExecutable) -> tuple[list[int], list[int]]:
    seq = exe.plan.thunks.thunks
    starts = [k for k, t in enumerate(seq) if isinstance(t, CopyStartThunk)]
    dones = [k for k, t in enumerate(seq) if isinstance(t, CopyDoneThunk)]
    return starts, dones


# ---- the plan -----------------------------------------------------------------------------------
@pytest.mark.usefixtures("cheap_copies")
def test_copies_run_on_the_copy_stream_ordered_by_events() -> None:
    exe, peak = compile_over_limit(program(3, 3, n=N))
    budget = exe.optimized.budget
    assert budget is not None and budget.fits and budget.steps[0][0] == "host-offload"
    assert device_peak_bytes(exe.assignment) <= peak - 1
    (host,) = [a for a in exe.allocations if a.color == 5]
    assert host.kind == "temp" and host.size == N * N * 4
    seq = exe.plan.thunks.thunks
    starts, dones = _copy_thunks(exe)
    assert [seq[k].direction for k in starts] == ["d2h", "h2d"]  # type: ignore[attr-defined]
    assert exe.plan.num_streams == 2
    for k in starts:  # on the copy stream, after the compute thunk issued before it
        t = seq[k]
        assert t.stream == 1 and t.record_event is not None
        before = seq[k - 1]
        assert before.stream == 0 and t.wait_events == [before.record_event]
    for k, s in zip(dones, starts):  # the compute stream waits for the copy there
        assert seq[k].stream == 0 and seq[k].wait_events == [seq[s].record_event]
        assert s < k
    assert all(t.stream == 0 for t in seq if not isinstance(t, CopyStartThunk))
    assert exe.plan.final_waits == [seq[starts[-1]].record_event]
    validate_plan(exe.module, exe.plan)
    # only copies touch host memory
    for t in exe.all_thunks():
        if isinstance(t, KernelThunk):
            assert all(a.slice.allocation.color != 5 for a in t.args)


@pytest.mark.usefixtures("cheap_copies")
def test_copy_thunks_serialise() -> None:
    exe, _ = compile_over_limit(program(3, 3, n=N))
    for t in exe.all_thunks():
        back = thunk_from_dict(t.to_dict(), exe.allocations)
        assert back == t


def test_real_cost_model_offloads_a_big_program() -> None:
    """With the H100 figures (25 GB/s PCIe, the measured HBM bandwidth): a 4 MiB value idle
    across the peak behind eight 1024^3 dots each way moves; behind five it does not."""
    exe, peak = compile_over_limit(program(8, 8))
    assert exe.optimized.budget is not None and exe.optimized.budget.fits
    assert device_peak_bytes(exe.assignment) <= peak - (4 << 20)
    starts, dones = _copy_thunks(exe)
    assert len(starts) == len(dones) == 2
    assert all(exe.plan.thunks.thunks[k].stream == 1 for k in starts)
    validate_plan(exe.module, exe.plan)
    slow, _ = compile_over_limit(program(5, 5))
    assert _copy_thunks(slow) == ([], []) and slow.plan.num_streams == 1


# ---- running on the fake driver -----------------------------------------------------------------
@pytest.mark.usefixtures("cheap_copies")
@pytest.mark.parametrize("graph", [False, True])
def test_offloaded_program_runs_like_the_evaluator(monkeypatch: pytest.MonkeyPatch,
                                                   graph: bool) -> None:
    text = program(3, 3, n=N)
    exe, _ = compile_over_limit(text)
    drv = install(exe, monkeypatch)
    args = _args()
    want = evaluate(parse_module(text), args)
    for _ in range(2 if graph else 1):  # captured, then replayed
        (out,) = exe.run(args, graph=graph)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    assert list(drv.host_blocks.values()) == [N * N * 4]  # allocated once, with the runtime
    if graph:
        return
    rt = exe.runtime()
    copy_stream = rt.streams[1]
    to_host = [(s, p) for c, s, p in drv.log if c == "d2h" and drv.in_host_block(p[0])]
    to_dev = [(s, p) for c, s, p in drv.log if c == "h2d" and drv.in_host_block(p[1])]
    assert len(to_host) == len(to_dev) == 1  # out once, back once
    assert all(s == copy_stream for s, _ in to_host + to_dev)
    launches = [(s, p) for c, s, p in drv.log if c == "launch"]
    assert all(s == rt.streams[0] for s, _ in launches)
    assert not any(drv.in_host_block(ptr) for _, ptrs in launches for ptr in ptrs)
    assert drv.calls.count("wait") >= 4  # each copy waits, each copy-done waits


@pytest.mark.usefixtures("cheap_copies")
def test_offload_with_several_compute_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    text = program(3, 3, n=N)
    exe, _ = compile_over_limit(text, gpu_streams=2)
    starts, dones = _copy_thunks(exe)
    assert len(starts) == 2 and exe.plan.num_streams == 3
    assert all(exe.plan.thunks.thunks[k].stream == 2 for k in starts)
    assert all(exe.plan.thunks.thunks[k].stream != 2 for k in dones)
    validate_plan(exe.module, exe.plan)
    install(exe, monkeypatch)
    args = _args()
    (out,) = exe.run(args)
    np.testing.assert_allclose(out, evaluate(parse_module(text), args), rtol=1e-4, atol=1e-5)


# ---- XLA text with copies -----------------------------------------------------------------------
XLA_OFFLOAD = """
HloModule offload
ENTRY main {
  p = f32[256]{0} parameter(0)
  a = f32[256]{0} exponential(p)
  cs = (f32[256]{0:S(5)}, f32[256]{0}, u32[]) copy-start(a)
  b = f32[256]{0} tanh(p)
  cd = f32[256]{0:S(5)} copy-done(cs)
  c = f32[256]{0} multiply(b, b)
  cs2 = (f32[256]{0}, f32[256]{0:S(5)}, u32[]) copy-start(cd)
  cd2 = f32[256]{0} copy-done(cs2)
  ROOT r = f32[256]{0} add(c, cd2)
}
"""


def test_xla_text_with_copies_compiles_and_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_text(XLA_OFFLOAD)
    seq = exe.plan.thunks.thunks
    kinds = [(t.kind, t.stream) for t in seq if t.kind.startswith("copy")]
    assert kinds == [("copy_start", 1), ("copy_done", 0), ("copy_start", 1), ("copy_done", 0)]
    validate_plan(exe.module, exe.plan)
    install(exe, monkeypatch)
    x = np.linspace(-2, 2, 256, dtype=np.float32)
    (out,) = exe.run([x])
    np.testing.assert_allclose(out, np.tanh(x) ** 2 + np.exp(x), rtol=1e-5, atol=1e-6)


def test_host_memory_parameters_are_refused() -> None:
    text = """
HloModule m
ENTRY e {
  p = f32[64]{0:S(5)} parameter(0)
  cs = (f32[64]{0}, f32[64]{0:S(5)}, u32[]) copy-start(p)
  ROOT cd = f32[64]{0} copy-done(cs)
}
"""
    with pytest.raises(UnsupportedOpError, match=r"GPU backend: a parameter allocation in host "
                                                 r"memory S\(5\) \(allocation 0\) is "
                                                 r"unsupported"):
        compile_text(text)


# ---- a real GPU ---------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="no CUDA device available (GPU + cuda-python)")
def test_offload_on_a_real_gpu() -> None:
    """The real driver: cuMemHostAlloc'd host memory, copies overlapping the dots."""
    text = program(8, 8)
    exe, peak = compile_over_limit(text)
    assert _copy_thunks(exe)[0]
    rng = np.random.default_rng(0)
    args = [(rng.standard_normal(s) / 32).astype(np.float32)
            for s in ((1024, 1024), (1024, 1024), (2048, 1024))]
    (out,) = exe.run(args)
    np.testing.assert_allclose(out, evaluate(parse_module(text), args), rtol=1e-3, atol=1e-4)
