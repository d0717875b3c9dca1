"""GpuExecutable: the compiled program (optimized module, buffer assignment, PTX, thunks).

`run(flat_args) -> list[np.ndarray]` needs an NVIDIA GPU and cuda-python: the first call
creates the `GpuRuntime` (runtime.py, over the driver bootstrap of cuda.py), which loads the
module (cubin when present, else PTX), allocates one device block per BufferAllocation (temp
reused across calls) and uploads the constants. Without a GPU or cuda-python, `run` raises
XlcError("no CUDA device available: ..."); everything else (PTX, thunks, `to_dict`) works anywhere.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from xlc.backend_gpu.streams import StreamPlan
from xlc.backend_gpu.thunks import SequentialThunk, Thunk
from xlc.errors import ArgumentError
from xlc.hlo.shape import Shape, physical_order
from xlc.passes.allocation import BufferAllocation, Slice
from xlc.passes.optimize import OptimizedModule

if TYPE_CHECKING:
    from xlc.backend_gpu.compiler import GpuCompileResult
    from xlc.backend_gpu.runtime import GpuProgram, GpuRuntime

log = logging.getLogger("xlc.backend_gpu")


@dataclass(frozen=True)
class OutputInfo:
    """Flat output leaf: where it lives, its dtype, logical dims and physical transpose."""

    slice: Slice
    dtype: str
    dims: tuple[int, ...]
    physical_perm: tuple[int, ...] | None

    def to_dict(self) -> dict[str, Any]:
        return {"slice": self.slice.to_json(), "dtype": self.dtype, "dims": list(self.dims),
                "physical_perm": _perm_list(self.physical_perm)}

    @staticmethod
    def from_dict(d: dict[str, Any], allocations: Sequence[BufferAllocation]) -> OutputInfo:
        """Inverse of `to_dict`, the slice resolved in `allocations`."""
        return OutputInfo(Slice.from_json(d["slice"], allocations), str(d["dtype"]),
                          tuple(int(x) for x in d["dims"]), _perm_tuple(d["physical_perm"]))


@dataclass(frozen=True)
class ParameterInfo:
    """Entry parameter: its allocation, dtype, dims and physical transpose."""

    number: int
    allocation: int
    dtype: str
    dims: tuple[int, ...]
    physical_perm: tuple[int, ...] | None

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "allocation": self.allocation, "dtype": self.dtype,
                "dims": list(self.dims), "physical_perm": _perm_list(self.physical_perm)}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> ParameterInfo:
        """Inverse of `to_dict`."""
        return ParameterInfo(int(d["number"]), int(d["allocation"]), str(d["dtype"]),
                             tuple(int(x) for x in d["dims"]), _perm_tuple(d["physical_perm"]))


def _perm_list(perm: tuple[int, ...] | None) -> list[int] | None:
    return None if perm is None else list(perm)


def _perm_tuple(perm: list[int] | None) -> tuple[int, ...] | None:
    return None if perm is None else tuple(int(x) for x in perm)


def physical_perm(shape: Shape) -> tuple[int, ...] | None:
    """The transpose taking a logical array to physical order (None for row-major)."""
    order = tuple(physical_order(shape))
    return None if order == tuple(range(shape.rank)) else order


class GpuExecutable:
    """A compiled module for one GPU architecture (`sm`)."""

    def __init__(self, optimized: OptimizedModule, plan: StreamPlan,
                 result: GpuCompileResult, sm: int = 80,
                 timings: dict[str, float] | None = None,
                 tables: tuple[list[BufferAllocation], list[ParameterInfo], list[OutputInfo]]
                 | None = None, graphs: bool = False, profile: bool = False):
        """`tables` (allocations, parameters, outputs) are derived from the buffer assignment
        unless given (an executable loaded from an artifact passes the stored ones); `graphs`
        is the default of `run`'s `graph` argument; `profile` makes every run record CUDA
        events per thunk (`xlc.backend_gpu.profile`; graphs are off then)."""
        module = optimized.module
        assert module.entry is not None and module.entry.root is not None
        self.optimized = optimized
        self.module = module
        self.assignment = optimized.assignment
        self.plan = plan
        self.ptx = result.ptx
        self.llvm_ir = result.llvm_ir
        self.cubin = result.cubin
        self.ptx_version = result.ptx_version
        self.kernel_names = list(result.kernel_names)
        self.ffi_modules = dict(result.ffi_modules)
        self.constants = dict(result.constants)
        self.sm = sm
        self.graphs = graphs
        self.profile = profile
        self.timings = timings or {}
        self._program: GpuProgram | None = None
        self._local = threading.local()   # .runtime: this thread's GpuRuntime
        self._lock = threading.Lock()
        allocations, parameters, outputs = _tables(optimized) if tables is None else tables
        self.allocations: list[BufferAllocation] = list(allocations)
        self.parameters: list[ParameterInfo] = list(parameters)
        self.outputs: list[OutputInfo] = list(outputs)

    @property
    def thunks(self) -> SequentialThunk:
        """The entry thunk sequence (streams and events assigned)."""
        return self.plan.thunks

    def all_thunks(self) -> list[Thunk]:
        """Every thunk, nested ones included, pre-order."""
        return list(self.plan.thunks.walk())

    def memory_stats(self) -> dict[str, int]:
        """Parameter / output / temp / constant / alias / peak bytes."""
        return self.optimized.memory_stats()

    def to_dict(self, code: bool = True) -> dict[str, Any]:
        """Everything but the HLO module, as plain data; without `code`, the PTX, cubin and
        constant bytes are left out (the artifact stores them as members of their own)."""
        d: dict[str, Any] = {
            "sm": self.sm, "ptx_version": self.ptx_version, "graphs": self.graphs,
            "kernels": self.kernel_names, "ffi_modules": self.ffi_modules,
            "allocations": [a.to_json() for a in self.allocations],
            "parameters": [p.to_dict() for p in self.parameters],
            "outputs": [o.to_dict() for o in self.outputs],
            "thunks": self.plan.thunks.to_dict(), "streams": self.plan.to_dict()}
        if code:
            d["ptx"] = self.ptx
            d["constants"] = {str(k): v.hex() for k, v in self.constants.items()}
        return d

    # ---- running ----------------------------------------------------------------------
    def runtime(self) -> GpuRuntime:
        """The calling thread's device-side state, created on its first use; the loaded code
        is shared by all threads (raises XlcError without a GPU)."""
        rt = getattr(self._local, "runtime", None)
        if rt is None:
            from xlc.backend_gpu.runtime import GpuProgram, GpuRuntime

            with self._lock:
                if self._program is None:
                    self._program = GpuProgram(self)
                program = self._program
            rt = self._local.runtime = GpuRuntime(self, program)
        return rt

    def check_args(self, flat_args: list[Any]) -> None:
        """ArgumentError unless there is one argument per parameter with the right dims."""
        if len(flat_args) != len(self.parameters):
            raise ArgumentError(f"{self.module.name}: expected {len(self.parameters)} "
                                f"arguments, got {len(flat_args)}")
        for p, a in zip(self.parameters, flat_args):
            shape = tuple(a.shape) if hasattr(a, "shape") else tuple(np.shape(a))
            if shape != p.dims:
                raise ArgumentError(f"{self.module.name}: argument {p.number} has shape "
                                    f"{shape}, expected {p.dims}")

    def run(self, flat_args: list[Any], graph: bool | None = None) -> list[np.ndarray]:
        """Run once on the GPU; returns the flat outputs as numpy arrays. Arguments are numpy
        arrays (copied to the device) or device arrays (`DeviceArray` or anything with
        `__cuda_array_interface__`, C-contiguous; used in place). With `graph` (default: the
        `gpu_graphs` option) the schedule is captured once as a CUDA graph and replayed."""
        self.check_args(flat_args)
        return self.runtime().run(flat_args, graph=self.graphs if graph is None else graph)

    def run_on_device(self, flat_args: list[Any], graph: bool | None = None,
                      donate: bool = False) -> list[Any]:
        """Like `run` but the outputs stay on the GPU as DeviceArrays, returned as soon as
        the work is queued (asynchronous dispatch: `block_until_ready()` or `to_numpy()`
        wait). With `donate`, a donated (io-aliased) parameter whose argument is an owning
        DeviceArray takes that array's buffer, and the array is deleted (as JAX's donation);
        without it, or for other arguments, the argument is copied."""
        self.check_args(flat_args)
        return self.runtime().run(flat_args, graph=self.graphs if graph is None else graph,
                                  to_host=False, donate=donate)


def _tables(optimized: OptimizedModule
            ) -> tuple[list[BufferAllocation], list[ParameterInfo], list[OutputInfo]]:
    """The runtime's tables of a compiled module: allocations, parameters, outputs."""
    module, assignment = optimized.module, optimized.assignment
    assert module.entry is not None and module.entry.root is not None
    allocations = list(assignment.allocations)
    parameters = []
    for p in module.entry.parameters:
        sl = assignment.slice_of(p, ())
        parameters.append(ParameterInfo(p.parameter_number, sl.index, str(p.shape.dtype),
                                        tuple(p.shape.dims), physical_perm(p.shape)))
    root = module.entry.root
    outputs = []
    for index, shape in root.shape.leaves():
        sl = assignment.slice_of(root, index)
        outputs.append(OutputInfo(Slice(sl.allocation, sl.offset, shape.byte_size()),
                                  str(shape.dtype), tuple(shape.dims), physical_perm(shape)))
    return allocations, parameters, outputs
