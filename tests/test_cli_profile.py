"""`xlc profile`, `xlc run --profile` and `module:function` inputs of `xlc run` / `xlc viz`
(docs/profiling.md, docs/cli.md), run in-process through `xlc.cli.main.main`."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.backend_cpu.test_profile import validate_trace
from xlc.cli.main import main
from xlc.errors import ArgumentError

MODEL = '''
import xlc.numpy as xnp


def predict(x, w):
    return xnp.tanh(x @ w).sum(axis=1)
'''


@pytest.fixture()
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A directory with a model module `climodel_p19` and inputs for it."""
    (tmp_path / "climodel_p19.py").write_text(MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XLC_MACHINE_LIMITS", "copy_gbs=10,gflops=50")
    sys.modules.pop("climodel_p19", None)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    w = rng.standard_normal((64, 16)).astype(np.float32)
    np.savez(tmp_path / "in.npz", in0=x, in1=w)
    return {"dir": tmp_path, "x": x, "w": w, "expected": np.tanh(x @ w).sum(axis=1)}


def test_run_function_input_takes_its_arguments_from_the_npz(work: dict) -> None:
    assert main(["run", "climodel_p19:predict", "--inputs", "in.npz", "--output",
                 "out.npz"]) == 0
    np.testing.assert_allclose(np.load("out.npz")["out0"], work["expected"], rtol=2e-5)


def test_run_profile_writes_a_valid_trace(work: dict, capsys: pytest.CaptureFixture) -> None:
    assert main(["run", "climodel_p19:predict", "--inputs", "in.npz", "--output", "out.npz",
                 "--profile", "p.json"]) == 0
    np.testing.assert_allclose(np.load("out.npz")["out0"], work["expected"], rtol=2e-5)
    trace = json.loads(Path("p.json").read_text())
    assert validate_trace(trace) == []
    calls = [e for e in trace["traceEvents"] if e.get("cat") == "call"]
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert [e["name"] for e in calls] == ["call jit_predict"]
    assert {e["args"]["opcode"] for e in kernels} >= {"dot"}
    dot = next(e for e in kernels if e["args"]["opcode"] == "dot")
    assert dot["args"]["flops"] == 2 * 32 * 64 * 16
    n = len(trace["traceEvents"]) - sum(e["ph"] == "M" for e in trace["traceEvents"])
    assert capsys.readouterr().err == f"wrote p.json: {n} events of 1 call(s)\n"


def test_profile_prints_the_top_kernels_against_the_limits(
        work: dict, capsys: pytest.CaptureFixture) -> None:
    assert main(["profile", "climodel_p19:predict", "--inputs", "in.npz", "--repeat", "3",
                 "--trace", "t.json"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "machine limits: copy 10.0 GB/s, f32 matmul 50.0 GFLOP/s " \
                     "(XLC_MACHINE_LIMITS)"
    assert re.fullmatch(r"program jit_predict: 3 call\(s\), [0-9.]+ us per call; its kernels "
                        r"account for [0-9.]+ % of it", out[1])
    assert out[2].split() == ["us/call", "%call", "kernel", "opcode", "GB/s", "%copy",
                              "GFLOP/s", "%peak"]
    rows = [line.split() for line in out[3:-1]]
    assert [r[3] for r in rows if r[2] == "dot"] == ["dot"]
    for r in rows:  # achieved GB/s against the 10 GB/s limit: % = 10 x GB/s
        assert float(r[5].rstrip("%")) == pytest.approx(10 * float(r[4]), abs=0.051)
    assert out[-1] == "wrote t.json"
    assert validate_trace(json.loads(Path("t.json").read_text())) == []


def test_profile_with_arg_shapes_uses_random_inputs(work: dict,
                                                    capsys: pytest.CaptureFixture) -> None:
    assert main(["profile", "climodel_p19:predict", "--arg", "f32[8,64]", "--arg",
                 "f32[64,16]", "--repeat", "2"]) == 0
    assert "program jit_predict: 2 call(s)" in capsys.readouterr().out


def test_viz_function_input(work: dict, capsys: pytest.CaptureFixture) -> None:
    assert main(["viz", "climodel_p19:predict", "--arg", "f32[8,64]", "--arg", "f32[64,16]",
                 "-o", "g.dot", "--stage", "raw"]) == 0
    text = Path("g.dot").read_text()
    assert text.startswith('digraph "jit_predict"') and "tanh" in text


@pytest.mark.parametrize("argv, message", [
    (["viz", "climodel_p19:predict", "-o", "g.dot"],
     "xlc viz: climodel_p19:predict: give the argument shapes with --arg (e.g. --arg "
     "f32[8,128])\n"),
    (["profile", "climodel_p19:predict", "--inputs", "in.npz", "--backend", "interpreter"],
     "xlc profile: error: run-time profiles are recorded by the cpu and gpu backends only, "
     "not 'interpreter'\n"),
    (["run", "climodel_p19:nothing", "--inputs", "in.npz"],
     "xlc run: error: module 'climodel_p19' has no attribute 'nothing'\n"),
    (["profile", "climodel_p19:predict", "--inputs", "in.npz", "--repeat", "0"],
     "xlc profile: --repeat and --top must be at least 1, --warmup at least 0\n"),
])
def test_errors_are_one_line(work: dict, capsys: pytest.CaptureFixture, argv: list[str],
                             message: str) -> None:
    assert main(argv) in (1, 2)
    assert capsys.readouterr().err == message


def test_profile_of_an_xlc_file_without_hooks_is_refused(work: dict,
                                                         capsys: pytest.CaptureFixture) -> None:
    assert main(["compile", "climodel_p19:predict", "--arg", "f32[32,64]", "--arg",
                 "f32[64,16]", "-o", "m.xlc"]) == 0
    capsys.readouterr()
    assert main(["run", "m.xlc", "--inputs", "in.npz", "--profile", "p.json"]) == 1
    assert capsys.readouterr().err == (
        "xlc run: error: m.xlc was compiled without profiling hooks: profile the .hlo file or "
        "module:function instead, or compile it with XLC_FLAGS=--profile=DIR\n")


def test_machine_limits_are_measured_once_and_cached(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import xlc.profiling as prof

    monkeypatch.delenv("XLC_MACHINE_LIMITS", raising=False)
    monkeypatch.setenv("XLC_CACHE_DIR", str(tmp_path))
    calls: list[int] = []

    def measure() -> tuple[float, float]:
        calls.append(1)
        return 12.5, 99.0

    monkeypatch.setattr(prof, "measure_limits", measure)
    assert prof.machine_limits(measure=False) is None
    first = prof.machine_limits()
    second = prof.machine_limits()
    assert first is not None and second is not None
    assert (first.copy_gbs, first.gflops, first.source) == (12.5, 99.0, "measured")
    assert (second.copy_gbs, second.gflops) == (12.5, 99.0)
    assert second.source == f"cached in {tmp_path / 'machine_limits.json'}"
    assert calls == [1]
    monkeypatch.setenv("XLC_MACHINE_LIMITS", "copy_gbs=fast")
    with pytest.raises(ArgumentError, match=re.escape(
            "XLC_MACHINE_LIMITS: expected copy_gbs=GB/s,gflops=GFLOP/s with positive numbers, "
            "got 'copy_gbs=fast'")):
        prof.machine_limits()
