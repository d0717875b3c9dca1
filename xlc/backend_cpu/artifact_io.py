"""CPU glue for `.xlc` files: pack a `CpuExecutable`'s object code, and rebuild a runnable
`CpuExecutable` from stored object code without tracing, HLO passes or LLVM optimization.

Loading links the stored (position-independent, host-optimized) object into a fresh MCJIT
engine of its own (`ExecutionEngine.add_object_file`), so two files with the same symbol
names can be loaded into one process. Before the object is linked:
* the target triple's architecture must match this process's;
* every `+feature` the code was compiled for must be present on this CPU;
* every undefined symbol of the object must resolve in this process (LLVM would abort the
  process on an unresolved symbol otherwise).
Each failure is an ArtifactError with a plain sentence; no native code has run by then.
"""
from __future__ import annotations

import logging
import struct
import threading
from typing import Any

from xlc.artifact.manifest import OBJECT_MEMBER, Manifest, TargetInfo
from xlc.errors import ArtifactError
from xlc.hlo.ir import HloModule

LIB_PREFIX = "code/lib/"
"""Members holding the object code of the run-time libraries the entry object calls."""

log = logging.getLogger("xlc.backend_cpu")

_lock = threading.Lock()
# Symbols the runtime linker provides itself (never looked up in the process).
_LINKER_SYMBOLS = {"_GLOBAL_OFFSET_TABLE_"}


def host_target() -> TargetInfo:
    """This machine as the CPU backend targets it: triple, CPU name, enabled features."""
    from xlc.codegen import llvm_utils as lu

    cpu, features = lu.host_cpu()
    triple = lu.target_machine().triple
    enabled = sorted(f for f in features.split(",") if f.startswith("+"))
    return TargetInfo(triple=triple, cpu_name=cpu, cpu_features=enabled)


def pack(exe: Any) -> Any:
    """The code members of a CpuExecutable: its host object code (ELF), the object code of
    every run-time library it calls (`code/lib/<name>.o`: thread pool, GEMMs) and the target."""
    from xlc.artifact.store import PackedCode
    from xlc.backend_cpu import runtime_lib

    if not hasattr(exe, "object_code") or not hasattr(exe, "entry_name"):
        raise ArtifactError(f"cannot serialize a {type(exe).__name__}: it exposes no object "
                            "code")
    from xlc.backend_cpu.ffi_cpu import ffi_symbols, pack_members
    from xlc.hlo.host_calls import refuse_python_targets

    obj = bytes(exe.object_code())
    members = {OBJECT_MEMBER: obj}
    needed = undefined_symbols(obj)
    for name in runtime_lib.libraries_for(needed):
        members[f"{LIB_PREFIX}{name}.o"] = runtime_lib.object_code(name)
    refuse_python_targets(getattr(exe, "module", None))
    members.update(pack_members(ffi_symbols(needed)))
    return PackedCode(target=host_target(), entry_symbol=exe.entry_name, members=members)


def check_target(target: TargetInfo, where: str) -> None:
    """ArtifactError unless code built for `target` can run on this CPU."""
    here = host_target()
    want_arch = target.triple.split("-")[0]
    have_arch = here.triple.split("-")[0]
    if want_arch != have_arch:
        raise ArtifactError(f"{where}: the code was compiled for {target.triple}, this machine "
                            f"is {here.triple}")
    missing = sorted(set(target.cpu_features) - set(here.cpu_features))
    if missing:
        names = ", ".join(f.lstrip("+") for f in missing)
        raise ArtifactError(f"{where}: this CPU ({here.cpu_name}) lacks feature(s) {names} "
                            f"that the code was compiled for (on {target.cpu_name}); recompile "
                            "it on this machine")


