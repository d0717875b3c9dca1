"""`xlc.DeviceArray`: a dense, C-contiguous array in GPU memory that results can stay in.

Design:
* holds a device address, shape, numpy dtype and either owns its allocation (freed with
  cuMemFree when garbage-collected) or keeps an owning `base` alive (a view into an output
  block, like numpy's `base`);
* `__cuda_array_interface__` (version 3) so CuPy / Numba / PyTorch can wrap it without a copy;
* DLPack: `__dlpack_device__()` -> (kDLCUDA = 2, 0) and `__dlpack__()` -> a "dltensor"
  PyCapsule (DLManagedTensor built with ctypes; the capsule keeps the array alive until the
  consumer calls the deleter), so `torch.from_dlpack(x)` / `cupy.from_dlpack(x)` work;
* results of asynchronous calls carry `ready`, the stream (and optionally an event) of the
  call that computes them: `block_until_ready()` waits for it, and `to_numpy()`,
  `__cuda_array_interface__` and `__dlpack__` wait first; a call that reads the array on
  another stream makes that stream wait for the event;
* an array donated to a call (its buffer became the call's result) is deleted: every use
  raises `XlcError`, as in JAX;
* `to_numpy()` copies back to the host; `DeviceArray.from_numpy(np_array)` uploads;
* `as_device_array(x)` wraps any C-contiguous object with `__cuda_array_interface__` (CuPy,
  PyTorch, Numba arrays) without a copy, so they can be passed as arguments.
Creating or copying needs cuda-python and a GPU (imported lazily); describing does not.
"""
from __future__ import annotations

import ctypes
import logging
from typing import Any

import numpy as np

log = logging.getLogger("xlc.backend_gpu")

K_DL_CUDA = 2
_DL_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", _DELETER)]

_alive: dict[int, tuple[Any, ...]] = {}
"""Exported DLManagedTensors (by address) and what they keep alive until their deleter."""


@_DELETER
def _dl_deleter(ptr: Any) -> None:
    _alive.pop(ctypes.addressof(ptr.contents), None)


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def dlpack_dtype(dtype: np.dtype) -> DLDataType:
    """The DLPack data type of a numpy dtype (bool is kDLBool, 8 bits)."""
    dt = np.dtype(dtype)
    if dt.name == "bfloat16":
        return DLDataType(4, 16, 1)
    code = _DL_CODES.get(dt.kind)
    if code is None:
        raise TypeError(f"dtype {dt} has no DLPack equivalent")
    return DLDataType(code, dt.itemsize * 8, 1)


