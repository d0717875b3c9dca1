"""One GPU kernel under construction: its entry function, argument slices, launch dimensions.

`GpuKernel` mirrors the CPU backend's kernel object: one `ptr addrspace(1)` argument per
distinct buffer slice it touches (identical slices share one argument; an argument whose slice
overlaps no other one is `noalias`), `ptr(inst, index)` inside the kernel, `read`/`write` of
elements by logical multi-index. `thunk()` turns it into a KernelThunk with read/written flags
and the launch dimensions the emitter chose.

Also here: `loop_launch` (XLA's loop-kernel launch dimensions), the grid-stride loop helper
and `LeafEmitter` (an elemental emitter whose unfused operands are read from memory).
"""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from llvmlite import ir

from xlc.backend_gpu import nvptx
from xlc.backend_gpu.thunks import KernelArg, KernelThunk
from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import Index
from xlc.codegen.ir_array import IrArray
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType, Shape, ShapeIndex
from xlc.passes.buffer_assignment import Slice

log = logging.getLogger("xlc.backend_gpu")

THREADS = 128
"""Threads per block of loop kernels (XLA: 4 warps on NVIDIA)."""
MAX_BLOCKS = 1 << 16
"""Loop kernels launch at most this many blocks and stride over the rest."""


def i64(v: int) -> ir.Constant:
    """An i64 constant."""
    return ir.Constant(lu.I64, v)


def i32(v: int) -> ir.Constant:
    """An i32 constant."""
    return ir.Constant(lu.I32, v)


def element_type(shape: Shape, what: str) -> PrimitiveType:
    """The element type of an array shape; UnsupportedOpError for tuples/tokens."""
    pt = shape.element_type
    if pt is None or pt is PrimitiveType.TOKEN:
        raise UnsupportedOpError(f"GPU backend: {what} needs an array shape, got {shape}")
    return pt


