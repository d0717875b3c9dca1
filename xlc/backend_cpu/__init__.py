"""The CPU backend: HLO -> LLVM IR (llvmlite) -> host machine code through MCJIT.

`compile_cpu(module, options) -> CpuExecutable` is the factory `xlc.api` registers for
backend "cpu". See compiler.py (pipeline), emitter.py (module layout), executable.py (runtime).
"""
from xlc.backend_cpu.compiler import compile_cpu, cpu_passes, run_cpu_passes
from xlc.backend_cpu.executable import CpuExecutable

__all__ = ["CpuExecutable", "compile_cpu", "cpu_passes", "run_cpu_passes"]
