"""`xlc.ffi`: register your own custom-call targets, and call them from traced programs.

    xlc.ffi.register("my_op", shared_library="libmine.so", symbol="my_op")
    xlc.ffi.register("my_op", c_source=SOURCE, symbol="my_op")
    xlc.ffi.register("my_op", llvm_ir=IR_TEXT, symbol="my_op")
    xlc.ffi.register("my_op", python=lambda x, y: x + y)
    xlc.ffi.register("my_op", backend="gpu", ptx=PTX, symbol="my_kernel",
                     launch=lambda operands, results: ((blocks, 1, 1), (256, 1, 1)))

    y = xlc.ffi.call("my_op", xlc.ShapeDtype((4,), "float32"), x, backend_config="...")

A C target follows the calling convention of `xlc_ffi.h` (`include_dir()` holds it): typed
buffers in and out, the custom-call's backend_config as text, an int32 status and an error
message. C source is compiled by the system C compiler (`cc`, or `$CC`) when it is
registered, LLVM IR is compiled by LLVM; either way the object code travels inside `.xlc`
files, so a saved program runs in a process that never registered the target. A shared
library target is bound with ctypes wherever it runs: a process loading a `.xlc` that calls it
must register it first (else ArtifactError naming the target). A Python target runs as a host
call on numpy arrays (and cannot be saved to a `.xlc`). Registrations belong to the compile
cache key, so changing a target's code recompiles the programs that call it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from xlc.errors import ArgumentError
from xlc.hlo import ffi_registry
from xlc.hlo.ffi_registry import FfiTarget

__all__ = ["register", "unregister", "call", "include_dir", "registered", "FfiTarget"]

_BACKENDS = ("cpu", "gpu")


def include_dir() -> str:
    """The folder holding `xlc_ffi.h` (for `cc -I`)."""
    return str(Path(__file__).resolve().parent)


def register(name: str, *, shared_library: str | os.PathLike[str] | None = None,
             c_source: str | None = None, llvm_ir: str | None = None,
             python: Callable[..., Any] | None = None, ptx: str | None = None,
             launch: Callable[..., Any] | None = None, symbol: str | None = None,
             backend: str = "cpu", cflags: Sequence[str] = ()) -> FfiTarget:
    """Register custom-call target `name` for `backend` with exactly one implementation:
    a `shared_library` path, `c_source` text, `llvm_ir` text (each exporting C function
    `symbol`, default `name`), or a `python` function of numpy arrays (returning one array or
    a tuple, as many as the custom-call has results). Replaces an earlier registration of the
    same name. For `backend="gpu"`: `ptx` text with kernel `symbol` and a `launch` rule
    (operand dims, result dims) -> (grid, block), or `python` (run on the host between
    kernels). ArgumentError for a bad name, a missing library or symbol, or source that does
    not compile (with the compiler's message)."""
    ffi_registry.check_name(name)
    given = [k for k, v in (("shared_library", shared_library), ("c_source", c_source),
                            ("llvm_ir", llvm_ir), ("python", python), ("ptx", ptx))
             if v is not None]
    if len(given) != 1:
        raise ArgumentError(f"xlc.ffi.register('{name}'): give exactly one of shared_library, "
                            f"c_source, llvm_ir, python or ptx (got "
                            f"{', '.join(given) or 'none'})")
    if (ptx is not None) != (backend == "gpu") and python is None:
        raise ArgumentError(f"xlc.ffi.register('{name}'): the GPU backend takes ptx (or "
                            f"python) targets, the CPU backend the others (got {given[0]} for "
                            f"backend {backend!r})")
    if backend not in _BACKENDS:
        raise ArgumentError(f"xlc.ffi.register('{name}'): backend must be one of "
                            f"{', '.join(_BACKENDS)}, got {backend!r}")
    sym = symbol or name.replace(".", "_").replace("-", "_")
    if ptx is not None:
        target = _ptx_target(name, ptx, sym, launch)
    elif python is not None:
        if not callable(python):
            raise ArgumentError(f"xlc.ffi.register('{name}'): python must be callable")
        target = FfiTarget(name, backend, "python", python=python,
                           fingerprint=ffi_registry.fingerprint(
                               "python", "", f"{python!r}:{id(python)}".encode()))
    elif shared_library is not None:
        path = Path(shared_library).expanduser().resolve()
        if not path.is_file():
            raise ArgumentError(f"xlc.ffi.register('{name}'): no shared library {path}")
        _check_library_symbol(name, path, sym)
        target = FfiTarget(name, backend, "library", symbol=sym, path=str(path),
                           fingerprint=ffi_registry.fingerprint("library", sym,
                                                                path.read_bytes()))
    else:
        source = "c" if c_source is not None else "llvm"
        obj = _compile_c(name, c_source, list(cflags)) if c_source is not None \
            else _compile_ir(name, llvm_ir or "")
        target = FfiTarget(name, backend, "object", symbol=sym, obj=obj, source=source,
                           fingerprint=ffi_registry.fingerprint("object", sym, obj))
        from xlc.backend_cpu.ffi_cpu import check_object_symbol

        check_object_symbol(target)
    ffi_registry.add(target)
    return target


def unregister(name: str, backend: str = "cpu") -> None:
    """Forget target `name` (programs compiled before keep working in this process)."""
    ffi_registry.remove(name, backend)


def registered(backend: str | None = None) -> list[FfiTarget]:
    """The registrations, sorted by name."""
    return ffi_registry.registered(backend)


def call(name: str, result_shape_dtypes: Any, *args: Any, backend_config: str = "",
         has_side_effect: bool = False) -> Any:
    """In a traced function: a custom-call of target `name` on `args`, returning arrays shaped
    like `result_shape_dtypes` (a ShapeDtype / array, or a tuple or list of them)."""
    from xlc.frontend.ffi_call import custom_call

    return custom_call(name, result_shape_dtypes, args, backend_config, has_side_effect)


# ---- building object code -----------------------------------------------------------------
def _ptx_target(name: str, ptx: str, symbol: str,
                launch: Callable[..., Any] | None) -> FfiTarget:
    """A GPU kernel target: PTX defining `.entry symbol`, checked by ptxas (for the PTX's
    own `.target`) when ptxas is on the PATH, and a launch rule."""
    import re

    if not callable(launch):
        raise ArgumentError(f"xlc.ffi.register('{name}'): a ptx target needs launch=rule, "
                            "(operand dims, result dims) -> (grid, block)")
    if not re.search(rf"\.entry\s+{re.escape(symbol)}\s*\(", ptx):
        raise ArgumentError(f"xlc.ffi.register('{name}'): the PTX has no kernel "
                            f"'.entry {symbol}'")
    from xlc.backend_gpu import nvptx
    from xlc.errors import LoweringError

    if nvptx.ptxas_path() is not None:
        m = re.search(r"\.target\s+sm_(\d+)", ptx)
        try:
            nvptx.ptxas(ptx, int(m.group(1)) if m else 80)
        except LoweringError as e:
            raise ArgumentError(f"xlc.ffi.register('{name}'): ptxas refuses the PTX: {e}") \
                from None
    return FfiTarget(name, "gpu", "ptx", symbol=symbol, obj=ptx.encode(), launch=launch,
                     fingerprint=ffi_registry.fingerprint("ptx", symbol, ptx.encode()))



def _check_library_symbol(name: str, path: Path, symbol: str) -> None:
    import ctypes

    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        raise ArgumentError(f"xlc.ffi.register('{name}'): cannot load {path}: {e}") from None
    if not hasattr(lib, symbol):
        raise ArgumentError(f"xlc.ffi.register('{name}'): {path} has no function '{symbol}'")


def _compile_c(name: str, source: str, cflags: list[str]) -> bytes:
    """Object code of C `source` (position independent, -O2, xlc_ffi.h on the include
    path), by `$CC` or `cc`."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or \
        shutil.which("clang")
    if not cc:
        raise ArgumentError(f"xlc.ffi.register('{name}'): c_source needs a C compiler (cc, gcc "
                            "or clang on the PATH, or $CC)")
    with tempfile.TemporaryDirectory(prefix="xlc-ffi-") as tmp:
        src = Path(tmp) / "target.c"
        out = Path(tmp) / "target.o"
        src.write_text(source)
        cmd = [cc, "-c", "-O2", "-fPIC", "-fno-stack-protector", "-I", include_dir(),
               *cflags, str(src), "-o", str(out)]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            raise ArgumentError(f"xlc.ffi.register('{name}'): the C source does not compile "
                                f"({' '.join(cmd[:1])}):\n{run.stderr.strip()[:2000]}")
        return out.read_bytes()


def _compile_ir(name: str, text: str) -> bytes:
    """Object code of LLVM IR `text` (verified, optimized at O2)."""
    from xlc.codegen import llvm_utils as lu
    from xlc.errors import LoweringError

    try:
        ref = lu.parse_and_verify(text, f"ffi target {name}")
    except LoweringError as e:
        raise ArgumentError(f"xlc.ffi.register('{name}'): the LLVM IR is invalid: {e}") \
            from None
    lu.optimize(ref, 2)
    return lu.emit_object(ref)


