"""`xlc.lax`: thin wrappers over single HLO ops (XLA's semantics, no implicit broadcasting or
promotion beyond Python scalars), plus the control-flow primitives re-exported from
`xlc.frontend.control_flow`.

Every function requires an active trace (call it inside `xlc.jit`) or evaluates eagerly on numpy
inputs (see `xlc.frontend.eager`); shape errors are TraceErrors at the user's line.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlc.frontend import dtypes
from xlc.frontend.control_flow import cond, fori_loop, scan, switch, while_loop  # noqa: E402,F401
from xlc.frontend.eager import eager_ok
from xlc.frontend.lax_slicing import (  # noqa: F401
    dynamic_index_in_dim,
    dynamic_slice_in_dim,
    dynamic_update_index_in_dim,
    dynamic_update_slice_in_dim,
)
from xlc.frontend.staging import monoid_computation, trace_scalar_computation
from xlc.frontend.tracer import Tracer, as_tracer, emit, infer, trace_error, type_of
from xlc.hlo.attrs import ConvDimLabels, PaddingConfig, SliceDim, Window, WindowDim
from xlc.hlo.opcodes import Opcode
from xlc.hlo.precision import precision_extra as _precision_extra
from xlc.hlo.shape import PrimitiveType, Shape


def _ints(xs: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


def _same_type(*xs: Any) -> list[Tracer]:
    """Tracers of one element type; Python scalars take the type of the traced operands."""
    typed = [x for x in xs if isinstance(x, (Tracer, np.ndarray, np.generic))]
    if not typed:
        return [as_tracer(x) for x in xs]
    pt = type_of(typed[0])[0]
    return [as_tracer(x, pt) if dtypes.is_python_scalar(x) else as_tracer(x) for x in xs]


# ---- shapes and data movement ---------------------------------------------------------------
@eager_ok
def broadcast_in_dim(operand: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]
                     ) -> Tracer:
    """HLO `broadcast`: operand dim i becomes output dim broadcast_dimensions[i]. Operand dims
    of size 1 mapped to larger output dims are reshaped away first (HLO `broadcast` needs
    equal sizes)."""
    x = as_tracer(operand)
    shape, bdims = _ints(shape), _ints(broadcast_dimensions)
    if x.shape == shape and bdims == tuple(range(len(shape))):
        return x
    if len(bdims) != x.ndim:
        raise trace_error(f"broadcast_in_dim: operand {x.aval_text} needs {x.ndim} "
                          f"broadcast_dimensions, got {list(bdims)}")
    keep = [i for i, d in enumerate(x.shape)
            if not (d == 1 and bdims[i] < len(shape) and shape[bdims[i]] != 1)]
    if len(keep) != x.ndim:
        x = reshape(x, tuple(x.shape[i] for i in keep))
        bdims = tuple(bdims[i] for i in keep)
    out = infer("infer_broadcast", x.aval, shape, bdims)
    return emit(Opcode.BROADCAST, out, [x], {"dimensions": bdims}, op_name="broadcast_in_dim",
                weak=x.weak_type)


@eager_ok
def reshape(operand: Any, new_sizes: Sequence[int]) -> Tracer:
    """HLO `reshape` (row-major) to `new_sizes`."""
    x = as_tracer(operand)
    new = _ints(new_sizes)
    if new == x.shape:
        return x
    return emit(Opcode.RESHAPE, infer("infer_reshape", x.aval, new), [x], op_name="reshape",
                weak=x.weak_type)


@eager_ok
def transpose(operand: Any, permutation: Sequence[int]) -> Tracer:
    """HLO `transpose`: output dim i is operand dim permutation[i]."""
    x = as_tracer(operand)
    perm = _ints(permutation)
    if perm == tuple(range(x.ndim)):
        return x
    return emit(Opcode.TRANSPOSE, infer("infer_transpose", x.aval, perm), [x],
                {"dimensions": perm}, op_name="transpose", weak=x.weak_type)


@eager_ok
def convert_element_type(operand: Any, new_dtype: Any) -> Tracer:
    """HLO `convert` to `new_dtype` (float->int truncates toward zero, as XLA)."""
    from xlc.frontend.tracer import convert

    return convert(as_tracer(operand), dtypes.to_ptype(new_dtype))


@eager_ok
def select(pred: Any, on_true: Any, on_false: Any) -> Tracer:
    """HLO `select`: pred must be pred-typed with the operands' dims (or a scalar)."""
    p = as_tracer(pred)
    t, f = _same_type(on_true, on_false)
    if p.ndim == 0 and t.ndim > 0:
        p = broadcast_in_dim(p, t.shape, ())
    out = infer("infer_select", p.aval, t.aval, f.aval)
    return emit(Opcode.SELECT, out, [p, t, f], op_name="select",
                weak=t.weak_type and f.weak_type)


