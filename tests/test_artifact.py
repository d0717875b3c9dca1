"""Serialized executables (.xlc): round trips in a fresh process on every corpus case, the
pytree signature, and every way a file can be bad (asserted by message)."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

import xlc
from tests.conftest import ROOT, corpus_cases, requires_corpus
from xlc.artifact.manifest import FORMAT_VERSION, HLO_MEMBER, OBJECT_MEMBER

CASES = corpus_cases()

# The fresh process: for each job load the .xlc, run it on the stored inputs, save outputs.
LOADER = r"""
import json, sys, time
import numpy as np
import xlc
jobs = json.load(open(sys.argv[1]))
for job in jobs:
    t0 = time.perf_counter()
    exe = xlc.load(job["artifact"])
    load_s = time.perf_counter() - t0
    with np.load(job["inputs"]) as z:
        ins = [z[f"in{i}"] for i in range(len(z.files))]
    out = exe(*ins)
    leaves = list(out) if isinstance(out, (tuple, list)) else [out]
    np.savez(job["outputs"], **{f"out{i}": np.asarray(o) for i, o in enumerate(leaves)})
    job["load_s"] = load_s
json.dump(jobs, open(sys.argv[1], "w"))
"""


def _flat(out: object) -> list[np.ndarray]:
    return [np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else [out])]


def _fresh_process_roundtrip(tmp: Path, backend: str) -> dict[str, tuple]:
    """Compile, run and serialize every corpus case here; load and run them in one fresh
    process. Returns {case: (in-process outputs, fresh-process outputs, compile_s, load_s)}."""
    from corpus import load_case  # type: ignore[import-not-found]

    jobs, local = [], {}
    for name in CASES:
        case = load_case(name)
        t0 = time.perf_counter()
        compiled = xlc.compile(case.module_text, backend=backend)
        compile_s = time.perf_counter() - t0
        # copies: a donated input (adam_update) may become its output's storage
        local[name] = (_flat(compiled(*[np.array(x) for x in case.inputs])), compile_s)
        art = tmp / f"{name}.xlc"
        compiled.serialize(str(art))
        np.savez(tmp / f"{name}.in.npz", **{f"in{i}": x for i, x in enumerate(case.inputs)})
        jobs.append({"case": name, "artifact": str(art), "inputs": str(tmp / f"{name}.in.npz"),
                     "outputs": str(tmp / f"{name}.out.npz")})
    spec = tmp / "jobs.json"
    spec.write_text(json.dumps(jobs))
    env = {k: v for k, v in os.environ.items() if k not in ("XLC_FLAGS", "XLC_CACHE_DIR")}
    r = subprocess.run([sys.executable, "-c", LOADER, str(spec)], capture_output=True,
                       text=True, cwd=ROOT, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    results = {}
    for job in json.loads(spec.read_text()):
        with np.load(job["outputs"]) as z:
            fresh = [z[f"out{i}"] for i in range(len(z.files))]
        outs, compile_s = local[job["case"]]
        results[job["case"]] = (outs, fresh, compile_s, job["load_s"])
    return results


@pytest.fixture(scope="module")
def interpreter_roundtrip(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple]:
    return _fresh_process_roundtrip(tmp_path_factory.mktemp("interp"), "interpreter")


@pytest.fixture(scope="module")
def cpu_roundtrip(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple]:
    return _fresh_process_roundtrip(tmp_path_factory.mktemp("cpu"), "cpu")


def _assert_same(local: list[np.ndarray], fresh: list[np.ndarray]) -> None:
    assert len(local) == len(fresh)
    for a, b in zip(local, fresh):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@requires_corpus
@pytest.mark.parametrize("name", CASES)
def test_interpreter_roundtrip_in_fresh_process(interpreter_roundtrip: dict, name: str):
    local, fresh, _, _ = interpreter_roundtrip[name]
    _assert_same(local, fresh)


@requires_corpus
@pytest.mark.parametrize("name", CASES)
def test_cpu_roundtrip_in_fresh_process(cpu_roundtrip: dict, name: str):
    local, fresh, _, _ = cpu_roundtrip[name]
    _assert_same(local, fresh)


@requires_corpus
def test_cpu_load_is_faster_than_compile(cpu_roundtrip: dict):
    compile_s = sum(v[2] for v in cpu_roundtrip.values())
    load_s = sum(v[3] for v in cpu_roundtrip.values())
    assert load_s < compile_s, (load_s, compile_s)


# ---- signature, introspection ------------------------------------------------------------------
def _model(params: dict, x: np.ndarray, *, scale: float = 1.0) -> tuple:
    h = xlc.numpy.tanh(x @ params["w"] + params["b"])
    return h * scale, {"sum": h.sum()}


@pytest.fixture
def pytree_compiled() -> tuple:
    params = {"w": np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4),
              "b": np.arange(4, dtype=np.float32) / 4}
    x = np.linspace(0, 1, 24, dtype=np.float32).reshape(3, 8)
    f = xlc.jit(_model, static_argnames="scale")
    return f.lower(params, x, scale=2.0).compile(), params, x


def test_pytree_signature_roundtrip(tmp_path: Path, pytree_compiled: tuple):
    compiled, params, x = pytree_compiled
    path = tmp_path / "model.xlc"
    compiled.serialize(str(path))
    loaded = xlc.load(str(path))
    want = compiled(params, x)
    got = loaded(params, x)
    np.testing.assert_array_equal(got[0], want[0])
    assert set(got[1]) == {"sum"}
    np.testing.assert_array_equal(got[1]["sum"], want[1]["sum"])
    assert loaded.memory_stats() == compiled.memory_stats()
    assert loaded.as_text() == compiled.as_text()
    assert loaded.manifest.signature.arg_names == ["params", "x"]
    assert loaded.buffer_assignment_report() == compiled.buffer_assignment_report()


def test_wrong_arguments_raise_before_running(tmp_path: Path, pytree_compiled: tuple):
    compiled, params, x = pytree_compiled
    path = tmp_path / "model.xlc"
    compiled.serialize(str(path))
    loaded = xlc.load(str(path))
    with pytest.raises(xlc.ArgumentError, match=r"argument 1 \('x'\): expected f32\[3,8\], "
                       r"got f32\[3,9\]"):
        loaded(params, np.zeros((3, 9), np.float32))
    with pytest.raises(xlc.ArgumentError, match="expected 2 positional arguments, got 1"):
        loaded(params)
    with pytest.raises(xlc.ArgumentError, match="has pytree structure"):
        loaded({"w": params["w"]}, x)


def test_loading_runs_no_passes_and_no_llvm_optimization(tmp_path: Path, monkeypatch):
    from xlc.backend_cpu import jit
    from xlc.codegen import llvm_utils
    from xlc.passes import pipeline

    compiled = xlc.compile(SMALL_HLO, backend="cpu")
    path = tmp_path / "small.xlc"
    compiled.serialize(str(path))

    def forbidden(*a: object, **k: object) -> None:
        raise AssertionError("load must not run this")

    monkeypatch.setattr(pipeline.Pipeline, "run", forbidden)
    monkeypatch.setattr(llvm_utils, "optimize", forbidden)
    monkeypatch.setattr(jit, "compile_module", forbidden)
    monkeypatch.setattr("xlc.backend_cpu.compiler.optimize_cpu", forbidden, raising=False)
    monkeypatch.setattr("xlc.backend_cpu.compiler.compile_cpu", forbidden)
    monkeypatch.setattr("xlc.passes.buffer_assignment.assign_buffers", forbidden)
    loaded = xlc.load(str(path))
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(loaded(x, x), x * x + x)


def test_reserialize_a_loaded_executable_is_byte_identical(tmp_path: Path):
    compiled = xlc.compile(SMALL_HLO)
    a, b = tmp_path / "a.xlc", tmp_path / "b.xlc"
    compiled.serialize(str(a))
    xlc.load(str(a)).serialize(str(b))
    assert a.read_bytes() == b.read_bytes()


# ---- bad files -----------------------------------------------------------------------------
SMALL_HLO = """HloModule small

ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  m = f32[4] multiply(x, y)
  ROOT a = f32[4] add(m, x)
}
"""


@pytest.fixture
def cpu_file(tmp_path: Path) -> Path:
    compiled = xlc.compile(SMALL_HLO, backend="cpu")
    path = tmp_path / "small.xlc"
    compiled.serialize(str(path))
    return path


def _rewrite(src: Path, dst: Path, manifest_edit=None, members_edit=None,
             reseal: bool = True) -> Path:
    """Copy `src` to `dst` editing the manifest (a dict) and/or members; with `reseal` the
    manifest's checksum in the zip comment is recomputed (a consistent forgery, so that the
    later checks are reached), else the original comment is kept."""
    from xlc.artifact.manifest import seal

    with zipfile.ZipFile(src) as z:
        items = {n: z.read(n) for n in z.namelist()}
        comment = z.comment
    if manifest_edit is not None:
        m = json.loads(items["manifest.json"])
        manifest_edit(m)
        items["manifest.json"] = json.dumps(m).encode()
    if members_edit is not None:
        members_edit(items)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.comment = seal(items["manifest.json"]) if reseal else comment
        for n, data in items.items():
            z.writestr(n, data)
    dst.write_bytes(buf.getvalue())
    return dst


def test_truncated_file(cpu_file: Path, tmp_path: Path):
    bad = tmp_path / "trunc.xlc"
    bad.write_bytes(cpu_file.read_bytes()[: cpu_file.stat().st_size // 2])
    with pytest.raises(xlc.ArtifactError, match=r"trunc.xlc: not a valid .xlc file \(not a zip "
                       r"archive, or truncated\)"):
        xlc.load(str(bad))


def test_corrupted_bytes(cpu_file: Path, tmp_path: Path):
    data = bytearray(cpu_file.read_bytes())
    with zipfile.ZipFile(cpu_file) as z:
        info = z.getinfo(OBJECT_MEMBER)
    # flip bytes inside the object member's compressed data
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 8
    for i in range(start, start + 16):
        data[i] ^= 0xFF
    bad = tmp_path / "corrupt.xlc"
    bad.write_bytes(bytes(data))
    with pytest.raises(xlc.ArtifactError, match="corrupt.xlc: (the file is corrupted|checksum "
                       "mismatch)"):
        xlc.load(str(bad))


def test_tampered_object_code_never_executes(cpu_file: Path, tmp_path: Path, monkeypatch):
    from xlc.backend_cpu import artifact_io

    def patch(items: dict) -> None:
        obj = bytearray(items[OBJECT_MEMBER])
        obj[-20] ^= 0x01
        items[OBJECT_MEMBER] = bytes(obj)

    bad = _rewrite(cpu_file, tmp_path / "tampered.xlc", members_edit=patch)

    def no_link(*a: object, **k: object) -> None:
        raise AssertionError("tampered code reached the linker")

    monkeypatch.setattr(artifact_io, "_LinkedCode", no_link)
    with pytest.raises(xlc.ArtifactError, match=f"tampered.xlc: checksum mismatch for "
                       f"{OBJECT_MEMBER}; the file was modified or damaged, refusing to load it"):
        xlc.load(str(bad))


def test_tampered_hlo(cpu_file: Path, tmp_path: Path):
    def patch(items: dict) -> None:
        items[HLO_MEMBER] = items[HLO_MEMBER].replace(b"multiply", b"subtract")

    bad = _rewrite(cpu_file, tmp_path / "t.xlc", members_edit=patch)
    with pytest.raises(xlc.ArtifactError, match=f"checksum mismatch for {HLO_MEMBER}"):
        xlc.load(str(bad))


def test_unlisted_and_missing_members(cpu_file: Path, tmp_path: Path):
    bad = _rewrite(cpu_file, tmp_path / "extra.xlc",
                   members_edit=lambda items: items.update({"evil.so": b"\x7fELF"}))
    with pytest.raises(xlc.ArtifactError, match=r"unlisted member\(s\) evil.so; the file was "
                       "tampered with"):
        xlc.load(str(bad))
    bad = _rewrite(cpu_file, tmp_path / "missing.xlc",
                   members_edit=lambda items: items.pop(OBJECT_MEMBER))
    with pytest.raises(xlc.ArtifactError, match=rf"member\(s\) {OBJECT_MEMBER} missing; the "
                       "file is incomplete"):
        xlc.load(str(bad))


def test_tampered_manifest_never_executes(cpu_file: Path, tmp_path: Path, monkeypatch):
    from xlc.backend_cpu import artifact_io

    def shrink_temps(m: dict) -> None:  # would let the code write past its temp block
        for a in m["allocations"]:
            a["size"] = 1

    monkeypatch.setattr(artifact_io, "_LinkedCode", None)  # must not get that far
    bad = _rewrite(cpu_file, tmp_path / "edited.xlc", manifest_edit=shrink_temps, reseal=False)
    with pytest.raises(xlc.ArtifactError, match=r"edited.xlc: checksum mismatch for "
                       r"manifest.json; the file was modified or damaged, refusing to load it"):
        xlc.load(str(bad))

    bad = tmp_path / "unsealed.xlc"
    bad.write_bytes(cpu_file.read_bytes())
    with zipfile.ZipFile(bad, "a") as z:
        z.comment = b""
    with pytest.raises(xlc.ArtifactError, match=r"unsealed.xlc: manifest.json carries no "
                       r"checksum; the file was not written by xlc or was modified, refusing "
                       "to load it"):
        xlc.load(str(bad))
    from xlc.artifact.store import read_manifest

    with pytest.raises(xlc.ArtifactError, match="unsealed.xlc: manifest.json carries no"):
        read_manifest(str(bad))  # `xlc inspect` checks it too


def test_unknown_format_version(cpu_file: Path, tmp_path: Path):
    bad = _rewrite(cpu_file, tmp_path / "v99.xlc",
                   manifest_edit=lambda m: m.update(format_version=99))
    with pytest.raises(xlc.ArtifactError, match=rf"v99.xlc: unsupported format version 99; "
                       rf"this xlc reads version {FORMAT_VERSION}"):
        xlc.load(str(bad))


def test_not_an_xlc_zip(tmp_path: Path):
    bad = tmp_path / "other.xlc"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("hello.txt", "hi")
    with pytest.raises(xlc.ArtifactError, match=r"other.xlc: not an xlc executable \(no "
                       r"manifest.json\)"):
        xlc.load(str(bad))
    with pytest.raises(xlc.ArtifactError, match="nothere.xlc: no such file"):
        xlc.load(str(tmp_path / "nothere.xlc"))


def test_cpu_lacking_a_feature(cpu_file: Path, tmp_path: Path, monkeypatch):
    from xlc.backend_cpu import artifact_io

    def edit(m: dict) -> None:
        m["target"]["cpu_features"] = m["target"]["cpu_features"] + ["+xlc-imaginary-ext"]
        m["target"]["cpu_name"] = "futurecpu"

    bad = _rewrite(cpu_file, tmp_path / "future.xlc", manifest_edit=edit)
    monkeypatch.setattr(artifact_io, "_LinkedCode", None)  # must not get that far
    with pytest.raises(xlc.ArtifactError, match=r"future.xlc: this CPU \(.+\) lacks feature\(s\) "
                       r"xlc-imaginary-ext that the code was compiled for \(on futurecpu\); "
                       "recompile it on this machine"):
        xlc.load(str(bad))


def test_other_architecture(cpu_file: Path, tmp_path: Path):
    bad = _rewrite(cpu_file, tmp_path / "arm.xlc", manifest_edit=lambda m: m["target"].update(
        triple="aarch64-unknown-linux-gnu"))
    with pytest.raises(xlc.ArtifactError, match="arm.xlc: the code was compiled for "
                       "aarch64-unknown-linux-gnu, this machine is"):
        xlc.load(str(bad))


def test_unresolvable_symbol_is_refused():
    from xlc.backend_cpu import artifact_io

    obj = _symbol_obj()
    assert "xlc_test_missing_fn" in artifact_io.undefined_symbols(obj)
    with pytest.raises(xlc.ArtifactError, match=r"x.xlc: the code needs symbol\(s\) "
                       "xlc_test_missing_fn that this process does not provide"):
        artifact_io._LinkedCode(obj, "caller", "x.xlc")


def _symbol_obj() -> bytes:
    """An object calling an undefined external function."""
    from xlc.codegen import llvm_utils as lu

    text = """
