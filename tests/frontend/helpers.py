"""Shared helpers for the frontend tests: run a function under xlc.jit and compare to numpy."""
from __future__ import annotations

from typing import Any

import numpy as np

import xlc
from xlc.options import default_options

TOL = {np.dtype(np.float32): (1e-5, 1e-5), np.dtype(np.float64): (1e-12, 1e-12),
       np.dtype(np.float16): (2e-3, 2e-3)}


def jit_run(fn: Any, *args: Any, cross_tol: tuple[float, float] | None = None,
            **jit_kw: Any) -> Any:
    """Run `fn` under a fresh xlc.jit on the interpreter backend (the reference evaluator) and
    return its result; unless a backend is given, also run it on the default backend (the CPU)
    and check that both agree: per-dtype tolerance, or `cross_tol` = (rtol, atol) for
    ill-conditioned results where the backends' summation orders differ visibly; NaNs must be
    in the same places."""
    if "backend" in jit_kw:
        return xlc.jit(fn, **jit_kw)(*args)
    got = xlc.jit(fn, backend="interpreter", **jit_kw)(*args)
    default = default_options().backend
    if default != "interpreter":
        rtol, atol = cross_tol if cross_tol is not None else (None, None)
        assert_close(xlc.jit(fn, backend=default, **jit_kw)(*args), got, rtol, atol)
    return got


def assert_close(got: Any, want: Any, rtol: float | None = None, atol: float | None = None,
                 check_dtype: bool = True) -> None:
    """Compare arrays (or pytrees of arrays) with a per-dtype tolerance."""
    if want is None:
        assert got is None, got
        return
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want)
        for k in want:
            assert_close(got[k], want[k], rtol, atol, check_dtype)
        return
    if isinstance(want, (tuple, list)):
        assert isinstance(got, type(want)) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            assert_close(g, w, rtol, atol, check_dtype)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if check_dtype:
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
    r, a = TOL.get(want.dtype, (0, 0))
    np.testing.assert_allclose(got.astype(np.float64) if got.dtype.kind == "f" else got,
                               want, rtol=rtol if rtol is not None else r,
                               atol=atol if atol is not None else a)
