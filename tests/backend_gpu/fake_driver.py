"""A stand-in for cuda-python's driver module, backed by host memory and the kernel emulator,
so the runtime (argument binding, allocations, copies, events, graph capture, DeviceArray
results) runs device-free. Only the calls the runtime makes are implemented; they follow
cuda-python's conventions (every call returns `(CUresult, values...)`).

Streams execute eagerly and in issue order (a legal schedule of the real thing); during stream
capture operations are recorded instead and replayed by `cuGraphLaunch`.

Several executables can share one fake (`add(exe)`): `cuModuleLoadData` finds the executable
whose PTX (or cubin) the image is, and launches run that executable's emulated kernels.
"""
from __future__ import annotations

import ctypes
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from tests.backend_gpu.emulator import Emulator
from xlc.backend_gpu.executable import GpuExecutable
from xlc.backend_gpu.thunks import KernelThunk

OK = 0


class CUresult:
    CUDA_SUCCESS = 0


class CUstream_flags:  # noqa: N801 - cuda-python's name
    CU_STREAM_NON_BLOCKING = 1


class CUevent_flags:  # noqa: N801
    CU_EVENT_DISABLE_TIMING = 2


class CUstreamCaptureMode:
    CU_STREAM_CAPTURE_MODE_GLOBAL = 0


class CUgraphNodeType:  # noqa: N801
    CU_GRAPH_NODE_TYPE_KERNEL = 0
    CU_GRAPH_NODE_TYPE_MEMCPY = 1
    CU_GRAPH_NODE_TYPE_MEMSET = 2
    CU_GRAPH_NODE_TYPE_OTHER = 99   # event nodes and the rest: one kind for the fake


class MemsetNode:
    """A captured memset (also run eagerly outside capture): CUDA_MEMSET_NODE_PARAMS' fields."""

    def __init__(self, dst: int, value: int, element_size: int, width: int):
        self.dst, self.value, self.elementSize, self.width = dst, value, element_size, width
        self.height = 1

    def __call__(self) -> None:
        if self.elementSize == 1:
            ctypes.memset(self.dst, self.value, self.width)
        else:
            (ctypes.c_uint32 * self.width).from_address(self.dst)[:] = [self.value] * self.width


class CopyNode:
    """A captured device-to-device copy: CUDA_MEMCPY3D's fields the runtime reads."""

    def __init__(self, src: int, dst: int, n: int):
        self.srcDevice, self.dstDevice, self.WidthInBytes = src, dst, n

    def __call__(self) -> None:
        ctypes.memmove(self.dstDevice, self.srcDevice, self.WidthInBytes)


class KernelNodeParams:
    """The fields of CUDA_KERNEL_NODE_PARAMS the runtime reads and writes."""

    def __init__(self, func: Any, kernel_params: int):
        self.func = func
        self.kernelParams = kernel_params


class KernelNode:
    """A captured launch: its function and the argument addresses recorded at capture."""

    def __init__(self, drv: FakeDriver, func: tuple[int, str], grid: tuple[int, int, int],
                 block: tuple[int, int, int], args: tuple[int, ...]):
        self.drv, self.func, self.grid, self.block, self.args = drv, func, grid, block, args
        self._slots: Any = None

    def params(self) -> KernelNodeParams:
        """The node's parameters: a void** array owned by the node, as the driver's."""
        n = max(1, len(self.args))
        values = (ctypes.c_uint64 * n)(*self.args)
        slots = (ctypes.c_void_p * n)(*[ctypes.addressof(values) + 8 * i for i in range(n)])
        self._slots = (values, slots)
        return KernelNodeParams(self.func, ctypes.addressof(slots))

    def __call__(self) -> None:
        module, name = self.func
        self.drv.launches.append(name)
        self.drv.programs[module][1].launch_raw(name, self.grid, self.block, list(self.args))


class CUdevice_attribute:  # noqa: N801
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


