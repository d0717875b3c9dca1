"""Stats, the XLA-like text report and the JSON form of a BufferAssignment."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xlc.hlo.shape import ShapeIndex

HOST_MEMORY_SPACE = 5
"""XLA's memory space of pinned host memory (`S(5)` in a layout)."""

if TYPE_CHECKING:
    from xlc.passes.buffer_assignment import BufferAllocation, BufferAssignment


def compute_stats(ba: BufferAssignment) -> dict[str, int]:
    """Summary sizes in bytes (and counts):
    - parameter_bytes / constant_bytes / thread_local_bytes: sums of those allocations;
    - output_bytes: distinct slices of the entry result's leaves and index tables (aliased
      parameters included, like XLA's output_size_in_bytes);
    - alias_bytes: the part of the output living in io-aliased (donated) parameters;
    - temp_bytes: the combined temp allocation(s) in device memory; temp_lower_bound_bytes:
      peak live temps; host_temp_bytes: temps offloaded to host memory (S(5), not in the peak);
    - peak_bytes = parameter + output - alias + temp."""
    from xlc.passes.buffer_assignment import temp_lower_bound

    df = ba.dataflow
    stats: dict[str, int] = {k: 0 for k in (
        "parameter_bytes", "output_bytes", "temp_bytes", "constant_bytes", "alias_bytes",
        "thread_local_bytes", "host_temp_bytes", "parameter_count", "output_count", "temp_count",
        "constant_count", "thread_local_count", "allocation_count", "buffer_count")}
    for alloc in ba.allocations:
        kind = alloc.kind
        if kind == "parameter":
            stats["parameter_bytes"] += alloc.size
            stats["parameter_count"] += 1
        elif kind == "constant":
            stats["constant_bytes"] += alloc.size
            stats["constant_count"] += 1
        elif kind == "thread_local":
            stats["thread_local_bytes"] += alloc.size
            stats["thread_local_count"] += 1
        elif kind == "temp" and alloc.color == HOST_MEMORY_SPACE:
            stats["host_temp_bytes"] += alloc.size  # pinned host memory (offloaded values)
        elif kind == "temp":
            stats["temp_bytes"] += alloc.size
            stats["temp_count"] += len(alloc.assigned)
    root = ba.module.entry.root if ba.module.entry is not None else None
    seen: set[tuple[int, int, int]] = set()
    if root is not None:
        for index, _ in root.shape.subshapes():
            for s in ba.all_slices(root, index):
                if s.key() in seen:
                    continue
                seen.add(s.key())
                stats["output_bytes"] += s.size
                stats["output_count"] += 1
                if s.allocation.is_entry_computation_parameter:
                    stats["alias_bytes"] += s.size
    stats["allocation_count"] = len(ba.allocations)
    stats["buffer_count"] = len(df.buffers)
    stats["temp_lower_bound_bytes"] = temp_lower_bound(ba)
    stats["peak_bytes"] = (stats["parameter_bytes"] + stats["output_bytes"]
                           - stats["alias_bytes"] + stats["temp_bytes"])
    return stats


def human_bytes(n: int) -> str:
    """XLA's HumanReadableNumBytes: `8B`, `512.0KiB`, `2.25MiB`."""
    if n < 1024:
        return f"{n}B"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:.2f}{unit}" if v != round(v, 1) else f"{v:.1f}{unit}"
    return f"{n}B"  # pragma: no cover


def _index_text(index: ShapeIndex) -> str:
    return "{" + ",".join(str(i) for i in index) + "}"


def _header(alloc: BufferAllocation) -> str:
    parts = [f"allocation {alloc.index}: size {alloc.size}"]
    if alloc.color:
        parts.append(f"color {alloc.color}")
    if alloc.is_entry_computation_parameter:
        parts.append(f"parameter {alloc.parameter_number}, shape |"
                     f"{_first_shape(alloc)}| at ShapeIndex {_index_text(alloc.parameter_index)}")
    elif alloc.is_constant:
        parts.append("constant")
    elif alloc.is_thread_local:
        parts.append("thread-local")
    elif alloc.maybe_live_out:
        parts.append(f"output shape is |{_first_shape(alloc)}|")
    if alloc.maybe_live_out:
        parts.append("maybe-live-out")
    if alloc.is_preallocated_temp:
        parts.append("preallocated-temp")
    return ", ".join(parts) + ":"


