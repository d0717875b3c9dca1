"""`xlc export`: a program as a C library (header, static and/or shared library, README).

INPUT is an `.hlo` file (compiled now), an `.xlc` file (its stored code is exported, nothing
is recompiled) or `module:function` with one `--arg` shape per positional argument, as for
`xlc compile`. Existing output files are refused unless `--force`.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from xlc.backends import backend_names, get_backend
from xlc.cli.commands import UsageError, compile_input, is_artifact
from xlc.compile_stages import progress_bar
from xlc.errors import ArgumentError


def add_export_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `export` verb on the CLI's subparsers."""
    e = sub.add_parser("export", help="export a program as a C library (header + .a/.so)",
                       description="Write NAME.h, libNAME.a and/or libNAME.so and README.txt "
                       "into DIR: the program as a C library that runs without Python "
                       "(docs/export.md). CPU backend only.")
    e.add_argument("input", help="an .hlo file, an .xlc file or module:function")
    e.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="the directory to write into (created if missing)")
    e.add_argument("--name", required=True,
                   help="the library name (a C identifier; prefixes every symbol)")
    e.add_argument("--backend", choices=backend_names(), default=None,
                   help="target backend (default: XLC_FLAGS --backend, else cpu)")
    kind = e.add_mutually_exclusive_group()
    kind.add_argument("--static", dest="static_only", action="store_true",
                      help="write only the static library libNAME.a")
    kind.add_argument("--shared", dest="shared_only", action="store_true",
                      help="write only the shared library libNAME.so")
    e.add_argument("--arg", action="append", metavar="SHAPE",
                   help="module:function input: shape of the next positional argument, e.g. "
                   "f32[8,128] (repeat)")
    e.add_argument("--static-arg", dest="static", action="append", metavar="NAME=VALUE",
                   help="module:function input: a static keyword argument (repeat)")
    e.add_argument("--force", action="store_true", help="overwrite existing output files")
    e.set_defaults(func=cmd_export)


def _program(args: argparse.Namespace) -> Any:
    """The Compiled (or LoadedExecutable) to export."""
    import xlc

    if is_artifact(args.input):
        if args.arg or args.static:
            raise UsageError("--arg/--static-arg apply to module:function inputs, not .xlc "
                             "files")
        exe = xlc.load(args.input)
        if args.backend and args.backend != exe.backend:
            raise ArgumentError(f"{args.input} holds a {exe.backend} executable; --backend "
                                f"{args.backend} does not apply (recompile it for that "
                                "backend)")
        return exe
    return compile_input(args)


def cmd_export(args: argparse.Namespace) -> int:
    """Export INPUT as a C library into the output directory; one line per file written."""
    from xlc.options import default_options

    backend = args.backend or default_options().backend
    if not is_artifact(args.input) and getattr(get_backend(backend), "export_library",
                                               None) is None:
        raise ArgumentError(f"native export is CPU-only for now (got --backend {backend})")
    t0 = time.perf_counter()
    with progress_bar(sys.stderr):
        program = _program(args)
        paths = program.export(args.output, args.name, static=not args.shared_only,
                               shared=not args.static_only, force=args.force)
    for p in paths:
        sys.stdout.write(f"wrote {p} ({p.stat().st_size} bytes)\n")
    sys.stdout.write(f"exported {program.name} as {args.name} in "
                     f"{time.perf_counter() - t0:.2f} s\n")
    return 0
