"""The GPU backend: HLO -> NVPTX LLVM IR (llvmlite) -> PTX (-> cubin via ptxas), run as a
thunk schedule on CUDA streams through cuda-python.

`compile_gpu(module, options) -> GpuExecutable` is the factory `xlc.api` registers for backend
"gpu". Compiling needs neither a GPU nor cuda-python; running needs both (imported lazily).
See compiler.py (pipeline), registry.py (the opcode -> emitter table), emitter.py (kernels +
thunks), streams.py, cuda.py (driver bootstrap), runtime.py (the executor), artifact_io.py
(`.xlc` files) and docs/gpu.md (what a user can do).
"""
from xlc.backend_gpu.compiler import compile_gpu, gpu_passes, run_gpu_passes
from xlc.backend_gpu.device_array import DeviceArray
from xlc.backend_gpu.executable import GpuExecutable

__all__ = ["DeviceArray", "GpuExecutable", "compile_gpu", "gpu_passes", "run_gpu_passes"]
