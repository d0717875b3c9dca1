"""Recycled memory for the CPU executables' large outputs.

A fresh 64 MB output costs its 16K page faults on every call (42-47 % of an elementwise call at
16M-64M elements): glibc serves allocations that large with a new `mmap` each time. Instead,
`OutputPool.array(nbytes, dtype, dims)` hands out a block the pool keeps: the returned array is
made (through `__array_interface__`) from a small `_Block` object that owns the block while
anything uses it - every view of the result, however derived, keeps that object alive through
numpy's base chain. When the last one dies, `_Block.__del__` gives the block back, and the next
call of the same size reuses its pages (already faulted in). Memory is never handed out while
an array still references it.

Bounds: blocks smaller than MIN_BYTES are not pooled (malloc reuses those without faults);
at most MAX_FREE_BYTES of free blocks are kept (the rest are freed as usual). Blocks are
keyed by exact size, which steady-state loops repeat. Thread safe: the free lists sit behind
a re-entrant lock (a block may be given back by the garbage collector on the thread that is
taking one).
"""
from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np

log = logging.getLogger("xlc.backend_cpu")

ALIGN = 4096
"""Blocks start on a page: at a page offset of 64 (as `malloc`'s 16 rounded up to 64) the
stores of a streaming kernel 4K-alias with its next loads from numpy inputs (which start at
offset 16), which made the elementwise chain's kernel ~1.5x slower."""
MIN_BYTES = 1 << 22
"""Outputs at least this big come from the pool. Below, handing out a pooled block (~2 us)
would cost more than it saves: glibc serves such sizes from its heap without faults once its
dynamic mmap threshold has grown (up to 32 MiB)."""
MAX_FREE_BYTES = 1 << 30
"""Free blocks kept at most, in bytes."""


class _Block:
    """Owner of one pooled block while arrays use it (see the module docstring)."""

    __slots__ = ("__array_interface__", "raw", "pool")
    __array_interface__: dict[str, object]
    raw: np.ndarray
    pool: OutputPool | None

    def __del__(self) -> None:
        pool = self.pool
        if pool is not None:
            pool._give_back(self.raw)


class OutputPool:
    """Free blocks by exact byte size; `array` takes one (or allocates), result arrays give it
    back when they die."""

    def __init__(self, max_free_bytes: int = MAX_FREE_BYTES):
        self.max_free_bytes = max_free_bytes
        self._free: dict[int, list[np.ndarray]] = {}
        self._free_bytes = 0
        self._lock = threading.RLock()
        self.reused = 0
        """Blocks handed out again (for tests and tools)."""
        self.allocated = 0
        """Blocks allocated fresh."""

    def array(self, nbytes: int, dtype: np.dtype, dims: tuple[int, ...]) -> tuple[np.ndarray,
                                                                                  int]:
        """A `dims` array of `dtype` over a page-aligned pooled block of `nbytes` (at least the
        array's size), and the block's address."""
        with self._lock:
            free = self._free.get(nbytes)
            raw = free.pop() if free else None
            if raw is not None:
                self._free_bytes -= nbytes
                self.reused += 1
        if raw is None:
            raw = np.empty(nbytes + ALIGN, dtype=np.uint8)
            self.allocated += 1
        addr = raw.ctypes.data
        addr += (-addr) % ALIGN
        block = _Block()
        block.raw = raw
        block.pool = self
        block.__array_interface__ = {"version": 3, "shape": (nbytes,), "typestr": "|u1",
                                     "data": (addr, False)}
        flat = np.asarray(block)  # flat.base is block: every view keeps block alive
        count = 1
        for d in dims:
            count *= d
        return flat[:count * dtype.itemsize].view(dtype).reshape(dims), addr

    def _give_back(self, raw: np.ndarray) -> None:
        nbytes = raw.size - ALIGN
        with self._lock:
            if self._free_bytes + nbytes <= self.max_free_bytes:
                self._free.setdefault(nbytes, []).append(raw)
                self._free_bytes += nbytes

    def clear(self) -> None:
        """Drop every free block."""
        with self._lock:
            self._free.clear()
            self._free_bytes = 0

    def stats(self) -> dict[str, Any]:
        """Free bytes and blocks, and the reuse counters."""
        with self._lock:
            return {"free_bytes": self._free_bytes,
                    "free_blocks": sum(len(v) for v in self._free.values()),
                    "reused": self.reused, "allocated": self.allocated}


OUTPUT_POOL = OutputPool()
"""The process's pool, shared by every CPU executable."""
