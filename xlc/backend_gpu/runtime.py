"""The GPU executor: runs a GpuExecutable's thunk schedule through the CUDA driver.

The driver bootstrap (lazy cuda-python import, device 0's primary context, `check`, module
loading, device memory helpers) lives in cuda.py; its public names are re-exported here for
callers that import them from this module. Without cuda-python, or without a CUDA device,
`GpuRuntime(...)` raises XlcError("no CUDA device available: <why>").

Per executable (created on its first run):
* the module from the cubin when one was assembled and the device can run it
  (`cuda.select_image`: same major compute capability, minor not older), else the PTX (the
  driver JIT-compiles it for any device at least as new as its target); one CUfunction per
  kernel;
* one device block per BufferAllocation: constants uploaded once, temp (the combined heap)
  allocated once and reused by every call, thread-local allocations get none; parameter blocks
  are reused for numpy arguments; outputs get fresh blocks per call (persistent ones in graph
  mode, where results are always copied back); the temp heap of host memory `S(5)` (host
  offload) is a pinned host block (cuMemHostAlloc), which only copy-start thunks touch;
* `num_streams` streams and the plan's events; a thunk's stream waits for its `wait_events`,
  then the thunk is issued (`_ISSUE`: thunk type -> issuing function), then its `record_event`
  recorded; at the end stream 0 waits for `final_waits` and is synchronised;
* optional CUDA graph capture of the whole schedule (not possible with while/conditional,
  which read predicates back to the host): captured on the first call, replayed afterwards;
* with `exe.profile` (`CompileOptions.profile`) a `profile.ThunkProfiler` records CUDA events
  around every thunk and the call (graphs are off then); without it nothing is recorded and
  the driver calls are those of an unprofiled runtime.
"""
from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from xlc.backend_gpu.backend import GPU_ALIGNMENT
from xlc.backend_gpu.cuda import (
    check,
    compute_capability,
    device_alloc,
    device_free,
    driver,
    host_alloc,
    host_free,
    load_module,
    primary_context,
    select_image,
    to_device,
)
from xlc.backend_gpu.device_array import DeviceArray, as_device_array
from xlc.backend_gpu.emit_async_copy import is_host
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
from xlc.errors import ArgumentError, XlcError
from xlc.passes.allocation import Slice

if TYPE_CHECKING:
    from xlc.backend_gpu.executable import GpuExecutable
    from xlc.backend_gpu.profile import ThunkProfiler

__all__ = [
    # the executor
    "GpuRuntime",
    # re-exported from cuda.py (tools/bench_gpu.py and tests import them from here)
    "check", "compute_capability", "device_alloc", "device_free", "driver", "primary_context",
    "select_image", "to_device",
]

log = logging.getLogger("xlc.backend_gpu")


