"""backend="gpu" through the public API, the CLI and `.xlc` artifacts.

Device-free: compiling needs no GPU (PTX, plus a cubin when ptxas is on the PATH), running
without one raises a clear XlcError, cuda-python is imported lazily. Execution is checked
through the fake driver (fake_driver.py: host memory + the kernel emulator), so the path from
`xlc.jit` / `xlc.compile` / `xlc.load` down to the launches runs here too.
"""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xlc.numpy as xnp

import xlc
from tests.backend_gpu.fake_driver import FakeDriver
from tests.backend_gpu.helpers import requires_ptxas
from tests.conftest import CORPUS, requires_corpus
from xlc.artifact.manifest import CUBIN_MEMBER, PTX_MEMBER
from xlc.backend_gpu import cuda, nvptx
from xlc.backend_gpu.device_array import DeviceArray
from xlc.backend_gpu.executable import GpuExecutable
from xlc.cli import main
from xlc.errors import ArgumentError, ArtifactError, XlcError
from xlc.options import CompileOptions

RNG = np.random.default_rng(11)
OPTS = CompileOptions(backend="gpu", verify=True)
SOFTMAX = CORPUS / "cases" / "softmax"


def _has_gpu() -> bool:
    try:
        cuda.primary_context()
    except XlcError:
        return False
    return True


HAS_GPU = _has_gpu()
no_gpu_here = pytest.mark.skipif(HAS_GPU, reason="a GPU is available here")


def mlp(w: np.ndarray, x: np.ndarray) -> object:
    """A small model: dot, bias-free relu, softmax (dot + loop and reduction fusions)."""
    return xlc.nn.softmax(xnp.maximum(x @ w, 0.0), axis=-1)


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    return (RNG.standard_normal((32, 48)).astype(np.float32),
            RNG.standard_normal((8, 32)).astype(np.float32))


