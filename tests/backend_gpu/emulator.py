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
    ConditionalThunk,
    DeviceToDeviceCopyThunk,
    HostCallThunk,
    KernelThunk,
    Memset32Thunk,
    MemzeroThunk,
    SequentialThunk,
    Thunk,
    WhileThunk,
)
from xlc.passes.allocation import Slice

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


def _halves(words: np.ndarray, kind: str) -> np.ndarray:
    """Unpack 32-bit registers holding two 16-bit values (first in the low half)."""
    h = words.astype(np.uint32).view(np.uint16).reshape(words.shape + (2,))
    if kind == "f16":
        return h.view(np.float16).astype(np.float32)
    return (h.astype(np.uint32) << 16).view(np.float32)


def _operands_16(f: np.ndarray, kind: str, g: int, t: int, a: np.ndarray,
                 bm: np.ndarray) -> None:
    """One lane's m16n8k16 A and B words (two 16-bit values each) into A[16,16], B[16,8]."""
    ah, bh = _halves(f[:4], kind), _halves(f[4:6], kind)
    a[g, 2 * t:2 * t + 2], a[g + 8, 2 * t:2 * t + 2] = ah[0], ah[1]
    a[g, 2 * t + 8:2 * t + 10], a[g + 8, 2 * t + 8:2 * t + 10] = ah[2], ah[3]
    bm[2 * t:2 * t + 2, g], bm[2 * t + 8:2 * t + 10, g] = bh[0], bh[1]


def _operands_tf32(f: np.ndarray, kind: str, g: int, t: int, a: np.ndarray,
                   bm: np.ndarray) -> None:
    """One lane's m16n8k8 A and B words (f32 values rounded to TF32, as emit_mma's wrapper
    does with cvt.rna) into A[16,8], B[8,8]."""
    w = _tf32(f[:6].view(np.float32))
    a[g, t], a[g + 8, t], a[g, t + 4], a[g + 8, t + 4] = w[:4]
    bm[t, g], bm[t + 4, g] = w[4:6]


def _mma(kind: str) -> Any:
    """The warp-collective mma on the 10-word fragments at `ptr` (emit_mma.mma_function):
    m16n8k16 for f16/bf16, m16n8k8 for tf32; D = A B + C exactly, rounded once to f32."""
    kdim, unpack = (8, _operands_tf32) if kind == "tf32" else (16, _operands_16)

    def run(ptr: int) -> None:
        table = _block["frags"]
        me = _state.linear
        frag = (ctypes.c_int32 * 10).from_address(ptr)
        table[me] = np.frombuffer(bytes(frag), dtype=np.int32)
        _block["barrier"].wait()
        base = me - me % 32
        a = np.zeros((16, kdim), np.float32)
        bm = np.zeros((kdim, 8), np.float32)
        c = np.zeros((16, 8), np.float32)
        for lane in range(32):
            f = table[base + lane]
            g, t = lane // 4, lane % 4
            unpack(f, kind, g, t, a, bm)
            cf = f[6:10].view(np.float32)
            c[g, 2 * t:2 * t + 2], c[g + 8, 2 * t:2 * t + 2] = cf[:2], cf[2:]
        d = (a.astype(np.float64) @ bm.astype(np.float64) + c).astype(np.float32)
        g, t = (me % 32) // 4, me % 4
        mine = np.array([d[g, 2 * t], d[g, 2 * t + 1], d[g + 8, 2 * t], d[g + 8, 2 * t + 1]],
                        np.float32)
        _block["barrier"].wait()
        (ctypes.c_float * 4).from_address(ptr + 24)[:] = mine.tolist()
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p)(run)


def _ldmatrix(trans: bool) -> Any:
    """The warp-collective `ldmatrix.x4` (ptx_inline.ldmatrix_x4): lane l posts its row
    address (row l % 8 of matrix l / 8) and receives one register per matrix."""
    def run(addr: int, out: int) -> None:
        table = _block["table"]
        me = _state.linear
        table[me] = addr
        _block["barrier"].wait()
        base = me - me % 32
        g, t = (me % 32) // 4, me % 4

        def row(j: int, r: int) -> np.ndarray:
            return np.frombuffer(ctypes.string_at(int(table[base + 8 * j + r]), 16), np.uint16)

        words = []
        for j in range(4):
            if trans:
                lo, hi = int(row(j, 2 * t)[g]), int(row(j, 2 * t + 1)[g])
            else:
                r = row(j, g)
                lo, hi = int(r[2 * t]), int(r[2 * t + 1])
            words.append(lo | hi << 16)
        _block["barrier"].wait()
        (ctypes.c_uint32 * 4).from_address(out)[:] = words
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(run)


