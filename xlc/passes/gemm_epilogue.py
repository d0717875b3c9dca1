"""GemmEpilogueFusion: a dot and the elementwise / transposing work on its result become one
kOutput fusion, so the GEMM kernel writes the final values (bias, activation, residual add,
output conversion, a head transpose) instead of storing the dot and launching a loop kernel
that reads it back.

A dot qualifies when its only user is a kLoop fusion (or an unfused elementwise / transpose /
reshape / copy instruction, wrapped first) with an array root in which every element of the
result depends on exactly one dot element, the same one along every path: from the dot to the
root there are only elementwise ops (any other operands: broadcasts, parameters, constants,
read at the root's index), `convert`, `copy`, `transpose` and `reshape`, and where a value
derived from the dot meets another, both reach it through the same transposes and reshapes.
`epilogue_steps` returns that index map (dot index -> root index) as a list of steps; the
emitter (the GPU backend's `emit_output_fusion`) computes each root element from the
accumulator it holds.

Requires: fusion has run (the consumers are kLoop fusions). Guarantees: each rewritten dot
is the only dot of a kOutput fusion whose root is reachable from it through the ops above;
the dot keeps its attributes and precision; the fusion's kind is kOutput. Only in the GPU
pipeline (its GEMM emitters implement the epilogue); the evaluator runs such fusions like any
other.
"""
from __future__ import annotations

import logging

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.passes.fusion_legality import (
    LOOP,
    OUTPUT,
    is_fusible_computation,
    same_width_bitcast_convert,
)
from xlc.passes.fusion_utils import (
    create_fusion,
    embedded_callees,
    fuse_producer,
    invalidate_schedule,
)

log = logging.getLogger("xlc.passes.fusion")

Step = tuple
"""("transpose", permutation) or ("reshape", input dims, output dims)."""

_SAME_INDEX = frozenset({Opcode.CONVERT, Opcode.COPY})
_MOVES = frozenset({Opcode.TRANSPOSE, Opcode.RESHAPE})


def _step(inst: HloInstruction) -> Step | None:
    if inst.opcode is Opcode.TRANSPOSE:
        return ("transpose", tuple(int(d) for d in inst.attrs["dimensions"]))
    if inst.opcode is Opcode.RESHAPE:
        return ("reshape", tuple(inst.operands[0].shape.dims), tuple(inst.shape.dims))
    return None


def _passes_index(inst: HloInstruction) -> bool:
    """Whether `inst` computes each element from its operands' elements at the same index
    (or at one moved index: transpose, reshape)."""
    op = inst.opcode
    if op in _SAME_INDEX or op in _MOVES:
        return True
    if op is Opcode.BITCAST_CONVERT:
        return same_width_bitcast_convert(inst)
    return bool(op.is_elementwise) and inst.shape.is_array


def epilogue_steps(comp: HloComputation, source: HloInstruction) -> list[Step] | None:
    """The index map from `source` (a value of fused computation `comp`) to the root, when
    every root element is computed from exactly one element of `source` through the ops the
    module docstring lists; None otherwise."""
    root = comp.root
    if root is None or not root.shape.is_array:
        return None
    sig: dict[int, tuple[Step, ...]] = {source.uid: ()}
    for inst in comp.post_order():
        if inst is source:
            continue
        reached = [sig[o.uid] for o in inst.operands if o.uid in sig]
        if not reached:
            continue
        if not _passes_index(inst) or len(set(reached)) != 1:
            return None
        step = _step(inst)
        sig[inst.uid] = reached[0] + ((step,) if step is not None else ())
    return list(sig[root.uid]) if root.uid in sig else None


def fused_dot(fusion: HloInstruction) -> HloInstruction | None:
    """The dot of a kOutput fusion made by this pass (None for other fusions)."""
    if fusion.attrs.get("kind") != OUTPUT:
        return None
    dots = [i for i in fusion.fused_computation.instructions if i.opcode is Opcode.DOT]
    return dots[0] if len(dots) == 1 else None


class GemmEpilogueFusion:
    """The HloPass (see the module docstring)."""

    name = "gemm-epilogue-fusion"

    def run(self, module: HloModule) -> bool:
        """Fuse each qualifying dot into its consumer; True if any changed."""
        embedded = embedded_callees(module)
        changed = False
        for comp in list(module.computations):
            if not is_fusible_computation(comp, embedded):
                continue
            for dot in list(comp.instructions):
                if dot.opcode is Opcode.DOT and dot.parent is comp:
                    changed |= self._fuse(dot)
            if changed:
                comp.sort_post_order()
        if changed:
            invalidate_schedule(module)
        return changed

    def _fuse(self, dot: HloInstruction) -> bool:
        if dot.is_root or dot.control_successors or dot.control_predecessors \
                or not dot.shape.is_array or len({u.uid for u in dot.users}) != 1:
            return False
        user = dot.users[0]
        if user.control_predecessors or user.control_successors:
            return False
        if user.opcode is Opcode.FUSION:
            if user.attrs.get("kind") != LOOP:
                return False
            fc = user.fused_computation
            params = [fc.parameters[k] for k, o in enumerate(user.operands) if o is dot]
            if len(params) != 1 or epilogue_steps(fc, params[0]) is None:
                return False
            fusion = user
        elif _passes_index(user) and user.shape.is_array:
            fusion = create_fusion(user, LOOP, finalize=False)
        else:
            return False
        fuse_producer(fusion, dot)
        fusion.attrs = fusion.attrs.replace(kind=OUTPUT)
        inner = fused_dot(fusion)
        if inner is None or epilogue_steps(fusion.fused_computation, inner) is None:
            raise AssertionError(f"{fusion.name}: epilogue fusion broke its contract")
        log.debug("fused %s into the epilogue of %s", dot.name, fusion.name)
        return True
