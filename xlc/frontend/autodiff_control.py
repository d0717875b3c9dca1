"""Derivatives of structured control flow for `autodiff.py`.

Reverse mode (`RULES`, called with the cotangents of a tuple-shaped result's elements):
- **while** with a trip count known at trace time (`fori_loop` with static bounds, `scan`;
  `control_flow.TRIP_COUNTS`): a forward loop re-runs the body and stacks the loop state of
  every iteration (state elements the body only writes into, such as scan's output buffers,
  are not stacked), then a reverse loop pulls the cotangent back through the body at each
  stacked state, last iteration first. Memory: trip count x the stacked state, as JAX's scan
  residuals; time: the forward loop runs twice. A while loop whose trip count is unknown
  cannot be reversed (as in JAX): UnsupportedOpError.
- **conditional**: a conditional on the same selector whose branches pull the cotangent back
  through the branch that ran.

Forward mode (`JVP_RULES`, used by `autodiff.jvp`): a while loop carries the tangents beside
the state (any trip count); a conditional runs the jvp of the chosen branch.

Loop and branch computations are re-emitted with `inline`, so the derivative of their
contents uses the ordinary per-instruction rules (nested loops recurse).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xlc.errors import UnsupportedOpError
from xlc.frontend import control_flow
from xlc.frontend.tracer import Tracer, current_builder, emit
from xlc.hlo.ir import HloComputation, HloInstruction
from xlc.hlo.opcodes import Opcode

__all__ = ["RULES", "JVP_RULES", "inline", "ControlRule", "JvpRule"]

ControlRule = Callable[[HloInstruction, list[Tracer], list[Tracer], list["Tracer | None"], str],
                       Sequence[Any]]
"""rule(inst, result elements, operands, element cotangents, where) -> operand cotangents (a
list of element cotangents for a tuple operand)."""

JvpRule = Callable[[HloInstruction, list[Tracer], list["list[Tracer | None] | Tracer | None"],
                    str], list["Tracer | None"]]
"""rule(inst, operands, operand tangents (element lists for tuple operands), where) -> the
tangent of each element of the result."""


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


def _autodiff() -> Any:
    from xlc.frontend import autodiff

    return autodiff


def _forward() -> Any:
    from xlc.frontend import autodiff_forward

    return autodiff_forward


# ---- re-emitting a computation ----------------------------------------------------------------
def inline(comp: HloComputation, args: Sequence[Tracer]) -> list[Tracer]:
    """Emit `comp`'s instructions into the current builder with its tuple parameter bound to
    the elements `args`; returns the elements of its (tuple) root, or [root]. Derivative marks
    (stop_gradient, custom_vjp) carry over to the copies."""
    b = current_builder()
    assert b is not None
    param = comp.parameters[0]
    mapped: dict[int, Tracer] = {}
    for inst in comp.instructions:
        if inst is param:
            continue
        if inst.opcode is Opcode.GET_TUPLE_ELEMENT and inst.operands[0] is param:
            mapped[id(inst)] = args[int(inst.attrs["index"])]
            continue
        ops = []
        for o in inst.operands:
            if o is param:
                ops.append(emit(Opcode.TUPLE, param.shape, list(args), op_name="tuple"))
            else:
                ops.append(mapped[id(o)])
        extra = tuple(e for e in inst.extra if e[0] != "metadata")
        new = emit(inst.opcode, inst.shape, ops, inst.attrs, inst.called,
                   op_name=inst.opcode.text, extra=extra)
        _autodiff().copy_marks(inst, new, mapped)
        mapped[id(inst)] = new
    root = comp.root
    assert root is not None
    if root is param:
        return list(args)
    if root.opcode is Opcode.TUPLE:
        return [mapped[id(o)] if o is not param else args[0] for o in root.operands]
    return [mapped[id(root)]]


def _elements(t: Tracer) -> list[Tracer]:
    """The element tracers of a tuple-shaped value (its operands when it is a tuple
    instruction, else get-tuple-elements)."""
    if t.inst.opcode is Opcode.TUPLE:
        return [Tracer(o, t.builder) for o in t.inst.operands]
    shapes = t.aval.tuple_shapes or ()
    return [emit(Opcode.GET_TUPLE_ELEMENT, s, [t], {"index": i}, op_name="get_tuple_element")
            for i, s in enumerate(shapes)]


def _zeros(t: Tracer) -> Tracer:
    return _np().zeros(t.shape, t.dtype)


# ---- while ------------------------------------------------------------------------------------
def _write_only(body: HloComputation) -> set[int]:
    """State elements the body only writes into: used solely as the buffer of
    dynamic-update-slices whose chain ends at the same root position (scan's output buffers).
    Their values never enter a derivative, so the reverse pass need not stack them."""
    param, root = body.parameters[0], body.root
    if root is None or root.opcode is not Opcode.TUPLE:
        return set()
    result = set()
    for g in param.users:
        if g.opcode is not Opcode.GET_TUPLE_ELEMENT:
            return set()
        j = int(g.attrs["index"])
        cur, ok = g, True
        while ok and cur is not root.operands[j]:
            users = cur.users
            ok = (len(users) == 1 and users[0].opcode is Opcode.DYNAMIC_UPDATE_SLICE
                  and users[0].operands[0] is cur and cur not in users[0].operands[1:])
            cur = users[0] if ok else cur
        if ok and cur is not g and root.operands.count(cur) == 1:
            result.add(j)
    return result


def _passthrough(body: HloComputation) -> set[int]:
    """State elements the body returns unchanged (captures, loop invariants)."""
    param, root = body.parameters[0], body.root
    if root is None or root.opcode is not Opcode.TUPLE:
        return set()
    return {j for j, o in enumerate(root.operands)
            if o.opcode is Opcode.GET_TUPLE_ELEMENT and o.operands[0] is param
            and int(o.attrs["index"]) == j}


def _while_vjp(inst: HloInstruction, elems: list[Tracer], ops: list[Tracer],
               parts: list[Tracer | None], where: str) -> Sequence[Any]:
    from xlc.frontend import lax

    n = control_flow.TRIP_COUNTS.get(inst.uid)
    if n is None:
        raise UnsupportedOpError(
            f"{where}: reverse-mode differentiation of a while_loop needs a trip count known "
            f"at trace time ({inst.name}); use fori_loop with static bounds or scan, as in "
            "JAX (forward mode, xlc.jvp, handles any while_loop)")
    body = inst.called[1]
    init = _elements(ops[0])
    fixed = _passthrough(body)
    skip = fixed | _write_only(body)
    stacked = [j for j in range(len(init)) if j not in skip]
    xnp = _np()

    def state_of(vals: dict[int, Tracer]) -> list[Tracer]:
        return [vals[j] if j in vals else (init[j] if j in fixed else _zeros(init[j]))
                for j in range(len(init))]

    # forward: the state at the start of each iteration
    bufs0 = [xnp.zeros((n,) + init[j].shape, init[j].dtype) for j in stacked]

    def forward(k: Tracer, carry: Any) -> Any:
        state, bufs = carry
        bufs = [lax.dynamic_update_slice(buf, lax.reshape(state[j], (1,) + state[j].shape),
                                         [k] + [0] * state[j].ndim)
                for buf, j in zip(bufs, stacked)]
        return inline(body, state), bufs

    if n:
        _, bufs = control_flow._fori_loop(0, n, forward, (list(init), bufs0), promote=False,
                                          what="while_loop (reverse mode)")
    # backward: pull the cotangent through the body, last iteration first
    ct0 = [p if p is not None else _zeros(e) for p, e in zip(parts, elems)]

    def backward(k: Tracer, ct: list[Tracer]) -> list[Tracer]:
        idx = xnp.subtract(n - 1, k)
        vals = {j: lax.reshape(lax.dynamic_slice(buf, [idx] + [0] * (buf.ndim - 1),
                                                 (1,) + buf.shape[1:]), buf.shape[1:])
                for j, buf in zip(stacked, bufs)}
        _, pull = _autodiff().pullback(lambda *xs: inline(body, list(xs)), *state_of(vals))
        got = pull([xnp.astype(c, e.dtype) for c, e in zip(ct, elems)])
        return [xnp.astype(g, e.dtype) for g, e in zip(got, elems)]

    cts = (control_flow._fori_loop(0, n, backward, ct0, promote=False,
                                   what="while_loop (reverse mode)") if n else ct0)
    return [list(cts)]


def _while_jvp(inst: HloInstruction, ops: list[Tracer],
               tangents: list[list[Tracer | None] | Tracer | None], where: str
               ) -> list[Tracer | None]:
    cond_c, body = inst.called
    init = _elements(ops[0])
    t0 = tangents[0]
    tin = t0 if isinstance(t0, list) else [None] * len(init)
    active = _active_closure(body, [t is not None and _float(e) for t, e in zip(tin, init)])
    idx = [j for j, a in enumerate(active) if a]
    tans0 = [tin[j] if tin[j] is not None else _zeros(init[j]) for j in idx]

    def cond(carry: Any) -> Any:
        return inline(cond_c, carry[0])[0]

    def step(carry: Any) -> Any:
        state, tans = carry
        full: list[Tracer | None] = [None] * len(state)
        for j, t in zip(idx, tans):
            full[j] = t
        out, tout = _forward().jvp_elements(lambda xs: inline(body, xs), state, full)
        return out, [tout[j] if tout[j] is not None else _zeros(state[j]) for j in idx]

    _, tans = control_flow._while_loop(cond, step, (list(init), tans0), promote=False,
                                       what="while_loop (forward mode)")
    result: list[Tracer | None] = [None] * len(init)
    for j, t in zip(idx, tans):
        result[j] = t
    return result


def _float(t: Tracer) -> bool:
    return t.ptype.is_float or t.ptype.is_complex


def _float_shape(s: Any) -> bool:
    pt = s.element_type
    return pt is not None and (pt.is_float or pt.is_complex)


def _active_closure(body: HloComputation, active: list[bool]) -> list[bool]:
    """The state elements that carry a tangent: those with one on entry, and those the body
    computes from one (iterated to a fixed point), float elements only."""
    param = body.parameters[0]
    root = body.root
    assert root is not None
    shapes = param.shape.tuple_shapes or ()
    cur = list(active)
    while True:
        live: set[int] = set()
        for inst in body.instructions:
            if inst is param:
                continue
            if inst.opcode is Opcode.GET_TUPLE_ELEMENT and inst.operands[0] is param:
                if cur[int(inst.attrs["index"])]:
                    live.add(id(inst))
            elif any(id(o) in live for o in inst.operands):
                live.add(id(inst))
        outs = root.operands if root.opcode is Opcode.TUPLE else (root,)
        new = [c or (id(o) in live and _float_shape(shapes[j]))
               for j, (c, o) in enumerate(zip(cur, outs))]
        if new == cur:
            return cur
        cur = new


# ---- conditional --------------------------------------------------------------------------------
def _branch_operands(ops: list[Tracer]) -> tuple[list[Tracer], list[int]]:
    """The distinct branch operands (tuple values) and, per branch, the index of its own."""
    distinct: list[Tracer] = []
    which = []
    for o in ops[1:]:
        k = next((i for i, d in enumerate(distinct) if d.inst is o.inst), None)
        if k is None:
            distinct.append(o)
            k = len(distinct) - 1
        which.append(k)
    return distinct, which


def _cond_vjp(inst: HloInstruction, elems: list[Tracer], ops: list[Tracer],
              parts: list[Tracer | None], where: str) -> Sequence[Any]:
    distinct, which = _branch_operands(ops)
    operand_elems = [_elements(d) for d in distinct]
    ct = [p if p is not None else _zeros(e) for p, e in zip(parts, elems)]

    def branch(k: int) -> Callable[..., Any]:
        def fn(all_elems: list[list[Tracer]], cts: list[Tracer]) -> Any:
            mine = which[k]
            _, pull = _autodiff().pullback(lambda *xs: inline(inst.called[k], list(xs)),
                                      *all_elems[mine])
            got = pull(list(cts))
            return [[g if i == mine else _zeros(x) for g, x in zip(got, elems_i)]
                    if i == mine else [_zeros(x) for x in elems_i]
                    for i, elems_i in enumerate(all_elems)]
        return fn

    names = [f"branch {k} (reverse mode)" for k in range(len(inst.called))]
    res = control_flow._conditional(ops[0], [branch(k) for k in range(len(inst.called))],
                                    names, (operand_elems, ct), "cond")
    out: list[Any] = [None]
    seen: set[int] = set()
    for k in which:
        out.append(None if k in seen else list(res[k]))
        seen.add(k)
    return out


def _cond_jvp(inst: HloInstruction, ops: list[Tracer],
              tangents: list[list[Tracer | None] | Tracer | None], where: str
              ) -> list[Tracer | None]:
    distinct, which = _branch_operands(ops)
    operand_elems = [_elements(d) for d in distinct]
    tans = []
    for d, elems_d in zip(distinct, operand_elems):
        pos = next(i for i, o in enumerate(ops) if o.inst is d.inst)
        t = tangents[pos]
        tl = t if isinstance(t, list) else [None] * len(elems_d)
        tans.append([x if x is not None else _zeros(e) for x, e in zip(tl, elems_d)])
    out_shapes = inst.shape.tuple_shapes or ()

    def branch(k: int) -> Callable[..., Any]:
        def fn(all_elems: list[list[Tracer]], all_tans: list[list[Tracer]]) -> Any:
            mine = which[k]
            _, tout = _forward().jvp_elements(lambda xs: inline(inst.called[k], xs),
                                               all_elems[mine], list(all_tans[mine]))
            return [t if t is not None else _np().zeros(s.dims, s.dtype)
                    for t, s in zip(tout, out_shapes)]
        return fn

    names = [f"branch {k} (forward mode)" for k in range(len(inst.called))]
    res = control_flow._conditional(ops[0], [branch(k) for k in range(len(inst.called))],
                                    names, (operand_elems, tans), "cond")
    return list(res)


RULES: dict[Opcode, ControlRule] = {
    Opcode.WHILE: _while_vjp,
    Opcode.CONDITIONAL: _cond_vjp,
}
"""Reverse-mode rules of the control-flow opcodes."""

JVP_RULES: dict[Opcode, JvpRule] = {
    Opcode.WHILE: _while_jvp,
    Opcode.CONDITIONAL: _cond_jvp,
}
"""Forward-mode rules of the control-flow opcodes (others: `autodiff.jvp`'s local rule)."""
