"""One array in LLVM IR (XLA's `llvm_ir::IrArray`), and the layout facts both backends share.

An `IrArray` is a base pointer plus an array `Shape`: element type, dims and layout. It turns a
logical multi-index (outermost logical dim first, as HLO writes dims) into the physical linear
offset of the element (`linear_offset`, through `indexing.multi_to_linear`, so an `IrIndex`
made for the same dims and layout reuses its offset) and loads or stores elements in the
storage conventions of `llvm_utils` (`load_element` / `store_element`): in registers pred is
i1, f16 is half and bf16 is its raw i16 bits; in memory pred is one byte.

`constant_bytes(inst)` is the bytes of an array constant in its physical order
(`xlc.hlo.shape.physical_order`, the one definition), which both backends place in their
constant allocations. `LeafEmitter` and `fusion_generator` / `operand_generator` are the
elemental generators both backends' kernels use: a fused computation's parameters, or an
unfused instruction's operands, read through the kernel (any object with a builder `b` and
`read(inst, index)`, `ArrayReader`).

Use: `arr = IrArray(ptr, shape)`, then `arr.read(b, index)`, `arr.write(b, value, index)`, or
the `*_linear` variants for an offset already known.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
from llvmlite import ir

from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import ElementalIrEmitter, Index, linear_to_multi, multi_to_linear
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloComputation, HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape, ShapeIndex, physical_order

__all__ = ["IrArray", "constant_bytes", "physical_order"]


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


class ArrayReader(Protocol):
    """What the generators need of a kernel: its builder and element reads of its buffers."""

    b: ir.IRBuilder

    def read(self, inst: HloInstruction, index: Index, shape_index: ShapeIndex = ()
             ) -> ir.Value: ...


class LeafEmitter(ElementalIrEmitter):
    """An ElementalIrEmitter where some instructions (unfused operands) are read from memory
    through `leaves[uid](index)` instead of being generated. With `scalar_fn` (the backend's
    function for a scalar computation), a reduce inside a fused computation is generated as a
    loop over its reduced dims at each output index."""

    def __init__(self, builder: ir.IRBuilder, read_param: Callable[[int, Index], ir.Value],
                 leaves: dict[int, Callable[[Index], ir.Value]] | None = None,
                 scalar_fn: Callable[[HloComputation], ir.Function] | None = None):
        super().__init__(builder, read_param)
        self.leaves = leaves or {}
        self.scalar_fn = scalar_fn

    def generate(self, inst: HloInstruction, index: Index) -> ir.Value:
        leaf = self.leaves.get(inst.uid)
        if leaf is not None:
            return leaf(index)
        if inst.opcode is Opcode.REDUCE and self.scalar_fn is not None:
            return self._nested_reduce(inst, index)
        return super().generate(inst, index)

    def _nested_reduce(self, inst: HloInstruction, index: Index) -> ir.Value:
        """A reduce inside a fusion (not its root, as XLA's optimized HLO has them): a loop
        over the reduced dims at this output index. Element values generated inside the loop
        are dropped from the cache afterwards (they do not dominate the loop exit)."""
        if inst.shape.is_tuple:
            raise UnsupportedOpError(
                f"variadic reduce inside a fusion is unsupported ({inst.name})")
        key = (inst.uid, tuple(id(v) for v in index))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        b = self.b
        operand, init = inst.operands
        rdims = sorted(int(d) for d in inst.attrs["dimensions"])
        kept = [d for d in range(operand.shape.rank) if d not in rdims]
        assert self.scalar_fn is not None
        fn = self.scalar_fn(inst.called[0])
        init_v = self.generate(init, [])
        with b.goto_entry_block():
            slot = b.alloca(init_v.type)
        b.store(init_v, slot)
        saved = dict(self._cache)
        with lu.for_nest(b, [operand.shape.dims[d] for d in rdims], name="nr") as ridx:
            full: list[ir.Value] = [ir.Constant(lu.I64, 0)] * operand.shape.rank
            for d, v in zip(kept, index):
                full[d] = v
            for d, v in zip(rdims, ridx):
                full[d] = v
            x = self.generate(operand, full)
            b.store(b.call(fn, [b.load(slot), x]), slot)
        self._cache.clear()
        self._cache.update(saved)
        value = b.load(slot)
        self._cache[key] = value
        return value


def fusion_generator(k: ArrayReader, fusion: HloInstruction,
                     scalar_fn: Callable[[HloComputation], ir.Function] | None = None
                     ) -> LeafEmitter:
    """An elemental emitter for `fusion`'s fused computation reading its operands from `k`
    (`scalar_fn`: see `LeafEmitter`)."""
    ops = fusion.operands
    return LeafEmitter(k.b, lambda n, idx: k.read(ops[n], idx), scalar_fn=scalar_fn)


def operand_generator(k: ArrayReader, inst: HloInstruction) -> LeafEmitter:
    """An elemental emitter for unfused `inst` whose operands are read from `k`."""
    def reader(op: HloInstruction) -> Callable[[Index], ir.Value]:
        return lambda idx: k.read(op, idx)

    leaves = {op.uid: reader(op) for op in inst.operands}
    return LeafEmitter(k.b, lambda n, idx: k.read(inst.operands[n], idx), leaves)