class DeviceArray:
    """A C-contiguous array in device memory (see the module docstring)."""

    __slots__ = ("ptr", "shape", "dtype", "owner", "base", "device_id", "ready", "deleted",
                 "__weakref__")

    xlc_device_array = True
    """Marks the class for argument conversion (`frontend.arguments`), which must not read
    `__cuda_array_interface__` (it waits for the array)."""

    def __init__(self, ptr: int, shape: tuple[int, ...], dtype: np.dtype, owner: bool = False,
                 base: Any = None, device_id: int = 0, ready: tuple[Any, Any] | None = None):
        self.ptr = int(ptr)
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.owner = owner
        self.base = base
        self.device_id = device_id
        self.ready = ready
        """(stream, event or None) of the call computing this array while it may be pending:
        with an event, the array is ready when the event is; with None, when all work queued
        on the stream before now is done."""
        self.deleted: str | None = None
        """Why the array can no longer be used (donated to a call), or None."""

    @classmethod
    def wrap(cls, ptr: int, shape: tuple[int, ...], dtype: np.dtype, owner: bool,
             base: Any = None, ready: tuple[Any, Any] | None = None) -> DeviceArray:
        """The constructor without conversions, for values already of the right types (an
        int, a tuple of ints, a numpy dtype): the runtime makes results with it."""
        self = object.__new__(cls)
        self.ptr, self.shape, self.dtype, self.owner, self.base = ptr, shape, dtype, owner, base
        self.device_id, self.ready, self.deleted = 0, ready, None
        return self

    def check_alive(self) -> None:
        """XlcError when the array was deleted (donated to a call)."""
        if self.deleted is not None:
            from xlc.errors import XlcError

            raise XlcError(f"DeviceArray{list(self.shape)} {self.dtype} was deleted: "
                           f"{self.deleted}")

    def donate(self, why: str) -> None:
        """Give up this array's buffer (it became a call's result): the array is deleted and
        no longer frees the memory."""
        self.ptr, self.owner, self.base, self.ready, self.deleted = 0, False, None, None, why

    @staticmethod
    def from_numpy(array: Any) -> DeviceArray:
        """Copy a numpy array (or anything `np.asarray` accepts) to a new DeviceArray on
        device 0. XlcError("no CUDA device available: ...") without a GPU."""
        from xlc.backend_gpu.cuda import to_device

        return to_device(np.asarray(array))

    @property
    def size(self) -> int:
        """Number of elements."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        """Size in bytes."""
        return self.size * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        if self.deleted is not None:
            return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, deleted)"
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, ptr=0x{self.ptr:x})"

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CUDA Array Interface v3 (C-contiguous: strides None; the array is computed before
        this returns, so consumers need no stream)."""
        self.block_until_ready()
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "version": 3, "strides": None, "stream": None}

    def __dlpack_device__(self) -> tuple[int, int]:
        return (K_DL_CUDA, self.device_id)

    def __dlpack__(self, stream: Any = None, **_kw: Any) -> Any:
        """A 'dltensor' PyCapsule sharing this memory (the array stays alive meanwhile;
        computed before this returns)."""
        self.block_until_ready()
        shape = (ctypes.c_int64 * max(1, self.ndim))(*self.shape)
        mt = DLManagedTensor()
        mt.dl_tensor = DLTensor(ctypes.c_void_p(self.ptr), DLDevice(K_DL_CUDA, self.device_id),
                                self.ndim, dlpack_dtype(self.dtype),
                                ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
                                None, 0)
        mt.manager_ctx = None
        mt.deleter = _dl_deleter
        addr = ctypes.addressof(mt)
        _alive[addr] = (mt, shape, self)
        return _capsule_new(addr, b"dltensor", None)

    def block_until_ready(self) -> DeviceArray:
        """Wait until the call computing the array has finished; returns the array. XlcError
        for a deleted (donated) array."""
        self.check_alive()
        ready = self.ready
        if ready is not None:
            from xlc.backend_gpu.cuda import check, driver, primary_context

            primary_context()
            if ready[1] is None:   # its stream (and whatever was queued after it)
                check(driver().cuStreamSynchronize(ready[0]), "cuStreamSynchronize")
            else:
                check(driver().cuEventSynchronize(ready[1]), "cuEventSynchronize")
            self.ready = None
        return self

    def to_numpy(self) -> np.ndarray:
        """Copy to a new host array (waits for the array, then copies synchronously)."""
        from xlc.backend_gpu.cuda import check, driver, primary_context

        self.block_until_ready()
        primary_context()
        out = np.empty(self.shape, dtype=self.dtype)
        if self.nbytes:
            check(driver().cuMemcpyDtoH(out.ctypes.data, self.ptr, self.nbytes),
                  "cuMemcpyDtoH")
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self.to_numpy()
        return arr if dtype is None else arr.astype(dtype)

    def __del__(self) -> None:
        if self.owner and self.ptr:
            try:
                from xlc.backend_gpu.cuda import device_free

                device_free(self.ptr)
            except Exception:  # pragma: no cover - interpreter shutdown
                pass
            self.ptr = 0


def as_device_array(x: Any) -> DeviceArray | None:
    """`x` as a DeviceArray: itself, a zero-copy view of an object exposing a C-contiguous
    `__cuda_array_interface__` (kept alive as the view's `base`), or None for anything else
    (host data). TypeError for a strided (non C-contiguous) device array."""
    if isinstance(x, DeviceArray):
        return x
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is None:
        return None
    shape = tuple(int(d) for d in cai["shape"])
    dtype = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    if strides is not None:
        expect, step = [], dtype.itemsize
        for d in reversed(shape):
            expect.append(step)
            step *= d
        if tuple(strides) != tuple(reversed(expect)) and 0 not in shape:
            raise TypeError(f"device array of shape {shape} is not C-contiguous (strides "
                            f"{tuple(strides)}); make a contiguous copy first")
    return DeviceArray(int(cai["data"][0]), shape, dtype, owner=False, base=x)
