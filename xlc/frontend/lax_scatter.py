"""`jax.lax`'s gather and scatter family with JAX's signatures, re-exported by `xlc.lax`:
`gather`, `scatter`, `scatter_add`, `scatter_sub`, `scatter_mul`, `scatter_min`,
`scatter_max`, `scatter_apply`, with `GatherDimensionNumbers`, `ScatterDimensionNumbers` and
`GatherScatterMode`.

`gather` and `scatter` take both signatures: JAX's (a `GatherDimensionNumbers` /
`ScatterDimensionNumbers` after the indices or updates) and xlc's XLA-style one (the dimension
numbers spelled out, `index_vector_dim` included; see `lax.py`), which the rest of xlc calls.

As in JAX, the index vector is the last dim of the indices. `mode` is JAX's: "fill" or "drop"
(FILL_OR_DROP: a gather yields `fill_value` for a slice that does not fit in the operand, NaN /
the lowest signed / the highest unsigned integer / True by default; a scatter skips such a
window, which is HLO `scatter`'s own behaviour), "clip" (indices are clamped so that every
window fits) or "promise_in_bounds" (HLO's behaviour: gather clamps). None means
FILL_OR_DROP for scatters and PROMISE_IN_BOUNDS for gathers, as in JAX.
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from xlc.frontend import lax as _lax
from xlc.frontend.eager import eager_ok
from xlc.frontend.staging import monoid_computation, trace_scalar_computation
from xlc.frontend.tracer import Tracer, as_tracer, emit, infer, trace_error
from xlc.hlo.opcodes import Opcode

__all__ = ["ScatterDimensionNumbers", "GatherDimensionNumbers", "GatherScatterMode", "gather",
           "scatter", "scatter_add", "scatter_sub", "scatter_mul", "scatter_min", "scatter_max",
           "scatter_apply"]


class ScatterDimensionNumbers(NamedTuple):
    """XLA's ScatterDimensionNumbers less index_vector_dim (always the last dim of the
    indices): which update dims are window dims, which operand dims the windows skip, where
    each index component points, and the batching dims of operand and indices."""

    update_window_dims: Sequence[int]
    inserted_window_dims: Sequence[int]
    scatter_dims_to_operand_dims: Sequence[int]
    operand_batching_dims: Sequence[int] = ()
    scatter_indices_batching_dims: Sequence[int] = ()


class GatherDimensionNumbers(NamedTuple):
    """XLA's GatherDimensionNumbers less index_vector_dim (the last dim of the indices)."""

    offset_dims: Sequence[int]
    collapsed_slice_dims: Sequence[int]
    start_index_map: Sequence[int]
    operand_batching_dims: Sequence[int] = ()
    start_indices_batching_dims: Sequence[int] = ()


class GatherScatterMode(enum.Enum):
    """How out-of-bounds indices are handled (JAX's enum)."""

    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()
    ONE_HOT = enum.auto()

    @staticmethod
    def from_any(s: str | GatherScatterMode | None) -> GatherScatterMode:
        """None, "fill" and "drop" -> FILL_OR_DROP; "clip"; "promise_in_bounds"."""
        if isinstance(s, GatherScatterMode):
            return s
        if s is None or s in ("fill", "drop"):
            return GatherScatterMode.FILL_OR_DROP
        if s == "clip":
            return GatherScatterMode.CLIP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        if s == "one_hot":
            return GatherScatterMode.ONE_HOT
        raise trace_error(f"unknown gather/scatter mode {s!r}: expected 'clip', 'fill', "
                          "'drop' or 'promise_in_bounds'")


