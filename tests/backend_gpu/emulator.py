"""A host emulator for GPU executables, so kernels can be checked numerically without a GPU.

The executable's NVPTX LLVM IR is retargeted to the host: the NVVM special-register reads,
`barrier0` and `shfl.sync.bfly.i32` become calls into Python callbacks, and the module is
JIT-compiled with MCJIT. Buffers are host byte arrays, one per BufferAllocation; the thunk
schedule is walked like the runtime does (while/conditional read their predicate back).

A launch runs block after block. Kernels without barriers or shuffles run their threads one
after the other in this Python thread; kernels with them run one OS thread per GPU thread of
the block (Python threads, ctypes releases the GIL) meeting at a `threading.Barrier`, and a
shuffle is an exchange through a per-block table between two barriers (every shuffle in our
kernels is executed by the whole block uniformly). Slow: meant for small shapes.
"""
from __future__ import annotations

import ctypes
import re
import threading
from typing import Any

import llvmlite.binding as llvm
import numpy as np

from xlc.backend_gpu.executable import GpuExecutable
from xlc.backend_gpu.thunks import (
    BufferSlice,
    ConditionalThunk,
    DeviceToDeviceCopyThunk,
    KernelThunk,
    Memset32Thunk,
    MemzeroThunk,
    SequentialThunk,
    Thunk,
    WhileThunk,
)

_SREG = ctypes.CFUNCTYPE(ctypes.c_int32)
_VOID = ctypes.CFUNCTYPE(None)
_SHFL = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32,
                         ctypes.c_int32)
_REGS = [f"{k}.{a}" for k in ("tid", "ctaid", "ntid", "nctaid") for a in "xyz"]


class _Launch(threading.local):
    tid = (0, 0, 0)
    ctaid = (0, 0, 0)
    ntid = (1, 1, 1)
    nctaid = (1, 1, 1)
    linear = 0


_state = _Launch()
_block: dict[str, Any] = {"barrier": None, "table": None}


def _sreg_fn(reg: str) -> Any:
    kind, axis = reg.split(".")
    k = "xyz".index(axis)
    return _SREG(lambda: getattr(_state, kind)[k])


def _barrier() -> None:
    b = _block["barrier"]
    if b is not None:
        b.wait()


def _shfl(mask: int, value: int, lane_mask: int, clamp: int) -> int:
    table = _block["table"]
    me = _state.linear
    table[me] = value
    _block["barrier"].wait()
    warp_base = me - me % 32
    other = table[warp_base + ((me % 32) ^ lane_mask)]
    _block["barrier"].wait()
    return int(other)


_CALLBACKS = {f"emu_sreg_{r}": _sreg_fn(r) for r in _REGS}
_CALLBACKS["emu_barrier"] = _VOID(_barrier)
_CALLBACKS["emu_shfl"] = _SHFL(_shfl)
_registered = False
_lock = threading.Lock()


def _register() -> None:
    global _registered
    with _lock:
        if not _registered:
            for name, cb in _CALLBACKS.items():
                llvm.add_symbol(name, ctypes.cast(cb, ctypes.c_void_p).value)
            _registered = True


def host_ir(text: str) -> str:
    """The NVPTX IR retargeted to the host (see module docstring)."""
    text = re.sub(r'target triple = "[^"]*"\n', "", text)
    text = re.sub(r'target datalayout = "[^"]*"\n', "", text)
    text = re.sub(r"!nvvm\.annotations = !\{[^}]*\}\n", "", text)
    text = text.replace('@"llvm.nvvm.read.ptx.sreg.', '@"emu_sreg_')
    text = text.replace('@"llvm.nvvm.barrier0"', '@"emu_barrier"')
    text = text.replace('@"llvm.nvvm.shfl.sync.bfly.i32"', '@"emu_shfl"')
    return text


