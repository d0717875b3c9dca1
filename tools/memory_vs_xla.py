"""Compare xlc's temp memory with XLA's on every corpus case.

For each case: parse module.hlo, run the optimization pipeline (`xlc.passes.optimize`'s
`interpreter_passes`: the standard passes - simplification, transpose folding, fusion,
multi-output fusion, cleanup, copy insertion, memory scheduler - with the emitter-dependent
fusions on: gather fusion and row fusion), then buffer assignment (validated), and print one
row:

    case | our temp | XLA temp | lower bound | ratio | our fusions | XLA fusions | compile ms

`lower bound` is the peak of simultaneously live temp bytes under our schedule (no
fragmentation). `--xla-hlo` assigns XLA's own optimized.hlo instead (same fusion decisions as
XLA: isolates scheduling + assignment). Usage:

    python tools/memory_vs_xla.py [--corpus ../shared/corpus] [--xla-hlo | --standard]
                                  [--json out.json]

`--standard` runs `standard_passes` alone (what CPU/GPU-like pipelines without gather and row
fusion emitters get).
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

from xlc.hlo.ir import HloModule  # noqa: E402
from xlc.hlo.opcodes import Opcode  # noqa: E402
from xlc.hlo.parser import parse_module  # noqa: E402
from xlc.passes.buffer_assignment import assign_buffers  # noqa: E402
from xlc.passes.buffer_validator import validate_buffer_assignment  # noqa: E402
from xlc.passes.copy_insertion import CopyInsertion  # noqa: E402
from xlc.passes.scheduler import MemoryScheduler  # noqa: E402


def optimization_passes() -> list[Any]:
    """The passes that exist right now: simplification, fusion, multi-output fusion."""
    passes: list[Any] = []
    try:
        from xlc.passes import simplification_pipeline

        passes.append(simplification_pipeline())
    except ImportError:
        pass
    try:
        from xlc.passes.fusion import InstructionFusion

        passes.append(InstructionFusion())
    except ImportError:
        pass
    try:
        from xlc.passes.multi_output_fusion import MultiOutputFusion

        passes.append(MultiOutputFusion())
    except ImportError:
        pass
    return passes


def _standard_optimizer(plain: bool = False) -> Any:
    """`xlc.passes.optimize.optimize_module` with the interpreter's pass list (the standard
    passes with every emitter-dependent fusion enabled: gather and row fusion), or with
    `plain` the standard list alone (what backends without those emitters get)."""
    try:
        from xlc.options import default_options
        from xlc.passes.optimize import interpreter_passes, optimize_module, standard_passes
    except ImportError:
        return None

    def run(module: HloModule) -> Any:
        opts = default_options()
        passes = standard_passes(opts) if plain else interpreter_passes(opts)
        return optimize_module(module, opts, passes=passes, name="interpreter")
    return run


def count_fusions(module: HloModule) -> int:
    return sum(1 for c in module.computations if not c.is_fusion_computation
               for i in c.instructions if i.opcode is Opcode.FUSION)


def run_case(case_dir: Path, xla_hlo: bool, plain: bool = False) -> dict[str, Any]:
    meta = json.loads((case_dir / "meta.json").read_text())
    text = (case_dir / ("optimized.hlo" if xla_hlo else "module.hlo")).read_text()
    start = time.perf_counter()
    module = parse_module(text)
    standard = None if xla_hlo else _standard_optimizer(plain)
    if standard is not None:  # the real pipeline: passes, copy insertion, schedule, assign
        ba = standard(module).assignment
    else:
        if not xla_hlo:
            for p in optimization_passes():
                p.run(module)
        CopyInsertion().run(module)
        MemoryScheduler().run(module)
        ba = assign_buffers(module)
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
    head = (f"{'case':<24} {'our temp':>10} {'XLA temp':>10} {'lower bd':>10} {'vs XLA':>7} "
            f"{'vs bd':>6} {'fus':>4} {'XLA fus':>7} {'compile ms':>10}")
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
                     f"{r['xla_fusions']:>7} {r['compile_ms']:>10.1f}")
    ok = [r for r in rows if "error" not in r]
    beat = sum(1 for r in ok if r["temp"] <= r["xla_temp"])
    lines.append(f"temp <= XLA on {beat}/{len(rows)} cases; total ours "
                 f"{sum(r['temp'] for r in ok)} B vs XLA {sum(r['xla_temp'] for r in ok)} B")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    ap.add_argument("--xla-hlo", action="store_true",
                    help="assign XLA's optimized.hlo instead of running our pipeline")
    ap.add_argument("--standard", action="store_true",
                    help="run `standard_passes` alone (no gather / row fusion)")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    ap.add_argument("cases", nargs="*", help="case names (default: all)")
    args = ap.parse_args(argv)
    cases = sorted(p for p in (args.corpus / "cases").iterdir() if (p / "module.hlo").exists())
    if args.cases:
        cases = [c for c in cases if c.name in args.cases]
    rows = []
    for case in cases:
        try:
            rows.append(run_case(case, args.xla_hlo, args.standard))
        except Exception as e:  # report and keep going: this is a benchmark table
            rows.append({"case": case.name, "error": f"{type(e).__name__}: {e}"[:200]})
    print(format_table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
