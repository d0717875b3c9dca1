"""HLO passes and the machinery that runs them (`Pipeline`, `FixedPoint`).

`simplification_pipeline()` is the standard cleanup every backend pipeline starts with.
"""
from __future__ import annotations

from xlc.options import CompileOptions
from xlc.passes.call_inliner import CallInliner
from xlc.passes.constant_folding import ConstantFolding
from xlc.passes.cse import CommonSubexpressionElimination
from xlc.passes.dce import DeadCodeElimination
from xlc.passes.pipeline import FixedPoint, HloPass, PassTiming, Pipeline, dump_text
from xlc.passes.simplify import AlgebraicSimplifier

__all__ = [
    "AlgebraicSimplifier", "CallInliner", "CommonSubexpressionElimination", "ConstantFolding",
    "DeadCodeElimination", "FixedPoint", "HloPass", "PassTiming", "Pipeline", "dump_text",
    "simplification_passes", "simplification_pipeline",
]


def simplification_passes(options: CompileOptions | None = None) -> list[HloPass | FixedPoint]:
    """The standard simplification entries, to splice into a backend's pipeline list."""
    limit = options.constant_folding_limit if options is not None else None
    return [
        # JAX emits `call` for nested jitted helpers; inline first so every later pass sees
        # one flat computation.
        CallInliner(),
        # Local rewrites expose constants and duplicates, folding and CSE expose more rewrites;
        # DCE removes what they leave behind. Repeat until nothing changes.
        FixedPoint([AlgebraicSimplifier(), ConstantFolding(limit),
                    CommonSubexpressionElimination(), DeadCodeElimination()],
                   name="simplify"),
    ]


def simplification_pipeline(options: CompileOptions | None = None,
                            name: str = "simplification") -> Pipeline:
    """A `Pipeline`: call inlining, then FixedPoint([simplifier, constant folding, CSE, DCE])."""
    return Pipeline(name, simplification_passes(options))
