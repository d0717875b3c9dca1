"""Every public corpus case (`module.hlo`) compiled on CPU matches XLA's outputs; benchmark
cases match their `output_summary`."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import corpus_cases, requires_corpus
from xlc.backend_cpu import compile_cpu
from xlc.hlo.parser import parse_module

SMALL = corpus_cases(include_benchmarks=False)
BENCH = [n for n in corpus_cases() if n not in SMALL]


@requires_corpus
@pytest.mark.parametrize("name", SMALL)
def test_corpus_case_matches_xla(name: str) -> None:
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    exe = compile_cpu(parse_module(case.module_text))
    outs = exe.run(case.inputs)
    assert len(outs) == len(case.outputs)
    for got, want in zip(outs, case.outputs):
        assert got.shape == want.shape and got.dtype == want.dtype
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol)
        else:
            np.testing.assert_array_equal(got, want)


@requires_corpus
@pytest.mark.parametrize("name", BENCH)
def test_benchmark_case_matches_summary(name: str) -> None:
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    exe = compile_cpu(parse_module(case.module_text))
    outs = exe.run(case.inputs)
    for got, summary in zip(outs, case.meta["output_summary"]):
        g = got.astype(np.float64)
        np.testing.assert_allclose(g.sum(), summary["sum"], rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(g.min(), summary["min"], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(g.max(), summary["max"], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(g.reshape(-1)[:8], summary["first8"], rtol=1e-4, atol=1e-6)
