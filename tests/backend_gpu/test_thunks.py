"""Thunk trees: serialisation round trips, read/write sets, and the schedules the emitter
builds for control flow and copies."""
from __future__ import annotations

import json

import pytest

from tests.backend_gpu.helpers import compile_text, compiled_case
from tests.conftest import corpus_cases, requires_corpus
from xlc.backend_gpu.thunks import (
    ConditionalThunk,
    DeviceToDeviceCopyThunk,
    KernelArg,
    KernelThunk,
    Memset32Thunk,
    MemzeroThunk,
    SequentialThunk,
    WhileThunk,
    thunk_from_dict,
)
from xlc.errors import ArtifactError
from xlc.passes.allocation import BufferAllocation, Slice

ALLOCS = [BufferAllocation(i, 1024) for i in range(6)]


def _slice(allocation: int, offset: int, size: int) -> Slice:
    """A Slice of allocation number `allocation` of ALLOCS."""
    return Slice(ALLOCS[allocation], offset, size)


def _every_kind() -> SequentialThunk:
    s = _slice(1, 256, 64)
    k = KernelThunk("fusion.1", kernel="fusion_1_k", grid=(4, 1, 1), block=(128, 1, 1),
                    shared_bytes=512, args=[KernelArg(s, True, False),
                                            KernelArg(_slice(2, 0, 64), False, True)],
                    stream=1, wait_events=[0], record_event=3)
    w = WhileThunk("while.1", condition=SequentialThunk("cond", thunks=[k]),
                   predicate=_slice(3, 0, 1),
                   body=SequentialThunk("body", thunks=[MemzeroThunk("z", dest=s)]))
    c = ConditionalThunk("cond.1", index=_slice(4, 0, 4), index_is_pred=False,
                         branches=[SequentialThunk("b0"),
                                   SequentialThunk("b1", thunks=[
                                       Memset32Thunk("m", dest=s, value=0x3F800000)])])
    d = DeviceToDeviceCopyThunk("copy.1", src=s, dst=_slice(5, 0, 64))
    return SequentialThunk("main", thunks=[k, w, c, d])


def test_every_thunk_kind_round_trips_through_json() -> None:
    seq = _every_kind()
    d = seq.to_dict()
    again = thunk_from_dict(json.loads(json.dumps(d)), ALLOCS)
    assert again.to_dict() == d
    assert again == seq
    kinds = [t.kind for t in again.walk()]
    assert kinds == ["sequential", "kernel", "while", "sequential", "kernel", "sequential",
                     "memzero", "conditional", "sequential", "sequential", "memset32",
                     "d2d_copy"]


def test_read_and_write_sets() -> None:
    seq = _every_kind()
    k = seq.thunks[0]
    assert k.reads() == [_slice(1, 256, 64)]
    assert k.writes() == [_slice(2, 0, 64)]
    assert _slice(3, 0, 1) not in seq.thunks[1].reads()  # the predicate is host-read
    assert seq.thunks[2].reads()[0] == _slice(4, 0, 4)
    assert _slice(1, 0, 300).overlaps(_slice(1, 256, 64))
    assert not _slice(1, 0, 256).overlaps(_slice(1, 256, 64))


def test_unknown_thunk_kind_is_an_artifact_error() -> None:
    with pytest.raises(ArtifactError, match="unknown thunk kind 'gemm_cublas' in artifact"):
        thunk_from_dict({"kind": "gemm_cublas", "hlo": "dot"}, ALLOCS)


@requires_corpus
@pytest.mark.parametrize("name", corpus_cases(include_benchmarks=False))
def test_corpus_schedule_round_trips(name: str) -> None:
    exe = compiled_case(name)
    d = json.loads(json.dumps(exe.to_dict()))
    assert thunk_from_dict(d["thunks"], exe.allocations).to_dict() == exe.thunks.to_dict()
    assert d["kernels"] == exe.kernel_names
    # every thunk writes only to allocations that are not read-only (parameters, constants)
    for t in exe.all_thunks():
        for s in t.writes():
            alloc = exe.assignment.allocations[s.index]
            assert not alloc.is_readonly, (t.hlo, alloc)


@requires_corpus
def test_while_loop_becomes_a_while_thunk() -> None:
    exe = compiled_case("power_iteration")
    whiles = [t for t in exe.all_thunks() if isinstance(t, WhileThunk)]
    assert len(whiles) == 1
    w = whiles[0]
    assert w.predicate.size == 1 and w.condition.thunks and w.body.thunks
    assert w.trip_count == 30  # fori_loop(0, 30): counted, no host round trips
    assert any(isinstance(t, KernelThunk) for t in w.body.walk())


@requires_corpus
def test_conditional_becomes_a_conditional_thunk() -> None:
    exe = compiled_case("cond_switch")
    conds = [t for t in exe.all_thunks() if isinstance(t, ConditionalThunk)]
    assert len(conds) == 2
    assert all(len(c.branches) >= 2 for c in conds)


def test_copy_with_same_layout_is_a_memcpy_and_transpose_copy_a_kernel() -> None:
    exe = compile_text("""
HloModule m
ENTRY e {
  p = f32[64,32]{1,0} parameter(0)
  c = f32[64,32]{1,0} copy(p)
  t = f32[64,32]{0,1} copy(p)
  ROOT r = (f32[64,32]{1,0}, f32[64,32]{0,1}) tuple(c, t)
}
""", fusion=False)
    kinds = [t.kind for t in exe.thunks.thunks]
    assert sorted(kinds) == ["d2d_copy", "kernel"]
    k = next(t for t in exe.thunks.thunks if isinstance(t, KernelThunk))
    assert k.block == (32, 8, 1) and k.grid == (2, 1, 1)
    assert "bar.sync" in exe.ptx


def test_dynamic_update_slice_is_in_place() -> None:
    exe = compile_text("""
HloModule m
ENTRY e {
  p = f32[64,64] parameter(0)
  u = f32[8,8] parameter(1)
  i = s32[] parameter(2)
  a = f32[64,64] add(p, p)
  d = f32[64,64] dynamic-update-slice(a, u, i, i)
  ROOT n = f32[64,64] negate(d)
}
""", fusion=False)
    ks = [t for t in exe.thunks.thunks if isinstance(t, KernelThunk)]
    dus = next(t for t in ks if t.hlo == "d")
    # the update kernel covers only the 8x8 window and writes the buffer `a` lives in
    assert dus.grid == (1, 1, 1) and dus.block == (64, 1, 1)
    add = next(t for t in ks if t.hlo == "a")
    assert add.writes() == dus.writes()
    assert not any(isinstance(t, DeviceToDeviceCopyThunk) for t in exe.thunks.thunks)
