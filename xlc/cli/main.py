"""The `xlc` console script: `hlo`, `run`, `compile`, `inspect`, `cache`, `viz`, `demo`,
`export`, `profile`.

Exit codes: 0 success; 1 user error (one line on stderr, no traceback unless --debug); 2 usage.
The verbs themselves live in commands.py; this module only builds the argument parser and
maps errors to exit codes.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from xlc.backends import AUTO, backend_names
from xlc.cli.commands import (
    UsageError,
    cmd_cache,
    cmd_compile,
    cmd_demo,
    cmd_hlo,
    cmd_inspect,
    cmd_run,
    cmd_viz,
)
from xlc.cli.profile_cmd import add_function_args, add_profile_parser
from xlc.errors import ParseError, XlcError

log = logging.getLogger("xlc.cli")

# The verbs run on a thread with this stack and recursion limit (see `run_deep`).
STACK_BYTES = 512 << 20
RECURSION_LIMIT = 50_000

__all__ = ["RECURSION_LIMIT", "STACK_BYTES", "UsageError", "build_parser",
           "internal_error_line", "main", "run_deep"]


def _add_hlo(sub: argparse._SubParsersAction) -> None:
    h = sub.add_parser("hlo", help="parse, verify and print an HLO text file",
                       description="Parse, verify and print an HLO text file, as parsed or "
                       "after a backend's pass pipeline, with optional per-pass dumps.")
    h.add_argument("input", help="an .hlo text file (XLA/JAX HLO text), or an .xlc file "
                   "(prints its stored optimized HLO)")
    h.add_argument("--stage", choices=("raw", "optimized"), default=None,
                   help="print the module as parsed (raw, the default for .hlo) or after the "
                   "pass pipeline (optimized; what an .xlc file holds)")
    h.add_argument("--backend", choices=backend_names(), default=None,
                   help="backend whose pipeline --stage optimized runs (default: XLC_FLAGS "
                   "--backend, else cpu)")
    h.add_argument("--dump-to", "--dump-dir", dest="dump_to", metavar="DIR",
                   help="run the pipeline and write per-pass HLO dumps into DIR, plus the "
                   "code stages: .ll and .o (cpu), .ll, .ptx and .cubin (gpu)")
    h.add_argument("--dump-pass-re", metavar="REGEX",
                   help="with --dump-to: dump after the passes matching REGEX")
    h.add_argument("--memory-report", action="store_true",
                   help="print the buffer-assignment report instead of the HLO")
    h.set_defaults(func=cmd_hlo)


def _add_run(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("run", help="run an HLO file or .xlc executable on inputs from an .npz",
                       description="Run an .hlo file (compiled now) or an .xlc executable "
                       "(loaded, not recompiled). Inputs: keys in0, in1, ... in parameter "
                       "order; outputs: out0, out1, ... (tuple results flattened).")
    r.add_argument("input", help="an .hlo text file or an .xlc executable")
    r.add_argument("--inputs", metavar="IN.npz", help="inputs, keys in0, in1, ... in order")
    r.add_argument("--output", metavar="OUT.npz", help="write outputs out0, out1, ... here")
    r.add_argument("--backend", choices=(*backend_names(), AUTO), default=None,
                   help="backend for .hlo input (default: XLC_FLAGS --backend, else cpu; "
                   "auto: the GPU when one is usable, else cpu)")
    r.add_argument("--cache-dir", metavar="DIR", help="use a persistent compile cache in DIR")
    r.add_argument("--profile", metavar="OUT.json", help="compile with run-time profiling "
                   "(cpu) and write the run's Chrome trace here (docs/profiling.md)")
    add_function_args(r)  # INPUT may also be module:function
    r.set_defaults(func=cmd_run)


def _add_compile(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("compile", help="compile to a serialized executable (.xlc)",
                       description="Compile an .hlo file, or a Python function given as "
                       "module:function with one --arg shape per positional argument, into an "
                       ".xlc file that `xlc run` and `xlc.load` execute without recompiling.")
    c.add_argument("input", help="an .hlo file or module:function (e.g. mymodel:predict)")
    c.add_argument("-o", "--output", required=True, metavar="OUT.xlc", help="the file to write")
    c.add_argument("--backend", choices=(*backend_names(), AUTO), default=None,
                   help="target backend (default: XLC_FLAGS --backend, else cpu; auto: the GPU "
                   "when one is usable, else cpu)")
    c.add_argument("--arg", action="append", metavar="SHAPE",
                   help="shape of the next positional argument, e.g. f32[8,128] (repeat)")
    c.add_argument("--static", action="append", metavar="NAME=VALUE",
                   help="a static keyword argument (Python literal or string; repeat)")
    c.add_argument("--cache-dir", metavar="DIR", help="use a persistent compile cache in DIR")
    c.add_argument("--memory-limit", metavar="BYTES",
                   help="peak memory the program may use (e.g. 512MiB): rematerialization and "
                   "the other memory passes run until it fits (docs/memory.md)")
    c.set_defaults(func=cmd_compile)


def _add_inspect(sub: argparse._SubParsersAction) -> None:
    i = sub.add_parser("inspect", help="show what an .xlc file holds",
                       description="Print an .xlc file's manifest: target, signature, memory "
                       "stats (parameter_bytes, output_bytes, temp_bytes, constant_bytes, "
                       "peak_bytes), allocations, schedule and per-pass compile times. "
                       "Checksums are verified; no code is loaded.")
    i.add_argument("input", help="an .xlc file")
    i.add_argument("--json", action="store_true", help="print JSON instead of text")
    i.add_argument("--cost", action="store_true",
                   help="the cost analysis instead: flops, transcendentals and bytes accessed "
                        "per kernel (GPU: roofline time on an H100), slowest first")
    i.set_defaults(func=cmd_inspect)


def _add_cache(sub: argparse._SubParsersAction) -> None:
    k = sub.add_parser("cache", help="list, clear or describe the persistent compile cache",
                       description="The persistent compile cache (XLC_CACHE_DIR or --cache-dir).")
    k.add_argument("action", choices=("ls", "clear", "info"), help="what to do")
    k.add_argument("--cache-dir", metavar="DIR", help="the cache directory (default "
                   "XLC_CACHE_DIR)")
    k.set_defaults(func=cmd_cache)


def _add_viz(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser("viz", help="draw the HLO graph (and memory timeline)",
                       description="Write the graph of an .hlo or .xlc file as Graphviz DOT, "
                       "SVG (needs graphviz's dot) or a self-contained HTML page with the "
                       "memory timeline; the format comes from the -o suffix.")
    v.add_argument("input", help="an .hlo text file or an .xlc executable")
    v.add_argument("-o", "--output", required=True, metavar="GRAPH",
                   help="graph.dot, graph.svg or graph.html")
    v.add_argument("--stage", choices=("raw", "optimized"), default=None,
                   help="for .hlo input: draw the parsed or the optimized module (the "
                   "default; an .xlc file holds the optimized one)")
    v.add_argument("--backend", choices=backend_names(), default=None,
                   help="pipeline for --stage optimized (default: XLC_FLAGS --backend, else "
                   "cpu)")
    add_function_args(v)  # INPUT may also be module:function
    v.set_defaults(func=cmd_viz)


def _add_demo(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("demo", help="compile and run the embedded demo model",
                       description="Trace, compile and run a small MLP; compare with numpy.")
    d.add_argument("--backend", choices=backend_names(), default=None)
    d.add_argument("--quiet", action="store_true", help="don't print the HLO")
    d.set_defaults(func=cmd_demo)


def _add_export(sub: argparse._SubParsersAction) -> None:
    from xlc.cli.export_cmd import add_export_parser  # the verb lives in export_cmd.py

    add_export_parser(sub)


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree for every verb."""
    p = argparse.ArgumentParser(prog="xlc", description="xlc: an XLA-style tensor compiler.")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    sub = p.add_subparsers(dest="verb", metavar="VERB")
    for add in (_add_hlo, _add_run, _add_compile, _add_inspect, _add_cache, _add_viz, _add_demo):
        add(sub)
    _add_export(sub)
    add_profile_parser(sub)  # `xlc profile` (profile_cmd.py)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script. Returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING - 10 * min(args.verbose, 2),
                        format="%(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    real_stdout = sys.stdout
    sys.stdout = _Stdout(real_stdout)  # type: ignore[assignment]
    try:
        code = int(run_deep(args.func, args) or 0)
        sys.stdout.flush()  # a failed write is this command's error, not a message at exit
        return code
    except KeyboardInterrupt:
        sys.stderr.write(f"xlc {args.verb}: interrupted\n")
        return 130
    except UsageError as e:
        if args.debug:
            raise
        sys.stderr.write(f"xlc {args.verb}: {e}\n")
        return 2
    except ParseError as e:
        if args.debug:
            raise
        sys.stderr.write(f"{e}\n")
        return 1
    except XlcError as e:
        if args.debug:
            raise
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        location = getattr(e, "location", None)  # a VerificationError in a parsed file
        sys.stderr.write(f"{location}: {first}\n" if location
                         else f"xlc {args.verb}: error: {first}\n")
        return 1
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except OSError as e:  # unwritable output, full disk, ...
        if args.debug:
            raise
        if e.filename == "<stdout>":
            _silence_stdout()  # the interpreter's final flush would fail again
        what = f"{e.filename}: {e.strerror}" if e.filename and e.strerror else str(e)
        sys.stderr.write(f"xlc {args.verb}: error: {what}\n")
        return 1
    except Exception as e:  # an internal error: one line, the traceback only with --debug
        if args.debug:
            raise
        sys.stderr.write(f"xlc {args.verb}: {internal_error_line(e)}\n")
        return 1
    finally:
        sys.stdout = real_stdout


