"""The batching interpreter behind `xlc.vmap` (`vmap.py`): it re-emits the instructions of a
per-example computation into the current one, batched.

A value of the per-example program becomes a `BVal`: a tracer of the current computation and
whether it is *batched*. A batched value carries the batch dimension first (dim 0, size
`BatchCtx.size`); an unbatched value is the per-example value itself, shared by every example,
and is never broadcast unless an instruction mixes it with a batched one. Tuple-shaped values
are Python tuples of values (`Val`), so tuples and get-tuple-element cost nothing.

`replay(ctx, comp, bindings, outputs)` walks `comp` in order: an instruction whose operands are
all unbatched is emitted unchanged (`unbatched`); otherwise its opcode's rule in
`vmap_rules.BATCH_RULES` emits the batched form. Only instructions that the outputs need, or
that have a side effect, are replayed. Every instruction a rule emits into the current
computation takes the metadata (op_name, source line) of the instruction it stands for.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from xlc.errors import UnsupportedOpError
from xlc.frontend.tracer import Builder, Tracer, current_builder, emit, push_builder
from xlc.hlo.attrs import Attrs
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Shape


class BVal:
    """A value of the batched program: `t` (batch dim first when `batched`)."""

    __slots__ = ("t", "batched")

    def __init__(self, t: Tracer, batched: bool):
        self.t = t
        self.batched = batched

    def __repr__(self) -> str:
        return f"BVal({self.t!r}, batched={self.batched})"


Val: TypeAlias = "BVal | tuple[Val, ...]"
"""A batched value: an array (`BVal`) or a tuple of values."""

Pattern: TypeAlias = "bool | tuple[Pattern, ...]"
"""Which leaves of a value are batched, in the value's tuple structure."""


@dataclass
class BatchCtx:
    """One vmap: the batch size, the transformation's name for messages (`vmap(f)`) and the
    uids of emitted instructions whose metadata is settled."""

    size: int
    where: str
    tagged: set[int] = field(default_factory=set)
    # id(custom_vjp/custom_jvp group) -> (its batched copy, whether batched): vmap_custom
    custom_groups: dict[int, Any] = field(default_factory=dict)


# ---- values -------------------------------------------------------------------------------------
def any_batched(vals: Sequence[Val]) -> bool:
    """Whether any leaf of `vals` is batched."""
    return any(leaf.batched for v in vals for leaf in leaves(v))


def leaves(v: Val) -> list[BVal]:
    """The array leaves of `v`, in order."""
    if isinstance(v, BVal):
        return [v]
    return [leaf for x in v for leaf in leaves(x)]


def pattern(v: Val) -> Pattern:
    """`v`'s batchedness, in its tuple structure."""
    if isinstance(v, BVal):
        return v.batched
    return tuple(pattern(x) for x in v)


def flat_pattern(p: Pattern) -> list[bool]:
    """The leaves of a pattern, in order."""
    if isinstance(p, bool):
        return [p]
    return [b for x in p for b in flat_pattern(x)]


def rebuild(p: Pattern, items: Sequence[BVal]) -> Val:
    """The value of structure `p` whose leaves are `items`, in order."""
    it = iter(items)

    def go(q: Pattern) -> Val:
        return next(it) if isinstance(q, bool) else tuple(go(x) for x in q)

    return go(p)


def union(a: Pattern, b: Pattern) -> Pattern:
    """Leafwise `or` of two patterns of one structure."""
    if isinstance(a, bool) and isinstance(b, bool):
        return a or b
    assert isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)
    return tuple(union(x, y) for x, y in zip(a, b))


def bshape(shape: Shape, n: int) -> Shape:
    """`shape` with a leading batch dim of size `n` on every array leaf."""
    if shape.is_tuple:
        assert shape.tuple_shapes is not None
        return Shape.tuple_of([bshape(s, n) for s in shape.tuple_shapes])
    assert shape.element_type is not None
    return Shape.array(shape.element_type, (n, *shape.dims))


