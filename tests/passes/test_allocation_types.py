"""The one BufferAllocation and the one Slice (xlc/passes/allocation.py): JSON round trips,
`overlaps`, the manifest's table, the GPU thunk schedule, and `.xlc` files (CPU, interpreter,
GPU without a device; format 2 files too) that still run and match the evaluator."""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlc
from xlc.artifact.manifest import FORMAT_VERSION, Manifest, parse_manifest, seal
from xlc.artifact.store import read_manifest
from xlc.hlo.evaluator import evaluate
from xlc.hlo.parser import parse_module
from xlc.interpreter import flatten_value
from xlc.passes.allocation import BufferAllocation, Slice
from xlc.passes.buffer_assignment import assign_buffers

TEXT = """HloModule small

sum {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT r = f32[] add(p, q)
}

ENTRY main {
  x = f32[4,8] parameter(0)
  y = f32[4,8] parameter(1)
  m = f32[4,8] multiply(x, y)
  e = f32[4,8] exponential(m)
  z = f32[] constant(0)
  s = f32[4] reduce(e, z), dimensions={1}, to_apply=sum
  n = f32[4,8] negate(e)
  ROOT t = (f32[4,8], f32[4]) tuple(n, s)
}
"""


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal((4, 8)).astype(np.float32) * 0.5 for _ in range(2)]


def _reference(inputs: list[np.ndarray]) -> list[np.ndarray]:
    module = parse_module(TEXT)
    assert module.entry is not None and module.entry.root is not None
    return flatten_value(evaluate(module, list(inputs)), module.entry.root.shape)


def _flat(out: Any) -> list[np.ndarray]:
    return [np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else [out])]


def _close(got: Any, want: list[np.ndarray]) -> None:
    got = _flat(got)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


# ---- BufferAllocation ------------------------------------------------------------------------
KINDS = [
    BufferAllocation(0, 128, is_entry_computation_parameter=True, parameter_number=0),
    BufferAllocation(1, 64, 1, is_entry_computation_parameter=True, parameter_number=1,
                     parameter_index=(0, 2), aliased_with_output=True, maybe_live_out=True,
                     is_tuple=True),
    BufferAllocation(2, 32, is_constant=True),
    BufferAllocation(3, 16, is_thread_local=True),
    BufferAllocation(4, 256, maybe_live_out=True, is_tuple=True),
    BufferAllocation(5, 4096),
]


@pytest.mark.parametrize("alloc", KINDS, ids=lambda a: a.kind)
def test_allocation_json_round_trip(alloc: BufferAllocation) -> None:
    data = json.loads(json.dumps(alloc.to_json()))
    again = BufferAllocation.from_json(data)
    assert again.to_json() == alloc.to_json() == data
    assert (again.kind, again.index, again.size, again.color) == \
        (alloc.kind, alloc.index, alloc.size, alloc.color)
    assert again.parameter_index == alloc.parameter_index
    assert again.is_readonly == alloc.is_readonly
    assert again.outlives_call == alloc.outlives_call
    assert again.assigned == {} and again.heap is None  # compile-time only


def test_allocation_json_holds_flags_not_buffers() -> None:
    ba = assign_buffers(parse_module(TEXT))
    for alloc in ba.allocations:
        data = alloc.to_json()
        assert set(data) == {"index", "kind", "size", "color", "parameter_number",
                             "parameter_index", "maybe_live_out", "aliased_with_output",
                             "is_tuple", "is_thread_local", "is_constant"}
        assert BufferAllocation.from_json(data).to_json() == data
    assert {a.kind for a in ba.allocations} >= {"parameter", "output"}


