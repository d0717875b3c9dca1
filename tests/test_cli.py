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
    from xlc.artifact.store import read_manifest

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


def test_compile_under_a_memory_limit_and_inspect_says_what_was_recomputed(tmp_path: Path):
    src = tmp_path / "chain.hlo"
    dot = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    src.write_text(f"""HloModule chain
ENTRY main {{
  x = f32[64,64] parameter(0)
  w = f32[64,64] parameter(1)
  a = f32[64,64] dot(x, w), {dot}
  b = f32[64,64] dot(a, w), {dot}
  c = f32[64,64] dot(b, w), {dot}
  d = f32[64,64] dot(c, w), {dot}
  e = f32[64,64] dot(d, c), {dot}
  f = f32[64,64] dot(e, b), {dot}
  ROOT g = f32[64,64] dot(f, a), {dot}
}}
""")
    art = tmp_path / "chain.xlc"
    r = xlc("compile", str(src), "-o", str(art), "--memory-limit", "96KiB", "--backend",
            "interpreter")
    assert r.returncode == 0, r.stderr
    assert r.stdout.endswith("peak memory 98304 bytes\n")
    r = xlc("inspect", str(art))
    assert r.returncode == 0, r.stderr
    assert "  memory limit 98304 bytes: peak 114688 -> 98304 bytes (fits; rematerialization: " \
        "1 action(s))\n    rematerialization: peak 98304 bytes after it\n      recomputed a " \
        "(16384 bytes, dot) as a.remat before g\n" in r.stdout
    bad = xlc("compile", str(src), "-o", str(art), "--memory-limit", "lots")
    assert bad.returncode == 1
    assert bad.stderr.strip().endswith("--memory-limit: expected a byte count such as "
                                       "1073741824, 512MiB or 2GB, got 'lots'")
