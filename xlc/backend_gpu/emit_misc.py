"""Gather, scatter, map, reduce-window and the single-device collectives as GPU kernels.

* gather: one thread per output element; start indices clamped to `[0, dim - slice_size]`.
* scatter: the operand is copied to the output (D2D, unless they share the slice), then one
  thread per update element; when the update computation is a plain `add` of its two
  parameters on f32/f64/s32/u32/s64/u64, updates combine with atomics (`atomicrmw add/fadd`);
  otherwise one thread applies the updates serially in order (XLA semantics for any combiner).
  Out-of-bounds update windows are skipped.
* map: elementwise application of a scalar computation.
* reduce-window: one thread per output element folding its window (padding reads the init).
* replica-id / partition-id: 0; all-reduce over one replica: a copy.
"""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from llvmlite import ir

from xlc.backend_gpu.emit_loop import copy_operand_to_output
from xlc.backend_gpu.emitter import (
    GpuEmitter,
    array_buffers,
    operand_buffers,
)
from xlc.backend_gpu.kernel import (
    GpuKernel,
    element_type,
    grid_stride,
    i64,
    loop_launch,
)
from xlc.backend_gpu.thunks import DeviceToDeviceCopyThunk, Thunk
from xlc.codegen import llvm_utils as lu
from xlc.codegen.convert import convert_value
from xlc.codegen.indexing import linear_to_multi, multi_to_linear, window_positions
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape

log = logging.getLogger("xlc.backend_gpu")


def _ints(inst: HloInstruction, key: str) -> list[int]:
    return [int(v) for v in inst.attrs.get(key, ())]


def _clamp(b: ir.IRBuilder, v: ir.Value, hi: int) -> ir.Value:
    v = b.select(b.icmp_signed("<", v, i64(0)), i64(0), v)
    return b.select(b.icmp_signed(">", v, i64(hi)), i64(hi), v)


def _read_index(k: GpuKernel, indices: HloInstruction, batch: list[ir.Value], ivd: int,
                comp: int) -> ir.Value:
    full = list(batch)
    if ivd < indices.shape.rank:
        full.insert(ivd, i64(comp))
    pt = element_type(indices.shape, indices.name)
    return convert_value(k.b, k.read(indices, full), pt, PrimitiveType.S64)


@contextlib.contextmanager
def each_element(k: GpuKernel, shape: Shape) -> Iterator[list[ir.Value]]:
    """Launch one thread per element of `shape` (grid-strided); yields its logical index."""
    n = shape.num_elements
    grid, block = loop_launch(n)
    k.launch(grid, block)
    with grid_stride(k.b, n) as lin:
        yield linear_to_multi(k.b, lin, shape)


@contextlib.contextmanager
def serial(k: GpuKernel, shape: Shape) -> Iterator[list[ir.Value]]:
    """One thread loops over every element of `shape` in row-major order."""
    k.launch((1, 1, 1), (1, 1, 1))
    with lu.for_range(k.b, i64(shape.num_elements), name="u") as lin:
        yield linear_to_multi(k.b, lin, shape.with_default_layout())