class FakeDriver:
    """The driver API subset used by xlc.backend_gpu.cuda and .runtime, for one executable."""

    CUresult = CUresult
    CUstream_flags = CUstream_flags
    CUevent_flags = CUevent_flags
    CUstreamCaptureMode = CUstreamCaptureMode
    CUdevice_attribute = CUdevice_attribute
    CUgraphNodeType = CUgraphNodeType

    def __init__(self, exe: GpuExecutable | None = None, compute_capability: int = 80):
        self.api: Counter[str] = Counter()
        """How often each driver entry point was looked up (= called, for the runtime)."""
        self.programs: list[tuple[GpuExecutable, Emulator]] = []
        self.arity: dict[str, int] = {}
        self.handles = 0
        if exe is not None:
            self.add(exe)
        self.compute_capability = compute_capability
        self.loaded: list[bytes] = []
        self.memory: dict[int, np.ndarray] = {}
        self.freed: list[int] = []
        self.launches: list[str] = []
        self.capture: list[Callable[[], None]] | None = None
        self.calls: list[str] = []
        self.graph_launches = 0

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("cu") and name[2:3].isupper():
            object.__getattribute__(self, "api")[name] += 1
        return object.__getattribute__(self, name)

    def add(self, exe: GpuExecutable) -> None:
        """Make `exe`'s kernels loadable (its PTX or cubin) and runnable (emulated)."""
        self.programs.append((exe, Emulator(exe)))
        for t in exe.all_thunks():
            if isinstance(t, KernelThunk):
                self.arity[t.kernel] = len(t.args)

    def kernel_args(self, f: tuple[int, str], params: Any) -> tuple[int, ...]:
        """The argument addresses of a launch of kernel `f`: from a packed `void**` array
        (read now, as the driver copies them at the launch or capture) or a (values, types)
        tuple."""
        if isinstance(params, int):
            n = self.arity[f[1]]
            slots = (ctypes.c_void_p * n).from_address(params)
            return tuple(ctypes.c_uint64.from_address(slots[i]).value for i in range(n))
        ptrs, types = params
        assert len(ptrs) == len(types)
        return tuple(ptrs)

    def steady(self, before: Counter[str]) -> Counter[str]:
        """The driver calls made since the snapshot `before` (a copy of `api`), frees left
        out (other tests' garbage may be collected at any time)."""
        made = self.api - before
        for name in ("cuMemFree", "cuMemFreeHost"):
            made.pop(name, None)
        return made

    # ---- helpers ------------------------------------------------------------------------
    def _do(self, name: str, op: Callable[[], None]) -> tuple[int]:
        self.calls.append(name)
        if self.capture is not None:
            self.capture.append(op)
        else:
            op()
        return (OK,)

    def cuGetErrorName(self, err: int) -> tuple[int, bytes]:  # noqa: N802
        return (OK, b"CUDA_ERROR_FAKE")

    # ---- context, module ----------------------------------------------------------------
    def cuInit(self, flags: int) -> tuple[int]:  # noqa: N802
        return (OK,)

    def cuDeviceGetCount(self) -> tuple[int, int]:  # noqa: N802
        return (OK, 1)

    def cuDeviceGet(self, ordinal: int) -> tuple[int, int]:  # noqa: N802
        return (OK, ordinal)

    def cuDeviceGetAttribute(self, attr: int, dev: int) -> tuple[int, int]:  # noqa: N802
        major, minor = divmod(self.compute_capability, 10)
        if attr == CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
            return (OK, major)
        assert attr == CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, attr
        return (OK, minor)

    def cuDevicePrimaryCtxRetain(self, dev: int) -> tuple[int, str]:  # noqa: N802
        return (OK, "ctx")

    def cuCtxSetCurrent(self, ctx: Any) -> tuple[int]:  # noqa: N802
        return (OK,)

    def cuCtxSynchronize(self) -> tuple[int]:  # noqa: N802
        return (OK,)

    def cuModuleLoadData(self, image: int) -> tuple[int, str]:  # noqa: N802
        head = ctypes.string_at(image, 16)
        assert head.startswith((b"//", b"\x7fELF")), head  # PTX text or a cubin
        self.loaded.append(head[:4])
        if head.startswith(b"//"):  # NUL-terminated PTX: compare the whole text
            text = ctypes.string_at(image)
            found = [k for k, (e, _) in enumerate(self.programs) if e.ptx.encode() == text]
        else:
            found = [k for k, (e, _) in enumerate(self.programs)
                     if e.cubin and ctypes.string_at(image, len(e.cubin)) == e.cubin]
        # equal PTX (or cubin) is equal code: any of the executables that have it runs its kernels
        assert found, "image matches no registered executable"
        return (OK, found[0])

    def cuModuleGetFunction(self, module: int, name: bytes  # noqa: N802
                            ) -> tuple[int, tuple[int, str]]:
        assert name.decode() in self.programs[module][0].kernel_names, name
        return (OK, (module, name.decode()))

    # ---- memory -------------------------------------------------------------------------
    def _allocate(self, n: int) -> int:
        buf = np.zeros(n + 256, dtype=np.uint8)
        off = (-buf.ctypes.data) % 256
        addr = buf.ctypes.data + off
        self.memory[addr] = buf
        return addr

    def cuMemAlloc(self, n: int) -> tuple[int, int]:  # noqa: N802
        return (OK, self._allocate(n))

    def cuMemFree(self, ptr: int) -> tuple[int]:  # noqa: N802
        self.freed.append(int(ptr))
        self.memory.pop(int(ptr), None)
        return (OK,)

    def cuMemcpyHtoD(self, dst: int, src: int, n: int) -> tuple[int]:  # noqa: N802
        ctypes.memmove(dst, src, n)
        return (OK,)

    def cuMemcpyDtoH(self, dst: int, src: int, n: int) -> tuple[int]:  # noqa: N802
        ctypes.memmove(dst, src, n)
        return (OK,)

    def cuMemcpyDtoD(self, dst: int, src: int, n: int) -> tuple[int]:  # noqa: N802
        ctypes.memmove(dst, src, n)
        return (OK,)

    def cuMemcpyHtoDAsync(self, dst: int, src: int, n: int, s: Any) -> tuple[int]:  # noqa: N802
        return self._do("h2d", lambda: ctypes.memmove(dst, src, n))

    def cuMemcpyDtoHAsync(self, dst: int, src: int, n: int, s: Any) -> tuple[int]:  # noqa: N802
        return self._do("d2h", lambda: ctypes.memmove(dst, src, n))

    def cuMemcpyDtoDAsync(self, dst: int, src: int, n: int, s: Any) -> tuple[int]:  # noqa: N802
        return self._do("d2d", CopyNode(int(src), int(dst), n))

    def cuMemsetD8Async(self, dst: int, v: int, n: int, s: Any) -> tuple[int]:  # noqa: N802
        return self._do("memset8", MemsetNode(int(dst), v, 1, n))

    def cuMemsetD32Async(self, dst: int, v: int, n: int, s: Any) -> tuple[int]:  # noqa: N802
        return self._do("memset32", MemsetNode(int(dst), v, 4, n))

    # ---- streams, events, launches ------------------------------------------------------
    def cuStreamCreate(self, flags: int) -> tuple[int, str]:  # noqa: N802
        self.handles += 1
        return (OK, f"stream#{self.handles}")

    def cuStreamDestroy(self, s: Any) -> tuple[int]:  # noqa: N802
        return (OK,)

    def cuEventCreate(self, flags: int) -> tuple[int, str]:  # noqa: N802
        self.handles += 1
        return (OK, f"event#{self.handles}")

    def cuEventSynchronize(self, ev: Any) -> tuple[int]:  # noqa: N802
        return (OK,)

    def cuEventDestroy(self, ev: Any) -> tuple[int]:  # noqa: N802
        return (OK,)

    def cuMemHostAlloc(self, n: int, flags: int) -> tuple[int, int]:  # noqa: N802
        return (OK, self._allocate(n))

    def cuMemFreeHost(self, ptr: int) -> tuple[int]:  # noqa: N802
        self.memory.pop(int(ptr), None)
        return (OK,)

    def cuEventRecord(self, ev: Any, s: Any) -> tuple[int]:  # noqa: N802
        return self._do("record", lambda: None)

    def cuStreamWaitEvent(self, s: Any, ev: Any, flags: int) -> tuple[int]:  # noqa: N802
        return self._do("wait", lambda: None)

    def cuStreamSynchronize(self, s: Any) -> tuple[int]:  # noqa: N802
        assert self.capture is None, "synchronising a capturing stream"
        return (OK,)

    def cuLaunchKernel(self, f: tuple[int, str], gx: int, gy: int, gz: int,  # noqa: N802
                       bx: int, by: int, bz: int, shmem: int, s: Any, params: Any,
                       extra: Any) -> tuple[int]:
        assert shmem == 0 and extra == 0
        return self._do("launch", KernelNode(self, f, (gx, gy, gz), (bx, by, bz),
                                             self.kernel_args(f, params)))

    # ---- graphs -------------------------------------------------------------------------
    def cuStreamBeginCapture(self, s: Any, mode: int) -> tuple[int]:  # noqa: N802
        self.capture = []
        return (OK,)

    def cuStreamEndCapture(self, s: Any) -> tuple[int, list[Callable[[], None]]]:  # noqa: N802
        ops, self.capture = self.capture or [], None
        return (OK, ops)

    def cuGraphInstantiateWithFlags(self, g: Any, flags: int) -> tuple[int, Any]:  # noqa: N802
        return (OK, g)

    def cuGraphLaunch(self, g: list[Callable[[], None]], s: Any) -> tuple[int]:  # noqa: N802
        self.graph_launches += 1
        for op in g:
            op()
        return (OK,)

    def cuGraphGetNodes(self, g: list[Callable[[], None]], n: int  # noqa: N802
                        ) -> tuple[int, list[Any], int]:
        return (OK, list(g[:n]) if n else [], len(g))

    def cuGraphNodeGetType(self, node: Any) -> tuple[int, int]:  # noqa: N802
        kinds = {KernelNode: CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL,
                 MemsetNode: CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMSET,
                 CopyNode: CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMCPY}
        return (OK, kinds.get(type(node), CUgraphNodeType.CU_GRAPH_NODE_TYPE_OTHER))

    def cuGraphMemsetNodeGetParams(self, node: MemsetNode  # noqa: N802
                                   ) -> tuple[int, MemsetNode]:
        return (OK, MemsetNode(node.dst, node.value, node.elementSize, node.width))

    def cuGraphMemcpyNodeGetParams(self, node: CopyNode) -> tuple[int, CopyNode]:  # noqa: N802
        return (OK, CopyNode(node.srcDevice, node.dstDevice, node.WidthInBytes))

    def cuGraphExecMemsetNodeSetParams(self, g: Any, node: MemsetNode,  # noqa: N802
                                       p: MemsetNode, ctx: Any) -> tuple[int]:
        assert (p.value, p.elementSize, p.width) == (node.value, node.elementSize, node.width)
        node.dst = int(p.dst)
        return (OK,)

    def cuGraphExecMemcpyNodeSetParams(self, g: Any, node: CopyNode,  # noqa: N802
                                       p: CopyNode, ctx: Any) -> tuple[int]:
        assert p.WidthInBytes == node.WidthInBytes
        node.srcDevice, node.dstDevice = int(p.srcDevice), int(p.dstDevice)
        return (OK,)

    def cuGraphKernelNodeGetParams(self, node: KernelNode  # noqa: N802
                                   ) -> tuple[int, KernelNodeParams]:
        return (OK, node.params())

    def cuGraphExecKernelNodeSetParams(self, g: Any, node: KernelNode,  # noqa: N802
                                       params: KernelNodeParams) -> tuple[int]:
        assert params.func == node.func
        node.args = self.kernel_args(node.func, params.kernelParams)
        return (OK,)


