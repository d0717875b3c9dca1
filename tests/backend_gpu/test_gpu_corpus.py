"""GPU tier (`-m gpu`; skipped without an NVIDIA GPU and cuda-python): every corpus case runs
on the GPU and matches XLA's outputs (benchmark cases: their output summary), with one and
with several streams, and with CUDA graph replay."""
from __future__ import annotations

import numpy as np
import pytest

from tests.backend_gpu.helpers import compiled_case
from tests.conftest import corpus_cases, requires_corpus
from xlc.errors import XlcError


def _gpu_available() -> bool:
    try:
        from xlc.backend_gpu.cuda import primary_context

        primary_context()
    except XlcError:
        return False
    return True


pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not _gpu_available(),
                                 reason="no CUDA device available (GPU + cuda-python needed)")]

SMALL = corpus_cases(include_benchmarks=False)
BENCH = [n for n in corpus_cases() if n not in SMALL]


def _check(outs: list[np.ndarray], case: object) -> None:
    assert len(outs) == len(case.outputs)  # type: ignore[attr-defined]
    for got, want in zip(outs, case.outputs):  # type: ignore[attr-defined]
        assert got.shape == want.shape and got.dtype == want.dtype
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol)  # type: ignore
        else:
            np.testing.assert_array_equal(got, want)


@requires_corpus
@pytest.mark.parametrize("streams", [1, 4])
@pytest.mark.parametrize("name", SMALL)
def test_corpus_case_on_gpu(name: str, streams: int) -> None:
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    exe = compiled_case(name, streams=streams)
    _check(exe.run(case.inputs), case)
    _check(exe.run(case.inputs), case)  # temp block reused across calls


@requires_corpus
@pytest.mark.parametrize("name", ["softmax", "mlp2", "elementwise_chain", "sort_topk"])
def test_corpus_case_with_cuda_graph(name: str) -> None:
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    exe = compiled_case(name)
    _check(exe.run(case.inputs, graph=True), case)
    _check(exe.run(case.inputs, graph=True), case)


@requires_corpus
@pytest.mark.parametrize("name", BENCH)
def test_benchmark_case_on_gpu(name: str) -> None:
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    outs = compiled_case(name).run(case.inputs)
    for got, summary in zip(outs, case.meta["output_summary"]):
        g = got.astype(np.float64)
        np.testing.assert_allclose(g.sum(), summary["sum"], rtol=1e-3, atol=1e-2)
        np.testing.assert_allclose(g.reshape(-1)[:8], summary["first8"], rtol=1e-4, atol=1e-5)


@requires_corpus
def test_results_can_stay_on_the_device() -> None:
    from corpus import load_case  # type: ignore[import-not-found]

    from xlc.backend_gpu.cuda import to_device

    case = load_case("softmax")
    exe = compiled_case("softmax")
    dev = exe.run_on_device([to_device(a) for a in case.inputs])
    _check([d.to_numpy() for d in dev], case)
    assert dev[0].__cuda_array_interface__["data"][0] == dev[0].ptr
