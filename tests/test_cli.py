"""The `xlc` console script, run as a real subprocess (the installed script when on PATH)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import CORPUS, requires_corpus

SOFTMAX = CORPUS / "cases" / "softmax"


def console_script() -> str | None:
    """The installed `xlc` console script: next to this interpreter (the virtual environment's
    bin/), else on the PATH."""
    here = Path(sys.executable).parent / "xlc"
    return str(here) if here.is_file() else shutil.which("xlc")


def xlc(*args: str, cwd: Path | None = None, env: dict | None = None
        ) -> subprocess.CompletedProcess:
    exe = console_script()
    cmd = [exe] if exe else [sys.executable, "-m", "xlc.cli"]
    env = {**os.environ, **(env or {})}
    env.pop("XLC_FLAGS", None)
    return subprocess.run(cmd + list(args), capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


def test_the_console_script_is_installed():
    exe = console_script()
    assert exe is not None, "no `xlc` console script: run python -m pip install -e '.[dev]'"
    r = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("usage: xlc")
    for verb in ("hlo", "run", "compile", "inspect", "cache", "viz", "demo"):
        assert verb in r.stdout


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
    for verb in ("hlo", "run", "demo", "compile", "inspect", "cache", "viz"):
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


# ---- compile / inspect / run .xlc / cache / viz ----------------------------------------------
MEMORY_KEYS = {"parameter_bytes", "output_bytes", "temp_bytes", "constant_bytes", "peak_bytes"}


@requires_corpus
def test_compile_inspect_and_run_an_xlc(tmp_path: Path):
    art = tmp_path / "softmax.xlc"
    r = xlc("compile", str(SOFTMAX / "module.hlo"), "-o", str(art), "--backend", "interpreter")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"wrote {art}: jit_softmax for interpreter")
    r = xlc("inspect", str(art))
    assert r.returncode == 0, r.stderr
    assert "jit_softmax(f32[128,256]) -> f32[128,256]" in r.stdout
    for key in MEMORY_KEYS:
        assert key in r.stdout
    assert "compile times:" in r.stdout and "fusion" in r.stdout
    r = xlc("inspect", str(art), "--json")
    assert r.returncode == 0, r.stderr
    import json

    data = json.loads(r.stdout)
    assert set(data["memory"]) == MEMORY_KEYS
    assert data["backend"] == "interpreter" and data["allocations"]
    assert data["signature"]["inputs"] == [{"dtype": "f32", "shape": [128, 256], "weak": False}]
    assert any(t["name"] == "fusion" for t in data["pass_timings"])
    out = tmp_path / "out.npz"
    r = xlc("run", str(art), "--inputs", str(SOFTMAX / "inputs.npz"), "--output", str(out))
    assert r.returncode == 0, r.stderr
    want = np.load(SOFTMAX / "outputs.npz")["out0"]
    np.testing.assert_allclose(np.load(out)["out0"], want, rtol=1e-4, atol=1e-6)
    r = xlc("hlo", str(art))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("HloModule jit_softmax") and "is_scheduled=true" in r.stdout
    r = xlc("hlo", str(art), "--memory-report")
    assert "BufferAssignment" in r.stdout


def test_compile_a_python_function(tmp_path: Path):
    (tmp_path / "mymodel.py").write_text(
        "import xlc.numpy as xnp\n\n"
        "def predict(x, w, scale=1.0):\n"
        "    return xnp.tanh(x @ w) * scale, x.sum()\n")
    art = tmp_path / "p.xlc"
    r = xlc("compile", "mymodel:predict", "--arg", "f32[4,8]", "--arg", "f32[8,2]",
            "--static", "scale=3.0", "-o", str(art), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    x = np.linspace(0, 1, 32, dtype=np.float32).reshape(4, 8)
    w = np.linspace(-1, 1, 16, dtype=np.float32).reshape(8, 2)
    np.savez(tmp_path / "in.npz", in0=x, in1=w)
    r = xlc("run", str(art), "--inputs", str(tmp_path / "in.npz"), "--output",
            str(tmp_path / "o.npz"))
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "o.npz")
    np.testing.assert_allclose(got["out0"], np.tanh(x @ w) * 3.0, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["out1"], x.sum(), rtol=1e-5)
    r = xlc("inspect", str(art))
    assert "predict(x: f32[4,8], w: f32[8,2]) -> f32[4,2], f32[]" in r.stdout


def test_compile_usage_and_user_errors(tmp_path: Path):
    (tmp_path / "mm.py").write_text("def f(x):\n    return x\n")
    r = xlc("compile", "mm:f", "--arg", "f32[8", "-o", str(tmp_path / "a.xlc"), cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip() == "xlc compile: --arg expects a shape like f32[8,128], got 'f32[8'"
    r = xlc("compile", "mm:nope", "--arg", "f32[8]", "-o", str(tmp_path / "a.xlc"), cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.strip() == "xlc compile: error: module 'mm' has no attribute 'nope'"
    r = xlc("compile", "mm:f")
    assert r.returncode == 2  # -o is required


def test_run_a_damaged_xlc_is_one_line(tmp_path: Path):
    bad = tmp_path / "bad.xlc"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    r = xlc("run", str(bad))
    assert r.returncode == 1
    assert r.stderr.strip() == (f"xlc run: error: {bad}: not a valid .xlc file (not a zip "
                                "archive, or truncated)")
    r = xlc("inspect", str(bad))
    assert r.returncode == 1 and "Traceback" not in r.stderr


def test_cache_verbs(tmp_path: Path):
    hlo = tmp_path / "m.hlo"
    hlo.write_text("HloModule m\n\nENTRY main {\n  p = f32[4] parameter(0)\n"
                   "  ROOT n = f32[4] negate(p)\n}\n")
    np.savez(tmp_path / "in.npz", in0=np.ones(4, np.float32))
    cache = tmp_path / "cache"
    for _ in range(2):
        r = xlc("run", str(hlo), "--inputs", str(tmp_path / "in.npz"), "--cache-dir", str(cache))
        assert r.returncode == 0, r.stderr
    r = xlc("cache", "ls", "--cache-dir", str(cache))
    assert r.returncode == 0 and len(r.stdout.strip().splitlines()) == 1
    assert r.stdout.strip().endswith("cpu         m")  # run compiles for the cpu by default
    r = xlc("cache", "info", "--cache-dir", str(cache))
    assert "entries:   1" in r.stdout
    r = xlc("cache", "clear", "--cache-dir", str(cache))
    assert r.stdout.strip() == f"removed 1 entry from {cache}"
    r = xlc("cache", "ls")
    assert r.returncode == 1
    assert "no compile cache directory: set XLC_CACHE_DIR or pass --cache-dir" in r.stderr


@requires_corpus
@pytest.mark.parametrize("suffix", [".dot", ".html"])
def test_viz_writes_a_picture(tmp_path: Path, suffix: str):
    out = tmp_path / f"graph{suffix}"
    r = xlc("viz", str(SOFTMAX / "module.hlo"), "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert ("digraph" in text) if suffix == ".dot" else ("<html" in text and "timeline" in text)
    r = xlc("viz", str(SOFTMAX / "module.hlo"), "-o", str(tmp_path / "graph.png"))
    assert r.returncode == 2 and "name it .dot, .svg or .html" in r.stderr


@requires_corpus
def test_hlo_dump_writes_llvm_and_object_stages(tmp_path: Path):
    dump = tmp_path / "d"
    r = xlc("hlo", str(SOFTMAX / "module.hlo"), "--stage", "optimized", "--backend", "cpu",
            "--dump-to", str(dump))
    assert r.returncode == 0, r.stderr
    names = {p.name for p in dump.iterdir()}
    m0 = "module_0000.jit_softmax"
    assert {f"{m0}.ir-no-opt.ll", f"{m0}.ir-with-opt.ll", f"{m0}.o",
            f"{m0}.0000.before_optimizations.hlo"} <= names
    assert (dump / f"{m0}.o").read_bytes()[:4] == b"\x7fELF"
    # a second compile into the same directory gets its own prefix: nothing is overwritten
    stamps = {p.name: p.stat().st_mtime_ns for p in dump.iterdir()}
    r = xlc("hlo", str(SOFTMAX / "module.hlo"), "--stage", "optimized", "--backend", "cpu",
            "--dump-to", str(dump))
    assert r.returncode == 0, r.stderr
    again = {p.name: p.stat().st_mtime_ns for p in dump.iterdir()}
    assert {n: again[n] for n in stamps} == stamps
    assert {n.replace("module_0001.", "module_0000.") for n in set(again) - set(stamps)} == \
        set(stamps)


@requires_corpus
def test_compile_and_run_for_cpu(tmp_path: Path):
    art = tmp_path / "softmax_cpu.xlc"
    r = xlc("compile", str(SOFTMAX / "module.hlo"), "-o", str(art), "--backend", "cpu")
    assert r.returncode == 0, r.stderr
    r = xlc("inspect", str(art))
    assert "backend: cpu" in r.stdout and "code/entry.o" in r.stdout
    out = tmp_path / "out.npz"
    r = xlc("run", str(art), "--inputs", str(SOFTMAX / "inputs.npz"), "--output", str(out))
    assert r.returncode == 0, r.stderr
    want = np.load(SOFTMAX / "outputs.npz")["out0"]
    np.testing.assert_allclose(np.load(out)["out0"], want, rtol=1e-4, atol=1e-6)
    bad = tmp_path / "bad.npz"
    np.savez(bad, in0=np.zeros((128, 256), np.float64))
    r = xlc("run", str(art), "--inputs", str(bad))
    assert r.returncode == 1
    assert r.stderr.strip() == (f"xlc run: error: {art}: input in0: expected f32[128,256], got "
                                "f64[128,256]")
    r = xlc("run", str(art), "--inputs", str(bad), "--backend", "interpreter")
    assert r.returncode == 1
    assert r.stderr.strip() == (f"xlc run: error: {art} holds a cpu executable; --backend "
                                "interpreter does not apply (recompile it for that backend)")


# ---- dumps, stages and pictures of .xlc files --------------------------------------------------
@requires_corpus
def test_dump_to_with_the_raw_stage_still_dumps(tmp_path: Path):
    dump = tmp_path / "d"
    r = xlc("hlo", str(SOFTMAX / "module.hlo"), "--backend", "interpreter", "--dump-to",
            str(dump))
    assert r.returncode == 0, r.stderr
    assert "is_scheduled=true" not in r.stdout  # printed as parsed, as asked
    names = {p.name for p in dump.iterdir()}
    m0 = "module_0000.jit_softmax"
    assert {f"{m0}.0000.before_optimizations.hlo", f"{m0}.after_optimizations.hlo",
            f"{m0}.buffer-assignment.txt"} <= names, names


def test_dump_pass_re_needs_a_directory(tmp_path: Path):
    hlo = tmp_path / "m.hlo"
    hlo.write_text("HloModule m\n\nENTRY main {\n  ROOT p = f32[4] parameter(0)\n}\n")
    r = xlc("hlo", str(hlo), "--dump-pass-re", "fusion")
    assert r.returncode == 2
    assert r.stderr.strip() == "xlc hlo: --dump-pass-re needs a dump directory: add --dump-to DIR"


@requires_corpus
def test_hlo_dump_writes_gpu_stages(tmp_path: Path):
    dump = tmp_path / "g"
    r = xlc("hlo", str(SOFTMAX / "module.hlo"), "--stage", "optimized", "--backend", "gpu",
            "--dump-to", str(dump))
    assert r.returncode == 0, r.stderr
    names = {p.name for p in dump.iterdir()}
    m0 = "module_0000.jit_softmax"
    assert {f"{m0}.sm_80.ll", f"{m0}.sm_80.ptx", f"{m0}.thunks.json",
            f"{m0}.after_optimizations.hlo"} <= names, names
    ptx = (dump / f"{m0}.sm_80.ptx").read_text()
    assert ".target sm_80" in ptx and ".entry" in ptx
    if shutil.which("ptxas"):
        assert (dump / f"{m0}.sm_80.cubin").read_bytes()[:4] == b"\x7fELF"
    else:
        assert "no .cubin stage for jit_softmax: ptxas is not on the PATH" in r.stderr


@requires_corpus
def test_xlc_inputs_reject_raw_stage_and_missing_files(tmp_path: Path):
    art = tmp_path / "s.xlc"
    assert xlc("compile", str(SOFTMAX / "module.hlo"), "-o", str(art), "--backend",
               "interpreter").returncode == 0
    for verb, extra in (("hlo", ()), ("viz", ("-o", str(tmp_path / "g.dot")))):
        r = xlc(verb, str(art), "--stage", "raw", *extra)
        assert r.returncode == 2
        assert "an .xlc file holds only the optimized program" in r.stderr
    missing = tmp_path / "nope.xlc"
    for verb, extra in (("hlo", ()), ("inspect", ()), ("run", ()),
                        ("viz", ("-o", str(tmp_path / "g.dot")))):
        r = xlc(verb, str(missing), *extra)
        assert r.returncode == 1
        assert r.stderr.strip() == f"xlc {verb}: error: {missing}: no such file"


@requires_corpus
def test_viz_of_an_xlc_shows_the_stored_assignment(tmp_path: Path):
    art = tmp_path / "sm.xlc"  # power_iteration has temps (a timeline) on the CPU
    hlo = CORPUS / "cases" / "power_iteration" / "module.hlo"
    assert xlc("compile", str(hlo), "-o", str(art), "--backend", "cpu").returncode == 0
    r = xlc("viz", str(art), "-o", str(tmp_path / "sm.html"))
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "sm.html").read_text()
    assert '<svg class="timeline"' in page and "alloc #" in page
    r = xlc("viz", str(art), "-o", str(tmp_path / "sm.dot"))
    assert r.returncode == 0, r.stderr
    dot = (tmp_path / "sm.dot").read_text()
    # every slice drawn is one the stored buffer assignment lists
    from xlc.artifact import read_manifest

    allocs = {a.index: a.kind for a in read_manifest(str(art)).allocations}
    import re

    drawn = re.findall(r"alloc #(\d+) \((\w+)\)", dot)
    assert drawn and all(allocs[int(i)] == kind for i, kind in drawn)


@requires_corpus
@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz 'dot' not installed")
def test_viz_writes_svg_with_graphviz(tmp_path: Path):
    out = tmp_path / "g.svg"
    r = xlc("viz", str(SOFTMAX / "module.hlo"), "-o", str(out))
    assert r.returncode == 0, r.stderr
    svg = out.read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and 'class="cluster"' in svg


# ---- no tracebacks without --debug -------------------------------------------------------------
def _call_chain(n: int) -> str:
    """An HLO module whose entry calls c0, which calls c1, ... c{n-1} (negate): n deep."""
    lines = ["HloModule chain", ""]
    for i in range(n):
        body = f"call(p), to_apply=c{i + 1}" if i + 1 < n else "negate(p)"
        lines += [f"c{i} {{", "  p = f32[] parameter(0)", f"  ROOT r = f32[] {body}", "}", ""]
    lines += ["ENTRY main {", "  p = f32[] parameter(0)", "  ROOT r = f32[] call(p), to_apply=c0",
              "}"]
    return "\n".join(lines) + "\n"


def _one_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    return r.stderr.rstrip("\n")


def test_a_huge_shape_is_one_line_out_of_memory(tmp_path: Path):
    (tmp_path / "huge.hlo").write_text(
        "HloModule huge\n\nENTRY main {\n  c = f32[] constant(1)\n"
        "  ROOT b = f32[70368744177664] broadcast(c), dimensions={}\n}\n")  # 256 TiB
    line = _one_line(xlc("run", "huge.hlo", cwd=tmp_path))
    assert line == ("xlc run: error: out of memory: Unable to allocate 256. TiB; run with "
                    "--debug for the traceback")


def test_call_chains_1000_deep_run_and_deeper_ones_are_one_line(tmp_path: Path, capsys,
                                                                 monkeypatch):
    from xlc import cli
    from xlc.hlo.evaluator import evaluate
    from xlc.hlo.parser import parse_module

    (tmp_path / "deep.hlo").write_text(_call_chain(1000))
    np.savez(tmp_path / "in.npz", in0=np.float32(2.5))
    r = xlc("run", "deep.hlo", "--inputs", "in.npz", "--output", "out.npz", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    want = cli.run_deep(lambda: evaluate(parse_module(_call_chain(1000)), [np.float32(2.5)]))
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["out0"], want)
    monkeypatch.setattr(cli, "RECURSION_LIMIT", 300)  # past the limit: one line
    monkeypatch.setattr(sys, "getrecursionlimit", lambda: 300)
    assert cli.main(["hlo", str(tmp_path / "deep.hlo")]) == 1
    assert capsys.readouterr().err == (
        "xlc hlo: error: the program is nested too deeply for xlc (calls, control flow or "
        "operand chains past the recursion limit of 300 frames); run with --debug for the "
        "traceback\n")


def test_negative_reduce_precision_bits_are_one_line(tmp_path: Path):
    (tmp_path / "rp.hlo").write_text(
        "HloModule rp\n\nENTRY main {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] "
        "reduce-precision(p), exponent_bits=8, mantissa_bits=-3\n}\n")
    np.savez(tmp_path / "in.npz", in0=np.ones(4, np.float32))
    for backend in ("cpu", "interpreter"):
        line = _one_line(xlc("run", "rp.hlo", "--inputs", "in.npz", "--backend", backend,
                             cwd=tmp_path))
        assert line == ("rp.hlo:5:3: instruction 'r' in computation 'main': reduce-precision "
                        "needs mantissa_bits >= 0: got -3")


def test_npy_and_object_array_inputs_are_one_line(tmp_path: Path):
    (tmp_path / "neg.hlo").write_text("HloModule neg\n\nENTRY main {\n  p = f32[4] "
                                      "parameter(0)\n  ROOT n = f32[4] negate(p)\n}\n")
    np.save(tmp_path / "in.npy", np.ones(4, np.float32))
    np.savez(tmp_path / "obj.npz", in0=np.array([1, "a", None, 2.0], dtype=object))
    line = _one_line(xlc("run", "neg.hlo", "--inputs", "in.npy", cwd=tmp_path))
    assert line == ("xlc run: error: in.npy: a .npy file holds one unnamed array; pass an .npz "
                    "with keys in0..in0 (numpy.savez(path, in0=...))")
    line = _one_line(xlc("run", "neg.hlo", "--inputs", "obj.npz", cwd=tmp_path))
    assert line == ("xlc run: error: obj.npz: input in0 is an array of Python objects; inputs "
                    "must be numeric arrays")


def test_internal_errors_are_one_line_unless_debug(tmp_path: Path, capsys, monkeypatch):
    from xlc import cli

    def broken(args: object) -> int:
        raise KeyError("entry")

    monkeypatch.setattr(cli, "cmd_hlo", broken)
    assert cli.main(["hlo", "x.hlo"]) == 1
    assert capsys.readouterr().err == ("xlc hlo: internal error: KeyError: 'entry'; run with "
                                       "--debug for the traceback\n")
    with pytest.raises(KeyError):
        cli.main(["--debug", "hlo", "x.hlo"])
    (tmp_path / "bad.py").write_text("def f(x):\n    return x.no_such_method()\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["compile", "bad:f", "--arg", "f32[4]", "-o", "b.xlc"]) == 1
    assert capsys.readouterr().err == (
        "xlc compile: error: bad:f raised AttributeError while being traced: 'Tracer' object "
        "has no attribute 'no_such_method'\n")


# ---- output files: exactly the named path, atomic, through links and devices ------------------
NEG_HLO = ("HloModule neg\n\nENTRY main {\n  p = f32[4] parameter(0)\n"
           "  ROOT n = f32[4] negate(p)\n}\n")


def _neg_case(tmp_path: Path) -> np.ndarray:
    from xlc.hlo.evaluator import evaluate
    from xlc.hlo.parser import parse_module

    (tmp_path / "neg.hlo").write_text(NEG_HLO)
    x = np.arange(4, dtype=np.float32)
    np.savez(tmp_path / "in.npz", in0=x)
    return np.asarray(evaluate(parse_module(NEG_HLO), [x]))


def test_output_is_written_at_exactly_the_named_path(tmp_path: Path):
    want = _neg_case(tmp_path)
    r = xlc("run", "neg.hlo", "--inputs", "in.npz", "--output", "res.bin", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.npz", "neg.hlo", "res.bin"]
    np.testing.assert_array_equal(np.load(tmp_path / "res.bin")["out0"], want)
    mode = (tmp_path / "res.bin").stat().st_mode & 0o777
    assert mode == 0o666 & ~_umask(), oct(mode)  # not mkstemp's 0o600


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_output_through_symlinks_and_fifos(tmp_path: Path):
    import io
    import stat
    import threading

    want = _neg_case(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "out.npz").symlink_to(tmp_path / "data" / "real.npz")  # dangling: created
    for _ in range(2):  # then replaced through the link
        r = xlc("run", "neg.hlo", "--inputs", "in.npz", "--output", "out.npz", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "out.npz").is_symlink()
        np.testing.assert_array_equal(np.load(tmp_path / "data" / "real.npz")["out0"], want)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    r = xlc("run", "neg.hlo", "--inputs", "in.npz", "--output", str(fifo), cwd=tmp_path)
    reader.join(60)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # written through, not replaced
    np.testing.assert_array_equal(np.load(io.BytesIO(got[0]))["out0"], want)
    r = xlc("compile", "neg.hlo", "-o", "/dev/null", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    (tmp_path / "model.xlc").symlink_to("data/model-v1.xlc")
    r = xlc("compile", "neg.hlo", "-o", "model.xlc", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "model.xlc").is_symlink()  # the link stays, its target is written
    r = xlc("run", "data/model-v1.xlc", "--inputs", "in.npz", "--output", "o.npz", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["out0"], want)


def test_failed_writes_exit_1_and_leave_the_old_file(tmp_path: Path, capsys, monkeypatch):
    _neg_case(tmp_path)
    r = xlc("run", "neg.hlo", "--inputs", "in.npz", "--output", "/dev/full", cwd=tmp_path)
    assert _one_line(r) == "xlc run: error: /dev/full: No space left on device"
    r = xlc("compile", "neg.hlo", "-o", "/dev/full", cwd=tmp_path)
    assert _one_line(r) == "xlc compile: error: /dev/full: No space left on device"
    with open("/dev/full", "w") as full:
        r = subprocess.run([console_script() or "xlc", "run", "neg.hlo", "--inputs", "in.npz"],
                           stdout=full, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                           timeout=300)
    assert _one_line(r) == "xlc run: error: <stdout>: No space left on device"
    # a disk that fills up half way through a regular file: the old file stays as it was
    from xlc.cli import main

    old = tmp_path / "old.npz"
    old.write_bytes(b"previous results")
    real_savez = np.savez

    def full_disk(f, **arrays):
        real_savez(f, **arrays)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", full_disk)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "neg.hlo", "--inputs", "in.npz", "--output", "old.npz"]) == 1
    assert capsys.readouterr().err == "xlc run: error: old.npz: No space left on device\n"
    assert old.read_bytes() == b"previous results"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert main(["run", "neg.hlo", "--inputs", "in.npz", "--output", str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"xlc run: error: {tmp_path}: Is a directory\n"


def test_inspect_labels_pytree_arguments_by_path(tmp_path: Path, capsys):
    import xlc as xlc_api
    from xlc.cli import main

    def f(params, xs, bias=None, *, scale):
        return {"y": params["w"] * xs[0] + params["b"] + xs[1] * scale + bias[0]}

    spec = xlc_api.ShapeDtype((4,), "float32")
    compiled = xlc_api.jit(f).lower({"w": spec, "b": spec}, [spec, spec], (spec,),
                                    scale=xlc_api.ShapeDtype((), "float32")).compile()
    compiled.serialize(str(tmp_path / "f.xlc"))
    assert main(["inspect", str(tmp_path / "f.xlc")]) == 0
    out = capsys.readouterr().out
    assert ("  f(params['b']: f32[4], params['w']: f32[4], xs[0]: f32[4], xs[1]: f32[4], "
            "bias[0]: f32[4], scale: f32[]) -> f32[4]\n") in out
    assert main(["inspect", str(tmp_path / "f.xlc"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["input_labels"] == ["params['b']", "params['w']", "xs[0]", "xs[1]", "bias[0]",
                                    "scale"]
