"""The `xlc` console script: `hlo`, `run`, `compile`, `inspect`, `cache`, `viz`, `demo`.

Exit codes: 0 success; 1 user error (one line on stderr, no traceback unless --debug); 2 usage.
The verbs themselves live in cli_commands.py; this module only builds the argument parser and
maps errors to exit codes.
"""
from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from xlc.cli_commands import (
    UsageError,
    cmd_cache,
    cmd_compile,
    cmd_demo,
    cmd_hlo,
    cmd_inspect,
    cmd_run,
    cmd_viz,
)
from xlc.errors import ParseError, XlcError

log = logging.getLogger("xlc.cli")

BACKENDS = ("interpreter", "cpu", "gpu")

__all__ = ["BACKENDS", "UsageError", "build_parser", "main"]


def _add_hlo(sub: argparse._SubParsersAction) -> None:
    h = sub.add_parser("hlo", help="parse, verify and print an HLO text file",
                       description="Parse, verify and print an HLO text file, as parsed or "
                       "after a backend's pass pipeline, with optional per-pass dumps.")
    h.add_argument("input", help="an .hlo text file (XLA/JAX HLO text), or an .xlc file "
                   "(prints its stored optimized HLO)")
    h.add_argument("--stage", choices=("raw", "optimized"), default=None,
                   help="print the module as parsed (raw, the default for .hlo) or after the "
                   "pass pipeline (optimized; what an .xlc file holds)")
    h.add_argument("--backend", choices=BACKENDS, default=None,
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
    r.add_argument("--backend", choices=BACKENDS, default=None,
                   help="backend for .hlo input (default: XLC_FLAGS --backend, else cpu)")
    r.add_argument("--cache-dir", metavar="DIR", help="use a persistent compile cache in DIR")
    r.set_defaults(func=cmd_run)


def _add_compile(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("compile", help="compile to a serialized executable (.xlc)",
                       description="Compile an .hlo file, or a Python function given as "
                       "module:function with one --arg shape per positional argument, into an "
                       ".xlc file that `xlc run` and `xlc.load` execute without recompiling.")
    c.add_argument("input", help="an .hlo file or module:function (e.g. mymodel:predict)")
    c.add_argument("-o", "--output", required=True, metavar="OUT.xlc", help="the file to write")
    c.add_argument("--backend", choices=BACKENDS, default=None,
                   help="target backend (default: XLC_FLAGS --backend, else cpu)")
    c.add_argument("--arg", action="append", metavar="SHAPE",
                   help="shape of the next positional argument, e.g. f32[8,128] (repeat)")
    c.add_argument("--static", action="append", metavar="NAME=VALUE",
                   help="a static keyword argument (Python literal or string; repeat)")
    c.add_argument("--cache-dir", metavar="DIR", help="use a persistent compile cache in DIR")
    c.set_defaults(func=cmd_compile)


def _add_inspect(sub: argparse._SubParsersAction) -> None:
    i = sub.add_parser("inspect", help="show what an .xlc file holds",
                       description="Print an .xlc file's manifest: target, signature, memory "
                       "stats (parameter_bytes, output_bytes, temp_bytes, constant_bytes, "
                       "peak_bytes), allocations, schedule and per-pass compile times. "
                       "Checksums are verified; no code is loaded.")
    i.add_argument("input", help="an .xlc file")
    i.add_argument("--json", action="store_true", help="print JSON instead of text")
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
    v.add_argument("--backend", choices=BACKENDS, default=None,
                   help="pipeline for --stage optimized (default: XLC_FLAGS --backend, else "
                   "cpu)")
    v.set_defaults(func=cmd_viz)


def _add_demo(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("demo", help="compile and run the embedded demo model",
                       description="Trace, compile and run a small MLP; compare with numpy.")
    d.add_argument("--backend", choices=BACKENDS, default=None)
    d.add_argument("--quiet", action="store_true", help="don't print the HLO")
    d.set_defaults(func=cmd_demo)


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree for every verb."""
    p = argparse.ArgumentParser(prog="xlc", description="xlc: an XLA-style tensor compiler.")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    sub = p.add_subparsers(dest="verb", metavar="VERB")
    for add in (_add_hlo, _add_run, _add_compile, _add_inspect, _add_cache, _add_viz, _add_demo):
        add(sub)
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
    try:
        return int(args.func(args) or 0)
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
        return 0
    except OSError as e:  # unwritable output, full disk, ...
        if args.debug:
            raise
        sys.stderr.write(f"xlc {args.verb}: error: {e}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
