"""A persistent thread pool in generated code, shared by every kernel of the process.

Kernels split over threads call

    void xlc_pool_run_shares(ptr job, ptr args, i64 nshares, i64 nthreads)

which runs `job(args, share, nshares)` for share = 0 .. nshares-1 on up to `nthreads` threads
(the caller and nthreads-1 of the pool's workers, started on first use up to MAX_WORKERS and
kept for the life of the process) and returns when all shares have finished. `job` must be
safe to run concurrently for different shares. (`xlc_pool_run(job, args, n)` is the same with
n shares on n threads, kept for code compiled before.)

    void xlc_pool_run_slots(ptr job, ptr args, i64 nshares, i64 nthreads)

is the same for a job that also wants to know which thread runs a share:
`job(args, share, nshares, slot)` with slot in [0, nthreads) - 0 on the caller, the worker's
index on a worker - and no two shares running at the same time have the same slot. A job keeps
per-thread scratch (the GEMM's packing buffers) indexed by slot, so any thread can take any
share and the job can have many more shares than threads.

Why a pool: starting and joining pthreads for every kernel call costs 20-40 us, and on a VM the
new thread often lands on an idle vCPU that takes 100+ us to wake up; a 2 MB kernel split over
two fresh threads then ran 2x slower than on one (measured: tanh of 512K floats, 163 us on one
thread, 319 us on two).

Why shares are taken, not assigned: any thread - the caller included - takes the next share
until none is left. On a loaded machine (another process busy on a core) a worker may not run
for milliseconds; with fixed shares per thread the caller then waited out the scheduler's time
slice (a 25 us kernel took 2 ms). Now the caller simply runs the shares that nobody took, and
only waits for shares a worker has started. Nobody spins long either: an idle worker spins
SPIN_NS after a job (so the kernels of one call find it awake), then sleeps on a futex; a
caller out of shares spins WAIT_SPIN_NS, then sleeps (it does not `sched_yield`: on a loaded
machine that hands its CPU to an unrelated process for a whole time slice).

Protocol (all shared words are 32- or 64-bit globals of the pool module; `seq_cst` atomics):
* one caller at a time holds `lock` (compare-exchange); a caller that finds it taken (another
  Python thread, or a kernel called from inside a job) runs every share itself, in order - the
  result never depends on the pool;
* each job gets a new epoch. The caller stores job and args, zeroes `done`, then publishes
  `next` = (epoch << 32) | (nshares << 16) | 0; a share is claimed by a compare-exchange of
  `next` that checks the epoch (`take_shares`), so a worker that wakes up after its job ended
  claims nothing; job/args are read after a successful claim, when they cannot change;
* every worker has a mailbox (its own cache line): the epoch it was last asked to help with,
  and a flag saying it sleeps. The caller writes the new epoch into the mailboxes of the
  workers taking part and futex-wakes those that sleep - only those, so a big pool never wakes
  a herd for a small job;
* every finished share increments `done`; the caller, when no share is left to claim, waits
  for `done == nshares`; whoever finishes the last share wakes it if it sleeps;
* after `fork()` the child has no workers: the pool notices the new pid and starts new ones.

The pool is a run-time library (`xlc.backend_cpu.runtime_lib`): compiled once per process (or linked
from an `.xlc` file's copy) and shared by every engine. `declare_pool_run(module)` declares it
in a kernel module.
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.codegen import llvm_utils as lu

log = logging.getLogger("xlc.backend_cpu")

POOL_RUN = "xlc_pool_run"
POOL_RUN_SHARES = "xlc_pool_run_shares"
POOL_RUN_SLOTS = "xlc_pool_run_slots"
MAX_WORKERS = 63
MAX_SHARES = 0xFFFF
"""Shares of one job at most (the count is packed in 16 bits of the claim word)."""
SPIN_NS = 50_000
"""How long an idle worker spins before it sleeps on a futex: long
enough that the kernels of one call find it awake, short enough that an idle worker does not
take a loaded machine's CPU from the threads doing work."""
WAIT_SPIN_NS = 20_000
"""How long the caller, out of shares, spins for the shares still running on workers before
it sleeps on a futex (which also hands its CPU to a worker preempted on it)."""

