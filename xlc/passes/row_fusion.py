"""Row fusion: a row-wise softmax (or log-softmax, layer norm, ...) as ONE loop fusion whose
per-row reductions live inside it, so the per-row scalars never touch memory.

After producer/consumer and multi-output fusion a softmax over [R, C] is three kernels (row
max, exp + row sum, divide) and two [R] temps. `RowFusion` merges into a kLoop fusion F (the
"row fusion") every producer fusion P whose values F reads only per row:

* P is a kInput fusion whose reduce outputs are row reductions of F's iteration space I (F's
  output dims): the reduced dims D are the physically minor dims of I (same D everywhere), the
  kept dims K the others; its non-reduce outputs have dims I; or
* P is a kLoop fusion, or an unfused elementwise op / reshape, computing a per-row value (dims
  equal to K's sizes once size-1 dims are dropped, e.g. `log(reshape(sum))` of log-softmax)
  from per-row or scalar operands; or a full-space (dims I) fusion whose value F reads at the
  same index, once F has a row reduction;

and every user of P is F (directly or through get-tuple-element), so P disappears. Inside F a
per-row value may flow only through elementwise ops and size-1 reshapes over per-row shapes,
then be broadcast back along D (`broadcast` onto K) into I; full values (dims I) flow through
elementwise ops into the root or into another row reduction over D (nested: the sum of a
softmax depends on its max).

**Emitter contract** (what a backend must implement before enabling `row_fusion`): a kLoop
fusion may contain `reduce` instructions; `row_fusion_error(fusion)` is None for it. Emit it as
a loop over the kept index k (rows) and, per row: evaluate every reduce (in dependency order)
over the reduced dims into registers, then evaluate the root over the reduced dims at (k, d),
reading each per-row value from its register. Equivalent elemental semantics: a reduce inside
the fusion evaluated at index k is the fold over the reduced dims (what the evaluator does);
its value must not be recomputed per element. The fusion's kind stays "kLoop" (its root is
elementwise over I); `is_row_fusion(inst)` identifies one.
"""
from __future__ import annotations

import logging
from math import prod

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Shape, bitcast_is_reshape
from xlc.passes.fusion_legality import INPUT, LOOP, roots
from xlc.passes.fusion_utils import (
    absorb_fusion_operand,
    embedded_callees,
    fuse_producer,
    invalidate_schedule,
)

log = logging.getLogger("xlc.passes.fusion")

MAX_ROW_FUSION_INSTRUCTIONS = 256

def _is_row_move(inst: HloInstruction) -> bool:
    """A reshape, or a bitcast that is one: a layout-changing bitcast reorders the elements
    (XLA's bitcast reinterprets the physical buffer), so it does not keep row order."""
    if inst.opcode is Opcode.RESHAPE:
        return True
    return inst.opcode is Opcode.BITCAST and bitcast_is_reshape(inst.operands[0].shape,
                                                                inst.shape)


def _squeezed(dims: tuple[int, ...] | list[int]) -> tuple[int, ...]:
    return tuple(d for d in dims if d != 1)


class _Space:
    """The iteration space of a row fusion: dims I, reduced dims D (physically minor), kept K."""

    def __init__(self, shape: Shape, reduced: tuple[int, ...]):
        self.dims = tuple(shape.dims)
        self.reduced = reduced
        self.kept = tuple(d for d in range(len(self.dims)) if d not in reduced)
        self.row_dims = _squeezed([self.dims[d] for d in self.kept])

    @staticmethod
    def of(shape: Shape, reduce: HloInstruction) -> _Space | None:
        """The space of a row reduction `reduce` over `shape`, or None when it is not one."""
        if reduce.opcode is not Opcode.REDUCE or len(reduce.operands) != 2 \
                or not reduce.shape.is_array:
            return None
        in_shape = reduce.operands[0].shape
        if tuple(in_shape.dims) != tuple(shape.dims):
            return None
        reduced = tuple(sorted(int(d) for d in reduce.attrs.get("dimensions", ())))
        if not reduced:
            return None
        lay = in_shape.layout
        m2m = list(lay.minor_to_major) if lay is not None and lay.minor_to_major else \
            list(range(in_shape.rank - 1, -1, -1))
        if sorted(m2m[:len(reduced)]) != list(reduced) or len(reduced) == in_shape.rank:
            return None  # the reduced dims must be the physically minor ones
        return _Space(shape, reduced)

    def is_row(self, inst: HloInstruction) -> bool:
        return inst.shape.is_array and _squeezed(inst.shape.dims) == self.row_dims

    def is_full(self, inst: HloInstruction) -> bool:
        return inst.shape.is_array and tuple(inst.shape.dims) == self.dims

    def broadcasts_rows(self, b: HloInstruction) -> bool:
        """`b` broadcasts a per-row value back along the reduced dims into the space."""
        if b.opcode is not Opcode.BROADCAST or not self.is_full(b):
            return False
        mapping = [int(d) for d in b.attrs.get("dimensions", ())]
        src = b.operands[0].shape.dims
        onto = [d for d, n in zip(mapping, src) if n != 1]
        return onto == [d for d in self.kept if self.dims[d] != 1]

    def reduces_rows(self, r: HloInstruction, value: HloInstruction) -> bool:
        """`r` is a row reduction of this space (same reduced dims) reading `value`."""
        other = _Space.of(r.operands[0].shape, r)
        return (other is not None and other.reduced == self.reduced and other.dims == self.dims
                and r.operands[0] is value)

    @staticmethod
    def candidates(shape: Shape) -> list[_Space]:
        """Every space over `shape` whose reduced dims are its j physically minor dims."""
        lay = shape.layout
        m2m = list(lay.minor_to_major) if lay is not None and lay.minor_to_major else \
            list(range(shape.rank - 1, -1, -1))
        return [_Space(shape, tuple(sorted(m2m[:j]))) for j in range(1, shape.rank)]


