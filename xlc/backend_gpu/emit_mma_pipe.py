"""Pipelined tensor-core GEMM on sm_80+: cp.async -> shared -> ldmatrix -> `mma.sync`, with a
3-stage shared-memory pipeline. Element kinds (`KINDS`): f16 and bf16 operands
(`m16n8k16`, BK = 32), and f32 operands computed in TF32 (`m16n8k8.tf32`, BK = 16; operands
rounded to TF32 with `cvt.rna`, products accumulated in f32) for f32 dots whose precision is
not `highest` (emit_gemm decides; docs/gpu.md "Numerics").

Used by emit_gemm when each operand is a matrix whose innermost physical dimension is either
its contracting dimension ("k-major") or its free dimensions collapsed ("f-major"), all its
other strides are whole 16-byte chunks and its buffer is 16-byte aligned (`pipe_config`
checks; anything else keeps emit_mma / the CUDA-core kernel).

Tiles (`TileConfig`): a block computes BM x BN outputs with warps_m x warps_n warps (warp tile
WM x WN = MI 16-row by NI 8-column mma tiles; 128 x 128 with 8 warps when that gives at least
one block per SM, else 64 x 64 with 4 warps, else 32 x 64 with 4 warps). The K loop steps
BK = 32 (16 for TF32):
  prologue: stages 0 and 1 are requested with `cp.async` (16-byte chunks, the partial chunk at
            a ragged edge zero-filled through the source size, so no bounds branch on loads);
  step kt:  wait until tile kt has landed, barrier (which also ends every warp's reads of the
            stage about to be overwritten), request tile kt + 2, then two k16 sub-steps of
            `ldmatrix.x4` fragment loads and MI x NI mmas on tile kt.
Shared tiles keep the operand's global orientation (rows of the strided dimension, 16-byte
chunks of the contiguous one) so every copy is one 16-byte chunk; k-major tiles are read with
`ldmatrix` (for TF32 too: an 8 x 8 b16 matrix is 8 x 4 f32 in the tf32 fragment layout),
f-major 16-bit ones with `ldmatrix.trans` (both land in the mma's register layout, see
ptx_inline), f-major f32 ones with scalar shared loads. Chunk c of row r is stored at chunk
c ^ (r & 7) (rows of >= 8 chunks), c ^ ((r >> 1) & 3) (rows of 4), or c ^ (2 r & 7) (f-major
f32, read by scalar loads: lanes t = 0..3 read rows t): each ldmatrix phase or scalar load
touches 8 distinct 16-byte bank groups. Results are written as emit_mma does (f32
accumulators, one rounding)."""
from __future__ import annotations

import logging
from dataclasses import dataclass

from llvmlite import ir

from xlc.backend_gpu import nvptx, ptx_inline
from xlc.backend_gpu.emit_gemm import DotPlan, linear_offset
from xlc.backend_gpu.emit_mma import mma_accumulate, mma_function, write_accumulators
from xlc.backend_gpu.emitter import GpuEmitter, operand_buffers
from xlc.backend_gpu.kernel import GpuKernel, element_type, i64, unflatten
from xlc.backend_gpu.thunks import Thunk
from xlc.codegen import llvm_utils as lu
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType

log = logging.getLogger("xlc.backend_gpu")

STAGES = 3


@dataclass(frozen=True)
class MmaKind:
    """An element kind of the pipelined kernel: the mma's PTX type (`mma_function`), element
    bytes, the K tile and the mma's K."""

    ptx: str
    ebytes: int
    bk: int
    kstep: int

    @property
    def chunk(self) -> int:
        """Elements per 16-byte chunk."""
        return 16 // self.ebytes

    @property
    def storage(self) -> ir.IntType:
        """The raw element type tiles hold."""
        return ir.IntType(8 * self.ebytes)


KINDS = {PrimitiveType.F16: MmaKind("f16", 2, 32, 16),
         PrimitiveType.BF16: MmaKind("bf16", 2, 32, 16),
         PrimitiveType.F32: MmaKind("tf32", 4, 16, 8)}
