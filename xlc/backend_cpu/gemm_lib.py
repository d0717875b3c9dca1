"""The packed GEMM as a run-time library: one generic copy per element type, compiled once per
process (`xlc.backend_cpu.runtime_lib`) and called by every executable's dots.

    void xlc_gemm_f32_shares(ptr A, ptr B, ptr C, ptr scratch, i64 share, i64 nshares,
                             i64 slot, ptr params)
    void xlc_gemm_f64_shares(...)

`params` points at PARAMS i64 values: m, n, k, batch, the (batch, m, k) element strides of A,
the (batch, k, n) of B, the (batch, m, n) of C, accumulate (0/1) and the packing mode -
`GemmSpec.params(mode)`: 0 packs per share, ONCE (1) reads B packed once, IN_PLACE (2) packs
nothing (A row-major, B with unit column stride and n a multiple of NR: the microkernel reads
both in place - small products, `gemm.reads_in_place`; no scratch at all).

    void xlc_gemm_f32_pack_b(ptr A, ptr B, ptr C, ptr scratch, i64 share, i64 nshares,
                             i64 slot, ptr params)

is the pack phase of a call with "B packed once" set (one batch, shares split along m): share
`share` of `nshares` packs its n panels of all of B into the start of `scratch` (`gemm.
packed_b_bytes`), which every compute share then reads, instead of each share packing all of
B again (with several shares per thread, that repeated packing cost ~5 % of a 1024 x 256 x
256 product). The pack phase must have finished before the compute shares start (two pool
calls: `gemm.emit_gemm_entry`).
The function computes the share `share` of `nshares` of C[b] (+)= A[b] @ B[b] (BLIS loop
structure, see `xlc/backend_cpu/gemm.py`), packing into the part `slot` of `scratch`
(`gemm.scratch_bytes(spec, nslots)` bytes hold parts 0 .. nslots-1). The share says which part
of C, the slot which packing buffers: the thread pool runs many shares per thread and tells
each the slot of the thread running it (`xlc_pool_run_slots`), so any thread can take any
share. Every block size is derived at run time from the sizes exactly as `gemm.blocking`
derives it at compile time, so the scratch the caller reserves always fits.
(`xlc_gemm_f32(A, B, C, scratch, tid, nthreads, params)` is share `tid` of `nthreads` in slot
`tid`, the entry of code compiled before.)

Why a library: a GEMM specialised on its shapes and strides is ~140 KB of LLVM IR (an unrolled
14 x 32 microkernel, three packers), ~130 ms of LLVM time per distinct dot. Generic in sizes and
strides (the fast paths are chosen by run-time tests that cost nothing next to the packing),
it is compiled once per process, and each dot costs a call with a parameter block.
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.backend_cpu.gemm_kernels import (
    Blocking,
    emit_microkernel,
    emit_pack_a,
    emit_pack_b,
    gep,
    i64,
    new_function,
    smin,
)
from xlc.codegen import llvm_utils as lu
from xlc.hlo.shape import PrimitiveType

log = logging.getLogger("xlc.backend_cpu")

PARAMS = 15
"""Number of i64 values of the parameter block (see the module docstring)."""
ONCE = 1
"""The packing mode (the last parameter) of a call that reads B packed once."""
IN_PLACE = 2
"""The packing mode of a call that packs nothing (`gemm.reads_in_place`)."""
PACK_ONCE_BYTES = 8 << 20
"""B is packed once per call (not by every share) only when packed whole it would take at most
this many bytes (a bigger product's shares are big enough to pack their own B blocks, and the
block-by-block packing would repack A once per column block: 2048^3 f32 measured about 5 %
slower that way)."""
SPLIT_M_PANELS = 16
"""One batch with at least this many MR-row panels, whose B packed takes at most
PACK_ONCE_BYTES, is split along m even where n has more panels (here and in `gemm._split_m`):
B is then packed once, block by block, and each share packs only its own rows of A, where
split along n every share would pack all of A (a 256 x 1024 x 1024 f32 product in 8 shares:
8 MiB of A packing against 4 MiB in all, and scratch for one B block instead of each slot's
whole A block)."""
ONCE_MC_PANELS = 4
"""A call reading B packed once packs A blocks of at most this many MR-row panels (56 rows of
f32: 56 KiB at KC = 256, not the MC of up to 504 rows): the packed B block stays in the L2
(`gemm.PACKED_BLOCK_BYTES`), so streaming it past several small A blocks costs next to
nothing, and each slot's share of the scratch shrinks to one small A block."""
SYMBOLS = {PrimitiveType.F32: "xlc_gemm_f32", PrimitiveType.F64: "xlc_gemm_f64"}
SHARES_SUFFIX = "_shares"
PACK_SUFFIX = "_pack_b"
LIBRARY_TYPE = ir.FunctionType(lu.VOID, [lu.PTR] * 4 + [lu.I64, lu.I64, lu.PTR])
SHARES_TYPE = ir.FunctionType(lu.VOID, [lu.PTR] * 4 + [lu.I64, lu.I64, lu.I64, lu.PTR])