_SYS_FUTEX = 202  # x86-64 Linux
_FUTEX_WAIT_PRIVATE = 128
_FUTEX_WAKE_PRIVATE = 129
_CLOCK_MONOTONIC = 1

JOB_TYPE = ir.FunctionType(lu.VOID, [lu.PTR, lu.I64, lu.I64])
JOB_PTR = ir.PointerType(JOB_TYPE)  # prints as `ptr`; llvmlite needs the pointee to call it
RUN_TYPE = ir.FunctionType(lu.VOID, [JOB_PTR, lu.PTR, lu.I64])
RUN_SHARES_TYPE = ir.FunctionType(lu.VOID, [JOB_PTR, lu.PTR, lu.I64, lu.I64])
SLOT_JOB_TYPE = ir.FunctionType(lu.VOID, [lu.PTR, lu.I64, lu.I64, lu.I64])
"""`void job(ptr args, i64 share, i64 nshares, i64 slot)` (see `xlc_pool_run_slots`)."""
SLOT_JOB_PTR = ir.PointerType(SLOT_JOB_TYPE)
RUN_SLOTS_TYPE = ir.FunctionType(lu.VOID, [SLOT_JOB_PTR, lu.PTR, lu.I64, lu.I64])


def declare_pool_run(module: ir.Module) -> ir.Function:
    """`xlc_pool_run_shares` declared in `module` (once)."""
    fn = module.globals.get(POOL_RUN_SHARES)
    return fn if fn is not None else ir.Function(module, RUN_SHARES_TYPE,
                                                  name=POOL_RUN_SHARES)


