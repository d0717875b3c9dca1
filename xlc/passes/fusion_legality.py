"""Fusion legality rules shared by `InstructionFusion` and `MultiOutputFusion`.

Pure queries on the graph (nothing here edits the module). They answer: may this instruction be
fused as a producer (`is_loop_fusible_producer`), may this instruction root a fusion and of what
kind (`consumer_fusion_kind`), does a consumer read an operand element several times
(`reuses_operand_elements`), does fusing break an in-place update (`breaks_in_place_update`), and
how big would the result be (`fused_operand_count`, `fused_instruction_count`).

The per-opcode rules are dispatch tables keyed by `Opcode`; elementwise-ness and expense come from
the opcode table (`op.is_elementwise`, `op.is_expensive`).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from xlc.hlo.ir import HloComputation, HloInstruction
from xlc.hlo.opcodes import Opcode

MAX_CONCAT_OPERANDS = 8
"""Concatenates with more operands are never fused into a consumer (inside a fused loop each
operand is a branch of every element's computation)."""
MAX_CONCAT_ROOT_OPERANDS = 64
"""...but may root a loop fusion (emitters write each operand's region with a loop of its own:
an im2col's concatenate of one slice per window position, 9 for a 3x3 convolution)."""

LOOP = "kLoop"
INPUT = "kInput"
OUTPUT = "kOutput"


def _always(inst: HloInstruction) -> bool:
    return True


def _is_scalar_constant(inst: HloInstruction) -> bool:
    lit = inst.attrs.get("literal")
    return inst.shape.is_scalar and lit is not None and not lit.is_tuple and not lit.elided


def _small_concat(inst: HloInstruction) -> bool:
    return len(inst.operands) <= MAX_CONCAT_OPERANDS


def same_width_bitcast_convert(inst: HloInstruction) -> bool:
    """Only element-for-element bitcast-converts (equal bit widths) are elementwise."""
    src, dst = inst.operands[0].shape.element_type, inst.shape.element_type
    return src is not None and dst is not None and src.bit_width == dst.bit_width


# Non-elementwise opcodes that may be cloned into a fused loop as producers (XLA's loop-fusible
# data-movement ops). Never: dot, convolution, sort, custom-call, control flow, gather, scatter,
# rng, reduce (only ever a fusion root here), dynamic-update-slice (kept in place), fusion.
_PRODUCER_RULES: dict[Opcode, Callable[[HloInstruction], bool]] = {
    Opcode.BROADCAST: _always,
    Opcode.RESHAPE: _always,
    Opcode.BITCAST: _always,
    Opcode.TRANSPOSE: _always,
    Opcode.SLICE: _always,
    Opcode.DYNAMIC_SLICE: _always,
    Opcode.PAD: _always,
    Opcode.REVERSE: _always,
    Opcode.IOTA: _always,
    Opcode.COPY: _always,
    Opcode.BITCAST_CONVERT: same_width_bitcast_convert,
    Opcode.CONCATENATE: _small_concat,
    Opcode.CONSTANT: _is_scalar_constant,  # large constants stay constant allocations
}


def _array_outputs(inst: HloInstruction) -> bool:
    """An array, or a flat tuple of arrays (variadic reduce: the fusion's outputs)."""
    shapes = inst.shape.tuple_shapes
    return inst.shape.is_array or (shapes is not None and all(t.is_array for t in shapes))


def _root_concat(inst: HloInstruction) -> bool:
    return len(inst.operands) <= MAX_CONCAT_ROOT_OPERANDS


def _single_input(inst: HloInstruction) -> bool:
    return inst.shape.is_array and len(inst.operands) == 2


def _in_place_update(inst: HloInstruction) -> bool:
    return inst.shape.is_array


# Non-fusion instructions that may root a new fusion, and the fusion kind they root. Loop
# consumers are the loop-fusible producers with operands, plus dynamic-update-slice.
_CONSUMER_KINDS: dict[Opcode, tuple[str, Callable[[HloInstruction], bool]]] = {
    Opcode.REDUCE: (INPUT, _array_outputs),  # variadic (argmax) too, as the sole root
    Opcode.REDUCE_WINDOW: (INPUT, _single_input),
    Opcode.DYNAMIC_UPDATE_SLICE: (LOOP, _in_place_update),
    Opcode.CONCATENATE: (LOOP, _root_concat),
}


def control_successor_ids(comp: HloComputation) -> set[int]:
    """uids of the instructions of `comp` that some instruction names as a control predecessor
    (compute once per computation and pass to `is_loop_fusible_producer`)."""
    return {p.uid for u in comp.instructions for p in u.control_predecessors}


def has_control_edges(inst: HloInstruction, control_successors: set[int] | None = None) -> bool:
    """True when `inst` has control predecessors or is some instruction's control predecessor.
    `control_successors` (from `control_successor_ids`) avoids scanning the computation."""
    if inst.control_predecessors:
        return True
    if control_successors is not None:
        return inst.uid in control_successors
    comp = inst.parent
    return comp is not None and any(inst in u.control_predecessors for u in comp.instructions
                                    if u.control_predecessors)


def is_loop_fusible_producer(inst: HloInstruction,
                             control_successors: set[int] | None = None,
                             fuse_gather: bool = False) -> bool:
    """May `inst` be cloned into a loop or input fusion as a producer?

    Requires nothing; guarantees False for tuples, tokens, side effects, expensive non-elementwise
    ops (dot, reduce, ...), gathers unless `fuse_gather` (a backend needs an elemental gather
    emitter), fusions, non-scalar constants and control-dependent instructions.
    `control_successors` as for `has_control_edges`."""
    op = inst.opcode
    if not inst.shape.is_array or op.has_side_effect:
        return False
    if op.is_elementwise:
        ok = len(inst.operands) >= 1
    elif op is Opcode.GATHER:
        ok = fuse_gather
    else:
        rule = _PRODUCER_RULES.get(op)
        ok = rule is not None and rule(inst)
    return ok and not has_control_edges(inst, control_successors)


def consumer_fusion_kind(inst: HloInstruction, fuse_reduce_window: bool = False,
                         fuse_dynamic_update_slice: bool = True,
                         fuse_gather: bool = False) -> str | None:
    """The fusion kind `inst` would root when producers are fused into it ("kLoop" or "kInput"),
    or None when it cannot absorb producers. A fusion answers its own kind when it is a loop or
    input fusion (so producers can be merged into it). Reduce-window roots only with
    `fuse_reduce_window` (a backend needs a reduce-window input-fusion emitter); a gather roots
    a kLoop fusion only with `fuse_gather`."""
    op = inst.opcode
    if op is Opcode.FUSION:
        kind = inst.attrs.get("kind")
        return kind if kind in (LOOP, INPUT) else None
    if op.has_side_effect or not inst.operands:
        return None
    if op is Opcode.REDUCE_WINDOW and not fuse_reduce_window:
        return None
    if op is Opcode.DYNAMIC_UPDATE_SLICE and not fuse_dynamic_update_slice:
        return None
    if op is Opcode.GATHER:
        return LOOP if fuse_gather and inst.shape.is_array else None
    entry = _CONSUMER_KINDS.get(op)
    if entry is not None:
        kind, rule = entry
        return kind if rule(inst) else None
    if not inst.shape.is_array:
        return None
    if op.is_elementwise:
        return LOOP
    producer_rule = _PRODUCER_RULES.get(op)
    return LOOP if producer_rule is not None and producer_rule(inst) else None


# ---- operand reuse ----------------------------------------------------------------------------
def _broadcast_reuses(inst: HloInstruction, operand_index: int) -> bool:
    return inst.operands[0].shape.num_elements < inst.shape.num_elements


def _reuses(inst: HloInstruction, operand_index: int) -> bool:
    return True


def _first_operand_reused(inst: HloInstruction, operand_index: int) -> bool:
    return operand_index == 0


# Opcodes that may read one element of the given operand several times.
_REUSE_RULES: dict[Opcode, Callable[[HloInstruction, int], bool]] = {
    Opcode.BROADCAST: _broadcast_reuses,
    Opcode.REDUCE_WINDOW: _reuses,
    Opcode.DOT: _reuses,
    Opcode.CONVOLUTION: _reuses,
    Opcode.GATHER: _first_operand_reused,
    Opcode.MAP: _reuses,
    Opcode.SELECT_AND_SCATTER: _reuses,
}


def reuses_operand_elements(consumer: HloInstruction, operand_index: int) -> bool:
    """Does `consumer` read elements of operand `operand_index` more than once? For a fusion, true
    when any path from the fused parameter goes through an instruction that reuses elements.
    Fusing an expensive producer into such a consumer would recompute it per reuse."""
    if consumer.opcode is not Opcode.FUSION:
        rule = _REUSE_RULES.get(consumer.opcode)
        return rule is not None and rule(consumer, operand_index)
    param = consumer.fused_computation.parameters[operand_index]
    stack, seen = [param], {id(param)}
    while stack:
        value = stack.pop()
        for user in value.users:
            for i, o in enumerate(user.operands):
                if o is value and reuses_operand_elements(user, i):
                    return True
            if id(user) not in seen:
                seen.add(id(user))
                stack.append(user)
    return False


# ---- in-place updates -------------------------------------------------------------------------
def in_place_operand(inst: HloInstruction) -> int | None:
    """Index of the operand whose buffer `inst` updates in place: a dynamic-update-slice's
    operand 0, or the fusion operand feeding the operand 0 of a fused dynamic-update-slice root."""
    if inst.opcode is Opcode.DYNAMIC_UPDATE_SLICE:
        return 0
    if inst.opcode is Opcode.FUSION:
        root = inst.fused_computation.root
        if root is not None and root.opcode is Opcode.DYNAMIC_UPDATE_SLICE:
            buf = root.operands[0]
            if buf.opcode is Opcode.PARAMETER:
                return buf.parameter_number
    return None


def breaks_in_place_update(producer: HloInstruction, consumer: HloInstruction) -> bool:
    """True when `consumer` updates a buffer in place and fusing `producer` would either compute
    that buffer inside the fusion or read the updated buffer elsewhere in the fused loop."""
    idx = in_place_operand(consumer)
    if idx is None:
        return False
    buffer = consumer.operands[idx]
    if producer is buffer:
        return True
    return any(o is buffer for o in producer.operands)


# ---- sizes ------------------------------------------------------------------------------------
def output_count(inst: HloInstruction) -> int:
    """Number of array outputs of an instruction (tuple elements for a multi-output fusion)."""
    shape = inst.shape
    return len(shape.tuple_shapes) if shape.tuple_shapes is not None else 1


def body_size(inst: HloInstruction) -> int:
    """Instructions a fusion of `inst` holds (non-parameter fused instructions), 1 otherwise."""
    if inst.opcode is Opcode.FUSION:
        fc = inst.fused_computation
        return len(fc.instructions) - len(fc.parameters)
    return 1


def unique_operands(insts: Iterable[HloInstruction],
                    exclude: Iterable[HloInstruction] = ()) -> list[HloInstruction]:
    """Operands of all `insts`, deduplicated in first-seen order, minus `exclude`."""
    skip = {id(x) for x in exclude}
    out: list[HloInstruction] = []
    for inst in insts:
        for o in inst.operands:
            if id(o) not in skip:
                skip.add(id(o))
                out.append(o)
    return out


def fused_operand_count(producer: HloInstruction, consumer: HloInstruction,
                        export: bool = False) -> int:
    """Operands plus outputs of the fusion obtained by fusing `producer` into `consumer` (with
    `export`, the producer also becomes an extra output)."""
    ops = unique_operands([consumer, producer], exclude=[producer])
    return len(ops) + output_count(consumer) + (1 if export else 0)


def fused_instruction_count(producer: HloInstruction, consumer: HloInstruction) -> int:
    """Non-parameter instructions in the fusion of `producer` into `consumer`."""
    return body_size(producer) + body_size(consumer)


def effectively_at_most_unary(inst: HloInstruction) -> bool:
    """XLA's EffectivelyAtMostUnary: at most one operand has rank >= the output rank, not counting
    broadcasts, iotas and scalar constants (which are cheap to recompute)."""
    rank = inst.shape.rank
    big = 0
    for o in inst.operands:
        if o.opcode is Opcode.BROADCAST or o.opcode is Opcode.IOTA or _is_scalar_constant(o):
            continue
        if not o.shape.is_array:
            continue
        if o.shape.rank >= rank:
            big += 1
    return big <= 1


def reduction_count(inst: HloInstruction) -> int:
    """Reduction heroes (reduce / reduce-window) inside a fusion, or 1 for a bare reduction."""
    if inst.opcode is Opcode.FUSION:
        return sum(1 for i in inst.fused_computation.instructions
                   if i.opcode.category == "reduce")
    return 1 if inst.opcode.category == "reduce" else 0


def roots(inst: HloInstruction) -> list[HloInstruction]:
    """The output-producing instructions: the fused root's tuple elements (or the fused root) for
    a fusion, else `inst` itself."""
    if inst.opcode is not Opcode.FUSION:
        return [inst]
    root = inst.fused_computation.root
    assert root is not None
    return list(root.operands) if root.opcode is Opcode.TUPLE else [root]


def iteration_dims(inst: HloInstruction) -> tuple[int, ...] | None:
    """The index space a backend loops over to emit `inst` as a fusion root: a reduction's input
    dims, an array output's dims otherwise; None for tuples."""
    if inst.opcode.category == "reduce":
        return inst.operands[0].shape.dims
    return inst.shape.dims if inst.shape.is_array else None


def compatible_heroes(insts: Iterable[HloInstruction]) -> bool:
    """Can one loop nest emit all these roots? All iteration spaces equal, all reductions are
    single-output `reduce`s over the same dimensions (no reduce-window in a multi-output
    fusion)."""
    dims: set[tuple[int, ...] | None] = set()
    reduce_dims: set[tuple] = set()
    for inst in insts:
        for r in roots(inst):
            if r.opcode is not Opcode.REDUCE and r.opcode.category == "reduce":
                return False  # reduce-window / select-and-scatter roots stay single-output
            if r.opcode is Opcode.REDUCE and not r.shape.is_array:
                return False  # variadic reduce
            dims.add(iteration_dims(r))
            if r.opcode.category == "reduce":
                reduce_dims.add((r.opcode, r.attrs.get("dimensions"), r.attrs.get("window")))
    return len(dims) == 1 and None not in dims and len(reduce_dims) <= 1


def is_fusible_computation(comp: HloComputation, embedded_callees: set[int]) -> bool:
    """Fusion runs on non-fusion computations that are not embedded callees (reducers,
    comparators, scatter combiners)."""
    return not comp.is_fusion_computation and id(comp) not in embedded_callees
