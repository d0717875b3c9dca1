"""The verbs of the `xlc` console script (argument parsing and exit codes live in main.py).

Each `cmd_*` takes the parsed argparse namespace, writes to stdout, and raises XlcError
subclasses for user errors (main.py turns them into one line on stderr and exit code 1).
"""
from __future__ import annotations

import argparse
import ast
import importlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from xlc.compile_stages import progress_bar
from xlc.errors import ArgumentError, XlcError

log = logging.getLogger("xlc.cli")


class UsageError(XlcError):
    """Bad command-line usage detected after argparse (exit code 2)."""


# ---- helpers ---------------------------------------------------------------------------------
def read_text(path: str) -> str:
    """The text of an input file; ArgumentError for a missing file, directory or binary."""
    p = Path(path)
    if not p.exists():
        raise ArgumentError(f"{path}: no such file")
    if p.is_dir():
        raise ArgumentError(f"{path}: is a directory, expected an HLO text file")
    try:
        return p.read_text()
    except UnicodeDecodeError:
        raise ArgumentError(f"{path}: not a text file (expected HLO text)") from None


def load_module(path: str, verify: bool = True) -> Any:
    """Parse (and verify) an HLO text file."""
    from xlc.hlo.parser import parse_module
    from xlc.hlo.verifier import verify_module

    module = parse_module(read_text(path), filename=path)
    if verify:
        verify_module(module)
    return module


def is_artifact(path: str) -> bool:
    """Whether `path` names a serialized executable (by suffix, or by zip magic)."""
    if path.endswith(".xlc"):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def load_inputs(path: str | None, n_params: int) -> list[np.ndarray]:
    """Arrays in0..in{n-1} of an .npz (ArgumentError naming missing/extra keys)."""
    if path is None:
        if n_params:
            raise ArgumentError(f"the module takes {n_params} parameter(s): pass --inputs in.npz "
                                f"with keys in0..in{n_params - 1}")
        return []
    if not Path(path).exists():
        raise ArgumentError(f"{path}: no such file")
    try:
        z = np.load(path)  # allow_pickle=False: object arrays are refused below
    except Exception as e:  # numpy raises several unrelated types for bad files
        raise ArgumentError(f"{path}: not a readable .npz file ({e})") from None
    if not isinstance(z, np.lib.npyio.NpzFile):  # a .npy file: one bare array
        raise ArgumentError(f"{path}: a .npy file holds one unnamed array; pass an .npz with "
                            f"keys in0..in{max(n_params - 1, 0)} (numpy.savez(path, in0=...))")
    with z:
        keys = set(z.files)
        missing = [f"in{i}" for i in range(n_params) if f"in{i}" not in keys]
        if missing:
            raise ArgumentError(f"{path}: missing input key(s) {', '.join(missing)} "
                                f"(the module takes {n_params} parameter(s), keys in0..)")
        extra = sorted(keys - {f"in{i}" for i in range(n_params)})
        if extra:
            raise ArgumentError(f"{path}: unexpected key(s) {', '.join(extra)}; the module takes "
                                f"{n_params} parameter(s) (keys in0..in{n_params - 1})")
        return [_npz_array(z, f"in{i}", path) for i in range(n_params)]


def _npz_array(z: Any, key: str, path: str) -> np.ndarray:
    """Array `key` of an open .npz; ArgumentError for object arrays (which would need
    pickle) and unreadable members."""
    try:
        return np.asarray(z[key])
    except ValueError as e:
        if "allow_pickle" in str(e):
            raise ArgumentError(f"{path}: input {key} is an array of Python objects; inputs "
                                "must be numeric arrays") from None
        raise ArgumentError(f"{path}: input {key} cannot be read ({e})") from None
    except Exception as e:  # a damaged member: zipfile, zlib and numpy's own errors
        raise ArgumentError(f"{path}: input {key} cannot be read ({e})") from None


def flatten(result: object) -> list[np.ndarray]:
    """Leaves of a (nested tuple/list/dict) result, in order."""
    from xlc.frontend import pytree

    leaves, _ = pytree.flatten(result)
    return [np.asarray(x) for x in leaves]


