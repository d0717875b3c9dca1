"""Transpose rules for the index-driven ops of reverse-mode autodiff (see `autodiff_rules.py`
for the calling convention): scatter (add, subtract, overwrite, multiply, min, max), sort (one or
several operands) and top-k.

Scatter follows XLA: an update whose window is out of bounds is skipped, so its cotangent is
zero (JAX's FILL_OR_DROP mode). Overwrite scatters with repeated indices give the cotangent to
the update that won, found by scattering update ids the same way (JAX's `_scatter_jvp`).
Sorts un-permute the cotangent with the sort's own permutation: the keys are sorted again with
an iota alongside, and the cotangent is sorted by that permutation.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlc.errors import UnsupportedOpError
from xlc.frontend import lax as _lax
from xlc.frontend import lax_autodiff_ops as _ops
from xlc.frontend.autodiff_rules_nn import monoid_of
from xlc.frontend.staging import trace_scalar_computation
from xlc.frontend.tracer import Tracer, emit, infer
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType as PT

__all__ = ["RULES", "TUPLE_RULES"]


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


# ---- scatter -------------------------------------------------------------------------------
class _Scatter:
    """The dimension numbers of one scatter instruction, and the gather that reads back, for
    every update element, the operand element it was scattered to."""

    def __init__(self, inst: HloInstruction, operand: Tracer, idx: Tracer, updates: Tracer):
        a = inst.attrs
        if a.get("input_batching_dims") or len(inst.operands) != 3:
            raise UnsupportedOpError(f"xlc.grad: no derivative rule for a scatter with "
                                     f"batching dims or several operands ({inst.name}) yet")
        self.uwd = tuple(int(d) for d in a["update_window_dims"])
        self.iwd = tuple(int(d) for d in a["inserted_window_dims"])
        self.sdod = tuple(int(d) for d in a["scatter_dims_to_operand_dims"])
        self.ivd = int(a["index_vector_dim"])
        self.operand, self.idx, self.updates = operand, idx, updates
        self.scatter_dims = tuple(d for d in range(updates.ndim) if d not in self.uwd)
        sizes, pos = [], 0
        for d in range(operand.ndim):
            if d in self.iwd:
                sizes.append(1)
            else:
                sizes.append(updates.shape[self.uwd[pos]])
                pos += 1
        self.slice_sizes = sizes

    def in_bounds(self) -> Tracer:
        """pred, the updates' shape: whether each update's window lies inside the operand
        (XLA skips the others)."""
        xnp = _np()
        idx = self.idx
        ok = None
        for k, d in enumerate(self.sdod):
            if self.ivd < idx.ndim:
                start = [0] * idx.ndim
                limit = list(idx.shape)
                start[self.ivd], limit[self.ivd] = k, k + 1
                comp = _lax.reshape(_lax.slice(idx, start, limit),
                                    [n for i, n in enumerate(idx.shape) if i != self.ivd])
            else:
                comp = idx
            top = self.operand.shape[d] - self.slice_sizes[d]
            here = xnp.logical_and(xnp.greater_equal(comp, 0), xnp.less_equal(comp, top))
            ok = here if ok is None else xnp.logical_and(ok, here)
        if ok is None:
            ok = xnp.full(tuple(self.updates.shape[d] for d in self.scatter_dims), True)
        return _lax.broadcast_in_dim(ok, self.updates.shape, self.scatter_dims)

    def gather(self, t: Tracer) -> Tracer:
        """t (operand-shaped) read at every update element's destination, zero for updates
        that were skipped."""
        g = _lax.gather(t, self.idx, self.uwd, self.iwd, self.sdod, self.ivd, self.slice_sizes)
        return _np().where(self.in_bounds(), g, _np().zeros_like(g))

    def scatter(self, target: Tracer, updates: Tracer, combiner: Opcode | None) -> Tracer:
        """The same scatter of `updates` into `target` with `combiner` (None: overwrite)."""
        return _lax.scatter(target, self.idx, updates, self.uwd, self.iwd, self.sdod, self.ivd,
                            combiner)


def _scatter(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
             ) -> Sequence[Any]:
    """Add (subtract): the operand keeps the cotangent, updates gather it (negated).
    Overwrite: the operand's cotangent is masked where an update landed, each update gathers
    it where it won.
    Multiply: the cotangent scatter-multiplied by the updates, and gathered times the other
    factors. Min/max: shared equally among the operand and the updates equal to the result
    (as jax.lax.scatter_min/max)."""
    x, idx, u = ops
    s = _Scatter(inst, x, idx, u)
    comp = inst.called[0]
    xnp = _np()
    zero = xnp.zeros_like(ct)
    kind = "set" if comp.root is comp.parameters[1] else monoid_of(comp)
    if kind is Opcode.ADD:
        return ct, None, s.gather(ct)
    if kind is Opcode.SUBTRACT and comp.root is not None and \
            comp.root.operands[0] is comp.parameters[0]:
        return ct, None, xnp.negative(s.gather(ct))
    if kind == "set":
        n = int(np.prod([u.shape[d] for d in s.scatter_dims], dtype=np.int64))
        ids = _lax.reshape(xnp.add(_lax.iota(PT.S32, n), np.int32(1)),
                           [u.shape[d] for d in s.scatter_dims])
        ids = _lax.broadcast_in_dim(ids, u.shape, s.scatter_dims)
        landed = s.scatter(xnp.zeros(x.shape, np.int32), ids, None)
        won = xnp.equal(s.gather(landed), ids)
        return (xnp.where(xnp.equal(landed, 0), ct, zero), None,
                xnp.where(won, s.gather(ct), xnp.zeros_like(u)))
    if kind is Opcode.MULTIPLY:
        nonzero = xnp.not_equal(u, 0)
        safe = xnp.where(nonzero, u, xnp.ones_like(u))
        others = xnp.where(nonzero, xnp.divide(s.gather(xnp.multiply(ct, out)), safe),
                           s.gather(xnp.multiply(ct, x)))
        return s.scatter(ct, u, Opcode.MULTIPLY), None, others
    if kind in (Opcode.MAXIMUM, Opcode.MINIMUM):
        won = xnp.logical_and(s.in_bounds(), xnp.equal(u, s.gather(out)))
        kept = xnp.equal(x, out)
        count = s.scatter(xnp.astype(kept, ct.dtype), xnp.astype(won, ct.dtype), Opcode.ADD)
        share = xnp.divide(ct, xnp.where(xnp.equal(count, 0), xnp.ones_like(count), count))
        return (xnp.where(kept, share, zero), None,
                xnp.where(won, s.gather(share), xnp.zeros_like(u)))
    raise UnsupportedOpError(f"xlc.grad: no derivative rule for a scatter whose combiner is "
                             f"not set/add/subtract/multiply/min/max ({inst.name})")


# ---- sort and top-k ------------------------------------------------------------------------
def _permutation(inst: HloInstruction, ops: list[Tracer]) -> Tracer:
    """The sort's permutation along its dimension: the operands sorted again (stably, by the
    same comparator) with an s32 iota alongside."""
    dim = int(inst.attrs["dimensions"][0])
    comp = inst.called[0]
    n = len(ops)

    def compare(*ps: Tracer) -> Tracer:
        return _ops.map_computation(comp, ps[:2 * n])[0]

    types = [o.ptype for o in ops for _ in (0, 1)] + [PT.S32, PT.S32]
    comparator, _ = trace_scalar_computation("compare", compare, types, "sort comparator")
    iota = _lax.broadcasted_iota(PT.S32, ops[0].shape, dim)
    shapes = [o.aval for o in ops] + [iota.aval]
    r = emit(Opcode.SORT, infer("infer_sort", shapes, dim), [*ops, iota],
             {"dimensions": (dim,), "is_stable": True}, (comparator,), op_name="sort")
    return _lax.get_tuple_element(r, n)


def _unpermute(perm: Tracer, dim: int, cts: Sequence[Tracer | None]) -> list[Tracer | None]:
    """The cotangents put back in the unsorted order: sorted by the permutation."""
    live = [c for c in cts if c is not None]
    if not live:
        return [None] * len(cts)
    back = iter(_lax.sort([perm, *live], dim, num_keys=1)[1:])
    return [next(back) if c is not None else None for c in cts]


def _sort_tuple(inst: HloInstruction, elems: list[Tracer], ops: list[Tracer],
                parts: list[Tracer | None]) -> Sequence[Any]:
    """Every operand's cotangent is its sorted output's cotangent un-permuted."""
    live = [p if p is not None and (o.ptype.is_float or o.ptype.is_complex) else None
            for o, p in zip(ops, parts)]
    if all(p is None for p in live):
        return [None] * len(ops)
    return _unpermute(_permutation(inst, ops), int(inst.attrs["dimensions"][0]), live)


def _sort(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer) -> Sequence[Any]:
    return _sort_tuple(inst, [out], ops, [ct])


def _topk(inst: HloInstruction, elems: list[Tracer], ops: list[Tracer],
          parts: list[Tracer | None]) -> Sequence[Any]:
    """The values' cotangent scatter-added at the indices top-k returned (last axis)."""
    ct = parts[0]
    if ct is None:
        return [None]
    x, idx = ops[0], elems[1]
    r = x.ndim
    coords = [_lax.broadcasted_iota(idx.ptype, idx.shape, d) for d in range(r - 1)] + [idx]
    coords = [_lax.reshape(c, idx.shape + (1,)) for c in coords]
    index = _lax.concatenate(coords, r)
    zeros = _np().zeros(x.shape, ct.dtype)
    return [_lax.scatter(zeros, index, ct, (), tuple(range(r)), tuple(range(r)), r,
                         Opcode.ADD)]


RULES: dict[Opcode, Callable[..., Sequence[Any]]] = {
    Opcode.SCATTER: _scatter, Opcode.SORT: _sort,
}
"""Single-result rules of this module (merged into `autodiff_rules.RULES`)."""

TUPLE_RULES: dict[Opcode, Callable[..., Sequence[Any]]] = {
    Opcode.SORT: _sort_tuple, Opcode.TOPK: _topk,
}
"""Multi-result rules of this module (merged into `autodiff_rules.TUPLE_RULES`)."""
