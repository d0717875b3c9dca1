"""Pass pipeline machinery: the `HloPass` protocol, `Pipeline`, `FixedPoint`, timings, dumps.

A pipeline is data: a list of passes (objects with a `name` and `run(module) -> bool`) and
`FixedPoint` groups that repeat until nothing changes. The runner
- checks that every pass returns a bool (anything else raises `XlcError`),
- runs `xlc.hlo.verifier.verify_module` after every pass that changed the module when
  `options.verify` is on,
- re-raises any `XlcError` from a pass or the verifier as the same class with the message
  prefixed `in pass '<pass>' of pipeline '<pipeline>': ...`,
- records the wall time of every pass run (`Pipeline.timings`, `format_timings()`),
- dumps the module after each changing pass whose name matches `options.dump_pass_re` to
  `<dump_to>/module_IIII.<module>.NNNN.<pass>.hlo` when `options.dump_to` is set (NNNN counts
  per module object, starting with `0000.before_optimizations` the first time a module is
  dumped).
Every dump file of one compile starts with the same prefix `module_IIII.<module>` (XLA's
naming): IIII is given to each module object at its first dump, one past the largest id the
dump directory already holds and past every id this process gave, so the dumps of different
compiles (of one module name, in one process or several run one after the other) never
overwrite each other. Later stages of the same compile (the backends' `.ll`, `.o`, `.ptx`)
name the module by its name; that resolves to the id its last dump in this thread used.
"""
from __future__ import annotations

import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, Union, runtime_checkable

from xlc.errors import ArgumentError, XlcError
from xlc.hlo.ir import HloModule
from xlc.options import CompileOptions, default_options

log = logging.getLogger("xlc.passes")


@runtime_checkable
class HloPass(Protocol):
    """A module pass: `run` rewrites the module in place and returns True iff it changed it."""

    name: str

    def run(self, module: HloModule) -> bool:
        """Transform `module` in place; return whether anything changed."""
        ...


@dataclass(frozen=True, slots=True)
class PassTiming:
    """Wall time of one pass run."""

    name: str
    seconds: float
    changed: bool


PassEntry = Union[HloPass, "FixedPoint", "Pipeline"]

# Dump file counter per module object (numbering continues across pipelines on one module).
_DUMP_COUNTERS: weakref.WeakKeyDictionary[HloModule, int] = weakref.WeakKeyDictionary()


# Dump file prefixes (`module_0003.<name>`): the id of each dumped module object, the next id
# this process gives, and per thread the id each module name last dumped under.
_DUMP_IDS: weakref.WeakKeyDictionary[HloModule, int] = weakref.WeakKeyDictionary()
_DUMP_ID_FILE = re.compile(r"^module_(\d{4,})\.")
_dump_lock = threading.Lock()
_next_dump_id = 0
_latest = threading.local()


def _safe_file_part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", text) or "_"


def _new_dump_id(directory: str) -> int:
    """An id past every one this process gave and every `module_IIII.` file in `directory`."""
    global _next_dump_id
    used = -1
    try:
        for name in os.listdir(directory):
            m = _DUMP_ID_FILE.match(name)
            if m:
                used = max(used, int(m.group(1)))
    except OSError:  # not created yet
        pass
    n = max(_next_dump_id, used + 1)
    _next_dump_id = n + 1
    return n


def dump_prefix(options: CompileOptions, module: HloModule) -> str:
    """`module_IIII.<name>`: the file prefix of every dump of `module` (one id per module
    object, see the module docstring). Requires `options.dump_to`."""
    assert options.dump_to
    with _dump_lock:
        n = _DUMP_IDS.get(module)
        if n is None:
            n = _DUMP_IDS[module] = _new_dump_id(options.dump_to)
    latest: dict[str, int] = _latest.__dict__.setdefault("by_name", {})
    latest[module.name] = n
    return f"module_{n:04d}.{_safe_file_part(module.name)}"


