"""Structured control flow: cond, switch, while_loop, fori_loop, scan.

Branch and loop functions are traced into sub-computations taking one tuple parameter: the
flattened pytree operands/carry followed by any outer traced values the functions close over
(captures, threaded in automatically). Branch outputs and loop carries must keep the same
pytree structure, shapes and dtypes (weakly typed Python scalars adapt); otherwise a TraceError
names both sides.

Loop carries follow JAX's weak-type rule: a weakly typed init leaf (a Python scalar) whose body
output has another dtype is promoted to the result type of both and the body is traced again, so
`fori_loop(0, 3, lambda i, a: a * 0.5, 1)` carries f32 and returns 0.125. A body output may be
weakly typed where it converts to the carry's dtype without changing kind (`a + 1` for an f32
carry); any other dtype change is a TraceError, never a silent conversion.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlc.frontend import dtypes, pytree
from xlc.frontend.eager import eager_ok
from xlc.frontend.staging import Aval, new_sub_builder, probe, zeros_of
from xlc.frontend.tracer import (
    Builder,
    CaptureList,
    Tracer,
    as_tracer,
    convert,
    emit,
    is_arraylike,
    push_builder,
    trace_error,
    trace_scoped,
)
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType as PT
from xlc.hlo.shape import Shape


def _gte(t: Tracer, i: int, shape: Shape) -> Tracer:
    return emit(Opcode.GET_TUPLE_ELEMENT, shape, [t], {"index": i}, op_name="get_tuple_element")


def _flat_operands(tree: Any, what: str) -> tuple[list[Tracer], pytree.TreeDef]:
    leaves, td = pytree.flatten(tree)
    out = []
    for leaf, path in zip(leaves, pytree.leaf_paths(td)):
        if not is_arraylike(leaf):
            raise trace_error(f"{what}: {path or 'value'} is a {type(leaf).__name__}, not an "
                              "array")
        out.append(as_tracer(leaf))
    return out, td


class _Region:
    """One traced sub-computation with a tuple parameter (leaves + captures)."""

    def __init__(self, name: str, what: str, leaves: Sequence[Tracer], caps: CaptureList):
        self.n = len(leaves)

        def make(b: Builder, k: int, outer: Tracer) -> Tracer:
            return Tracer(_gte(self.param, self.n + k, outer.aval).inst, b, outer.weak_type)

        self.builder = new_sub_builder(name, what, capture=(caps, make))
        self.caps = caps
        placeholder = Shape.tuple_of([t.aval for t in leaves])
        with push_builder(self.builder):
            inst = self.builder.comp.add_parameter(0, placeholder, name="arg_tuple")
            self.param = Tracer(inst, self.builder)
            self.inputs = [Tracer(_gte(self.param, i, t.aval).inst, self.builder, t.weak_type)
                           for i, t in enumerate(leaves)]

    def finish(self, full: Shape) -> None:
        self.param.inst.shape = full


def _outputs(out: Any, what: str) -> tuple[list[Tracer], pytree.TreeDef]:
    leaves, td = pytree.flatten(out)
    tracers = []
    for leaf, path in zip(leaves, pytree.leaf_paths(td)):
        if not is_arraylike(leaf):
            raise trace_error(f"{what} returned a {type(leaf).__name__} at {path or 'output'}; "
                              "expected arrays")
        tracers.append(as_tracer(leaf))
    return tracers, td


def _mismatch(what: str, a_name: str, b_name: str, path: str, a: str, b: str) -> Any:
    return trace_error(f"{what}: {a_name} and {b_name} must have the same structure, shapes "
                       f"and dtypes, but at {path or 'the output'} {a_name} has {a} and "
                       f"{b_name} has {b}")


def _match_types(what: str, names: Sequence[str], outs: list[list[Tracer]],
                 tds: list[pytree.TreeDef], builders: list[Builder]) -> list[list[Tracer]]:
    """Make every region's outputs agree (weak scalars are converted); TraceError otherwise."""
    for td, name in zip(tds[1:], names[1:]):
        if td != tds[0]:
            raise trace_error(f"{what}: {names[0]} and {name} must have the same structure, "
                              f"shapes and dtypes, but {names[0]} has structure {tds[0]} and "
                              f"{name} has structure {td}")
    paths = pytree.leaf_paths(tds[0])
    result = [list(o) for o in outs]
    for j, path in enumerate(paths):
        col = [o[j] for o in outs]
        strong = {t.ptype for t in col if not t.weak_type}
        target, tw = dtypes.result_type(*[(t.ptype, t.weak_type) for t in col]) \
            if len(strong) <= 1 else (col[0].ptype, False)
        ref_dims, ref_text = col[0].shape, col[0].aval_text
        for i, t in enumerate(col):
            if t.shape != ref_dims or (t.ptype is not target and not t.weak_type):
                raise _mismatch(what, names[0], names[i], path, ref_text, t.aval_text)
            if t.ptype is not target or t.weak_type != tw:
                with push_builder(builders[i]):
                    result[i][j] = convert(builders[i].lift(t), target, weak=tw)
    return result


