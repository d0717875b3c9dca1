"""Eager evaluation of `xlc.numpy` / `xlc.lax` / `xlc.nn` functions outside a trace.

Called with concrete inputs (numpy arrays, Python scalars) and no active trace, a decorated
function is traced on the spot (array leaves of its arguments become parameters, everything else
is static) and run on the reference evaluator (`xlc.hlo.evaluator`); the result is numpy
arrays in the function's output structure. Inside a trace the function is called directly.
This is slow (one trace per call) and meant for interactive use and tests.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

F = TypeVar("F", bound=Callable[..., Any])


def _is_array(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic))


def eager_ok(fn: F) -> F:
    """Decorator: run `fn` eagerly on the evaluator when called outside any trace."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from xlc.frontend.tracer import current_builder

        if current_builder() is not None:
            return fn(*args, **kwargs)
        return run_eagerly(fn, args, kwargs)

    wrapper.__wrapped_traced__ = fn  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def run_eagerly(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """Trace `fn(*args, **kwargs)` with the numpy-array leaves as parameters and evaluate."""
    from xlc.frontend import pytree
    from xlc.frontend.staging import Aval, trace_to_module
    from xlc.hlo.evaluator import evaluate
    from xlc.hlo.shape import PrimitiveType

    leaves, td = pytree.flatten((args, kwargs))
    arrays = [(i, np.asarray(x)) for i, x in enumerate(leaves) if _is_array(x)]
    avals = [Aval(PrimitiveType.from_dtype(a.dtype), a.shape) for _, a in arrays]
    positions = [i for i, _ in arrays]

    def staged(*params: Any) -> Any:
        full = list(leaves)
        for pos, p in zip(positions, params):
            full[pos] = p
        a, k = pytree.unflatten(td, full)
        return fn(*a, **k)

    traced = trace_to_module(staged, pytree.flatten(tuple(range(len(avals))))[1], avals,
                             getattr(fn, "__name__", "fn"))
    result = evaluate(traced.module, [a for _, a in arrays])
    outs = list(result) if traced.root_is_tuple else [result]
    return pytree.unflatten(traced.out_tree, [np.asarray(o) for o in outs])