def dump_text(options: CompileOptions | None, module: HloModule | str, suffix: str,
              text: str) -> str | None:
    """Write `text` to `<options.dump_to>/<prefix>.<suffix>` when dumping is on, where the
    prefix is `dump_prefix(module)` for a module, and for a module name the prefix its last
    dump in this thread used (the bare name when it has none).

    Returns the path written, or None when `options.dump_to` is unset. Creates the directory.
    Used for per-pass dumps and by later stages (schedule, buffer-assignment report, code)."""
    if options is None or not options.dump_to:
        return None
    os.makedirs(options.dump_to, exist_ok=True)
    if isinstance(module, HloModule):
        prefix = dump_prefix(options, module)
    else:
        n = getattr(_latest, "by_name", {}).get(module)
        prefix = _safe_file_part(module) if n is None else \
            f"module_{n:04d}.{_safe_file_part(module)}"
    path = os.path.join(options.dump_to, f"{prefix}.{suffix}")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    log.debug("dumped %s", path)
    return path


def _dump_module(options: CompileOptions, module: HloModule, pass_name: str) -> None:
    from xlc.hlo.printer import print_module

    n = _DUMP_COUNTERS.get(module)
    if n is None:
        dump_text(options, module, "0000.before_optimizations.hlo", print_module(module))
        n = 1
    if pass_name:
        dump_text(options, module, f"{n:04d}.{_safe_file_part(pass_name)}.hlo",
                  print_module(module))
        n += 1
    _DUMP_COUNTERS[module] = n


def _with_context(err: XlcError, pass_name: str, pipeline_name: str) -> XlcError:
    """The same error class with the message prefixed by the pass and pipeline (a new
    exception, or `err` itself with new args when its class cannot be built from a message)."""
    msg = f"in pass '{pass_name}' of pipeline '{pipeline_name}': {err}"
    try:
        new = type(err)(msg)
    except Exception:  # an XlcError subclass with an unusual constructor
        new = err
        new.args = (msg,)
    else:
        new.__dict__.update(err.__dict__)
    if hasattr(err, "message"):
        new.message = msg  # type: ignore[attr-defined]
    new._xlc_pass_context = True  # type: ignore[attr-defined]
    return new


class _Runner:
    """Runs the entries of one top-level pipeline with checks, timings and dumps."""

    def __init__(self, pipeline: Pipeline, options: CompileOptions):
        self.pipeline = pipeline
        self.options = options
        self.dump_re: re.Pattern[str] | None = None
        if options.dump_to and options.dump_pass_re:
            try:
                self.dump_re = re.compile(options.dump_pass_re)
            except re.error as e:
                raise ArgumentError(f"dump_pass_re {options.dump_pass_re!r} is not a valid "
                                    f"regular expression: {e}") from None

    def run_entries(self, entries: Sequence[PassEntry], module: HloModule) -> bool:
        changed = False
        for entry in entries:
            if isinstance(entry, FixedPoint):
                changed |= self.run_fixed_point(entry, module)
            elif isinstance(entry, Pipeline):
                changed |= self.run_entries(entry.passes, module)
            else:
                changed |= self.run_pass(entry, module)
        return changed

    def run_fixed_point(self, fp: FixedPoint, module: HloModule) -> bool:
        changed = False
        for it in range(fp.max_iters):
            if not self.run_entries(fp.passes, module):
                fp.last_iterations = it + 1
                return changed
            changed = True
        fp.last_iterations = fp.max_iters
        log.warning("fixed point '%s' did not converge in %d iterations on module %s",
                    fp.name, fp.max_iters, module.name)
        return changed

    def run_pass(self, p: HloPass, module: HloModule) -> bool:
        name = getattr(p, "name", type(p).__name__)
        start = time.perf_counter()
        try:
            result = p.run(module)
            if not isinstance(result, bool):
                raise XlcError(f"pass returned {type(result).__name__} ({result!r}), "
                               "expected bool")
            if result and self.options.verify:
                from xlc.hlo.verifier import verify_module

                verify_module(module)
        except XlcError as e:
            if getattr(e, "_xlc_pass_context", False):
                raise
            new = _with_context(e, name, self.pipeline.name)
            if new is e:
                raise
            raise new from e
        except Exception as e:
            if hasattr(e, "add_note"):  # Python >= 3.11
                e.add_note(f"in pass '{name}' of pipeline '{self.pipeline.name}'")
            raise
        finally:
            seconds = time.perf_counter() - start
        self.pipeline.timings.append(PassTiming(name, seconds, result))
        log.debug("pass %s: %.3f ms, changed=%s", name, seconds * 1e3, result)
        if result and self.dump_re is not None and self.dump_re.search(name):
            _dump_module(self.options, module, name)
        return result


