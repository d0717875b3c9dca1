"""Run-time libraries: generated code that every executable of the process shares.

A library is a module built by a Python function, compiled once per process and linked by
name: the thread pool (`xlc_pool_run_shares`, `xlc_pool_run_slots`, `thread_pool.py`), the
generic packed GEMMs (`xlc_gemm_f32_shares`, `xlc_gemm_f64_shares`, `gemm_lib.py`) and the
vectorised sort (`xlc_vsort_u32`, `xlc_vsort_u64`, `vsort_lib.py`, which calls the pool: a
library names the libraries it `requires`, and they are linked first). Kernels only declare
the symbols they call.

* `ensure(name)` makes a library's symbols resolvable in this process (compiling it into the
  process JIT engine on first use, then registering its addresses with `llvm.add_symbol`, so
  other MCJIT engines - loaded `.xlc` files - link to the same copy);
* `JitEngine.add_module` calls `ensure_for_symbols` with the module's declarations, so
  compiling code that calls a library compiles the library first;
* `object_code(name)` is the library's object code, which `.xlc` files carry
  (`code/lib/<name>.o`) so that loading never runs LLVM's optimizer: `link_object` links that
  object instead when the process does not have the library yet.

Building a library costs LLVM time once per process (the GEMMs ~0.3 s each). With the compile
cache on (`XLC_CACHE_DIR`), its object code is also kept in `<cache>/runtime/`, keyed by the
library's IR, LLVM's version and the host CPU, and later processes link it from there.

The table below is the one place libraries are declared (no registration by import).
"""
from __future__ import annotations

import hashlib
import importlib
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import llvmlite.binding as llvm

from xlc.backend_cpu.jit import jit_engine, linked_engine
from xlc.codegen import llvm_utils as lu
from xlc.errors import ArtifactError

log = logging.getLogger("xlc.backend_cpu")


@dataclass(frozen=True)
class Library:
    """A run-time library: the symbols it exports, the `module:function(*args)` building its
    llvmlite module, the LLVM optimization level it is compiled at and the libraries whose
    symbols it calls (`requires`)."""

    name: str
    exports: tuple[str, ...]
    builder: str
    args: tuple[str, ...] = ()
    opt_level: int = 3
    requires: tuple[str, ...] = ()
    on_load: str = ""
    """`module:function()` called once its symbols are registered in this process (or "")."""


LIBRARIES: dict[str, Library] = {
    lib.name: lib for lib in (
        Library("pool", ("xlc_pool_run_shares", "xlc_pool_run_slots", "xlc_pool_run"),
                "xlc.backend_cpu.thread_pool:build_pool_module",
                opt_level=2),
        Library("gemm_f32", ("xlc_gemm_f32_shares", "xlc_gemm_f32_pack_b", "xlc_gemm_f32"),
                "xlc.backend_cpu.gemm_lib:build_gemm_library",
                ("f32",)),
        Library("gemm_f64", ("xlc_gemm_f64_shares", "xlc_gemm_f64_pack_b", "xlc_gemm_f64"),
                "xlc.backend_cpu.gemm_lib:build_gemm_library",
                ("f64",)),
        Library("vsort32", ("xlc_vsort_u32",), "xlc.backend_cpu.vsort_lib:build_vsort_library",
                ("u32",), requires=("pool",)),
        Library("vsort64", ("xlc_vsort_u64",), "xlc.backend_cpu.vsort_lib:build_vsort_library",
                ("u64",), requires=("pool",)),
        # the run-time profile's recorder (profiled code only: CompileOptions.profile)
        Library("profile", ("xlc_prof_begin", "xlc_prof_end", "xlc_prof_now",
                            "xlc_prof_share_end", "xlc_prof_set_buffer", "xlc_prof_count"),
                "xlc.backend_cpu.profile_lib:build_profile_library", opt_level=2,
                on_load="xlc.backend_cpu.profiler:library_loaded"),
    )
}
_BY_SYMBOL = {sym: lib.name for lib in LIBRARIES.values() for sym in lib.exports}

_lock = threading.RLock()
_optimized_ir: dict[str, str] = {}  # libraries compiled here: their optimized IR
_objects: dict[str, bytes] = {}
_engines: list[llvm.ExecutionEngine] = []  # engines of linked library objects (kept alive)


def library_of(symbol: str) -> str | None:
    """The library exporting `symbol`, or None."""
    return _BY_SYMBOL.get(symbol)


def libraries_for(symbols: Iterable[str]) -> list[str]:
    """The libraries exporting any of `symbols` and the libraries they require, each after
    the libraries it requires (then by name)."""
    out: list[str] = []

    def add(name: str) -> None:
        if name not in out:
            for dep in LIBRARIES[name].requires:
                add(dep)
            out.append(name)

    for name in sorted({n for s in symbols if (n := _BY_SYMBOL.get(s)) is not None}):
        add(name)
    return out


