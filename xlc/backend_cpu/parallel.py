"""Splitting a kernel's outer range over threads with pthreads, from generated code.

`run_parallel(b, part, ptrs, count, nthreads)` emits: `nthreads - 1` pthreads each running
`part(ptrs..., begin, end)` on its share of `[0, count)`, the first share on the calling
thread, then joins them. If a thread cannot be created its share runs inline, so the result
never depends on thread creation succeeding. `part` must be safe to run concurrently on
disjoint shares (it writes only its own share's outputs). ctypes releases the GIL around the
entry call, so these threads really run in parallel with nothing Python-side to wait for.
"""
from __future__ import annotations

import logging
import os

from llvmlite import ir

from xlc.codegen import llvm_utils as lu

log = logging.getLogger("xlc.backend_cpu")


def host_threads(requested: int = 0) -> int:
    """Threads to use: `requested`, or every core this process may run on when 0."""
    if requested > 0:
        return requested
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def _declare(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, fnty, name=name)
    return fn


def _worker(module: ir.Module, part: ir.Function, nptrs: int) -> ir.Function:
    """`ptr worker(ptr args)`: args = {ptr x nptrs, i64 begin, i64 end}; calls part."""
    name = part.name + ".worker"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(lu.PTR, [lu.PTR]), name=name)
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    sty = _args_type(nptrs)
    vals = []
    for f in range(nptrs + 2):
        slot = b.gep(fn.args[0], [ir.Constant(lu.I32, 0), ir.Constant(lu.I32, f)],
                     inbounds=True, source_etype=sty)
        vals.append(b.load(slot, typ=sty.elements[f]))
    b.call(part, vals)
    b.ret(ir.Constant(lu.PTR, None))
    return fn


def _args_type(nptrs: int) -> ir.LiteralStructType:
    return ir.LiteralStructType([lu.PTR] * nptrs + [lu.I64, lu.I64])


def run_parallel(b: ir.IRBuilder, part: ir.Function, ptrs: list[ir.Value], count: int,
                 nthreads: int) -> None:
    """Emit the threaded execution of `part` over `[0, count)` (see the module docstring)."""
    module = b.module
    create = _declare(module, "pthread_create",
                      ir.FunctionType(lu.I32, [lu.PTR, lu.PTR, lu.PTR, lu.PTR]))
    join = _declare(module, "pthread_join", ir.FunctionType(lu.I32, [lu.I64, lu.PTR]))
    worker = _worker(module, part, len(ptrs))
    sty = _args_type(len(ptrs))
    bounds = [count * t // nthreads for t in range(nthreads + 1)]
    handles = []
    for t in range(1, nthreads):
        with b.goto_entry_block():
            args = b.alloca(sty)
            handle = b.alloca(lu.I64)
        args.type = lu.PTR
        handle.type = lu.PTR
        for f, v in enumerate(ptrs + [ir.Constant(lu.I64, bounds[t]),
                                      ir.Constant(lu.I64, bounds[t + 1])]):
            slot = b.gep(args, [ir.Constant(lu.I32, 0), ir.Constant(lu.I32, f)],
                         inbounds=True, source_etype=sty)
            b.store(v, slot)
        rc = b.call(create, [handle, ir.Constant(lu.PTR, None), worker, args])
        failed = b.icmp_signed("!=", rc, ir.Constant(lu.I32, 0))
        with b.if_then(failed, likely=False):
            b.call(part, ptrs + [ir.Constant(lu.I64, bounds[t]),
                                 ir.Constant(lu.I64, bounds[t + 1])])
        handles.append((handle, failed))
    b.call(part, ptrs + [ir.Constant(lu.I64, bounds[0]), ir.Constant(lu.I64, bounds[1])])
    for handle, failed in handles:
        with b.if_then(b.not_(failed), likely=True):
            b.call(join, [b.load(handle, typ=lu.I64), ir.Constant(lu.PTR, None)])
