"""Running generated kernels on several threads, through the process's persistent thread pool
(`xlc.backend_cpu.thread_pool`).

Two shapes of parallel kernel exist:
* `run_parallel(b, part, ptrs, count, nthreads)` emits, at the builder's position, the run of
  `part(ptrs..., begin, end)` over `[0, count)` split into up to SHARES_PER_THREAD x
  `nthreads` contiguous shares taken by `nthreads` threads (the backend's kernels split their
  outermost loop this way; several shares per thread balance the load when one thread gets
  less of the machine than the others);
* `emit_slotted_entry(module, name, kernel, nptrs)` adds `void name(ptr x nptrs, i64 nshares,
  i64 nthreads)` running `kernel(ptrs..., share, nshares, slot)` for every share on up to
  nthreads threads, `slot` (< nthreads) naming the thread that runs the share (the GEMM, which
  divides its own work by share and keeps packing scratch per slot);
  `emit_threaded_entry(module, name, kernel, nptrs)` is the older form with one share per
  thread, `kernel(ptrs..., tid, nthreads)`.
Both store the pointers in a stack struct and call `xlc_pool_run_shares(job, &struct, nshares,
nthreads)` with a small `job(args, share, nshares)` that unpacks them; the calling thread takes
shares too. `part`
and `kernel` must be safe to run concurrently for different shares. ctypes releases the GIL
around the entry call, so nothing Python-side waits while the threads run. The pool is a
run-time library (`xlc.backend_cpu.runtime_lib`), linked when a module using it is added to the
JIT engine.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from llvmlite import ir

from xlc.backend_cpu.profile_lib import call_share
from xlc.backend_cpu.thread_pool import (
    JOB_TYPE,
    MAX_WORKERS,
    SLOT_JOB_TYPE,
    declare_pool_run,
    declare_pool_run_slots,
)
from xlc.codegen import llvm_utils as lu

log = logging.getLogger("xlc.backend_cpu")

MAX_THREADS = MAX_WORKERS + 1

# When splitting pays, with the pool (a job costs ~2 us of hand-off; measured on the 2-core test
# VM, one thread vs two): elementwise loops from ~32K elements (tanh of 32K floats 11.3 -> 7.6
# us, of 512K 166 -> 85 us), GEMMs from ~2 MFLOP (100^3: 17.8 -> 11.8 us, 128^3: 21.6 -> 13.0).
PARALLEL_ELEMENTS = 1 << 15
"""Loops over at least this many elements are split over the threads (outermost dim)."""
PARALLEL_FLOPS = 1 << 21
"""Matrix products of at least this many flops are split over the threads."""
SHARES_PER_THREAD = 4
"""Shares per thread of a split loop: a thread that gets less CPU (a loaded machine) takes
fewer of them, instead of the call waiting for its one big share."""


def available_threads() -> int:
    """Number of cores this process may run on (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def host_threads(requested: int = 0) -> int:
    """Threads to use: `requested`, or every core this process may run on when 0."""
    return requested if requested > 0 else available_threads()


def _args_type(nptrs: int) -> ir.LiteralStructType:
    return ir.LiteralStructType([lu.PTR] * nptrs)


def _unpack(b: ir.IRBuilder, args: ir.Value, nptrs: int) -> list[ir.Value]:
    sty = _args_type(nptrs)
    return [b.load(b.gep(args, [ir.Constant(lu.I32, 0), ir.Constant(lu.I32, f)],
                         inbounds=True, source_etype=sty), typ=lu.PTR)
            for f in range(nptrs)]


def _pack_and_run(b: ir.IRBuilder, job: ir.Function, ptrs: Sequence[ir.Value],
                  nshares: ir.Value, nthreads: ir.Value, slots: bool = False) -> None:
    sty = _args_type(len(ptrs))
    with b.goto_entry_block():
        args = b.alloca(sty)
    args.type = lu.PTR  # llvmlite types allocas as typed pointers; LLVM 22 wants `ptr`
    # An explicit alignment: without one LLVM 22 gave the inlined copy of this alloca align 8
    # while keeping `align 16` on the stores it had merged (a misaligned vmovaps at run time).
    args.align = 16
    for f, v in enumerate(ptrs):
        b.store(v, b.gep(args, [ir.Constant(lu.I32, 0), ir.Constant(lu.I32, f)],
                         inbounds=True, source_etype=sty))
    run = declare_pool_run_slots(b.module) if slots else declare_pool_run(b.module)
    b.call(run, [job, args, nshares, nthreads])


def run_parallel(b: ir.IRBuilder, part: ir.Function, ptrs: list[ir.Value], count: int,
                 nthreads: int) -> None:
    """Emit the run of `part(ptrs..., begin, end)` over `[0, count)` on `nthreads` threads, in
    n = min(count, SHARES_PER_THREAD x nthreads) shares (share t is `[count t / n,
    count (t+1) / n)`)."""
    module = b.module
    name = part.name + ".job"
    job = module.globals.get(name)
    if job is None:
        job = ir.Function(module, JOB_TYPE, name=name)
        job.linkage = "internal"
        jb = ir.IRBuilder(job.append_basic_block("entry"))
        args, tid, n = job.args
        total = ir.Constant(lu.I64, count)
        begin = jb.sdiv(jb.mul(total, tid), n)
        end = jb.sdiv(jb.mul(total, jb.add(tid, ir.Constant(lu.I64, 1))), n)
        call_share(jb, part, _unpack(jb, args, len(ptrs)) + [begin, end], tid)
        jb.ret_void()
    threads = max(1, min(nthreads, count))
    shares = share_count(count, nthreads)
    _pack_and_run(b, job, ptrs, ir.Constant(lu.I64, shares), ir.Constant(lu.I64, threads))


def share_count(count: int, nthreads: int) -> int:
    """How many shares `run_parallel(..., count, nthreads)` cuts `[0, count)` into."""
    threads = max(1, min(nthreads, count))
    return 1 if threads == 1 else min(count, SHARES_PER_THREAD * threads)


def share_of(b: ir.IRBuilder, begin: ir.Value, count: int, nshares: int) -> ir.Value:
    """The index (i64) of the `run_parallel` share that starts at `begin` (0 <= index <
    nshares, distinct for distinct shares): shares start at floor(count t / nshares), so t is
    ceil(begin nshares / count). A kernel keeps per-share scratch at that index."""
    if nshares <= 1:
        return ir.Constant(lu.I64, 0)
    num = b.add(b.mul(begin, ir.Constant(lu.I64, nshares)), ir.Constant(lu.I64, count - 1))
    return b.sdiv(num, ir.Constant(lu.I64, count))


def emit_threaded_entry(module: ir.Module, name: str, kernel: ir.Function, nptrs: int
                        ) -> ir.Function:
    """Add the threaded entry `void name(ptr x nptrs, i64 nthreads)` for `kernel`, whose
    signature must be `void (ptr x nptrs, i64 tid, i64 nthreads)` and which must be safe to
    run concurrently for different tids; nthreads is clamped to [1, MAX_THREADS]. Returns the
    new function."""
    job = ir.Function(module, JOB_TYPE, name=f"{name}.job")
    job.linkage = "internal"
    jb = ir.IRBuilder(job.append_basic_block("entry"))
    args, tid, n = job.args
    call_share(jb, kernel, _unpack(jb, args, nptrs) + [tid, n], tid)
    jb.ret_void()
    fn = ir.Function(module, ir.FunctionType(lu.VOID, [lu.PTR] * nptrs + [lu.I64]), name=name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    nt = fn.args[nptrs]
    nt = b.select(b.icmp_signed("<", nt, ir.Constant(lu.I64, 1)), ir.Constant(lu.I64, 1), nt)
    nt = b.select(b.icmp_signed(">", nt, ir.Constant(lu.I64, MAX_THREADS)),
                  ir.Constant(lu.I64, MAX_THREADS), nt)
    _pack_and_run(b, job, list(fn.args[:nptrs]), nt, nt)
    b.ret_void()
    return fn


def emit_slotted_entry(module: ir.Module, name: str, kernel: ir.Function, nptrs: int
                       ) -> ir.Function:
    """Add `void name(ptr x nptrs, i64 nshares, i64 nthreads)` running `kernel(ptrs..., share,
    nshares, slot)` for share = 0 .. nshares-1 on up to nthreads threads (clamped to [1,
    MAX_THREADS]; nshares to [1, thread_pool.MAX_SHARES]) through `xlc_pool_run_slots`: slot <
    nthreads names the thread running the share, and shares running at the same time have
    different slots. `kernel` must be safe to run concurrently for different shares in
    different slots. Returns the new function."""
    job = ir.Function(module, SLOT_JOB_TYPE, name=f"{name}.job")
    job.linkage = "internal"
    jb = ir.IRBuilder(job.append_basic_block("entry"))
    args, share, n, slot = job.args
    call_share(jb, kernel, _unpack(jb, args, nptrs) + [share, n, slot], share)
    jb.ret_void()
    fn = ir.Function(module, ir.FunctionType(lu.VOID, [lu.PTR] * nptrs + [lu.I64] * 2),
                     name=name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    one, most = ir.Constant(lu.I64, 1), ir.Constant(lu.I64, MAX_THREADS)
    ns, nt = fn.args[nptrs], fn.args[nptrs + 1]
    ns = b.select(b.icmp_signed("<", ns, one), one, ns)
    nt = b.select(b.icmp_signed("<", nt, one), one, nt)
    nt = b.select(b.icmp_signed(">", nt, most), most, nt)
    _pack_and_run(b, job, list(fn.args[:nptrs]), ns, nt, slots=True)
    b.ret_void()
    return fn
