"""The runtime end to end without a GPU: cuda-python is replaced by a fake driver backed by host
memory and the kernel emulator (fake_driver.py), so argument binding, allocations, copies,
events, while/conditional predicates, CUDA-graph capture/replay and device-resident results
are all exercised and checked against the reference evaluator."""
from __future__ import annotations

import numpy as np
import pytest

from tests.backend_gpu.fake_driver import FakeDriver, use
from tests.backend_gpu.helpers import compile_text, compiled_case
from tests.conftest import requires_corpus
from xlc.backend_gpu import cuda
from xlc.backend_gpu.device_array import DeviceArray
from xlc.backend_gpu.thunks import WhileThunk
from xlc.errors import XlcError
from xlc.hlo.evaluator import evaluate
from xlc.hlo.parser import parse_module

RNG = np.random.default_rng(3)




LOOP = """
HloModule loop
cond {
  s = (s32[], f32[4,40]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[4,40]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4,40] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  h = f32[] constant(0.5)
  hb = f32[4,40] broadcast(h), dimensions={}
  y = f32[4,40] multiply(x, hb)
  t = f32[4,40] tanh(y)
  ROOT r = (s32[], f32[4,40]) tuple(j, t)
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4,40] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[4,40]) tuple(z, x)
  w = (s32[], f32[4,40]) while(init), condition=cond, body=body
  v = f32[4,40] get-tuple-element(w), index=1
  zero = f32[] constant(0)
  ROOT s = f32[4] reduce(v, zero), dimensions={1}, to_apply=add
}
"""


def _expect(text: str, args: list[np.ndarray]) -> np.ndarray:
    return np.asarray(evaluate(parse_module(text), args))


def test_while_loop_runs_through_the_runtime(fake: list[FakeDriver],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_text(LOOP)
    drv = use(fake, exe, monkeypatch)
    x = RNG.standard_normal((4, 40)).astype(np.float32)
    (out,) = exe.run([x])
    np.testing.assert_allclose(out, _expect(LOOP, [x]), rtol=1e-5, atol=1e-5)
    # a counted loop: the body runs 3 times and nothing but the result is read back
    (w,) = [t for t in exe.all_thunks() if isinstance(t, WhileThunk)]
    assert w.trip_count == 3
    assert drv.calls.count("d2h") == 1
    (again,) = exe.run([x])
    np.testing.assert_array_equal(again, out)


def test_uncounted_while_reads_the_predicate_back(fake: list[FakeDriver],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    text = LOOP.replace("ROOT c = pred[] compare(i, n), direction=LT",
                        "ROOT c = pred[] compare(n, i), direction=GT")
    exe = compile_text(text)
    drv = use(fake, exe, monkeypatch)
    (w,) = [t for t in exe.all_thunks() if isinstance(t, WhileThunk)]
    assert w.trip_count is None
    x = RNG.standard_normal((4, 40)).astype(np.float32)
    (out,) = exe.run([x])
    np.testing.assert_allclose(out, _expect(text, [x]), rtol=1e-5, atol=1e-5)
    # the predicate was read back once per condition evaluation (3 iterations + exit)
    assert drv.calls.count("d2h") == 4 + 1


ROW_SUMS = """
HloModule small
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[6,40] parameter(0)
  t = f32[6,40] tanh(x)
  zero = f32[] constant(0)
  ROOT s = f32[6] reduce(t, zero), dimensions={1}, to_apply=add
}
"""
"""Two kernels (a tanh and a row reduction) on a small array."""


def test_graph_mode_captures_once_and_replays(fake: list[FakeDriver],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    text = ROW_SUMS
    exe = compile_text(text)
    drv = use(fake, exe, monkeypatch)
    x = RNG.standard_normal((6, 40)).astype(np.float32)
    want = _expect(text, [x])
    (a,) = exe.run([x], graph=True)
    (b,) = exe.run([2 * x], graph=True)
    np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b, _expect(text, [2 * x]), rtol=1e-5, atol=1e-5)
    assert drv.graph_launches == 2
    assert drv.calls.count("launch") == len(exe.kernel_names)  # recorded once


def test_while_disables_graph_mode(fake: list[FakeDriver],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_text(LOOP)
    drv = use(fake, exe, monkeypatch)
    x = RNG.standard_normal((4, 40)).astype(np.float32)
    (out,) = exe.run([x], graph=True)
    assert drv.graph_launches == 0
    np.testing.assert_allclose(out, _expect(LOOP, [x]), rtol=1e-5, atol=1e-5)


@requires_corpus
def test_donated_arguments_and_device_results(fake: list[FakeDriver],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case("adam_update")  # has input_output_alias (donated buffers)
    exe = compiled_case("adam_update")
    drv = use(fake, exe, monkeypatch)
    inputs = [cuda.to_device(a) for a in case.inputs]
    before = [a.to_numpy() for a in inputs]
    outs = exe.run_on_device(inputs)
    assert all(isinstance(o, DeviceArray) for o in outs)
    for got, want in zip(outs, case.outputs):
        np.testing.assert_allclose(got.to_numpy(), want, rtol=case.rtol, atol=case.atol)
    for a, b in zip(inputs, before):  # the caller's device arrays were not clobbered
        np.testing.assert_array_equal(a.to_numpy(), b)
    pool = cuda.device_pools()[0]
    cached = pool.stats()["cached_bytes"]
    del outs
    # the output blocks go back to the memory pool with their DeviceArrays, not to the driver
    assert pool.stats()["cached_bytes"] > cached
    assert not drv.freed


@requires_corpus
@pytest.mark.parametrize("streams", [1, 4])
def test_corpus_case_through_the_runtime(fake: list[FakeDriver],
                                         monkeypatch: pytest.MonkeyPatch,
                                         streams: int) -> None:
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case("cond_switch")
    exe = compiled_case("cond_switch", streams=streams)
    drv = use(fake, exe, monkeypatch)
    for _ in range(2):
        for got, want in zip(exe.run(case.inputs), case.outputs):
            np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol)
    if streams > 1:
        assert drv.calls.count("record") >= exe.plan.num_events


def test_no_device_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    drv = FakeDriver()
    monkeypatch.setattr(drv, "cuDeviceGetCount", lambda: (0, 0))
    monkeypatch.setattr(cuda, "_driver", drv)
    monkeypatch.setattr(cuda, "_context", None)
    exe = compile_text("HloModule m\nENTRY e {\n  a = f32[4] parameter(0)\n"
                       "  ROOT r = f32[4] negate(a)\n}\n")
    with pytest.raises(XlcError, match=r"^no CUDA device available: the driver reports 0 "
                                       r"devices$"):
        exe.run([np.ones(4, np.float32)])
