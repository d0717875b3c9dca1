"""What an `.xlc` file stores, written and read back: a zip with `manifest.json`, the code, the
optimized HLO and the buffer-assignment / memory reports.

`build_archive(exe, backend, signature, ...)` makes the bytes of one; `executable_from_archive`
rebuilds a `StoredExecutable` from a checked archive, without tracing, HLO passes or LLVM
optimization: the program is the stored optimized HLO (interpreter) or the stored code (CPU,
GPU: their `Backend.unpack`). `xlc.load` (in `xlc.api`) wraps that in a `Compiled` with the
original pytree signature. Loading checks, in this order and before any native code runs: the
zip is intact, the manifest parses, has a known format version and matches the sha256 in the
zip comment, no member is missing or unlisted and the declared sizes agree and stay under a
limit (all before anything is decompressed: `xlc/artifact/archive.py`), every member's sha256
matches the manifest, and the target (CPU features, triple) can run the code. Any failure is
an `ArtifactError` with a plain sentence.

Backends plug in through `xlc.backends.get_backend(name)`: `pack(exe) -> PackedCode` and
`unpack(manifest, members, module, assignment, where) -> executable with run(flat)`. This
module imports no backend and not `xlc.api`.
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import zipfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xlc.artifact.archive import (
    Archive,
    read_archive_file,
)
from xlc.artifact.manifest import (
    ASSIGNMENT_MEMBER,
    HLO_MEMBER,
    MANIFEST_NAME,
    MEMORY_MEMBER,
    REPORT_MEMBER,
    AliasInfo,
    ConstantInfo,
    Manifest,
    MemberInfo,
    OutputSlice,
    PassTime,
    ScheduledOp,
    Signature,
    TargetInfo,
    aval_to_spec,
    seal,
    shape_to_spec,
    tree_to_json,
)
from xlc.errors import ArgumentError, ArtifactError
from xlc.hlo.ir import HloInstruction, HloModule
from xlc.hlo.shape import ShapeIndex
from xlc.options import CompileOptions, default_options
from xlc.passes.allocation import BufferAllocation, Slice

log = logging.getLogger("xlc.artifact")

@dataclass
class PackedCode:
    """What a backend's `pack` contributes: target, entry symbol and code members."""

    target: TargetInfo = field(default_factory=TargetInfo)
    entry_symbol: str | None = None
    members: dict[str, bytes] = field(default_factory=dict)


# ---- the optimized program as stored ---------------------------------------------------------
class StoredAssignment:
    """The buffer assignment as the manifest records it: the allocation table, the slices of
    the entry root's leaves, the stats and the text/JSON reports. Answers the queries a
    runtime makes (`allocations`, `slice_of(root, index)`, `stats()`, `report()`)."""

    def __init__(self, module: HloModule, manifest: Manifest, report: str,
                 report_json: dict[str, Any]):
        self.module = module
        # the manifest's own objects: its output slices resolve against this same table
        self.allocations: list[BufferAllocation] = list(manifest.allocations)
        try:
            self._root_slices = manifest.output_slice_table()
        except ValueError as e:
            raise ArtifactError(f"manifest: {e}") from None
        self._stats = dict(manifest.memory_stats)
        self._report = report
        self._json = report_json
        # (computation, instruction, index) -> slice, for every buffer the report lists
        self._defined: dict[tuple[str, str, ShapeIndex], Slice] = {}
        for a in report_json.get("allocations", []):
            index = a.get("index")
            if not isinstance(index, int) or not 0 <= index < len(self.allocations):
                continue
            for b in a.get("assigned", []):
                key = (b["computation"], b["instruction"], tuple(b["shape_index"]))
                self._defined[key] = Slice(self.allocations[index], b["offset"], b["size"])

    def slice_of(self, inst: HloInstruction, index: ShapeIndex = ()) -> Slice:
        """The slice holding `inst` at `index`: the recorded output slices for the entry root,
        otherwise the slice of the buffer `inst` defines there. ArtifactError when the stored
        assignment has neither."""
        entry = self.module.entry
        index = tuple(index)
        if entry is not None and inst is entry.root and index in self._root_slices:
            return self._root_slices[index]
        comp = next((c.name for c in self.module.computations if inst in c.instructions), "")
        found = self._defined.get((comp, inst.name, index))
        if found is None:
            raise ArtifactError(f"the stored buffer assignment has no slice for "
                                f"{inst.name}{list(index)}")
        return found

    def temp_allocations(self) -> list[BufferAllocation]:
        """The temp allocations, in index order."""
        return [a for a in self.allocations if a.is_preallocated_temp]

    def stats(self) -> dict[str, int]:
        """The stored memory stats (parameter/output/temp/constant/peak bytes, ...)."""
        return dict(self._stats)

    def report(self) -> str:
        """The stored buffer-assignment report text."""
        return self._report

    def to_json(self) -> dict[str, Any]:
        """The stored JSON form of the assignment (allocations with their buffers)."""
        return self._json