def _match_carry(what: str, outs: list[Tracer], td: pytree.TreeDef, avals: Sequence[Aval],
                 builder: Builder, strip: str) -> list[Tracer]:
    """A loop body's outputs as carries of `avals`: same shapes and dtypes, except that a weakly
    typed output converts to the carry's dtype when promotion would give that dtype (no change
    of kind). TraceError naming both types otherwise (at the leaf's path less `strip`, the
    path of the user's carry inside the loop state)."""
    result = list(outs)
    for j, (t, a, path) in enumerate(zip(outs, avals, pytree.leaf_paths(td))):
        path = path.removeprefix(strip)
        fits = t.weak_type and dtypes.result_type((a.ptype, False), (t.ptype, True))[0] is a.ptype
        if t.shape != a.dims:
            raise _mismatch(what, "init_val", "body_fun output", path, str(a), t.aval_text)
        if t.ptype is not a.ptype and not fits:
            raise trace_error(
                f"{what}: init_val and body_fun output must have the same structure, shapes and "
                f"dtypes, but at {path or 'the output'} init_val has {a} and body_fun output "
                f"has {t.aval_text}: the loop would change the carry's dtype from {a.ptype.text} "
                f"to {t.ptype.text}; cast init_val or the output with .astype()")
        if t.ptype is not a.ptype:
            with push_builder(builder):
                result[j] = convert(builder.lift(t), a.ptype, weak=a.weak)
    return result


def _promote_weak_carries(leaves: list[Tracer], out_avals: Sequence[Aval]
                          ) -> tuple[list[Tracer], bool]:
    """JAX's weak-type rule for loop carries: a weakly typed init leaf whose body output has
    another dtype becomes (strongly) the result type of both; True when any leaf changed (the
    body must then be traced again)."""
    new, changed = [], False
    for t, o in zip(leaves, out_avals):
        if t.weak_type and o.ptype is not t.ptype:
            pt, _ = dtypes.result_type((t.ptype, True), (o.ptype, o.weak))
            t, changed = convert(t, pt), True
        new.append(t)
    return new, changed


def _close(region: _Region, outs: list[Tracer], caps_total: int) -> None:
    """Root of a loop body / branch: tuple(outputs + pass-through captures)."""
    b = region.builder
    with push_builder(b):
        vals = [b.lift(o) for o in outs]
        for k in range(caps_total):
            vals.append(b.lift(region.caps.values[k]))
        root = emit(Opcode.TUPLE, Shape.tuple_of([v.aval for v in vals]), vals, op_name="tuple")
        b.comp.root = root.inst


# ---- while ---------------------------------------------------------------------------------------
@eager_ok
def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any],
               init_val: Any) -> Any:
    """Repeat `val = body_fun(val)` while `cond_fun(val)` (a scalar bool) holds; HLO `while`.
    `body_fun` must return the structure, shapes and dtypes of `init_val` (weakly typed leaves
    of `init_val` are promoted as in JAX, see the module docstring)."""
    return _while_loop(cond_fun, body_fun, init_val, promote=True)


def _while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val: Any,
                promote: bool, what: str = "while_loop", strip: str = "") -> Any:
    leaves, td = _flat_operands(init_val, "while_loop init_val")
    if promote and any(t.weak_type for t in leaves):
        out_avals, otd = probe(lambda *a: body_fun(pytree.unflatten(td, list(a))),
                               tuple(leaves))
        if otd == td:  # otherwise the trace below names the difference
            leaves, _ = _promote_weak_carries(leaves, out_avals)
    avals = [Aval(t.ptype, t.shape, t.weak_type) for t in leaves]
    caps = CaptureList()
    cond_r = _Region("while.cond", "while_loop cond_fun", leaves, caps)
    with push_builder(cond_r.builder):
        pred = as_tracer(cond_fun(pytree.unflatten(td, cond_r.inputs)))
        if pred.shape != () or pred.ptype is not PT.PRED:
            raise trace_error(f"while_loop: cond_fun must return a scalar bool, got "
                              f"{pred.aval_text}")
        pred = cond_r.builder.lift(pred)
        cond_r.builder.comp.root = pred.inst
    body_r = _Region("while.body", "while_loop body_fun", leaves, caps)
    with push_builder(body_r.builder):
        outs, otd = _outputs(body_fun(pytree.unflatten(td, body_r.inputs)),
                             "while_loop body_fun")
        if otd != td:
            raise trace_error(f"while_loop: init_val and body_fun output must have the same "
                              f"structure, shapes and dtypes, but init_val has structure {td} "
                              f"and body_fun output has structure {otd}")
        outs = _match_carry(what, outs, td, avals, body_r.builder, strip)
    ncap = len(caps.values)
    _close(body_r, outs, ncap)
    full = Shape.tuple_of([a.shape for a in avals] + [c.aval for c in caps.values])
    cond_r.finish(full)
    body_r.finish(full)
    init = emit(Opcode.TUPLE, full, [*leaves, *caps.values], op_name="tuple")
    w = emit(Opcode.WHILE, full, [init], called=(cond_r.builder.comp, body_r.builder.comp),
             op_name="while")
    # as in JAX, the results are weakly typed where the body's outputs are
    res = [Tracer(_gte(w, i, a.shape).inst, w.builder, o.weak_type)
           for i, (a, o) in enumerate(zip(avals, outs))]
    return pytree.unflatten(td, res)