def _first_shape(alloc: BufferAllocation) -> str:
    return next(iter(alloc.assigned)).shape.to_text() if alloc.assigned else "?"


def _stats_block(stats: dict[str, int], fragmentation: int) -> list[str]:
    total = (stats["parameter_bytes"] + stats["constant_bytes"] + stats["temp_bytes"]
             + stats["thread_local_bytes"] + max(stats["output_bytes"] - stats["alias_bytes"], 0))
    rows = [("parameter allocation", stats["parameter_bytes"]),
            ("constant allocation", stats["constant_bytes"]),
            ("maybe_live_out allocation", stats["output_bytes"]),
            ("preallocated temp allocation", stats["temp_bytes"])]
    lines = ["BufferAssignment stats:"]
    lines += [f"{name:>33}: {human_bytes(v):>10}" for name, v in rows]
    pct = 100.0 * fragmentation / stats["temp_bytes"] if stats["temp_bytes"] else 0.0
    lines.append(f"{'preallocated temp fragmentation':>33}: {human_bytes(fragmentation):>10}"
                 f" ({pct:.2f}%)")
    lines.append(f"{'total allocation':>33}: {human_bytes(total):>10}")
    lines.append(f"{'peak':>33}: {human_bytes(stats['peak_bytes']):>10}")
    return lines


def report_text(ba: BufferAssignment) -> str:
    """One header line per allocation, one line per buffer (by id), then the stats block."""
    lines = ["BufferAssignment:"]
    for alloc in ba.allocations:
        lines.append(_header(alloc))
        for buf, (off, size) in sorted(alloc.assigned.items(), key=lambda kv: kv[0].id):
            lines.append(f" value: <{buf.id} {buf.instruction.name}"
                         f"{_index_text(buf.index) if buf.index else ''} @{buf.color}> "
                         f"(size={size},offset={off}): {buf.shape.to_text()}")
    stats = compute_stats(ba)
    frag = stats["temp_bytes"] - stats["temp_lower_bound_bytes"]
    lines.append("")
    lines += _stats_block(stats, frag)
    return "\n".join(lines) + "\n"


def report_json(ba: BufferAssignment) -> dict[str, Any]:
    """{"module", "alignment", "allocations": [...], "stats": {...}, "timeline": [...]} with
    each allocation's kind, size, color, flags and assigned buffers (id, instruction,
    computation, opcode, shape_index, shape, offset, size and, under a total order, "live": the
    [start, end] logical-time intervals its storage is occupied). "timeline" names the
    instruction at each logical time (absent without a total order)."""
    live = ba.live_ranges

    def describe(b: Any, off: int, size: int) -> dict[str, Any]:
        d = {"id": b.id, "instruction": b.instruction.name, "computation": b.computation.name,
             "opcode": b.instruction.opcode.text, "shape_index": list(b.index),
             "shape": b.shape.to_text(), "offset": off, "size": size}
        if live is not None:  # for memory timelines: when the slot is occupied
            d["live"] = [[iv.start, iv.end]
                         for iv in live.set_intervals(ba.dataflow.alias_set(b))]
        return d

    allocs = []
    for alloc in ba.allocations:
        entry: dict[str, Any] = {
            "index": alloc.index, "kind": alloc.kind, "size": alloc.size, "color": alloc.color,
            "maybe_live_out": alloc.maybe_live_out, "is_tuple": alloc.is_tuple,
            "readonly": alloc.is_readonly,
            "assigned": [describe(b, off, size)
                         for b, (off, size) in sorted(alloc.assigned.items(),
                                                      key=lambda kv: kv[0].id)]}
        if alloc.is_entry_computation_parameter:
            entry["parameter_number"] = alloc.parameter_number
            entry["parameter_index"] = list(alloc.parameter_index)
        if alloc.heap is not None:
            entry["heap_algorithm"] = alloc.heap.algorithm
        allocs.append(entry)
    out: dict[str, Any] = {"module": ba.module.name, "alignment": ba.alignment,
                           "allocations": allocs, "stats": compute_stats(ba)}
    if live is not None:
        out["timeline"] = [inst.name for inst in live.sequence]
    return out
