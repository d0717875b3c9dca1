"""Loop emitters: loop fusions (single and multi-output), unfused elementwise and
data-movement ops (one loop over the output in physical order, minor dimension innermost and
contiguous, so LLVM vectorises it), and in-place dynamic-update-slice (plain or as a fusion
root).

Every element is produced by the shared elemental emitter (`xlc.codegen.indexing`); unfused
operands are read from their assigned slices.
"""
from __future__ import annotations

import logging

from llvmlite import ir

from xlc.backend_cpu.backend import CPU_ALIGNMENT
from xlc.backend_cpu.emitter import (
    CpuEmitter,
    FnCtx,
    Kernel,
    element_type,
    i64,
    loop_over,
    split_of,
)
from xlc.codegen import llvm_utils as lu
from xlc.codegen.convert import convert_value
from xlc.codegen.indexing import multi_to_linear
from xlc.codegen.ir_array import LeafEmitter, operand_generator
from xlc.codegen.ir_array import fusion_generator as shared_fusion_generator
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape, ShapeIndex, physical_order

log = logging.getLogger("xlc.backend_cpu")

def operand_buffers(inst: HloInstruction) -> list[tuple[HloInstruction, ShapeIndex]]:
    """(operand, ()) for each array operand of `inst` (tuple operands are unsupported)."""
    out: list[tuple[HloInstruction, ShapeIndex]] = []
    for op in inst.operands:
        if not op.shape.is_array:
            raise UnsupportedOpError(
                f"CPU backend: {inst.name} takes non-array operand {op.name} ({op.shape})")
        out.append((op, ()))
    return out


def output_buffers(inst: HloInstruction) -> list[tuple[HloInstruction, ShapeIndex]]:
    """(inst, index) for every array leaf of `inst`'s shape (nested tuples unsupported)."""
    if inst.shape.is_tuple:
        outs: list[tuple[HloInstruction, ShapeIndex]] = []
        for k, s in enumerate(inst.shape.tuple_shapes or ()):
            if not s.is_array:
                raise UnsupportedOpError(f"CPU backend: nested tuple output of {inst.name}")
            outs.append((inst, (k,)))
        return outs
    return [(inst, ())]


def fusion_generator(k: Kernel, fusion: HloInstruction) -> LeafEmitter:
    """An elemental emitter for `fusion`'s fused computation reading its operands from `k`
    (reduces inside it become loops through the kernel's scalar functions)."""
    return shared_fusion_generator(k, fusion, k.scalar_fn)


def _emit_roots(k: Kernel, gen: LeafEmitter, inst: HloInstruction,
                roots: list[HloInstruction], outs: list[tuple[HloInstruction, ShapeIndex]],
                streaming: bool = False) -> None:
    first = inst.shape.subshape(outs[0][1])
    for r in roots:
        if tuple(r.shape.dims) != tuple(first.dims):
            raise UnsupportedOpError(
                f"CPU backend: multi-output loop fusion {inst.name} has outputs of different "
                f"dimensions ({r.name})")
    if streaming and _streamable(first, len(roots)):
        _emit_streaming(k, gen, roots[0], outs[0], first)
        return
    with loop_over(k.b, first, outer=k.outer) as idx:
        gen.clear_cache()
        # Every output's element is computed before any is stored: an output may share its
        # buffer with an operand (`alias_rules._share_fusion`) that another output still reads
        # at this index.
        values = [gen.generate(r, idx) for r in roots]
        for v, (o, sidx) in zip(values, outs):
            k.write(o, idx, v, sidx)
    k.finish()


TILE = 32
TILE_MIN_ELEMENTS = 1 << 14


def _transposed_dim(inst: HloInstruction) -> int | None:
    """For a big transpose or layout-changing copy: the output dim that is the operand's
    physically minor dim, when it differs from the output's minor dim (else None)."""
    if inst.opcode not in (Opcode.TRANSPOSE, Opcode.COPY) or \
            inst.shape.num_elements < TILE_MIN_ELEMENTS or inst.shape.rank < 2:
        return None
    op = inst.operands[0]
    d_in = physical_order(op.shape)[-1]
    j = list(inst.attrs["dimensions"]).index(d_in) if inst.opcode is Opcode.TRANSPOSE else d_in
    return None if j == physical_order(inst.shape)[-1] else j