def _cp_async(dst: int, src: int, nbytes: int) -> None:
    """`cp.async` of 16 bytes with source size `nbytes`: copied at once, the rest zeroed."""
    ctypes.memmove(dst, src, nbytes)
    ctypes.memset(dst + nbytes, 0, 16 - nbytes)


_CALLBACKS = {f"emu_sreg_{r}": _sreg_fn(r) for r in _REGS}
_CALLBACKS["emu_ptx_ldmatrix_x4"] = _ldmatrix(False)
_CALLBACKS["emu_ptx_ldmatrix_x4_trans"] = _ldmatrix(True)
_CALLBACKS["emu_ptx_cp_async_16"] = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p,
                                                     ctypes.c_int32)(_cp_async)
# copies complete when issued: committing and waiting have nothing to do
_CALLBACKS["emu_ptx_cp_async_commit"] = _VOID(lambda: None)
for _n in range(4):
    _CALLBACKS[f"emu_ptx_cp_async_wait_{_n}"] = _VOID(lambda: None)
def _tf32(x: np.ndarray) -> np.ndarray:
    """f32 values rounded to TF32 as `cvt.rna.tf32.f32` does (nearest, ties away from zero;
    NaN and infinities kept)."""
    bits = x.astype(np.float32).view(np.uint32)
    finite = (bits & 0x7F800000) != 0x7F800000
    rounded = ((bits.astype(np.uint64) + 0x1000) & 0xFFFFE000).astype(np.uint32)
    return np.where(finite, rounded, bits).view(np.float32)


_CALLBACKS["emu_mma_f16"] = _mma("f16")
_CALLBACKS["emu_mma_tf32"] = _mma("tf32")
_CALLBACKS["emu_mma_bf16"] = _mma("bf16")
_CALLBACKS["emu_barrier"] = _VOID(_barrier)
_CALLBACKS["emu_shfl"] = _SHFL(_shfl)
_registered = False
_lock = threading.Lock()
_launch_lock = threading.Lock()


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
    # the inline-PTX mma wrappers become warp-collective callbacks
    text = re.sub(r'define internal void @"xlc_mma_(\w+)"\(ptr %"\.1"\)[^\n]*\n\{.*?\n\}\n',
                  lambda m: f'declare void @"emu_mma_{m.group(1)}"(ptr)\n', text, flags=re.S)
    text = re.sub(r'@"xlc_mma_(\w+)"', r'@"emu_mma_\1"', text)
    # so do the other inline-PTX wrappers (ptx_inline.py), keeping their signatures
    text = re.sub(r'define internal void @"xlc_ptx_(\w+)"\(([^\n]*?)\)( alwaysinline)?\n'
                  r'\{.*?\n\}\n', _declare_callback, text, flags=re.S)
    text = re.sub(r'@"xlc_ptx_(\w+)"', r'@"emu_ptx_\1"', text)
    return _nvptx_frem(text)


def _declare_callback(m: re.Match[str]) -> str:
    types = [re.sub(r' %"[^"]*"$', "", p) for p in m.group(2).split(", ") if p]
    return f'declare void @"emu_ptx_{m.group(1)}"({", ".join(types)})\n'


_FREM = re.compile(r"= frem(?: [a-z]+)* (float|double) ([^,\n]+), ([^\n]+)")