declare void @xlc_test_missing_fn()
define void @caller() {
  call void @xlc_test_missing_fn()
  ret void
}
"""
    ref = lu.parse_and_verify(text, "caller")
    return lu.emit_object(ref)


def test_manifest_records_target_and_tables(cpu_file: Path):
    from xlc.artifact.store import read_manifest
    from xlc.backend_cpu.artifact_io import host_target

    m = read_manifest(str(cpu_file))
    assert m.backend == "cpu"
    assert m.target == host_target()
    assert m.entry_symbol and m.entry_symbol.startswith("xlc_small")
    assert [a.kind for a in m.allocations].count("parameter") == 2
    assert m.output_slices and m.output_slices[0].output_index == []
    assert {"parameter_bytes", "output_bytes", "temp_bytes", "constant_bytes",
            "peak_bytes"} <= set(m.memory_stats)
    assert set(m.members) == {HLO_MEMBER, OBJECT_MEMBER, "buffer_assignment.txt",
                              "buffer_assignment.json", "memory.json"}


# ---- GPU code selection (pure logic; the GPU backend calls it at load) --------------------------
def _gpu_manifest(cc: int) -> object:
    from xlc.artifact.manifest import Manifest, Signature, TargetInfo

    return Manifest(xlc_version="0", backend="gpu", module_name="m",
                    target=TargetInfo(gpu_compute_capability=cc),
                    signature=Signature(name="m", out_tree={"kind": "leaf"}, inputs=[],
                                        outputs=[]))


def test_gpu_code_selection_prefers_cubin_and_falls_back_to_ptx():
    from xlc.artifact.manifest import CUBIN_MEMBER, PTX_MEMBER
    from xlc.artifact.store import select_gpu_code

    both = {CUBIN_MEMBER: b"cubin", PTX_MEMBER: b"ptx"}
    m = _gpu_manifest(80)
    assert select_gpu_code(m, both, 80, "f.xlc") == ("cubin", b"cubin")
    assert select_gpu_code(m, both, 86, "f.xlc") == ("cubin", b"cubin")
    assert select_gpu_code(m, both, 90, "f.xlc") == ("ptx", b"ptx")  # new major: JIT the PTX
    with pytest.raises(xlc.ArtifactError, match=r"f.xlc: this GPU \(sm_75\) cannot run the "
                       r"code: the file holds cubin and PTX for sm_80; recompile it for this GPU"):
        select_gpu_code(m, both, 75, "f.xlc")
    with pytest.raises(xlc.ArtifactError, match="holds cubin for sm_80"):
        select_gpu_code(m, {CUBIN_MEMBER: b"c"}, 90, "f.xlc")


def test_stored_assignment_answers_slice_queries_like_the_real_one(tmp_path: Path):
    from xlc.api import load_bytes

    compiled = xlc.compile(SMALL_HLO)
    path = tmp_path / "s.xlc"
    compiled.serialize(str(path))
    loaded = load_bytes(path.read_bytes(), "s.xlc")
    real = compiled.optimized()
    stored = loaded.optimized()
    for inst in stored.module.entry.instructions:
        want = real.assignment.slice_of(real.module.entry.instruction(inst.name))
        got = stored.assignment.slice_of(inst)
        assert (got.index, got.offset, got.size) == (want.index, want.offset, want.size)


def test_pictures_use_the_stored_buffer_assignment(tmp_path: Path):
    """`xlc viz` of an .xlc recomputes the assignment from the stored schedule and uses it only
    when it reproduces the stored allocation table."""
    from xlc.artifact.archive import Archive, read_archive_file
    from xlc.artifact.store import rebuild_assignment
    from xlc.hlo.parser import parse_module

    compiled = xlc.compile(SMALL_HLO, backend="cpu")
    path = tmp_path / "s.xlc"
    compiled.serialize(str(path))
    archive = read_archive_file(path)
    module = parse_module(archive.members[HLO_MEMBER].decode())
    ba = rebuild_assignment(archive, module)
    assert ba is not None
    assert ba.stats() == compiled.optimized().assignment.stats()
    assert [(a.index, a.size) for a in ba.allocations] == \
        [(a.index, a.size) for a in archive.manifest.allocations]
    stored = json.loads(archive.members["buffer_assignment.json"])
    for a in stored["allocations"]:
        a["size"] += 64
    members = {**archive.members, "buffer_assignment.json": json.dumps(stored).encode()}
    other = Archive(archive.manifest, members, b"", "f.xlc")
    assert rebuild_assignment(other, module) is None


def test_backend_without_a_loader(cpu_file: Path, tmp_path: Path):
    bad = _rewrite(cpu_file, tmp_path / "tpu.xlc", manifest_edit=lambda m: m.update(
        backend="tpu"))
    with pytest.raises(xlc.ArtifactError, match="tpu.xlc: this xlc cannot load 'tpu' "
                       "executables"):
        xlc.load(str(bad))


def test_cpu_donated_pytree_roundtrip(tmp_path: Path):
    def step(state: dict, g: np.ndarray) -> dict:
        return {"w": state["w"] - 0.5 * g, "n": state["n"] + 1}

    state = {"w": np.linspace(0, 1, 8, dtype=np.float32), "n": np.int32(3)}
    g = np.ones(8, np.float32)
    f = xlc.jit(step, donate_argnums=0, backend="cpu")
    compiled = f.lower(state, g).compile()
    path = tmp_path / "step.xlc"
    compiled.serialize(str(path))
    loaded = xlc.load(str(path))
    assert loaded.manifest.input_output_alias  # the donation is recorded
    w_before = state["w"].copy()
    reusable = state["w"].ctypes.data % 64 == 0
    got = loaded(state, g)
    np.testing.assert_array_equal(got["w"], w_before - 0.5)
    assert int(got["n"]) == 4
    # donation honoured: an aligned donated buffer becomes the output's storage, else copied
    assert np.shares_memory(got["w"], state["w"]) is reusable
    again = loaded(got, g)  # outputs are always reusable
    assert np.shares_memory(again["w"], got["w"])
    np.testing.assert_array_equal(again["w"], w_before - 1.0)


BIG_DOT = """HloModule big_dot
ENTRY e {
  a = f32[300,200] parameter(0)
  b = f32[200,500] parameter(1)
  ROOT d = f32[300,500] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""

FRESH_LOADER = r"""
import sys
import numpy as np
import xlc
from xlc.backend_cpu import jit
from xlc.codegen import llvm_utils
from xlc.passes import pipeline

def forbidden(*a, **k):
    raise AssertionError("load must not run this")

llvm_utils.optimize = forbidden
jit.compile_module = forbidden
pipeline.Pipeline.run = forbidden
loaded = xlc.load(sys.argv[1])
a = np.linspace(-1, 1, 300 * 200, dtype=np.float32).reshape(300, 200)
b = np.linspace(1, -1, 200 * 500, dtype=np.float32).reshape(200, 500)
np.testing.assert_allclose(loaded(a, b), a @ b, rtol=1e-4, atol=1e-4)
print("ok")
"""


def test_runtime_libraries_travel_with_the_file(tmp_path: Path):
    """A dot big enough for the packed GEMM calls the process's run-time GEMM and thread
    pool; the file carries their object code, so a fresh process loads and runs it without
    LLVM's optimizer."""
    path = tmp_path / "big.xlc"
    xlc.compile(BIG_DOT, backend="cpu").serialize(str(path))
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
    assert "code/lib/gemm_f32.o" in names
    r = subprocess.run([sys.executable, "-c", FRESH_LOADER, str(path)], capture_output=True,
                       text=True, cwd=ROOT, timeout=300,
                       env={k: v for k, v in os.environ.items() if k != "XLC_CACHE_DIR"})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_unexpected_runtime_library_member_is_refused(tmp_path: Path):
    path = tmp_path / "small.xlc"
    xlc.compile(SMALL_HLO, backend="cpu").serialize(str(path))

    def add_member(items: dict) -> None:
        items["code/lib/gemm_f64.o"] = b"\x7fELF not really"

    def list_member(m: dict) -> None:
        import hashlib
        data = b"\x7fELF not really"
        m["members"]["code/lib/gemm_f64.o"] = {"sha256": hashlib.sha256(data).hexdigest(),
                                                "size": len(data)}

    bad = _rewrite(path, tmp_path / "extra.xlc", manifest_edit=list_member,
                   members_edit=add_member)
    with pytest.raises(xlc.ArtifactError, match=r"extra.xlc: unexpected run-time library "
                                                r"member code/lib/gemm_f64.o"):
        xlc.load(str(bad))


def test_forged_runtime_library_is_refused_before_llvm_sees_it(tmp_path: Path):
    """A library member whose checksums were forged consistently but which is no object."""
    import hashlib

    path = tmp_path / "big.xlc"
    xlc.compile(BIG_DOT, backend="cpu").serialize(str(path))
    junk = b"\x7fELF" + b"\0" * 60

    def members(items: dict) -> None:
        items["code/lib/gemm_f32.o"] = junk

    def manifest(m: dict) -> None:
        m["members"]["code/lib/gemm_f32.o"] = {"sha256": hashlib.sha256(junk).hexdigest(),
                                               "size": len(junk)}

    bad = _rewrite(path, tmp_path / "forged.xlc", manifest_edit=manifest, members_edit=members)
    code = ("import xlc\ntry:\n    xlc.load(" + repr(str(bad)) +
            ")\nexcept xlc.ArtifactError as e:\n    print(e)")
    # a fresh process: this one already has the library, and would not link the member
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (f"{bad}: code/lib/gemm_f32.o: the stored code is not a 64-bit "
                                "little-endian ELF object")