def _emit_tiled(k: Kernel, gen: LeafEmitter, inst: HloInstruction, j: int) -> None:
    """TILE x TILE tiles over (output dim j, output minor dim): the reads along j and the
    writes along the minor dim both stay within an L1-resident tile."""
    b = k.b
    shape = inst.shape
    a = physical_order(shape)[-1]
    others = [d for d in physical_order(shape) if d not in (a, j)]
    with loop_over(b, shape, "t", dims=others) as idx, \
            lu.for_range(b, i64(shape.dims[j]), step=TILE, name="j0") as j0, \
            lu.for_range(b, i64(shape.dims[a]), step=TILE, name="a0") as a0:
        jend = _smin(b, b.add(j0, i64(TILE)), shape.dims[j])
        aend = _smin(b, b.add(a0, i64(TILE)), shape.dims[a])
        with lu.for_range(b, jend, start=j0, name="jj") as jj, \
                lu.for_range(b, aend, start=a0, name="aa") as aa:
            full = list(idx)
            full[j], full[a] = jj, aa
            gen.clear_cache()
            k.write(inst, full, gen.generate(inst, full))
    k.finish()


def _smin(b: ir.IRBuilder, v: ir.Value, hi: int) -> ir.Value:
    return b.select(b.icmp_signed("<", v, i64(hi)), v, i64(hi))


STREAM_MIN_BYTES = 8 << 20
"""Outputs at least this big are written with non-temporal stores (they will not fit in cache
anyway, and streaming saves the write-allocate read: cpu-perf.md lesson 3)."""


def _streamable(shape: Shape, nroots: int) -> bool:
    pt = shape.element_type
    if nroots != 1 or pt not in (PrimitiveType.F32, PrimitiveType.F64) or shape.rank < 2:
        return False
    vw = 64 // pt.byte_size
    minor = physical_order(shape)[-1]
    return shape.dims[minor] % vw == 0 and shape.byte_size() >= STREAM_MIN_BYTES


def _emit_streaming(k: Kernel, gen: LeafEmitter, root: HloInstruction,
                    out: tuple[HloInstruction, ShapeIndex], shape: Shape) -> None:
    """Rows of 64-byte chunks: 16 (f32) / 8 (f64) elements are generated into a stack vector
    (LLVM turns that into one vector) and stored with one aligned non-temporal store."""
    b = k.b
    pt = element_type(shape, root.name)
    ety = lu.value_type(pt)
    vw = 64 // pt.byte_size
    order = physical_order(shape)
    minor = order[-1]
    with b.goto_entry_block():
        tmp = b.alloca(ir.ArrayType(ety, vw))
        tmp.align = 64
        tmp.type = lu.PTR  # opaque for llvmlite's type checks (IR text: `ptr`)
    outer_dims = [d for d in order[:-1]]
    with loop_over(b, shape, "s", dims=outer_dims, outer=k.outer) as idx, \
            lu.for_range(b, i64(shape.dims[minor]), step=vw, name="v") as i0:
        with lu.for_range(b, vw, name="lane") as lane:
            gen.clear_cache()
            full = list(idx)
            full[minor] = b.add(i0, lane, flags=["nsw"])
            lu.store_element(b, gen.generate(root, full), tmp, lane, pt)
        vec = lu.load_vector(b, tmp, i64(0), pt, vw, align=64)
        base = list(idx)
        base[minor] = i0
        linear = multi_to_linear(b, base, shape)
        lu.store_vector(b, vec, k.ptr(out[0], out[1]), linear, pt, align=64, nontemporal=True)
    b.fence("seq_cst")
    k.finish()


def _emit_concatenate(k: Kernel, gen: LeafEmitter, concat: HloInstruction,
                      out: tuple[HloInstruction, ShapeIndex]) -> None:
    """A concatenate root: one loop nest per operand over its own region of the output (no
    per-element choice of the operand, however many there are; an im2col's patches are a
    concatenate of one slice per window position)."""
    b = k.b
    d = int(concat.attrs["dimensions"][0])
    offset = 0
    for op in concat.operands:
        with loop_over(b, op.shape, "cc") as idx:
            gen.clear_cache()
            dst = list(idx)
            dst[d] = b.add(idx[d], i64(offset), flags=["nsw"]) if offset else idx[d]
            k.write(out[0], dst, gen.generate(op, idx), out[1])
        offset += op.shape.dims[d]
    gen.clear_cache()
    k.finish()