SM_COUNT = {80: 108, 86: 84, 87: 16, 89: 128, 90: 132}
"""Streaming multiprocessors of the flagship part of each architecture (tile choice only)."""


@dataclass(frozen=True)
class TileConfig:
    """Block tile BM x BN computed by warps_m x warps_n warps."""

    bm: int
    bn: int
    warps_m: int
    warps_n: int

    @property
    def threads(self) -> int:
        """Threads per block."""
        return 32 * self.warps_m * self.warps_n

    @property
    def wm(self) -> int:
        """Rows of a warp's tile."""
        return self.bm // self.warps_m

    @property
    def wn(self) -> int:
        """Columns of a warp's tile."""
        return self.bn // self.warps_n

    def shared_bytes(self, kind: MmaKind) -> int:
        """Static shared memory: STAGES stages of both operand tiles."""
        return STAGES * (self.bm + self.bn) * kind.bk * kind.ebytes


LARGE = TileConfig(128, 128, 2, 4)      # warp tile 64 x 32: 4 x 4 mmas per k16
SMALL = TileConfig(64, 64, 2, 2)        # warp tile 32 x 32: 2 x 4 mmas per k16
SKINNY = TileConfig(32, 64, 2, 2)       # warp tile 16 x 32: 1 x 4 mmas per k16
CONFIGS = (LARGE, SMALL, SKINNY)
"""Largest first: the first that gives every SM a block is taken, else the one with the
most blocks (SKINNY: twice SMALL's for short M, e.g. the mlp's 256 x 1024 products)."""


