"""User PTX kernels as GPU custom-call targets (`xlc.ffi.register(..., backend="gpu",
ptx=...)`): checked by ptxas when registered, launched as a kernel thunk on the grid and block
of the launch rule, stored in `.xlc` files as a module of their own, run on a GPU when one is
available."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import xlc
import xlc.ffi
from tests.backend_gpu.fake_driver import FakeDriver, use
from tests.backend_gpu.helpers import compile_text, requires_gpu, requires_ptxas
from xlc.backend_gpu.thunks import KernelThunk, thunk_from_dict
from xlc.errors import ArgumentError, UnsupportedOpError

TWICE = """//
// out[i] = 2 * x[i], one thread per element (the launch covers exactly n elements)
.version 7.0
.target sm_80
.address_size 64

.visible .entry twice(.param .u64 x, .param .u64 out)
{
  .reg .b32 %r<5>;
  .reg .b64 %rd<8>;
  .reg .f32 %f<3>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [out];
  cvta.to.global.u64 %rd3, %rd1;
  cvta.to.global.u64 %rd4, %rd2;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.s32 %r4, %r1, %r2, %r3;
  mul.wide.s32 %rd5, %r4, 4;
  add.s64 %rd6, %rd3, %rd5;
  ld.global.f32 %f1, [%rd6];
  add.f32 %f2, %f1, %f1;
  add.s64 %rd7, %rd4, %rd5;
  st.global.f32 [%rd7], %f2;
  ret;
}
"""


def _launch(operands: list, results: list) -> tuple:
    n = int(np.prod(operands[0]))
    return (n // 128,), (128,)


@pytest.fixture
def twice() -> Iterator[None]:
    xlc.ffi.register("twice", backend="gpu", ptx=TWICE, symbol="twice", launch=_launch)
    yield
    xlc.ffi.unregister("twice", "gpu")


def _program() -> str:
    f = xlc.jit(lambda v: xlc.ffi.call("twice", v, v + 1.0) * 3.0)
    return f.lower(np.ones(512, np.float32)).as_text()


@requires_ptxas
def test_ptx_target_becomes_a_kernel_launch(twice: None) -> None:
    exe = compile_text(_program())
    (k,) = [t for t in exe.all_thunks() if isinstance(t, KernelThunk) and t.kernel == "ffi.twice"]
    assert k.grid == (4, 1, 1) and k.block == (128, 1, 1)
    assert [(a.read, a.written) for a in k.args] == [(True, False), (False, True)]
    assert exe.ffi_modules["ffi.twice"]["symbol"] == "twice"
    again = thunk_from_dict(k.to_dict(), exe.assignment.allocations)
    assert again == k


@requires_ptxas
def test_saved_file_keeps_the_ptx_module(twice: None, tmp_path: Path, fake: list[FakeDriver],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The PTX module travels in the plan; loading checks it defines the kernel and needs no
    registration."""
    compiled = xlc.compile(_program(), backend="gpu")
    path = tmp_path / "twice.xlc"
    compiled.serialize(path)
    xlc.ffi.unregister("twice", "gpu")
    use(fake, compiled.executable(), monkeypatch)  # a device to load for (no run)
    loaded = xlc.load(path)
    assert loaded.executable().ffi_modules == compiled.executable().ffi_modules
    assert ".entry twice" in loaded.executable().ffi_modules["ffi.twice"]["ptx"]


@requires_ptxas
def test_bad_ptx_is_refused_when_registered() -> None:
    with pytest.raises(ArgumentError, match=r"the PTX has no kernel '.entry nothere'"):
        xlc.ffi.register("t", backend="gpu", ptx=TWICE, symbol="nothere", launch=_launch)
    broken = TWICE.replace("add.f32 %f2, %f1, %f1;", "add.f32 %f2, %f1, %f9;")
    with pytest.raises(ArgumentError, match=r"ptxas refuses the PTX"):
        xlc.ffi.register("t", backend="gpu", ptx=broken, symbol="twice", launch=_launch)
    with pytest.raises(ArgumentError, match=r"a ptx target needs launch=rule"):
        xlc.ffi.register("t", backend="gpu", ptx=TWICE, symbol="twice")
    with pytest.raises(ArgumentError, match=r"the GPU backend takes ptx \(or python\) targets"):
        xlc.ffi.register("t", backend="gpu", c_source="int x;")


def test_a_failing_launch_rule_names_the_call() -> None:
    xlc.ffi.register("bad_launch", backend="gpu", ptx=TWICE, symbol="twice",
                     launch=lambda ops, res: 1 / 0) if _has_ptxas() else pytest.skip("ptxas")
    try:
        f = xlc.jit(lambda v: xlc.ffi.call("bad_launch", v, v))
        with pytest.raises(UnsupportedOpError, match=r"of GPU target 'bad_launch': its launch "
                                                     r"rule failed: ZeroDivisionError"):
            compile_text(f.lower(np.ones(4, np.float32)).as_text())
    finally:
        xlc.ffi.unregister("bad_launch", "gpu")


def _has_ptxas() -> bool:
    from xlc.backend_gpu import nvptx

    return nvptx.ptxas_path() is not None


@pytest.mark.gpu
@requires_gpu
def test_ptx_target_runs_on_a_gpu(twice: None) -> None:
    x = np.arange(512, dtype=np.float32)
    out = xlc.jit(lambda v: xlc.ffi.call("twice", v, v + 1.0) * 3.0, backend="gpu")(x)
    np.testing.assert_allclose(np.asarray(out), (x + 1) * 6)