@eager_ok
def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any], init_val: Any) -> Any:
    """`for i in range(lower, upper): val = body_fun(i, val)` as a while loop (bounds may be
    traced; the counter is s32 for Python ints). Weakly typed leaves of `init_val` are
    promoted as in JAX (see the module docstring)."""
    return _fori_loop(lower, upper, body_fun, init_val, promote=True)


def _fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any], init_val: Any,
               promote: bool, what: str = "fori_loop", strip: str = "[1]") -> Any:
    lo, hi = as_tracer(lower), as_tracer(upper)
    pt, _ = dtypes.result_type((lo.ptype, lo.weak_type), (hi.ptype, hi.weak_type))
    lo, hi = convert(lo, pt), convert(hi, pt)

    def cond(state: Any) -> Any:
        from xlc.frontend import numpy_api as xnp

        return xnp.less(state[0], hi)

    def body(state: Any) -> Any:
        from xlc.frontend import numpy_api as xnp

        i, val = state
        return xnp.add(i, as_tracer(1, pt)), body_fun(i, val)

    counter, result = _while_loop(cond, body, (lo, init_val), promote, what, strip)
    bounds = _static_int(lower), _static_int(upper)
    if bounds[0] is not None and bounds[1] is not None:
        TRIP_COUNTS[counter.inst.operands[0].uid] = max(bounds[1] - bounds[0], 0)
    return result


TRIP_COUNTS: dict[int, int] = trace_scoped({})
"""uid of a while instruction -> its trip count, for the loops of fori_loop with static
bounds and of scan (reverse-mode autodiff runs such loops backwards)."""