def declare_pool_run_slots(module: ir.Module) -> ir.Function:
    """`xlc_pool_run_slots` declared in `module` (once)."""
    fn = module.globals.get(POOL_RUN_SLOTS)
    return fn if fn is not None else ir.Function(module, RUN_SLOTS_TYPE, name=POOL_RUN_SLOTS)


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
        self.next = word("next", lu.I64, _i64(0))
        self.done = word("done", lu.I32, _i32(0))
        self.caller_sleeping = word("caller_sleeping", lu.I32, _i32(0))
        self.epoch = word("epoch", lu.I32, _i32(0))
        self.job = word("job", lu.PTR, ir.Constant(lu.PTR, None))
        self.args = word("args", lu.PTR, ir.Constant(lu.PTR, None))
        self.slotted = word("slotted", lu.I32, _i32(0))  # 1: job(args, share, n, slot)
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
        self.take_shares = self._take_shares()
        self.worker = self._worker()
        self.run = self._run()
        self._run_entry(POOL_RUN_SHARES, RUN_SHARES_TYPE, 0)
        self._run_entry(POOL_RUN_SLOTS, RUN_SLOTS_TYPE, 1)
        self._run_compat()

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
        """i32 spin_until(ptr word, i32 value, i1 equal, i64 ns): spin until
        `(*word == value) == equal`, for `ns` nanoseconds at most. Returns the last value read
        (which still fails the condition when the time ran out)."""
        fn, b = self._function("xlc_pool.spin_until",
                               ir.FunctionType(lu.I32, [lu.PTR, lu.I32, lu.I1, lu.I64]))
        word, value, equal, ns = fn.args
        count = b.alloca(lu.I64)
        last = b.alloca(lu.I32)
        b.store(_i64(0), count)
        deadline = b.add(b.call(self.now, []), ns)
        loop = fn.append_basic_block("loop")
        spin = fn.append_basic_block("spin")
        check = fn.append_basic_block("check_time")
        done = fn.append_basic_block("done")
        b.branch(loop)
        b.position_at_end(loop)
        v = b.load_atomic(word, "seq_cst", 4, typ=lu.I32)
        b.store(v, last)
        b.cbranch(b.icmp_unsigned("==", b.icmp_unsigned("==", v, value), equal), done, spin)
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

    def _call_job(self, b: ir.IRBuilder, job: ir.Value, args: ir.Value, share: ir.Value,
                  n: ir.Value, slot: ir.Value, slotted: ir.Value) -> None:
        """Call `job` for `share`: as `job(args, share, n, slot)` when `slotted` (i32) is set,
        else as `job(args, share, n)`."""
        with b.if_else(b.icmp_unsigned("!=", slotted, _i32(0))) as (with_slot, without):
            with with_slot:
                b.call(b.bitcast(job, SLOT_JOB_PTR), [args, share, n, slot])
            with without:
                b.call(b.bitcast(job, JOB_PTR), [args, share, n])

    def _take_shares(self) -> ir.Function:
        """void take_shares(i32 epoch, i64 slot): claim and run shares of job `epoch` until
        none is left (or another job is current) on the thread of `slot`, counting each
        finished share in `done`.

        `next` packs (epoch << 32) | (n << 16) | index of the next unclaimed share; a share is
        claimed by one compare-exchange that also checks the epoch, so a thread that wakes up
        late can never claim a share of a job that has ended. `job` and `args` are read only
        after a claim succeeded: the job cannot end (and they cannot change) before that
        share is counted."""
        fn, b = self._function("xlc_pool.take_shares",
                               ir.FunctionType(lu.VOID, [lu.I32, lu.I64]))
        epoch = b.zext(fn.args[0], lu.I64)
        claim = fn.append_basic_block("claim")
        check = fn.append_basic_block("check")
        cas = fn.append_basic_block("cas")
        run = fn.append_basic_block("run")
        out = fn.append_basic_block("out")
        b.branch(claim)
        b.position_at_end(claim)
        v = b.load_atomic(self.next, "seq_cst", 8, typ=lu.I64)
        b.cbranch(b.icmp_unsigned("==", b.lshr(v, _i64(32)), epoch), check, out)
        b.position_at_end(check)
        index = b.and_(v, _i64(0xFFFF))
        n = b.and_(b.lshr(v, _i64(16)), _i64(0xFFFF))
        b.cbranch(b.icmp_unsigned("<", index, n), cas, out)
        b.position_at_end(cas)
        pair = b.cmpxchg(self.next, v, b.add(v, _i64(1)), "seq_cst", "seq_cst")
        b.cbranch(b.extract_value(pair, 1), run, claim)
        b.position_at_end(run)
        self._call_job(b, b.load(self.job, typ=JOB_PTR), b.load(self.args, typ=lu.PTR), index,
                       n, fn.args[1], b.load(self.slotted, typ=lu.I32))
        before = b.atomic_rmw("add", self.done, _i32(1), "seq_cst")
        last = b.icmp_unsigned("==", b.zext(b.add(before, _i32(1)), lu.I64), n)
        with b.if_then(last):
            asleep = b.load_atomic(self.caller_sleeping, "seq_cst", 4, typ=lu.I32)
            with b.if_then(b.icmp_unsigned("!=", asleep, _i32(0))):
                b.call(self.wake, [self.done, _i32(0)])
        b.branch(claim)
        b.position_at_end(out)
        b.ret_void()
        return fn

    def _worker(self) -> ir.Function:
        """ptr worker(ptr arg): the worker loop (never returns). `arg` packs the worker's tid
        (low 8 bits) and its mailbox's value when it was created (the rest): a worker that
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
        g = b.call(self.spin_until, [gen, old, ir.Constant(lu.I1, 0), _i64(SPIN_NS)])
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
        # the mailbox holds the epoch of the job to help with; the worker's slot is its tid
        b.call(self.take_shares, [g, tid])
        b.branch(top)
        return fn

    def _run(self) -> ir.Function:
        """void run(ptr job, ptr args, i64 nshares, i64 nthreads, i32 slotted): the body of
        `xlc_pool_run_shares` (slotted = 0) and `xlc_pool_run_slots` (slotted = 1)."""
        fn, b = self._function("xlc_pool.run", ir.FunctionType(
            lu.VOID, [JOB_PTR, lu.PTR, lu.I64, lu.I64, lu.I32]))
        job, args, n, nthreads, slotted = fn.args
        n = b.select(b.icmp_signed("<", n, _i64(1)), _i64(1), n)
        n = b.select(b.icmp_signed(">", n, _i64(MAX_SHARES)), _i64(MAX_SHARES), n)
        nthreads = b.select(b.icmp_signed(">", nthreads, n), n, nthreads)
        several = fn.append_basic_block("several")
        alone = fn.append_basic_block("alone")
        pooled = fn.append_basic_block("pooled")
        b.cbranch(b.icmp_signed("<=", nthreads, _i64(1)), alone, several)
        b.position_at_end(several)
        pair = b.cmpxchg(self.lock, _i32(0), _i32(1), "seq_cst", "seq_cst")
        b.cbranch(b.extract_value(pair, 1), pooled, alone)
        # One thread, or the pool is busy: every share on this thread, in order.
        b.position_at_end(alone)
        with lu.for_range(b, n, name="inline") as t:
            self._call_job(b, job, args, t, n, _i64(0), slotted)
        b.ret_void()
        # Start the workers that are missing (or all of them in a forked child).
        b.position_at_end(pooled)
        pid = b.call(self.getpid, [])
        with b.if_then(b.icmp_unsigned("!=", pid, b.load(self.pid, typ=lu.I32))):
            b.store(_i64(0), self.workers)
            b.store(pid, self.pid)
        want = b.sub(nthreads, _i64(1))
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
        # Publish the job (a new epoch) and wake the workers taking part.
        b.position_at_end(ready)
        have = b.load(self.workers, typ=lu.I64)
        workers = b.select(b.icmp_signed("<", have, want), have, want)
        b.store(job, self.job)
        b.store(args, self.args)
        b.store(slotted, self.slotted)
        b.store_atomic(_i32(0), self.done, "seq_cst", 4)
        epoch = b.add(b.load(self.epoch, typ=lu.I32), _i32(1))
        epoch = b.select(b.icmp_unsigned("==", epoch, _i32(0)), _i32(1), epoch)
        b.store(epoch, self.epoch)
        b.store_atomic(b.or_(b.shl(b.zext(epoch, lu.I64), _i64(32)), b.shl(n, _i64(16))),
                       self.next, "seq_cst", 8)
        with lu.for_range(b, b.add(workers, _i64(1)), start=_i64(1), name="notify") as t:
            gen = self._mail(b, t, 0)
            b.store_atomic(epoch, gen, "seq_cst", 4)
            asleep = b.load_atomic(self._mail(b, t, 1), "seq_cst", 4, typ=lu.I32)
            with b.if_then(b.icmp_unsigned("!=", asleep, _i32(0))):
                b.call(self.wake, [gen, _i32(0)])
        # Run shares here too (slot 0), then wait for the shares still running on workers.
        b.call(self.take_shares, [epoch, _i64(0)])
        n32 = b.trunc(n, lu.I32)
        waiting = b.append_basic_block("waiting")
        sleeping = b.append_basic_block("sleeping")
        finished = b.append_basic_block("finished")
        b.branch(waiting)
        b.position_at_end(waiting)
        left = b.call(self.spin_until, [self.done, n32, ir.Constant(lu.I1, 1),
                                        _i64(WAIT_SPIN_NS)])
        b.cbranch(b.icmp_unsigned("==", left, n32), finished, sleeping)
        b.position_at_end(sleeping)
        b.store_atomic(_i32(1), self.caller_sleeping, "seq_cst", 4)
        now_done = b.load_atomic(self.done, "seq_cst", 4, typ=lu.I32)
        with b.if_then(b.icmp_unsigned("!=", now_done, n32)):
            b.call(self.wait, [self.done, now_done])
        b.store_atomic(_i32(0), self.caller_sleeping, "seq_cst", 4)
        b.branch(waiting)
        b.position_at_end(finished)
        b.store_atomic(_i32(0), self.lock, "seq_cst", 4)
        b.ret_void()
        return fn

    def _run_entry(self, name: str, ty: ir.FunctionType, slotted: int) -> ir.Function:
        """The exported entry `name` of type `ty`: `run` with `slotted` fixed."""
        fn = ir.Function(self.m, ty, name=name)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        job, args, n, nthreads = fn.args
        b.call(self.run, [b.bitcast(job, JOB_PTR), args, n, nthreads, _i32(slotted)])
        b.ret_void()
        return fn

    def _run_compat(self) -> ir.Function:
        """void xlc_pool_run(ptr job, ptr args, i64 n): n shares on up to n threads (the entry
        point of code compiled before `xlc_pool_run_shares`; cached objects still call it)."""
        fn = ir.Function(self.m, RUN_TYPE, name=POOL_RUN)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        job, args, n = fn.args
        b.call(self.run, [job, args, n, n, _i32(0)])
        b.ret_void()
        return fn


def build_pool_module() -> ir.Module:
    """The LLVM module of the pool (see the module docstring)."""
    return _Pool().m
