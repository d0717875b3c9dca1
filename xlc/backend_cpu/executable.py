"""CpuExecutable: runs the JIT-compiled entry `void entry(ptr buffer_table)`.

Per allocation of the BufferAssignment one table slot:
* temp and thread-local allocations: one 64-byte-aligned block allocated once and reused by
  every call (so calls are serialised by a lock);
* entry parameters: the caller's array itself (no copy when it is C-contiguous with the right
  dtype and the parameter has the default layout);
* donated parameters (io-aliased, `donate_argnums`): donation is honoured - the caller's
  array becomes the aliased output's storage (its contents are overwritten, and the returned
  output shares its memory; as in JAX, a donated argument must not be used afterwards) when it
  can be written in place: a writeable, C-contiguous, 64-byte-aligned array of the exact dtype
  and shape (every array xlc returns qualifies, so `state = step(state)` loops run without
  allocating) that overlaps no other argument. Otherwise it is copied into a fresh block
  first, like a parameter that is itself live-out;
* outputs: a fresh 64-byte-aligned block per call; the returned arrays are views of it.
  Blocks of `output_pool.MIN_BYTES` and more come from the process's `OutputPool`, which
  takes them back when the returned arrays die, so steady-state calls do not page-fault on
  fresh output memory;
* constants: LLVM globals (slot unused).
All of this is precomputed at construction; a call only fills the parameter and output slots.
"""
from __future__ import annotations

import ctypes
import logging
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlc.backend_cpu.backend import CPU_ALIGNMENT
from xlc.backend_cpu.host_call import raise_pending
from xlc.backend_cpu.output_pool import MIN_BYTES, OUTPUT_POOL
from xlc.errors import ArgumentError, ArtifactError
from xlc.hlo.ir import HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Shape, ShapeIndex, physical_order
from xlc.passes.buffer_assignment import BufferAssignment

log = logging.getLogger("xlc.backend_cpu")

ALIGN = CPU_ALIGNMENT  # block bases keep the slices' alignment
_ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # void entry(ptr buffer_table)


_from_address = ctypes.c_void_p.from_address
_BYTE = np.dtype(np.uint8)


def _probe_data_offset() -> bool:
    """Whether the data pointer of a numpy array can be read at `id(arr) + 16` (CPython's
    PyArrayObject layout), which is ~6x cheaper than `arr.ctypes.data`."""
    probe = np.empty(3, dtype=np.float64)
    try:
        return _from_address(id(probe) + 16).value == probe.ctypes.data
    except (ValueError, OSError):  # pragma: no cover - exotic interpreters
        return False


_FAST_DATA = _probe_data_offset()


def data_address(arr: np.ndarray) -> int:
    """The address of `arr`'s first element."""
    if _FAST_DATA:
        return _from_address(id(arr) + 16).value or 0
    return arr.ctypes.data  # pragma: no cover


def aligned_empty(nbytes: int) -> np.ndarray:
    """An uninitialised uint8 array of `nbytes` whose data is 64-byte aligned."""
    raw = np.empty(nbytes + ALIGN, dtype=np.uint8)
    off = (-data_address(raw)) % ALIGN
    return raw[off:off + nbytes]


def _physical_perm(shape: Shape) -> list[int] | None:
    """The transpose taking a logical array to physical (major-to-minor) order, or None when
    the layout is the default row-major one."""
    order = physical_order(shape)
    return None if order == list(range(shape.rank)) else order


@dataclass
class _Param:
    slot: int
    number: int
    dtype: np.dtype
    dims: tuple[int, ...]
    perm: list[int] | None
    live_out: bool
    """The parameter's allocation is (part of) an output: it must not stay the caller's array
    unless donated in place."""
    donated: bool
    """io-aliased (`donate_argnums`): the caller's array may become the output's storage."""
    needs_prepare: bool = False
    strides: tuple[int, ...] = ()
    """The C-contiguous strides of `dims`: an argument with other strides (or shape) goes
    through `_prepare`, which copies it when it is not contiguous."""

    def __post_init__(self) -> None:
        self.needs_prepare = self.perm is not None or self.live_out or self.donated
        step, strides = self.dtype.itemsize, []
        for d in reversed(self.dims):  # numpy's rule: zero dims do not multiply
            strides.append(step)
            step *= d or 1
        self.strides = tuple(reversed(strides))


@dataclass
class _Leaf:
    slot: int
    offset: int
    size: int
    dtype: np.dtype
    dims: tuple[int, ...]
    perm: list[int] | None
    kind: str


