"""InstructionFusion: producer -> consumer fusion into kLoop / kInput fusions (XLA's
`InstructionFusion` with the CPU backend's rules).

Requires a module whose computations are in topological order (the verifier's invariants).
Guarantees: numerics unchanged; in every non-fusion, non-embedded computation (entry, while
bodies and conditions, conditional branches, call targets) loop-fusible producers (elementwise
ops, broadcast, reshape, transpose, slice, pad, concatenate, iota, dynamic-slice, reverse, copy,
bitcast, scalar constants) are cloned into their consumers, which become `fusion` instructions
of kind `kLoop` (elementwise / data-movement root) or `kInput` (a reduce root, variadic ones
included, or reduce-window with `fuse_reduce_window`; one reduction per fusion). Dots,
convolutions, sorts, custom-calls, control flow, gathers (unless `fuse_gather`), scatters, rngs
and reductions are never fused as producers; expensive producers are never duplicated nor
recomputed per reused element; a cheap producer is duplicated into several consumers only when
that keeps no more computed bytes alive than it writes (`duplication_error`); in-place
dynamic-update-slice roots keep their buffer operand unfused; fusions stay within
`max_fusion_operands` (operands + outputs) and `max_fusion_instructions`.

The algorithm (XLA): visit consumers in reverse post order; for a consumer, try its operands in
descending post-order position; after a successful fusion restart on the new fusion; loop until
nothing fuses. The decision is split into `fusion_legality_error` (can it be done),
`duplication_error` (may the producer be duplicated into several consumers) and
`fusion_priority` (is it worth it); cycles cannot arise from fusing a direct operand, see
`creates_cycle`.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.passes.fusion_legality import (
    INPUT,
    LOOP,
    breaks_in_place_update,
    consumer_fusion_kind,
    control_successor_ids,
    effectively_at_most_unary,
    fused_instruction_count,
    fused_operand_count,
    is_fusible_computation,
    is_loop_fusible_producer,
    reuses_operand_elements,
    unique_operands,
)
from xlc.passes.fusion_utils import (
    create_fusion,
    embedded_callees,
    finalize_fusion,
    fuse_producer,
    invalidate_schedule,
)

log = logging.getLogger("xlc.passes.fusion")

__all__ = ["InstructionFusion", "creates_cycle", "fusion_priority", "kept_alive_sources"]


def fusion_priority(producer: HloInstruction, consumer: HloInstruction) -> int:
    """Estimated bytes of memory traffic saved by fusing `producer` into `consumer`; fusing is
    worth it only when positive. The consumer no longer reads the producer's buffer, and when it
    is the producer's only user the buffer is not written either. Fusing a lone constant into an
    unfused elementwise op saves nothing (XLA CPU: no constant+op fusions), but reductions take
    their init constants."""
    if (producer.opcode is Opcode.CONSTANT and consumer.opcode is not Opcode.FUSION
            and consumer.opcode.category != "reduce"):
        return 0
    size = max(producer.shape.byte_size(), 1)
    only_user = all(u is consumer for u in producer.users)
    return 2 * size if only_user else size


def creates_cycle(producer: HloInstruction, consumer: HloInstruction) -> bool:
    """Could fusing `producer` into `consumer` create a cycle? Only when it is not a direct
    operand: fusing a direct operand moves the producer's operands onto the fusion, and a
    duplicated producer keeps feeding its other users, so every path still runs forward.
    (Multi-output fusion, which merges unrelated instructions, checks reachability instead.)"""
    return not any(o is producer for o in consumer.operands)


def _free_to_keep_alive(inst: HloInstruction) -> bool:
    """Values that cost no memory to read from several fusions: parameters and constants (their
    buffers live through the whole computation whatever fusion does) and effective scalars."""
    return (inst.opcode in (Opcode.PARAMETER, Opcode.CONSTANT)
            or (inst.shape.is_array and inst.shape.num_elements <= 1))


_SOURCE_DEPTH = 8
"""How far `kept_alive_sources` looks through cheap effectively-unary producers."""


def kept_alive_sources(producer: HloInstruction,
                       fusible: Callable[[HloInstruction], bool] = is_loop_fusible_producer,
                       ) -> list[HloInstruction]:
    """The computed values a fused copy of `producer` would read: its operands, looking through
    cheap, effectively unary producers (`broadcast(v)`, `is-finite(v)`, `maximum(v, -inf)`),
    which fuse along and read their own source instead. Parameters, constants and scalars are
    left out (free to keep alive, see `_free_to_keep_alive`). `fusible` says which producers
    fuse (default `is_loop_fusible_producer`)."""
    found: dict[int, HloInstruction] = {}
    seen: set[int] = set()
    stack = [(o, 0) for o in producer.operands]
    while stack:
        inst, depth = stack.pop()
        if inst.uid in seen or _free_to_keep_alive(inst):
            continue
        seen.add(inst.uid)
        if (depth < _SOURCE_DEPTH and not inst.opcode.is_expensive
                and fusible(inst) and effectively_at_most_unary(inst)):
            stack.extend((o, depth + 1) for o in inst.operands)
        else:
            found[inst.uid] = inst
    return list(found.values())


class InstructionFusion:
    """Producer -> consumer loop and input fusion (see the module docstring).

    Options: `max_fusion_operands` (operands + outputs) and `max_fusion_instructions` bound a
    fusion; `allow_duplication=False` never clones a producer that has other users;
    `fuse_reduce_window=True` lets reduce-window root kInput fusions (off by default: only the
    CPU backend has an emitter for them today); `fuse_dynamic_update_slice=False` keeps
    dynamic-update-slices unfused; `fuse_gather=True` fuses gathers like loop-fusible producers
    and lets them root kLoop fusions (XLA CPU/GPU do; off by default: a backend needs an
    elemental gather emitter - contract: a fused `gather` computes output element i from the
    start indices it reads at i, like the unfused op). `run(module) -> bool` reports whether
    anything fused."""

    name = "fusion"

    def __init__(self, max_fusion_operands: int = 64, max_fusion_instructions: int = 256,
                 allow_duplication: bool = True, fuse_reduce_window: bool = False,
                 fuse_dynamic_update_slice: bool = True, fuse_gather: bool = False):
        self.max_fusion_operands = max_fusion_operands
        self.max_fusion_instructions = max_fusion_instructions
        self.allow_duplication = allow_duplication
        self.fuse_reduce_window = fuse_reduce_window
        self.fuse_dynamic_update_slice = fuse_dynamic_update_slice
        self.fuse_gather = fuse_gather
        # Per-computation state while `run` fuses one computation.
        self._control_successors: set[int] | None = None
        self._producer_ok: dict[int, bool] | None = None

    # ---- the decision, in three parts --------------------------------------------------------
    def consumer_kind(self, consumer: HloInstruction) -> str | None:
        """The fusion kind `consumer` roots, or None when it cannot absorb producers."""
        return consumer_fusion_kind(consumer, self.fuse_reduce_window,
                                    self.fuse_dynamic_update_slice, self.fuse_gather)

    def fusion_legality_error(self, producer: HloInstruction,
                              consumer: HloInstruction) -> str | None:
        """Why `producer` cannot be fused into `consumer` (ignoring its other users), or None
        when it can."""
        return (self._basic_error(producer, consumer)
                or self._structural_error(producer, consumer))

    def _basic_error(self, producer: HloInstruction, consumer: HloInstruction) -> str | None:
        """The cheap legality checks: opcodes, placement, roots."""
        if producer.parent is not consumer.parent:
            return "different computations"
        if self.consumer_kind(consumer) is None:
            return f"{consumer.opcode.text} cannot root a fusion"
        if not self._fusible_producer(producer):
            return f"{producer.opcode.text} is not a fusible producer"
        if producer.is_root:
            return "producer is the computation root"
        if creates_cycle(producer, consumer):
            return "producer is not an operand of the consumer"
        return None

    def _fusible_producer(self, producer: HloInstruction) -> bool:
        """`is_loop_fusible_producer`, memoized while a computation is being fused."""
        if self._producer_ok is None:
            return is_loop_fusible_producer(producer, fuse_gather=self.fuse_gather)
        ok = self._producer_ok.get(producer.uid)
        if ok is None:
            ok = is_loop_fusible_producer(producer, self._control_successors, self.fuse_gather)
            self._producer_ok[producer.uid] = ok
        return ok

    def _structural_error(self, producer: HloInstruction,
                          consumer: HloInstruction) -> str | None:
        """The checks that look at the fused bodies: in-place updates, limits, operand reuse."""
        if breaks_in_place_update(producer, consumer):
            return "consumer updates a buffer in place that the producer reads or computes"
        if fused_operand_count(producer, consumer) > self.max_fusion_operands:
            return f"more than {self.max_fusion_operands} operands and outputs"
        if fused_instruction_count(producer, consumer) > self.max_fusion_instructions:
            return f"more than {self.max_fusion_instructions} instructions"
        if producer.opcode.is_expensive:
            indices = [i for i, o in enumerate(consumer.operands) if o is producer]
            if any(reuses_operand_elements(consumer, i) for i in indices):
                return "expensive producer would be recomputed per reused element"
        return None

    def can_fuse(self, producer: HloInstruction, consumer: HloInstruction) -> bool:
        """Legal to fuse `producer` into `consumer` (duplication and priority aside)."""
        return self.fusion_legality_error(producer, consumer) is None

    def duplication_error(self, producer: HloInstruction,
                          consumer: HloInstruction) -> str | None:
        """Why fusing `producer` into `consumer` must not duplicate it, or None. A producer with
        other users is duplicated; allowed only for cheap producers that are effectively unary,
        read no more bytes than they write, or fuse into all their users (XLA's
        ComputeGloballyUnfusible) while keeping no more computed bytes alive than they write
        (`kept_alive_sources`). The last condition is xlc's: duplicating `add(a, b)` of two
        computed values into all its users keeps both `a` and `b` alive until the last user
        instead of one buffer for the sum, and along a chain (a transformer's residual stream)
        every fusion would recompute, and keep alive, every earlier term."""
        others = [u for u in producer.users if u is not consumer]
        if not others:
            return None
        if not self.allow_duplication:
            return "duplication disabled"
        if producer.opcode.is_expensive:
            return "expensive producer would be duplicated"
        if effectively_at_most_unary(producer):
            return None
        out_bytes = producer.shape.byte_size()
        operands = unique_operands([producer])
        if sum(o.shape.byte_size() for o in operands) <= out_bytes:
            return None
        if not all(self.can_fuse(producer, u) for u in others):
            return "producer does not fuse into all its users"
        sources = kept_alive_sources(producer, self._fusible_producer)
        if sum(o.shape.byte_size() for o in sources) > out_bytes:
            return "duplicating would keep more computed bytes alive than the producer writes"
        return None

    def should_fuse(self, producer: HloInstruction, consumer: HloInstruction) -> bool:
        """Legal, allowed to duplicate, and worth it."""
        why = (self._basic_error(producer, consumer)
               or self.duplication_error(producer, consumer)
               or ("saves no memory traffic" if fusion_priority(producer, consumer) <= 0
                   else None)
               or self._structural_error(producer, consumer))
        if why is not None:
            log.debug("not fusing %s into %s: %s", producer.name, consumer.name, why)
        return why is None

    # ---- the loop -------------------------------------------------------------------------
    def run(self, module: HloModule) -> bool:
        """Fuse in every fusible computation; True when anything changed."""
        embedded = embedded_callees(module)
        changed = False
        for comp in list(module.computations):
            if comp in module.computations and is_fusible_computation(comp, embedded):
                changed |= self._run_on_computation(comp)
        if changed:
            invalidate_schedule(module)
        return changed

    def fuse(self, producer: HloInstruction, consumer: HloInstruction,
             finalize: bool = True) -> HloInstruction:
        """Fuse `producer` into `consumer` (wrapping a non-fusion consumer first); returns the
        fusion that replaced `consumer` (see `fusion_utils` for `finalize`)."""
        if consumer.opcode is not Opcode.FUSION:
            kind = self.consumer_kind(consumer)
            assert kind in (LOOP, INPUT), consumer
            consumer = create_fusion(consumer, kind, finalize=False)
        log.debug("fusing %s into %s", producer.name, consumer.name)
        fuse_producer(consumer, producer, finalize=finalize)
        return consumer

    def _run_on_computation(self, comp: HloComputation) -> bool:
        order = comp.post_order()
        position = {inst.uid: k for k, inst in enumerate(order)}
        self._control_successors = control_successor_ids(comp)
        self._producer_ok = {}
        touched: dict[int, HloInstruction] = {}
        changed = False
        for consumer in reversed(order):
            if consumer.parent is not comp:
                continue  # fused away
            # Operands rejected for this consumer stay rejected until fusing changes their
            # users (they are operands of a fused producer): the limits only tighten.
            rejected: set[int] = set()
            while self.consumer_kind(consumer) is not None:
                candidates = sorted({o.uid: o for o in consumer.operands
                                     if o.uid not in rejected}.values(),
                                    key=lambda o: position.get(o.uid, -1), reverse=True)
                producer = None
                for cand in candidates:
                    if self.should_fuse(cand, consumer):
                        producer = cand
                        break
                    rejected.add(cand.uid)
                if producer is None:
                    break
                rejected.difference_update(o.uid for o in producer.operands)
                pos = position[consumer.uid]
                consumer = self.fuse(producer, consumer, finalize=False)
                position[consumer.uid] = pos
                touched[id(consumer)] = consumer
                changed = True
        for fusion in touched.values():
            if fusion.parent is comp:
                finalize_fusion(fusion)
        self._control_successors = None
        self._producer_ok = None
        if changed:
            comp.sort_post_order()
        return changed
