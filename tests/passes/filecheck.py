"""A tiny FileCheck for pass tests, plus helpers to run passes on HLO text and compare numerics.

Check lines (one per line, leading whitespace ignored, other lines ignored):
  CHECK: pat       a later line contains pat
  CHECK-NEXT: pat  the line right after the previous match contains pat
  CHECK-NOT: pat   no line between the previous match and the next match (or the end) has pat
Patterns are literal text except `{{regex}}` parts.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from xlc.hlo.ir import HloModule
from xlc.hlo.shape import Shape

_DIRECTIVE = re.compile(r"^\s*(CHECK(?:-NEXT|-NOT)?):\s?(.*)$")


def _compile(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"(\{\{.*?\}\})", pattern.strip())
    return re.compile("".join(p[2:-2] if p.startswith("{{") else re.escape(p) for p in parts))


def filecheck(text: str, checks: str) -> None:
    """Assert that `text` satisfies the CHECK lines in `checks` (AssertionError otherwise)."""
    lines = text.splitlines()
    directives = [(m.group(1), m.group(2)) for m in map(_DIRECTIVE.match, checks.splitlines())
                  if m]
    assert directives, "filecheck: no CHECK lines given"
    pos = -1  # index of the last matched line
    pending_not: list[str] = []

    def fail(msg: str) -> None:
        numbered = "\n".join(f"{i:4d}| {ln}" for i, ln in enumerate(lines))
        raise AssertionError(f"filecheck: {msg}\n--- text ---\n{numbered}")

    def check_nots(upto: int) -> None:
        for pat in pending_not:
            rx = _compile(pat)
            for i in range(pos + 1, upto):
                if rx.search(lines[i]):
                    fail(f"CHECK-NOT: {pat!r} matched line {i}")
        pending_not.clear()

    for kind, pat in directives:
        if kind == "CHECK-NOT":
            pending_not.append(pat)
            continue
        rx = _compile(pat)
        if kind == "CHECK-NEXT":
            nxt = pos + 1
            if nxt >= len(lines) or not rx.search(lines[nxt]):
                fail(f"CHECK-NEXT: {pat!r} does not match line {nxt}")
            check_nots(nxt)
            pos = nxt
            continue
        found = next((i for i in range(pos + 1, len(lines)) if rx.search(lines[i])), None)
        if found is None:
            fail(f"CHECK: {pat!r} not found after line {pos}")
        check_nots(found)
        pos = found
    check_nots(len(lines))


# ---- running passes on text -------------------------------------------------------------------

def parse(text: str) -> HloModule:
    """Parse HLO text (verifying when the verifier exists)."""
    from xlc.hlo.parser import parse_module

    return parse_module(text, verify=True)


def run_passes(text: str, passes: Sequence[object]) -> tuple[HloModule, HloModule, bool]:
    """Parse `text` twice; run `passes` as a pipeline (verifier on) on one copy.
    Returns (before, after, changed)."""
    from xlc.options import CompileOptions
    from xlc.passes.pipeline import Pipeline

    before = parse(text)
    after = parse(text)
    changed = Pipeline("test", list(passes)).run(after, CompileOptions(verify=True))  # type: ignore[arg-type]
    return before, after, changed


def printed(module: HloModule) -> str:
    from xlc.hlo.printer import print_module

    return print_module(module)


def random_args(module: HloModule, seed: int = 0) -> list[np.ndarray]:
    """Random arguments for the entry parameters (ints in [-5, 5], floats normal, bools)."""
    rng = np.random.default_rng(seed)
    assert module.entry is not None
    return [_random_array(p.shape, rng) for p in module.entry.parameters]


def _random_array(shape: Shape, rng: np.random.Generator) -> np.ndarray:
    assert shape.element_type is not None
    et = shape.element_type
    if et.is_float:
        return rng.standard_normal(shape.dims).astype(shape.dtype)
    if et.is_integer:
        lo = 0 if et.is_unsigned_int else -5
        return rng.integers(lo, 6, size=shape.dims).astype(shape.dtype)
    return (rng.random(shape.dims) < 0.5).astype(shape.dtype)


def flatten(value: object) -> list[np.ndarray]:
    """Evaluator results (arrays or nested tuples) as a flat list of arrays."""
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in flatten(v)]
    return [np.asarray(value)]


def assert_same_numerics(before: HloModule, after: HloModule, args: Sequence[np.ndarray] | None
                         = None, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Evaluate both modules on the same arguments and compare the flattened results."""
    from xlc.hlo.evaluator import evaluate

    args = list(args) if args is not None else random_args(before)
    with np.errstate(all="ignore"):
        want = flatten(evaluate(before, args))
        got = flatten(evaluate(after, args))
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert w.shape == g.shape and w.dtype == g.dtype, (w.shape, w.dtype, g.shape, g.dtype)
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g.astype(np.float64) if w.dtype.kind == "f" else g,
                                       w.astype(np.float64) if w.dtype.kind == "f" else w,
                                       rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)
