"""The GPU executor: runs a GpuExecutable's thunk schedule through the CUDA driver.

The driver bootstrap (lazy cuda-python import, device 0's primary context, `check`, module
loading, device memory helpers) lives in cuda.py; its public names are re-exported here for
callers that import them from this module. Without cuda-python, or without a CUDA device,
`GpuRuntime(...)` raises XlcError("no CUDA device available: <why>").

Per executable, once (`GpuProgram`, shared by every thread): the module from the cubin when
one was assembled and the device can run it (`cuda.select_image`: same major compute
capability, minor not older), else the PTX (the driver JIT-compiles it for any device at least
as new as its target); one CUfunction per kernel; the constants uploaded.

Per executable and calling thread (`GpuRuntime`, so threads call one executable concurrently):
* stream 0 is the thread's main stream (`cuda.thread_stream()`, shared by every executable the
  thread calls), plus `num_streams - 1` streams of its own and the plan's events; a thunk's
  stream waits for its `wait_events`, then the thunk is issued (`issue.ISSUE`: thunk type ->
  issuing function), then its `record_event` recorded; at the end stream 0 waits for
  `final_waits`;
* kernel parameters packed once (`launch.PackedParams`): a call rewrites only the addresses
  of allocations whose base changed, and no call switches the context;
* memory: outputs, temps and copies of donated or live-out parameters come from the device
  memory pool (`memory_pool.DevicePool`, stream-ordered reuse: no cuMemAlloc/cuMemFree in
  steady state); a donated parameter takes the argument's own buffer when the caller gives
  it up (`donate`); parameter blocks for numpy or misaligned arguments stay with the
  runtime; numpy arguments of asynchronous calls go through pinned staging blocks; the temp
  heap of host memory `S(5)` (host offload) is a pinned host block, which only copy-start
  thunks touch;
* asynchronous calls (`to_host=False`) return DeviceArrays once the work is queued, marked
  with their stream; one completion event per `launch.GROUP` calls in a bounded ring
  (`launch.InFlight`: back-pressure); calls returning numpy arrays synchronise stream 0;
* optional CUDA graph capture of the whole schedule (not possible with while/conditional,
  which read predicates back to the host): captured on the first call, replayed afterwards
  with the nodes whose arguments moved updated in place (graphs.py; copy mode where a
  host-offload copy touches an argument or result);
* with `exe.profile` (`CompileOptions.profile`) a `profile.ThunkProfiler` records CUDA events
  around every thunk and the call (graphs are off then); without it nothing is recorded and
  the driver calls are those of an unprofiled runtime.
"""
from __future__ import annotations

import ctypes
import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from xlc.backend_gpu.backend import GPU_ALIGNMENT
from xlc.backend_gpu.cuda import (
    check,
    compute_capability,
    device_alloc,
    device_free,
    device_pools,
    driver,
    host_alloc,
    host_free,
    load_module,
    primary_context,
    select_image,
    thread_stream,
    to_device,
)
from xlc.backend_gpu.device_array import DeviceArray, as_device_array
from xlc.backend_gpu.emit_async_copy import is_host
from xlc.backend_gpu.graphs import ScheduleGraph, uses_copy_mode
from xlc.backend_gpu.issue import ISSUE, launch, record, wait
from xlc.backend_gpu.launch import InFlight, PackedParams, Staged, Uploads, UploadSlot
from xlc.backend_gpu.thunks import (
    ConditionalThunk,
    HostCallThunk,
    KernelThunk,
    SequentialThunk,
    Thunk,
    WhileThunk,
)
from xlc.errors import ArgumentError
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


class GpuProgram:
    """What every thread's runtime of one executable shares: the loaded module, its kernels
    and the constant blocks (uploaded once)."""

    def __init__(self, exe: GpuExecutable):
        """Load `exe`'s code on device 0 and upload its constants. XlcError without a usable
        device or when the device is older than the code's target."""
        drv = driver()
        primary_context()
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
        self.constants: dict[int, int] = {}
        for a in exe.allocations:
            if a.kind == "constant":
                ptr = self.constants[a.index] = device_alloc(a.size)
                data = exe.constants.get(a.index, b"")
                if data:
                    buf = np.frombuffer(data, dtype=np.uint8)
                    check(drv.cuMemcpyHtoD(ptr, buf.ctypes.data, len(data)), "cuMemcpyHtoD")

    def __del__(self) -> None:
        for ptr in getattr(self, "constants", {}).values():
            device_free(ptr)


