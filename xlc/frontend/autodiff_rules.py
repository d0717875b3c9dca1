"""The transpose rules of reverse-mode autodiff (`autodiff.py`): one per differentiable
opcode of the traced HLO, `RULES`. A rule gets the instruction, its result and operands as
tracers and the result's cotangent, and returns one cotangent per operand (None where no
derivative flows), emitted as ordinary HLO through the tracer API, so the rules themselves can
be differentiated again.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlc.errors import UnsupportedOpError
from xlc.frontend import lax as _lax
from xlc.frontend.tracer import Tracer, emit
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode

__all__ = ["RULES", "Rule"]


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


Rule = Callable[[HloInstruction, Tracer, list[Tracer], Tracer], Sequence[Any]]
"""rule(inst, result tracer, operand tracers, result cotangent) -> operand cotangents (None:
no derivative)."""


def _add(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer) -> Sequence[Any]:
    return ct, ct


def _sub(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer) -> Sequence[Any]:
    return ct, _np().negative(ct)


def _mul(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer) -> Sequence[Any]:
    xnp = _np()
    return xnp.multiply(ct, ops[1]), xnp.multiply(ct, ops[0])


def _div(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer) -> Sequence[Any]:
    xnp = _np()
    a, b = ops
    return (xnp.divide(ct, b),
            xnp.negative(xnp.divide(xnp.multiply(ct, out), b)))


def _unary(fn: Callable[[Any, Tracer, Tracer, Tracer], Any]) -> Rule:
    def rule(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
             ) -> Sequence[Any]:
        return (fn(_np(), ops[0], out, ct),)
    return rule


def _unary_attrs(fn: Callable[[HloInstruction, Tracer], Any]) -> Rule:
    def rule(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
             ) -> Sequence[Any]:
        return (fn(inst, ct),)
    return rule


def _pow(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer) -> Sequence[Any]:
    xnp = _np()
    a, b = ops
    one = xnp.asarray(1, a.dtype)
    da = xnp.multiply(ct, xnp.multiply(b, xnp.power(a, xnp.subtract(b, one))))
    safe = xnp.where(xnp.equal(a, 0), xnp.ones_like(a), a)
    db = xnp.multiply(ct, xnp.where(xnp.equal(a, 0), xnp.zeros_like(a),
                                    xnp.multiply(out, xnp.log(safe))))
    return da, db


def _minmax(pick_a: Callable[[Any, Tracer, Tracer], Tracer]) -> Rule:
    def rule(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
             ) -> Sequence[Any]:
        xnp = _np()
        a, b = ops
        half = xnp.asarray(0.5, ct.dtype)
        wa = xnp.add(xnp.astype(pick_a(xnp, a, b), ct.dtype),
                     xnp.multiply(half, xnp.astype(xnp.equal(a, b), ct.dtype)))
        return xnp.multiply(ct, wa), xnp.multiply(ct, xnp.subtract(xnp.ones_like(wa), wa))
    return rule


def _select(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
            ) -> Sequence[Any]:
    xnp = _np()
    z = xnp.zeros_like(ct)
    return None, xnp.where(ops[0], ct, z), xnp.where(ops[0], z, ct)


def _convert(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
             ) -> Sequence[Any]:
    if not ops[0].ptype.is_float and not ops[0].ptype.is_complex:
        return (None,)
    return (_np().astype(ct, ops[0].dtype),)


def _broadcast(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
               ) -> Sequence[Any]:
    kept = tuple(int(d) for d in inst.attrs.get("dimensions", ()))
    summed = tuple(d for d in range(ct.ndim) if d not in kept)
    s = _np().sum(ct, axis=summed) if summed else ct
    return (_lax.reshape(s, ops[0].shape),)


def _reshape(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
             ) -> Sequence[Any]:
    return (_lax.reshape(ct, ops[0].shape),)


def _transpose(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
               ) -> Sequence[Any]:
    perm = [int(d) for d in inst.attrs["dimensions"]]
    return (_lax.transpose(ct, list(np.argsort(perm))),)


def _reduce(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
            ) -> Sequence[Any]:
    if len(ops) != 2:
        raise UnsupportedOpError(f"xlc.grad: no derivative rule for variadic reduce "
                                 f"({inst.name})")
    root = inst.called[0].root
    assert root is not None
    dims = tuple(int(d) for d in inst.attrs["dimensions"])
    x = ops[0]
    kept = tuple(d for d in range(x.ndim) if d not in dims)
    back = _lax.broadcast_in_dim(ct, x.shape, kept)
    xnp = _np()
    if root.opcode is Opcode.ADD:
        return back, None
    if root.opcode in (Opcode.MAXIMUM, Opcode.MINIMUM):
        hit = xnp.astype(xnp.equal(x, _lax.broadcast_in_dim(out, x.shape, kept)), ct.dtype)
        count = _lax.broadcast_in_dim(xnp.sum(hit, axis=dims), x.shape, kept)
        return xnp.divide(xnp.multiply(back, hit), count), None
    if root.opcode is Opcode.MULTIPLY:
        total = _lax.broadcast_in_dim(out, x.shape, kept)
        return xnp.divide(xnp.multiply(back, total), x), None
    raise UnsupportedOpError(f"xlc.grad: no derivative rule for a reduce with "
                             f"'{root.opcode.text}' ({inst.name})")


def _dot(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer) -> Sequence[Any]:
    """dot_general as an einsum: each operand's cotangent is the einsum of the result's
    cotangent with the other operand."""
    from xlc.frontend.numpy_linalg import einsum

    a, b = ops
    lb = [int(d) for d in inst.attrs.get("lhs_batch_dims", ())]
    rb = [int(d) for d in inst.attrs.get("rhs_batch_dims", ())]
    lc = [int(d) for d in inst.attrs.get("lhs_contracting_dims", ())]
    rc = [int(d) for d in inst.attrs.get("rhs_contracting_dims", ())]
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    ls = [""] * a.ndim
    rs = [""] * b.ndim
    for i, j in zip(lb, rb):
        ls[i] = rs[j] = next(letters)
    for i, j in zip(lc, rc):
        ls[i] = rs[j] = next(letters)
    for i in range(a.ndim):
        ls[i] = ls[i] or next(letters)
    for j in range(b.ndim):
        rs[j] = rs[j] or next(letters)
    out_s = [ls[i] for i in lb] + [ls[i] for i in range(a.ndim) if i not in lb + lc] + \
        [rs[j] for j in range(b.ndim) if j not in rb + rc]
    L, R, O = "".join(ls), "".join(rs), "".join(out_s)
    xnp = _np()
    da = xnp.astype(einsum(f"{O},{R}->{L}", ct, b), a.dtype)
    db = xnp.astype(einsum(f"{L},{O}->{R}", a, ct), b.dtype)
    return da, db


def _slice(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer) -> Sequence[Any]:
    x = ops[0]
    cfg = []
    for d, sd in enumerate(inst.attrs["slice"]):
        start, stride = int(sd.start), int(sd.stride)
        n = ct.shape[d]
        last = start + (n - 1) * stride if n else start - 1
        cfg.append((start, x.shape[d] - last - 1, stride - 1 if n > 1 else 0))
    return (_lax.pad(ct, 0, cfg),)


def _concat(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
            ) -> Sequence[Any]:
    d = int(inst.attrs["dimensions"][0])
    outs, at = [], 0
    for o in ops:
        start = [0] * ct.ndim
        limit = list(ct.shape)
        start[d], limit[d] = at, at + o.shape[d]
        outs.append(_lax.slice(ct, start, limit))
        at += o.shape[d]
    return outs


def _pad(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer) -> Sequence[Any]:
    cfg = inst.attrs["padding"].dims
    start, limit, strides = [], [], []
    for d, (lo, hi, interior) in enumerate(cfg):
        if lo < 0 or hi < 0:
            raise UnsupportedOpError(f"xlc.grad: no derivative rule for a pad with negative "
                                     f"edges ({inst.name})")
        start.append(lo)
        limit.append(ct.shape[d] - hi)
        strides.append(interior + 1)
    return _lax.slice(ct, start, limit, strides), None


def _dynamic_slice(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
                   ) -> Sequence[Any]:
    x, starts = ops[0], ops[1:]
    zeros = _np().zeros(x.shape, ct.dtype)
    back = _lax.dynamic_update_slice(zeros, ct, starts, allow_negative_indices=False)
    return [back] + [None] * len(starts)


def _dynamic_update_slice(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
                          ) -> Sequence[Any]:
    u, starts = ops[1], ops[2:]
    xnp = _np()
    ct_x = _lax.dynamic_update_slice(ct, xnp.zeros(u.shape, ct.dtype), starts,
                                     allow_negative_indices=False)
    ct_u = _lax.dynamic_slice(ct, starts, u.shape, allow_negative_indices=False)
    return [ct_x, ct_u] + [None] * len(starts)


def _gather(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer) -> Sequence[Any]:
    """A scatter-add of the cotangent at the (clamped, as the gather clamps) starts."""
    x, idx = ops
    a = inst.attrs
    if a.get("operand_batching_dims"):
        raise UnsupportedOpError(f"xlc.grad: no derivative rule for a gather with batching "
                                 f"dims ({inst.name}) yet")
    xnp = _np()
    smap = [int(d) for d in a["start_index_map"]]
    sizes = [int(d) for d in a["slice_sizes"]]
    ivd = int(a["index_vector_dim"])
    upper = np.array([x.shape[d] - sizes[d] for d in smap], dtype=idx.dtype)
    if ivd < idx.ndim:
        shape = [1] * idx.ndim
        shape[ivd] = len(smap)
        upper = upper.reshape(shape)
    else:
        upper = upper.reshape(())
    clamped = xnp.clip(idx, xnp.asarray(0, idx.dtype), xnp.asarray(upper, idx.dtype))
    back = _lax.scatter(xnp.zeros(x.shape, ct.dtype), clamped, ct,
                        update_window_dims=[int(d) for d in a["offset_dims"]],
                        inserted_window_dims=[int(d) for d in a["collapsed_slice_dims"]],
                        scatter_dims_to_operand_dims=smap, index_vector_dim=ivd,
                        combiner=Opcode.ADD)
    return back, None


def _reduce_window(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
                   ) -> Sequence[Any]:
    """A sliding-window sum (cumsum, average pooling) transposed: the cotangent, dilated by
    the strides and padded so each input element sees every window that covered it, summed
    over the window again with stride 1."""
    root = inst.called[0].root
    dims = inst.attrs["window"].dims
    undilated = all(d.window_dilation == 1 and d.base_dilation == 1 for d in dims)
    if len(ops) == 2 and root is not None and undilated and root.opcode in (Opcode.MAXIMUM,
                                                                            Opcode.MINIMUM):
        return _window_chooser(inst, ops, ct, root.opcode is Opcode.MAXIMUM), None
    if len(ops) != 2 or root is None or root.opcode is not Opcode.ADD or not undilated:
        what = "reduce-window" if root is None else f"reduce-window of '{root.opcode.text}'"
        raise UnsupportedOpError(f"xlc.grad: no derivative rule for a {what} (other than an "
                                 f"undilated sum) ({inst.name}) yet")
    x = ops[0]
    cfg = []
    for d, wd in enumerate(dims):
        before = wd.size - wd.pad_low - 1
        after = x.shape[d] + wd.size - 1 - ((ct.shape[d] - 1) * wd.stride + 1) - before
        cfg.append((before, after, wd.stride - 1))
    padded = _lax.pad(ct, 0, cfg)
    back = _lax.reduce_window(padded, _np().asarray(0, ct.dtype), Opcode.ADD,
                              [wd.size for wd in dims], [1] * x.ndim,
                              padding=[(0, 0)] * x.ndim)
    return back, None


def _window_chooser(inst: HloInstruction, ops: list[Tracer], ct: Tracer,
                    is_max: bool) -> Tracer:
    """Max/min pooling transposed: each window's cotangent goes to the element the window
    chose (the first one on ties), a select-and-scatter with add."""
    from xlc.frontend.staging import monoid_computation, trace_scalar_computation

    x = ops[0]
    xnp = _np()

    def pick(a: Tracer, b: Tracer) -> Tracer:
        return xnp.greater_equal(a, b) if is_max else xnp.less_equal(a, b)

    select, _ = trace_scalar_computation("select", pick, [x.ptype, x.ptype],
                                         "select-and-scatter select")
    add = monoid_computation(Opcode.ADD, ct.ptype)
    zero = xnp.asarray(0, ct.dtype)
    return emit(Opcode.SELECT_AND_SCATTER, x.aval, [x, xnp.astype(ct, x.dtype), zero],
                {"window": inst.attrs["window"]}, (select, add),
                op_name="select_and_scatter_add")


def _none(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer) -> Sequence[Any]:
    return [None] * len(ops)


RULES: dict[Opcode, Rule] = {
    Opcode.ADD: _add, Opcode.SUBTRACT: _sub, Opcode.MULTIPLY: _mul, Opcode.DIVIDE: _div,
    Opcode.NEGATE: _unary(lambda xnp, a, out, ct: xnp.negative(ct)),
    Opcode.EXP: _unary(lambda xnp, a, out, ct: xnp.multiply(ct, out)),
    Opcode.EXPM1: _unary(lambda xnp, a, out, ct: xnp.multiply(ct, xnp.add(out, 1))),
    Opcode.LOG: _unary(lambda xnp, a, out, ct: xnp.divide(ct, a)),
    Opcode.LOG1P: _unary(lambda xnp, a, out, ct: xnp.divide(ct, xnp.add(a, 1))),
    Opcode.TANH: _unary(lambda xnp, a, out, ct: xnp.multiply(
        ct, xnp.subtract(1, xnp.multiply(out, out)))),
    Opcode.LOGISTIC: _unary(lambda xnp, a, out, ct: xnp.multiply(
        ct, xnp.multiply(out, xnp.subtract(1, out)))),
    Opcode.SQRT: _unary(lambda xnp, a, out, ct: xnp.divide(xnp.multiply(ct, 0.5), out)),
    Opcode.RSQRT: _unary(lambda xnp, a, out, ct: xnp.multiply(
        ct, xnp.multiply(-0.5, xnp.divide(out, a)))),
    Opcode.SIN: _unary(lambda xnp, a, out, ct: xnp.multiply(ct, xnp.cos(a))),
    Opcode.COS: _unary(lambda xnp, a, out, ct: xnp.negative(xnp.multiply(ct, xnp.sin(a)))),
    Opcode.ABS: _unary(lambda xnp, a, out, ct: xnp.multiply(ct, xnp.sign(a))),
    Opcode.POWER: _pow,
    Opcode.MAXIMUM: _minmax(lambda xnp, a, b: xnp.greater(a, b)),
    Opcode.MINIMUM: _minmax(lambda xnp, a, b: xnp.less(a, b)),
    Opcode.SELECT: _select, Opcode.CONVERT: _convert, Opcode.BROADCAST: _broadcast,
    Opcode.RESHAPE: _reshape, Opcode.TRANSPOSE: _transpose, Opcode.REDUCE: _reduce,
    Opcode.DOT: _dot, Opcode.SLICE: _slice, Opcode.CONCATENATE: _concat, Opcode.PAD: _pad,
    Opcode.DYNAMIC_SLICE: _dynamic_slice, Opcode.DYNAMIC_UPDATE_SLICE: _dynamic_update_slice,
    Opcode.GATHER: _gather, Opcode.REDUCE_WINDOW: _reduce_window,
    Opcode.REVERSE: _unary_attrs(lambda inst, ct: _lax.rev(
        ct, [int(d) for d in inst.attrs["dimensions"]])),
    Opcode.COPY: _unary(lambda xnp, a, out, ct: ct),
    # no derivative: constants, iotas, comparisons, integer and bit operations, rounding
    **{op: _none for op in (Opcode.CONSTANT, Opcode.IOTA, Opcode.COMPARE, Opcode.SIGN,
                            Opcode.FLOOR, Opcode.CEIL, Opcode.ROUND_AFZ,
                            Opcode.ROUND_EVEN, Opcode.AND, Opcode.OR, Opcode.XOR,
                            Opcode.NOT, Opcode.IS_FINITE, Opcode.RNG_BIT_GENERATOR,
                            Opcode.SHIFT_LEFT, Opcode.SHIFT_RIGHT_LOGICAL,
                            Opcode.SHIFT_RIGHT_ARITHMETIC, Opcode.BITCAST_CONVERT)
       },
}
"""Opcode -> transpose rule (see `Rule`); every differentiable opcode of the traced HLO."""
