"""`CpuBackend`: the CPU backend behind the `xlc.backends.Backend` protocol. It delegates to
`compiler.py` (pipeline, emission, MCJIT) and `artifact_io.py` (`.xlc` code members); every
import is lazy, so looking the backend up loads neither LLVM nor the emitters."""
from __future__ import annotations

import logging
from typing import Any

from xlc.errors import XlcError
from xlc.hlo.ir import HloModule
from xlc.options import CompileOptions

log = logging.getLogger("xlc.backend_cpu")

CPU_ALIGNMENT = 64
"""Every buffer slice of 64 bytes or more starts on a 64-byte boundary (a cache line, one
AVX-512 vector), and the runtime allocates its blocks this aligned; emitters may use
aligned vector stores on such slices."""


class CpuBackend:
    """Native code for this machine (LLVM through llvmlite), 64-byte slices."""

    name = "cpu"
    alignment = CPU_ALIGNMENT

    def passes(self, options: CompileOptions) -> list[Any]:
        """The CPU pass list (`compiler.cpu_passes`)."""
        from xlc.backend_cpu.compiler import cpu_passes

        return cpu_passes(options)

    def optimize(self, module: HloModule, options: CompileOptions) -> Any:
        """The CPU pipeline and buffer assignment (`compiler.run_cpu_passes`)."""
        from xlc.backend_cpu.compiler import run_cpu_passes

        return run_cpu_passes(module, options)

    def compile(self, module: HloModule, options: CompileOptions) -> Any:
        """A CpuExecutable; `module` is a private copy, so it is compiled in place."""
        from xlc.backend_cpu.compiler import compile_cpu

        return compile_cpu(module, options, clone=False)

    def target(self, options: CompileOptions) -> dict[str, Any]:
        """The host triple, CPU name and features, and the thread count baked into parallel
        kernels (`threads=0` means every core of *this* machine)."""
        from xlc.backend_cpu.artifact_io import host_target
        from xlc.backend_cpu.parallel import host_threads

        return {**host_target().model_dump(), "threads": host_threads(options.threads)}

    def dump_stages(self, module: HloModule, options: CompileOptions) -> None:
        """Compile a copy and write `.ir-no-opt.ll`, `.ir-with-opt.ll` and `.o` next to the HLO
        dumps (`compiler.dump_cpu_stages`)."""
        from xlc.backend_cpu.compiler import compile_cpu, dump_cpu_stages

        opts = options.replace(backend=self.name)
        try:
            exe = compile_cpu(module.clone(), opts.replace(dump_to=None))
        except XlcError as e:
            log.warning("no .ll/.o stages for %s: %s", module.name, str(e).splitlines()[0])
            return
        dump_cpu_stages(opts, exe)

    def pack(self, exe: Any) -> Any:
        """The object code, the run-time libraries it calls and the target."""
        from xlc.backend_cpu.artifact_io import pack

        return pack(exe)

    def unpack(self, manifest: Any, members: dict[str, bytes], module: HloModule,
               assignment: Any, where: str) -> Any:
        """Check the target, link the object code and return the runner."""
        from xlc.backend_cpu.artifact_io import unpack

        return unpack(manifest, members, module, assignment, where)

    def describe(self, members: dict[str, bytes]) -> dict[str, Any]:
        """Nothing beyond the manifest (its target names the CPU)."""
        return {}

    def describe_text(self, data: dict[str, Any]) -> list[str]:
        """Nothing beyond the manifest."""
        return []

    def export_library(self, exe: Any, directory: Any, name: str, **kw: Any) -> Any:
        """Native export of executable `exe` as a C library (`export.export_library`)."""
        from xlc.backend_cpu.export import export_library

        return export_library(exe, directory, name, **kw)
