"""The CPU IR emitter: one LLVM module per executable, one function per computation.

Layout of the generated module (XLA's classic CPU design, xla-notes section 8):
* `void <entry>(ptr buffer_table)`: the entry computation. `buffer_table[i]` is the base address
  of BufferAllocation i (parameters, outputs, temp; constant allocations are LLVM globals and
  their table slots are ignored). Every buffer address is `table[slice.index] + slice.offset`, as
  the BufferAssignment says; emitters never decide memory.
* every other control-flow computation (while condition/body, conditional branch, call target)
  is an internal function of the same type, called as real control flow;
* every reducer/comparator/scatter computation is an internal scalar function taking and
  returning element values (`scalar_function`), inlined by LLVM;
* every kernel (a fusion, an elementwise op, a reduce, a dot, ...) is an internal function with
  one pointer argument per distinct slice it touches (`Kernel`); arguments whose slices overlap
  no other argument are `noalias`, so loops vectorise without runtime checks. Kernels over at
  least PARALLEL_ELEMENTS elements take a [begin, end) range of their outermost loop and run
  split over the cores (the persistent thread pool, `xlc/backend_cpu/parallel.py`); chains of row
  kernels are pipelined block of rows by block of rows (`row_groups.py`);
* each unit (an instruction, or a row group) is emitted through `kernel_reuse.emit_shared`:
  units equal in structure and buffer facts (stacked layers) share one function, emitted once
  and called with each unit's buffer addresses.

Per-opcode emission is dispatched through the table the emitter is constructed with (Opcode ->
function; the CPU table is built explicitly in `registry.py`). Unsupported instructions raise
UnsupportedOpError naming the instruction.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import partial

from llvmlite import ir

from xlc.backend_cpu.backend import CPU_ALIGNMENT
from xlc.backend_cpu.kernel_reuse import UnitBuffers, UnitKeys, emit_shared, finish_units
from xlc.backend_cpu.parallel import PARALLEL_ELEMENTS
from xlc.backend_cpu.profile_lib import ProfileEmit
from xlc.backend_cpu.row_groups import emit_row_group, find_row_group
from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import Index
from xlc.codegen.ir_array import IrArray, LeafEmitter, constant_bytes
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape, ShapeIndex, physical_order
from xlc.passes.buffer_assignment import BufferAssignment, Slice

log = logging.getLogger("xlc.backend_cpu")

EmitFn = Callable[["CpuEmitter", "FnCtx", HloInstruction], None]

UNSUPPORTED: dict[Opcode, str] = {
    Opcode.RNG: "random number generation is not implemented by the CPU backend yet",
    Opcode.RNG_GET_AND_UPDATE_STATE: "random number generation is not implemented by the CPU "
                                     "backend yet",
    Opcode.FFT: "FFT is not implemented by the CPU backend (the interpreter backend runs it)",
}
"""Opcodes with no CPU emitter and why (the coverage test checks EMITTERS + UNSUPPORTED)."""


def i64(v: int) -> ir.Constant:
    """An i64 constant."""
    return ir.Constant(lu.I64, v)


def element_type(shape: Shape, what: str) -> PrimitiveType:
    """The element type of an array shape; UnsupportedOpError for tuples/tokens."""
    pt = shape.element_type
    if pt is None or pt is PrimitiveType.TOKEN:
        raise UnsupportedOpError(f"CPU backend: {what} needs an array shape, got {shape}")
    return pt


@dataclass
class FnCtx:
    """A computation function being emitted: its builder and buffer-table argument."""

    comp: HloComputation
    fn: ir.Function
    b: ir.IRBuilder
    table: ir.Value


@dataclass
class Kernel:
    """An internal `void name(ptr, ...)` function: one argument per distinct slice.

    `ptr(inst, index)` is the address of that buffer inside the kernel; `b` is positioned in the
    function's body; `finish()` returns from it."""

    fn: ir.Function
    b: ir.IRBuilder
    args: dict[tuple[int, int, int], ir.Value]
    slices: dict[tuple[int, ShapeIndex], Slice] = field(default_factory=dict)
    outer: tuple[ir.Value, ir.Value] | None = None
    """[begin, end) of the outermost loop this kernel instance runs (threaded kernels)."""
    scalar_fn: Callable[[HloComputation], ir.Function] | None = None
    """The emitter's `scalar_function` (for reduces nested inside fusions)."""

    def ptr(self, inst: HloInstruction, index: ShapeIndex = ()) -> ir.Value:
        """The address of `inst`'s buffer at `index` (must be one the kernel was made with)."""
        return self.args[self.slices[(inst.uid, tuple(index))].key()]

    def finish(self) -> None:
        """Terminate the kernel."""
        self.b.ret_void()

    def array(self, inst: HloInstruction, shape_index: ShapeIndex = ()) -> IrArray:
        """`inst`'s (array) buffer at `shape_index` as an IrArray."""
        shape = inst.shape.subshape(shape_index) if shape_index else inst.shape
        element_type(shape, inst.name)
        return IrArray(self.ptr(inst, shape_index), shape, inst.name)

    def read(self, inst: HloInstruction, index: Index, shape_index: ShapeIndex = ()) -> ir.Value:
        """Load element `index` (logical multi-index) of an unfused array operand."""
        return self.array(inst, shape_index).read(self.b, index)

    def write(self, inst: HloInstruction, index: Index, value: ir.Value,
              shape_index: ShapeIndex = ()) -> None:
        """Store `value` at element `index` of `inst`'s (output) buffer at `shape_index`."""
        self.array(inst, shape_index).write(self.b, value, index)