def _flow_error(space: _Space, start: HloInstruction, is_full: bool) -> str | None:
    """Why the value `start` (a per-row value, or a full one with `is_full`) is not consumed
    the row-fusion way inside its fused computation (see the module docstring), or None."""
    work, seen = [(start, is_full)], {(id(start), is_full)}
    while work:
        value, full = work.pop()
        for user in value.users:
            op = user.opcode
            if op is Opcode.TUPLE:
                continue
            if full:
                if op.is_elementwise and space.is_full(user):
                    nxt = True
                elif op is Opcode.REDUCE and space.reduces_rows(user, value):
                    nxt = False
                else:
                    return f"{user.name} ({op.text}) reads a full-space value out of row order"
            else:
                if op.is_elementwise and space.is_row(user):
                    nxt = False
                elif _is_row_move(user) and space.is_row(user):
                    nxt = False
                elif space.broadcasts_rows(user):
                    nxt = True
                else:
                    return f"{user.name} ({op.text}) reads a per-row value out of row order"
            if (id(user), nxt) not in seen:
                seen.add((id(user), nxt))
                work.append((user, nxt))
    return None


def row_fusion_error(fusion: HloInstruction) -> str | None:
    """Why `fusion` (a kLoop fusion containing reduces) breaks the row-fusion contract, or None.
    A kLoop fusion without reduces is trivially fine."""
    fc = fusion.fused_computation
    reduces = [i for i in fc.instructions if i.opcode.category == "reduce"]
    if not reduces:
        return None
    if fusion.attrs.get("kind") != LOOP:
        return f"{fusion.name} is not a kLoop fusion"
    outs = roots(fusion)
    space = _Space.of(outs[0].shape, reduces[0]) if outs[0].shape.is_array else None
    if space is None:
        return f"{reduces[0].name} is not a row reduction of {fusion.name}'s output space"
    if any(not space.is_full(o) for o in outs):
        return f"{fusion.name} has an output outside its iteration space"
    for r in reduces:
        if not space.reduces_rows(r, r.operands[0]):
            return f"{r.name} is not a row reduction over dims {list(space.reduced)}"
        if r.is_root or any(u.opcode is Opcode.TUPLE for u in r.users):
            return f"{r.name} is an output of {fusion.name}"
        err = _flow_error(space, r, is_full=False)
        if err:
            return err
    return None


def is_row_fusion(inst: HloInstruction) -> bool:
    """A kLoop fusion with reduces inside that satisfies the row-fusion contract."""
    return (inst.opcode is Opcode.FUSION and inst.attrs.get("kind") == LOOP
            and any(i.opcode.category == "reduce" for i in inst.fused_computation.instructions)
            and row_fusion_error(inst) is None)


def _only_feeds(producer: HloInstruction, fusion: HloInstruction) -> bool:
    if producer.is_root or producer.control_predecessors:
        return False
    for u in producer.users:
        if u is fusion:
            continue
        if u.opcode is not Opcode.GET_TUPLE_ELEMENT or u.is_root \
                or any(x is not fusion for x in u.users):
            return False
    comp = producer.parent
    assert comp is not None
    return not any(producer in i.control_predecessors for i in comp.instructions)


def _fed_params(fusion: HloInstruction, producer: HloInstruction
                ) -> list[tuple[HloInstruction, HloInstruction]]:
    """(fused parameter, producer output it reads) for every parameter fed by `producer`,
    whose outputs must all be array-shaped instructions (see `absorb_error`)."""
    outs = roots(producer)
    pairs = []
    for i, o in enumerate(fusion.operands):
        if o is producer:
            pairs.append((fusion.fused_computation.parameters[i], outs[0]))
        elif o.opcode is Opcode.GET_TUPLE_ELEMENT and o.operands[0] is producer:
            pairs.append((fusion.fused_computation.parameters[i], outs[o.tuple_index]))
    return pairs


