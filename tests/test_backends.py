"""Backend conformance: every registered backend compiles one corpus case, packs it into an
`.xlc`, unpacks and runs it and matches the evaluator; `get_backend`'s error; a third-party
backend registered through `xlc.backends.register_backend`."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlc
from tests.conftest import requires_corpus
from xlc.api import load_bytes
from xlc.backends import Backend, backend_names, get_backend, register_backend, unregister_backend
from xlc.hlo.evaluator import evaluate
from xlc.hlo.parser import parse_module
from xlc.interpreter import InterpreterBackend, flatten_value

CASE = "mlp2"  # a dot, a reduce, elementwise ops and a tuple result: small, every backend runs it

ADD_HLO = """HloModule add_twice
ENTRY e {
  p = f32[4] parameter(0)
  ROOT a = f32[4] add(p, p)
}
"""


def _flat(out: Any) -> list[np.ndarray]:
    return [np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else [out])]


def _reference(text: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    module = parse_module(text)
    assert module.entry is not None and module.entry.root is not None
    return flatten_value(evaluate(module, list(inputs)), module.entry.root.shape)


def _runs(compiled: Any, inputs: list[np.ndarray]) -> list[np.ndarray] | None:
    """The outputs, or None where the backend cannot run on this machine (a GPU backend
    without a device)."""
    try:
        return _flat(compiled(*[np.array(x) for x in inputs]))
    except xlc.XlcError as e:
        if str(e).startswith("no CUDA device available"):
            return None
        raise


@requires_corpus
@pytest.mark.parametrize("name", backend_names())
def test_every_backend_compiles_packs_unpacks_and_runs_a_corpus_case(name: str) -> None:
    from corpus import load_case  # type: ignore[import-not-found]

    backend = get_backend(name)
    assert isinstance(backend, Backend) and backend.name == name and backend.alignment > 0
    case = load_case(CASE)
    want = _reference(case.module_text, case.inputs)
    compiled = xlc.compile(case.module_text, backend=name)
    assert compiled.backend == name and compiled.memory_stats()["output_bytes"] > 0
    loaded = load_bytes(compiled.archive_bytes(), f"{CASE}.xlc")
    assert loaded.manifest.backend == name and loaded.as_text() == compiled.as_text()
    for exe in (compiled, loaded):
        got = _runs(exe, case.inputs)
        if got is None:  # compiled and packed; nothing runs it here
            continue
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol)


def test_get_backend_names_the_known_backends() -> None:
    with pytest.raises(xlc.ArgumentError) as e:
        get_backend("tpu")
    assert str(e.value) == "unknown backend 'tpu' (known: cpu, gpu, interpreter)"
    with pytest.raises(xlc.ArgumentError, match=r"^unknown backend 'tpu' \(known: "):
        xlc.compile(ADD_HLO, backend="tpu")
    with pytest.raises(xlc.ArgumentError, match=r"names are letters"):
        register_backend("a b", InterpreterBackend)


class ToyBackend(InterpreterBackend):
    """A third-party backend: the interpreter under another name, counting its compiles."""

    name = "toy"

    def __init__(self) -> None:
        self.compiles = 0

    def compile(self, module: Any, options: Any) -> Any:
        self.compiles += 1
        return super().compile(module, options)


@pytest.fixture
def toy() -> Any:
    register_backend("toy", ToyBackend)
    try:
        yield get_backend("toy")
    finally:
        unregister_backend("toy")


def test_a_registered_backend_compiles_jits_serializes_and_loads(toy: Any) -> None:
    x = np.arange(4, dtype=np.float32)
    assert "toy" in backend_names()
    compiled = xlc.compile(ADD_HLO, backend="toy")
    np.testing.assert_array_equal(compiled(x), x + x)
    assert compiled.backend == "toy" and toy.compiles == 1

    f = xlc.jit(lambda a: a * 3 + 1, backend="toy")
    np.testing.assert_array_equal(f(x), x * 3 + 1)
    assert toy.compiles == 2 and f.lower(x).compile().backend == "toy"

    loaded = load_bytes(compiled.archive_bytes(), "toy.xlc")
    assert loaded.manifest.backend == "toy"
    np.testing.assert_array_equal(loaded(x), x + x)

    opts = xlc.CompileOptions(backend="toy")
    assert xlc.compile(ADD_HLO, options=opts).backend == "toy"


def test_a_file_for_an_unregistered_backend_is_an_artifact_error(toy: Any) -> None:
    data = xlc.compile(ADD_HLO, backend="toy").archive_bytes()
    unregister_backend("toy")
    with pytest.raises(xlc.ArtifactError, match=r"^toy.xlc: this xlc cannot load 'toy' "
                                                r"executables$"):
        load_bytes(data, "toy.xlc")
