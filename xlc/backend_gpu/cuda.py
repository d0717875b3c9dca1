"""The CUDA driver bootstrap: cuda-python imported lazily, device 0's primary context, error
checking of driver calls, module loading, and device memory helpers.

cuda-python is imported on first use (`driver()`), so CPU users never need it. Without it, or
without a CUDA device, the entry points raise XlcError("no CUDA device available: <why>").
The executor that runs a thunk schedule on top of this is `runtime.GpuRuntime`.

Tests replace the driver by assigning `_driver` (and resetting `_context` to None), e.g. with
the host-memory fake of tests/backend_gpu/fake_driver.py.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlc.backend_gpu.device_array import DeviceArray
from xlc.backend_gpu.memory_pool import DevicePool, HostPool
from xlc.errors import XlcError

log = logging.getLogger("xlc.backend_gpu")

Driver = Any
"""cuda-python's driver module (`cuda.bindings.driver`): untyped, so handles are `Any`."""

_driver: Driver = None
_lock = threading.RLock()
_context: Any = None
_compute_capability = 0
_generation = 0
"""Counts the contexts made current so far: per-thread state of an older one is stale."""
_pools: tuple[DevicePool, HostPool] | None = None
_tls = threading.local()
"""Per thread: `generation` whose context is current on this thread, and `stream`."""


def driver() -> Driver:
    """The cuda-python driver module (`cuda.bindings.driver`, or the older `cuda.cuda`).

    Raises XlcError("no CUDA device available: cuda-python is not installed ...")."""
    global _driver
    current = _driver
    if current is not None:
        return current
    with _lock:
        if _driver is None:
            try:
                # cuda-python ships no type information
                from cuda.bindings import driver as drv  # type: ignore[import-not-found]
            except ImportError:
                try:
                    # the pre-12.6 module name; untyped as well
                    from cuda import cuda as drv  # type: ignore[import-not-found,no-redef]
                except ImportError:
                    raise XlcError("no CUDA device available: cuda-python is not installed "
                                   "(pip install cuda-python)") from None
            _driver = drv
        return _driver