@eager_ok
def iota(dtype: Any, size: int) -> Tracer:
    """A 1-D array [0, 1, ..., size-1] of `dtype`."""
    return broadcasted_iota(dtype, (int(size),), 0)


@eager_ok
def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int) -> Tracer:
    """HLO `iota`: values count along `dimension`."""
    pt = dtypes.to_ptype(dtype)
    out = infer("infer_iota", pt, _ints(shape), int(dimension))
    return emit(Opcode.IOTA, out, [], {"iota_dimension": int(dimension)}, op_name="iota")


@eager_ok
def slice(operand: Any, start_indices: Sequence[int], limit_indices: Sequence[int],  # noqa: A001
          strides: Sequence[int] | None = None) -> Tracer:
    """HLO `slice` with static starts/limits/strides."""
    x = as_tracer(operand)
    strides = strides or [1] * x.ndim
    sl = tuple(SliceDim(int(a), int(b), int(s))
               for a, b, s in zip(start_indices, limit_indices, strides))
    if all(s.start == 0 and s.limit == d and s.stride == 1 for s, d in zip(sl, x.shape)) \
            and len(sl) == x.ndim:
        return x
    return emit(Opcode.SLICE, infer("infer_slice", x.aval, sl), [x], {"slice": sl},
                op_name="slice", weak=x.weak_type)


def _index_scalars(start_indices: Sequence[Any], dims: Sequence[int], wrap: bool
                   ) -> list[Tracer]:
    """The start indices as scalars of one integer type; with `wrap`, a negative start `i` of a
    dim of size `d` becomes `i + d` first (as `jax.lax` does: `-1` is the last element)."""
    if wrap:
        start_indices = [_wrap_start(i, d) for i, d in zip(start_indices, dims)]
    idx = [as_tracer(i) for i in start_indices]
    pt, _ = dtypes.result_type(*[(i.ptype, i.weak_type) for i in idx]) if idx else (None, 0)
    return [as_tracer(i, pt) if i.ptype is not pt else i for i in idx]


def _wrap_start(i: Any, d: int) -> Any:
    if isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)):
        return int(i) + d if i < 0 else i
    t = as_tracer(i)
    if t.shape != () or not t.ptype.is_integer or t.ptype.is_unsigned_int:
        return t  # non-scalar / non-integer starts are refused by shape inference
    from xlc.frontend import numpy_api as xnp

    return select(xnp.less(t, 0), xnp.add(t, as_tracer(d, t.ptype)), t)


@eager_ok
def dynamic_slice(operand: Any, start_indices: Sequence[Any], slice_sizes: Sequence[int], *,
                  allow_negative_indices: bool = True) -> Tracer:
    """HLO `dynamic-slice` with `jax.lax`'s start semantics: a negative start counts from the
    end of its dim (unless `allow_negative_indices=False`), then starts are clamped so the
    slice stays in bounds (XLA)."""
    x = as_tracer(operand)
    idx = _index_scalars(start_indices, x.shape, allow_negative_indices)
    sizes = _ints(slice_sizes)
    out = infer("infer_dynamic_slice", x.aval, [i.aval for i in idx], sizes)
    return emit(Opcode.DYNAMIC_SLICE, out, [x, *idx], {"dynamic_slice_sizes": sizes},
                op_name="dynamic_slice", weak=x.weak_type)


