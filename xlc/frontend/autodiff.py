"""Reverse-mode automatic differentiation on the traced HLO: `xlc.grad`, `value_and_grad`,
`vjp` and `stop_gradient`.

`vjp(fn, *primals)` traces `fn` into the current computation on fresh copies of the primals,
then walks the instructions that trace created in reverse (they are in topological order),
applying each opcode's transpose rule (`RULES`) to the cotangent of its result: the rules emit
ordinary HLO through the tracer API, so the backward pass is part of the same program, is
optimized and fused with it, and can itself be differentiated (grad of grad). Values the
function closed over are constants, as in JAX. An instruction without a rule (control flow,
convolution, gather, ...) is an UnsupportedOpError naming it and the function.

Outside a trace, `grad(fn)(x)` runs through `xlc.jit`.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlc.errors import UnsupportedOpError
from xlc.frontend import lax as _lax
from xlc.frontend import pytree
from xlc.frontend.tracer import Tracer, as_tracer, current_builder, emit, trace_error
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "linearize", "stop_gradient",
           "custom_vjp"]

_STOPPED: set[int] = set()  # uids of stop_gradient copies


class _CustomGroup:
    """The outputs of one call of a custom_vjp function: its backward function, residuals,
    argument tracers and the cotangents gathered for its output markers."""

    def __init__(self, bwd: Callable[..., Any], residuals: Any, args: list[Tracer],
                 arg_tree: Any, out_tree: Any, markers: list[HloInstruction]) -> None:
        self.bwd, self.residuals, self.args = bwd, residuals, args
        self.arg_tree, self.out_tree, self.markers = arg_tree, out_tree, markers
        self.cts: dict[int, Tracer] = {}


_CUSTOM: dict[int, _CustomGroup] = {}  # marker uid -> its group


class custom_vjp:  # noqa: N801 - jax.custom_vjp's name
    """A function with a user-defined reverse-mode derivative (jax.custom_vjp):

        @xlc.custom_vjp
        def f(x): ...
        def f_fwd(x): return f(x), residuals
        def f_bwd(residuals, ct): return (ct_x,)      # one cotangent per argument
        f.defvjp(f_fwd, f_bwd)

    Under `xlc.grad`/`vjp`, the derivative of f's outputs with respect to its arguments is
    what f_bwd returns; f's own operations are not differentiated."""

    def __init__(self, fun: Callable[..., Any]) -> None:
        self.fun = fun
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None
        self._in_fwd = False  # calls from inside fwd run the plain function
        functools.update_wrapper(self, fun)

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any]) -> None:
        """Set the forward (returns (output, residuals)) and backward (residuals, output
        cotangent -> tuple of argument cotangents) functions."""
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args: Any) -> Any:
        if self._in_fwd:
            return self.fun(*args)
        if self.fwd is None or self.bwd is None or current_builder() is None:
            if self.fwd is None or self.bwd is None:
                raise trace_error(f"custom_vjp function {getattr(self.fun, '__name__', '?')} "
                                  "has no derivative: call defvjp(fwd, bwd) first")
            return self.fun(*args)
        arg_leaves, arg_tree = pytree.flatten(list(args))
        tracers = [as_tracer(a) for a in arg_leaves]
        self._in_fwd = True
        try:
            out, residuals = self.fwd(*pytree.unflatten(arg_tree, tracers))
        finally:
            self._in_fwd = False
        out_leaves, out_tree = pytree.flatten(out)
        markers = []
        for o in out_leaves:
            t = as_tracer(o)
            markers.append(emit(Opcode.COPY, t.aval, [t], op_name="custom_vjp"))
        group = _CustomGroup(self.bwd, residuals, tracers, arg_tree, out_tree,
                             [m.inst for m in markers])
        for m in markers:
            _CUSTOM[m.inst.uid] = group
        return pytree.unflatten(out_tree, markers)


def _custom_backward(group: _CustomGroup, inst: HloInstruction, ct: Tracer,
                     out: Tracer) -> list[tuple[Tracer, Any]]:
    """Gather the cotangent of marker `inst`; once every marker of the group has been seen
    (the first-created one is seen last), run the user's backward function: returns
    (argument tracer, cotangent) pairs."""
    group.cts[inst.uid] = ct
    if inst is not group.markers[0]:
        return []
    xnp = _np()
    cts = [group.cts.get(m.uid) if group.cts.get(m.uid) is not None
           else xnp.zeros(m.shape.dims, m.shape.element_type.dtype)  # type: ignore[union-attr]
           for m in group.markers]
    res = group.bwd(group.residuals, pytree.unflatten(group.out_tree, cts))
    got = pytree.flatten(list(res))[0]
    if len(got) != len(group.args):
        raise trace_error(f"custom_vjp backward returned {len(got)} cotangent(s) for "
                          f"{len(group.args)} argument(s)")
    return [(a, g) for a, g in zip(group.args, got) if g is not None]


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


