"""Forward-mode automatic differentiation on the traced HLO: `xlc.jvp`, `linearize` and
`custom_jvp`.

`jvp(fn, primals, tangents)` traces `fn` into the current computation on copies of the primals,
then walks the new instructions in order, giving each one whose operands carry a tangent the
tangent of its result:
- while loops and conditionals by `autodiff_control.JVP_RULES` (a while loop carries the
  tangents beside its state, so loops of any trip count work, as in JAX);
- custom_jvp calls by the user's rule;
- every other instruction by the transpose of its reverse-mode rule: the rule's cotangent map
  ct -> (operand cotangents) is linear, so the derivative of <rule(ct), operand tangents> with
  respect to ct is the result's tangent (emitted once per instruction; the copies of the
  rule the transposition leaves unused are dead code the optimizer removes).
The tangent program is ordinary HLO, so it can be differentiated again (forward over reverse
for Hessian-vector products, reverse over forward).
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlc.errors import UnsupportedOpError
from xlc.frontend import autodiff, pytree
from xlc.frontend.autodiff import is_float0, zero_tangent
from xlc.frontend.autodiff_control import JVP_RULES
from xlc.frontend.autodiff_rules import RULES, TUPLE_RULES
from xlc.frontend.tracer import Tracer, as_tracer, current_builder, emit, trace_error
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode

__all__ = ["jvp", "linearize", "custom_jvp", "jvp_elements"]

Tangent = Any  # a Tracer, None (zero), or a list of those for a tuple-shaped value


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


def _differentiable(t: Tracer) -> bool:
    return not t.aval.is_tuple and (t.ptype.is_float or t.ptype.is_complex)


def _pairing(parts: Sequence[Any], tangents: Sequence[Any]) -> Tracer | None:
    """sum over k of <parts[k], tangents[k]> (the bilinear pairing, no conjugation), skipping
    None on either side; None when nothing pairs."""
    xnp = _np()
    total = None
    for p, t in zip(parts, tangents):
        if p is None or t is None:
            continue
        if isinstance(p, list):
            sub = _pairing(p, t if isinstance(t, list) else [])
            if sub is None:
                continue
            term = sub
        else:
            t = as_tracer(t)
            term = xnp.sum(xnp.multiply(xnp.astype(as_tracer(p), t.dtype), t))
        total = term if total is None else xnp.add(total, xnp.astype(term, total.dtype))
    return total


def _local(inst: HloInstruction, b: Any, op_tans: list[Tangent]) -> Tangent:
    """The tangent of `inst`'s result from its operands' tangents, by transposing its
    reverse-mode rule (see the module docstring); the instructions the transposition leaves
    unused are removed again, so the traced program stays the size of the tangent map."""
    start = len(b.comp.instructions)
    result = _local_rule(inst, b, op_tans)
    keep = {id(t.inst) for t in (result if isinstance(result, list) else [result])
            if t is not None}
    autodiff.drop_dead(b.comp, start, keep)
    return result


def _local_rule(inst: HloInstruction, b: Any, op_tans: list[Tangent]) -> Tangent:
    xnp = _np()
    ops = [Tracer(o, b) for o in inst.operands]
    out = Tracer(inst, b)
    if inst.shape.is_tuple:
        trule = TUPLE_RULES.get(inst.opcode)
        if trule is None:
            return None
        shapes = inst.shape.tuple_shapes or ()
        elems = [emit(Opcode.GET_TUPLE_ELEMENT, s, [out], {"index": i},
                      op_name="get_tuple_element") for i, s in enumerate(shapes)]
        seeds = [xnp.zeros(e.shape, e.dtype) for e in elems]
        live = [k for k, e in enumerate(elems) if _differentiable(e)]
        if not live:
            return None

        def paired_tuple(*cts: Any) -> Any:
            full: list[Tracer | None] = [None] * len(elems)
            for k, c in zip(live, cts):
                full[k] = c
            return _pairing(trule(inst, elems, ops, full), op_tans)

        probe = paired_tuple(*[seeds[k] for k in live])
        if probe is None:
            return None
        _, pull = autodiff.pullback(paired_tuple, *[seeds[k] for k in live])
        got = pull(xnp.ones((), probe.dtype))
        result: list[Tracer | None] = [None] * len(elems)
        for k, g in zip(live, got):
            result[k] = g
        return result
    rule = RULES.get(inst.opcode)
    if rule is None:
        raise UnsupportedOpError(f"xlc.jvp: no derivative rule for '{inst.opcode.text}' "
                                 f"({inst.name}) yet")
    if not _differentiable(out):
        return None

    def paired(ct: Tracer) -> Any:
        return _pairing(rule(inst, out, ops, ct), op_tans)

    seed = xnp.zeros(out.shape, out.dtype)
    probe = paired(seed)
    if probe is None:
        return None
    _, pull = autodiff.pullback(paired, seed)
    return pull(xnp.ones((), probe.dtype))[0]


def _custom_tangents(group: Any, tan: dict[int, Tangent], b: Any) -> None:
    """Tangents of every output marker of a custom_jvp call, from the user's rule."""
    if group.jvp is None:
        raise UnsupportedOpError(
            "xlc.jvp: forward-mode differentiation of a custom_vjp function is not defined "
            "(as in JAX): use custom_jvp, which serves both modes")
    xnp = _np()
    ts = [tan.get(id(a.inst)) for a in group.args]
    ts = [t if t is not None else xnp.zeros(a.shape, a.dtype) for t, a in zip(ts, group.args)]
    outs = pytree.unflatten(group.out_tree, [Tracer(m, b) for m in group.markers])
    _, out_t = group.jvp(pytree.unflatten(group.arg_tree, list(group.args)),
                         pytree.unflatten(group.arg_tree, ts), outs)
    for m, t in zip(group.markers, pytree.flatten(out_t)[0]):
        ptype = m.shape.element_type
        # an integer output (LU's pivots) has no tangent: None marks the group as done
        tan[id(m)] = xnp.astype(as_tracer(t), ptype.dtype) \
            if ptype is not None and (ptype.is_float or ptype.is_complex) else None


