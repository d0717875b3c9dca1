"""The SIMD pieces of the vectorised sort (`vsort_lib.py`): key maps, bitonic networks and
leaves, the compress-store partition, pivots, the heap-sort fallback.

Every function works on unsigned keys of one width (32 or 64 bits, W = 512 / bits lanes per
vector). Keys come from elements through `mode` (`encode`/`decode`): the first partition and
the leaves map on the fly, so a sort reads the elements once and writes the sorted elements
once, with no separate passes over the data.
"""
from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from xlc.codegen import llvm_utils as lu

LEAF_VECTORS = 16
"""Ranges of at most this many vectors of keys are sorted by a bitonic network in
registers."""

UNROLL = 8
"""Vectors a partition step reads at once (their stores do not wait for each other)."""

SMALL_RANGE = 4096
"""Ranges shorter than this take their pivot from one vector of samples."""

SAMPLE_VECTORS = 4
"""Vectors of keys sampled (and sorted) to pick a pivot of a longer range."""

MODE_UNSIGNED, MODE_SIGNED, MODE_FLOAT = 0, 1, 2
MODE_KIND = 3
MODE_DESCENDING = 4
MODE_CANON = 8
"""`mode` of `xlc_vsort_uN`: how elements map to keys (unsigned, signed, float total
order), plus MODE_DESCENDING to sort in descending order and, for floats, MODE_CANON to
refuse (return 1, having written nothing) a line holding -0.0 or a NaN other than the
canonical +NaN: a "NaNs last" comparator equates those with other bits, so their order
is the stable sort's business."""


def i64(v: int) -> ir.Constant:
    """An i64 constant."""
    return ir.Constant(lu.I64, v)


Masks = tuple[ir.Value, ir.Value, ir.Value]
"""(F, S, D) of a mode (`SortKernels.masks`), scalars or splatted vectors."""


