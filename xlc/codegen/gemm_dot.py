"""Map an HLO `dot` onto a `GemmSpec` (xlc/codegen/gemm.py) by strides alone.

XLA's DotGeneral output dims are [batch..., lhs free..., rhs free...]. The generated GEMM has
one batch, one m, one n and one k dim, each with an element stride per operand; several HLO
dims of a group (e.g. two contracting dims) become one GEMM dim when, in every tensor they
belong to, they are nested like one row-major dim (stride[outer] == stride[inner] *
size[inner]; size-1 dims are ignored). Layouts (minor_to_major) are honoured, so transposed
operands map to strides with no copy.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence

from xlc.codegen.gemm import GemmSpec
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType, Shape, default_layout

log = logging.getLogger("xlc.codegen")


def element_strides(shape: Shape) -> list[int]:
    """Element stride of every logical dim of an array shape in its physical layout."""
    lay = shape.layout or default_layout(shape.rank)
    out = [0] * shape.rank
    s = 1
    for d in lay.minor_to_major:
        out[d] = s
        s *= shape.dims[d]
    return out


def merge_dims(sizes: Sequence[int], strides: Sequence[Sequence[int]]
               ) -> tuple[int, list[int]] | None:
    """Merge a group of dims (outermost first) into one: `sizes[i]` is dim i's size and
    `strides[t][i]` its stride in tensor t. Returns (total size, stride per tensor), or None
    when some tensor does not nest the dims contiguously. An empty group is (1, zeros)."""
    keep = [i for i, s in enumerate(sizes) if s != 1]
    total = 1
    for s in sizes:
        total *= s
    if not keep:
        return total, [0] * len(strides)
    for outer, inner in zip(keep, keep[1:]):
        for st in strides:
            if st[outer] != st[inner] * sizes[inner]:
                return None
    return total, [st[keep[-1]] for st in strides]


def gemm_spec_for_dot(inst: HloInstruction, accumulate: bool = False) -> GemmSpec | None:
    """The GemmSpec computing `inst` (a dot), or None when it is not expressible: element
    types other than f32/f64, mixed operand/result types, or dim groups that do not merge
    (see `merge_dims`). Operands and result are read/written in their own layouts."""
    lhs, rhs = inst.operands
    pt = inst.shape.element_type
    if pt not in (PrimitiveType.F32, PrimitiveType.F64) or any(
            op.shape.element_type is not pt for op in (lhs, rhs)):
        return None
    a = inst.attrs
    lb = [int(d) for d in a.get("lhs_batch_dims", ())]
    rb = [int(d) for d in a.get("rhs_batch_dims", ())]
    lc = [int(d) for d in a.get("lhs_contracting_dims", ())]
    rc = [int(d) for d in a.get("rhs_contracting_dims", ())]
    lf = [d for d in range(lhs.shape.rank) if d not in lb + lc]
    rf = [d for d in range(rhs.shape.rank) if d not in rb + rc]
    ls, rs, os_ = (element_strides(x.shape) for x in (lhs, rhs, inst))
    nb, nm = len(lb), len(lf)
    ob, om, on = (list(range(nb)), list(range(nb, nb + nm)),
                  list(range(nb + nm, inst.shape.rank)))
    ld, rd = lhs.shape.dims, rhs.shape.dims
    groups = [
        merge_dims([ld[d] for d in lb], [[ls[d] for d in lb], [rs[d] for d in rb],
                                         [os_[d] for d in ob]]),
        merge_dims([ld[d] for d in lf], [[ls[d] for d in lf], [os_[d] for d in om]]),
        merge_dims([rd[d] for d in rf], [[rs[d] for d in rf], [os_[d] for d in on]]),
        merge_dims([ld[d] for d in lc], [[ls[d] for d in lc], [rs[d] for d in rc]]),
    ]
    if any(g is None for g in groups):
        log.debug("dot %s: dims do not merge into a GEMM", inst.name)
        return None
    (batch, (sa, sb, sc)), (m, (am, cm)), (n, (bn, cn)), (k, (ak, bk)) = groups  # type: ignore
    return GemmSpec(m, n, k, batch, (sa, am, ak), (sb, bk, bn), (sc, cm, cn), pt, accumulate)
