"""`jax.lax`'s one-axis dynamic slicing helpers (`dynamic_slice_in_dim`, `dynamic_index_in_dim`,
`dynamic_update_slice_in_dim`, `dynamic_update_index_in_dim`), re-exported by `xlc.lax`.

They build on `xlc.lax.dynamic_slice` / `dynamic_update_slice` and share their semantics: a
negative start counts from the end of the axis (unless `allow_negative_indices=False`), then the
start is clamped so the slice stays in bounds.
"""
from __future__ import annotations

from typing import Any

from xlc.frontend import lax
from xlc.frontend.eager import eager_ok
from xlc.frontend.tracer import Tracer, as_tracer, trace_error


def _axis(x: Tracer, axis: int, what: str) -> int:
    if not -x.ndim <= axis < x.ndim:
        raise trace_error(f"{what}: axis {axis} is out of range for {x.aval_text}")
    return axis % x.ndim


@eager_ok
def dynamic_slice_in_dim(operand: Any, start_index: Any, slice_size: int, axis: int = 0, *,
                         allow_negative_indices: bool = True) -> Tracer:
    """`slice_size` elements of `operand` from `start_index` along `axis` (other axes whole)."""
    x = as_tracer(operand)
    ax = _axis(x, axis, "dynamic_slice_in_dim")
    starts = [0] * x.ndim
    starts[ax] = start_index
    sizes = list(x.shape)
    sizes[ax] = int(slice_size)
    return lax.dynamic_slice(x, starts, sizes, allow_negative_indices=allow_negative_indices)


@eager_ok
def dynamic_index_in_dim(operand: Any, index: Any, axis: int = 0, keepdims: bool = True, *,
                         allow_negative_indices: bool = True) -> Tracer:
    """Element `index` of `operand` along `axis`; the axis is kept with size 1 if `keepdims`."""
    x = as_tracer(operand)
    ax = _axis(x, axis, "dynamic_index_in_dim")
    y = dynamic_slice_in_dim(x, index, 1, ax, allow_negative_indices=allow_negative_indices)
    return y if keepdims else lax.reshape(y, x.shape[:ax] + x.shape[ax + 1:])


@eager_ok
def dynamic_update_slice_in_dim(operand: Any, update: Any, start_index: Any, axis: int, *,
                                allow_negative_indices: bool = True) -> Tracer:
    """`operand` with `update` written from `start_index` along `axis` (0 on other axes)."""
    x = as_tracer(operand)
    ax = _axis(x, axis, "dynamic_update_slice_in_dim")
    starts: list[Any] = [0] * x.ndim
    starts[ax] = start_index
    return lax.dynamic_update_slice(x, update, starts,
                                    allow_negative_indices=allow_negative_indices)


@eager_ok
def dynamic_update_index_in_dim(operand: Any, update: Any, index: Any, axis: int, *,
                                allow_negative_indices: bool = True) -> Tracer:
    """`operand` with position `index` along `axis` replaced by `update` (which may lack that
    axis)."""
    x = as_tracer(operand)
    ax = _axis(x, axis, "dynamic_update_index_in_dim")
    u = as_tracer(update, x.ptype) if not isinstance(update, Tracer) else update
    if u.ndim == x.ndim - 1:
        u = lax.reshape(u, u.shape[:ax] + (1,) + u.shape[ax:])
    return dynamic_update_slice_in_dim(x, u, index, ax,
                                       allow_negative_indices=allow_negative_indices)
