"""Index arithmetic and the fused elemental IR emitter.

An *index* is a list of i64 `ir.Value`s, one per logical dimension of a shape (outermost
logical dim first, as HLO writes dims). `linear_to_multi` / `multi_to_linear` convert between a
physical linear offset (following the shape's layout, minor_to_major) and that multi-index.

`ElementalIrEmitter.generate(inst, index)` produces the value of one element of an instruction
inside a fused computation by mapping `index` through data-movement ops (broadcast, reshape,
bitcast, transpose, slice, pad, concatenate, iota, reverse, dynamic-slice, gather) and calling the
elemental generators for elementwise ops. Parameter reads go through the `read_param` callback,
so the backend decides where operands live. Everything is straight-line code (selects, clamped
indices; no branches), so a loop over output elements stays vectorisable.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from llvmlite import ir

from xlc.codegen import llvm_utils as lu
from xlc.codegen.convert import convert_value
from xlc.codegen.elemental import emit_elemental, has_elemental_generator
from xlc.errors import UnsupportedOpError
from xlc.hlo.attrs import WindowDim
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape, default_layout

log = logging.getLogger("xlc.codegen")

class IrIndex(list):  # type: ignore[type-arg]
    """A multi-index (list of i64 values) that remembers the physical linear offset it came
    from, and for which shape (dims + layout), so `multi_to_linear` on an operand of the same
    shape returns that offset instead of re-linearising (keeps elementwise loops simple and
    vectorisable)."""

    def __init__(self, values: Sequence[ir.Value], linear: ir.Value | None = None,
                 shape: Shape | None = None):
        super().__init__(values)
        self.linear = linear
        self.shape_key = _shape_key(shape) if shape is not None else None


def _shape_key(shape: Shape) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return shape.dims, _minor_to_major(shape)


Index = list[ir.Value]
ReadParam = Callable[[int, Index], ir.Value]


def i64(v: int) -> ir.Constant:
    """An i64 constant."""
    return ir.Constant(lu.I64, v)


def _minor_to_major(shape: Shape) -> tuple[int, ...]:
    lay = shape.layout or default_layout(shape.rank)
    return lay.minor_to_major


def linear_to_multi(b: ir.IRBuilder, linear: ir.Value, shape: Shape) -> Index:
    """The logical multi-index (an IrIndex remembering `linear`) of physical element `linear`
    of an array with `shape`'s layout. Requires 0 <= linear < num_elements."""
    idx: list[ir.Value | None] = [None] * shape.rank
    rem = linear
    m2m = _minor_to_major(shape)
    for k, d in enumerate(m2m):
        size = shape.dims[d]
        if k == len(m2m) - 1:
            idx[d] = rem
        elif size == 1:
            idx[d] = i64(0)
        else:
            idx[d] = b.urem(rem, i64(size))
            rem = b.udiv(rem, i64(size))
    return IrIndex([v for v in idx if v is not None], linear, shape)


def multi_to_linear(b: ir.IRBuilder, index: Sequence[ir.Value], shape: Shape) -> ir.Value:
    """The physical linear offset of logical `index` in an array with `shape`'s layout (taken
    from the index itself when it is an IrIndex made for the same dims and layout)."""
    if isinstance(index, IrIndex) and index.linear is not None \
            and index.shape_key == _shape_key(shape):
        return index.linear
    linear: ir.Value = i64(0)
    stride = 1
    for d in _minor_to_major(shape):
        if shape.dims[d] != 1:
            term = index[d] if stride == 1 else b.mul(index[d], i64(stride), flags=["nsw"])
            linear = term if isinstance(linear, ir.Constant) and linear.constant == 0 \
                else b.add(linear, term, flags=["nsw"])
        stride *= shape.dims[d]
    return linear


def window_dims(inst: HloInstruction, rank: int, backend: str) -> list[WindowDim]:
    """The `window` attribute of `inst` as one WindowDim per dimension (size-1 windows when
    it has none). Raises UnsupportedOpError naming `backend` and `inst` when the window's
    rank is not `rank`."""
    w = inst.attrs.get("window")
    dims = list(w.dims) if w is not None else []
    if not dims and rank:
        dims = [WindowDim(1) for _ in range(rank)]
    if len(dims) != rank:
        raise UnsupportedOpError(f"{backend} backend: {inst.name}: window has {len(dims)} "
                                 f"dims, operand rank is {rank}")
    return dims


