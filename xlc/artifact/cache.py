"""The persistent compile cache: compiled executables stored as `.xlc` files in a directory.

Off by default; on when `CompileOptions.cache_dir` is set (from `XLC_CACHE_DIR`, or passed
explicitly). An entry is keyed by
* the module fingerprint: sha256 of the printed module with every instruction and computation
  renamed canonically and the module name and metadata dropped (so the same program traced
  from differently named functions or variables hits the same entry),
* `CompileOptions.cache_key()` (the options that influence code),
* the xlc version, the backend and the target (triple, CPU name and features and the thread
  count for the CPU).
Writers write a temp file and rename it into place, so any number of processes may fill the
same key at once and readers never see a partial entry. A hit costs one file read, the
checksum checks and loading the code (no passes, no LLVM). A damaged entry is deleted and
treated as a miss. Every entry records its own key in its manifest (`Manifest.cache_key`); a
hit whose recorded key differs from the key looked up (an entry copied, renamed or swapped
into another's file, or written by an xlc that recorded none) is a logged miss, and the
recompiled program replaces it: a cache never runs another program than the one asked for.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xlc.errors import XlcError
from xlc.hlo.ir import HloModule
from xlc.options import CompileOptions

log = logging.getLogger("xlc.compile_cache")

SUFFIX = ".xlc"
# Process-wide counters (tests and `-v` logging read them).
STATS: dict[str, int] = {"hits": 0, "misses": 0, "writes": 0, "errors": 0, "mismatches": 0}


# A quoted string (kept as is) or an instruction/computation name as the printer writes it.
_NAME_OR_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|%[\w.\-]+')
# A computation's header line; its signature (parameter names and shapes) is dropped: the
# parameter instructions repeat it.
_COMPUTATION_HEAD = re.compile(r"^((?:ENTRY )?%[\w.\-]+) .*\{$", re.MULTILINE)


def module_fingerprint(module: HloModule) -> str:
    """A name-independent sha256 of `module`: the module printed without metadata, module
    name, stack frames and computation signatures, every `%name` (instructions and
    computations) replaced by its order of first appearance (`%n0`, `%n1`, ...; quoted
    strings untouched), then hashed.
    Renaming is a bijection, so only programs that differ in names alone share a
    fingerprint. Requires a printable module; does not modify or copy it."""
    from xlc.hlo.printer import print_module

    text = print_module(module, print_metadata=False)
    if module.stack_frames:
        text = text.replace(module.stack_frames, "", 1)
    head = f"HloModule {module.name}"
    text = text[len(head):] if text.startswith(head) else text
    text = _COMPUTATION_HEAD.sub(r"\1 {", "\n".join(ln for ln in text.splitlines() if ln))
    names: dict[str, str] = {}

    def canonical(m: re.Match[str]) -> str:
        token = m.group(0)
        return token if token[0] == '"' else names.setdefault(token, f"%n{len(names)}")

    return hashlib.sha256(_NAME_OR_STRING.sub(canonical, text).encode()).hexdigest()


def target_description(backend: str, options: CompileOptions) -> dict[str, Any]:
    """What the generated code depends on besides the module and options (`Backend.target`:
    for the CPU the host triple, CPU name and features, and the thread count baked into
    parallel kernels)."""
    from xlc.backends import get_backend

    return get_backend(backend).target(options)


def cache_key(module: HloModule, backend: str, options: CompileOptions) -> str:
    """The hex key of an entry (see the module docstring for what goes in)."""
    from xlc import __version__

    parts = {"module": module_fingerprint(module), "options": options.cache_key(),
             "xlc": __version__, "backend": backend,
             "target": target_description(backend, options),
             "ffi": ffi_fingerprints(module, backend)}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def ffi_fingerprints(module: HloModule, backend: str) -> dict[str, str]:
    """{target: fingerprint} of the user custom-call targets (`xlc.ffi`) the module calls:
    new code for a target is a new key."""
    from xlc.hlo.ffi_registry import fingerprints
    from xlc.hlo.opcodes import Opcode

    names = [str(i.attrs.get("custom_call_target", "")) for c in module.computations
             for i in c.instructions if i.opcode is Opcode.CUSTOM_CALL]
    return fingerprints(names, backend)


@dataclass
class CacheEntry:
    """One file of the cache (for `xlc cache ls`)."""

    key: str
    path: Path
    size: int
    mtime: float
    module_name: str = "?"
    backend: str = "?"


class CompileCache:
    """A cache directory. Methods never raise for a damaged entry (it is a miss)."""

    def __init__(self, directory: str | os.PathLike[str]):
        self.dir = Path(directory).expanduser()

    def path_of(self, key: str) -> Path:
        """The file of entry `key`."""
        return self.dir / f"{key}{SUFFIX}"

    def get(self, key: str) -> Any | None:
        """The stored executable for `key` (an `xlc.artifact.store.StoredExecutable`) or None: None
        for a missing or damaged entry, and for an entry whose manifest records another key
        (checked before any of its code is loaded)."""
        from xlc.artifact.archive import read_archive
        from xlc.artifact.store import executable_from_archive

        path = self.path_of(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("compile cache: cannot read %s (%s)", path, e)
            return None
        try:
            archive = read_archive(data, str(path))
            if archive.manifest.cache_key != key:
                STATS["mismatches"] += 1
                log.warning("compile cache: entry %s records key %s, not its own; treating it "
                            "as a miss", path, archive.manifest.cache_key)
                return None
            return executable_from_archive(archive)
        except XlcError as e:
            STATS["errors"] += 1
            log.warning("compile cache: dropping damaged entry %s (%s)", path, e)
            try:
                path.unlink()
            except OSError:
                pass
            return None

    def put(self, key: str, data: bytes) -> None:
        """Store archive bytes under `key` (write-then-rename; no fsync: an entry lost to a
        crash is a miss)."""
        from xlc.fileio import write_bytes_atomic

        write_bytes_atomic(self.path_of(key), data, durable=False)
        STATS["writes"] += 1

    def entries(self) -> list[CacheEntry]:
        """Every entry, oldest first, with its module name and backend when readable."""
        from xlc.artifact.archive import read_manifest_bytes

        out: list[CacheEntry] = []
        if not self.dir.is_dir():
            return out
        for p in self.dir.glob(f"*{SUFFIX}"):
            try:
                st = p.stat()
            except OSError:
                continue
            e = CacheEntry(p.stem, p, st.st_size, st.st_mtime)
            try:
                with zipfile.ZipFile(p) as z:  # the manifest only, its size capped
                    raw = json.loads(read_manifest_bytes(z, str(p)))
                e.module_name = str(raw.get("module_name", "?"))
                e.backend = str(raw.get("backend", "?"))
            except (OSError, zipfile.BadZipFile, XlcError, ValueError, AttributeError):
                e.module_name = "<damaged>"
            out.append(e)
        return sorted(out, key=lambda e: (e.mtime, e.key))

    def clear(self) -> int:
        """Remove every entry, the cached run-time libraries (`runtime/`) and stale temp
        files; returns the number of entries removed."""
        n = 0
        if not self.dir.is_dir():
            return 0
        runtime = self.dir / "runtime"
        if runtime.is_dir():
            for p in runtime.iterdir():
                try:
                    p.unlink()
                except OSError:
                    pass
        for p in self.dir.iterdir():
            if p.suffix == SUFFIX or (p.name.startswith(".") and p.name.endswith(".tmp")):
                try:
                    p.unlink()
                    n += p.suffix == SUFFIX
                except OSError:
                    pass
        return n

    def info(self) -> dict[str, Any]:
        """{'directory', 'entries', 'total_bytes'}."""
        entries = self.entries()
        return {"directory": str(self.dir), "entries": len(entries),
                "total_bytes": sum(e.size for e in entries)}


def _module_signature(module: HloModule) -> Any:
    from xlc.artifact.manifest import Signature, shape_to_spec, tree_to_json
    from xlc.frontend.arguments import shape_tree as _shape_tree

    entry = module.entry
    assert entry is not None and entry.root is not None
    ins = [shape_to_spec(p.shape) for p in entry.parameters]
    outs = [shape_to_spec(s) for _i, s in entry.root.shape.leaves()]
    return Signature(name=module.name, out_tree=tree_to_json(_shape_tree(entry.root.shape)),
                     inputs=ins, outputs=[o for o in outs if o is not None])


def cached_executable(module: HloModule, backend: str, options: CompileOptions,
                      make: Callable[[HloModule, str, CompileOptions], Any]) -> Any:
    """The backend executable for `module`: loaded from `options.cache_dir` on a hit, else
    built with `make(module.clone(), backend, options)` and stored. Storing failures (an
    unserializable backend, a read-only directory) are logged, never raised."""
    assert options.cache_dir
    cache = CompileCache(options.cache_dir)
    t0 = time.perf_counter()
    key = cache_key(module, backend, options)
    exe = cache.get(key)
    if exe is not None:
        STATS["hits"] += 1
        log.info("compile cache hit %s for %s (%.1f ms)", key, module.name,
                 1e3 * (time.perf_counter() - t0))
        return exe
    STATS["misses"] += 1
    exe = make(module.clone(), backend, options)
    try:
        from xlc.artifact.store import build_archive

        data = build_archive(exe, backend, _module_signature(module), options,
                             {"compile_s": time.perf_counter() - t0}, cache_key=key)
        cache.put(key, data)
        log.info("compile cache miss %s for %s: stored", key, module.name)
    except (XlcError, OSError) as e:
        log.warning("compile cache: not storing %s (%s)", module.name, e)
    return exe


__all__ = ["CompileCache", "CacheEntry", "STATS", "cache_key",
           "cached_executable", "module_fingerprint", "target_description"]
