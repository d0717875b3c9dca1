"""A packed, register-blocked GEMM generator for the CPU backend (f32 and f64, AVX-512).

`emit_gemm(llvm_module, name, spec)` adds

    void name(ptr A, ptr B, ptr C, ptr scratch, i64 share, i64 nshares, i64 slot)

computing, for every batch b < spec.batch, C[b] = A[b] @ B[b] (or C[b] += A[b] @ B[b] with
`spec.accumulate`), where A[b] is m x k, B[b] is k x n and C[b] is m x n, each addressed through
the element strides in the spec (so transposed and batched operands need no copies). The caller
runs it once per share with share = 0 .. nshares-1 (all with the same nshares, concurrently or
not): each call computes its own disjoint share of C, packing into the part `slot` of
`scratch`. Calls running at the same time must use different slots; `scratch` must hold
`scratch_bytes(spec, nslots)` bytes for slots 0 .. nslots-1 and nshares = `gemm_shares(spec,
nslots)` (a slot's blocks are sized for one such share; any alignment: the function aligns
it to 64 bytes) and must not be shared with another GEMM running at the same time. Run through
the thread pool (`emit_gemm_entry`), the slot is the thread's: a GEMM has
`gemm_shares(spec, nthreads)` shares, several per thread, and any thread takes any share (on
a loaded machine a preempted thread then holds a small part of the product, not half of it).
Where the shares split m of one batch, each would pack all of B again: there B is packed once
(`packs_b_once`, on any number of threads), by the shares of a pack phase `name.pack` (same
signature) that must finish before the shares of `name` start. When B spans several blocks
(KC rows by up to PACKED_BLOCK_BYTES of columns), the entry does this one block at a time
(`b_blocks`: functions `name.k<i>` and their pack phases, the later k blocks accumulating into
C), so the scratch holds one packed block of B, not all of B. `scratch_bytes` is sized for
that, so such a product runs only through `emit_gemm_entry` (calling `name.pack` and then
`name` directly needs `packed_b_bytes(spec)` for B instead).

Algorithm (BLIS's loop structure): the work is split into shares along the flattened
(batch, n-panels) or (batch, m-panels) space, whichever has more panels. Each share loops
jc (NC columns) > pc (KC of k; packs B[pc, jc] into NR-column panels) > ic (MC rows; packs
A[ic, pc] into MR-row panels) > jr > ir, calling the MR x NR microkernel from
`gemm_kernels.py`. When a thread's columns fit one NR panel and A is row-major, A is not
packed: the microkernel reads its rows in place (each A element is used once per k block
there, so packing would only add a pass over A). Tiny problems and matrix-vector products
(`use_simple`) use a plain loop nest instead, and small products with B stored as Bᵀ
(`uses_row_dots`) tiled dot products of rows (`gemm_rowdot.py`, no packing); both run in
share 0 only (the other shares return at once).

`compile_gemm(spec)` JIT-compiles one GEMM plus a threaded entry (`xlc/backend_cpu/parallel.py`) and
returns a callable `(a, b, c=None) -> c` on numpy arrays, for tests and benchmarks.

Use from a backend: `spec = gemm_spec_for_dot(dot)` (xlc/backend_cpu/gemm_dot.py; None when the
dot is not f32/f64 or its dims do not merge), reserve `scratch_bytes(spec, nt)` bytes of temp,
`emit_gemm(module, name, spec)`, then either call `name(A, B, C, scratch, 0, 1, 0)` yourself
(one share, where not `packs_b_once(spec)`) or add `emit_gemm_entry(module, name + "_mt",
name, spec)` and call `name_mt(A, B, C, scratch, gemm_shares(spec, nt), nt)` from the kernel
(nt from `recommended_threads(spec, cores)`; it runs the pack phases where B is packed once).
"""
from __future__ import annotations

import ctypes
import logging
import threading
from dataclasses import dataclass, replace

import numpy as np
from llvmlite import ir

from xlc.backend_cpu import jit
from xlc.backend_cpu.gemm_kernels import Blocking, emit_simple_gemm, gep, i64, simple_loop_order
from xlc.backend_cpu.gemm_lib import (
    IN_PLACE,
    ONCE,
    ONCE_MC_PANELS,
    PACK_ONCE_BYTES,
    PARAMS,
    SPLIT_M_PANELS,
    declare_gemm,
)
from xlc.backend_cpu.gemm_rowdot import emit_rowdot_gemm
from xlc.backend_cpu.parallel import (
    PARALLEL_FLOPS,
    SHARES_PER_THREAD,
    available_threads,
    emit_slotted_entry,
)
from xlc.codegen import llvm_utils as lu
from xlc.errors import ArgumentError, UnsupportedOpError
from xlc.hlo.shape import PrimitiveType

