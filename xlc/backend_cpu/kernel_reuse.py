"""Emit each distinct kernel once: HLO units with the same structure share their LLVM code.

Stacked layers repeat the same fusions, dots and reduces with other buffers. The emitter
hands every unit it emits (one instruction, or a row group) to `emit_shared`, which keys the
unit by a structural fingerprint (`UnitKeys`) and emits its code once, into an internal
`void unit(ptr locals)` function; every unit with the same key is a call of it with its own
buffer addresses. Inside the function the unit's buffers are *virtual* slices
of a local table (`locals[k]`): the emitter's `slice()` maps each real slice to its virtual
copy, so everything the emitters read of the buffer assignment (which buffers coincide,
overlap, their sizes and 64-byte alignment) is in the key and the same in every instance.

The key holds
* each unit instruction as printed without metadata, instruction names replaced by their
  position (in the unit, or among its external operands) and called computations by the key
  of their canonical text (recursively): opcodes, shapes with layouts, attributes, constants
  and operand wiring;
* each external operand's opcode and shape;
* per array position (unit instruction or external operand, shape index) its slices as
  (cluster, offset in the cluster, size). A cluster is a set of slices of one allocation
  connected by overlap; its base is its lowest offset rounded down to 64 bytes, and each
  cluster is one entry of the local table (the real address of that base).

Caller side, `locals` is an `alloca` in the calling function's entry block. A unit function
used once is `alwaysinline`: SROA forwards the stored addresses and the code is what inline
emission gave. One used several times is left to LLVM's inliner: forcing it inline would
also inline the kernels it calls (one call site each) into every caller, compiling each
kernel again per use. Control flow (`while`, `conditional`, `call`: they pass the real buffer
table to computation functions) and instructions that emit no code are emitted in place as
before. The merging of identical functions (`dedupe.py`) still runs after emission; it now
finds little (kernels of units whose buffer facts differ, e.g. a first layer reading a
parameter in place, but whose code came out the same).
"""
from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from llvmlite import ir

from xlc.backend_cpu.backend import CPU_ALIGNMENT
from xlc.codegen import llvm_utils as lu
from xlc.errors import LoweringError
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.printer import print_instruction, shape_to_text
from xlc.hlo.shape import Shape, ShapeIndex
from xlc.passes.buffer_assignment import BufferAllocation, Slice

if TYPE_CHECKING:
    from xlc.backend_cpu.emitter import CpuEmitter, FnCtx

log = logging.getLogger("xlc.backend_cpu")

INLINE_ONLY = frozenset({
    # control flow passes the real buffer table on to its computations' functions
    Opcode.WHILE, Opcode.CONDITIONAL, Opcode.CALL,
    # no code
    Opcode.PARAMETER, Opcode.CONSTANT, Opcode.TUPLE, Opcode.GET_TUPLE_ELEMENT, Opcode.BITCAST,
    Opcode.OPT_BARRIER, Opcode.DOMAIN, Opcode.ADD_DEPENDENCY, Opcode.AFTER_ALL,
})
"""Opcodes emitted in place, never through a shared unit function."""

CLUSTER_ALIGN = CPU_ALIGNMENT
"""Cluster bases are rounded down to the slice alignment, so every virtual offset keeps the
real offset's alignment (emitters test `offset % CPU_ALIGNMENT`)."""

_NAME = re.compile(r"%([A-Za-z0-9_.\-]+)")


def shape_indices(shape: Shape, prefix: ShapeIndex = ()) -> Iterator[ShapeIndex]:
    """Every index of `shape`: the root, then each tuple element's indices, depth first."""
    yield prefix
    for k, sub in enumerate(shape.tuple_shapes or ()):
        yield from shape_indices(sub, prefix + (k,))


class UnitKeys:
    """Structural fingerprints of instructions and computations of one module (memoized)."""

    def __init__(self, module: HloModule):
        self.comps = {c.name: c for c in module.computations}
        self._comp_keys: dict[int, int] = {}
        self._texts: dict[str, int] = {}

    def comp_key(self, comp: HloComputation) -> int:
        """An integer equal for two computations exactly when their canonical texts (names
        replaced by positions, callees by their keys, metadata left out) are equal."""
        hit = self._comp_keys.get(id(comp))
        if hit is not None:
            return hit
        names = {inst.name: f"%{k}" for k, inst in enumerate(comp.instructions)}
        text = "\n".join(("ROOT " if inst is comp.root else "") + self.line(inst, names)
                         for inst in comp.instructions)
        key = self._texts.setdefault(text, len(self._texts))
        self._comp_keys[id(comp)] = key
        return key

    def line(self, inst: HloInstruction, names: dict[str, str]) -> str:
        """`inst` printed without metadata, names found in `names` replaced by their value
        and called computations by `%c<key>`."""
        called = {c.name: c for c in inst.called}

        def canonical(m: re.Match[str]) -> str:
            name = m.group(1)
            local = names.get(name)
            if local is not None:
                return local
            comp = called.get(name)
            return f"%c{self.comp_key(comp)}" if comp is not None else m.group(0)

        return _NAME.sub(canonical, print_instruction(inst, print_metadata=False))

    def unit_key(self, unit: list[HloInstruction]) -> tuple[tuple, list[HloInstruction]]:
        """(the unit's instructions and external operands as canonical text, the external
        operands in order of first use)."""
        names = {inst.name: f"%u{k}" for k, inst in enumerate(unit)}
        externals: list[HloInstruction] = []
        for inst in unit:
            for op in inst.operands:
                if op.name not in names:
                    names[op.name] = f"%x{len(externals)}"
                    externals.append(op)
        lines = tuple(self.line(inst, names) for inst in unit)
        ext = tuple((op.opcode, shape_to_text(op.shape)) for op in externals)
        return (lines, ext), externals


