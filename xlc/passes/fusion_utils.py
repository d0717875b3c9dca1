"""Mechanics of building and editing fusion instructions (no policy here: the passes decide).

- `create_fusion(inst, kind)`: wrap one instruction into a fusion that replaces it.
- `fuse_producer(fusion, producer, export=False)`: clone `producer` (or, for a fusion producer,
  its fused body) into `fusion` in place of the parameters it fed; with `export` the producer's
  value also becomes an extra output (multi-output fusion) that its other users read through
  `get-tuple-element`.
- `merge_sibling_fusions(a, b)`: fold fusion `b` into fusion `a` (outputs concatenated, shared
  operands read once).
- `absorb_fusion_operand(fusion, producer)`: clone a fusion producer (multi-output ones too,
  read through get-tuple-element) into its only consumer fusion (row fusion).
- `fusion_counts(module)`: fusions per kind, for reports.

Guarantees after each call: fused parameters are numbered in the fusion's operand order, operands
are deduplicated, the root shape equals the fusion shape, `module.computations` keeps callees
before callers, and dead producers are removed. With `finalize=True` (the default) the fusion is
also canonical (`finalize_fusion`: operands in creation order, parameters named `param_<n>`, fused
body topologically sorted); passes doing many edits pass `finalize=False` and call
`finalize_fusion` once per fusion at the end. The caller's computation order is restored with
`sort_post_order()` by the passes.
"""
from __future__ import annotations

import logging

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import EMBEDDED_CALLERS, Opcode
from xlc.hlo.shape import Shape
from xlc.passes.fusion_legality import INPUT, roots

log = logging.getLogger("xlc.passes.fusion")

FUSION_INSTRUCTION_NAMES = {"kLoop": "loop_fusion", "kInput": "input_fusion",
                            "kOutput": "output_fusion", "kCustom": "custom_fusion"}


def embedded_callees(module: HloModule) -> set[int]:
    """ids of computations called by embedded callers (reducers, comparators, fused bodies)."""
    out: set[int] = set()
    for comp in module.computations:
        for inst in comp.instructions:
            if inst.opcode in EMBEDDED_CALLERS:
                out.update(id(c) for c in inst.called)
    return out


def _place_before(module: HloModule, callee: HloComputation, caller: HloComputation) -> None:
    """Move `callee` right before `caller` in `module.computations` (callees before callers)."""
    comps = module.computations
    comps.remove(callee)
    comps.insert(comps.index(caller), callee)


_TEMP_PARAM = "__fusion_param"


def _new_parameter(fc: HloComputation, number: int, shape: Shape) -> HloInstruction:
    """A fused parameter with a temporary name (`finalize_fusion` names it `param_<number>`)."""
    param = HloInstruction(Opcode.PARAMETER, shape, (), {"parameter_number": number},
                           name=_TEMP_PARAM)
    return fc.add_instruction(param, unique_name=False)


def finalize_fusion(fusion: HloInstruction) -> None:
    """Put the fusion's operands in creation order (text order for a parsed module: stable and
    deterministic), renumber the fused parameters to match and name them `param_<number>`
    (module-unique), sort the fused body."""
    comp = fusion.parent
    fc = fusion.fused_computation
    assert comp is not None and comp.module is not None
    perm = sorted(range(len(fusion.operands)), key=lambda i: (fusion.operands[i].uid, i))
    params = [fc.parameters[i] for i in perm]
    for k, p in enumerate(params):
        if p.parameter_number != k or p.name == _TEMP_PARAM:
            p.attrs = p.attrs.replace(parameter_number=k)
            p.name = comp.module.unique_name(f"param_{k}")
    fc.parameters = params
    fusion.set_operands([fusion.operands[i] for i in perm])
    fc.instructions = params + [i for i in fc.post_order() if i.opcode is not Opcode.PARAMETER]


def _param_for(fusion: HloInstruction, operand: HloInstruction) -> HloInstruction:
    """The fused parameter reading `operand`, adding a fusion operand when needed."""
    fc = fusion.fused_computation
    for i, o in enumerate(fusion.operands):
        if o is operand:
            return fc.parameters[i]
    param = _new_parameter(fc, len(fusion.operands), operand.shape)
    fusion.set_operands(list(fusion.operands) + [operand])
    return param


