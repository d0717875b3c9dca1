"""The process-wide MCJIT engine of the CPU backend, and fresh engines for linked objects.

`jit_engine()` is the one engine every compiled CPU kernel, GEMM and run-time library of the
process is added to (`compile_module` verifies, optimises and adds a module in one step).
Objects linked from `.xlc` files or the compile cache get an engine of their own
(`new_mcjit_engine`), so equal symbol names of two files do not clash.
"""
from __future__ import annotations

import threading

import llvmlite.binding as llvm
from llvmlite import ir

from xlc.codegen import llvm_utils as lu
from xlc.errors import LoweringError

_lock = threading.RLock()


def new_mcjit_engine() -> llvm.ExecutionEngine:
    """A new MCJIT engine over an empty module, owning a new host target machine (O3, JIT)."""
    return llvm.create_mcjit_compiler(llvm.parse_assembly(""),
                                      lu.new_target_machine(3, jit=True))


def linked_engine(obj: bytes, what: str) -> llvm.ExecutionEngine:
    """A new MCJIT engine holding object code `obj`, finalized (its symbols resolved against
    the process's); ArtifactError naming `what` when it cannot be linked."""
    from xlc.errors import ArtifactError

    engine = new_mcjit_engine()
    try:
        engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        engine.finalize_object()
    except RuntimeError as e:
        raise ArtifactError(f"{what} cannot be linked: {e}") from None
    return engine


class JitEngine:
    """The process-wide MCJIT engine. Modules are added once and stay alive as long as the
    process; symbol names must therefore be unique across all modules added."""

    def __init__(self) -> None:
        self._engine = new_mcjit_engine()
        self._symbols: set[str] = set()

    def add_module(self, ref: llvm.ModuleRef) -> None:
        """Add a verified (optimised) module and finalise it, so its functions are callable.

        Raises LoweringError if it defines a function name already defined in the engine. The
        run-time libraries the module calls (`xlc.backend_cpu.runtime_lib`: thread pool,
        GEMMs) are made available first."""
        defined = {f.name for f in ref.functions if not f.is_declaration}
        from xlc.backend_cpu import runtime_lib

        runtime_lib.ensure_for_symbols(f.name for f in ref.functions if f.is_declaration)
        with _lock:
            clash = defined & self._symbols
            if clash:
                raise LoweringError(
                    f"JIT symbol(s) {sorted(clash)} already defined by another kernel")
            self._engine.add_module(ref)
            self._engine.finalize_object()
            self._symbols |= defined

    def address(self, name: str) -> int:
        """Address of a finalised function; LoweringError if unknown."""
        addr = self._engine.get_function_address(name)
        if not addr:
            raise LoweringError(f"JIT has no function named '{name}'")
        return addr


_engine: JitEngine | None = None


def jit_engine() -> JitEngine:
    """The one MCJIT engine of this process (created on first use)."""
    global _engine
    with _lock:
        if _engine is None:
            _engine = JitEngine()
        return _engine


def compile_module(module: ir.Module | str, kernel_name: str, opt_level: int = 3,
                   verify: bool = True) -> llvm.ModuleRef:
    """Verify, optimise and add a module to the JIT; returns the optimised ModuleRef (whose
    `str()` is the optimised IR). Raises LoweringError on verification failure."""
    ref = lu.parse_and_verify(module, kernel_name, verify)
    lu.optimize(ref, opt_level)
    jit_engine().add_module(ref)
    return ref