def loop_launch(n: int, threads: int = THREADS) -> tuple[tuple[int, int, int],
                                                        tuple[int, int, int]]:
    """(grid, block) for `n` independent work items: `threads` per block (fewer for tiny n),
    ceil(n / threads) blocks capped at MAX_BLOCKS (the kernel strides over the rest)."""
    t = max(1, min(threads, n))
    blocks = max(1, min(MAX_BLOCKS, -(-n // t)))
    return (blocks, 1, 1), (t, 1, 1)


def global_thread_id(b: ir.IRBuilder) -> ir.Value:
    """blockIdx.x * blockDim.x + threadIdx.x as i64."""
    bid = b.zext(nvptx.block_idx(b), lu.I64)
    bdim = b.zext(nvptx.block_dim(b), lu.I64)
    tid = b.zext(nvptx.thread_idx(b), lu.I64)
    return b.add(b.mul(bid, bdim, flags=["nuw"]), tid, flags=["nuw"])


@contextlib.contextmanager
def strided(b: ir.IRBuilder, stop: ir.Value, start: ir.Value, step: ir.Value,
            name: str = "s") -> Iterator[ir.Value]:
    """`for (i = start; i < stop; i += step)` over i64 with a run-time `step`. Inside the
    `with` the builder is in the loop body; afterwards after the loop."""
    pre = b.basic_block
    cond_bb = b.append_basic_block(f"{name}.cond")
    body_bb = b.append_basic_block(f"{name}.body")
    end_bb = b.append_basic_block(f"{name}.end")
    b.branch(cond_bb)
    b.position_at_end(cond_bb)
    idx = b.phi(lu.I64, name=name)
    idx.add_incoming(start, pre)
    b.cbranch(b.icmp_signed("<", idx, stop), body_bb, end_bb)
    b.position_at_end(body_bb)
    yield idx
    idx.add_incoming(b.add(idx, step, flags=["nsw"]), b.basic_block)
    b.branch(cond_bb)
    b.position_at_end(end_bb)


@contextlib.contextmanager
def grid_stride(b: ir.IRBuilder, n: int | ir.Value, name: str = "g") -> Iterator[ir.Value]:
    """`for (i = global thread id; i < n; i += gridDim.x * blockDim.x)` (i64)."""
    start = global_thread_id(b)
    step = b.mul(b.zext(nvptx.grid_dim(b), lu.I64), b.zext(nvptx.block_dim(b), lu.I64),
                 flags=["nuw"])
    stop = n if isinstance(n, ir.Value) else i64(n)
    with strided(b, stop, start, step, name) as i:
        yield i


@contextlib.contextmanager
def block_stride(b: ir.IRBuilder, n: int, start: ir.Value, step: int,
                 name: str = "t") -> Iterator[ir.Value]:
    """`for (i = start; i < n; i += step)` over i64 (a block-local strided loop)."""
    with lu.for_range(b, i64(n), start=start, step=step, name=name) as i:
        yield i


def unflatten(b: ir.IRBuilder, linear: ir.Value, dims: list[int], sizes: list[int]
               ) -> dict[int, ir.Value]:
    """Split i64 `linear` over logical `dims` (listed major first, with their `sizes`) into
    {dim: index}."""
    out: dict[int, ir.Value] = {}
    rem = linear
    for k in range(len(dims) - 1, -1, -1):
        if k == 0:
            out[dims[k]] = rem
        elif sizes[k] == 1:
            out[dims[k]] = i64(0)
        else:
            out[dims[k]] = b.urem(rem, i64(sizes[k]))
            rem = b.udiv(rem, i64(sizes[k]))
    return out


@dataclass
class GpuKernel:
    """A kernel entry being emitted. `b` is positioned in its body; `finish()` returns."""

    name: str
    hlo: str
    fn: ir.Function
    b: ir.IRBuilder
    distinct: list[Slice]
    args: dict[tuple[int, int, int], ir.Value]
    slices: dict[tuple[int, ShapeIndex], Slice]
    written: set[tuple[int, int, int]]
    read_keys: set[tuple[int, int, int]]
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    shared_bytes: int = 0
    _finished: bool = field(default=False, repr=False)

    def ptr(self, inst: HloInstruction, index: ShapeIndex = ()) -> ir.Value:
        """The address of `inst`'s buffer at `index` (one the kernel was made with)."""
        return self.args[self.slices[(inst.uid, tuple(index))].key()]

    def slice(self, inst: HloInstruction, index: ShapeIndex = ()) -> Slice:
        """The slice of `inst`'s buffer at `index`."""
        return self.slices[(inst.uid, tuple(index))]

    def array(self, inst: HloInstruction, shape_index: ShapeIndex = ()) -> IrArray:
        """`inst`'s (array) buffer at `shape_index` as an IrArray."""
        shape = inst.shape.subshape(shape_index) if shape_index else inst.shape
        element_type(shape, inst.name)
        return IrArray(self.ptr(inst, shape_index), shape, inst.name)

    def read(self, inst: HloInstruction, index: Index, shape_index: ShapeIndex = ()) -> ir.Value:
        """Load element `index` (logical multi-index) of an unfused array buffer."""
        return self.array(inst, shape_index).read(self.b, index)

    def write(self, inst: HloInstruction, index: Index, value: ir.Value,
              shape_index: ShapeIndex = ()) -> None:
        """Store `value` at element `index` of `inst`'s buffer at `shape_index`."""
        self.array(inst, shape_index).write(self.b, value, index)

    def launch(self, grid: tuple[int, int, int], block: tuple[int, int, int],
               shared_bytes: int = 0) -> None:
        """Record the launch dimensions (block size must not exceed the kernel's maxntid)."""
        self.grid, self.block, self.shared_bytes = grid, block, shared_bytes

    def finish(self) -> None:
        """Terminate the kernel body."""
        if not self._finished:
            self.b.ret_void()
            self._finished = True

    def thunk(self) -> KernelThunk:
        """The KernelThunk launching this kernel."""
        args = [KernelArg(s, read=s.key() in self.read_keys, written=s.key() in self.written)
                for s in self.distinct]
        return KernelThunk(self.hlo, kernel=self.name, grid=self.grid, block=self.block,
                           shared_bytes=self.shared_bytes, args=args)


def new_kernel(module: ir.Module, name: str, hlo: str,
               outputs: list[tuple[HloInstruction, ShapeIndex, Slice]],
               inputs: list[tuple[HloInstruction, ShapeIndex, Slice]],
               max_threads: int = 1024) -> GpuKernel:
    """Create a kernel over `outputs` (written) and `inputs` (read) buffers."""
    slices: dict[tuple[int, ShapeIndex], Slice] = {}
    distinct: list[Slice] = []
    for inst, index, sl in outputs + inputs:
        slices[(inst.uid, tuple(index))] = sl
        if sl not in distinct:
            distinct.append(sl)
    fn = nvptx.kernel_function(module, name, len(distinct), max_threads)
    args: dict[tuple[int, int, int], ir.Value] = {}
    for k, (arg, sl) in enumerate(zip(fn.args, distinct)):
        arg.name = f"arg{k}"
        if not any(sl.overlaps(o) for o in distinct if o is not sl):
            arg.add_attribute("noalias")
        args[sl.key()] = arg
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    return GpuKernel(name, hlo, fn, b, distinct, args, slices,
                     written={sl.key() for _, _, sl in outputs},
                     read_keys={sl.key() for _, _, sl in inputs})