def jvp_elements(fn: Callable[[list[Tracer]], list[Tracer]], primals: Sequence[Tracer],
                 tangents: Sequence[Tracer | None]) -> tuple[list[Tracer], list[Tracer | None]]:
    """(fn(primals), tangents of its outputs) for `fn` mapping a list of tracers to a list,
    inside a trace; None tangents are zero."""
    b = current_builder()
    assert b is not None
    xs = [emit(Opcode.COPY, p.aval, [p], op_name="jvp_input") for p in primals]
    first = len(b.comp.instructions)
    outs = [as_tracer(o) for o in fn(xs)]
    tan: dict[int, Tangent] = {id(x.inst): t for x, t in zip(xs, tangents) if t is not None}
    for inst in list(b.comp.instructions[first:]):
        op_tans = [tan.get(id(o)) for o in inst.operands]
        if inst.uid in autodiff._STOPPED:
            continue
        group = autodiff._CUSTOM.get(inst.uid)
        if group is not None:
            if id(inst) not in tan and any(tan.get(id(a.inst)) is not None
                                           for a in group.args):
                _custom_tangents(group, tan, b)
            continue
        if all(t is None for t in op_tans):
            continue
        if inst.opcode is Opcode.TUPLE:
            tan[id(inst)] = op_tans
        elif inst.opcode is Opcode.GET_TUPLE_ELEMENT:
            src = op_tans[0]
            if isinstance(src, list):
                tan[id(inst)] = src[int(inst.attrs["index"])]
        elif inst.opcode in JVP_RULES:
            ops = [Tracer(o, b) for o in inst.operands]
            tan[id(inst)] = JVP_RULES[inst.opcode](inst, ops, op_tans, "xlc.jvp")
        else:
            got = _local(inst, b, op_tans)
            if got is not None:
                tan[id(inst)] = got
    return outs, [_as_tangent(tan.get(id(o.inst))) for o in outs]


def _as_tangent(t: Tangent) -> Tracer | None:
    return None if isinstance(t, list) else t


def jvp(fn: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]) -> Any:
    """(fn(*primals), the directional derivative of fn at primals along tangents), both
    pytrees like fn's output (forward mode; see the module docstring). Inside a trace, or
    jitted when called outside one."""
    if current_builder() is None:
        import xlc

        return xlc.jit(lambda p, t: jvp(fn, p, t))(tuple(primals), tuple(tangents))
    p_leaves, p_tree = pytree.flatten(list(primals))
    t_leaves, t_tree = pytree.flatten(list(tangents), is_leaf=is_float0)
    ps = [as_tracer(p) for p in p_leaves]
    if t_tree != p_tree or any(p.shape != np.shape(t) for p, t in zip(ps, t_leaves)):
        raise trace_error("xlc.jvp: tangents must have the primals' structure and shapes, got "
                          f"{t_tree} for {p_tree}")
    ts: list[Tracer | None] = []
    for k, (p, t) in enumerate(zip(ps, t_leaves)):
        if p.ptype.is_float or p.ptype.is_complex:
            if is_float0(t):
                raise trace_error(f"xlc.jvp: primal {k} is {p.aval_text}, its tangent must be "
                                  "an array of that dtype, got a float0 array")
            ts.append(_np().astype(as_tracer(t), p.dtype))
        elif not is_float0(t):
            raise trace_error(f"xlc.jvp: primal {k} is {p.aval_text}; the tangent of an "
                              "integer or boolean primal must be a float0 array "
                              "(numpy.zeros(shape, xlc.dtypes.float0)), as in JAX, got "
                              f"{getattr(t, 'dtype', type(t).__name__)}")
        else:
            ts.append(None)
    out_tree: list[Any] = []

    def flat(xs: list[Tracer]) -> list[Tracer]:
        leaves, td = pytree.flatten(fn(*pytree.unflatten(p_tree, xs)))
        out_tree.append(td)
        return [as_tracer(v) for v in leaves]

    outs, touts = jvp_elements(flat, ps, ts)
    return (pytree.unflatten(out_tree[0], outs),
            pytree.unflatten(out_tree[0], [zero_tangent(o) if t is None else t
                                           for t, o in zip(touts, outs)]))