def _add_clone(fc: HloComputation, inst: HloInstruction, operands: list[HloInstruction],
               keep_name: bool) -> HloInstruction:
    """Clone `inst` into `fc` with new operands; `keep_name` reuses the name (the original is
    about to be removed, so names stay unique)."""
    clone = inst.clone_with(operands=operands)
    if keep_name:
        return fc.add_instruction(clone, unique_name=False)
    return fc.add_instruction(clone)


def _remove_parameters(fusion: HloInstruction, numbers: list[int]) -> None:
    """Drop unused fused parameters `numbers` and the matching operands; renumber the rest."""
    fc = fusion.fused_computation
    drop = set(numbers)
    for n in numbers:
        fc.remove_instruction(fc.parameters[n])
    keep = [i for i in range(len(fusion.operands)) if i not in drop]
    params = [fc.parameters[i] for i in keep]
    for k, p in enumerate(params):
        if p.parameter_number != k:
            p.attrs = p.attrs.replace(parameter_number=k)
    fc.parameters = params
    fusion.set_operands([fusion.operands[i] for i in keep])


def _remove_dead(inst: HloInstruction) -> None:
    """Remove `inst` (now without users) and, for a fusion, its fused computation."""
    comp = inst.parent
    assert comp is not None and not inst.users and inst is not comp.root
    comp.remove_instruction(inst)
    if inst.opcode is Opcode.FUSION and comp.module is not None:
        module = comp.module
        for c in inst.called:
            if c in module.computations and c.is_fusion_computation:
                module.remove_computation(c)


def create_fusion(inst: HloInstruction, kind: str, finalize: bool = True) -> HloInstruction:
    """Replace `inst` by a fusion of kind `kind` whose fused computation holds a clone of it.

    Requires `inst` to be an array-shaped instruction in a computation of a module. Guarantees the
    fusion takes `inst`'s deduplicated operands in order, inherits its control predecessors and
    `metadata`, and every use of `inst` (root slot included) now uses the fusion."""
    comp = inst.parent
    assert comp is not None and comp.module is not None, f"{inst.name} is not in a module"
    module = comp.module
    fc = HloComputation(module.unique_name("fused_computation"))
    fc.is_fusion_computation = True
    module.add_computation(fc)
    _place_before(module, fc, comp)
    operands: list[HloInstruction] = []
    for o in inst.operands:
        if not any(o is x for x in operands):
            operands.append(o)
    params = [_new_parameter(fc, k, o.shape) for k, o in enumerate(operands)]
    mapped = [params[next(k for k, x in enumerate(operands) if x is o)] for o in inst.operands]
    fc.set_root(_add_clone(fc, inst, mapped, keep_name=True))
    metadata = inst.get_extra("metadata")
    fusion = HloInstruction(Opcode.FUSION, inst.shape, operands, {"kind": kind}, (fc,),
                            name=FUSION_INSTRUCTION_NAMES.get(kind, "fusion"),
                            extra=(("metadata", metadata),) if metadata else ())
    for pred in inst.control_predecessors:
        fusion.add_control_predecessor(pred)
    comp.replace_instruction(inst, fusion)
    if finalize:
        finalize_fusion(fusion)
    return fusion


def _clone_body(fusion: HloInstruction, producer: HloInstruction,
                keep_names: bool) -> HloInstruction:
    """Clone `producer` (a fusion's whole body for a fusion producer) into `fusion`'s fused
    computation; the producer's operands become fusion parameters. Returns the clone of the value
    the producer computes (a tuple for a multi-output fusion producer)."""
    fc = fusion.fused_computation
    if producer.opcode is not Opcode.FUSION:
        ops = [_param_for(fusion, o) for o in producer.operands]
        return _add_clone(fc, producer, ops, keep_names)
    src = producer.fused_computation
    mapping: dict[int, HloInstruction] = {}
    for i, p in enumerate(src.parameters):
        mapping[id(p)] = _param_for(fusion, producer.operands[i])
    for inst in src.post_order():
        if inst.opcode is Opcode.PARAMETER:
            continue
        mapping[id(inst)] = _add_clone(fc, inst, [mapping[id(o)] for o in inst.operands],
                                       keep_names)
    assert src.root is not None
    return mapping[id(src.root)]


def _outputs_of(value: HloInstruction) -> list[HloInstruction]:
    return list(value.operands) if value.opcode is Opcode.TUPLE else [value]


