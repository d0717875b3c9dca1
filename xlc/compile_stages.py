"""Compile stages: timing, one INFO log line per stage, a progress bar, and no GC meanwhile.

A backend compiles in named stages (`Stages.run("llvm-codegen")`); each logs its start and end
at INFO on the logger `xlc.compile`:

    xlc.compile: jit_model [cpu] 3/4 llvm-optimize ...
    xlc.compile: jit_model [cpu] 3/4 llvm-optimize done in 412 ms

`progress_bar(stream)` (the CLI wraps compiles in it) shows those stages as a one-line bar on
`stream` once a compile has run for more than `after_s` seconds; short compiles print nothing.

`gc_paused()` keeps Python's cyclic garbage collector off while a compile runs: compiling makes
millions of small, long-lived objects (HLO, llvmlite IR), and the collector's passes over them
cost 10-20 % of a large compile without ever freeing anything. Reference counting still frees
memory as usual; the collector runs again when the last concurrent compile ends.
"""
from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

log = logging.getLogger("xlc.compile")

_gc_lock = threading.Lock()
_gc_depth = 0
_gc_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic garbage collector for the block (nested and concurrent uses are
    counted; the collector is re-enabled, if it was on, when the outermost one ends)."""
    global _gc_depth, _gc_was_enabled
    with _gc_lock:
        if _gc_depth == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            if _gc_depth == 0 and _gc_was_enabled:
                gc.enable()


class Stages:
    """The stages of one compile: `run(name)` times a stage, logs it and records its seconds
    under `timings[key]`."""

    def __init__(self, what: str, names: tuple[str, ...]):
        """`what` names the compile in log lines; `names` are its stages, in order."""
        self.what = what
        self.names = names
        self.timings: dict[str, float] = {}

    @contextmanager
    def run(self, name: str, key: str | None = None) -> Iterator[None]:
        """Time stage `name` (one of `names`), logging its start and its end at INFO."""
        pos = self.names.index(name) + 1
        extra = {"xlc_stage": pos, "xlc_stages": len(self.names), "xlc_stage_name": name}
        log.info("%s %d/%d %s ...", self.what, pos, len(self.names), name, extra=extra)
        t0 = time.perf_counter()
        yield
        dt = time.perf_counter() - t0
        self.timings[key or name] = self.timings.get(key or name, 0.0) + dt
        log.info("%s %d/%d %s done in %.0f ms", self.what, pos, len(self.names), name, dt * 1e3,
                 extra={**extra, "xlc_stage_done": True})


class ProgressBar(logging.Handler):
    """A logging handler drawing `xlc.compile`'s stage records as a bar on a stream, from
    `after_s` seconds after the first record on."""

    WIDTH = 24

    def __init__(self, stream: TextIO, after_s: float = 2.0):
        """Draw on `stream` once a compile has run `after_s` seconds."""
        super().__init__(logging.INFO)
        self.stream = stream
        self.after_s = after_s
        self.t0: float | None = None
        self.state = (0, 1, "", False)
        self.drawn = False
        self._timer: threading.Timer | None = None
        self._lock2 = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        """Remember the stage of `record`; redraw if the bar is showing."""
        pos = getattr(record, "xlc_stage", None)
        if pos is None:
            return
        with self._lock2:
            self.state = (pos, record.xlc_stages, record.xlc_stage_name,  # type: ignore[attr-defined]
                          bool(getattr(record, "xlc_stage_done", False)))
            if self.t0 is None:
                self.t0 = time.perf_counter()
                self._timer = threading.Timer(self.after_s, self._show)
                self._timer.daemon = True
                self._timer.start()
            elif self.drawn:
                self._draw()

    def _show(self) -> None:
        with self._lock2:
            self.drawn = True
            self._draw()

    def _draw(self) -> None:
        pos, total, name, done = self.state
        filled = int(self.WIDTH * (pos - (0 if done else 1)) / max(total, 1))
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        dt = time.perf_counter() - (self.t0 or time.perf_counter())
        self.stream.write(f"\rcompiling [{bar}] {pos}/{total} {name:<16s} {dt:5.1f} s")
        self.stream.flush()

    def close(self) -> None:
        """Stop the timer and end the bar's line."""
        with self._lock2:
            if self._timer is not None:
                self._timer.cancel()
            if self.drawn:
                self.stream.write("\n")
                self.stream.flush()
                self.drawn = False
        super().close()


@contextmanager
def progress_bar(stream: TextIO, after_s: float = 2.0) -> Iterator[None]:
    """Show compile progress on `stream` for compiles in the block that take over `after_s`
    seconds. Does nothing when INFO records of `xlc.compile` are already shown (`-v`)."""
    if log.isEnabledFor(logging.INFO):
        yield
        return
    handler = ProgressBar(stream, after_s)
    level, propagate = log.level, log.propagate
    log.setLevel(logging.INFO)
    log.propagate = False
    log.addHandler(handler)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        log.propagate = propagate
        handler.close()
