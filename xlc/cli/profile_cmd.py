"""The `xlc profile` verb, `xlc run --profile`, and `module:function` inputs for `run`/`viz`.

* `xlc run INPUT [--inputs in.npz] [--profile out.json]`: INPUT is an `.hlo` file, an `.xlc`
  executable or `module:function` (its positional arguments from `in0, in1, ...`, or shaped by
  `--arg`); with `--profile` the program is compiled with profiling hooks and the run's Chrome
  trace is written to out.json (docs/profiling.md): kernels and pool shares on the cpu
  backend, CUDA-event spans per thunk and stream on the gpu backend.
* `xlc profile INPUT [--inputs in.npz] [--repeat N]`: compiles with profiling hooks, runs
  `--warmup` calls, then `--repeat` calls, and prints the units (kernels) that took the most
  time with their achieved GB/s and GFLOP/s against the machine's copy bandwidth and matmul
  peak (`xlc.profiling.machine_limits`, measured once and cached; `--no-measure` skips them;
  on the gpu backend the device's figures, `xlc.profiling.device_limits`).
  Without `--inputs`, inputs are random (seed 0) of the parameters' shapes.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from xlc.cli.commands import (
    UsageError,
    _options,
    _parse_arg_specs,
    flatten,
    is_artifact,
    load_inputs,
    load_module,
    lower_function,
    write_outputs,
)
from xlc.compile_stages import progress_bar
from xlc.errors import ArgumentError

PROFILED_BACKENDS = ("cpu", "gpu")
"""Backends that record run-time profiles (their recorders: `_recorder`)."""


def _recorder(backend: str) -> Any:
    """The module collecting `backend`'s events (it has `collect() -> Profile`)."""
    if backend == "gpu":
        from xlc.backend_gpu import profile as gpu_profile

        return gpu_profile
    from xlc.backend_cpu import profiler

    return profiler


def _not_profiled(backend: str) -> ArgumentError:
    return ArgumentError(f"run-time profiles are recorded by the cpu and gpu backends only, "
                         f"not '{backend}'")


# ---- argument parsing ------------------------------------------------------------------------
def add_function_args(p: argparse.ArgumentParser) -> None:
    """`--arg` / `--static` for verbs that take `module:function` inputs."""
    p.add_argument("--arg", action="append", metavar="SHAPE",
                   help="for module:function input: shape of the next positional argument, "
                   "e.g. f32[8,128] (repeat)")
    p.add_argument("--static", action="append", metavar="NAME=VALUE",
                   help="for module:function input: a static keyword argument (repeat)")