@dataclass
class _Timing:
    name: str
    seconds: float
    changed: bool = False


class StoredOptimized:
    """Stands in for `xlc.passes.optimize.OptimizedModule` for a loaded program."""

    def __init__(self, module: HloModule, assignment: StoredAssignment,
                 timings: list[PassTime]):
        self.module = module
        self.assignment = assignment
        self.timings = [_Timing(t.name, t.seconds) for t in timings]
        self.seconds = sum(t.seconds for t in timings)

    def memory_stats(self) -> dict[str, int]:
        """The stored memory stats."""
        return self.assignment.stats()

    def timing_report(self) -> str:
        """Per-pass compile times of the original compile, as text."""
        lines = [f"{t.name:<32} {1e3 * t.seconds:9.2f} ms" for t in self.timings]
        lines.append(f"{'total':<32} {1e3 * self.seconds:9.2f} ms")
        return "\n".join(lines)


class StoredExecutable:
    """A backend executable rebuilt from an archive: `run(flat)` plus `optimized`."""

    def __init__(self, runner: Any, optimized: StoredOptimized, manifest: Manifest,
                 members: dict[str, bytes]):
        self.runner = runner
        self.optimized = optimized
        self.manifest = manifest
        self.members = members

    def run(self, flat_args: list[np.ndarray]) -> list[np.ndarray]:
        """Run on flat, checked arguments; flat outputs."""
        return self.runner.run(flat_args)


# ---- writing ---------------------------------------------------------------------------------
def _parts(exe: Any) -> tuple[HloModule, Any, list[PassTime]]:
    """(optimized module, assignment, pass timings) of any backend executable."""
    opt = getattr(exe, "optimized", None)
    if opt is not None and hasattr(opt, "assignment"):
        timings = [PassTime(name=t.name, seconds=float(t.seconds)) for t in opt.timings]
        extra = getattr(exe, "timings", None)  # backend stages (emission, LLVM, ...)
        if isinstance(extra, dict):
            timings += [PassTime(name=k, seconds=float(v)) for k, v in extra.items()]
        return opt.module, opt.assignment, timings
    if hasattr(exe, "module") and hasattr(exe, "assignment"):
        raw = getattr(exe, "timings", {}) or {}
        items = raw.items() if isinstance(raw, dict) else ((t.name, t.seconds) for t in raw)
        return exe.module, exe.assignment, [PassTime(name=k, seconds=float(v))
                                            for k, v in items]
    raise ArtifactError(f"cannot serialize a {type(exe).__name__}: it exposes no optimized "
                        "module and buffer assignment")


def _budget_lines(exe: Any) -> list[str]:
    """The memory-limit report of the compile (`OptimizedModule.budget`), or none."""
    budget = getattr(getattr(exe, "optimized", None), "budget", None)
    return list(budget.lines()) if budget is not None else []


def _allocations(assignment: Any) -> list[BufferAllocation]:
    """Copies of the assignment's allocations with their flags only (`to_json`), for the
    manifest: the LogicalBuffers stay with the compile."""
    return [BufferAllocation.from_json(a.to_json()) for a in assignment.allocations]


