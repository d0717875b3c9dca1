"""The `xlc` console script: `hlo`, `run`, `demo` (more verbs arrive with later features).

Exit codes: 0 success; 1 user error (one line on stderr, no traceback unless --debug); 2 usage.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from xlc.errors import ArgumentError, ParseError, XlcError

log = logging.getLogger("xlc.cli")


class UsageError(XlcError):
    """Bad command-line usage detected after argparse (exit code 2)."""


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _read_text(path: str) -> str:
    p = Path(path)
    if not p.exists():
        raise ArgumentError(f"{path}: no such file")
    if p.is_dir():
        raise ArgumentError(f"{path}: is a directory, expected an HLO text file")
    try:
        return p.read_text()
    except UnicodeDecodeError:
        raise ArgumentError(f"{path}: not a text file (expected HLO text)") from None


def _load_module(path: str, verify: bool = True):
    from xlc.hlo.parser import parse_module
    from xlc.hlo.verifier import verify_module

    module = parse_module(_read_text(path), filename=path)
    if verify:
        verify_module(module)
    return module


def _load_inputs(path: str | None, n_params: int) -> list[np.ndarray]:
    if path is None:
        if n_params:
            raise ArgumentError(f"the module takes {n_params} parameter(s): pass --inputs in.npz "
                                f"with keys in0..in{n_params - 1}")
        return []
    if not Path(path).exists():
        raise ArgumentError(f"{path}: no such file")
    try:
        z = np.load(path)
    except Exception as e:  # numpy raises several unrelated types for bad files
        raise ArgumentError(f"{path}: not a readable .npz file ({e})") from None
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
        return [z[f"in{i}"] for i in range(n_params)]


def _flatten(result: object) -> list[np.ndarray]:
    if isinstance(result, (tuple, list)):
        out: list[np.ndarray] = []
        for r in result:
            out.extend(_flatten(r))
        return out
    return [np.asarray(result)]


# ---------------------------------------------------------------------------------------------
# verbs
# ---------------------------------------------------------------------------------------------
def cmd_hlo(args: argparse.Namespace) -> int:
    """Parse, verify and print an HLO file (optionally after the optimization pipeline)."""
    from xlc.hlo.printer import print_module

    module = _load_module(args.input)
    if args.stage == "optimized" or args.memory_report:
        from xlc.api import optimize_module

        overrides = {}
        if args.dump_to:
            overrides["dump_to"] = args.dump_to
        if args.dump_pass_re:
            overrides["dump_pass_re"] = args.dump_pass_re
        result = optimize_module(module, backend=args.backend, **overrides)
        module = result.module
        if args.memory_report:
            sys.stdout.write(result.assignment.report() + "\n")
            return 0
    sys.stdout.write(print_module(module) + "\n")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Run an HLO file on inputs from an .npz; write outputs out0.. to an .npz."""
    import xlc

    module = _load_module(args.input)
    assert module.entry is not None
    inputs = _load_inputs(args.inputs, len(module.entry.parameters))
    compiled = xlc.compile(module, backend=args.backend)
    outputs = _flatten(compiled(*inputs))
    if args.output:
        np.savez(args.output, **{f"out{i}": o for i, o in enumerate(outputs)})
    else:
        for i, o in enumerate(outputs):
            sys.stdout.write(f"out{i}: {o.dtype}{list(o.shape)}\n{o}\n")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Trace, compile and run the embedded demo model; print HLO, results and stats."""
    from xlc.demo import run_demo

    return run_demo(sys.stdout, backend=args.backend, show_hlo=not args.quiet)


# ---------------------------------------------------------------------------------------------
# argument parsing
# ---------------------------------------------------------------------------------------------
BACKENDS = ("interpreter", "cpu", "gpu")


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree for every verb."""
    p = argparse.ArgumentParser(prog="xlc", description="xlc: an XLA-style tensor compiler.")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    sub = p.add_subparsers(dest="verb", metavar="VERB")

    h = sub.add_parser("hlo", help="parse, verify and print an HLO text file")
    h.add_argument("input", help="an .hlo text file (XLA/JAX HLO text)")
    h.add_argument("--stage", choices=("raw", "optimized"), default="raw",
                   help="print the module as parsed (raw) or after the pass pipeline")
    h.add_argument("--backend", choices=BACKENDS, default="cpu",
                   help="backend whose pipeline --stage optimized runs (default cpu)")
    h.add_argument("--dump-to", metavar="DIR", help="write per-pass dumps into DIR")
    h.add_argument("--dump-pass-re", metavar="REGEX", help="dump after passes matching REGEX")
    h.add_argument("--memory-report", action="store_true",
                   help="print the buffer-assignment report instead of the HLO")
    h.set_defaults(func=cmd_hlo)

    r = sub.add_parser("run", help="run an HLO file on inputs from an .npz")
    r.add_argument("input", help="an .hlo text file")
    r.add_argument("--inputs", metavar="IN.npz", help="inputs, keys in0, in1, ... in order")
    r.add_argument("--output", metavar="OUT.npz", help="write outputs out0, out1, ... here")
    r.add_argument("--backend", choices=BACKENDS, default="interpreter")
    r.set_defaults(func=cmd_run)

    d = sub.add_parser("demo", help="compile and run the embedded demo model")
    d.add_argument("--backend", choices=BACKENDS, default=None)
    d.add_argument("--quiet", action="store_true", help="don't print the HLO")
    d.set_defaults(func=cmd_demo)
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
        sys.stderr.write(f"xlc {args.verb}: error: {first}\n")
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