def add_profile_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `profile` verb."""
    p = sub.add_parser("profile", help="run a program with profiling; print the slowest kernels",
                       description="Compile INPUT (.hlo, .xlc compiled with profiling, or "
                       "module:function) with run-time profiling hooks (cpu or gpu), run it "
                       "and print the kernels that took the most time with their achieved "
                       "GB/s and GFLOP/s against the machine's limits (measured once, cached).")
    p.add_argument("input", help="an .hlo file, an .xlc file or module:function")
    p.add_argument("--inputs", metavar="IN.npz", help="inputs in0, in1, ... (default: random "
                   "arrays of the parameters' shapes, seed 0)")
    p.add_argument("--repeat", type=int, default=10, metavar="N",
                   help="profiled calls (default 10)")
    p.add_argument("--warmup", type=int, default=1, metavar="N",
                   help="calls before the profiled ones (default 1)")
    p.add_argument("--top", type=int, default=15, metavar="K", help="kernels shown per program")
    p.add_argument("--trace", metavar="OUT.json", help="also write the Chrome trace here")
    p.add_argument("--no-measure", action="store_true",
                   help="do not measure the machine's limits (use XLC_MACHINE_LIMITS or the "
                   "cached figures, else print no percentages)")
    p.add_argument("--backend", default=None, help="cpu (the default) or gpu")
    p.add_argument("--cache-dir", metavar="DIR", help="use a persistent compile cache in DIR")
    add_function_args(p)
    p.set_defaults(func=cmd_profile)


# ---- inputs ----------------------------------------------------------------------------------
def is_function_input(path: str) -> bool:
    """Whether INPUT names `module:function` rather than a file."""
    return ":" in path and not Path(path).exists()


def _all_inputs(path: str) -> list[np.ndarray]:
    """Every array of an .npz, which must hold exactly the keys in0 .. in{n-1}."""
    if not Path(path).exists():
        raise ArgumentError(f"{path}: no such file")
    try:
        with np.load(path) as z:
            count = len(z.files)
    except Exception as e:  # numpy raises several unrelated types for bad files
        raise ArgumentError(f"{path}: not a readable .npz file ({e})") from None
    return load_inputs(path, count)


def _random_inputs(avals: list[Any]) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    out = []
    for av in avals:
        dtype = av.shape.dtype
        if dtype.kind == "f" or dtype.kind == "c":
            out.append(rng.standard_normal(av.dims).astype(dtype))
        elif dtype.kind == "b":
            out.append(rng.integers(0, 2, av.dims).astype(dtype))
        else:
            out.append(rng.integers(0, 10, av.dims).astype(dtype))
    return out


def _function_compiled(args: argparse.Namespace, opts: Any,
                       inputs: list[np.ndarray] | None) -> Any:
    """A `Compiled` for `module:function`, shaped by `--arg` or else by the input arrays."""
    if args.arg:
        return lower_function(args, opts, _parse_arg_specs(args.arg)).compile()
    if inputs is None:
        raise UsageError(f"{args.input}: give the argument shapes with --arg (e.g. --arg "
                         "f32[8,128]) or the arguments with --inputs in.npz")
    return lower_function(args, opts, inputs).compile()


def prepare(args: argparse.Namespace, profile: bool, random_ok: bool = False
            ) -> tuple[Any, list[np.ndarray]]:
    """(a runnable `Compiled`, its flat positional inputs) for INPUT (see the module
    docstring); compiled with profiling hooks when `profile`; without `--inputs`, random
    inputs when `random_ok`, else an ArgumentError (unless the program takes none)."""
    import xlc

    opts = _options(args)
    if profile:
        if opts.backend not in PROFILED_BACKENDS:
            raise _not_profiled(opts.backend)
        opts = opts.replace(profile=True)
    arg_given = bool(getattr(args, "arg", None) or getattr(args, "static", None))
    if is_artifact(args.input):
        if arg_given:
            raise UsageError("--arg/--static apply to module:function inputs, not .xlc files")
        exe = xlc.load(args.input)
        if profile and exe.backend not in PROFILED_BACKENDS:
            raise _not_profiled(exe.backend)
        if profile and not exe.manifest.options.get("profile"):
            raise ArgumentError(f"{args.input} was compiled without profiling hooks: profile "
                                "the .hlo file or module:function instead, or compile it with "
                                "XLC_FLAGS=--profile=DIR")
        given = getattr(args, "inputs", None)
        return exe, (load_inputs(given, len(exe.in_avals)) if given or not random_ok
                     else _random_inputs(exe.in_avals))
    if not is_function_input(args.input):
        if arg_given:
            raise UsageError("--arg/--static apply to module:function inputs, not HLO files")
        module = load_module(args.input)
        assert module.entry is not None
        with progress_bar(sys.stderr):  # shown for compiles over ~2 s
            compiled = xlc.compile(module, backend=opts.backend, options=opts)
        if args.inputs or not random_ok:
            return compiled, load_inputs(args.inputs, len(module.entry.parameters))
        return compiled, _random_inputs(compiled.in_avals)
    inputs = _all_inputs(args.inputs) if args.inputs else None
    with progress_bar(sys.stderr):
        compiled = _function_compiled(args, opts, inputs)
    if inputs is None:
        inputs = _random_inputs(compiled.in_avals) if random_ok else \
            load_inputs(None, len(compiled.in_avals))
    elif len(inputs) != len(compiled.in_avals):
        raise ArgumentError(f"{args.inputs}: {len(inputs)} input(s) for {args.input}, which "
                            f"takes {len(compiled.in_avals)} array argument(s)")
    return compiled, inputs


def _run(compiled: Any, inputs: list[np.ndarray]) -> Any:
    from xlc.frontend.arguments import convert_arg

    flat = [convert_arg(x, av, f"input in{i}")
            for i, (x, av) in enumerate(zip(inputs, compiled.in_avals))]
    return compiled.call_flat(flat)


# ---- verbs -----------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
    """`xlc run` for module:function input or with --profile (see the module docstring)."""
    profile_path = getattr(args, "profile", None)
    compiled, inputs = prepare(args, profile=bool(profile_path))
    profiler = _recorder(compiled.backend)
    if profile_path:
        profiler.collect()  # only this run's events
    result = _run(compiled, inputs)
    if profile_path:
        trace = profiler.collect()
        trace.write_chrome_trace(profile_path)
        sys.stderr.write(f"wrote {profile_path}: {len(trace.events)} events of "
                         f"{len(trace.calls())} call(s)\n")
    write_outputs(flatten(result), args.output)
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    """Run INPUT `--warmup` + `--repeat` times with profiling; print the top kernels."""
    from xlc.profiling import MachineLimits, device_limits, machine_limits, report

    if args.repeat < 1 or args.warmup < 0 or args.top < 1:
        raise UsageError("--repeat and --top must be at least 1, --warmup at least 0")
    compiled, inputs = prepare(args, profile=True, random_ok=True)
    profiler = _recorder(compiled.backend)
    for _ in range(args.warmup):
        _run(compiled, inputs)
    profiler.collect()  # drop the warm-up calls (and anything before)
    for _ in range(args.repeat):
        _run(compiled, inputs)
    profile = profiler.collect()
    limits: MachineLimits | None
    if compiled.backend == "gpu":
        from xlc.backends import get_backend

        limits = device_limits(get_backend("gpu").roofline)  # type: ignore[attr-defined]
    else:
        limits = machine_limits(measure=not args.no_measure)
    sys.stdout.write(report(profile, limits, args.top))
    if args.trace:
        profile.write_chrome_trace(args.trace)
        sys.stdout.write(f"wrote {args.trace}\n")
    return 0


def function_module(args: argparse.Namespace) -> Any:
    """The traced (unoptimized) HloModule of `module:function` shaped by `--arg` (for
    `xlc viz`)."""
    if not args.arg:
        raise UsageError(f"{args.input}: give the argument shapes with --arg (e.g. --arg "
                         "f32[8,128])")
    return lower_function(args, _options(args), _parse_arg_specs(args.arg)).module
