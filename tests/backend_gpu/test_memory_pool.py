"""The GPU memory pools (memory_pool.py) and packed kernel parameters (launch.py) on their own,
with host-side stand-ins for the driver's allocation functions."""
from __future__ import annotations

import ctypes

import pytest

from xlc.backend_gpu import memory_pool
from xlc.backend_gpu.launch import InFlight, PackedParams
from xlc.backend_gpu.memory_pool import DevicePool, HostPool, rounded
from xlc.backend_gpu.thunks import KernelArg, KernelThunk
from xlc.errors import XlcError
from xlc.passes.allocation import BufferAllocation, Slice


class Heap:
    """Fake allocation functions: addresses counted up, frees logged."""

    def __init__(self) -> None:
        self.next = 1 << 20
        self.freed: list[int] = []
        self.syncs = 0

    def alloc(self, n: int) -> int:
        ptr, self.next = self.next, self.next + n
        return ptr

    def free(self, ptr: int) -> None:
        self.freed.append(ptr)

    def sync(self) -> None:
        self.syncs += 1


def test_sizes_round_up_to_512_bytes() -> None:
    assert [rounded(n) for n in (0, 1, 512, 513, 4096)] == [512, 512, 512, 1024, 4096]


def test_blocks_are_reused_per_stream_and_size() -> None:
    heap = Heap()
    pool = DevicePool(heap.alloc, heap.free, heap.sync)
    a = pool.take(1000, "s0")
    assert pool.stream_of(a) == "s0" and pool.stream_of(12345) is None
    assert pool.give(a) and not pool.give(a)        # a second give is not the pool's
    assert pool.take(900, "s1") != a                # another stream: not reused
    assert pool.take(600, "s0") == a                # same stream, same rounded size
    assert pool.take(2000, "s0") != a
    st = pool.stats()
    assert (st["driver_allocs"], st["reuses"], st["driver_frees"]) == (3, 1, 0)
    assert st["live_bytes"] == 1024 + 1024 + 2048 and st["cached_bytes"] == 0


def test_the_cache_stays_under_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_pool, "CACHE_LIMIT", 4096)
    heap = Heap()
    pool = HostPool(heap.alloc, heap.free, heap.sync)
    blocks = [pool.take(n) for n in (1024, 2048, 3072)]
    for b in blocks:
        pool.give(b)
    # 6 KiB cached is over the 4 KiB limit: the largest block went back to the driver
    assert heap.freed == [blocks[2]] and pool.stats()["cached_bytes"] == 3072
    assert pool.release_cached() == 3072 and pool.stats()["cached_bytes"] == 0


def test_an_allocation_failure_releases_the_cache_and_retries() -> None:
    heap = Heap()
    fail = {"n": 1}

    def alloc(n: int) -> int:
        if fail["n"]:
            fail["n"] -= 1
            raise XlcError("CUDA error in cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY")
        return heap.alloc(n)
    pool = DevicePool(heap.alloc, heap.free, heap.sync)
    cached = pool.take(512, "s")
    pool.give(cached)
    pool._alloc = alloc  # type: ignore[method-assign]
    assert pool.take(4096, "s")
    assert heap.syncs == 1 and heap.freed == [cached]


ALLOCS = [BufferAllocation(i, 4096) for i in range(3)]


def _kernel(*slices: tuple[int, int]) -> KernelThunk:
    return KernelThunk("k", kernel="k", args=[KernelArg(Slice(ALLOCS[i], off, 4), True, False)
                                              for i, off in slices])


def _args(address: int, n: int) -> list[int]:
    slots = (ctypes.c_void_p * n).from_address(address)
    return [ctypes.c_uint64.from_address(slots[i]).value for i in range(n)]


def test_packed_parameters_rewrite_only_changed_bases() -> None:
    k1, k2 = _kernel((0, 0), (1, 256)), _kernel((1, 0), (2, 512), (0, 1024))
    packed = PackedParams([k1, k2], 3)
    assert packed.patch([1000, 2000, 3000]) == {id(k1), id(k2)}
    assert _args(packed.params[id(k1)], 2) == [1000, 2256]
    assert _args(packed.params[id(k2)], 3) == [2000, 3512, 2024]
    assert packed.patch([1000, 2000, 3000]) == set()  # nothing changed: nothing written
    assert packed.patch([1000, 2000, 9000]) == {id(k2)}
    assert packed.patch([1000, 7000, 9000]) == {id(k1), id(k2)}
    assert _args(packed.params[id(k1)], 2) == [1000, 7256]
    assert _args(packed.params[id(k2)], 3) == [7000, 9512, 2024]


def test_the_in_flight_ring_records_one_event_per_group_and_waits_for_its_older_half(
        ) -> None:
    synced: list[str] = []
    recorded: list[str] = []
    names = iter(f"ev{i}" for i in range(10))
    ring = InFlight(lambda: next(names), synced.append, recorded.append, depth=8, group=2)
    released: list[int] = []

    class Item:
        def __init__(self, k: int) -> None:
            self.k = k

        def release(self) -> None:
            released.append(self.k)
    for k in range(16):
        ring.after_call([Item(k)])
    # 8 groups of 2 calls on a ring of 4 events; groups 4 and 6 found the ring full and
    # waited once each for the newer of the two oldest groups
    assert recorded == ["ev0", "ev1", "ev2", "ev3"] * 2
    assert synced == ["ev1", "ev3"] and released == [0, 1, 2, 3, 4, 5, 6, 7]
    assert ring.waits == 2 and ring.pending() == 8
    ring.after_call([Item(16)])       # an open group: kept until the next event or a sync
    assert ring.pending() == 9
    ring.retire_all()
    assert released == list(range(17)) and ring.pending() == 0