def _clusters(distinct: list[Slice]) -> list[list[Slice]]:
    """`distinct` split into sets of one allocation connected by overlap, in order of first
    appearance."""
    owner = list(range(len(distinct)))

    def find(i: int) -> int:
        while owner[i] != i:
            i = owner[i]
        return i

    for i, a in enumerate(distinct):
        for j in range(i):
            if a.overlaps(distinct[j]):
                owner[find(i)] = find(j)
    groups: dict[int, list[Slice]] = {}
    for i, s in enumerate(distinct):
        groups.setdefault(find(i), []).append(s)
    return [groups[r] for r in sorted(groups)]


class UnitBuffers:
    """The buffers of one unit: its virtual slices, the real base of each cluster and the
    key part that describes them."""

    def __init__(self, em: CpuEmitter, positions: list[tuple[HloInstruction, ShapeIndex]]):
        per_position = [em.ba.all_slices(inst, index) for inst, index in positions]
        distinct: list[Slice] = []
        seen: set[tuple[int, int, int]] = set()
        for slices in per_position:
            for s in slices:
                if s.key() not in seen:
                    seen.add(s.key())
                    distinct.append(s)
        self.bases: list[Slice] = []
        self.virtual: dict[tuple[int, int, int], Slice] = {}
        where: dict[tuple[int, int, int], tuple[int, int, int]] = {}
        for k, cluster in enumerate(_clusters(distinct)):
            base = min(s.offset for s in cluster)
            base -= base % CLUSTER_ALIGN
            end = max(s.offset + s.size for s in cluster)
            self.bases.append(Slice(cluster[0].allocation, base, end - base))
            alloc = BufferAllocation(index=k, size=end - base)
            for s in cluster:
                self.virtual[s.key()] = Slice(alloc, s.offset - base, s.size)
                where[s.key()] = (k, s.offset - base, s.size)
        self.key = tuple(tuple(where[s.key()] for s in slices) for slices in per_position)

    def map(self, sl: Slice, what: str) -> Slice:
        """The virtual copy of real slice `sl` (LoweringError if the unit does not hold it)."""
        v = self.virtual.get(sl.key())
        if v is None:
            raise LoweringError(f"CPU backend: {what} asks for buffer {sl}, which is not among "
                                "the buffers of the unit being emitted (kernel reuse)")
        return v


def _positions(unit: list[HloInstruction], externals: list[HloInstruction]
               ) -> list[tuple[HloInstruction, ShapeIndex]]:
    """The array positions of the unit's instructions and external operands. Tuple index
    tables are left out: no CPU emitter reads or writes them (every buffer is resolved
    statically), and their offsets would tell otherwise equal units apart (a custom-call's
    table, 16 bytes somewhere in the temp block). An emitter asking for one would get a
    LoweringError from `UnitBuffers.map`, never a wrong address."""
    return [(inst, index) for inst in unit + externals for index in shape_indices(inst.shape)
            if not (inst.shape.subshape(index) if index else inst.shape).is_tuple]


def finish_units(em: CpuEmitter) -> None:
    """Mark the unit functions used once `alwaysinline`: inlined, their code is exactly what
    inline emission gave. Shared ones are left to LLVM's inliner: forcing them inline would
    also inline the kernels they call (one call site each) into every caller."""
    for name, uses in em.unit_uses.items():
        if uses == 1:
            em.llmod.globals[name].attributes.add("alwaysinline")
    shared = sum(1 for uses in em.unit_uses.values() if uses > 1)
    log.debug("%d units emitted as %d functions (%d shared)",
              sum(em.unit_uses.values()), len(em.unit_uses), shared)


def emit_shared(em: CpuEmitter, ctx: FnCtx, unit: list[HloInstruction], extra: tuple,
                emit: Callable[[FnCtx], None]) -> None:
    """Emit `unit` through `emit(ctx)`, sharing the code with every earlier unit of the same
    key (`extra`: what else the emission depends on, e.g. a row group's rows and columns)."""
    if not em.share_units or (len(unit) == 1 and unit[0].opcode in INLINE_ONLY):
        emit(ctx)
        return
    from xlc.backend_cpu.emitter import FnCtx, i64

    structure, externals = em.unit_keys.unit_key(unit)
    buffers = UnitBuffers(em, _positions(unit, externals))
    key = (structure, buffers.key, extra)
    fn = em.units.get(key)
    if fn is None:
        name = em.llmod.get_unique_name(f"{em.entry_name}.u.{unit[0].name}")
        fn = ir.Function(em.llmod, em.fnty, name=name)
        fn.linkage = "internal"
        fn.args[0].name = "locals"
        inner = FnCtx(ctx.comp, fn, ir.IRBuilder(fn.append_basic_block("entry")), fn.args[0])
        saved, em.virtual = em.virtual, buffers
        try:
            emit(inner)
        finally:
            em.virtual = saved
        inner.b.ret_void()
        em.units[key] = fn
        em.unit_uses[fn.name] = 0
    else:
        log.debug("%s reuses %s", unit[0].name, fn.name)
    em.unit_uses[fn.name] += 1
    b = ctx.b
    with b.goto_entry_block():
        table = b.alloca(ir.ArrayType(lu.PTR, max(1, len(buffers.bases))), name="locals")
    table.type = lu.PTR  # llvmlite types allocas as typed pointers; LLVM wants `ptr`
    table.align = 8
    for k, base in enumerate(buffers.bases):
        slot = b.gep(table, [i64(k)], inbounds=True, source_etype=lu.PTR)
        b.store(em.slice_address(b, ctx.table, base), slot, align=8)
    b.call(fn, [table])
