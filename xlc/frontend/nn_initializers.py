"""`xlc.nn.initializers`: jax.nn.initializers on `xlc.random`, with jax's recipes (fans from the
in/out/batch axes, the 0.8796 truncation correction, uniform on [-1, 1) scaled by sqrt(3 var)),
so that the same key gives jax's weights: bit for bit for the uniform-based ones, to a few ulps
for the normal-based ones (erf_inv).

Each factory returns `init(key, shape, dtype=None)`; dtype None means float32.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlc.frontend import numpy_api as xnp
from xlc.frontend import random as xr
from xlc.frontend.dtypes import to_ptype
from xlc.frontend.tracer import Tracer, trace_error

__all__ = ["Initializer", "zeros", "ones", "constant", "uniform", "normal", "truncated_normal",
           "variance_scaling", "glorot_uniform", "glorot_normal", "xavier_uniform",
           "xavier_normal", "lecun_uniform", "lecun_normal", "he_uniform", "he_normal",
           "kaiming_uniform", "kaiming_normal", "orthogonal", "delta_orthogonal"]

Initializer = Callable[..., Tracer]
Axes = int | Sequence[int]


def _dtype(dtype: Any) -> Any:
    return np.float32 if dtype is None else dtype


def _const(value: Any, dtype: Any) -> Tracer:
    """jnp.array(value, dtype): the value rounded once to `dtype`."""
    return xnp.asarray(np.asarray(value, to_ptype(dtype).dtype))


def zeros(key: Any, shape: Sequence[int], dtype: Any = None) -> Tracer:
    """All zeros (the key is unused)."""
    del key
    return xnp.zeros(tuple(shape), _dtype(dtype))


def ones(key: Any, shape: Sequence[int], dtype: Any = None) -> Tracer:
    """All ones (the key is unused)."""
    del key
    return xnp.ones(tuple(shape), _dtype(dtype))


def constant(value: Any, dtype: Any = None) -> Initializer:
    """An initializer filling with `value`."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Tracer:
        del key
        return xnp.full(tuple(shape), value, _dtype(dtype))
    return init


def uniform(scale: Any = 1e-2, dtype: Any = None) -> Initializer:
    """An initializer drawing uniform(key) in [0, 1) * scale."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Tracer:
        dt = _dtype(dtype)
        return xnp.multiply(xr.uniform(key, shape, dt), _const(scale, dt))
    return init


def normal(stddev: Any = 1e-2, dtype: Any = None) -> Initializer:
    """An initializer drawing normal(key) * stddev."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Tracer:
        dt = _dtype(dtype)
        return _scaled_normal(key, shape, dt, np.asarray(stddev, to_ptype(dt).dtype))
    return init


def _scaled_normal(key: Any, shape: Sequence[int], dtype: Any, scale: np.ndarray) -> Tracer:
    """normal(key) * scale as XLA evaluates jax's `sqrt(2) * erf_inv(u) * scale`: its
    simplifier folds the two constants into one, erf_inv(u) * (sqrt(2) * scale)."""
    ndt = to_ptype(dtype).dtype
    lo, hi = xr._normal_bounds(ndt)
    u = xr.uniform(key, shape, ndt, lo, hi)
    folded = (np.asarray(np.sqrt(2), ndt) * np.asarray(scale, ndt)).astype(ndt)
    return xnp.multiply(xr.erf_inv(u), xnp.asarray(folded))


def truncated_normal(stddev: Any = 1e-2, dtype: Any = None, lower: Any = -2.0,
                     upper: Any = 2.0) -> Initializer:
    """An initializer drawing truncated_normal(key, lower, upper) * stddev (the standard
    deviation before truncation)."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Tracer:
        dt = _dtype(dtype)
        return xnp.multiply(xr.truncated_normal(key, lower, upper, shape, dt),
                            _const(stddev, dt))
    return init


def _size(shape: Sequence[int], axes: Axes) -> int:
    return shape[axes] if isinstance(axes, int) else math.prod(shape[i] for i in axes)


def _fans(shape: Sequence[int], in_axis: Axes, out_axis: Axes,
          batch_axis: Axes) -> tuple[float, float]:
    """(fan_in, fan_out): the in/out axes' sizes times the receptive field (the remaining
    non-batch axes), as jax computes them."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise trace_error(f"initializers: can't compute input and output sizes of a "
                          f"{len(shape)}-dimensional weights tensor with the default in_axis")
    in_size, out_size = _size(shape, in_axis), _size(shape, out_axis)
    receptive = math.prod(shape) / in_size / out_size / _size(shape, batch_axis)
    return in_size * receptive, out_size * receptive