def window_position(b: ir.IRBuilder, out: ir.Value, win: ir.Value, wd: Any, size: int
                    ) -> tuple[ir.Value, ir.Value]:
    """(inside, pos) along one windowed dimension of XLA's window semantics (`wd` a
    `xlc.hlo.attrs.WindowDim`): the operand position that window element `win` of output
    position `out` reads, `out * stride + win * window_dilation - pad_low`, divided by the base
    dilation, and whether it is a real element (not padding, not a base-dilation hole, inside
    `[0, size)`). `pos` is not clamped: select or clamp it before reading."""
    pos = b.sub(b.add(b.mul(out, i64(wd.stride)), b.mul(win, i64(wd.window_dilation))),
                i64(wd.pad_low))
    inside = b.icmp_signed(">=", pos, i64(0))
    if wd.base_dilation > 1:
        bd = i64(wd.base_dilation)
        inside = b.and_(inside, b.icmp_signed("==", b.srem(pos, bd), i64(0)))
        pos = b.sdiv(pos, bd)
    return b.and_(inside, b.icmp_signed("<", pos, i64(size))), pos


def window_positions(b: ir.IRBuilder, outs: Sequence[ir.Value], wins: Sequence[ir.Value],
                     wdims: Sequence[Any], sizes: Sequence[int]
                     ) -> tuple[ir.Value, list[ir.Value]]:
    """`window_position` for every windowed dimension: (all inside, positions)."""
    ok: ir.Value = ir.Constant(lu.I1, 1)
    positions: list[ir.Value] = []
    for o, w, wd, n in zip(outs, wins, wdims, sizes):
        inside, pos = window_position(b, o, w, wd, n)
        ok = b.and_(ok, inside)
        positions.append(pos)
    return ok, positions


def _row_major(shape: Shape) -> Shape:
    return shape.with_default_layout()


def _clamp(b: ir.IRBuilder, v: ir.Value, lo: int, hi: int) -> ir.Value:
    v = b.select(b.icmp_signed("<", v, i64(lo)), i64(lo), v)
    return b.select(b.icmp_signed(">", v, i64(hi)), i64(hi), v)


