"""The process's run-time profile of CPU executables: the event buffer and its collection.

Profiled code (`CompileOptions.profile`, `XLC_FLAGS=--profile=DIR`) records its events through
the `profile` run-time library (`profile_lib.py`) into one buffer per process. The buffer is
allocated here when the library is first loaded (`library_loaded`, the library's `on_load`
hook: whether the code was compiled now, loaded from an `.xlc` file or from the compile
cache), with room for `CAPACITY` events (48 bytes each; untouched pages cost no memory).

* `collect()` takes the events recorded so far (the buffer starts empty again) as an
  `xlc.profiling.Profile`, whose `chrome_trace()` is the Chrome trace-event JSON;
* with `XLC_FLAGS=--profile=DIR` the events still uncollected at exit are written to
  `DIR/xlc-<pid>.trace.json` (one file per process, every program it ran; `atexit`).

Collect while no profiled call runs (events of a call in flight may be cut). Calls of
profiled programs from several Python threads at once record correctly, but the per-thread
share events of split kernels are attributed to the kernel the last calling thread began.
"""
from __future__ import annotations

import atexit
import ctypes
import json
import logging
import os
import threading
from typing import Any

import numpy as np

from xlc.backend_cpu.profile_lib import (
    EVENT_WORDS,
    PROF_COUNT,
    PROF_SET_BUFFER,
)
from xlc.profiling import Profile, RawEvent, write_uncollected

log = logging.getLogger("xlc.profile")

CAPACITY = 1 << 20
"""Events the buffer holds; later ones are counted as dropped until the next `collect()`."""

_lock = threading.Lock()
_buffer: np.ndarray | None = None
_set_buffer: Any = None
_count: Any = None
_tables: dict[int, dict[str, Any]] = {}
_writer_registered = False


def library_loaded() -> None:
    """The `profile` library's symbols are resolvable: give it its buffer, and with
    `XLC_FLAGS=--profile=DIR` register the exit-time writer."""
    import llvmlite.binding as llvm

    global _buffer, _set_buffer, _count, _writer_registered
    with _lock:
        if _buffer is None:
            _set_buffer = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(
                llvm.address_of_symbol(PROF_SET_BUFFER))
            _count = ctypes.CFUNCTYPE(ctypes.c_int64)(llvm.address_of_symbol(PROF_COUNT))
            _buffer = np.zeros((CAPACITY, EVENT_WORDS), dtype=np.int64)
            _set_buffer(_buffer.ctypes.data, CAPACITY)
        from xlc.options import default_options

        directory = default_options().profile_dir
        if directory and not _writer_registered:
            atexit.register(write_at_exit, directory)
            _writer_registered = True


def active() -> bool:
    """Whether profiled code has been loaded in this process (the buffer exists)."""
    return _buffer is not None


def _table(address: int) -> dict[str, Any]:
    """The unit table (JSON constant of a profiled module) at `address`, parsed once."""
    table = _tables.get(address)
    if table is None:
        raw = json.loads(ctypes.string_at(address).decode())
        table = {"module": raw["module"],
                 "kernels": {int(k): v for k, v in raw["kernels"].items()}}
        _tables[address] = table
    return table


def collect() -> Profile:
    """The events recorded since the last `collect()` (an empty Profile when no profiled code
    ran); the buffer starts empty again."""
    with _lock:
        if _buffer is None:
            return Profile([], dropped=0, pid=os.getpid(), threads=_thread_names())
        count = int(_count())
        n = min(count, CAPACITY)
        rows = _buffer[:n].copy()
        _set_buffer(_buffer.ctypes.data, CAPACITY)
    if count > n:
        log.warning("profile buffer full: %d events dropped (collect more often; %d kept)",
                    count - n, n)
    events = []
    for table_addr, kid, thread, t0, t1, share in rows.tolist():
        if not table_addr:
            continue
        table = _table(table_addr)
        info = table["kernels"].get(kid)
        if info is None:
            continue
        events.append(RawEvent(table["module"], kid, info, thread, t0, t1, share))
    return Profile(events, dropped=count - n, pid=os.getpid(), threads=_thread_names())


def _thread_names() -> dict[int, tuple[int, str]]:
    """pthread id -> (trace tid, name) of this process's Python threads."""
    return {t.ident: (t.native_id or t.ident, t.name) for t in threading.enumerate()
            if t.ident is not None}


def write_at_exit(directory: str) -> None:
    """Write the uncollected events to `directory/xlc-<pid>.trace.json` (nothing when there
    are none; errors are logged, never raised: this runs at interpreter exit)."""
    write_uncollected(collect(), directory, ".trace.json", "run-time profile")