@eager_ok
def dynamic_update_slice(operand: Any, update: Any, start_indices: Sequence[Any], *,
                         allow_negative_indices: bool = True) -> Tracer:
    """HLO `dynamic-update-slice` with `jax.lax`'s start semantics: a negative start counts
    from the end of its dim (unless `allow_negative_indices=False`), then starts are clamped so
    the update stays in bounds."""
    x = as_tracer(operand)
    u = as_tracer(update, x.ptype) if not isinstance(update, Tracer) else update
    idx = _index_scalars(start_indices, x.shape, allow_negative_indices)
    out = infer("infer_dynamic_update_slice", x.aval, u.aval, [i.aval for i in idx])
    return emit(Opcode.DYNAMIC_UPDATE_SLICE, out, [x, u, *idx],
                op_name="dynamic_update_slice", weak=x.weak_type)


@eager_ok
def concatenate(operands: Sequence[Any], dimension: int) -> Tracer:
    """HLO `concatenate` along `dimension` (same element types)."""
    xs = [as_tracer(o) for o in operands]
    if len(xs) == 1:
        return xs[0]
    out = infer("infer_concatenate", [x.aval for x in xs], int(dimension))
    return emit(Opcode.CONCATENATE, out, xs, {"dimensions": (int(dimension),)},
                op_name="concatenate")


@eager_ok
def pad(operand: Any, padding_value: Any, padding_config: Sequence[tuple[int, int, int]]
        ) -> Tracer:
    """HLO `pad`: per dim (low, high, interior); low/high may be negative."""
    x = as_tracer(operand)
    v = as_tracer(padding_value, x.ptype)
    cfg = PaddingConfig(tuple((int(a), int(b), int(c)) for a, b, c in padding_config))
    return emit(Opcode.PAD, infer("infer_pad", x.aval, v.aval, cfg), [x, v], {"padding": cfg},
                op_name="pad", weak=x.weak_type)


@eager_ok
def rev(operand: Any, dimensions: Sequence[int]) -> Tracer:
    """HLO `reverse` of `dimensions`."""
    x = as_tracer(operand)
    dims = _ints(dimensions)
    if not dims:
        return x
    return emit(Opcode.REVERSE, infer("infer_reverse", x.aval, dims), [x],
                {"dimensions": dims}, op_name="rev", weak=x.weak_type)


# ---- dot / conv ------------------------------------------------------------------------------
@eager_ok
def dot_general(lhs: Any, rhs: Any,
                dimension_numbers: tuple[tuple[Sequence[int], Sequence[int]],
                                         tuple[Sequence[int], Sequence[int]]],
                precision: Any = None, preferred_element_type: Any = None) -> Tracer:
    """HLO `dot`: dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch,
    rhs_batch)). Result dims: batch, lhs free, rhs free. Operands are promoted to a common
    type first. `precision` (None, a `Precision`, its name, or one per operand) becomes the
    dot's `operand_precision`: on the GPU f32 dots run in TF32 unless it is HIGHEST
    (`precision.py`)."""
    from xlc.frontend.numpy_api import promote

    a, b = promote(lhs, rhs)
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = _ints(lc), _ints(rc), _ints(lb), _ints(rb)
    et = dtypes.to_ptype(preferred_element_type) if preferred_element_type is not None else None
    out = infer("infer_dot", a.aval, b.aval, lb, rb, lc, rc, et)
    attrs: dict[str, Any] = {"lhs_contracting_dims": lc, "rhs_contracting_dims": rc}
    if lb:
        attrs["lhs_batch_dims"] = lb
        attrs["rhs_batch_dims"] = rb
    return emit(Opcode.DOT, out, [a, b], attrs, op_name="dot_general",
                extra=_precision_extra(precision, "dot_general"))


