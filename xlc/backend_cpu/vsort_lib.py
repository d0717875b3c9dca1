"""A vectorised sort of 32- and 64-bit numbers (AVX-512): the run-time library behind fast
single-operand sorts.

    i64 xlc_vsort_u32(ptr src, ptr dst, i64 n, i64 nthreads, i64 mode)
    i64 xlc_vsort_u64(ptr src, ptr dst, i64 n, i64 nthreads, i64 mode)

sort the `n` elements at `src` into `dst` (which may be `src`) on up to `nthreads` threads,
with no scratch memory. `mode` says what the elements are (MODE_UNSIGNED, MODE_SIGNED or
MODE_FLOAT, the latter ordered like TOTALORDER: -NaN < -inf < ... < -0 < +0 < ... < +NaN),
plus MODE_DESCENDING for a descending order and MODE_CANON (`vsort_kernels.py`; the call
returns 1 and writes nothing when it refuses, 0 when it sorted). Elements become unsigned
keys that order the same way as the first partition reads them, and keys become elements
again as the leaves write them (`vsort_kernels.encode/decode`), so the data is read once and
written once beyond the sort's own passes. The sort is not stable: the emitter
(`emit_vsort.py`) uses it only where equal keys are equal bits, so no order among equals can
be observed.

The sort is a quicksort whose partition and leaves are SIMD, in the manner of the vectorised
quicksorts of Bramas (2017) and Intel's x86-simd-sort (`vsort_kernels.py` has the pieces):
* **partition**: UNROLL vectors of W keys at a time, the keys below the pivot compress-stored
  (`vpcompressd/q`) at the left write position and the others at the right one, in place;
* **pivot**: the median of a sorted sample gathered at equal steps;
* **leaves** of at most LEAF_VECTORS * W keys: a bitonic network in registers laid out so that
  most of its comparisons are between whole vectors;
* **duplicates**: a range with nothing below its pivot is split into "equal to the pivot"
  (done) and "above it", so many equal keys cost one pass;
* **worst case**: past 2 log2(n) + 4 levels a range is heap-sorted, so the sort is
  O(n log n) whatever the input;
* **threads**: after the first partition, the largest range is partitioned until there are
  RANGES_PER_THREAD ranges per thread, then the thread pool sorts the ranges (one share each).

The module is portable LLVM IR except one `knot` (inline x86 assembly), and only AVX-512 has
compress stores, so the emitter calls the library only on AVX-512 hosts (`available()`).
"""
from __future__ import annotations

from llvmlite import ir

from xlc.backend_cpu.vsort_kernels import (
    MODE_CANON,
    MODE_DESCENDING,
    MODE_FLOAT,
    MODE_KIND,
    MODE_SIGNED,
    MODE_UNSIGNED,
    SortKernels,
    i64,
)
from xlc.codegen import llvm_utils as lu
from xlc.hlo.shape import PrimitiveType

__all__ = ["MODE_CANON", "MODE_DESCENDING", "MODE_FLOAT", "MODE_KIND", "MODE_SIGNED",
           "MODE_UNSIGNED", "PARALLEL_MIN", "available", "build_vsort_library"]

PARALLEL_MIN = 1 << 16
"""Arrays shorter than this are sorted on the calling thread alone."""

RANGES_PER_THREAD = 1
"""Ranges cut per thread before the pool sorts them (shares are taken, not assigned, so a
thread that is not scheduled leaves its share to the others)."""

MAX_RANGES = 64
"""Capacity of the range table."""

def available() -> bool:
    """Whether the host can run the library at full speed (AVX-512F compress stores)."""
    return "+avx512f" in lu.host_cpu()[1].split(",")


