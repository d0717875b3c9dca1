"""The GPU emitter: a scheduled, buffer-assigned HloModule -> one NVPTX LLVM module + thunks.

Walks every control-flow computation in schedule order (XLA's ThunkEmitter): each instruction
becomes zero or more thunks through the table the emitter is constructed with (Opcode ->
function; the GPU table is built explicitly in `registry.py`); parameter / constant / tuple /
get-tuple-element / bitcast produce nothing (their buffers are slices the BufferAssignment
already gave). Kernels are emitted into one LLVM module
(`llmod`), so the executable has one PTX text. Constant allocations are recorded as bytes
(`constants`) that the runtime uploads once.

Unsupported instructions raise UnsupportedOpError("GPU backend cannot compile 'x' (name): why"),
`why` coming from the `unsupported` reasons the emitter is given (`registry.UNSUPPORTED`), else
"no GPU emitter for 'x'".
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from llvmlite import ir

from xlc.backend_gpu import nvptx
from xlc.backend_gpu.host_fallback import checkpoint, host_thunk, rollback, runs_on_host
from xlc.backend_gpu.kernel import GpuKernel, new_kernel
from xlc.backend_gpu.thunks import SequentialThunk, Thunk
from xlc.codegen.indexing import Index
from xlc.codegen.ir_array import LeafEmitter, constant_bytes
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.precision import Level
from xlc.hlo.shape import ShapeIndex
from xlc.passes.buffer_assignment import BufferAssignment, Slice

log = logging.getLogger("xlc.backend_gpu")

EmitFn = Callable[["GpuEmitter", HloInstruction], list[Thunk]]
"""A GPU emitter: the thunks (kernels emitted into `em.llmod`) computing one instruction."""


def array_buffers(inst: HloInstruction) -> list[tuple[HloInstruction, ShapeIndex]]:
    """(inst, index) for every array leaf of `inst` (one level of tuple; deeper raises)."""
    if inst.shape.is_tuple:
        outs: list[tuple[HloInstruction, ShapeIndex]] = []
        for k, s in enumerate(inst.shape.tuple_shapes or ()):
            if not s.is_array:
                raise UnsupportedOpError(f"GPU backend: nested tuple in {inst.name}")
            outs.append((inst, (k,)))
        return outs
    return [(inst, ())]


def operand_buffers(inst: HloInstruction) -> list[tuple[HloInstruction, ShapeIndex]]:
    """(operand, ()) for each operand of `inst` (tuple operands raise UnsupportedOpError)."""
    out: list[tuple[HloInstruction, ShapeIndex]] = []
    for op in inst.operands:
        if not op.shape.is_array:
            raise UnsupportedOpError(
                f"GPU backend: {inst.name} takes non-array operand {op.name} ({op.shape})")
        out.append((op, ()))
    return out


class GpuEmitter:
    """Emits the kernels and thunks of one scheduled, buffer-assigned module."""

    def __init__(self, module: HloModule, assignment: BufferAssignment,
                 emitters: Mapping[Opcode, EmitFn], unsupported: Mapping[Opcode, str],
                 sm: int = 80, prefix: str = "xlc", host_fallback: bool = False,
                 matmul_precision: Level = "default"):
        """`emitters`: Opcode -> emitter function and `unsupported`: Opcode -> why it has none
        (`registry.EMITTERS` and `registry.UNSUPPORTED` for the GPU backend); `sm` is the
        target architecture, `prefix` starts the LLVM module's name. With `host_fallback`,
        an instruction the GPU cannot compile runs on the host (`host_fallback.py`) and is
        listed in `fallbacks` with the reason. `matmul_precision` is the least precision of
        every dot (CompileOptions.default_matmul_precision)."""
        self.hlo = module
        self.emitters = emitters
        self.unsupported = unsupported
        self.ba = assignment
        self.sm = sm
        self.matmul_precision: Level = matmul_precision
        self.prefix = prefix
        self.llmod = nvptx.new_kernel_module(f"{prefix}_{module.name}", sm)
        self.kernel_names: list[str] = []
        self.constants: dict[int, bytes] = {}
        # user PTX kernels (xlc.ffi): launch name -> {"ptx": text, "symbol": entry}
        self.ffi_modules: dict[str, dict[str, str]] = {}
        self.host_fallback = host_fallback
        self.fallbacks: list[tuple[HloInstruction, str]] = []

    # ---- top level ----------------------------------------------------------------------
    def emit(self) -> SequentialThunk:
        """Emit the entry computation; returns its thunk sequence."""
        entry = self.hlo.entry
        assert entry is not None
        seq = self.emit_computation(entry)
        self._collect_constants()
        return seq

    def schedule_of(self, comp: HloComputation) -> list[HloInstruction]:
        """The instruction order of `comp`: the module schedule, else post order."""
        sched = self.hlo.schedule
        if sched is not None and comp in sched:
            return list(sched[comp])
        return comp.post_order()

    def emit_computation(self, comp: HloComputation) -> SequentialThunk:
        """The thunks of control-flow computation `comp`, in schedule order."""
        thunks: list[Thunk] = []
        for inst in self.schedule_of(comp):
            thunks += self.emit_instruction(inst)
        return SequentialThunk(comp.name, thunks=thunks)

    def emit_instruction(self, inst: HloInstruction) -> list[Thunk]:
        """Dispatch `inst` to its emitter (UnsupportedOpError naming it if there is none).
        With `host_fallback`, an instruction that cannot be compiled (and can run on the
        host) becomes a host thunk instead; whatever its emitter had added to the LLVM
        module is taken out again."""
        fn = self.emitters.get(inst.opcode)
        mark = checkpoint(self) if self.host_fallback else None
        try:
            if fn is None:
                why = self.unsupported.get(inst.opcode,
                                           f"no GPU emitter for '{inst.opcode.text}'")
                target = inst.attrs.get("custom_call_target")
                what = f"'{inst.opcode.text}'" + (f" target '{target}'" if target else "")
                raise UnsupportedOpError(f"GPU backend cannot compile {what} ({inst.name}): "
                                         f"{why}")
            return fn(self, inst)
        except UnsupportedOpError as e:
            if mark is None or not runs_on_host(inst):
                raise
            rollback(self, mark)
            self.fallbacks.append((inst, str(e)))
            return [host_thunk(self, inst)]

    # ---- buffers ------------------------------------------------------------------------
    def slice(self, inst: HloInstruction, index: ShapeIndex = ()) -> Slice:
        """The assigned slice of `inst` at `index`."""
        return self.ba.slice_of(inst, tuple(index))

    def buffer_slice(self, inst: HloInstruction, index: ShapeIndex = ()) -> Slice:
        """The assigned slice of `inst` at `index`, as thunks hold it (`slice`'s alias)."""
        return self.slice(inst, index)

    def kernel(self, inst: HloInstruction, outputs: Sequence[tuple[HloInstruction, ShapeIndex]],
               inputs: Sequence[tuple[HloInstruction, ShapeIndex]],
               max_threads: int = 1024, label: str = "") -> GpuKernel:
        """A new kernel for `inst` writing `outputs` and reading `inputs`."""
        base = "".join(c if c.isalnum() else "_" for c in (label or inst.name))[:48]
        name = self.llmod.get_unique_name(f"{base}_k")
        self.kernel_names.append(name)
        outs = [(i, tuple(x), self.slice(i, x)) for i, x in outputs]
        ins = [(i, tuple(x), self.slice(i, x)) for i, x in inputs]
        return new_kernel(self.llmod, name, inst.name, outs, ins, max_threads)

    def apply(self, b: ir.IRBuilder, comp: HloComputation,
              args: Sequence[ir.Value]) -> list[ir.Value]:
        """Inline scalar computation `comp` (a reducer/comparator) on element values `args`;
        returns its result values (several for a tuple root)."""
        params = {p.parameter_number: p for p in comp.parameters}
        for p in comp.parameters:
            if not p.shape.is_array or p.shape.rank:
                raise UnsupportedOpError(
                    f"GPU backend: computation {comp.name} must take scalars ({p.name})")
        def constant(v: ir.Value) -> Callable[[Index], ir.Value]:
            return lambda _index: v

        leaves = {params[n].uid: constant(v) for n, v in enumerate(args)}
        gen = LeafEmitter(b, lambda n, _idx: args[n], leaves)
        root = comp.root
        assert root is not None
        if root.opcode is Opcode.TUPLE:
            return [gen.generate(op, []) for op in root.operands]
        return [gen.generate(root, [])]

    # ---- constants ----------------------------------------------------------------------
    def _collect_constants(self) -> None:
        for alloc in self.ba.allocations:
            if not alloc.is_constant:
                continue
            data = bytearray(alloc.size)
            for buf, (off, _size) in alloc.assigned.items():
                inst = buf.instruction
                if inst.opcode is not Opcode.CONSTANT or buf.index:
                    continue
                raw = constant_bytes(inst)
                data[off:off + len(raw)] = raw
            self.constants[alloc.index] = bytes(data)