class ReducerEmitter(LeafEmitter):
    """Scalar emitter for reduction computations: float maximum/minimum become
    `llvm.maximum`/`llvm.minimum` (NaN-propagating like XLA; LLVM vectorises them as
    reductions, unlike the compare/select form). Only the sign of a zero result may differ."""

    def generate(self, inst: HloInstruction, index: Index) -> ir.Value:
        pt = inst.shape.element_type
        if inst.opcode in (Opcode.MAXIMUM, Opcode.MINIMUM) and pt in (PrimitiveType.F32,
                                                                      PrimitiveType.F64):
            x, y = (self.generate(op, index) for op in inst.operands)
            name = "llvm.maximum" if inst.opcode is Opcode.MAXIMUM else "llvm.minimum"
            return lu.intrinsic(self.b, name, [x, y])
        return super().generate(inst, index)


def split_of(shape: Shape, dims: Sequence[int] | None = None,
             elements: int | None = None) -> int:
    """The trip count of the outermost loop `loop_over(shape, dims)` would make when the loop
    is big enough to be worth threads (`elements`, default the shape's size), else 0."""
    order = [d for d in physical_order(shape) if dims is None or d in dims]
    count = elements if elements is not None else shape.num_elements
    if not order or count < PARALLEL_ELEMENTS:
        return 0
    return shape.dims[order[0]]


@contextmanager
def loop_over(b: ir.IRBuilder, shape: Shape, name: str = "i",
              dims: Sequence[int] | None = None,
              outer: tuple[ir.Value, ir.Value] | None = None) -> Iterator[list[ir.Value]]:
    """A loop nest over `shape`'s elements in physical order (the minor dimension innermost,
    contiguous); yields the logical multi-index (i64 values). `dims` restricts the nest to those
    logical dims (others are absent from the yielded list positions: they hold None). `outer`
    restricts the outermost loop to [begin, end)."""
    order = [d for d in physical_order(shape) if dims is None or d in dims]
    index: list[ir.Value | None] = [None] * shape.rank
    if outer is not None and order:
        with lu.for_range(b, outer[1], start=outer[0], name=f"{name}p") as first, \
                lu.for_nest(b, [shape.dims[d] for d in order[1:]], name=name) as ivs:
            for d, v in zip(order, [first] + ivs):
                index[d] = v
            yield index  # type: ignore[misc]
        return
    with lu.for_nest(b, [shape.dims[d] for d in order], name=name) as ivs:
        for d, v in zip(order, ivs):
            index[d] = v
        yield index  # type: ignore[misc]


