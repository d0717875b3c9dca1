"""Compare xlc's temp memory with XLA's on every corpus case.

For each case: parse module.hlo, run a backend's HLO pass pipeline through
`xlc.api.optimize_module` (default `cpu`: `xlc.backend_cpu.compiler.cpu_passes`, exactly
what `xlc.compile(..., backend="cpu")` runs - simplification, transpose folding, loop/input
fusion with gather fusion, multi-output fusion, row fusion, cleanup, copy insertion, the
memory scheduler - then buffer assignment with the CPU's 64-byte alignment), validate the
buffer assignment, and print one row:

    case | our temp | XLA temp | lower bound | vs XLA | vs bound | fusions | XLA fusions | ms

`XLA temp` is `temp_size_in_bytes` from the case's meta.json (XLA's CPU compiler), `lower
bound` the peak of simultaneously live temp bytes under our schedule (no fragmentation), `ms`
the wall time of parsing plus the whole pipeline. `--backend gpu` runs the GPU pipeline
(`gpu_passes`: no row or gather fusion, 256-byte alignment), `--backend interpreter` the
interpreter's (`interpreter_passes`, the same passes as CPU today). `--xla-hlo` assigns XLA's
own optimized.hlo instead (XLA's fusion decisions: copy insertion, our schedule and buffer
assignment only; isolates scheduling + assignment). `--xla-heap` adds XLA's measured heap temp
(temp buffer plus library workspaces, `tools/xla_heap.py`) as a last column. Usage:

    python tools/memory_vs_xla.py [--corpus ../shared/corpus] [--backend cpu|gpu|interpreter]
                                  [--xla-hlo] [--xla-heap] [--json out.json] [case ...]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from xlc.api import optimize_module  # noqa: E402
from xlc.hlo.ir import HloModule  # noqa: E402
from xlc.hlo.opcodes import Opcode  # noqa: E402
from xlc.hlo.parser import parse_module  # noqa: E402
from xlc.options import CompileOptions  # noqa: E402
from xlc.passes.buffer_assignment import BufferAssignment, assign_buffers  # noqa: E402
from xlc.passes.buffer_validator import validate_buffer_assignment  # noqa: E402
from xlc.passes.copy_insertion import CopyInsertion  # noqa: E402
from xlc.passes.scheduler import MemoryScheduler  # noqa: E402

BACKENDS = ("cpu", "gpu", "interpreter")
WARM_UP = """
HloModule warm_up
ENTRY main {
  p = f32[8] parameter(0)
  ROOT n = f32[8] negate(p)
}
"""


def count_fusions(module: HloModule) -> int:
    """Fusion instructions outside fused computations."""
    return sum(1 for c in module.computations if not c.is_fusion_computation
               for i in c.instructions if i.opcode is Opcode.FUSION)


def assign_xla_module(module: HloModule) -> BufferAssignment:
    """XLA's optimized module as it is: copies, our schedule, buffer assignment."""
    CopyInsertion().run(module)
    MemoryScheduler().run(module)
    return assign_buffers(module)


def run_case(case_dir: Path, backend: str = "cpu", xla_hlo: bool = False) -> dict[str, Any]:
    """One table row for the case in `case_dir` (see the module docstring)."""
    meta = json.loads((case_dir / "meta.json").read_text())
    text = (case_dir / ("optimized.hlo" if xla_hlo else "module.hlo")).read_text()
    start = time.perf_counter()
    module = parse_module(text)
    if xla_hlo:
        ba = assign_xla_module(module)
    else:
        ba = optimize_module(module, backend, CompileOptions(backend=backend)).assignment
    elapsed = time.perf_counter() - start
    validate_buffer_assignment(ba)
    stats = ba.stats()
    xla_fusions = (meta.get("hlo_stats", {}).get("optimized_hlo", {})
                   .get("top_level_opcode_counts", {}).get("fusion", 0))
    return {"case": case_dir.name, "temp": stats["temp_bytes"],
            "xla_temp": meta["memory_analysis"]["temp_size_in_bytes"],
            "lower_bound": stats["temp_lower_bound_bytes"], "fusions": count_fusions(module),
            "xla_fusions": xla_fusions, "compile_ms": elapsed * 1e3}


