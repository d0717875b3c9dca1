"""Buffer aliasing rules of single instructions (no whole-module analysis here).

- `in_place_pairs(inst)`: XLA's GetInPlaceInputOutputPairs (operand buffers an op updates in
  place: dynamic-update-slice, scatter, fusions rooted in them, declared
  `output_to_operand_aliasing`);
- `value_source` / `value_readers`: follow a value through tuple / get-tuple-element / bitcast
  (and through a copy-start's source element `{1}` and a copy-done's destination);
- `can_share_operand_buffer`: XLA's CanShareOperandBufferWithUser (may a user's output reuse a
  dying operand's buffer), including the emitter contracts it relies on.

`xlc.passes.dataflow` re-exports all of these.
"""
from __future__ import annotations

import re
from collections.abc import Callable

from xlc.hlo.gemm_call import is_gemm_call, may_reuse_lhs
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Shape, ShapeIndex, default_layout
from xlc.hlo.sort_call import is_sort_call

# ---- in-place pairs -------------------------------------------------------------------------
InPlacePair = tuple[int, ShapeIndex, ShapeIndex]  # (operand number, operand index, output index)

_OUTPUT_ALIAS_RE = re.compile(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}")


def _parse_index(text: str) -> ShapeIndex:
    return tuple(int(t) for t in text.replace(" ", "").split(",") if t)


def _declared_aliasing(inst: HloInstruction) -> list[InPlacePair]:
    raw = inst.get_extra("output_to_operand_aliasing")
    if not raw:
        return []
    return [(int(m.group(2)), _parse_index(m.group(3)), _parse_index(m.group(1)))
            for m in _OUTPUT_ALIAS_RE.finditer(raw)]


def _skip_bitcasts(inst: HloInstruction) -> HloInstruction:
    while inst.opcode is Opcode.BITCAST:
        inst = inst.operands[0]
    return inst


def same_layout(a: Shape, b: Shape) -> bool:
    """Whether arrays `a` and `b` (same dims) store their elements in the same physical order:
    equal minor-to-major orders once size-1 dims, which do not move anything, are dropped."""
    def order(s: Shape) -> tuple[int, ...]:
        m2m = (s.layout or default_layout(s.rank)).minor_to_major
        return tuple(d for d in m2m if s.dims[d] != 1)
    return a.dims == b.dims and order(a) == order(b)


def _updates_in_place(inst: HloInstruction, k: int, out_index: ShapeIndex) -> bool:
    """Whether dynamic-update-slice / scatter `inst` can write operand `k` in place into its
    output at `out_index`: only when both have the same layout (XLA's layout assignment makes
    them equal; a module that gives them different layouts gets a relayout copy instead)."""
    return same_layout(inst.operands[k].shape, inst.shape.subshape(out_index))


def _fused_in_place_param(producer: HloInstruction) -> int | None:
    """If `producer` (inside a fused computation) is an in-place op whose in-place operand
    traces back through in-place ops and bitcasts to a fused parameter, that parameter's
    number (None when a step changes the layout, which cannot be done in place)."""
    producer = _skip_bitcasts(producer)
    if producer.opcode not in (Opcode.DYNAMIC_UPDATE_SLICE, Opcode.SCATTER):
        return None
    src = producer
    while True:
        if not _updates_in_place(src, 0, (0,) if src.shape.is_tuple else ()):
            return None
        src = _skip_bitcasts(src.operands[0])
        if src.opcode is Opcode.PARAMETER:
            return src.parameter_number
        if src.opcode not in (Opcode.DYNAMIC_UPDATE_SLICE, Opcode.SCATTER):
            return None


def _in_place_dus(inst: HloInstruction) -> list[InPlacePair]:
    return [(0, (), ())] if _updates_in_place(inst, 0, ()) else []


def _in_place_scatter(inst: HloInstruction) -> list[InPlacePair]:
    n = (inst.operand_count - 1) // 2
    if inst.shape.is_tuple:
        return [(i, (), (i,)) for i in range(n) if _updates_in_place(inst, i, (i,))]
    return [(0, (), ())] if _updates_in_place(inst, 0, ()) else []


def _in_place_fusion(inst: HloInstruction) -> list[InPlacePair]:
    pairs = _declared_aliasing(inst)
    if pairs:
        return pairs
    root = inst.fused_computation.root
    assert root is not None
    outs: list[tuple[ShapeIndex, HloInstruction]]
    if root.opcode is Opcode.TUPLE:
        outs = [((i,), op) for i, op in enumerate(root.operands)]
    else:
        outs = [((), root)]
    for out_index, producer in outs:
        p = _fused_in_place_param(producer)
        if p is not None:
            pairs.append((p, (), out_index))
    return pairs


