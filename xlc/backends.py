"""The `Backend` protocol and THE one name -> backend table (XLA's `Compiler` registry,
tinygrad's `Device[name]`).

A backend turns an HLO module into something that runs, and packs that into (and unpacks it
from) an `.xlc` file. Everything above the backends (`xlc.api`, `xlc.artifact`, `xlc.cli`)
reaches one only through `get_backend(name)`; no other module keys on backend names.

The built-in backends are named here by "module:attribute" strings and imported on first use,
so `import xlc` loads no backend, and loading an `.xlc` file loads only the backend it names.

A third party plugs in a code generator (as in TVM's bring-your-own-codegen) with
`register_backend(name, factory)`: `factory()` returns an object implementing `Backend`, and
from then on `xlc.jit(f, backend=name)`, `xlc.compile(hlo, backend=name)`, the compile cache,
`.xlc` files and the CLI's `--backend` take the name::

    class MyBackend:          # delegating the parts it does not change to the interpreter
        name = "mine"
        ...
    xlc.backends.register_backend("mine", MyBackend)
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from xlc.errors import ArgumentError

if TYPE_CHECKING:
    import numpy as np

    from xlc.hlo.ir import HloModule
    from xlc.options import CompileOptions


class Executable(Protocol):
    """What `Backend.compile` returns. `optimized` is the optimized module with its schedule
    and buffer assignment (an `xlc.passes.optimize.OptimizedModule`)."""

    optimized: Any

    def run(self, flat_args: list[np.ndarray]) -> list[np.ndarray]:
        """Run on flat, checked arguments (tuple parameters as their leaves); flat outputs."""
        ...


@runtime_checkable
class Backend(Protocol):
    """One compilation target. Methods take the `CompileOptions` of the compile."""

    name: str
    """The table key (`CompileOptions.backend`, `--backend`, `Manifest.backend`)."""
    alignment: int
    """Byte alignment of the buffer slices its code expects (buffer assignment uses it)."""

    def passes(self, options: CompileOptions) -> list[Any]:
        """The HLO pass list (`HloPass` / `FixedPoint` entries) run before code generation."""
        ...

    def optimize(self, module: HloModule, options: CompileOptions) -> Any:
        """Run the pass list on `module` (in place) and assign its buffers: an
        `xlc.passes.optimize.OptimizedModule`."""
        ...

    def compile(self, module: HloModule, options: CompileOptions) -> Executable:
        """An executable for `module` (a private copy: the backend may modify it)."""
        ...

    def target(self, options: CompileOptions) -> dict[str, Any]:
        """What generated code depends on besides the module and the options (the compile
        cache's key includes it): e.g. the host CPU's triple and features."""
        ...

    def dump_stages(self, module: HloModule, options: CompileOptions) -> None:
        """Write the code stages (`.ll`, `.o`, `.ptx`, ...) of `module` under
        `options.dump_to`, next to the HLO dumps (`xlc hlo --dump-to`); a module the backend
        cannot compile only gets a warning."""
        ...

    def pack(self, exe: Any) -> Any:
        """The code of executable `exe` for an `.xlc` file: an `xlc.artifact.store.PackedCode`
        (target, entry symbol, code members)."""
        ...

    def unpack(self, manifest: Any, members: dict[str, bytes], module: HloModule,
               assignment: Any, where: str) -> Any:
        """The runner (`run(flat_args)`) of a checked archive: `module` is its parsed optimized
        HLO, `assignment` its stored buffer assignment, `where` names the file in errors."""
        ...

    def describe(self, members: dict[str, bytes]) -> dict[str, Any]:
        """Extra keys for `xlc inspect --json` of an archive's code members (no code runs)."""
        ...

    def describe_text(self, data: dict[str, Any]) -> list[str]:
        """Lines for the `xlc inspect` report from the keys `describe` added to `data`."""
        ...


# name -> "module:attribute" of a zero-argument factory, or the factory itself. The order is
# the order `--backend` lists them in.
_FACTORIES: dict[str, str | Callable[[], Backend]] = {
    "interpreter": "xlc.interpreter:InterpreterBackend",
    "cpu": "xlc.backend_cpu.backend:CpuBackend",
    "gpu": "xlc.backend_gpu.backend:GpuBackend",
}
_INSTANCES: dict[str, Backend] = {}

DEVICE_ARRAY_BACKEND = "gpu"
"""The backend whose `as_device_array` wraps objects with `__cuda_array_interface__`."""


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    """Make backend `name` available everywhere a backend name is taken.

    `factory()` is called on the first `get_backend(name)` and must return an object with the
    `Backend` protocol's attributes and methods (`name` equal to `name`). Registering a name
    again replaces the backend (its next `get_backend` calls the new factory)."""
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ArgumentError(f"register_backend: backend names are letters, digits, '_' and "
                            f"'-', got {name!r}")
    if not callable(factory):
        raise ArgumentError(f"register_backend: factory for '{name}' is not callable")
    _FACTORIES[name] = factory
    _INSTANCES.pop(name, None)


def unregister_backend(name: str) -> None:
    """Remove a backend registered with `register_backend` (tests use it)."""
    _FACTORIES.pop(name, None)
    _INSTANCES.pop(name, None)


def backend_names() -> tuple[str, ...]:
    """Every backend name, built-in ones first."""
    return tuple(_FACTORIES)


AUTO = "auto"
"""The backend name that means "the GPU when one is usable here, else the CPU"."""


def resolve_backend(name: str) -> str:
    """`name`, or for "auto" "gpu" when the GPU backend finds a usable device (a CUDA device
    and cuda-python) and "cpu" otherwise."""
    if name != AUTO:
        return name
    usable = getattr(get_backend("gpu"), "device_usable", None)
    return "gpu" if callable(usable) and usable() else "cpu"


def get_backend(name: str) -> Backend:
    """The backend called `name` (created on first use). ArgumentError for an unknown name,
    listing the known ones."""
    backend = _INSTANCES.get(name)
    if backend is not None:
        return backend
    factory = _FACTORIES.get(name)
    if factory is None:
        raise ArgumentError(f"unknown backend '{name}' (known: "
                            f"{', '.join(sorted(_FACTORIES))})")
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    backend = factory()
    _INSTANCES[name] = backend
    return backend


def as_device_array(x: Any) -> Any:
    """`x` (an object with `__cuda_array_interface__`) as an `xlc.DeviceArray`, without a copy
    (through the backend that owns device memory)."""
    return get_backend(DEVICE_ARRAY_BACKEND).as_device_array(x)  # type: ignore[attr-defined]


__all__ = ["AUTO", "Backend", "Executable", "as_device_array", "backend_names", "get_backend",
           "register_backend", "resolve_backend", "unregister_backend"]