def format_table(rows: list[dict[str, Any]]) -> str:
    """The rows as a text table with a summary line."""
    head = (f"{'case':<24} {'our temp':>10} {'XLA temp':>10} {'lower bd':>10} {'vs XLA':>7} "
            f"{'vs bd':>6} {'fus':>4} {'XLA fus':>7} {'compile ms':>10}")
    if any("xla_heap" in r for r in rows):
        head += f" {'XLA heap':>10}"
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['case']:<24} ERROR {r['error']}")
            continue
        vs_xla = "=" if r["temp"] == r["xla_temp"] else (
            f"{r['temp'] / r['xla_temp']:.2f}x" if r["xla_temp"] else "inf")
        vs_bd = f"{r['temp'] / r['lower_bound']:.2f}" if r["lower_bound"] else "-"
        lines.append(f"{r['case']:<24} {r['temp']:>10} {r['xla_temp']:>10} "
                     f"{r['lower_bound']:>10} {vs_xla:>7} {vs_bd:>6} {r['fusions']:>4} "
                     f"{r['xla_fusions']:>7} {r['compile_ms']:>10.1f}"
                     + (f" {r['xla_heap']:>10}" if "xla_heap" in r else ""))
    ok = [r for r in rows if "error" not in r]
    beat = sum(1 for r in ok if r["temp"] <= r["xla_temp"])
    lines.append(f"temp <= XLA on {beat}/{len(rows)} cases; total ours "
                 f"{sum(r['temp'] for r in ok)} B vs XLA {sum(r['xla_temp'] for r in ok)} B")
    measured = [r for r in ok if "xla_heap" in r]
    if measured:  # like for like: XLA's reported temp leaves out its GEMM library's buffers
        at_most = sum(1 for r in measured if r["temp"] <= r["xla_heap"])
        lines.append(f"temp <= XLA's measured heap on {at_most}/{len(measured)} cases")
    return "\n".join(lines)


def select_cases(ap: argparse.ArgumentParser, corpus: Path, names: list[str],
                 needs: str = "module.hlo") -> list[Path]:
    """The corpus's case folders holding the file `needs`, sorted; only those in `names` when
    any are given (an unknown name is a usage error through `ap`)."""
    cases = sorted(p for p in (corpus / "cases").iterdir() if (p / needs).exists())
    if names:
        unknown = set(names) - {c.name for c in cases}
        if unknown:
            ap.error(f"unknown case(s): {', '.join(sorted(unknown))}")
        cases = [c for c in cases if c.name in names]
    return cases


def finish(rows: list[dict[str, Any]], table: str, json_path: Path | None) -> int:
    """Print `table` and write `rows` as JSON to `json_path` when given; the exit status."""
    print(table)
    if json_path:
        json_path.write_text(json.dumps(rows, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Print the table (and write it as JSON with `--json`)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    ap.add_argument("--backend", choices=BACKENDS, default="cpu",
                    help="whose pass pipeline and alignment to use (default cpu)")
    ap.add_argument("--xla-hlo", action="store_true",
                    help="assign XLA's optimized.hlo instead of running our pipeline")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    ap.add_argument("--xla-heap", action="store_true",
                    help="add a last column: XLA's measured heap temp (tools/xla_heap.py)")
    ap.add_argument("cases", nargs="*", help="case names (default: all)")
    args = ap.parse_args(argv)
    cases = select_cases(ap, args.corpus, args.cases)
    # Import the backend's compiler module before timing anything.
    optimize_module(parse_module(WARM_UP), args.backend, CompileOptions(backend=args.backend))
    rows = []
    for case in cases:
        try:
            rows.append(run_case(case, args.backend, args.xla_hlo))
        except Exception as e:  # report and keep going: this is a benchmark table
            rows.append({"case": case.name, "error": f"{type(e).__name__}: {e}"[:200]})
    if args.xla_heap:  # measured in a child process with a malloc-counting shim preloaded
        from tools.xla_heap import measure_cases
        for row, heap in zip(rows, measure_cases(cases)):
            if "error" not in row:
                row["xla_heap"] = heap.get("heap_temp", "-")
    return finish(rows, format_table(rows), args.json)


if __name__ == "__main__":
    raise SystemExit(main())