def emit_loop_fusion(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """A kLoop fusion: one loop nest over the (first) output computing every root element (a
    concatenate root: one loop nest per operand, `_emit_concatenate`)."""
    root = inst.called[0].root
    assert root is not None
    if root.opcode is Opcode.DYNAMIC_UPDATE_SLICE:
        emit_dus_fusion(em, ctx, inst)
        return
    if root.opcode is Opcode.CONCATENATE:
        outs = output_buffers(inst)
        k = em.kernel(ctx, inst.name, outs + operand_buffers(inst))
        _emit_concatenate(k, fusion_generator(k, inst), root, outs[0])
        return
    outs = output_buffers(inst)
    roots = list(root.operands) if root.opcode is Opcode.TUPLE else [root]
    split = split_of(inst.shape.subshape(outs[0][1]))
    k = em.kernel(ctx, inst.name, outs + operand_buffers(inst), split)
    _emit_roots(k, fusion_generator(k, inst), inst, roots, outs,
                streaming=_aligned_output(em, outs))


def emit_elementwise(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """An unfused elementwise or data-movement op as its own loop."""
    element_type(inst.shape, inst.name)
    outs: list[tuple[HloInstruction, ShapeIndex]] = [(inst, ())]
    j = _transposed_dim(inst)
    if j is not None:
        k = em.kernel(ctx, inst.name, outs + operand_buffers(inst))
        _emit_tiled(k, operand_generator(k, inst), inst, j)
        return
    if inst.opcode is Opcode.CONCATENATE:
        k = em.kernel(ctx, inst.name, outs + operand_buffers(inst))
        _emit_concatenate(k, operand_generator(k, inst), inst, outs[0])
        return
    k = em.kernel(ctx, inst.name, outs + operand_buffers(inst), split_of(inst.shape))
    _emit_roots(k, operand_generator(k, inst), inst, [inst], outs,
                streaming=_aligned_output(em, outs))


def _aligned_output(em: CpuEmitter, outs: list[tuple[HloInstruction, ShapeIndex]]) -> bool:
    """Whether the single output's slice starts CPU_ALIGNMENT-aligned (64 bytes) and
    overlaps no input."""
    if len(outs) != 1:
        return False
    sl = em.slice(outs[0][0], outs[0][1])
    inputs = [em.slice(op) for op in outs[0][0].operands if op.shape.is_array]
    return sl.offset % CPU_ALIGNMENT == 0 and not any(i.overlaps(sl) for i in inputs)


def _copy_into(k: Kernel, src: HloInstruction, dst: HloInstruction) -> None:
    """dst[i] = src[i] over the whole array (both read from k; same dims)."""
    with loop_over(k.b, dst.shape) as idx:
        k.write(dst, idx, k.read(src, idx))


def _dus_body(k: Kernel, gen: LeafEmitter, out: HloInstruction, operand_shape_dims: tuple,
              update: HloInstruction, starts: list[HloInstruction]) -> None:
    b = k.b
    start_vals = []
    for d, s in enumerate(starts):
        spt = element_type(s.shape, s.name)
        v = convert_value(b, gen.generate(s, []), spt, PrimitiveType.S64)
        hi = operand_shape_dims[d] - update.shape.dims[d]
        v = b.select(b.icmp_signed("<", v, i64(0)), i64(0), v)
        v = b.select(b.icmp_signed(">", v, i64(hi)), i64(hi), v)
        start_vals.append(v)
    with loop_over(b, update.shape) as idx:
        gen.clear_cache()
        value = gen.generate(update, idx)
        k.write(out, [b.add(s, i, flags=["nsw"]) for s, i in zip(start_vals, idx)], value)
    k.finish()


def emit_dus(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """dynamic-update-slice in place: copy the operand into the output only when buffer
    assignment did not give them the same slice, then write the update window."""
    operand, update = inst.operands[0], inst.operands[1]
    k = em.kernel(ctx, inst.name, [(inst, ())] + operand_buffers(inst))
    if em.slice(operand) != em.slice(inst):
        _copy_into(k, operand, inst)
    gen = operand_generator(k, inst)
    _dus_body(k, gen, inst, tuple(operand.shape.dims), update, list(inst.operands[2:]))


def emit_dus_fusion(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """A loop fusion whose root is dynamic-update-slice: only the update window is written
    (in place when the updated operand shares the output's slice)."""
    root = inst.called[0].root
    assert root is not None
    base = root.operands[0]
    k = em.kernel(ctx, inst.name, [(inst, ())] + operand_buffers(inst))
    gen = fusion_generator(k, inst)
    if base.opcode is Opcode.PARAMETER and \
            em.slice(inst.operands[base.parameter_number]) == em.slice(inst):
        pass  # already in place
    else:
        with loop_over(k.b, inst.shape) as idx:
            gen.clear_cache()
            k.write(inst, idx, gen.generate(base, idx))
        gen.clear_cache()
    _dus_body(k, gen, inst, tuple(base.shape.dims), root.operands[1], list(root.operands[2:]))
