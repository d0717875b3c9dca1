"""Small helpers shared by the shape-inference modules (`shape_inference.py`,
`shape_inference_nn.py`): spelling shapes in messages, raising `ShapeError`, validating
dimension lists, the window output-size formula and the scalar-lambda signature check.

Every `ShapeError` raised through `fail` reads `<op>: <rule>, got <details>` where shapes are in
HLO spelling without layouts (`f32[4,8]`, `(f32[], s32[])`) and dimension lists are spelled
`{0,1}`.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, NoReturn

from xlc.errors import ShapeError
from xlc.hlo.attrs import WindowDim
from xlc.hlo.shape import PrimitiveType, Shape

if TYPE_CHECKING:
    from xlc.hlo.ir import HloComputation


def fmt(shape: Shape) -> str:
    """HLO spelling of a shape without its layout (`f32[4,8]`)."""
    return shape.to_text(layout=False)


def fmt_all(shapes: Iterable[Shape]) -> str:
    """Shapes joined by `, `."""
    return ", ".join(fmt(s) for s in shapes)


def fmt_dims(dims: Iterable[int]) -> str:
    """A dimension list spelled as in HLO attributes (`{0,2}`)."""
    return "{" + ",".join(str(d) for d in dims) + "}"


def fail(op: str, rule: str, got: str) -> NoReturn:
    """Raise `ShapeError("<op>: <rule>, got <got>")`."""
    raise ShapeError(f"{op}: {rule}, got {got}")


def require_array(op: str, shape: Shape, what: str = "operand") -> None:
    """Raise unless `shape` is an array (not a tuple, not a token)."""
    if not shape.is_array:
        fail(op, f"expected an array {what}", fmt(shape))


def require_arrays(op: str, shapes: Sequence[Shape], what: str = "operand") -> None:
    """Raise unless every shape is an array."""
    for s in shapes:
        require_array(op, s, what)


def require_scalar(op: str, shape: Shape, what: str) -> None:
    """Raise unless `shape` is a rank-0 array."""
    if not shape.is_scalar:
        fail(op, f"{what} must be a scalar", fmt(shape))


def require_integral_scalar(op: str, shape: Shape, what: str) -> None:
    """Raise unless `shape` is a rank-0 integer array."""
    et = shape.element_type
    if not shape.is_scalar or et is None or not et.is_integer:
        fail(op, f"{what} must be an integer scalar", fmt(shape))


def require_same_dims(op: str, shapes: Sequence[Shape], what: str = "operand") -> None:
    """Raise unless all array shapes have identical dims."""
    for s in shapes[1:]:
        if s.dims != shapes[0].dims:
            fail(op, f"{what} dimensions must match", f"{fmt(shapes[0])} and {fmt(s)}")


def check_dims(op: str, name: str, dims: Sequence[int], rank: int, shape: Shape | None = None,
               unique: bool = True, sorted_: bool = False) -> None:
    """Validate a dimension-number list: every entry in [0, rank), optionally unique and
    ascending. `shape` (when given) is named in the message."""
    where = f" for {fmt(shape)}" if shape is not None else f" for rank {rank}"
    for d in dims:
        if not 0 <= d < rank:
            fail(op, f"{name} out of range", f"{fmt_dims(dims)}{where}")
    if unique and len(set(dims)) != len(dims):
        fail(op, f"{name} must be unique", f"{fmt_dims(dims)}{where}")
    if sorted_ and list(dims) != sorted(dims):
        fail(op, f"{name} must be sorted", f"{fmt_dims(dims)}{where}")


def window_output_size(op: str, base: int, wd: WindowDim) -> int:
    """Output extent of one window dimension over a base extent (XLA's formula): the base is
    dilated, padded, then windows of the dilated size are placed every `stride`."""
    if wd.size < 1 or wd.stride < 1 or wd.window_dilation < 1 or wd.base_dilation < 1:
        fail(op, "window size, stride and dilations must be positive",
             f"size={wd.size} stride={wd.stride} lhs_dilate={wd.base_dilation} "
             f"rhs_dilate={wd.window_dilation}")
    dilated_base = 0 if base == 0 else (base - 1) * wd.base_dilation + 1
    padded = dilated_base + wd.pad_low + wd.pad_high
    dilated_window = (wd.size - 1) * wd.window_dilation + 1
    if padded < dilated_window:
        return 0
    return (padded - dilated_window) // wd.stride + 1


def check_scalar_lambda(op: str, comp: HloComputation, param_types: Sequence[PrimitiveType],
                        result_types: Sequence[PrimitiveType] | None,
                        role: str = "to_apply") -> Shape:
    """Check that `comp` takes scalars of `param_types` and (when `result_types` is given)
    returns scalars of those types (a tuple when more than one). Returns the root shape.

    Messages: `<op>: <role> computation 'c' must take N scalar parameters (...), got (...)` and
    `<op>: <role> computation 'c' must return ..., got ...`."""
    want = [Shape.array(t, ()) for t in param_types]
    have = [p.shape if p is not None else None for p in comp.parameters]
    ok = len(have) == len(want) and all(
        h is not None and h.compatible(w) for h, w in zip(have, want))
    if not ok:
        got = ", ".join("?" if h is None else fmt(h) for h in have)
        fail(op, f"{role} computation '{comp.name}' must take {len(want)} scalar parameters "
                 f"({fmt_all(want)})", f"({got})")
    if comp.root is None:
        fail(op, f"{role} computation '{comp.name}' has no root", "nothing")
    root = comp.root.shape
    if result_types is not None:
        outs = [Shape.array(t, ()) for t in result_types]
        expect = outs[0] if len(outs) == 1 else Shape.tuple_of(outs)
        if not root.compatible(expect):
            fail(op, f"{role} computation '{comp.name}' must return {fmt(expect)}", fmt(root))
    return root


def element_types(op: str, shapes: Sequence[Shape]) -> list[PrimitiveType]:
    """Element types of array shapes (raising for tuples/tokens)."""
    out = []
    for s in shapes:
        require_array(op, s)
        assert s.element_type is not None
        out.append(s.element_type)
    return out


def check_inits(op: str, operands: Sequence[Shape],
                inits: Sequence[Shape]) -> list[PrimitiveType]:
    """Shared by reduce and reduce-window: N >= 1 arrays of equal dims and N scalar inits, init
    i of operand i's element type (or both floating point: a wider accumulator). Returns the
    init (accumulator) types."""
    if not operands or len(operands) != len(inits):
        fail(op, "needs N operands and N init values",
             f"{len(operands)} operands and {len(inits)} init values")
    element_types(op, operands)
    require_same_dims(op, operands)
    out = []
    for s, init in zip(operands, inits):
        it, st = init.element_type, s.element_type
        ok = init.is_scalar and it is not None and st is not None and (
            it == st or it.is_float and st.is_float)
        if not ok:
            fail(op, "init value must be a scalar of the operand's element type",
                 f"{fmt(s)} and {fmt(init)}")
        assert init.element_type is not None
        out.append(init.element_type)
    return out


# (largest exponent, significand bits) of each float type, XLA's ordering keys.
_FLOAT_RANGE = {PrimitiveType.F16: (16, 11), PrimitiveType.BF16: (128, 8),
                PrimitiveType.F32: (128, 24), PrimitiveType.F64: (1024, 53)}


def higher_precision_float(a: PrimitiveType, b: PrimitiveType) -> PrimitiveType:
    """XLA's `HigherPrecisionElementType` for two float types: more range first, then more
    precision (so bf16 wins over f16, f32 over both)."""
    return a if _FLOAT_RANGE[a] >= _FLOAT_RANGE[b] else b
