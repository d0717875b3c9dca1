"""Shared helpers for the viz tests: corpus modules after the optimization passes."""
from __future__ import annotations

import functools
from pathlib import Path

from tests.conftest import CORPUS
from xlc.hlo.ir import HloModule
from xlc.hlo.parser import parse_module
from xlc.passes.buffer_assignment import BufferAssignment
from xlc.passes.optimize import optimize_module

# Cases covering fusions, multi-output fusions, while, conditional, sort, io-aliasing.
CASES = ["softmax", "power_iteration", "cond_switch", "attention_single_head", "reductions",
         "sort_topk", "adam_update", "shape_ops"]


def corpus_text(name: str, stage: str = "module") -> str:
    return (CORPUS / "cases" / name / f"{stage}.hlo").read_text()


@functools.cache
def optimized_case(name: str) -> tuple[HloModule, BufferAssignment]:
    """The corpus module after the standard pipeline (simplification, fusion, multi-output
    fusion, copy insertion, memory scheduling) with its buffer assignment (cached: tests must
    not modify it)."""
    module = parse_module(corpus_text(name))
    result = optimize_module(module)
    return result.module, result.assignment


def write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text, encoding="utf-8")
    return path


def page_graph(page: str) -> dict:
    """The graph JSON embedded in a page written by `xlc.viz.to_html`."""
    import json
    import re

    m = re.search(r'<script type="application/json" id="graph-data">(.*?)</script>', page, re.S)
    assert m, "no graph data in the page"
    return json.loads(m.group(1))