class CpuExecutable:
    """A compiled module. `run(flat_args)` -> flat list of output arrays (tuple leaves in
    order). Requires args in parameter order with the parameters' dims (dtype is converted)."""

    def __init__(self, module: HloModule, assignment: BufferAssignment, entry_name: str,
                 address: int, llvm_ir: str = "", optimized_ir: str = "",
                 timings: dict[str, float] | None = None, optimized: Any = None):
        assert module.entry is not None and module.entry.root is not None
        self.module = module
        self.assignment = assignment
        self.entry_name = entry_name
        self.llvm_ir = llvm_ir
        self.optimized_ir = optimized_ir
        self.timings = timings or {}
        if optimized is None:
            from xlc.passes.optimize import OptimizedModule

            optimized = OptimizedModule(module, assignment)
        self.optimized = optimized
        """The `xlc.passes.optimize.OptimizedModule` this executable runs (api protocol)."""
        self._fn = _ENTRY_TYPE(address)
        self._params_all = list(module.entry.parameters)
        self._lock = threading.Lock()
        allocs = assignment.allocations
        self._nslots = len(allocs)
        self._table_type = ctypes.c_void_p * max(1, self._nslots)
        self._template = self._table_type()
        self._persistent: list[np.ndarray] = []
        self._outputs: list[tuple[int, int]] = []
        self._params: list[_Param] = []
        params = module.entry.parameters
        for a in allocs:
            if a.is_entry_computation_parameter:
                p = params[a.parameter_number]
                self._params.append(_Param(a.index, a.parameter_number, p.shape.dtype,
                                           tuple(p.shape.dims), _physical_perm(p.shape),
                                           a.aliased_with_output or a.maybe_live_out,
                                           a.aliased_with_output))
            elif a.is_constant:
                continue
            elif a.maybe_live_out:
                self._outputs.append((a.index, a.size))
            else:
                buf = aligned_empty(a.size)
                self._persistent.append(buf)
                self._template[a.index] = data_address(buf)
        self._leaves: list[_Leaf] = []
        for index, shape in module.entry.root.shape.leaves():
            self._leaves.append(self._leaf(index, shape))
        self._nparams = len(params)
        # per parameter, what a call reads (a tuple: cheaper than dataclass attributes)
        # only programs with custom-calls can have a host call whose failure to report
        self._custom_calls = any(i.opcode is Opcode.CUSTOM_CALL for c in module.computations
                                 for i in c.instructions)
        self._param_checks = [(p.number, p.slot, p.needs_prepare, p.dtype, p.dims, p.strides,
                               p) for p in self._params]
        self._plan_outputs()
        self._table = self._template
        self._table_address = ctypes.addressof(self._table)

    def _plan_outputs(self) -> None:
        """Output allocations holding exactly one leaf at offset 0 (default layout) are
        allocated directly with the leaf's dtype; the others as byte blocks."""
        by_slot: dict[int, list[int]] = {}
        for i, leaf in enumerate(self._leaves):
            by_slot.setdefault(leaf.slot, []).append(i)
        self._fast_outputs: list[tuple] = []
        slow: list[tuple[int, int]] = []
        fast_slots = set()
        for slot, size in self._outputs:
            leaves = by_slot.get(slot, [])
            if len(leaves) == 1:
                leaf = self._leaves[leaves[0]]
                item = leaf.dtype.itemsize
                if leaf.offset == 0 and leaf.perm is None and size % item == 0 \
                        and leaf.size <= size:
                    count = max(size // item, leaf.size // item)
                    self._fast_outputs.append((slot, count, leaf.dtype, ALIGN // item,
                                               leaves[0], leaf.dims, count * item >= MIN_BYTES))
                    fast_slots.add(slot)
                    continue
            slow.append((slot, size))
        self._outputs = slow
        self._slow_leaves = [i for i, leaf in enumerate(self._leaves)
                             if leaf.slot not in fast_slots]

    def _leaf(self, index: ShapeIndex, shape: Shape) -> _Leaf:
        root = self.module.entry.root  # type: ignore[union-attr]
        assert root is not None
        sl = self.assignment.slice_of(root, index)
        a = sl.allocation
        return _Leaf(a.index, sl.offset, shape.byte_size(), shape.dtype, tuple(shape.dims),
                     _physical_perm(shape), a.kind)

    # ---- running ----------------------------------------------------------------------------
    def run(self, flat_args: list[np.ndarray]) -> list[np.ndarray]:
        """Run once; returns fresh output arrays (views of 64-byte-aligned blocks)."""
        if len(flat_args) != self._nparams:
            raise ArgumentError(f"{self.module.name}: expected {self._nparams} "
                                f"arguments, got {len(flat_args)}")
        keep = []
        blocks: dict[int, np.ndarray] = {}
        results: list[np.ndarray | None] = [None] * len(self._leaves)
        with self._lock:
            table = self._table
            for slot, count, dtype, pad, leaf_no, dims, pooled in self._fast_outputs:
                if pooled:
                    out, table[slot] = OUTPUT_POOL.array(count * dtype.itemsize, dtype, dims)
                    results[leaf_no] = out
                    continue
                raw = np.empty(count + pad, dtype=dtype)
                addr = data_address(raw)
                off = ((-addr) % ALIGN) // raw.itemsize
                table[slot] = addr + off * raw.itemsize
                results[leaf_no] = raw[off:off + count].reshape(dims)
            for slot, size in self._outputs:
                if size >= MIN_BYTES:
                    blocks[slot], table[slot] = OUTPUT_POOL.array(size, _BYTE, (size,))
                    continue
                raw = np.empty(size + ALIGN, dtype=np.uint8)
                addr = data_address(raw)
                off = (-addr) % ALIGN
                blocks[slot] = raw[off:off + size]
                table[slot] = addr + off
            for number, slot, prepare, dtype, dims, strides, p in self._param_checks:
                arr = flat_args[number]
                if prepare or type(arr) is not np.ndarray or arr.dtype != dtype \
                        or arr.shape != dims or arr.strides != strides:
                    arr = self._prepare(p, arr, blocks, flat_args)
                    keep.append(arr)
                table[slot] = data_address(arr)
            self._fn(self._table_address)
        if self._custom_calls:
            raise_pending()  # a host call (custom-call run in Python) that failed
        for i in self._slow_leaves:
            results[i] = self._output(self._leaves[i], blocks)
        return results  # type: ignore[return-value]

    def _prepare(self, p: _Param, arr: object, blocks: dict[int, np.ndarray],
                 flat_args: list[np.ndarray]) -> np.ndarray:
        if p.donated and p.perm is None and self._donatable(p, arr, flat_args):
            assert isinstance(arr, np.ndarray)
            blocks[p.slot] = arr.reshape(-1).view(np.uint8)
            return arr
        a = np.asarray(arr)
        if a.shape != p.dims:
            raise ArgumentError(f"{self.module.name}: argument {p.number} has shape "
                                f"{a.shape}, expected {p.dims}")
        if p.perm is not None:
            a = a.transpose(p.perm)
        if p.live_out:
            buf = aligned_empty(a.size * p.dtype.itemsize)
            np.copyto(buf.view(p.dtype).reshape(a.shape), a, casting="unsafe")
            blocks[p.slot] = buf
            return buf
        return np.ascontiguousarray(a, dtype=p.dtype)

    @staticmethod
    def _donatable(p: _Param, arr: object, flat_args: list[np.ndarray]) -> bool:
        """Whether donated argument `arr` can serve as its output's storage in place (see the
        module docstring)."""
        if type(arr) is not np.ndarray or arr.dtype != p.dtype or arr.shape != p.dims \
                or not arr.flags.c_contiguous or not arr.flags.writeable \
                or data_address(arr) % ALIGN or arr.nbytes == 0:
            return False
        return not any(other is not arr and isinstance(other, np.ndarray)
                       and np.may_share_memory(arr, other) or (other is arr and k != p.number)
                       for k, other in enumerate(flat_args))

    def _output(self, leaf: _Leaf, blocks: dict[int, np.ndarray]) -> np.ndarray:
        block = blocks.get(leaf.slot)
        if block is None:  # constant or temp leaf: copy out of the global/temp block
            raise ArtifactError(f"output leaf in a {leaf.kind} allocation is not supported")
        raw = block[leaf.offset:leaf.offset + leaf.size]
        if leaf.perm is None:
            return raw.view(leaf.dtype).reshape(leaf.dims)
        phys = tuple(leaf.dims[d] for d in leaf.perm)
        return raw.view(leaf.dtype).reshape(phys).transpose(np.argsort(leaf.perm))

    __call__ = run

    # ---- introspection ----------------------------------------------------------------------
    def memory_stats(self) -> dict[str, int]:
        """Byte counts of the buffer assignment (parameter/output/temp/constant/...)."""
        return dict(self.assignment.stats())

    def as_text(self) -> str:
        """The HLO module after the CPU pipeline (fusions, copies, schedule)."""
        from xlc.hlo.printer import print_module

        return print_module(self.module)

    def object_code(self) -> bytes:
        """Host object code of the optimised LLVM module (regenerated on demand)."""
        from xlc.codegen import llvm_utils as lu

        ref = lu.parse_and_verify(self.optimized_ir, self.entry_name)
        return lu.emit_object(ref)

    def describe(self) -> dict[str, Any]:
        """Entry symbol, timings and memory stats (for dumps and tools)."""
        return {"entry": self.entry_name, "timings": self.timings,
                "memory": self.memory_stats()}
