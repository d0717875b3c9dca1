"""Building blocks of the packed GEMM (see `xlc/backend_cpu/gemm.py` for the driver).

Everything here emits internal LLVM functions into an llvmlite module, specialised on a
`Blocking` (register/cache block sizes, element type); operand strides and sizes are run-time
arguments (the packers and the microkernel pick their fast paths by testing them), so one copy
serves every GEMM of a type (`xlc/backend_cpu/gemm_lib.py` builds that copy once per process):

* `emit_pack_a`: copies an `mc x kc` block of A into MR-row panels, `ap[p][kk][MR]`; row-major
  A by in-register vw x vw transposes, column-major A by masked vector loads;
* `emit_pack_b`: copies a `kc x nc` block of B into NR-column panels, `bp[p][kk][NR]`; row-major
  B with full-width (masked at the edge) vector loads, B^T by in-register transposes. Padding
  rows/columns of an edge panel hold zeros or copies of a real line: the microkernel computes
  them but never stores their results, so it needs no masks in its k loop;
* `emit_microkernel`: C[MR x NR] (+)= Ap-panel x Bp-panel, the C tile held in MR x NV vector
  registers across the k loop (broadcast-A FMA pattern, `llvm.fma.v16f32` for f32), the C tile
  prefetched first; full tiles with unit column stride are stored with vector stores, edge
  tiles go through a stack tile;
* `emit_simple_gemm`: a plain loop nest for tiny problems and matrix-vector products, where
  packing costs more than it saves (dot-product or axpy form, chosen from the strides).

All functions take arbitrary element strides, so transposed operands need no copy beyond the
packing that happens anyway.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from llvmlite import ir

from xlc.codegen import llvm_utils as lu
from xlc.hlo.shape import PrimitiveType

log = logging.getLogger("xlc.backend_cpu")

FAST = ("reassoc", "contract")
SIMPLE_ROWS = 4  # C lines updated together by the plain axpy nest


def i64(v: int) -> ir.Constant:
    """An i64 constant."""
    return ir.Constant(lu.I64, v)


@dataclass(frozen=True)
class Blocking:
    """Register and cache blocking of one GEMM.

    mr: rows of the C register tile; nv: vectors per tile row (nr = nv * vw columns);
    vw: lanes per 512-bit vector; kc/mc/nc: cache block sizes along k/m/n (mc a multiple of
    mr, nc a multiple of nr); unroll: k-loop unroll factor of the microkernel."""

    pt: PrimitiveType
    mr: int
    nv: int
    vw: int
    kc: int
    mc: int
    nc: int
    unroll: int = 4

    @property
    def nr(self) -> int:
        """Columns of the C register tile."""
        return self.nv * self.vw

    @property
    def ety(self) -> ir.Type:
        """LLVM element type."""
        return lu.value_type(self.pt)

    @property
    def vty(self) -> ir.VectorType:
        """LLVM vector type of one tile-row vector."""
        return ir.VectorType(self.ety, self.vw)


def alloca(b: ir.IRBuilder, ty: ir.Type, align: int = 64) -> ir.Value:
    """A stack slot of `ty` in the function's entry block, as an opaque `ptr` value."""
    with b.goto_entry_block():
        slot = b.alloca(ty)
    slot.align = align
    slot.type = lu.PTR  # llvmlite gives a typed pointer; LLVM 22 IR text needs `ptr`
    return slot


def gep(b: ir.IRBuilder, base: ir.Value, off: ir.Value | int, ety: ir.Type) -> ir.Value:
    """`&base[off]` for elements of `ety`."""
    return b.gep(base, [off if isinstance(off, ir.Value) else i64(off)], inbounds=True,
                 source_etype=ety)


def iv(x: int | ir.Value) -> ir.Value:
    """An i64 value: `x` itself, or the constant `x`."""
    return x if isinstance(x, ir.Value) else i64(x)


