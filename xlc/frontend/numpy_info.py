"""`xlc.numpy.finfo` / `iinfo`: machine limits of xlc's float and integer dtypes (numpy's
objects; ml_dtypes' for bfloat16), accepting dtypes, names and traced or numpy arrays."""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["finfo", "iinfo"]


def _dtype(x: Any) -> np.dtype:
    if not isinstance(x, type) and hasattr(x, "dtype"):
        return np.dtype(x.dtype)
    if isinstance(x, str) and x == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(x)


def finfo(dtype: Any) -> Any:
    """Limits of a float dtype (eps, max, min, tiny, bits, nmant, ...)."""
    import ml_dtypes

    return ml_dtypes.finfo(_dtype(dtype))


def iinfo(dtype: Any) -> Any:
    """Limits of an integer dtype (min, max, bits)."""
    return np.iinfo(_dtype(dtype))
