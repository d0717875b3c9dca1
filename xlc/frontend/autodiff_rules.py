"""The transpose rules of reverse-mode autodiff (`autodiff.py`): one per differentiable
opcode of the traced HLO, `RULES`, and `TUPLE_RULES` for ops with several results. A rule gets
the instruction, its result and operands as tracers and the result's cotangent, and returns
one cotangent per operand (None where no derivative flows), emitted as ordinary HLO through
the tracer API, so the rules themselves can be differentiated again (and transposed by forward
mode, `autodiff_forward.py`).

This module holds the elementwise, shape, dot, slicing and gather rules; convolution, fft,
reductions, reduce-window, select-and-scatter and map are in `autodiff_rules_nn.py`, scatter,
sort and top-k in `autodiff_rules_index.py`; both tables are merged into RULES / TUPLE_RULES
below. Complex values follow jax's convention: a rule is the plain (unconjugated) transpose
of the linear map, pairing re(ct * dz).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlc.errors import UnsupportedOpError
from xlc.frontend import autodiff_rules_index as _index
from xlc.frontend import autodiff_rules_nn as _nn
from xlc.frontend import lax as _lax
from xlc.frontend import lax_autodiff_ops as _ops
from xlc.frontend.tracer import Tracer
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.precision import dot_precision

__all__ = ["RULES", "Rule", "TUPLE_RULES", "TupleRule"]


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


def _abs(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer) -> Sequence[Any]:
    """sign(x); for complex x, conj(x) / |x| (0 at 0), jax's convention."""
    xnp = _np()
    a = ops[0]
    if not a.ptype.is_complex:
        return (xnp.multiply(ct, xnp.sign(a)),)
    mag = xnp.where(xnp.equal(out, 0), xnp.ones_like(out), out)
    return (xnp.multiply(ct, xnp.divide(_ops.conj(a), mag)),)


def _atan2(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
           ) -> Sequence[Any]:
    xnp = _np()
    y, x = ops
    r2 = xnp.add(xnp.multiply(x, x), xnp.multiply(y, y))
    return (xnp.multiply(ct, xnp.divide(x, r2)),
            xnp.multiply(ct, xnp.divide(xnp.negative(y), r2)))


def _remainder(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
               ) -> Sequence[Any]:
    """rem(x, y) = x - trunc(x / y) * y (jax's rem jvp)."""
    xnp = _np()
    q = xnp.divide(ops[0], ops[1])
    trunc = xnp.multiply(xnp.sign(q), xnp.floor(xnp.abs(q)))
    return ct, xnp.negative(xnp.multiply(ct, trunc))


def _clamp(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
           ) -> Sequence[Any]:
    """jax's clamp jvp: x gets the cotangent strictly inside (lo, hi), lo where it is above x
    (and below hi), hi where it is below x; scalar bounds sum theirs."""
    xnp = _np()
    lo, x, hi = (xnp.broadcast_to(o, ct.shape) for o in ops)
    zero = xnp.zeros_like(ct)
    ct_lo = xnp.where(xnp.logical_and(xnp.greater(lo, x), xnp.less(lo, hi)), ct, zero)
    ct_x = xnp.where(xnp.logical_and(xnp.greater(x, lo), xnp.less(x, hi)), ct, zero)
    ct_hi = xnp.where(xnp.less(hi, x), ct, zero)
    fit = [xnp.sum(c) if o.ndim == 0 and c.ndim else c for o, c in zip(ops, (ct_lo, ct_x, ct_hi))]
    return tuple(fit)


def _complex(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
             ) -> Sequence[Any]:
    """complex(a, b) = a + ib transposes to (re(ct), -im(ct)) (jax's pairing re(ct * z))."""
    return _ops.real(ct), _np().negative(_ops.imag(ct))


def _erf(xnp: Any, a: Tracer, out: Tracer, ct: Tracer) -> Tracer:
    scale = xnp.asarray(2.0 / np.sqrt(np.pi), ct.dtype)
    return xnp.multiply(ct, xnp.multiply(scale, xnp.exp(xnp.negative(xnp.multiply(a, a)))))


def _cbrt(xnp: Any, a: Tracer, out: Tracer, ct: Tracer) -> Tracer:
    return xnp.divide(ct, xnp.multiply(3.0, xnp.multiply(out, out)))


def _reduce_precision(inst: HloInstruction, ct: Tracer) -> Tracer:
    return _ops.reduce_precision(ct, int(inst.attrs["exponent_bits"]),
                                 int(inst.attrs["mantissa_bits"]))


def _select(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
            ) -> Sequence[Any]:
    xnp = _np()
    z = xnp.zeros_like(ct)
    return None, xnp.where(ops[0], ct, z), xnp.where(ops[0], z, ct)


def _convert(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
             ) -> Sequence[Any]:
    x = ops[0]
    if not x.ptype.is_float and not x.ptype.is_complex:
        return (None,)
    if ct.ptype.is_complex and not x.ptype.is_complex:
        ct = _ops.real(ct)  # real -> complex transposes to the real part (as jax)
    return (_np().astype(ct, x.dtype),)


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
    # the cotangent dots keep the primal's precision, as JAX's transpose rule does
    prec = dot_precision(inst)
    da = xnp.astype(einsum(f"{O},{R}->{L}", ct, b, precision=prec), a.dtype)
    db = xnp.astype(einsum(f"{L},{O}->{R}", a, ct, precision=prec), b.dtype)
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
    """jax's _pad_transpose: undo the edges (negative ones crop, so they pad back), take
    every (interior + 1)-th element; the padding value gets the rest of the cotangent."""
    xnp = _np()
    cfg = inst.attrs["padding"].dims
    unpadded = _lax.pad(ct, 0, [(-lo, -hi, 0) for lo, hi, _ in cfg])
    ct_x = _lax.slice(unpadded, [0] * ct.ndim, list(unpadded.shape),
                      [interior + 1 for _, _, interior in cfg])
    return ct_x, xnp.subtract(xnp.sum(ct), xnp.sum(ct_x))


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


