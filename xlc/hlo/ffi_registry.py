"""The registry of user custom-call targets (`xlc.ffi.register`): plain data that the
backends, the compile cache and `.xlc` files consult.

A target is implemented per backend by one of
* `library`: a C function `symbol` of the shared library `path` (bound with ctypes where it
  runs; a `.xlc` file records only that the target is needed);
* `object`: a C function `symbol` of object code compiled from C source or LLVM IR when it was
  registered (`obj`; it travels inside `.xlc` files);
* `python`: a Python function on numpy arrays, run as a host call (cannot be serialized);
* `ptx` (GPU): a kernel `symbol` of PTX text (`obj`), launched on the grid and block that
  its `launch` rule gives for the custom-call's shapes when the program is compiled.

Every registration has a `fingerprint` (what it is, not where it came from: the object code's
or library file's hash), which goes into compile-cache keys.
"""
from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from xlc.errors import ArgumentError

KINDS = ("library", "object", "python", "ptx")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,127}$")
SYMBOL_PREFIX = "xlc_ffi."
"""Generated code calls target T through the symbol `xlc_ffi.T`, bound where it runs."""


@dataclass(frozen=True)
class FfiTarget:
    """One registration (see the module docstring)."""

    name: str
    backend: str
    kind: str
    symbol: str = ""
    path: str = ""
    obj: bytes = b""
    source: str = ""  # "c" or "llvm" for object targets
    python: Callable[..., Any] | None = field(default=None, compare=False)
    launch: Callable[..., Any] | None = field(default=None, compare=False)
    fingerprint: str = ""

    @property
    def link_symbol(self) -> str:
        """The symbol generated code calls (`SYMBOL_PREFIX` + name)."""
        return SYMBOL_PREFIX + self.name


_lock = threading.Lock()
_registry: dict[tuple[str, str], FfiTarget] = {}


def check_name(name: str) -> None:
    """ArgumentError unless `name` can be a target name (letters, digits, `_`, `.`, `-`; at
    most 128 characters; not starting with a digit)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ArgumentError(f"xlc.ffi: a custom-call target name must be letters, digits, "
                            f"'_', '.' or '-' (at most 128, not starting with a digit), got "
                            f"{name!r}")


def fingerprint(kind: str, symbol: str, payload: bytes) -> str:
    """The fingerprint of a registration from what defines its code."""
    return hashlib.sha256(b"\0".join([kind.encode(), symbol.encode(), payload])).hexdigest()


def add(target: FfiTarget) -> None:
    """Register (or replace) `target` for its backend."""
    with _lock:
        _registry[(target.backend, target.name)] = target


def remove(name: str, backend: str = "cpu") -> None:
    """Forget the registration of `name` on `backend` (no error when there is none)."""
    with _lock:
        _registry.pop((backend, name), None)


def lookup(name: str, backend: str = "cpu") -> FfiTarget | None:
    """The registration of target `name` on `backend`, or None."""
    with _lock:
        return _registry.get((backend, name))


def registered(backend: str | None = None) -> list[FfiTarget]:
    """Every registration (of one backend), sorted by name."""
    with _lock:
        items = [t for (b, _n), t in _registry.items() if backend is None or b == backend]
    return sorted(items, key=lambda t: (t.backend, t.name))


def fingerprints(names: Iterable[str], backend: str) -> dict[str, str]:
    """{name: fingerprint} of the registered targets among `names` (for cache keys)."""
    out = {}
    for n in sorted(set(names)):
        t = lookup(n, backend)
        if t is not None:
            out[n] = t.fingerprint
    return out