def _make_tuple_root(fusion: HloInstruction) -> None:
    """Turn a single-output fusion into a 1-tuple multi-output fusion; its users read element 0
    through a new get-tuple-element."""
    fc = fusion.fused_computation
    root = fc.root
    assert root is not None and root.opcode is not Opcode.TUPLE
    tup = fc.add(Opcode.TUPLE, Shape.tuple_of([root.shape]), [root], name="tuple")
    fc.set_root(tup)
    old_shape = fusion.shape
    fusion.shape = tup.shape
    comp = fusion.parent
    assert comp is not None
    users = list(fusion.users)
    gte = comp.add(Opcode.GET_TUPLE_ELEMENT, old_shape, [fusion], {"index": 0},
                   name="get-tuple-element")
    for u in users:
        u.replace_operand_with(fusion, gte)
    if comp.root is fusion:
        comp.root = gte


def _append_outputs(fusion: HloInstruction, values: list[HloInstruction]) -> int:
    """Append `values` (in the fused computation) as outputs of a tuple-rooted fusion; returns
    the tuple index of the first one."""
    fc = fusion.fused_computation
    root = fc.root
    assert root is not None and root.opcode is Opcode.TUPLE
    first = len(root.operands)
    root.set_operands(list(root.operands) + values)
    root.shape = Shape.tuple_of([o.shape for o in root.operands])
    fusion.shape = root.shape
    return first


def _redirect_to_outputs(old: HloInstruction, fusion: HloInstruction, first: int) -> None:
    """Every use of `old` (and its root slot) now reads `fusion` outputs starting at `first`:
    a get-tuple-element of a tuple-shaped `old` is retargeted, other users get new GTEs."""
    comp = fusion.parent
    assert comp is not None
    users = list(old.users)
    if old.shape.is_tuple:
        for u in users:
            if u.opcode is Opcode.GET_TUPLE_ELEMENT:
                u.attrs = u.attrs.replace(index=first + u.tuple_index)
                u.replace_operand_with(old, fusion)
            else:  # rebuild the tuple value for a non-GTE user
                n = len(old.shape.tuple_shapes or ())
                parts = [comp.add(Opcode.GET_TUPLE_ELEMENT, fusion.shape.subshape((first + i,)),
                                  [fusion], {"index": first + i}) for i in range(n)]
                tup = comp.add(Opcode.TUPLE, old.shape, parts)
                u.replace_operand_with(old, tup)
        if comp.root is old:
            n = len(old.shape.tuple_shapes or ())
            parts = [comp.add(Opcode.GET_TUPLE_ELEMENT, fusion.shape.subshape((first + i,)),
                              [fusion], {"index": first + i}) for i in range(n)]
            comp.root = comp.add(Opcode.TUPLE, old.shape, parts)
        return
    if not users and comp.root is not old:
        return
    gte = comp.add(Opcode.GET_TUPLE_ELEMENT, old.shape, [fusion], {"index": first},
                   name="get-tuple-element")
    for u in users:
        u.replace_operand_with(old, gte)
    if comp.root is old:
        comp.root = gte


def set_fusion_kind(fusion: HloInstruction) -> None:
    """kInput when any fusion root is a reduction, else keep the current kind."""
    if any(r.opcode.category == "reduce" for r in roots(fusion)):
        fusion.attrs = fusion.attrs.replace(kind=INPUT)


def fuse_producer(fusion: HloInstruction, producer: HloInstruction,
                  export: bool = False, finalize: bool = True) -> None:
    """Fuse `producer`, an operand of `fusion`, into it.

    Requires: `producer` is an array-shaped operand of `fusion` in the same computation; with
    `export`, fusing must not create a cycle (the caller checked reachability). Guarantees: the
    fused parameters that read `producer` now read its clone; if `producer` has other users it
    stays (duplication) unless `export`, in which case it becomes an extra tuple output of
    `fusion` and its other users read it through get-tuple-element; a producer left without
    users is removed (with its fused computation)."""
    assert producer.shape.is_array, f"cannot fuse tuple-shaped {producer.name}"
    fed = [i for i, o in enumerate(fusion.operands) if o is producer]
    assert fed, f"{producer.name} is not an operand of {fusion.name}"
    sole_user = all(u is fusion for u in producer.users) and not producer.is_root
    fc = fusion.fused_computation
    value = _clone_body(fusion, producer, keep_names=sole_user or export)
    for i in fed:
        fc.parameters[i].replace_all_uses_with(value)
    _remove_parameters(fusion, fed)
    if export and (producer.users or producer.is_root):
        if fc.root is not None and fc.root.opcode is not Opcode.TUPLE:
            _make_tuple_root(fusion)
        first = _append_outputs(fusion, [value])
        _redirect_to_outputs(producer, fusion, first)
    set_fusion_kind(fusion)
    if not producer.users and not producer.is_root:
        _remove_dead(producer)
    if finalize:
        finalize_fusion(fusion)


