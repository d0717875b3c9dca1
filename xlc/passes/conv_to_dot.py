"""Convolution as a matrix product (im2col): the CPU backend's way to run convolutions at GEMM
speed instead of as direct loops (a 3x3 conv of [8,32,32,32] by 64 filters: 130 ms direct,
~2 ms this way on the 2-core test VM).

A `convolution` (no feature or batch groups, no base dilation, no window reversal, a float
type shared by operands and result) becomes

    x' = transpose(input)              to [batch, spatial..., feature]
    x' = pad(x', 0)                    the window's padding (negative padding crops)
    s_j = slice(x', window offset j, strided by the window stride), one per window position
    P  = concatenate(reshape(s_j))     the patches: [batch, out spatial..., positions, feature]
    W  = reshape(transpose(kernel))    [positions, in feature, out feature]
    y  = dot(P, W)                     contracting (positions, feature): [batch, out spatial..,
                                       out feature]
    out = transpose(y)                 to the convolution's output dimension order

The transposes, pad, slices and concatenate fuse into one loop fusion that writes P; the dot
runs on the packed GEMM (the contracting dims are contiguous in both P and W). P is
`positions` times the input, so convolutions whose patches would exceed MAX_PATCH_BYTES keep
the direct emitter.

Requires: a verified module. Guarantees: the same values up to the reassociation of each
output's sum; every rewritten convolution's users see an instruction of the same shape.
"""
from __future__ import annotations

import logging
from itertools import product
from math import prod

import numpy as np

from xlc.hlo.attrs import Literal, PaddingConfig, SliceDim
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape

log = logging.getLogger("xlc.passes.conv_to_dot")

MAX_PATCH_BYTES = 64 << 20
"""Largest patch matrix (input x window positions) materialized for one convolution."""

_FLOATS = (PrimitiveType.F32, PrimitiveType.F64)


def rewritable(conv: HloInstruction) -> bool:
    """Whether `conv` is lowered by this pass (see the module docstring)."""
    lhs, rhs = conv.operands
    pt = conv.shape.element_type
    window = conv.attrs.get("window")
    dims = window.dims if window is not None else ()
    if pt not in _FLOATS or lhs.shape.element_type is not pt or rhs.shape.element_type is not pt:
        return False
    if int(conv.attrs.get("feature_group_count", 1)) != 1 or \
            int(conv.attrs.get("batch_group_count", 1)) != 1:
        return False
    if any(d.base_dilation != 1 or d.reversal for d in dims):
        return False
    return _patch_bytes(conv) <= MAX_PATCH_BYTES


def _patch_bytes(conv: HloInstruction) -> int:
    labels = conv.attrs["dim_labels"]
    out = conv.shape
    window = conv.attrs.get("window")
    positions = prod(d.size for d in window.dims) if window is not None else 1
    rows = out.dims[labels.output_batch] * prod(out.dims[d] for d in labels.output_spatial)
    features = conv.operands[0].shape.dims[labels.input_feature]
    return rows * positions * features * _element_type(out).byte_size


class ConvToDot:
    """Pass: lower convolutions to patches + dot (see the module docstring)."""

    name = "conv-to-dot"

    def run(self, module: HloModule) -> bool:
        """Rewrite every `rewritable` convolution of every non-fusion computation."""
        changed = False
        for comp in module.computations:
            if comp.is_fusion_computation:
                continue
            for inst in list(comp.instructions):
                if inst.opcode is Opcode.CONVOLUTION and rewritable(inst):
                    comp.replace_instruction(inst, _lower(comp, inst))
                    changed = True
        return changed


def _element_type(shape: Shape) -> PrimitiveType:
    """The element type of array `shape` (convolutions and their operands are arrays)."""
    assert shape.element_type is not None, f"convolution shapes are arrays, got {shape}"
    return shape.element_type


def _arr(pt: PrimitiveType, dims: tuple[int, ...] | list[int]) -> Shape:
    return Shape.array(pt, tuple(dims))


