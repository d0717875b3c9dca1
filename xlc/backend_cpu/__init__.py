"""The CPU backend: HLO -> LLVM IR (llvmlite) -> host machine code through MCJIT.

`compile_cpu(module, options) -> CpuExecutable` is what `CpuBackend` (backend.py, the
`xlc.backends.Backend` of this package) compiles with. See compiler.py (pipeline),
emitter.py (module layout), executable.py (runtime).

The names below are imported on first use, so loading an `.xlc` file (which needs only
`executable.py` and `artifact_io.py`) does not import the compiler and its emitters.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "compile_cpu": "xlc.backend_cpu.compiler",
    "cpu_passes": "xlc.backend_cpu.compiler",
    "run_cpu_passes": "xlc.backend_cpu.compiler",
    "dump_cpu_stages": "xlc.backend_cpu.compiler",
    "CpuExecutable": "xlc.backend_cpu.executable",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import an exported name's module on first access (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'xlc.backend_cpu' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