def _reference(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    h = np.maximum(x @ w, 0)
    e = np.exp(h - h.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """`fake(exe, cc=80)` installs a FakeDriver running `exe`'s kernels in the emulator."""
    def install(exe: GpuExecutable, cc: int = 80) -> FakeDriver:
        drv = FakeDriver(exe, compute_capability=cc)
        monkeypatch.setattr(cuda, "_driver", drv)
        monkeypatch.setattr(cuda, "_context", None)
        return drv
    yield install


def _gpu_exe(compiled: Any) -> GpuExecutable:
    exe = compiled.executable()
    assert isinstance(exe, GpuExecutable)
    return exe


# ---- compiling -----------------------------------------------------------------------------
def test_jit_compiles_for_the_gpu_without_a_device() -> None:
    w, x = _inputs()
    compiled = xlc.jit(mlp, backend="gpu").lower(w, x).compile()
    exe = _gpu_exe(compiled)
    assert compiled.backend == "gpu" and ".target sm_80" in exe.ptx
    assert set(exe.kernel_names) == set(re.findall(r"\.entry\s+(\w+)", exe.ptx))
    assert compiled.memory_stats()["output_bytes"] == 8 * 48 * 4
    if nvptx.ptxas_path() is not None:
        assert exe.cubin is not None and exe.cubin[:4] == b"\x7fELF"  # assembled by ptxas
    else:
        assert exe.cubin is None


def test_compile_hlo_text_and_optimize_for_the_gpu() -> None:
    text = ("HloModule m\nENTRY e {\n  a = f32[1000] parameter(0)\n  b = f32[24] parameter(1)\n"
            "  n = f32[1000] negate(a)\n  x = f32[24] exponential(b)\n"
            "  ROOT t = (f32[1000], f32[24]) tuple(n, x)\n}\n")
    compiled = xlc.compile(text, backend="gpu", options=OPTS)
    assert len(_gpu_exe(compiled).kernel_names) == 2
    opt = xlc.api.optimize_module(xlc.hlo.parser.parse_module(text), backend="gpu")
    # GPU slices start on 256-byte boundaries (128-bit vector accesses on any slice)
    offsets = [off for a in opt.assignment.allocations for off, _ in a.assigned.values()]
    assert offsets and all(off % 256 == 0 for off in offsets)


@pytest.mark.parametrize("kw,message", [
    ({"gpu_sm": 81}, r"unsupported GPU architecture sm_81 \(gpu_sm\); known: 50, 52"),
    ({"gpu_sm": 90, "gpu_ptx_version": 70}, r"PTX ISA 7\.0 cannot target sm_90: it needs PTX "
                                              r"ISA 7\.8 or newer"),
    ({"gpu_ptx_version": 99}, r"unsupported PTX ISA version 99 \(9\.9\); known: "),
    ({"gpu_streams": 0}, r"gpu_streams must be at least 1, got 0"),
])
def test_bad_gpu_options_are_argument_errors(kw: dict, message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        xlc.compile("HloModule m\nENTRY e {\n  ROOT a = f32[4] parameter(0)\n}\n",
                    backend="gpu", options=OPTS.replace(**kw))


@requires_ptxas
@pytest.mark.parametrize("sm,version", [(75, "7.8"), (90, "7.8"), (100, "8.6"), (120, "8.7")])
def test_newer_architectures_get_the_ptx_version_they_need(sm: int, version: str) -> None:
    w, x = _inputs()
    exe = _gpu_exe(xlc.compile(xlc.jit(mlp).lower(w, x).module, backend="gpu",
                               options=OPTS.replace(gpu_sm=sm)))
    assert f".version {version}\n.target sm_{sm}\n" in exe.ptx
    assert nvptx.ptxas(exe.ptx, sm)[:4] == b"\x7fELF"


def test_cuda_python_is_imported_lazily() -> None:
    # CPU programs, and GPU compiles for a named architecture, never load cuda-python (without
    # gpu_sm, a GPU compile asks the driver for the device's architecture)
    code = ("import sys, numpy as np, xlc\n"
            "xlc.jit(lambda x: x * 2)(np.ones(4, np.float32))\n"
            "o = xlc.CompileOptions(backend='gpu', gpu_sm=80)\n"
            "m = xlc.jit(lambda x: x * 2).lower(np.ones(4, np.float32)).module\n"
            "c = xlc.compile(m, options=o)\n"
            "assert not [m for m in sys.modules if m == 'cuda' or m.startswith('cuda.')]\n"
            "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


# ---- running without a GPU -----------------------------------------------------------------
@no_gpu_here
def test_running_without_a_gpu_is_a_clear_error() -> None:
    w, x = _inputs()
    f = xlc.jit(mlp, backend="gpu")
    with pytest.raises(XlcError, match=r"^no CUDA device available: "):
        f(w, x)
    with pytest.raises(XlcError, match=r"^no CUDA device available: "):
        f.lower(w, x).compile().call_on_device(w, x)


def test_missing_cuda_python_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda, "_driver", None)
    for name in ("cuda", "cuda.bindings", "cuda.bindings.driver", "cuda.cuda"):
        monkeypatch.setitem(sys.modules, name, None)  # makes `import` fail
    compiled = xlc.jit(lambda a: a + 1, backend="gpu").lower(np.ones(3, np.float32)).compile()
    with pytest.raises(XlcError, match=r"^no CUDA device available: cuda-python is not "
                                       r"installed \(pip install cuda-python\)$"):
        compiled(np.ones(3, np.float32))


def test_missing_driver_library_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    drv = FakeDriver()

    def no_library(flags: int) -> tuple[int]:
        raise RuntimeError('"cuda" is an NVIDIA driver library and can only be found via '
                           'system search')
    monkeypatch.setattr(drv, "cuInit", no_library)
    monkeypatch.setattr(cuda, "_driver", drv)
    monkeypatch.setattr(cuda, "_context", None)
    compiled = xlc.jit(lambda a: a + 1, backend="gpu").lower(np.ones(3, np.float32)).compile()
    with pytest.raises(XlcError, match=r"^no CUDA device available: the NVIDIA driver library "
                                       r"could not be loaded \(\"cuda\" is an NVIDIA driver"):
        compiled(np.ones(3, np.float32))


def test_device_results_need_the_gpu_backend() -> None:
    compiled = xlc.jit(lambda a: a + 1, backend="interpreter").lower(np.ones(3)).compile()
    with pytest.raises(ArgumentError, match=r"results can stay on the device only with "
                                            r"backend='gpu' \(this executable is for "
                                            r"'interpreter'\)"):
        compiled.call_on_device(np.ones(3))


# ---- running through the fake driver -------------------------------------------------------
def test_jit_runs_through_the_runtime(fake: object) -> None:
    w, x = _inputs()
    f = xlc.jit(mlp, backend="gpu")
    drv = fake(_gpu_exe(f.lower(w, x).compile()))  # type: ignore[operator]
    np.testing.assert_allclose(f(w, x), _reference(w, x), rtol=1e-5, atol=1e-6)
    assert drv.loaded == ([b"\x7fELF"] if nvptx.ptxas_path() else [b"//\n/"])
    assert drv.calls.count("launch") == len(_gpu_exe(f.lower(w, x).compile()).kernel_names)


def test_device_arrays_in_and_out(fake: object) -> None:
    w, x = _inputs()
    compiled = xlc.jit(mlp, backend="gpu").lower(w, x).compile()
    fake(_gpu_exe(compiled))  # type: ignore[operator]
    assert xlc.DeviceArray is DeviceArray
    dw, dx = xlc.DeviceArray.from_numpy(w), DeviceArray.from_numpy(x)
    out = compiled.call_on_device(dw, dx)
    assert isinstance(out, DeviceArray) and out.shape == (8, 48)
    np.testing.assert_allclose(out.to_numpy(), _reference(w, x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(compiled(dw, x), _reference(w, x), rtol=1e-5, atol=1e-6)
    with pytest.raises(ArgumentError, match=r"argument 1 \('x'\): expected f32\[8,32\], got "
                                            r"f32\[32,48\] \(on the GPU\)"):
        compiled(dw, dw)


class _Foreign:
    """A device array of another library: only `__cuda_array_interface__`."""

    def __init__(self, inner: DeviceArray, strides: tuple[int, ...] | None = None):
        self.inner = inner
        self.__cuda_array_interface__ = dict(inner.__cuda_array_interface__, strides=strides)


def test_foreign_cuda_arrays_are_used_in_place(fake: object) -> None:
    w, x = _inputs()
    compiled = xlc.jit(mlp, backend="gpu").lower(w, x).compile()
    fake(_gpu_exe(compiled))  # type: ignore[operator]
    fw = _Foreign(DeviceArray.from_numpy(w), strides=(48 * 4, 4))  # C-contiguous, explicit
    np.testing.assert_allclose(compiled(fw, x), _reference(w, x), rtol=1e-5, atol=1e-6)
    bad = _Foreign(DeviceArray.from_numpy(w), strides=(4, 32 * 4))
    with pytest.raises(ArgumentError, match=r"argument 0 \('w'\): unusable device array "
                                            r"\(device array of shape \(32, 48\) is not "
                                            r"C-contiguous"):
        compiled(bad, x)


def test_cuda_graphs_option(fake: object) -> None:
    w, x = _inputs()
    f = xlc.jit(mlp, backend="gpu")
    f.options = f.options.replace(gpu_graphs=True)
    compiled = f.lower(w, x).compile()
    drv = fake(_gpu_exe(compiled))  # type: ignore[operator]
    for scale in (1.0, 2.0):
        np.testing.assert_allclose(compiled(w * scale, x), _reference(w * scale, x),
                                   rtol=1e-5, atol=1e-6)
    out = compiled.call_on_device(w, x)  # graph mode copies results out of its fixed blocks
    np.testing.assert_allclose(out.to_numpy(), _reference(w, x), rtol=1e-5, atol=1e-6)
    assert drv.graph_launches == 3
    assert drv.calls.count("launch") == len(_gpu_exe(compiled).kernel_names)  # captured once


@pytest.mark.parametrize("cc,kind", [(80, "cubin"), (86, "cubin"), (90, "ptx")])
def test_the_runtime_loads_the_image_the_device_can_run(fake: object, cc: int,
                                                        kind: str) -> None:
    compiled = xlc.jit(lambda a: xnp.exp(a), backend="gpu").lower(np.ones(8, np.float32))
    exe = _gpu_exe(compiled.compile())
    if exe.cubin is None:
        exe.cubin = b"\x7fELF-stand-in"  # (no ptxas here): selection only looks at presence
    fake(exe, cc)  # type: ignore[operator]
    np.testing.assert_allclose(exe.run([np.zeros(8, np.float32)])[0], np.ones(8), rtol=1e-6)
    assert exe.runtime().image_kind == kind


def test_a_gpu_older_than_the_target_is_refused(fake: object) -> None:
    exe = _gpu_exe(xlc.compile("HloModule m\nENTRY e {\n  a = f32[4] parameter(0)\n  ROOT n = "
                               "f32[4] negate(a)\n}\n", backend="gpu",
                               options=OPTS.replace(gpu_sm=90)))
    fake(exe, 86)  # type: ignore[operator]
    with pytest.raises(XlcError, match=r"this GPU \(sm_86\) is older than the code's target "
                                       r"sm_90; recompile with gpu_sm=86 "
                                       r"\(XLC_FLAGS=--gpu-sm=86\)"):
        exe.run([np.ones(4, np.float32)])


# ---- artifacts and the CLI -----------------------------------------------------------------
def test_serialize_and_load_a_gpu_executable(tmp_path: Path, fake: object) -> None:
    w, x = _inputs()
    compiled = xlc.jit(mlp, backend="gpu").lower(w, x).compile()
    compiled.serialize(str(tmp_path / "mlp.xlc"))
    names = zipfile.ZipFile(tmp_path / "mlp.xlc").namelist()
    assert PTX_MEMBER in names and (CUBIN_MEMBER in names) == (nvptx.ptxas_path() is not None)
    loaded = xlc.load(str(tmp_path / "mlp.xlc"))
    assert loaded.manifest.backend == "gpu" and loaded.manifest.target.gpu_compute_capability == 80
    original, restored = _gpu_exe(compiled), _gpu_exe(loaded)
    assert restored.to_dict(code=False) == original.to_dict(code=False)
    assert restored.ptx == original.ptx and restored.cubin == original.cubin
    assert loaded.memory_stats() == compiled.memory_stats()
    fake(original)  # the loaded schedule runs the same kernels
    np.testing.assert_allclose(loaded(w, x), _reference(w, x), rtol=1e-5, atol=1e-6)


@requires_corpus
def test_gpu_artifact_with_constants_and_control_flow(tmp_path: Path, fake: object) -> None:
    from corpus import load_case  # type: ignore[import-not-found]

    for name in ("baked_constants", "cond_switch"):
        case = load_case(name)
        # FP32 dots: the corpus's tolerances are for FP32 results
        compiled = xlc.compile(case.module_text, backend="gpu",
                               options=OPTS.replace(default_matmul_precision="highest"))
        compiled.serialize(str(tmp_path / f"{name}.xlc"))
        loaded = xlc.load(str(tmp_path / f"{name}.xlc"))
        fake(_gpu_exe(compiled))  # type: ignore[operator]
        got = loaded(*case.inputs)
        for g, want in zip(got if isinstance(got, tuple) else [got], case.outputs):
            np.testing.assert_allclose(g, want, rtol=case.rtol, atol=case.atol)


def test_a_damaged_gpu_description_is_an_artifact_error(tmp_path: Path) -> None:
    from xlc.api import load_bytes
    from xlc.artifact.archive import read_archive
    from xlc.artifact.manifest import MemberInfo
    from xlc.artifact.store import _zip, build_archive, signature_of
    from xlc.backend_gpu.artifact_io import PLAN_MEMBER

    compiled = xlc.jit(lambda a: a * 2, backend="gpu").lower(np.ones(4, np.float32)).compile()
    archive = read_archive(build_archive(compiled._exe, "gpu", signature_of(compiled)), "x")
    desc = json.loads(archive.members[PLAN_MEMBER])
    desc["thunks"]["thunks"][0]["kernel"] = "no_such_kernel"
    members = dict(archive.members, **{PLAN_MEMBER: json.dumps(desc).encode()})
    hashes = {n: MemberInfo(sha256=hashlib.sha256(b).hexdigest(), size=len(b))
              for n, b in members.items()}  # consistent checksums: only the content is bad
    data = _zip(archive.manifest.model_copy(update={"members": hashes}), members)
    with pytest.raises(ArtifactError, match=r"^bad\.xlc: thunk .* launches unknown kernel "
                                            r"no_such_kernel$"):
        load_bytes(data, "bad.xlc")


def _cli(*args: str) -> int:
    return int(main(list(args)) or 0)


@requires_corpus
def test_cli_compile_inspect_and_run(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     fake: object) -> None:
    out = tmp_path / "sm.xlc"
    assert _cli("compile", str(SOFTMAX / "module.hlo"), "-o", str(out), "--backend", "gpu") == 0
    assert "for gpu" in capsys.readouterr().out
    assert _cli("inspect", str(out)) == 0
    text = capsys.readouterr().out
    assert "backend: gpu" in text and "target:   sm_80" in text and PTX_MEMBER in text
    assert "gpu code: sm_80, PTX ISA 7.8" in text
    assert (CUBIN_MEMBER in text) == (nvptx.ptxas_path() is not None)
    assert _cli("inspect", str(out), "--json") == 0
    data = json.loads(capsys.readouterr().out)
    kernels = data["gpu"]["kernels"]
    assert {k["name"] for k in kernels} == set(_gpu_exe(xlc.load(str(out))).kernel_names)
    assert all(k["block"][0] >= 1 and k["grid"][0] >= 1 for k in kernels)
    if not HAS_GPU:
        assert _cli("run", str(out), "--inputs", str(SOFTMAX / "inputs.npz"), "--output",
                    str(tmp_path / "o.npz")) == 1
        assert "no CUDA device available: " in capsys.readouterr().err
        assert _cli("run", str(SOFTMAX / "module.hlo"), "--backend", "gpu", "--inputs",
                    str(SOFTMAX / "inputs.npz"), "--output", str(tmp_path / "o.npz")) == 1
        assert "no CUDA device available: " in capsys.readouterr().err
    # running (emulated; a small program keeps the emulator quick): compile, run the file
    small = tmp_path / "small.hlo"
    small.write_text(SMALL_SOFTMAX)
    assert _cli("compile", str(small), "-o", str(out), "--backend", "gpu") == 0
    x = RNG.standard_normal((4, 40)).astype(np.float32)
    np.savez(tmp_path / "in.npz", in0=x)
    fake(_gpu_exe(xlc.compile(SMALL_SOFTMAX, backend="gpu", options=OPTS)))  # type: ignore
    assert _cli("run", str(out), "--inputs", str(tmp_path / "in.npz"), "--output",
                str(tmp_path / "o.npz")) == 0
    e = np.exp(x - x.max(1, keepdims=True))
    with np.load(tmp_path / "o.npz") as got:
        np.testing.assert_allclose(got["out0"], e / e.sum(1, keepdims=True), rtol=1e-5,
                                   atol=1e-6)


SMALL_SOFTMAX = """HloModule small_softmax
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4,40] parameter(0)
  ninf = f32[] constant(-inf)
  m = f32[4] reduce(x, ninf), dimensions={1}, to_apply=max
  mb = f32[4,40] broadcast(m), dimensions={0}
  d = f32[4,40] subtract(x, mb)
  ex = f32[4,40] exponential(d)
  zero = f32[] constant(0)
  s = f32[4] reduce(ex, zero), dimensions={1}, to_apply=add
  sb = f32[4,40] broadcast(s), dimensions={0}
  ROOT r = f32[4,40] divide(ex, sb)
}
"""


def test_compile_cache_stores_and_reloads_gpu_executables(tmp_path: Path, fake: object) -> None:
    w, x = _inputs()
    opts = OPTS.replace(cache_dir=str(tmp_path / "cache"))
    module = xlc.jit(mlp).lower(w, x).module
    first = xlc.compile(module, backend="gpu", options=opts)
    second = xlc.compile(module, backend="gpu", options=opts)  # a hit: loaded, no LLVM
    assert type(second._exe).__name__ == "StoredExecutable"
    fake(_gpu_exe(first))  # type: ignore[operator]
    np.testing.assert_allclose(second(w, x), _reference(w, x), rtol=1e-5, atol=1e-6)
