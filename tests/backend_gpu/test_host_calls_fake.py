"""Custom-calls with a host implementation on the GPU backend (`emit_custom_call.py`): JAX's
LAPACK programs, a sharding annotation and Python targets run as host-call thunks between
kernels, through the fake driver (no GPU needed), matching JAX's outputs; the thunk
serializes; executables holding one are not graph-captured; a failing call names its target."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("scipy")

import xlc  # noqa: E402
import xlc.ffi  # noqa: E402
from tests.backend_gpu.fake_driver import FakeDriver, use  # noqa: E402
from tests.backend_gpu.helpers import compile_text  # noqa: E402
from xlc.backend_gpu.thunks import HostCallThunk, thunk_from_dict  # noqa: E402
from xlc.errors import CustomCallError, UnsupportedOpError  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "linalg"




@pytest.mark.parametrize("name", ["cho_solve_f32", "cholesky_not_pd_f32", "solve_f64",
                                  "eigh_f64", "svd_f32", "inv_batched_f32",
                                  "sharding_constraint_f32"])
def test_jax_programs_run_on_the_gpu_with_host_calls(name: str, fake: list[FakeDriver],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    text = (DATA / f"{name}.hlo").read_text()
    data = np.load(DATA / f"{name}.npz")
    args = [data[k] for k in sorted(k for k in data if k.startswith("arg"))]
    want = [data[f"out{i}"] for i in range(sum(k.startswith("out") for k in data))]
    exe = compile_text(text)
    use(fake, exe, monkeypatch)
    got = exe.run(args)
    tol = 1e-4 if args[0].dtype == np.float32 else 1e-9
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
    if name != "sharding_constraint_f32":
        assert any(isinstance(t, HostCallThunk) for t in exe.all_thunks())


def test_host_call_thunk_round_trips_and_disables_graphs(fake: list[FakeDriver],
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    exe = compile_text((DATA / "cho_solve_f32.hlo").read_text())
    (t, *_rest) = [t for t in exe.all_thunks() if isinstance(t, HostCallThunk)]
    again = thunk_from_dict(t.to_dict(), exe.assignment.allocations)
    assert again == t
    drv = use(fake, exe, monkeypatch)
    data = np.load(DATA / "cho_solve_f32.npz")
    (out,) = exe.run([data["arg0"], data["arg1"]], graph=True)
    np.testing.assert_allclose(out, data["out0"], rtol=1e-4, atol=1e-4)
    assert drv.graph_launches == 0  # the host is in the loop: no graph capture


def test_python_target_and_callback_on_the_gpu(fake: list[FakeDriver],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    xlc.ffi.register("gpu_twice", python=lambda a: a * 2)
    try:
        def f(v):
            w = xlc.ffi.call("gpu_twice", v, v + 1.0)
            return xlc.pure_callback(lambda a: np.cumsum(a), v, w) * 3.0

        x = np.arange(5, dtype=np.float32)
        lowered = xlc.jit(f).lower(x).as_text()
        exe = compile_text(lowered)
        use(fake, exe, monkeypatch)
        (out,) = exe.run([x])
        np.testing.assert_allclose(out, np.cumsum((x + 1) * 2) * 3)
    finally:
        xlc.ffi.unregister("gpu_twice")


def test_a_failing_host_call_on_the_gpu_names_the_target(fake: list[FakeDriver],
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    def broken(a: np.ndarray) -> np.ndarray:
        raise RuntimeError("no luck")

    xlc.ffi.register("gpu_broken", python=broken)
    try:
        exe = compile_text(xlc.jit(lambda v: xlc.ffi.call("gpu_broken", v, v))
                           .lower(np.ones(3, np.float32)).as_text())
        use(fake, exe, monkeypatch)
        with pytest.raises(CustomCallError, match=r"custom-call target 'gpu_broken' failed on "
                                                  r"the host: RuntimeError: no luck"):
            exe.run([np.ones(3, np.float32)])
    finally:
        xlc.ffi.unregister("gpu_broken")


def test_a_c_target_is_refused_on_the_gpu_by_name() -> None:
    text = """HloModule m
ENTRY e {
  a = f32[4] parameter(0)
  ROOT c = f32[4] custom-call(a), custom_call_target="my_kernel"
}"""
    with pytest.raises(UnsupportedOpError, match=r"GPU backend cannot compile 'custom-call' "
                                                 r"target 'my_kernel' \(c\): it has no device "
                                                 r"implementation"):
        compile_text(text)


def test_saved_gpu_executable_keeps_its_host_calls(tmp_path: Path, fake: list[FakeDriver],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan stores the host-call thunk; a loaded file runs it. A Python target is
    refused when saving."""
    text = (DATA / "cho_solve_f32.hlo").read_text()
    compiled = xlc.compile(text, backend="gpu")
    path = tmp_path / "cho_gpu.xlc"
    compiled.serialize(path)
    loaded = xlc.load(path)
    data = np.load(DATA / "cho_solve_f32.npz")
    use(fake, compiled.executable(), monkeypatch)  # the fake device knows its kernels
    np.testing.assert_allclose(np.asarray(loaded(data["arg0"], data["arg1"])), data["out0"],
                               rtol=1e-4, atol=1e-4)
    f = xlc.jit(lambda v: xlc.pure_callback(np.sin, v, v), backend="gpu")
    with pytest.raises(xlc.ArtifactError, match=r"cannot serialize: the program calls "
                                                r"custom-call target 'xlc.pure_callback.\d+'"):
        f.lower(np.ones(3, np.float32)).compile().serialize(tmp_path / "cb.xlc")