_IN_PLACE: dict[Opcode, Callable[[HloInstruction], list[InPlacePair]]] = {
    Opcode.DYNAMIC_UPDATE_SLICE: _in_place_dus,
    Opcode.SCATTER: _in_place_scatter,
    Opcode.FUSION: _in_place_fusion,
    Opcode.CUSTOM_CALL: _declared_aliasing,
}


def in_place_pairs(inst: HloInstruction) -> list[InPlacePair]:
    """XLA's GetInPlaceInputOutputPairs: (operand number, operand index, output index) whose
    buffers must be the same (the op updates that operand in place)."""
    fn = _IN_PLACE.get(inst.opcode)
    return fn(inst) if fn is not None else []


# ---- local value tracking ------------------------------------------------------------------
def value_source(inst: HloInstruction, index: ShapeIndex = ()) -> tuple[HloInstruction,
                                                                         ShapeIndex]:
    """Walk back through get-tuple-element / tuple / bitcast to the instruction (and index)
    that produces the value `inst` holds at `index`."""
    while True:
        if inst.opcode is Opcode.GET_TUPLE_ELEMENT:
            index = (inst.tuple_index,) + index
            inst = inst.operands[0]
        elif inst.opcode is Opcode.TUPLE and index:
            inst, index = inst.operands[index[0]], index[1:]
        elif inst.opcode is Opcode.BITCAST and not index:
            inst = inst.operands[0]
        elif inst.opcode is Opcode.COPY and index:
            inst = inst.operands[0]
        elif inst.opcode is Opcode.COPY_START and index[:1] == (1,):
            inst, index = inst.operands[0], index[1:]
        elif inst.opcode is Opcode.COPY_DONE:
            inst, index = inst.operands[0], (0,) + index
        else:
            return inst, index


def value_readers(source: HloInstruction, index: ShapeIndex
                  ) -> tuple[list[HloInstruction], list[ShapeIndex]]:
    """Instructions of the source's computation that read the value (`source`, `index`), one
    entry per read, following forwarding ops; and the root indices where the value ends up."""
    readers: list[HloInstruction] = []
    at_root: list[ShapeIndex] = []
    work = [(source, index)]
    while work:
        inst, idx = work.pop()
        if inst.is_root:
            at_root.append(idx)
        for user in inst.users:
            for k, op in enumerate(user.operands):
                if op is not inst:
                    continue
                if user.opcode is Opcode.TUPLE:
                    work.append((user, (k,) + idx))
                elif user.opcode is Opcode.GET_TUPLE_ELEMENT:
                    if idx[:1] == (user.tuple_index,):
                        work.append((user, idx[1:]))
                elif user.opcode is Opcode.BITCAST and not idx:
                    work.append((user, ()))
                elif user.opcode is Opcode.COPY and idx:
                    work.append((user, idx))
                elif user.opcode is Opcode.COPY_START:
                    # read by the copy, and held at {1} until its copy-done
                    readers.append(user)
                    work.append((user, (1,) + idx))
                elif user.opcode is Opcode.COPY_DONE and idx[:1] == (0,):
                    work.append((user, idx[1:]))
                else:
                    readers.append(user)
    return readers, at_root


# ---- may-share ----------------------------------------------------------------------------
def _transitive_uses_elementwise(param: HloInstruction) -> bool:
    work, seen = [param], {id(param)}
    while work:
        inst = work.pop()
        for user in inst.users:
            if not (user.opcode.is_elementwise or user.opcode is Opcode.TUPLE):
                return False
            if user.opcode.is_elementwise and user.shape.dims != param.shape.dims:
                return False
            if id(user) not in seen:
                seen.add(id(user))
                work.append(user)
    return True