__all__ = ["GemmSpec", "CompiledGemm", "emit_gemm", "emit_gemm_entry", "scratch_bytes",
           "compile_gemm", "recommended_threads", "gemm_shares", "packs_b_once", "reads_in_place",
           "packed_b_bytes", "use_simple", "uses_row_dots", "packs_nothing", "blocking",
           "simple_loop_order", "b_blocks", "writes_over_a"]

log = logging.getLogger("xlc.backend_cpu")

# Register tiles: f32 14 x 32 holds 28 zmm accumulators (+2 B vectors and the A broadcast: 31
# of 32 zmm, no spills in the k loop); f64 the same with 8 lanes. 12x32, 8x48 and 6x64 measured
# the same within the (large) noise of the shared test machine. Cache blocks: a KC x NR B
# panel (32 KiB) stays in the 48 KiB L1 across the ir loop, the MC x KC A block (~0.5 MiB) in
# the 1 MiB L2, the KC x NC B block in L3. unroll: k-loop unrolling of the microkernel (4 gave
# no measurable gain over 2 and costs ~40 % more compile time for that function).
SIMPLE_FLOPS = 2 * 40 ** 3
SHARE_FLOPS = 1 << 20
"""A GEMM share computes at least about this many flops (~10 us on one core), so that the
pool's hand-off and the packing each share repeats stay small next to it."""
_BLOCKING = {
    PrimitiveType.F32: dict(mr=14, nv=2, vw=16, kc=256, mc=504, nc=4096, unroll=2),
    PrimitiveType.F64: dict(mr=14, nv=2, vw=8, kc=256, mc=252, nc=2048, unroll=2),
}


