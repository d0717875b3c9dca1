"""Reverse-mode automatic differentiation on the traced HLO: `xlc.grad`, `value_and_grad`,
`vjp`, `jvp`, `linearize`, `custom_vjp` and `stop_gradient`.

`vjp(fn, *primals)` traces `fn` into the current computation on fresh copies of the primals,
then walks the instructions that trace created in reverse (they are in topological order),
applying each opcode's transpose rule (`autodiff_rules.RULES`) to the cotangent of its
result: the rules emit ordinary HLO through the tracer API, so the backward pass is part of
the same program, is optimized and fused with it, and can itself be differentiated (grad of
grad). Values the function closed over are constants, as in JAX. An instruction without a
rule (control flow, convolution, scatter, ...) is an UnsupportedOpError naming it and the
function. `jvp` is the transpose of that (linear) reverse pass.

Outside a trace, `grad(fn)(x)` runs through `xlc.jit`.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from xlc.errors import UnsupportedOpError
from xlc.frontend import pytree
from xlc.frontend.autodiff_rules import RULES
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
