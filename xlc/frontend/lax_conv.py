"""`jax.lax`'s convolution API beyond one HLO op, re-exported by `xlc.lax`:
`ConvDimensionNumbers` and `conv_dimension_numbers`, `conv_general_permutations`, the shape
helpers (`conv_shape_tuple`, `conv_general_shape_tuple`, `conv_transpose_shape_tuple`,
`reduce_window_shape_tuple`, `padtype_to_pads`), `conv_with_general_padding`,
`conv_transpose`, `conv_general_dilated_patches` and `conv_general_dilated_local`.

It also replaces `xlc.lax.conv_general_dilated` by one with JAX's full signature: its
`dimension_numbers` may be None, a (lhs, rhs, out) tuple of layout strings or a
`ConvDimensionNumbers`, spatial dims pair up by letter (not by position in each string), and
`precision` sits where JAX has it (accepted and ignored: xlc computes in the operand type).
"""
from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from xlc.frontend import dtypes
from xlc.frontend import lax as _lax
from xlc.frontend.eager import eager_ok
from xlc.frontend.tracer import Tracer, as_tracer, emit, infer, trace_error
from xlc.hlo.attrs import ConvDimLabels, Window, WindowDim
from xlc.hlo.opcodes import Opcode

__all__ = ["ConvDimensionNumbers", "ConvGeneralDilatedDimensionNumbers", "PaddingType",
           "conv_dimension_numbers", "conv_general_permutations", "conv_shape_tuple",
           "conv_general_shape_tuple", "conv_transpose_shape_tuple", "reduce_window_shape_tuple",
           "padtype_to_pads", "conv_general_dilated", "conv_with_general_padding",
           "conv_transpose", "conv_general_dilated_patches", "conv_general_dilated_local"]


class ConvDimensionNumbers(NamedTuple):
    """Dim positions of (batch, feature, spatial...) in lhs and out, and of (out feature, in
    feature, spatial...) in rhs; spatial dims in the kernel's order."""

    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


ConvGeneralDilatedDimensionNumbers = tuple[str, str, str] | ConvDimensionNumbers | None


class PaddingType(enum.Enum):
    """The padding names `padtype_to_pads` accepts."""

    VALID = 1
    SAME = 2
    SAME_LOWER = 3