def use(holder: list[FakeDriver], exe: GpuExecutable, monkeypatch: Any) -> FakeDriver:
    """Make a FakeDriver for `exe` the process's CUDA driver for this test (pytest's
    `monkeypatch` undoes it); `holder` is the `fake` fixture's list."""
    from xlc.backend_gpu import cuda

    drv = FakeDriver(exe)
    holder.append(drv)
    monkeypatch.setattr(cuda, "_driver", drv)
    monkeypatch.setattr(cuda, "_context", None)
    return drv


# ---- a fake with a virtual clock (profiling) ---------------------------------------------------
CUDA_ERROR_INVALID_HANDLE = 400
CUDA_ERROR_NOT_READY = 600

OP_NS = {"launch": 5000, "h2d": 3000, "d2h": 2000, "d2d": 1500, "memset8": 700,
         "memset32": 800}
"""Virtual time (ns) each operation takes on its stream in `TimedFakeDriver`."""


class TimedFakeDriver(FakeDriver):
    """The fake driver with distinct stream and event handles and a deterministic virtual
    clock per stream: an operation advances its stream's clock by `OP_NS[kind]`, waiting for
    an event moves the stream's clock up to the event's time, recording an event stamps it
    with the clock. `cuEventElapsedTime` answers from the stamps, in milliseconds, and fails
    with CUDA_ERROR_INVALID_HANDLE (as the driver does) for events created with
    CU_EVENT_DISABLE_TIMING or never recorded. `event_flags` keeps every event's flags;
    `calls` also logs "elapsed"."""

    def __init__(self, exe: GpuExecutable | None = None, compute_capability: int = 80):
        super().__init__(exe, compute_capability)
        self.clocks: dict[Any, int] = {}
        self.stamps: dict[Any, int] = {}
        self.event_flags: dict[Any, int] = {}
        self._stream: Any = None
        self._handles = 0

    def _handle(self, kind: str) -> str:
        self._handles += 1
        return f"{kind}#{self._handles}"

    def _do(self, name: str, op: Callable[[], None]) -> tuple[int]:
        s, cost = self._stream, OP_NS.get(name, 0)

        def timed() -> None:
            op()
            if cost:
                self.clocks[s] = self.clocks.get(s, 0) + cost
        return super()._do(name, timed)

    def cuStreamCreate(self, flags: int) -> tuple[int, str]:  # noqa: N802
        return (OK, self._handle("stream"))

    def cuEventCreate(self, flags: int) -> tuple[int, str]:  # noqa: N802
        ev = self._handle("event")
        self.event_flags[ev] = int(flags)
        return (OK, ev)

    def cuEventRecord(self, ev: Any, s: Any) -> tuple[int]:  # noqa: N802
        def stamp() -> None:
            self.stamps[ev] = self.clocks.get(s, 0)
        return self._do("record", stamp)

    def cuStreamWaitEvent(self, s: Any, ev: Any, flags: int) -> tuple[int]:  # noqa: N802
        def wait() -> None:
            self.clocks[s] = max(self.clocks.get(s, 0), self.stamps.get(ev, 0))
        return self._do("wait", wait)

    def cuEventElapsedTime(self, start: Any, end: Any) -> tuple[int, float]:  # noqa: N802
        self.calls.append("elapsed")
        disabled = CUevent_flags.CU_EVENT_DISABLE_TIMING
        if any(self.event_flags.get(e, disabled) & disabled or e not in self.stamps
               for e in (start, end)):
            return (CUDA_ERROR_INVALID_HANDLE, 0.0)
        return (OK, (self.stamps[end] - self.stamps[start]) / 1e6)

    def cuEventSynchronize(self, ev: Any) -> tuple[int]:  # noqa: N802
        return (OK,)

    def cuEventQuery(self, ev: Any) -> tuple[int]:  # noqa: N802
        return (OK,) if ev in self.stamps else (CUDA_ERROR_NOT_READY,)

    # the operations that run on a stream note it for `_do`
    def cuMemcpyHtoDAsync(self, dst: int, src: int, n: int, s: Any) -> tuple[int]:  # noqa: N802
        self._stream = s
        return super().cuMemcpyHtoDAsync(dst, src, n, s)

    def cuMemcpyDtoHAsync(self, dst: int, src: int, n: int, s: Any) -> tuple[int]:  # noqa: N802
        self._stream = s
        return super().cuMemcpyDtoHAsync(dst, src, n, s)

    def cuMemcpyDtoDAsync(self, dst: int, src: int, n: int, s: Any) -> tuple[int]:  # noqa: N802
        self._stream = s
        return super().cuMemcpyDtoDAsync(dst, src, n, s)

    def cuMemsetD8Async(self, dst: int, v: int, n: int, s: Any) -> tuple[int]:  # noqa: N802
        self._stream = s
        return super().cuMemsetD8Async(dst, v, n, s)

    def cuMemsetD32Async(self, dst: int, v: int, n: int, s: Any) -> tuple[int]:  # noqa: N802
        self._stream = s
        return super().cuMemsetD32Async(dst, v, n, s)

    def cuLaunchKernel(self, f: tuple[int, str], gx: int, gy: int, gz: int,  # noqa: N802
                       bx: int, by: int, bz: int, shmem: int, s: Any, params: Any,
                       extra: Any) -> tuple[int]:
        self._stream = s
        return super().cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra)


def use_timed(holder: list[FakeDriver], exe: GpuExecutable, monkeypatch: Any
              ) -> TimedFakeDriver:
    """Like `use`, with a `TimedFakeDriver`."""
    from xlc.backend_gpu import cuda

    drv = TimedFakeDriver(exe)
    holder.append(drv)
    monkeypatch.setattr(cuda, "_driver", drv)
    monkeypatch.setattr(cuda, "_context", None)
    return drv
