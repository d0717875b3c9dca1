"""The GPU runtime's dispatch path on the fake driver (issue 14): which driver calls a call makes
in steady state (no allocation, free or context switch; a packed launch), asynchronous calls
and their completion events, back-pressure, donation of device buffers, the memory pool, and
several threads calling one executable. Results are checked against the evaluator."""
from __future__ import annotations

import threading
from collections import Counter

import numpy as np
import pytest

from tests.backend_gpu.fake_driver import FakeDriver, use
from tests.backend_gpu.helpers import compile_text
from tests.backend_gpu.test_runtime_fake import ROW_SUMS
from xlc.backend_gpu import cuda, launch
from xlc.backend_gpu.device_array import DeviceArray
from xlc.errors import ArgumentError, XlcError
from xlc.hlo.evaluator import evaluate
from xlc.hlo.parser import parse_module

RNG = np.random.default_rng(14)

NEG = """
HloModule neg
ENTRY e {
  a = f32[@] parameter(0)
  ROOT r = f32[@] negate(a)
}
"""
"""One kernel; @ elements."""

DONATE = """
HloModule donate, input_output_alias={ {}: (0, {}, must-alias) }
ENTRY e {
  a = f32[64] parameter(0)
  b = f32[64] parameter(1)
  m = f32[64] multiply(a, b)
  ROOT r = f32[64] add(m, a)
}
"""
"""A donated first parameter (the result may take its buffer)."""


def _neg(n: int) -> str:
    return NEG.replace("@", str(n))


def _expect(text: str, args: list[np.ndarray]) -> np.ndarray:
    return np.asarray(evaluate(parse_module(text), args))


