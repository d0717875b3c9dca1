"""The HLO a convolution becomes on the GEMM: patch groups times kernel slices, summed.

`lower_convolution(comp, conv, group)` splits the window's positions (row-major over the window
dims) into consecutive groups of `group` positions. For each group g

    x' = pad(transpose(input), 0)        the window's padding (negative padding crops) and
                                         base dilation (interior padding)
    P_g = concatenate(reshape(slice_j(x')) for j in g)    the group's patches
    W_g = the group's positions of the kernel, [in feature, out feature] per position
    d_g = dot(P_g, W_g)                  contracting (positions of g, in feature)

and the result is `d_0 + d_1 + ...` (a chain of adds; each add may take the buffer of the
partial sum it reads). `group = positions` is im2col: one patch matrix of `positions` times
the input and one dot. `group = 1` is one GEMM per window position on a strided slice of the
input (`K = in feature`): no patch matrix, only one slice, the dot's result and the running sum
live at a time. Groups in between trade one for the other.

The dims of P_g and W_g are ordered so that the dot's result is already in the convolution's
output order where that is possible, with no transpose after it:

- output feature last (`b01f`, ...): P_g = [other output dims in output order..., g, in f],
  d_g = dot(P_g, W_g[g, in f, out f]);
- output feature first (`fb01`, ...): P_g = [g, in f, other output dims...],
  d_g = dot(W_g[out f, g, in f], P_g);
- batch first, feature second (`bf01`, NCHW): P_g = [batch, g, in f, spatial...],
  d_g = dot(broadcast(W_g)[batch, out f, g, in f], P_g) with batch dims {0}, {0} (the kernel
  slice is repeated per batch element: batch x kernel bytes per group; taken while that is at
  most the output's bytes);
- otherwise the first form in [batch, spatial..., out f] and a transpose (the sum is then one
  more output-sized buffer).

Each P_g is one loop fusion (transpose, pad, slices, concatenate) after fusion, W_g another;
the dots run on the packed GEMM (the contracting dims are contiguous in P_g and W_g).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from itertools import product
from math import prod

import numpy as np

from xlc.hlo.attrs import ConvDimLabels, Literal, PaddingConfig, SliceDim, WindowDim
from xlc.hlo.ir import HloComputation, HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape

log = logging.getLogger("xlc.passes.conv_to_dot")

FEATURE_LAST, FEATURE_FIRST, BATCH_FEATURE, TRANSPOSED = ("feature-last", "feature-first",
                                                          "batch-feature", "transposed")
"""The dot forms (see the module docstring)."""


@dataclass(frozen=True)
class ConvGeometry:
    """The sizes of a convolution that its lowerings depend on."""

    batch: int
    in_feature: int
    out_feature: int
    out_spatial: tuple[int, ...]
    window: tuple[WindowDim, ...]
    element_bytes: int

    @property
    def positions(self) -> int:
        """Window positions (the product of the window sizes)."""
        return prod(d.size for d in self.window)

    @property
    def rows(self) -> int:
        """Output pixels: batch x output spatial sizes (the GEMM's m for feature-last)."""
        return self.batch * prod(self.out_spatial)

    def slice_bytes(self) -> int:
        """Bytes of one position's slice of the input: rows x in feature."""
        return self.rows * self.in_feature * self.element_bytes

    def output_bytes(self) -> int:
        """Bytes of the convolution's result."""
        return self.rows * self.out_feature * self.element_bytes

    def kernel_bytes(self) -> int:
        """Bytes of the kernel."""
        return self.positions * self.in_feature * self.out_feature * self.element_bytes


def element_type(shape: Shape) -> PrimitiveType:
    """The element type of array `shape` (convolutions and their operands are arrays)."""
    assert shape.element_type is not None, f"convolution shapes are arrays, got {shape}"
    return shape.element_type


def geometry(conv: HloInstruction) -> ConvGeometry:
    """The sizes of convolution `conv`."""
    labels: ConvDimLabels = conv.attrs["dim_labels"]
    lhs, rhs = conv.operands
    window = conv.attrs.get("window")
    return ConvGeometry(
        batch=lhs.shape.dims[labels.input_batch],
        in_feature=lhs.shape.dims[labels.input_feature],
        out_feature=rhs.shape.dims[labels.kernel_output_feature],
        out_spatial=tuple(conv.shape.dims[d] for d in labels.output_spatial),
        window=tuple(window.dims) if window is not None else (),
        element_bytes=element_type(conv.shape).byte_size)


def dot_form(conv: HloInstruction, group: int | None = None) -> str:
    """Which of the forms of the module docstring lowers `conv` in groups of `group` window
    positions (None: all). Batch-feature only while the kernel slices repeated per batch
    element take no more bytes than the output (else transposed: one more output-sized
    buffer and a transpose instead)."""
    labels: ConvDimLabels = conv.attrs["dim_labels"]
    rank = conv.shape.rank
    if labels.output_feature == rank - 1:
        return FEATURE_LAST
    if labels.output_feature == 0:
        return FEATURE_FIRST
    if labels.output_batch == 0 and labels.output_feature == 1:
        geo = geometry(conv)
        g = geo.positions if group is None else min(group, geo.positions)
        if geo.batch * geo.kernel_bytes() * g <= geo.output_bytes() * geo.positions:
            return BATCH_FEATURE
    return TRANSPOSED


def _arr(pt: PrimitiveType, dims: tuple[int, ...] | list[int]) -> Shape:
    return Shape.array(pt, tuple(dims))


def _transpose(comp: HloComputation, x: HloInstruction, perm: list[int]) -> HloInstruction:
    if perm == list(range(len(perm))):
        return x
    dims = [x.shape.dims[p] for p in perm]
    return comp.add(Opcode.TRANSPOSE, _arr(element_type(x.shape), dims), [x],
                    {"dimensions": tuple(perm)})


def _reshape(comp: HloComputation, x: HloInstruction, dims: list[int]) -> HloInstruction:
    if list(x.shape.dims) == dims:
        return x
    return comp.add(Opcode.RESHAPE, _arr(element_type(x.shape), dims), [x])


class _Builder:
    """Emits one convolution's lowering into `comp` (see the module docstring)."""

    def __init__(self, comp: HloComputation, conv: HloInstruction, group: int):
        self.comp, self.conv = comp, conv
        self.labels: ConvDimLabels = conv.attrs["dim_labels"]
        self.geo = geometry(conv)
        self.pt = element_type(conv.shape)
        self.form = dot_form(conv, group)
        labels, ns = self.labels, len(self.labels.output_spatial)
        # the non-feature dims of the result as tokens: -1 batch, i >= 0 spatial dim i
        spatial_of = {d: i for i, d in enumerate(labels.output_spatial)}
        if self.form in (FEATURE_LAST, FEATURE_FIRST):
            self.rest = [-1 if d == labels.output_batch else spatial_of[d]
                         for d in range(conv.shape.rank) if d != labels.output_feature]
        else:  # batch first, then the spatial dims in output (BATCH_FEATURE) or label order
            order = [d for d in range(conv.shape.rank) if d not in (labels.output_batch,
                                                                    labels.output_feature)]
            self.rest = [-1] + ([spatial_of[d] for d in order] if self.form == BATCH_FEATURE
                                else list(range(ns)))
        self.x = self._padded_input()

    def _positions_dim(self) -> int:
        """Where the positions dim sits in a patch matrix (the in-feature dim follows it)."""
        return {FEATURE_FIRST: 0, BATCH_FEATURE: 1}.get(self.form, len(self.rest))

    def _size(self, token: int) -> int:
        return self.geo.batch if token < 0 else self.geo.out_spatial[token]

    def _padded_input(self) -> HloInstruction:
        """The input transposed to the patch order (without the positions dim), padded."""
        labels, geo = self.labels, self.geo
        in_dim = [labels.input_batch if t < 0 else labels.input_spatial[t] for t in self.rest]
        at = self._positions_dim()  # the in-feature dim follows the positions dim
        perm = in_dim[:at] + [labels.input_feature] + in_dim[at:]
        self.x_tokens = self._tokens_of(perm)
        x = _transpose(self.comp, self.conv.operands[0], perm)
        if not any(d.pad_low or d.pad_high or d.base_dilation != 1 for d in geo.window):
            return x
        zero = self.comp.add(Opcode.CONSTANT, _arr(self.pt, ()), (),
                             {"literal": Literal(np.zeros((), self.pt.dtype))})
        cfg, dims = [], []
        for t, size in zip(self.x_tokens, x.shape.dims):
            # base dilation (lhs_dilate) is interior padding of the input
            d = None if t is None or t < 0 else geo.window[t]
            lo, hi, inner = (0, 0, 0) if d is None else (d.pad_low, d.pad_high,
                                                          d.base_dilation - 1)
            cfg.append((lo, hi, inner))
            dims.append(size + lo + hi + max(0, size - 1) * inner)
        return self.comp.add(Opcode.PAD, _arr(self.pt, dims), [x, zero],
                             {"padding": PaddingConfig(tuple(cfg))})

    def _tokens_of(self, perm: list[int]) -> list[int | None]:
        """Token per input dim in `perm`: -1 batch, i spatial i, None the feature."""
        labels = self.labels
        spatial_of = {d: i for i, d in enumerate(labels.input_spatial)}
        return [-1 if d == labels.input_batch else None if d == labels.input_feature
                else spatial_of[d] for d in perm]

    def _slice(self, pos: tuple[int, ...]) -> HloInstruction:
        """The input elements window position `pos` meets, in the order of `self.x`."""
        geo, sl, dims = self.geo, [], []
        for t, size in zip(self.x_tokens, self.x.shape.dims):
            if t is None or t < 0:
                sl.append(SliceDim(0, size, 1))
                dims.append(size)
                continue
            d, out = geo.window[t], geo.out_spatial[t]
            start = pos[t] * d.window_dilation
            sl.append(SliceDim(start, start + (out - 1) * d.stride + 1, d.stride))
            dims.append(out)
        return self.comp.add(Opcode.SLICE, _arr(self.pt, dims), [self.x], {"slice": tuple(sl)})

    def _patches(self, group: list[tuple[int, ...]]) -> tuple[HloInstruction, int]:
        """The group's patch matrix and the index of its positions dim (the in-feature dim
        follows it)."""
        at = self._positions_dim()
        pieces = []
        for pos in group:
            s = self._slice(pos)
            dims = list(s.shape.dims)
            pieces.append(_reshape(self.comp, s, dims[:at] + [1] + dims[at:]))
        if len(pieces) == 1:
            return pieces[0], at
        dims = list(pieces[0].shape.dims)
        dims[at] = len(pieces)
        return self.comp.add(Opcode.CONCATENATE, _arr(self.pt, dims), pieces,
                             {"dimensions": (at,)}), at

    def _kernel(self, first: int, count: int) -> HloInstruction:
        """Positions [first, first + count) of the kernel: [g, in f, out f] for feature-last
        and transposed, [out f, g, in f] for feature-first, that broadcast over the batch for
        batch-feature."""
        labels, geo, rhs = self.labels, self.geo, self.conv.operands[1]
        ksp = list(labels.kernel_spatial)
        i, o = labels.kernel_input_feature, labels.kernel_output_feature
        out_first = self.form in (FEATURE_FIRST, BATCH_FEATURE)
        w = _transpose(self.comp, rhs, [o, *ksp, i] if out_first else [*ksp, i, o])
        pd = 1 if out_first else 0  # the positions dim
        dims = ([geo.out_feature, geo.positions, geo.in_feature] if out_first
                else [geo.positions, geo.in_feature, geo.out_feature])
        w = _reshape(self.comp, w, dims)
        if count != geo.positions:
            sl = [SliceDim(0, n, 1) for n in dims]
            sl[pd] = SliceDim(first, first + count, 1)
            dims[pd] = count
            w = self.comp.add(Opcode.SLICE, _arr(self.pt, dims), [w], {"slice": tuple(sl)})
        if self.form == BATCH_FEATURE:
            w = self.comp.add(Opcode.BROADCAST, _arr(self.pt, [geo.batch, *dims]), [w],
                              {"dimensions": (1, 2, 3)})
        return w

    def _dot(self, patches: HloInstruction, at: int, w: HloInstruction) -> HloInstruction:
        geo, rest = self.geo, [self._size(t) for t in self.rest]
        meta = [kv for kv in self.conv.extra if kv[0] == "metadata"]
        if self.form == FEATURE_FIRST:
            return self.comp.add(Opcode.DOT, _arr(self.pt, [geo.out_feature, *rest]),
                                 [w, patches], {"lhs_contracting_dims": (1, 2),
                                                "rhs_contracting_dims": (0, 1)}, extra=meta)
        if self.form == BATCH_FEATURE:
            return self.comp.add(Opcode.DOT, _arr(self.pt, [geo.batch, geo.out_feature,
                                                            *rest[1:]]),
                                 [w, patches], {"lhs_batch_dims": (0,), "rhs_batch_dims": (0,),
                                                "lhs_contracting_dims": (2, 3),
                                                "rhs_contracting_dims": (1, 2)}, extra=meta)
        return self.comp.add(Opcode.DOT, _arr(self.pt, [*rest, geo.out_feature]), [patches, w],
                             {"lhs_contracting_dims": (at, at + 1),
                              "rhs_contracting_dims": (0, 1)}, extra=meta)

    def _to_output(self, y: HloInstruction) -> HloInstruction:
        """`y` in the convolution's output dim order (and layout)."""
        labels, conv = self.labels, self.conv
        if self.form == TRANSPOSED:  # y is [batch, spatial..., out feature]
            perm = [0] * conv.shape.rank
            perm[labels.output_batch] = 0
            for i, d in enumerate(labels.output_spatial):
                perm[d] = 1 + i
            perm[labels.output_feature] = conv.shape.rank - 1
            y = _transpose(self.comp, y, perm)
        if y.shape != conv.shape:  # another layout: XLA's optimized HLO may ask for one
            y = self.comp.add(Opcode.COPY, conv.shape, [y])
        return y

    def build(self, group: int) -> HloInstruction:
        positions = list(product(*(range(d.size) for d in self.geo.window)))
        acc = None
        for first in range(0, len(positions), group):
            chunk = positions[first:first + group]
            patches, at = self._patches(chunk)
            w = self._kernel(first, len(chunk))
            if acc is not None:
                # the group's operands only once the sum so far is computed: the fusion
                # passes then fuse neither the adds into one kernel nor the groups' patch
                # fusions into one multi-output fusion, and the schedule keeps one group live
                for inst in (patches, w):
                    inst.add_control_predecessor(acc)
            d = self._dot(patches, at, w)
            acc = d if acc is None else self.comp.add(Opcode.ADD, d.shape, [acc, d])
        assert acc is not None
        return self._to_output(acc)


def lower_convolution(comp: HloComputation, conv: HloInstruction, group: int) -> HloInstruction:
    """Add the instructions computing `conv` (a convolution of `comp` that
    `conv_to_dot.rewritable` accepts) as groups of `group` window positions (see the module
    docstring) to `comp`; returns the instruction with the convolution's value."""
    group = max(1, min(group, geometry(conv).positions))
    b = _Builder(comp, conv, group)
    out = b.build(group)
    log.debug("convolution %s -> %s, %d-position groups", conv.name, b.form, group)
    return out
