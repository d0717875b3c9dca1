"""Widen 16-bit float reductions: `reduce` / `reduce-window` of f16 or bf16 whose reducer is a
single `add` or `multiply` accumulate in f32.

A 16-bit accumulator stops growing once the partial sum's spacing exceeds the addend: the sum
of 1000 bf16 ones is 256 when every step rounds to bf16 (f16 stalls at 2048). XLA's evaluator
(and ours, `xlc.hlo.evaluator`) computes these reducers in f32 and rounds once, and
`jax.numpy.sum` / `mean` / `var` upcast 16-bit floats to f32 before reducing. This pass gives
every backend the same semantics at the HLO level:

    r = bf16[M] reduce(bf16[N,M] x, bf16[] c), dimensions={0}, to_apply=add_bf16
becomes
    r.f32 = f32[M] reduce(f32[N,M] convert(x), f32[] convert(c)), dimensions={0},
            to_apply=add_f32
    r = bf16[M] convert(r.f32)

The converts fuse into the reduction's input fusion, so the CPU and GPU reduction emitters
(unfused reduces, kInput fusions, row fusions, reduce-window) all accumulate in f32 and read
and write 16-bit memory as before. `maximum` / `minimum` reducers are exact in any precision
and stay as they are; so do reducers of several instructions (the evaluator rounds each of
their steps to the 16-bit type, and so do the backends).

Requires: a verified module before fusion (only non-fusion computations are rewritten).
Guarantees: the same shapes at every use; no 16-bit `add`/`multiply` reduce or reduce-window
is left.
"""
from __future__ import annotations

import logging

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape
from xlc.passes.edit import rewrite_each, substitute
from xlc.passes.simplify_util import simple_reducer

log = logging.getLogger("xlc.passes.widen_reductions")

NARROW_FLOATS = frozenset({PrimitiveType.F16, PrimitiveType.BF16})
"""The element types whose add/multiply reductions accumulate in f32."""

WIDENED_REDUCERS = frozenset({Opcode.ADD, Opcode.MULTIPLY})
"""Single-op reducers that round at each step (max/min are exact and are not widened)."""

ACCUMULATION_TYPE = PrimitiveType.F32


def widenable(inst: HloInstruction) -> bool:
    """True for a non-variadic reduce / reduce-window of f16 or bf16 whose reducer is a single
    add or multiply of its two parameters."""
    if inst.opcode not in (Opcode.REDUCE, Opcode.REDUCE_WINDOW) or len(inst.operands) != 2:
        return False
    if not inst.shape.is_array or inst.shape.element_type not in NARROW_FLOATS:
        return False
    return simple_reducer(inst.called[0]) in WIDENED_REDUCERS


def _reducer(module: HloModule, op: Opcode, cache: dict[Opcode, HloComputation]
             ) -> HloComputation:
    """A scalar f32 `op(p0, p1)` computation: one per opcode per run, shared by all uses."""
    if op not in cache:
        scalar = Shape.array(ACCUMULATION_TYPE, ())
        comp = module.new_computation(f"{op.text}_{ACCUMULATION_TYPE.text}.widened")
        a = comp.add_parameter(0, scalar, "lhs")
        b = comp.add_parameter(1, scalar, "rhs")
        comp.root = comp.add(op, scalar, (a, b), name=op.text)
        cache[op] = comp
    return cache[op]


def widen(comp: HloComputation, inst: HloInstruction, reducer: HloComputation) -> HloInstruction:
    """Replace `inst` (a `widenable` instruction of `comp`) by convert -> f32 reduction ->
    convert back; returns the final convert."""
    x, init = inst.operands
    x32 = comp.add(Opcode.CONVERT, x.shape.with_type(ACCUMULATION_TYPE), (x,),
                   name=f"{x.name}.f32")
    init32 = comp.add(Opcode.CONVERT, init.shape.with_type(ACCUMULATION_TYPE), (init,),
                      name=f"{init.name}.f32")
    wide = comp.add(inst.opcode, inst.shape.with_type(ACCUMULATION_TYPE), (x32, init32),
                    inst.attrs, (reducer,), name=f"{inst.name}.f32", extra=inst.extra)
    out = comp.add(Opcode.CONVERT, inst.shape, (wide,), name=f"{inst.name}.narrow")
    substitute(comp, inst, out, (wide,))
    return out


class WidenNarrowReductions:
    """The HloPass: accumulate f16/bf16 add and multiply reductions in f32 (module doc)."""

    name = "widen-narrow-reductions"

    def run(self, module: HloModule) -> bool:
        """Rewrite in place; True if any reduction was widened."""
        cache: dict[Opcode, HloComputation] = {}

        def rewrite(comp: HloComputation, inst: HloInstruction) -> None:
            op = simple_reducer(inst.called[0])
            assert op is not None
            widen(comp, inst, _reducer(module, op, cache))
        count = rewrite_each(module, widenable, rewrite)
        if count:
            log.debug("widened %d 16-bit reduction(s) to f32", count)
        return count > 0