def test_a_device_resident_call_makes_one_launch_and_a_share_of_an_event_record(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    text = _neg(256)
    exe = compile_text(text)
    drv = use(fake, exe, monkeypatch)
    x = RNG.standard_normal(256).astype(np.float32)
    dx = cuda.to_device(x)
    # first group of calls: streams, events, a pool block for the result, packed parameters
    for _ in range(launch.GROUP):
        np.testing.assert_array_equal(exe.run_on_device([dx])[0].to_numpy(), -x)
    n = 2 * launch.GROUP
    before = Counter(drv.api)
    for _ in range(n):
        out = exe.run_on_device([dx])[0]
        del out   # its block goes back to the pool for the next call
    made = drv.steady(before)
    # per call: the launch (a packed void** array); one event record per group of calls
    assert made == Counter({"cuLaunchKernel": n, "cuEventRecord": 2}), made


@pytest.mark.parametrize("n", [256, 4096, 65536])
def test_steady_state_calls_are_flat_in_the_output_size(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    exe = compile_text(_neg(n))
    drv = use(fake, exe, monkeypatch)
    dx = cuda.to_device(np.ones(n, np.float32))
    for _ in range(launch.GROUP):
        del exe.run_on_device([dx])[0]   # the result dies: its block goes back to the pool
    before = Counter(drv.api)
    pool = cuda.device_pools()[0]
    reuses = pool.stats()["reuses"]
    calls = 2 * launch.GROUP
    for _ in range(calls):
        out = exe.run_on_device([dx])[0]
        del out
    assert drv.steady(before) == Counter({"cuLaunchKernel": calls, "cuEventRecord": 2})
    assert pool.stats()["reuses"] == reuses + calls and pool.stats()["driver_frees"] == 0


def test_numpy_calls_allocate_nothing_in_steady_state(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_text(ROW_SUMS)
    drv = use(fake, exe, monkeypatch)
    x = RNG.standard_normal((6, 40)).astype(np.float32)
    exe.run([x])
    before = Counter(drv.api)
    (got,) = exe.run([x])
    made = drv.steady(before)
    assert made == Counter({"cuMemcpyHtoDAsync": 1, "cuLaunchKernel": 1,
                            "cuMemcpyDtoHAsync": 1, "cuStreamSynchronize": 1}), made
    np.testing.assert_allclose(got, _expect(ROW_SUMS, [x]), rtol=1e-5, atol=1e-5)


def test_results_wait_for_their_event(fake: list[FakeDriver],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_text(_neg(64))
    drv = use(fake, exe, monkeypatch)
    x = RNG.standard_normal(64).astype(np.float32)
    (out,) = exe.run_on_device([cuda.to_device(x)])
    assert out.ready == (cuda.thread_stream(), None)   # ready when its stream gets there
    before = Counter(drv.api)
    assert out.block_until_ready() is out and out.ready is None
    out.block_until_ready()
    assert drv.steady(before) == Counter({"cuStreamSynchronize": 1})
    np.testing.assert_array_equal(out.to_numpy(), -x)
    (again,) = exe.run_on_device([cuda.to_device(x)])
    before = Counter(drv.api)
    np.testing.assert_array_equal(np.asarray(again), -x)   # to_numpy waits first
    assert drv.steady(before)["cuStreamSynchronize"] == 1


def test_at_most_max_in_flight_calls_are_queued(fake: list[FakeDriver],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_text(_neg(64))
    drv = use(fake, exe, monkeypatch)
    dx = cuda.to_device(np.ones(64, np.float32))
    n = launch.MAX_IN_FLIGHT + 2 * launch.GROUP
    before = Counter(drv.api)
    outs = [exe.run_on_device([dx])[0] for _ in range(n)]
    rt = exe.runtime()
    # one event per group; the ring of MAX_IN_FLIGHT / GROUP events came round to a group
    # still pending once: that call waited for the older half of the ring (one event), the
    # next group found its slot free
    assert drv.steady(before)["cuEventRecord"] == n // launch.GROUP
    assert rt.in_flight.waits == 1
    assert drv.steady(before)["cuEventSynchronize"] == 1
    assert rt.in_flight.pending() == launch.MAX_IN_FLIGHT
    rt.synchronize()
    assert rt.in_flight.pending() == 0
    assert all(np.array_equal(o.to_numpy(), -np.ones(64, np.float32)) for o in outs)


def test_numpy_arguments_of_asynchronous_calls_go_through_pinned_staging(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_text(ROW_SUMS)
    drv = use(fake, exe, monkeypatch)
    xs = [RNG.standard_normal((6, 40)).astype(np.float32) for _ in range(4)]
    outs = [exe.run_on_device([xs[0]])[0]]
    exe.runtime().synchronize()   # the staging block goes back to its pool
    before = Counter(drv.api)
    outs += [exe.run_on_device([x])[0] for x in xs[1:]]
    made = drv.steady(before)
    # one pinned block per call in flight (the first one reused), no pageable copy waiting;
    # device memory only for the three results, which stay alive
    assert made["cuMemHostAlloc"] == 2 and made["cuMemAlloc"] == 3, made
    assert made["cuStreamSynchronize"] == 0
    for x, out in zip(xs, outs):
        np.testing.assert_allclose(out.to_numpy(), _expect(ROW_SUMS, [x]), rtol=1e-5,
                                   atol=1e-5)


def test_a_donated_device_array_becomes_the_result(fake: list[FakeDriver],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_text(DONATE)
    drv = use(fake, exe, monkeypatch)
    a = RNG.standard_normal(64).astype(np.float32)
    b = RNG.standard_normal(64).astype(np.float32)
    want = _expect(DONATE, [a, b])
    da, db = cuda.to_device(a), cuda.to_device(b)
    ptr = da.ptr
    before = Counter(drv.api)
    (out,) = exe.run_on_device([da, db], donate=True)
    assert out.ptr == ptr, "the result was computed in the donated buffer"
    assert drv.steady(before)["cuMemcpyDtoDAsync"] == 0
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-5, atol=1e-6)
    assert repr(da) == "DeviceArray(shape=(64,), dtype=float32, deleted)"
    with pytest.raises(XlcError, match=r"^DeviceArray\[64\] float32 was deleted: donated to a "
                                       r"call of donate$"):
        da.to_numpy()
    with pytest.raises(ArgumentError, match=r"^argument 0: DeviceArray was deleted \(donated "
                                            r"to a call of donate\)$"):
        exe.run_on_device([da, db])
    np.testing.assert_array_equal(db.to_numpy(), b)   # not donated, untouched


def test_without_donate_or_when_passed_twice_the_argument_is_copied(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_text(DONATE)
    use(fake, exe, monkeypatch)
    a = RNG.standard_normal(64).astype(np.float32)
    da = cuda.to_device(a)
    (out,) = exe.run_on_device([da, da])
    assert out.ptr != da.ptr and da.deleted is None
    (out2,) = exe.run_on_device([da, da], donate=True)   # the second use still reads it
    assert out2.ptr != da.ptr and da.deleted is None
    for o in (out, out2):
        np.testing.assert_allclose(o.to_numpy(), _expect(DONATE, [a, a]), rtol=1e-5,
                                   atol=1e-6)
    np.testing.assert_array_equal(da.to_numpy(), a)


def test_compiled_call_on_device_donates_like_jax(fake: list[FakeDriver],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import xlc

    f = xlc.jit(lambda p, g: p - 0.5 * g, backend="gpu", donate_argnums=0)
    x = np.arange(32, dtype=np.float32)
    compiled = f.lower(x, x).compile()
    use(fake, compiled.executable(), monkeypatch)
    p, g = cuda.to_device(x), cuda.to_device(np.ones(32, np.float32))
    ptr = p.ptr
    drv = fake[-1]
    out = compiled.call_on_device(p, g)
    assert isinstance(out, DeviceArray) and out.ptr == ptr and p.deleted is not None
    before = Counter(drv.api)
    for _ in range(3):   # chained asynchronous calls: nothing waits on the host
        out = compiled.call_on_device(out, g)
    assert out.ptr == ptr
    made = drv.steady(before)
    assert made["cuLaunchKernel"] == 3 and set(made) <= {"cuLaunchKernel", "cuEventRecord"}
    np.testing.assert_allclose(out.to_numpy(), x - 2.0)


def test_an_input_computed_on_another_threads_stream_is_waited_for(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_text(_neg(64))
    drv = use(fake, exe, monkeypatch)
    x = RNG.standard_normal(64).astype(np.float32)
    made: list[DeviceArray] = []
    t = threading.Thread(target=lambda: made.extend(exe.run_on_device([cuda.to_device(x)])))
    t.start()
    t.join()
    (y,) = made
    assert y.ready is not None and y.ready[0] is not cuda.thread_stream()
    before = Counter(drv.api)
    (z,) = exe.run_on_device([y])
    assert drv.steady(before)["cuStreamWaitEvent"] == 1
    np.testing.assert_array_equal(z.to_numpy(), x)


def test_threads_call_one_executable_concurrently(fake: list[FakeDriver],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_text(ROW_SUMS)
    use(fake, exe, monkeypatch)
    xs = [RNG.standard_normal((6, 40)).astype(np.float32) for _ in range(4)]
    got: dict[int, list[np.ndarray]] = {}
    runtimes: dict[int, object] = {}
    barrier = threading.Barrier(len(xs))

    def work(k: int) -> None:
        barrier.wait()
        got[k] = [exe.run([xs[k]])[0] for _ in range(3)]
        runtimes[k] = exe.runtime()
    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, x in enumerate(xs):
        for out in got[k]:
            np.testing.assert_allclose(out, _expect(ROW_SUMS, [x]), rtol=1e-5, atol=1e-5)
    # a runtime (streams, blocks, packed parameters) per thread, one loaded program
    assert len({id(r) for r in runtimes.values()}) == len(xs)
    assert len({id(r.program) for r in runtimes.values()}) == 1  # type: ignore[attr-defined]


def test_the_context_is_made_current_once_per_thread(fake: list[FakeDriver],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_text(_neg(64))
    drv = use(fake, exe, monkeypatch)
    x = np.ones(64, np.float32)
    exe.run([x])
    exe.run([x])
    assert drv.api["cuCtxSetCurrent"] == 1
    t = threading.Thread(target=lambda: exe.run([x]))
    t.start()
    t.join()
    assert drv.api["cuCtxSetCurrent"] == 2


def test_out_of_memory_releases_the_cache_then_fails_clearly(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_text(_neg(1024))
    drv = use(fake, exe, monkeypatch)
    dx = cuda.to_device(np.ones(1024, np.float32))
    pool = cuda.device_pools()[0]
    spare = pool.take(1 << 20, cuda.thread_stream())
    pool.give(spare)                       # 1 MiB cached
    real = drv.cuMemAlloc
    budget = {"left": 1}

    def alloc(n: int) -> tuple[int, int]:
        if pool.stats()["cached_bytes"] and budget["left"]:
            budget["left"] -= 1
            return (2, 0)                  # CUDA_ERROR_OUT_OF_MEMORY while the cache is full
        return real(n)
    monkeypatch.setattr(drv, "cuMemAlloc", alloc)
    (out,) = exe.run_on_device([dx])       # the retry after releasing the cache succeeds
    assert pool.stats()["cached_bytes"] == 0 and spare in drv.freed
    np.testing.assert_array_equal(out.to_numpy(), -np.ones(1024, np.float32))
    monkeypatch.setattr(drv, "cuMemAlloc", lambda n: (2, 0))
    with pytest.raises(XlcError, match=r"^GPU out of device memory: 8192 bytes requested, \d+ "
                                       r"bytes in use by xlc \(0 cached bytes released first; "
                                       r"the driver said: CUDA error in cuMemAlloc: "
                                       r"CUDA_ERROR_FAKE\)$"):
        pool.take(8000, cuda.thread_stream())


def test_graphs_update_moved_kernel_arguments_instead_of_copying(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_text(ROW_SUMS)
    drv = use(fake, exe, monkeypatch)
    xs = [RNG.standard_normal((6, 40)).astype(np.float32) for _ in range(3)]
    dxs = [cuda.to_device(x) for x in xs]
    rt = exe.runtime()
    assert rt.graph_updates
    (first,) = exe.run_on_device([dxs[0]], graph=True)   # captured, matched, launched
    assert drv.graph_launches == 1 and drv.api["cuMemcpyDtoDAsync"] == 0
    np.testing.assert_allclose(first.to_numpy(), _expect(ROW_SUMS, [xs[0]]), rtol=1e-5,
                               atol=1e-5)
    before = Counter(drv.api)
    (second,) = exe.run_on_device([dxs[1]], graph=True)  # a new argument and a new result
    made = drv.steady(before)
    # the one kernel reads the moved argument and writes the moved result (a new block: the
    # first result is alive): one update, no copy
    assert made == Counter({"cuGraphExecKernelNodeSetParams": 1, "cuGraphLaunch": 1,
                            "cuMemAlloc": 1}), made
    assert second.owner and second.ptr != first.ptr   # the result block itself, no copy
    del first, second
    before = Counter(drv.api)
    (third,) = exe.run_on_device([dxs[1]], graph=True)  # same argument, recycled block
    assert drv.steady(before)["cuGraphExecKernelNodeSetParams"] <= 1
    np.testing.assert_allclose(third.to_numpy(), _expect(ROW_SUMS, [xs[1]]), rtol=1e-5,
                               atol=1e-5)
    (host,) = exe.run([xs[2]], graph=True)            # numpy in and out through the graph
    np.testing.assert_allclose(host, _expect(ROW_SUMS, [xs[2]]), rtol=1e-5, atol=1e-5)
    assert drv.calls.count("launch") == 1                # recorded once, at the capture


def test_graph_copy_and_memset_nodes_follow_moved_arguments(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    # the second result is the argument itself: a device-to-device copy thunk from the
    # parameter to its output block, whose node is updated when either moves
    text = ("HloModule m\nENTRY e {\n  a = f32[64] parameter(0)\n  b = f32[64] negate(a)\n"
            "  ROOT t = (f32[64], f32[64]) tuple(b, a)\n}\n")
    exe = compile_text(text)
    drv = use(fake, exe, monkeypatch)
    rt = exe.runtime()
    assert not rt.graph_copies
    outs = []
    for k in range(3):
        x = RNG.standard_normal(64).astype(np.float32)
        before = Counter(drv.api)
        b, a = exe.run_on_device([cuda.to_device(x)], graph=True)
        made = drv.steady(before)
        if k:   # a new argument and new result blocks: the kernel and the copy node move,
            # nothing is copied outside the graph (the first call captured the copy)
            assert made["cuGraphExecMemcpyNodeSetParams"] == 1, made
            assert made["cuGraphExecKernelNodeSetParams"] == 1, made
            assert made["cuMemcpyDtoDAsync"] == 0, made
        np.testing.assert_array_equal(b.to_numpy(), -x)
        np.testing.assert_array_equal(a.to_numpy(), x)
        outs.append((b, a))
    assert drv.graph_launches == 3


def test_copy_mode_is_kept_for_offload_copies_of_arguments() -> None:
    from types import SimpleNamespace

    from xlc.backend_gpu.graphs import uses_copy_mode
    from xlc.backend_gpu.thunks import CopyStartThunk, SequentialThunk
    from xlc.passes.allocation import BufferAllocation, Slice

    param = BufferAllocation(0, 256, is_entry_computation_parameter=True)
    temp = BufferAllocation(1, 256)
    copy = CopyStartThunk("cs", src=Slice(param, 0, 256), dst=Slice(temp, 0, 256))
    rt = SimpleNamespace(exe=SimpleNamespace(
        allocations=[param, temp],
        plan=SimpleNamespace(thunks=SequentialThunk("entry", thunks=[copy]))))
    assert uses_copy_mode(rt)  # type: ignore[arg-type]
    copy.src = Slice(temp, 0, 256)
    assert not uses_copy_mode(rt)  # type: ignore[arg-type]