def blocks(cfg: TileConfig, plan: DotPlan) -> int:
    """Thread blocks of `cfg` for `plan`."""
    return -(-plan.M // cfg.bm) * -(-plan.N // cfg.bn) * max(1, plan.B)


@dataclass(frozen=True)
class OperandLayout:
    """How one operand is read: k-major (contracting dim innermost) or f-major (free dims,
    collapsed, innermost) and the element stride of the other two views."""

    k_major: bool
    k_stride: int            # stride of the contracting dim (1 when k-major)


def _collapsed_stride(dims: list[int], sizes: list[int], st: list[int]) -> int | None:
    """The stride of the flattened index over `dims` (row-major, last fastest) when flattening
    is linear in memory, else None."""
    live = [(st[d], s) for d, s in zip(dims, sizes) if s > 1]
    if not live:
        return 1
    for (outer, _), (inner, inner_size) in zip(live, live[1:]):
        if outer != inner * inner_size:
            return None
    return live[-1][0]


def _layout(free: list[int], fsizes: list[int], batch: list[int], contracting: list[int],
            st: list[int], dims: tuple[int, ...], chunk: int) -> OperandLayout | None:
    if len(contracting) != 1:
        return None
    c = contracting[0]
    others = [d for d in free + batch if dims[d] > 1]
    if st[c] == 1:
        if all(st[d] % chunk == 0 for d in others):
            return OperandLayout(True, 1)
        return None
    if _collapsed_stride(free, fsizes, st) != 1:
        return None
    if st[c] % chunk or any(st[d] % chunk for d in batch if dims[d] > 1):
        return None
    return OperandLayout(False, st[c])


def pipe_config(em: GpuEmitter, inst: HloInstruction, plan: DotPlan
                ) -> tuple[MmaKind, TileConfig, OperandLayout, OperandLayout] | None:
    """The element kind, tile configuration and operand layouts of the pipelined kernel for
    dot `inst` (whose operands have one element type of `KINDS`, checked by the caller), or
    None when its operands' layouts or alignment do not allow it."""
    lhs, rhs = inst.operands
    kind = KINDS[element_type(lhs.shape, lhs.name)]
    la = _layout(plan.lf, plan.msizes, plan.lb, plan.lc, plan.ls, lhs.shape.dims, kind.chunk)
    ra = _layout(plan.rf, plan.nsizes, plan.rb, plan.rc, plan.rs, rhs.shape.dims, kind.chunk)
    if la is None or ra is None:
        return None
    if any(em.slice(plan.out.operand(op)).offset % 16 for op in (lhs, rhs)):
        return None
    sms = SM_COUNT.get(em.sm, 132 if em.sm >= 90 else 108)
    cfg = next((c for c in CONFIGS if blocks(c, plan) >= sms), CONFIGS[-1])
    if -(-plan.M // cfg.bm) > 65535:
        return None
    return kind, cfg, la, ra


class _Tile:
    """One operand's shared tiles: STAGES x rows x cols raw elements, cols contiguous, in
    16-byte chunks (swizzled: see the module docstring)."""

    def __init__(self, k: GpuKernel, name: str, kind: MmaKind, rows: int, cols: int,
                 scalar_reads: bool):
        self.rows, self.cols, self.kind = rows, cols, kind
        self.chunks = cols // kind.chunk
        self.scalar_reads = scalar_reads
        self.gv = nvptx.shared_array(k.b.module, name, kind.storage, STAGES * rows * cols)

    def swizzled(self, b: ir.IRBuilder, row: ir.Value, chunk: ir.Value) -> ir.Value:
        """Physical chunk of logical `chunk` in `row`."""
        if self.scalar_reads:
            key = b.and_(b.shl(row, i64(1)), i64(7))
        elif self.chunks >= 8:
            key = b.and_(row, i64(7))
        else:
            key = b.and_(b.lshr(row, i64(1)), i64(3))
        return b.xor(chunk, key)

    def element(self, b: ir.IRBuilder, stage: ir.Value, row: ir.Value, chunk: ir.Value,
                within: ir.Value | None = None) -> ir.Value:
        """Shared address of element `within` (default 0) of logical `chunk` of `row` in
        `stage`."""
        base = b.mul(stage, i64(self.rows * self.cols))
        e = b.add(base, b.add(b.mul(row, i64(self.cols)),
                              b.mul(self.swizzled(b, row, chunk), i64(self.kind.chunk))))
        if within is not None:
            e = b.add(e, within)
        return nvptx.shared_elem_ptr(b, self.gv, e)

    def at(self, b: ir.IRBuilder, stage: ir.Value, row: ir.Value, col: ir.Value) -> ir.Value:
        """The raw element (row, col) of `stage`."""
        c = i64(self.kind.chunk)
        return b.load(self.element(b, stage, row, b.udiv(col, c), b.urem(col, c)))


@dataclass
class _Chunk:
    """One 16-byte chunk a thread copies per K tile: its tile row and chunk, the element
    offset of its row (k-major) or column block (f-major) without k, whether that row or
    block exists, and (f-major) how many of its elements do."""

    row: ir.Value
    chunk: ir.Value
    offset: ir.Value
    ok: ir.Value
    width: ir.Value


class _Loader:
    """Issues one operand's cp.async chunks for a K tile (see the module docstring)."""

    def __init__(self, k: GpuKernel, plan: DotPlan, operand: HloInstruction, lay: OperandLayout,
                 is_lhs: bool, f0: ir.Value, batch_off: ir.Value, t: ir.Value, tile: _Tile,
                 threads: int):
        b = k.b
        self.k, self.plan, self.lay, self.tile = k, plan, lay, tile
        self.base = k.ptr(plan.out.operand(operand))
        free, fsizes, st = (plan.lf, plan.msizes, plan.ls) if is_lhs else \
            (plan.rf, plan.nsizes, plan.rs)
        ftotal = plan.M if is_lhs else plan.N
        ch = tile.kind.chunk
        self.chunks: list[_Chunk] = []
        for q in range(tile.rows * tile.chunks // threads):
            c = b.add(t, i64(threads * q))
            row, chunk = b.udiv(c, i64(tile.chunks)), b.urem(c, i64(tile.chunks))
            if lay.k_major:         # rows are free indices, chunks run along k
                f = b.add(f0, row)
                ok = b.icmp_unsigned("<", f, i64(ftotal))
                fc = b.select(ok, f, i64(0))
                parts = unflatten(b, fc, list(range(len(fsizes))), fsizes) if fsizes else {}
                off = b.add(batch_off, linear_offset(b, {free[j]: v for j, v in parts.items()},
                                                     st))
                self.chunks.append(_Chunk(row, chunk, off, ok, i64(ch)))
            else:                   # rows are k, chunks run along the collapsed free dims
                f = b.add(f0, b.mul(chunk, i64(ch)))
                left = b.sub(i64(ftotal), f)
                ok = b.icmp_signed(">", left, i64(0))
                width = b.select(b.icmp_signed("<", left, i64(ch)), left, i64(ch))
                off = b.add(batch_off, b.select(ok, f, i64(0)))
                self.chunks.append(_Chunk(row, chunk, off, ok, width))

    def issue(self, stage: ir.Value, k0: ir.Value) -> None:
        """Request this thread's chunks of the K tile starting at `k0` into `stage`; elements
        outside the operand arrive as zeros."""
        b, K, kind = self.k.b, self.plan.K, self.tile.kind
        for ch in self.chunks:
            if self.lay.k_major:
                kk = b.add(k0, b.mul(ch.chunk, i64(kind.chunk)))
                left = b.sub(i64(K), kk)
                n = b.select(b.icmp_signed("<", left, i64(kind.chunk)), left, i64(kind.chunk))
                live = b.and_(ch.ok, b.icmp_signed(">", left, i64(0)))
                src_off = b.select(live, b.add(ch.offset, kk), ch.offset)
            else:
                kk = b.add(k0, ch.row)
                live = b.and_(ch.ok, b.icmp_unsigned("<", kk, i64(K)))
                n = ch.width
                src_off = b.select(live, b.add(ch.offset, b.mul(kk, i64(self.lay.k_stride))),
                                   ch.offset)
            nbytes = b.trunc(b.mul(b.select(live, n, i64(0)), i64(kind.ebytes)), lu.I32)
            src = b.gep(self.base, [src_off], inbounds=True, source_etype=kind.storage)
            ptx_inline.cp_async_16(b, self.tile.element(b, stage, ch.row, ch.chunk), src,
                                   nbytes)


def emit_dot_pipelined(em: GpuEmitter, inst: HloInstruction, plan: DotPlan, kind: MmaKind,
                       cfg: TileConfig, la: OperandLayout, ra: OperandLayout) -> list[Thunk]:
    """The pipelined tensor-core GEMM kernel of dot `inst` (see the module docstring)."""
    lhs, rhs = inst.operands
    out_pt = element_type(inst.shape, inst.name)
    buf = plan.out.buffer
    k = em.kernel(buf, [(buf, ())], operand_buffers(buf), max_threads=cfg.threads)
    b = k.b
    mma = mma_function(b.module, kind.ptx)
    wide = kind.ebytes == 4
    a_t = _Tile(k, "pipe_a", kind, *((cfg.bm, kind.bk) if la.k_major else (kind.bk, cfg.bm)),
                scalar_reads=wide and not la.k_major)
    b_t = _Tile(k, "pipe_b", kind, *((cfg.bn, kind.bk) if ra.k_major else (kind.bk, cfg.bn)),
                scalar_reads=wide and not ra.k_major)
    k.launch((-(-plan.N // cfg.bn), -(-plan.M // cfg.bm), max(1, plan.B)),
             (cfg.threads, 1, 1), shared_bytes=cfg.shared_bytes(kind))
    t = b.zext(nvptx.thread_idx(b), lu.I64)
    lane, warp = b.and_(t, i64(31)), b.lshr(t, i64(5))
    wm, wn = b.udiv(warp, i64(cfg.warps_n)), b.urem(warp, i64(cfg.warps_n))
    m_tile, n_tile = grouped_tiles(b, -(-plan.M // cfg.bm), -(-plan.N // cfg.bn))
    n0 = b.mul(n_tile, i64(cfg.bn))
    m0 = b.mul(m_tile, i64(cfg.bm))
    bz = b.zext(nvptx.block_idx(b, "z"), lu.I64)
    bi = unflatten(b, bz, list(range(len(plan.bsizes))), plan.bsizes) if plan.bsizes else {}
    l_batch = linear_offset(b, {plan.lb[j]: v for j, v in bi.items()}, plan.ls)
    r_batch = linear_offset(b, {plan.rb[j]: v for j, v in bi.items()}, plan.rs)
    loaders = [_Loader(k, plan, lhs, la, True, m0, l_batch, t, a_t, cfg.threads),
               _Loader(k, plan, rhs, ra, False, n0, r_batch, t, b_t, cfg.threads)]
    mi_n, ni_n = cfg.wm // 16, cfg.wn // 8
    with b.goto_entry_block():
        frag = b.alloca(ir.ArrayType(lu.I32, 10))
        accs = [[[b.alloca(lu.F32) for _ in range(4)] for _ in range(ni_n)]
                for _ in range(mi_n)]
    for row_ in accs:
        for cell in row_:
            for slot in cell:
                b.store(lu.const(lu.F32, 0), slot)
    for s in range(STAGES - 1):
        for ld in loaders:
            ld.issue(i64(s), i64(s * kind.bk))
        ptx_inline.cp_async_commit(b)
    frags = _Fragments(b, kind, lane, a_t, b_t, b.mul(wm, i64(cfg.wm)), b.mul(wn, i64(cfg.wn)))
    with lu.for_range(b, i64(-(-plan.K // kind.bk)), name="kt") as kt:
        ptx_inline.cp_async_wait(b, STAGES - 2)
        nvptx.barrier(b)
        nxt = b.add(kt, i64(STAGES - 1))
        for ld in loaders:
            ld.issue(b.urem(nxt, i64(STAGES)), b.mul(nxt, i64(kind.bk)))
        ptx_inline.cp_async_commit(b)
        cur = b.urem(kt, i64(STAGES))
        for ks in range(kind.bk // kind.kstep):
            a_regs = [frags.lhs(cur, ks, mi, la.k_major) for mi in range(mi_n)]
            b_regs = [r for npair in range(ni_n // 2) for r in frags.rhs(cur, ks, npair,
                                                                       ra.k_major)]
            for mi in range(mi_n):
                for ni in range(ni_n):
                    mma_accumulate(b, mma, frag, a_regs[mi] + b_regs[ni], accs[mi][ni])
    ptx_inline.cp_async_wait(b, 0)
    write_accumulators(k, plan, bi, out_pt, accs, m0, n0,
                       b.mul(wm, i64(cfg.wm)), b.mul(wn, i64(cfg.wn)), lane)
    k.finish()
    log.debug("dot %s: pipelined %s mma, %dx%d tiles (%s x %s)", inst.name, kind.ptx, cfg.bm,
              cfg.bn, "k-major" if la.k_major else "m-major",
              "k-major" if ra.k_major else "n-major")
    return [k.thunk()]


GROUP_M = 8
"""Row tiles per group of the block order (`grouped_tiles`)."""


def grouped_tiles(b: ir.IRBuilder, tiles_m: int, tiles_n: int) -> tuple[ir.Value, ir.Value]:
    """This block's (row tile, column tile). Blocks run roughly in launch order; taken row by
    row, consecutive blocks would share one lhs row panel and read every rhs panel. Grouped
    order walks GROUP_M row tiles down one column before the next column, so the blocks
    resident together read GROUP_M lhs panels and few rhs panels (more L2 hits on large
    GEMMs). A bijection of the grid (the last group may have fewer rows)."""
    bx = b.zext(nvptx.block_idx(b, "x"), lu.I64)
    by = b.zext(nvptx.block_idx(b, "y"), lu.I64)
    if tiles_m <= GROUP_M or tiles_n == 1:
        return by, bx
    pid = b.add(b.mul(by, i64(tiles_n)), bx)
    per_group = GROUP_M * tiles_n
    group = b.udiv(pid, i64(per_group))
    first = b.mul(group, i64(GROUP_M))
    rows = b.sub(i64(tiles_m), first)
    size = b.select(b.icmp_unsigned("<", rows, i64(GROUP_M)), rows, i64(GROUP_M))
    within = b.urem(pid, i64(per_group))
    return b.add(first, b.urem(within, size)), b.udiv(within, size)


class _Fragments:
    """A lane's mma operand registers read from the shared tiles of a stage. Roles: for
    ldmatrix lane l gives row i = l % 8 of matrix j = l / 8; for scalar reads (f-major f32)
    g = l / 4, t = l % 4 as in the PTX fragment layouts."""

    def __init__(self, b: ir.IRBuilder, kind: MmaKind, lane: ir.Value, a_t: _Tile, b_t: _Tile,
                 warp_m0: ir.Value, warp_n0: ir.Value):
        self.b, self.kind, self.a_t, self.b_t = b, kind, a_t, b_t
        self.warp_m0, self.warp_n0 = warp_m0, warp_n0
        j = b.lshr(lane, i64(3))
        self.i = b.and_(lane, i64(7))
        self.lo8, self.hi8 = b.mul(b.and_(j, i64(1)), i64(8)), b.mul(b.lshr(j, i64(1)), i64(8))
        self.lo1, self.hi1 = b.and_(j, i64(1)), b.lshr(j, i64(1))
        self.g, self.t = b.lshr(lane, i64(2)), b.and_(lane, i64(3))

    def lhs(self, stage: ir.Value, ks: int, mi: int, k_major: bool) -> list[ir.Value]:
        """A's four registers of 16-row tile `mi` for k sub-step `ks`: (m, k) blocks (0, 0),
        (8, 0), (0, h), (8, h) with h = kstep / 2."""
        b, kind = self.b, self.kind
        mbase = b.add(self.warp_m0, i64(16 * mi))
        kc0 = 2 * ks                    # chunk of the sub-step's first k (kstep = 2 chunks)
        if k_major:
            addr = self.a_t.element(b, stage, b.add(mbase, b.add(self.lo8, self.i)),
                                    b.add(i64(kc0), self.hi1))
            return ptx_inline.ldmatrix_x4(b, addr, trans=False)
        if kind.ebytes == 2:
            addr = self.a_t.element(b, stage, b.add(i64(16 * ks), b.add(self.hi8, self.i)),
                                    b.lshr(b.add(mbase, self.lo8), i64(3)))
            return ptx_inline.ldmatrix_x4(b, addr, trans=True)
        k0 = b.add(i64(kind.kstep * ks), self.t)
        m = b.add(mbase, self.g)
        return [self.a_t.at(b, stage, kk, mm) for kk, mm in
                ((k0, m), (k0, b.add(m, i64(8))), (b.add(k0, i64(4)), m),
                 (b.add(k0, i64(4)), b.add(m, i64(8))))]

    def rhs(self, stage: ir.Value, ks: int, npair: int, k_major: bool) -> list[list[ir.Value]]:
        """B's two registers for each of the 8-column tiles 2 npair and 2 npair + 1 for k
        sub-step `ks`: (k, n) blocks (0, 0), (h, 0), (0, 8), (h, 8)."""
        b, kind = self.b, self.kind
        nbase = b.add(self.warp_n0, i64(16 * npair))
        kc0 = 2 * ks
        if k_major:
            addr = self.b_t.element(b, stage, b.add(nbase, b.add(self.hi8, self.i)),
                                    b.add(i64(kc0), self.lo1))
            r = ptx_inline.ldmatrix_x4(b, addr, trans=False)
        elif kind.ebytes == 2:
            addr = self.b_t.element(b, stage, b.add(i64(16 * ks), b.add(self.lo8, self.i)),
                                    b.lshr(b.add(nbase, self.hi8), i64(3)))
            r = ptx_inline.ldmatrix_x4(b, addr, trans=True)
        else:
            k0 = b.add(i64(kind.kstep * ks), self.t)
            n = b.add(nbase, self.g)
            r = [self.b_t.at(b, stage, kk, nn) for nn in (n, b.add(n, i64(8)))
                 for kk in (k0, b.add(k0, i64(4)))]
        return [r[0:2], r[2:4]]

