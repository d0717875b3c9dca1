"""The `xlc` console script under hostile conditions: no Python traceback without --debug (huge
shapes, deep nesting, bad inputs, internal errors), and output files written at exactly the
named path, atomically, through symlinks and devices, exiting 1 on any failed write."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.test_cli import console_script, xlc


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
    cli = importlib.import_module("xlc.cli.main")
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
    cli = importlib.import_module("xlc.cli.main")

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