def _ints(xs: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


def conv_general_permutations(dimension_numbers: tuple[str, str, str]
                              ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The (lhs, rhs, out) specs of layout strings such as ('NHWC', 'HWIO', 'NHWC'): the
    positions of N and C (O and I), then of the spatial letters in the order of the rhs
    string."""
    lhs, rhs, out = dimension_numbers
    for i, (spec, (a, b)) in enumerate(zip(dimension_numbers, (("N", "C"), ("O", "I"),
                                                               ("N", "C")))):
        if spec.count(a) != 1 or spec.count(b) != 1:
            raise TypeError(f"convolution dimension_numbers[{i}] must contain the characters "
                            f"'{a}' and '{b}' exactly once, got {spec}.")
        if len(spec) != len(set(spec)):
            raise TypeError(f"convolution dimension_numbers[{i}] cannot have duplicate "
                            f"characters, got {spec}.")
    if not set(lhs) - {"N", "C"} == set(rhs) - {"O", "I"} == set(out) - {"N", "C"}:
        raise TypeError("convolution dimension_numbers elements must each have the same set "
                        f"of spatial characters, got {dimension_numbers}.")
    spatial = [c for c in rhs if c not in "OI"]

    def perm(spec: str, a: str, b: str) -> tuple[int, ...]:
        return (spec.index(a), spec.index(b)) + tuple(spec.index(c) for c in spatial)

    return perm(lhs, "N", "C"), perm(rhs, "O", "I"), perm(out, "N", "C")


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                           dimension_numbers: Any) -> ConvDimensionNumbers:
    """`dimension_numbers` (None = NCHW/OIHW/NCHW, a tuple of layout strings, or a
    ConvDimensionNumbers) as a ConvDimensionNumbers for operands of these shapes."""
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError(f"convolution requires lhs and rhs ndim to be equal, got "
                        f"{len(lhs_shape)} and {len(rhs_shape)}.")
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if dimension_numbers is None:
        iota = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    if not isinstance(dimension_numbers, (tuple, list)) or len(dimension_numbers) != 3 or \
            not all(isinstance(s, str) for s in dimension_numbers):
        raise TypeError("convolution dimension_numbers must be None, a ConvDimensionNumbers or "
                        f"three layout strings, got {dimension_numbers!r}.")
    for i, spec in enumerate(dimension_numbers):
        if len(spec) != len(lhs_shape):
            raise TypeError(f"convolution dimension_numbers[{i}] must have len equal to the "
                            f"ndim of lhs and rhs, got {len(spec)} for lhs and rhs shapes "
                            f"{tuple(lhs_shape)} and {tuple(rhs_shape)}.")
    return ConvDimensionNumbers(*conv_general_permutations(tuple(dimension_numbers)))


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int],
                    window_strides: Sequence[int], padding: str | PaddingType
                    ) -> list[tuple[int, int]]:
    """(low, high) padding per spatial dim for "VALID", "SAME" (odd padding high) or
    "SAME_LOWER" (odd padding low)."""
    name = padding.name if isinstance(padding, PaddingType) else str(padding).upper()
    if name not in PaddingType.__members__:
        raise RuntimeError(f"Unrecognized padding type: expected 'VALID', 'SAME', or "
                           f"'SAME_LOWER', got {padding}.")
    pads = []
    for size, win, stride in zip(in_shape, window_shape, window_strides):
        if name == "VALID":
            pads.append((0, 0))
            continue
        out = -(-int(size) // int(stride))
        total = max((out - 1) * int(stride) + int(win) - int(size), 0)
        lo, hi = total // 2, total - total // 2
        pads.append((lo, hi) if name == "SAME" else (hi, lo))
    return pads


def conv_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                     strides: Sequence[int], pads: Any, batch_group_count: int = 1
                     ) -> tuple[int, ...]:
    """The output shape of a convolution with operands in canonical (NC..., OI...) order."""
    if isinstance(pads, (str, PaddingType)):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected "
                        f"{len(lhs_shape) - 2}, got {len(pads)}.")
    padded = [int(d) + int(lo) + int(hi) for d, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(p < 0 for p in padded):
        raise ValueError(f"Negative padding is larger than the size of the corresponding "
                         f"dimension: got padding={pads} for lhs_shape[2:]={lhs_shape[2:]}")
    space = tuple(max(0, (p - int(k)) // int(s) + 1) if p >= int(k) else 0
                  for p, k, s in zip(padded, rhs_shape[2:], strides))
    return (int(lhs_shape[0]) // int(batch_group_count), int(rhs_shape[0])) + space


def conv_general_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                             window_strides: Sequence[int], padding: Any,
                             dimension_numbers: tuple[str, str, str]) -> tuple[int, ...]:
    """`conv_shape_tuple` for operands in the layouts `dimension_numbers` names."""
    lp, rp, op = conv_general_permutations(dimension_numbers)
    out = conv_shape_tuple([lhs_shape[i] for i in lp], [rhs_shape[i] for i in rp],
                           window_strides, padding)
    return tuple(out[i] for i in np.argsort(op))


def _transpose_padding(k: int, s: int, padding: Any) -> tuple[int, int]:
    """(before, after) padding of a transposed convolution's dim for the forward padding
    'SAME', 'VALID' or an explicit (lo, hi)."""
    if padding == "SAME":
        total = k + s - 2
        before = k - 1 if s > k - 1 else math.ceil(total / 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        before = k - 1
    elif isinstance(padding, tuple):
        pads = tuple(k - p - 1 for p in padding)
        before, total = pads[0], sum(pads)
    else:
        raise ValueError(f"Invalid padding mode: {padding}")
    return before, total - before


def conv_transpose_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                               window_strides: Sequence[int], padding: Any,
                               dimension_numbers: tuple[str, str, str]) -> tuple[int, ...]:
    """The output shape of `conv_transpose`."""
    lp, rp, op = conv_general_permutations(dimension_numbers)
    lhs = [int(lhs_shape[i]) for i in lp]
    rhs = [int(rhs_shape[i]) for i in rp]
    if isinstance(padding, str):
        padding = [_transpose_padding(k, s, padding) for k, s in zip(rhs[2:], window_strides)]
    space = [(i - 1) * s - k + 2 + sum(p)
             for i, k, s, p in zip(lhs[2:], rhs[2:], window_strides, padding)]
    out = (lhs[0], rhs[0], *space)
    return tuple(out[i] for i in np.argsort(op))


def reduce_window_shape_tuple(operand_shape: Sequence[int], window_dimensions: Sequence[int],
                              window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
                              base_dilation: Sequence[int] | None = None,
                              window_dilation: Sequence[int] | None = None) -> tuple[int, ...]:
    """The output shape of `reduce_window`."""
    shape = [int(d) for d in operand_shape]
    win = [int(w) for w in window_dimensions]
    if base_dilation is not None:
        shape = [0 if d == 0 else (d - 1) * int(b) + 1 for d, b in zip(shape, base_dilation)]
    if window_dilation is not None:
        win = [0 if w == 0 else (w - 1) * int(b) + 1 for w, b in zip(win, window_dilation)]
    padded = [d + int(lo) + int(hi) for d, (lo, hi) in zip(shape, padding)]
    return tuple(0 if p < w else (p - w) // int(s) + 1
                 for p, w, s in zip(padded, win, window_strides))


# ---- convolutions -------------------------------------------------------------------------------
@eager_ok
def conv_general_dilated(lhs: Any, rhs: Any, window_strides: Sequence[int],
                         padding: str | Sequence[tuple[int, int]],
                         lhs_dilation: Sequence[int] | None = None,
                         rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: Any = None, feature_group_count: int = 1,
                         batch_group_count: int = 1, precision: Any = None,
                         preferred_element_type: Any = None) -> Tracer:
    """HLO `convolution` (a cross-correlation), jax.lax.conv_general_dilated's signature:
    `dimension_numbers` None (NCHW, OIHW, NCHW), layout strings or a ConvDimensionNumbers;
    `padding` "VALID", "SAME", "SAME_LOWER" or [(lo, hi), ...]; `precision` is ignored."""
    from xlc.frontend.numpy_api import promote

    a, b = promote(lhs, rhs)
    try:
        dn = conv_dimension_numbers(a.shape, b.shape, dimension_numbers)
    except TypeError as e:
        raise trace_error(f"conv_general_dilated: {e}") from None
    nsp = a.ndim - 2
    if nsp < 0 or any(len(s) != a.ndim for s in dn):
        raise trace_error(f"conv_general_dilated: dimension numbers {tuple(dn)} do not fit "
                          f"lhs {a.aval_text} and rhs {b.aval_text}")
    labels = ConvDimLabels(dn.lhs_spec[0], dn.lhs_spec[1], _ints(dn.lhs_spec[2:]),
                           dn.rhs_spec[1], dn.rhs_spec[0], _ints(dn.rhs_spec[2:]),
                           dn.out_spec[0], dn.out_spec[1], _ints(dn.out_spec[2:]))
    strides = _ints(window_strides) or (1,) * nsp
    ld = _ints(lhs_dilation or (1,) * nsp)
    rd = _ints(rhs_dilation or (1,) * nsp)
    ksz = [b.shape[d] for d in dn.rhs_spec[2:]]
    isz = [a.shape[d] for d in dn.lhs_spec[2:]]
    if not len(strides) == len(ld) == len(rd) == nsp:
        raise trace_error(f"conv_general_dilated: window_strides, lhs_dilation and "
                          f"rhs_dilation need {nsp} entries, got {list(strides)}, {list(ld)} "
                          f"and {list(rd)}")
    pads = _lax._window_padding(padding, isz, ksz, strides, ld, rd, "conv_general_dilated")
    window = Window(tuple(WindowDim(ksz[i], strides[i], pads[i][0], pads[i][1], rd[i], ld[i])
                          for i in range(nsp)))
    et = dtypes.to_ptype(preferred_element_type) if preferred_element_type is not None else None
    out = infer("infer_convolution", a.aval, b.aval, window, labels, int(feature_group_count),
                int(batch_group_count), et)
    return emit(Opcode.CONVOLUTION, out, [a, b],
                {"window": window, "dim_labels": labels,
                 "feature_group_count": int(feature_group_count),
                 "batch_group_count": int(batch_group_count)}, op_name="conv_general_dilated")


@eager_ok
def conv_with_general_padding(lhs: Any, rhs: Any, window_strides: Sequence[int],
                              padding: str | Sequence[tuple[int, int]],
                              lhs_dilation: Sequence[int] | None,
                              rhs_dilation: Sequence[int] | None, precision: Any = None,
                              preferred_element_type: Any = None) -> Tracer:
    """`conv_general_dilated` in NCHW / OIHW layouts with dilations."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                preferred_element_type=preferred_element_type)


_TRANSPOSE_LAYOUTS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                      4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}


@eager_ok
def conv_transpose(lhs: Any, rhs: Any, strides: Sequence[int],
                   padding: str | Sequence[tuple[int, int]],
                   rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                   transpose_kernel: bool = False, precision: Any = None,
                   preferred_element_type: Any = None, use_consistent_padding: bool = False
                   ) -> Tracer:
    """A transposed (fractionally strided) convolution, as jax.lax.conv_transpose: the input
    dilated by `strides`, padded so that 'SAME' / 'VALID' give Keras' Conv2DTranspose output
    sizes; `transpose_kernel` flips the kernel's spatial dims and swaps its I and O (the true
    gradient of a convolution). Layouts default to NHWC / HWIO."""
    a, b = as_tracer(lhs), as_tracer(rhs)
    if a.ndim != b.ndim or a.ndim < 2:
        raise trace_error(f"conv_transpose: lhs {a.aval_text} and rhs {b.aval_text} need equal "
                          "ranks >= 2")
    if dimension_numbers is None:
        if a.ndim not in _TRANSPOSE_LAYOUTS:
            raise trace_error("conv_transpose: no default dimension_numbers for rank "
                              f"{a.ndim}; pass them")
        dimension_numbers = _TRANSPOSE_LAYOUTS[a.ndim]
    try:
        dn = conv_dimension_numbers(a.shape, b.shape, dimension_numbers)
    except TypeError as e:
        raise trace_error(f"conv_transpose: {e}") from None
    nsp = a.ndim - 2
    ksizes = [b.shape[d] for d in dn.rhs_spec[2:]]
    rd = _ints(rhs_dilation or (1,) * nsp)
    if use_consistent_padding or (isinstance(padding, str) and padding in ("SAME", "VALID")):
        eff = [(k - 1) * r + 1 for k, r in zip(ksizes, rd)]
        per_dim = [padding] * nsp if isinstance(padding, str) else \
            [tuple(int(v) for v in p) for p in padding]
        pads: Any = [_transpose_padding(k, int(s), p) for k, s, p in zip(eff, strides, per_dim)]
    else:
        pads = padding
    if transpose_kernel:
        b = _lax.rev(b, dn.rhs_spec[2:])
        perm = list(range(b.ndim))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = dn.rhs_spec[1], dn.rhs_spec[0]
        b = _lax.transpose(b, perm)
    return conv_general_dilated(a, b, (1,) * nsp, pads, _ints(strides), rd, dn,
                                preferred_element_type=preferred_element_type)


@eager_ok
def conv_general_dilated_patches(lhs: Any, filter_shape: Sequence[int],
                                 window_strides: Sequence[int],
                                 padding: str | Sequence[tuple[int, int]],
                                 lhs_dilation: Sequence[int] | None = None,
                                 rhs_dilation: Sequence[int] | None = None,
                                 dimension_numbers: Any = None, precision: Any = None,
                                 preferred_element_type: Any = None) -> Tracer:
    """The patches a convolution with a kernel of spatial shape `filter_shape` would see,
    flattened into the output's feature dim (channel-major: C * prod(filter_shape) values),
    as jax.lax.conv_general_dilated_patches."""
    x = as_tracer(lhs)
    fshape = _ints(filter_shape)
    try:
        dn = conv_dimension_numbers(x.shape, (1, 1) + fshape, dimension_numbers)
    except TypeError as e:
        raise trace_error(f"conv_general_dilated_patches: {e}") from None
    spatial = math.prod(fshape)
    channels = x.shape[dn.lhs_spec[1]]
    rows = _lax.broadcasted_iota(np.int32, (spatial, spatial), 0)
    cols = _lax.broadcasted_iota(np.int32, (spatial, spatial), 1)
    from xlc.frontend import numpy_api as xnp

    eye = _lax.convert_element_type(xnp.equal(rows, cols), x.ptype)
    k = _lax.broadcast_in_dim(eye, (channels, spatial, spatial), (1, 2))
    k = _lax.reshape(k, (channels * spatial, 1) + fshape)
    # move dims 0 and 1 (O, I) to the rhs spec's positions, keeping the others in order
    src = [d for d in range(k.ndim) if d not in (0, 1)]
    order: list[int | None] = [None] * k.ndim
    order[dn.rhs_spec[0]], order[dn.rhs_spec[1]] = 0, 1
    rest = iter(src)
    k = _lax.transpose(k, [o if o is not None else next(rest) for o in order])
    return conv_general_dilated(x, k, window_strides, padding, lhs_dilation, rhs_dilation, dn,
                                feature_group_count=channels,
                                preferred_element_type=preferred_element_type)


@eager_ok
def conv_general_dilated_local(lhs: Any, rhs: Any, window_strides: Sequence[int],
                               padding: str | Sequence[tuple[int, int]],
                               filter_shape: Sequence[int],
                               lhs_dilation: Sequence[int] | None = None,
                               rhs_dilation: Sequence[int] | None = None,
                               dimension_numbers: Any = None, precision: Any = None) -> Tracer:
    """An unshared convolution (jax.lax.conv_general_dilated_local): every output position
    has its own kernel. `rhs` has the output channels at the rhs spec's O, C * prod(filter_
    shape) patch values (channel-major) at I, and the output's spatial shape at the spatial
    dims. The patches of `conv_general_dilated_patches` contracted with `rhs` per position."""
    x, k = as_tracer(lhs), as_tracer(rhs)
    fshape = _ints(filter_shape)
    patches = conv_general_dilated_patches(x, fshape, window_strides, padding, lhs_dilation,
                                           rhs_dilation, dimension_numbers)
    try:
        dn = conv_dimension_numbers(x.shape, (1, 1) + fshape, dimension_numbers)
    except TypeError as e:
        raise trace_error(f"conv_general_dilated_local: {e}") from None
    need = x.shape[dn.lhs_spec[1]] * math.prod(fshape)
    if k.ndim != x.ndim or k.shape[dn.rhs_spec[1]] != need:
        raise trace_error(f"conv_general_dilated_local: rhs {k.aval_text} needs {need} input "
                          f"features (channels x filter positions) at dim {dn.rhs_spec[1]}")
    spatial_out, spatial_rhs = _ints(dn.out_spec[2:]), _ints(dn.rhs_spec[2:])
    out = _lax.dot_general(patches, k, (((dn.out_spec[1],), (dn.rhs_spec[1],)),
                                        (spatial_out, spatial_rhs)))
    # dims now: spatial (in spec order), batch, out features -> the out spec's positions
    order: list[int] = [0] * out.ndim
    order[dn.out_spec[0]], order[dn.out_spec[1]] = out.ndim - 2, out.ndim - 1
    for i, d in enumerate(spatial_out):
        order[d] = i
    return _lax.transpose(out, order)
