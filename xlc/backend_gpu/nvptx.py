"""The NVPTX target: LLVM modules for `nvptx64-nvidia-cuda`, NVVM intrinsics, PTX, ptxas.

What lives here:
* `check_target(sm, ptx_version)` - the architectures and PTX ISA versions we can emit (checked
  before LLVM sees them: LLVM aborts the process on a PTX version too old for the target);
* `new_kernel_module(name)` - an llvmlite module with the NVPTX triple and data layout;
* `kernel_function(module, name, nargs, max_threads)` - a `void name(ptr addrspace(1) ...)`
  kernel entry, marked through `nvvm.annotations` (`kernel`, `maxntid`);
* thread/block ids (`llvm.nvvm.read.ptx.sreg.*`), `barrier`, warp shuffles for any element
  type, shared-memory arrays (address space 3);
* `compile_ptx(module, sm, ptx_version)` - verify, optimise (O3) and emit PTX text through
  llvmlite's NVPTX target;
* `ptxas(ptx, sm)` - assemble PTX with NVIDIA's `ptxas` (when on the PATH) into a cubin;
  a failure raises LoweringError naming the kernel and quoting ptxas's message.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading

import llvmlite.binding as llvm
from llvmlite import ir

from xlc.codegen import llvm_utils as lu
from xlc.errors import ArgumentError, LoweringError

log = logging.getLogger("xlc.backend_gpu")

TRIPLE = "nvptx64-nvidia-cuda"
GLOBAL = 1
SHARED = 3
GPTR = ir.PointerType(addrspace=GLOBAL)
WARP = 32
DEFAULT_PTX_VERSION = 78
"""PTX ISA 7.8: understood by ptxas >= CUDA 11.8, enough for sm_80 and sm_90. Newer
architectures raise it to their minimum (`ptx_version_for`)."""

MIN_PTX_VERSION: dict[int, int] = {
    50: 40, 52: 41, 53: 42, 60: 50, 61: 50, 62: 50, 70: 60, 72: 61, 75: 63, 80: 70, 86: 71,
    87: 74, 89: 78, 90: 78, 100: 86, 101: 86, 103: 88, 110: 90, 120: 87, 121: 88,
}
"""Supported `sm_XX` architectures and the oldest PTX ISA (x10) that can target each (the PTX
ISA's target notes). The NVIDIA toolkit may support fewer: CUDA 13's ptxas starts at sm_75."""
PTX_VERSIONS = (*range(40, 44), *range(50, 51), *range(60, 66), *range(70, 79),
                *range(80, 89), 90)
"""PTX ISA versions (x10) llvmlite's NVPTX target can emit."""


def _version_text(v: int) -> str:
    return f"{v // 10}.{v % 10}"


def ptx_version_for(sm: int, requested: int | None = None) -> int:
    """The PTX ISA version (x10) to emit for `sm_<sm>`: `requested`, or by default the larger of
    DEFAULT_PTX_VERSION and the architecture's minimum. ArgumentError for an unknown
    architecture, an unknown PTX version, or one too old for the architecture."""
    if sm not in MIN_PTX_VERSION:
        known = ", ".join(str(k) for k in MIN_PTX_VERSION)
        raise ArgumentError(f"unsupported GPU architecture sm_{sm} (gpu_sm); known: {known}")
    need = MIN_PTX_VERSION[sm]
    if requested is None:
        return max(DEFAULT_PTX_VERSION, need)
    if requested not in PTX_VERSIONS:
        known = ", ".join(_version_text(v) for v in PTX_VERSIONS)
        raise ArgumentError(f"unsupported PTX ISA version {requested} "
                            f"({_version_text(requested)}); known: {known}")
    if requested < need:
        raise ArgumentError(f"PTX ISA {_version_text(requested)} cannot target sm_{sm}: it "
                            f"needs PTX ISA {_version_text(need)} or newer")
    return requested


def check_target(sm: int, ptx_version: int) -> None:
    """ArgumentError unless `ptx_version` (x10) can target `sm_<sm>` (see `ptx_version_for`)."""
    ptx_version_for(sm, ptx_version)

_lock = threading.RLock()
_machines: dict[tuple[int, int, int], llvm.TargetMachine] = {}
_initialized = False


def _init() -> None:
    global _initialized
    if not _initialized:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _initialized = True


def target_machine(sm: int, ptx_version: int | None = None,
                   opt: int = 3) -> llvm.TargetMachine:
    """A cached NVPTX target machine for `sm_<sm>` emitting PTX ISA `ptx_version` (78 = 7.8;
    default: `ptx_version_for(sm)`). The pair is checked first (ArgumentError)."""
    ptx_version = ptx_version_for(sm, ptx_version)
    with _lock:
        key = (sm, ptx_version, opt)
        tm = _machines.get(key)
        if tm is None:
            _init()
            try:
                target = llvm.Target.from_triple(TRIPLE)
            except RuntimeError as e:  # pragma: no cover - llvmlite always has NVPTX
                raise LoweringError(f"LLVM has no NVPTX target: {e}") from None
            tm = target.create_target_machine(cpu=f"sm_{sm}", features=f"+ptx{ptx_version}",
                                              opt=opt)
            _machines[key] = tm
        return tm


def new_kernel_module(name: str, sm: int = 80) -> ir.Module:
    """An empty llvmlite module targeting NVPTX (64-bit)."""
    mod = ir.Module(name=name)
    mod.triple = TRIPLE
    mod.data_layout = str(target_machine(sm).target_data)
    return mod


def kernel_function(module: ir.Module, name: str, nargs: int, max_threads: int) -> ir.Function:
    """A `void name(ptr addrspace(1) x nargs)` kernel entry annotated as a kernel with
    `maxntid = max_threads` (so ptxas can budget registers)."""
    fn = ir.Function(module, ir.FunctionType(lu.VOID, [GPTR] * nargs), name=name)
    for key, value in (("kernel", 1), ("maxntidx", max_threads)):
        module.add_named_metadata("nvvm.annotations", [
            fn, ir.MetaDataString(module, key), ir.Constant(lu.I32, value)])
    return fn


# ---- special registers, barriers, shuffles -------------------------------------------------
def _sreg(b: ir.IRBuilder, reg: str) -> ir.Value:
    name = f"llvm.nvvm.read.ptx.sreg.{reg}"
    fn = b.module.globals.get(name)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(lu.I32, []), name=name)
    return b.call(fn, [])


