"""Staging Python functions into HLO: the entry computation of a fresh module, scalar
sub-computations (reducers, comparators) and throw-away shape probes.

`trace_to_module(fn, args_avals, ...)` requires `fn` to take and return pytrees of arrays and
guarantees a module whose entry parameters are the flattened argument leaves in order and whose
root is the single output leaf or a tuple of all output leaves.
"""
from __future__ import annotations

import inspect
import logging
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlc.errors import ArgumentError
from xlc.frontend import pytree
from xlc.frontend.tracer import (
    Builder,
    Tracer,
    as_tracer,
    emit,
    end_of_outermost_trace,
    is_arraylike,
    push_builder,
    require_builder,
    trace_error,
    user_code,
)
from xlc.hlo.ir import HloComputation, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape

log = logging.getLogger("xlc.frontend")


@dataclass(frozen=True)
class Aval:
    """The abstract value of one argument leaf: element type, dims and weak-typedness."""

    ptype: PrimitiveType
    dims: tuple[int, ...]
    weak: bool = False

    @property
    def shape(self) -> Shape:
        return Shape.array(self.ptype, self.dims)

    def __str__(self) -> str:
        return self.shape.to_text(layout=False)


@dataclass
class TracedModule:
    """Result of tracing: the module plus the output pytree structure and output avals."""

    module: HloModule
    out_tree: pytree.TreeDef
    out_avals: list[Aval]
    root_is_tuple: bool


def _leaf_tracers(out: Any, what: str) -> tuple[list[Tracer], pytree.TreeDef]:
    leaves, td = pytree.flatten(out)
    tracers = []
    for i, leaf in enumerate(leaves):
        if not is_arraylike(leaf):
            raise trace_error(f"{what} returned a {type(leaf).__name__} at output "
                              f"{pytree.leaf_paths(td)[i] or '[0]'}; only arrays, scalars and "
                              "tuples/lists/dicts of them can be returned")
        tracers.append(as_tracer(leaf))
    return tracers, td


def trace_to_module(fn: Callable[..., Any], in_tree: pytree.TreeDef, in_avals: Sequence[Aval],
                    name: str, param_names: Sequence[str] | None = None,
                    user_fn: Callable[..., Any] | None = None) -> TracedModule:
    """Trace `fn(*args)` where args = unflatten(in_tree, parameters) (`in_tree` must describe a
    tuple) into a new module `jit_<name>` with entry computation `main`.

    `user_fn` is the user's function that `fn` stages (when `fn` is a wrapper): lines in its
    source file are the user's lines in metadata and errors, even inside the xlc package."""
    module = HloModule(f"jit_{name}")
    entry = module.new_computation("main", entry=True)
    builder = Builder(module, entry, f"jit({name})", what=f"function {name}")
    try:
        return _trace_into(module, entry, builder, fn, in_tree, in_avals, name, param_names,
                           user_fn)
    finally:
        end_of_outermost_trace()


def _trace_into(module: HloModule, entry: HloComputation, builder: Builder,
                fn: Callable[..., Any], in_tree: pytree.TreeDef, in_avals: Sequence[Aval],
                name: str, param_names: Sequence[str] | None,
                user_fn: Callable[..., Any] | None) -> TracedModule:
    with push_builder(builder), user_code(user_fn):
        params = []
        for i, av in enumerate(in_avals):
            pname = param_names[i] if param_names else f"Arg_{i}"
            inst = entry.add_parameter(i, av.shape, name=pname)
            params.append(Tracer(inst, builder, av.weak))
        args = pytree.unflatten(in_tree, params)
        out = fn(*args)
        outs, out_tree = _leaf_tracers(out, f"function {name}")
        root_is_tuple = not (out_tree.kind == "leaf")
        if root_is_tuple:
            root = emit(Opcode.TUPLE, Shape.tuple_of([t.aval for t in outs]), outs,
                        op_name="tuple")
            entry.root = root.inst
        else:
            entry.root = outs[0].inst
    finalize_module(module)
    log.debug("traced %s: %d computations, %d entry instructions", module.name,
              len(module.computations), len(entry.instructions))
    avals = [Aval(t.ptype, t.shape, t.weak_type) for t in outs]
    return TracedModule(module, out_tree, avals, root_is_tuple)