class FixedPoint:
    """Repeat a list of passes until one whole round changes nothing (at most `max_iters`).

    Usable as an entry of a `Pipeline` (its passes then get the pipeline's checks, timings and
    dumps) or alone as an `HloPass` (it then runs inside an anonymous pipeline of its name)."""

    def __init__(self, passes: Sequence[PassEntry], max_iters: int = 25,
                 name: str = "fixed-point"):
        if max_iters < 1:
            raise XlcError(f"FixedPoint '{name}': max_iters must be >= 1, got {max_iters}")
        self.passes: list[PassEntry] = list(passes)
        self.max_iters = max_iters
        self.name = name
        self.last_iterations = 0

    def run(self, module: HloModule) -> bool:
        """Run to a fixed point with default options; True iff any round changed the module."""
        return Pipeline(self.name, [self]).run(module)

    def __repr__(self) -> str:
        return f"FixedPoint({[getattr(p, 'name', p) for p in self.passes]}, {self.max_iters})"


class Pipeline:
    """An ordered list of passes and `FixedPoint` groups, run with invariant checks.

    `run(module, options)` returns True iff some pass changed the module. `timings` collects
    one `PassTiming` per pass run (reset at each `run`). A Pipeline nested as an entry runs its
    entries as part of the outer one (outer name in errors, outer timings and dumps)."""

    def __init__(self, name: str, passes: Sequence[PassEntry]):
        self.name = name
        self.passes: list[PassEntry] = list(passes)
        self.timings: list[PassTiming] = []

    def run(self, module: HloModule, options: CompileOptions | None = None) -> bool:
        """Run every entry in order on `module` (in place).

        Requires: a well-formed module. Guarantees: with `options.verify`, the verifier ran on
        the input (a VerificationError then names no pass: the module came in broken) and after
        every changing pass; XlcErrors name the pass and this pipeline."""
        options = options if options is not None else default_options()
        self.timings = []
        runner = _Runner(self, options)
        if options.verify:
            from xlc.hlo.verifier import verify_module

            verify_module(module)
        if options.dump_to:
            _dump_module(options, module, "")  # before_optimizations, once per module
        start = time.perf_counter()
        changed = runner.run_entries(self.passes, module)
        log.info("pipeline %s on %s: %.1f ms, changed=%s", self.name, module.name,
                 (time.perf_counter() - start) * 1e3, changed)
        return changed

    @property
    def total_seconds(self) -> float:
        """Sum of the recorded pass times of the last run."""
        return sum(t.seconds for t in self.timings)

    def format_timings(self) -> str:
        """A table: per pass name (first-run order) the runs, changing runs and total time."""
        agg: dict[str, list[float]] = {}
        for t in self.timings:
            row = agg.setdefault(t.name, [0, 0, 0.0])
            row[0] += 1
            row[1] += int(t.changed)
            row[2] += t.seconds
        width = max([len(n) for n in agg] + [4])
        lines = [f"pipeline '{self.name}': {self.total_seconds * 1e3:.3f} ms",
                 f"  {'pass':<{width}}  runs  changed  total ms"]
        for n, (runs, ch, secs) in agg.items():
            lines.append(f"  {n:<{width}}  {int(runs):>4}  {int(ch):>7}  {secs * 1e3:>8.3f}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Pipeline({self.name!r}, {[getattr(p, 'name', p) for p in self.passes]})"
