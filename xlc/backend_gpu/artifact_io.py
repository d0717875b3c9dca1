"""GPU glue for `.xlc` files: pack a `GpuExecutable` (PTX, cubin when assembled, the thunk
schedule, the runtime's buffer tables, constant bytes) and rebuild a runnable `GpuExecutable`
from them without tracing, HLO passes, LLVM or ptxas.

Members written (besides the generic ones `xlc.artifact` writes):
* `code/kernels.ptx` - the PTX of every kernel (always);
* `code/kernels.cubin` - the ptxas output for `sm_<target>` (when ptxas was on the PATH);
* `code/gpu_executable.json` - `GpuExecutable.to_dict(code=False)`: architecture, PTX ISA
  version, kernel names with their launch dimensions inside the thunks (slices as
  `Slice.to_json()`), the stream plan, allocations (`BufferAllocation.to_json()`, a copy for
  readers of this member alone: loading resolves slices in the manifest's table), parameters
  and outputs;
* `code/constants.bin` - the constant allocations' bytes, concatenated (offsets in the JSON).

Loading needs no GPU: which image runs (cubin or PTX) is decided on the first call, when the
device's compute capability is known (`xlc.backend_gpu.cuda.select_image`). Any
inconsistency between the members is an ArtifactError naming the file.
"""
from __future__ import annotations

import json
import logging
import re
from typing import Any

from xlc.artifact.manifest import CUBIN_MEMBER, PTX_MEMBER, Manifest, TargetInfo
from xlc.errors import ArtifactError
from xlc.hlo.ir import HloModule

log = logging.getLogger("xlc.backend_gpu")

PLAN_MEMBER = "code/gpu_executable.json"
CONSTANTS_MEMBER = "code/constants.bin"


def pack(exe: Any) -> Any:
    """The code members of a GpuExecutable (see the module docstring)."""
    from xlc.artifact.store import PackedCode
    from xlc.backend_gpu.executable import GpuExecutable

    if not isinstance(exe, GpuExecutable):
        raise ArtifactError(f"cannot serialize a {type(exe).__name__} as a GPU executable")
    from xlc.hlo.host_calls import refuse_python_targets

    refuse_python_targets(exe.module)
    desc = exe.to_dict(code=False)
    blob = bytearray()
    table: dict[str, list[int]] = {}
    for index, data in sorted(exe.constants.items()):
        table[str(index)] = [len(blob), len(data)]
        blob += data
    desc["constants"] = table
    members = {PTX_MEMBER: exe.ptx.encode(), PLAN_MEMBER: json.dumps(desc, indent=1).encode(),
               CONSTANTS_MEMBER: bytes(blob)}
    if exe.cubin:
        members[CUBIN_MEMBER] = bytes(exe.cubin)
    return PackedCode(target=TargetInfo(gpu_compute_capability=exe.sm), members=members)


def unpack(manifest: Manifest, members: dict[str, bytes], module: HloModule,
           assignment: Any, where: str) -> Any:
    """A runnable GpuExecutable from checked archive members. `module` is the parsed optimized
    HLO and `assignment` the stored buffer assignment (for memory stats and reports)."""
    from xlc.artifact.store import StoredOptimized
    from xlc.backend_gpu.compiler import GpuCompileResult
    from xlc.backend_gpu.executable import GpuExecutable, OutputInfo, ParameterInfo
    from xlc.backend_gpu.streams import StreamPlan
    from xlc.backend_gpu.thunks import KernelThunk, SequentialThunk, thunk_from_dict

    sm = manifest.target.gpu_compute_capability
    if sm is None:
        raise ArtifactError(f"{where}: the manifest names no GPU compute capability")
    for name in (PTX_MEMBER, PLAN_MEMBER, CONSTANTS_MEMBER):
        if name not in members:
            raise ArtifactError(f"{where}: a GPU executable without {name}")
    try:
        ptx = members[PTX_MEMBER].decode()
        desc = json.loads(members[PLAN_MEMBER])
        # the one allocation table is the manifest's (the stored assignment's)
        allocations = list(assignment.allocations)
        thunks = thunk_from_dict(desc["thunks"], allocations)
        if not isinstance(thunks, SequentialThunk):
            raise ArtifactError("the entry thunk is not a sequence")
        plan = StreamPlan.from_dict(desc["streams"], thunks)
        parameters = [ParameterInfo.from_dict(p) for p in desc["parameters"]]
        outputs = [OutputInfo.from_dict(o, allocations) for o in desc["outputs"]]
        blob = members[CONSTANTS_MEMBER]
        constants = {int(k): blob[off:off + n] for k, (off, n) in desc["constants"].items()}
        kernels = [str(k) for k in desc["kernels"]]
        ffi_modules = {str(k): {"ptx": str(v["ptx"]), "symbol": str(v["symbol"])}
                       for k, v in desc.get("ffi_modules", {}).items()}
        ptx_version = int(desc["ptx_version"])
        if int(desc["sm"]) != sm:
            raise ArtifactError(f"the code is for sm_{desc['sm']}, the manifest says sm_{sm}")
    except ArtifactError as e:
        raise ArtifactError(f"{where}: {e}") from None
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, IndexError) as e:
        raise ArtifactError(f"{where}: the GPU executable description is malformed "
                            f"({type(e).__name__}: {e})") from None
    _check_consistency(where, ptx, kernels, thunks, allocations, constants, parameters,
                       outputs, len(module.entry.parameters) if module.entry else 0,
                       ffi_modules)
    result = GpuCompileResult(ptx, members.get(CUBIN_MEMBER), kernels, constants, "",
                              ptx_version, ffi_modules)
    optimized = StoredOptimized(module, assignment, manifest.pass_timings)
    timings = {t.name: t.seconds for t in manifest.pass_timings}
    exe = GpuExecutable(optimized, plan, result, sm=sm, timings=timings,  # type: ignore[arg-type]
                        tables=(allocations, parameters, outputs),
                        graphs=bool(desc.get("graphs", False)),
                        profile=bool(manifest.options.get("profile", False)))
    launched = {t.kernel for t in thunks.walk() if isinstance(t, KernelThunk)}
    log.debug("loaded %d kernels (%d launched) for sm_%d from %s", len(kernels), len(launched),
              sm, where)
    return exe


