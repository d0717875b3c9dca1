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
from xlc.errors import XlcError

log = logging.getLogger("xlc.backend_gpu")

Driver = Any
"""cuda-python's driver module (`cuda.bindings.driver`): untyped, so handles are `Any`."""

_driver: Driver = None
_lock = threading.RLock()
_context: Any = None
_compute_capability = 0


def driver() -> Driver:
    """The cuda-python driver module (`cuda.bindings.driver`, or the older `cuda.cuda`).

    Raises XlcError("no CUDA device available: cuda-python is not installed ...")."""
    global _driver
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
    drv = driver()
    if not isinstance(ret, tuple):
        ret = (ret,)
    err, rest = ret[0], ret[1:]
    if err != drv.CUresult.CUDA_SUCCESS:
        name = drv.cuGetErrorName(err)
        text = name[1].decode() if isinstance(name, tuple) and len(name) > 1 and \
            isinstance(name[1], bytes) else str(err)
        raise XlcError(f"CUDA error in {what}: {text}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


def primary_context() -> Any:
    """Initialise the driver and make device 0's primary context current (once).

    Raises XlcError("no CUDA device available: ...") without a usable device (no driver
    library, no device, or a driver that fails to initialise)."""
    global _context, _compute_capability
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
            log.info("CUDA device 0: sm_%d", _compute_capability)
        check(drv.cuCtxSetCurrent(_context), "cuCtxSetCurrent")
        return _context


def compute_capability() -> int:
    """The compute capability of device 0 as one number (sm_90 -> 90); XlcError without a
    device."""
    primary_context()
    return _compute_capability


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
    """cuMemAlloc (at least 1 byte); returns the device address."""
    primary_context()
    return int(check(driver().cuMemAlloc(max(1, nbytes)), "cuMemAlloc"))


def device_free(ptr: int) -> None:
    """cuMemFree (errors at interpreter shutdown are ignored)."""
    try:
        driver().cuMemFree(ptr)
    except Exception:  # pragma: no cover - shutdown order
        pass


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
    """Copy a numpy array to a new DeviceArray (synchronously)."""
    primary_context()
    a = np.array(arr, order="C", copy=True)  # keeps 0-d shapes (ascontiguousarray would not)
    ptr = device_alloc(a.nbytes)
    check(driver().cuMemcpyHtoD(ptr, a.ctypes.data, a.nbytes), "cuMemcpyHtoD")
    # a pageable upload may return before its DMA finished, and our streams are non-blocking
    # (no implicit ordering with the legacy stream): wait for it here
    check(driver().cuCtxSynchronize(), "cuCtxSynchronize")
    return DeviceArray(ptr, a.shape, a.dtype, owner=True)
