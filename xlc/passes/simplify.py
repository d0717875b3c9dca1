"""Algebraic simplifier (XLA's AlgebraicSimplifier, layout-insensitive subset).

Named rewrites (each counted in `AlgebraicSimplifier.stats` under its name):

arithmetic (`simplify_arith.py`)
  1. add-zero               A+0 -> A, 0+A -> A
     add-update-slice       A + dus(0, U, i) -> dus(A, ds(A, i) + U, i) (accumulating one
                            slice costs the slice: reverse-mode scans)
  2. sub-zero               A-0 -> A
  3. mul-one                A*1 -> A, 1*A -> A
  4. int-mul-zero           A*0 -> 0 (integers / pred only: NaN*0 is NaN)
  5. div-one                A/1 -> A
  6. div-const-to-mul       A/C -> A*(1/C) (float, constant C without zeros/inf)
  7. div-broadcast-to-mul   A/broadcast(C) -> A*broadcast(1/C) (float)
  8. negate-negate          negate(negate A) -> A
  9. not-not                not(not A) -> A
 10. max-same / min-same    max(A,A) -> A, min(A,A) -> A
 11. select-same            select(P,A,A) -> A
 12. select-const-pred      select(true,A,B) -> A, select(false,A,B) -> B
 13. exp-zero               exp(0) -> 1
 14. log-exp                log(exp A) -> A
 15. compare-same           compare(A,A) -> true (EQ/LE/GE) / false (NE/LT/GT), integer/pred A
 16. convert-same-type      convert(A) to A's type -> A
 17. convert-convert        convert(convert(A,T2),T3) -> convert(A,T3) when A->T2 is lossless
 18. gte-tuple              get-tuple-element(tuple(A0..An), i) -> Ai

shapes (`simplify_shapes.py`)
 19. reshape-noop           reshape to the same dims -> A
 20. reshape-reshape        reshape(reshape A) -> reshape A
 21. reshape-broadcast-scalar  reshape(broadcast s) -> broadcast s (scalar s)
 22. transpose-identity     transpose(A), dims={0,1,..} -> A
 23. transpose-transpose    transpose(transpose A) -> transpose A (or A)
 24. transpose-broadcast-scalar  transpose(broadcast s) -> broadcast s (scalar s)
 25. transpose-elementwise  transpose(f(transpose A, broadcast s)) -> f(A, broadcast s) when
                            the outer transpose undoes the inner one (elementwise f)
 26. broadcast-noop         broadcast to the same dims, identity dims -> A
 27. broadcast-broadcast    broadcast(broadcast A) -> broadcast A
 28. slice-full             slice covering all of A, stride 1 -> A
 29. slice-slice            slice(slice A) -> slice A
 30. concat-single          concatenate(A) -> A
 31. concat-flatten         concatenate(A, concatenate(B,C)) -> concatenate(A,B,C)
 32. pad-zero               pad with zero low/high/interior -> A
 33. reverse-trivial        reverse over no / size-1 dims -> A
 34. reduce-trivial         reduce over no / size-1 dims -> reshape (+ op with the init value
                            unless it is the reducer's identity)
 35. dot-to-multiply        dot with size-1 (or no) contracting dims -> multiply of broadcasts
 36. dot-vector-to-reduce   dot without free dims (vector.vector) -> reduce(multiply, 0, add)
 37. copy-noop              copy keeping shape, layout and memory space -> A (copy insertion,
                            later, adds the copies aliasing needs)

Layout-changing copies stay (they are relayouts). Numerics: every rewrite is exact except the
float reassociations XLA also makes: add-zero and add-update-slice (-0 + 0 = +0),
div-*-to-mul (reciprocal rounding), log-exp (overflowing exp), dot-vector-to-reduce
(summation order).

Requires: a verified module. Guarantees: every replaced instruction's users see a value of the
same shape (an existing instruction replaces another only when the layouts agree; new
instructions take the replaced one's shape, layout included; intermediates get default layouts);
fusion computations are not touched; instruction lists stay topologically sorted. Dead operands
are left for DCE.
"""
from __future__ import annotations

import logging
from collections import Counter

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.passes.edit import remove_instructions, replace_uses
from xlc.passes.simplify_arith import ARITH_REWRITES
from xlc.passes.simplify_shapes import SHAPE_REWRITES
from xlc.passes.simplify_util import RewriteFn, Rewriter

log = logging.getLogger("xlc.passes")

REWRITES: dict[Opcode, RewriteFn] = {**ARITH_REWRITES, **SHAPE_REWRITES}


class AlgebraicSimplifier:
    """Apply the named local rewrites listed in the module docstring, once per instruction per
    run (run it inside a `FixedPoint` to reach a fixed point)."""

    name = "algebraic-simplifier"

    def __init__(self, disabled: frozenset[str] = frozenset()):
        self.disabled = disabled
        self.stats: Counter[str] = Counter()

    def run_on_computation(self, comp: HloComputation) -> int:
        """Simplify one computation in post order; returns the number of rewrites applied."""
        rw = Rewriter(comp)
        replaced: list[HloInstruction] = []
        for inst in comp.post_order():
            fn = REWRITES.get(inst.opcode)
            if fn is None:
                continue
            n_before = len(comp.instructions)
            result = fn(inst, rw)
            if result is None:
                assert len(comp.instructions) == n_before, f"rewrite of {inst.name} added code"
                continue
            name, new = result
            if name in self.disabled:
                for extra in comp.instructions[n_before:][::-1]:
                    if not extra.users and extra is not comp.root:
                        comp.remove_instruction(extra)
                continue
            log.debug("simplify %s: %s -> %s", name, inst.name, new.name)
            replace_uses(comp, inst, new)
            replaced.append(inst)
            self.stats[name] += 1
        if replaced:
            remove_instructions(comp, replaced)
            comp.sort_post_order()
        return len(replaced)

    def run(self, module: HloModule) -> bool:
        """Returns True iff some rewrite applied."""
        total = 0
        for comp in module.computations_post_order():
            if not comp.is_fusion_computation:
                total += self.run_on_computation(comp)
        return bool(total)