def absorb_fusion_operand(fusion: HloInstruction, producer: HloInstruction,
                          finalize: bool = True) -> None:
    """Clone fusion `producer`'s body into `fusion` in place of every fused parameter that
    reads `producer` (array-shaped) or a get-tuple-element of it (multi-output producer).

    Requires: every user of `producer` is `fusion` or a get-tuple-element whose users are all
    `fusion`; `producer` is not a root. Guarantees: `producer`, those get-tuple-elements and
    the producer's fused computation are removed; clones `fusion` does not use are dropped;
    the fusion's kind is unchanged."""
    comp = fusion.parent
    assert comp is not None and producer.opcode is Opcode.FUSION
    fc = fusion.fused_computation
    value = _clone_body(fusion, producer, keep_names=False)
    outs = _outputs_of(value)
    fed: list[int] = []
    for i, o in enumerate(fusion.operands):
        if o is producer:
            fc.parameters[i].replace_all_uses_with(value)
            fed.append(i)
        elif o.opcode is Opcode.GET_TUPLE_ELEMENT and o.operands[0] is producer:
            fc.parameters[i].replace_all_uses_with(outs[o.tuple_index])
            fed.append(i)
    _remove_parameters(fusion, fed)
    for gte in [u for u in producer.users if u.opcode is Opcode.GET_TUPLE_ELEMENT]:
        if not gte.users and not gte.is_root:
            comp.remove_instruction(gte)
    for inst in reversed(fc.post_order()):  # clones nothing reads (unused producer outputs)
        if (not inst.users and inst is not fc.root and inst.opcode is not Opcode.PARAMETER):
            fc.remove_instruction(inst)
    if not producer.users and not producer.is_root:
        _remove_dead(producer)
    if finalize:
        finalize_fusion(fusion)


def merge_sibling_fusions(a: HloInstruction, b: HloInstruction,
                          finalize: bool = True) -> HloInstruction:
    """Fold fusion `b` into fusion `a`, which becomes multi-output: its outputs are `a`'s then
    `b`'s, shared operands are read once, and `b`'s users read their values through
    get-tuple-element. Requires neither reaches the other (the caller checked). Returns `a`."""
    assert a.opcode is Opcode.FUSION and b.opcode is Opcode.FUSION
    fc = a.fused_computation
    if fc.root is not None and fc.root.opcode is not Opcode.TUPLE:
        _make_tuple_root(a)
    value = _clone_body(a, b, keep_names=True)
    first = _append_outputs(a, _outputs_of(value))
    if value.opcode is Opcode.TUPLE and not value.users:
        fc.remove_instruction(value)  # b's own root tuple: its elements are now a's outputs
    _redirect_to_outputs(b, a, first)
    for pred in b.control_predecessors:
        a.add_control_predecessor(pred)
    comp = b.parent
    assert comp is not None
    for succ in comp.instructions:
        if b in succ.control_predecessors:
            succ.add_control_predecessor(a)
    set_fusion_kind(a)
    _remove_dead(b)
    if finalize:
        finalize_fusion(a)
    return a


def fusion_counts(module: HloModule) -> dict[str, int]:
    """Fusion instructions per kind in the module's non-fusion computations, plus "total" and
    "multi_output" (tuple-shaped fusions); for reports comparing with XLA's fusion counts."""
    counts: dict[str, int] = {"total": 0, "multi_output": 0}
    for comp in module.computations:
        if comp.is_fusion_computation:
            continue
        for inst in comp.instructions:
            if inst.opcode is Opcode.FUSION:
                kind = str(inst.attrs.get("kind", "kLoop"))
                counts[kind] = counts.get(kind, 0) + 1
                counts["total"] += 1
                counts["multi_output"] += int(inst.shape.is_tuple)
    return counts


def invalidate_schedule(module: HloModule) -> None:
    """Fusion changes the instruction set: drop a stale schedule."""
    if module.schedule is not None:
        log.info("fusion changed %s: dropping its schedule", module.name)
        module.schedule = None