def _read_at_own_index(param: HloInstruction, root: HloInstruction) -> bool:
    """Inside a kInput fusion with a tuple root: does every use of `param` read element i only
    to compute the outputs at index i? Allowed paths: elementwise ops over the parameter's dims
    into the root tuple (elementwise outputs), or into a data operand of a reduce over the
    parameter's dims that is itself only a root output (a hero: element i is added to its sum
    when the emitters visit i, before they store the elementwise outputs at i - `write_all`)."""
    if root.opcode is not Opcode.TUPLE:
        return False
    dims = tuple(param.shape.dims)
    work, seen = [param], {id(param)}
    while work:
        inst = work.pop()
        for user in inst.users:
            if user is root:
                continue
            if user.opcode is Opcode.REDUCE:
                n = len(user.operands) // 2
                if (any(op is inst for op in user.operands[n:])
                        or any(u is not root for u in user.users)
                        or tuple(user.operands[0].shape.dims) != dims):
                    return False
                continue
            if not user.opcode.is_elementwise or tuple(user.shape.dims) != dims:
                return False
            if id(user) not in seen:
                seen.add(id(user))
                work.append(user)
    return True


def _elementwise_output(root: HloInstruction | None, index: ShapeIndex) -> bool:
    """Whether output `index` of a fusion with root `root` is a tuple element that no reduce
    computes (an elementwise output of a kInput fusion)."""
    return (root is not None and root.opcode is Opcode.TUPLE and len(index) == 1
            and root.operands[index[0]].opcode is not Opcode.REDUCE)


def _row_reduction_dims(red: HloInstruction) -> tuple[list[int], list[int]] | None:
    """(kept dims, reduced dims) of a single-output reduce whose physically minor input
    dimension is reduced (a row reduction), else None."""
    if red.opcode is not Opcode.REDUCE or not red.shape.is_array or len(red.operands) != 2:
        return None
    in_shape = red.operands[0].shape
    reduced = sorted(int(d) for d in red.attrs.get("dimensions", ()))
    kept = [d for d in range(in_shape.rank) if d not in reduced]
    if kept and reduced:
        lay = in_shape.layout
        minor = lay.minor_to_major[0] if lay is not None and lay.minor_to_major else \
            in_shape.rank - 1
        if minor not in reduced:
            return None
    return kept, reduced


def _reads_only_its_row(param: HloInstruction, out: HloInstruction) -> bool:
    """Inside a kInput fusion whose output `out` is a row reduction with the shape of fused
    parameter `param`: does every use of `param` read element i only to compute output
    elements of row i? Allowed paths: elementwise ops over the parameter's shape, a broadcast
    of such a value along the reduced dims (`dimensions` = the kept dims), elementwise ops over
    the reduction's input shape, a reduce over the same dims back to the parameter's shape, and
    the fusion's output tuple."""
    dims = _row_reduction_dims(out)
    if dims is None:
        return False
    kept, reduced = dims
    small, full = tuple(param.shape.dims), tuple(out.operands[0].shape.dims)
    work, seen = [(param, False)], {(id(param), False)}
    while work:
        value, is_full = work.pop()
        for user in value.users:
            if user.opcode is Opcode.TUPLE:
                continue
            if user.opcode.is_elementwise:
                ok = tuple(user.shape.dims) == (full if is_full else small)
                nxt = is_full
            elif user.opcode is Opcode.BROADCAST and not is_full:
                ok = (tuple(user.attrs.get("dimensions", ())) == tuple(kept)
                      and tuple(user.shape.dims) == full)
                nxt = True
            elif user.opcode is Opcode.REDUCE and is_full:
                ok = (_row_reduction_dims(user) == dims and user.operands[0] is value
                      and tuple(user.shape.dims) == small)
                nxt = False
            else:
                return False
            if not ok:
                return False
            if (id(user), nxt) not in seen:
                seen.add((id(user), nxt))
                work.append((user, nxt))
    return bool(reduced)


