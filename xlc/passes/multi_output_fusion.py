"""MultiOutputFusion: sibling and producer-consumer multi-output fusion (XLA's
`MultiOutputFusion`), run after `InstructionFusion`.

Requires a module in topological order. Guarantees numerics unchanged, and in every fusible
computation (non-fusion, non-embedded):
- *producer-consumer*: a loop-fusible producer (typically an expensive loop fusion that
  `InstructionFusion` refused to duplicate) is fused into one consumer (a loop/input fusion or a
  reduce) and exported as an extra tuple output; its other users read it through
  `get-tuple-element`. The consumer then no longer re-reads the producer's buffer from memory
  (softmax: `exp` is written once by the exp/sum reduction fusion and read by the divide).
- *sibling*: two consumers of the same large operand (two reductions over one input, or a
  reduction and a loop fusion) become one fusion whose root is a `tuple`, so the operand is read
  once.
Only when the shared/exported buffer is at least `min_shared_bytes`, all roots have the same
iteration space (`compatible_heroes`), the result stays within `max_fusion_operands` operands +
outputs and `max_reductions` reductions, and no cycle appears (`would_create_cycle`, by
reachability). Loops until nothing fuses.
"""
from __future__ import annotations

import logging

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.passes.fusion_legality import (
    LOOP,
    compatible_heroes,
    consumer_fusion_kind,
    fused_instruction_count,
    in_place_operand,
    is_fusible_computation,
    is_loop_fusible_producer,
    output_count,
    reduction_count,
    unique_operands,
)
from xlc.passes.fusion_utils import (
    create_fusion,
    embedded_callees,
    finalize_fusion,
    fuse_producer,
    invalidate_schedule,
    merge_sibling_fusions,
)

log = logging.getLogger("xlc.passes.fusion")

__all__ = ["MultiOutputFusion", "Reachability", "would_create_cycle"]


class Reachability:
    """Ancestor sets of one computation (operands and control predecessors) as bit masks,
    computed on demand. `reaches(a, b)`: is there a path from `a` to `b` (a == b counts)?

    A mask is computed when first asked for, from its operands' masks, so the masks known
    always cover every ancestor of a node that has one. After a fusion call
    `invalidate(fusion)`: only the known masks of the fusion and of its descendants are
    dropped (the nodes whose ancestors may have changed), not the whole map. Rebuilding
    everything after each fusion made the pass quadratic in the module's size (16 stacked
    transformer layers: 48 rebuilds of ~2,000 nodes)."""

    def __init__(self, comp: HloComputation):
        self._comp = comp
        self._bit: dict[int, int] = {}  # uid -> bit number (never reused)
        self._mask: dict[int, int] = {}  # uid -> ancestors' bits, itself included
        # instructions made later (fusions, their get-tuple-elements) have larger uids
        self._last_old_uid = max((i.uid for i in comp.instructions), default=-1)

    def invalidate(self, changed: HloInstruction | None = None) -> None:
        """`changed` (a fusion just made or grown) has new operands: forget its mask and
        those of its descendants. Without an argument, forget everything."""
        if changed is None:
            self._mask.clear()
            return
        # Walk down from `changed` through the nodes with a mask (dropping it) and the nodes
        # made since this map was built (they may sit between masked nodes). An older node
        # without a mask ends the walk: masks are closed under ancestors, so none of its
        # descendants has one.
        stack = [changed]
        seen: set[int] = set()
        while stack:
            inst = stack.pop()
            if inst.uid in seen:
                continue
            seen.add(inst.uid)
            had = self._mask.pop(inst.uid, None) is not None
            if had or inst is changed or inst.uid > self._last_old_uid:
                stack.extend(inst.users)
                stack.extend(inst.control_successors)

    def _mask_of(self, inst: HloInstruction) -> int:
        """The ancestor mask of `inst`, computing those of unknown ancestors first."""
        masks = self._mask
        hit = masks.get(inst.uid)
        if hit is not None:
            return hit
        stack = [inst]
        while stack:
            top = stack[-1]
            if top.uid in masks:
                stack.pop()
                continue
            preds = top.operands + top.control_predecessors
            missing = [p for p in preds if p.uid not in masks]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            bit = self._bit.setdefault(top.uid, len(self._bit))
            mask = 1 << bit
            for p in preds:
                mask |= masks[p.uid]
            masks[top.uid] = mask
        return masks[inst.uid]

    def reaches(self, a: HloInstruction, b: HloInstruction) -> bool:
        """True when `b` depends on `a` (transitively), or a is b."""
        mask = self._mask_of(b)
        bit = self._bit.get(a.uid)
        # known masks are closed under ancestors: an `a` with no current mask is no ancestor
        return bit is not None and a.uid in self._mask and bool(mask >> bit & 1)


