"""The per-call machinery of the GPU executor that costs no driver call: kernel parameters
packed once, and the bounded record of calls still running on the device.

`PackedParams`: every kernel thunk of a schedule gets, once, an array of its argument
addresses (8 bytes each) and the `void**` array pointing at them, which `cuLaunchKernel`
takes as `kernelParams` (an address: no tuple of ctypes objects built per launch). Before a
call the runtime passes the allocation bases; only the entries of allocations whose base
changed since the previous call are rewritten (arguments and outputs; temps and constants
keep theirs).

`InFlight`: a ring of completion events, one recorded after every GROUP asynchronous calls
(an event record costs as much as a third of a launch, so not one per call). Each call leaves
what must outlive it (host staging blocks, arguments read on another stream) with its group.
When the ring comes round to a group still pending, the host waits for the older half of the
ring first (one event: the calls run in stream order): at most MAX_IN_FLIGHT calls are queued
ahead of the device (back-pressure). A synchronous point (`retire_all`) releases everything.
Results are marked ready with their stream, not an event: waiting for one waits for its
stream (possibly for later calls too).

`Uploads`: the double-buffered parameter blocks that host (numpy) arguments of asynchronous
calls are uploaded into on the runtime's copy stream, so the next call's upload overlaps this
call's kernels.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterable
from typing import Any

from xlc.backend_gpu.thunks import KernelThunk

MAX_IN_FLIGHT = 16
"""Calls one executable may queue per thread ahead of the device before a call waits for
the older ones."""
GROUP = 4
"""Asynchronous calls per completion event (the event marks the end of the group)."""


class PackedParams:
    """Kernel parameter blocks of one runtime (see the module docstring)."""

    def __init__(self, kernels: Iterable[KernelThunk], num_allocations: int):
        self.params: dict[int, int] = {}
        """id(kernel thunk) -> address of its `void**` parameter array."""
        self._keep: list[Any] = []
        self._users: list[list[tuple[Any, int, int, int]]] = \
            [[] for _ in range(num_allocations)]
        self._known: list[int | None] = [None] * num_allocations
        for t in kernels:
            n = len(t.args)
            values = (ctypes.c_uint64 * max(1, n))()
            pointers = (ctypes.c_void_p * max(1, n))(
                *[ctypes.addressof(values) + 8 * i for i in range(max(1, n))])
            self._keep += [values, pointers]
            self.params[id(t)] = ctypes.addressof(pointers)
            for slot, a in enumerate(t.args):
                self._users[a.slice.index].append((values, slot, a.slice.offset, id(t)))

    def patch(self, bases: list[int]) -> set[int]:
        """Write the addresses of the allocations whose base changed; returns the ids of the
        kernel thunks whose parameters changed."""
        known, users = self._known, self._users
        changed: set[int] = set()
        for i, base in enumerate(bases):
            if known[i] != base:
                known[i] = base
                for values, slot, offset, thunk in users[i]:
                    values[slot] = base + offset
                    changed.add(thunk)
        return changed


class InFlight:
    """The completion events of one thread's asynchronous calls (see the module docstring)."""

    def __init__(self, create_event: Callable[[], Any], synchronize: Callable[[Any], None],
                 record: Callable[[Any], None], depth: int | None = None,
                 group: int | None = None):
        """`depth` calls at most in flight (default: MAX_IN_FLIGHT as it is now), one event
        recorded (`record`) per `group` calls (default GROUP)."""
        self.group = group or GROUP
        slots = max(2, (depth or MAX_IN_FLIGHT) // self.group)
        self._sync = synchronize
        self._record = record
        self.events: list[Any] = [create_event() for _ in range(slots)]
        self._pending: list[list[Any] | None] = [None] * slots
        self._next = 0
        self._open: list[Any] = []
        self._open_calls = 0
        self.waits = 0
        """How often a call had to wait for older ones (back-pressure)."""

    def after_call(self, keep: list[Any]) -> None:
        """Account one queued call and what must live until it finished; every `group` calls
        an event is recorded after them."""
        self._open += keep
        self._open_calls += 1
        if self._open_calls >= self.group:
            self._close()

    def _close(self) -> None:
        k, slots = self._next, len(self.events)
        self._next = (k + 1) % slots
        if self._pending[k] is not None:
            # the ring is full: wait for the newest of its older half (stream order: the
            # older groups are done then too), so a long run of calls waits once per
            # slots / 2 groups
            n = max(1, slots // 2)
            while n > 1 and self._pending[(k + n - 1) % slots] is None:
                n -= 1
            self.waits += 1
            self._sync(self.events[(k + n - 1) % slots])
            for i in range(n):
                self._release((k + i) % slots)
        self._record(self.events[k])
        self._pending[k], self._open, self._open_calls = self._open, [], 0

    def _release(self, k: int) -> None:
        keep, self._pending[k] = self._pending[k], None
        _release_all(keep)

    def retire_all(self) -> None:
        """Every call has finished (the caller synchronised): release everything kept."""
        for k in range(len(self._pending)):
            if self._pending[k] is not None:
                self._release(k)
        keep, self._open, self._open_calls = self._open, [], 0
        _release_all(keep)

    def pending(self) -> int:
        """Calls not known to be finished: those of pending groups and the open one."""
        return sum(p is not None for p in self._pending) * self.group + self._open_calls


def _release_all(keep: list[Any] | None) -> None:
    for item in keep or ():
        release = getattr(item, "release", None)
        if release is not None:
            release()


class Staged:
    """A pinned host block that goes back to its pool when released (a keep-list item)."""

    __slots__ = ("ptr", "_give")

    def __init__(self, ptr: int, give: Callable[[int], Any]):
        self.ptr = ptr
        self._give = give

    def release(self) -> None:
        """Give the block back (its copy has finished)."""
        if self.ptr:
            self._give(self.ptr)
            self.ptr = 0


class UploadSlot:
    """One device block a host argument is uploaded into, and the event recorded on the
    compute stream after the last call that read it (`busy` once recorded)."""

    __slots__ = ("ptr", "free", "busy")

    def __init__(self, ptr: int, free: Any):
        self.ptr, self.free, self.busy = ptr, free, False


class Uploads:
    """Two blocks per parameter allocation for the host arguments of asynchronous calls,
    used in turn: call N + 1 uploads into one on the copy stream while call N's kernels read
    the other; before writing a block the copy stream waits for the event recorded after the
    kernels of the call that used it last."""

    def __init__(self, alloc: Callable[[int], int], make_event: Callable[[], Any]):
        self._alloc, self._make_event = alloc, make_event
        self._rings: dict[int, tuple[list[UploadSlot], list[int]]] = {}

    def next(self, allocation: int, size: int) -> UploadSlot:
        """The slot the next upload into `allocation` uses (made on first use)."""
        ring = self._rings.get(allocation)
        if ring is None:
            ring = self._rings[allocation] = (
                [UploadSlot(self._alloc(size), self._make_event()) for _ in range(2)], [0])
        slots, turn = ring
        slot = slots[turn[0]]
        turn[0] ^= 1
        return slot
