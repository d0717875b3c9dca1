"""How the GPU executor issues each kind of thunk on a stream: THE thunk type -> issuing
function table (`ISSUE`), used by `runtime.GpuRuntime.execute` and its flattened schedule
(`launch`, `wait`, `record` are the steps of the latter). Each function takes the runtime (its
bindings, driver and streams), the thunk and the CUstream; host control (while,
conditional, host calls) reads values back and waits."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from xlc.backend_gpu.cuda import check
from xlc.backend_gpu.thunks import (
    ConditionalThunk,
    CopyDoneThunk,
    CopyStartThunk,
    DeviceToDeviceCopyThunk,
    DeviceToHostCopyThunk,
    HostCallThunk,
    HostToDeviceCopyThunk,
    KernelThunk,
    Memset32Thunk,
    MemzeroThunk,
    SequentialThunk,
    Thunk,
    WhileThunk,
)
from xlc.errors import XlcError

if TYPE_CHECKING:
    from xlc.backend_gpu.runtime import GpuRuntime


def launch(drv: Any, ok: Any, args: tuple[Any, ...], name: str) -> None:
    """cuLaunchKernel(*args) (prebuilt arguments); XlcError naming kernel `name` on failure."""
    ret = drv.cuLaunchKernel(*args)
    if ret[0] != ok:
        check(ret, f"cuLaunchKernel({name})")


def wait(drv: Any, stream: Any, event: Any) -> None:
    """`stream` waits for `event`."""
    check(drv.cuStreamWaitEvent(stream, event, 0), "cuStreamWaitEvent")


def record(drv: Any, event: Any, stream: Any) -> None:
    """Record `event` on `stream`."""
    check(drv.cuEventRecord(event, stream), "cuEventRecord")


def _kernel(rt: GpuRuntime, t: KernelThunk, stream: Any) -> None:
    """cuLaunchKernel with the thunk's packed `void**` parameters (launch.PackedParams)."""
    check(rt.drv.cuLaunchKernel(rt.functions[t.kernel], *t.grid, *t.block, 0, stream,
                                rt.packed.params[id(t)], 0), f"cuLaunchKernel({t.kernel})")


def _memzero(rt: GpuRuntime, t: MemzeroThunk, stream: Any) -> None:
    check(rt.drv.cuMemsetD8Async(rt.address(t.dest), 0, t.dest.size, stream), "cuMemsetD8")


def _memset32(rt: GpuRuntime, t: Memset32Thunk, stream: Any) -> None:
    check(rt.drv.cuMemsetD32Async(rt.address(t.dest), t.value & 0xFFFFFFFF, t.dest.size // 4,
                                  stream), "cuMemsetD32")


def _d2d(rt: GpuRuntime, t: DeviceToDeviceCopyThunk, stream: Any) -> None:
    check(rt.drv.cuMemcpyDtoDAsync(rt.address(t.dst), rt.address(t.src), t.src.size, stream),
          "cuMemcpyDtoDAsync")


_ASYNC_COPY = {"d2h": "cuMemcpyDtoHAsync", "h2d": "cuMemcpyHtoDAsync",
               "d2d": "cuMemcpyDtoDAsync"}


def _copy_start(rt: GpuRuntime, t: CopyStartThunk, stream: Any) -> None:
    """The copy of a copy-start, on its (copy) stream: device <-> pinned host or on device."""
    name = _ASYNC_COPY[t.direction]
    check(getattr(rt.drv, name)(rt.address(t.dst), rt.address(t.src), t.src.size, stream), name)


def _copy_done(rt: GpuRuntime, t: CopyDoneThunk, stream: Any) -> None:
    """Nothing: the wait for the copy's event is the thunk's `wait_events`."""


def _sequential(rt: GpuRuntime, t: SequentialThunk, stream: Any) -> None:
    for c in t.thunks:
        rt.execute(c)


def _while(rt: GpuRuntime, t: WhileThunk, stream: Any) -> None:
    if t.trip_count is not None:
        for _ in range(t.trip_count):
            rt.execute(t.body)
        return
    while True:
        rt.execute(t.condition)
        if not rt.read_scalar(t.predicate, stream) & 0xFF:
            break
        rt.execute(t.body)


def _conditional(rt: GpuRuntime, t: ConditionalThunk, stream: Any) -> None:
    value = rt.read_scalar(t.index, stream)
    n = len(t.branches)
    if t.index_is_pred:
        k = 0 if value & 0xFF else 1
    else:
        k = value if 0 <= value < n else n - 1
    rt.execute(t.branches[k])


def _host_call(rt: GpuRuntime, t: HostCallThunk, stream: Any) -> None:
    """Wait for the stream, copy the operands to the host, run the call, copy the results
    back and wait (the host arrays must live until the copies are done)."""
    from xlc.hlo import host_calls

    drv = rt.drv
    check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize")
    raws = []
    for sl in t.operands:
        raw = np.empty(sl.size, np.uint8)
        if sl.size:
            check(drv.cuMemcpyDtoHAsync(raw.ctypes.data, rt.address(sl), sl.size, stream),
                  "cuMemcpyDtoHAsync")
        raws.append(raw)
    check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize")
    results = host_calls.run_on_bytes(t.desc, raws)
    for sl, host in zip(t.results, results):
        if host.nbytes:
            check(drv.cuMemcpyHtoDAsync(rt.address(sl), host.ctypes.data, host.nbytes,
                                        stream), "cuMemcpyHtoDAsync")
    check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize")   # `results` live till here


def _unsupported(rt: GpuRuntime, t: Thunk, stream: Any) -> None:
    raise XlcError(f"thunk kind {t.kind!r} ({t.hlo}) is handled by the executable, not the "
                   f"schedule")


IssueFn = Callable[["GpuRuntime", Any, Any], None]
"""Issues one thunk (of the type it is keyed by) on a stream: (runtime, thunk, CUstream)."""

ISSUE: dict[type[Thunk], IssueFn] = {
    KernelThunk: _kernel, MemzeroThunk: _memzero, Memset32Thunk: _memset32,
    DeviceToDeviceCopyThunk: _d2d, SequentialThunk: _sequential, WhileThunk: _while,
    ConditionalThunk: _conditional, HostCallThunk: _host_call,
    CopyStartThunk: _copy_start, CopyDoneThunk: _copy_done,
    HostToDeviceCopyThunk: _unsupported,
    DeviceToHostCopyThunk: _unsupported,
}
"""Thunk type -> how the executor issues it (host copies are the executable's business)."""