class ElementalIrEmitter:
    """Generates element values of instructions in a fused computation from an output index.

    `read_param(parameter_number, index)` must return the value (llvm_utils.value_type) of that
    element of the fusion parameter. Values are cached per (instruction, index values); the
    cache is only valid while the builder stays in one basic block, so call `clear_cache()`
    after moving the builder elsewhere."""

    def __init__(self, builder: ir.IRBuilder, read_param: ReadParam):
        self.b = builder
        self.read_param = read_param
        self._cache: dict[tuple[int, tuple[int, ...]], tuple[tuple[ir.Value, ...], ir.Value]] = {}
        self._globals: dict[int, ir.GlobalVariable] = {}

    def clear_cache(self) -> None:
        """Forget cached element values (call after changing basic block)."""
        self._cache.clear()

    def generate(self, inst: HloInstruction, index: Index) -> ir.Value:
        """The element of `inst` at logical `index` (len(index) == inst.shape.rank).

        Raises UnsupportedOpError naming the instruction for ops with no elemental form."""
        key = (inst.uid, tuple(id(v) for v in index))
        hit = self._cache.get(key)
        if hit is not None:
            return hit[1]
        rule = _RULES.get(inst.opcode)
        if rule is not None:
            value = rule(self, inst, index)
        elif has_elemental_generator(inst.opcode):
            value = self._elementwise(inst, index)
        else:
            raise UnsupportedOpError(
                f"no elemental IR emitter for '{inst.opcode.text}' ({inst.name})")
        # the entry keeps the index values alive, so their ids cannot be reused by others
        self._cache[key] = (tuple(index), value)
        return value

    # ---- elementwise and leaves ---------------------------------------------------------------
    def _elementwise(self, inst: HloInstruction, index: Index) -> ir.Value:
        vals = []
        for op in inst.operands:
            # clamp/select may take scalar operands next to array ones
            vals.append(self.generate(op, index if op.shape.rank == len(index) else []))
        return emit_elemental(self.b, inst, vals)

    def _parameter(self, inst: HloInstruction, index: Index) -> ir.Value:
        return self.read_param(inst.parameter_number, index)

    def _constant(self, inst: HloInstruction, index: Index) -> ir.Value:
        lit = inst.attrs["literal"]
        pt = inst.shape.element_type
        if lit.elided or lit.array is None or pt is None:
            raise UnsupportedOpError(f"constant {inst.name} has no usable value (elided/tuple)")
        arr = lit.array
        if arr.size == 1:
            raw = arr.reshape(()).astype(pt.dtype)
            if pt is PrimitiveType.BF16:
                return ir.Constant(lu.I16, int(raw.view("int16")))
            if pt.is_complex:
                part = lu.value_type(pt).elements[0]
                return ir.Constant(lu.value_type(pt), [lu.const(part, float(raw.real)),
                                                      lu.const(part, float(raw.imag))])
            if pt is PrimitiveType.PRED:
                return ir.Constant(lu.I1, int(bool(raw)))
            return lu.const(lu.value_type(pt), raw.item())
        gv = self._global_for(inst, arr, pt)
        linear = multi_to_linear(self.b, index, inst.shape)
        return lu.load_element(self.b, gv, linear, pt)

    def _global_for(self, inst: HloInstruction, arr: object, pt: PrimitiveType
                    ) -> ir.GlobalVariable:
        gv = self._globals.get(inst.uid)
        if gv is None:
            import numpy as np

            a = np.asarray(arr).astype(pt.dtype).reshape(inst.shape.dims)
            m2m = _minor_to_major(inst.shape)
            physical = np.ascontiguousarray(a.transpose(list(reversed(m2m))))
            data = bytearray(physical.tobytes())
            module = self.b.module
            name = module.get_unique_name(f"const.{inst.name}")
            aty = ir.ArrayType(lu.I8, len(data))
            gv = ir.GlobalVariable(module, aty, name=name)
            gv.initializer = ir.Constant(aty, data)
            gv.global_constant = True
            gv.linkage = "internal"
            gv.align = 64
            self._globals[inst.uid] = gv
        return gv

    def _iota(self, inst: HloInstruction, index: Index) -> ir.Value:
        pt = inst.shape.element_type
        assert pt is not None
        d = int(inst.attrs["iota_dimension"])
        return convert_value(self.b, index[d], PrimitiveType.S64, pt)

    # ---- data movement ------------------------------------------------------------------------
    def _broadcast(self, inst: HloInstruction, index: Index) -> ir.Value:
        dims = inst.attrs.get("dimensions", ())
        return self.generate(inst.operands[0], [index[d] for d in dims])

    def _transpose(self, inst: HloInstruction, index: Index) -> ir.Value:
        perm = inst.attrs["dimensions"]
        src: list[ir.Value] = [i64(0)] * len(perm)
        for i, p in enumerate(perm):
            src[p] = index[i]
        return self.generate(inst.operands[0], src)

    def _reshape(self, inst: HloInstruction, index: Index) -> ir.Value:
        op = inst.operands[0]
        if op.shape.dims == inst.shape.dims:
            return self.generate(op, index)
        linear = multi_to_linear(self.b, index, _row_major(inst.shape))
        return self.generate(op, linear_to_multi(self.b, linear, _row_major(op.shape)))

    def _bitcast(self, inst: HloInstruction, index: Index) -> ir.Value:
        op = inst.operands[0]
        if op.shape.element_type != inst.shape.element_type:
            raise UnsupportedOpError(
                f"no elemental IR emitter for type-changing bitcast ({inst.name})")
        linear = multi_to_linear(self.b, index, inst.shape)
        return self.generate(op, linear_to_multi(self.b, linear, op.shape))

    def _bitcast_convert(self, inst: HloInstruction, index: Index) -> ir.Value:
        """XLA's bitcast-convert. Equal widths: elementwise. A narrower result has an extra
        minor-most logical dim j: element j holds bits [j w, (j+1) w) of the operand element
        (little-endian). A wider result joins the operand's minor-most dim the same way."""
        op = inst.operands[0]
        src, dst = _element_type(op), _element_type(inst)
        if src.bit_width == dst.bit_width:
            return self._elementwise(inst, index)
        if PrimitiveType.PRED in (src, dst) or src.is_complex or dst.is_complex:
            raise UnsupportedOpError(f"bitcast-convert from {src.text} to {dst.text} changes "
                                     f"the width of a pred or complex type ({inst.name})")
        b = self.b
        src_int, dst_int = ir.IntType(src.bit_width), ir.IntType(dst.bit_width)
        if src.bit_width > dst.bit_width:
            bits = _to_int_bits(b, self.generate(op, list(index[:-1])), src_int)
            shift = b.mul(index[-1], i64(dst.bit_width))
            shift = b.trunc(shift, src_int) if src.bit_width < 64 else shift
            part = b.trunc(b.lshr(bits, shift), dst_int)
        else:
            part = ir.Constant(dst_int, 0)
            for j in range(dst.bit_width // src.bit_width):
                piece = _to_int_bits(b, self.generate(op, list(index) + [i64(j)]), src_int)
                piece = b.zext(piece, dst_int)
                if j:
                    piece = b.shl(piece, ir.Constant(dst_int, j * src.bit_width))
                part = b.or_(part, piece)
        want = lu.value_type(dst)
        return part if want == dst_int else b.bitcast(part, want)

    def _slice(self, inst: HloInstruction, index: Index) -> ir.Value:
        src = []
        for i, sd in zip(index, inst.attrs["slice"]):
            v = i if sd.stride == 1 else self.b.mul(i, i64(sd.stride), flags=["nsw"])
            src.append(v if sd.start == 0 else self.b.add(v, i64(sd.start), flags=["nsw"]))
        return self.generate(inst.operands[0], src)

    def _reverse(self, inst: HloInstruction, index: Index) -> ir.Value:
        rev = set(inst.attrs["dimensions"])
        dims = inst.shape.dims
        src = [self.b.sub(i64(dims[d] - 1), v) if d in rev else v for d, v in enumerate(index)]
        return self.generate(inst.operands[0], src)

    def _pad(self, inst: HloInstruction, index: Index) -> ir.Value:
        b = self.b
        op = inst.operands[0]
        in_bounds: ir.Value = ir.Constant(lu.I1, 1)
        src = []
        for d, (lo, _hi, interior) in enumerate(inst.attrs["padding"].dims):
            t = b.sub(index[d], i64(lo))
            ok = b.icmp_signed(">=", t, i64(0))
            if interior:
                step = i64(interior + 1)
                ok = b.and_(ok, b.icmp_signed("==", b.srem(t, step), i64(0)))
                t = b.sdiv(t, step)
            ok = b.and_(ok, b.icmp_signed("<", t, i64(op.shape.dims[d])))
            in_bounds = b.and_(in_bounds, ok)
            src.append(_clamp(b, t, 0, op.shape.dims[d] - 1))
        # XLA allows a float pad value of another precision; the result has the wider type
        pad = inst.operands[1]
        et, src_et, pad_et = (inst.shape.element_type, op.shape.element_type,
                              pad.shape.element_type)
        assert et is not None and src_et is not None and pad_et is not None
        value = convert_value(b, self.generate(op, src), src_et, et)
        pad_value = convert_value(b, self.generate(pad, []), pad_et, et)
        return b.select(in_bounds, value, pad_value)

    def _concatenate(self, inst: HloInstruction, index: Index) -> ir.Value:
        b = self.b
        d = int(inst.attrs["dimensions"][0])
        offset = 0
        parts = []
        for op in inst.operands:
            size = op.shape.dims[d]
            local = _clamp(b, b.sub(index[d], i64(offset)), 0, size - 1)
            src = list(index)
            src[d] = local
            parts.append((offset, self.generate(op, src)))
            offset += size
        # select chain from the last operand back: the segment that contains index[d]
        result = parts[-1][1]
        for k in range(len(parts) - 2, -1, -1):
            end = parts[k + 1][0]
            result = b.select(b.icmp_signed("<", index[d], i64(end)), parts[k][1], result)
        return result

    def _dynamic_slice(self, inst: HloInstruction, index: Index) -> ir.Value:
        b = self.b
        op = inst.operands[0]
        sizes = inst.attrs.get("dynamic_slice_sizes", inst.shape.dims)
        src = []
        for d, i in enumerate(index):
            start_inst = inst.operands[1 + d]
            spt = start_inst.shape.element_type
            assert spt is not None
            start = convert_value(b, self.generate(start_inst, []), spt, PrimitiveType.S64)
            start = _clamp(b, start, 0, op.shape.dims[d] - int(sizes[d]))
            src.append(b.add(start, i, flags=["nsw"]))
        return self.generate(op, src)

    def _gather(self, inst: HloInstruction, index: Index) -> ir.Value:
        """XLA gather, one output element: the batch part of `index` selects an index vector
        of `start_indices` (mapped onto operand dims by start_index_map, clamped to
        [0, dim - slice_size]); the offset part indexes the window on the uncollapsed,
        unbatched operand dims; operand batching dims take the matching batch index."""
        b = self.b
        operand, indices = inst.operands

        def ints(key: str) -> list[int]:
            return [int(v) for v in inst.attrs.get(key, ())]

        offset_dims, sizes = ints("offset_dims"), ints("slice_sizes")
        collapsed, start_map = set(ints("collapsed_slice_dims")), ints("start_index_map")
        op_batch, idx_batch = ints("operand_batching_dims"), ints("start_indices_batching_dims")
        ivd = int(inst.attrs["index_vector_dim"])
        batch = [v for pos, v in enumerate(index) if pos not in offset_dims]
        window = [d for d in range(operand.shape.rank) if d not in collapsed and d not in op_batch]
        src: list[ir.Value] = [i64(0)] * operand.shape.rank
        for d, pos in zip(window, offset_dims):
            src[d] = index[pos]
        idx_dims = [d for d in range(indices.shape.rank) if d != ivd]
        for od, idim in zip(op_batch, idx_batch):
            src[od] = batch[idx_dims.index(idim)]
        ipt = indices.shape.element_type
        assert ipt is not None
        for comp, d in enumerate(start_map):
            at = list(batch)
            if ivd < indices.shape.rank:
                at.insert(ivd, i64(comp))
            start = convert_value(b, self.generate(indices, at), ipt, PrimitiveType.S64)
            start = _clamp(b, start, 0, operand.shape.dims[d] - sizes[d])
            src[d] = b.add(src[d], start, flags=["nsw"])
        return self.generate(operand, src)


_RULES: dict[Opcode, Callable[[ElementalIrEmitter, HloInstruction, Index], ir.Value]] = {
    Opcode.PARAMETER: ElementalIrEmitter._parameter,
    Opcode.CONSTANT: ElementalIrEmitter._constant,
    Opcode.IOTA: ElementalIrEmitter._iota,
    Opcode.BROADCAST: ElementalIrEmitter._broadcast,
    Opcode.TRANSPOSE: ElementalIrEmitter._transpose,
    Opcode.RESHAPE: ElementalIrEmitter._reshape,
    Opcode.BITCAST: ElementalIrEmitter._bitcast,
    Opcode.BITCAST_CONVERT: ElementalIrEmitter._bitcast_convert,
    Opcode.SLICE: ElementalIrEmitter._slice,
    Opcode.REVERSE: ElementalIrEmitter._reverse,
    Opcode.PAD: ElementalIrEmitter._pad,
    Opcode.CONCATENATE: ElementalIrEmitter._concatenate,
    Opcode.DYNAMIC_SLICE: ElementalIrEmitter._dynamic_slice,
    Opcode.GATHER: ElementalIrEmitter._gather,
}


def _element_type(inst: HloInstruction) -> PrimitiveType:
    pt = inst.shape.element_type
    if pt is None:
        raise UnsupportedOpError(f"'{inst.name}' is not an array")
    return pt


def _to_int_bits(b: ir.IRBuilder, value: ir.Value, ty: ir.IntType) -> ir.Value:
    """The bits of a scalar element value as an integer of its width."""
    return value if value.type == ty else b.bitcast(value, ty)


def has_elemental_ir_rule(op: Opcode) -> bool:
    """Whether `ElementalIrEmitter.generate` handles opcode `op` (index rule or generator)."""
    return op in _RULES or has_elemental_generator(op)