def _entry_tables(module: HloModule, assignment: Any
                  ) -> tuple[list[OutputSlice], list[ScheduledOp], list[ConstantInfo]]:
    entry = module.entry
    assert entry is not None and entry.root is not None
    slices = []
    for index, _shape in entry.root.shape.leaves():
        sl = assignment.slice_of(entry.root, index)
        slices.append(OutputSlice(output_index=list(index), slice=sl.to_json()))
    order = (module.schedule or {}).get(entry) or entry.instructions
    schedule = [ScheduledOp(name=i.name, opcode=i.opcode.text,
                            shape=i.shape.to_text(layout=False),
                            kind=str(i.attrs["kind"]) if "kind" in i.attrs else None)
                for i in order]
    constants = [ConstantInfo(name=i.name, shape=i.shape.to_text(layout=False),
                              bytes=i.shape.byte_size())
                 for i in entry.instructions if i.opcode.text == "constant"]
    return slices, schedule, constants


def _json_default(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    return str(x)


def build_archive(exe: Any, backend: str, signature: Signature,
                  options: CompileOptions | None = None,
                  compile_seconds: dict[str, float] | None = None,
                  cache_key: str | None = None) -> bytes:
    """The bytes of an `.xlc` archive for backend executable `exe` (as `Backend.compile` of
    backend `backend` makes it). `cache_key` is recorded in the manifest of
    a compile-cache entry, so that a hit can check the entry belongs to its key."""
    from xlc import __version__
    from xlc.hlo.printer import print_module

    if isinstance(exe, StoredExecutable):  # a cache hit: the stored members, new signature
        update: dict[str, Any] = {"signature": signature}
        if cache_key is not None:
            update["cache_key"] = cache_key
        return _zip(exe.manifest.model_copy(update=update), exe.members)
    module, assignment, timings = _parts(exe)
    packed = _backend(backend, None).pack(exe)
    slices, schedule, constants = _entry_tables(module, assignment)
    stats = {k: int(v) for k, v in dict(assignment.stats()).items()}
    members: dict[str, bytes] = {
        HLO_MEMBER: print_module(module).encode(),
        REPORT_MEMBER: str(assignment.report()).encode(),
        ASSIGNMENT_MEMBER: json.dumps(assignment.to_json(), default=_json_default,
                                      indent=1).encode(),
        MEMORY_MEMBER: json.dumps(stats, indent=1).encode(),
    }
    members.update(packed.members)
    opts = options or default_options()
    manifest = Manifest(
        xlc_version=__version__, backend=backend, target=packed.target,
        module_name=module.name, entry_symbol=packed.entry_symbol,
        options=opts.model_dump(exclude={"dump_to", "dump_pass_re", "cache_dir"}),
        signature=signature,
        input_output_alias=[AliasInfo(output_index=list(a.output_index),
                                      parameter_number=a.param_number,
                                      parameter_index=list(a.param_index), kind=a.kind)
                            for a in module.input_output_alias],
        allocations=_allocations(assignment), output_slices=slices, schedule=schedule,
        constants=constants, memory_stats=stats, pass_timings=timings,
        memory_budget=_budget_lines(exe),
        compile_seconds=dict(compile_seconds or {}), cache_key=cache_key,
        members={n: MemberInfo(sha256=hashlib.sha256(b).hexdigest(), size=len(b))
                 for n, b in members.items()})
    return _zip(manifest, members)


def _zip(manifest: Manifest, members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    text = manifest.model_dump_json(indent=1).encode()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.comment = seal(text)
        z.writestr(MANIFEST_NAME, text)
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def signature_of(compiled: Any) -> Signature:
    """The pytree signature of an `xlc.api.Compiled` (None in_tree for HLO-compiled
    executables)."""
    module = compiled.module
    assert module.entry is not None and module.entry.root is not None
    outs = [o for _i, s in module.entry.root.shape.leaves() if (o := shape_to_spec(s))]
    return Signature(
        name=compiled.name, arg_names=list(compiled.arg_names),
        in_tree=tree_to_json(compiled.in_tree) if compiled.in_tree is not None else None,
        out_tree=tree_to_json(compiled.out_tree),
        inputs=[aval_to_spec(a) for a in compiled.in_avals], outputs=outs)


# ---- reading ---------------------------------------------------------------------------------
def _backend(backend: str, where: str | None) -> Any:
    """The backend that packs/unpacks `backend` code; `where` names the file being loaded
    (None when serializing)."""
    from xlc.backends import get_backend

    try:
        return get_backend(backend)
    except ArgumentError:
        if where is None:
            raise ArtifactError(f"serializing '{backend}' executables is not supported by "
                                "this xlc") from None
        raise ArtifactError(f"{where}: this xlc cannot load '{backend}' executables") from None


def select_gpu_code(manifest: Manifest, members: dict[str, bytes], device_cc: int,
                    where: str) -> tuple[str, bytes]:
    """("cubin" | "ptx", bytes) a GPU of compute capability `device_cc` (e.g. 86) can run.

    The cubin is used when it is binary compatible (same major version, minor not newer than
    the device's); otherwise the PTX, which the driver JIT-compiles for any device at least as
    new as its target. ArtifactError when neither fits (the GPU is older than the code)."""
    from xlc.artifact.manifest import CUBIN_MEMBER, PTX_MEMBER

    cc = manifest.target.gpu_compute_capability
    if cc is None:
        raise ArtifactError(f"{where}: the manifest names no GPU compute capability")
    if CUBIN_MEMBER in members and device_cc // 10 == cc // 10 and device_cc % 10 >= cc % 10:
        return "cubin", members[CUBIN_MEMBER]
    if PTX_MEMBER in members and device_cc >= cc:
        if CUBIN_MEMBER in members:
            log.info("%s: cubin for sm_%d does not run on sm_%d; using the PTX", where, cc,
                     device_cc)
        return "ptx", members[PTX_MEMBER]
    have = " and ".join(k for k, n in (("cubin", CUBIN_MEMBER), ("PTX", PTX_MEMBER))
                        if n in members) or "no GPU code"
    raise ArtifactError(f"{where}: this GPU (sm_{device_cc}) cannot run the code: the file "
                        f"holds {have} for sm_{cc}; recompile it for this GPU")


def executable_from_archive(archive: Archive) -> StoredExecutable:
    """Rebuild the backend executable of a checked archive: parse the stored optimized HLO
    (no passes), rebuild the buffer table, load the code. No tracing, no optimization."""
    from xlc.hlo.parser import parse_module

    m = archive.manifest
    where = archive.where
    try:
        module = parse_module(archive.members[HLO_MEMBER].decode(), filename=f"{where}:"
                              f"{HLO_MEMBER}")
    except Exception as e:  # checksummed text should parse; anything else is a broken writer
        raise ArtifactError(f"{where}: the stored HLO does not parse ({e})") from None
    report_json = json.loads(archive.members[ASSIGNMENT_MEMBER])
    assignment = StoredAssignment(module, m, archive.members[REPORT_MEMBER].decode(),
                                  report_json)
    optimized = StoredOptimized(module, assignment, m.pass_timings)
    runner = _backend(m.backend, where).unpack(m, archive.members, module, assignment, where)
    return StoredExecutable(runner, optimized, m, archive.members)


def read_manifest(path: str | os.PathLike[str]) -> Manifest:
    """The checked manifest of an `.xlc` file (checksums verified, code not loaded)."""
    return read_archive_file(path).manifest


def rebuild_assignment(archive: Archive, module: HloModule) -> Any | None:
    """A full `BufferAssignment` of `module` (the archive's parsed optimized HLO) for pictures:
    recomputed from the stored schedule with the backend's alignment. The scheduler leaves a
    module in its printed order, so this reproduces the compile-time assignment exactly; it
    is returned only when its allocation table equals the stored one (so every slice and the
    memory timeline are those the code uses), else None with a warning (e.g. a multi-stream
    GPU ordering). Runs buffer assignment only: no HLO passes."""
    from xlc.passes.buffer_assignment import assign_buffers

    alignment = _backend(archive.manifest.backend, archive.where).alignment
    try:
        ba = assign_buffers(module, alignment=alignment)
    except Exception as e:  # a picture without slices is still a picture
        log.warning("%s: cannot recompute the buffer assignment (%s)", archive.where, e)
        return None
    stored = json.loads(archive.members[ASSIGNMENT_MEMBER]).get("allocations", [])
    if ba.to_json()["allocations"] != stored:
        log.warning("%s: the recomputed buffer assignment differs from the stored one; "
                    "drawing without slices and timeline", archive.where)
        return None
    return ba