class GpuRuntime:
    """Device state of one GpuExecutable; `run` executes its thunk schedule."""

    def __init__(self, exe: GpuExecutable):
        """Load `exe`'s code on device 0, create its streams and events, allocate its
        constant and temp blocks and upload the constants. XlcError without a usable device
        or when the device is older than the code's target."""
        drv = driver()
        primary_context()
        self.exe = exe
        self.drv = drv
        self.image_kind, image = select_image(exe.sm, compute_capability(), exe.cubin, exe.ptx)
        loaded = load_module(image, exe.kernel_names)
        self._image = loaded.image
        self.module = loaded.module
        self.functions = dict(loaded.functions)
        self._ffi_loaded = []  # user PTX kernels (xlc.ffi), a module each
        for name, m in exe.ffi_modules.items():
            extra = load_module(m["ptx"].encode() + b"\0", [m["symbol"]])
            self._ffi_loaded.append(extra)
            self.functions[name] = extra.functions[m["symbol"]]
        flags = drv.CUstream_flags.CU_STREAM_NON_BLOCKING
        self.streams = [check(drv.cuStreamCreate(flags), "cuStreamCreate")
                        for _ in range(max(1, exe.plan.num_streams))]
        ev_flags = drv.CUevent_flags.CU_EVENT_DISABLE_TIMING
        self.events = [check(drv.cuEventCreate(ev_flags), "cuEventCreate")
                       for _ in range(exe.plan.num_events)]
        self._fork = check(drv.cuEventCreate(ev_flags), "cuEventCreate")
        self.profiler: ThunkProfiler | None = None
        if exe.profile:
            from xlc.backend_gpu.profile import ThunkProfiler

            self.profiler = ThunkProfiler(exe, drv, self.streams)
        self.bases = [0] * len(exe.allocations)
        self._owned: list[int] = []
        self._owned_host: list[int] = []
        self._param_blocks: dict[int, int] = {}
        self._out_blocks: dict[int, int] = {}
        self._graph_exec: Any = None
        self._host_word = np.zeros(1, dtype=np.int64)
        self._lock = threading.Lock()
        for a in exe.allocations:
            if a.kind == "constant":
                ptr = self._alloc(a.size)
                data = exe.constants.get(a.index, b"")
                if data:
                    buf = np.frombuffer(data, dtype=np.uint8)
                    check(drv.cuMemcpyHtoD(ptr, buf.ctypes.data, len(data)), "cuMemcpyHtoD")
                self.bases[a.index] = ptr
            elif a.kind == "temp" and is_host(a):
                self.bases[a.index] = ptr = host_alloc(a.size)
                self._owned_host.append(ptr)
            elif a.kind == "temp":
                self.bases[a.index] = self._alloc(a.size)

    def _alloc(self, n: int) -> int:
        ptr = device_alloc(n)
        self._owned.append(ptr)
        return ptr

    def __del__(self) -> None:
        for ptr in getattr(self, "_owned", []):
            device_free(ptr)
        for ptr in getattr(self, "_owned_host", []):
            host_free(ptr)

    # ---- arguments and results ----------------------------------------------------------
    def _bind_params(self, args: list[Any], persistent: bool,
                     owners: dict[int, DeviceArray]) -> list[Any]:
        """Point every parameter allocation at its argument's device memory; donated (or
        live-out) parameters get a fresh block that `owners` keeps alive with the results.
        Returns host staging arrays that must live until the copies finished."""
        drv, s0 = self.drv, self.streams[0]
        keep: list[Any] = []
        for p, raw in zip(self.exe.parameters, args):
            info = self.exe.allocations[p.allocation]
            arg = as_device_array(raw)
            if arg is not None:
                if arg.dtype != np.dtype(p.dtype) or p.physical_perm is not None:
                    raise ArgumentError(f"argument {p.number}: DeviceArray must have dtype "
                                        f"{p.dtype} and the parameter's default layout")
                if info.outlives_call and not persistent:
                    dst = device_alloc(info.size)
                    owners[p.allocation] = DeviceArray(dst, (info.size,), np.dtype(np.uint8),
                                                       owner=True)
                    check(drv.cuMemcpyDtoDAsync(dst, arg.ptr, arg.nbytes, s0), "cuMemcpyDtoD")
                    self.bases[p.allocation] = dst
                elif persistent or arg.ptr % GPU_ALIGNMENT:
                    # graph mode needs fixed addresses; kernels assume aligned bases
                    dst = self._param_block(p.allocation, info.size)
                    check(drv.cuMemcpyDtoDAsync(dst, arg.ptr, arg.nbytes, s0), "cuMemcpyDtoD")
                    self.bases[p.allocation] = dst
                else:
                    self.bases[p.allocation] = arg.ptr
                continue
            host = np.asarray(raw, dtype=np.dtype(p.dtype))
            if p.physical_perm is not None:
                host = host.transpose(p.physical_perm)
            host = np.ascontiguousarray(host)
            keep.append(host)
            if info.outlives_call and not persistent:
                dst = device_alloc(info.size)   # becomes an output block: owned by results
                owners[p.allocation] = DeviceArray(dst, (info.size,), np.dtype(np.uint8),
                                                   owner=True)
            else:
                dst = self._param_block(p.allocation, info.size)
            check(drv.cuMemcpyHtoDAsync(dst, host.ctypes.data, host.nbytes, s0),
                  "cuMemcpyHtoDAsync")
            self.bases[p.allocation] = dst
        return keep

    def _param_block(self, alloc: int, size: int) -> int:
        ptr = self._param_blocks.get(alloc)
        if ptr is None:
            ptr = self._param_blocks[alloc] = self._alloc(size)
        return ptr

    def _bind_outputs(self, persistent: bool, owners: dict[int, DeviceArray]) -> None:
        """Point every output allocation at a fresh (or, `persistent`, a reused) block."""
        for a in self.exe.allocations:
            if a.kind != "output":
                continue
            if persistent:
                ptr = self._out_blocks.get(a.index)
                if ptr is None:
                    ptr = self._out_blocks[a.index] = self._alloc(a.size)
                self.bases[a.index] = ptr
            else:
                ptr = device_alloc(a.size)
                owners[a.index] = DeviceArray(ptr, (a.size,), np.dtype(np.uint8), owner=True)
                self.bases[a.index] = ptr

    def _results(self, owners: dict[int, DeviceArray], to_host: bool,
                 persistent: bool) -> list[Any]:
        """The outputs: host copies, or DeviceArrays (views of this call's output blocks; in
        graph mode, where the blocks are reused by the next replay, copies of them)."""
        drv, s0 = self.drv, self.streams[0]
        out: list[Any] = []
        for o in self.exe.outputs:
            ptr = self.bases[o.slice.index] + o.slice.offset
            dims = o.dims if o.physical_perm is None else \
                tuple(o.dims[d] for d in o.physical_perm)
            if not to_host and persistent:
                dst = device_alloc(o.slice.size)
                check(drv.cuMemcpyDtoDAsync(dst, ptr, o.slice.size, s0), "cuMemcpyDtoDAsync")
                out.append(DeviceArray(dst, dims, np.dtype(o.dtype), owner=True))
            elif to_host:
                host = np.empty(dims, dtype=np.dtype(o.dtype))
                check(drv.cuMemcpyDtoHAsync(host.ctypes.data, ptr, host.nbytes, s0),
                      "cuMemcpyDtoHAsync")
                if o.physical_perm is not None:
                    host = host.transpose(np.argsort(o.physical_perm))
                out.append(host)
            else:
                base = owners.get(o.slice.index)
                out.append(DeviceArray(ptr, dims, np.dtype(o.dtype), owner=False, base=base))
        check(drv.cuStreamSynchronize(s0), "cuStreamSynchronize")
        return out

    # ---- execution ----------------------------------------------------------------------
    def run(self, args: list[Any], graph: bool = False, to_host: bool = True) -> list[Any]:
        """Bind arguments, execute the schedule (or replay its graph), return the outputs.
        A profiled executable never uses a graph and records its events after the outputs
        are synchronised."""
        has_host_control = any(isinstance(t, (WhileThunk, ConditionalThunk, HostCallThunk))
                               for t in self.exe.plan.thunks.walk())
        graph = graph and not has_host_control and self.profiler is None
        with self._lock:
            primary_context()
            owners: dict[int, DeviceArray] = {}
            keep = self._bind_params(args, graph, owners)
            self._bind_outputs(graph or to_host, owners)
            if graph:
                self._run_graph()
            else:
                self._run_schedule()
            results = self._results(owners, to_host, persistent=graph)
            if self.profiler is not None:
                self.profiler.finish()
            del keep
            return results

    def _run_schedule(self) -> None:
        drv, s0 = self.drv, self.streams[0]
        if self.profiler is not None:
            self.profiler.begin(s0)
        if len(self.streams) > 1:
            # fork: the other streams start after stream 0's uploads (and, while capturing a
            # graph, this is what pulls them into the capture)
            check(drv.cuEventRecord(self._fork, s0), "cuEventRecord")
            for s in self.streams[1:]:
                check(drv.cuStreamWaitEvent(s, self._fork, 0), "cuStreamWaitEvent")
        self.execute(self.exe.plan.thunks)
        for e in self.exe.plan.final_waits:
            check(drv.cuStreamWaitEvent(self.streams[0], self.events[e], 0), "cuStreamWaitEvent")
        if self.profiler is not None:
            self.profiler.end(s0)

    def _run_graph(self) -> None:
        drv, s0 = self.drv, self.streams[0]
        if self._graph_exec is None:
            mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL
            check(drv.cuStreamBeginCapture(s0, mode), "cuStreamBeginCapture")
            self._run_schedule()
            g = check(drv.cuStreamEndCapture(s0), "cuStreamEndCapture")
            inst = getattr(drv, "cuGraphInstantiateWithFlags", None)
            self._graph_exec = check(inst(g, 0) if inst else drv.cuGraphInstantiate(g, 0),
                                     "cuGraphInstantiate")
        check(drv.cuGraphLaunch(self._graph_exec, s0), "cuGraphLaunch")

    def address(self, sl: Slice) -> int:
        """Device address of a slice under the current bindings."""
        return self.bases[sl.index] + sl.offset

    def execute(self, thunk: Thunk) -> None:
        """Issue `thunk` (recursively) on its stream, honouring its events."""
        drv = self.drv
        stream = self.streams[thunk.stream]
        for e in thunk.wait_events:
            check(drv.cuStreamWaitEvent(stream, self.events[e], 0), "cuStreamWaitEvent")
        if self.profiler is None or isinstance(thunk, SequentialThunk):
            _ISSUE[type(thunk)](self, thunk, stream)
        else:
            self.profiler.around(self, thunk, stream, _ISSUE[type(thunk)])
        if thunk.record_event is not None:
            check(drv.cuEventRecord(self.events[thunk.record_event], stream), "cuEventRecord")

    def read_scalar(self, sl: Slice, stream: Any) -> int:
        """Copy a small device value (pred / s32) back and wait for it."""
        n = min(sl.size, 8)
        self._host_word[0] = 0
        check(self.drv.cuMemcpyDtoHAsync(self._host_word.ctypes.data, self.address(sl), n,
                                         stream), "cuMemcpyDtoHAsync")
        check(self.drv.cuStreamSynchronize(stream), "cuStreamSynchronize")
        raw = self._host_word.view(np.uint8)[:n].tobytes()
        return int.from_bytes(raw, "little", signed=True)