def _nvptx_frem(text: str) -> str:
    """`frem` as LLVM's NVPTX target lowers it (`x - trunc(x / y) * y` with one FMA; x when y
    is infinite), not the host's exact libm fmod, so the emulator computes what the GPU does."""
    if not _FREM.search(text):
        return text
    text = _FREM.sub(lambda m: f'= call {m.group(1)} @"emu_frem_{m.group(1)}"'
                               f"({m.group(1)} {m.group(2)}, {m.group(1)} {m.group(3)})", text)
    for ty, sfx in (("float", "f32"), ("double", "f64")):
        for fn, n in (("trunc", 1), ("fma", 3), ("fabs", 1)):
            name = f"llvm.{fn}.{sfx}"
            if f"@{name}(" not in text and f'@"{name}"(' not in text:
                text += f"declare {ty} @{name}({', '.join([ty] * n)})\n"
        text += (f'define internal {ty} @"emu_frem_{ty}"({ty} %a, {ty} %b) {{\n'
                 f"  %q = fdiv {ty} %a, %b\n  %t = call {ty} @llvm.trunc.{sfx}({ty} %q)\n"
                 f"  %n = fneg {ty} %t\n"
                 f"  %r = call {ty} @llvm.fma.{sfx}({ty} %n, {ty} %b, {ty} %a)\n"
                 f"  %m = call {ty} @llvm.fabs.{sfx}({ty} %b)\n"
                 f"  %i = fcmp oeq {ty} %m, 0x7FF0000000000000\n"
                 f"  %s = select i1 %i, {ty} %a, {ty} %r\n  ret {ty} %s\n}}\n")
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
        cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
        # host features matter: with F16C, half <-> float converts inline (no libcalls)
        tm = llvm.Target.from_default_triple().create_target_machine(cpu=cpu,
                                                                      features=features, opt=1)
        ref.triple = tm.triple
        self.engine = llvm.create_mcjit_compiler(ref, tm)
        self.engine.finalize_object()
        self.sync_kernels = set()
        for m in re.finditer(r'define void @"([^"]+)"\(.*?\n}\n', text, re.S):
            if any(x in m.group(0) for x in ("emu_barrier", "emu_shfl", "emu_mma",
                                             "emu_ptx_ldmatrix")):
                self.sync_kernels.add(m.group(1))
        self.buffers: list[np.ndarray] = []

    # ---- memory ------------------------------------------------------------------------
    def _view(self, sl: Slice) -> np.ndarray:
        return self.buffers[sl.index][sl.offset:sl.offset + sl.size]

    def _addr(self, sl: Slice) -> int:
        return int(self.buffers[sl.index].ctypes.data) + sl.offset

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
        elif isinstance(t, WhileThunk) and t.trip_count is not None:
            for _ in range(t.trip_count):
                self.execute(t.body)
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
        elif isinstance(t, HostCallThunk):
            self._host_call(t)
        else:
            raise NotImplementedError(t.kind)

    def _host_call(self, t: HostCallThunk) -> None:
        """A host call (custom-call target or evaluator fallback) on the emulated buffers."""
        from xlc.hlo import host_calls

        raws = [self._view(sl).copy() for sl in t.operands]
        for sl, host in zip(t.results, host_calls.run_on_bytes(t.desc, raws)):
            raw = host.view(np.uint8).reshape(-1)
            self._view(sl)[:raw.size] = raw

    def launch(self, t: KernelThunk) -> None:
        """Emulate one kernel launch of a thunk on the emulator's own buffers."""
        self.launch_raw(t.kernel, t.grid, t.block, [self._addr(a.slice) for a in t.args])

    def launch_raw(self, kernel: str, grid: tuple[int, int, int],
                   block: tuple[int, int, int], ptrs: list[int]) -> None:
        """Emulate launching `kernel` on `grid` x `block` with pointer arguments `ptrs`. One
        launch at a time in the process (the block state is global): launches from several
        threads take turns."""
        with _launch_lock:
            self._launch(kernel, grid, block, ptrs)

    def _launch(self, kernel: str, grid: tuple[int, int, int],
                block: tuple[int, int, int], ptrs: list[int]) -> None:
        addr = self.engine.get_function_address(kernel)
        fn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(ptrs))(addr)
        bx, by, bz = block
        nthreads = bx * by * bz
        tids = [(x, y, z) for z in range(bz) for y in range(by) for x in range(bx)]
        blocks = [(x, y, z) for z in range(grid[2]) for y in range(grid[1])
                  for x in range(grid[0])]
        _state.ntid, _state.nctaid = block, grid
        if kernel not in self.sync_kernels:
            _block["barrier"] = None
            for c in blocks:
                _state.ctaid = c
                for k, tid in enumerate(tids):
                    _state.tid, _state.linear = tid, k
                    fn(*ptrs)
            return
        _block["barrier"] = threading.Barrier(nthreads)
        _block["table"] = np.zeros(max(32, nthreads), dtype=np.int64)
        _block["frags"] = np.zeros((max(32, nthreads), 10), dtype=np.int32)
        errors: list[BaseException] = []

        def worker(k: int) -> None:
            _state.ntid, _state.nctaid = block, grid
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
