"""Memory for GPU calls without a driver allocation per call: a caching pool of device blocks
kept per stream, and a pool of pinned host blocks for staging uploads.

Device blocks (`DevicePool`):
* `take(nbytes, stream)` hands out a block of at least `nbytes` (sizes rounded up to 512
  bytes): a cached block of that size last used on `stream` when there is one, else a new
  one from `cuMemAlloc`. `give(ptr)` puts a block back on the free list of the stream it was
  taken for.
* Reuse is **stream-ordered**: a block given back while work on its stream may still read or
  write it is only handed out again for later work on the same stream, which the stream runs
  after that work. Whoever uses a block on another stream keeps the block alive until that
  work is done (the runtime's in-flight records do).
* When `cuMemAlloc` fails, the pool synchronises the context, frees every cached block and
  tries once more; then it raises `XlcError("GPU out of memory: ...")`. Cached free bytes are
  kept under `CACHE_LIMIT`: past it, the largest cached blocks go back to the driver.

Pinned host blocks (`HostPool`): page-locked blocks (`cuMemHostAlloc`) for asynchronous
uploads of numpy arguments (a copy from pageable memory waits for the stream). `take` and
`give` as above, without streams: the runtime gives a staging block back only once the copy
that reads it has finished.

Both pools are per CUDA context (`cuda.device_pools()`); their counters (`stats()`) tell how
many driver allocations and frees happened, which the tests use to check that calls in steady
state make none.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from xlc.errors import XlcError

log = logging.getLogger("xlc.backend_gpu")

ROUND = 512
"""Block sizes are multiples of this many bytes (and at least this many)."""

CACHE_LIMIT = 4 << 30
"""Free bytes a pool keeps cached; past it the largest cached blocks are freed."""


def rounded(nbytes: int) -> int:
    """`nbytes` rounded up to a block size (a positive multiple of ROUND)."""
    return max(ROUND, -(-int(nbytes) // ROUND) * ROUND)


class _Pool:
    """Free lists keyed by (key, size); the allocation and release functions are the
    driver's. Thread safe."""

    what = "memory"

    def __init__(self, alloc: Callable[[int], int], free: Callable[[int], None],
                 synchronize: Callable[[], None]):
        self._alloc = alloc
        self._free_fn = free
        self._synchronize = synchronize
        self._lock = threading.Lock()
        self._free: dict[tuple[Any, int], list[int]] = {}
        self._live: dict[int, tuple[Any, int]] = {}
        self.cached_bytes = 0
        self.live_bytes = 0
        self.driver_allocs = 0
        self.driver_frees = 0
        self.reuses = 0

    def _take(self, nbytes: int, key: Any) -> int:
        size = rounded(nbytes)
        with self._lock:
            free = self._free.get((key, size))
            if free:
                ptr = free.pop()
                self.cached_bytes -= size
                self.reuses += 1
                self._live[ptr] = (key, size)
                self.live_bytes += size
                return ptr
        ptr = self._new(size)
        with self._lock:
            self._live[ptr] = (key, size)
            self.live_bytes += size
        return ptr

    def _new(self, size: int) -> int:
        try:
            ptr = self._alloc(size)
        except XlcError as first:
            # out of memory (or fragmented): wait for pending work, give the cache back, retry
            self._synchronize()
            freed = self.release_cached()
            try:
                ptr = self._alloc(size)
            except XlcError:
                raise XlcError(f"GPU out of {self.what}: {size} bytes requested, "
                               f"{self.live_bytes} bytes in use by xlc ({freed} cached bytes "
                               f"released first; the driver said: {first})") from None
        with self._lock:
            self.driver_allocs += 1
        return ptr

    def give(self, ptr: int) -> bool:
        """Put block `ptr` back on its free list; False when the pool did not hand it out."""
        with self._lock:
            entry = self._live.pop(int(ptr), None)
            if entry is None:
                return False
            self.live_bytes -= entry[1]
            self._free.setdefault(entry, []).append(int(ptr))
            self.cached_bytes += entry[1]
            over = self.cached_bytes > CACHE_LIMIT
        if over:
            self._trim(CACHE_LIMIT)
        return True

    def _trim(self, limit: int) -> int:
        """Free cached blocks, largest first, until at most `limit` bytes stay cached."""
        freed = 0
        while True:
            with self._lock:
                if self.cached_bytes <= limit:
                    return freed
                key = max((k for k, v in self._free.items() if v), key=lambda k: k[1])
                ptr = self._free[key].pop()
                self.cached_bytes -= key[1]
                self.driver_frees += 1
            self._free_fn(ptr)
            freed += key[1]

    def release_cached(self) -> int:
        """Free every cached block; returns the bytes freed."""
        return self._trim(0)

    def stats(self) -> dict[str, int]:
        """live_bytes, cached_bytes, driver_allocs, driver_frees, reuses."""
        with self._lock:
            return {"live_bytes": self.live_bytes, "cached_bytes": self.cached_bytes,
                    "driver_allocs": self.driver_allocs, "driver_frees": self.driver_frees,
                    "reuses": self.reuses}


class DevicePool(_Pool):
    """Device blocks cached per stream (see the module docstring)."""

    what = "device memory"

    def take(self, nbytes: int, stream: Any) -> int:
        """A device block of at least `nbytes` for work on `stream`."""
        return self._take(nbytes, stream)

    def stream_of(self, ptr: int) -> Any:
        """The stream block `ptr` was taken for; None when the pool did not hand it out."""
        with self._lock:
            entry = self._live.get(int(ptr))
        return None if entry is None else entry[0]


class HostPool(_Pool):
    """Pinned host blocks for staging (see the module docstring)."""

    what = "pinned host memory"

    def take(self, nbytes: int) -> int:
        """A pinned host block of at least `nbytes`."""
        return self._take(nbytes, None)
