"""Loop kernels: kLoop fusions (single and multi-output), unfused elementwise and data-movement
ops, copies, and in-place dynamic-update-slice (plain or as a fusion root).

A loop kernel is a grid-stride loop over the output's physical elements (XLA's launch
dimensions: 128 threads per block, ceil(n / 128) blocks, capped and strided). When the element
count is a multiple of the vector width (16 bytes / widest element), each thread handles one
16-byte group: operands read with the output's own physical index (same dims and layout) are
loaded as one 128-bit vector and outputs stored as one, giving `ld.global.v4` / `st.global.v4`.
Every element comes from the shared elemental emitter (`xlc.codegen.indexing`).
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from llvmlite import ir

from xlc.backend_gpu.emitter import GpuEmitter, array_buffers, operand_buffers
from xlc.backend_gpu.kernel import (
    GpuKernel,
    element_type,
    grid_stride,
    i32,
    i64,
    loop_launch,
)
from xlc.backend_gpu.thunks import DeviceToDeviceCopyThunk, Thunk
from xlc.codegen import llvm_utils as lu
from xlc.codegen.convert import convert_value
from xlc.codegen.indexing import (
    IrIndex,
    linear_to_multi,
    multi_to_linear,
)
from xlc.codegen.ir_array import LeafEmitter, fusion_generator, operand_generator
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape, ShapeIndex
from xlc.passes.alias_rules import same_layout

log = logging.getLogger("xlc.backend_gpu")

VECTOR_BYTES = 16


def _vector_width(shape: Shape, outs: list[Shape]) -> int:
    if any(element_type(s, "output").is_complex for s in outs):
        return 1  # complex values are {re, im} structs, which LLVM vectors cannot hold
    widest = max(element_type(s, "output").byte_size for s in outs)
    vec = VECTOR_BYTES // widest if widest <= VECTOR_BYTES else 1
    n = shape.num_elements
    return vec if vec > 1 and n % vec == 0 and n >= vec else 1


def emit_loop(em: GpuEmitter, k: GpuKernel, gen: LeafEmitter,
              roots: list[HloInstruction], outs: list[tuple[HloInstruction, ShapeIndex]],
              vector_params: list[HloInstruction] | None = None) -> None:
    """Fill kernel `k`: out[i] = root(i) for every output element, grid-strided and vectorised
    when possible. `vector_params[n]` is the unfused buffer behind fusion parameter n (used for
    128-bit loads); the roots must all have the first output's dims."""
    shape = outs[0][0].shape.subshape(outs[0][1])
    out_shapes = [o.shape.subshape(s) for o, s in outs]
    for r in roots:
        if tuple(r.shape.dims) != tuple(shape.dims):
            raise UnsupportedOpError(
                f"GPU backend: multi-output loop fusion {k.hlo} has outputs of different "
                f"dimensions ({r.name})")
    vec = _vector_width(shape, out_shapes)
    if any(k.slice(o, s).offset % VECTOR_BYTES for o, s in outs):
        vec = 1
    n = shape.num_elements
    items = n // vec
    grid, block = loop_launch(items)
    k.launch(grid, block)
    b = k.b
    with grid_stride(b, items) as j:
        base = b.mul(j, i64(vec), flags=["nuw", "nsw"]) if vec > 1 else j
        lanes = [base if lane == 0 else b.add(base, i64(lane), flags=["nuw", "nsw"])
                 for lane in range(vec)]
        if vec > 1 and vector_params is not None:
            install_vector_reads(k, gen, vector_params, shape, lanes, vec)
        values: list[list[ir.Value]] = [[] for _ in outs]
        idxs = []
        for lin in lanes:
            idx = linear_to_multi(b, lin, shape)
            idxs.append(idx)
            for r_k, r in enumerate(roots):
                values[r_k].append(gen.generate(r, idx))
        for (o, sidx), vals in zip(outs, values):
            pt = element_type(o.shape.subshape(sidx), o.name)
            oshape = o.shape.subshape(sidx)
            if not same_layout(oshape, shape):  # another physical order: its own offsets
                for idx, x in zip(idxs, vals):
                    lu.store_element(b, x, k.ptr(o, sidx), multi_to_linear(b, idx, oshape), pt)
            elif vec == 1:
                lu.store_element(b, vals[0], k.ptr(o, sidx), base, pt)
            else:
                vty = ir.VectorType(vals[0].type, vec)
                v: ir.Value = ir.Constant(vty, ir.Undefined)
                for lane, x in enumerate(vals):
                    v = b.insert_element(v, x, i32(lane))
                lu.store_vector(b, v, k.ptr(o, sidx), base, pt, align=vec * pt.byte_size)
    k.finish()