def smin(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """Signed minimum of two i64 values."""
    return b.select(b.icmp_signed("<", x, y), x, y)


def new_function(module: ir.Module, name: str, args: list[ir.Type],
                 noalias: tuple[int, ...] = ()) -> tuple[ir.Function, ir.IRBuilder]:
    """An internal `void name(args...)` function with an entry block and a builder in it."""
    fn = ir.Function(module, ir.FunctionType(lu.VOID, args), name=name)
    fn.linkage = "internal"
    for i in noalias:
        fn.args[i].add_attribute("noalias")
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))


def _load(b: ir.IRBuilder, base: ir.Value, off: ir.Value | int, ty: ir.Type,
          align: int) -> ir.Value:
    return b.load(gep(b, base, off, lu.scalar_type(ty)), typ=ty, align=align)


def _store(b: ir.IRBuilder, v: ir.Value, base: ir.Value, off: ir.Value | int,
           align: int) -> None:
    b.store(v, gep(b, base, off, lu.scalar_type(v.type)), align=align)


# ---- packing -------------------------------------------------------------------------------
# Padding rows/columns of the last panel (past mc or nc) hold copies of the last real one or
# zeros: the microkernel computes them but never stores their results.
def emit_pack_b(module: ir.Module, name: str, bl: Blocking) -> ir.Function:
    """`void name(ptr b, ptr bp, i64 kc, i64 nc, i64 bk, i64 bn)`: pack B[0:kc, 0:nc] (element
    strides bk, bn from `b`) into `bp[p][kk][nr]` panels of nr columns.

    Requires 1 <= kc <= bl.kc, 1 <= nc, bp 64-byte aligned with room for ceil(nc / nr)
    panels. Row-major B (bn == 1) is copied with full-width (masked at the edge) vector loads;
    B^T (bk == 1) by in-register vw x vw transposes when kc >= vw; anything else elementwise."""
    fn, b = new_function(module, name, [lu.PTR, lu.PTR] + [lu.I64] * 4, noalias=(0, 1))
    src, dst, kc, nc, bk, bn = fn.args
    ety, nr, esz, vw = bl.ety, bl.nr, bl.pt.byte_size, bl.vw
    panels = b.sdiv(b.add(nc, i64(nr - 1)), i64(nr))
    row_major = b.icmp_signed("==", bn, i64(1))
    transposed = b.and_(b.icmp_signed("==", bk, i64(1)), b.icmp_signed(">=", kc, i64(vw)))
    with lu.for_range(b, panels, name="p") as p:
        s = gep(b, src, b.mul(p, b.mul(bn, i64(nr))), ety)
        d = gep(b, dst, b.mul(b.mul(p, kc), i64(nr)), ety)
        cols = smin(b, i64(nr), b.sub(nc, b.mul(p, i64(nr))))
        with b.if_else(row_major, likely=True) as (rm, other):
            with rm:
                with b.if_else(b.icmp_signed("==", cols, i64(nr)), likely=True) as (whole,
                                                                                      edge):
                    with whole:
                        _copy_vectors(b, s, d, kc, bl, bk, None)
                    with edge:
                        _copy_vectors(b, s, d, kc, bl, bk, cols)
            with other:
                with b.if_else(transposed) as (tr, plain):
                    with tr:
                        _transposed_panel(b, s, d, kc, nr, b.sub(cols, i64(1)), bn, bl)
                    with plain:
                        last = b.sub(cols, i64(1))
                        with lu.for_range(b, kc, name="kk") as kk, \
                                lu.for_range(b, i64(nr), name="jj") as jj:
                            col = smin(b, jj, last)
                            x = _load(b, s, b.add(b.mul(kk, bk), b.mul(col, bn)), ety, esz)
                            _store(b, x, d, b.add(b.mul(kk, i64(nr)), jj), esz)
    b.ret_void()
    return fn