def _conv_labels(lhs_spec: str, rhs_spec: str, out_spec: str) -> ConvDimLabels:
    """Map JAX-style specs ('NCHW', 'OIHW', 'NCHW') to HLO dim_labels."""
    def spell(spec: str, a: str, b: str, la: str, lb: str) -> str:
        chars, sp = [], 0
        for c in spec:
            if c == a:
                chars.append(la)
            elif c == b:
                chars.append(lb)
            else:
                chars.append(str(sp))
                sp += 1
        return "".join(chars)

    text = (spell(lhs_spec, "N", "C", "b", "f") + "_" + spell(rhs_spec, "I", "O", "i", "o")
            + "->" + spell(out_spec, "N", "C", "b", "f"))
    try:
        return ConvDimLabels.from_text(text)
    except ValueError as e:
        raise trace_error(f"conv_general_dilated: bad dimension_numbers: {e}") from None


@eager_ok
def conv_general_dilated(lhs: Any, rhs: Any, window_strides: Sequence[int],
                         padding: str | Sequence[tuple[int, int]],
                         lhs_dilation: Sequence[int] | None = None,
                         rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: tuple[str, str, str] | None = None,
                         feature_group_count: int = 1, batch_group_count: int = 1,
                         preferred_element_type: Any = None) -> Tracer:
    """HLO `convolution` (cross-correlation, like jax.lax.conv_general_dilated). Layouts
    default to ('NCHW', 'OIHW', 'NCHW'); padding is 'VALID', 'SAME' or [(lo, hi), ...]."""
    from xlc.frontend.numpy_api import promote

    a, b = promote(lhs, rhs)
    nsp = a.ndim - 2
    specs = dimension_numbers or ("NC" + "HWD"[:nsp], "OI" + "HWD"[:nsp], "NC" + "HWD"[:nsp])
    labels = _conv_labels(*specs)
    strides = _ints(window_strides) or (1,) * nsp
    ld = _ints(lhs_dilation or (1,) * nsp)
    rd = _ints(rhs_dilation or (1,) * nsp)
    ksz = [b.shape[d] for d in labels.kernel_spatial]
    isz = [a.shape[d] for d in labels.input_spatial]
    pads = _window_padding(padding, isz, ksz, strides, ld, rd, "conv_general_dilated")
    window = Window(tuple(WindowDim(ksz[i], strides[i], pads[i][0], pads[i][1], rd[i], ld[i])
                          for i in range(nsp)))
    et = dtypes.to_ptype(preferred_element_type) if preferred_element_type is not None else None
    out = infer("infer_convolution", a.aval, b.aval, window, labels, feature_group_count,
                batch_group_count, et)
    return emit(Opcode.CONVOLUTION, out, [a, b],
                {"window": window, "dim_labels": labels,
                 "feature_group_count": int(feature_group_count),
                 "batch_group_count": int(batch_group_count)}, op_name="conv_general_dilated")


