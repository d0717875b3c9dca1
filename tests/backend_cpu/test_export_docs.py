"""docs/export.md's example works as written: its Python block exports the model, its build
lines compile its C and C++ programs against the static and shared library, and both print
the in-process results bit for bit (as float32 printed with %.9g)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.test_docs import ROOT, parse_blocks

pytestmark = pytest.mark.skipif(any(shutil.which(t) is None for t in ("cc", "c++", "objcopy",
                                                                      "ar")),
                                reason="needs cc, c++ and binutils")


def test_export_doc_example_builds_and_matches(tmp_path: Path) -> None:
    blocks = parse_blocks(ROOT / "docs" / "export.md")
    by_lang: dict[str, list[str]] = {}
    for b in blocks:
        by_lang.setdefault(b.lang, []).append(b.text)
    python, c_src, cpp_src = by_lang["python"][0], by_lang["c"][0], by_lang["cpp"][0]
    build = next(t for t in by_lang["bash"] if t.startswith("cc "))
    (tmp_path / "main.c").write_text(c_src)
    (tmp_path / "main.cpp").write_text(cpp_src)
    cwd = os.getcwd()
    ns: dict[str, object] = {}
    try:
        os.chdir(tmp_path)
        exec(compile(python, "docs/export.md", "exec"), ns)  # noqa: S102 - the doc's example
    finally:
        os.chdir(cwd)
    want = np.asarray(ns["compiled"](ns["x"], ns["w"], ns["b"]))  # type: ignore[operator]
    assert sorted(p.name for p in (tmp_path / "build").iterdir()) == [
        "README.txt", "libpredict.a", "libpredict.so", "predict.h"]
    proc = subprocess.run(["bash", "-e", "-c", build], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("\n")
    printed = np.array([float(v) for line in lines for v in line.split()], np.float32)
    assert printed.size == 2 * want.size  # the C program, then the C++ one
    for run in (printed[:want.size], printed[want.size:]):
        assert run.reshape(want.shape).tobytes() == want.tobytes()
