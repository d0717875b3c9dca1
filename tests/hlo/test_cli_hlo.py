"""The issue-2 CLI verbs in process (`xlc hlo`, `xlc run --backend interpreter`, `xlc demo`):
malformed or ill-typed HLO gives one `file:line:col: message` line and exit code 1."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import xlc.cli.demo
from xlc.cli import main

ILL_TYPED = ("HloModule m\n\nENTRY main {\n  x = f32[4] parameter(0)\n  y = f32[4] parameter(1)\n"
             "  ROOT r = f32[5] add(x, y)\n}\n")
UNDEFINED = "HloModule m\nENTRY main {\n  x = f32[4] parameter(0)\n  ROOT r = f32[4] add(x, q)\n}\n"
GOOD = ("HloModule m\n\nENTRY main {\n  x = s32[4] parameter(0)\n  y = s32[4] parameter(1)\n"
        "  ROOT t = (s32[4], s32[4]) tuple(divide(x, y), remainder(x, y))\n}\n")


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("verb", ["hlo", "run"])
def test_parse_error_is_one_located_line(tmp_path: Path, verb: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "bad.hlo", UNDEFINED)
    assert main([verb, path]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"{path}:4:26: operand 'q' is not defined in computation 'main'\n")


@pytest.mark.parametrize("verb", ["hlo", "run"])
def test_verification_error_is_one_located_line(tmp_path: Path, verb: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "ill.hlo", ILL_TYPED)
    assert main([verb, path, "--backend", "interpreter"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"{path}:6:3: instruction 'r' in computation 'main': result shape does not "
                   "match the inferred shape: declared f32[5] vs inferred f32[4]\n")


def test_hlo_prints_and_run_evaluates_with_xla_semantics(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    bad_tuple = _write(tmp_path, "nested.hlo", GOOD)
    assert main(["hlo", bad_tuple]) == 1  # operands must be names, not nested instructions
    assert capsys.readouterr().err.startswith(f"{bad_tuple}:6:")
    text = GOOD.replace("tuple(divide(x, y), remainder(x, y))", "tuple(d, m)").replace(
        "  ROOT t", "  d = s32[4] divide(x, y)\n  m = s32[4] remainder(x, y)\n  ROOT t")
    path = _write(tmp_path, "good.hlo", text)
    assert main(["hlo", path]) == 0
    printed = capsys.readouterr().out
    assert "%d = s32[4]{0} divide(%x, %y)" in printed
    inputs, outputs = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, in0=np.array([7, -7, 5, -8], np.int32), in1=np.array([2, 2, 0, -3], np.int32))
    assert main(["run", path, "--inputs", str(inputs), "--output", str(outputs),
                 "--backend", "interpreter"]) == 0
    with np.load(outputs) as z:
        assert sorted(z.files) == ["out0", "out1"]
        assert z["out0"].tolist() == [3, -3, -1, 2]  # truncating division, x / 0 = -1
        assert z["out1"].tolist() == [1, -1, 5, -2]  # sign of the dividend, x % 0 = x


def test_demo_metadata_names_the_demo_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--backend", "interpreter"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("OK")
    assert f'source_file="{xlc.cli.demo.__file__}"' in out
    assert "bin/xlc" not in out and "cli.py" not in out
