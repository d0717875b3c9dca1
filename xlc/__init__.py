"""xlc: an XLA-style ahead-of-time tensor compiler.

Public API: `jit`, `ShapeDtype`, `compile`, `load`, the `numpy` / `lax` / `nn` namespaces
(also importable as `import xlc.numpy as xnp`), `pure_callback` and `debug` (host callbacks),
`ffi` (your own custom-call targets, `import xlc.ffi`), `CompileOptions`, the error classes
and `DeviceArray` (GPU memory; imported on first use).
"""
from __future__ import annotations

import sys as _sys

from xlc import errors
from xlc.api import compile, jit, load
from xlc.errors import (
    ArgumentError,
    ArtifactError,
    CustomCallError,
    EvaluationError,
    LoweringError,
    MemoryLimitError,
    ParseError,
    ShapeError,
    TraceError,
    UnsupportedOpError,
    VerificationError,
    XlcError,
)
from xlc.frontend import debug, dtypes, lax, nn, random, tree_util
from xlc.frontend import numpy_api as numpy
from xlc.frontend.arguments import ShapeDtype
from xlc.frontend.autodiff import custom_vjp, grad, stop_gradient, value_and_grad, vjp
from xlc.frontend.autodiff_forward import custom_jvp, jvp, linearize
from xlc.frontend.callbacks import pure_callback
from xlc.frontend.vmap import vmap
from xlc.options import CompileOptions

__version__ = "0.1.0"

# `import xlc.numpy as xnp` (and xlc.lax / xlc.nn) resolve to the frontend modules.
_sys.modules[__name__ + ".numpy"] = numpy
_sys.modules[__name__ + ".lax"] = lax
_sys.modules[__name__ + ".nn"] = nn
_sys.modules[__name__ + ".debug"] = debug
_sys.modules[__name__ + ".random"] = random
_sys.modules[__name__ + ".tree_util"] = tree_util
_sys.modules[__name__ + ".dtypes"] = dtypes


def block_until_ready(x: object) -> object:
    """Wait until every array of pytree `x` is computed (device arrays of asynchronous
    calls); returns `x`. Host arrays are ready already."""
    for leaf in tree_util.tree_leaves(x):
        wait = getattr(leaf, "block_until_ready", None)
        if callable(wait):
            wait()
    return x



def __getattr__(name: str) -> object:
    """`xlc.DeviceArray` (GPU memory, see docs/gpu.md) is imported on first use, so that
    `import xlc` does not load the GPU backend."""
    if name == "DeviceArray":
        from xlc.backend_gpu.device_array import DeviceArray

        return DeviceArray
    raise AttributeError(f"module 'xlc' has no attribute {name!r}")


__all__ = [
    "jit", "ShapeDtype", "compile", "load", "numpy", "lax", "nn", "CompileOptions", "errors",
    "DeviceArray", "pure_callback", "debug", "random", "tree_util", "dtypes", "block_until_ready",
    "grad", "value_and_grad", "vjp", "jvp", "linearize", "stop_gradient", "custom_vjp",
    "custom_jvp",
    "vmap",
    "XlcError", "ParseError", "VerificationError", "TraceError", "UnsupportedOpError",
    "LoweringError", "ArtifactError", "ArgumentError", "EvaluationError", "ShapeError",
    "CustomCallError", "MemoryLimitError",
    "__version__",
]