@pytest.mark.parametrize("data, message", [
    ({"index": 0, "size": 4}, r"missing key\(s\) \['kind'\]"),
    ({"index": 0, "kind": "temp", "size": 4, "donated": True}, r"unknown key\(s\) \['donated'\]"),
    ({"index": 0, "kind": "output", "size": 4}, "kind 'output' contradicts its flags"),
    ({"index": 0, "kind": "temp", "size": -4}, "wrong type or a negative"),
    ({"index": "0", "kind": "temp", "size": 4}, "wrong type"),
    ({"index": 0, "kind": "temp", "size": 4, "is_constant": 1}, "wrong type"),
    ([0, "temp", 4], "must be a JSON object"),
])
def test_allocation_from_json_rejects_bad_data(data: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BufferAllocation.from_json(data)


# ---- Slice -----------------------------------------------------------------------------------
TABLE = [BufferAllocation(i, 1024) for i in range(3)]


def test_slice_overlaps() -> None:
    a, b = TABLE[0], TABLE[1]
    assert Slice(a, 0, 300).overlaps(Slice(a, 256, 64))
    assert Slice(a, 256, 64).overlaps(Slice(a, 0, 300))
    assert Slice(a, 10, 10).overlaps(Slice(a, 0, 100))        # contained
    assert not Slice(a, 0, 256).overlaps(Slice(a, 256, 64))   # adjacent
    assert not Slice(a, 0, 300).overlaps(Slice(b, 0, 300))    # another allocation


def test_slice_json_round_trip_and_identity() -> None:
    s = Slice(TABLE[2], 64, 32)
    assert s.to_json() == [2, 64, 32]
    again = Slice.from_json(json.loads(json.dumps(s.to_json())), TABLE)
    assert again == s and hash(again) == hash(s) and again.allocation is TABLE[2]
    assert again.index == 2 and str(again) == "{index:2, offset:64, size:32}"
    # equality is (index, offset, size): another table's allocation 2 gives an equal slice
    assert Slice(BufferAllocation(2, 1024), 64, 32) == s


@pytest.mark.parametrize("value", [[3, 0, 4], [0, 0], [0, -1, 4], [0, 0, 4.0], "0,0,4",
                                   [True, 0, 4]])
def test_slice_from_json_rejects_bad_values(value: Any) -> None:
    with pytest.raises(ValueError, match="slice"):
        Slice.from_json(value, TABLE)


def test_slice_from_json_needs_a_table_numbered_by_position() -> None:
    with pytest.raises(ValueError, match="names allocation 1"):
        Slice.from_json([1, 0, 4], [TABLE[0], TABLE[2]])


def test_assignment_slices_round_trip() -> None:
    module = parse_module(TEXT)
    ba = assign_buffers(module)
    assert module.entry is not None
    for inst in module.entry.instructions:
        for s in ba.all_slices(inst):
            again = Slice.from_json(s.to_json(), ba.allocations)
            assert again == s and again.allocation is s.allocation


# ---- the manifest ----------------------------------------------------------------------------
@pytest.fixture(scope="module", params=["cpu", "interpreter"])
def compiled(request: pytest.FixtureRequest) -> Any:
    return xlc.compile(TEXT, backend=request.param)


def test_manifest_holds_the_one_allocation_type(compiled: Any, tmp_path: Path) -> None:
    path = tmp_path / "m.xlc"
    compiled.serialize(str(path))
    m = read_manifest(path)
    assert m.format_version == FORMAT_VERSION
    ba = compiled.optimized().assignment
    assert all(isinstance(a, BufferAllocation) for a in m.allocations)
    assert [a.to_json() for a in m.allocations] == [a.to_json() for a in ba.allocations]
    module = compiled.optimized().module
    root = module.entry.root
    table = m.output_slice_table()
    assert set(table) == {index for index, _ in root.shape.leaves()}
    for index, s in table.items():
        assert s == ba.slice_of(root, index)
        assert s.allocation is m.allocations[s.index]
    # the manifest JSON round trip keeps the table
    text = m.model_dump_json().encode()
    again = parse_manifest(text, "m.xlc")
    assert [a.to_json() for a in again.allocations] == [a.to_json() for a in m.allocations]
    assert again.output_slice_table() == table
    raw = json.loads(text)
    assert raw["allocations"] == [a.to_json() for a in ba.allocations]
    assert all(set(s) == {"output_index", "slice"} for s in raw["output_slices"])


def test_manifest_rejects_a_bad_table(compiled: Any, tmp_path: Path) -> None:
    path = tmp_path / "m.xlc"
    compiled.serialize(str(path))
    raw = json.loads(read_manifest(path).model_dump_json())
    bad = dict(raw, output_slices=[{"output_index": [], "slice": [99, 0, 4]}])
    with pytest.raises(xlc.ArtifactError, match=r"bad.xlc: the manifest is malformed .*"
                       "names allocation 99"):
        parse_manifest(json.dumps(bad).encode(), "bad.xlc")
    shuffled = dict(raw, allocations=raw["allocations"][::-1])
    with pytest.raises(xlc.ArtifactError, match="is listed at position 0"):
        parse_manifest(json.dumps(shuffled).encode(), "bad.xlc")
    extra = dict(raw, allocations=[dict(raw["allocations"][0], donated=True),
                                   *raw["allocations"][1:]])
    with pytest.raises(xlc.ArtifactError, match=r"unknown key\(s\) \['donated'\]"):
        parse_manifest(json.dumps(extra).encode(), "bad.xlc")
    assert Manifest.model_validate(raw).output_slice_table()


# ---- .xlc files still load and run -----------------------------------------------------------
def _rewrite(src: Path, dst: Path, manifest_edit: Any = None, members_edit: Any = None) -> Path:
    """Copy `src` to `dst` editing the manifest dict and/or the members; resealed."""
    with zipfile.ZipFile(src) as z:
        items = {n: z.read(n) for n in z.namelist()}
    if manifest_edit is not None:
        m = json.loads(items["manifest.json"])
        manifest_edit(m)
        items["manifest.json"] = json.dumps(m).encode()
    if members_edit is not None:
        members_edit(items)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.comment = seal(items["manifest.json"])
        for n, data in items.items():
            z.writestr(n, data)
    dst.write_bytes(buf.getvalue())
    return dst


def _as_format_2(m: dict[str, Any]) -> None:
    """The manifest as xlc wrote it before the one Slice type (format version 2)."""
    m["format_version"] = 2
    m["output_slices"] = [{"output_index": s["output_index"], "allocation": s["slice"][0],
                           "offset": s["slice"][1], "size": s["slice"][2]}
                          for s in m["output_slices"]]


def test_loaded_files_run_and_match_the_evaluator(compiled: Any, tmp_path: Path) -> None:
    inputs = _inputs()
    want = _reference(inputs)
    path = tmp_path / "m.xlc"
    compiled.serialize(str(path))
    loaded = xlc.load(str(path))
    _close(loaded(*inputs), want)
    stored = loaded.optimized().assignment
    assert all(isinstance(a, BufferAllocation) for a in stored.allocations)
    root = loaded.optimized().module.entry.root
    assert stored.slice_of(root, (0,)).allocation is stored.allocations[
        stored.slice_of(root, (0,)).index]
    # a file written before (format 2) still loads and runs
    old = _rewrite(path, tmp_path / "v2.xlc", manifest_edit=_as_format_2)
    again = xlc.load(str(old))
    assert again.manifest.format_version == FORMAT_VERSION
    assert again.manifest.output_slice_table() == loaded.manifest.output_slice_table()
    _close(again(*inputs), want)
    # and re-serializing what was loaded writes the current format
    again.serialize(str(tmp_path / "v3.xlc"))
    assert read_manifest(tmp_path / "v3.xlc").format_version == FORMAT_VERSION


def test_unknown_versions_still_fail_with_a_sentence(compiled: Any, tmp_path: Path) -> None:
    path = tmp_path / "m.xlc"
    compiled.serialize(str(path))
    bad = _rewrite(path, tmp_path / "v1.xlc", manifest_edit=lambda m: m.update(format_version=1))
    with pytest.raises(xlc.ArtifactError, match=rf"v1.xlc: unsupported format version 1; this "
                       rf"xlc reads version {FORMAT_VERSION} or 2 .*recompile it"):
        xlc.load(str(bad))


# ---- GPU: the thunk schedule, pack and unpack without a device ---------------------------------
@pytest.fixture(scope="module")
def gpu_compiled() -> Any:
    return xlc.compile(TEXT, backend="gpu")


def test_gpu_thunk_schedule_round_trip(gpu_compiled: Any) -> None:
    from xlc.backend_gpu.executable import OutputInfo
    from xlc.backend_gpu.thunks import thunk_from_dict

    exe = gpu_compiled.executable()
    table = exe.allocations
    assert all(isinstance(a, BufferAllocation) for a in table)
    d = json.loads(json.dumps(exe.to_dict()))
    assert d["allocations"] == [a.to_json() for a in table]
    again = thunk_from_dict(d["thunks"], table)
    assert again == exe.thunks and again.to_dict() == d["thunks"]
    for t in again.walk():
        for s in [*t.reads(), *t.writes()]:
            assert isinstance(s, Slice) and s.allocation is table[s.index]
    outs = [OutputInfo.from_dict(o, table) for o in d["outputs"]]
    assert outs == exe.outputs


def test_gpu_file_packs_unpacks_and_runs_in_the_emulator(gpu_compiled: Any,
                                                         tmp_path: Path) -> None:
    from tests.backend_gpu.emulator import Emulator
    from xlc.backend_gpu.artifact_io import PLAN_MEMBER, describe

    exe = gpu_compiled.executable()
    path = tmp_path / "g.xlc"
    gpu_compiled.serialize(str(path))
    loaded = xlc.load(str(path))
    restored = loaded.executable()
    stored = loaded.optimized().assignment
    assert restored.allocations == stored.allocations == list(loaded.manifest.allocations)
    assert restored.to_dict(code=False) == exe.to_dict(code=False)
    for t in restored.all_thunks():
        for s in [*t.reads(), *t.writes()]:
            assert s.allocation is restored.allocations[s.index]
    # the loaded schedule and tables, run on the host with the compiled kernels' IR
    restored.llvm_ir = exe.llvm_ir
    inputs = _inputs()
    _close(Emulator(restored).run(inputs), _reference(inputs))

    def old_plan(items: dict[str, bytes]) -> None:  # the GPU description of format 2
        desc = json.loads(items[PLAN_MEMBER])
        desc["allocations"] = [{"index": a["index"], "size": a["size"], "kind": a["kind"],
                                "parameter_number": a["parameter_number"],
                                "donated": a["maybe_live_out"] or a["aliased_with_output"]}
                               for a in desc["allocations"]]
        items[PLAN_MEMBER] = json.dumps(desc).encode()
        m = json.loads(items["manifest.json"])
        for name, info in m["members"].items():
            if name == PLAN_MEMBER:
                import hashlib

                info.update(sha256=hashlib.sha256(items[name]).hexdigest(),
                            size=len(items[name]))
        items["manifest.json"] = json.dumps(m).encode()

    old = _rewrite(path, tmp_path / "g2.xlc", members_edit=old_plan)
    old = _rewrite(old, tmp_path / "g2b.xlc", manifest_edit=_as_format_2)
    again = xlc.load(str(old)).executable()
    assert again.to_dict(code=False)["thunks"] == exe.to_dict(code=False)["thunks"]
    with zipfile.ZipFile(old) as z:
        kernels = describe({PLAN_MEMBER: z.read(PLAN_MEMBER)})["kernels"]
    assert [k["name"] for k in kernels]