def thread_idx(b: ir.IRBuilder, axis: str = "x") -> ir.Value:
    """threadIdx.<axis> as i32."""
    return _sreg(b, f"tid.{axis}")


def block_idx(b: ir.IRBuilder, axis: str = "x") -> ir.Value:
    """blockIdx.<axis> as i32."""
    return _sreg(b, f"ctaid.{axis}")


def block_dim(b: ir.IRBuilder, axis: str = "x") -> ir.Value:
    """blockDim.<axis> as i32."""
    return _sreg(b, f"ntid.{axis}")


def grid_dim(b: ir.IRBuilder, axis: str = "x") -> ir.Value:
    """gridDim.<axis> as i32."""
    return _sreg(b, f"nctaid.{axis}")


def barrier(b: ir.IRBuilder) -> None:
    """`__syncthreads()` (bar.sync 0)."""
    name = "llvm.nvvm.barrier0"
    fn = b.module.globals.get(name)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(lu.VOID, []), name=name)
    b.call(fn, [])


def _shfl_i32(b: ir.IRBuilder, v: ir.Value, lane_mask: int) -> ir.Value:
    name = "llvm.nvvm.shfl.sync.bfly.i32"
    fn = b.module.globals.get(name)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(lu.I32, [lu.I32] * 4), name=name)
    full = ir.Constant(lu.I32, -1)
    return b.call(fn, [full, v, ir.Constant(lu.I32, lane_mask), ir.Constant(lu.I32, 0x1F)])


def shuffle_xor(b: ir.IRBuilder, v: ir.Value, lane_mask: int) -> ir.Value:
    """The value of `v` in lane `laneid ^ lane_mask` (butterfly shuffle across the full warp),
    for any scalar value type: narrower values travel zero-extended in one i32, 64-bit values
    (and complex/struct values, field by field) in two halves."""
    ty = v.type
    if isinstance(ty, ir.LiteralStructType):
        out: ir.Value = ir.Constant(ty, ir.Undefined)
        for k in range(len(ty.elements)):
            out = b.insert_value(out, shuffle_xor(b, b.extract_value(v, k), lane_mask), k)
        return out
    bits = ty.width if isinstance(ty, ir.IntType) else lu.float_bits(ty)
    ity = ir.IntType(bits)
    raw = v if isinstance(ty, ir.IntType) else b.bitcast(v, ity)
    if bits <= 32:
        wide = raw if bits == 32 else b.zext(raw, lu.I32)
        got = _shfl_i32(b, wide, lane_mask)
        res = got if bits == 32 else b.trunc(got, ity)
    else:
        lo = _shfl_i32(b, b.trunc(raw, lu.I32), lane_mask)
        hi = _shfl_i32(b, b.trunc(b.lshr(raw, ir.Constant(lu.I64, 32)), lu.I32), lane_mask)
        res = b.or_(b.zext(lo, lu.I64), b.shl(b.zext(hi, lu.I64), ir.Constant(lu.I64, 32)))
    return res if isinstance(ty, ir.IntType) else b.bitcast(res, ty)