class CpuEmitter:
    """Emits one LLVM module for a scheduled, buffer-assigned HLO module."""

    share_units = True
    """Emit units with equal structure once (`kernel_reuse.py`); off only to compare."""

    def __init__(self, module: HloModule, assignment: BufferAssignment, entry_name: str,
                 emitters: Mapping[Opcode, EmitFn], threads: int = 1):
        """`emitters`: Opcode -> emitter function (`registry.EMITTERS` for the CPU)."""
        self.hlo = module
        self.emitters = emitters
        self.threads = threads
        self.row_groups = True
        self.parallel_elements = PARALLEL_ELEMENTS
        self._collect: list | None = None
        self.profile: ProfileEmit | None = None
        """Set (before `emit`) to place run-time profiling hooks (`profile_lib.py`)."""
        self.ba = assignment
        self.entry_name = entry_name
        self.llmod = lu.new_module(entry_name)
        self.comp_fns: dict[int, ir.Function] = {}
        self.scalar_fns: dict[int, ir.Function] = {}
        self._const_globals: dict[int, ir.GlobalVariable] = {}
        self._addresses: dict[tuple[int, int, int], tuple[ir.Value, ir.Value]] = {}
        self.fnty = ir.FunctionType(lu.VOID, [lu.PTR])
        # kernel reuse (`kernel_reuse.py`): units with equal keys share one function
        self.unit_keys = UnitKeys(module)
        self.units: dict[tuple, ir.Function] = {}
        self.unit_uses: dict[str, int] = {}
        self.virtual: UnitBuffers | None = None
        """While a shared unit is emitted: its buffers, which `slice()` maps real slices to."""

    # ---- top level --------------------------------------------------------------------------
    def emit(self) -> ir.Module:
        """Emit every control-flow computation (callees first) and the entry; returns the
        llvmlite module. Raises UnsupportedOpError for instructions with no CPU emitter."""
        entry = self.hlo.entry
        assert entry is not None
        self.computation_function(entry, self.entry_name)
        finish_units(self)
        return self.llmod

    def computation_function(self, comp: HloComputation, name: str | None = None
                             ) -> ir.Function:
        """The `void(ptr table)` function of control-flow computation `comp` (emitted once)."""
        fn = self.comp_fns.get(id(comp))
        if fn is not None:
            return fn
        fname = name or self.llmod.get_unique_name(f"{self.entry_name}.comp.{comp.name}")
        fn = ir.Function(self.llmod, self.fnty, name=fname)
        if name is None:
            fn.linkage = "internal"
        self.comp_fns[id(comp)] = fn
        fn.args[0].name = "table"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        ctx = FnCtx(comp, fn, b, fn.args[0])
        sched = self.schedule_of(comp)
        prof = self.profile
        if prof is not None:
            prof.enter(ctx)
        i = 0
        while i < len(sched):
            mark = prof.begin(ctx) if prof is not None else None
            group = find_row_group(self, sched, i) if self.row_groups else None
            if group is not None:
                insts, rows, cols = group
                emit_shared(self, ctx, insts, ("rows", rows, cols),
                            partial(emit_row_group, self, group=insts, rows=rows, cols=cols))
            else:
                insts = [sched[i]]
                emit_shared(self, ctx, insts, (), partial(self.emit_instruction, inst=insts[0]))
            if prof is not None and mark is not None:
                prof.end(ctx, mark, insts)
            i += len(insts)
        if prof is not None:
            prof.leave(ctx)
        ctx.b.ret_void()
        return fn

    def collect_kernels(self, into: list | None) -> None:
        """While `into` is a list, `kernel()` makes row-range kernels (Kernel.outer set) and
        appends (function, slices) to it instead of emitting their calls (row groups)."""
        self._collect = into

    def schedule_of(self, comp: HloComputation) -> list[HloInstruction]:
        """The instruction order of `comp`: the module schedule, else post order."""
        sched = self.hlo.schedule
        if sched is not None and comp in sched:
            return list(sched[comp])
        return comp.post_order()

    def emit_instruction(self, ctx: FnCtx, inst: HloInstruction) -> None:
        """Dispatch `inst` to its emitter (UnsupportedOpError naming it if there is none)."""
        fn = self.emitters.get(inst.opcode)
        if fn is None:
            why = UNSUPPORTED.get(inst.opcode, "no emitter")
            target = inst.attrs.get("custom_call_target")
            what = f"'{inst.opcode.text}'" + (f" target '{target}'" if target else "")
            raise UnsupportedOpError(f"CPU backend cannot compile {what} ({inst.name}): {why}")
        fn(self, ctx, inst)

    # ---- buffers ----------------------------------------------------------------------------
    def slice(self, inst: HloInstruction, index: ShapeIndex = ()) -> Slice:
        """The assigned slice of `inst` at `index` (while a shared unit is emitted, its
        virtual copy: `kernel_reuse.py`)."""
        sl = self.ba.slice_of(inst, tuple(index))
        return sl if self.virtual is None else self.virtual.map(sl, inst.name)

    def all_slices(self, inst: HloInstruction, index: ShapeIndex = ()) -> list[Slice]:
        """Every slice `inst` may hold at `index` (virtual copies inside a shared unit)."""
        slices = self.ba.all_slices(inst, tuple(index))
        if self.virtual is None:
            return slices
        virtual = self.virtual
        return [virtual.map(sl, inst.name) for sl in slices]

    def _constant_global(self, alloc_index: int) -> ir.GlobalVariable:
        gv = self._const_globals.get(alloc_index)
        if gv is not None:
            return gv
        alloc = self.ba.allocations[alloc_index]
        data = bytearray(alloc.size)
        for buf, (off, _size) in alloc.assigned.items():
            inst = buf.instruction
            if inst.opcode is not Opcode.CONSTANT or buf.index:
                continue
            raw = constant_bytes(inst)
            data[off:off + len(raw)] = raw
        aty = ir.ArrayType(lu.I8, max(1, len(data)))
        gv = ir.GlobalVariable(self.llmod, aty, name=self.llmod.get_unique_name("constant"))
        gv.initializer = ir.Constant(aty, data if data else bytearray(1))
        gv.global_constant = True
        gv.linkage = "internal"
        gv.align = CPU_ALIGNMENT  # the block of a constant allocation
        self._const_globals[alloc_index] = gv
        return gv

    def slice_address(self, b: ir.IRBuilder, table: ir.Value, sl: Slice) -> ir.Value:
        """`table[sl.index] + sl.offset` (or the constant's global)."""
        if sl.allocation.is_constant:
            base: ir.Value = self._constant_global(sl.index)
            if sl.offset:
                base = b.gep(base, [i64(sl.offset)], inbounds=True, source_etype=lu.I8)
            return base
        # The table does not change while a function runs: each address is computed once, in
        # the entry block of the function owning `table` (fewer instructions to build, print
        # and parse: a 16-layer model's entry function had ~3,400).
        key = (id(table), sl.index, sl.offset)
        hit = self._addresses.get(key)
        if hit is not None and hit[0] is table:
            return hit[1]
        owner = b.function if table in b.function.args else None
        with (b.goto_entry_block() if owner is not None else nullcontext()):
            slot = b.gep(table, [i64(sl.index)], inbounds=True, source_etype=lu.PTR)
            base = b.load(slot, typ=lu.PTR, align=8)
            if sl.offset:
                base = b.gep(base, [i64(sl.offset)], inbounds=True, source_etype=lu.I8)
        if owner is not None:
            self._addresses[key] = (table, base)
        return base

    def address(self, ctx: FnCtx, inst: HloInstruction, index: ShapeIndex = ()) -> ir.Value:
        """Address of `inst`'s buffer at `index` inside computation function `ctx`."""
        return self.slice_address(ctx.b, ctx.table, self.slice(inst, index))

    def kernel(self, ctx: FnCtx, label: str,
               buffers: Sequence[tuple[HloInstruction, ShapeIndex]], split: int = 0,
               threads: int | None = None) -> Kernel:
        """Create a kernel function over `buffers` and emit its call at the current point of
        `ctx`. Identical slices share one argument; an argument is `noalias` when its slice
        overlaps no other argument's slice. With `split` > 1 and several threads, the kernel
        also takes [begin, end) of its outermost loop (`Kernel.outer`, which the emitter must
        pass to `loop_over`) and the call runs `split` iterations spread over the threads
        (the module's, or at most `threads`: per-share scratch sized for fewer shares)."""
        nthreads = self.threads if threads is None else max(1, min(threads, self.threads))
        slices: dict[tuple[int, ShapeIndex], Slice] = {}
        distinct: list[Slice] = []
        for inst, index in buffers:
            sl = self.slice(inst, index)
            slices[(inst.uid, tuple(index))] = sl
            if sl not in distinct:
                distinct.append(sl)
        collect = self._collect
        threaded = collect is not None or (split > 1 and nthreads > 1)
        name = self.llmod.get_unique_name(f"{self.entry_name}.k.{label}")
        extra = [lu.I64, lu.I64] if threaded else []
        fn = ir.Function(self.llmod, ir.FunctionType(lu.VOID, [lu.PTR] * len(distinct) + extra),
                         name=name)
        fn.linkage = "internal"
        args: dict[tuple[int, int, int], ir.Value] = {}
        for arg, sl in zip(fn.args, distinct):
            if not any(slices_overlap(sl, o) for o in distinct if o is not sl):
                arg.add_attribute("noalias")
            arg.add_attribute("nonnull")
            args[sl.key()] = arg
        ptrs = [self.slice_address(ctx.b, ctx.table, sl) for sl in distinct]
        outer = None
        if collect is not None:
            collect.append((fn, distinct))
            outer = (fn.args[-2], fn.args[-1])
        elif threaded:
            from xlc.backend_cpu.parallel import run_parallel

            # called from up to three places (worker, inline share, fallback): one copy only
            fn.attributes.add("noinline")

            run_parallel(ctx.b, fn, ptrs, split, min(nthreads, split))
            outer = (fn.args[-2], fn.args[-1])
        else:
            ctx.b.call(fn, ptrs)
        kb = ir.IRBuilder(fn.append_basic_block("entry"))
        return Kernel(fn, kb, args, slices, outer, self.scalar_function)

    # ---- embedded computations -------------------------------------------------------------
    def scalar_function(self, comp: HloComputation, reassoc: bool = False) -> ir.Function:
        """An internal function computing `comp` on scalars: parameters are element values
        (value_type), the result a value or, for a tuple root, a literal struct of values.
        With `reassoc`, float add/multiply get the `reassoc` flag (reductions vectorise)."""
        key = id(comp) * 2 + int(reassoc)
        fn = self.scalar_fns.get(key)
        if fn is not None:
            return fn
        ptys = []
        for p in comp.parameters:
            if not p.shape.is_array or p.shape.rank:
                raise UnsupportedOpError(
                    f"CPU backend: computation {comp.name} must take scalars ({p.name})")
            ptys.append(lu.value_type(element_type(p.shape, p.name)))
        root = comp.root
        assert root is not None
        if root.shape.is_tuple:
            elems = [element_type(s, root.name) for s in root.shape.tuple_shapes or ()]
            rty: ir.Type = ir.LiteralStructType([lu.value_type(t) for t in elems])
        else:
            rty = lu.value_type(element_type(root.shape, root.name))
        fn = ir.Function(self.llmod, ir.FunctionType(rty, ptys),
                         name=self.llmod.get_unique_name(f"{self.entry_name}.f.{comp.name}"))
        fn.linkage = "internal"
        fn.attributes.add("alwaysinline")
        self.scalar_fns[key] = fn
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        params = {p.parameter_number: a for p, a in zip(comp.parameters, fn.args)}
        gen = (ReducerEmitter if reassoc else LeafEmitter)(b, lambda n, _idx: params[n])
        if root.opcode is Opcode.TUPLE:
            vals = [gen.generate(op, []) for op in root.operands]
            res: ir.Value = ir.Constant(rty, ir.Undefined)
            for k, v in enumerate(vals):
                res = b.insert_value(res, v, k)
        else:
            res = gen.generate(root, [])
        b.ret(res)
        if reassoc:
            for block in fn.blocks:
                for ins in block.instructions:
                    if getattr(ins, "opname", "") in ("fadd", "fmul"):
                        ins.flags.append("reassoc")
        return fn


def slices_overlap(a: Slice, b: Slice) -> bool:
    """Whether two slices share a byte (same allocation, intersecting ranges). Temps all live
    in one temp allocation, so comparing allocation indices alone is not enough."""
    return a.overlaps(b)


def overlaps_an_operand(em: CpuEmitter, inst: HloInstruction) -> bool:
    """Whether `inst`'s (array) output shares bytes with any operand's buffer."""
    out = em.slice(inst)
    return any(slices_overlap(sl, out) for op in inst.operands for sl in em.all_slices(op))