def check(ret: Any, what: str) -> Any:
    """Unpack a driver call's (CUresult, values...) tuple: None without values, the value
    when there is one, else the tuple of values. XlcError("CUDA error in <what>: <name>")
    when the result is not CUDA_SUCCESS."""
    if not isinstance(ret, tuple):
        ret = (ret,)
    err, rest = ret[0], ret[1:]
    drv = _driver if _driver is not None else driver()
    if err != drv.CUresult.CUDA_SUCCESS:
        name = drv.cuGetErrorName(err)
        text = name[1].decode() if isinstance(name, tuple) and len(name) > 1 and \
            isinstance(name[1], bytes) else str(err)
        raise XlcError(f"CUDA error in {what}: {text}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


def primary_context() -> Any:
    """Initialise the driver and make device 0's primary context current on this thread
    (once per thread: later calls cost no driver call).

    Raises XlcError("no CUDA device available: ...") without a usable device (no driver
    library, no device, or a driver that fails to initialise)."""
    global _context, _compute_capability, _generation, _pools
    ctx = _context
    if ctx is not None and getattr(_tls, "generation", -1) == _generation:
        return ctx
    with _lock:
        drv = driver()
        if _context is None:
            try:
                check(drv.cuInit(0), "cuInit")
                count = check(drv.cuDeviceGetCount(), "cuDeviceGetCount")
            except XlcError as e:
                raise XlcError(f"no CUDA device available: {e}") from None
            except Exception as e:  # cuda-python raises when libcuda cannot be loaded
                raise XlcError(f"no CUDA device available: the NVIDIA driver library could not "
                               f"be loaded ({e})") from None
            if not count:
                raise XlcError("no CUDA device available: the driver reports 0 devices")
            dev = check(drv.cuDeviceGet(0), "cuDeviceGet")
            attr = drv.CUdevice_attribute
            major = check(drv.cuDeviceGetAttribute(
                attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute")
            minor = check(drv.cuDeviceGetAttribute(
                attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute")
            _context = check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
            _compute_capability = 10 * int(major) + int(minor)
            _generation += 1
            _pools = (DevicePool(device_alloc, _driver_free, _synchronize),
                      HostPool(host_alloc, host_free, _synchronize))
            log.info("CUDA device 0: sm_%d", _compute_capability)
        check(drv.cuCtxSetCurrent(_context), "cuCtxSetCurrent")
        _tls.generation = _generation
        _tls.stream = None
        return _context


def thread_stream() -> Any:
    """This thread's main stream (non-blocking, created on first use): every executable
    called from this thread issues its work there, so a result one call returns and the next
    reads need no event between them, and blocks go back to the memory pool in stream
    order."""
    primary_context()
    stream = getattr(_tls, "stream", None)
    if stream is None:
        drv = driver()
        flags = drv.CUstream_flags.CU_STREAM_NON_BLOCKING
        stream = _tls.stream = check(drv.cuStreamCreate(flags), "cuStreamCreate")
    return stream


def device_pools() -> tuple[DevicePool, HostPool]:
    """The current context's device memory pool and pinned host pool (memory_pool.py)."""
    primary_context()
    assert _pools is not None
    return _pools


def _synchronize() -> None:
    check(driver().cuCtxSynchronize(), "cuCtxSynchronize")


def _driver_free(ptr: int) -> None:
    """cuMemFree (errors at interpreter shutdown are ignored); `device_free` is the public
    release, which gives pooled blocks back to their pool instead."""
    try:
        driver().cuMemFree(ptr)
    except Exception:  # pragma: no cover - shutdown order
        pass


def compute_capability() -> int:
    """The compute capability of device 0 as one number (sm_90 -> 90); XlcError without a
    device."""
    primary_context()
    return _compute_capability


_probe: tuple[Any, int | None] | None = None
"""(driver module at the time, its device's architecture or None) of the last `device_sm`."""


def device_sm() -> int | None:
    """The compute capability of device 0 as one number (sm_90 -> 90), or None when no GPU is
    usable (no cuda-python, no driver, no device). The answer is kept until the driver module
    changes (tests install fakes)."""
    global _probe
    probe = _probe
    if probe is not None and probe[0] is _driver:
        return probe[1]
    try:
        sm: int | None = compute_capability()
    except XlcError as e:
        log.info("no usable GPU: %s", e)
        sm = None
    _probe = (_driver, sm)
    return sm


def select_image(sm: int, device_cc: int, cubin: bytes | None, ptx: str) -> tuple[str, bytes]:
    """("cubin" | "ptx", image bytes) to load code compiled for `sm_<sm>` on a device of
    compute capability `device_cc`: the cubin when binary compatible (same major version,
    device minor not older), else the PTX (NUL-terminated) when the device is at least as new
    as the target. XlcError when the device is older than the code's target."""
    if cubin and device_cc // 10 == sm // 10 and device_cc % 10 >= sm % 10:
        return "cubin", cubin
    if device_cc >= sm:
        if cubin:
            log.info("the cubin for sm_%d does not run on sm_%d: JIT-compiling the PTX", sm,
                     device_cc)
        return "ptx", ptx.encode() + b"\0"
    raise XlcError(f"this GPU (sm_{device_cc}) is older than the code's target sm_{sm}; "
                   f"recompile with gpu_sm={device_cc} (XLC_FLAGS=--gpu-sm={device_cc})")


@dataclass
class LoadedModule:
    """A CUmodule, its kernels (CUfunction by name) and the image buffer it was loaded from
    (kept alive as long as the module)."""

    module: Any
    functions: dict[str, Any]
    image: np.ndarray


def load_module(image: bytes, kernel_names: Sequence[str]) -> LoadedModule:
    """cuModuleLoadData of `image` (a cubin, or NUL-terminated PTX the driver JIT-compiles)
    in the primary context, then cuModuleGetFunction for each of `kernel_names`. XlcError
    naming the call that failed."""
    drv = driver()
    primary_context()
    buf = np.frombuffer(image, dtype=np.uint8).copy()
    module = check(drv.cuModuleLoadData(buf.ctypes.data), "cuModuleLoadData")
    functions = {name: check(drv.cuModuleGetFunction(module, name.encode()),
                             f"cuModuleGetFunction({name})")
                 for name in kernel_names}
    return LoadedModule(module, functions, buf)


def device_alloc(nbytes: int) -> int:
    """cuMemAlloc (at least 1 byte); returns the device address. Blocks that live as long
    as an executable's state; per-call memory comes from `device_pools()`."""
    primary_context()
    return int(check(driver().cuMemAlloc(max(1, nbytes)), "cuMemAlloc"))


def device_free(ptr: int) -> None:
    """Release device block `ptr`: back to the memory pool when the pool handed it out, else
    cuMemFree (errors at interpreter shutdown are ignored)."""
    pools = _pools
    if pools is not None and pools[0].give(ptr):
        return
    _driver_free(ptr)


def host_alloc(nbytes: int) -> int:
    """cuMemHostAlloc (at least 1 byte, default flags: page-locked, portable to no other
    context, not mapped into the device's address space: only copies reach it); returns the
    host address. Used for allocations in host memory `S(5)` (host offload)."""
    primary_context()
    return int(check(driver().cuMemHostAlloc(max(1, nbytes), 0), "cuMemHostAlloc"))


def host_free(ptr: int) -> None:
    """cuMemFreeHost (errors at interpreter shutdown are ignored)."""
    try:
        driver().cuMemFreeHost(ptr)
    except Exception:  # pragma: no cover - shutdown order
        pass


def to_device(arr: np.ndarray) -> DeviceArray:
    """Copy a numpy array to a new DeviceArray (a pooled block of this thread's stream;
    synchronously: the copy has finished when this returns)."""
    a = np.array(arr, order="C", copy=True)  # keeps 0-d shapes (ascontiguousarray would not)
    stream = thread_stream()
    ptr = device_pools()[0].take(a.nbytes, stream)
    drv = driver()
    if a.nbytes:
        check(drv.cuMemcpyHtoDAsync(ptr, a.ctypes.data, a.nbytes, stream), "cuMemcpyHtoDAsync")
    # a pageable upload may return before its DMA finished
    check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize")
    return DeviceArray(ptr, a.shape, a.dtype, owner=True)