def _copy_vectors(b: ir.IRBuilder, s: ir.Value, d: ir.Value, kc: ir.Value, bl: Blocking,
                  bk: int | ir.Value, cols: ir.Value | None) -> None:
    """Row-major B panel: d[kk][0:nr] = s[kk * bk + 0:nr], only `cols` columns read (masked
    loads, zeros elsewhere) unless cols is None."""
    esz = bl.pt.byte_size
    masks = []
    if cols is not None:
        limit = lu.splat(b, cols, bl.vw)
        for v in range(bl.nv):
            lanes = ir.Constant(ir.VectorType(lu.I64, bl.vw), [v * bl.vw + j for j in range(bl.vw)])
            masks.append(b.icmp_signed("<", lanes, limit))
    zero = lu.const(bl.vty, 0)
    with lu.for_range(b, kc, name="kk") as kk:
        so, do = b.mul(kk, iv(bk)), b.mul(kk, i64(bl.nr))
        for v in range(bl.nv):
            ptr = gep(b, s, b.add(so, i64(v * bl.vw)), bl.ety)
            if cols is None:
                x = b.load(ptr, typ=bl.vty, align=esz)
            else:
                x = lu.intrinsic(b, "llvm.masked.load", [ptr, ir.Constant(lu.I32, esz),
                                                         masks[v], zero],
                                 ret=bl.vty, overloads=[bl.vty, lu.PTR])
            _store(b, x, d, b.add(do, i64(v * bl.vw)), 64)


def emit_pack_a(module: ir.Module, name: str, bl: Blocking) -> ir.Function:
    """`void name(ptr a, ptr ap, i64 mc, i64 kc, i64 am, i64 ak)`: pack A[0:mc, 0:kc]
    (element strides am, ak from `a`) into `ap[p][kk][mr]` panels of mr rows.

    Requires 1 <= mc, 1 <= kc, ap with room for ceil(mc / mr) panels plus vw elements (the
    transposing path's last store spills up to vw - 1 elements past a panel). Row-major A
    (ak == 1) is transposed in registers when kc >= vw; column-major A (am == 1) is copied
    with masked full-width vector loads; anything else elementwise."""
    fn, b = new_function(module, name, [lu.PTR, lu.PTR] + [lu.I64] * 4, noalias=(0, 1))
    src, dst, mc, kc, am, ak = fn.args
    ety, mr = bl.ety, bl.mr
    panels = b.sdiv(b.add(mc, i64(mr - 1)), i64(mr))
    col_major = b.icmp_signed("==", am, i64(1))
    transposed = b.and_(b.and_(b.icmp_signed("==", ak, i64(1)), b.not_(col_major)),
                        b.icmp_signed(">=", kc, i64(bl.vw)))
    with lu.for_range(b, panels, name="p") as p:
        s = gep(b, src, b.mul(p, b.mul(am, i64(mr))), ety)
        d = gep(b, dst, b.mul(b.mul(p, kc), i64(mr)), ety)
        rows = smin(b, i64(mr), b.sub(mc, b.mul(p, i64(mr))))
        with b.if_else(transposed, likely=True) as (tr, other):
            with tr:
                _transposed_panel(b, s, d, kc, mr, b.sub(rows, i64(1)), am, bl)
            with other:
                with b.if_else(col_major) as (cm_, plain):
                    with cm_:
                        _copy_columns_masked(b, s, d, rows, kc, bl, ak)
                    with plain:
                        _copy_rows(b, s, d, rows, kc, bl, am, ak)
    b.ret_void()
    return fn


