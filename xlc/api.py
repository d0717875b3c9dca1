"""The user-facing staging API: `jit` (trace -> `Lowered` -> `Compiled`), `compile` for HLO text
or modules, `load` for `.xlc` files (`ShapeDtype` and argument checks:
`xlc.frontend.arguments`).

Backends are reached only through `xlc.backends.get_backend(name)`: its `compile(module,
options)` returns an executable with `run(flat_args: list[np.ndarray]) -> list[np.ndarray]`
(tuple results flattened in order) and `optimized`. Compiling for a GPU needs neither a GPU
nor cuda-python; running raises XlcError("no CUDA device available: ...") without them.

Calling conventions: a jitted function's `Compiled` takes the *dynamic* arguments only (static
ones are baked in, as in JAX's AOT API); Python scalars are weakly typed (int -> s32, float ->
f32) and part of the signature by dtype, not value.
"""
from __future__ import annotations

import functools
import inspect
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlc.backends import Executable, get_backend, resolve_backend
from xlc.errors import ArgumentError
from xlc.frontend import pytree
from xlc.frontend.arguments import (
    convert_arg,
    fast_signature,
    flat_call_args,
    leaf_aval,
    leaf_labels,
    param_names,
    shape_tree,
)
from xlc.frontend.staging import Aval, check_argnums, trace_to_module
from xlc.hlo.ir import HloModule, IOAlias
from xlc.hlo.shape import Shape
from xlc.memory_analysis import MemoryAnalysis
from xlc.options import CompileOptions, default_options, parse_bytes

log = logging.getLogger("xlc.api")


# ---- backends ------------------------------------------------------------------------------------
def _make_executable(module: HloModule, backend: str, options: CompileOptions) -> Executable:
    """`backend`'s executable for `module` (a private copy, which the backend may modify)."""
    return get_backend(backend).compile(module, options)


def optimize_module(module: HloModule, backend: str | None = None,
                    options: CompileOptions | None = None, **overrides: Any) -> Any:
    """Run `backend`'s HLO pass pipeline on `module` (in place) and assign its buffers.

    Returns an `xlc.passes.optimize.OptimizedModule` (`.module`, `.assignment`,
    `.memory_stats()`); `overrides` replace CompileOptions fields (e.g. `dump_to=`)."""
    opts = options or default_options()
    if backend is not None:
        opts = opts.replace(backend=backend)
    if overrides:
        opts = opts.replace(**overrides)
    return get_backend(opts.backend).optimize(module, opts)


def _verify(module: HloModule, options: CompileOptions) -> None:
    if options.verify:
        from xlc.hlo.verifier import verify_module

        verify_module(module)