def run_deep(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` on a thread with a `STACK_BYTES` stack and the recursion limit raised to
    `RECURSION_LIMIT` (while it runs), so that programs nested or chained thousands deep
    (call chains, nested control flow) compile and run instead of hitting Python's default
    limit of 1000 frames. Returns its result or re-raises its exception here."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = fn(*args)
        except BaseException as e:  # re-raised in the calling thread
            result["error"] = e

    old_limit = sys.getrecursionlimit()
    try:
        old_size = threading.stack_size(STACK_BYTES)
    except (ValueError, RuntimeError):  # a platform without settable thread stacks
        return fn(*args)
    try:
        worker = threading.Thread(target=target, name="xlc-cli", daemon=True)
        sys.setrecursionlimit(max(old_limit, RECURSION_LIMIT))
        worker.start()
    finally:
        threading.stack_size(old_size)
    try:
        worker.join()
    finally:
        sys.setrecursionlimit(old_limit)
    if "error" in result:
        raise result["error"]
    return result.get("value")


def internal_error_line(e: BaseException) -> str:
    """The one line the CLI prints for an exception that is not an XlcError: what went wrong
    in words a user can act on, and the hint to rerun with --debug for the traceback."""
    hint = "; run with --debug for the traceback"
    first = (str(e).splitlines() or [""])[0].strip()
    if isinstance(e, MemoryError):  # numpy: "Unable to allocate 256. TiB for an array with ..."
        first = first.split(" for an array with shape")[0]
        return f"error: out of memory{': ' + first if first else ''}{hint}"
    if isinstance(e, RecursionError):
        return ("error: the program is nested too deeply for xlc (calls, control flow or "
                f"operand chains past the recursion limit of {RECURSION_LIMIT} frames)"
                f"{hint}")
    return f"internal error: {type(e).__name__}{': ' + first if first else ''}{hint}"


class _Stdout:
    """sys.stdout while a verb runs: write errors (a full disk, a closed terminal) become
    OSErrors naming `<stdout>` (BrokenPipeError passes as it is: output cut short by `head`
    is not an error)."""

    def __init__(self, inner: Any):
        self._inner = inner

    def _guard(self, op: Callable[..., Any], *args: Any) -> Any:
        try:
            return op(*args)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise OSError(e.errno, e.strerror or str(e), "<stdout>") from None

    def write(self, text: str) -> int:
        """Write `text` to the real stdout."""
        return int(self._guard(self._inner.write, text))

    def flush(self) -> None:
        """Flush the real stdout."""
        self._guard(self._inner.flush)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _silence_stdout() -> None:
    """Point the process's stdout at /dev/null so the interpreter's final flush of data that
    could not be written stays quiet (Python's advice for broken pipes)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (captured output)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