def _window_padding(padding: str | Sequence[tuple[int, int]], sizes: Sequence[int],
                    window: Sequence[int], strides: Sequence[int], base_dilation: Sequence[int],
                    window_dilation: Sequence[int], op: str) -> list[tuple[int, int]]:
    """(low, high) padding per windowed dim, as JAX computes it: "VALID" (none), "SAME" /
    "SAME_LOWER" (output size ceil(in / stride), the odd element of padding high / low), or an
    explicit [(lo, hi), ...] (negative values crop). Sizes are taken after dilation."""
    n = len(sizes)
    if isinstance(padding, str):
        kind = padding.upper()
        if kind not in ("VALID", "SAME", "SAME_LOWER"):
            raise trace_error(f"{op}: padding must be 'VALID', 'SAME', 'SAME_LOWER' or "
                              f"[(lo, hi), ...], got {padding!r}")
        pads = []
        for i in range(n):
            if kind == "VALID":
                pads.append((0, 0))
                continue
            in_d = (sizes[i] - 1) * base_dilation[i] + 1
            k_d = (window[i] - 1) * window_dilation[i] + 1
            out_d = -(-in_d // strides[i])
            total = max((out_d - 1) * strides[i] + k_d - in_d, 0)
            small, big = total // 2, total - total // 2
            pads.append((small, big) if kind == "SAME" else (big, small))
        return pads
    try:
        pads = [(int(lo), int(hi)) for lo, hi in padding]
    except (TypeError, ValueError):
        raise trace_error(f"{op}: padding must be 'VALID', 'SAME', 'SAME_LOWER' or "
                          f"[(lo, hi), ...], got {padding!r}") from None
    if len(pads) != n:
        raise trace_error(f"{op}: padding has {len(pads)} (lo, hi) pairs for {n} windowed "
                          "dimensions")
    return pads


def conv(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any) -> Tracer:
    """`conv_general_dilated` with NCHW/OIHW layouts and no dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding)


# ---- reductions --------------------------------------------------------------------------------
@eager_ok
def reduce(operands: Any, init_values: Any, computation: Callable[..., Any] | Opcode,
           dimensions: Sequence[int]) -> Any:
    """HLO `reduce` of one array or a tuple/list of arrays over `dimensions`. `computation`
    is a Python function of 2N scalars (accumulators first, then the new values) returning N
    scalars, traced into a reducer (it may not use outer traced values), or an Opcode such as
    Opcode.ADD for a single operand."""
    single = not isinstance(operands, (tuple, list))
    xs = [as_tracer(o) for o in ([operands] if single else operands)]
    inits = [as_tracer(v, x.ptype) for v, x in
             zip([init_values] if single else init_values, xs)]
    dims = tuple(sorted(d % xs[0].ndim for d in _ints(dimensions))) if xs[0].ndim else ()
    if isinstance(computation, Opcode):
        if len(xs) != 1:
            raise trace_error("reduce: an Opcode reducer needs exactly one operand; pass a "
                              "Python function for variadic reductions")
        reducer = monoid_computation(computation, xs[0].ptype)
    else:
        reducer, _ = trace_scalar_computation(
            "reducer", computation, [x.ptype for x in xs] + [x.ptype for x in xs],
            "reducer function of xlc.lax.reduce")
    out = infer("infer_reduce", [x.aval for x in xs], [i.aval for i in inits], dims, reducer)
    r = emit(Opcode.REDUCE, out, [*xs, *inits], {"dimensions": dims}, (reducer,),
             op_name="reduce")
    if len(xs) == 1:
        return r
    res = [get_tuple_element(r, i) for i in range(len(xs))]
    return tuple(res) if isinstance(operands, tuple) else res


def get_tuple_element(t: Tracer, i: int) -> Tracer:
    """HLO `get-tuple-element` i of a tuple-shaped tracer."""
    shape = infer("infer_get_tuple_element", t.aval, i)
    return emit(Opcode.GET_TUPLE_ELEMENT, shape, [t], {"index": i}, op_name="get_tuple_element")


@eager_ok
def reduce_window(operand: Any, init_value: Any, computation: Any,
                  window_dimensions: Sequence[int], window_strides: Sequence[int] | None = None,
                  padding: str | Sequence[tuple[int, int]] | None = None,
                  base_dilation: Sequence[int] | None = None,
                  window_dilation: Sequence[int] | None = None) -> Tracer:
    """HLO `reduce-window` of one operand. `computation` is a Python reducer of two scalars
    (or an Opcode such as Opcode.ADD); `padding` as in JAX: "VALID", "SAME", "SAME_LOWER" or
    [(lo, hi), ...] per dimension."""
    x = as_tracer(operand)
    init = as_tracer(init_value, x.ptype)
    n = x.ndim
    strides = _ints(window_strides or (1,) * n)
    bd = _ints(base_dilation or (1,) * n)
    wd = _ints(window_dilation or (1,) * n)
    pads = _window_padding(padding if padding is not None else "VALID", x.shape,
                           _ints(window_dimensions), strides, bd, wd, "reduce_window")
    window = Window(tuple(WindowDim(int(window_dimensions[i]), strides[i], pads[i][0],
                                    pads[i][1], wd[i], bd[i]) for i in range(n)))
    if isinstance(computation, Opcode):
        reducer = monoid_computation(computation, x.ptype)
    else:
        reducer, _ = trace_scalar_computation("reducer", computation, [x.ptype, x.ptype],
                                              "reducer function of xlc.lax.reduce_window")
    out = infer("infer_reduce_window", [x.aval], [init.aval], window, reducer)
    return emit(Opcode.REDUCE_WINDOW, out, [x, init], {"window": window}, (reducer,),
                op_name="reduce_window")


@eager_ok
def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """HLO `sort` of one array or several arrays of equal dims, ordered lexicographically by
    the first `num_keys` operands ascending (NaNs last), the rest permuted alongside."""
    single = not isinstance(operand, (tuple, list))
    xs = [as_tracer(o) for o in ([operand] if single else operand)]
    dim = int(dimension) % max(xs[0].ndim, 1)
    if not 1 <= num_keys <= len(xs):
        raise trace_error(f"sort: num_keys must be in [1, {len(xs)}], got {num_keys}")

    def comparator(*ps: Tracer) -> Tracer:
        from xlc.frontend import numpy_api as xnp

        result = None
        for k in reversed(range(num_keys)):
            a, b = ps[2 * k], ps[2 * k + 1]
            lt = _total_lt(xnp, a, b)
            if result is None:
                result = lt
            else:
                eq = xnp.logical_not(xnp.logical_or(lt, _total_lt(xnp, b, a)))
                result = xnp.logical_or(lt, xnp.logical_and(eq, result))
        assert result is not None
        return result

    types = [t for x in xs for t in (x.ptype, x.ptype)]
    comp, _ = trace_scalar_computation("compare", comparator, types, "sort comparator")
    out = infer("infer_sort", [x.aval for x in xs], dim)
    r = emit(Opcode.SORT, out, xs, {"dimensions": (dim,), "is_stable": bool(is_stable)},
             (comp,), op_name="sort")
    if single:
        return r
    res = [get_tuple_element(r, i) for i in range(len(xs))]
    return tuple(res) if isinstance(operand, tuple) else res


def _total_lt(xnp: Any, a: Tracer, b: Tracer) -> Tracer:
    """a < b with NaNs ordered after every number (for floats)."""
    if not (a.ptype.is_float):
        if a.ptype is PrimitiveType.PRED:
            return xnp.logical_and(xnp.logical_not(a), b)
        return xnp.less(a, b)
    a_nan, b_nan = xnp.not_equal(a, a), xnp.not_equal(b, b)
    return xnp.logical_or(xnp.less(a, b), xnp.logical_and(xnp.logical_not(a_nan), b_nan))


@eager_ok
def top_k(operand: Any, k: int) -> tuple[Tracer, Tracer]:
    """HLO `topk`: the k largest entries along the last axis (sorted descending) and their
    s32 indices."""
    x = as_tracer(operand)
    if x.ndim == 0 or not 0 <= int(k) <= x.shape[-1]:
        raise trace_error(f"top_k: k={k} must be in [0, {x.shape[-1] if x.ndim else 0}] for "
                          f"{x.aval_text}")
    out = infer("infer_topk", x.aval, int(k))
    r = emit(Opcode.TOPK, out, [x], {"k": int(k), "largest": True}, op_name="top_k")
    return get_tuple_element(r, 0), get_tuple_element(r, 1)


@eager_ok
def clamp(min: Any, x: Any, max: Any) -> Tracer:  # noqa: A002
    """HLO `clamp(min, x, max)`; min/max may be scalars."""
    t = as_tracer(x)
    lo, hi = as_tracer(min, t.ptype), as_tracer(max, t.ptype)
    out = infer("infer_clamp", lo.aval, t.aval, hi.aval)
    return emit(Opcode.CLAMP, out, [lo, t, hi], op_name="clamp", weak=t.weak_type)


@eager_ok
def bitcast_convert_type(operand: Any, new_dtype: Any) -> Tracer:
    """HLO `bitcast-convert`: reinterpret the bits (a width change adds/removes a minor dim)."""
    x = as_tracer(operand)
    pt = dtypes.to_ptype(new_dtype)
    out = infer("infer_bitcast_convert", x.aval, pt)
    return emit(Opcode.BITCAST_CONVERT, out, [x], op_name="bitcast_convert_type")


def dot(lhs: Any, rhs: Any, precision: Any = None, preferred_element_type: Any = None
        ) -> Tracer:
    """Vector/matrix dot: contracts the last dim of lhs with the first of rhs."""
    a, b = as_tracer(lhs), as_tracer(rhs)
    return dot_general(a, b, (((a.ndim - 1,), (0,)), ((), ())), precision,
                       preferred_element_type)


# ---- gather / scatter ------------------------------------------------------------------------
@eager_ok
def gather(operand: Any, start_indices: Any, offset_dims: Sequence[int],
           collapsed_slice_dims: Sequence[int], start_index_map: Sequence[int],
           index_vector_dim: int, slice_sizes: Sequence[int]) -> Tracer:
    """HLO `gather` with XLA's GatherDimensionNumbers (out-of-range starts are clamped)."""
    x, idx = as_tracer(operand), as_tracer(start_indices)
    if not idx.ptype.is_integer:
        raise trace_error(f"gather: indices must be integers, got {idx.aval_text}")
    attrs = {"offset_dims": _ints(offset_dims), "collapsed_slice_dims":
             _ints(collapsed_slice_dims), "start_index_map": _ints(start_index_map),
             "index_vector_dim": int(index_vector_dim), "slice_sizes": _ints(slice_sizes)}
    out = infer("infer_gather", x.aval, idx.aval, attrs["offset_dims"],
                attrs["collapsed_slice_dims"], attrs["start_index_map"],
                attrs["index_vector_dim"], attrs["slice_sizes"])
    return emit(Opcode.GATHER, out, [x, idx], attrs, op_name="gather", weak=x.weak_type)


@eager_ok
def scatter(operand: Any, scatter_indices: Any, updates: Any, update_window_dims: Sequence[int],
            inserted_window_dims: Sequence[int], scatter_dims_to_operand_dims: Sequence[int],
            index_vector_dim: int, combiner: Opcode | Callable[..., Any] | None = None
            ) -> Tracer:
    """HLO `scatter`; `combiner` (an Opcode like Opcode.ADD, a Python function of two scalars,
    or None = replace) merges the old value with each update."""
    x, idx = as_tracer(operand), as_tracer(scatter_indices)
    u = as_tracer(updates, x.ptype)
    if combiner is None:
        comp, _ = trace_scalar_computation("scatter.set", lambda a, b: b,
                                           [x.ptype, x.ptype], "scatter combiner")
    elif isinstance(combiner, Opcode):
        comp = monoid_computation(combiner, x.ptype)
    else:
        comp, _ = trace_scalar_computation("scatter.combiner", combiner, [x.ptype, x.ptype],
                                           "scatter combiner")
    attrs = {"update_window_dims": _ints(update_window_dims),
             "inserted_window_dims": _ints(inserted_window_dims),
             "scatter_dims_to_operand_dims": _ints(scatter_dims_to_operand_dims),
             "index_vector_dim": int(index_vector_dim)}
    out = infer("infer_scatter", [x.aval], idx.aval, [u.aval], attrs["update_window_dims"],
                attrs["inserted_window_dims"], attrs["scatter_dims_to_operand_dims"],
                attrs["index_vector_dim"], to_apply=comp)
    return emit(Opcode.SCATTER, out, [x, idx, u], attrs, (comp,), op_name="scatter",
                weak=x.weak_type)


def shape_of(x: Any) -> Shape:
    """The HLO Shape of a traced or numpy value."""
    return as_tracer(x).aval


@eager_ok
def div(x: Any, y: Any) -> Tracer:
    """HLO `divide` (`jax.lax.div`): integers round toward zero, x / 0 and INT_MIN / -1 give
    XLA's values (-1 or all ones, INT_MIN)."""
    from xlc.frontend import numpy_api

    return numpy_api._binary(Opcode.DIVIDE, "div", x, y)


@eager_ok
def rem(x: Any, y: Any) -> Tracer:
    """HLO `remainder` (`jax.lax.rem`): the sign of x; integer x % 0 is x (XLA)."""
    from xlc.frontend import numpy_api

    return numpy_api._binary(Opcode.REMAINDER, "rem", x, y)


# ---- elementwise aliases (jax.lax spellings), resolved lazily from xlc.numpy -----------------
_ELEMENTWISE_ALIASES = {
    "add": "add", "sub": "subtract", "mul": "multiply", "max": "maximum",
    "min": "minimum", "pow": "power", "neg": "negative", "abs": "abs", "sign": "sign",
    "exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p", "tanh": "tanh",
    "logistic": "logistic", "sqrt": "sqrt", "rsqrt": "rsqrt", "cbrt": "cbrt", "sin": "sin",
    "cos": "cos", "tan": "tan", "erf": "erf", "floor": "floor", "ceil": "ceil",
    "round": "round", "is_finite": "isfinite", "atan2": "arctan2",
    "eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal", "gt": "greater",
    "ge": "greater_equal", "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor", "bitwise_not": "invert", "shift_left": "left_shift",
}


def __getattr__(name: str) -> Any:
    """`xlc.lax.exp`, `xlc.lax.add`, ...: the xlc.numpy elementwise functions;
    `xlc.lax.linalg`: the linear-algebra primitives (`lax_linalg.py`)."""
    if name == "linalg":
        from xlc.frontend import lax_linalg

        return lax_linalg
    if name in _ELEMENTWISE_ALIASES:
        from xlc.frontend import numpy_api

        return getattr(numpy_api, _ELEMENTWISE_ALIASES[name])
    raise AttributeError(f"module 'xlc.lax' has no attribute {name!r}")


from xlc.frontend.lax_autodiff_ops import *  # noqa: E402,F401,F403 - complex, fft, cumsum, ...
from xlc.frontend.lax_conv import *  # type: ignore[assignment]  # noqa: E402,F401,F403
from xlc.frontend.lax_elementwise import *  # noqa: E402,F401,F403 - sinh, exp2, clz, mulhi, ...
from xlc.frontend.lax_misc import *  # noqa: E402,F401,F403 - associative_scan, map, ...
from xlc.frontend.lax_more import *  # noqa: E402,F401,F403 - broadcast, squeeze, argmax, ...
from xlc.frontend.lax_scatter import *  # noqa: E402,F401,F403 - scatter_add, JAX-style gather
from xlc.frontend.lax_special import *  # noqa: E402,F401,F403 - erfc, lgamma, igamma, zeta, ...
from xlc.frontend.lax_special_grad import *  # noqa: E402,F401,F403 - igamma_grad_a, ...
