"""Shape inference: the result shape of every HLO op from its operand shapes and attributes,
following XLA's `ShapeInference` rules. Used by the verifier and by the frontend tracer.

Every `infer_*` function returns the result `Shape` (default layout) or raises
`xlc.errors.ShapeError`. Message format (API, tests assert it):

    <op>: <rule>, got <details>

where `<op>` is the HLO opcode spelling (`add`, `dynamic-slice`, ...), `<rule>` says what is
required, and `<details>` shows the offending shapes in HLO spelling without layouts
(`f32[4,8]`) and dimension lists as `{0,1}`. Examples:

    add: operand shapes must match, got f32[4,8] and f32[8,4]
    add: operand element types must match, got f32[4] and s32[4]
    exponential: expected a floating-point or complex operand, got s32[4]
    not: expected a pred or integer operand, got f32[4]
    compare: unknown comparison direction, got XX
    broadcast: operand dimension 0 (size 3) must be 1 or equal output dimension 1 (size 4),
        got f32[3] into f32[2,4]
    reshape: element counts must match, got f32[4,8] into f32[5,6]
    dot: contracting dimension sizes must match, got lhs f32[2,3] dim 1 and rhs f32[4,5] dim 0
    reduce: to_apply computation 'add' must take 2 scalar parameters (f32[], f32[]), got (f32[])

This module holds elementwise ops, data movement, reduce, sort/topk, map and tuples;
`shape_inference_nn.py` holds dot, convolution, gather, scatter, reduce-window and
select-and-scatter (re-exported here); `shape_inference_inst.py` computes an instruction's
expected shape from its operands and attributes (`infer_instruction_shape`, re-exported here).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from xlc.hlo.attrs import PaddingConfig, SliceDim
from xlc.hlo.opcodes import COMPARISON_DIRECTIONS, COMPARISON_TYPES, Opcode
from xlc.hlo.shape import PrimitiveType, Shape
from xlc.hlo.shape_inference_nn import (
    infer_convolution,
    infer_dot,
    infer_gather,
    infer_reduce_window,
    infer_scatter,
    infer_select_and_scatter,
)
from xlc.hlo.shape_inference_util import (
    check_dims,
    check_inits,
    check_scalar_lambda,
    element_types,
    fail,
    fmt,
    fmt_all,
    fmt_dims,
    higher_precision_float,
    require_array,
    require_arrays,
    require_integral_scalar,
    require_same_dims,
)

if TYPE_CHECKING:
    from xlc.hlo.ir import HloComputation, HloInstruction

log = logging.getLogger("xlc.hlo")

__all__ = [
    "infer_unary", "infer_binary", "infer_compare", "infer_select", "infer_clamp",
    "infer_convert", "infer_bitcast_convert", "infer_broadcast", "infer_reshape",
    "infer_transpose", "infer_slice", "infer_dynamic_slice", "infer_dynamic_update_slice",
    "infer_concatenate", "infer_pad", "infer_reverse", "infer_iota", "infer_reduce",
    "infer_reduce_window", "infer_select_and_scatter", "infer_dot", "infer_convolution",
    "infer_gather", "infer_scatter", "infer_sort", "infer_topk", "infer_tuple",
    "infer_get_tuple_element", "infer_map", "infer_copy_start", "infer_copy_done",
    "infer_instruction_shape",
]

# ---- elementwise unary -------------------------------------------------------------------
# Each rule checks the operand's element type and returns the result element type.
_TypeRule = Callable[[Opcode, Shape], PrimitiveType]


def _et(shape: Shape) -> PrimitiveType:
    assert shape.element_type is not None
    return shape.element_type


def _complex_component(t: PrimitiveType) -> PrimitiveType:
    return PrimitiveType.F32 if t is PrimitiveType.C64 else PrimitiveType.F64


def _rule_float_or_complex(op: Opcode, s: Shape) -> PrimitiveType:
    if not (_et(s).is_float or _et(s).is_complex):
        fail(op.text, "expected a floating-point or complex operand", fmt(s))
    return _et(s)


def _rule_float(op: Opcode, s: Shape) -> PrimitiveType:
    if not _et(s).is_float:
        fail(op.text, "expected a floating-point operand", fmt(s))
    return _et(s)


def _rule_is_finite(op: Opcode, s: Shape) -> PrimitiveType:
    _rule_float(op, s)
    return PrimitiveType.PRED


def _rule_signed(op: Opcode, s: Shape) -> PrimitiveType:
    """sign: signed integers, floats, complex."""
    t = _et(s)
    if not (t.is_signed_int or t.is_float or t.is_complex):
        fail(op.text, "expected a signed integer, floating-point or complex operand", fmt(s))
    return t


def _rule_abs(op: Opcode, s: Shape) -> PrimitiveType:
    """abs: any numeric type (the identity on unsigned); abs of complex is real."""
    t = _et(s)
    if t is PrimitiveType.PRED:
        fail(op.text, "expected a numeric operand", fmt(s))
    return _complex_component(t) if t.is_complex else t


def _rule_numeric(op: Opcode, s: Shape) -> PrimitiveType:
    if _et(s) is PrimitiveType.PRED:
        fail(op.text, "expected a numeric operand", fmt(s))
    return _et(s)


def _rule_pred_or_int(op: Opcode, s: Shape) -> PrimitiveType:
    if not (_et(s) is PrimitiveType.PRED or _et(s).is_integer):
        fail(op.text, "expected a pred or integer operand", fmt(s))
    return _et(s)


def _rule_int(op: Opcode, s: Shape) -> PrimitiveType:
    if not _et(s).is_integer:
        fail(op.text, "expected an integer operand", fmt(s))
    return _et(s)


def _rule_real_imag(op: Opcode, s: Shape) -> PrimitiveType:
    t = _et(s)
    if t.is_complex:
        return _complex_component(t)
    if not t.is_float:
        fail(op.text, "expected a complex or floating-point operand", fmt(s))
    return t


def _rule_any(op: Opcode, s: Shape) -> PrimitiveType:
    return _et(s)


_UNARY_RULES: dict[Opcode, _TypeRule] = {
    Opcode.ABS: _rule_abs,
    Opcode.SIGN: _rule_signed,
    Opcode.NEGATE: _rule_numeric,
    Opcode.NOT: _rule_pred_or_int,
    Opcode.POPCNT: _rule_int,
    Opcode.CLZ: _rule_int,
    Opcode.REAL: _rule_real_imag,
    Opcode.IMAG: _rule_real_imag,
    Opcode.IS_FINITE: _rule_is_finite,
    Opcode.FLOOR: _rule_float,
    Opcode.CEIL: _rule_float,
    Opcode.ROUND_AFZ: _rule_float,
    Opcode.ROUND_EVEN: _rule_float,
    Opcode.REDUCE_PRECISION: _rule_float,
    Opcode.ERF: _rule_float,
    Opcode.COPY: _rule_any,
}


def infer_unary(op: Opcode, operand: Shape) -> Shape:
    """Result shape of an elementwise unary op (and `copy`). Requires an array operand (copy
    also takes tuples). Float-only ops (the opcode table's F flag) reject integers;
    not/popcnt/count-leading-zeros reject floats; is-finite returns pred; abs/real/imag of a
    complex operand return the component type. convert/bitcast-convert need a target type: use
    `infer_convert` / `infer_bitcast_convert`."""
    if op is Opcode.COPY and operand.is_tuple:
        return operand.with_default_layout()
    if op in (Opcode.CONVERT, Opcode.BITCAST_CONVERT):
        fail(op.text, "needs a target element type (use infer_convert/infer_bitcast_convert)",
             fmt(operand))
    if op.category != "unary" and op is not Opcode.COPY:
        fail(op.text, "is not an elementwise unary op", fmt(operand))
    require_array(op.text, operand)
    rule = _UNARY_RULES.get(op)
    if rule is None:
        rule = _rule_float_or_complex if op.is_float_only else _rule_numeric
    return Shape.array(rule(op, operand), operand.dims)


# ---- elementwise binary ------------------------------------------------------------------
_BINARY_RULES: dict[Opcode, _TypeRule] = {
    Opcode.AND: _rule_pred_or_int,
    Opcode.OR: _rule_pred_or_int,
    Opcode.XOR: _rule_pred_or_int,
    Opcode.SHIFT_LEFT: _rule_int,
    Opcode.SHIFT_RIGHT_ARITHMETIC: _rule_int,
    Opcode.SHIFT_RIGHT_LOGICAL: _rule_int,
    Opcode.ATAN2: _rule_float_or_complex,
    Opcode.COMPLEX: _rule_float,
}


def infer_binary(op: Opcode, lhs: Shape, rhs: Shape) -> Shape:
    """Result shape of an elementwise binary op. HLO has no implicit broadcasting: both
    operands must be arrays with the same dims and element type. and/or/xor take pred or
    integers, shifts integers, atan2 floats; `complex` takes f32/f64 and returns c64/c128.
    For `compare` use `infer_compare` (this delegates with direction EQ)."""
    if op is Opcode.COMPARE:
        return infer_compare(lhs, rhs, "EQ")
    if op.category != "binary":
        fail(op.text, "is not an elementwise binary op", f"{fmt(lhs)} and {fmt(rhs)}")
    require_arrays(op.text, [lhs, rhs])
    if lhs.dims != rhs.dims:
        fail(op.text, "operand shapes must match", f"{fmt(lhs)} and {fmt(rhs)}")
    if lhs.element_type != rhs.element_type:
        fail(op.text, "operand element types must match", f"{fmt(lhs)} and {fmt(rhs)}")
    et = _BINARY_RULES.get(op, _rule_any)(op, lhs)
    if op is Opcode.COMPLEX:
        if et not in (PrimitiveType.F32, PrimitiveType.F64):
            fail(op.text, "expected f32 or f64 operands", f"{fmt(lhs)} and {fmt(rhs)}")
        et = PrimitiveType.C64 if et is PrimitiveType.F32 else PrimitiveType.C128
    return Shape.array(et, lhs.dims)


_COMPARE_TYPE_OK: dict[str, Callable[[PrimitiveType], bool]] = {
    "FLOAT": lambda t: t.is_float or t.is_complex,
    "TOTALORDER": lambda t: t.is_float,
    "SIGNED": lambda t: t.is_signed_int,
    "UNSIGNED": lambda t: t.is_unsigned_int or t is PrimitiveType.PRED,
}


def infer_compare(lhs: Shape, rhs: Shape, direction: str, type: str | None = None) -> Shape:
    """`compare`: equal dims and element types, a direction among EQ/NE/LT/LE/GT/GE and an
    optional comparison type (FLOAT/TOTALORDER/SIGNED/UNSIGNED) that fits the element type.
    Returns pred with the operands' dims."""
    if direction not in COMPARISON_DIRECTIONS:
        fail("compare", "unknown comparison direction", str(direction))
    require_arrays("compare", [lhs, rhs])
    if lhs.dims != rhs.dims:
        fail("compare", "operand shapes must match", f"{fmt(lhs)} and {fmt(rhs)}")
    if lhs.element_type != rhs.element_type:
        fail("compare", "operand element types must match", f"{fmt(lhs)} and {fmt(rhs)}")
    if type is not None:
        if type not in COMPARISON_TYPES:
            fail("compare", "unknown comparison type", str(type))
        if not _COMPARE_TYPE_OK[type](_et(lhs)):
            fail("compare", f"comparison type {type} does not fit the operands", fmt(lhs))
    return Shape.array(PrimitiveType.PRED, lhs.dims)


def infer_select(pred: Shape, on_true: Shape, on_false: Shape) -> Shape:
    """`select(pred, on_true, on_false)`: pred has element type pred and the dims of the
    branches (or is a scalar); the branches have compatible shapes. Returns on_true's shape."""
    if not pred.is_array or pred.element_type is not PrimitiveType.PRED:
        fail("select", "predicate must be a pred array", fmt(pred))
    if not on_true.compatible(on_false):
        fail("select", "branch shapes must match", f"{fmt(on_true)} and {fmt(on_false)}")
    if on_true.is_tuple:
        if not pred.is_scalar:
            fail("select", "a tuple select needs a scalar predicate", fmt(pred))
        return on_true.with_default_layout()
    require_array("select", on_true)
    if not pred.is_scalar and pred.dims != on_true.dims:
        fail("select", "predicate dimensions must match the branches",
             f"{fmt(pred)} and {fmt(on_true)}")
    return on_true.with_default_layout()


def infer_clamp(lo: Shape, x: Shape, hi: Shape) -> Shape:
    """`clamp(lo, x, hi)`: all arrays of one element type; lo and hi are scalars or have x's
    dims. Returns x's shape."""
    require_arrays("clamp", [lo, x, hi])
    for bound in (lo, hi):
        if bound.element_type != x.element_type:
            fail("clamp", "operand element types must match", f"{fmt(bound)} and {fmt(x)}")
        if not bound.is_scalar and bound.dims != x.dims:
            fail("clamp", "bounds must be scalars or match the operand",
                 f"{fmt(bound)} and {fmt(x)}")
    return x.with_default_layout()


def infer_convert(operand: Shape, element_type: PrimitiveType) -> Shape:
    """`convert`: an array converted to `element_type` (same dims). Complex to real is
    refused (as XLA does)."""
    require_array("convert", operand)
    if _et(operand).is_complex and not element_type.is_complex:
        fail("convert", "cannot convert complex to a real type",
             f"{fmt(operand)} to {element_type.text}")
    if element_type is PrimitiveType.TOKEN:
        fail("convert", "cannot convert to token", fmt(operand))
    return Shape.array(element_type, operand.dims)


def infer_bitcast_convert(operand: Shape, element_type: PrimitiveType) -> Shape:
    """`bitcast-convert`: reinterpret the bits. Equal widths keep the dims; a narrower target
    adds a minor dim of size (in width / out width); a wider target requires the operand's
    minor dim to equal (out width / in width) and removes it."""
    require_array("bitcast-convert", operand)
    if element_type is PrimitiveType.TOKEN:
        fail("bitcast-convert", "cannot convert to token", fmt(operand))
    in_bits = _et(operand).byte_size * 8
    out_bits = element_type.byte_size * 8
    if in_bits == out_bits:
        return Shape.array(element_type, operand.dims)
    if in_bits > out_bits:
        return Shape.array(element_type, operand.dims + (in_bits // out_bits,))
    ratio = out_bits // in_bits
    if not operand.dims or operand.dims[-1] != ratio:
        fail("bitcast-convert", f"converting to a wider type needs a minor dimension of size "
                                f"{ratio}", f"{fmt(operand)} to {element_type.text}")
    return Shape.array(element_type, operand.dims[:-1])


# ---- data movement -----------------------------------------------------------------------
def infer_broadcast(operand: Shape, out_dims: tuple[int, ...],
                    dimensions: tuple[int, ...]) -> Shape:
    """`broadcast`: operand dim i maps to output dim `dimensions[i]` (unique, in range; not
    necessarily ascending, as in XLA's verifier: unsorted dimensions also transpose); each
    mapped operand dim is 1 or equals the output dim. Returns operand-type[out_dims]."""
    require_array("broadcast", operand)
    out = Shape.array(_et(operand), out_dims)
    if any(d < 0 for d in out_dims):
        fail("broadcast", "output dimensions must be non-negative", fmt(out))
    if len(dimensions) != operand.rank:
        fail("broadcast", f"dimensions {fmt_dims(dimensions)} must have one entry per operand "
                          f"dimension", f"{fmt(operand)} into {fmt(out)}")
    check_dims("broadcast", "dimensions", dimensions, len(out_dims), out)
    for i, d in enumerate(dimensions):
        if operand.dims[i] != out_dims[d] and operand.dims[i] != 1:
            fail("broadcast", f"operand dimension {i} (size {operand.dims[i]}) must be 1 or equal "
                              f"output dimension {d} (size {out_dims[d]})",
                 f"{fmt(operand)} into {fmt(out)}")
    return out


def infer_reshape(operand: Shape, new_dims: tuple[int, ...]) -> Shape:
    """`reshape`: same element count, operand element type."""
    require_array("reshape", operand)
    out = Shape.array(_et(operand), new_dims)
    if any(d < 0 for d in new_dims) or out.num_elements != operand.num_elements:
        fail("reshape", "element counts must match", f"{fmt(operand)} into {fmt(out)}")
    return out


def infer_transpose(operand: Shape, permutation: tuple[int, ...]) -> Shape:
    """`transpose`: `permutation` is a permutation of the operand dims; output dim i is
    operand dim permutation[i]."""
    require_array("transpose", operand)
    if sorted(permutation) != list(range(operand.rank)):
        fail("transpose", f"dimensions {fmt_dims(permutation)} must be a permutation of the "
                          f"operand dimensions", fmt(operand))
    return Shape.array(_et(operand), tuple(operand.dims[p] for p in permutation))


def infer_slice(operand: Shape, slices: tuple[SliceDim, ...]) -> Shape:
    """`slice`: one [start:limit:stride] per dim with 0 <= start <= limit <= dim and
    stride >= 1; output extent ceil((limit - start) / stride)."""
    require_array("slice", operand)
    if len(slices) != operand.rank:
        fail("slice", f"needs one range per dimension ({len(slices)} given)", fmt(operand))
    out = []
    for i, (s, d) in enumerate(zip(slices, operand.dims)):
        if s.stride < 1 or not 0 <= s.start <= s.limit <= d:
            fail("slice", f"range {s} out of bounds in dimension {i}", fmt(operand))
        out.append((s.limit - s.start + s.stride - 1) // s.stride)
    return Shape.array(_et(operand), tuple(out))


def _check_start_indices(op: str, operand: Shape, index_shapes: Sequence[Shape]) -> None:
    """Start indices: one integer scalar per operand dim, all of one type (or the old form: a
    single rank-1 integer vector with one entry per dim)."""
    if len(index_shapes) == 1 and index_shapes[0].is_array and index_shapes[0].rank == 1:
        v = index_shapes[0]
        if v.dims[0] != operand.rank or not _et(v).is_integer:
            fail(op, "a start index vector must be an integer vector with one entry per operand "
                     "dimension", f"{fmt(operand)} and {fmt(v)}")
        return
    if len(index_shapes) != operand.rank:
        fail(op, f"needs one start index per operand dimension ({len(index_shapes)} given)",
             fmt(operand))
    for s in index_shapes:
        require_integral_scalar(op, s, "start index")
    if len({s.element_type for s in index_shapes}) > 1:
        fail(op, "start indices must have one element type", fmt_all(index_shapes))


def infer_dynamic_slice(operand: Shape, index_shapes: Sequence[Shape],
                        sizes: tuple[int, ...]) -> Shape:
    """`dynamic-slice`: integer scalar start indices (one per dim) and
    0 <= sizes[i] <= dims[i]. Returns operand-type[sizes]."""
    require_array("dynamic-slice", operand)
    _check_start_indices("dynamic-slice", operand, index_shapes)
    if len(sizes) != operand.rank:
        fail("dynamic-slice", f"dynamic_slice_sizes {fmt_dims(sizes)} must have one entry per "
                              f"dimension", fmt(operand))
    for i, (n, d) in enumerate(zip(sizes, operand.dims)):
        if not 0 <= n <= d:
            fail("dynamic-slice", f"slice size {n} out of bounds in dimension {i}", fmt(operand))
    return Shape.array(_et(operand), sizes)


def infer_dynamic_update_slice(operand: Shape, update: Shape,
                               index_shapes: Sequence[Shape]) -> Shape:
    """`dynamic-update-slice`: update has the operand's rank and element type and fits inside
    it; integer scalar start indices. Returns the operand's shape."""
    require_arrays("dynamic-update-slice", [operand, update])
    if update.rank != operand.rank:
        fail("dynamic-update-slice", "update rank must match operand rank",
             f"{fmt(operand)} and {fmt(update)}")
    if update.element_type != operand.element_type:
        fail("dynamic-update-slice", "operand element types must match",
             f"{fmt(operand)} and {fmt(update)}")
    if any(u > d for u, d in zip(update.dims, operand.dims)):
        fail("dynamic-update-slice", "update must fit inside the operand",
             f"{fmt(operand)} and {fmt(update)}")
    _check_start_indices("dynamic-update-slice", operand, index_shapes)
    return operand.with_default_layout()


def infer_concatenate(operands: Sequence[Shape], dimension: int) -> Shape:
    """`concatenate`: at least one operand; equal rank and element type; dims equal except
    `dimension`, which is summed."""
    if not operands:
        fail("concatenate", "needs at least one operand", "none")
    require_arrays("concatenate", operands)
    first = operands[0]
    if not 0 <= dimension < first.rank:
        fail("concatenate", f"dimension {dimension} out of range", fmt(first))
    for s in operands[1:]:
        if s.element_type != first.element_type:
            fail("concatenate", "operand element types must match", f"{fmt(first)} and {fmt(s)}")
        if s.rank != first.rank or any(a != b for i, (a, b) in
                                       enumerate(zip(s.dims, first.dims)) if i != dimension):
            fail("concatenate", f"operand dimensions must match except dimension {dimension}",
                 f"{fmt(first)} and {fmt(s)}")
    dims = list(first.dims)
    dims[dimension] = sum(s.dims[dimension] for s in operands)
    return Shape.array(_et(first), tuple(dims))


def infer_pad(operand: Shape, pad_value: Shape, padding: PaddingConfig) -> Shape:
    """`pad`: a scalar pad value of the operand's type, or for a float operand of any float
    type (XLA's `SameElementTypeIgnoringFpPrecision`; the result then has the type of higher
    precision of the two); one (low, high, interior) per dim, interior >= 0 (low/high may be
    negative); the output extent low + high + d + max(d - 1, 0) * interior must be >= 0."""
    require_array("pad", operand)
    et, vt = operand.element_type, pad_value.element_type
    if not pad_value.is_scalar or not (et == vt or et is not None and vt is not None
                                       and et.is_float and vt.is_float):
        fail("pad", "padding value must be a scalar of the operand's type",
             f"{fmt(operand)} and {fmt(pad_value)}")
    if len(padding.dims) != operand.rank:
        fail("pad", f"padding {padding} must have one entry per dimension", fmt(operand))
    out = []
    for i, ((lo, hi, interior), d) in enumerate(zip(padding.dims, operand.dims)):
        if interior < 0:
            fail("pad", f"interior padding must be non-negative in dimension {i}",
                 f"{padding} for {fmt(operand)}")
        n = lo + hi + d + max(d - 1, 0) * interior
        if n < 0:
            fail("pad", f"negative output size in dimension {i}", f"{padding} for {fmt(operand)}")
        out.append(n)
    return Shape.array(higher_precision_float(_et(operand), _et(pad_value)) if et != vt
                       else _et(operand), tuple(out))


def infer_reverse(operand: Shape, dimensions: tuple[int, ...]) -> Shape:
    """`reverse`: unique in-range dimensions; same shape."""
    require_array("reverse", operand)
    check_dims("reverse", "dimensions", dimensions, operand.rank, operand)
    return operand.with_default_layout()


def infer_iota(element_type: PrimitiveType, dims: tuple[int, ...], iota_dimension: int) -> Shape:
    """`iota`: a non-pred array of rank >= 1 with iota_dimension in range."""
    out = Shape.array(element_type, dims)
    if element_type in (PrimitiveType.PRED, PrimitiveType.TOKEN):
        fail("iota", "expected a numeric element type", fmt(out))
    if not 0 <= iota_dimension < len(dims):
        fail("iota", f"iota_dimension {iota_dimension} out of range", fmt(out))
    return out


# ---- reductions, sort, map, tuples ---------------------------------------------------------
def _tuple_or_single(shapes: list[Shape]) -> Shape:
    return shapes[0] if len(shapes) == 1 else Shape.tuple_of(shapes)


def infer_reduce(operands: Sequence[Shape], inits: Sequence[Shape], dimensions: tuple[int, ...],
                 reducer: HloComputation | None = None) -> Shape:
    """`reduce`: N >= 1 arrays of equal dims and N scalar inits, init i of operand i's element
    type (a wider float accumulator is allowed); unique in-range `dimensions`. The reducer
    (when given) takes 2N scalars (accumulators of the init types, then inputs of the operand
    types) and returns N scalars (a tuple when N > 1) of the init types. Returns the operand
    dims without `dimensions`, of the init types (a tuple of N arrays when N > 1)."""
    acc = check_inits("reduce", operands, inits)
    check_dims("reduce", "dimensions", dimensions, operands[0].rank, operands[0])
    if reducer is not None:
        check_scalar_lambda("reduce", reducer, acc + [_et(s) for s in operands], acc)
    keep = tuple(d for i, d in enumerate(operands[0].dims) if i not in dimensions)
    return _tuple_or_single([Shape.array(t, keep) for t in acc])


def infer_sort(operands: Sequence[Shape], dimension: int,
               comparator: HloComputation | None = None) -> Shape:
    """`sort`: N >= 1 arrays of equal dims, `dimension` in range; the comparator (when given)
    takes 2N scalars (two per operand, in operand order) and returns pred[]. Returns the
    operand shape (a tuple when N > 1)."""
    if not operands:
        fail("sort", "needs at least one operand", "none")
    types = element_types("sort", operands)
    require_same_dims("sort", operands)
    if not 0 <= dimension < operands[0].rank:
        fail("sort", f"dimension {dimension} out of range", fmt(operands[0]))
    if comparator is not None:
        check_scalar_lambda("sort", comparator, [t for t in types for _ in (0, 1)],
                            [PrimitiveType.PRED], role="comparator")
    return _tuple_or_single([s.with_default_layout() for s in operands])


def infer_topk(operand: Shape, k: int) -> Shape:
    """`topk`: an array of rank >= 1 and 0 <= k <= its minor dim. Returns
    (operand-type[..., k], s32[..., k])."""
    require_array("topk", operand)
    if operand.rank < 1 or not 0 <= k <= operand.dims[-1]:
        fail("topk", f"k={k} must be within the minor dimension", fmt(operand))
    dims = operand.dims[:-1] + (k,)
    return Shape.tuple_of([Shape.array(_et(operand), dims), Shape.array(PrimitiveType.S32, dims)])


def infer_tuple(shapes: Sequence[Shape]) -> Shape:
    """`tuple`: the tuple of the operand shapes (default layouts)."""
    return Shape.tuple_of([s.with_default_layout() for s in shapes])


def infer_get_tuple_element(shape: Shape, index: int) -> Shape:
    """`get-tuple-element`: element `index` of a tuple shape."""
    if shape.tuple_shapes is None:
        fail("get-tuple-element", "operand must be a tuple", fmt(shape))
    if not 0 <= index < len(shape.tuple_shapes):
        fail("get-tuple-element", f"index {index} out of range", fmt(shape))
    return shape.tuple_shapes[index].with_default_layout()


def infer_copy_start(operand: Shape) -> Shape:
    """`copy-start`: the tuple (destination, source, u32[] context) of an array operand; the
    destination has the operand's dims and type (its layout names the target memory space)."""
    require_array("copy-start", operand)
    same = operand.with_default_layout()
    return Shape.tuple_of([same, same, Shape.array(PrimitiveType.U32, ())])


def infer_copy_done(operand: Shape) -> Shape:
    """`copy-done`: the destination (element 0) of a copy-start's (dest, source, u32[])."""
    parts = operand.tuple_shapes
    if parts is None or len(parts) != 3 or not parts[0].is_array \
            or not parts[0].compatible(parts[1]) or not parts[2].compatible(
                Shape.array(PrimitiveType.U32, ())):
        fail("copy-done", "operand must be a copy-start's (destination, source, u32[]) tuple",
             fmt(operand))
    return parts[0].with_default_layout()


def infer_map(operands: Sequence[Shape], to_apply: HloComputation | None = None,
              dimensions: tuple[int, ...] | None = None,
              element_type: PrimitiveType | None = None) -> Shape:
    """`map`: N >= 1 arrays of equal dims; `dimensions` (when given) lists every dim in order;
    `to_apply` (when given) takes N scalars of the operand types and returns a scalar, whose
    type is the result's. Without it the result type is `element_type` or operand 0's."""
    if not operands:
        fail("map", "needs at least one operand", "none")
    types = element_types("map", operands)
    require_same_dims("map", operands)
    rank = operands[0].rank
    if dimensions is not None and tuple(dimensions) != tuple(range(rank)):
        fail("map", f"dimensions {fmt_dims(dimensions)} must list every operand dimension",
             fmt(operands[0]))
    et = element_type or types[0]
    if to_apply is not None:
        root = check_scalar_lambda("map", to_apply, types, None)
        if not root.is_scalar:
            fail("map", f"to_apply computation '{to_apply.name}' must return a scalar", fmt(root))
        et = _et(root)
    return Shape.array(et, operands[0].dims)


def infer_instruction_shape(inst: HloInstruction) -> Shape | None:
    """The shape `inst` should have given its operands, attributes and called computations,
    or None where the result shape is an input of the op (parameter, constant, custom-call,
    rng, ...). Raises ShapeError for bad operands/attributes. See `shape_inference_inst`."""
    from xlc.hlo.shape_inference_inst import infer_instruction_shape as impl

    return impl(inst)
