"""tools/memory_vs_xla.py's table: the summary lines count the cases at or below XLA."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import memory_vs_xla  # noqa: E402


def _row(case: str, temp: int, xla: int, **extra: int) -> dict[str, object]:
    return {"case": case, "temp": temp, "xla_temp": xla, "lower_bound": temp, "fusions": 1,
            "xla_fusions": 1, "compile_ms": 1.0, **extra}


def test_summary_counts_reported_and_measured_temp() -> None:
    """Against XLA's reported temp and, with --xla-heap, against its measured heap."""
    rows = [_row("gemm", 300, 0, xla_heap=500), _row("small", 8, 68, xla_heap=12),
            _row("big", 900, 100, xla_heap=800)]
    lines = memory_vs_xla.format_table(rows).splitlines()
    assert lines[-2] == "temp <= XLA on 1/3 cases; total ours 1208 B vs XLA 168 B"
    assert lines[-1] == "temp <= XLA's measured heap on 2/3 cases"
    assert "measured heap" not in memory_vs_xla.format_table([_row("a", 1, 2)])
