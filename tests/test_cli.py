"""The `xlc` console script, run as a real subprocess (the installed script when on PATH)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import CORPUS, requires_corpus

SOFTMAX = CORPUS / "cases" / "softmax"


def xlc(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    exe = shutil.which("xlc")
    cmd = [exe] if exe else [sys.executable, "-m", "xlc.cli"]
    env = dict(os.environ)
    env.pop("XLC_FLAGS", None)
    return subprocess.run(cmd + list(args), capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


def test_no_verb_is_usage_error():
    r = xlc()
    assert r.returncode == 2
    assert "usage" in r.stderr.lower()


def test_unknown_option_is_usage_error():
    r = xlc("hlo", "--no-such-option")
    assert r.returncode == 2


@requires_corpus
def test_hlo_parses_verifies_and_prints():
    r = xlc("hlo", str(SOFTMAX / "module.hlo"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("HloModule jit_softmax")
    assert "ENTRY %main" in r.stdout
    from xlc.hlo.parser import parse_module
    from xlc.hlo.printer import print_module

    # The printed text is a fixed point of parse + print.
    assert print_module(parse_module(r.stdout)) == r.stdout.rstrip("\n") + "\n\n" or \
        print_module(parse_module(r.stdout)).strip() == r.stdout.strip()


def test_malformed_hlo_reports_file_line_column(tmp_path: Path):
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\n\nENTRY main {\n  p = f32[4] parameter(0)\n"
                   "  ROOT n = f32[4] frobnicate(p)\n}\n")
    r = xlc("hlo", str(bad))
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    line = r.stderr.strip()
    assert line.startswith(f"{bad}:5:")
    assert "unknown opcode 'frobnicate'" in line


def test_missing_file_is_user_error(tmp_path: Path):
    r = xlc("hlo", str(tmp_path / "nope.hlo"))
    assert r.returncode == 1
    assert r.stderr.strip() == f"xlc hlo: error: {tmp_path / 'nope.hlo'}: no such file"


@requires_corpus
def test_run_writes_outputs_matching_xla(tmp_path: Path):
    out = tmp_path / "out.npz"
    r = xlc("run", str(SOFTMAX / "module.hlo"), "--inputs", str(SOFTMAX / "inputs.npz"),
            "--output", str(out), "--backend", "interpreter")
    assert r.returncode == 0, r.stderr
    want = np.load(SOFTMAX / "outputs.npz")["out0"]
    got = np.load(out)["out0"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


@requires_corpus
def test_run_without_inputs_names_the_keys(tmp_path: Path):
    r = xlc("run", str(SOFTMAX / "module.hlo"), "--backend", "interpreter")
    assert r.returncode == 1
    assert "the module takes 1 parameter(s): pass --inputs in.npz with keys in0..in0" in r.stderr


@requires_corpus
def test_run_with_wrong_input_shape(tmp_path: Path):
    bad = tmp_path / "in.npz"
    np.savez(bad, in0=np.zeros((3, 3), np.float32))
    r = xlc("run", str(SOFTMAX / "module.hlo"), "--inputs", str(bad), "--backend", "interpreter")
    assert r.returncode == 1
    assert "argument 0" in r.stderr and "f32[128,256]" in r.stderr
    assert "Traceback" not in r.stderr


@requires_corpus
def test_hlo_optimized_with_schedule_and_dumps(tmp_path: Path):
    dump = tmp_path / "dumps"
    r = xlc("hlo", str(SOFTMAX / "module.hlo"), "--stage", "optimized", "--backend",
            "interpreter", "--dump-to", str(dump), "--dump-pass-re", "fusion")
    assert r.returncode == 0, r.stderr
    assert "is_scheduled=true" in r.stdout
    assert "fusion(" in r.stdout
    names = sorted(p.name for p in dump.iterdir())
    assert any(n.endswith(".before_optimizations.hlo") for n in names), names
    assert any(".fusion.hlo" in n for n in names), names
    assert any(n.endswith("buffer-assignment.txt") for n in names), names


@requires_corpus
def test_hlo_memory_report():
    r = xlc("hlo", str(SOFTMAX / "module.hlo"), "--memory-report", "--backend", "interpreter")
    assert r.returncode == 0, r.stderr
    assert "BufferAssignment" in r.stdout
    assert "preallocated temp allocation" in r.stdout


def test_demo_runs_and_matches_numpy():
    r = xlc("demo", "--quiet")
    assert r.returncode == 0, r.stderr
    assert "max |xlc - numpy|" in r.stdout
    assert r.stdout.strip().endswith("OK")


def test_help_on_every_verb():
    for verb in ("hlo", "run", "demo"):
        r = xlc(verb, "--help")
        assert r.returncode == 0
        assert verb in r.stdout


@pytest.mark.parametrize("stage", ["raw"])
def test_hlo_reads_stdin_is_not_a_file(tmp_path: Path, stage: str):
    d = tmp_path / "dir.hlo"
    d.mkdir()
    r = xlc("hlo", str(d), "--stage", stage)
    assert r.returncode == 1
    assert "is a directory" in r.stderr
