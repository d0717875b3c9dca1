"""Host callbacks from traced programs: `xlc.pure_callback` and `xlc.debug.print` /
`xlc.debug.callback`, custom-calls whose target is a Python function registered for this
process (`xlc.hlo.ffi_registry`, kind "python"). The CPU backend runs them as host calls,
the interpreter directly; a program holding one cannot be serialized (a Python function
cannot be saved), and the GPU backend refuses them."""
from __future__ import annotations

import itertools
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from xlc.frontend.ffi_call import custom_call, result_shapes
from xlc.frontend.tracer import Tracer
from xlc.hlo import ffi_registry
from xlc.hlo.ffi_registry import FfiTarget

_lock = threading.Lock()
_names: dict[int, str] = {}
_counter = itertools.count()


def _target(fn: Callable[..., Any], kind: str) -> str:
    """The process-local target name standing for `fn` (registered once per function)."""
    with _lock:
        name = _names.get(id(fn))
        if name is None or ffi_registry.lookup(name, "cpu") is None:
            name = f"xlc.{kind}.{next(_counter)}"
            _names[id(fn)] = name
            ffi_registry.add(FfiTarget(name, "cpu", "python", python=fn,
                                       fingerprint=ffi_registry.fingerprint(
                                           "python", "", f"{kind}:{name}".encode())))
        return name


def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any,
                  **kwargs: Any) -> Any:
    """Call `callback` (numpy arrays in, arrays shaped like `result_shape_dtypes` out) from a
    traced program, as jax.pure_callback does; `kwargs` are passed to it as Python values."""
    shapes, _many = result_shapes(result_shape_dtypes, "pure_callback")
    many = isinstance(result_shape_dtypes, (tuple, list))

    def run(*arrays: np.ndarray) -> Any:
        out = callback(*arrays, **kwargs)
        outs = list(out) if many else [out]
        return tuple(np.asarray(o, dtype=s.element_type.dtype)  # type: ignore[union-attr]
                     for o, s in zip(outs, shapes)) if many else \
            np.asarray(outs[0], dtype=shapes[0].element_type.dtype)  # type: ignore[union-attr]

    run.__wrapped__ = callback  # type: ignore[attr-defined]
    return custom_call(_target(run, "pure_callback"), result_shape_dtypes, args)


def debug_callback(callback: Callable[..., Any], *args: Any) -> None:
    """Call `callback(*arrays)` for its side effect when the program runs (no result)."""
    def run(*arrays: np.ndarray) -> tuple[()]:
        callback(*arrays)
        return ()

    custom_call(_target(run, "debug_callback"), (), args, has_side_effect=True)


def debug_print(fmt: str, *args: Any, **kwargs: Any) -> None:
    """Print `fmt.format(*args, **kwargs)` with the runtime values of traced arrays (as
    jax.debug.print), to standard output, when the program runs."""
    names = list(kwargs)

    def run(*arrays: np.ndarray) -> tuple[()]:
        pos = arrays[:len(args)]
        kw = dict(zip(names, arrays[len(args):]))
        sys.stdout.write(fmt.format(*pos, **kw) + "\n")
        sys.stdout.flush()
        return ()

    values: list[Tracer | Any] = [*args, *kwargs.values()]
    custom_call(_target(run, "debug_print"), (), values, has_side_effect=True)