class Compiled:
    """An executable for one signature: `__call__(*args)` runs it; `as_text()` is its HLO."""

    def __init__(self, module: HloModule, options: CompileOptions, backend: str,
                 in_tree: pytree.TreeDef | None = None, in_avals: Sequence[Aval] | None = None,
                 out_tree: pytree.TreeDef | None = None, name: str | None = None,
                 arg_names: Sequence[str] | None = None):
        assert module.entry is not None and module.entry.root is not None
        self.module = module
        self.options = options
        self.backend = backend
        self.name = name or module.name
        params = module.entry.parameters
        # HLO modules take one argument per entry parameter; a tuple-shaped parameter takes a
        # (nested) Python tuple, checked and passed to the backend as its leaves in order.
        self.in_avals: list[Aval] = list(in_avals) if in_avals is not None else [
            Aval(leaf.element_type, leaf.dims) if leaf.is_array else None  # type: ignore
            for p in params for _, leaf in p.shape.leaves()]
        self._param_trees = [shape_tree(p.shape) for p in params]
        self.in_tree = in_tree
        self.out_tree = out_tree or shape_tree(module.entry.root.shape)
        self.arg_names = list(arg_names or [])
        # The backend optimizes a copy: `module` stays the traced/parsed program. With a
        # persistent cache (options.cache_dir) a hit loads the stored executable instead.
        t0 = time.perf_counter()
        if options.cache_dir:
            from xlc.artifact.cache import cached_executable

            self._exe = cached_executable(module, backend, options, _make_executable)
        else:
            self._exe = _make_executable(module.clone(), backend, options)
        self.compile_seconds = time.perf_counter() - t0

    @property
    def input_shapes(self) -> tuple[Shape, ...]:
        """The entry parameters' shapes, in parameter order."""
        assert self.module.entry is not None
        return tuple(p.shape for p in self.module.entry.parameters)

    def optimized(self) -> Any:
        """The optimized module the backend runs, with its schedule and buffer assignment
        (an `xlc.passes.optimize.OptimizedModule`)."""
        return self._exe.optimized

    def as_text(self) -> str:
        """The optimized, scheduled module as HLO text."""
        from xlc.hlo.printer import print_module

        return print_module(self.optimized().module)

    def memory_stats(self) -> dict[str, int]:
        """`parameter_bytes`, `output_bytes`, `temp_bytes`, `constant_bytes`, `alias_bytes`,
        `peak_bytes` (and counts) of the optimized module's buffer assignment."""
        return dict(self.optimized().memory_stats())

    def memory_analysis(self) -> MemoryAnalysis:
        """The executable's memory with the field names of JAX's `Compiled.memory_analysis()`
        (bytes): `argument_size_in_bytes`, `output_size_in_bytes`, `alias_size_in_bytes`,
        `temp_size_in_bytes`, `generated_code_size_in_bytes` (the object code where the
        backend has one, else 0), `peak_memory_in_bytes`; `host_temp_size_in_bytes` holds
        values offloaded to host memory (GPU, under a memory limit), the other host_* fields
        are 0."""
        code = getattr(self._exe, "object_code", None)
        return MemoryAnalysis.from_stats(self.memory_stats(), len(code()) if callable(code)
                                         else 0)

    def cost_analysis(self) -> dict[str, float]:
        """The optimized module's cost with JAX's keys: `flops`, `transcendentals`,
        `bytes accessed` (`xlc.hlo.cost_analysis`: XLA's counting rules; fused values move no
        bytes)."""
        from xlc.hlo.cost_analysis import cost_analysis

        return cost_analysis(self.optimized().module)

    def buffer_assignment_report(self) -> str:
        """The buffer-assignment report of the optimized module."""
        return str(self.optimized().assignment.report())

    def serialize(self, path: str) -> None:
        """Write this executable to `path` as an `.xlc` file (see `xlc.artifact.store`;
        atomically: temp file then rename); `xlc.load` reads it back without tracing, passes
        or LLVM optimization. ArtifactError when its backend cannot be serialized."""
        from xlc.fileio import write_bytes_atomic

        raw = self.archive_bytes()
        write_bytes_atomic(path, raw)
        log.info("wrote %s (%d bytes)", path, len(raw))

    def export(self, directory: str | os.PathLike[str], name: str, *, static: bool = True,
               shared: bool = True, force: bool = False) -> list[Any]:
        """Write `name.h`, `libname.a` / `libname.so` and README.txt into `directory`: this
        program as a C library that runs without Python (docs/export.md); returns the paths.
        ArgumentError for a backend without native export (CPU only for now)."""
        export = getattr(get_backend(self.backend), "export_library", None)
        if export is None:
            raise ArgumentError(f"{self.name}: native export is CPU-only for now (this "
                                f"executable is for backend '{self.backend}')")
        return list(export(self._exe, directory, name, static=static, shared=shared,
                           force=force))

    def archive_bytes(self) -> bytes:
        """The bytes of this executable's `.xlc` file."""
        from xlc.artifact.store import build_archive, signature_of

        raw = getattr(self, "_artifact_bytes", None)
        if raw is None:
            raw = build_archive(self._exe, self.backend, signature_of(self), self.options,
                                {"compile_s": float(getattr(self, "compile_seconds", 0.0))})
        return raw

    def _flat_args(self, args: tuple, kwargs: dict) -> list[np.ndarray]:
        return flat_call_args(self.name, args, kwargs, self.in_tree, self._param_trees,
                              self.in_avals, self.arg_names)

    def call_flat(self, flat: list[np.ndarray]) -> Any:
        """Run with already checked flat arguments; returns the output pytree."""
        results = self._exe.run(flat)
        if self.out_tree.kind == "leaf" and len(results) == 1:
            return results[0]
        return pytree.unflatten(self.out_tree, results)

    _fast_keys: frozenset = frozenset()  # fast_signature keys of checked numpy-only calls

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.call_flat(self._checked_flat(args, kwargs))

    def _checked_flat(self, args: tuple, kwargs: dict) -> list[Any]:
        """The flat arguments of a call. Numpy and DeviceArray leaves whose dtypes and shapes
        were checked before (converting them would return them unchanged) take the fast path:
        no avals, labels or shape text per call."""
        sig = None if kwargs else fast_signature(args, frozenset())
        if sig is not None and sig[0] in self._fast_keys:
            return sig[1]
        flat = self._flat_args(args, kwargs)
        if sig is not None and len(self._fast_keys) < 8 and \
                all(type(x) is np.ndarray or getattr(type(x), "xlc_device_array", False)
                    for x in sig[1]):
            self._fast_keys = self._fast_keys | {sig[0]}
        return flat

    def executable(self) -> Any:
        """The backend's executable (e.g. an `xlc.backend_gpu.GpuExecutable`, with its PTX,
        kernels and thunk schedule), also for an executable loaded from a file or the cache."""
        return getattr(self._exe, "runner", self._exe)

    def call_on_device(self, *args: Any, **kwargs: Any) -> Any:
        """Like calling, but the results stay on the GPU: an output pytree of
        `xlc.DeviceArray`, returned as soon as the work is queued (`block_until_ready()` or
        `to_numpy()` wait; GPU backend only, ArgumentError otherwise). Arguments may be numpy
        arrays or device arrays; a donated argument (`donate_argnums`) that is an
        `xlc.DeviceArray` owning its buffer becomes the result's storage and is deleted, as
        in JAX (other donated arguments are copied)."""
        run = getattr(self.executable(), "run_on_device", None)
        if run is None:
            raise ArgumentError(f"{self.name}: results can stay on the device only with "
                                f"backend='gpu' (this executable is for '{self.backend}')")
        return pytree.unflatten(self.out_tree, run(self._checked_flat(args, kwargs), donate=True))

    def __repr__(self) -> str:
        return f"<Compiled {self.name} on {self.backend}>"


