"""Helpers shared by the algebraic simplifier's rewrite modules.

A rewrite is a function `(inst, rw: Rewriter) -> Rewrite | None`: it inspects `inst` and either
declines (None, having added nothing) or returns `(rewrite name, replacement)` where the
replacement is an existing instruction with exactly `inst`'s shape (layout included) or a new one
built with `rw.add(...)` (already added to the computation) whose shape is `inst.shape`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from xlc.hlo.attrs import Literal
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape

Rewrite = tuple[str, HloInstruction]
RewriteFn = Callable[[HloInstruction, "Rewriter"], "Rewrite | None"]


class Rewriter:
    """Builds replacement instructions inside one computation."""

    def __init__(self, comp: HloComputation):
        self.comp = comp

    def add(self, opcode: Opcode, shape: Shape, operands: Sequence[HloInstruction] = (),
            attrs: Mapping[str, Any] | None = None,
            called: Sequence[HloComputation] = ()) -> HloInstruction:
        """Create and append an instruction (named after its opcode, made unique)."""
        return self.comp.add(opcode, shape, operands, attrs, called, name=opcode.text)

    def scalar_constant(self, value: Any, element_type: PrimitiveType) -> HloInstruction:
        """A new scalar `constant(value)` of `element_type`."""
        arr = np.asarray(value).astype(element_type.dtype)
        return self.add(Opcode.CONSTANT, Shape.array(element_type, ()), (),
                        {"literal": Literal(arr)})

    def splat(self, value: Any, shape: Shape) -> HloInstruction:
        """`value` at every element of `shape` (layout kept): a scalar constant, broadcast when
        rank > 0."""
        assert shape.element_type is not None
        c = self.scalar_constant(value, shape.element_type)
        if not shape.dims:
            return c
        return self.add(Opcode.BROADCAST, shape, (c,), {"dimensions": ()})

    def broadcast(self, operand: HloInstruction, shape: Shape,
                  dims: Sequence[int]) -> HloInstruction:
        """`broadcast(operand), dimensions=dims` (no-op when the shape is unchanged)."""
        if operand.shape.dims == shape.dims and tuple(dims) == tuple(range(len(dims))):
            return operand
        return self.add(Opcode.BROADCAST, shape, (operand,), {"dimensions": tuple(dims)})

    def reshape(self, operand: HloInstruction, dims: Sequence[int]) -> HloInstruction:
        """`reshape(operand)` to `dims` (no-op when the dims are unchanged)."""
        if operand.shape.dims == tuple(dims):
            return operand
        return self.add(Opcode.RESHAPE, operand.shape.with_dims(tuple(dims)), (operand,))


def layout_of(shape: Shape) -> tuple[int, ...]:
    """The minor-to-major order, defaulting to row-major when absent."""
    if shape.layout is None:
        return tuple(range(shape.rank - 1, -1, -1))
    return shape.layout.minor_to_major


def same_shape(a: Shape, b: Shape) -> bool:
    """Equal element types, dims and (effective) layouts; tuples compared elementwise."""
    if a.is_tuple or b.is_tuple:
        ta, tb = a.tuple_shapes or (), b.tuple_shapes or ()
        return (a.is_tuple and b.is_tuple and len(ta) == len(tb)
                and all(same_shape(x, y) for x, y in zip(ta, tb)))
    return (a.element_type == b.element_type and a.dims == b.dims
            and layout_of(a) == layout_of(b))


def literal_array(inst: HloInstruction) -> np.ndarray | None:
    """The value of a non-elided array constant, else None."""
    if inst.opcode is not Opcode.CONSTANT:
        return None
    lit = inst.attrs.get("literal")
    if lit is None or lit.elided or lit.array is None:
        return None
    return lit.array


def splat_value(inst: HloInstruction) -> Any | None:
    """The single value of a constant whose elements are all equal (or a broadcast of one);
    None otherwise (also for empty arrays)."""
    while inst.opcode is Opcode.BROADCAST:
        inst = inst.operands[0]
    arr = literal_array(inst)
    if arr is None or arr.size == 0:
        return None
    first = arr.reshape(-1)[0]
    if arr.size > 1 and not np.all(arr == first):
        return None
    if isinstance(first, (float, np.floating)) and np.isnan(first):
        return None
    return first


def is_splat_of(inst: HloInstruction, value: float) -> bool:
    """Every element of `inst` is known to equal `value` (a constant or broadcast of one)."""
    v = splat_value(inst)
    if v is None:
        return False
    try:
        return bool(v == value)
    except (TypeError, ValueError):
        return False


def replace_with_operand(inst: HloInstruction, operand: HloInstruction, name: str
                         ) -> Rewrite | None:
    """`(name, operand)` when `operand` can stand for `inst` (same shape and layout)."""
    if operand is inst or not same_shape(inst.shape, operand.shape):
        return None
    return name, operand


def identity_value(op: Opcode, et: PrimitiveType) -> Any | None:
    """The identity element of a commutative reduction opcode for `et`, or None."""
    if op is Opcode.ADD or op is Opcode.OR or op is Opcode.XOR:
        return 0
    if op is Opcode.MULTIPLY:
        return 1
    if op is Opcode.AND:
        return True if et is PrimitiveType.PRED else -1
    dt = et.dtype
    if op is Opcode.MAXIMUM:
        if et is PrimitiveType.PRED:
            return False
        return -np.inf if et.is_float else np.iinfo(dt).min if et.is_integer else None
    if op is Opcode.MINIMUM:
        if et is PrimitiveType.PRED:
            return True
        return np.inf if et.is_float else np.iinfo(dt).max if et.is_integer else None
    return None


COMMUTATIVE_REDUCERS = frozenset({Opcode.ADD, Opcode.MULTIPLY, Opcode.MAXIMUM, Opcode.MINIMUM,
                                  Opcode.AND, Opcode.OR, Opcode.XOR})


def simple_reducer(comp: HloComputation) -> Opcode | None:
    """The opcode when `comp` is `op(param0, param1)` (either order) for a commutative,
    associative elementwise opcode; None otherwise."""
    root = comp.root
    if (root is None or root.opcode not in COMMUTATIVE_REDUCERS or len(comp.parameters) != 2
            or len(comp.instructions) != 3 or not root.shape.is_scalar):
        return None
    if {id(o) for o in root.operands} != {id(p) for p in comp.parameters}:
        return None
    return root.opcode


def int_tuple(value: Any) -> tuple[int, ...]:
    """An attribute that may be an int or a tuple of ints, as a tuple."""
    if value is None:
        return ()
    if isinstance(value, (int, np.integer)):
        return (int(value),)
    return tuple(int(v) for v in value)


def add_reducer(module: HloModule, element_type: PrimitiveType) -> HloComputation:
    """A scalar `add(p0, p1)` computation of `element_type`: an existing one when the module has
    it, else a new `add_<type>` computation added to the module."""
    scalar = Shape.array(element_type, ())
    for comp in module.computations:
        if (not comp.is_fusion_computation and simple_reducer(comp) is Opcode.ADD
                and comp.root is not None and comp.root.shape == scalar
                and all(p.shape == scalar for p in comp.parameters)):
            return comp
    comp = module.new_computation(f"add_{element_type.text}")
    a = comp.add_parameter(0, scalar, "lhs")
    b = comp.add_parameter(1, scalar, "rhs")
    comp.root = comp.add(Opcode.ADD, scalar, (a, b), name="add")
    return comp