class _Sorter(SortKernels):
    """The quicksort, its threaded driver and the exported function of one key width."""

    def __init__(self, module: ir.Module, bits: int) -> None:
        super().__init__(module, bits)
        self.qsort = self._qsort()
        self.job = self._job()
        self.check_job = self._check_job()
        self.entry = self._public()

    def _leaf(self, b: ir.IRBuilder, src: ir.Value, dst: ir.Value, n: ir.Value,
              enc: ir.Value, dec: ir.Value) -> None:
        """Sort src[0, n) into dst, n <= LEAF, with the smallest network that holds it."""
        fn = b.function
        done = fn.append_basic_block("leaf.done")
        for m in self.leaf_sizes():
            run = fn.append_basic_block(f"leaf{m}")
            nxt = fn.append_basic_block(f"leaf{m}.next")
            b.cbranch(b.icmp_signed("<=", n, i64(m * self.w)), run, nxt)
            b.position_at_end(run)
            b.call(self.small_fns[m], [src, dst, n, enc, dec])
            b.branch(done)
            b.position_at_end(nxt)
        b.branch(done)
        b.position_at_end(done)

    def _depth(self, b: ir.IRBuilder, n: ir.Value) -> ir.Value:
        """The quicksort level budget for n keys: 2 log2(n) + 4."""
        log2 = b.sub(i64(63), lu.intrinsic(b, "llvm.ctlz", [b.or_(n, i64(1)),
                                                            ir.Constant(lu.I1, 0)]))
        return b.add(b.mul(log2, i64(2)), i64(4))

    def _qsort(self) -> ir.Function:
        """qsort(ptr a, i64 n, i64 depth, i64 mode): sort the keys a[0, n) and leave them as
        elements of `mode`. Recurses on the smaller side, loops on the larger; heap sort once
        `depth` levels are spent."""
        fn, b = self.fn("xlc_vsort_qsort", ir.VoidType(), [lu.PTR, lu.I64, lu.I64, lu.I64])
        a0, n0, d0, mode = fn.args
        raw = i64(MODE_UNSIGNED)
        pre = b.block
        head = fn.append_basic_block("head")
        leaf = fn.append_basic_block("leaf")
        deep = fn.append_basic_block("deep")
        heap = fn.append_basic_block("heap")
        split = fn.append_basic_block("split")
        dup = fn.append_basic_block("dup")
        two = fn.append_basic_block("two")
        b.branch(head)
        b.position_at_end(head)
        a = b.phi(lu.PTR, name="a")
        n = b.phi(lu.I64, name="n")
        depth = b.phi(lu.I64, name="depth")
        a.add_incoming(a0, pre)
        n.add_incoming(n0, pre)
        depth.add_incoming(d0, pre)
        b.cbranch(b.icmp_signed("<=", n, i64(self.leaf)), leaf, deep)
        b.position_at_end(leaf)
        self._leaf(b, a, a, n, raw, mode)
        b.ret_void()
        b.position_at_end(deep)
        b.cbranch(b.icmp_signed("<=", depth, i64(0)), heap, split)
        b.position_at_end(heap)
        b.call(self.heap, [a, n])
        b.call(self.decode_range, [a, i64(0), n, mode])
        b.ret_void()
        b.position_at_end(split)
        d1 = b.sub(depth, i64(1))
        p = b.call(self.pivot, [a, n, raw])
        m = b.call(self.part_lt, [a, n, p])
        b.cbranch(b.icmp_signed("==", m, i64(0)), dup, two)
        # nothing below the pivot (a sampled key, so the minimum): the keys equal to it are
        # in place
        b.position_at_end(dup)
        eq = b.call(self.part_le, [a, n, p])
        b.call(self.decode_range, [a, i64(0), eq, mode])
        a.add_incoming(self.ptr(b, a, eq), dup)
        n.add_incoming(b.sub(n, eq), dup)
        depth.add_incoming(d1, dup)
        b.branch(head)
        b.position_at_end(two)
        right = b.sub(n, m)
        left_small = b.icmp_signed("<", m, right)
        am = self.ptr(b, a, m)
        b.call(fn, [b.select(left_small, a, am), b.select(left_small, m, right), d1, mode])
        a.add_incoming(b.select(left_small, am, a), b.block)
        n.add_incoming(b.select(left_small, right, m), b.block)
        depth.add_incoming(d1, b.block)
        b.branch(head)
        return fn

    def _job(self) -> ir.Function:
        """The pool job sorting ranges: share s sorts range s of the table `args` points to
        (MAX_RANGES starts, MAX_RANGES sizes, the mode; i64 each)."""
        from xlc.backend_cpu.thread_pool import JOB_TYPE

        fn = ir.Function(self.m, JOB_TYPE, name=f"xlc_vsort_job_u{self.bits}")
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        table, share, _nshares = fn.args

        def word(i: ir.Value) -> ir.Value:
            return b.load(b.gep(table, [i], source_etype=lu.I64), typ=lu.I64)

        start = b.inttoptr(word(share), lu.PTR)
        size = word(b.add(share, i64(MAX_RANGES)))
        b.call(self.qsort, [start, size, self._depth(b, size), word(i64(2 * MAX_RANGES))])
        b.ret_void()
        return fn

    def _check_job(self) -> ir.Function:
        """The pool job of MODE_CANON's check: args = {src, n, odd}; share s of k checks
        [n s / k, n (s+1) / k) and or-s its answer into odd."""
        from xlc.backend_cpu.thread_pool import JOB_TYPE

        fn = ir.Function(self.m, JOB_TYPE, name=f"xlc_vsort_check_job_u{self.bits}")
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        args, share, nshares = fn.args
        src, n = (b.load(b.gep(args, [i64(i)], source_etype=lu.I64), typ=lu.I64)
                  for i in range(2))
        lo = b.sdiv(b.mul(n, share), nshares)
        hi = b.sdiv(b.mul(n, b.add(share, i64(1))), nshares)
        odd = b.call(self.check_range, [b.inttoptr(src, lu.PTR), lo, hi])
        b.atomic_rmw("or", b.gep(args, [i64(2)], source_etype=lu.I64), odd, "monotonic")
        b.ret_void()
        return fn

    def _public(self) -> ir.Function:
        """i64 xlc_vsort_uN(ptr src, ptr dst, i64 n, i64 nthreads, i64 mode) (module
        docstring): the MODE_CANON check, then a leaf for short arrays, else the first
        partition (src -> dst, making keys), then the ranges (cut further and handed to the
        pool with several threads, else sorted here)."""
        from xlc.backend_cpu.thread_pool import declare_pool_run

        fn = ir.Function(self.m, ir.FunctionType(lu.I64, [lu.PTR, lu.PTR, lu.I64, lu.I64,
                                                          lu.I64]),
                         name=f"xlc_vsort_u{self.bits}")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        src, dst, n, threads, mode_in = fn.args
        pool = declare_pool_run(self.m)
        par = b.and_(b.icmp_signed(">", threads, i64(1)),
                     b.icmp_signed(">=", n, i64(PARALLEL_MIN)))
        with b.goto_entry_block():
            args = b.alloca(lu.I64, size=3, name="check.args")
            table = b.alloca(lu.I64, size=2 * MAX_RANGES + 1, name="ranges")
            count = b.alloca(lu.I64, name="count")
            big_i = b.alloca(lu.I64, name="big")
            cut_slot = b.alloca(lu.I64, name="cut")
        mode = b.and_(mode_in, i64(MODE_KIND | MODE_DESCENDING))

        # MODE_CANON: refuse a line with an odd float before writing anything
        def word(i: int | ir.Value) -> ir.Value:
            return b.gep(args, [i if isinstance(i, ir.Value) else i64(i)], source_etype=lu.I64)

        with b.if_then(b.icmp_signed("!=", b.and_(mode_in, i64(MODE_CANON)), i64(0))):
            for i, v in enumerate((b.ptrtoint(src, lu.I64), n, i64(0))):
                b.store(v, word(i))
            with b.if_else(par) as (many, one):
                with many:
                    b.call(pool, [self.check_job, args, b.mul(threads, i64(2)), threads])
                with one:
                    b.store(b.call(self.check_range, [src, i64(0), n]), word(2))
            with b.if_then(b.icmp_signed("!=", b.load(word(2), typ=lu.I64), i64(0))):
                b.ret(i64(1))
        with b.if_then(b.icmp_signed("<=", n, i64(self.leaf))):
            self._leaf(b, src, dst, n, mode, mode)
            b.ret(i64(0))

        # the first partition makes keys; its ranges go into the table
        def slot(base: int, i: ir.Value) -> ir.Value:
            return b.gep(table, [b.add(i, i64(base))], source_etype=lu.I64)

        def add_range(start: ir.Value, size: ir.Value) -> None:
            c = b.load(count, typ=lu.I64)
            b.store(b.ptrtoint(start, lu.I64), slot(0, c))
            b.store(size, slot(MAX_RANGES, c))
            b.store(b.add(c, i64(1)), count)

        b.store(mode, slot(2 * MAX_RANGES, i64(0)))
        b.store(i64(0), count)
        p = b.call(self.wide_pivot, [src, n, mode])
        m = b.call(self.part_first, [src, dst, n, p, mode])
        with b.if_else(b.icmp_signed("==", m, i64(0))) as (none_below, both):
            with none_below:  # the pivot is the smallest key: drop the keys equal to it
                eq = b.call(self.part_le, [dst, n, p])
                b.call(self.decode_range, [dst, i64(0), eq, mode])
                add_range(self.ptr(b, dst, eq), b.sub(n, eq))
            with both:
                add_range(dst, m)
                add_range(self.ptr(b, dst, m), b.sub(n, m))
        with b.if_then(b.not_(par)):
            with lu.for_range(b, b.load(count, typ=lu.I64), name="serial") as i:
                start = b.inttoptr(b.load(slot(0, i), typ=lu.I64), lu.PTR)
                size = b.load(slot(MAX_RANGES, i), typ=lu.I64)
                b.call(self.qsort, [start, size, self._depth(b, size), mode])
            b.ret(i64(0))

        # threads: cut the largest range until there are enough, then sort them in the pool
        want = b.mul(threads, i64(RANGES_PER_THREAD))
        want = b.select(b.icmp_signed(">", want, i64(MAX_RANGES - 1)), i64(MAX_RANGES - 1),
                        want)
        head = fn.append_basic_block("split")
        body = fn.append_basic_block("split.body")
        run = fn.append_basic_block("run")
        b.branch(head)
        b.position_at_end(head)
        cnt = b.load(count, typ=lu.I64)
        b.store(i64(0), big_i)
        with lu.for_range(b, cnt, 1, name="largest") as i:
            cur = b.load(big_i, typ=lu.I64)
            bigger = b.icmp_signed(">", b.load(slot(MAX_RANGES, i), typ=lu.I64),
                                   b.load(slot(MAX_RANGES, cur), typ=lu.I64))
            b.store(b.select(bigger, i, cur), big_i)
        bi = b.load(big_i, typ=lu.I64)
        ra = b.inttoptr(b.load(slot(0, bi), typ=lu.I64), lu.PTR)
        rn = b.load(slot(MAX_RANGES, bi), typ=lu.I64)
        enough = b.or_(b.icmp_signed(">=", cnt, want),
                       b.icmp_signed("<=", rn, i64(PARALLEL_MIN // 2)))
        b.cbranch(enough, run, body)
        b.position_at_end(body)
        p = b.call(self.wide_pivot, [ra, rn, i64(MODE_UNSIGNED)])
        m = b.call(self.part_lt, [ra, rn, p])
        none_below = b.icmp_signed("==", m, i64(0))
        b.store(m, cut_slot)
        with b.if_then(none_below):
            eq = b.call(self.part_le, [ra, rn, p])
            b.call(self.decode_range, [ra, i64(0), eq, mode])
            b.store(eq, cut_slot)
        cut = b.load(cut_slot, typ=lu.I64)
        # range bi becomes [ra, ra+cut) (dropped when it holds the keys equal to the pivot),
        # the new range cnt [ra+cut, ra+rn)
        b.store(b.select(none_below, i64(0), cut), slot(MAX_RANGES, bi))
        b.store(b.ptrtoint(self.ptr(b, ra, cut), lu.I64), slot(0, cnt))
        b.store(b.sub(rn, cut), slot(MAX_RANGES, cnt))
        b.store(b.add(cnt, i64(1)), count)
        b.branch(head)
        b.position_at_end(run)
        b.call(pool, [self.job, table, cnt, threads])
        b.ret(i64(0))
        return fn


def build_vsort_library(pt: PrimitiveType) -> ir.Module:
    """The library module of one key width: `xlc_vsort_u32` (pt u32) or `xlc_vsort_u64`
    (u64), see the module docstring. The widths are separate libraries, so a program that
    sorts one compiles one (about 1 s of LLVM time each, once per process or cache)."""
    module = lu.new_module(f"xlc_vsort_{pt.text}")
    _Sorter(module, pt.bit_width)
    return module