def _transpose(comp: HloComputation, x: HloInstruction, perm: list[int]) -> HloInstruction:
    if perm == list(range(len(perm))):
        return x
    dims = [x.shape.dims[p] for p in perm]
    return comp.add(Opcode.TRANSPOSE, _arr(_element_type(x.shape), dims), [x],
                    {"dimensions": tuple(perm)})


def _lower(comp: HloComputation, conv: HloInstruction) -> HloInstruction:
    """The instructions computing `conv` as patches @ kernel; returns the new root."""
    lhs, rhs = conv.operands
    pt = _element_type(conv.shape)
    labels = conv.attrs["dim_labels"]
    wdims = conv.attrs["window"].dims if conv.attrs.get("window") is not None else ()
    ns = len(labels.input_spatial)
    out_spatial = [conv.shape.dims[d] for d in labels.output_spatial]
    batch = lhs.shape.dims[labels.input_batch]
    feat = lhs.shape.dims[labels.input_feature]
    ofeat = rhs.shape.dims[labels.kernel_output_feature]
    # input as [batch, spatial..., feature], padded by the window's padding
    x = _transpose(comp, lhs, [labels.input_batch, *labels.input_spatial, labels.input_feature])
    if any(d.pad_low or d.pad_high for d in wdims):
        zero = comp.add(Opcode.CONSTANT, _arr(pt, ()), (),
                        {"literal": Literal(np.zeros((), pt.dtype))})
        cfg = PaddingConfig(((0, 0, 0),) + tuple((d.pad_low, d.pad_high, 0) for d in wdims)
                            + ((0, 0, 0),))
        padded = [x.shape.dims[0]] + [x.shape.dims[1 + i] + d.pad_low + d.pad_high
                                      for i, d in enumerate(wdims)] + [feat]
        x = comp.add(Opcode.PAD, _arr(pt, padded), [x, zero], {"padding": cfg})
    # one strided slice per window position, as [batch, out spatial..., 1, feature]
    pieces = []
    one_pos = [batch, *out_spatial, 1, feat]
    for pos in product(*(range(d.size) for d in wdims)):
        sl = [SliceDim(0, batch, 1)]
        for i, (j, d) in enumerate(zip(pos, wdims)):
            start = j * d.window_dilation
            sl.append(SliceDim(start, start + (out_spatial[i] - 1) * d.stride + 1, d.stride))
        sl.append(SliceDim(0, feat, 1))
        s = comp.add(Opcode.SLICE, _arr(pt, [batch, *out_spatial, feat]), [x],
                     {"slice": tuple(sl)})
        pieces.append(comp.add(Opcode.RESHAPE, _arr(pt, one_pos), [s]))
    positions = len(pieces)
    patches = pieces[0] if positions == 1 else comp.add(
        Opcode.CONCATENATE, _arr(pt, [batch, *out_spatial, positions, feat]), pieces,
        {"dimensions": (ns + 1,)})
    # kernel as [positions, in feature, out feature]
    w = _transpose(comp, rhs, [*labels.kernel_spatial, labels.kernel_input_feature,
                               labels.kernel_output_feature])
    w = comp.add(Opcode.RESHAPE, _arr(pt, [positions, feat, ofeat]), [w])
    y = comp.add(Opcode.DOT, _arr(pt, [batch, *out_spatial, ofeat]), [patches, w],
                 {"lhs_contracting_dims": (ns + 1, ns + 2), "rhs_contracting_dims": (0, 1)},
                 extra=[kv for kv in conv.extra if kv[0] == "metadata"])
    # [batch, out spatial..., out feature] -> the convolution's output order
    perm = [0] * conv.shape.rank
    perm[labels.output_batch] = 0
    for i, d in enumerate(labels.output_spatial):
        perm[d] = 1 + i
    perm[labels.output_feature] = ns + 1
    out = _transpose(comp, y, perm)
    if out.shape != conv.shape:  # another layout: XLA's optimized HLO may ask for one
        out = comp.add(Opcode.COPY, conv.shape, [out])
    log.debug("convolution %s -> %d-position patches @ kernel", conv.name, positions)
    return out
