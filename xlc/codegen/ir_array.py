"""One array in LLVM IR (XLA's `llvm_ir::IrArray`), and the layout facts both backends share.

An `IrArray` is a base pointer plus an array `Shape`: element type, dims and layout. It turns a
logical multi-index (outermost logical dim first, as HLO writes dims) into the physical linear
offset of the element (`linear_offset`, through `indexing.multi_to_linear`, so an `IrIndex`
made for the same dims and layout reuses its offset) and loads or stores elements in the
storage conventions of `llvm_utils` (`load_element` / `store_element`): in registers pred is
i1, f16 is half and bf16 is its raw i16 bits; in memory pred is one byte.

`physical_order(shape)` is the one definition of a shape's dims from the most major to the
most minor; `constant_bytes(inst)` the bytes of an array constant in that order, which both
backends place in their constant allocations.

Use: `arr = IrArray(ptr, shape)`, then `arr.read(b, index)`, `arr.write(b, value, index)`, or
the `*_linear` variants for an offset already known.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from llvmlite import ir

from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import Index, linear_to_multi, multi_to_linear
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType, Shape, default_layout

__all__ = ["IrArray", "constant_bytes", "physical_order"]


def physical_order(shape: Shape) -> list[int]:
    """The logical dims of array `shape` from the most major to the most minor (the reverse of
    its layout's minor_to_major; row-major, `[0, 1, ..., rank-1]`, without a layout)."""
    lay = shape.layout or default_layout(shape.rank)
    return list(reversed(lay.minor_to_major))


def _array_element_type(shape: Shape, what: str) -> PrimitiveType:
    pt = shape.element_type
    if shape.is_tuple or pt is None or pt is PrimitiveType.TOKEN:
        raise UnsupportedOpError(f"{what} needs an array shape, got {shape}")
    return pt


def constant_bytes(inst: HloInstruction) -> bytes:
    """The bytes of array constant `inst` in its physical layout (pred as one byte, bf16 as
    its 16 bits). UnsupportedOpError for an elided literal or a non-array shape."""
    pt = _array_element_type(inst.shape, f"constant {inst.name}")
    lit = inst.attrs["literal"]
    if lit.elided or lit.array is None:
        raise UnsupportedOpError(f"constant {inst.name} has no value (elided literal)")
    arr = np.asarray(lit.array).astype(pt.dtype).reshape(inst.shape.dims)
    return np.ascontiguousarray(arr.transpose(physical_order(inst.shape))).tobytes()


class IrArray:
    """An array of `shape` whose element 0 is at `base` (an LLVM pointer)."""

    __slots__ = ("base", "shape", "element_type")

    def __init__(self, base: ir.Value, shape: Shape, what: str = "an IrArray"):
        self.base = base
        self.shape = shape
        self.element_type = _array_element_type(shape, what)

    def __repr__(self) -> str:
        return f"IrArray({self.shape}, base={self.base.get_reference()})"

    @property
    def value_type(self) -> ir.Type:
        """The LLVM type of one element in registers (`llvm_utils.value_type`)."""
        return lu.value_type(self.element_type)

    @property
    def storage_type(self) -> ir.Type:
        """The LLVM type of one element in memory (`llvm_utils.storage_type`)."""
        return lu.storage_type(self.element_type)

    def physical_order(self) -> list[int]:
        """Logical dims from the most major to the most minor."""
        return physical_order(self.shape)

    def linear_offset(self, b: ir.IRBuilder, index: Sequence[ir.Value]) -> ir.Value:
        """The physical element offset (i64) of logical multi-index `index` (element 0 for
        the empty index of a scalar)."""
        if not index:
            return ir.Constant(lu.I64, 0)
        return multi_to_linear(b, index, self.shape)

    def multi_index(self, b: ir.IRBuilder, linear: ir.Value) -> Index:
        """The logical multi-index of physical element `linear` (an IrIndex remembering it)."""
        return linear_to_multi(b, linear, self.shape)

    def element_pointer(self, b: ir.IRBuilder, index: Sequence[ir.Value]) -> ir.Value:
        """The address of element `index`."""
        return b.gep(self.base, [self.linear_offset(b, index)], inbounds=True,
                     source_etype=self.storage_type)

    def read(self, b: ir.IRBuilder, index: Sequence[ir.Value],
             align: int | None = None) -> ir.Value:
        """Load element `index` as a value of `value_type`."""
        return self.read_linear(b, self.linear_offset(b, index), align)

    def write(self, b: ir.IRBuilder, value: ir.Value, index: Sequence[ir.Value],
              align: int | None = None) -> None:
        """Store `value` (of `value_type`) at element `index`."""
        self.write_linear(b, value, self.linear_offset(b, index), align)

    def read_linear(self, b: ir.IRBuilder, linear: ir.Value,
                    align: int | None = None) -> ir.Value:
        """Load physical element number `linear`."""
        return lu.load_element(b, self.base, linear, self.element_type, align)

    def write_linear(self, b: ir.IRBuilder, value: ir.Value, linear: ir.Value,
                     align: int | None = None) -> None:
        """Store `value` as physical element number `linear`."""
        lu.store_element(b, value, self.base, linear, self.element_type, align)