def variance_scaling(scale: Any, mode: str, distribution: str, in_axis: Axes = -2,
                     out_axis: Axes = -1, batch_axis: Axes = (),
                     dtype: Any = None) -> Initializer:
    """An initializer with variance scale / n, n the fan in, fan out, their average
    ('fan_avg') or geometric mean ('fan_geo_avg'); `distribution` 'truncated_normal' (within
    2 stddev, rescaled to keep the variance), 'normal' or 'uniform'."""
    if mode not in ("fan_in", "fan_out", "fan_avg", "fan_geo_avg"):
        raise trace_error(f"invalid mode for variance scaling initializer: {mode}")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise trace_error(f"invalid distribution for variance scaling initializer: "
                          f"{distribution}")

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Tracer:
        dt = _dtype(dtype)
        shape = tuple(int(d) for d in shape)
        fan_in, fan_out = _fans(shape, in_axis, out_axis, batch_axis)
        denom = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
                 "fan_geo_avg": (fan_in * fan_out) ** 0.5}[mode]
        # the scale factors are constants: computed here in `dt`, rounding after each step
        # as XLA's constant folding does (xlc's simplifier would turn a division by a
        # constant into a multiplication by its reciprocal, one rounding off)
        ndt = to_ptype(dt).dtype
        variance = np.asarray(scale / denom, ndt)
        if distribution == "truncated_normal":
            stddev = np.sqrt(variance) / np.asarray(0.87962566103423978, ndt)
            return xnp.multiply(xr.truncated_normal(key, -2, 2, shape, dt),
                                xnp.asarray(stddev.astype(ndt)))
        if distribution == "normal":
            return _scaled_normal(key, shape, dt, np.sqrt(variance))
        return xnp.multiply(xr.uniform(key, shape, dt, -1),
                            xnp.asarray(np.sqrt((np.asarray(3, ndt) * variance).astype(ndt))))
    return init


def glorot_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                   dtype: Any = None) -> Initializer:
    """Glorot/Xavier uniform: variance_scaling(1, 'fan_avg', 'uniform')."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, batch_axis, dtype)


def glorot_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                  dtype: Any = None) -> Initializer:
    """Glorot/Xavier normal: variance_scaling(1, 'fan_avg', 'truncated_normal')."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


def lecun_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                  dtype: Any = None) -> Initializer:
    """LeCun uniform: variance_scaling(1, 'fan_in', 'uniform')."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def lecun_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                 dtype: Any = None) -> Initializer:
    """LeCun normal: variance_scaling(1, 'fan_in', 'truncated_normal')."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


def he_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
               dtype: Any = None) -> Initializer:
    """He/Kaiming uniform: variance_scaling(2, 'fan_in', 'uniform')."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def he_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
              dtype: Any = None) -> Initializer:
    """He/Kaiming normal: variance_scaling(2, 'fan_in', 'truncated_normal')."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


xavier_uniform = glorot_uniform
xavier_normal = glorot_normal
kaiming_uniform = he_uniform
kaiming_normal = he_normal


def orthogonal(scale: Any = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """An initializer of (scaled) orthogonal matrices: the other axes flattened into rows,
    `column_axis` the columns."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Tracer:
        dt = _dtype(dtype)
        shape = tuple(int(d) for d in shape)
        if len(shape) < 2:
            raise trace_error("orthogonal initializer requires at least a 2D shape")
        if 0 in shape:
            return xnp.zeros(shape, dt)
        n_cols = shape[column_axis]
        q = xr.orthogonal(key, math.prod(shape) // n_cols, (), dt, n_cols)
        rest = tuple(np.delete(np.array(shape), column_axis).tolist())
        q = xnp.moveaxis(xnp.reshape(q, (*rest, n_cols)), -1, column_axis)
        return xnp.multiply(_const(scale, dt), q)
    return init


def delta_orthogonal(scale: Any = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """An initializer for 3-5D convolution kernels: zeros with an orthogonal matrix at the
    spatial centre."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Tracer:
        dt = _dtype(dtype)
        shape = tuple(int(d) for d in shape)
        if len(shape) not in (3, 4, 5):
            raise trace_error("Delta orthogonal initializer requires a 3D, 4D or 5D shape.")
        if shape[-1] < shape[-2]:
            raise trace_error("`fan_in` must be less or equal than `fan_out`. ")
        mat = orthogonal(scale, column_axis, dt)(key, shape[-2:])
        centre = tuple((d - 1) // 2 for d in shape[:-2])
        return xnp.zeros(shape, dt).at[centre].set(mat)
    return init