def undefined_symbols(obj: bytes) -> list[str]:
    """Names of the undefined global symbols of an ELF64 little-endian object. Raises
    ArtifactError if `obj` is not one."""
    if len(obj) < 64 or obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        raise ArtifactError("the stored code is not a 64-bit little-endian ELF object")
    try:
        shoff, = struct.unpack_from("<Q", obj, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize)
                    for i in range(shnum)]
        out = []
        for sh in sections:
            if sh[1] != 2:  # SHT_SYMTAB
                continue
            strtab = sections[sh[6]]
            str_off = strtab[4]
            for k in range(sh[5] // 24):
                name_off, info, _other, shndx = struct.unpack_from("<IBBH", obj, sh[4] + k * 24)
                if shndx != 0 or name_off == 0 or (info >> 4) == 0:  # defined or local
                    continue
                end = obj.index(b"\0", str_off + name_off)
                out.append(obj[str_off + name_off:end].decode())
        return out
    except (struct.error, ValueError, IndexError):
        raise ArtifactError("the stored code is a malformed ELF object") from None


def _check_symbols(obj: bytes, where: str) -> None:
    """Requires an MCJIT engine to exist (creating one makes the process's symbols visible),
    and the run-time libraries the code calls linked (`_link_libraries`)."""
    import llvmlite.binding as llvm

    needed = undefined_symbols(obj)
    if "xlc_host_call" in needed or "xlc_ffi_failed" in needed:  # the process's callbacks
        from xlc.backend_cpu.host_call import ensure_registered

        ensure_registered()
    unresolved = [s for s in needed
                  if s not in _LINKER_SYMBOLS and not llvm.address_of_symbol(s)]
    if unresolved:
        raise ArtifactError(f"{where}: the code needs symbol(s) {', '.join(unresolved)} that "
                            "this process does not provide")


def _link_libraries(needed: list[str], members: dict[str, bytes], where: str) -> None:
    """Make the run-time libraries the code calls available: from the file's own copies
    (`code/lib/<name>.o`, linked without LLVM optimization) or, for a file without them, from
    this process's. A library member the code does not need is refused (it is not code the
    manifest vouches for running)."""
    from xlc.backend_cpu import runtime_lib

    order = runtime_lib.libraries_for(needed)  # each library after those it requires
    carried: dict[str, bytes] = {}
    for member, data in members.items():
        if member.startswith(LIB_PREFIX):
            name = member[len(LIB_PREFIX):].removesuffix(".o")
            if name not in order:
                raise ArtifactError(f"{where}: unexpected run-time library member {member}")
            try:  # a malformed object fails here, before LLVM sees it
                undefined_symbols(data)
            except ArtifactError as e:
                raise ArtifactError(f"{where}: {member}: {e}") from None
            carried[name] = data
    for name in order:
        if name in carried:
            runtime_lib.link_object(name, carried[name], where)
        else:
            runtime_lib.ensure(name)


class _LinkedCode:
    """A private MCJIT engine holding one loaded object (kept alive with the executable)."""

    def __init__(self, obj: bytes, symbol: str, where: str):
        import llvmlite.binding as llvm

        from xlc.backend_cpu.jit import new_mcjit_engine

        with _lock:
            self.engine = new_mcjit_engine()
            _check_symbols(obj, where)
            self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            self.engine.finalize_object()
            self.address = self.engine.get_function_address(symbol)
        if not self.address:
            raise ArtifactError(f"{where}: the stored code has no entry function '{symbol}'")


class LoadedCpuExecutable:
    """A CpuExecutable over linked stored code; `run(flat)` like the compiled one."""

    def __init__(self, exe: Any, linked: _LinkedCode):
        self.exe = exe
        self.linked = linked

    def run(self, flat_args: list[Any]) -> list[Any]:
        """Run on flat, checked arguments; flat outputs."""
        return self.exe.run(flat_args)


def unpack(manifest: Manifest, members: dict[str, bytes], module: HloModule,
           assignment: Any, where: str) -> LoadedCpuExecutable:
    """A runnable CPU executable from checked archive members (see the module docstring).
    `module` is the parsed optimized HLO and `assignment` the stored buffer assignment."""
    from xlc.backend_cpu.executable import CpuExecutable

    if OBJECT_MEMBER not in members or not manifest.entry_symbol:
        raise ArtifactError(f"{where}: a CPU executable without object code")
    check_target(manifest.target, where)
    obj = members[OBJECT_MEMBER]
    needed = undefined_symbols(obj)  # a malformed object fails here, before LLVM sees it
    _link_libraries(needed, members, where)
    from xlc.backend_cpu.ffi_cpu import ffi_symbols, link_members

    link_members(ffi_symbols(needed), members, where)
    linked = _LinkedCode(obj, manifest.entry_symbol, where)
    timings = {t.name: t.seconds for t in manifest.pass_timings}
    exe = CpuExecutable(module, assignment, manifest.entry_symbol, linked.address,
                        timings=timings)
    log.debug("loaded %s from %s", manifest.entry_symbol, where)
    return LoadedCpuExecutable(exe, linked)
