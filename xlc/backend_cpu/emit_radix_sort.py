"""Radix sort for sorts whose comparator orders by one key: O(n) passes instead of O(n log n)
comparator calls, lines split over the threads.

`sort_key(comparator)` recognises comparators that compare one key expression of one operand,
`less(a, b) = f(a) < f(b)` (or `>`), where the key is totally ordered:
* `compare(f(p[2i]), f(p[2i+1])), direction=LT|GT` with `type=TOTALORDER` or an integer key
  (`f` any scalar expression of that parameter alone: JAX's comparators canonicalise NaN and
  -0 with selects before a TOTALORDER compare, XLA's TopK comparator flips float bits);
* `or(compare(p0, p1, LT), and(not(isnan(p0)), isnan(p1)))`, `xlc.lax.sort`'s "NaNs last" less
  than, which orders like TOTALORDER on `canon(x)` (every NaN made +NaN, -0 made +0).
Anything else (several keys, LE, partial float orders, complex) keeps the general merge sort.

Per line: each element's key becomes an unsigned integer that orders as the comparator does
(TOTALORDER's signed key with the sign bit flipped, all bits inverted for GT), then a stable
LSD radix sort of (key, s32 index) pairs, RADIX_BITS per pass, all histograms counted in one
first pass, passes where every key has the same digit skipped. The permutation is then applied
to every operand. Stability makes ties keep their input order, as the stable merge sort does
(and as `is_stable=true` requires). Scratch (keys, indices, histograms, one line of values,
`radix_scratch_bytes`) comes from the sort's workspace output (`sort_workspace.py`), one
line's worth per share of the threaded line loop.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llvmlite import ir

from xlc.backend_cpu.emit_topk import order_key
from xlc.backend_cpu.emitter import Kernel, LeafEmitter, i64
from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import multi_to_linear
from xlc.hlo.ir import HloComputation, HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape

RADIX_BITS = 8
"""Bits of the key sorted per pass (256 buckets: the histograms stay in L1)."""


@dataclass(frozen=True)
class SortKey:
    """The single key a comparator orders by: operand `operand`'s value through `expr` (an
    instruction of the comparator reading parameter 2*operand only), ascending unless
    `descending`; `canon` when NaNs and -0 must be canonicalised first."""

    operand: int
    expr: HloInstruction
    descending: bool
    canon: bool = False


def _uses_params(inst: HloInstruction) -> bool:
    stack, seen = [inst], set()
    while stack:
        x = stack.pop()
        if x.opcode is Opcode.PARAMETER:
            return True
        if x.uid not in seen:
            seen.add(x.uid)
            stack.extend(x.operands)
    return False


def _mirrors(a: HloInstruction, b: HloInstruction, pa: int, pb: int) -> bool:
    """Whether `b` is `a` with parameter `pa` replaced by `pb` (and no other parameter)."""
    if a.opcode is Opcode.PARAMETER:
        return (b.opcode is Opcode.PARAMETER and a.parameter_number == pa
                and b.parameter_number == pb)
    if a is b:
        return not _uses_params(a)
    if (a.opcode is not b.opcode or a.shape != b.shape or a.attrs != b.attrs
            or a.called or b.called or len(a.operands) != len(b.operands)):
        return False
    return all(_mirrors(x, y, pa, pb) for x, y in zip(a.operands, b.operands))


def _param_pair(a: HloInstruction, b: HloInstruction, nparams: int) -> tuple[int, int] | None:
    for p in range(0, nparams - 1, 2):
        if _mirrors(a, b, p, p + 1):
            return p, p + 1
        if _mirrors(a, b, p + 1, p):
            return p + 1, p
    return None


def _direction(root: HloInstruction) -> str:
    return str(root.attrs.get("direction", ""))


def _nan_last_less(root: HloInstruction) -> SortKey | None:
    """`or(compare(p0, p1, LT), and(not(compare(p0, p0, NE)), compare(p1, p1, NE)))`."""
    if root.opcode is not Opcode.OR:
        return None
    for lt, nan in (root.operands, reversed(root.operands)):
        if (lt.opcode is not Opcode.COMPARE or _direction(lt) != "LT" or
                nan.opcode is not Opcode.AND or lt.attrs.get("type") == "TOTALORDER"):
            continue
        x, y = lt.operands
        if x.opcode is not Opcode.PARAMETER or y.opcode is not Opcode.PARAMETER:
            continue
        for not_x, isnan_y in (nan.operands, reversed(nan.operands)):
            if (not_x.opcode is Opcode.NOT and _is_isnan(not_x.operands[0], x)
                    and _is_isnan(isnan_y, y) and x.parameter_number % 2 == 0
                    and y.parameter_number == x.parameter_number + 1):
                return SortKey(x.parameter_number // 2, x, False, canon=True)
    return None


def _is_isnan(inst: HloInstruction, x: HloInstruction) -> bool:
    return (inst.opcode is Opcode.COMPARE and _direction(inst) == "NE"
            and inst.operands[0] is x and inst.operands[1] is x)


def sort_key(comp: HloComputation) -> SortKey | None:
    """The single totally ordered key `comp` (a sort comparator) orders by, or None."""
    root = comp.root
    if root is None or not root.shape.is_array or root.shape.rank:
        return None
    nan_last = _nan_last_less(root)
    if nan_last is not None:
        pt = nan_last.expr.shape.element_type
        return nan_last if pt is not None and pt.is_float and pt.byte_size <= 8 else None
    if root.opcode is not Opcode.COMPARE or _direction(root) not in ("LT", "GT"):
        return None
    a, b = root.operands
    pair = _param_pair(a, b, len(comp.parameters))
    pt = a.shape.element_type
    if pair is None or pt is None or not a.shape.is_array or a.shape.rank:
        return None
    total = root.attrs.get("type") == "TOTALORDER" and pt.is_float
    if not (total or pt.is_integer or pt is PrimitiveType.PRED) or pt.byte_size > 8:
        return None
    lo, _hi = pair
    descending = (_direction(root) == "GT") != (lo % 2 == 1)
    return SortKey(lo // 2, a, descending)


def _uint(bits: int) -> PrimitiveType:
    return {8: PrimitiveType.U8, 16: PrimitiveType.U16, 32: PrimitiveType.U32,
            64: PrimitiveType.U64}[bits]


def key_value(b: ir.IRBuilder, comp: HloComputation, spec: SortKey, value: ir.Value,
               kbits: int) -> ir.Value:
    """The unsigned radix key (`kbits` wide) of an element value of the key operand."""
    pnum = 2 * spec.operand
    gen = LeafEmitter(b, lambda n, _idx: value if n in (pnum, pnum + 1) else _no_param(n))
    key = value if spec.expr.opcode is Opcode.PARAMETER else gen.generate(spec.expr, [])
    pt = spec.expr.shape.element_type
    assert pt is not None
    if pt in (PrimitiveType.F16, PrimitiveType.BF16):
        from xlc.codegen.scalar_types import to_compute

        key, pt = to_compute(b, key, pt), PrimitiveType.F32
    if spec.canon:
        f = key
        zero, nan = ir.Constant(f.type, 0.0), ir.Constant(f.type, float("nan"))
        f = b.select(b.fcmp_ordered("==", f, zero), zero, f)
        key = b.select(b.fcmp_unordered("uno", f, f), nan, f)
    sk = order_key(b, key, pt)
    w = sk.type.width
    uk = b.xor(sk, ir.Constant(sk.type, 1 << (w - 1)))
    if spec.descending:
        uk = b.not_(uk)
    return b.zext(uk, ir.IntType(kbits)) if w < kbits else uk


def _no_param(n: int) -> ir.Value:
    raise AssertionError(f"sort key reads comparator parameter {n}")


def key_bits(spec: SortKey) -> int:
    """Width of the radix key: the key's order-key width rounded up to a whole number of
    bytes (f16/bf16 keys are ordered through f32)."""
    pt = spec.expr.shape.element_type
    assert pt is not None
    w = 32 if pt in (PrimitiveType.F16, PrimitiveType.BF16) else max(8, pt.bit_width)
    return 8 * ((w + 7) // 8) if w in (8, 16, 32, 64) else 64


def _scratch_sizes(spec: SortKey, pts: Sequence[PrimitiveType], n: int) -> list[int]:
    """Bytes of the scratch arrays of one line: keys (two), indices (two), histograms, one
    line of values."""
    kbits = key_bits(spec)
    passes = -(-kbits // RADIX_BITS)
    vbytes = max(pt.byte_size for pt in pts)
    kb = kbits // 8
    return [n * kb, n * kb, n * 4, n * 4, passes * (1 << RADIX_BITS) * 4, n * vbytes]


def radix_scratch_bytes(spec: SortKey, pts: Sequence[PrimitiveType], n: int) -> int:
    """Scratch bytes `emit_radix_sort` needs for one line of `n` elements (a multiple of
    64, so consecutive lines' scratch stays 64-byte aligned)."""
    total = sum(_scratch_sizes(spec, pts, n))
    return -(-total // 64) * 64


def emit_radix_sort(k: Kernel, comp: HloComputation, spec: SortKey,
                    srcs: Sequence[tuple[HloInstruction, tuple]],
                    outs: Sequence[tuple[HloInstruction, tuple]], pts: Sequence[PrimitiveType],
                    in_place: Sequence[bool], d: int, n: int, lines: list,
                    scratch: ir.Value) -> None:
    """Sort one line (`lines`: the multi-index with dim `d` to fill) of every output: keys are
    read from `srcs[spec.operand]`, output i gets `srcs[i]` permuted (`in_place[i]` when
    srcs[i] is outs[i]'s buffer: then the line goes through scratch). `scratch` holds
    `radix_scratch_bytes(spec, pts, n)` bytes that no other line uses at the same time."""
    b = k.b
    kbits = key_bits(spec)
    kpt = _uint(kbits)
    passes = -(-kbits // RADIX_BITS)
    buckets = 1 << RADIX_BITS
    sizes = _scratch_sizes(spec, pts, n)
    offs = [sum(sizes[:i]) for i in range(len(sizes))]
    base = scratch
    keys_a, keys_b, idx_a, idx_b, hist, tmp = (
        b.gep(base, [i64(o)], inbounds=True, source_etype=lu.I8) for o in offs)

    def at(pos: ir.Value) -> list:
        index = list(lines)
        index[d] = pos
        return index

    def sub(o: HloInstruction, s: tuple) -> Shape:
        return o.shape.subshape(s) if s else o.shape

    def digit(key: ir.Value, p: int) -> ir.Value:
        wide = b.zext(key, lu.I64) if kbits < 64 else key
        shifted = b.lshr(wide, i64(p * RADIX_BITS)) if p else wide
        return b.and_(shifted, i64(buckets - 1))

    def hslot(p: int, dg: ir.Value) -> ir.Value:
        return b.add(i64(p * buckets), dg)

    with b.goto_entry_block():
        src_k = b.alloca(lu.PTR)
        dst_k = b.alloca(lu.PTR)
        src_i = b.alloca(lu.PTR)
        dst_i = b.alloca(lu.PTR)
        acc = b.alloca(lu.I32)
    kin, kshape = srcs[spec.operand]
    kpt_in = pts[spec.operand]
    # pass 0: keys, indices and every pass's histogram
    with lu.for_range(b, passes * buckets, name="hz") as t:
        lu.store_element(b, ir.Constant(lu.I32, 0), hist, t, PrimitiveType.S32)
    with lu.for_range(b, n, name="keys") as t:
        v = lu.load_element(b, k.ptr(kin, kshape), multi_to_linear(b, at(t), sub(kin, kshape)),
                            kpt_in)
        key = key_value(b, comp, spec, v, kbits)
        lu.store_element(b, key, keys_a, t, kpt)
        lu.store_element(b, b.trunc(t, lu.I32), idx_a, t, PrimitiveType.S32)
        for p in range(passes):
            h = hslot(p, digit(key, p))
            c = lu.load_element(b, hist, h, PrimitiveType.S32)
            lu.store_element(b, b.add(c, ir.Constant(lu.I32, 1)), hist, h, PrimitiveType.S32)
    b.store(keys_a, src_k)
    b.store(keys_b, dst_k)
    b.store(idx_a, src_i)
    b.store(idx_b, dst_i)
    first_key = lu.load_element(b, keys_a, i64(0), kpt)
    for p in range(passes):
        # a pass where every key has the same digit would copy the arrays unchanged
        full = lu.load_element(b, hist, hslot(p, digit(first_key, p)), PrimitiveType.S32)
        with b.if_then(b.icmp_signed("!=", full, ir.Constant(lu.I32, n))):
            b.store(ir.Constant(lu.I32, 0), acc)
            with lu.for_range(b, buckets, name="prefix") as t:
                h = b.add(i64(p * buckets), t)
                c = lu.load_element(b, hist, h, PrimitiveType.S32)
                s = b.load(acc)
                lu.store_element(b, s, hist, h, PrimitiveType.S32)
                b.store(b.add(s, c), acc)
            sk, dk = b.load(src_k, typ=lu.PTR), b.load(dst_k, typ=lu.PTR)
            si, di = b.load(src_i, typ=lu.PTR), b.load(dst_i, typ=lu.PTR)
            with lu.for_range(b, n, name=f"scatter{p}") as t:
                key = lu.load_element(b, sk, t, kpt)
                h = hslot(p, digit(key, p))
                pos = lu.load_element(b, hist, h, PrimitiveType.S32)
                lu.store_element(b, b.add(pos, ir.Constant(lu.I32, 1)), hist, h,
                                 PrimitiveType.S32)
                pos64 = b.sext(pos, lu.I64)
                if p < passes - 1:
                    lu.store_element(b, key, dk, pos64, kpt)
                lu.store_element(b, lu.load_element(b, si, t, PrimitiveType.S32), di, pos64,
                                 PrimitiveType.S32)
            b.store(dk, src_k)
            b.store(sk, dst_k)
            b.store(di, src_i)
            b.store(si, dst_i)
    perm = b.load(src_i, typ=lu.PTR)
    for (src, ss), (out, os_), pt, same in zip(srcs, outs, pts, in_place):
        sshape, oshape = sub(src, ss), sub(out, os_)
        with lu.for_range(b, n, name="perm") as t:
            from_pos = b.sext(lu.load_element(b, perm, t, PrimitiveType.S32), lu.I64)
            v = lu.load_element(b, k.ptr(src, ss), multi_to_linear(b, at(from_pos), sshape), pt)
            if same:
                lu.store_element(b, v, tmp, t, pt)
            else:
                lu.store_element(b, v, k.ptr(out, os_), multi_to_linear(b, at(t), oshape), pt)
        if same:
            with lu.for_range(b, n, name="back") as t:
                lu.store_element(b, lu.load_element(b, tmp, t, pt), k.ptr(out, os_),
                                 multi_to_linear(b, at(t), oshape), pt)
