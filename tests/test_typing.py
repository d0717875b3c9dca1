"""The package type-checks: `python -m mypy xlc` (configured in pyproject.toml) exits 0."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is not installed (pip install mypy)")
def test_mypy_reports_no_errors() -> None:
    """mypy over the whole package, with the project's configuration; its report is the
    failure message."""
    proc = subprocess.run([sys.executable, "-m", "mypy", "xlc"], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, f"mypy xlc failed:\n{proc.stdout}{proc.stderr}"