def shared_array(module: ir.Module, name: str, elem: ir.Type, count: int) -> ir.GlobalVariable:
    """A `__shared__ elem name[count]` array (address space 3, 16-byte aligned)."""
    aty = ir.ArrayType(elem, max(1, count))
    gv = ir.GlobalVariable(module, aty, name=module.get_unique_name(name), addrspace=SHARED)
    gv.initializer = ir.Constant(aty, ir.Undefined)
    gv.linkage = "internal"
    gv.align = 16
    return gv


def shared_elem_ptr(b: ir.IRBuilder, gv: ir.GlobalVariable, idx: ir.Value) -> ir.Value:
    """Address (`elem addrspace(3)*`) of element `idx` of shared array `gv`."""
    return b.gep(gv, [ir.Constant(lu.I32, 0), idx], inbounds=True)


# ---- PTX and ptxas -----------------------------------------------------------------------
def compile_ptx(module: ir.Module | str, sm: int = 80, ptx_version: int | None = None,
                opt_level: int = 3, verify: bool = True) -> str:
    """Verify `module`, optimise it at O`opt_level` and return its PTX text for `sm_<sm>`.

    Raises LoweringError("LLVM verification failed for kernel module '...': ...") when the IR
    does not parse or verify."""
    text = str(module)
    name = module.name if isinstance(module, ir.Module) else _module_name(text)
    tm = target_machine(sm, ptx_version)
    try:
        ref = llvm.parse_assembly(text)
        if verify:
            ref.verify()
    except RuntimeError as e:
        log.debug("bad NVPTX IR:\n%s", text)
        raise LoweringError(
            f"LLVM verification failed for kernel module '{name}': {str(e).strip()}") from None
    ref.triple = TRIPLE
    ref.data_layout = str(tm.target_data)
    if opt_level:
        pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
        pto.loop_unrolling = True
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(ref, pb)
    with _lock:
        return tm.emit_assembly(ref)


def _module_name(text: str) -> str:
    m = re.search(r"; ModuleID = '([^']*)'", text)
    return m.group(1) if m else "<text>"


def ptxas_path() -> str | None:
    """The `ptxas` executable on the PATH, or None."""
    return shutil.which("ptxas")


def _kernel_at_line(ptx: str, line: int) -> str:
    name = "<unknown kernel>"
    for k, text in enumerate(ptx.splitlines(), start=1):
        if k > line:
            break
        m = re.search(r"\.entry\s+([\w.$]+)", text)
        if m:
            name = m.group(1)
    return name


def ptxas(ptx: str, sm: int = 80, timeout: float = 120.0) -> bytes:
    """Assemble `ptx` for `sm_<sm>` with ptxas; returns the cubin bytes.

    Raises LoweringError when ptxas is not on the PATH, or with the failing kernel's name and
    ptxas's message when assembly fails."""
    exe = ptxas_path()
    if exe is None:
        raise LoweringError("ptxas is not on the PATH")
    with tempfile.TemporaryDirectory(prefix="xlc_ptxas_") as d:
        src = os.path.join(d, "k.ptx")
        out = os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        proc = subprocess.run([exe, f"-arch=sm_{sm}", src, "-o", out], capture_output=True,
                              text=True, timeout=timeout)
        if proc.returncode != 0:
            msg = (proc.stderr or proc.stdout).strip()
            m = re.search(r"k\.ptx, line (\d+)", msg)
            if m is None:  # not about a line of the PTX: the toolkit, the architecture, ...
                raise LoweringError(f"ptxas failed (sm_{sm}): {msg}")
            kernel = _kernel_at_line(ptx, int(m.group(1)))
            raise LoweringError(f"ptxas failed for kernel '{kernel}' (sm_{sm}): {msg}")
        with open(out, "rb") as f:
            return f.read()
