"""Loop emitters: loop fusions (single and multi-output), unfused elementwise and
data-movement ops (one loop over the output in physical order, minor dimension innermost and
contiguous, so LLVM vectorises it), and in-place dynamic-update-slice (plain or as a fusion
root).

Every element is produced by the shared elemental emitter (`xlc.codegen.indexing`); unfused
operands are read from their assigned slices.
"""
from __future__ import annotations

import logging

from xlc.backend_cpu.emitter import (
    EMITTERS,
    CpuEmitter,
    FnCtx,
    Kernel,
    LeafEmitter,
    element_type,
    i64,
    loop_over,
    register,
    split_of,
)
from xlc.codegen.convert import convert_value
from xlc.codegen.indexing import has_elemental_ir_rule
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, ShapeIndex

log = logging.getLogger("xlc.backend_cpu")

FUSION_EMITTERS: dict[str, object] = {}
"""Fusion kind ("kLoop", "kInput") -> emitter; kInput is registered by emit_reduce."""


def operand_buffers(inst: HloInstruction) -> list[tuple[HloInstruction, ShapeIndex]]:
    """(operand, ()) for each array operand of `inst` (tuple operands are unsupported)."""
    out = []
    for op in inst.operands:
        if not op.shape.is_array:
            raise UnsupportedOpError(
                f"CPU backend: {inst.name} takes non-array operand {op.name} ({op.shape})")
        out.append((op, ()))
    return out


def output_buffers(inst: HloInstruction) -> list[tuple[HloInstruction, ShapeIndex]]:
    """(inst, index) for every array leaf of `inst`'s shape (nested tuples unsupported)."""
    if inst.shape.is_tuple:
        outs = []
        for k, s in enumerate(inst.shape.tuple_shapes or ()):
            if not s.is_array:
                raise UnsupportedOpError(f"CPU backend: nested tuple output of {inst.name}")
            outs.append((inst, (k,)))
        return outs
    return [(inst, ())]


def fusion_generator(k: Kernel, fusion: HloInstruction) -> LeafEmitter:
    """An elemental emitter for `fusion`'s fused computation reading its operands from `k`."""
    ops = fusion.operands
    return LeafEmitter(k.b, lambda n, idx: k.read(ops[n], idx))


def operand_generator(k: Kernel, inst: HloInstruction) -> LeafEmitter:
    """An elemental emitter for unfused `inst` whose operands are read from `k`."""
    leaves = {op.uid: (lambda idx, op=op: k.read(op, idx)) for op in inst.operands}
    return LeafEmitter(k.b, lambda n, idx: k.read(inst.operands[n], idx), leaves)


def _emit_roots(k: Kernel, gen: LeafEmitter, inst: HloInstruction,
                roots: list[HloInstruction], outs: list[tuple[HloInstruction, ShapeIndex]]
                ) -> None:
    first = inst.shape.subshape(outs[0][1])
    for r in roots:
        if tuple(r.shape.dims) != tuple(first.dims):
            raise UnsupportedOpError(
                f"CPU backend: multi-output loop fusion {inst.name} has outputs of different "
                f"dimensions ({r.name})")
    with loop_over(k.b, first, outer=k.outer) as idx:
        gen.clear_cache()
        for r, (o, sidx) in zip(roots, outs):
            k.write(o, idx, gen.generate(r, idx), sidx)
    k.finish()


def emit_loop_fusion(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """A kLoop fusion: one loop nest over the (first) output computing every root element."""
    root = inst.called[0].root
    assert root is not None
    if root.opcode is Opcode.DYNAMIC_UPDATE_SLICE:
        emit_dus_fusion(em, ctx, inst)
        return
    outs = output_buffers(inst)
    roots = list(root.operands) if root.opcode is Opcode.TUPLE else [root]
    split = split_of(inst.shape.subshape(outs[0][1]))
    k = em.kernel(ctx, inst.name, outs + operand_buffers(inst), split)
    _emit_roots(k, fusion_generator(k, inst), inst, roots, outs)


def emit_elementwise(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """An unfused elementwise or data-movement op as its own loop."""
    element_type(inst.shape, inst.name)
    outs = [(inst, ())]
    k = em.kernel(ctx, inst.name, outs + operand_buffers(inst), split_of(inst.shape))
    _emit_roots(k, operand_generator(k, inst), inst, [inst], outs)


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


@register(Opcode.DYNAMIC_UPDATE_SLICE)
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


@register(Opcode.FUSION)
def emit_fusion(em: CpuEmitter, ctx: FnCtx, inst: HloInstruction) -> None:
    """Dispatch a fusion by its kind (kLoop here, kInput in emit_reduce)."""
    kind = str(inst.attrs.get("kind", "kLoop"))
    fn = FUSION_EMITTERS.get(kind)
    if fn is None:
        raise UnsupportedOpError(f"CPU backend has no emitter for {kind} fusion ({inst.name})")
    fn(em, ctx, inst)  # type: ignore[operator]


FUSION_EMITTERS["kLoop"] = emit_loop_fusion

_NO_LOOP = {Opcode.PARAMETER, Opcode.CONSTANT, Opcode.BITCAST, Opcode.DYNAMIC_UPDATE_SLICE}
for _op in Opcode:
    if has_elemental_ir_rule(_op) and _op not in _NO_LOOP and _op not in EMITTERS:
        EMITTERS[_op] = emit_elementwise