def strong(t: Tracer) -> Tracer:
    """`t` without weak typing (the HLO types are settled; weak types only matter at the
    outputs, where vmap restores them)."""
    return t if not t.weak_type else Tracer(t.inst, t.builder)


def bcast(ctx: BatchCtx, v: BVal) -> Tracer:
    """`v` as a batched tracer: broadcast along a new leading dim if it is unbatched."""
    if v.batched:
        return v.t
    from xlc.frontend import lax

    t = v.t
    return strong(lax.broadcast_in_dim(t, (ctx.size, *t.shape), tuple(range(1, t.ndim + 1))))


def bcast_to(ctx: BatchCtx, v: BVal, batched: bool) -> BVal:
    """`v`, broadcast when `batched` asks for a batched value."""
    return BVal(bcast(ctx, v), True) if batched and not v.batched else v


def materialize(v: Val) -> Tracer:
    """A tracer for `v` (a `tuple` instruction for tuple values)."""
    if isinstance(v, BVal):
        return v.t
    parts = [materialize(x) for x in v]
    return emit(Opcode.TUPLE, Shape.tuple_of([p.aval for p in parts]), parts, op_name="tuple")


def decompose(t: Tracer, batched: bool) -> Val:
    """`t` as a value: tuple-shaped results become tuples of get-tuple-elements."""
    if not t.aval.is_tuple:
        return BVal(t, batched)
    shapes = t.aval.tuple_shapes
    assert shapes is not None
    return tuple(decompose(emit(Opcode.GET_TUPLE_ELEMENT, s, [t], {"index": i},
                                op_name="get_tuple_element"), batched)
                 for i, s in enumerate(shapes))


def extra_of(inst: HloInstruction) -> list[tuple[str, str]]:
    """`inst`'s raw attributes other than its metadata (backend_config, ...)."""
    return [(k, v) for k, v in inst.extra if k != "metadata"]


def reemit(inst: HloInstruction, operands: Sequence[Tracer], shape: Shape,
           attrs: Attrs | None = None, called: Sequence[HloComputation] | None = None
           ) -> Tracer:
    """`inst` emitted again in the current computation with new operands, result shape and
    (optionally) attributes and called computations."""
    return emit(inst.opcode, shape, [strong(o) for o in operands],
                inst.attrs if attrs is None else attrs,
                inst.called if called is None else called, op_name=inst.opcode.text,
                extra=extra_of(inst))


def unbatched(ctx: BatchCtx, inst: HloInstruction, args: Sequence[Val]) -> Val:
    """`inst` on unbatched operands: emitted unchanged, its result unbatched."""
    return decompose(reemit(inst, [materialize(a) for a in args], inst.shape), False)


# ---- effects and liveness ------------------------------------------------------------------------
def has_effect(inst: HloInstruction, _seen: dict[int, bool] | None = None) -> bool:
    """Whether `inst` has a side effect that must run even when its result is unused: a
    custom-call marked `custom_call_has_side_effect`, a stateful op, or control flow whose
    computations hold one."""
    if inst.opcode is Opcode.CUSTOM_CALL:
        if inst.get_extra("custom_call_has_side_effect") == "true":
            return True
    elif inst.opcode.has_side_effect:
        return True
    seen = {} if _seen is None else _seen
    for comp in inst.called:
        key = id(comp)
        if key not in seen:
            seen[key] = False
            seen[key] = any(has_effect(i, seen) for i in comp.instructions)
        if seen[key]:
            return True
    return False


def live_set(comp: HloComputation, outputs: Sequence[HloInstruction]) -> set[int]:
    """ids of the instructions of `comp` that `outputs` need, plus effectful ones and what
    they need."""
    live: set[int] = set()
    stack = list(outputs) + [i for i in comp.instructions if has_effect(i)]
    while stack:
        inst = stack.pop()
        if id(inst) in live:
            continue
        live.add(id(inst))
        stack.extend(inst.operands)
    return live


