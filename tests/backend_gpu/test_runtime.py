"""The runtime without a GPU: compiling works, running raises a clear XlcError; DeviceArray's
interchange protocols are well-formed (checked on a fake address, nothing is dereferenced)."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from tests.backend_gpu.helpers import compile_text
from xlc.backend_gpu import runtime
from xlc.backend_gpu.device_array import DeviceArray, dlpack_dtype
from xlc.errors import ArgumentError, XlcError


def _has_gpu() -> bool:
    try:
        runtime.primary_context()
    except XlcError:
        return False
    return True


HAS_GPU = _has_gpu()
SIMPLE = """
HloModule m
ENTRY e {
  a = f32[4] parameter(0)
  ROOT r = f32[4] negate(a)
}
"""


@pytest.mark.skipif(HAS_GPU, reason="a GPU is available here")
def test_running_without_a_gpu_raises_a_clear_error() -> None:
    exe = compile_text(SIMPLE)
    assert exe.ptx  # compiling needs no GPU
    with pytest.raises(XlcError, match=r"^no CUDA device available: "):
        exe.run([np.ones(4, np.float32)])


def test_wrong_arguments_are_rejected_before_touching_the_device() -> None:
    exe = compile_text(SIMPLE)
    with pytest.raises(ArgumentError, match=r"expected 1 arguments, got 2"):
        exe.run([np.ones(4, np.float32)] * 2)
    with pytest.raises(ArgumentError, match=r"argument 0 has shape \(5,\), expected \(4,\)"):
        exe.run([np.ones(5, np.float32)])


def test_cuda_array_interface() -> None:
    x = DeviceArray(0x7F0000001000, (3, 4), np.float32)
    cai = x.__cuda_array_interface__
    assert cai == {"shape": (3, 4), "typestr": "<f4", "data": (0x7F0000001000, False),
                   "version": 3, "strides": None, "stream": None}
    assert x.nbytes == 48 and x.size == 12 and x.ndim == 2


def test_dlpack_capsule() -> None:
    x = DeviceArray(0x7F0000002000, (2, 5), np.int16)
    assert x.__dlpack_device__() == (2, 0)
    cap = x.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_IsValid
    get.restype, get.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
    assert get(cap, b"dltensor") == 1
    d = dlpack_dtype(np.dtype(np.int16))
    assert (d.code, d.bits, d.lanes) == (0, 16, 1)
    d = dlpack_dtype(np.dtype(np.bool_))
    assert (d.code, d.bits) == (6, 8)


def test_executable_description_is_plain_data() -> None:
    exe = compile_text(SIMPLE)
    d = exe.to_dict()
    assert d["sm"] == 80 and d["kernels"] == exe.kernel_names
    assert [o["dims"] for o in d["outputs"]] == [[4]]
    assert {a["kind"] for a in d["allocations"]} >= {"parameter", "output"}


def test_runtime_reexports_the_driver_bootstrap() -> None:
    """cuda.py owns the driver bootstrap; runtime.py re-exports its public names for callers
    that import them from there (tools/bench_gpu.py, older tests)."""
    from xlc.backend_gpu import cuda

    for name in ("check", "compute_capability", "device_alloc", "device_free", "driver",
                 "primary_context", "select_image", "to_device"):
        assert getattr(runtime, name) is getattr(cuda, name), name