def _copy_columns_masked(b: ir.IRBuilder, s: ir.Value, d: ir.Value, rows: ir.Value,
                         kc: ir.Value, bl: Blocking, ak: int | ir.Value) -> None:
    """Column-major A panel: d[kk * mr + ii] = s[kk * ak + ii] for ii < rows (zeros up to a
    multiple of vw), by masked full-width loads and full-width stores in ascending order (a
    store spills past its column into slots rewritten next; the scratch has slack)."""
    vw, esz = bl.vw, bl.pt.byte_size
    limit = lu.splat(b, rows, vw)
    groups = -(-bl.mr // vw)
    masks = [b.icmp_signed("<", ir.Constant(ir.VectorType(lu.I64, vw),
                                            [g * vw + j for j in range(vw)]), limit)
             for g in range(groups)]
    zero = lu.const(bl.vty, 0)
    with lu.for_range(b, kc, name="kk") as kk:
        for g in range(groups):
            ptr = gep(b, s, b.add(b.mul(kk, iv(ak)), i64(g * vw)), bl.ety)
            x = lu.intrinsic(b, "llvm.masked.load", [ptr, ir.Constant(lu.I32, esz), masks[g],
                                                     zero], ret=bl.vty,
                             overloads=[bl.vty, lu.PTR])
            _store(b, x, d, b.add(b.mul(kk, i64(bl.mr)), i64(g * vw)), esz)


def _copy_rows(b: ir.IRBuilder, s: ir.Value, d: ir.Value, rows: ir.Value, kc: ir.Value,
               bl: Blocking, am: int | ir.Value, ak: int | ir.Value) -> None:
    """Plain packing loop: d[kk * mr + ii] = s[min(ii, rows - 1) * am + kk * ak]."""
    esz = bl.pt.byte_size
    last = b.sub(rows, i64(1))
    with lu.for_range(b, kc, name="ck") as kk, lu.for_range(b, i64(bl.mr), name="ci") as ii:
        row = smin(b, ii, last)
        x = _load(b, s, b.add(b.mul(row, iv(am)), b.mul(kk, iv(ak))), bl.ety, esz)
        _store(b, x, d, b.add(b.mul(kk, i64(bl.mr)), ii), esz)


def _transpose(b: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
    """Transpose a square block held as len(rows) vectors of as many lanes (a power of two):
    log2(n) stages that swap the off-diagonal d x d sub-blocks with two-input shuffles."""
    n = len(rows)
    x = list(rows)
    d = n // 2
    while d:
        lo = ir.Constant(ir.VectorType(lu.I32, n), [j if not j & d else n + j - d
                                                    for j in range(n)])
        hi = ir.Constant(ir.VectorType(lu.I32, n), [j + d if not j & d else n + j
                                                    for j in range(n)])
        y = list(x)
        for i in range(n):
            if not i & d:
                y[i] = b.shuffle_vector(x[i], x[i + d], lo)
                y[i + d] = b.shuffle_vector(x[i], x[i + d], hi)
        x = y
        d //= 2
    return x


def _transposed_panel(b: ir.IRBuilder, s: ir.Value, d: ir.Value, kc: ir.Value, lines: int,
                      last: ir.Value, stride: int | ir.Value, bl: Blocking) -> None:
    """Pack one panel whose `lines` source lines (A rows / B columns) are contiguous along k:
    d[kk * lines + l] = s[min(l, last) * stride + kk] for kk < kc (requires kc >= vw).

    Per vw columns: load vw x vw blocks (groups of vw lines, the last group padded by
    repeating a line), transpose them in registers and store each column with full-width
    stores in ascending address order. When lines % vw != 0 a store spills up to vw - 1
    elements into the next column's slot, which the next store overwrites (the panel's last
    spill lands past it). kc % vw != 0 is covered by one more block at kc - vw, which rewrites
    some columns with the same values."""
    vw, esz = bl.vw, bl.pt.byte_size
    offs = [b.mul(smin(b, i64(l), last), iv(stride)) for l in range(-(-lines // vw) * vw)]
    align = 64 if lines % vw == 0 else esz

    def block(kv: ir.Value) -> None:
        groups = [_transpose(b, [_load(b, s, b.add(kv, offs[g * vw + j]), bl.vty, esz)
                                 for j in range(vw)]) for g in range(-(-lines // vw))]
        base = b.mul(kv, i64(lines))
        for kk in range(vw):
            for g, cols in enumerate(groups):
                _store(b, cols[kk], d, b.add(base, i64(kk * lines + g * vw)), align)

    k_vec = b.mul(b.sdiv(kc, i64(vw)), i64(vw))
    with lu.for_range(b, k_vec, step=vw, name="kv") as kv:
        block(kv)
    with b.if_then(b.icmp_signed("!=", k_vec, kc), likely=False):
        block(b.sub(kc, i64(vw)))


# ---- microkernel ---------------------------------------------------------------------------
def emit_microkernel(module: ir.Module, name: str, bl: Blocking,
                     direct: bool = False, direct_b: bool = False) -> ir.Function:
    """`void name(i64 kc, ptr ap, ptr bp, ptr c, i64 mr_eff, i64 nr_eff, i1 first, i64 cm,
    i64 cn, i64 am, i64 bk)`: C[0:mr_eff, 0:nr_eff] = (first ? 0 : C) + Ap-panel @ Bp-panel
    (C element strides cm, cn).

    Requires kc >= 1, 1 <= mr_eff <= mr, 1 <= nr_eff <= nr; a B panel packed by `emit_pack_b`
    (64-byte aligned; `bk` unused) or, with `direct_b`, B itself: kc rows of nr contiguous
    elements, `bk` elements apart (all nr columns are read: the caller guarantees they exist);
    an A panel packed by `emit_pack_a` (`am` unused) or, with `direct`, A itself: mr_eff rows
    of kc contiguous elements, `am` elements apart (rows past mr_eff are never read). Full
    tiles of a C with unit column stride are prefetched and stored as vectors; the others go
    through a stack tile."""
    fn, b = new_function(module, name, [lu.I64, lu.PTR, lu.PTR, lu.PTR, lu.I64, lu.I64, lu.I1,
                                        lu.I64, lu.I64, lu.I64, lu.I64], noalias=(1, 2, 3))
    fn.attributes.add("noinline")
    kc, ap, bp, c, mr_eff, nr_eff, first, cm, cn, am, bk = fn.args
    ety, vty, mr, nv, vw, nr = bl.ety, bl.vty, bl.mr, bl.nv, bl.vw, bl.nr
    esz = bl.pt.byte_size
    # direct: row i of the tile reads A row min(i, mr_eff - 1) (a real row; its results for
    # i >= mr_eff are computed but never stored)
    rows = [gep(b, ap, b.mul(smin(b, i64(i), b.sub(mr_eff, i64(1))), am), ety)
            for i in range(mr)] if direct else []
    accs = [[alloca(b, vty) for _ in range(nv)] for _ in range(mr)]
    zero = lu.const(vty, 0)
    unit = b.icmp_signed("==", cn, i64(1))
    with b.if_then(unit, likely=True):
        _prefetch_tile(b, c, bl, cm)
    for row in accs:
        for slot in row:
            b.store(zero, slot, align=64)

    def step(kidx: ir.Value) -> None:
        bo, ao = b.mul(kidx, bk if direct_b else i64(nr)), b.mul(kidx, i64(mr))
        bv = [_load(b, bp, b.add(bo, i64(v * vw)), vty, esz if direct_b else 64)
              for v in range(nv)]
        for i in range(mr):
            elem = _load(b, rows[i], kidx, ety, esz) if direct else \
                _load(b, ap, b.add(ao, i64(i)), ety, esz)
            a = lu.splat(b, elem, vw)
            for v in range(nv):
                acc = b.load(accs[i][v], typ=vty, align=64)
                b.store(lu.intrinsic(b, "llvm.fma", [a, bv[v], acc]), accs[i][v], align=64)

    u = bl.unroll
    kmain = b.mul(b.sdiv(kc, i64(u)), i64(u))
    with lu.for_range(b, kmain, step=u, name="k") as k:
        for j in range(u):
            step(b.add(k, i64(j)) if j else k)
    with lu.for_range(b, kc, start=kmain, name="kr") as k:
        step(k)

    full = b.and_(b.icmp_signed("==", mr_eff, i64(mr)), b.icmp_signed("==", nr_eff, i64(nr)))
    with b.if_else(b.and_(full, unit), likely=True) as (vec_path, tile_path):
        with vec_path:
            _store_tile_vectors(b, accs, c, first, bl, cm)
        with tile_path:
            _store_tile_scalar(b, accs, c, first, mr_eff, nr_eff, bl, cm, cn)
    b.ret_void()
    return fn


def _prefetch_tile(b: ir.IRBuilder, c: ir.Value, bl: Blocking, cm: ir.Value) -> None:
    """Prefetch the C tile (unit column stride, row stride cm) for writing, so its cache
    misses overlap the k loop."""
    fnty = ir.FunctionType(lu.VOID, [lu.PTR, lu.I32, lu.I32, lu.I32])
    fn = b.module.globals.get("llvm.prefetch.p0") or ir.Function(b.module, fnty,
                                                                 "llvm.prefetch.p0")
    row_bytes = bl.nr * bl.pt.byte_size
    for i in range(bl.mr):
        row = b.mul(i64(i), cm)
        for off in range(0, row_bytes + 63, 64):
            elem = min(off, row_bytes - 1) // bl.pt.byte_size
            # not `inbounds`: rows past an edge tile's end may lie outside C (a prefetch
            # never faults)
            ptr = b.gep(c, [b.add(row, i64(elem))], source_etype=bl.ety)
            b.call(fn, [ptr, ir.Constant(lu.I32, 1),
                        ir.Constant(lu.I32, 3), ir.Constant(lu.I32, 1)])


def _store_tile_vectors(b: ir.IRBuilder, accs: list[list[ir.Value]], c: ir.Value,
                        first: ir.Value, bl: Blocking, cm: ir.Value) -> None:
    vty, esz = bl.vty, bl.pt.byte_size
    rows = [b.mul(i64(i), cm) for i in range(len(accs))]
    with b.if_else(first) as (overwrite, update):
        with overwrite:
            for i, row in enumerate(accs):
                for v, slot in enumerate(row):
                    _store(b, b.load(slot, typ=vty, align=64), c,
                           b.add(rows[i], i64(v * bl.vw)), esz)
        with update:
            for i, row in enumerate(accs):
                for v, slot in enumerate(row):
                    off = b.add(rows[i], i64(v * bl.vw))
                    old = _load(b, c, off, vty, esz)
                    _store(b, b.fadd(old, b.load(slot, typ=vty, align=64)), c, off, esz)


def _store_tile_scalar(b: ir.IRBuilder, accs: list[list[ir.Value]], c: ir.Value,
                       first: ir.Value, mr_eff: ir.Value, nr_eff: ir.Value, bl: Blocking,
                       cm: ir.Value, cn: ir.Value) -> None:
    """Edge tiles (and C without unit column stride): spill the tile, then copy elementwise."""
    ety, vty, nr, esz = bl.ety, bl.vty, bl.nr, bl.pt.byte_size
    tile = alloca(b, ir.ArrayType(ety, bl.mr * nr))
    for i, row in enumerate(accs):
        for v, slot in enumerate(row):
            _store(b, b.load(slot, typ=vty, align=64), tile, i * nr + v * bl.vw, 64)
    with lu.for_range(b, mr_eff, name="ti") as i, lu.for_range(b, nr_eff, name="tj") as j:
        t = _load(b, tile, b.add(b.mul(i, i64(nr)), j), ety, esz)
        off = b.add(b.mul(i, cm), b.mul(j, cn))
        old = b.select(first, lu.const(ety, 0), _load(b, c, off, ety, esz))
        _store(b, b.fadd(old, t), c, off, esz)


# ---- tiny problems and matrix-vector -------------------------------------------------------
def simple_loop_order(m: int, n: int, k: int, a_st: tuple[int, int], b_st: tuple[int, int],
                      c_st: tuple[int, int]) -> str:
    """The plain nest's form: 'dot' (k innermost, needs A and B contiguous along k), 'axpy_n'
    (n innermost, B and C contiguous along n) or 'axpy_m' (m innermost, A and C contiguous
    along m); the longest contiguous innermost loop wins (ties: axpy_n, dot, axpy_m)."""
    (am, ak), (bk, bn), (cm, cn) = a_st, b_st, c_st
    forms = [("axpy_n", n, bn == 1 and cn == 1), ("dot", k, ak == 1 and bk == 1),
             ("axpy_m", m, am == 1 and cm == 1)]
    best = max(forms, key=lambda f: (f[2], f[1] > 1, f[1]))
    return best[0]


def emit_simple_gemm(module: ir.Module, name: str, pt: PrimitiveType, m: int, n: int, k: int,
                     a_st: tuple[int, int], b_st: tuple[int, int], c_st: tuple[int, int],
                     accumulate: bool) -> ir.Function:
    """`void name(ptr a, ptr b, ptr c)`: one (unbatched) C (+)= A @ B by a plain loop nest in
    the form `simple_loop_order` picks: a dot product per element with a reassociating
    (vectorisable) accumulator, or an axpy along n (rows of B into rows of C) or along m
    (columns of A into columns of C). Any sizes (zeros included) and strides."""
    fn, b = new_function(module, name, [lu.PTR, lu.PTR, lu.PTR], noalias=(0, 1, 2))
    ap, bp, cp = fn.args
    ety, esz = lu.value_type(pt), pt.byte_size
    (am, ak), (bk, bn), (cm, cn) = a_st, b_st, c_st
    zero = lu.const(ety, 0)
    form = simple_loop_order(m, n, k, a_st, b_st, c_st)

    def ld(base: ir.Value, i: ir.Value, si: int, j: ir.Value, sj: int) -> ir.Value:
        return _load(b, base, b.add(b.mul(i, i64(si)), b.mul(j, i64(sj))), ety, esz)

    if form == "dot":
        acc = alloca(b, ety, esz)
        with lu.for_range(b, i64(m), name="i") as i, lu.for_range(b, i64(n), name="j") as j:
            b.store(zero, acc)
            with lu.for_range(b, i64(k), name="k") as kk:
                prod = b.fmul(ld(ap, i, am, kk, ak), ld(bp, kk, bk, j, bn), flags=FAST)
                b.store(b.fadd(b.load(acc, typ=ety), prod, flags=FAST), acc)
            off = b.add(b.mul(i, i64(cm)), b.mul(j, i64(cn)))
            r = b.load(acc, typ=ety)
            if accumulate:
                r = b.fadd(_load(b, cp, off, ety, esz), r)
            _store(b, r, cp, off, esz)
        b.ret_void()
        return fn
    # axpy forms: `outer` is the C dim not vectorised, `inner` the contiguous one; `rows`
    # C lines at a time give independent FMA chains (one line alone is FMA-latency bound)
    if form == "axpy_n":
        outer, inner, so_a, so_c, si_b, si_c, sk_x, xbase, lbase, sk_l = (
            m, n, am, cm, bn, cn, ak, ap, bp, bk)
    else:
        outer, inner, so_a, so_c, si_b, si_c, sk_x, xbase, lbase, sk_l = (
            n, m, bn, cn, am, cm, bk, bp, ap, ak)

    def lines(o: ir.Value, rows: int) -> None:
        clines = [gep(b, cp, b.mul(b.add(o, i64(r)), i64(so_c)), ety) for r in range(rows)]
        if not accumulate:
            with lu.for_range(b, i64(inner), name="z") as j:
                for cl in clines:
                    _store(b, zero, cl, b.mul(j, i64(si_c)), esz)
        with lu.for_range(b, i64(k), name="k") as kk:
            xs = [ld(xbase, b.add(o, i64(r)), so_a, kk, sk_x) for r in range(rows)]
            line = gep(b, lbase, b.mul(kk, i64(sk_l)), ety)
            with lu.for_range(b, i64(inner), name="j") as j:
                co = b.mul(j, i64(si_c))
                y = _load(b, line, b.mul(j, i64(si_b)), ety, esz)
                for x, cl in zip(xs, clines):
                    acc = _load(b, cl, co, ety, esz)
                    s = b.fadd(acc, b.fmul(x, y, flags=("contract",)), flags=("contract",))
                    _store(b, s, cl, co, esz)

    rows = SIMPLE_ROWS if outer >= SIMPLE_ROWS else 1
    with lu.for_range(b, i64(outer // rows * rows), step=rows, name="o") as o:
        lines(o, rows)
    if outer % rows:
        with lu.for_range(b, i64(outer), start=i64(outer // rows * rows), name="or") as o:
            lines(o, 1)
    b.ret_void()
    return fn