def _static_int(x: Any) -> int | None:
    """x as a Python int when it is known at trace time (a Python/numpy integer or a constant
    instruction), else None."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    if isinstance(x, Tracer) and x.inst.opcode is Opcode.CONSTANT and x.shape == ():
        arr = x.inst.attrs["literal"].array
        return int(arr) if arr is not None and x.ptype.is_integer else None
    return None


# ---- conditionals ------------------------------------------------------------------------------
def _conditional(selector: Tracer, branches: Sequence[Callable[..., Any]], names: list[str],
                 operands: tuple, what: str) -> Any:
    leaves, td = _flat_operands(operands, f"{what} operands")
    caps = CaptureList()
    regions, outs, tds = [], [], []
    for i, (fn, name) in enumerate(zip(branches, names)):
        r = _Region(f"{what}.branch_{i}", f"{what} {name}", leaves, caps)
        with push_builder(r.builder):
            o, otd = _outputs(fn(*pytree.unflatten(td, r.inputs)), f"{what} {name}")
        regions.append(r)
        outs.append(o)
        tds.append(otd)
    outs = _match_types(what, names, outs, tds, [r.builder for r in regions])
    ncap = len(caps.values)
    for r, o in zip(regions, outs):
        _close(r, o, ncap)
        r.finish(Shape.tuple_of([t.aval for t in leaves] + [c.aval for c in caps.values]))
    out_shape = Shape.tuple_of([t.aval for t in outs[0]] + [c.aval for c in caps.values])
    for r in regions:
        assert r.builder.comp.root is not None
        r.builder.comp.root.shape = out_shape
    arg = emit(Opcode.TUPLE, regions[0].param.aval, [*leaves, *caps.values], op_name="tuple")
    c = emit(Opcode.CONDITIONAL, out_shape, [selector] + [arg] * len(regions),
             called=[r.builder.comp for r in regions], op_name=what)
    res = [Tracer(_gte(c, i, t.aval).inst, c.builder, t.weak_type)
           for i, t in enumerate(outs[0])]
    return pytree.unflatten(tds[0], res)


@eager_ok
def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any],
         *operands: Any) -> Any:
    """`true_fun(*operands)` if pred else `false_fun(*operands)`; HLO `conditional`. A Python
    bool pred picks the branch at trace time. Both branches must return the same structure,
    shapes and dtypes."""
    if isinstance(pred, (bool, np.bool_)):
        return true_fun(*operands) if pred else false_fun(*operands)
    p = as_tracer(pred)
    if p.shape != ():
        raise trace_error(f"cond: pred must be a scalar, got {p.aval_text}")
    if p.ptype is not PT.PRED:
        from xlc.frontend import numpy_api as xnp

        p = xnp.not_equal(p, 0)
    return _conditional(p, [true_fun, false_fun], ["true_fun", "false_fun"], operands, "cond")


@eager_ok
def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """`branches[index](*operands)` with index clamped into range; HLO `conditional` with an
    s32 index."""
    if not branches:
        raise trace_error("switch: needs at least one branch")
    if isinstance(index, (int, np.integer)):
        return branches[int(np.clip(index, 0, len(branches) - 1))](*operands)
    from xlc.frontend import numpy_api as xnp

    i = as_tracer(index)
    if i.shape != () or not (i.ptype.is_integer or i.ptype is PT.PRED):
        raise trace_error(f"switch: index must be an integer scalar, got {i.aval_text}")
    i = xnp.clip(convert(i, PT.S32), 0, len(branches) - 1)
    names = [f"branches[{k}]" for k in range(len(branches))]
    return _conditional(i, list(branches), names, operands, "switch")


# ---- scan --------------------------------------------------------------------------------------
@eager_ok
def scan(f: Callable[[Any, Any], tuple[Any, Any]], init: Any, xs: Any = None,
         length: int | None = None, reverse: bool = False) -> tuple[Any, Any]:
    """`carry, y = f(carry, x)` over the leading axis of `xs`; returns (final carry, stacked
    ys). Lowered to a while loop that slices xs and writes ys with dynamic-update-slice."""
    from xlc.frontend import lax
    from xlc.frontend import numpy_api as xnp

    x_leaves, x_td = pytree.flatten(xs)
    x_leaves = [as_tracer(x) for x in x_leaves]
    lengths = {x.shape[0] for x in x_leaves if x.ndim}
    if any(x.ndim == 0 for x in x_leaves):
        raise trace_error("scan: every leaf of xs needs a leading axis to scan over")
    if length is not None:
        lengths.add(int(length))
    if len(lengths) != 1:
        raise trace_error(f"scan: xs leaves and length disagree on the scan length: "
                          f"{sorted(lengths)}" if lengths else
                          "scan: pass xs or length")
    n = lengths.pop()

    def x_at(i: Tracer) -> Any:
        return pytree.unflatten(x_td, [
            lax.reshape(lax.dynamic_slice(x, [i] + [0] * (x.ndim - 1), (1,) + x.shape[1:],
                                          allow_negative_indices=False),
                        x.shape[1:]) for x in x_leaves])

    init_leaves, init_td = _flat_operands(init, "scan init")

    def probe_f() -> tuple[list[Aval], pytree.TreeDef]:
        out_avals, out_td = probe(
            lambda c: f(c, x_at(as_tracer(np.int32(0))) if x_leaves else None), (init,))
        if out_td.kind != "tuple" or len(out_td.children) != 2:
            raise trace_error(f"scan: f must return a pair (carry, y), got structure {out_td}")
        return out_avals, out_td

    out_avals, out_td = probe_f()
    n_carry = out_td.children[0].num_leaves
    if out_td.children[0] == init_td:  # weakly typed init leaves promote as in JAX
        init_leaves, changed = _promote_weak_carries(init_leaves, out_avals[:n_carry])
        if changed:
            init = pytree.unflatten(init_td, init_leaves)
            out_avals, out_td = probe_f()
            n_carry = out_td.children[0].num_leaves
    y_avals = out_avals[n_carry:]
    y_td = out_td.children[1]
    ys0 = [zeros_of(Aval(a.ptype, (n,) + a.dims)) for a in y_avals]

    def body(i: Tracer, state: Any) -> Any:
        carry, ys = state
        idx = xnp.subtract(n - 1, i) if reverse else i
        new_carry, y = f(carry, x_at(idx) if x_leaves else None)
        y_leaves, _ = pytree.flatten(y)
        ys = [lax.dynamic_update_slice(buf, lax.reshape(as_tracer(v, buf.ptype),
                                                        (1,) + buf.shape[1:]),
                                       [idx] + [0] * (buf.ndim - 1),
                                       allow_negative_indices=False)
              for buf, v in zip(ys, y_leaves)]
        return new_carry, ys

    carry, ys = _fori_loop(0, n, body, (init, ys0), promote=False, what="scan",
                           strip="[1][0]")
    return carry, pytree.unflatten(y_td, ys)