def emit_gather(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """A gather (no batching dims), one thread per output element."""
    operand, indices = inst.operands
    if _ints(inst, "operand_batching_dims"):
        raise UnsupportedOpError(f"GPU backend: gather with batching dims ({inst.name})")
    offset_dims = _ints(inst, "offset_dims")
    collapsed = set(_ints(inst, "collapsed_slice_dims"))
    start_map = _ints(inst, "start_index_map")
    sizes = _ints(inst, "slice_sizes")
    ivd = int(inst.attrs["index_vector_dim"])
    k = em.kernel(inst, [(inst, ())], operand_buffers(inst), max_threads=128)
    b = k.b
    window_dims = [d for d in range(operand.shape.rank) if d not in collapsed]
    with each_element(k, inst.shape) as out_idx:
        batch = [v for pos, v in enumerate(out_idx) if pos not in offset_dims]
        offs = [out_idx[pos] for pos in offset_dims]
        src: list[ir.Value] = [i64(0)] * operand.shape.rank
        for d, o in zip(window_dims, offs):
            src[d] = o
        for comp, d in enumerate(start_map):
            start = _clamp(b, _read_index(k, indices, batch, ivd, comp),
                           operand.shape.dims[d] - sizes[d])
            src[d] = b.add(src[d], start, flags=["nsw"])
        k.write(inst, out_idx, k.read(operand, src))
    k.finish()
    return [k.thunk()]


_ATOMIC_TYPES = {PrimitiveType.F32: "fadd", PrimitiveType.F64: "fadd",
                 PrimitiveType.S32: "add", PrimitiveType.U32: "add",
                 PrimitiveType.S64: "add", PrimitiveType.U64: "add"}


def _is_add_combiner(inst: HloInstruction) -> bool:
    comp = inst.called[0]
    root = comp.root
    return (root is not None and root.opcode is Opcode.ADD and len(comp.parameters) == 2
            and {op.uid for op in root.operands} == {p.uid for p in comp.parameters})


def emit_scatter(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """A single-operand scatter (see the module docstring)."""
    if len(inst.operands) != 3 or inst.shape.is_tuple:
        raise UnsupportedOpError(f"GPU backend: variadic scatter is unsupported ({inst.name})")
    if _ints(inst, "input_batching_dims"):
        raise UnsupportedOpError(f"GPU backend: scatter with batching dims ({inst.name})")
    operand, indices, updates = inst.operands
    pt = element_type(inst.shape, inst.name)
    window = _ints(inst, "update_window_dims")
    inserted = set(_ints(inst, "inserted_window_dims"))
    to_operand = _ints(inst, "scatter_dims_to_operand_dims")
    ivd = int(inst.attrs["index_vector_dim"])
    pre: list[Thunk] = copy_operand_to_output(em, inst)
    k = em.kernel(inst, [(inst, ())], operand_buffers(inst), max_threads=128)
    b = k.b
    atomic = _ATOMIC_TYPES.get(pt) if _is_add_combiner(inst) else None
    wdims = [d for d in range(operand.shape.rank) if d not in inserted]
    wsize = [1] * operand.shape.rank
    for d, pos in zip(wdims, window):
        wsize[d] = updates.shape.dims[pos]
    # without an atomic combiner one thread applies the updates in order
    ctx = serial(k, updates.shape) if atomic is None else each_element(k, updates.shape)
    with ctx as uidx:
        batch = [v for pos, v in enumerate(uidx) if pos not in window]
        tgt: list[ir.Value] = [i64(0)] * operand.shape.rank
        for d, pos in zip(wdims, window):
            tgt[d] = uidx[pos]
        ok: ir.Value = ir.Constant(lu.I1, 1)
        for comp, d in enumerate(to_operand):
            start = _read_index(k, indices, batch, ivd, comp)
            ok = b.and_(ok, b.icmp_signed(">=", start, i64(0)))
            ok = b.and_(ok, b.icmp_signed("<=", start, i64(operand.shape.dims[d] - wsize[d])))
            tgt[d] = b.add(tgt[d], start)
        with b.if_then(ok):
            upd = k.read(updates, uidx)
            if atomic is not None:
                ptr = b.gep(k.ptr(inst), [multi_to_linear(b, tgt, inst.shape)], inbounds=True,
                            source_etype=lu.storage_type(pt))
                b.atomic_rmw(atomic, ptr, upd, "monotonic")
            else:
                cur = k.read(inst, tgt)
                k.write(inst, tgt, em.apply(b, inst.called[0], [cur, upd])[0])
    k.finish()
    return pre + [k.thunk()]


def emit_map(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """out[i] = f(a[i], b[i], ...) with `f` the mapped computation."""
    k = em.kernel(inst, [(inst, ())], operand_buffers(inst), max_threads=128)
    with each_element(k, inst.shape) as idx:
        vals = [k.read(op, idx) for op in inst.operands]
        k.write(inst, idx, em.apply(k.b, inst.called[0], vals)[0])
    k.finish()
    return [k.thunk()]


def emit_reduce_window(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """reduce-window: per output element, fold the window (padding / base-dilation holes read
    as the init value)."""
    n = len(inst.operands) // 2
    outs = array_buffers(inst)
    k = em.kernel(inst, outs, operand_buffers(inst), max_threads=128)
    b = k.b
    in_shape = inst.operands[0].shape
    wdims = inst.attrs["window"].dims
    oshape = inst.shape.subshape(outs[0][1])
    with b.goto_entry_block():
        slots = [b.alloca(lu.value_type(element_type(inst.operands[n + j].shape, inst.name)))
                 for j in range(n)]
    with each_element(k, oshape) as oidx:
        inits = [k.read(inst.operands[n + j], []) for j in range(n)]
        for s, v in zip(slots, inits):
            b.store(v, s)
        with lu.for_nest(b, [w.size for w in wdims], "w") as widx:
            ok, pos = window_positions(b, oidx, widx, wdims, in_shape.dims)
            src = [b.select(ok, p, i64(0)) for p in pos]  # reads stay in bounds
            xs = [b.select(ok, k.read(inst.operands[j], src), inits[j]) for j in range(n)]
            new = em.apply(b, inst.called[0], [b.load(s) for s in slots] + xs)
            for s, v in zip(slots, new):
                b.store(v, s)
        for s, (o, sidx) in zip(slots, outs):
            k.write(o, oidx, b.load(s), sidx)
    k.finish()
    return [k.thunk()]


def emit_device_id(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """One device: the id is 0."""
    pt = element_type(inst.shape, inst.name)
    k = em.kernel(inst, [(inst, ())], [], max_threads=1)
    k.launch((1, 1, 1), (1, 1, 1))
    k.write(inst, [], lu.const(lu.value_type(pt), 0))
    k.finish()
    return [k.thunk()]


def emit_all_reduce(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """All-reduce over a single replica: a copy of each operand."""
    out: list[Thunk] = []
    for op, (o, sidx) in zip(inst.operands, array_buffers(inst)):
        a, c = em.buffer_slice(op), em.buffer_slice(o, sidx)
        if a != c:
            out.append(DeviceToDeviceCopyThunk(inst.name, src=a, dst=c))
    return out
