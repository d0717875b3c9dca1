"""The evaluator against XLA on the real-world corpus: every case's `module.hlo` and
`optimized.hlo` must reproduce XLA's outputs (benchmark cases: XLA's output summaries)."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.conftest import corpus_cases, requires_corpus
from xlc.errors import EvaluationError
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.ir import HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module

pytestmark = requires_corpus


@functools.cache
def _case(name: str):  # type: ignore[no-untyped-def]
    from corpus import load_case  # type: ignore[import-not-found]

    return load_case(name)


def _uses_elided_constant(module: HloModule) -> bool:
    return any(inst.opcode is Opcode.CONSTANT and inst.attrs["literal"].elided
               for inst in module.instructions())


def _check_outputs(case, results: list[np.ndarray]) -> None:  # type: ignore[no-untyped-def]
    assert len(results) == len(case.outputs)
    for i, (got, want) in enumerate(zip(results, case.outputs)):
        assert got.shape == want.shape, f"output {i}: shape {got.shape} != {want.shape}"
        assert got.dtype == want.dtype, f"output {i}: dtype {got.dtype} != {want.dtype}"
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=case.rtol, atol=case.atol, err_msg=f"output {i}")


def _check_summary(case, results: list[np.ndarray]) -> None:  # type: ignore[no-untyped-def]
    summaries = case.meta["output_summary"]
    assert len(results) == len(summaries)
    for i, (got, want) in enumerate(zip(results, summaries)):
        g = got.astype(np.float64)
        scale = max(float(np.abs(g).max()), 1e-30)
        msg = f"output {i}"
        # sum/mean: relative to the magnitude of the data (cancellation makes sums small).
        np.testing.assert_allclose(g.sum(), want["sum"], rtol=1e-4,
                                   atol=1e-6 * scale * g.size, err_msg=msg)
        np.testing.assert_allclose(g.mean(), want["mean"], rtol=1e-4, atol=1e-6 * scale,
                                   err_msg=msg)
        np.testing.assert_allclose(g.std(), want["std"], rtol=1e-4, err_msg=msg)
        np.testing.assert_allclose(g.min(), want["min"], rtol=1e-4, atol=1e-6 * scale,
                                   err_msg=msg)
        np.testing.assert_allclose(g.max(), want["max"], rtol=1e-4, atol=1e-6 * scale,
                                   err_msg=msg)
        np.testing.assert_allclose(g.ravel()[:8], want["first8"], rtol=1e-4,
                                   atol=1e-6 * scale, err_msg=msg)


def _run_and_check(name: str, text: str) -> None:
    case = _case(name)
    module = parse_module(text)
    if _uses_elided_constant(module):
        with pytest.raises(EvaluationError, match=r"is elided \(\{\.\.\.\}\) in the HLO text and "
                                                  r"cannot be evaluated; dump it with "
                                                  r"--xla_dump_large_constants"):
            evaluate(module, case.inputs)
        return
    results = flatten_result(evaluate(module, case.inputs))
    if case.outputs is not None:
        _check_outputs(case, results)
    else:
        _check_summary(case, results)


@pytest.mark.parametrize("name", corpus_cases())
def test_module_hlo_matches_xla(name: str) -> None:
    case = _case(name)
    assert not _uses_elided_constant(parse_module(case.module_text))
    _run_and_check(name, case.module_text)


@pytest.mark.parametrize("name", corpus_cases())
def test_optimized_hlo_matches_xla(name: str) -> None:
    _run_and_check(name, _case(name).optimized_text)


def test_corpus_has_benchmarks_and_elided_constants() -> None:
    names = corpus_cases()
    assert len([n for n in names if _case(n).meta.get("benchmark")]) == 4
    assert any(_uses_elided_constant(parse_module(_case(n).optimized_text)) for n in names)