class Emulator:
    """Runs a GpuExecutable's schedule on the host (see the module docstring)."""

    def __init__(self, exe: GpuExecutable):
        _register()
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.exe = exe
        text = host_ir(exe.llvm_ir)
        ref = llvm.parse_assembly(text)
        ref.verify()
        tm = llvm.Target.from_default_triple().create_target_machine(opt=1)
        ref.triple = tm.triple
        self.engine = llvm.create_mcjit_compiler(ref, tm)
        self.engine.finalize_object()
        self.sync_kernels = set()
        for m in re.finditer(r'define void @"([^"]+)"\(.*?\n}\n', text, re.S):
            if "emu_barrier" in m.group(0) or "emu_shfl" in m.group(0):
                self.sync_kernels.add(m.group(1))
        self.buffers: list[np.ndarray] = []

    # ---- memory ------------------------------------------------------------------------
    def _view(self, sl: BufferSlice) -> np.ndarray:
        return self.buffers[sl.allocation][sl.offset:sl.offset + sl.size]

    def _addr(self, sl: BufferSlice) -> int:
        return int(self.buffers[sl.allocation].ctypes.data) + sl.offset

    def run(self, args: list[np.ndarray]) -> list[np.ndarray]:
        """Run the schedule once on host memory; returns the flat outputs."""
        exe = self.exe
        self.buffers = []
        for a in exe.allocations:
            buf = np.zeros(max(1, a.size) + 64, dtype=np.uint8)[:max(1, a.size)]
            if a.kind == "constant":
                data = exe.constants.get(a.index, b"")
                buf[:len(data)] = np.frombuffer(data, dtype=np.uint8)
            self.buffers.append(buf)
        for p, arg in zip(exe.parameters, args):
            host = np.asarray(arg, dtype=np.dtype(p.dtype))
            if p.physical_perm is not None:
                host = host.transpose(p.physical_perm)
            raw = np.ascontiguousarray(host).view(np.uint8).reshape(-1)
            self.buffers[p.allocation][:raw.size] = raw
        self.execute(exe.thunks)
        outs = []
        for o in exe.outputs:
            dims = o.dims if o.physical_perm is None else \
                tuple(o.dims[d] for d in o.physical_perm)
            arr = self._view(o.slice).view(np.dtype(o.dtype)).reshape(dims).copy()
            if o.physical_perm is not None:
                arr = arr.transpose(np.argsort(o.physical_perm))
            outs.append(arr)
        return outs

    # ---- thunks ------------------------------------------------------------------------
    def execute(self, t: Thunk) -> None:
        """Run one thunk (recursively)."""
        if isinstance(t, SequentialThunk):
            for c in t.thunks:
                self.execute(c)
        elif isinstance(t, KernelThunk):
            self.launch(t)
        elif isinstance(t, DeviceToDeviceCopyThunk):
            self._view(t.dst)[:t.src.size] = self._view(t.src).copy()
        elif isinstance(t, MemzeroThunk):
            self._view(t.dest)[:] = 0
        elif isinstance(t, Memset32Thunk):
            self._view(t.dest).view(np.uint32)[:] = t.value & 0xFFFFFFFF
        elif isinstance(t, WhileThunk):
            while True:
                self.execute(t.condition)
                if not self._view(t.predicate)[0]:
                    break
                self.execute(t.body)
        elif isinstance(t, ConditionalThunk):
            raw = self._view(t.index)
            n = len(t.branches)
            if t.index_is_pred:
                k = 0 if raw[0] else 1
            else:
                v = int(raw.view(np.int32)[0])
                k = v if 0 <= v < n else n - 1
            self.execute(t.branches[k])
        else:
            raise NotImplementedError(t.kind)

    def launch(self, t: KernelThunk) -> None:
        """Emulate one kernel launch."""
        addr = self.engine.get_function_address(t.kernel)
        fn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(t.args))(addr)
        ptrs = [self._addr(a.slice) for a in t.args]
        bx, by, bz = t.block
        nthreads = bx * by * bz
        tids = [(x, y, z) for z in range(bz) for y in range(by) for x in range(bx)]
        blocks = [(x, y, z) for z in range(t.grid[2]) for y in range(t.grid[1])
                  for x in range(t.grid[0])]
        _state.ntid, _state.nctaid = t.block, t.grid
        if t.kernel not in self.sync_kernels:
            _block["barrier"] = None
            for c in blocks:
                _state.ctaid = c
                for k, tid in enumerate(tids):
                    _state.tid, _state.linear = tid, k
                    fn(*ptrs)
            return
        _block["barrier"] = threading.Barrier(nthreads)
        _block["table"] = np.zeros(max(32, nthreads), dtype=np.int64)
        errors: list[BaseException] = []

        def worker(k: int) -> None:
            _state.ntid, _state.nctaid = t.block, t.grid
            _state.tid, _state.linear = tids[k], k
            try:
                for c in blocks:
                    _state.ctaid = c
                    fn(*ptrs)
                    _block["barrier"].wait()
            except BaseException as e:  # pragma: no cover - surfaced below
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(nthreads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        _block["barrier"] = None
        if errors:
            raise errors[0]
