"""Reverse-mode automatic differentiation on the traced HLO: `xlc.grad`, `value_and_grad`,
`vjp`, `custom_vjp` and `stop_gradient` (forward mode, `jvp`/`linearize`/`custom_jvp`, is in
`autodiff_forward`).

`vjp(fn, *primals)` traces `fn` into the current computation on fresh copies of the primals,
then walks the instructions that trace created in reverse (they are in topological order),
applying each opcode's transpose rule (`autodiff_rules.RULES`, `TUPLE_RULES` for multi-result
ops, `autodiff_control.RULES` for while loops and conditionals) to the cotangent of its
result: the rules emit ordinary HLO through the tracer API, so the backward pass is part of
the same program, is optimized and fused with it, and can itself be differentiated (grad of
grad). Values the function closed over are constants, as in JAX. An instruction without a
rule is an UnsupportedOpError naming it and the function.

Outside a trace, `grad(fn)(x)` runs through `xlc.jit`.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlc.errors import UnsupportedOpError
from xlc.frontend import pytree
from xlc.frontend.autodiff_rules import RULES, TUPLE_RULES
from xlc.frontend.tracer import (
    Tracer,
    as_tracer,
    current_builder,
    emit,
    trace_error,
    trace_scoped,
)
from xlc.hlo.ir import HloInstruction
from xlc.hlo.lapack import is_lapack_target
from xlc.hlo.opcodes import Opcode

__all__ = ["grad", "value_and_grad", "vjp", "stop_gradient", "custom_vjp", "copy_marks",
           "drop_dead"]

_STOPPED: set[int] = trace_scoped(set())  # uids of stop_gradient copies


class _CustomGroup:
    """The outputs of one call of a custom_vjp function: its backward function, residuals,
    argument tracers and the cotangents gathered for its output markers."""

    def __init__(self, bwd: Callable[..., Any] | None, residuals: Any, args: list[Tracer],
                 arg_tree: Any, out_tree: Any, markers: list[HloInstruction]) -> None:
        self.bwd, self.residuals, self.args = bwd, residuals, args
        self.arg_tree, self.out_tree, self.markers = arg_tree, out_tree, markers
        self.cts: dict[int, Tracer] = {}
        self.jvp: Callable[..., Any] | None = None  # set for custom_jvp functions

    def remapped(self, old: HloInstruction, new: Tracer, mapped: dict[int, Any]
                 ) -> _CustomGroup:
        """The group of the copy of marker `old` when a computation is re-emitted (`mapped`:
        id(original instruction) -> copy; one copied group per re-emission, kept in `mapped`
        under a negative key)."""
        key = -1 - id(self)
        group = mapped.get(key)
        if group is None:
            def rm(x: Any) -> Any:
                return mapped.get(id(x.inst), x) if isinstance(x, Tracer) else x
            group = _CustomGroup(self.bwd, pytree.tree_map(rm, self.residuals),
                                 [rm(a) for a in self.args], self.arg_tree, self.out_tree,
                                 list(self.markers))
            group.jvp = self.jvp
            mapped[key] = group
        group.markers[self.markers.index(old)] = new.inst
        return group


_CUSTOM: dict[int, _CustomGroup] = trace_scoped({})  # marker uid -> its group


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


def _custom_backward(group: _CustomGroup, inst: HloInstruction, ct: Tracer | None,
                     out: Tracer) -> list[tuple[Tracer, Any]]:
    """Gather the cotangent of marker `inst` (None: none reached it); once every marker of
    the group has been seen (the first-created one is seen last), run the user's backward
    function on the gathered cotangents (zeros where none reached) and forget them: returns
    (argument tracer, cotangent) pairs."""
    if ct is not None:
        group.cts[inst.uid] = ct
    if inst is not group.markers[0] or not group.cts:
        return []
    xnp = _np()
    cts = [group.cts.get(m.uid) if group.cts.get(m.uid) is not None
           else xnp.zeros(m.shape.dims, m.shape.element_type.dtype)  # type: ignore[union-attr]
           for m in group.markers]
    group.cts.clear()  # a later backward pass (another output, grad of grad) starts afresh
    if group.bwd is None:  # custom_jvp: the transpose of its (linear) tangent map
        assert group.jvp is not None
        rule, args, tree = group.jvp, group.args, group.arg_tree
        outs = pytree.unflatten(group.out_tree, [Tracer(m, out.builder) for m in group.markers])

        def tangent_map(*ts: Any) -> Any:
            return pytree.flatten(rule(pytree.unflatten(tree, list(args)),
                                       pytree.unflatten(tree, list(ts)), outs)[1])[0]

        start = len(out.builder.comp.instructions)
        _, pull = pullback(tangent_map, *[xnp.zeros(a.shape, a.dtype) for a in args])
        res = pull([xnp.astype(c, m.shape.element_type.dtype)  # type: ignore[union-attr]
                    for c, m in zip(cts, group.markers)])
        # the tangent map's forward half (on zero tangents) is dead: LAPACK calls in it
        # would stay, side-effecting custom-calls to the optimizer
        drop_dead(out.builder.comp, start, {id(r.inst) for r in res if isinstance(r, Tracer)})
    else:
        res = group.bwd(group.residuals, pytree.unflatten(group.out_tree, cts))
    got = pytree.flatten(list(res))[0]
    if len(got) != len(group.args):
        raise trace_error(f"custom_vjp backward returned {len(got)} cotangent(s) for "
                          f"{len(group.args)} argument(s)")
    return [(a, g) for a, g in zip(group.args, got) if g is not None]


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


def drop_dead(comp: Any, start: int, keep: set[int]) -> None:
    """Remove the unused instructions of `comp` from index `start` on (but those whose id is
    in `keep` and the root): the parts of a traced rule a transposition leaves unused. The
    outputs of a custom_vjp/custom_jvp call go only all together (its rule may read any)."""
    for dead in reversed(comp.instructions[start:]):
        if dead.users or id(dead) in keep or dead is comp.root or not _pure(dead):
            continue
        group = _CUSTOM.get(dead.uid)
        if group is not None and any(m.users for m in group.markers):
            continue
        comp.remove_instruction(dead)


def _pure(inst: HloInstruction) -> bool:
    """Whether an unused instruction may be dropped: it has no side effect, or it is a LAPACK
    custom-call (a function of its operands)."""
    if inst.opcode is Opcode.CUSTOM_CALL:
        return is_lapack_target(str(inst.attrs.get("custom_call_target", "")))
    return not inst.opcode.has_side_effect


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
def _active(forward: list[HloInstruction], inputs: dict[int, Tracer]) -> set[int]:
    """ids of the instructions of `forward` that depend on the inputs (through data, or
    through a custom function's arguments for its output markers); stop_gradient copies cut
    the dependence. Cotangents only flow through these, so constant subgraphs cost nothing
    and a custom rule that calls its own function again does not recurse."""
    active = set(inputs)
    for inst in forward:
        if inst.uid in _STOPPED or id(inst) in active:
            continue
        group = _CUSTOM.get(inst.uid)
        if any(id(o) in active for o in inst.operands) or (
                group is not None and any(id(a.inst) in active for a in group.args)):
            active.add(id(inst))
    return active


def _backward(out: Tracer, inputs: list[Tracer], first: int, ct: Tracer,
              where: str) -> list[Tracer | None]:
    """Cotangents of `inputs` given `ct` for `out`, over the instructions of the current
    computation from index `first` on."""
    comp = out.builder.comp
    forward = comp.instructions[first:]
    tracer_of = {id(i.inst): i for i in inputs}
    cts: dict[int, Tracer] = {id(out.inst): ct}
    elements: dict[int, list[Tracer | None]] = {}  # multi-result op -> element cotangents
    xnp = _np()
    active = _active(forward, tracer_of)
    for inst in reversed(forward):
        if id(inst) not in active:  # does not depend on the inputs: no cotangent to pass on
            cts.pop(id(inst), None)
            continue
        c = cts.pop(id(inst), None)
        if c is None and id(inst) in elements:
            c = ct  # a multi-result op: its cotangents are in `elements`, not `cts`
        group = _CUSTOM.get(inst.uid)
        # a custom function's first output runs its backward even when no cotangent reached
        # it (only a later output was used)
        pending = group is not None and inst is group.markers[0] and bool(group.cts)
        if (c is None and not pending) or inst.uid in _STOPPED or id(inst) in tracer_of:
            if c is not None:
                cts[id(inst)] = c
            continue
        if group is not None:
            for arg, g in _custom_backward(group, inst, c, out):
                g = as_tracer(g)
                if g.ptype is not arg.ptype:
                    g = xnp.astype(g, arg.dtype)
                key = id(arg.inst)
                cts[key] = xnp.add(cts[key], g) if key in cts else g
            continue
        assert c is not None  # only a custom function's first output goes on without one
        if inst.opcode is Opcode.GET_TUPLE_ELEMENT:
            src, index = inst.operands[0], int(inst.attrs["index"])
            if src.opcode is Opcode.TUPLE:
                elem = src.operands[index]
                key = id(elem)
                cts[key] = xnp.add(cts[key], c) if key in cts else c
            else:  # an element of a multi-result op: gathered for its tuple rule
                parts = elements.setdefault(id(src), [None] * len(src.shape.tuple_shapes or ()))
                prev = parts[index]
                parts[index] = c if prev is None else xnp.add(prev, c)
            continue
        if inst.shape.is_tuple:
            if id(inst) not in elements:
                continue
            parts = elements.pop(id(inst))
            op_cts = _tuple_backward(inst, out.builder, parts, where)
        else:
            rule = RULES.get(inst.opcode)
            if rule is None:
                raise UnsupportedOpError(f"{where}: no derivative rule for "
                                         f"'{inst.opcode.text}' ({inst.name}) yet")
            op_cts = rule(inst, Tracer(inst, out.builder),
                          [Tracer(o, out.builder) for o in inst.operands], c)
        ops = [Tracer(o, out.builder) for o in inst.operands]
        for o, oc in zip(ops, op_cts):
            if isinstance(oc, list):  # element cotangents of a tuple operand
                assert o.inst.opcode is Opcode.TUPLE, o.inst.name
                for e, ec in zip(o.inst.operands, oc):
                    _accumulate(cts, Tracer(e, out.builder), ec)
            else:
                _accumulate(cts, o, oc)
    return [cts.get(id(i.inst)) for i in inputs]


def _accumulate(cts: dict[int, Tracer], o: Tracer, oc: Any) -> None:
    """Add cotangent `oc` (None: none) to operand `o`'s total; non-float operands get none."""
    if oc is None or o.aval.is_tuple or not (o.ptype.is_float or o.ptype.is_complex):
        return
    xnp = _np()
    oc = as_tracer(oc)
    if oc.ptype is not o.ptype:
        oc = xnp.astype(oc, o.dtype)
    key = id(o.inst)
    cts[key] = xnp.add(cts[key], oc) if key in cts else oc


def copy_marks(old: HloInstruction, new: Tracer, mapped: dict[int, Tracer]) -> None:
    """Carry the derivative marks of `old` over to its copy `new` (re-emitted computations,
    `autodiff_control.inline`): stop_gradient, custom_vjp/custom_jvp groups (their tracers
    remapped through `mapped`, id(old instruction) -> copy) and known trip counts."""
    from xlc.frontend import control_flow

    if old.uid in _STOPPED:
        _STOPPED.add(new.inst.uid)
    if old.uid in control_flow.TRIP_COUNTS:
        control_flow.TRIP_COUNTS[new.inst.uid] = control_flow.TRIP_COUNTS[old.uid]
    group = _CUSTOM.get(old.uid)
    if group is not None:
        _CUSTOM[new.inst.uid] = group.remapped(old, new, mapped)


def _tuple_backward(inst: HloInstruction, builder: Any, parts: list[Tracer | None],
                    where: str) -> Sequence[Any]:
    """Operand cotangents of an instruction with a tuple result, from its elements'
    cotangents (`parts`, None where none reached): TUPLE_RULES, or control flow."""
    from xlc.frontend import autodiff_control

    shapes = inst.shape.tuple_shapes
    elems = [Tracer(emit(Opcode.GET_TUPLE_ELEMENT, s, [Tracer(inst, builder)], {"index": i},
                         op_name="get_tuple_element").inst, builder)
             for i, s in enumerate(shapes or ())]
    ops = [Tracer(o, builder) for o in inst.operands]
    control = autodiff_control.RULES.get(inst.opcode)
    if control is not None:
        return control(inst, elems, ops, parts, where)
    rule = TUPLE_RULES.get(inst.opcode)
    if rule is None:
        raise UnsupportedOpError(f"{where}: no derivative rule for '{inst.opcode.text}' "
                                 f"({inst.name}) yet")
    return rule(inst, elems, ops, parts)


def zero_tangent(x: Tracer) -> Any:
    """The zero tangent (or cotangent) of `x`: zeros of its dtype, or a float0 array for an
    integer or boolean `x` (JAX's convention)."""
    if x.ptype.is_float or x.ptype.is_complex:
        return _np().zeros(x.shape, x.dtype)
    return np.zeros(x.shape, pytree.FLOAT0)


def is_float0(x: Any) -> bool:
    """Whether `x` is a numpy array of dtype float0."""
    return isinstance(x, np.ndarray) and x.dtype == pytree.FLOAT0


def vjp(fn: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """(fn(*primals), vjp_fn) with vjp_fn(cotangent) -> one cotangent per primal (as pytrees;
    float0 zeros for integer and boolean primals, as in JAX); with `has_aux`, fn returns
    (out, aux) and vjp returns (out, vjp_fn, aux). Inside a trace."""
    return _vjp(fn, primals, has_aux, float0=True)


def pullback(fn: Callable[..., Any], *primals: Any) -> Any:
    """`vjp` for derivative rules: integer primals get zero cotangents of their own dtype (a
    rule's loop carries and tuples keep their types) instead of float0."""
    return _vjp(fn, primals, False, float0=False)


def _vjp(fn: Callable[..., Any], primals: tuple, has_aux: bool, float0: bool) -> Any:
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
        ct_leaves, ct_tree = pytree.flatten(cotangent, is_leaf=is_float0)
        if ct_tree != out_tree:
            raise trace_error(f"xlc.vjp: the cotangent has structure {ct_tree}, the output "
                              f"{out_tree}")
        totals: list[Any] = [None] * len(xs)
        for o, c in zip(outs, ct_leaves):
            if not (o.ptype.is_float or o.ptype.is_complex) or is_float0(c):
                continue  # an integer output has float0 cotangents: nothing flows back
            got = _backward(o, xs, first, as_tracer(c, o.ptype), f"xlc.grad of "
                            f"{getattr(fn, '__name__', 'function')}")
            for k, g in enumerate(got):
                if g is not None:
                    totals[k] = g if totals[k] is None else xnp.add(totals[k], g)
        grads = [t if t is not None else zero_tangent(x) if float0 else
                 _np().zeros(x.shape, x.dtype) for t, x in zip(totals, xs)]
        return tuple(pytree.unflatten(tree, grads))

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def value_and_grad(fn: Callable[..., Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False, allow_int: bool = False) -> Callable[..., Any]:
    """A function returning (fn(*args), gradient of fn with respect to args[argnums]) (with
    `has_aux`: ((value, aux), gradient)); fn must return a real scalar. Integer or boolean
    inputs are an error unless `allow_int`, which gives them float0 zero gradients (JAX)."""
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
                if t.ptype.is_complex or (not t.ptype.is_float and not allow_int):
                    raise trace_error(f"xlc.grad of {name}: differentiating with respect to "
                                      f"argument {n} needs float inputs, got {t.aval_text}"
                                      + ("" if t.ptype.is_complex else
                                         " (allow_int=True gives integer and boolean inputs "
                                         "float0 zero gradients)"))

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
         has_aux: bool = False, allow_int: bool = False) -> Callable[..., Any]:
    """The gradient of real-scalar `fn` with respect to args[argnums] (a pytree like them);
    with `has_aux`, (gradient, aux); `allow_int` as in `value_and_grad`."""
    vg = value_and_grad(fn, argnums, has_aux, allow_int)

    @functools.wraps(fn)
    def wrapped(*args: Any) -> Any:
        if current_builder() is None:
            import xlc

            return xlc.jit(wrapped)(*args)
        (value, g) = vg(*args)
        return (g, value[1]) if has_aux else g

    return wrapped
