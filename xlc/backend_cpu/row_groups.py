"""Row pipelining: consecutive kernels over the same rows run block of rows by block of rows.

A softmax after fusion is three kernels over a [R, C] array (row max, exp + row sum, divide).
Run one after the other, each streams the whole array through DRAM. When every kernel of such
a chain iterates rows of the same [R, C] space (outermost loop over dim 0) and reads what the
earlier kernels of the chain wrote only *at the same row* (elementwise, or a per-row vector
through `broadcast(dimensions={0})`), the chain can instead run for a block of rows at a time:
kernel 1 on rows [r, r+B), kernel 2 on the same rows (now cache-resident), ... - which is what
`emit_row_group` emits (the whole group split over the threads by row blocks).

Legality (`find_row_group`), conservative:
* members are kLoop fusions (not dynamic-update-slice roots) whose outputs all have the dims of
  a rank-2 row-major [R, C] shape, or kInput fusions of row reductions (`dimensions={1}` of a
  row-major [R, C] input) plus elementwise outputs over it; no-code instructions (GTE, tuple,
  bitcast, parameter, constant) may sit between members;
* an operand produced by an earlier member reaches the consumer's root only through
  elementwise ops (or the row reduce) - for a [R] vector, through `broadcast(dimensions={0})`;
* every two buffers the group touches, one of them written, are disjoint or the very same
  slice with the same dims (so row blocks never clobber rows another member still needs).
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from llvmlite import ir

from xlc.codegen import llvm_utils as lu
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Shape
from xlc.passes.buffer_assignment import Slice

if TYPE_CHECKING:  # pragma: no cover
    from xlc.backend_cpu.emitter import CpuEmitter, FnCtx

log = logging.getLogger("xlc.backend_cpu")

ROW_BLOCK_BYTES = 32 << 10
"""Rows per block: as many as fit in this many bytes of the widest member row."""
MIN_ROW_GROUP_ELEMENTS = 1 << 16
"""Smaller chains are not worth it (everything is cache-resident anyway)."""

_NO_CODE = {Opcode.GET_TUPLE_ELEMENT, Opcode.TUPLE, Opcode.BITCAST, Opcode.PARAMETER,
            Opcode.CONSTANT}


def _row_major_2d(shape: Shape) -> bool:
    lay = shape.layout
    return shape.is_array and shape.rank == 2 and (lay is None or
                                                   tuple(lay.minor_to_major) == (1, 0))


def row_space(inst: HloInstruction) -> tuple[int, int] | None:
    """(R, C) when `inst` is a fusion whose kernel iterates rows of a row-major [R, C] space
    and honours `Kernel.outer` (see the module docstring), else None."""
    if inst.opcode is not Opcode.FUSION:
        return None
    root = inst.called[0].root
    assert root is not None
    kind = inst.attrs.get("kind")
    roots = list(root.operands) if root.opcode is Opcode.TUPLE else [root]
    if kind == "kLoop":
        if root.opcode is Opcode.DYNAMIC_UPDATE_SLICE:
            return None
        first = inst.shape.tuple_shapes[0] if inst.shape.is_tuple else inst.shape  # type: ignore
        if not _row_major_2d(first):
            return None
        outs = list(inst.shape.tuple_shapes) if inst.shape.is_tuple else [inst.shape]  # type: ignore
        if any(tuple(s.dims) != tuple(first.dims) for s in outs) or \
                any(tuple(r.shape.dims) != tuple(first.dims) for r in roots):
            return None
        return first.dims[0], first.dims[1]
    if kind == "kInput":
        reduces = [r for r in roots if r.opcode is Opcode.REDUCE]
        if not reduces or any(r.shape.is_tuple for r in reduces):
            return None
        in_shape = reduces[0].operands[0].shape
        if not _row_major_2d(in_shape):
            return None
        for r in reduces:
            if [int(d) for d in r.attrs["dimensions"]] != [1] or \
                    tuple(r.operands[0].shape.dims) != tuple(in_shape.dims):
                return None
        if any(r.opcode is not Opcode.REDUCE and tuple(r.shape.dims) != tuple(in_shape.dims)
               for r in roots):
            return None
        return in_shape.dims[0], in_shape.dims[1]
    return None


def _identity_path(node: HloInstruction) -> bool:
    """Every use of `node` inside its fused computation is at the root's own index."""
    for u in node.users:
        if u.opcode is Opcode.TUPLE:
            continue
        if u.opcode is Opcode.REDUCE and [int(d) for d in u.attrs["dimensions"]] == [1] \
                and node in u.operands[:len(u.operands) // 2]:
            continue
        if u.opcode.is_elementwise and tuple(u.shape.dims) == tuple(node.shape.dims):
            if not _identity_path(u):
                return False
            continue
        return False
    return True


def _row_local_read(param: HloInstruction, rows: int, cols: int) -> bool:
    dims = tuple(param.shape.dims)
    if dims == (rows, cols) and _row_major_2d(param.shape):
        return _identity_path(param)
    if dims == (rows,):
        return all(u.opcode is Opcode.BROADCAST and tuple(u.attrs.get("dimensions", ())) == (0,)
                   and tuple(u.shape.dims) == (rows, cols) and _identity_path(u)
                   for u in param.users)
    return False


def _source(inst: HloInstruction) -> HloInstruction:
    while inst.opcode in (Opcode.GET_TUPLE_ELEMENT, Opcode.BITCAST):
        inst = inst.operands[0]
    return inst


def _reads_row_local(consumer: HloInstruction, members: set[int], rows: int, cols: int
                     ) -> bool:
    fused = consumer.called[0]
    for k, op in enumerate(consumer.operands):
        if _source(op).uid in members and not _row_local_read(fused.parameters[k], rows, cols):
            return False
    return True


def _touched(em: CpuEmitter, inst: HloInstruction) -> list[tuple[Slice, tuple, bool]]:
    out = []
    for index, shape in inst.shape.leaves():
        out.append((em.slice(inst, index), tuple(shape.dims), True))
    for op in inst.operands:
        if op.shape.is_array:
            out.append((em.slice(op), tuple(op.shape.dims), False))
    return out


def _buffers_compatible(em: CpuEmitter, kernels: Sequence[HloInstruction]) -> bool:
    touched = [t for inst in kernels for t in _touched(em, inst)]
    for i, (s1, d1, w1) in enumerate(touched):
        for s2, d2, w2 in touched[i + 1:]:
            if not (w1 or w2) or s1.index != s2.index:
                continue
            if s1.key() == s2.key():
                if d1 != d2:
                    return False
            elif s1.offset < s2.offset + s2.size and s2.offset < s1.offset + s1.size:
                return False
    return True


def find_row_group(em: CpuEmitter, sched: list[HloInstruction], start: int
                   ) -> tuple[list[HloInstruction], int, int] | None:
    """The longest legal row group starting at `sched[start]` with at least two kernels, as
    (instructions including no-code ones in between, R, C); None when there is none."""
    space = row_space(sched[start])
    if space is None or space[0] * space[1] < MIN_ROW_GROUP_ELEMENTS:
        return None
    rows, cols = space
    group = [sched[start]]
    kernels = [sched[start]]
    members = {sched[start].uid}
    i = start + 1
    while i < len(sched):
        inst = sched[i]
        if inst.opcode in _NO_CODE:
            group.append(inst)
            i += 1
            continue
        if row_space(inst) != (rows, cols) or not _reads_row_local(inst, members, rows, cols) \
                or not _buffers_compatible(em, kernels + [inst]):
            break
        group.append(inst)
        kernels.append(inst)
        members.add(inst.uid)
        i += 1
    while group and group[-1].opcode in _NO_CODE:
        group.pop()
    if len(kernels) < 2:
        return None
    return group, rows, cols


def emit_row_group(em: CpuEmitter, ctx: FnCtx, group: list[HloInstruction], rows: int,
                   cols: int) -> None:
    """Emit the group's kernels (each taking a [begin, end) row range) and a driver that runs
    them block by block; the driver is split over the threads."""
    collected: list[tuple[ir.Function, list[Slice]]] = []
    em.collect_kernels(collected)
    try:
        for inst in group:
            em.emit_instruction(ctx, inst)
    finally:
        em.collect_kernels(None)
    slices: list[Slice] = []
    for _, sls in collected:
        for s in sls:
            if s not in slices:
                slices.append(s)
    module = em.llmod
    driver = ir.Function(module, ir.FunctionType(lu.VOID, [lu.PTR] * len(slices) +
                                                 [lu.I64, lu.I64]),
                         name=module.get_unique_name(f"{em.entry_name}.rows.{group[0].name}"))
    driver.linkage = "internal"
    driver.attributes.add("noinline")
    b = ir.IRBuilder(driver.append_basic_block("entry"))
    begin, end = driver.args[-2], driver.args[-1]
    widest = max(cols * max(_elem_bytes(g) for g in group if g.opcode is Opcode.FUSION), 1)
    block = max(1, ROW_BLOCK_BYTES // widest)
    with lu.for_range(b, end, start=begin, step=block, name="rb") as r0:
        r1 = b.add(r0, ir.Constant(lu.I64, block))
        r1 = b.select(b.icmp_signed("<", r1, end), r1, end)
        for fn, sls in collected:
            b.call(fn, [driver.args[slices.index(s)] for s in sls] + [r0, r1])
    b.ret_void()
    ptrs = [em.slice_address(ctx.b, ctx.table, s) for s in slices]
    nthreads = min(em.threads, rows)
    if nthreads > 1 and rows * cols >= em.parallel_elements:
        from xlc.backend_cpu.parallel import run_parallel

        run_parallel(ctx.b, driver, ptrs, rows, nthreads)
    else:
        ctx.b.call(driver, ptrs + [ir.Constant(lu.I64, 0), ir.Constant(lu.I64, rows)])
    log.debug("row group of %d kernels over %d x %d rows (block %d)", len(collected), rows,
              cols, block)


def _elem_bytes(inst: HloInstruction) -> int:
    sizes = [s.element_type.byte_size for _, s in inst.shape.leaves()  # type: ignore[union-attr]
             if s.element_type is not None]
    sizes += [op.shape.element_type.byte_size for op in inst.operands
              if op.shape.is_array and op.shape.element_type is not None]
    return max(sizes or [4])