@dataclass(frozen=True)
class GemmSpec:
    """One (batched) matrix product C[b] (+)= A[b] @ B[b].

    Strides are in elements: a_strides = (batch, m, k), b_strides = (batch, k, n),
    c_strides = (batch, m, n); any non-negative strides are allowed (C's must not make two
    elements overlap). dtype: PrimitiveType.F32 or F64 (or anything np.dtype accepts)."""

    m: int
    n: int
    k: int
    batch: int
    a_strides: tuple[int, int, int]
    b_strides: tuple[int, int, int]
    c_strides: tuple[int, int, int]
    dtype: PrimitiveType = PrimitiveType.F32
    accumulate: bool = False

    def __post_init__(self) -> None:
        pt = self.dtype if isinstance(self.dtype, PrimitiveType) else \
            PrimitiveType.from_dtype(self.dtype)
        object.__setattr__(self, "dtype", pt)
        for f in ("a_strides", "b_strides", "c_strides"):
            st = tuple(int(s) for s in getattr(self, f))
            if len(st) != 3 or min(st) < 0:
                raise ArgumentError(f"GemmSpec.{f} must be 3 non-negative element strides "
                                    f"(batch, row, column), got {getattr(self, f)}")
            object.__setattr__(self, f, st)
        if min(self.m, self.n, self.k, self.batch) < 0:
            raise ArgumentError(f"GemmSpec sizes must be >= 0, got m={self.m} n={self.n} "
                                f"k={self.k} batch={self.batch}")
        if pt not in _BLOCKING:
            raise UnsupportedOpError(f"GEMM generator supports f32 and f64, not '{pt.text}'")

    def params(self, mode: int = 0) -> list[int]:
        """The library GEMM's parameter block (`xlc.backend_cpu.gemm_lib`; `mode`: its packing
        mode, 0, `gemm_lib.ONCE` or `gemm_lib.IN_PLACE`)."""
        return [self.m, self.n, self.k, self.batch, *self.a_strides, *self.b_strides,
                *self.c_strides, int(self.accumulate), int(mode)]

    @staticmethod
    def for_arrays(a: np.ndarray, b: np.ndarray, accumulate: bool = False) -> GemmSpec:
        """The spec of `a @ b` for 2-D (m x k, k x n) or 3-D (batch x m x k, batch x k x n)
        numpy arrays, strides taken from the arrays (views such as `x.T` are fine), C
        contiguous row-major."""
        if a.ndim != b.ndim or a.ndim not in (2, 3) or a.shape[-1] != b.shape[-2] \
                or a.shape[:-2] != b.shape[:-2] or a.dtype != b.dtype:
            raise ArgumentError(f"cannot multiply {a.dtype}{list(a.shape)} by "
                                f"{b.dtype}{list(b.shape)}")
        a3, b3 = (a, b) if a.ndim == 3 else (a[None], b[None])
        batch, m, k = a3.shape
        n = b3.shape[2]
        def st(x: np.ndarray) -> tuple[int, int, int]:
            return tuple(s // x.itemsize for s in x.strides)  # type: ignore[return-value]
        return GemmSpec(m, n, k, batch, st(a3), st(b3), (m * n, n, 1),
                        PrimitiveType.from_dtype(a.dtype), accumulate)


def base_blocking(pt: PrimitiveType) -> Blocking:
    """The full-size blocking of `pt` (what `blocking` clips to a problem's sizes)."""
    p = _BLOCKING[pt]
    return Blocking(pt, p["mr"], p["nv"], p["vw"], p["kc"], p["mc"] // p["mr"] * p["mr"],
                    p["nc"] // (p["nv"] * p["vw"]) * (p["nv"] * p["vw"]), p["unroll"])


def blocking(spec: GemmSpec) -> Blocking:
    """The register/cache blocking used for `spec` (block sizes clipped to the problem)."""
    p = _BLOCKING[spec.dtype]
    mr, nr = p["mr"], p["nv"] * p["vw"]
    # equal k blocks (k = 300 gives 150 + 150, not 256 + 44: every block amortises C's traffic)
    kc = max(1, -(-spec.k // -(-spec.k // p["kc"]))) if spec.k else 1
    mc = min(max(mr, p["mc"] // mr * mr), -(-spec.m // mr) * mr)
    nc = min(max(nr, p["nc"] // nr * nr), -(-spec.n // nr) * nr)
    return Blocking(spec.dtype, mr, p["nv"], p["vw"], kc, max(mc, mr), max(nc, nr),
                    p["unroll"])


def use_simple(spec: GemmSpec) -> bool:
    """True when `spec` runs as a plain loop nest (tiny, degenerate or matrix-vector)."""
    return (min(spec.m, spec.n, spec.k) == 0 or spec.n == 1 or spec.m == 1
            or 2 * spec.m * spec.n * spec.k <= SIMPLE_FLOPS)


def _round64(x: int) -> int:
    return (x + 63) // 64 * 64


def _thread_bytes(spec: GemmSpec, bl: Blocking, nshares: int) -> tuple[int, int]:
    """Bytes of one slot's A block and B block for a call in `nshares` shares (the twin of
    `gemm_lib._Sizes.slot_parts`): a share covers at most ceil(units / nshares) panels of the
    split dimension, so its A block has at most that many MR-row panels (split m) and its B
    block at most that many NR-column panels (split n)."""
    esz = spec.dtype.byte_size
    rows, cols = bl.mc, bl.nc
    if packs_b_once(spec):  # A blocks of at most ONCE_MC_PANELS panels
        rows = min(rows, ONCE_MC_PANELS * bl.mr)
    if nshares > 1:
        split_m = _split_m(spec, bl)
        panels = -(-spec.m // bl.mr) if split_m else -(-spec.n // bl.nr)
        per = -(-(spec.batch * panels) // nshares)
        if split_m:
            rows = min(rows, per * bl.mr)
        else:
            cols = min(cols, per * bl.nr)
    # + 64 bytes: the A packers' last full-width store may spill past the last panel
    return _round64(rows * bl.kc * esz + 64), _round64(bl.kc * cols * esz)


IN_PLACE_BYTES = 128 << 10
IN_PLACE_FLOPS = 2 << 20
"""A product of at most IN_PLACE_FLOPS whose A and B (one batch) take at most IN_PLACE_BYTES
together is computed from them in place, packing nothing (`reads_in_place`): they stay in
the caches across the microkernel's passes, so packing (for unit-stride, conflict-free panels)
buys less than it costs, and the product needs no scratch memory. Measured on the 2-core test
VM, one thread, in-place / packed time (`tools/bench_gemm_in_place.py`): 48x64x48 0.81,
64^3 0.97, 32x64x256 0.85, 48x96x200 0.89, 128x64x128 0.87-0.99, 64x64x250 1.00; past the
bounds packing wins (96x128x96 1.08, 128^3 1.12, 256x128x64 1.06, 64x256x128 1.29)."""


def reads_in_place(spec: GemmSpec) -> bool:
    """True when `spec` packs nothing (packing mode `gemm_lib.IN_PLACE`, no scratch): a small
    product (A and B of one batch within IN_PLACE_BYTES, IN_PLACE_FLOPS per batch) of
    row-major A (unit k stride) and B with unit column stride whose n is a multiple of the NR
    panel width (every B panel the microkernel reads in place is whole)."""
    if use_simple(spec):
        return False
    bl = blocking(spec)
    return (spec.a_strides[2] == 1 and spec.b_strides[2] == 1 and spec.n % bl.nr == 0
            and (spec.m * spec.k + spec.k * spec.n) * spec.dtype.byte_size <= IN_PLACE_BYTES
            and 2 * spec.m * spec.n * spec.k <= IN_PLACE_FLOPS)


ROWDOT_FLOPS = 1 << 20
ROWDOT_MIN_K = 48
"""Products of A and a B stored as Bᵀ of at most ROWDOT_FLOPS per batch, k >= ROWDOT_MIN_K and
operands within IN_PLACE_BYTES run as tiled dot products of rows (`uses_row_dots`), with no
packing scratch. Each output element then ends in a lane-sum (about two shuffles), so short
k loses: measured on the 2-core test VM, one thread, f32, row dots / packed time
(`python tools/bench_gemm_in_place.py --bt`): 64^3 0.95, 48x48x96 0.85, 32x64x256 0.95,
64x64x128 0.96, 128x64x64 1.07; outside the bounds 64x64x32 1.10, 128x128x32 1.36,
96x96x64 1.16, 128x128x64 1.19."""


def uses_row_dots(spec: GemmSpec) -> bool:
    """True when `spec` runs as tiled dot products of rows (`gemm_rowdot`: no packing, no
    scratch, one share): row-major A times a B contiguous along k but not along n (B stored
    as Bᵀ, as in `a @ b.T`, which the packed GEMM would have to pack), within ROWDOT_FLOPS
    per batch, k >= ROWDOT_MIN_K and A and B of one batch within IN_PLACE_BYTES."""
    if use_simple(spec):
        return False
    return (spec.a_strides[2] == 1 and spec.b_strides[1] == 1 and spec.b_strides[2] != 1
            and spec.k >= ROWDOT_MIN_K
            and (spec.m * spec.k + spec.k * spec.n) * spec.dtype.byte_size <= IN_PLACE_BYTES
            and 2 * spec.m * spec.n * spec.k <= ROWDOT_FLOPS)


def _one_share(spec: GemmSpec) -> bool:
    """`spec` runs as one function in share 0 (the plain loop nest or the row dots)."""
    return use_simple(spec) or uses_row_dots(spec)


def packs_nothing(spec: GemmSpec) -> bool:
    """True when `spec` needs no packing scratch at all (the plain loop nest, the row dots, or
    the GEMM reading its operands in place)."""
    return _one_share(spec) or reads_in_place(spec)


def packed_b_bytes(spec: GemmSpec) -> int:
    """Bytes of all of B packed once (k x n rounded up to NR columns, + 64 bytes of slack)."""
    bl = blocking(spec)
    return _round64(spec.k * -(-spec.n // bl.nr) * bl.nr * spec.dtype.byte_size + 64)


def packs_b_once(spec: GemmSpec) -> bool:
    """True when a call packs B once, block by block (`b_blocks`), in a pack phase before the
    shares of each block (`emit_gemm_entry`), instead of once per share: a single batch whose
    shares split m (each would otherwise pack all of B) and whose B packs within
    PACK_ONCE_BYTES. On one thread too: the scratch then holds one block of B and one small A
    block instead of a whole MC x KC A block and KC x NC B block (a 1024^3 f32 product: 0.32 MB
    instead of 1.56 MB, at the same speed)."""
    return (not packs_nothing(spec) and spec.batch == 1
            and _split_m(spec, blocking(spec))
            and packed_b_bytes(spec) <= PACK_ONCE_BYTES)


PACKED_BLOCK_BYTES = 256 << 10
"""Where B is packed once, the entry packs it one block of at most about this many bytes at a
time (`b_blocks`: KC rows of k by as many NR-column panels as fit), so that the scratch holds
that block, not all of B. A quarter of the 1 MiB L2: the block stays there while every share
streams it past its own A rows. Each further column block costs one more packing pass over
A and two more pool calls: a 1024^3 f32 product in 4 column blocks of 256 runs about 6 %
slower on two threads than in one of 1024 (docs/cpu.md), for a quarter of the scratch."""


def _equal_blocks(size: int, most: int, unit: int) -> list[tuple[int, int]]:
    """(offset, length) of the fewest blocks of at most `most` (a multiple of `unit`, at
    least `unit`) covering `size`, all of one length rounded up to `unit` but the last."""
    most = max(unit, most // unit * unit)
    count = max(1, -(-size // most))
    per = -(-size // count)
    step = min(most, -(-per // unit) * unit)
    return [(off, min(step, size - off)) for off in range(0, size, step)]


def b_blocks(spec: GemmSpec) -> list[tuple[int, int, GemmSpec]]:
    """(k offset, n offset, spec) of the steps a call that packs B once (`packs_b_once`)
    takes: one per block of B, KC rows of k (`blocking(spec).kc`) by the NR-column panels
    that fit PACKED_BLOCK_BYTES, column blocks outer and k blocks inner (the later k blocks
    accumulate into C), each a pack phase and then the shares, so that the scratch holds one
    packed block of B instead of all of B (a 1024^3 f32 product: 256 KiB instead of 4 MiB).
    Every element of C gets the same sums in the same order as in one call doing its k
    blocks itself. [(0, 0, spec)] when B fits one block."""
    if not packs_b_once(spec):
        return [(0, 0, spec)]
    bl = blocking(spec)
    esz = spec.dtype.byte_size
    ks = [(off, min(bl.kc, spec.k - off)) for off in range(0, spec.k, bl.kc)]
    ns = _equal_blocks(spec.n, PACKED_BLOCK_BYTES // (bl.kc * esz), bl.nr)
    if len(ks) == 1 and len(ns) == 1:
        return [(0, 0, spec)]
    out = [(koff, noff, replace(spec, k=kl, n=nl, accumulate=spec.accumulate or koff > 0))
           for noff, nl in ns for koff, kl in ks]
    return out if all(packs_b_once(s) for _, _, s in out) else [(0, 0, spec)]


def writes_over_a(spec: GemmSpec) -> bool:
    """True when C may be stored where A is (the dot's output taking its dying lhs's buffer):
    C[r, j] lands on A[r, j] (same strides, n == k), A is packed (not read in place), the
    call has one block of k (so of n: n == k) and of packed B, and the shares split m, so every
    A row is packed by the share that owns it before that share stores the same row of C,
    and never read again. One batch, not accumulating."""
    if packs_nothing(spec) or spec.accumulate or spec.batch != 1 or spec.k != spec.n:
        return False
    bl = blocking(spec)
    return (spec.a_strides[1:] == spec.c_strides[1:] and spec.k <= _BLOCKING[spec.dtype]["kc"]
            and spec.n > bl.nr and _split_m(spec, bl) and len(b_blocks(spec)) == 1)


def scratch_bytes(spec: GemmSpec, nthreads: int) -> int:
    """Bytes of packing scratch `emit_gemm`'s function needs when run with `nthreads`
    threads, i.e. in exactly `gemm_shares(spec, nthreads)` shares with slots 0 .. nthreads-1
    (0 for the plain loop nest; the blocks of a slot are clipped to what one share covers).
    Includes 64 bytes of alignment slack."""
    if packs_nothing(spec):
        return 0
    nshares = gemm_shares(spec, nthreads)
    a_b, b_b = _thread_bytes(spec, blocking(spec), nshares)
    if packs_b_once(spec):
        # every share reads one block of B packed once: a slot holds only its A block
        first = b_blocks(spec)[0][2]
        return 64 + packed_b_bytes(first) + max(1, nthreads) * a_b
    return 64 + max(1, nthreads) * (a_b + b_b)


def recommended_threads(spec: GemmSpec, available: int) -> int:
    """How many threads are worth using for `spec` out of `available`: one for the plain loop
    nest and for products under `parallel.PARALLEL_FLOPS`, else all of them."""
    flops = 2 * spec.m * spec.n * spec.k * spec.batch
    return 1 if _one_share(spec) or flops < PARALLEL_FLOPS else max(1, available)


def gemm_shares(spec: GemmSpec, nthreads: int) -> int:
    """How many shares `spec` is split into when run on `nthreads` threads: one per thread
    for one thread or the plain loop nest, else up to `parallel.SHARES_PER_THREAD` per thread
    (at most one per panel of the split dimension, each of at least ~SHARE_FLOPS) - a thread
    that gets less of the machine then takes fewer of them."""
    if nthreads <= 1 or _one_share(spec):
        return max(1, nthreads)
    bl = blocking(spec)
    panels = spec.batch * (-(-spec.m // bl.mr) if _split_m(spec, bl) else -(-spec.n // bl.nr))
    flops = 2 * spec.m * spec.n * spec.k * spec.batch
    return max(1, min(panels, max(nthreads, min(SHARES_PER_THREAD * nthreads,
                                                flops // SHARE_FLOPS))))


def _split_m(spec: GemmSpec, bl: Blocking) -> bool:
    """Partition threads along m (else along n): whichever dimension has more panels, and m
    for one batch of at least SPLIT_M_PANELS row panels whose B can be packed once (the
    twin of the rule in `gemm_lib`)."""
    m_panels = -(-spec.m // bl.mr)
    return m_panels > -(-spec.n // bl.nr) or (
        spec.batch == 1 and m_panels >= SPLIT_M_PANELS
        and packed_b_bytes(spec) <= PACK_ONCE_BYTES)


def emit_gemm(llvm_module: ir.Module, name: str, spec: GemmSpec) -> None:
    """Add `void name(ptr A, ptr B, ptr C, ptr scratch, i64 share, i64 nshares, i64 slot)`
    computing `spec` (see the module docstring for the contract) plus internal helpers named
    `name.*` to `llvm_module`. Requires 0 <= share < nshares and slot < the slots the
    scratch was sized for."""
    fn = ir.Function(llvm_module, ir.FunctionType(lu.VOID, [lu.PTR] * 4 + [lu.I64] * 3),
                     name=name)
    # A and C are not noalias: C may be stored over A (`writes_over_a`)
    fn.args[1].add_attribute("noalias")
    a, bm, c, scratch, share, nshares, slot = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ety = lu.value_type(spec.dtype)
    (sa, am, ak), (sb, bk, bn), (sc, cm, cn) = spec.a_strides, spec.b_strides, spec.c_strides
    if _one_share(spec):
        # the row dots or the plain loop nest, with compile-time sizes, in share 0 only
        if uses_row_dots(spec):
            one = emit_rowdot_gemm(llvm_module, f"{name}.rowdot", spec.dtype, spec.m, spec.n,
                                   spec.k, am, bn, (cm, cn), spec.accumulate)
        else:
            one = emit_simple_gemm(llvm_module, f"{name}.simple", spec.dtype, spec.m, spec.n,
                                   spec.k, (am, ak), (bk, bn), (cm, cn), spec.accumulate)
        with b.if_then(b.icmp_signed("==", share, i64(0))):
            with lu.for_range(b, i64(spec.batch), name="bt") as bi:
                b.call(one, [gep(b, a, b.mul(bi, i64(sa)), ety),
                             gep(b, bm, b.mul(bi, i64(sb)), ety),
                             gep(b, c, b.mul(bi, i64(sc)), ety)])
        b.ret_void()
        return
    # the packed path: a call of the process's generic GEMM with this spec's parameters
    b.call(declare_gemm(llvm_module, spec.dtype),
           [a, bm, c, scratch, share, nshares, slot, _params(b, spec)])
    b.ret_void()
    # its pack phase, run before the shares when B is packed once (`emit_gemm_entry`)
    pack = ir.Function(llvm_module, fn.function_type, name=f"{name}.pack")
    b = ir.IRBuilder(pack.append_basic_block("entry"))
    b.call(declare_gemm(llvm_module, spec.dtype, pack=True),
           [*pack.args[:7], _params(b, spec)])
    b.ret_void()
    # the blocks' own functions, `name.k<i>` (and `.pack`), i = the block's distinct spec
    blocks = b_blocks(spec)
    for i, sub in enumerate(dict.fromkeys(s for _, _, s in blocks) if len(blocks) > 1 else ()):
        emit_gemm(llvm_module, f"{name}.k{i}", sub)
        for f in (f"{name}.k{i}", f"{name}.k{i}.pack"):
            llvm_module.globals[f].linkage = "internal"


def _params(b: ir.IRBuilder, spec: GemmSpec) -> ir.Value:
    """A stack copy of `spec`'s parameter block; packing mode IN_PLACE when
    `reads_in_place(spec)`, ONCE when `packs_b_once(spec)`, else 0."""
    with b.goto_entry_block():
        params = b.alloca(ir.ArrayType(lu.I64, PARAMS))
    params.align = 16
    params.type = lu.PTR  # llvmlite types allocas as typed pointers; LLVM 22 wants `ptr`
    for i, v in enumerate(spec.params()):
        b.store(i64(v), gep(b, params, i, lu.I64))
    if reads_in_place(spec):
        mode: ir.Value = i64(IN_PLACE)
    elif packs_b_once(spec):
        mode = i64(ONCE)
    else:
        mode = i64(0)
    b.store(mode, gep(b, params, PARAMS - 1, lu.I64))
    return params


def emit_gemm_entry(llvm_module: ir.Module, name: str, kernel: str, spec: GemmSpec
                    ) -> ir.Function:
    """Add `void name(ptr A, ptr B, ptr C, ptr scratch, i64 nshares, i64 nthreads)` running
    `emit_gemm`'s function `kernel` for `spec` in nshares shares on up to nthreads threads of
    the pool (`nshares = gemm_shares(spec, nthreads)`, scratch of `scratch_bytes(spec,
    nthreads)` bytes): when B is packed once (`packs_b_once`), a first pool call runs the
    pack phase (`kernel.pack`), a second the shares - once per block of B (`b_blocks`), on
    A, B and C offset to the block, when B spans several (one thread runs both calls
    itself). Returns the new function."""
    def slotted(suffix: str, fn_name: str) -> ir.Function:
        entry = emit_slotted_entry(llvm_module, f"{name}.{suffix}", llvm_module.globals[fn_name],
                                   4)
        entry.linkage = "internal"
        return entry

    compute = slotted("compute", kernel)
    fn = ir.Function(llvm_module, ir.FunctionType(lu.VOID, [lu.PTR] * 4 + [lu.I64] * 2),
                     name=name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    args = list(fn.args)
    if not packs_b_once(spec):
        b.call(compute, args)
        b.ret_void()
        return fn
    blocks = b_blocks(spec)
    subs = {s: i for i, s in enumerate(dict.fromkeys(s for _, _, s in blocks))}
    steps = [(0, 0, kernel)] if len(blocks) == 1 else \
        [(koff, noff, f"{kernel}.k{subs[s]}") for koff, noff, s in blocks]
    entries = {k: (slotted(f"pack{i}", f"{k}.pack"),
                   compute if k == kernel else slotted(f"compute{i}", k))
               for i, k in enumerate(dict.fromkeys(k for _, _, k in steps))}
    ety = lu.value_type(spec.dtype)
    (_, _, ak), (_, bk, bn), (_, _, cn) = spec.a_strides, spec.b_strides, spec.c_strides
    for koff, noff, k in steps:
        at = [gep(b, args[0], koff * ak, ety), gep(b, args[1], koff * bk + noff * bn, ety),
              gep(b, args[2], noff * cn, ety)]
        for entry in entries[k]:
            b.call(entry, [*at, *args[3:]])
    b.ret_void()
    return fn


# ---- JIT convenience -----------------------------------------------------------------------
class CompiledGemm:
    """A JIT-compiled GEMM: `g(a, b, c=None) -> c` with numpy arrays laid out as the spec says.

    a/b: arrays of shape (batch, m, k)/(batch, k, n) (or 2-D when batch == 1) whose strides
    match the spec (views like `x.T` fine). c: optional output of shape (batch, m, n) (2-D when
    a is 2-D) with the spec's strides; required when the spec accumulates. Runs
    `gemm_shares(spec, nthreads)` shares on `nthreads` threads through the slotted entry (the
    thread pool). One instance owns one packing
    scratch: do not call the
    same instance from two Python threads at once (compile_gemm again for another instance)."""

    def __init__(self, spec: GemmSpec, nthreads: int, symbol: str, entry: str):
        self.spec, self.nthreads = spec, nthreads
        self.nshares = gemm_shares(spec, nthreads)
        eng = jit.jit_engine()
        self.kernel_address = eng.address(symbol)
        self.pack_address = eng.address(f"{symbol}.pack") if not _one_share(spec) else 0
        proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 4), ctypes.c_int64,
                                 ctypes.c_int64)
        self._entry = proto(eng.address(entry))
        self._scratch = np.empty(max(1, scratch_bytes(spec, nthreads)), dtype=np.uint8)
        self._scratch_ptr = self._scratch.ctypes.data
        self._dtype = spec.dtype.dtype
        isz = self._dtype.itemsize
        dims = {"A": (spec.batch, spec.m, spec.k), "B": (spec.batch, spec.k, spec.n),
                "C": (spec.batch, spec.m, spec.n)}
        st = {"A": spec.a_strides, "B": spec.b_strides, "C": spec.c_strides}
        self._layout = {w: (dims[w], st[w]) for w in dims}
        # exact (shape, byte strides) of the common 3-D and 2-D forms: checked without a loop
        self._fast = {w: {(dims[w], tuple(x * isz for x in st[w])),
                          (dims[w][1:], tuple(x * isz for x in st[w][1:]))}
                      for w in dims}
        self._c_contiguous = spec.c_strides == (spec.m * spec.n, spec.n, 1)

    def _check(self, x: np.ndarray, what: str) -> int:
        if (isinstance(x, np.ndarray) and x.dtype == self._dtype
                and (x.shape, x.strides) in self._fast[what]):
            return x.ctypes.data  # type: ignore[no-any-return]
        shape, strides = self._layout[what]
        ok = isinstance(x, np.ndarray) and x.dtype == self._dtype and x.ndim in (2, 3)
        if ok:
            x3 = x[None] if x.ndim == 2 else x
            want = [st * x.itemsize for st in strides]
            ok = x3.shape == shape and (x3.size == 0 or all(
                d <= 1 or got == w for d, got, w in zip(x3.shape, x3.strides, want)))
        if not ok:
            raise ArgumentError(f"GEMM operand {what}: expected {self.spec.dtype.text}"
                                f"{list(shape)} with element strides {strides}, got "
                                f"{getattr(x, 'dtype', type(x))}{list(getattr(x, 'shape', []))}"
                                f" strides {getattr(x, 'strides', None)}")
        return x.ctypes.data  # type: ignore[no-any-return]

    def __call__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None
                 ) -> np.ndarray:
        s = self.spec
        pa, pb = self._check(a, "A"), self._check(b, "B")
        if c is None:
            if s.accumulate:
                raise ArgumentError("an accumulating GEMM needs the output array c")
            if self._c_contiguous:
                c = np.empty((s.batch, s.m, s.n), dtype=self._dtype)
            else:
                sc = s.c_strides
                extent = 1 + sum((d - 1) * st for d, st in zip((s.batch, s.m, s.n), sc))
                buf = np.empty(max(1, extent), dtype=self._dtype)
                c = np.lib.stride_tricks.as_strided(
                    buf, (s.batch, s.m, s.n), tuple(st * buf.itemsize for st in sc))
            if a.ndim == 2:
                c = c[0]
        pc = self._check(c, "C")
        self._entry(pa, pb, pc, self._scratch_ptr, self.nshares, self.nthreads)
        return c


def compile_gemm(spec: GemmSpec, nthreads: int | None = None, opt_level: int = 3
                 ) -> CompiledGemm:
    """JIT-compile `spec` (see `emit_gemm`; machine code cached per spec) with a threaded entry
    running `nthreads` threads (default: `recommended_threads` of every core this process may
    use). Returns a `CompiledGemm` callable."""
    nt = nthreads or recommended_threads(spec, available_threads())
    key = (spec, opt_level)
    with _cache_lock:
        sym = _compiled.get(key)
        if sym is None:
            sym = lu.unique_symbol("xlc_gemm")
            module = lu.new_module(sym)
            emit_gemm(module, sym, spec)
            emit_gemm_entry(module, f"{sym}_mt", sym, spec)
            jit.compile_module(module, sym, opt_level)
            _compiled[key] = sym
    return CompiledGemm(spec, nt, sym, f"{sym}_mt")


# machine code per (spec, opt level): the thread count is a run-time argument
_compiled: dict[tuple[GemmSpec, int], str] = {}
_cache_lock = threading.Lock()
