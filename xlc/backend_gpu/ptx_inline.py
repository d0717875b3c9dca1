"""Inline-PTX instructions LLVM's NVPTX intrinsics do not give us portably: `ldmatrix` and the
`cp.async` family (sm_80+), each in one small internal function `xlc_ptx_<name>` that LLVM
inlines (`alwaysinline`), so each instruction's PTX text lives in exactly one place.

* `ldmatrix_x4(b, addr, trans)` - `ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16`: warp-
  collective; lane l gives the shared address of row l % 8 of 8 x 8 matrix l / 8 and receives
  four 32-bit registers, register j holding two 16-bit elements of matrix j: (row l / 4,
  columns 2 (l % 4) and 2 (l % 4) + 1), or with `.trans` (rows 2 (l % 4) and 2 (l % 4) + 1,
  column l / 4); the first element in the low half.
* `cp_async_16(b, dst, src, nbytes)` - `cp.async.cg.shared.global [dst], [src], 16, nbytes`:
  copies `nbytes` (0..16) bytes from global to shared memory without passing through registers
  and zero-fills the rest of the 16 bytes; both addresses 16-byte aligned. Completion is
  tracked per thread in groups: `cp_async_commit(b)` closes the current group,
  `cp_async_wait(b, n)` waits until at most `n` of this thread's groups are pending.

The host emulator in tests/backend_gpu replaces every `xlc_ptx_*` function by a callback of
the same signature (`emu_ptx_*`), so the wrappers take and return plain values only.
"""
from __future__ import annotations

from llvmlite import ir

from xlc.backend_gpu import nvptx
from xlc.codegen import llvm_utils as lu

SHARED_PTR = ir.PointerType(addrspace=nvptx.SHARED)


def _wrapper(module: ir.Module, name: str, args: list[ir.Type]) -> tuple[ir.Function, bool]:
    """The function `xlc_ptx_<name>` (created empty when missing: second item True)."""
    full = f"xlc_ptx_{name}"
    fn = module.globals.get(full)
    if fn is not None:
        return fn, False
    fn = ir.Function(module, ir.FunctionType(lu.VOID, args), name=full)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    return fn, True


def _shared_u32(b: ir.IRBuilder, p: ir.Value) -> ir.Value:
    """A shared-window address as the 32-bit register PTX's shared instructions take."""
    return b.ptrtoint(p, lu.I32)


def ldmatrix_x4(b: ir.IRBuilder, addr: ir.Value, trans: bool) -> list[ir.Value]:
    """The four i32 registers `ldmatrix...x4` loads for this lane (see the module docstring);
    `addr` is this lane's row address (`ptr addrspace(3)`, 16-byte aligned)."""
    name = "ldmatrix_x4_trans" if trans else "ldmatrix_x4"
    fn, new = _wrapper(b.module, name, [SHARED_PTR, lu.PTR])
    if new:
        fb = ir.IRBuilder(fn.append_basic_block("entry"))
        res_ty = ir.LiteralStructType([lu.I32] * 4)
        asm = ir.InlineAsm(
            ir.FunctionType(res_ty, [lu.I32]),
            f"ldmatrix.sync.aligned.m8n8.x4{'.trans' if trans else ''}.shared.b16 "
            "{$0,$1,$2,$3}, [$4];", "=r,=r,=r,=r,r,~{memory}", side_effect=True)
        res = fb.call(asm, [_shared_u32(fb, fn.args[0])])
        for q in range(4):
            fb.store(fb.extract_value(res, q),
                     fb.gep(fn.args[1], [ir.Constant(lu.I32, q)], source_etype=lu.I32))
        fb.ret_void()
    with b.goto_entry_block():
        out = b.alloca(ir.ArrayType(lu.I32, 4))
    b.call(fn, [addr, out])
    return [b.load(b.gep(out, [ir.Constant(lu.I32, 0), ir.Constant(lu.I32, q)]))
            for q in range(4)]


def cp_async_16(b: ir.IRBuilder, dst: ir.Value, src: ir.Value, nbytes: ir.Value) -> None:
    """Copy `nbytes` (i32, 0..16) bytes global -> shared asynchronously, zero-filling the rest
    of the 16 bytes at `dst` (`ptr addrspace(3)`); `src` is a `ptr addrspace(1)`."""
    fn, new = _wrapper(b.module, "cp_async_16", [SHARED_PTR, nvptx.GPTR, lu.I32])
    if new:
        fb = ir.IRBuilder(fn.append_basic_block("entry"))
        asm = ir.InlineAsm(ir.FunctionType(lu.VOID, [lu.I32, nvptx.GPTR, lu.I32]),
                           "cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r,~{memory}",
                           side_effect=True)
        fb.call(asm, [_shared_u32(fb, fn.args[0]), fn.args[1], fn.args[2]])
        fb.ret_void()
    b.call(fn, [dst, src, nbytes])


def cp_async_commit(b: ir.IRBuilder) -> None:
    """Close this thread's current group of `cp.async` copies."""
    fn, new = _wrapper(b.module, "cp_async_commit", [])
    if new:
        fb = ir.IRBuilder(fn.append_basic_block("entry"))
        fb.call(ir.InlineAsm(ir.FunctionType(lu.VOID, []), "cp.async.commit_group;", "~{memory}",
                             side_effect=True), [])
        fb.ret_void()
    b.call(fn, [])


def cp_async_wait(b: ir.IRBuilder, pending: int) -> None:
    """Wait until at most `pending` of this thread's committed copy groups are outstanding."""
    fn, new = _wrapper(b.module, f"cp_async_wait_{pending}", [])
    if new:
        fb = ir.IRBuilder(fn.append_basic_block("entry"))
        fb.call(ir.InlineAsm(ir.FunctionType(lu.VOID, []), f"cp.async.wait_group {pending};",
                             "~{memory}", side_effect=True), [])
        fb.ret_void()
    b.call(fn, [])