def stop_gradient(x: Any) -> Any:
    """`x`, through which no derivative flows (a pytree of arrays)."""
    def one(leaf: Any) -> Any:
        t = as_tracer(leaf)
        c = emit(Opcode.COPY, t.aval, [t], op_name="stop_gradient")
        _STOPPED.add(c.inst.uid)
        return c
    if current_builder() is None:
        return x
    return pytree.tree_map(one, x)


# ---- transpose rules -----------------------------------------------------------------------
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


# ---- the transformation ---------------------------------------------------------------------
def _backward(out: Tracer, inputs: list[Tracer], first: int, ct: Tracer,
              where: str) -> list[Tracer | None]:
    """Cotangents of `inputs` given `ct` for `out`, over the instructions of the current
    computation from index `first` on."""
    comp = out.builder.comp
    forward = comp.instructions[first:]
    tracer_of = {id(i.inst): i for i in inputs}
    cts: dict[int, Tracer] = {id(out.inst): ct}
    xnp = _np()
    for inst in reversed(forward):
        c = cts.pop(id(inst), None)
        if c is None or inst.uid in _STOPPED or id(inst) in tracer_of:
            if c is not None:
                cts[id(inst)] = c
            continue
        group = _CUSTOM.get(inst.uid)
        if group is not None:
            for arg, g in _custom_backward(group, inst, c, out):
                g = as_tracer(g)
                if g.ptype is not arg.ptype:
                    g = xnp.astype(g, arg.dtype)
                key = id(arg.inst)
                cts[key] = xnp.add(cts[key], g) if key in cts else g
            continue
        if inst.opcode is Opcode.GET_TUPLE_ELEMENT:
            src = inst.operands[0]
            if src.opcode is not Opcode.TUPLE:  # an element of a multi-result op
                raise UnsupportedOpError(f"{where}: no derivative rule for "
                                         f"'{src.opcode.text}' ({src.name}) yet")
            elem = src.operands[int(inst.attrs["index"])]
            key = id(elem)
            cts[key] = xnp.add(cts[key], c) if key in cts else c
            continue
        rule = RULES.get(inst.opcode)
        if rule is None:
            raise UnsupportedOpError(f"{where}: no derivative rule for '{inst.opcode.text}' "
                                     f"({inst.name}) yet")
        ops = [Tracer(o, out.builder) for o in inst.operands]
        for o, oc in zip(ops, rule(inst, Tracer(inst, out.builder), ops, c)):
            if oc is None or not (o.ptype.is_float or o.ptype.is_complex):
                continue
            oc = as_tracer(oc)
            if oc.ptype is not o.ptype:
                oc = xnp.astype(oc, o.dtype)
            key = id(o.inst)
            cts[key] = xnp.add(cts[key], oc) if key in cts else oc
    return [cts.get(id(i.inst)) for i in inputs]