class GpuRuntime:
    """Device state of one GpuExecutable on one thread; `run` executes its thunk schedule."""

    def __init__(self, exe: GpuExecutable, program: GpuProgram | None = None):
        """Streams (stream 0 is this thread's `cuda.thread_stream()`), events, parameter
        blocks and packed kernel parameters of `exe` for the calling thread; `program` (the
        loaded code, shared by threads) is loaded when not given."""
        drv = driver()
        self.context = primary_context()
        self.program = program or GpuProgram(exe)
        self.exe = exe
        self.drv = drv
        self.image_kind = self.program.image_kind
        self.functions = self.program.functions
        self.pool, self.staging = device_pools()
        flags = drv.CUstream_flags.CU_STREAM_NON_BLOCKING
        self.streams = [thread_stream()] + [check(drv.cuStreamCreate(flags), "cuStreamCreate")
                                            for _ in range(1, max(1, exe.plan.num_streams))]
        ev_flags = drv.CUevent_flags.CU_EVENT_DISABLE_TIMING
        self.events = [check(drv.cuEventCreate(ev_flags), "cuEventCreate")
                       for _ in range(exe.plan.num_events)]
        self._fork = check(drv.cuEventCreate(ev_flags), "cuEventCreate")
        self._cross_event: Any = None
        self._copy_stream: Any = None   # uploads of asynchronous calls (made on first use)
        self._uploaded: Any = None
        self._uploading: list[UploadSlot] = []
        self.uploads = Uploads(self._alloc, lambda: check(drv.cuEventCreate(ev_flags),
                                                          "cuEventCreate"))
        self._in_flight: InFlight | None = None
        self.profiler: ThunkProfiler | None = None
        if exe.profile:
            from xlc.backend_gpu.profile import ThunkProfiler

            self.profiler = ThunkProfiler(exe, drv, self.streams)
        self.bases = [0] * len(exe.allocations)
        self._owned: list[int] = []
        self._owned_host: list[int] = []
        self._fixed_blocks: dict[int, int] = {}   # allocation -> this runtime's own block
        self._graph: ScheduleGraph | None = None
        self._step_list: list[Callable[[], None]] | None = None
        self._host_word = np.zeros(1, dtype=np.int64)
        self.has_host_control = any(
            isinstance(t, (WhileThunk, ConditionalThunk, HostCallThunk))
            for t in exe.plan.thunks.walk())
        self._temps: list[tuple[int, int]] = []   # (allocation, size) taken per call
        self._outputs = [(a.index, a.size) for a in exe.allocations if a.kind == "output"]
        self._param_dtypes = {p.number: np.dtype(p.dtype) for p in exe.parameters}
        used = [o.slice.index for o in exe.outputs]
        self._result_table = [
            (o.slice.index, o.slice.offset, o.slice.size,
             o.dims if o.physical_perm is None else tuple(o.dims[d] for d in o.physical_perm),
             np.dtype(o.dtype), o.physical_perm,
             o.slice.offset == 0 and used.count(o.slice.index) == 1)
            for o in exe.outputs]
        """Per output: allocation, offset, bytes, physical dims, dtype, permutation, and
        whether it is the only output of its allocation and starts it."""
        for a in exe.allocations:
            if a.kind == "constant":
                self.bases[a.index] = self.program.constants[a.index]
            elif a.kind == "temp" and is_host(a):
                self.bases[a.index] = ptr = host_alloc(a.size)
                self._owned_host.append(ptr)
            elif a.kind == "temp":
                self._temps.append((a.index, a.size))
        self.packed = PackedParams((t for t in exe.plan.thunks.walk()
                                    if isinstance(t, KernelThunk)), len(exe.allocations))
        self.graph_copies = uses_copy_mode(self)
        """Graphs copy arguments and results in and out (graphs.py) rather than update."""
        self.graph_updates = not self.graph_copies

    @property
    def copy_stream(self) -> Any:
        """This runtime's stream for uploads of asynchronous calls (made on first use)."""
        if self._copy_stream is None:
            drv = self.drv
            self._copy_stream = check(drv.cuStreamCreate(
                drv.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate")
            self._uploaded = check(drv.cuEventCreate(
                drv.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
        return self._copy_stream

    @property
    def in_flight(self) -> InFlight:
        """The completion-event ring of asynchronous calls (made by the first one)."""
        if self._in_flight is None:
            drv, flags = self.drv, self.drv.CUevent_flags.CU_EVENT_DISABLE_TIMING
            s0 = self.streams[0]
            self._in_flight = InFlight(
                lambda: check(drv.cuEventCreate(flags), "cuEventCreate"),
                lambda ev: check(drv.cuEventSynchronize(ev), "cuEventSynchronize"),
                lambda ev: check(drv.cuEventRecord(ev, s0), "cuEventRecord"))
        return self._in_flight

    def _alloc(self, n: int) -> int:
        ptr = device_alloc(n)
        self._owned.append(ptr)
        return ptr

    def __del__(self) -> None:
        for ptr in getattr(self, "_owned", []):
            device_free(ptr)
        for ptr in getattr(self, "_owned_host", []):
            host_free(ptr)
        drv = getattr(self, "drv", None)
        copy = getattr(self, "_copy_stream", None)
        for s in getattr(self, "streams", [])[1:] + ([copy] if copy is not None else []):
            try:
                drv.cuStreamDestroy(s)  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001 - shutdown order, or a driver without it
                pass

    # ---- arguments and results ----------------------------------------------------------
    def _bind_params(self, args: list[Any], persistent: bool, owners: dict[int, DeviceArray],
                     keep: list[Any], asynchronous: bool, donate: bool) -> None:
        """Point every parameter allocation at its argument's device memory. A donated
        parameter takes the argument's own buffer when `donate` and the caller gave it up
        (an owning DeviceArray of this thread's stream, passed once), else a pooled copy;
        a live-out parameter gets a pooled copy; `owners` keeps those blocks alive with the
        results. Numpy arguments are uploaded (through pinned staging blocks when
        `asynchronous`); `keep` collects what must live until the call finished."""
        drv, s0 = self.drv, self.streams[0]
        self._uploading.clear()   # (left over only by a call that failed while binding)
        for p, raw in zip(self.exe.parameters, args):
            info = self.exe.allocations[p.allocation]
            arg = as_device_array(raw)
            if arg is not None:
                self._bind_device_arg(p, info, arg, args, persistent, owners, keep, donate)
                continue
            host = np.asarray(raw, dtype=self._param_dtypes[p.number])
            if p.physical_perm is not None:
                host = host.transpose(p.physical_perm)
            host = np.ascontiguousarray(host)
            stream = s0
            if info.outlives_call and not persistent:
                dst = self.pool.take(info.size, s0)   # becomes an output block: results own it
                owners[p.allocation] = DeviceArray(dst, (info.size,), np.dtype(np.uint8),
                                                   owner=True)
            elif asynchronous and not persistent and host.nbytes:
                # one of two blocks, filled on the copy stream once the last call that read
                # it is done: overlaps the previous call's kernels (launch.Uploads)
                slot = self.uploads.next(p.allocation, info.size)
                dst, stream = slot.ptr, self.copy_stream
                if slot.busy:
                    check(drv.cuStreamWaitEvent(stream, slot.free, 0), "cuStreamWaitEvent")
                self._uploading.append(slot)
            else:
                dst = self._fixed_block(p.allocation, info.size)
            self.bases[p.allocation] = dst
            if not host.nbytes:
                continue
            src = host.ctypes.data
            if asynchronous:
                # an upload from pageable memory waits for the stream: stage it in pinned memory
                staged = Staged(self.staging.take(host.nbytes), self.staging.give)
                ctypes.memmove(staged.ptr, src, host.nbytes)
                keep.append(staged)
                src = staged.ptr
            else:
                keep.append(host)
            check(drv.cuMemcpyHtoDAsync(dst, src, host.nbytes, stream), "cuMemcpyHtoDAsync")
        if self._uploading:     # the compute stream starts after the uploads
            check(drv.cuEventRecord(self._uploaded, self._copy_stream), "cuEventRecord")
            check(drv.cuStreamWaitEvent(s0, self._uploaded, 0), "cuStreamWaitEvent")

    def _bind_device_arg(self, p: Any, info: Any, arg: DeviceArray, args: list[Any],
                         persistent: bool, owners: dict[int, DeviceArray], keep: list[Any],
                         donate: bool) -> None:
        drv, s0 = self.drv, self.streams[0]
        if arg.deleted is not None:
            raise ArgumentError(f"argument {p.number}: DeviceArray was deleted "
                                f"({arg.deleted})")
        if arg.dtype != self._param_dtypes[p.number] or p.physical_perm is not None:
            raise ArgumentError(f"argument {p.number}: DeviceArray must have dtype "
                                f"{p.dtype} and the parameter's default layout")
        if arg.ready is not None and arg.ready[0] is not s0:
            # computed by a call on another thread's stream: order after what that stream
            # holds now (an event recorded there, then waited for here)
            event = arg.ready[1]
            if event is None:
                if self._cross_event is None:
                    self._cross_event = check(drv.cuEventCreate(
                        drv.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
                event = self._cross_event
                check(drv.cuEventRecord(event, arg.ready[0]), "cuEventRecord")
            check(drv.cuStreamWaitEvent(s0, event, 0), "cuStreamWaitEvent")
        if (donate and info.aliased_with_output and not persistent and arg.owner
                and arg.base is None and self.pool.stream_of(arg.ptr) is s0
                and not arg.ptr % GPU_ALIGNMENT
                and sum(x is arg for x in args) == 1):
            owners[p.allocation] = DeviceArray(arg.ptr, (info.size,), np.dtype(np.uint8),
                                               owner=True)
            self.bases[p.allocation] = arg.ptr
            arg.donate(f"donated to a call of {self.exe.module.name}")
            return
        keep.append(arg)  # its buffer must not be reused (by any stream) before we are done
        if info.outlives_call and not persistent:
            dst = self.pool.take(info.size, s0)
            owners[p.allocation] = DeviceArray(dst, (info.size,), np.dtype(np.uint8),
                                               owner=True)
        elif persistent or arg.ptr % GPU_ALIGNMENT:
            # graph mode needs fixed addresses; kernels assume aligned bases
            dst = self._fixed_block(p.allocation, info.size)
        else:
            self.bases[p.allocation] = arg.ptr
            return
        if arg.nbytes:
            check(drv.cuMemcpyDtoDAsync(dst, arg.ptr, arg.nbytes, s0), "cuMemcpyDtoD")
        self.bases[p.allocation] = dst

    def _fixed_block(self, alloc: int, size: int) -> int:
        """This runtime's own block for allocation `alloc` (made on first use): parameter
        blocks for numpy or misaligned arguments, and outputs and temps at fixed addresses
        (calls returning numpy arrays, graphs)."""
        ptr = self._fixed_blocks.get(alloc)
        if ptr is None:
            ptr = self._fixed_blocks[alloc] = self._alloc(size)
        return ptr

    def _bind_outputs(self, fixed_outputs: bool, fixed_temps: bool,
                      owners: dict[int, DeviceArray]) -> list[int]:
        """Point every output allocation at a pooled block the results own (or, fixed, at
        this runtime's own block, reused by every call), and every temp allocation at a
        pooled block for this call (or, fixed, a block of its own). Returns the pooled temp
        blocks, which go back to the pool once the call's work is issued."""
        s0, bases, take = self.streams[0], self.bases, self.pool.take
        u8 = np.dtype(np.uint8)
        for index, size in self._outputs:
            if fixed_outputs:
                bases[index] = self._fixed_block(index, size)
            else:
                bases[index] = ptr = take(size, s0)
                owners[index] = DeviceArray.wrap(ptr, (size,), u8, True)
        taken = []
        for index, size in self._temps:
            if fixed_temps:
                bases[index] = self._fixed_block(index, size)
            else:
                bases[index] = ptr = take(size, s0)
                taken.append(ptr)
        return taken

    def _results(self, owners: dict[int, DeviceArray], to_host: bool, persistent: bool,
                 ready: tuple[Any, Any] | None) -> list[Any]:
        """The outputs: host copies, or DeviceArrays (views of this call's output blocks, or
        the block itself when the output is all of it; in graph copy mode, where the blocks
        are reused by the next call, copies of them), marked with `ready`."""
        drv, s0, bases = self.drv, self.streams[0], self.bases
        out: list[Any] = []
        for index, offset, size, dims, dtype, perm, whole in self._result_table:
            ptr = bases[index] + offset
            if to_host:
                host = np.empty(dims, dtype=dtype)
                if host.nbytes:
                    check(drv.cuMemcpyDtoHAsync(host.ctypes.data, ptr, host.nbytes, s0),
                          "cuMemcpyDtoHAsync")
                if perm is not None:
                    host = host.transpose(np.argsort(perm))
                out.append(host)
            elif persistent:
                dst = self.pool.take(size, s0)
                if size:
                    check(drv.cuMemcpyDtoDAsync(dst, ptr, size, s0), "cuMemcpyDtoDAsync")
                out.append(DeviceArray(dst, dims, dtype, owner=True, ready=ready))
            else:
                base = owners.get(index)
                if whole and base is not None and base.owner:
                    # the result is the whole block: it owns it (and can be donated later)
                    base.owner = False
                    out.append(DeviceArray.wrap(ptr, dims, dtype, True, None, ready))
                else:
                    out.append(DeviceArray.wrap(ptr, dims, dtype, False, base, ready))
        return out

    # ---- execution ----------------------------------------------------------------------
    def run(self, args: list[Any], graph: bool = False, to_host: bool = True,
            donate: bool = False) -> list[Any]:
        """Bind arguments, execute the schedule (or replay its graph), return the outputs.

        `to_host`: numpy results; the call has finished when this returns. Otherwise the
        results are DeviceArrays returned as soon as the work is queued (marked with their
        stream); at most `launch.MAX_IN_FLIGHT` calls of this runtime are queued before one
        waits for older ones. `donate`: donated parameters may take their DeviceArray
        arguments' buffers (the arguments are then deleted). `graph`: replay a CUDA graph of
        the schedule (graphs.py), updating the nodes whose arguments moved, or copying
        arguments and results in copy mode. A profiled executable never uses a graph and
        finishes before returning."""
        graph = graph and not self.has_host_control and self.profiler is None
        copies = graph and self.graph_copies
        drv, s0 = self.drv, self.streams[0]   # (the runtime made its context current)
        owners: dict[int, DeviceArray] = {}
        keep: list[Any] = []
        self._bind_params(args, copies, owners, keep, not to_host, donate)
        taken = self._bind_outputs(to_host or copies, graph or to_host, owners)
        try:
            changed = self.packed.patch(self.bases)
            if graph:
                if self._graph is None:
                    self._graph = ScheduleGraph(self)
                self._graph.launch(self, changed)
            else:
                self.run_schedule()
        finally:
            for ptr in taken:   # later work on stream 0 runs after this call's (or what of
                self.pool.give(ptr)   # it was issued before an error)
            for slot in self._uploading:   # the next upload into it waits for this call
                check(drv.cuEventRecord(slot.free, s0), "cuEventRecord")
                slot.busy = True
            self._uploading.clear()
        synchronous = to_host or self.profiler is not None
        results = self._results(owners, to_host, copies, None if synchronous else (s0, None))
        if synchronous:
            check(drv.cuStreamSynchronize(s0), "cuStreamSynchronize")
            if self._in_flight is not None:
                self._in_flight.retire_all()
            if self.profiler is not None:
                self.profiler.finish()
        else:
            self.in_flight.after_call(keep)
        return results

    def synchronize(self) -> None:
        """Wait for every call queued by this runtime and release what they kept."""
        check(self.drv.cuStreamSynchronize(self.streams[0]), "cuStreamSynchronize")
        if self._in_flight is not None:
            self._in_flight.retire_all()

    def run_schedule(self) -> None:
        """Issue the whole schedule on the runtime's streams (stream 0 joins the others at
        the end)."""
        drv, s0 = self.drv, self.streams[0]
        if self.profiler is not None:
            self.profiler.begin(s0)
        if len(self.streams) > 1:
            # fork: the other streams start after stream 0's uploads (and, while capturing a
            # graph, this is what pulls them into the capture)
            check(drv.cuEventRecord(self._fork, s0), "cuEventRecord")
            for s in self.streams[1:]:
                check(drv.cuStreamWaitEvent(s, self._fork, 0), "cuStreamWaitEvent")
        if self.profiler is None:
            for step in self._steps():
                step()
        else:
            self.execute(self.exe.plan.thunks)
        for e in self.exe.plan.final_waits:
            check(drv.cuStreamWaitEvent(self.streams[0], self.events[e], 0), "cuStreamWaitEvent")
        if self.profiler is not None:
            self.profiler.end(s0)

    def _steps(self) -> list[Callable[[], None]]:
        """The top-level schedule as one call per step (made once): each kernel launch with
        its arguments bound (and its event waits and record), `execute` for every other
        thunk (control flow, copies, host calls), so a call walks no thunk tree."""
        steps = self._step_list
        if steps is not None:
            return steps
        steps = []
        drv, ok = self.drv, self.drv.CUresult.CUDA_SUCCESS
        for t in self.exe.plan.thunks.thunks:
            if not isinstance(t, KernelThunk):
                steps.append(functools.partial(self.execute, t))
                continue
            stream = self.streams[t.stream]
            steps += [functools.partial(wait, drv, stream, self.events[e])
                      for e in t.wait_events]
            args = (self.functions[t.kernel], *t.grid, *t.block, 0, stream,
                    self.packed.params[id(t)], 0)
            steps.append(functools.partial(launch, drv, ok, args, t.kernel))
            if t.record_event is not None:
                steps.append(functools.partial(record, drv, self.events[t.record_event],
                                               stream))
        self._step_list = steps
        return steps

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
            ISSUE[type(thunk)](self, thunk, stream)
        else:
            self.profiler.around(self, thunk, stream, ISSUE[type(thunk)])
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