class SortKernels:
    """The functions of one key width (32 or 64 bits) in `module`."""

    def __init__(self, module: ir.Module, bits: int) -> None:
        self.m = module
        self.bits = bits
        self.ety = ir.IntType(bits)
        self.w = 512 // bits
        self.vty = ir.VectorType(self.ety, self.w)
        self.mty = ir.VectorType(lu.I1, self.w)
        self.umax = ir.Constant(self.ety, (1 << bits) - 1)
        self.leaf = LEAF_VECTORS * self.w
        self.unroll = min(UNROLL, LEAF_VECTORS // 2)
        self.small_fns = {m: self._small(m) for m in self.leaf_sizes()}
        for f in self.small_fns.values():  # big straight-line code: compile it once
            f.attributes.add("noinline")
        self.part_lt = self._partition(le=False, first=False)
        self.part_le = self._partition(le=True, first=False)
        self.part_first = self._partition(le=False, first=True)
        self.heap = self._heapsort()
        self.pivot = self._pivot(SAMPLE_VECTORS, "pivot")
        self.wide_pivot = self._wide_pivot()
        self.decode_range = self._decode_range()
        self.check_range = self._check_range()

    # ---- helpers ------------------------------------------------------------------------
    def leaf_sizes(self) -> list[int]:
        """Vector counts of the leaf networks: 1, 2, 4, ... LEAF_VECTORS."""
        sizes, m = [], 1
        while m <= LEAF_VECTORS:
            sizes.append(m)
            m *= 2
        return sizes

    def fn(self, name: str, ret: ir.Type, args: list[ir.Type]) -> tuple[ir.Function,
                                                                        ir.IRBuilder]:
        """A new internal function `<name>_u<bits>` and a builder at its entry."""
        fn = ir.Function(self.m, ir.FunctionType(ret, args), name=f"{name}_u{self.bits}")
        fn.linkage = "internal"
        return fn, ir.IRBuilder(fn.append_basic_block("entry"))

    def _iota(self) -> ir.Constant:
        return ir.Constant(self.vty, list(range(self.w)))

    def _splat(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return lu.splat(b, x, self.w)

    def ptr(self, b: ir.IRBuilder, base: ir.Value, pos: ir.Value) -> ir.Value:
        """Address of key `pos` of the array at `base`."""
        return b.gep(base, [pos], inbounds=True, source_etype=self.ety)

    def _load(self, b: ir.IRBuilder, base: ir.Value, pos: ir.Value) -> ir.Value:
        return b.load(self.ptr(b, base, pos), typ=self.vty, align=self.bits // 8)

    def _mask_below(self, b: ir.IRBuilder, count: ir.Value) -> ir.Value:
        """Lanes i < count (count an i64, may be negative or above W)."""
        c = b.select(b.icmp_signed("<", count, i64(0)), i64(0), count)
        c = b.select(b.icmp_signed(">", c, i64(self.w)), i64(self.w), c)
        return b.icmp_unsigned("<", self._iota(), self._splat(b, b.trunc(c, self.ety)
                                                              if self.bits < 64 else c))

    def _masked_load(self, b: ir.IRBuilder, base: ir.Value, pos: ir.Value,
                     mask: ir.Value) -> ir.Value:
        return lu.intrinsic(b, "llvm.masked.load",
                            [self.ptr(b, base, pos), ir.Constant(lu.I32, self.bits // 8), mask,
                             ir.Constant(self.vty, [self.umax.constant] * self.w)],
                            ret=self.vty, overloads=[self.vty, lu.PTR])

    def _masked_store(self, b: ir.IRBuilder, v: ir.Value, base: ir.Value, pos: ir.Value,
                      mask: ir.Value) -> None:
        lu.intrinsic(b, "llvm.masked.store",
                     [v, self.ptr(b, base, pos), ir.Constant(lu.I32, self.bits // 8), mask],
                     ret=ir.VoidType(), overloads=[self.vty, lu.PTR])

    def _compress_store(self, b: ir.IRBuilder, v: ir.Value, base: ir.Value, pos: ir.Value,
                        mask: ir.Value) -> None:
        lu.intrinsic(b, "llvm.masked.compressstore", [v, self.ptr(b, base, pos), mask],
                     ret=ir.VoidType(), overloads=[self.vty])

    def _popcount(self, b: ir.IRBuilder, mask: ir.Value) -> ir.Value:
        bits = b.bitcast(mask, ir.IntType(self.w))
        return b.zext(lu.intrinsic(b, "llvm.ctpop", [bits]), lu.I64)

    def _knot(self, b: ir.IRBuilder, mask: ir.Value) -> ir.Value:
        """not(mask) as one `knot` of a mask register: LLVM would compare again instead,
        and the vector compares compete with the compress stores for one port."""
        asm = ir.InlineAsm(ir.FunctionType(self.mty, [self.mty]),
                           f"knot{'w' if self.w == 16 else 'b'} $1, $0", "=k,k")
        return b.call(asm, [mask])

    def _minmax(self, b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
        return lu.intrinsic(b, "llvm.umin", [x, y]), lu.intrinsic(b, "llvm.umax", [x, y])

    # ---- keys from elements and back ----------------------------------------------------
    def masks(self, b: ir.IRBuilder, mode: ir.Value, vector: bool = False) -> Masks:
        """The masks that make one formula serve every mode: key = bits ^ ((ashr(bits) & F)
        | S) ^ D, with F all ones for floats, S the sign bit for floats and signed integers,
        D all ones for a descending order (all zero for MODE_UNSIGNED: keys are elements)."""
        ones = ir.Constant(self.ety, (1 << self.bits) - 1)
        sign = ir.Constant(self.ety, 1 << (self.bits - 1))
        zero = ir.Constant(self.ety, 0)
        kind = b.and_(mode, i64(MODE_KIND))
        f = b.select(b.icmp_signed("==", kind, i64(MODE_FLOAT)), ones, zero)
        s = b.select(b.icmp_signed("==", kind, i64(MODE_UNSIGNED)), zero, sign)
        d = b.select(b.icmp_signed("!=", b.and_(mode, i64(MODE_DESCENDING)), i64(0)), ones,
                     zero)
        return (self._splat(b, f), self._splat(b, s), self._splat(b, d)) if vector \
            else (f, s, d)

    def _shift(self, x: ir.Value) -> ir.Constant:
        return lu.const(x.type, self.bits - 1)

    def encode(self, b: ir.IRBuilder, x: ir.Value, masks: Masks) -> ir.Value:
        """The key of element bits `x` (scalar or vector, `masks` alike)."""
        f, s, d = masks
        return b.xor(b.xor(x, b.or_(b.and_(b.ashr(x, self._shift(x)), f), s)), d)

    def decode(self, b: ir.IRBuilder, x: ir.Value, masks: Masks) -> ir.Value:
        """The element bits of key `x` (the inverse of `encode`)."""
        f, s, d = masks
        t = b.xor(x, d)
        return b.xor(t, b.or_(b.and_(b.ashr(b.not_(t), self._shift(t)), f), s))

    def odd(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        """Whether float bits `x` are -0.0 or a NaN other than the canonical quiet +NaN: the
        values a "NaNs last" comparator (MODE_CANON) equates with another bit pattern."""
        frac = 23 if self.bits == 32 else 52
        sign = 1 << (self.bits - 1)
        inf = ((1 << (self.bits - frac - 1)) - 1) << frac
        qnan = inf | (1 << (frac - 1))
        nan = b.icmp_unsigned(">", b.and_(x, ir.Constant(self.ety, sign - 1)),
                              ir.Constant(self.ety, inf))
        return b.or_(b.icmp_unsigned("==", x, ir.Constant(self.ety, sign)),
                     b.and_(nan, b.icmp_unsigned("!=", x, ir.Constant(self.ety, qnan))))

    def _decode_range(self) -> ir.Function:
        """decode(ptr a, i64 lo, i64 hi, i64 mode): a[lo, hi) from keys to elements (ranges
        that bypass the leaves: keys equal to a pivot, heap-sorted ranges)."""
        fn, b = self.fn("xlc_vsort_decode", ir.VoidType(), [lu.PTR, lu.I64, lu.I64, lu.I64])
        a, lo, hi, mode = fn.args
        masks = self.masks(b, mode)
        with lu.for_range(b, hi, lo, name="dec") as i:
            p = self.ptr(b, a, i)
            b.store(self.decode(b, b.load(p, typ=self.ety), masks), p)
        b.ret_void()
        return fn

    def _check_range(self) -> ir.Function:
        """i64 check(ptr a, i64 lo, i64 hi): 1 if an element of a[lo, hi) is `odd`."""
        fn, b = self.fn("xlc_vsort_check", lu.I64, [lu.PTR, lu.I64, lu.I64])
        a, lo, hi = fn.args
        with b.goto_entry_block():
            seen = b.alloca(lu.I8, name="seen")
        b.store(ir.Constant(lu.I8, 0), seen)
        with lu.for_range(b, hi, lo, name="chk") as i:
            x = b.load(self.ptr(b, a, i), typ=self.ety)
            b.store(b.or_(b.load(seen, typ=lu.I8), b.zext(self.odd(b, x), lu.I8)), seen)
        b.ret(b.zext(b.load(seen, typ=lu.I8), lu.I64))
        return fn

    # ---- leaves: bitonic networks -------------------------------------------------------
    def network(self, b: ir.IRBuilder, vs: list[ir.Value]) -> list[ir.Value]:
        """Sort the keys of `vs` (m vectors, m a power of two) ascending: element e of the
        result is lane e % W of vector e // W.

        A bitonic network in its all-ascending form (merging two sorted halves compares i
        with i ^ (k-1), then i with i ^ j for j = k/4 .. 1; the smaller key goes to the
        smaller index). Which (vector, lane) holds network index i is ours to choose: with
        m vectors, index i is lane i // m of vector i % m ("column-major"), so the many short
        distances (j < m) compare whole vectors (one min and one max for W pairs) and only
        the few long ones shuffle lanes; a transpose at the end gives the row-major order.
        """
        w, m = self.w, len(vs)
        vs = list(vs)
        n = m * w
        col = m > 1

        def where(i: int) -> tuple[int, int]:
            return (i % m, i // m) if col else (i // w, i % w)

        def index(a: int, lane: int) -> int:
            return lane * m + a if col else a * w + lane

        k = 2
        while k <= n:
            dists = [k - 1] + [j for j in (k >> t for t in range(2, 64)) if j >= 1]
            for c in dists:
                vs = self._stage(b, vs, c, where, index)
            k *= 2
        return self._transpose(b, vs) if col else vs

    def _stage(self, b: ir.IRBuilder, vs: list[ir.Value], c: int,
               where: Callable[[int], tuple[int, int]], index: Callable[[int, int], int],
               ) -> list[ir.Value]:
        """One comparator stage: index i meets i ^ c, the smaller key goes to the smaller
        index (see `network`)."""
        w = self.w
        da, dl = (x ^ y for x, y in zip(where(0), where(c)))
        # the lane part of i ^ c is lane ^ dl and the vector part a ^ da for every i, as
        # both mappings split an index's bits between vector and lane
        perm = ir.Constant(ir.VectorType(lu.I32, w), [i ^ dl for i in range(w)])
        undef = ir.Constant(self.vty, ir.Undefined)
        out = list(vs)
        for a in range(len(vs)):
            pa = a ^ da
            if pa < a:
                continue
            if da and not dl:  # whole vectors: lanes meet the same lane
                lo, hi = self._minmax(b, vs[a], vs[pa])
                first = index(a, 0) < index(pa, 0)
                out[a], out[pa] = (lo, hi) if first else (hi, lo)
                continue
            other = b.shuffle_vector(vs[pa], undef, perm)
            lo, hi = self._minmax(b, vs[a], other)
            take_lo = ir.Constant(self.mty, [index(a, i) < index(pa, i ^ dl) for i in range(w)])
            out[a] = b.select(take_lo, lo, hi)
            if pa != a:
                out[pa] = b.shuffle_vector(b.select(take_lo, hi, lo), undef, perm)
        return out

    def _transpose(self, b: ir.IRBuilder, vs: list[ir.Value]) -> list[ir.Value]:
        """From the column-major layout of `network` (index i in lane i // m of vector
        i % m) to the row-major one. Blocks of W vectors (the m vectors when m < W) are
        transposed by log2 rounds of interleaving vector a with vector a + half (low lanes
        into vector 2a, high lanes into 2a + 1); with q = m / W blocks, row q*l + h is then
        row l of block h."""
        w, m = self.w, len(vs)
        if m > w:
            blocks = [self._transpose(b, vs[h * w:(h + 1) * w]) for h in range(m // w)]
            return [blocks[h][r] for r in range(w) for h in range(m // w)]
        half = w // 2
        lo = ir.Constant(ir.VectorType(lu.I32, w), [x for i in range(half) for x in (i, i + w)])
        hi = ir.Constant(ir.VectorType(lu.I32, w),
                         [x for i in range(half, w) for x in (i, i + w)])
        for _ in range(m.bit_length() - 1):
            nxt: list[ir.Value] = []
            for a in range(m // 2):
                nxt += [b.shuffle_vector(vs[a], vs[a + m // 2], lo),
                        b.shuffle_vector(vs[a], vs[a + m // 2], hi)]
            vs = nxt
        return vs

    def _small(self, m: int) -> ir.Function:
        """leaf(ptr src, ptr dst, i64 n, i64 enc, i64 dec), 0 <= n <= m*W: sort src[0, n)
        into dst[0, n) (which may be src), the elements read through mode `enc` and written
        through mode `dec` (MODE_UNSIGNED: keys as they are). Missing lanes are padded with
        the largest key."""
        fn, b = self.fn(f"xlc_vsort_small{m}", ir.VoidType(),
                        [lu.PTR, lu.PTR, lu.I64, lu.I64, lu.I64])
        src, dst, n, enc, dec = fn.args
        enc_m, dec_m = self.masks(b, enc, True), self.masks(b, dec, True)
        umax = self._splat(b, self.umax)
        masks = [self._mask_below(b, b.sub(n, i64(v * self.w))) for v in range(m)]
        vs = [b.select(masks[v], self.encode(b, self._masked_load(b, src, i64(v * self.w),
                                                                  masks[v]), enc_m), umax)
              for v in range(m)]
        for v, x in enumerate(self.network(b, vs)):
            self._masked_store(b, self.decode(b, x, dec_m), dst, i64(v * self.w), masks[v])
        b.ret_void()
        return fn

    # ---- partition ----------------------------------------------------------------------
    def _partition(self, le: bool, first: bool) -> ir.Function:
        """i64 partition(ptr a, i64 n, key p), n >= 2*UNROLL*W: reorders the keys a[0, n) so
        that those below p (at most p when `le`) come first; returns their count. `first`:
        partition(ptr src, ptr dst, i64 n, key p, i64 mode) reads elements from src, makes
        them keys (`encode`) and writes the partitioned keys to dst (which may be src).

        The first and last UNROLL vectors wait in registers; the main loop then reads UNROLL
        vectors at a time from the side with less free room, which keeps UNROLL*W free slots
        on each side, and compress-stores (`vpcompressd/q`) each vector's left keys at the
        left write position and its right keys before the right one. The keys left over and
        the waiting vectors are written last. Every key is read before its slot is written
        over, so src == dst partitions in place."""
        name = "xlc_vsort_part_first" if first else \
            "xlc_vsort_part_le" if le else "xlc_vsort_part_lt"
        args = [lu.PTR, lu.PTR, lu.I64, self.ety, lu.I64] if first else \
            [lu.PTR, lu.I64, self.ety]
        fn, b = self.fn(name, lu.I64, args)
        if first:
            src, dst, n, p, mode = fn.args
            masks = self.masks(b, mode, True)
        else:
            src, n, p = fn.args
            dst = src
        w, u = self.w, self.unroll
        pv = self._splat(b, p)
        block = u * w

        def load(pos: ir.Value) -> ir.Value:
            v = self._load(b, src, pos)
            return self.encode(b, v, masks) if first else v

        saved = [load(i64(i * w)) for i in range(u)]
        saved += [load(b.sub(n, i64(block - i * w))) for i in range(u)]

        def goes_left(v: ir.Value) -> ir.Value:
            return b.icmp_unsigned("<=" if le else "<", v, pv)

        def put(lw: ir.Value, rw: ir.Value, v: ir.Value,
                valid: ir.Value | None) -> tuple[ir.Value, ir.Value]:
            left = goes_left(v)
            right = self._knot(b, left)
            if valid is not None:
                left, right = b.and_(left, valid), b.and_(right, valid)
            cr = self._popcount(b, right)
            self._compress_store(b, v, dst, lw, left)
            rw = b.sub(rw, cr)
            self._compress_store(b, v, dst, rw, right)
            return (b.add(lw, b.sub(i64(w), cr)) if valid is None
                    else b.add(lw, self._popcount(b, left))), rw

        r0 = b.sub(n, i64(block))
        pre = b.block
        head = fn.append_basic_block("loop")
        body = fn.append_basic_block("body")
        tail = fn.append_basic_block("tail")
        b.branch(head)
        b.position_at_end(head)
        l_, r_, lw_, rw_ = (b.phi(lu.I64, name=s) for s in ("l", "r", "lw", "rw"))
        for phi, x in zip((l_, r_, lw_, rw_), (i64(block), r0, i64(0), n)):
            phi.add_incoming(x, pre)
        b.cbranch(b.icmp_signed(">=", b.sub(r_, l_), i64(block)), body, tail)
        b.position_at_end(body)
        from_left = b.icmp_signed("<=", b.sub(l_, lw_), b.sub(rw_, r_))
        pos = b.select(from_left, l_, b.sub(r_, i64(block)))
        vs = [load(b.add(pos, i64(i * w))) for i in range(u)]
        l2 = b.select(from_left, b.add(l_, i64(block)), l_)
        r2 = b.select(from_left, r_, b.sub(r_, i64(block)))
        lw2, rw2 = lw_, rw_
        for v in vs:
            lw2, rw2 = put(lw2, rw2, v, None)
        for phi, x in zip((l_, r_, lw_, rw_), (l2, r2, lw2, rw2)):
            phi.add_incoming(x, b.block)
        b.branch(head)
        b.position_at_end(tail)
        rest = []
        for i in range(u):
            at = b.add(l_, i64(i * w))
            valid = self._mask_below(b, b.sub(r_, at))
            v = self._masked_load(b, src, at, valid)
            rest.append((self.encode(b, v, masks) if first else v, valid))
        lw, rw = lw_, rw_
        for v, valid in rest:
            lw, rw = put(lw, rw, v, valid)
        for v in saved:
            lw, rw = put(lw, rw, v, None)
        b.ret(lw)
        return fn

    # ---- pivots and the heap-sort fallback ----------------------------------------------
    def _pivot(self, vectors: int, name: str) -> ir.Function:
        """key pivot(ptr a, i64 n, i64 mode), n > LEAF: the median of the keys (elements
        through `mode`) of a sample taken at equal steps over a[0, n) with vector gathers:
        `vectors` * W of them, one vector's worth for ranges below SMALL_RANGE (cheaper, and
        a worse split costs little there)."""
        fn, b = self.fn(f"xlc_vsort_{name}", self.ety, [lu.PTR, lu.I64, lu.I64])
        a, n, mode = fn.args
        masks = self.masks(b, mode, True)
        small = fn.append_basic_block("small")
        large = fn.append_basic_block("large")
        b.cbranch(b.icmp_signed("<", n, i64(SMALL_RANGE)), small, large)
        for block, count in ((small, 1), (large, vectors)):
            b.position_at_end(block)
            step = b.mul(b.sdiv(n, i64(count * self.w)), i64(self.bits // 8))
            base = lu.splat(b, b.ptrtoint(a, lu.I64), self.w)
            vs = []
            for v in range(count):
                lanes = ir.Constant(ir.VectorType(lu.I64, self.w),
                                    [v * self.w + i for i in range(self.w)])
                addr = b.add(base, b.mul(lanes, lu.splat(b, step, self.w)))
                ptrs = b.inttoptr(addr, ir.VectorType(lu.PTR, self.w))
                keys = lu.intrinsic(
                    b, "llvm.masked.gather",
                    [ptrs, ir.Constant(lu.I32, self.bits // 8),
                     ir.Constant(self.mty, [1] * self.w), ir.Constant(self.vty, ir.Undefined)],
                    ret=self.vty, overloads=[self.vty, ptrs.type])
                vs.append(self.encode(b, keys, masks))
            row = self.network(b, vs)[count // 2]
            b.ret(b.extract_element(row, ir.Constant(lu.I32, 0 if count > 1 else self.w // 2)))
        return fn

    def _wide_pivot(self) -> ir.Function:
        """key pivot(ptr a, i64 n, i64 mode), n >= PARALLEL_MIN / 2: the median of a leaf's
        worth of keys (LEAF_VECTORS * W, elements through `mode`) taken at equal steps, for
        the splits that hand ranges to threads (an even split matters more there). The
        sample is sorted by the largest leaf function, in a stack buffer."""
        fn, b = self.fn("xlc_vsort_wide_pivot", self.ety, [lu.PTR, lu.I64, lu.I64])
        a, n, mode = fn.args
        count = self.leaf
        with b.goto_entry_block():
            sample = b.alloca(self.ety, size=count, name="sample")
        step = b.sdiv(n, i64(count))
        with lu.for_range(b, i64(count), name="take") as i:
            key = b.load(self.ptr(b, a, b.mul(step, i)), typ=self.ety)
            b.store(key, self.ptr(b, sample, i))
        b.call(self.small_fns[LEAF_VECTORS], [sample, sample, i64(count), mode,
                                              i64(MODE_UNSIGNED)])
        b.ret(b.load(self.ptr(b, sample, i64(count // 2)), typ=self.ety))
        return fn

    def _heapsort(self) -> ir.Function:
        """heapsort(ptr a, i64 n): the O(n log n) fallback for ranges quicksort splits badly."""
        sift, b = self.fn("xlc_vsort_sift", ir.VoidType(), [lu.PTR, lu.I64, lu.I64])
        a, root0, n = sift.args
        pre = b.block
        head = sift.append_basic_block("head")
        step = sift.append_basic_block("step")
        swap = sift.append_basic_block("swap")
        done = sift.append_basic_block("done")
        b.branch(head)
        b.position_at_end(head)
        root = b.phi(lu.I64, name="root")
        root.add_incoming(root0, pre)
        child = b.add(b.mul(root, i64(2)), i64(1))
        b.cbranch(b.icmp_signed("<", child, n), step, done)
        b.position_at_end(step)

        def key(i: ir.Value) -> ir.Value:
            return b.load(self.ptr(b, a, i), typ=self.ety)

        c2 = b.add(child, i64(1))
        c2s = b.select(b.icmp_signed("<", c2, n), c2, child)
        bigger = b.select(b.icmp_unsigned("<", key(child), key(c2s)), c2s, child)
        top, kb = key(root), key(bigger)
        b.cbranch(b.icmp_unsigned("<", top, kb), swap, done)
        b.position_at_end(swap)
        b.store(kb, self.ptr(b, a, root))
        b.store(top, self.ptr(b, a, bigger))
        root.add_incoming(bigger, swap)
        b.branch(head)
        b.position_at_end(done)
        b.ret_void()

        fn, b = self.fn("xlc_vsort_heap", ir.VoidType(), [lu.PTR, lu.I64])
        a, n = fn.args
        half = b.sdiv(n, i64(2))
        with lu.for_range(b, half, name="heapify") as t:
            b.call(sift, [a, b.sub(b.sub(half, i64(1)), t), n])
        with lu.for_range(b, b.sub(n, i64(1)), name="pop") as t:
            end = b.sub(b.sub(n, i64(1)), t)
            first, e = self.ptr(b, a, i64(0)), self.ptr(b, a, end)
            x, y = b.load(first, typ=self.ety), b.load(e, typ=self.ety)
            b.store(y, first)
            b.store(x, e)
            b.call(sift, [a, i64(0), end])
        b.ret_void()
        return fn