def vjp(fn: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """(fn(*primals), vjp_fn) with vjp_fn(cotangent) -> one cotangent per primal (as pytrees);
    with `has_aux`, fn returns (out, aux) and vjp returns (out, vjp_fn, aux). Inside a
    trace."""
    b = current_builder()
    if b is None:
        raise trace_error("xlc.vjp needs an active trace (call it inside an xlc.jit function, "
                          "or use xlc.grad, which jits itself)")
    leaves, tree = pytree.flatten(list(primals))
    xs = []
    for leaf in leaves:
        t = as_tracer(leaf)
        xs.append(emit(Opcode.COPY, t.aval, [t], op_name="vjp_input"))
    first = len(b.comp.instructions)
    result = fn(*pytree.unflatten(tree, xs))
    out, aux = (result if has_aux else (result, None))
    out_leaves, out_tree = pytree.flatten(out)
    outs = [as_tracer(o) for o in out_leaves]

    def vjp_fn(cotangent: Any) -> Any:
        xnp = _np()
        ct_leaves, ct_tree = pytree.flatten(cotangent)
        if ct_tree != out_tree:
            raise trace_error(f"xlc.vjp: the cotangent has structure {ct_tree}, the output "
                              f"{out_tree}")
        totals: list[Any] = [None] * len(xs)
        for o, c in zip(outs, ct_leaves):
            got = _backward(o, xs, first, as_tracer(c, o.ptype), f"xlc.grad of "
                            f"{getattr(fn, '__name__', 'function')}")
            for k, g in enumerate(got):
                if g is not None:
                    totals[k] = g if totals[k] is None else xnp.add(totals[k], g)
        grads = [t if t is not None else xnp.zeros(x.shape, x.dtype)
                 for t, x in zip(totals, xs)]
        return tuple(pytree.unflatten(tree, grads))

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def value_and_grad(fn: Callable[..., Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False) -> Callable[..., Any]:
    """A function returning (fn(*args), gradient of fn with respect to args[argnums]) (with
    `has_aux`: ((value, aux), gradient)); fn must return a real scalar."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    name = getattr(fn, "__name__", "function")

    @functools.wraps(fn)
    def wrapped(*args: Any) -> Any:
        if current_builder() is None:
            import xlc

            return xlc.jit(wrapped)(*args)
        for n in nums:
            if not 0 <= n < len(args):
                raise trace_error(f"xlc.grad of {name}: argnums {n} is out of range for "
                                  f"{len(args)} arguments")
            for leaf in pytree.flatten(args[n])[0]:
                t = as_tracer(leaf)
                if not t.ptype.is_float:
                    raise trace_error(f"xlc.grad of {name}: differentiating with respect to "
                                      f"argument {n} needs float inputs, got {t.aval_text}")

        def partial(*diff: Any) -> Any:
            full = list(args)
            for n, v in zip(nums, diff):
                full[n] = v
            return fn(*full)

        partial.__name__ = name

        res = vjp(partial, *[args[n] for n in nums], has_aux=has_aux)
        out, pull = res[0], res[1]
        value = as_tracer(out) if not isinstance(out, (tuple, list, dict)) else None
        if value is None or value.shape != () or not value.ptype.is_float:
            raise trace_error(f"xlc.grad of {name}: the function must return a real scalar, "
                              f"got {getattr(value, 'aval_text', type(out).__name__)}")
        grads = pull(_np().ones((), value.dtype))
        g = grads[0] if isinstance(argnums, int) else tuple(grads)
        return ((out, res[2]), g) if has_aux else (out, g)

    return wrapped


def grad(fn: Callable[..., Any], argnums: int | Sequence[int] = 0,
         has_aux: bool = False) -> Callable[..., Any]:
    """The gradient of real-scalar `fn` with respect to args[argnums] (a pytree like them);
    with `has_aux`, (gradient, aux)."""
    vg = value_and_grad(fn, argnums, has_aux)

    @functools.wraps(fn)
    def wrapped(*args: Any) -> Any:
        if current_builder() is None:
            import xlc

            return xlc.jit(wrapped)(*args)
        (value, g) = vg(*args)
        return (g, value[1]) if has_aux else g

    return wrapped


def jvp(fn: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]) -> Any:
    """(fn(*primals), the directional derivative of fn at primals along tangents), both
    pytrees like fn's output. Forward mode as the transpose of reverse mode: the cotangent
    map of `vjp` is linear, so differentiating <vjp(ct), tangents> with respect to ct (at
    ct = 0) gives J @ tangents. Inside a trace, or jitted when called outside one."""
    if current_builder() is None:
        import xlc

        return xlc.jit(lambda p, t: jvp(fn, p, t))(tuple(primals), tuple(tangents))
    xnp = _np()
    out, pull = vjp(fn, *primals)
    out_leaves, out_tree = pytree.flatten(out)
    t_leaves = [as_tracer(t) for t in pytree.flatten(list(tangents))[0]]
    p_leaves = pytree.flatten(list(primals))[0]
    if len(t_leaves) != len(p_leaves) or any(
            as_tracer(p).shape != t.shape for p, t in zip(p_leaves, t_leaves)):
        raise trace_error("xlc.jvp: tangents must have the primals' structure and shapes")

    def paired(*cts: Any) -> Any:
        grads = pytree.flatten(list(pull(pytree.unflatten(out_tree, list(cts)))))[0]
        total = None
        for g, t in zip(grads, t_leaves):
            term = xnp.sum(xnp.multiply(g, xnp.astype(t, as_tracer(g).dtype)))
            total = term if total is None else xnp.add(total, term)
        return total

    zeros = [xnp.zeros(as_tracer(o).shape, as_tracer(o).dtype) for o in out_leaves]
    _, pull2 = vjp(paired, *zeros)
    dots = pull2(xnp.ones((), as_tracer(out_leaves[0]).dtype))
    return out, pytree.unflatten(out_tree, list(dots))


def linearize(fn: Callable[..., Any], *primals: Any) -> Any:
    """(fn(*primals), f_jvp) with f_jvp(*tangents) the derivative at primals applied to
    tangents (evaluated by `jvp`). Inside a trace."""
    out = fn(*primals)

    def f_jvp(*tangents: Any) -> Any:
        return jvp(fn, primals, tangents)[1]

    return out, f_jvp