def check_argnums(name: str, params: list[inspect.Parameter], static_nums: frozenset[int],
                   static_names: frozenset[str], donate_nums: frozenset[int]) -> None:
    """ArgumentError at jit() time for static/donated argument numbers or names that the
    function's signature cannot have (as JAX checks), and for a donated static argument."""
    kinds = {p.kind for p in params}
    npos = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    if inspect.Parameter.VAR_POSITIONAL not in kinds:
        for what, nums in (("static_argnums", static_nums), ("donate_argnums", donate_nums)):
            bad = sorted(n for n in nums if not -npos <= n < npos)
            if bad:
                raise ArgumentError(f"jit({name}): {what} {bad} out of range: the function "
                                    f"takes {npos} positional argument(s)")
    if inspect.Parameter.VAR_KEYWORD not in kinds:
        known = {p.name for p in params if p.kind is not p.POSITIONAL_ONLY}
        bad_names = sorted(static_names - known)
        if bad_names:
            raise ArgumentError(f"jit({name}): static_argnames {bad_names} name no parameter "
                                f"of the function (it has {sorted(known)})")
    both = sorted(n for n in donate_nums if n in static_nums or n + npos in static_nums
                  or n - npos in static_nums)
    if both:
        raise ArgumentError(f"jit({name}): argument(s) {both} are both static and donated; "
                            "only arrays passed dynamically can be donated")


def finalize_module(module: HloModule) -> None:
    """Order computations callees-first and drop computations nothing calls."""
    order = module.computations_post_order()
    reachable: set[int] = set()

    def visit(c: HloComputation) -> None:
        if id(c) in reachable:
            return
        reachable.add(id(c))
        for callee in c.called_computations():
            visit(callee)

    assert module.entry is not None
    visit(module.entry)
    module.computations = [c for c in order if id(c) in reachable]


def new_sub_builder(name: str, what: str, capture: Any = None,
                    module: HloModule | None = None) -> Builder:
    """A builder for a new computation called from the innermost builder's computation."""
    parent = require_builder(what)
    mod = module or parent.module
    comp = mod.new_computation(name)
    return Builder(mod, comp, f"{parent.name_stack}/{name}", parent=parent, capture=capture,
                   what=what)


def trace_scalar_computation(name: str, fn: Callable[..., Any],
                             param_types: Sequence[PrimitiveType], what: str
                             ) -> tuple[HloComputation, list[Tracer]]:
    """Trace `fn(*scalars)` into a computation taking scalar parameters of `param_types`
    (for reducers and comparators). It may not capture outer traced values. The root is the
    single output or a tuple of outputs; returns (computation, output tracers)."""
    b = new_sub_builder(name, what)
    with push_builder(b):
        params = [Tracer(b.comp.add_parameter(i, Shape.array(pt, ())), b)
                  for i, pt in enumerate(param_types)]
        outs, _ = _leaf_tracers(fn(*params), what)
        outs = [o if o.builder is b else b.lift(o) for o in outs]
        if len(outs) == 1:
            b.comp.root = outs[0].inst
        else:
            b.comp.root = emit(Opcode.TUPLE, Shape.tuple_of([o.aval for o in outs]), outs,
                               op_name="tuple").inst
    return b.comp, outs


_REDUCERS: weakref.WeakKeyDictionary[HloModule, dict] = weakref.WeakKeyDictionary()


def monoid_computation(opcode: Opcode, ptype: PrimitiveType) -> HloComputation:
    """The scalar computation `(a, b) -> opcode(a, b)` of `ptype`, one per module."""
    b = require_builder("reduction")
    cache = _REDUCERS.setdefault(b.module, {})
    key = (opcode, ptype)
    if key not in cache:
        def body(x: Tracer, y: Tracer) -> Tracer:
            return emit(opcode, Shape.array(ptype, ()), [x, y])
        cache[key], _ = trace_scalar_computation(f"{opcode.text}.reducer", body,
                                                 [ptype, ptype], "reducer")
    return cache[key]


def probe(fn: Callable[..., Any], args: Any) -> tuple[list[Aval], pytree.TreeDef]:
    """Trace `fn(*args)` into a throw-away computation to learn its output avals and
    structure (args: a tuple pytree of Tracers/arrays of the current trace)."""
    parent = require_builder("shape probe")
    scratch = HloModule("probe")
    comp = scratch.new_computation("probe", entry=True)
    counter = [0]

    def make(b: Builder, k: int, outer: Tracer) -> Tracer:
        inst = comp.add_parameter(counter[0], outer.aval)
        counter[0] += 1
        return Tracer(inst, b, outer.weak_type)

    from xlc.frontend.tracer import CaptureList
    b = Builder(scratch, comp, parent.name_stack, parent=parent, capture=(CaptureList(), make),
                what="shape probe")
    with push_builder(b):
        outs, td = _leaf_tracers(fn(*args), "function")
    return [Aval(o.ptype, o.shape, o.weak_type) for o in outs], td


def zeros_of(aval: Aval) -> Tracer:
    """A zero-filled array of `aval`."""
    from xlc.frontend import lax

    z = as_tracer(np.zeros((), aval.ptype.dtype))
    return lax.broadcast_in_dim(z, aval.dims, ())
