"""batched-indexing: gathers and scatters with batching dims become plain ones (XLA's
BatchedGatherScatterNormalizer), so emitters need not know batching dims.

A gather with `operand_batching_dims` B and `start_indices_batching_dims` S reads operand
dim B[i] at the position of the start-indices dim S[i]. The same gather without batching
dims gets, as extra components of each index vector, one iota per pair along S[i] (of the
indices' element type), with B[i] added to `start_index_map` and `collapsed_slice_dims`
(its slice size is 1). Scatters likewise: `input_batching_dims` join
`scatter_dims_to_operand_dims` and `inserted_window_dims`. An index vector dim at the end of
the indices (implicit size 1) becomes explicit first. `indices_are_sorted` is dropped (the
new components can break the order).

Requires: a verified module. Guarantees: same values and shapes; no gather or scatter keeps
batching dims.
"""
from __future__ import annotations

import logging

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Shape

log = logging.getLogger("xlc.passes")

_KEYS = {Opcode.GATHER: ("operand_batching_dims", "start_indices_batching_dims",
                         "start_index_map", "collapsed_slice_dims", 1),
         Opcode.SCATTER: ("input_batching_dims", "scatter_indices_batching_dims",
                          "scatter_dims_to_operand_dims", "inserted_window_dims", None)}


def _indices_position(inst: HloInstruction) -> int:
    """Operand number of the indices: 1 for a gather, n for a scatter of n operands."""
    return 1 if inst.opcode is Opcode.GATHER else (len(inst.operands) - 1) // 2


def _before(comp: HloComputation, inst: HloInstruction, new: HloInstruction) -> HloInstruction:
    """Move `new` (just added) right before `inst`, so the list stays in definition order."""
    comp.instructions.remove(new)
    comp.instructions.insert(comp.instructions.index(inst), new)
    return new


def _normalize(comp: HloComputation, inst: HloInstruction) -> None:
    batch_key, index_batch_key, map_key, collapsed_key, _ = _KEYS[inst.opcode]
    batch = tuple(inst.attrs[batch_key])
    index_batch = tuple(inst.attrs[index_batch_key])
    pos = _indices_position(inst)
    idx = inst.operands[pos]
    ivd = int(inst.attrs.get("index_vector_dim", idx.shape.rank))
    et = idx.shape.element_type
    assert et is not None
    if ivd == idx.shape.rank:  # the implicit trailing index vector of size 1
        idx = _before(comp, inst, comp.add(Opcode.RESHAPE,
                                           Shape.array(et, idx.shape.dims + (1,)), (idx,),
                                           name=f"{inst.name}.indices"))
    one = list(idx.shape.dims)
    one[ivd] = 1
    parts = [idx]
    for d in index_batch:
        parts.append(_before(comp, inst, comp.add(Opcode.IOTA, Shape.array(et, one), (),
                                                  {"iota_dimension": d},
                                                  name=f"{inst.name}.batch")))
    wide = list(idx.shape.dims)
    wide[ivd] += len(index_batch)
    indices = _before(comp, inst, comp.add(Opcode.CONCATENATE, Shape.array(et, wide), parts,
                                            {"dimensions": (ivd,)},
                                            name=f"{inst.name}.indices"))
    ops = list(inst.operands)
    ops[pos] = indices
    inst.set_operands(ops)
    inst.attrs = inst.attrs.replace(**{
        batch_key: None, index_batch_key: None, "indices_are_sorted": None,
        "index_vector_dim": ivd,
        map_key: tuple(inst.attrs.get(map_key, ())) + batch,
        collapsed_key: tuple(sorted(tuple(inst.attrs.get(collapsed_key, ())) + batch))})


class BatchedIndexing:
    """Rewrite gathers and scatters with batching dims (see the module docstring)."""

    name = "batched-indexing"

    def run(self, module: HloModule) -> bool:
        """Normalize every such gather and scatter; True if one changed."""
        changed = False
        for comp in module.computations:
            for inst in list(comp.instructions):
                keys = _KEYS.get(inst.opcode)
                if keys is not None and inst.attrs.get(keys[0]):
                    _normalize(comp, inst)
                    log.debug("batched-indexing: %s", inst.name)
                    changed = True
        return changed