def install_vector_reads(k: GpuKernel, gen: LeafEmitter, params: list[HloInstruction],
                         shape: Shape, lanes: list[ir.Value], vec: int) -> Callable[[], None]:
    """Make `gen` read fusion parameters that share `shape`'s physical index as one vector
    load per thread (lane values extracted), others element by element. `lanes` are the
    physical linear indices of the `vec` consecutive elements (the first a multiple of `vec`),
    which the indices passed to `gen` must carry (`linear_to_multi`). Returns the function
    that restores `gen`'s element reads (call it when leaving the loop body)."""
    lane_of = {id(v): k_ for k_, v in enumerate(lanes)}
    key = (tuple(shape.dims), _m2m(shape))
    loaded: dict[int, ir.Value] = {}
    scalar_read = gen.read_param
    b = k.b

    def read(n: int, idx: list[ir.Value]) -> ir.Value:
        p = params[n]
        lane = lane_of.get(id(idx.linear)) if isinstance(idx, IrIndex) else None
        if lane is None or not p.shape.is_array or (tuple(p.shape.dims), _m2m(p.shape)) != key \
                or k.slice(p).offset % VECTOR_BYTES or element_type(p.shape, p.name).is_complex:
            return scalar_read(n, idx)
        vecval = loaded.get(n)
        if vecval is None:
            pt = element_type(p.shape, p.name)
            vecval = lu.load_vector(b, k.ptr(p), lanes[0], pt, vec,
                                    align=min(VECTOR_BYTES, vec * pt.byte_size))
            loaded[n] = vecval
        return b.extract_element(vecval, i32(lane))

    gen.read_param = read

    def restore() -> None:
        gen.read_param = scalar_read
    return restore


def _m2m(shape: Shape) -> tuple[int, ...]:
    return tuple(shape.layout.minor_to_major) if shape.layout else tuple(
        range(shape.rank - 1, -1, -1))