def write_outputs(outputs: list[np.ndarray], path: str | None) -> None:
    """Save outputs as out0.. in an .npz at exactly `path` (`xlc.fileio.write_file_atomic`:
    atomic for regular files, through symlinks and devices), or print them when `path` is
    None."""
    if path:
        from xlc.fileio import write_file_atomic

        arrays = {f"out{i}": o for i, o in enumerate(outputs)}
        write_file_atomic(path, lambda f: np.savez(f, **arrays))  # type: ignore[arg-type]
    else:
        for i, o in enumerate(outputs):
            sys.stdout.write(f"out{i}: {o.dtype}{list(o.shape)}\n{o}\n")


def _options(args: argparse.Namespace, **kw: Any) -> Any:
    from xlc.options import default_options

    opts = default_options()
    cache_dir = getattr(args, "cache_dir", None)
    if cache_dir:
        kw["cache_dir"] = cache_dir
    if getattr(args, "backend", None):
        kw["backend"] = args.backend
    if getattr(args, "memory_limit", None):
        from xlc.options import parse_bytes

        kw["memory_limit"] = parse_bytes(args.memory_limit, "--memory-limit")
    return opts.replace(**kw) if kw else opts


# ---- hlo -------------------------------------------------------------------------------------
def cmd_hlo(args: argparse.Namespace) -> int:
    """Parse, verify and print an HLO file, as parsed or after the backend's pipeline. With a
    dump directory (--dump-to or XLC_FLAGS) the pipeline runs and writes per-pass HLO dumps,
    plus the code stages: .ll / .o for the CPU, .ll / .ptx / .cubin for the GPU."""
    from xlc.hlo.printer import print_module
    from xlc.options import default_options

    dump_to = args.dump_to or default_options().dump_to
    backend = args.backend or default_options().backend
    if args.dump_pass_re and not dump_to:
        raise UsageError("--dump-pass-re needs a dump directory: add --dump-to DIR")
    if is_artifact(args.input):  # the stored optimized program (and its memory report)
        from xlc.artifact.archive import read_archive_file
        from xlc.artifact.manifest import HLO_MEMBER, REPORT_MEMBER

        if args.dump_to or args.stage == "raw":
            raise UsageError("an .xlc file holds only the optimized program: --stage raw and "
                             "--dump-to apply to .hlo input")
        archive = read_archive_file(args.input)
        member = REPORT_MEMBER if args.memory_report else HLO_MEMBER
        sys.stdout.write(archive.members[member].decode().rstrip("\n") + "\n")
        return 0
    module = load_module(args.input)
    stage = args.stage or "raw"
    if stage == "raw" and not args.memory_report and not dump_to:
        sys.stdout.write(print_module(module) + "\n")
        return 0
    from xlc.api import optimize_module

    raw_text = print_module(module) if stage == "raw" else ""
    opts = default_options().replace(backend=backend, dump_to=dump_to)
    if args.dump_pass_re:
        opts = opts.replace(dump_pass_re=args.dump_pass_re)
    if dump_to:
        from xlc.backends import get_backend
        from xlc.passes.pipeline import dump_prefix

        stages = get_backend(backend)
        dump_prefix(opts, module)  # the code stages dump under the id of the HLO dumps
        stages.dump_stages(module, default_options().replace(backend=backend, dump_to=dump_to))
    result = optimize_module(module, options=opts)
    if args.memory_report:
        sys.stdout.write(result.assignment.report() + "\n")
    elif raw_text:
        sys.stdout.write(raw_text + "\n")
    else:
        sys.stdout.write(print_module(result.module) + "\n")
    return 0


