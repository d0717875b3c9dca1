"""Small products of row-major A and a B read along k (C = A @ B with B stored as Bᵀ, i.e. both
operands contiguous along k): dot products of rows, tiled, with no packing and no scratch.

`a @ b.T` (attention's scores q·kᵀ, a Gram matrix m·mᵀ, reverse-mode products) gives the packed
GEMM a B whose columns are strided: its microkernel needs rows of B along n, so the GEMM packs
both operands into scratch. For small products that scratch is most of the dot's memory (a
64x64x64 A·Bᵀ: 34 KiB of workspace for a 16 KiB result) and the packing a large part of its
time. This kernel instead reads A and B where they are, along k, which both store contiguously:

    for each TM x TN tile of C (4 x 4):
        acc[r][c] = vector zeros                      (TM * TN vector accumulators, V lanes)
        for kk in 0, V, 2V, ...:                      (the last step masked when V does not
            a[r] = A[i + r, kk : kk + V]              divide k)
            b[c] = B[kk : kk + V, j + c]   (contiguous: B is stored as Bᵀ)
            acc[r][c] += a[r] * b[c]                  (TM * TN FMAs per TM + TN loads)
        C[i + r, j + c] = sum of acc[r][c]'s lanes

The horizontal sums of the 16 accumulators are one reduction tree (`reduce_lanes`): each level
pairs two vectors, shuffles the halves of every accumulator's lanes together and adds, so
16 accumulators of 16 lanes become one vector of 16 sums in 15 shuffle-pairs and adds instead
of 16 separate reductions. Edge tiles (m or n not a multiple of 4) use fewer accumulators.

The summation order differs from the packed GEMM's (V interleaved partial sums, then a tree);
both are accurate to the usual float rounding of a length-k dot product.

Used by `gemm.emit_gemm` when `gemm.uses_row_dots(spec)`.
"""
from __future__ import annotations

from llvmlite import ir

from xlc.backend_cpu.gemm_kernels import alloca, gep, i64, new_function
from xlc.codegen import llvm_utils as lu
from xlc.hlo.shape import PrimitiveType

__all__ = ["TILE_M", "TILE_N", "emit_rowdot_gemm", "reduce_lanes", "vector_lanes"]

TILE_M = 4
TILE_N = 4
"""C tile of the kernel: 16 vector accumulators plus 4 + 4 operand vectors fit the 32 zmm
registers, and 16 independent FMA chains cover the FMA latency of two ports."""


def vector_lanes(pt: PrimitiveType) -> int:
    """Lanes of the kernel's vectors for `pt` (one 512-bit register)."""
    return 64 // pt.byte_size


def reduce_lanes(b: ir.IRBuilder, vecs: list[ir.Value], lanes: int
                 ) -> list[tuple[ir.Value, list[int]]]:
    """Sum the lanes of each vector of `vecs` (each `lanes` wide, lanes a power of two) by one
    shuffle-and-add tree (padded with zero vectors to a power of two, at least `lanes`).
    Returns (vector, owners) pairs: lane l of the vector holds the full sum of
    `vecs[owners[l]]` (owner -1: padding, a zero). Every input appears exactly once; no
    vector holds padding only."""
    vty = vecs[0].type
    zero = ir.Constant(vty, None)
    count = lanes  # at least `lanes` vectors: log2(lanes) levels leave one lane per sum
    while count < len(vecs):
        count *= 2
    items: list[tuple[ir.Value, list[int]]] = [(v, [i] * lanes) for i, v in enumerate(vecs)]
    items += [(zero, [-1] * lanes) for _ in range(count - len(vecs))]
    while len(items) > 1 and len(items[0][1]) > len(set(items[0][1])):
        nxt = []
        for (x, ox), (y, oy) in zip(items[0::2], items[1::2]):
            lo, hi, owners = [], [], []
            for base, own in ((0, ox), (lanes, oy)):
                for o in dict.fromkeys(own):  # each owner's lanes, halves paired up
                    ls = [i for i, w in enumerate(own) if w == o]
                    half = len(ls) // 2
                    lo += [base + i for i in ls[:half]]
                    hi += [base + i for i in ls[half:]]
                    owners += [o] * half
            mask_lo = ir.Constant(ir.VectorType(lu.I32, lanes), lo)
            mask_hi = ir.Constant(ir.VectorType(lu.I32, lanes), hi)
            s = b.fadd(b.shuffle_vector(x, y, mask_lo), b.shuffle_vector(x, y, mask_hi),
                       flags=("reassoc", "contract"))
            nxt.append((s, owners))
        items = nxt
    return [it for it in items if any(o >= 0 for o in it[1])]