def _check_consistency(where: str, ptx: str, kernels: list[str], thunks: Any,
                       allocations: list[Any], constants: dict[int, bytes],
                       parameters: list[Any], outputs: list[Any], n_params: int,
                       ffi_modules: dict[str, dict[str, str]] | None = None) -> None:
    """ArtifactError unless the PTX defines every kernel (user PTX modules their entry),
    every thunk launches a known kernel and touches existing allocations within bounds, and
    the tables agree with the module."""
    from xlc.backend_gpu.thunks import KernelThunk

    entries = set(re.findall(r"\.entry\s+([\w$]+)", ptx))
    for name, m in (ffi_modules or {}).items():
        if m["symbol"] not in re.findall(r"\.entry\s+([\w$]+)", m["ptx"]):
            raise ArtifactError(f"{where}: the PTX of {name} lacks kernel {m['symbol']}")
    launchable = entries | set(ffi_modules or {})
    missing = sorted(set(kernels) - entries)
    if missing:
        raise ArtifactError(f"{where}: the PTX lacks kernel(s) {', '.join(missing[:5])}")
    sizes = {a.index: a.size for a in allocations}
    if sorted(sizes) != list(range(len(allocations))):
        raise ArtifactError(f"{where}: the allocation table is not numbered 0..n-1")
    for t in thunks.walk():
        if isinstance(t, KernelThunk) and t.kernel not in launchable:
            raise ArtifactError(f"{where}: thunk {t.hlo} launches unknown kernel {t.kernel}")
        for sl in [*t.reads(), *t.writes()]:
            if sl.index not in sizes or sl.offset + sl.size > sizes[sl.index]:
                raise ArtifactError(f"{where}: thunk {t.hlo} touches bytes outside allocation "
                                    f"{sl.index}")
    for index, data in constants.items():
        if index not in sizes or len(data) > sizes[index]:
            raise ArtifactError(f"{where}: constant data for allocation {index} does not fit")
    if len(parameters) != n_params or any(p.allocation not in sizes for p in parameters):
        raise ArtifactError(f"{where}: the parameter table does not match the module's "
                            f"{n_params} parameter(s)")
    for o in outputs:
        if o.slice.index not in sizes or o.slice.offset + o.slice.size > sizes[o.slice.index]:
            raise ArtifactError(f"{where}: an output lies outside allocation {o.slice.index}")


def describe(members: dict[str, bytes]) -> dict[str, Any]:
    """What `xlc inspect` shows of a GPU archive's code (no code is loaded): architecture, PTX
    ISA version, whether a cubin is present, the stream plan and every kernel launch with its
    grid, block and static shared memory, in schedule order (nested control flow included).
    ArtifactError for a malformed description."""
    from xlc.backend_gpu.thunks import KernelThunk, thunk_from_dict
    from xlc.passes.allocation import BufferAllocation

    try:
        desc = json.loads(members[PLAN_MEMBER])
        # listing kernels needs only each allocation's index and size (which every format
        # of the description stores), not the manifest's full table
        table = [BufferAllocation(int(a["index"]), int(a["size"])) for a in desc["allocations"]]
        thunks = thunk_from_dict(desc["thunks"], table)
        version = int(desc["ptx_version"])
        out: dict[str, Any] = {
            "sm": int(desc["sm"]), "ptx_isa": f"{version // 10}.{version % 10}",
            "cubin": CUBIN_MEMBER in members, "ptx_bytes": len(members.get(PTX_MEMBER, b"")),
            "streams": int(desc["streams"]["num_streams"]),
            "events": int(desc["streams"]["num_events"]), "graphs": bool(desc.get("graphs")),
            "thunks": sum(1 for _ in thunks.walk()), "kernels": []}
    except (KeyError, ValueError, TypeError) as e:
        raise ArtifactError(f"the GPU executable description is malformed ({e})") from None
    for t in thunks.walk():
        if isinstance(t, KernelThunk):
            out["kernels"].append({"name": t.kernel, "hlo": t.hlo, "grid": list(t.grid),
                                   "block": list(t.block), "shared_bytes": t.shared_bytes,
                                   "stream": t.stream})
    return out
