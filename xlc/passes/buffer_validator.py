"""An explicit checker for BufferAssignment (XLA relies on CHECKs; xla-notes section 6 asks for
one). `validate_buffer_assignment` raises VerificationError naming the broken rule."""
from __future__ import annotations

import logging

from xlc.errors import VerificationError
from xlc.hlo.opcodes import Opcode
from xlc.passes.buffer_assignment import BufferAllocation, BufferAssignment
from xlc.passes.dataflow import AliasSet, LogicalBuffer, can_share_operand_buffer

log = logging.getLogger("xlc.passes.buffer_validator")


def validate_buffer_assignment(ba: BufferAssignment) -> None:
    """Check that:
    1. every buffer outside fused computations has an allocation;
    2. every (offset, size) lies inside its allocation, is at least the buffer's size, has the
       allocation's color, and temp/output offsets are aligned (`required_alignment`);
    3. no two buffers that may be live at the same time overlap in memory: overlapping slices in
       one allocation need the same must-alias set, disjoint live ranges (touching only through
       a legal operand reuse), or, without a total order, `!may_interfere`;
    4. read-only allocations (non-aliased parameters, constants) hold only their own value;
    5. live-out buffers are not in a temp allocation.
    Raises VerificationError on the first violation."""
    df = ba.dataflow
    for buf in df.buffers:
        if buf not in ba.unassigned_fused and not ba.has_allocation(buf):
            raise VerificationError(f"buffer {buf} ({buf.shape}) has no allocation")
    for alloc in ba.allocations:
        _check_bounds(ba, alloc)
        _check_readonly(ba, alloc)
        if alloc.is_preallocated_temp:
            for buf in alloc.assigned:
                if df.is_live_out(buf):
                    raise VerificationError(
                        f"live-out buffer {buf} is in temp allocation {alloc.index}")
        _check_interference(ba, alloc)


def _check_bounds(ba: BufferAssignment, alloc: BufferAllocation) -> None:
    for buf, (off, size) in alloc.assigned.items():
        if off < 0 or off + size > alloc.size:
            raise VerificationError(
                f"buffer {buf} at offset {off} size {size} lies outside allocation "
                f"{alloc.index} of size {alloc.size}")
        if size < buf.size:
            raise VerificationError(f"buffer {buf} needs {buf.size} bytes but has {size}")
        if buf.color != alloc.color:
            raise VerificationError(
                f"buffer {buf} of color {buf.color} is in allocation {alloc.index} of color "
                f"{alloc.color}")
        align = ba.required_alignment(buf)
        if (alloc.is_preallocated_temp or alloc.maybe_live_out) and off % align:
            raise VerificationError(
                f"buffer {buf} at offset {off} in allocation {alloc.index} is not aligned to "
                f"{align}")


def _check_readonly(ba: BufferAssignment, alloc: BufferAllocation) -> None:
    if not alloc.is_readonly:
        return
    allowed = (Opcode.PARAMETER,) if alloc.is_entry_computation_parameter else (Opcode.CONSTANT,)
    for buf in alloc.assigned:
        if buf.instruction.opcode not in allowed:
            raise VerificationError(
                f"read-only {alloc.kind} allocation {alloc.index} is written by "
                f"'{buf.instruction.name}' ({buf})")


def _check_interference(ba: BufferAssignment, alloc: BufferAllocation) -> None:
    df = ba.dataflow
    items = sorted(alloc.assigned.items(), key=lambda kv: kv[1][0])
    shared = {(s.operand_set.id, s.user_set.id) for s in ba.shares}
    for i, (a, (oa, sa)) in enumerate(items):
        for b, (ob, sb) in items[i + 1:]:
            if ob >= oa + sa:
                break
            if sa == 0 or sb == 0:
                continue
            if df.must_alias(a, b):
                continue
            if not _may_coexist(ba, a, b, shared):
                continue
            raise VerificationError(
                f"buffers {a} and {b} may be live at the same time but overlap in "
                f"allocation {alloc.index} ([{oa}, {oa + sa}) and [{ob}, {ob + sb}))")


def _may_coexist(ba: BufferAssignment, a: LogicalBuffer, b: LogicalBuffer,
                 shared: set[tuple[int, int]]) -> bool:
    df = ba.dataflow
    live = ba.live_ranges
    if live is None:
        return ba.ordering.may_interfere(a, b, df)
    sa, sb = df.alias_set(a), df.alias_set(b)
    ia, ib = live.set_intervals(sa), live.set_intervals(sb)
    for ra in ia:
        for rb in ib:
            if not ra.overlaps(rb):
                continue
            if ra.end == rb.start and _legal_share(ba, sa, sb, rb.start, shared):
                continue
            if rb.end == ra.start and _legal_share(ba, sb, sa, ra.start, shared):
                continue
            return True
    return False


def _legal_share(ba: BufferAssignment, first: AliasSet, second: AliasSet, time: int,
                 shared: set[tuple[int, int]]) -> bool:
    """At logical time `time`, a buffer of `second` is defined by an instruction that reads
    `first` for the last time and may reuse its buffer."""
    if (first.id, second.id) not in shared:
        return False
    df = ba.dataflow
    live = ba.live_ranges
    assert live is not None
    for buf in second.buffers:
        user = buf.instruction
        if user.uid not in live.first or live.time(user) != time:
            continue
        for operand in user.operands:
            if any(df.alias_set(ob) is first for ob in df.buffers_at(operand, ())):
                if can_share_operand_buffer(operand, user, (), buf.index):
                    return True
    return False