# ---- run -------------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
    """Run an HLO file or an .xlc executable on inputs from an .npz; write outputs out0.. to an
    .npz (tuple/pytree results flattened in order)."""
    import xlc
    from xlc.cli import profile_cmd

    if getattr(args, "profile", None) or profile_cmd.is_function_input(args.input):
        return profile_cmd.cmd_run(args)  # module:function input, run-time profile
    if getattr(args, "arg", None) or getattr(args, "static", None):
        raise UsageError("--arg/--static apply to module:function inputs, not files")
    if is_artifact(args.input):
        from xlc.frontend.arguments import convert_arg as _convert_arg

        exe = xlc.load(args.input)
        if args.backend and args.backend not in (exe.backend, "auto"):
            raise ArgumentError(f"{args.input} holds a {exe.backend} executable; --backend "
                                f"{args.backend} does not apply (recompile it for that backend)")
        avals = exe.in_avals
        inputs = load_inputs(args.inputs, len(avals))
        flat = [_convert_arg(x, av, f"{args.input}: input in{i}")
                for i, (x, av) in enumerate(zip(inputs, avals))]
        write_outputs(flatten(exe.call_flat(flat)), args.output)
        return 0
    module = load_module(args.input)
    assert module.entry is not None
    inputs = load_inputs(args.inputs, len(module.entry.parameters))
    opts = _options(args)
    with progress_bar(sys.stderr):  # shown for compiles over ~2 s
        compiled = xlc.compile(module, backend=opts.backend, options=opts)
    write_outputs(flatten(compiled(*inputs)), args.output)
    return 0


