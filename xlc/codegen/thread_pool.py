"""A persistent thread pool in generated code, shared by every kernel of the process.

Kernels split over threads call

    void xlc_pool_run(ptr job, ptr args, i64 n)

which runs `job(args, tid, n)` for tid = 0 .. n-1 and returns when all have finished: tid 0 on
the calling thread, the others on the pool's worker threads (started on first use, one per
extra share up to MAX_WORKERS, and kept for the life of the process). `job` must be safe to run
concurrently for different tids.

Why a pool: starting and joining pthreads for every kernel call costs 20-40 us, and on a VM the
new thread often lands on an idle vCPU that takes 100+ us to wake up; a 2 MB kernel split over
two fresh threads then ran 2x slower than on one (measured: tanh of 512K floats, 163 us on one
thread, 319 us on two). Workers here spin for SPIN_NS after each job (so back-to-back kernels
find them awake), then sleep on a futex.

Protocol (all shared words are 32- or 64-bit globals of the pool module; `seq_cst` atomics):
* one caller at a time holds `lock` (compare-exchange); a caller that finds it taken (another
  Python thread, or a kernel called from inside a job) runs every share itself, in order - the
  result never depends on the pool;
* every worker has a mailbox (its own cache line): a generation counter it waits on and a
  flag saying it sleeps. The caller publishes job/args/n, sets `pending` to the number of
  workers taking part (tid < n), bumps each of their generations and futex-wakes those that
  sleep - only those, so a big pool never wakes a herd for a small job; each worker runs its
  share, then decrements `pending`; the last one wakes the caller if it sleeps;
* shares with no worker (thread creation failed) run on the caller after its own share;
* after `fork()` the child has no workers: the pool notices the new pid and starts new ones.

The pool is a run-time library (`xlc.codegen.runtime_lib`): compiled once per process (or linked
from an `.xlc` file's copy) and shared by every engine. `declare_pool_run(module)` declares it
in a kernel module.
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.codegen import llvm_utils as lu

log = logging.getLogger("xlc.codegen")

POOL_RUN = "xlc_pool_run"
MAX_WORKERS = 63
SPIN_NS = 1_000_000
"""How long an idle worker (or a waiting caller) spins before it sleeps on a futex."""

_SYS_FUTEX = 202  # x86-64 Linux
_FUTEX_WAIT_PRIVATE = 128
_FUTEX_WAKE_PRIVATE = 129
_CLOCK_MONOTONIC = 1

JOB_TYPE = ir.FunctionType(lu.VOID, [lu.PTR, lu.I64, lu.I64])
JOB_PTR = ir.PointerType(JOB_TYPE)  # prints as `ptr`; llvmlite needs the pointee to call it
RUN_TYPE = ir.FunctionType(lu.VOID, [JOB_PTR, lu.PTR, lu.I64])

def declare_pool_run(module: ir.Module) -> ir.Function:
    """`xlc_pool_run` declared in `module` (once)."""
    fn = module.globals.get(POOL_RUN)
    return fn if fn is not None else ir.Function(module, RUN_TYPE, name=POOL_RUN)


# ---- the pool module ----------------------------------------------------------------------
def _i32(v: int) -> ir.Constant:
    return ir.Constant(lu.I32, v)


def _i64(v: int) -> ir.Constant:
    return ir.Constant(lu.I64, v)


class _Pool:
    """Builds the pool's globals and functions into one module."""

    def __init__(self) -> None:
        self.m = lu.new_module("xlc_thread_pool")
        self.x86 = self.m.triple.startswith(("x86_64", "i686", "i386"))

        def word(name: str, ty: ir.Type, init: ir.Constant) -> ir.GlobalVariable:
            g = ir.GlobalVariable(self.m, ty, name=f"xlc_pool.{name}")
            g.linkage = "internal"
            g.initializer = init
            g.align = 64  # one cache line each: no false sharing between the hot words
            return g

        self.lock = word("lock", lu.I32, _i32(0))
        # mailbox t = [gen, sleeping, padding to 64 bytes]
        self.mail_ty = ir.ArrayType(ir.ArrayType(lu.I32, 16), MAX_WORKERS + 1)
        self.mail = word("mail", self.mail_ty, ir.Constant(self.mail_ty, None))
        self.pending = word("pending", lu.I32, _i32(0))
        self.job = word("job", lu.PTR, ir.Constant(lu.PTR, None))
        self.args = word("args", lu.PTR, ir.Constant(lu.PTR, None))
        self.n = word("n", lu.I64, _i64(0))
        self.workers = word("workers", lu.I64, _i64(0))
        self.pid = word("pid", lu.I32, _i32(0))
        decl = self._declare
        self.syscall = decl("syscall", ir.FunctionType(lu.I64, [lu.I64], var_arg=True))
        self.getpid = decl("getpid", ir.FunctionType(lu.I32, []))
        self.clock = decl("clock_gettime", ir.FunctionType(lu.I32, [lu.I32, lu.PTR]))
        self.create = decl("pthread_create",
                           ir.FunctionType(lu.I32, [lu.PTR, lu.PTR, lu.PTR, lu.PTR]))
        self.detach = decl("pthread_detach", ir.FunctionType(lu.I32, [lu.I64]))
        self.now = self._now()
        self.wait = self._futex("wait")
        self.wake = self._futex("wake")
        self.spin_until = self._spin_until()
        self.worker = self._worker()
        self.run = self._run()

    def _declare(self, name: str, ty: ir.FunctionType) -> ir.Function:
        return ir.Function(self.m, ty, name=name)

    def _function(self, name: str, ty: ir.FunctionType) -> tuple[ir.Function, ir.IRBuilder]:
        fn = ir.Function(self.m, ty, name=name)
        fn.linkage = "internal"
        return fn, ir.IRBuilder(fn.append_basic_block("entry"))

    def _mail(self, b: ir.IRBuilder, tid: ir.Value, field: int) -> ir.Value:
        """Address of worker `tid`'s generation (field 0) or sleeping flag (field 1)."""
        base = b.ptrtoint(self.mail, lu.I64)
        return b.inttoptr(b.add(base, b.add(b.mul(tid, _i64(64)), _i64(4 * field))),
                          ir.PointerType(lu.I32))

    def _pause(self, b: ir.IRBuilder) -> None:
        if self.x86:
            fn = self.m.globals.get("llvm.x86.sse2.pause") or ir.Function(
                self.m, ir.FunctionType(lu.VOID, []), name="llvm.x86.sse2.pause")
            b.call(fn, [])

    def _now(self) -> ir.Function:
        """i64 now(): CLOCK_MONOTONIC in nanoseconds."""
        fn, b = self._function("xlc_pool.now", ir.FunctionType(lu.I64, []))
        ts = b.alloca(ir.ArrayType(lu.I64, 2))
        ts.type = lu.PTR
        b.call(self.clock, [_i32(_CLOCK_MONOTONIC), ts])
        sec = b.load(ts, typ=lu.I64)
        nsec = b.load(b.gep(ts, [_i64(1)], source_etype=lu.I64), typ=lu.I64)
        b.ret(b.add(b.mul(sec, _i64(1_000_000_000)), nsec))
        return fn

    def _futex(self, op: str) -> ir.Function:
        """void wait(ptr word, i32 expected) / void wake(ptr word, i32 unused)."""
        fn, b = self._function(f"xlc_pool.{op}", ir.FunctionType(lu.VOID, [lu.PTR, lu.I32]))
        word, value = fn.args
        if op == "wait":
            b.call(self.syscall, [_i64(_SYS_FUTEX), word, _i32(_FUTEX_WAIT_PRIVATE), value,
                                  ir.Constant(lu.PTR, None)])
        else:
            b.call(self.syscall, [_i64(_SYS_FUTEX), word, _i32(_FUTEX_WAKE_PRIVATE),
                                  _i32(0x7FFFFFFF)])
        b.ret_void()
        return fn

    def _spin_until(self) -> ir.Function:
        """i32 spin_until(ptr word, i32 old, i1 changed): spin (SPIN_NS at most) until
        `*word != old` (changed) or `*word == 0` (not changed); returns the last value read,
        which still satisfies the wait condition when the time ran out."""
        fn, b = self._function("xlc_pool.spin_until",
                               ir.FunctionType(lu.I32, [lu.PTR, lu.I32, lu.I1]))
        word, old, changed = fn.args
        count = b.alloca(lu.I64)
        last = b.alloca(lu.I32)
        b.store(_i64(0), count)
        deadline = b.add(b.call(self.now, []), _i64(SPIN_NS))
        loop = fn.append_basic_block("loop")
        spin = fn.append_basic_block("spin")
        check = fn.append_basic_block("check_time")
        done = fn.append_basic_block("done")
        b.branch(loop)
        b.position_at_end(loop)
        v = b.load_atomic(word, "seq_cst", 4, typ=lu.I32)
        b.store(v, last)
        stop = b.select(changed, b.icmp_unsigned("!=", v, old),
                        b.icmp_unsigned("==", v, _i32(0)))
        b.cbranch(stop, done, spin)
        b.position_at_end(spin)
        self._pause(b)
        c = b.add(b.load(count), _i64(1))
        b.store(c, count)
        b.cbranch(b.icmp_unsigned("==", b.and_(c, _i64(63)), _i64(0)), check, loop)
        b.position_at_end(check)
        b.cbranch(b.icmp_signed(">", b.call(self.now, []), deadline), done, loop)
        b.position_at_end(done)
        b.ret(b.load(last))
        return fn

    def _worker(self) -> ir.Function:
        """ptr worker(ptr arg): the worker loop (never returns). `arg` packs the worker's tid
        (low 8 bits) and the generation current when it was created (the rest): a worker that
        starts after its first job was published must still see that job as new."""
        fn, b = self._function("xlc_pool.worker", ir.FunctionType(lu.PTR, [lu.PTR]))
        arg = b.ptrtoint(fn.args[0], lu.I64)
        tid = b.and_(arg, _i64(0xFF))
        seen = b.alloca(lu.I32)
        b.store(b.trunc(b.lshr(arg, _i64(8)), lu.I32), seen)
        top = fn.append_basic_block("top")
        sleep = fn.append_basic_block("sleep")
        work = fn.append_basic_block("work")
        gen = self._mail(b, tid, 0)
        sleeping = self._mail(b, tid, 1)
        b.branch(top)
        b.position_at_end(top)
        old = b.load(seen)
        g = b.call(self.spin_until, [gen, old, ir.Constant(lu.I1, 1)])
        b.cbranch(b.icmp_unsigned("!=", g, old), work, sleep)
        b.position_at_end(sleep)
        b.store_atomic(_i32(1), sleeping, "seq_cst", 4)
        with b.if_then(b.icmp_unsigned("==", b.load_atomic(gen, "seq_cst", 4, typ=lu.I32),
                                       old)):
            b.call(self.wait, [gen, old])
        b.store_atomic(_i32(0), sleeping, "seq_cst", 4)
        b.branch(top)
        b.position_at_end(work)
        b.store(g, seen)
        n = b.load(self.n, typ=lu.I64)
        with b.if_then(b.icmp_signed("<", tid, n)):  # a share of this job is ours
            job = b.load(self.job, typ=JOB_PTR)
            b.call(job, [b.load(self.args, typ=lu.PTR), tid, n])
            before = b.atomic_rmw("sub", self.pending, _i32(1), "seq_cst")
            with b.if_then(b.icmp_unsigned("==", before, _i32(1))):
                b.call(self.wake, [self.pending, _i32(0)])
        b.branch(top)
        return fn

    def _run(self) -> ir.Function:
        """void xlc_pool_run(ptr job, ptr args, i64 n) (see the module docstring)."""
        fn = ir.Function(self.m, RUN_TYPE, name=POOL_RUN)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        job, args, n = fn.args
        n = b.select(b.icmp_signed("<", n, _i64(1)), _i64(1), n)

        def call_job(t: ir.Value) -> None:
            b.call(job, [args, t, n])

        one = fn.append_basic_block("one")
        several = fn.append_basic_block("several")
        alone = fn.append_basic_block("alone")
        pooled = fn.append_basic_block("pooled")
        b.cbranch(b.icmp_signed("==", n, _i64(1)), one, several)
        b.position_at_end(one)
        call_job(_i64(0))
        b.ret_void()
        b.position_at_end(several)
        pair = b.cmpxchg(self.lock, _i32(0), _i32(1), "seq_cst", "seq_cst")
        b.cbranch(b.extract_value(pair, 1), pooled, alone)
        # The pool is busy: every share on this thread, in order.
        b.position_at_end(alone)
        with lu.for_range(b, n, name="inline") as t:
            call_job(t)
        b.ret_void()
        # Start the workers that are missing (or all of them in a forked child).
        b.position_at_end(pooled)
        pid = b.call(self.getpid, [])
        with b.if_then(b.icmp_unsigned("!=", pid, b.load(self.pid, typ=lu.I32))):
            b.store(_i64(0), self.workers)
            b.store(pid, self.pid)
        want = b.sub(n, _i64(1))
        want = b.select(b.icmp_signed(">", want, _i64(MAX_WORKERS)), _i64(MAX_WORKERS), want)
        with b.goto_entry_block():
            handle = b.alloca(lu.I64)
        handle.type = lu.PTR
        grow = b.append_basic_block("grow")
        spawn = b.append_basic_block("spawn")
        ready = b.append_basic_block("ready")
        b.branch(grow)
        b.position_at_end(grow)
        have = b.load(self.workers, typ=lu.I64)
        b.cbranch(b.icmp_signed("<", have, want), spawn, ready)
        b.position_at_end(spawn)
        tid = b.add(have, _i64(1))
        gen_now = b.zext(b.load_atomic(self._mail(b, tid, 0), "seq_cst", 4, typ=lu.I32),
                         lu.I64)
        arg = b.or_(b.shl(gen_now, _i64(8)), tid)
        rc = b.call(self.create, [handle, ir.Constant(lu.PTR, None), self.worker,
                                  b.inttoptr(arg, lu.PTR)])
        ok = b.icmp_signed("==", rc, _i32(0))
        with b.if_then(ok):
            b.call(self.detach, [b.load(handle, typ=lu.I64)])
            b.store(b.add(have, _i64(1)), self.workers)
        b.cbranch(ok, grow, ready)
        # Publish the job and wake the workers.
        b.position_at_end(ready)
        have = b.load(self.workers, typ=lu.I64)  # workers with tid < n take part
        workers = b.select(b.icmp_signed("<", have, want), have, want)
        b.store(job, self.job)
        b.store(args, self.args)
        b.store(n, self.n)
        any_workers = b.icmp_signed(">", workers, _i64(0))
        b.store_atomic(b.trunc(workers, lu.I32), self.pending, "seq_cst", 4)
        with lu.for_range(b, b.add(workers, _i64(1)), start=_i64(1), name="notify") as t:
            gen = self._mail(b, t, 0)
            b.atomic_rmw("add", gen, _i32(1), "seq_cst")
            asleep = b.load_atomic(self._mail(b, t, 1), "seq_cst", 4, typ=lu.I32)
            with b.if_then(b.icmp_unsigned("!=", asleep, _i32(0))):
                b.call(self.wake, [gen, _i32(0)])
        call_job(_i64(0))
        # Shares with no worker (thread creation failed) run here.
        with lu.for_range(b, n, start=b.add(workers, _i64(1)), name="rest") as t:
            call_job(t)
        # Wait for the workers.
        with b.if_then(any_workers):
            waiting = b.append_basic_block("waiting")
            sleeping = b.append_basic_block("sleeping")
            finished = b.append_basic_block("finished")
            b.branch(waiting)
            b.position_at_end(waiting)
            left = b.call(self.spin_until, [self.pending, _i32(0), ir.Constant(lu.I1, 0)])
            b.cbranch(b.icmp_unsigned("==", left, _i32(0)), finished, sleeping)
            b.position_at_end(sleeping)
            b.call(self.wait, [self.pending, left])
            b.branch(waiting)
            b.position_at_end(finished)
        b.store_atomic(_i32(0), self.lock, "seq_cst", 4)
        b.ret_void()
        return fn


def build_pool_module() -> ir.Module:
    """The LLVM module of the pool (see the module docstring)."""
    return _Pool().m
