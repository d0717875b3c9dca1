"""sort-workspace: sorts whose kernels need scratch memory (the radix and merge sorts of
lines longer than `emit_sort.INSERTION_MAX`) get it from the buffer assignment.

Each such `sort` becomes a `__xlc$sort` custom-call (`xlc/hlo/sort_call.py`) with the sort's
outputs followed by a u8 workspace, plus a get-tuple-element of the result (one operand) or a
tuple of get-tuple-elements (several). The workspace holds the larger of the merge sort's
scratch (`emit_sort.merge_scratch_bytes`, one line at a time) and the radix sort's (one line's
`radix_scratch_bytes` per share of its threaded line loop, `emit_sort.radix_slots`): which of
the two runs is decided at emission, once buffers are known. The buffer assignment places the
workspace like any temp, so `memory_stats()` counts it and no kernel allocates memory.

Requires: a verified module after fusion and the thread count it is compiled for. Guarantees:
every sort of a non-fusion computation with lines longer than INSERTION_MAX is replaced as
above (same values; the sort's name moves to the get-tuple-element or tuple, its metadata to
the custom-call; output k may still take operand k's buffer, `alias_rules`); nothing else
changes; instructions stay in a topological order.
"""
from __future__ import annotations

import logging

from xlc.backend_cpu.workspace import (
    WorkspacePass,
    WorkspaceShrink,
    add_workspace_call,
    replace_keeping_name,
)
from xlc.hlo.ir import HloComputation, HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.sort_call import SORT_TARGET, encode_sort, sort_call_sort

log = logging.getLogger("xlc.backend_cpu")


def _scratch_forms(sort: HloInstruction, threads: int) -> tuple[int, int, int] | None:
    """(merge sort's scratch, one line's radix scratch or 0 when no radix sort applies, the
    radix sort's slots on `threads` threads) of `sort`; None for lines short enough to be
    insertion-sorted (no scratch)."""
    from xlc.backend_cpu.emit_radix_sort import radix_scratch_bytes, sort_key
    from xlc.backend_cpu.emit_sort import (
        INSERTION_MAX,
        element_type,
        merge_scratch_bytes,
        radix_slots,
    )

    shape = sort.operands[0].shape
    dims = sort.attrs.get("dimensions") or (shape.rank - 1,)
    n = shape.dims[int(dims[0])]
    if n <= INSERTION_MAX:
        return None
    spec = sort_key(sort.called[0]) if n < (1 << 31) else None
    per_line = 0
    if spec is not None:
        pts = [element_type(op.shape, op.name) for op in sort.operands]
        per_line = radix_scratch_bytes(spec, pts, n)
    return merge_scratch_bytes(sort), per_line, radix_slots(sort, threads)


def sort_workspace_bytes(sort: HloInstruction, threads: int) -> int:
    """Workspace bytes the CPU's kernels for `sort` need on `threads` threads (0: none)."""
    forms = _scratch_forms(sort, threads)
    if forms is None:
        return 0
    merge, per_line, slots = forms
    return max(merge, slots * per_line)


class SortWorkspace(WorkspacePass):
    """Replace sorts that need scratch by `__xlc$sort` custom-calls with a workspace output
    (see the module docstring)."""

    name = "sort-workspace"
    opcode = Opcode.SORT

    def rewrite(self, comp: HloComputation, sort: HloInstruction) -> bool:
        """Replace `sort` if its kernels need scratch; True if it did."""
        nbytes = sort_workspace_bytes(sort, self.threads)
        if nbytes == 0:
            return False
        results = list(sort.shape.tuple_shapes or ()) if sort.shape.is_tuple else [sort.shape]
        call = add_workspace_call(comp, sort, results, nbytes, SORT_TARGET, encode_sort(sort),
                                  "sort")
        if sort.shape.is_tuple:
            parts = [comp.add(Opcode.GET_TUPLE_ELEMENT, s, (call,), {"index": i},
                              name=f"{sort.name}.{i}") for i, s in enumerate(results)]
            out = HloInstruction(Opcode.TUPLE, sort.shape, parts, name=sort.name)
        else:
            out = HloInstruction(Opcode.GET_TUPLE_ELEMENT, sort.shape, (call,), {"index": 0},
                                 name=sort.name)
        replace_keeping_name(comp, sort, out)
        log.debug("sort-workspace: %s sorts with %d bytes of workspace", out.name, nbytes)
        return True


class SortWorkspaceShrink(WorkspaceShrink):
    """Budget pass "sort-workspace-shrink" (`WorkspaceShrink`): under a memory limit, a long
    sort's workspace (one line of radix scratch per share of its threaded line loop) above the
    share steps down one form per round, fastest first: one radix line (the radix sort then
    sorts one line at a time on one thread), then the merge sort's scratch (one line of values
    and two index arrays; `emit_sort` merge-sorts a workspace that holds less than a radix
    line) when that is smaller. `fit_to_budget` repeats the pass while it lowers the peak, so
    a sort slows down only as far as the limit needs. Runs after rematerialization and the
    GEMM shrink.

    Requires: a scheduled, assigned module after SortWorkspace. Guarantees: only workspace
    sizes change; `actions` names each call."""

    name = "sort-workspace-shrink"
    target = SORT_TARGET

    def smaller(self, call: HloInstruction, share: int) -> tuple[int, str] | None:
        """The largest form smaller than the workspace `call` holds (None: it has none)."""
        forms = _scratch_forms(sort_call_sort(call), self.threads)
        if forms is None:
            return None
        merge, per_line, _ = forms
        held = (call.shape.tuple_shapes or ())[-1].num_elements
        options = ([(per_line, "radix sort, one line at a time")] if per_line else []) + \
            [(merge, "merge sort")]
        below = [o for o in options if o[0] < held]
        return max(below) if below else None