# ---- compile ---------------------------------------------------------------------------------
def _parse_static(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise UsageError(f"--static expects NAME=VALUE, got {item!r}")
        try:
            out[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[name] = value
    return out


def _parse_arg_specs(specs: list[str]) -> list[Any]:
    from xlc.errors import ParseError
    from xlc.frontend.arguments import ShapeDtype
    from xlc.hlo.parser import parse_shape

    out = []
    for spec in specs:
        try:
            shape = parse_shape(spec)
        except ParseError:
            raise UsageError(f"--arg expects a shape like f32[8,128], got {spec!r}") from None
        if not shape.is_array:
            raise UsageError(f"--arg {spec!r}: only array shapes are supported")
        out.append(ShapeDtype(shape.dims, shape.element_type))
    return out


def _resolve_function(target: str) -> Any:
    mod_name, _, fn_name = target.partition(":")
    if not mod_name or not fn_name:
        raise UsageError(f"expected an .hlo file or module:function, got {target!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise ArgumentError(f"cannot import module '{mod_name}' ({e})") from None
    obj: Any = mod
    for part in fn_name.split("."):
        if not hasattr(obj, part):
            raise ArgumentError(f"module '{mod_name}' has no attribute '{fn_name}'")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ArgumentError(f"'{target}' is not callable")
    return obj


def lower_function(args: argparse.Namespace, opts: Any, specs: list[Any]) -> Any:
    """`Lowered` of the `module:function` INPUT for `specs` (arrays or ShapeDtypes) and the
    `--static` keyword arguments; a jitted function keeps its decorator's static and donated
    arguments. An exception from the user's function becomes an ArgumentError naming it."""
    from xlc.api import Jitted

    fn = _resolve_function(args.input)
    statics = _parse_static(args.static or [])
    if isinstance(fn, Jitted):  # keep the decorator's static/donated arguments
        jitted = Jitted(fn.fn, tuple(fn.static_argnums), tuple(fn.static_argnames | set(statics)),
                        tuple(fn.donate_argnums), opts.backend, opts)
    else:
        jitted = Jitted(fn, (), tuple(statics), (), opts.backend, opts)
    try:
        return jitted.lower(*specs, **statics)
    except (XlcError, MemoryError, RecursionError):
        raise
    except Exception as e:  # raised by the user's function (or under it) while tracing
        first = (str(e).splitlines() or [""])[0]
        raise ArgumentError(f"{args.input} raised {type(e).__name__} while being traced"
                            f"{': ' + first if first else ''}") from e


def compile_input(args: argparse.Namespace) -> Any:
    """A `Compiled` for the compile verb's INPUT (.hlo, or module:function with --arg specs)."""
    import xlc

    opts = _options(args)
    if args.input.endswith(".hlo") or Path(args.input).is_file():
        if args.arg or args.static:
            raise UsageError("--arg/--static apply to module:function inputs, not HLO files")
        return xlc.compile(load_module(args.input), backend=opts.backend, options=opts)
    return lower_function(args, opts, _parse_arg_specs(args.arg or [])).compile()


def cmd_compile(args: argparse.Namespace) -> int:
    """Compile an HLO file or a Python function to an .xlc executable."""
    t0 = time.perf_counter()
    with progress_bar(sys.stderr):  # shown for compiles over ~2 s
        compiled = compile_input(args)
    compiled.serialize(args.output)
    size = Path(args.output).stat().st_size
    stats = compiled.memory_stats()
    sys.stdout.write(f"wrote {args.output}: {compiled.name} for {compiled.backend}, {size} "
                     f"bytes, compiled in {1e3 * (time.perf_counter() - t0):.1f} ms, peak "
                     f"memory {stats.get('peak_bytes', 0)} bytes\n")
    return 0


def _backend(name: str) -> Any:
    """The backend `name` of a file being inspected (ArtifactError when this xlc lacks it)."""
    from xlc.backends import get_backend
    from xlc.errors import ArtifactError

    try:
        return get_backend(name)
    except ArgumentError:
        raise ArtifactError(f"this xlc cannot inspect '{name}' executables") from None


# ---- inspect ---------------------------------------------------------------------------------
MEMORY_KEYS = ("parameter_bytes", "output_bytes", "temp_bytes", "constant_bytes", "peak_bytes")


def inspect_data(path: str) -> dict[str, Any]:
    """The JSON of `xlc inspect --json`: the manifest plus a `memory` dict with the standard
    keys. Checksums are verified; no code is loaded."""
    from xlc.artifact.archive import read_archive_file

    archive = read_archive_file(path)
    m = archive.manifest
    data = json.loads(m.model_dump_json())
    data["memory"] = {k: int(m.memory_stats.get(k, 0)) for k in MEMORY_KEYS}
    data["input_labels"] = input_labels(data["signature"])
    data.update(_backend(m.backend).describe(archive.members))  # e.g. GPU kernels
    return data


def input_labels(sig: dict[str, Any]) -> list[str]:
    """One label per flat input of a manifest signature: the argument name followed by the
    pytree path of the leaf (`params['w']`, `xs[0]`, `scale`; keyword arguments by their
    keyword), or the bare argument names when the executable came from HLO (no pytree)."""
    from xlc.artifact.manifest import tree_from_json
    from xlc.frontend import pytree

    names = sig.get("arg_names") or []
    n = len(sig["inputs"])
    bare = [names[i] if i < len(names) else "" for i in range(n)]
    if sig.get("in_tree") is None:
        return bare
    tree = tree_from_json(sig["in_tree"])
    if tree.kind != "tuple" or len(tree.children) != 2:
        return bare
    args_td, kw_td = tree.children
    labels: list[str] = []
    for i, td in enumerate(args_td.children):
        base = names[i] if i < len(names) and names[i] else f"arg{i}"
        labels += [base + p for p in pytree.leaf_paths(td)]
    for k, td in zip(kw_td.keys, kw_td.children):
        labels += [str(k) + p for p in pytree.leaf_paths(td)]
    return labels if len(labels) == n else bare


def _spec_text(spec: dict[str, Any] | None) -> str:
    if spec is None:
        return "(tuple)"
    return f"{spec['dtype']}[{','.join(str(d) for d in spec['shape'])}]"


def inspect_text(data: dict[str, Any]) -> str:
    """The human-readable `xlc inspect` report."""
    sig = data["signature"]
    tgt = data["target"]
    lines = [f"{data['format']} v{data['format_version']} (xlc {data['xlc_version']})",
             f"module:   {data['module_name']}   backend: {data['backend']}"]
    if tgt.get("triple"):
        lines.append(f"target:   {tgt['triple']} cpu={tgt['cpu_name']} "
                     f"({len(tgt['cpu_features'])} features)")
    if tgt.get("gpu_compute_capability"):
        lines.append(f"target:   sm_{tgt['gpu_compute_capability']}")
    if data.get("entry_symbol"):
        lines.append(f"entry:    {data['entry_symbol']}")
    names = data.get("input_labels") or input_labels(sig)
    ins = ", ".join((f"{names[i]}: " if i < len(names) and names[i] else "") + _spec_text(s)
                    for i, s in enumerate(sig["inputs"]))
    outs = ", ".join(_spec_text(s) for s in sig["outputs"])
    lines += ["", "signature:", f"  {sig['name']}({ins}) -> {outs}"]
    for a in data.get("input_output_alias", []):
        lines.append(f"  alias: output {a['output_index']} <- parameter "
                     f"{a['parameter_number']} {a['parameter_index']}")
    lines += ["", "memory:"]
    lines += [f"  {k:<16} {v:>12}" for k, v in data["memory"].items()]
    budget = data.get("memory_budget") or []
    lines += [f"  {line}" for line in budget[:60]]
    if len(budget) > 60:
        lines.append(f"    ... {len(budget) - 60} more")
    lines += ["", "allocations:"]
    for a in data["allocations"]:
        extra = f" parameter {a['parameter_number']}" if a["kind"] == "parameter" else ""
        extra += " live-out" if a["maybe_live_out"] else ""
        lines.append(f"  #{a['index']:<3} {a['kind']:<12} {a['size']:>12} bytes{extra}")
    kernels = [s for s in data["schedule"] if s["opcode"] not in
               ("parameter", "constant", "tuple", "get-tuple-element", "bitcast")]
    lines += ["", f"schedule: {len(data['schedule'])} instructions, {len(kernels)} "
              f"kernels/thunks"]
    lines += [f"  {s['name']} = {s['opcode']}{'(' + s['kind'] + ')' if s['kind'] else ''} "
              f"{s['shape']}" for s in kernels[:40]]
    if len(kernels) > 40:
        lines.append(f"  ... {len(kernels) - 40} more")
    lines += _backend(data["backend"]).describe_text(data)
    lines += ["", "compile times:"]
    lines += [f"  {t['name']:<32} {1e3 * t['seconds']:9.2f} ms" for t in data["pass_timings"]]
    for k, v in data.get("compile_seconds", {}).items():
        lines.append(f"  {k:<32} {1e3 * v:9.2f} ms")
    lines += ["", "members:"]
    lines += [f"  {n:<28} {i['size']:>10} bytes  sha256 {i['sha256'][:16]}"
              for n, i in data["members"].items()]
    return "\n".join(lines) + "\n"


def cost_data(path: str) -> dict[str, Any]:
    """`xlc inspect --cost`: the stored optimized module's cost analysis (JAX's keys) and one
    row per kernel/thunk (flops, transcendentals, bytes accessed, and the roofline time on the
    backend's `roofline` device where it names one: an H100 for the GPU), slowest first."""
    from xlc.artifact.archive import read_archive_file
    from xlc.artifact.manifest import HLO_MEMBER
    from xlc.hlo.cost_analysis import cost_analysis, module_costs
    from xlc.hlo.parser import parse_module

    archive = read_archive_file(path)
    module = parse_module(archive.members[HLO_MEMBER].decode(), HLO_MEMBER)
    device = getattr(_backend(archive.manifest.backend), "roofline", None)
    rows = []
    for c in module_costs(module):
        row: dict[str, Any] = {"name": c.name, "opcode": c.opcode, "flops": c.flops,
                               "transcendentals": c.transcendentals,
                               "bytes accessed": c.bytes_accessed}
        if device is not None:
            row["roofline_us"] = 1e6 * device.seconds(c)
        rows.append(row)
    rows.sort(key=lambda r: (-r.get("roofline_us", 0.0), -r["bytes accessed"], -r["flops"]))
    return {"totals": cost_analysis(module), "device": device.name if device else None,
            "kernels": rows}


def cost_text(data: dict[str, Any]) -> str:
    """The human-readable `xlc inspect --cost` table."""
    t = data["totals"]
    lines = [f"flops {t['flops']:.0f}  transcendentals {t['transcendentals']:.0f}  "
             f"bytes accessed {t['bytes accessed']:.0f}"]
    if data["device"]:
        lines.append(f"roofline on {data['device']}")
    lines.append(f"  {'kernel':<32} {'opcode':<14} {'flops':>14} {'bytes':>14}"
                 + ("   roofline us" if data["device"] else ""))
    for r in data["kernels"]:
        line = (f"  {r['name'][:32]:<32} {r['opcode']:<14} {r['flops']:>14} "
                f"{r['bytes accessed']:>14}")
        if "roofline_us" in r:
            line += f" {r['roofline_us']:>13.2f}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def cmd_inspect(args: argparse.Namespace) -> int:
    """Print an .xlc file's manifest, signature, memory stats, allocations and timings (with
    `--cost`: its cost analysis instead)."""
    if getattr(args, "cost", False):
        costs = cost_data(args.input)
        sys.stdout.write(json.dumps(costs, indent=1) + "\n" if args.json else cost_text(costs))
        return 0
    data = inspect_data(args.input)
    if args.json:
        sys.stdout.write(json.dumps(data, indent=1) + "\n")
    else:
        sys.stdout.write(inspect_text(data))
    return 0


# ---- cache -----------------------------------------------------------------------------------
def cmd_cache(args: argparse.Namespace) -> int:
    """ls / clear / info of the persistent compile cache."""
    from xlc.artifact.cache import CompileCache
    from xlc.options import default_options

    directory = args.cache_dir or default_options().cache_dir
    if not directory:
        raise ArgumentError("no compile cache directory: set XLC_CACHE_DIR or pass --cache-dir")
    cache = CompileCache(directory)
    if args.action == "ls":
        for e in cache.entries():
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.mtime))
            sys.stdout.write(f"{e.key}  {e.size:>10}  {stamp}  {e.backend:<11} "
                             f"{e.module_name}\n")
    elif args.action == "clear":
        n = cache.clear()
        sys.stdout.write(f"removed {n} entr{'y' if n == 1 else 'ies'} from {cache.dir}\n")
    else:
        info = cache.info()
        sys.stdout.write(f"directory: {info['directory']}\nentries:   {info['entries']}\n"
                         f"bytes:     {info['total_bytes']}\n")
    return 0


# ---- viz -------------------------------------------------------------------------------------
def cmd_viz(args: argparse.Namespace) -> int:
    """Write the graph (and, for .html, the memory timeline) of an HLO or .xlc file."""
    import xlc.viz as viz

    suffix = Path(args.output).suffix.lower()
    if suffix not in viz.FORMATS + (".htm",):
        raise UsageError(f"cannot tell the picture format of '{args.output}': name it .dot, "
                         ".svg or .html")
    assignment = None
    kwargs: dict[str, Any] = {}
    if is_artifact(args.input):  # the stored optimized program and its buffer assignment
        from xlc.artifact.archive import read_archive_file
        from xlc.artifact.manifest import HLO_MEMBER
        from xlc.artifact.store import rebuild_assignment
        from xlc.hlo.parser import parse_module

        if args.stage == "raw":
            raise UsageError("an .xlc file holds only the optimized program: --stage raw "
                             "applies to .hlo input")
        archive = read_archive_file(args.input)
        module = parse_module(archive.members[HLO_MEMBER].decode(), filename=args.input)
        assignment = rebuild_assignment(archive, module)
        if suffix in (".html", ".htm"):
            kwargs["compute_assignment"] = False  # never a different one than the file's
    else:
        from xlc.cli.profile_cmd import function_module, is_function_input

        module = (function_module(args) if is_function_input(args.input)
                  else load_module(args.input))
        if (args.stage or "optimized") == "optimized":
            from xlc.api import optimize_module
            from xlc.options import default_options

            result = optimize_module(module, backend=args.backend or default_options().backend)
            module, assignment = result.module, result.assignment
    viz.write(module, args.output, assignment, **kwargs)
    sys.stdout.write(f"wrote {args.output}\n")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Trace, compile and run the embedded demo model; print HLO, results and stats."""
    from xlc.cli.demo import run_demo

    return run_demo(sys.stdout, backend=args.backend, show_hlo=not args.quiet)