def _ints(xs: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


def _window_sizes(x: Tracer, u: Tracer, dn: ScatterDimensionNumbers) -> list[int]:
    """The window extent along every operand dim: 1 for inserted and batching dims, else the
    size of the matching update window dim (in order)."""
    skipped = set(_ints(dn.inserted_window_dims)) | set(_ints(dn.operand_batching_dims))
    window = iter(_ints(dn.update_window_dims))
    return [1 if d in skipped else u.shape[next(window)] for d in range(x.ndim)]


def _clip_indices(x: Tracer, idx: Tracer, u: Tracer, dn: ScatterDimensionNumbers) -> Tracer:
    """Indices clamped to [0, dim - window] per component (mode "clip")."""
    try:
        sizes = _window_sizes(x, u, dn)
    except (IndexError, StopIteration):
        return idx  # shape inference names the mismatch
    upper = np.asarray([x.shape[d] - sizes[d] for d in _ints(dn.scatter_dims_to_operand_dims)],
                       idx.dtype)
    hi = _lax.broadcast_in_dim(as_tracer(upper), idx.shape, (idx.ndim - 1,))
    lo = _lax.broadcast_in_dim(as_tracer(np.zeros((), idx.dtype)), idx.shape, ())
    return _lax.clamp(lo, idx, hi)


def _scatter(operand: Any, scatter_indices: Any, updates: Any,
             dimension_numbers: ScatterDimensionNumbers,
             combiner: Opcode | Callable[..., Any], mode: Any, op: str) -> Tracer:
    x, idx = as_tracer(operand), as_tracer(scatter_indices)
    u = as_tracer(updates, x.ptype)
    if not isinstance(dimension_numbers, ScatterDimensionNumbers):
        raise trace_error(f"{op}: dimension_numbers must be a ScatterDimensionNumbers, got "
                          f"{type(dimension_numbers).__name__}")
    if not idx.ptype.is_integer or idx.ndim == 0:
        raise trace_error(f"{op}: scatter_indices must be an integer array of rank >= 1, got "
                          f"{idx.aval_text}")
    dn = dimension_numbers
    m = GatherScatterMode.from_any(mode)
    if m is GatherScatterMode.ONE_HOT:
        raise trace_error(f"{op}: mode 'one_hot' is not supported")
    if m is GatherScatterMode.CLIP:
        idx = _clip_indices(x, idx, u, dn)
    if isinstance(combiner, Opcode):
        comp = monoid_computation(combiner, x.ptype)
    else:
        comp, _ = trace_scalar_computation(f"{op}.combiner", combiner, [x.ptype, x.ptype],
                                           f"{op} combiner")
    attrs: dict[str, Any] = {
        "update_window_dims": _ints(dn.update_window_dims),
        "inserted_window_dims": _ints(dn.inserted_window_dims),
        "scatter_dims_to_operand_dims": _ints(dn.scatter_dims_to_operand_dims),
        "index_vector_dim": idx.ndim - 1}
    batching = {"input_batching_dims": _ints(dn.operand_batching_dims),
                "scatter_indices_batching_dims": _ints(dn.scatter_indices_batching_dims)}
    out = infer("infer_scatter", [x.aval], idx.aval, [u.aval], attrs["update_window_dims"],
                attrs["inserted_window_dims"], attrs["scatter_dims_to_operand_dims"],
                attrs["index_vector_dim"], batching["input_batching_dims"],
                batching["scatter_indices_batching_dims"], to_apply=comp)
    attrs.update({k: v for k, v in batching.items() if v})
    return emit(Opcode.SCATTER, out, [x, idx, u], attrs, (comp,), op_name=op,
                weak=x.weak_type)


@eager_ok
def scatter_add(operand: Any, scatter_indices: Any, updates: Any,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: Any = None) -> Tracer:
    """`operand` with `updates` added at the windows `scatter_indices` select."""
    return _scatter(operand, scatter_indices, updates, dimension_numbers, Opcode.ADD, mode,
                    "scatter_add")


@eager_ok
def scatter_sub(operand: Any, scatter_indices: Any, updates: Any,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: Any = None) -> Tracer:
    """`operand` with `updates` subtracted at the selected windows."""
    return _scatter(operand, scatter_indices, updates, dimension_numbers, Opcode.SUBTRACT,
                    mode, "scatter_sub")


@eager_ok
def scatter_mul(operand: Any, scatter_indices: Any, updates: Any,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: Any = None) -> Tracer:
    """`operand` multiplied by `updates` at the selected windows."""
    return _scatter(operand, scatter_indices, updates, dimension_numbers, Opcode.MULTIPLY,
                    mode, "scatter_mul")


@eager_ok
def scatter_min(operand: Any, scatter_indices: Any, updates: Any,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: Any = None) -> Tracer:
    """The minimum of `operand` and `updates` at the selected windows."""
    return _scatter(operand, scatter_indices, updates, dimension_numbers, Opcode.MINIMUM,
                    mode, "scatter_min")


@eager_ok
def scatter_max(operand: Any, scatter_indices: Any, updates: Any,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: Any = None) -> Tracer:
    """The maximum of `operand` and `updates` at the selected windows."""
    return _scatter(operand, scatter_indices, updates, dimension_numbers, Opcode.MAXIMUM,
                    mode, "scatter_max")


@eager_ok
def scatter_apply(operand: Any, scatter_indices: Any, func: Callable[[Any], Any],
                  dimension_numbers: ScatterDimensionNumbers, *,
                  update_shape: Sequence[int] = (), indices_are_sorted: bool = False,
                  unique_indices: bool = False, mode: Any = None) -> Tracer:
    """`operand` with the scalar function `func` applied at every element of the selected
    windows (once per index that selects it); `update_shape` is the shape updates of these
    windows would have."""
    x = as_tracer(operand)
    dummy = _lax.broadcast_in_dim(as_tracer(np.zeros((), x.dtype)), _ints(update_shape), ())
    return _scatter(x, scatter_indices, dummy, dimension_numbers, lambda a, b: func(a), mode,
                    "scatter_apply")


@eager_ok
def scatter(operand: Any, scatter_indices: Any, updates: Any, *args: Any, **kwargs: Any
            ) -> Tracer:
    """JAX's `scatter(operand, scatter_indices, updates, dimension_numbers, *,
    indices_are_sorted=False, unique_indices=False, mode=None)`: `updates` replace the
    selected windows; or xlc's XLA-style `scatter` (`lax.py`)."""
    dn = args[0] if args else kwargs.get("dimension_numbers")
    if not isinstance(dn, ScatterDimensionNumbers):
        return _XLA_SCATTER(operand, scatter_indices, updates, *args, **kwargs)
    return _scatter(operand, scatter_indices, updates, dn, lambda a, b: b, kwargs.get("mode"),
                    "scatter")


@eager_ok
def gather(operand: Any, start_indices: Any, *args: Any, **kwargs: Any) -> Tracer:
    """JAX's `gather(operand, start_indices, dimension_numbers, slice_sizes, *,
    indices_are_sorted=False, unique_indices=False, mode=None, fill_value=None)`; or xlc's
    XLA-style `gather` (`lax.py`)."""
    dn = args[0] if args else kwargs.get("dimension_numbers")
    if not isinstance(dn, GatherDimensionNumbers):
        return _XLA_GATHER(operand, start_indices, *args, **kwargs)
    slice_sizes = args[1] if len(args) > 1 else kwargs["slice_sizes"]
    return _gather(operand, start_indices, dn, slice_sizes, kwargs.get("mode"),
                   kwargs.get("fill_value"))


def _fill_default(x: Tracer) -> Any:
    pt = x.ptype
    if pt.is_float or pt.is_complex:
        return np.nan
    if pt.is_unsigned_int:
        return np.iinfo(pt.dtype).max
    if pt.is_integer:
        return np.iinfo(pt.dtype).min
    return True


def _gather(operand: Any, start_indices: Any, dn: GatherDimensionNumbers,
            slice_sizes: Sequence[int], mode: Any, fill_value: Any) -> Tracer:
    from xlc.frontend import numpy_api as xnp

    x, idx = as_tracer(operand), as_tracer(start_indices)
    if not idx.ptype.is_integer or idx.ndim == 0:
        raise trace_error(f"gather: start_indices must be an integer array of rank >= 1, got "
                          f"{idx.aval_text}")
    m = GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else \
        GatherScatterMode.from_any(mode)
    if m is GatherScatterMode.ONE_HOT:
        raise trace_error("gather: mode 'one_hot' is not supported")
    attrs: dict[str, Any] = {
        "offset_dims": _ints(dn.offset_dims), "collapsed_slice_dims":
        _ints(dn.collapsed_slice_dims), "start_index_map": _ints(dn.start_index_map),
        "index_vector_dim": idx.ndim - 1, "slice_sizes": _ints(slice_sizes)}
    batching = {"operand_batching_dims": _ints(dn.operand_batching_dims),
                "start_indices_batching_dims": _ints(dn.start_indices_batching_dims)}
    out = infer("infer_gather", x.aval, idx.aval, attrs["offset_dims"],
                attrs["collapsed_slice_dims"], attrs["start_index_map"],
                attrs["index_vector_dim"], attrs["slice_sizes"],
                batching["operand_batching_dims"], batching["start_indices_batching_dims"])
    attrs.update({k: v for k, v in batching.items() if v})
    r = emit(Opcode.GATHER, out, [x, idx], attrs, op_name="gather", weak=x.weak_type)
    if m is not GatherScatterMode.FILL_OR_DROP:
        return r  # HLO gather clamps the starts
    upper = np.asarray([x.shape[d] - attrs["slice_sizes"][d] for d in attrs["start_index_map"]],
                       idx.dtype)
    hi = _lax.broadcast_in_dim(as_tracer(upper), idx.shape, (idx.ndim - 1,))
    ok = xnp.logical_and(xnp.greater_equal(idx, 0), xnp.less_equal(idx, hi))
    ok = _lax.reduce(ok, True, Opcode.AND, (idx.ndim - 1,))
    batch_pos = [d for d in range(r.ndim) if d not in attrs["offset_dims"]]
    ok = _lax.broadcast_in_dim(ok, r.shape, batch_pos)
    fill = as_tracer(_fill_default(x) if fill_value is None else fill_value, x.ptype)
    return _lax.select(ok, r, _lax.broadcast_in_dim(fill, r.shape, ()))


_XLA_GATHER = _lax.gather
_XLA_SCATTER = _lax.scatter
