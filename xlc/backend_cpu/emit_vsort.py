"""Single-operand sorts through the vectorised key sort (`vsort_lib.py`).

A sort of one 32- or 64-bit operand (f32, s32, u32, f64, s64, u64) whose comparator orders by
the element itself (`emit_radix_sort.sort_key` with the key read straight from the operand,
or through an expression of the operand's own type such as JAX's NaN/-0 canonicalisation)
sorts each line as:

1. **check**: when the comparator's key is an expression of the operand (JAX's comparators
   canonicalise NaN and -0.0 with selects) or the line is not contiguous, each element's
   radix key is computed (`emit_radix_sort.key_value`: the key expression, total-order
   bits, inverted for a descending comparator), noting whether any element is not the value
   its key decodes to (`decode`). A key that is the operand itself needs no check (keys and
   values correspond one to one), except under xlc's own "NaNs last" comparator, which
   equates -0.0 with +0.0 and all NaNs: the library checks those itself while making keys
   (MODE_CANON) and refuses the line;
2. if every element is: `xlc_vsort_u32/u64` sorts the line (keys made and mapped back
   inside the library, every pass split over the threads when the line is sorted alone). A
   line that is not contiguous in memory goes through scratch: its keys are written by the
   check loop, sorted there and decoded into the output;
3. otherwise (or when the library refused) the line is radix-sorted as before
   (`emit_radix_sort`), so an element whose key is shared with another value (-0.0 and +0.0
   under a canonicalising comparator, NaN payloads) keeps its input position among its
   equals.

Why this is exact: the vectorised sort is not stable, but when every element equals the
decoding of its key, elements with equal keys are the same bits, so no order among them can
be told apart; the sorted keys decoded are the stable sort's output. Elements that break this
are rare in practice (a -0.0, a NaN with a payload), and they take the stable radix path.

Used only where the host has AVX-512 (`vsort_lib.available()`), where it runs 5-8x faster than
the radix sort (tools/bench_sort.py).
"""
from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from xlc.backend_cpu.emit_radix_sort import SortKey, key_bits, key_value
from xlc.backend_cpu.emitter import Kernel, i64
from xlc.backend_cpu.vsort_lib import (
    MODE_CANON,
    MODE_DESCENDING,
    MODE_FLOAT,
    MODE_SIGNED,
    MODE_UNSIGNED,
    available,
)
from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import multi_to_linear
from xlc.hlo.ir import HloComputation, HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape, physical_order

_TYPES = (PrimitiveType.F32, PrimitiveType.S32, PrimitiveType.U32, PrimitiveType.F64,
          PrimitiveType.S64, PrimitiveType.U64)


def vsort_applies(spec: SortKey, pts: list[PrimitiveType]) -> bool:
    """Whether a sort with key `spec` of operands of types `pts` can take the vectorised
    path on this host."""
    return (len(pts) == 1 and spec.operand == 0 and pts[0] in _TYPES
            and spec.expr.shape.element_type is pts[0] and key_bits(spec) == pts[0].bit_width
            and available())


def declare_vsort(module: ir.Module, bits: int) -> ir.Function:
    """`i64 xlc_vsort_u<bits>(ptr src, ptr dst, i64 n, i64 nthreads, i64 mode)` declared in
    `module` (once)."""
    name = f"xlc_vsort_u{bits}"
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(lu.I64, [lu.PTR, lu.PTR, lu.I64, lu.I64,
                                                          lu.I64]), name=name)
    return fn


def _mode(spec: SortKey, pt: PrimitiveType) -> int:
    kind = MODE_FLOAT if pt.is_float else MODE_SIGNED if pt.is_signed_int else MODE_UNSIGNED
    return kind | (MODE_DESCENDING if spec.descending else 0)


def _unit_stride(shape: Shape, d: int) -> bool:
    """Whether consecutive elements along dim `d` of `shape` are adjacent in memory."""
    order = physical_order(shape)
    return all(shape.dims[e] == 1 for e in order[order.index(d) + 1:])


