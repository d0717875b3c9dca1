"""Run a `(..., i64 tid, i64 nthreads)` kernel on several threads from generated code.

`emit_threaded_entry(module, name, kernel, nptrs)` adds `void name(ptr p0, ..., i64 nthreads)`
that starts `nthreads - 1` pthreads running `kernel(p0, ..., t, nthreads)` for t = 1 ..
nthreads-1, runs t = 0 on the calling thread, then joins them. A thread that cannot be created
has its share run inline afterwards, so the result never depends on thread creation. nthreads is
clamped to [1, MAX_THREADS]. ctypes releases the GIL around the call, so the threads really run
in parallel. (Measured on the shared 2-vCPU test VM: a pthread start + join costs ~20-40 us, vs
~60-130 us for two Python threads calling through ctypes; far below the time of a GEMM large
enough to be split.)
"""
from __future__ import annotations

import logging
import os

from llvmlite import ir

from xlc.codegen import llvm_utils as lu

log = logging.getLogger("xlc.codegen")

MAX_THREADS = 64


def available_threads() -> int:
    """Number of cores this process may run on (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def _declare(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, fnty, name=name)


def _c(ty: ir.IntType, v: int) -> ir.Constant:
    return ir.Constant(ty, v)


def emit_threaded_entry(module: ir.Module, name: str, kernel: ir.Function, nptrs: int
                        ) -> ir.Function:
    """Add the threaded entry `void name(ptr x nptrs, i64 nthreads)` for `kernel`, whose
    signature must be `void (ptr x nptrs, i64 tid, i64 nthreads)` and which must be safe to
    run concurrently for different tids. Returns the new function."""
    sty = ir.LiteralStructType([lu.PTR] * nptrs + [lu.I64, lu.I64])
    create = _declare(module, "pthread_create",
                      ir.FunctionType(lu.I32, [lu.PTR, lu.PTR, lu.PTR, lu.PTR]))
    join = _declare(module, "pthread_join", ir.FunctionType(lu.I32, [lu.I64, lu.PTR]))

    worker = ir.Function(module, ir.FunctionType(lu.PTR, [lu.PTR]), name=f"{name}.worker")
    worker.linkage = "internal"
    b = ir.IRBuilder(worker.append_basic_block("entry"))
    vals = [b.load(_field(b, worker.args[0], sty, f), typ=sty.elements[f])
            for f in range(nptrs + 2)]
    b.call(kernel, vals)
    b.ret(ir.Constant(lu.PTR, None))

    fn = ir.Function(module, ir.FunctionType(lu.VOID, [lu.PTR] * nptrs + [lu.I64]), name=name)
    ptrs, nt = list(fn.args[:nptrs]), fn.args[nptrs]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    slots = b.alloca(ir.ArrayType(sty, MAX_THREADS))
    handles = b.alloca(ir.ArrayType(lu.I64, MAX_THREADS))
    status = b.alloca(ir.ArrayType(lu.I32, MAX_THREADS))
    for v in (slots, handles, status):
        v.type = lu.PTR  # llvmlite types allocas as typed pointers; LLVM 22 wants `ptr`
    nt = b.select(b.icmp_signed("<", nt, _c(lu.I64, 1)), _c(lu.I64, 1), nt)
    nt = b.select(b.icmp_signed(">", nt, _c(lu.I64, MAX_THREADS)), _c(lu.I64, MAX_THREADS), nt)
    with lu.for_range(b, nt, start=1, name="spawn") as t:
        slot = b.gep(slots, [t], inbounds=True, source_etype=sty)
        for f, v in enumerate(ptrs + [t, nt]):
            b.store(v, _field(b, slot, sty, f))
        handle = b.gep(handles, [t], inbounds=True, source_etype=lu.I64)
        rc = b.call(create, [handle, ir.Constant(lu.PTR, None), worker, slot])
        b.store(rc, b.gep(status, [t], inbounds=True, source_etype=lu.I32))
    b.call(kernel, ptrs + [_c(lu.I64, 0), nt])
    with lu.for_range(b, nt, start=1, name="join") as t:
        rc = b.load(b.gep(status, [t], inbounds=True, source_etype=lu.I32), typ=lu.I32)
        with b.if_else(b.icmp_signed("==", rc, _c(lu.I32, 0)), likely=True) as (ok, failed):
            with ok:
                h = b.load(b.gep(handles, [t], inbounds=True, source_etype=lu.I64), typ=lu.I64)
                b.call(join, [h, ir.Constant(lu.PTR, None)])
            with failed:
                b.call(kernel, ptrs + [t, nt])
    b.ret_void()
    return fn


def _field(b: ir.IRBuilder, base: ir.Value, sty: ir.LiteralStructType, f: int) -> ir.Value:
    return b.gep(base, [_c(lu.I32, 0), _c(lu.I32, f)], inbounds=True, source_etype=sty)