def emit_loop_fusion(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """A kLoop fusion: one grid-stride loop over the (first) output computing every root."""
    root = inst.called[0].root
    assert root is not None
    if root.opcode is Opcode.DYNAMIC_UPDATE_SLICE:
        return emit_dus_fusion(em, inst)
    outs = array_buffers(inst)
    roots = list(root.operands) if root.opcode is Opcode.TUPLE else [root]
    k = em.kernel(inst, outs, operand_buffers(inst), max_threads=128)
    gen = fusion_generator(k, inst)
    emit_loop(em, k, gen, roots, outs, vector_params=list(inst.operands))
    return [k.thunk()]


def emit_elementwise(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """An unfused elementwise or data-movement op as its own loop kernel."""
    element_type(inst.shape, inst.name)
    outs: list[tuple[HloInstruction, ShapeIndex]] = [(inst, ())]
    k = em.kernel(inst, outs, operand_buffers(inst), max_threads=128)
    gen = operand_generator(k, inst)
    if inst.opcode.is_elementwise:
        # operands are the leaves: route them through read_param so vector loads apply
        def param(n: int) -> Callable[[list[ir.Value]], ir.Value]:
            return lambda idx: gen.read_param(n, idx)

        gen.leaves = {op.uid: param(n) for n, op in enumerate(inst.operands)}
        emit_loop(em, k, gen, [inst], outs, vector_params=list(inst.operands))
    else:
        emit_loop(em, k, gen, [inst], outs)
    return [k.thunk()]


def emit_copy(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """A copy: nothing when source and destination share a slice, a device-to-device memcpy
    when the layouts agree, else a layout-changing loop kernel."""
    src = inst.operands[0]
    if not inst.shape.is_array:
        raise UnsupportedOpError(f"GPU backend: copy of a tuple ({inst.name})")
    if em.slice(src) == em.slice(inst):
        return []
    if _m2m(src.shape) == _m2m(inst.shape):
        return [DeviceToDeviceCopyThunk(inst.name, src=em.buffer_slice(src),
                                        dst=em.buffer_slice(inst))]
    from xlc.backend_gpu.emit_transpose import emit_transpose_copy

    return emit_transpose_copy(em, inst)


def _dus_kernel(em: GpuEmitter, inst: HloInstruction, fused: bool) -> list[Thunk]:
    """The kernel writing the update window of dynamic-update-slice `inst` (or of the DUS
    root of fusion `inst`) into the output buffer."""
    k = em.kernel(inst, [(inst, ())], operand_buffers(inst), max_threads=128,
                  label=f"{inst.name}_update")
    if fused:
        root = inst.called[0].root
        assert root is not None
        gen = fusion_generator(k, inst)
        dus = root
    else:
        gen = operand_generator(k, inst)
        dus = inst
    base_dims = dus.operands[0].shape.dims
    update = dus.operands[1]
    b = k.b
    n = update.shape.num_elements
    grid, block = loop_launch(n)
    k.launch(grid, block)
    with grid_stride(b, n) as lin:
        starts = []
        for d, s in enumerate(dus.operands[2:]):
            spt = element_type(s.shape, s.name)
            v = convert_value(b, gen.generate(s, []), spt, PrimitiveType.S64)
            hi = base_dims[d] - update.shape.dims[d]
            v = b.select(b.icmp_signed("<", v, i64(0)), i64(0), v)
            starts.append(b.select(b.icmp_signed(">", v, i64(hi)), i64(hi), v))
        idx = linear_to_multi(b, lin, update.shape.with_default_layout())
        value = gen.generate(update, idx)
        k.write(inst, [b.add(s, i, flags=["nsw"]) for s, i in zip(starts, idx)], value)
    k.finish()
    return [k.thunk()]


def emit_dus(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """dynamic-update-slice in place: a copy of the operand first only when buffer
    assignment did not give it the output's slice (a memcpy when the layouts agree, else a
    relayout loop kernel), then the update-window kernel."""
    return copy_operand_to_output(em, inst) + _dus_kernel(em, inst, fused=False)


def copy_operand_to_output(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """The thunks that copy array operand 0 of the in-place op `inst` (dynamic-update-slice,
    scatter) into its output before the update: none when buffer assignment gave both the
    same slice, a memcpy when their layouts agree, else a relayout loop kernel (the operand's
    elements in the output's physical order)."""
    operand = inst.operands[0]
    if em.slice(operand) == em.slice(inst):
        return []
    if same_layout(operand.shape, inst.shape):
        return [DeviceToDeviceCopyThunk(inst.name, src=em.buffer_slice(operand),
                                        dst=em.buffer_slice(inst))]
    k = em.kernel(inst, [(inst, ())], operand_buffers(inst), max_threads=128,
                  label=f"{inst.name}_base")
    emit_loop(em, k, operand_generator(k, inst), [operand], [(inst, ())])
    return [k.thunk()]


def emit_dus_fusion(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """A loop fusion whose root is dynamic-update-slice: only the update window is written
    when the updated operand is a parameter sharing the output's slice; otherwise a loop
    kernel first writes the whole base."""
    root = inst.called[0].root
    assert root is not None
    base = root.operands[0]
    pre: list[Thunk] = []
    if not (base.opcode is Opcode.PARAMETER
            and em.slice(inst.operands[base.parameter_number]) == em.slice(inst)):
        k = em.kernel(inst, [(inst, ())], operand_buffers(inst), max_threads=128,
                      label=f"{inst.name}_base")
        emit_loop(em, k, fusion_generator(k, inst), [base], [(inst, ())],
                  vector_params=list(inst.operands))
        pre.append(k.thunk())
    return pre + _dus_kernel(em, inst, fused=True)
