"""`GpuBackend`: the GPU backend behind the `xlc.backends.Backend` protocol. It delegates to
`compiler.py` (pipeline, kernels, PTX, cubin), `artifact_io.py` (`.xlc` code members) and
`device_array.py`; every import is lazy, so looking the backend up loads neither LLVM nor
cuda-python. Compiling needs no GPU; running does."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from xlc.errors import XlcError
from xlc.hlo.cost_analysis import H100
from xlc.hlo.ir import HloModule
from xlc.options import CompileOptions

log = logging.getLogger("xlc.backend_gpu")

GPU_ALIGNMENT = 256
"""Every buffer slice starts on a 256-byte boundary (cudaMalloc's alignment), so kernels may
use 128-bit vector accesses on any slice; the runtime keeps device bases this aligned."""


class GpuBackend:
    """PTX (plus a cubin when ptxas is on the PATH) run through cuda-python; 256-byte
    slices."""

    name = "gpu"

    alignment = GPU_ALIGNMENT

    roofline = H100
    """The device `xlc inspect --cost` estimates kernel times for (`xlc.hlo.cost_analysis`)."""

    def passes(self, options: CompileOptions) -> list[Any]:
        """The GPU pass list (`compiler.gpu_passes`)."""
        from xlc.backend_gpu.compiler import gpu_passes

        return gpu_passes(options)

    def optimize(self, module: HloModule, options: CompileOptions) -> Any:
        """The GPU pipeline and buffer assignment (`compiler.optimize_gpu`: 256-byte slices,
        stream ordering)."""
        from xlc.backend_gpu.compiler import optimize_gpu

        return optimize_gpu(module, options)

    def compile(self, module: HloModule, options: CompileOptions) -> Any:
        """A GpuExecutable. A cubin is assembled when ptxas is on the PATH: PTX problems
        surface at compile time, and the runtime loads it without JIT when the device can run
        it (else it JITs the PTX)."""
        from xlc.backend_gpu.compiler import compile_gpu

        return compile_gpu(module, options, assemble=True)

    def target(self, options: CompileOptions) -> dict[str, Any]:
        """The architecture when the options leave it to the machine (`gpu_sm` None: the
        GPU's own, else sm_80), so a cached executable is never one for another GPU."""
        if options.gpu_sm is not None:
            return {}
        from xlc.backend_gpu.compiler import target_sm

        return {"gpu_sm": target_sm(options)}

    def device_usable(self) -> bool:
        """Whether a CUDA device can run code here (`backend="auto"` picks the GPU then)."""
        from xlc.backend_gpu.cuda import device_sm

        return device_sm() is not None

    def dump_stages(self, module: HloModule, options: CompileOptions) -> None:
        """Compile a copy (`gpu_sm` from the options; no GPU needed) and write its NVPTX LLVM
        IR, PTX, thunk schedule and, when ptxas is on the PATH, the cubin
        (`<module>.sm_80.ll`, `.sm_80.ptx`, `.thunks.json`, `.sm_80.cubin`)."""
        from xlc.backend_gpu.compiler import compile_gpu
        from xlc.backend_gpu.nvptx import ptxas_path
        from xlc.passes.pipeline import dump_text

        opts = options.replace(backend=self.name)
        try:
            exe = compile_gpu(module.clone(), opts.replace(dump_to=None), assemble=True)
        except XlcError as e:
            log.warning("no .ll/.ptx stages for %s: %s", module.name, str(e).splitlines()[0])
            return
        sm = f"sm_{exe.sm}"
        dump_text(opts, module.name, f"{sm}.ll", exe.llvm_ir)
        path = dump_text(opts, module.name, f"{sm}.ptx", exe.ptx)
        dump_text(opts, module.name, "thunks.json", json.dumps(exe.thunks.to_dict(), indent=1))
        assert path is not None
        if exe.cubin:
            Path(path[: -len("ptx")] + "cubin").write_bytes(exe.cubin)
        elif ptxas_path() is None:
            log.warning("no .cubin stage for %s: ptxas is not on the PATH", module.name)

    def pack(self, exe: Any) -> Any:
        """PTX, cubin, kernel table, thunk schedule and constants."""
        from xlc.backend_gpu.artifact_io import pack

        return pack(exe)

    def unpack(self, manifest: Any, members: dict[str, bytes], module: HloModule,
               assignment: Any, where: str) -> Any:
        """Check the stored plan against the PTX and rebuild the GpuExecutable."""
        from xlc.backend_gpu.artifact_io import unpack

        return unpack(manifest, members, module, assignment, where)

    def describe(self, members: dict[str, bytes]) -> dict[str, Any]:
        """`{"gpu": ...}`: the kernels and their launch dimensions (`artifact_io.describe`)."""
        from xlc.backend_gpu.artifact_io import describe

        return {self.name: describe(members)}

    def describe_text(self, data: dict[str, Any]) -> list[str]:
        """The `gpu code:` section of `xlc inspect`."""
        gpu = data.get(self.name)
        if not gpu:
            return []
        lines = ["", f"gpu code: sm_{gpu['sm']}, PTX ISA {gpu['ptx_isa']} ({gpu['ptx_bytes']} "
                 f"bytes), cubin {'yes' if gpu['cubin'] else 'no (the driver JITs the PTX)'}, "
                 f"{gpu['streams']} stream(s), {gpu['events']} event(s), "
                 f"CUDA graphs {'on' if gpu['graphs'] else 'off'}"]
        lines += [f"  {k['name']:<28} grid {'x'.join(map(str, k['grid'])):<12} block "
                  f"{'x'.join(map(str, k['block'])):<10} shared {k['shared_bytes']:>6} B"
                  f"{'  stream ' + str(k['stream']) if gpu['streams'] > 1 else ''}"
                  for k in gpu["kernels"][:40]]
        if len(gpu["kernels"]) > 40:
            lines.append(f"  ... {len(gpu['kernels']) - 40} more")
        return lines

    def as_device_array(self, x: Any) -> Any:
        """`x` (with `__cuda_array_interface__`) as an `xlc.DeviceArray`, without a copy."""
        from xlc.backend_gpu.device_array import as_device_array

        return as_device_array(x)
