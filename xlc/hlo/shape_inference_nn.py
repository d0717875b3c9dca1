"""Shape inference for the "neural-network" ops: dot, convolution, gather, scatter,
reduce-window and select-and-scatter (XLA's rules). Re-exported by `shape_inference`, whose
docstring documents the message format (`<op>: <rule>, got <details>`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from xlc.hlo.attrs import ConvDimLabels, Window
from xlc.hlo.shape import PrimitiveType, Shape
from xlc.hlo.shape_inference_util import (
    check_dims,
    check_inits,
    check_scalar_lambda,
    element_types,
    fail,
    fmt,
    fmt_dims,
    require_array,
    require_arrays,
    require_same_dims,
    window_output_size,
)

if TYPE_CHECKING:
    from xlc.hlo.ir import HloComputation


def _et(shape: Shape) -> PrimitiveType:
    assert shape.element_type is not None
    return shape.element_type


def _result_type(op: str, lhs: Shape, rhs: Shape,
                 element_type: PrimitiveType | None) -> PrimitiveType:
    """Operand types must match, except that floats may differ in precision (bf16 x f32) and
    integers in width and signedness (s8 x s16, u8 x s8), as XLA's shape inference allows
    (the result type is the instruction's, XLA's `preferred_element_type`). A preferred result
    type may widen, but float operands need a float result and integer operands an integer
    at least as wide as each of them, or a float."""
    lt, rt = _et(lhs), _et(rhs)
    if lt != rt and not (lt.is_float and rt.is_float) and not (lt.is_integer and rt.is_integer):
        fail(op, "operand element types must match", f"{fmt(lhs)} and {fmt(rhs)}")
    if element_type is None:
        if lt != rt:
            fail(op, "mixed-precision operands need a result element type",
                 f"{fmt(lhs)} and {fmt(rhs)}")
        return lt
    ok = all(element_type == t
             or (t.is_float or t.is_complex) and (element_type.is_float or element_type.is_complex)
             or t.is_integer and (element_type.is_float or element_type.is_integer
                                  and element_type.byte_size >= t.byte_size)
             for t in (lt, rt))
    if not ok:
        fail(op, f"result element type {element_type.text} does not fit the operands",
             f"{fmt(lhs)} and {fmt(rhs)}")
    return element_type


# ---- dot ---------------------------------------------------------------------------------
def infer_dot(lhs: Shape, rhs: Shape, lhs_batch: tuple[int, ...], rhs_batch: tuple[int, ...],
              lhs_contracting: tuple[int, ...], rhs_contracting: tuple[int, ...],
              element_type: PrimitiveType | None = None) -> Shape:
    """`dot` with dot_dimension_numbers: batch and contracting lists pair up (equal lengths and
    sizes), each operand's listed dims are unique, in range and disjoint. The result is
    batch dims, then lhs free dims, then rhs free dims, of `element_type` (or the common
    operand type)."""
    require_arrays("dot", [lhs, rhs])
    et = _result_type("dot", lhs, rhs, element_type)
    if len(lhs_batch) != len(rhs_batch):
        fail("dot", "lhs and rhs must have the same number of batch dimensions",
             f"{fmt_dims(lhs_batch)} and {fmt_dims(rhs_batch)}")
    if len(lhs_contracting) != len(rhs_contracting):
        fail("dot", "lhs and rhs must have the same number of contracting dimensions",
             f"{fmt_dims(lhs_contracting)} and {fmt_dims(rhs_contracting)}")
    for side, s, batch, contr in (("lhs", lhs, lhs_batch, lhs_contracting),
                                  ("rhs", rhs, rhs_batch, rhs_contracting)):
        check_dims("dot", f"{side} batch and contracting dimensions", tuple(batch) + tuple(contr),
                   s.rank, s)
    for kind, lds, rds in (("batch", lhs_batch, rhs_batch),
                           ("contracting", lhs_contracting, rhs_contracting)):
        for a, b in zip(lds, rds):
            if lhs.dims[a] != rhs.dims[b]:
                fail("dot", f"{kind} dimension sizes must match",
                     f"lhs {fmt(lhs)} dim {a} and rhs {fmt(rhs)} dim {b}")
    used_l = set(lhs_batch) | set(lhs_contracting)
    used_r = set(rhs_batch) | set(rhs_contracting)
    dims = [lhs.dims[d] for d in lhs_batch]
    dims += [n for i, n in enumerate(lhs.dims) if i not in used_l]
    dims += [n for i, n in enumerate(rhs.dims) if i not in used_r]
    return Shape.array(et, tuple(dims))


# ---- convolution -------------------------------------------------------------------------
def _check_labels(labels: ConvDimLabels, rank: int) -> None:
    parts = (("input", (labels.input_batch, labels.input_feature) + labels.input_spatial),
             ("kernel", (labels.kernel_input_feature, labels.kernel_output_feature)
              + labels.kernel_spatial),
             ("output", (labels.output_batch, labels.output_feature) + labels.output_spatial))
    for name, pos in parts:
        if sorted(pos) != list(range(rank)):
            fail("convolution", f"dim_labels {labels} {name} dimensions must be a permutation "
                                f"of the rank-{rank} dimensions", fmt_dims(pos))


def infer_convolution(lhs: Shape, rhs: Shape, window: Window, dim_labels: ConvDimLabels,
                      feature_group_count: int = 1, batch_group_count: int = 1,
                      element_type: PrimitiveType | None = None) -> Shape:
    """`convolution`: lhs and rhs of rank 2 + S with S window dims whose sizes are the kernel's
    spatial sizes; input features = kernel input features x feature_group_count; kernel output
    features divisible by both group counts; batch divisible by batch_group_count. Output:
    batch / batch_group_count, kernel output features, and the windowed spatial sizes, laid
    out as the output labels say."""
    op = "convolution"
    require_arrays(op, [lhs, rhs])
    et = _result_type(op, lhs, rhs, element_type)
    if feature_group_count < 1 or batch_group_count < 1:
        fail(op, "group counts must be positive",
             f"feature_group_count={feature_group_count} batch_group_count={batch_group_count}")
    if feature_group_count > 1 and batch_group_count > 1:
        fail(op, "feature_group_count and batch_group_count cannot both exceed 1",
             f"{feature_group_count} and {batch_group_count}")
    n_sp = len(dim_labels.input_spatial)
    if lhs.rank != n_sp + 2 or rhs.rank != n_sp + 2:
        fail(op, f"dim_labels {dim_labels} need rank-{n_sp + 2} operands",
             f"{fmt(lhs)} and {fmt(rhs)}")
    _check_labels(dim_labels, n_sp + 2)
    if len(window.dims) != n_sp:
        fail(op, f"window must have one dimension per spatial dimension ({n_sp})",
             f"window {window}")
    in_feat = lhs.dims[dim_labels.input_feature]
    k_in = rhs.dims[dim_labels.kernel_input_feature]
    k_out = rhs.dims[dim_labels.kernel_output_feature]
    batch = lhs.dims[dim_labels.input_batch]
    if in_feat % feature_group_count or in_feat // feature_group_count != k_in:
        fail(op, f"input features must equal kernel input features x feature_group_count "
                 f"({feature_group_count})", f"lhs {fmt(lhs)} and rhs {fmt(rhs)}")
    if k_out % feature_group_count:
        fail(op, f"kernel output features must be divisible by feature_group_count "
                 f"({feature_group_count})", f"rhs {fmt(rhs)}")
    if batch % batch_group_count or k_out % batch_group_count:
        fail(op, f"batch and kernel output features must be divisible by batch_group_count "
                 f"({batch_group_count})", f"lhs {fmt(lhs)} and rhs {fmt(rhs)}")
    out = [0] * (n_sp + 2)
    out[dim_labels.output_batch] = batch // batch_group_count
    out[dim_labels.output_feature] = k_out
    for i, wd in enumerate(window.dims):
        k_size = rhs.dims[dim_labels.kernel_spatial[i]]
        if wd.size != k_size:
            fail(op, f"window size {wd.size} must equal kernel spatial dimension {i} "
                     f"(size {k_size})", f"rhs {fmt(rhs)}")
        out[dim_labels.output_spatial[i]] = window_output_size(
            op, lhs.dims[dim_labels.input_spatial[i]], wd)
    return Shape.array(et, tuple(out))


# ---- gather / scatter --------------------------------------------------------------------
def _expanded_index_dims(op: str, indices: Shape, index_vector_dim: int) -> tuple[int, ...]:
    """Index dims with an implicit trailing 1 when index_vector_dim == rank."""
    require_array(op, indices, "indices")
    if not _et(indices).is_integer:
        fail(op, "indices must be integers", fmt(indices))
    if not 0 <= index_vector_dim <= indices.rank:
        fail(op, f"index_vector_dim {index_vector_dim} out of range", fmt(indices))
    dims = indices.dims
    return dims + (1,) if index_vector_dim == indices.rank else dims


def _check_batching(op: str, names: tuple[str, str], operand: Shape, indices: Shape,
                    op_dims: tuple[int, ...], idx_dims: tuple[int, ...],
                    index_vector_dim: int) -> None:
    check_dims(op, names[0], op_dims, operand.rank, operand, sorted_=True)
    check_dims(op, names[1], idx_dims, indices.rank, indices)
    if len(op_dims) != len(idx_dims):
        fail(op, f"{names[0]} and {names[1]} must have equal lengths",
             f"{fmt_dims(op_dims)} and {fmt_dims(idx_dims)}")
    if index_vector_dim in idx_dims:
        fail(op, f"{names[1]} must not contain index_vector_dim", fmt_dims(idx_dims))
    for a, b in zip(op_dims, idx_dims):
        if operand.dims[a] != indices.dims[b]:
            fail(op, "batching dimension sizes must match",
                 f"{fmt(operand)} dim {a} and {fmt(indices)} dim {b}")


def infer_gather(operand: Shape, indices: Shape, offset_dims: tuple[int, ...],
                 collapsed_slice_dims: tuple[int, ...], start_index_map: tuple[int, ...],
                 index_vector_dim: int, slice_sizes: tuple[int, ...],
                 operand_batching_dims: tuple[int, ...] = (),
                 start_indices_batching_dims: tuple[int, ...] = ()) -> Shape:
    """`gather` (XLA's GatherDimensionNumbers): the output has the index batch dims (indices
    without index_vector_dim) at the positions not in `offset_dims`, and the slice sizes of
    the operand dims that are neither collapsed nor batching at `offset_dims`."""
    op = "gather"
    require_array(op, operand)
    idx = _expanded_index_dims(op, indices, index_vector_dim)
    if len(slice_sizes) != operand.rank:
        fail(op, f"slice_sizes {fmt_dims(slice_sizes)} must have one entry per operand "
                 f"dimension", fmt(operand))
    for i, (n, d) in enumerate(zip(slice_sizes, operand.dims)):
        if not 0 <= n <= d:
            fail(op, f"slice size {n} out of bounds in dimension {i}", fmt(operand))
    if idx[index_vector_dim] != len(start_index_map):
        fail(op, f"index vector size {idx[index_vector_dim]} must equal the length of "
                 f"start_index_map {fmt_dims(start_index_map)}", fmt(indices))
    check_dims(op, "start_index_map", start_index_map, operand.rank, operand)
    check_dims(op, "collapsed_slice_dims", collapsed_slice_dims, operand.rank, operand,
               sorted_=True)
    _check_batching(op, ("operand_batching_dims", "start_indices_batching_dims"), operand,
                    indices, operand_batching_dims, start_indices_batching_dims,
                    index_vector_dim)
    if set(start_index_map) & set(operand_batching_dims):
        fail(op, "start_index_map must not contain operand_batching_dims",
             f"{fmt_dims(start_index_map)} and {fmt_dims(operand_batching_dims)}")
    if set(collapsed_slice_dims) & set(operand_batching_dims):
        fail(op, "collapsed_slice_dims must not contain operand_batching_dims",
             f"{fmt_dims(collapsed_slice_dims)} and {fmt_dims(operand_batching_dims)}")
    for d in tuple(collapsed_slice_dims) + tuple(operand_batching_dims):
        if slice_sizes[d] > 1:
            fail(op, f"collapsed and batching dimensions need slice size <= 1 (dimension {d})",
                 f"slice_sizes {fmt_dims(slice_sizes)}")
    if len(offset_dims) + len(collapsed_slice_dims) + len(operand_batching_dims) != operand.rank:
        fail(op, "offset_dims + collapsed_slice_dims + operand_batching_dims must cover the "
                 "operand rank", f"{fmt_dims(offset_dims)}, {fmt_dims(collapsed_slice_dims)}, "
                                 f"{fmt_dims(operand_batching_dims)} for {fmt(operand)}")
    batch = [n for i, n in enumerate(idx) if i != index_vector_dim]
    out_rank = len(offset_dims) + len(batch)
    check_dims(op, "offset_dims", offset_dims, out_rank, None, sorted_=True)
    skipped = set(collapsed_slice_dims) | set(operand_batching_dims)
    window = [n for i, n in enumerate(slice_sizes) if i not in skipped]
    out = []
    bi = wi = 0
    for i in range(out_rank):
        if i in offset_dims:
            out.append(window[wi])
            wi += 1
        else:
            out.append(batch[bi])
            bi += 1
    return Shape.array(_et(operand), tuple(out))


def infer_scatter(operands: Sequence[Shape], indices: Shape, updates: Sequence[Shape],
                  update_window_dims: tuple[int, ...], inserted_window_dims: tuple[int, ...],
                  scatter_dims_to_operand_dims: tuple[int, ...], index_vector_dim: int,
                  input_batching_dims: tuple[int, ...] = (),
                  scatter_indices_batching_dims: tuple[int, ...] = (),
                  to_apply: HloComputation | None = None) -> Shape:
    """`scatter` (XLA's ScatterDimensionNumbers): N operands of equal dims and N updates of the
    operand types; each update's scatter dims (those not in `update_window_dims`) equal the
    index batch dims in order and its window dims fit inside the operand's non-inserted,
    non-batching dims; the combiner (when given) takes 2N scalars and returns N. Returns the
    operand shape (a tuple when N > 1)."""
    op = "scatter"
    if not operands or len(operands) != len(updates):
        fail(op, "needs N operands and N updates",
             f"{len(operands)} operands and {len(updates)} updates")
    types = element_types(op, operands)
    require_same_dims(op, operands)
    require_arrays(op, updates, "update")
    operand = operands[0]
    for s, u in zip(operands, updates):
        if u.element_type != s.element_type:
            fail(op, "update element types must match the operands", f"{fmt(s)} and {fmt(u)}")
    idx = _expanded_index_dims(op, indices, index_vector_dim)
    if idx[index_vector_dim] != len(scatter_dims_to_operand_dims):
        fail(op, f"index vector size {idx[index_vector_dim]} must equal the length of "
                 f"scatter_dims_to_operand_dims {fmt_dims(scatter_dims_to_operand_dims)}",
             fmt(indices))
    check_dims(op, "scatter_dims_to_operand_dims", scatter_dims_to_operand_dims, operand.rank,
               operand)
    check_dims(op, "inserted_window_dims", inserted_window_dims, operand.rank, operand,
               sorted_=True)
    _check_batching(op, ("input_batching_dims", "scatter_indices_batching_dims"), operand,
                    indices, input_batching_dims, scatter_indices_batching_dims,
                    index_vector_dim)
    if set(inserted_window_dims) & set(input_batching_dims):
        fail(op, "inserted_window_dims must not contain input_batching_dims",
             f"{fmt_dims(inserted_window_dims)} and {fmt_dims(input_batching_dims)}")
    if len(update_window_dims) + len(inserted_window_dims) + len(input_batching_dims) \
            != operand.rank:
        fail(op, "update_window_dims + inserted_window_dims + input_batching_dims must cover "
                 "the operand rank",
             f"{fmt_dims(update_window_dims)}, {fmt_dims(inserted_window_dims)}, "
             f"{fmt_dims(input_batching_dims)} for {fmt(operand)}")
    batch = [n for i, n in enumerate(idx) if i != index_vector_dim]
    skipped = set(inserted_window_dims) | set(input_batching_dims)
    window_bounds = [n for i, n in enumerate(operand.dims) if i not in skipped]
    for u in updates:
        if u.rank != len(update_window_dims) + len(batch):
            fail(op, "updates rank must be len(update_window_dims) + index batch rank",
                 f"{fmt(u)} with indices {fmt(indices)}")
        check_dims(op, "update_window_dims", update_window_dims, u.rank, u, sorted_=True)
        for w, d in enumerate(update_window_dims):
            if u.dims[d] > window_bounds[w]:
                fail(op, f"update window dimension {d} (size {u.dims[d]}) exceeds the operand "
                         f"bound {window_bounds[w]}", f"{fmt(u)} into {fmt(operand)}")
        scatter_dims = [n for i, n in enumerate(u.dims) if i not in update_window_dims]
        if scatter_dims != batch:
            fail(op, "update scatter dimensions must match the index batch dimensions",
                 f"{fmt(u)} and indices {fmt(indices)}")
    if to_apply is not None:
        check_scalar_lambda(op, to_apply, types + types, types)
    shapes = [s.with_default_layout() for s in operands]
    return shapes[0] if len(shapes) == 1 else Shape.tuple_of(shapes)


# ---- windowed reductions -----------------------------------------------------------------
def infer_reduce_window(operands: Sequence[Shape], inits: Sequence[Shape], window: Window,
                        reducer: HloComputation | None = None) -> Shape:
    """`reduce-window`: N arrays of equal dims, N scalar inits of their types, one window
    dimension per operand dimension; the reducer as for `reduce`. Output extents follow the
    window formula (dilate, pad, slide by stride); a tuple when N > 1."""
    op = "reduce-window"
    acc = check_inits(op, operands, inits)
    base = operands[0]
    if len(window.dims) != base.rank:
        fail(op, "window must have one dimension per operand dimension",
             f"window {window} for {fmt(base)}")
    if reducer is not None:
        check_scalar_lambda(op, reducer, acc + [_et(s) for s in operands], acc)
    dims = tuple(window_output_size(op, d, wd) for d, wd in zip(base.dims, window.dims))
    shapes = [Shape.array(t, dims) for t in acc]
    return shapes[0] if len(shapes) == 1 else Shape.tuple_of(shapes)


def infer_select_and_scatter(operand: Shape, source: Shape, init_value: Shape, window: Window,
                             select: HloComputation | None = None,
                             scatter: HloComputation | None = None) -> Shape:
    """`select-and-scatter`: `source` has the reduce-window output shape of `operand` under
    `window` and the operand's type; `init_value` is a scalar of that type; `select` takes two
    scalars and returns pred[]; `scatter` takes two scalars and returns one. Returns the
    operand's shape."""
    op = "select-and-scatter"
    require_arrays(op, [operand, source])
    et = _et(operand)
    if len(window.dims) != operand.rank:
        fail(op, "window must have one dimension per operand dimension",
             f"window {window} for {fmt(operand)}")
    expect = Shape.array(et, tuple(window_output_size(op, d, wd)
                                   for d, wd in zip(operand.dims, window.dims)))
    if not source.compatible(expect):
        fail(op, f"source must have the windowed operand shape {fmt(expect)}", fmt(source))
    if not init_value.is_scalar or init_value.element_type != et:
        fail(op, "init value must be a scalar of the operand's element type",
             f"{fmt(operand)} and {fmt(init_value)}")
    if select is not None:
        check_scalar_lambda(op, select, [et, et], [PrimitiveType.PRED], role="select")
    if scatter is not None:
        check_scalar_lambda(op, scatter, [et, et], [et], role="scatter")
    return operand.with_default_layout()


# ---- fft -----------------------------------------------------------------------------------
FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")


def infer_fft(operand: Shape, fft_type: str, fft_length: tuple[int, ...]) -> Shape:
    """`fft` over the innermost len(fft_length) (1 to 3) dimensions, XLA's InferFftShape:
    FFT/IFFT take complex and keep the shape; RFFT takes f32/f64 whose inner dims equal
    fft_length and returns c64/c128 with the last dim fft_length[-1] // 2 + 1; IRFFT takes
    complex with that last dim and returns the real type with the inner dims fft_length."""
    require_array("fft", operand)
    et = operand.element_type
    assert et is not None
    k, r = len(fft_length), operand.rank
    if fft_type not in FFT_TYPES:
        fail("fft", f"fft_type must be one of {', '.join(FFT_TYPES)}", fft_type)
    if not 1 <= k <= 3 or r < k:
        fail("fft", "fft_length must name 1 to 3 inner dimensions of the operand",
             f"fft_length={fmt_dims(fft_length)} for {fmt(operand)}")
    inner, last = operand.dims[r - k:], fft_length[-1]
    if fft_type in ("FFT", "IFFT", "IRFFT") and not et.is_complex:
        fail("fft", f"{fft_type} requires a complex operand", fmt(operand))
    if fft_type == "RFFT" and et not in (PrimitiveType.F32, PrimitiveType.F64):
        fail("fft", "RFFT requires an f32 or f64 operand", fmt(operand))
    want = tuple(fft_length) if fft_type != "IRFFT" else tuple(fft_length[:-1]) + (
        last // 2 + 1,)
    if tuple(inner) != want:
        fail("fft", f"{fft_type} needs inner dimensions {fmt_dims(want)} for fft_length "
                    f"{fmt_dims(fft_length)}", fmt(operand))
    dims = list(operand.dims)
    if fft_type == "RFFT":
        dims[-1] = last // 2 + 1
        et = PrimitiveType.C64 if et is PrimitiveType.F32 else PrimitiveType.C128
    elif fft_type == "IRFFT":
        dims[-1] = last
        et = PrimitiveType.F32 if et is PrimitiveType.C64 else PrimitiveType.F64
    return Shape.array(et, tuple(dims))
