"""Host arguments of asynchronous calls are uploaded on a copy stream into one of two blocks
per parameter (launch.Uploads, issue 14): the next call's upload overlaps this call's kernels,
and a block is rewritten only after the kernels of the call that last read it. Checked on the
timed fake driver (a virtual clock per stream) against the evaluator."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.backend_gpu.fake_driver import OP_NS, FakeDriver, use_timed
from tests.backend_gpu.helpers import compile_text
from tests.backend_gpu.test_runtime_fake import ROW_SUMS
from xlc.backend_gpu import cuda
from xlc.hlo.evaluator import evaluate
from xlc.hlo.parser import parse_module

RNG = np.random.default_rng(14)


def _calls(drv: FakeDriver, name: str) -> list[tuple[Any, ...]]:
    """Record the arguments of every `name` call from now on."""
    seen: list[tuple[Any, ...]] = []
    original = getattr(drv, name)

    def spy(*args: Any) -> Any:
        seen.append(args)
        return original(*args)
    setattr(drv, name, spy)
    return seen


def test_uploads_run_on_the_copy_stream_into_alternating_blocks(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_text(ROW_SUMS)
    drv = use_timed(fake, exe, monkeypatch)
    copies, waits = _calls(drv, "cuMemcpyHtoDAsync"), _calls(drv, "cuStreamWaitEvent")
    launches = _calls(drv, "cuLaunchKernel")
    xs = [RNG.standard_normal((6, 40)).astype(np.float32) for _ in range(4)]
    outs = [exe.run_on_device([x])[0] for x in xs]
    s0, copy = cuda.thread_stream(), exe.runtime().copy_stream
    assert copy is not s0
    assert [c[3] for c in copies] == [copy] * 4
    assert {launch[8] for launch in launches} == {s0}
    blocks = [c[0] for c in copies]
    assert blocks[0] == blocks[2] != blocks[1] == blocks[3]
    # the compute stream waits for each call's uploads; the copy stream waits before
    # rewriting a block (calls 3 and 4) for the kernels of the call that read it
    assert [w[0] for w in waits].count(s0) == 4 and [w[0] for w in waits].count(copy) == 2
    for x, out in zip(xs, outs):
        want = evaluate(parse_module(ROW_SUMS), [x])
        np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-5, atol=1e-5)


def test_uploads_overlap_the_previous_calls_kernels(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    """Four calls of one kernel with a host argument: the compute stream's virtual clock ends
    at one upload plus four launches (was four of each, all on one stream)."""
    exe = compile_text(ROW_SUMS)
    drv = use_timed(fake, exe, monkeypatch)
    xs = [RNG.standard_normal((6, 40)).astype(np.float32) for _ in range(4)]
    outs = [exe.run_on_device([x])[0] for x in xs]
    s0 = cuda.thread_stream()
    assert drv.clocks[s0] == OP_NS["h2d"] + 4 * OP_NS["launch"]
    exe.runtime().synchronize()
    assert all(o.to_numpy().shape == (6,) for o in outs)


def test_synchronous_calls_upload_on_the_compute_stream(
        fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    """A call returning numpy arrays waits for its results anyway: its (pageable) upload
    stays on the compute stream, no copy stream is made."""
    exe = compile_text(ROW_SUMS)
    drv = use_timed(fake, exe, monkeypatch)
    copies = _calls(drv, "cuMemcpyHtoDAsync")
    x = RNG.standard_normal((6, 40)).astype(np.float32)
    exe.run([x])
    assert [c[3] for c in copies] == [cuda.thread_stream()]
    assert exe.runtime()._copy_stream is None