def _share_fusion(operand: HloInstruction, user: HloInstruction, slots: list[int],
                  user_index: ShapeIndex = ()) -> bool:
    kind = user.attrs.get("kind", "kLoop")
    fused = user.fused_computation
    if kind == "kInput" and len(slots) == 1:
        # Row-reduction output reusing a per-row operand (softmax: the row sums take the row
        # maxima's buffer). Emitter contract: a kInput fusion reads every element i of such a
        # parameter (for all of its outputs) before it writes element i of a reduce output -
        # row emitters accumulate in registers and write each row's result last; a column
        # emitter must not pre-fill the output with the init value (we only allow row
        # reductions, so column emitters never see this).
        root = fused.root
        assert root is not None
        out = root.operands[user_index[0]] if root.opcode is Opcode.TUPLE and user_index \
            else root
        if _reads_only_its_row(fused.parameter(slots[0]), out):
            return True
    if kind == "kInput" and _elementwise_output(fused.root, user_index):
        # An elementwise output reusing an operand that a reduce of the fusion also reads
        # (the bias gradient's fusion: dz = dh * (1 - x^2) into dh's buffer, and the column
        # sum of dz). Emitter contract (`write_all`, CPU and GPU): every input index is visited
        # once; at it, each reduce adds its element and then every elementwise output is
        # computed before any is stored.
        root = fused.root
        assert root is not None
        if all(_read_at_own_index(fused.parameter(k), root) for k in slots):
            return True
    if kind in ("kLoop", "kInput"):
        # Emitter contract: for each index, every output's element is computed before any is
        # stored (an output may take the buffer of an operand another output reads).
        return all(_transitive_uses_elementwise(fused.parameter(k)) for k in slots)
    if kind == "kOutput":
        root = fused.root
        assert root is not None
        if root.opcode is not Opcode.ADD:
            return False
        a, b = root.operands
        for dot, other in ((a, b), (b, a)):
            if dot.opcode in (Opcode.DOT, Opcode.CONVOLUTION) and other.opcode is Opcode.PARAMETER:
                if other.parameter_number in slots and other.users == [root]:
                    return len(slots) == 1
    return False


def _share_sort(operand: HloInstruction, user: HloInstruction, slots: list[int],
                user_index: ShapeIndex) -> bool:
    if len(slots) != 1:
        return False
    want = (slots[0],) if user.shape.is_tuple else ()
    return user_index == want


def _read_elsewhere(operand: HloInstruction, operand_index: ShapeIndex, user: HloInstruction,
                    slots: list[int]) -> bool:
    """Whether another operand of `user` (not at `slots`) holds the same value as `operand`
    at `operand_index` (a bitcast or get-tuple-element of it): `user` would read that storage
    at other indices too, so writing its output there is unsafe."""
    src = value_source(operand, operand_index)
    return any(value_source(o) == src for k, o in enumerate(user.operands)
               if k not in slots and not o.shape.is_tuple)


def can_share_operand_buffer(operand: HloInstruction, user: HloInstruction,
                             operand_index: ShapeIndex = (), user_index: ShapeIndex = ()) -> bool:
    """XLA's CanShareOperandBufferWithUser: may `user`'s output at `user_index` reuse the
    buffer of `operand` at `operand_index` once that is dead? Requires `operand` to be an
    operand of `user`. Never for constants; the subshapes (with layout) must be equal; true for
    in-place pairs, loop/input fusions using the operand only elementwise, an elementwise
    output of an input fusion whose operand is read only at the index written (its reduces
    included), a row-reduction output of an input fusion whose operand is read per row only
    (see `_share_fusion` for the emitter contracts), output fusions `add(dot, X)` for X,
    while/conditional, sort's matching element (also of a `__xlc$sort` custom-call), a
    `__xlc$gemm` call's result over its lhs where the call says it may
    (`output_may_reuse_lhs`), and elementwise users. Never when another operand of `user`
    is the same storage (a bitcast of it), except for while/conditional."""
    if operand.opcode is Opcode.CONSTANT:
        return False
    slots = [k for k, o in enumerate(user.operands) if o is operand]
    if not slots:
        return False
    a = operand.shape.subshape(operand_index)
    b = user.shape.subshape(user_index)
    if a != b or a.byte_size() != b.byte_size():
        return False
    pairs = in_place_pairs(user)
    if any(k in slots and oi == operand_index and ui == user_index for k, oi, ui in pairs):
        return True
    if user.opcode in (Opcode.DYNAMIC_UPDATE_SLICE, Opcode.SCATTER):
        return False
    if user.opcode not in (Opcode.WHILE, Opcode.CONDITIONAL) and \
            _read_elsewhere(operand, operand_index, user, slots):
        return False
    if user.opcode is Opcode.FUSION:
        return _share_fusion(operand, user, slots, user_index)
    if user.opcode in (Opcode.WHILE, Opcode.CONDITIONAL):
        return True
    if user.opcode is Opcode.SORT:
        return _share_sort(operand, user, slots, user_index)
    if is_gemm_call(user) and may_reuse_lhs(user):
        # the GEMM stores row r of its result only after packing row r of its lhs (`xlc.
        # backend_cpu.gemm.writes_over_a`)
        return slots == [0] and user_index == (0,)
    if is_sort_call(user):  # a sort with a workspace output: element k is operand k sorted
        return len(slots) == 1 and user_index == (slots[0],)
    return user.opcode.is_elementwise and not a.is_tuple
