"""`explain_cache_misses` (docs/profiling.md): why a jitted function compiled again, logged on
`xlc.jit` at WARNING, with exact wording."""
from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest
import xlc.numpy as xnp

from xlc.api import Jitted
from xlc.options import default_options


def f(x: Any, n: int, scale: Any = 1.0) -> Any:
    return x * n * scale


def g(p: dict) -> Any:
    return p["a"] + xnp.sum(p["b"])


LINE = f.__code__.co_firstlineno  # messages name where the function was defined


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    out = [r.getMessage() for r in caplog.records if r.name == "xlc.jit"]
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.name == "xlc.jit")
    caplog.clear()
    return out


@pytest.fixture()
def explained() -> Any:
    return default_options().replace(explain_cache_misses=True)


def test_each_miss_names_the_argument_that_changed(explained: Any,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="xlc.jit")
    j = Jitted(f, static_argnums=(1,), options=explained)
    head = f"jit(f) defined at test_cache_miss.py:{LINE}: cache miss"
    x8 = np.ones(8, np.float32)
    np.testing.assert_array_equal(j(x8, 2), x8 * 2)
    j(x8, 2)  # a hit: nothing logged
    assert _messages(caplog) == [
        f"{head} #1 (first call): argument 0 ('x') f32[8], static argument 1 ('n') = 2"]
    j(np.ones(16, np.float32), 2)
    j(np.ones(16, np.float32), 3)
    j(np.ones(16, np.float64), 3)
    j(np.ones(16, np.float32), 3, scale=2.0)
    j(np.ones(16, np.float32), 3, scale=np.float32(2.0))
    assert _messages(caplog) == [
        f"{head} #2 (1 compiled version): argument 0 ('x') changed shape: f32[8] -> f32[16]",
        f"{head} #3 (2 compiled versions): static argument 1 ('n') changed value 2 -> 3",
        f"{head} #4 (3 compiled versions): argument 0 ('x') changed dtype: f32[16] -> f64[16]",
        f"{head} #5 (4 compiled versions): keyword argument 'scale' is new (f32[] weakly "
        "typed)",
        f"{head} #6 (5 compiled versions): keyword argument 'scale' changed weak type: f32[] "
        "weakly typed -> f32[] strongly typed",
    ]
    j.clear_cache()
    j(x8, 2)
    assert _messages(caplog) == [f"{head} #7: this signature was compiled before; the cache "
                                 "was cleared (clear_cache) since"]
    assert j.cache_info() == {"hits": 1, "misses": 7, "size": 1}


def test_pytree_leaves_are_named_by_their_path(explained: Any,
                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="xlc.jit")
    j = Jitted(g, options=explained)
    a, b = np.ones(3, np.float32), np.ones(5, np.float32)
    np.testing.assert_array_equal(j({"a": a, "b": b}), a + 5)
    j({"a": a, "b": b.reshape(5, 1)})
    j({"a": a.astype(np.int32), "b": np.ones(2, np.int32), "c": 1})
    head = f"jit(g) defined at test_cache_miss.py:{g.__code__.co_firstlineno}: cache miss"
    assert _messages(caplog) == [
        f"{head} #1 (first call): argument 0 ('p')['a'] f32[3], argument 0 ('p')['b'] f32[5]",
        f"{head} #2 (1 compiled version): argument 0 ('p')['b'] changed shape: f32[5] -> "
        "f32[5,1]",
        f"{head} #3 (2 compiled versions): argument 0 ('p')['a'] changed dtype: f32[3] -> "
        "s32[3]; argument 0 ('p')['b'] changed dtype and shape: f32[5,1] -> s32[2]; "
        "argument 0 ('p')['c'] is new (s32[] weakly typed); argument 0 changed pytree "
        "structure {'a': *, 'b': *} -> {'a': *, 'b': *, 'c': *}",
    ]


def test_nothing_is_logged_without_the_flag(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="xlc.jit")
    j = Jitted(f, static_argnums=(1,), options=default_options())
    j(np.ones(4, np.float32), 1)
    j(np.ones(5, np.float32), 1)
    assert _messages(caplog) == []