# ---- the interpreter -----------------------------------------------------------------------------
def replay(ctx: BatchCtx, comp: HloComputation, bindings: dict[HloInstruction, Val],
           outputs: Sequence[HloInstruction]) -> list[Val]:
    """Re-emit the instructions of `comp` that `outputs` need into the current computation,
    batched; `bindings` gives the values of its parameters. Returns the outputs' values."""
    builder = current_builder()
    assert builder is not None
    live = live_set(comp, outputs)
    env: dict[HloInstruction, Val] = dict(bindings)
    for inst in comp.instructions:
        if inst in env or id(inst) not in live:
            continue
        if inst.opcode is Opcode.PARAMETER:
            raise UnsupportedOpError(f"{ctx.where}: parameter {inst.name} of {comp.name} has "
                                     "no value (internal error)")
        start = len(builder.comp.instructions)
        env[inst] = batch_instruction(ctx, inst, [env[o] for o in inst.operands])
        if inst.opcode is Opcode.COPY:  # perhaps a custom_vjp/custom_jvp output marker
            from xlc.frontend.vmap_custom import carry_custom

            carry_custom(ctx, inst, env)
        _tag(ctx, builder.comp.instructions[start:], inst)
    return [env[o] for o in outputs]


def _tag(ctx: BatchCtx, emitted: Sequence[HloInstruction], src: HloInstruction) -> None:
    """Give instructions emitted for `src` its metadata (those of nested replays keep
    theirs)."""
    meta = src.get_extra("metadata")
    for inst in emitted:
        if inst.uid in ctx.tagged:
            continue
        ctx.tagged.add(inst.uid)
        if meta is not None:
            inst.with_extra("metadata", meta)


def batch_instruction(ctx: BatchCtx, inst: HloInstruction, args: Sequence[Val]) -> Val:
    """The value of `inst` given its operands' values: unchanged when no operand is batched
    (except for the opcodes in `vmap_rules.ALWAYS`), else its batching rule."""
    from xlc.frontend import vmap_rules

    op = inst.opcode
    if op not in vmap_rules.ALWAYS and not any_batched(args):
        return unbatched(ctx, inst, args)
    rule = vmap_rules.BATCH_RULES.get(op)
    if rule is None:
        reason = vmap_rules.NO_RULE.get(op, "not written yet")
        raise UnsupportedOpError(f"{ctx.where}: no batching rule for '{op.text}' "
                                 f"({inst.name}) with batched operands: {reason}")
    return rule(ctx, inst, list(args))


def probe_pattern(ctx: BatchCtx, comp: HloComputation, params: Sequence[Pattern]) -> Pattern:
    """Which leaves of `comp`'s result are batched when its parameters' leaves are batched as
    `params` say: `comp` is replayed into a throw-away module."""
    scratch = HloModule("vmap_probe")
    c = scratch.new_computation("probe", entry=True)
    b = Builder(scratch, c, ctx.where, what="vmap probe")
    counter = [0]

    def fresh(shape: Shape, p: Pattern) -> Val:
        if shape.is_tuple:
            assert shape.tuple_shapes is not None and isinstance(p, tuple)
            return tuple(fresh(s, q) for s, q in zip(shape.tuple_shapes, p))
        assert isinstance(p, bool)
        inst = c.add_parameter(counter[0], bshape(shape, ctx.size) if p else shape)
        counter[0] += 1
        return BVal(Tracer(inst, b), p)

    with push_builder(b):
        binds = {comp.parameters[i]: fresh(comp.parameters[i].shape, p)
                 for i, p in enumerate(params)}
        assert comp.root is not None
        sub = BatchCtx(ctx.size, ctx.where)
        return pattern(replay(sub, comp, binds, [comp.root])[0])