def would_create_cycle(a: HloInstruction, b: HloInstruction, reach: Reachability) -> bool:
    """Would merging `a` and `b` into one instruction create a cycle? Yes when a path connects
    them through some other instruction (a direct operand edge alone is fine: it becomes
    internal to the fusion)."""
    for x, y in ((a, b), (b, a)):
        for o in y.operands + y.control_predecessors:
            if o is not x and reach.reaches(x, o):
                return True
    return False


_TOO_SMALL = "shared operand too small to be worth it"


def _fusible_sibling(inst: HloInstruction) -> bool:
    """A loop/input fusion, or a reduce / loop-fusible op that could root one."""
    if in_place_operand(inst) is not None:
        return False
    return consumer_fusion_kind(inst) is not None


def _exportable_producer(inst: HloInstruction) -> bool:
    """A single-output loop fusion, or a loop-fusible op other than a constant."""
    if inst.opcode is Opcode.FUSION:
        return inst.attrs.get("kind") == LOOP and inst.shape.is_array
    return inst.opcode is not Opcode.CONSTANT and is_loop_fusible_producer(inst)


def _is_fusion_or_reduction(inst: HloInstruction) -> bool:
    return inst.opcode is Opcode.FUSION or inst.opcode.category == "reduce"


class MultiOutputFusion:
    """Sibling and producer-consumer multi-output fusion (see the module docstring)."""

    name = "multi_output_fusion"

    def __init__(self, min_shared_bytes: int = 1024, max_fusion_operands: int = 64,
                 max_fusion_instructions: int = 256, max_reductions: int = 5,
                 sibling: bool = True, producer_consumer: bool = True):
        self.min_shared_bytes = min_shared_bytes
        self.max_fusion_operands = max_fusion_operands
        self.max_fusion_instructions = max_fusion_instructions
        self.max_reductions = max_reductions
        self.sibling = sibling
        self.producer_consumer = producer_consumer

    # ---- legality ---------------------------------------------------------------------------
    def _limits_error(self, a: HloInstruction, b: HloInstruction) -> str | None:
        """Operands + outputs, instructions and reductions of the merged fusion (an exported
        producer's single output is counted as one output)."""
        ops = unique_operands([a, b], exclude=[a, b])
        if len(ops) + output_count(a) + output_count(b) > self.max_fusion_operands:
            return f"more than {self.max_fusion_operands} operands and outputs"
        if fused_instruction_count(a, b) > self.max_fusion_instructions:
            return f"more than {self.max_fusion_instructions} instructions"
        if reduction_count(a) + reduction_count(b) > self.max_reductions:
            return f"more than {self.max_reductions} reductions"
        return None

    def producer_consumer_error(self, producer: HloInstruction, consumer: HloInstruction,
                                reach: Reachability) -> str | None:
        """Why `producer` cannot be fused into `consumer` and exported, or None."""
        if len(producer.users) < 2 and not producer.is_root:
            return "single-user producer (plain fusion's job)"
        if not _exportable_producer(producer):
            return "producer is not a single-output loop fusion or loop-fusible op"
        if consumer_fusion_kind(consumer) is None or not _is_fusion_or_reduction(consumer):
            return "consumer is not a loop/input fusion or reduction"
        if producer.shape.byte_size() < self.min_shared_bytes:
            return "producer buffer too small to be worth it"
        if in_place_operand(consumer) is not None or in_place_operand(producer) is not None:
            return "in-place update"
        if not compatible_heroes([producer, consumer]):
            return "incompatible iteration spaces"
        if would_create_cycle(producer, consumer, reach):
            return "cycle"
        return self._limits_error(producer, consumer)

    def sibling_error(self, a: HloInstruction, b: HloInstruction, shared: HloInstruction,
                      reach: Reachability) -> str | None:
        """Why siblings `a` and `b` (both reading `shared`) cannot become one fusion, or None."""
        if not (_fusible_sibling(a) and _fusible_sibling(b)):
            return "not a fusible sibling"
        if not (_is_fusion_or_reduction(a) or _is_fusion_or_reduction(b)):
            return "neither sibling is a fusion or reduction"
        if shared.shape.byte_size() < self.min_shared_bytes:
            return _TOO_SMALL
        if reach.reaches(a, b) or reach.reaches(b, a):
            return "cycle"
        if not compatible_heroes([a, b]):
            return "incompatible iteration spaces"
        return self._limits_error(a, b)

    # ---- the loop ---------------------------------------------------------------------------
    def run(self, module: HloModule) -> bool:
        """Multi-output fuse in every fusible computation; True when anything changed."""
        embedded = embedded_callees(module)
        changed = False
        for comp in list(module.computations):
            if comp in module.computations and is_fusible_computation(comp, embedded):
                changed |= self._run_on_computation(comp)
        if changed:
            invalidate_schedule(module)
        return changed

    def _run_on_computation(self, comp: HloComputation) -> bool:
        """Rounds of producer-consumer then sibling fusion until a round changes nothing."""
        touched: dict[int, HloInstruction] = {}
        changed = False
        while True:
            progress = False
            if self.producer_consumer:
                progress |= self._producer_consumer_round(comp, touched)
            if self.sibling:
                progress |= self._sibling_round(comp, touched)
            if not progress:
                break
            changed = True
        for fusion in touched.values():
            if fusion.parent is comp:
                finalize_fusion(fusion)
        if changed:
            comp.sort_post_order()
        return changed

    def _producer_consumer_round(self, comp: HloComputation,
                                 touched: dict[int, HloInstruction]) -> bool:
        """One sweep over consumers in post order, exporting at most one producer into each."""
        reach = Reachability(comp)
        changed = False
        for consumer in comp.post_order():
            if consumer.parent is not comp:
                continue  # fused away earlier in this sweep
            for producer in unique_operands([consumer]):
                why = self.producer_consumer_error(producer, consumer, reach)
                if why is not None:
                    log.debug("no multi-output fusion of %s into %s: %s",
                              producer.name, consumer.name, why)
                    continue
                log.debug("multi-output fusing %s into %s", producer.name, consumer.name)
                fusion = self._as_fusion(consumer)
                fuse_producer(fusion, producer, export=True, finalize=False)
                touched[id(fusion)] = fusion
                reach.invalidate(fusion)
                changed = True
                break
        return changed

    def _sibling_round(self, comp: HloComputation, touched: dict[int, HloInstruction]) -> bool:
        """One sweep over shared operands in post order, merging their fusible users."""
        reach = Reachability(comp)
        changed = False
        # Pairs that failed for a reason other than the shared operand's size stay failed for
        # the rest of the sweep: merging only adds operands, outputs and paths.
        failed: set[tuple[int, int]] = set()
        for shared in comp.post_order():
            merged = True
            while merged and shared.parent is comp:
                merged = False
                users = list(dict.fromkeys(shared.users))
                for i, a in enumerate(users):
                    for b in users[i + 1:]:
                        if (a.uid, b.uid) in failed:
                            continue
                        why = self.sibling_error(a, b, shared, reach)
                        if why is not None:
                            log.debug("no sibling fusion of %s and %s: %s", a.name, b.name,
                                      why)
                            if why != _TOO_SMALL:
                                failed.add((a.uid, b.uid))
                            continue
                        log.debug("sibling fusing %s and %s", a.name, b.name)
                        fusion = merge_sibling_fusions(self._as_fusion(a), self._as_fusion(b),
                                                       finalize=False)
                        touched[id(fusion)] = fusion
                        reach.invalidate(fusion)
                        changed = merged = True
                        break
                    if merged:
                        break
        return changed

    def _as_fusion(self, inst: HloInstruction) -> HloInstruction:
        """`inst` itself when a fusion, else a new fusion wrapping it."""
        if inst.opcode is Opcode.FUSION:
            return inst
        kind = consumer_fusion_kind(inst)
        assert kind is not None
        return create_fusion(inst, kind, finalize=False)