def _present(lib: Library) -> bool:
    return all(llvm.address_of_symbol(s) for s in lib.exports)


def _build(lib: Library) -> str:
    mod_name, fn_name = lib.builder.split(":")
    fn = getattr(importlib.import_module(mod_name), fn_name)
    args = []
    for a in lib.args:
        from xlc.hlo.shape import PrimitiveType

        args.append(PrimitiveType.from_text(a))
    return str(fn(*args))


def ensure(name: str) -> None:
    """Make library `name`'s symbols resolvable in this process (see the module docstring)."""
    lib = LIBRARIES[name]
    with _lock:
        if _present(lib):
            return
        for dep in lib.requires:
            ensure(dep)
        text = _build(lib)
        cached = _cache_file(lib, text)
        if cached is not None and cached.is_file():
            obj = cached.read_bytes()
            try:
                _link(lib, obj, str(cached))
                _objects[name] = obj
                log.debug("run-time library %s linked from the cache", name)
                return
            except ArtifactError as e:
                log.warning("dropping the cached run-time library %s (%s)", cached, e)
        ref = lu.parse_and_verify(text, f"library {name}")
        lu.optimize(ref, lib.opt_level)
        engine = jit_engine()
        engine.add_module(ref)
        for sym in lib.exports:
            llvm.add_symbol(sym, engine.address(sym))
        _optimized_ir[name] = str(ref)
        _loaded(lib)
        log.debug("run-time library %s compiled", name)
        if cached is not None:
            from xlc.fileio import write_bytes_atomic

            try:
                write_bytes_atomic(cached, object_code(name))
            except OSError as e:
                log.warning("cannot cache run-time library %s (%s)", name, e)


def _cache_file(lib: Library, text: str) -> Path | None:
    """Where the compile cache keeps `lib`'s object code, or None when the cache is off."""
    from xlc.options import default_options

    directory = default_options().cache_dir
    if not directory:
        return None
    cpu, features = lu.host_cpu()
    key = hashlib.sha256("\0".join(
        [text, ".".join(map(str, llvm.llvm_version_info)), cpu, features]).encode())
    return Path(directory).expanduser() / "runtime" / f"{lib.name}-{key.hexdigest()[:20]}.o"


def ensure_for_symbols(symbols: Iterable[str]) -> None:
    """`ensure` every library exporting one of `symbols`."""
    for name in libraries_for(symbols):
        ensure(name)


def object_code(name: str) -> bytes:
    """Position-independent object code of library `name` (compiled here if needed)."""
    with _lock:
        obj = _objects.get(name)
        if obj is None:
            if name not in _optimized_ir:
                if _present(LIBRARIES[name]):  # linked from a file: rebuild its code here
                    ref = lu.parse_and_verify(_build(LIBRARIES[name]), f"library {name}")
                    lu.optimize(ref, LIBRARIES[name].opt_level)
                    _optimized_ir[name] = str(ref)
                else:
                    ensure(name)
            ref = lu.parse_and_verify(_optimized_ir[name], f"library {name}")
            obj = lu.emit_object(ref)
            _objects[name] = obj
        return obj


def link_object(name: str, obj: bytes, where: str) -> None:
    """Link library `name` from its object code (from an `.xlc` file) unless this process has
    it already; no LLVM optimization runs. ArtifactError for an unknown library; an object that
    cannot be linked or does not define all of the library's symbols (a file from another
    build of xlc) is replaced by the library compiled here, with a warning."""
    lib = LIBRARIES.get(name)
    if lib is None:
        raise ArtifactError(f"{where}: the file carries an unknown run-time library '{name}'")
    with _lock:
        if not _present(lib):
            try:
                _link(lib, obj, where)
            except ArtifactError as e:
                # A file from another build of xlc (whose library lacks a symbol this one
                # exports, say): the library is generated code, so build this process's own.
                log.warning("%s; compiling the run-time library instead", e)
                ensure(name)
                return
            log.debug("run-time library %s linked from %s", name, where)


def _link(lib: Library, obj: bytes, where: str) -> None:
    """Link `obj` into an engine of its own and register `lib`'s symbols from it."""
    engine = linked_engine(obj, f"{where}: the run-time library '{lib.name}'")
    addrs = {sym: engine.get_function_address(sym) for sym in lib.exports}
    missing = [sym for sym, addr in addrs.items() if not addr]
    if missing:
        raise ArtifactError(f"{where}: the stored run-time library '{lib.name}' does not "
                            f"define {', '.join(missing)}")
    for sym, addr in addrs.items():
        llvm.add_symbol(sym, addr)
    _engines.append(engine)
    _loaded(lib)


def _loaded(lib: Library) -> None:
    """Run `lib.on_load` (its symbols are now resolvable)."""
    if lib.on_load:
        mod_name, fn_name = lib.on_load.split(":")
        getattr(importlib.import_module(mod_name), fn_name)()
