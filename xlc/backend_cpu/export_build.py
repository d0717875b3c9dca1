"""Building a native export's libraries with the system toolchain (`cc`, `objcopy`, `ar`).

Steps, in a private temporary directory:
1. the program's entry object gets its symbols renamed (`objcopy --redefine-sym`): the entry
   function becomes `NAME__entry`, the thread pool's entry points `NAME__pool_run*` (the
   wrapper's capped versions; the vectorised sort's objects get the same renames),
   `xlc_ffi_failed` becomes `NAME__ffi_failed`, and each custom-call symbol `xlc_ffi.T` the
   C function of target T (its object code goes into the library; a target bound to a shared
   library stays undefined under that name);
2. the generated wrapper is compiled (`cc -c -O2 -fPIC -std=c11`);
3. everything is linked into one relocatable object (`cc -r`), whose defined global symbols
   are then all made local except the `NAME_*` API (`objcopy --keep-global-symbols`), so that
   several exported programs link into one binary without clashes;
4. its undefined symbols are checked: each must be defined by libc, libm, libpthread or
   libgcc (looked up in those libraries) or be the function of a shared-library target;
5. `ar` makes `libNAME.a` of it and `cc -shared` `libNAME.so`.
Every tool failure is an ArtifactError with the tool's message.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

from xlc.backend_cpu.export import ExportCode
from xlc.backend_cpu.export_c import POOL_SYMBOLS
from xlc.errors import ArtifactError

log = logging.getLogger("xlc.backend_cpu.export")

API_FUNCTIONS = ("run", "temp_bytes", "arg_bytes", "result_bytes", "arg_shape",
                 "result_shape", "result_shares_arg", "alloc_temp", "free_temp", "last_error",
                 "check_cpu", "version")
"""The functions `NAME.h` declares (`NAME_<function>`): the library's only global symbols."""

LINKER_SYMBOLS = frozenset({"_GLOBAL_OFFSET_TABLE_"})
SYSTEM_LIBRARIES = ("c", "m", "pthread", "gcc_s")
"""Libraries whose symbols an exported library may leave undefined."""


def tool(name: str) -> str:
    """The path of toolchain program `name`; ArtifactError when it is not on the PATH."""
    path = shutil.which(name)
    if path is None:
        raise ArtifactError(f"native export needs '{name}' (the system C compiler and "
                            "binutils) on the PATH")
    return path


def _run(args: list[str], cwd: Path) -> None:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise ArtifactError(f"native export: {Path(args[0]).name} failed: "
                            f"{msg[0] if msg else 'exit ' + str(proc.returncode)}"
                            + ("".join("\n" + m for m in msg[1:8])))


@lru_cache(maxsize=1)
def _system_libraries() -> tuple[ctypes.CDLL, ...]:
    libs = []
    for short in SYSTEM_LIBRARIES:
        found = ctypes.util.find_library(short)
        for candidate in ([found] if found else []) + [f"lib{short}.so.6", f"lib{short}.so.1"]:
            try:
                libs.append(ctypes.CDLL(candidate))
                break
            except OSError:
                continue
    return tuple(libs)


def system_symbol(symbol: str) -> bool:
    """Whether libc, libm, libpthread or libgcc_s of this machine define `symbol`."""
    return symbol in LINKER_SYMBOLS or any(hasattr(lib, symbol)
                                           for lib in _system_libraries())


def renames(name: str, code: ExportCode) -> dict[str, str]:
    """The symbol renames of the entry object (step 1 of the module docstring)."""
    out = {code.entry_symbol: f"{name}__entry", "xlc_ffi_failed": f"{name}__ffi_failed"}
    out.update(_pool_renames(name))
    for t, (sym, _code) in code.ffi_objects.items():
        out[f"xlc_ffi.{t}"] = sym
    for t, (sym, _path) in code.ffi_external.items():
        out[f"xlc_ffi.{t}"] = sym
    return out


def _pool_renames(name: str) -> dict[str, str]:
    return {s: s.replace("xlc_pool_", f"{name}__pool_") for s in POOL_SYMBOLS}


def _redefine(objcopy: str, path: Path, table: dict[str, str], cwd: Path) -> None:
    args = [objcopy]
    for old, new in table.items():
        args += ["--redefine-sym", f"{old}={new}"]
    _run(args + [path.name], cwd)


def check_undefined(obj: bytes, name: str, code: ExportCode) -> None:
    """ArtifactError naming the undefined symbols of the combined object that neither the
    system libraries nor a shared-library custom-call target define."""
    from xlc.backend_cpu.artifact_io import undefined_symbols

    external = {sym for sym, _path in code.ffi_external.values()}
    missing = sorted(s for s in set(undefined_symbols(obj))
                     if s not in external and not system_symbol(s))
    if missing:
        raise ArtifactError(f"cannot export {name}: the code needs symbol(s) "
                            f"{', '.join(missing)}, which neither the library nor libc, libm, "
                            "libpthread or libgcc define")


def build_objects(name: str, code: ExportCode, header: str, wrapper: str, *, static: bool,
                  shared: bool) -> dict[str, bytes]:
    """`{"libNAME.a": ..., "libNAME.so": ...}` (those asked for) built from `code`, the
    header and the wrapper source (see the module docstring)."""
    cc, objcopy = tool("cc"), tool("objcopy")
    ar = tool("ar") if static else ""
    with tempfile.TemporaryDirectory(prefix="xlc-export-") as tmp:
        d = Path(tmp)
        (d / f"{name}.h").write_text(header)
        (d / "wrapper.c").write_text(wrapper)
        (d / "entry.o").write_bytes(code.entry)
        _redefine(objcopy, d / "entry.o", renames(name, code), d)
        objects = ["wrapper.o", "entry.o"]
        for lib, data in sorted(code.libraries.items()):
            path = d / f"lib_{lib}.o"
            path.write_bytes(data)
            if lib != "pool":
                _redefine(objcopy, path, _pool_renames(name), d)
            objects.append(path.name)
        for _sym, data in sorted(code.ffi_objects.values()):
            path = d / f"ffi_{len(objects)}.o"
            path.write_bytes(data)
            objects.append(path.name)
        _run([cc, "-c", "-O2", "-fPIC", "-std=c11", "-Wall", "-o", "wrapper.o", "wrapper.c"], d)
        combined = f"{name}.o"
        _run([cc, "-r", "-nostdlib", "-Wl,-z,noexecstack", "-o", combined, *objects, "-lgcc"],
             d)
        (d / "keep.txt").write_text("".join(f"{name}_{f}\n" for f in API_FUNCTIONS))
        _run([objcopy, "--keep-global-symbols=keep.txt", combined], d)
        check_undefined((d / combined).read_bytes(), name, code)
        out: dict[str, bytes] = {}
        if static:
            _run([ar, "rcs", f"lib{name}.a", combined], d)
            out[f"lib{name}.a"] = (d / f"lib{name}.a").read_bytes()
        if shared:
            _run([cc, "-shared", "-o", f"lib{name}.so", f"-Wl,-soname,lib{name}.so",
                  "-Wl,-z,noexecstack", combined, "-lm", "-lpthread"], d)
            out[f"lib{name}.so"] = (d / f"lib{name}.so").read_bytes()
        log.debug("built %s from %s", ", ".join(out), ", ".join(objects))
        return out