class Lowered:
    """A traced (unoptimized) module for one signature; `compile()` makes it runnable."""

    def __init__(self, module: HloModule, options: CompileOptions, backend: str,
                 in_tree: pytree.TreeDef, in_avals: Sequence[Aval], out_tree: pytree.TreeDef,
                 name: str, arg_names: Sequence[str]):
        self.module = module
        self.options = options
        self.backend = backend
        self.in_tree = in_tree
        self.in_avals = list(in_avals)
        self.out_tree = out_tree
        self.name = name
        self.arg_names = list(arg_names)

    def as_text(self) -> str:
        """The traced module as HLO text."""
        from xlc.hlo.printer import print_module

        return print_module(self.module)

    def compile(self) -> Compiled:
        """Build the executable for the chosen backend."""
        return Compiled(self.module, self.options, self.backend, self.in_tree, self.in_avals,
                        self.out_tree, self.name, self.arg_names)


# ---- jit -------------------------------------------------------------------------------------
_FAST_ENTRIES = 256
"""Fast-path keys kept per jitted function (dict insertion orders and static values may give
several keys per signature)."""


def _norm_nums(nums: int | Sequence[int] | None) -> tuple[int, ...]:
    if nums is None:
        return ()
    return (int(nums),) if isinstance(nums, (int, np.integer)) else tuple(int(n) for n in nums)