def absorb_error(fusion: HloInstruction, producer: HloInstruction,
                 space: _Space | None) -> str | None:
    """Why `producer` cannot be merged into row fusion candidate `fusion`, or None. `space` is
    the fusion's row space when it already has one (it contains reduces)."""
    if producer.parent is not fusion.parent:
        return "not in the same computation"
    if not _only_feeds(producer, fusion):
        return "producer has other users"
    if producer.opcode is Opcode.FUSION:
        kind = producer.attrs.get("kind")
        if kind not in (LOOP, INPUT):
            return f"{kind} producer"
        pfc = producer.fused_computation
        if any(i.opcode.category == "reduce" and i not in roots(producer)
               for i in pfc.instructions):
            return "producer has reductions that are not outputs"
        params, size = list(pfc.parameters), len(pfc.instructions)
    elif (producer.opcode.is_elementwise or _is_row_move(producer)) \
            and producer.shape.is_array and not producer.opcode.has_side_effect:
        kind, params, size = LOOP, list(producer.operands), 1  # an unfused per-row op
    else:
        return f"{producer.opcode.text} is not fusible"
    if size + len(fusion.fused_computation.instructions) > MAX_ROW_FUSION_INSTRUCTIONS:
        return "too many instructions"
    tupled = next((r for r in roots(producer) if not r.shape.is_array), None)
    if tupled is not None:  # e.g. argmax's variadic reduce: its outputs are not instructions
        return f"{tupled.name} ({tupled.opcode.text}) has a tuple-shaped output"
    out = roots(fusion)[0]
    pairs = _fed_params(fusion, producer)
    # the producer's row reductions fix (or must match) the fusion's row space
    for _, value in pairs:
        if value.opcode.category != "reduce":
            continue
        s = _Space.of(out.shape, value)
        if s is None or (space is not None and s.reduced != space.reduced):
            return f"{value.name} is not a row reduction of the fusion's space"
        space = s
    for param, value in pairs:
        if value.opcode.category == "reduce":
            err = _flow_error(space, param, is_full=False)  # type: ignore[arg-type]
        elif tuple(value.shape.dims) == tuple(out.shape.dims):
            # a full-space value, recomputed at the index where the fusion reads it
            if space is None:
                return f"{value.name}: no row reduction involved"
            err = _flow_error(space, param, is_full=True)
        elif kind == LOOP and value.shape.is_array:
            if space is None and not any(_reads_input_fusion(o) for o in producer.operands):
                return f"{value.name}: no row reduction involved"
            spaces = [space] if space is not None else _Space.candidates(out.shape)
            ok = [s for s in spaces if s.is_row(value) and all(
                s.is_row(p) or p.shape.num_elements == 1 for p in params)]
            if not ok:
                return f"{value.name} is neither a row reduction nor a per-row value"
            space = ok[0]
            err = _flow_error(space, param, is_full=False)
        else:
            return f"{value.name} is neither a row reduction nor a per-row value"
        if err:
            return err
    return None


def _reads_input_fusion(operand: HloInstruction) -> bool:
    """`operand` is a kInput fusion or a get-tuple-element of one (a row reduction to come)."""
    if operand.opcode is Opcode.GET_TUPLE_ELEMENT:
        operand = operand.operands[0]
    return operand.opcode is Opcode.FUSION and operand.attrs.get("kind") == INPUT


def _space_of(fusion: HloInstruction) -> _Space | None:
    reduces = [i for i in fusion.fused_computation.instructions if i.opcode is Opcode.REDUCE]
    out = roots(fusion)[0]
    return _Space.of(out.shape, reduces[0]) if reduces and out.shape.is_array else None


class RowFusion:
    """The HloPass (see the module docstring). Run it after `InstructionFusion` and
    `MultiOutputFusion`; enable it only for backends whose emitter honours the contract."""

    name = "row_fusion"

    def run(self, module: HloModule) -> bool:
        """Merge per-row producer fusions into their kLoop consumers; True if changed."""
        embedded = embedded_callees(module)
        changed = False
        for comp in list(module.computations):
            if comp.is_fusion_computation or id(comp) in embedded:
                continue
            changed |= self._run_on(comp)
        if changed:
            invalidate_schedule(module)
        return changed

    def _run_on(self, comp: HloComputation) -> bool:
        changed = False
        for fusion in reversed(comp.post_order()):
            if fusion.parent is not comp or fusion.opcode is not Opcode.FUSION \
                    or fusion.attrs.get("kind") != LOOP or not roots(fusion)[0].shape.is_array:
                continue
            while True:
                space = _space_of(fusion)
                producers = []
                for o in fusion.operands:
                    p = o.operands[0] if o.opcode is Opcode.GET_TUPLE_ELEMENT else o
                    if p not in producers and p.opcode not in (Opcode.PARAMETER,
                                                               Opcode.CONSTANT):
                        producers.append(p)
                # per-row producers first (they read the reductions merged later)
                producers.sort(key=lambda p: prod(p.shape.dims) if p.shape.is_array else 0)
                pick = next((p for p in producers if absorb_error(fusion, p, space) is None),
                            None)
                if pick is None:
                    break
                log.debug("row fusion: merging %s into %s", pick.name, fusion.name)
                if pick.opcode is Opcode.FUSION:
                    absorb_fusion_operand(fusion, pick)
                else:
                    fuse_producer(fusion, pick)
                err = row_fusion_error(fusion)
                assert err is None, f"row fusion broke its contract: {err}"
                changed = True
        if changed:
            comp.sort_post_order()
        return changed