def _custom_call(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
                 ) -> Sequence[Any]:
    """Annotation custom-calls (a `Sharding` constraint) pass the cotangent through; LAPACK's
    triangular solve has JAX's rule (`linalg_derivatives.CUSTOM_CALL_RULES`; the
    factorizations are differentiated as custom_jvp functions, `lax_linalg`); other targets
    (user FFI) have no derivative rule."""
    from xlc.frontend.linalg_derivatives import CUSTOM_CALL_RULES

    target = str(inst.attrs.get("custom_call_target", ""))
    if target == "Sharding":
        return (ct,)
    rule = CUSTOM_CALL_RULES.get(target)
    if rule is not None:
        return rule(inst, out, ops, ct)
    raise UnsupportedOpError(f"xlc.grad: no derivative rule for custom-call '{target}' "
                             f"({inst.name})")


def _opt_barrier(inst: HloInstruction, elems: list[Tracer], ops: list[Tracer],
                 parts: list[Tracer | None]) -> Sequence[Any]:
    """The element cotangents go to the elements of the barrier's tuple operand."""
    return [list(parts)]


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
    Opcode.ABS: _abs, Opcode.ATAN2: _atan2, Opcode.REMAINDER: _remainder,
    Opcode.CLAMP: _clamp, Opcode.COMPLEX: _complex,
    Opcode.REAL: _unary(lambda xnp, a, out, ct: _ops.complex(ct, xnp.zeros_like(ct))),
    Opcode.IMAG: _unary(lambda xnp, a, out, ct: _ops.complex(xnp.zeros_like(ct),
                                                             xnp.negative(ct))),
    Opcode.ERF: _unary(_erf), Opcode.CBRT: _unary(_cbrt),
    Opcode.TAN: _unary(lambda xnp, a, out, ct: xnp.multiply(
        ct, xnp.add(1, xnp.multiply(out, out)))),
    Opcode.REDUCE_PRECISION: _unary_attrs(_reduce_precision),
    Opcode.POWER: _pow,
    Opcode.MAXIMUM: _minmax(lambda xnp, a, b: xnp.greater(a, b)),
    Opcode.MINIMUM: _minmax(lambda xnp, a, b: xnp.less(a, b)),
    Opcode.SELECT: _select, Opcode.CONVERT: _convert, Opcode.BROADCAST: _broadcast,
    Opcode.RESHAPE: _reshape, Opcode.BITCAST: _reshape, Opcode.TRANSPOSE: _transpose,
    Opcode.DOT: _dot, Opcode.SLICE: _slice, Opcode.CONCATENATE: _concat, Opcode.PAD: _pad,
    Opcode.DYNAMIC_SLICE: _dynamic_slice, Opcode.DYNAMIC_UPDATE_SLICE: _dynamic_update_slice,
    Opcode.GATHER: _gather,
    Opcode.REVERSE: _unary_attrs(lambda inst, ct: _lax.rev(
        ct, [int(d) for d in inst.attrs["dimensions"]])),
    Opcode.COPY: _unary(lambda xnp, a, out, ct: ct), Opcode.CUSTOM_CALL: _custom_call,
    # no derivative: constants, iotas, comparisons, integer and bit operations, rounding
    **{op: _none for op in (Opcode.CONSTANT, Opcode.IOTA, Opcode.COMPARE, Opcode.SIGN,
                            Opcode.FLOOR, Opcode.CEIL, Opcode.ROUND_AFZ,
                            Opcode.ROUND_EVEN, Opcode.AND, Opcode.OR, Opcode.XOR,
                            Opcode.NOT, Opcode.IS_FINITE, Opcode.RNG_BIT_GENERATOR,
                            Opcode.SHIFT_LEFT, Opcode.SHIFT_RIGHT_LOGICAL,
                            Opcode.SHIFT_RIGHT_ARITHMETIC, Opcode.BITCAST_CONVERT,
                            Opcode.POPCNT, Opcode.CLZ, Opcode.RNG, Opcode.PARTITION_ID,
                            Opcode.REPLICA_ID, Opcode.AFTER_ALL)
       },
    **_nn.RULES, **_index.RULES,
}
"""Opcode -> transpose rule (see `Rule`); every differentiable opcode of the traced HLO."""

TupleRule = Callable[[HloInstruction, list[Tracer], list[Tracer], list["Tracer | None"]],
                     Sequence[Any]]
"""rule(inst, result element tracers, operand tracers, element cotangents (None: no
cotangent reached that element)) -> operand cotangents, for opcodes with a tuple result."""

TUPLE_RULES: dict[Opcode, TupleRule] = {Opcode.OPT_BARRIER: _opt_barrier, **_nn.TUPLE_RULES,
                                         **_index.TUPLE_RULES}
"""Opcode -> transpose rule for ops with several results (multi-operand sort, top-k, variadic
reduce); control flow (while, conditional, call) is handled by `autodiff_control`."""