def emit_rowdot_gemm(module: ir.Module, name: str, pt: PrimitiveType, m: int, n: int, k: int,
                     am: int, bn: int, c_st: tuple[int, int], accumulate: bool) -> ir.Function:
    """`void name(ptr a, ptr b, ptr c)`: one (unbatched) C (+)= A @ B where A (m x k) has row
    stride `am` and unit k stride and B (k x n) has unit k stride and column stride `bn` (B
    stored as Bᵀ); C has element strides `c_st` = (row, column). Requires m, n, k >= 1.
    Reads A and B in place and uses no memory besides registers (see the module docstring)."""
    fn, b = new_function(module, name, [lu.PTR, lu.PTR, lu.PTR], noalias=(0, 1, 2))
    ap, bp, cp = fn.args
    ety, esz = lu.value_type(pt), pt.byte_size
    lanes = vector_lanes(pt)
    vty = ir.VectorType(ety, lanes)
    cm, cn = c_st
    full, tail = divmod(k, lanes)
    tail_mask = ir.Constant(ir.VectorType(lu.I1, lanes), [i < tail for i in range(lanes)])

    def tile(i0: ir.Value, j0: ir.Value, rows: int, cols: int) -> None:
        arows = [gep(b, ap, b.mul(b.add(i0, i64(r)), i64(am)), ety) for r in range(rows)]
        bcols = [gep(b, bp, b.mul(b.add(j0, i64(c)), i64(bn)), ety) for c in range(cols)]

        def step(accs: list[ir.Value], kk: ir.Value, masked: bool) -> list[ir.Value]:
            def ld(base: ir.Value) -> ir.Value:
                ptr = gep(b, base, kk, ety)
                if not masked:
                    return b.load(ptr, typ=vty, align=esz)
                return lu.intrinsic(b, "llvm.masked.load",
                                    [ptr, ir.Constant(lu.I32, esz), tail_mask,
                                     ir.Constant(vty, None)], ret=vty, overloads=[vty, lu.PTR])
            av = [ld(p) for p in arows]
            bv = [ld(p) for p in bcols]
            return [b.fadd(accs[r * cols + c], b.fmul(av[r], bv[c], flags=("contract",)),
                           flags=("contract",))
                    for r in range(rows) for c in range(cols)]

        accs: list[ir.Value] = [ir.Constant(vty, None)] * (rows * cols)
        if full:  # accumulators in stack slots, promoted to registers by LLVM's mem2reg
            slots = [alloca(b, vty, 64) for _ in accs]
            for slot, acc in zip(slots, accs):
                b.store(acc, slot)
            with lu.for_range(b, i64(full * lanes), step=lanes, name="rd.k") as kk:
                new = step([b.load(slot, typ=vty) for slot in slots], kk, False)
                for slot, acc in zip(slots, new):
                    b.store(acc, slot)
            accs = [b.load(slot, typ=vty) for slot in slots]
        if tail:
            accs = step(accs, i64(full * lanes), True)
        for vec, owners in reduce_lanes(b, accs, lanes):
            for lane, o in enumerate(owners):
                if o < 0:
                    continue
                r, c = divmod(o, cols)
                off = b.add(b.mul(b.add(i0, i64(r)), i64(cm)), b.mul(b.add(j0, i64(c)), i64(cn)))
                x = b.extract_element(vec, ir.Constant(lu.I32, lane))
                ptr = gep(b, cp, off, ety)
                if accumulate:
                    x = b.fadd(b.load(ptr, typ=ety, align=esz), x)
                b.store(x, ptr, align=esz)

    mt, mr = divmod(m, TILE_M)
    nt, nr = divmod(n, TILE_N)
    for rows, count, start in ((TILE_M, mt, 0), (mr, 1 if mr else 0, mt * TILE_M)):
        if not count:
            continue
        with lu.for_range(b, i64(count), name="rd.i") as it:
            i0 = b.add(i64(start), b.mul(it, i64(TILE_M)))
            if nt:
                with lu.for_range(b, i64(nt), name="rd.j") as jt:
                    tile(i0, b.mul(jt, i64(TILE_N)), rows, TILE_N)
            if nr:
                tile(i0, i64(nt * TILE_N), rows, nr)
    b.ret_void()
    return fn