def declare_gemm(module: ir.Module, pt: PrimitiveType, pack: bool = False) -> ir.Function:
    """The library GEMM of `pt` (`xlc_gemm_<type>_shares`, or its pack phase
    `xlc_gemm_<type>_pack_b` when `pack`) declared in `module` (once)."""
    name = SYMBOLS[pt] + (PACK_SUFFIX if pack else SHARES_SUFFIX)
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, SHARES_TYPE, name=name)


def _smax1(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, i64(1)), i64(1), x)


def _ceil_div(b: ir.IRBuilder, x: ir.Value, y: ir.Value | int) -> ir.Value:
    y = y if isinstance(y, ir.Value) else i64(y)
    return b.sdiv(b.add(x, b.sub(y, i64(1))), y)


def _round64(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.and_(b.add(x, i64(63)), i64(-64))


def _packed_offset(b: ir.IRBuilder, jc: ir.Value, pc: ir.Value, k: ir.Value, ncr: ir.Value
                   ) -> ir.Value:
    """Element offset of block (pc, jc) in B packed once: the column blocks one after the
    other (every one before jc is a full NC wide: jc k elements), in each the k blocks one
    after the other (pc ncr elements before block pc, ncr = its width rounded up to NR)."""
    return b.add(b.mul(jc, k), b.mul(pc, ncr))


def _packed_b_bytes(b: ir.IRBuilder, bl: Blocking, n: ir.Value, k: ir.Value) -> ir.Value:
    """Bytes of all of B packed once: k x n rounded up to NR columns, + 64 bytes of alignment
    slack (the twin of `gemm.packed_b_bytes`)."""
    cols = b.mul(_ceil_div(b, n, bl.nr), i64(bl.nr))
    return _round64(b, b.add(b.mul(b.mul(k, cols), i64(bl.pt.byte_size)), i64(64)))


class _Sizes:
    """The run-time blocking of one call: the IR twin of `gemm.blocking` and
    `gemm._thread_bytes` (keep the two in step)."""

    def __init__(self, b: ir.IRBuilder, bl: Blocking, m: ir.Value, n: ir.Value, k: ir.Value,
                 once: ir.Value | None = None):
        mr, nr = bl.mr, bl.nr
        nkb = _ceil_div(b, _smax1(b, k), bl.kc)
        self.kc = _smax1(b, _ceil_div(b, k, nkb))
        mc = i64(max(mr, bl.mc // mr * mr))
        if once is not None:  # reading B packed once: A blocks of at most ONCE_MC_PANELS
            mc = b.select(once, i64(min(bl.mc // mr, ONCE_MC_PANELS) * mr), mc)
        self.mc = smin(b, mc, b.mul(_ceil_div(b, m, mr), i64(mr)))
        self.mc = b.select(b.icmp_signed("<", self.mc, i64(mr)), i64(mr), self.mc)
        self.nc = smin(b, i64(max(nr, bl.nc // nr * nr)), b.mul(_ceil_div(b, n, nr), i64(nr)))
        self.nc = b.select(b.icmp_signed("<", self.nc, i64(nr)), i64(nr), self.nc)
        self.esz = i64(bl.pt.byte_size)
        self.packed_bytes = _packed_b_bytes(b, bl, n, k)

    def slot_parts(self, b: ir.IRBuilder, bl: Blocking, split_m: ir.Value, per: ir.Value
                   ) -> tuple[ir.Value, ir.Value]:
        """Bytes of one slot's A and B blocks when a share covers at most `per` panels of
        the split dimension (the twin of `gemm._thread_bytes`): the A block holds at most
        `per` MR-row panels where shares split m, the B block `per` NR-column panels where
        they split n."""
        rows = b.select(split_m, smin(b, self.mc, b.mul(per, i64(bl.mr))), self.mc)
        cols = b.select(split_m, self.nc, smin(b, self.nc, b.mul(per, i64(bl.nr))))
        a_bytes = _round64(b, b.add(b.mul(b.mul(rows, self.kc), self.esz), i64(64)))
        return a_bytes, _round64(b, b.mul(b.mul(self.kc, cols), self.esz))


def _emit_blocked(module: ir.Module, name: str, bl: Blocking) -> ir.Function:
    """`void name.blocked(ptr a, ptr b, ptr c, i64 m0, i64 m1, i64 n0, i64 n1, ptr ap, ptr bp,
    ptr params, ptr bpre, i1 unpacked)`: C[m0:m1, n0:n1] (+)= A[m0:m1, :] @ B[:, n0:n1] for
    one batch, packing into ap/bp; when `bpre` is not null (then n0 = 0, n1 = n) B is not
    packed here but read from `bpre`, where the pack phase (`_emit_pack_phase`) packed all of
    it; when `unpacked` (row-major A, B with unit column stride and whole NR panels), nothing
    is packed: the microkernel reads A's rows and B's rows in place (ap/bp unused)."""
    pack_a = emit_pack_a(module, f"{name}.pack_a", bl)
    pack_b = emit_pack_b(module, f"{name}.pack_b", bl)
    micro = emit_microkernel(module, f"{name}.micro", bl)
    micro_direct = emit_microkernel(module, f"{name}.micro_direct", bl, direct=True)
    micro_in_place = emit_microkernel(module, f"{name}.micro_in_place", bl, direct=True,
                                      direct_b=True)
    for f in (pack_a, pack_b):
        f.attributes.add("noinline")
    fn, b = new_function(module, f"{name}.blocked",
                         [lu.PTR] * 3 + [lu.I64] * 4 + [lu.PTR] * 4 + [lu.I1],
                         noalias=(1, 7, 8))  # C may be stored over A (`gemm.writes_over_a`)
    a, bmat, c, m0, m1, n0, n1, ap, bp, params, bpre, unpacked = fn.args
    packed_once = b.icmp_unsigned("!=", b.ptrtoint(bpre, lu.I64), i64(0))
    # the first 14 values only: code compiled before passes no "B packed once"
    p = [b.load(gep(b, params, i, lu.I64), typ=lu.I64) for i in range(PARAMS - 1)]
    m, n, k, _, _, am, ak, _, bk, bn, _, cm, cn, accumulate = p
    sz = _Sizes(b, bl, m, n, k, packed_once)
    ety, mr, nr = bl.ety, bl.mr, bl.nr
    # m blocks of equal size (a multiple of mr, at most mc): no short leftover block that
    # would stream every B panel from L3 for a single microkernel call
    mlen = b.sub(m1, m0)
    nmb = _ceil_div(b, mlen, sz.mc)
    per = b.sdiv(b.add(mlen, b.sub(nmb, i64(1))), _smax1(b, nmb))
    mcs = b.mul(_ceil_div(b, per, mr), i64(mr))
    acc = b.icmp_signed("!=", accumulate, i64(0))
    # one panel of columns: every A element is used once per k block, so packing A would only
    # add a pass over it; row-major A is then read in place (its rows stream from memory
    # while the microkernel computes, instead of a packing pass before it)
    direct = b.or_(unpacked, b.and_(b.icmp_signed("==", ak, i64(1)),
                                    b.icmp_signed("<=", b.sub(n1, n0), i64(nr))))
    # B needs packing unless packed once already or read in place
    pack_here = b.not_(b.or_(packed_once, unpacked))
    with lu.for_range(b, n1, start=n0, step=bl.nc, name="jc") as jc:
        nc = smin(b, sz.nc, b.sub(n1, jc))
        with lu.for_range(b, k, name="pc", step=bl.kc) as pc_raw:
            # k advances by the balanced kc (<= bl.kc): recompute the block start
            pc = b.mul(b.sdiv(pc_raw, i64(bl.kc)), sz.kc)
            kc = smin(b, sz.kc, b.sub(k, pc))
            with b.if_then(b.icmp_signed(">", kc, i64(0))):
                b_block = gep(b, bmat, b.add(b.mul(pc, bk), b.mul(jc, bn)), ety)
                with b.if_then(pack_here):
                    b.call(pack_b, [b_block, bp, kc, nc, bk, bn])
                ncr = b.mul(_ceil_div(b, nc, bl.nr), i64(bl.nr))
                bsrc = b.select(packed_once, gep(b, bpre, _packed_offset(b, jc, pc, k, ncr),
                                                 ety), bp)
                first = b.and_(b.icmp_signed("==", pc, i64(0)), b.not_(acc))
                with lu.for_range(b, nmb, name="ib") as ib:
                    ic = b.add(m0, b.mul(ib, mcs))
                    mc = smin(b, mcs, b.sub(m1, ic))
                    a_block = gep(b, a, b.add(b.mul(ic, am), b.mul(pc, ak)), ety)
                    with b.if_then(b.not_(direct)):
                        b.call(pack_a, [a_block, ap, mc, kc, am, ak])
                    with lu.for_range(b, nc, step=nr, name="jr") as jr:
                        nr_eff = smin(b, i64(nr), b.sub(nc, jr))
                        bpan = b.select(unpacked, gep(b, b_block, jr, ety),
                                        gep(b, bsrc, b.mul(jr, kc), ety))
                        ccol = b.mul(b.add(jc, jr), cn)
                        with lu.for_range(b, mc, step=mr, name="ir") as ir_:
                            mr_eff = smin(b, i64(mr), b.sub(mc, ir_))
                            coff = b.add(b.mul(b.add(ic, ir_), cm), ccol)
                            args = [kc, None, bpan, gep(b, c, coff, ety), mr_eff, nr_eff,
                                    first, cm, cn, am, bk]
                            with b.if_else(direct) as (in_place, packed):
                                with in_place:
                                    args[1] = gep(b, a_block, b.mul(ir_, am), ety)
                                    with b.if_else(unpacked) as (both, a_only):
                                        with both:
                                            b.call(micro_in_place, args)
                                        with a_only:
                                            b.call(micro_direct, args)
                                with packed:
                                    args[1] = gep(b, ap, b.mul(ir_, kc), ety)
                                    b.call(micro, args)
    b.ret_void()
    return fn


def _emit_pack_phase(module: ir.Module, name: str, bl: Blocking) -> ir.Function:
    """`xlc_gemm_<type>_pack_b` (see the module docstring): share `share` of `nshares` packs
    n panels [P share / nshares, P (share + 1) / nshares) of B (P = ceil(n / NR)), every k
    block of each, where `name.blocked` reads them when B is packed once."""
    pack_b = module.globals[f"{name}.pack_b"]
    fn = ir.Function(module, SHARES_TYPE, name=name + PACK_SUFFIX)
    _, bm, _, scratch, share, nshares, _, params = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    p = [b.load(gep(b, params, i, lu.I64), typ=lu.I64) for i in range(PARAMS)]
    m, n, k, _, _, _, _, _, bk, bn, _, _, _, _, _ = p
    sz = _Sizes(b, bl, m, n, k)
    nr = bl.nr
    bpre = b.inttoptr(b.and_(b.add(b.ptrtoint(scratch, lu.I64), i64(63)), i64(-64)), lu.PTR)
    panels = _ceil_div(b, n, nr)
    lo = b.sdiv(b.mul(panels, share), _smax1(b, nshares))
    hi = b.sdiv(b.mul(panels, b.add(share, i64(1))), _smax1(b, nshares))
    with lu.for_range(b, hi, start=lo, name="panel") as j:
        col = b.mul(j, i64(nr))
        jc = b.mul(b.sdiv(col, i64(bl.nc)), i64(bl.nc))  # its column block, as in blocked
        ncr = b.mul(_ceil_div(b, smin(b, sz.nc, b.sub(n, jc)), nr), i64(nr))
        cols = smin(b, i64(nr), b.sub(n, col))
        with lu.for_range(b, k, name="pc", step=bl.kc) as pc_raw:
            pc = b.mul(b.sdiv(pc_raw, i64(bl.kc)), sz.kc)
            kc = smin(b, sz.kc, b.sub(k, pc))
            with b.if_then(b.icmp_signed(">", kc, i64(0))):
                off = b.add(_packed_offset(b, jc, pc, k, ncr), b.mul(b.sub(col, jc), kc))
                b.call(pack_b, [gep(b, bm, b.add(b.mul(pc, bk), b.mul(col, bn)), bl.ety),
                                gep(b, bpre, off, bl.ety), kc, cols, bk, bn])
    b.ret_void()
    return fn


def emit_library_gemm(module: ir.Module, bl: Blocking) -> ir.Function:
    """Add the exported generic GEMMs for `bl`'s element type (see the module docstring);
    returns `xlc_gemm_<type>_shares`."""
    name = SYMBOLS[bl.pt]
    blocked = _emit_blocked(module, name, bl)
    _emit_pack_phase(module, name, bl)
    impl = ir.Function(module, ir.FunctionType(lu.VOID, list(SHARES_TYPE.args) + [lu.I64]),
                       name=f"{name}.impl")
    impl.linkage = "internal"
    impl.args[1].add_attribute("noalias")  # not A and C: C may be stored over A
    a, bm, c, scratch, share, nshares, slot, params, packed_once = impl.args
    b = ir.IRBuilder(impl.append_basic_block("entry"))
    ety = bl.ety
    p = [b.load(gep(b, params, i, lu.I64), typ=lu.I64) for i in range(PARAMS - 1)]
    m, n, k, batch, sa, _, _, sb, _, _, sc, _, _, _ = p
    # with "B packed once" set, B packed once lies at the aligned start of the scratch and
    # the slots' parts after it
    base = b.and_(b.add(b.ptrtoint(scratch, lu.I64), i64(63)), i64(-64))
    once = b.icmp_signed("==", packed_once, i64(ONCE))
    unpacked = b.icmp_signed("==", packed_once, i64(IN_PLACE))
    bpre_at = b.inttoptr(base, lu.PTR)
    # shares split along m or n, whichever has more panels, and m for one batch of at least
    # SPLIT_M_PANELS row panels whose B packed takes at most PACK_ONCE_BYTES (the twin of
    # `gemm._split_m`)
    m_panels, n_panels = _ceil_div(b, m, bl.mr), _ceil_div(b, n, bl.nr)
    fits_once = b.icmp_signed("<=", _packed_b_bytes(b, bl, n, k), i64(PACK_ONCE_BYTES))
    split_m = b.or_(b.icmp_signed(">", m_panels, n_panels),
                    b.and_(b.and_(b.icmp_signed("==", batch, i64(1)),
                                  b.icmp_signed(">=", m_panels, i64(SPLIT_M_PANELS))),
                           fits_once))
    # read there only where shares split m of one batch (each share then needs all of B)
    use_packed = b.and_(once, b.and_(split_m, b.icmp_signed("==", batch, i64(1))))
    sz = _Sizes(b, bl, m, n, k, use_packed)
    base = b.add(base, b.select(once, sz.packed_bytes, i64(0)))
    bpre = b.select(use_packed, bpre_at, ir.Constant(lu.PTR, None))
    panels = b.select(split_m, m_panels, n_panels)
    units = b.mul(batch, panels)
    # this slot's scratch: skip the other slots' parts (an A block, and a B block unless B
    # is read packed once - `gemm.scratch_bytes` reserves no B blocks then), each sized for
    # the most panels one share covers
    a_bytes, b_bytes = sz.slot_parts(b, bl, split_m, _ceil_div(b, units, _smax1(b, nshares)))
    slot_bytes = b.add(a_bytes, b.select(use_packed, i64(0), b_bytes))
    base = b.add(base, b.mul(slot, slot_bytes))
    ap = b.inttoptr(base, lu.PTR)
    bp = b.inttoptr(b.add(base, a_bytes), lu.PTR)
    step = b.select(split_m, i64(bl.mr), i64(bl.nr))
    size = b.select(split_m, m, n)
    lo = b.sdiv(b.mul(units, share), nshares)
    hi = b.sdiv(b.mul(units, b.add(share, i64(1))), nshares)
    with b.if_then(b.icmp_signed("<", lo, hi)):
        b_first = b.sdiv(lo, _smax1(b, panels))
        b_end = _ceil_div(b, hi, _smax1(b, panels))
        with lu.for_range(b, b_end, start=b_first, name="bt") as bi:
            p0 = b.sub(lo, b.mul(bi, panels))
            p0 = b.select(b.icmp_signed("<", p0, i64(0)), i64(0), p0)
            p1 = smin(b, b.sub(hi, b.mul(bi, panels)), panels)
            r0 = b.mul(p0, step)
            r1 = smin(b, b.mul(p1, step), size)
            m0 = b.select(split_m, r0, i64(0))
            m1 = b.select(split_m, r1, m)
            n0 = b.select(split_m, i64(0), r0)
            n1 = b.select(split_m, n, r1)
            b.call(blocked, [gep(b, a, b.mul(bi, sa), ety), gep(b, bm, b.mul(bi, sb), ety),
                             gep(b, c, b.mul(bi, sc), ety), m0, m1, n0, n1, ap, bp, params,
                             bpre, unpacked])
    b.ret_void()
    fn = ir.Function(module, SHARES_TYPE, name=name + SHARES_SUFFIX)
    fb = ir.IRBuilder(fn.append_basic_block("entry"))
    once = fb.load(gep(fb, fn.args[7], PARAMS - 1, lu.I64), typ=lu.I64)
    fb.call(impl, [*fn.args, once])
    fb.ret_void()
    # the entry of code compiled before (14 parameters): share tid of nthreads, in slot tid
    old = ir.Function(module, LIBRARY_TYPE, name=name)
    ob = ir.IRBuilder(old.append_basic_block("entry"))
    oa = old.args
    ob.call(impl, [*oa[:5], oa[5], oa[4], oa[6], i64(0)])
    ob.ret_void()
    return fn


def build_gemm_library(pt: PrimitiveType) -> ir.Module:
    """The library module of the generic GEMM for `pt` (f32 or f64)."""
    from xlc.backend_cpu.gemm import base_blocking

    module = lu.new_module(f"xlc_gemm_{pt.text}")
    emit_library_gemm(module, base_blocking(pt))
    return module
