"""Map an HLO `dot` onto a `GemmSpec` (xlc/backend_cpu/gemm.py) by strides alone.

XLA's DotGeneral output dims are [batch..., lhs free..., rhs free...]. The generated GEMM has
one batch, one m, one n and one k dim, each with an element stride per operand; several HLO
dims of a group (e.g. two contracting dims) become one GEMM dim when, in every tensor they
belong to, they are nested like one row-major dim (stride[outer] == stride[inner] *
size[inner]; size-1 dims are ignored). Layouts (minor_to_major) are honoured, so transposed
operands map to strides with no copy.

`gemm_plan_for_dot` goes further: of the batch, lhs-free and rhs-free groups only the
innermost nested run of dims must merge; the dims outside it become *loops* around the GEMM
call (each iteration offsets the three pointers by that dim's strides). Attention's
`dot(q[b, t, h, d], k[b, s, h, d])` with batch dims (b, h), which no single stride can
describe, is thus 8 calls of an 8-batch GEMM instead of a scalar loop nest. Contracting dims
must still merge completely.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from xlc.backend_cpu.gemm import GemmSpec, writes_over_a
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType, Shape, default_layout

log = logging.getLogger("xlc.backend_cpu")


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


@dataclass(frozen=True)
class DotGemm:
    """A dot as GEMM calls: `spec` per call, inside `loops` (outermost first) of
    (size, lhs stride, rhs stride, output stride) in elements."""

    spec: GemmSpec
    loops: tuple[tuple[int, int, int, int], ...] = ()

    @property
    def writes_over_lhs(self) -> bool:
        """One GEMM call that may store its result over its lhs (`gemm.writes_over_a`)."""
        return not self.loops and writes_over_a(self.spec)

    @property
    def calls(self) -> int:
        """How many GEMM calls the loops make."""
        n = 1
        for size, *_ in self.loops:
            n *= size
        return n


def _inner_run(sizes: Sequence[int], strides: Sequence[Sequence[int]]) -> int:
    """How many of the group's dims (counted from the outermost) lie outside its innermost
    nested run: dims [returned:] merge (see `merge_dims`), the ones before do not."""
    start = len(sizes)
    while start > 0 and merge_dims(sizes[start - 1:], [st[start - 1:] for st in strides]):
        start -= 1
    return start


def gemm_plan_for_dot(inst: HloInstruction, accumulate: bool = False) -> DotGemm | None:
    """The GEMM calls computing `inst` (a dot; see the module docstring), or None for element
    types other than f32/f64, mixed operand/result types, or contracting dims that do not
    merge. Operands and result are read/written in their own layouts."""
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
    ob, om, on = (list(range(nb)), list(range(nb + nm)),
                  list(range(nb + nm, inst.shape.rank)))
    om = om[nb:]
    ld, rd = lhs.shape.dims, rhs.shape.dims
    k = merge_dims([ld[d] for d in lc], [[ls[d] for d in lc], [rs[d] for d in rc]])
    if k is None:
        log.debug("dot %s: contracting dims do not merge into a GEMM", inst.name)
        return None
    loops: list[tuple[int, int, int, int]] = []
    merged = []
    # (sizes, lhs strides, rhs strides, output strides) of each loopable group
    groups = [
        ([ld[d] for d in lb], [ls[d] for d in lb], [rs[d] for d in rb], [os_[d] for d in ob]),
        ([ld[d] for d in lf], [ls[d] for d in lf], [0] * len(lf), [os_[d] for d in om]),
        ([rd[d] for d in rf], [0] * len(rf), [rs[d] for d in rf], [os_[d] for d in on]),
    ]
    for gi, (sizes, sa, sb, sc) in enumerate(groups):
        tensors = [[sa, sb, sc][t] for t in ((0, 1, 2), (0, 2), (1, 2))[gi]]
        start = _inner_run(sizes, tensors)
        loops += [(sizes[i], sa[i], sb[i], sc[i]) for i in range(start) if sizes[i] != 1]
        total, st = merge_dims(sizes[start:], [t[start:] for t in tensors])  # type: ignore[misc]
        full = [0, 0, 0]
        for t, v in zip(((0, 1, 2), (0, 2), (1, 2))[gi], st):
            full[t] = v
        merged.append((total, full))
    (batch, (ab, bb, cb)), (m, (am, _, cm)), (n, (_, bn, cn)) = merged
    kk, (ak, bk) = k
    spec = GemmSpec(m, n, kk, batch, (ab, am, ak), (bb, bk, bn), (cb, cm, cn), pt, accumulate)
    return DotGemm(spec, tuple(loops))


def gemm_spec_for_dot(inst: HloInstruction, accumulate: bool = False) -> GemmSpec | None:
    """The single GemmSpec computing `inst` (a dot), or None when it is not expressible as one
    call (see `gemm_plan_for_dot`; here every dim group must merge)."""
    plan = gemm_plan_for_dot(inst, accumulate)
    return plan.spec if plan is not None and not plan.loops else None