def decode(b: ir.IRBuilder, key: ir.Value, spec: SortKey, pt: PrimitiveType) -> ir.Value:
    """The value of type `pt` whose radix key (`key_value` without the comparator's own key
    expression) is `key`."""
    w = key.type.width
    if spec.descending:
        key = b.not_(key)
    sk = b.xor(key, ir.Constant(key.type, 1 << (w - 1)))  # the signed order key
    if pt.is_float:
        mask = b.lshr(b.ashr(sk, ir.Constant(sk.type, w - 1)), ir.Constant(sk.type, 1))
        return b.bitcast(b.xor(sk, mask), lu.value_type(pt))
    if pt.is_signed_int:
        return sk
    return key


def _bits(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    return b.bitcast(v, ir.IntType(lu.float_bits(v.type))) if lu.is_float_type(v.type) else v


def emit_vsort_line(k: Kernel, comp: HloComputation, spec: SortKey,
                    src: tuple[HloInstruction, tuple], out: tuple[HloInstruction, tuple],
                    pt: PrimitiveType, d: int, line: list, n: int, keys: ir.Value,
                    threads: int, radix: Callable[[], None]) -> None:
    """Sort one line (`line`: a multi-index whose dim `d` is filled in) of `src` into `out`
    as the module docstring says, through `keys` (scratch for n keys) when a line is not
    contiguous; `radix()` emits the stable fallback at the builder's position."""
    b = k.b
    bits = pt.bit_width
    kpt = PrimitiveType.U32 if bits == 32 else PrimitiveType.U64
    sort = declare_vsort(b.module, bits)

    def sub(o: HloInstruction, s: tuple) -> Shape:
        return o.shape.subshape(s) if s else o.shape

    def at(pos: ir.Value) -> list:
        index = list(line)
        index[d] = pos
        return index

    def element(buf: tuple[HloInstruction, tuple], pos: ir.Value) -> ir.Value:
        o, s = buf
        off = multi_to_linear(b, at(pos), sub(o, s))
        return b.gep(k.ptr(o, s), [off], inbounds=True, source_etype=lu.storage_type(pt))

    contiguous = all(_unit_stride(sub(*buf), d) for buf in (src, out))
    own_key = spec.expr.opcode is Opcode.PARAMETER
    # the library checks a canonicalising comparator's odd elements itself (MODE_CANON)
    library_checks = contiguous and own_key and spec.canon
    with b.goto_entry_block():
        odd = b.alloca(lu.I1, name="vsort.odd")
    b.store(ir.Constant(lu.I1, 0), odd)
    if not contiguous or not own_key:
        with lu.for_range(b, n, name="vkeys") as t:
            v = b.load(element(src, t), typ=lu.value_type(pt))
            key = key_value(b, comp, spec, v, bits)
            if not contiguous:
                lu.store_element(b, key, keys, t, kpt)
            differs = b.icmp_unsigned("!=", _bits(b, decode(b, key, spec, pt)), _bits(b, v))
            b.store(b.or_(b.load(odd, typ=lu.I1), differs), odd)
    with b.if_else(b.load(odd, typ=lu.I1)) as (stable, fast):
        with stable:
            radix()
        with fast:
            if contiguous:
                mode = _mode(spec, pt) | (MODE_CANON if library_checks else 0)
                refused = b.call(sort, [element(src, i64(0)), element(out, i64(0)), i64(n),
                                        i64(threads), i64(mode)])
                if library_checks:
                    with b.if_then(b.icmp_signed("!=", refused, i64(0))):
                        radix()
            else:
                b.call(sort, [keys, keys, i64(n), i64(threads), i64(MODE_UNSIGNED)])
                with lu.for_range(b, n, name="vout") as t:
                    key = lu.load_element(b, keys, t, kpt)
                    b.store(decode(b, key, spec, pt), element(out, t))