def _kernel(rt: GpuRuntime, t: KernelThunk, stream: Any) -> None:
    ptrs = tuple(rt.address(a.slice) for a in t.args)
    params = (ptrs, tuple(ctypes.c_void_p for _ in ptrs))
    check(rt.drv.cuLaunchKernel(rt.functions[t.kernel], *t.grid, *t.block, 0, stream,
                                params, 0), f"cuLaunchKernel({t.kernel})")


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
    _call, op_shapes, res_shapes, _handler = host_calls.decode(t.desc)
    operands = []
    for sl, shape in zip(t.operands, op_shapes):
        raw = np.empty(sl.size, np.uint8)
        if sl.size:
            check(drv.cuMemcpyDtoHAsync(raw.ctypes.data, rt.address(sl), sl.size, stream),
                  "cuMemcpyDtoHAsync")
        operands.append((raw, shape))
    check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize")
    arrays = [host_calls.logical_view(raw.view(shape.element_type.dtype),  # type: ignore[union-attr]
                                      shape).copy()
              for raw, shape in operands]
    try:
        values = host_calls.run(t.desc, arrays)
    except Exception as e:  # noqa: BLE001 - reported as the custom-call's failure
        raise host_calls.failure(t.desc, e) from e
    keep = []
    for sl, shape, value in zip(t.results, res_shapes, values):
        host = host_calls.to_physical(value, shape)
        keep.append(host)
        if host.nbytes:
            check(drv.cuMemcpyHtoDAsync(rt.address(sl), host.ctypes.data, host.nbytes,
                                        stream), "cuMemcpyHtoDAsync")
    check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize")
    del keep


def _unsupported(rt: GpuRuntime, t: Thunk, stream: Any) -> None:
    raise XlcError(f"thunk kind {t.kind!r} ({t.hlo}) is handled by the executable, not the "
                   f"schedule")


IssueFn = Callable[["GpuRuntime", Any, Any], None]
"""Issues one thunk (of the type it is keyed by) on a stream: (runtime, thunk, CUstream)."""

_ISSUE: dict[type[Thunk], IssueFn] = {
    KernelThunk: _kernel, MemzeroThunk: _memzero, Memset32Thunk: _memset32,
    DeviceToDeviceCopyThunk: _d2d, SequentialThunk: _sequential, WhileThunk: _while,
    ConditionalThunk: _conditional, HostCallThunk: _host_call,
    CopyStartThunk: _copy_start, CopyDoneThunk: _copy_done,
    HostToDeviceCopyThunk: _unsupported,
    DeviceToHostCopyThunk: _unsupported,
}
"""Thunk type -> how the executor issues it (host copies are the executable's business)."""