class Jitted:
    """A function staged by `xlc.jit`: traces and compiles once per signature (argument pytree
    structure, shapes and dtypes, static argument values) and runs the cached executable."""

    def __init__(self, fn: Callable[..., Any], static_argnums: Sequence[int] = (),
                 static_argnames: Sequence[str] = (), donate_argnums: Sequence[int] = (),
                 backend: str | None = None, options: CompileOptions | None = None):
        if not callable(fn):
            raise ArgumentError(f"jit: expected a function, got {type(fn).__name__} {fn!r}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = getattr(fn, "__name__", "fn")
        if self.name == "<lambda>":
            self.name = "lambda"
        self.options = options or default_options()
        self.backend = resolve_backend(backend or self.options.backend)
        get_backend(self.backend)  # ArgumentError listing the known names
        try:
            self._signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            self._signature = None
        all_params = list(self._signature.parameters.values()) if self._signature else []
        params = [p for p in all_params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self._pos_names = [p.name for p in params]
        nums = set(_norm_nums(static_argnums))
        names = {static_argnames} if isinstance(static_argnames, str) else set(static_argnames)
        for n in list(nums):
            if 0 <= n < len(params):
                names.add(params[n].name)
        for i, p in enumerate(params):
            if p.name in names:
                nums.add(i)
        self.static_argnums = frozenset(nums)
        self.static_argnames = frozenset(names)
        self.donate_argnums = frozenset(_norm_nums(donate_argnums))
        if self._signature is not None:
            check_argnums(self.name, all_params, self.static_argnums, self.static_argnames,
                           self.donate_argnums)
        self._cache: dict[Any, Compiled] = {}
        self._fast: dict[tuple, Compiled] = {}
        """`fast_signature` key -> executable: calls whose signature was checked once."""
        self._statics_by_len: dict[int, frozenset[int]] = {}
        self.hits = 0
        self.misses = 0

    def _split(self, args: tuple, kwargs: dict) -> tuple[tuple, dict, tuple]:
        n = len(args)
        statics = {i % n if n else i for i in self.static_argnums if -n <= i < n}
        dyn_args = tuple(a for i, a in enumerate(args) if i not in statics)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        key: list[Any] = []
        for i in sorted(statics):
            key.append(("pos", i, self._hashable(args[i], f"static argument {i}")))
        for k in sorted(kwargs):
            if k in self.static_argnames:
                key.append(("kw", k, self._hashable(kwargs[k], f"static argument '{k}'")))
        return dyn_args, dyn_kwargs, tuple(key)

    def _hashable(self, v: Any, what: str) -> Any:
        try:
            hash(v)
        except TypeError:
            raise ArgumentError(f"{self.name}: {what} must be hashable, got unhashable "
                                f"{type(v).__name__} {v!r}; use a tuple or mark it dynamic"
                                ) from None
        return v

    def _rebuild(self, args: tuple, kwargs: dict, dyn_args: tuple, dyn_kwargs: dict
                 ) -> tuple[tuple, dict]:
        it = iter(dyn_args)
        n = len(args)
        statics = {i % n for i in self.static_argnums if -n <= i < n}
        full = tuple(args[i] if i in statics else next(it) for i in range(n))
        kw = {k: (kwargs[k] if k in self.static_argnames else dyn_kwargs[k]) for k in kwargs}
        return full, kw

    def _arg_names(self, args: tuple) -> list[str]:
        n = len(args)
        statics = {i % n for i in self.static_argnums if -n <= i < n}
        return [self._pos_names[i] if i < len(self._pos_names) else ""
                for i in range(n) if i not in statics]

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """Trace for the signature of `args` (arrays, scalars or ShapeDtype)."""
        return self._lower(args, kwargs, allow_abstract=True)

    def _check_call(self, args: tuple, kwargs: dict) -> None:
        """ArgumentError for a call that does not fit the function's signature (instead of a
        TypeError from inside the trace)."""
        if self._signature is None:
            return
        try:
            self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentError(f"{self.name}: {e}") from None

    def _lower(self, args: tuple, kwargs: dict, allow_abstract: bool) -> Lowered:
        self._check_call(args, kwargs)
        dyn_args, dyn_kwargs, _ = self._split(args, kwargs)
        leaves, in_tree = pytree.flatten((dyn_args, dyn_kwargs))
        labels = leaf_labels(in_tree, self._arg_names(args))
        avals = [leaf_aval(x, f"{self.name}: {lab}", allow_abstract)
                 for x, lab in zip(leaves, labels)]

        def staged(a: tuple, k: dict) -> Any:
            full, kw = self._rebuild(args, kwargs, a, k)
            return self.fn(*full, **kw)

        log.debug("tracing %s for %s", self.name, [str(a) for a in avals])
        traced = trace_to_module(staged, in_tree, avals, self.name,
                                 param_names(in_tree, self._arg_names(args)), user_fn=self.fn)
        self._add_aliases(traced, dyn_args, args)
        _verify(traced.module, self.options)
        return Lowered(traced.module, self.options, self.backend, in_tree, avals,
                       traced.out_tree, self.name, self._arg_names(args))

    def _add_aliases(self, traced: Any, dyn_args: tuple, args: tuple) -> None:
        if not self.donate_argnums:
            return
        n = len(args)
        statics = {i % n for i in self.static_argnums if -n <= i < n}
        donated: list[int] = []
        param = 0
        for i in range(n):
            if i in statics:
                continue
            count = len(pytree.flatten(args[i])[0])
            if i in self.donate_argnums or i - n in self.donate_argnums:
                donated += range(param, param + count)
            param += count
        module = traced.module
        params = module.entry.parameters
        used: set[int] = set()
        for p in donated:
            for j, out in enumerate(traced.out_avals):
                if j not in used and out.shape.compatible(params[p].shape):
                    used.add(j)
                    idx = (j,) if traced.root_is_tuple else ()
                    module.input_output_alias.append(IOAlias(idx, p, ()))
                    break

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from xlc.frontend.tracer import current_builder

        if current_builder() is not None:  # nested jit: inline into the outer trace
            return self.fn(*args, **kwargs)
        # The fast path: a signature checked before (plain numpy leaves, positional args).
        sig = None if kwargs else fast_signature(args, self._statics(len(args)))
        if sig is not None:
            try:
                fast = self._fast.get(sig[0])
            except TypeError:  # an unhashable static argument: the checked path says so
                sig = fast = None
            if fast is not None and sig is not None:
                self.hits += 1
                return fast.call_flat(sig[1])
        dyn_args, dyn_kwargs, static_key = self._split(args, kwargs)
        leaves, in_tree = pytree.flatten((dyn_args, dyn_kwargs))
        labels = leaf_labels(in_tree, self._arg_names(args))
        avals = tuple(leaf_aval(x, f"{self.name}: {lab}", False)
                      for x, lab in zip(leaves, labels))
        key = (in_tree, avals, static_key)
        compiled = self._cache.get(key)
        if compiled is None:
            self.misses += 1
            log.debug("jit(%s): cache miss #%d for (%s) static=%s", self.name, self.misses,
                      ", ".join(str(a) + ("~" if a.weak else "") for a in avals), static_key)
            if self.options.explain_cache_misses:  # docs/profiling.md
                from xlc.frontend.cache_miss import explain_miss

                explain_miss(self, self.name, self.fn, key, labels, self._pos_names)
            compiled = self._lower(args, kwargs, allow_abstract=False).compile()
            self._cache[key] = compiled
        else:
            self.hits += 1
        flat = [convert_arg(x, av, f"{self.name}: {lab}")
                for x, av, lab in zip(leaves, avals, labels)]
        if sig is not None and len(self._fast) < _FAST_ENTRIES:
            self._fast[sig[0]] = compiled  # its leaves are what convert_arg made of them
        return compiled.call_flat(flat)

    def _statics(self, n: int) -> frozenset[int]:
        """The static positions of a call with `n` positional arguments."""
        statics = self._statics_by_len.get(n)
        if statics is None:
            statics = frozenset(i % n for i in self.static_argnums if -n <= i < n)
            self._statics_by_len[n] = statics
        return statics

    def __repr__(self) -> str:
        return f"<xlc.jit({self.name}) backend={self.backend} cache={len(self._cache)}>"

    def cache_info(self) -> dict[str, int]:
        """{'hits', 'misses', 'size'} of the per-signature cache."""
        return {"hits": self.hits, "misses": self.misses, "size": len(self._cache)}

    def clear_cache(self) -> None:
        self._cache.clear()
        self._fast.clear()


def jit(fn: Callable[..., Any] | None = None, *, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (), donate_argnums: int | Sequence[int] = (),
        backend: str | None = None, memory_limit: int | str | None = None) -> Any:
    """Stage `fn` for compilation (usable as `@jit` or `@jit(static_argnums=...)`).

    Static arguments must be hashable and are part of the cache key; donated arguments are
    recorded as `input_output_alias` entries for outputs of identical shape and dtype.
    `memory_limit` (bytes, or a string such as "512MiB") bounds the program's peak memory
    (CompileOptions.memory_limit: rematerialization and the other memory passes run until the
    plan fits)."""
    options = None
    if memory_limit is not None:
        limit = (parse_bytes(memory_limit, "jit: memory_limit") if isinstance(memory_limit, str)
                 else memory_limit)
        options = default_options().replace(memory_limit=limit)

    def wrap(f: Callable[..., Any]) -> Jitted:
        return Jitted(f, _norm_nums(static_argnums), static_argnames,
                      _norm_nums(donate_argnums), backend, options)

    return wrap if fn is None else wrap(fn)


def compile(hlo: str | HloModule, backend: str | None = None,  # noqa: A001
            options: CompileOptions | None = None) -> Compiled:
    """Compile HLO text (parsed with `xlc.hlo.parser.parse_module`) or a module for `backend`
    (a name in `xlc.backends`; default: the options' backend, the CPU unless XLC_FLAGS says
    otherwise). The module is verified first (a malformed module is a VerificationError naming
    the instruction, never a wrong answer). The result takes the entry parameters positionally
    and returns an array or (nested) tuple of arrays."""
    opts = options or default_options()
    backend = resolve_backend(backend or opts.backend)
    if isinstance(hlo, str):
        from xlc.hlo.parser import parse_module

        module = parse_module(hlo)
    elif isinstance(hlo, HloModule):
        module = hlo
    else:
        raise ArgumentError(f"compile: expected HLO text or an HloModule, got "
                            f"{type(hlo).__name__}")
    from xlc.hlo.verifier import verify_module

    verify_module(module)
    return Compiled(module, opts, backend)


class LoadedExecutable(Compiled):
    """A `Compiled` read back from an `.xlc` file: same call signature (pytree, shapes,
    dtypes, argument checks), `memory_stats()`, `as_text()`, `buffer_assignment_report()`,
    plus `manifest` and `load_seconds`."""

    def __init__(self, archive: Any, options: CompileOptions | None = None):
        from xlc.artifact.manifest import spec_to_aval, tree_from_json
        from xlc.artifact.store import executable_from_archive

        t0 = time.perf_counter()
        m = archive.manifest
        exe = executable_from_archive(archive)
        sig = m.signature
        self.manifest = m
        self.module = exe.optimized.module
        self.options = options or default_options()
        self.backend = m.backend
        self.name = sig.name
        self.in_avals = [spec_to_aval(s) for s in sig.inputs]
        assert self.module.entry is not None
        self._param_trees = [shape_tree(p.shape) for p in self.module.entry.parameters]
        self.in_tree = tree_from_json(sig.in_tree) if sig.in_tree is not None else None
        self.out_tree = tree_from_json(sig.out_tree)
        self.arg_names = list(sig.arg_names)
        self.compile_seconds = float(m.compile_seconds.get("compile_s", 0.0))
        self._exe = exe
        self._artifact_bytes = archive.raw
        self.load_seconds = time.perf_counter() - t0

    def __repr__(self) -> str:
        return f"<LoadedExecutable {self.name} on {self.backend}>"


def load_bytes(data: bytes, where: str = "<bytes>", max_bytes: int | None = None
               ) -> LoadedExecutable:
    """Load an `.xlc` archive from bytes (see `load`)."""
    from xlc.artifact.archive import MAX_ARCHIVE_BYTES, read_archive

    return LoadedExecutable(read_archive(data, where,
                                         MAX_ARCHIVE_BYTES if max_bytes is None else max_bytes))


def load(path: str | os.PathLike[str], max_bytes: int | None = None) -> LoadedExecutable:
    """Load a serialized executable (`.xlc`, written by `Compiled.serialize`): a callable with
    the original signature, `memory_stats()`, `as_text()` and `.manifest`. Raises
    ArtifactError for a missing, damaged, tampered or incompatible file before running any
    code, and before decompressing anything for a file whose members declare more than
    `max_bytes` (default `xlc.artifact.archive.MAX_ARCHIVE_BYTES`, 2 GiB) uncompressed."""
    from xlc.artifact.archive import file_bytes

    return load_bytes(file_bytes(path), str(path), max_bytes)
