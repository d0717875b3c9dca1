"""Build small JIT kernels for the codegen tests: one loop applying a scalar body over arrays."""
from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

import numpy as np
from llvmlite import ir

from xlc.backend_cpu import jit
from xlc.codegen import llvm_utils as lu
from xlc.hlo.shape import PrimitiveType

Body = Callable[[ir.IRBuilder, list[ir.Value]], ir.Value]


class KernelModule:
    """Collects loop kernels `void name(ptr out, ptr in0, ..., i64 n)` in one LLVM module, then
    compiles them all at once (one optimisation + one MCJIT add)."""

    def __init__(self, name: str, vector_bits: int = 0):
        """`vector_bits` > 0 builds every body on vectors of that many bits (`<16 x float>` for
        512), as the fused-loop emitter does; arrays are padded to whole vectors."""
        self.vector_bits = vector_bits
        self.name = lu.unique_symbol(name)
        self.module = lu.new_module(self.name)
        self.kernels: dict[str, tuple[str, list[PrimitiveType], PrimitiveType, int]] = {}
        self.ref = None

    def add(self, key: str, in_types: Sequence[PrimitiveType], out_type: PrimitiveType,
            body: Body) -> None:
        """Add kernel `key`: out[i] = body(builder, [in0[i], in1[i], ...])."""
        sym = f"{self.name}_{len(self.kernels)}"
        fnty = ir.FunctionType(lu.VOID, [lu.PTR] * (1 + len(in_types)) + [lu.I64])
        fn = ir.Function(self.module, fnty, name=sym)
        for a in fn.args[:-1]:
            a.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        w = max(1, self.vector_bits // (8 * out_type.byte_size))
        if w == 1:
            with lu.for_range(b, fn.args[-1]) as i:
                vals = [lu.load_element(b, fn.args[1 + k], i, pt)
                        for k, pt in enumerate(in_types)]
                lu.store_element(b, body(b, vals), fn.args[0], i, out_type)
        else:
            with lu.for_range(b, fn.args[-1], step=w) as i:
                vals = [b.load(b.gep(fn.args[1 + k], [i], source_etype=lu.value_type(pt)),
                               typ=ir.VectorType(lu.value_type(pt), w), align=pt.byte_size)
                        for k, pt in enumerate(in_types)]
                out_ptr = b.gep(fn.args[0], [i], source_etype=lu.value_type(out_type))
                b.store(body(b, vals), out_ptr, align=out_type.byte_size)
        b.ret_void()
        self.kernels[key] = (sym, list(in_types), out_type, w)

    def compile(self, opt_level: int = 3) -> None:
        self.ref = jit.compile_module(self.module, self.name, opt_level)

    def __call__(self, key: str, *arrays: np.ndarray) -> np.ndarray:
        sym, in_types, out_type, w = self.kernels[key]
        n = arrays[0].size
        padded = -(-n // w) * w
        ins = [np.resize(np.ascontiguousarray(a, dtype=pt.dtype).reshape(-1), padded)
               for a, pt in zip(arrays, in_types)]
        out = np.empty(padded, dtype=out_type.dtype)
        proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (1 + len(ins))), ctypes.c_int64)
        fn = proto(jit.jit_engine().address(sym))
        fn(out.ctypes.data, *[a.ctypes.data for a in ins], padded)
        return out[:n].reshape(arrays[0].shape)
