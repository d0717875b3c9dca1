"""Native export: a compiled CPU program as a C library with a header, runnable without Python.

`export_library(exe, directory, name)` writes into `directory`
* `NAME.h`: a plain C header (usable from C++) with the argument and result shapes, dtypes and
  byte sizes as constants, the temp block size, `NAME_run(args, results, temp, nthreads)`, an
  optional allocate-once helper for the temp block and a version/fingerprint string;
* `libNAME.a` and/or `libNAME.so`: the program's object code, the run-time libraries it calls
  (thread pool, packed GEMMs, vectorised sort: the `code/lib/*.o` an `.xlc` file carries),
  the object code of custom-call targets registered from C source or LLVM IR, and a small
  generated C wrapper (`export_c.py`) that maps the caller's buffers onto the entry
  function's buffer table;
* `README.txt`: how to build a program against it.

How the buffers map (`plan_buffers`; the same rules `CpuExecutable.run` follows): every
allocation of the buffer assignment is one slot of the entry's table. Parameters are the
caller's argument pointers; an output allocation holding exactly one result leaf (at offset
0, of the allocation's size) is the caller's result buffer itself; a parameter that is also
an output (donated with `input_output_alias`, or returned) is its result buffer after the
argument has been copied in (no copy when the caller passes the same pointer for both: the
argument is then updated in place); every other allocation (temps, thread-local scratch,
tuple index tables, outputs that hold several leaves) lives at a fixed offset of the temp
block, and result leaves in such allocations are copied out after the call. Constants are
globals of the object code. So the C API writes exactly the bytes `Compiled.__call__`
returns, in the results' layouts.

Custom-calls that run in Python (LAPACK targets, `xlc.pure_callback`, `xlc.debug`, Python
`xlc.ffi` targets) cannot be exported: UnsupportedOpError naming the instruction and target.
A target bound to a shared library stays an undefined symbol (the target's C function) that
the user links; the header names it. Building needs the system C compiler (`cc`) and binutils
(`objcopy`, `ar`); see `export_build.py`.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xlc.errors import ArgumentError, UnsupportedOpError
from xlc.hlo.ir import HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Shape

log = logging.getLogger("xlc.backend_cpu.export")

ALIGNMENT = 64
"""Byte alignment the C API requires of result buffers and the temp block (`CPU_ALIGNMENT`:
the code may use aligned vector stores on them)."""

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


@dataclass(frozen=True)
class Leaf:
    """One argument or result array of the C API: its HLO shape and byte size."""

    shape: Shape

    @property
    def nbytes(self) -> int:
        """Bytes of the buffer (elements in the shape's layout)."""
        return self.shape.byte_size() if self.shape.is_array else 0

    @property
    def dtype(self) -> str:
        """The element type's HLO spelling (`f32`)."""
        et = self.shape.element_type
        return et.text if et is not None else "tuple"

    @property
    def dims(self) -> tuple[int, ...]:
        """The logical dimensions."""
        return tuple(self.shape.dims)

    @property
    def text(self) -> str:
        """The shape with its layout, as HLO prints it (`f32[8,128]{1,0}`)."""
        return self.shape.to_text()


@dataclass(frozen=True)
class Slot:
    """How the wrapper fills one entry of the buffer table (one allocation).

    kind: `const` (NULL: constants are globals of the code), `arg` (args[index]), `result`
    (results[index]) or `temp` (temp + offset). `copy_from` is the argument copied into the
    slot before the call (a parameter that is also an output), or -1."""

    kind: str
    index: int = 0
    offset: int = 0
    size: int = 0
    copy_from: int = -1


@dataclass(frozen=True)
class CopyOut:
    """After the call: `results[result] <- temp + offset` (`nbytes` bytes)."""

    result: int
    offset: int
    nbytes: int


@dataclass
class BufferPlan:
    """The C API of one program (see the module docstring)."""

    args: list[Leaf]
    results: list[Leaf]
    slots: list[Slot]
    copies: list[CopyOut]
    temp_bytes: int
    aliases: dict[int, int] = field(default_factory=dict)
    """result index -> argument index whose storage it may share (pass the same pointer)."""


def _align(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def plan_buffers(module: HloModule, assignment: Any) -> BufferPlan:
    """The slot of every allocation of `assignment` (the buffer assignment of the optimized,
    compiled `module`). UnsupportedOpError for a tuple-shaped parameter or a result leaf in a
    constant or temp allocation (which `CpuExecutable.run` refuses as well)."""
    entry = module.entry
    assert entry is not None and entry.root is not None
    params = list(entry.parameters)
    for p in params:
        if p.shape.is_tuple:
            raise UnsupportedOpError(f"cannot export {module.name}: parameter {p.name} has "
                                     f"tuple shape {p.shape.to_text()}")
    args = [Leaf(p.shape) for p in params]
    root = entry.root
    results: list[Leaf] = []
    by_alloc: dict[int, list[tuple[int, int, int]]] = {}  # alloc -> (result, offset, size)
    for k, (index, shape) in enumerate(root.shape.leaves()):
        results.append(Leaf(shape))
        sl = assignment.slice_of(root, index)
        a = sl.allocation
        if a.is_constant or not (a.maybe_live_out or a.is_entry_computation_parameter):
            raise UnsupportedOpError(f"cannot export {module.name}: result {k} lives in a "
                                     f"{a.kind} allocation")
        by_alloc.setdefault(a.index, []).append((k, sl.offset, Leaf(shape).nbytes))
    slots: list[Slot] = []
    copies: list[CopyOut] = []
    aliases: dict[int, int] = {}
    temp = 0
    for a in assignment.allocations:
        leaves = by_alloc.get(a.index, [])
        param = a.parameter_number if a.is_entry_computation_parameter else -1
        if a.is_constant:
            slots.append(Slot("const"))
            continue
        if param >= 0 and not leaves and not (a.maybe_live_out or a.aliased_with_output):
            slots.append(Slot("arg", param))
            continue
        if len(leaves) == 1 and leaves[0][1] == 0 and leaves[0][2] == a.size and (
                param < 0 or args[param].nbytes == a.size):
            k = leaves[0][0]
            if param >= 0:
                aliases[k] = param
            slots.append(Slot("result", k, size=a.size, copy_from=param))
            continue
        # scratch in the temp block: temps, tuple tables, shared or partial output blocks
        slots.append(Slot("temp", offset=temp, size=a.size, copy_from=param))
        copies += [CopyOut(k, temp + off, n) for k, off, n in leaves if n]
        temp += _align(a.size)
    return BufferPlan(args, results, slots, copies, temp, aliases)


# ---- collecting the code --------------------------------------------------------------------
@dataclass
class ExportCode:
    """The object code that goes into the library: the program's entry object, run-time
    libraries (name -> object), custom-call objects (target -> (symbol, object)), and the
    targets bound to shared libraries (target -> (symbol, library path or ""))."""

    entry_symbol: str
    entry: bytes
    libraries: dict[str, bytes]
    ffi_objects: dict[str, tuple[str, bytes]]
    ffi_external: dict[str, tuple[str, str]]


def refuse_host_calls(module: HloModule, name: str) -> None:
    """UnsupportedOpError naming the first custom-call of `module` whose target runs in
    Python on the host (LAPACK targets, callbacks, Python `xlc.ffi` targets)."""
    from xlc.hlo.ffi_registry import lookup
    from xlc.hlo.lapack import is_lapack_target

    for comp in module.computations:
        for inst in comp.instructions:
            if inst.opcode is not Opcode.CUSTOM_CALL:
                continue
            target = str(inst.attrs.get("custom_call_target", ""))
            reg = lookup(target, "cpu")
            if is_lapack_target(target) or (reg is not None and reg.kind == "python"):
                raise UnsupportedOpError(
                    f"cannot export {name}: custom-call '{inst.name}' calls target "
                    f"'{target}', which runs in Python on the host (LAPACK targets, "
                    "callbacks and Python targets cannot be exported); register C source or "
                    "LLVM IR for it with xlc.ffi.register")


def _cpu_parts(exe: Any) -> tuple[Any, dict[str, bytes] | None, str]:
    """(CpuExecutable, stored code members or None, entry symbol) of a compiled executable
    or of one loaded from an `.xlc` file or the compile cache."""
    from xlc.backend_cpu.executable import CpuExecutable

    runner = getattr(exe, "runner", None)
    members = getattr(exe, "members", None)
    if runner is not None and isinstance(members, dict):
        cpu = getattr(runner, "exe", runner)
        if isinstance(cpu, CpuExecutable):
            return cpu, members, str(exe.manifest.entry_symbol or cpu.entry_name)
    if isinstance(exe, CpuExecutable):
        return exe, None, exe.entry_name
    raise ArgumentError(f"native export needs a CPU executable, got {type(exe).__name__}")


def collect_code(exe: Any, name: str) -> tuple[Any, ExportCode]:
    """The CpuExecutable behind `exe` and the object code its library needs (see
    `ExportCode`); refuses host calls first."""
    from xlc.artifact.manifest import OBJECT_MEMBER
    from xlc.backend_cpu.artifact_io import LIB_PREFIX, pack, undefined_symbols
    from xlc.backend_cpu.ffi_cpu import FFI_PREFIX, ffi_symbols, pack_members

    cpu, members, entry_symbol = _cpu_parts(exe)
    refuse_host_calls(cpu.module, name)
    if members is None:
        members = dict(pack(cpu).members)
    obj = members[OBJECT_MEMBER]
    needed = undefined_symbols(obj)
    targets = ffi_symbols(needed)
    if any(f"{FFI_PREFIX}{t}.json" not in members for t in targets):
        members.update(pack_members(targets, f"program {name}"))
    libraries = {m[len(LIB_PREFIX):].removesuffix(".o"): data
                 for m, data in members.items() if m.startswith(LIB_PREFIX)}
    ffi_objects: dict[str, tuple[str, bytes]] = {}
    ffi_external: dict[str, tuple[str, str]] = {}
    for t in targets:
        meta = json.loads(members[f"{FFI_PREFIX}{t}.json"])
        code = members.get(f"{FFI_PREFIX}{t}.o")
        if code is not None:
            ffi_objects[t] = (str(meta["symbol"]), code)
        else:
            from xlc.hlo.ffi_registry import lookup

            reg = lookup(t, "cpu")
            ffi_external[t] = (str(meta["symbol"]), reg.path if reg is not None else "")
    return cpu, ExportCode(entry_symbol, obj, libraries, ffi_objects, ffi_external)


def fingerprint(code: ExportCode, plan: BufferPlan) -> str:
    """sha256 of every object that goes into the library and of the C API's shapes."""
    h = hashlib.sha256()
    for blob in [code.entry, *(code.libraries[k] for k in sorted(code.libraries)),
                 *(code.ffi_objects[k][1] for k in sorted(code.ffi_objects))]:
        h.update(hashlib.sha256(blob).digest())
    h.update(json.dumps([[a.text for a in plan.args], [r.text for r in plan.results],
                         sorted(plan.aliases.items())]).encode())
    return h.hexdigest()


# ---- the export -----------------------------------------------------------------------------
def output_files(name: str, static: bool, shared: bool) -> list[str]:
    """The file names an export of `name` writes."""
    return [f"{name}.h", *([f"lib{name}.a"] if static else []),
            *([f"lib{name}.so"] if shared else []), "README.txt"]


def check_name(name: str) -> None:
    """ArgumentError unless `name` is a C identifier (it prefixes every symbol)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ArgumentError(f"native export: the library name must be a C identifier (letters, "
                            f"digits and '_', at most 64, not starting with a digit), got "
                            f"{name!r}")


def export_library(exe: Any, directory: str | Path, name: str, *, static: bool = True,
                   shared: bool = True, force: bool = False) -> list[Path]:
    """Write `NAME.h`, `libNAME.a` (`static`) and/or `libNAME.so` (`shared`) and
    `README.txt` for CPU executable `exe` into `directory` (created if missing); returns the
    paths written. Requires a C identifier `name`, `cc` and binutils on the PATH; refuses
    (ArgumentError) to overwrite an existing file unless `force`. Guarantees: the library
    defines only `NAME_*` symbols and leaves undefined only symbols of libc, libm, libpthread
    and libgcc, plus the functions of custom-call targets bound to shared libraries."""
    from xlc.backend_cpu.artifact_io import host_target
    from xlc.backend_cpu.export_build import build_objects
    from xlc.backend_cpu.export_c import header_text, readme_text, wrapper_source
    from xlc.fileio import write_bytes_atomic

    check_name(name)
    if not static and not shared:
        raise ArgumentError("native export: nothing to write (static and shared are both off)")
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise ArgumentError(f"{out}: exists and is not a directory")
    files = [out / f for f in output_files(name, static, shared)]
    if not force:
        for f in files:
            if f.exists():
                raise ArgumentError(f"{f}: already exists (pass force=True, or --force, to "
                                    "overwrite it)")
    cpu, code = collect_code(exe, name)
    plan = plan_buffers(cpu.module, cpu.assignment)
    target = host_target()
    fp = fingerprint(code, plan)
    header = header_text(name, plan, code, target, fp)
    wrapper = wrapper_source(name, plan, code, target, fp)
    built = build_objects(name, code, header, wrapper, static=static, shared=shared)
    out.mkdir(parents=True, exist_ok=True)
    blobs = {f"{name}.h": header.encode(), "README.txt":
             readme_text(name, plan, code, target, static, shared).encode(), **built}
    for f in files:
        write_bytes_atomic(f, blobs[f.name])
    log.info("exported %s to %s (%s)", name, out, ", ".join(f.name for f in files))
    return files
