"""`xlc export` (xlc/cli/export_cmd.py): .hlo, .xlc and module:function inputs, --static /
--shared, the refusal to overwrite, --force, and the one-line errors; the exported library's
C driver output equals the in-process run."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import xlc
from xlc.cli.main import main

pytestmark = pytest.mark.skipif(any(shutil.which(t) is None for t in ("cc", "objcopy", "ar")),
                                reason="needs cc and binutils")

HLO = """HloModule scale
ENTRY e {
  x = f32[8] parameter(0)
  c = f32[] constant(1.5)
  b = f32[8] broadcast(c), dimensions={}
  ROOT y = f32[8] multiply(x, b)
}
"""

DRIVER = r"""
#include <stdio.h>
#include "scale.h"
int main(void) {
  float x[8];
  _Alignas(64) float y[8];
  for (int i = 0; i < 8; i++) x[i] = (float)i - 2.0f;
  const void* args[] = {x};
  void* results[] = {y};
  void* temp = scale_alloc_temp();
  if (scale_run(args, results, temp, 1)) return 1;
  for (int i = 0; i < 8; i++) printf("%.9g\n", y[i]);
  scale_free_temp(temp);
  return 0;
}
"""


def _files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def test_export_hlo_builds_a_working_library(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "scale.hlo").write_text(HLO)
    out = tmp_path / "out"
    assert main(["export", str(tmp_path / "scale.hlo"), "-o", str(out), "--name", "scale"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(" (")[0] for ln in lines[:4]] == [
        f"wrote {out}/{f}" for f in ("scale.h", "libscale.a", "libscale.so", "README.txt")]
    assert lines[4].startswith("exported scale as scale in ")
    (out / "main.c").write_text(DRIVER)
    subprocess.run(["cc", "-std=c11", "-O2", f"-I{out}", str(out / "main.c"),
                    str(out / "libscale.a"), "-lm", "-lpthread", "-o", str(out / "main")],
                   check=True)
    printed = subprocess.run([str(out / "main")], check=True, capture_output=True,
                             text=True).stdout.split()
    x = np.arange(8, dtype=np.float32) - np.float32(2)
    want = np.asarray(xlc.compile(HLO, backend="cpu")(x))
    assert np.array(printed, dtype=np.float32).tobytes() == want.tobytes()
    # a second export into the same directory is refused (one line, exit 1) unless --force
    assert main(["export", str(tmp_path / "scale.hlo"), "-o", str(out), "--name", "scale",
                 "--shared"]) == 1
    assert capsys.readouterr().err == (f"xlc export: error: {out}/scale.h: already exists "
                                       "(pass force=True, or --force, to overwrite it)\n")
    assert main(["export", str(tmp_path / "scale.hlo"), "-o", str(out), "--name", "scale",
                 "--shared", "--force"]) == 0


def test_export_xlc_and_function_inputs(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "scale.hlo").write_text(HLO)
    assert main(["compile", str(tmp_path / "scale.hlo"), "-o", str(tmp_path / "s.xlc")]) == 0
    assert main(["export", str(tmp_path / "s.xlc"), "-o", str(tmp_path / "a"), "--name",
                 "stored", "--static"]) == 0
    assert _files(tmp_path / "a") == ["README.txt", "libstored.a", "stored.h"]
    (tmp_path / "mymodel.py").write_text("import xlc.numpy as xnp\n\n"
                                         "def predict(x, w):\n    return xnp.tanh(x @ w)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert main(["export", "mymodel:predict", "--arg", "f32[4,8]", "--arg", "f32[8,2]", "-o",
                 "b", "--name", "predict", "--shared"]) == 0
    assert _files(tmp_path / "b") == ["README.txt", "libpredict.so", "predict.h"]
    header = (tmp_path / "b" / "predict.h").read_text()
    assert '#define predict_ARG1_SHAPE "f32[8,2]{1,0}"' in header
    assert "#define predict_RESULT0_BYTES ((size_t)32)" in header
    capsys.readouterr()


def test_export_errors_are_one_line(tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "scale.hlo").write_text(HLO)
    assert main(["export", str(tmp_path / "scale.hlo"), "-o", str(tmp_path / "g"), "--name",
                 "g", "--backend", "gpu"]) == 1
    assert capsys.readouterr().err == ("xlc export: error: native export is CPU-only for now "
                                       "(got --backend gpu)\n")
    assert main(["export", str(tmp_path / "scale.hlo"), "-o", str(tmp_path / "g"), "--name",
                 "not-a-c-name"]) == 1
    assert capsys.readouterr().err.startswith(
        "xlc export: error: native export: the library name must be a C identifier")
    with pytest.raises(SystemExit):
        main(["export", str(tmp_path / "scale.hlo"), "-o", "x", "--name", "s", "--static",
              "--shared"])
    assert not (tmp_path / "g").exists()