def linearize(fn: Callable[..., Any], *primals: Any) -> Any:
    """(fn(*primals), f_jvp) with f_jvp(*tangents) the derivative at primals applied to
    tangents (evaluated by `jvp`). Inside a trace."""
    out = fn(*primals)

    def f_jvp(*tangents: Any) -> Any:
        return jvp(fn, primals, tangents)[1]

    return out, f_jvp


class custom_jvp:  # noqa: N801 - jax.custom_jvp's name
    """A function with a user-defined forward-mode derivative (jax.custom_jvp):

        @xlc.custom_jvp
        def f(x): ...
        @f.defjvp
        def f_jvp(primals, tangents): return f(*primals), tangent_out

    `xlc.jvp` uses the rule; `xlc.grad`/`vjp` transpose it (the tangent output must be linear
    in the tangents, as JAX requires). `defjvps(*fns)` gives one rule per argument,
    fns[i](tangent_i, primal_out, *primals) -> that argument's contribution."""

    def __init__(self, fun: Callable[..., Any]) -> None:
        self.fun = fun
        self.rule: Callable[..., Any] | None = None
        functools.update_wrapper(self, fun)

    def defjvp(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        """Set the rule (primals, tangents) -> (primal out, tangent out); returns it."""
        self.rule = rule
        return rule

    def defjvps(self, *fns: Callable[..., Any] | None) -> None:
        """Per-argument rules: the tangent out is the sum of fns[i](t_i, out, *primals)."""
        def rule(primals: Any, tangents: Any) -> Any:
            out = self(*primals)  # itself: derivatives of `out` use this rule again
            total = None
            for f, t in zip(fns, tangents):
                if f is None:
                    continue
                term = f(t, out, *primals)
                total = term if total is None else pytree.tree_map(_np().add, total, term)
            if total is None:
                total = pytree.tree_map(lambda o: _np().zeros_like(o), out)
            return out, total
        self.rule = rule

    def jvp_given_outputs(self, primals: Any, tangents: Any, outputs: Any) -> Any:
        """(primal out, tangent out) at `primals` along `tangents`, where `outputs` is what
        the function returned there: what forward mode and the transposition call. The user's
        rule recomputes the primal output (JAX's contract), so `outputs` goes unused here;
        a subclass whose rule is written in terms of the outputs (the LAPACK
        factorizations, `linalg_derivatives`) uses them instead of factorizing again."""
        del outputs
        assert self.rule is not None
        return self.rule(tuple(primals), tuple(tangents))

    def __call__(self, *args: Any) -> Any:
        if self.rule is None:
            raise trace_error(f"custom_jvp function {getattr(self.fun, '__name__', '?')} has "
                              "no derivative: call defjvp(rule) first")
        if current_builder() is None:
            return self.fun(*args)
        arg_leaves, arg_tree = pytree.flatten(list(args))
        tracers = [as_tracer(a) for a in arg_leaves]
        # the function's own operations are not differentiated, only the rule: it runs on
        # stopped copies of the arguments
        out = self.fun(*pytree.unflatten(arg_tree, autodiff.stop_gradient(tracers)))
        out_leaves, out_tree = pytree.flatten(out)
        markers = []
        for o in out_leaves:
            t = as_tracer(o)
            markers.append(emit(Opcode.COPY, t.aval, [t], op_name="custom_jvp"))
        group = autodiff._CustomGroup(None, None, tracers, arg_tree, out_tree,
                                      [m.inst for m in markers])
        group.jvp = self.jvp_given_outputs
        for m in markers:
            autodiff._CUSTOM[m.inst.uid] = group
        return pytree.unflatten(out_tree, markers)
