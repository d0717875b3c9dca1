"""THE buffer types: `BufferAllocation` and `Slice` (XLA's names and semantics).

One pair of types serves every stage: buffer assignment builds them (`buffer_assignment.py`),
emitters of both backends read them, the `.xlc` manifest stores them (`to_json` /
`from_json`), and the runtimes (CPU executable, GPU thunks and executor, loaded executables)
resolve a slice as `base[slice.index] + slice.offset`.

A BufferAllocation is one contiguous block the runtime provides. Its flags (kind, size, color,
parameter number and index, live-out, donation, tuple, thread-local, constant) are what a
runtime needs and what `to_json` writes. `assigned` (LogicalBuffer -> (offset, size)), `heap`
and `peak_buffers` exist only at compile time and are not serialized: an allocation read back
with `from_json` has them empty.

A Slice is `size` bytes at `offset` inside an allocation. It holds the allocation object, and
compares and hashes as (allocation index, offset, size). Its JSON is `[index, offset, size]`;
`Slice.from_json(value, allocations)` resolves the index in an allocation table.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xlc.errors import VerificationError
from xlc.hlo.shape import ShapeIndex

if TYPE_CHECKING:
    from xlc.passes.dataflow import LogicalBuffer
    from xlc.passes.heap_simulator import HeapResult

PARAMETER = "parameter"
CONSTANT = "constant"
THREAD_LOCAL = "thread_local"
OUTPUT = "output"
TEMP = "temp"
KINDS = (PARAMETER, CONSTANT, THREAD_LOCAL, OUTPUT, TEMP)

_FLAGS = ("maybe_live_out", "aliased_with_output", "is_tuple", "is_thread_local", "is_constant")
_JSON_KEYS = frozenset({"index", "kind", "size", "color", "parameter_number",
                        "parameter_index", *_FLAGS})


@dataclass(eq=False)
class BufferAllocation:
    """One contiguous block the runtime provides. `assigned` maps each LogicalBuffer to its
    (offset, size) inside the block (compile time only). Flags follow XLA's
    BufferAllocation."""

    index: int
    size: int
    color: int = 0
    is_entry_computation_parameter: bool = False
    parameter_number: int = -1
    parameter_index: ShapeIndex = ()
    is_constant: bool = False
    is_thread_local: bool = False
    maybe_live_out: bool = False
    is_tuple: bool = False
    aliased_with_output: bool = False
    assigned: dict[LogicalBuffer, tuple[int, int]] = field(default_factory=dict)
    heap: HeapResult | None = None
    peak_buffers: list[LogicalBuffer] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """parameter > constant > thread_local > output > temp (the corpus's convention)."""
        if self.is_entry_computation_parameter:
            return PARAMETER
        if self.is_constant:
            return CONSTANT
        if self.is_thread_local:
            return THREAD_LOCAL
        if self.maybe_live_out:
            return OUTPUT
        return TEMP

    @property
    def is_readonly(self) -> bool:
        """A non-donated entry parameter or a constant: never written."""
        return (self.is_entry_computation_parameter and not self.aliased_with_output) \
            or self.is_constant

    @property
    def is_preallocated_temp(self) -> bool:
        """The combined temp block the runtime allocates per execution."""
        return self.kind == TEMP

    @property
    def outlives_call(self) -> bool:
        """Its bytes may become a result: a live-out allocation or a donated (io-aliased)
        parameter. A runtime gives such a block to the results rather than reusing it."""
        return self.maybe_live_out or self.aliased_with_output

    def add(self, buf: LogicalBuffer, offset: int, size: int) -> None:
        """Place `buf` at `offset` (each buffer at most once)."""
        if buf in self.assigned:
            raise VerificationError(f"buffer {buf} assigned twice to allocation {self.index}")
        self.assigned[buf] = (offset, size)

    def to_json(self) -> dict[str, Any]:
        """The flags as a JSON-able dict (`from_json` inverts it); not the LogicalBuffers."""
        return {"index": self.index, "kind": self.kind, "size": self.size,
                "color": self.color, "parameter_number": self.parameter_number,
                "parameter_index": list(self.parameter_index),
                **{name: bool(getattr(self, name)) for name in _FLAGS}}

    @staticmethod
    def from_json(data: Any) -> BufferAllocation:
        """Inverse of `to_json`. ValueError naming the problem for anything else (unknown or
        missing keys, wrong types, a kind that contradicts the flags)."""
        if not isinstance(data, dict):
            raise ValueError(f"an allocation must be a JSON object, not {data!r}")
        unknown = sorted(set(data) - _JSON_KEYS)
        missing = sorted(k for k in ("index", "kind", "size") if k not in data)
        if unknown or missing:
            what = f"unknown key(s) {unknown}" if unknown else f"missing key(s) {missing}"
            raise ValueError(f"allocation {data.get('index', '?')}: {what}")
        ints = {k: data.get(k, d) for k, d in
                (("index", 0), ("size", 0), ("color", 0), ("parameter_number", -1))}
        pindex = data.get("parameter_index", [])
        flags = {k: data.get(k, False) for k in _FLAGS}
        if not all(_is_int(v) for v in ints.values()) or ints["index"] < 0 \
                or ints["size"] < 0 or not isinstance(pindex, list) \
                or not all(_is_int(v) for v in pindex) \
                or not all(isinstance(v, bool) for v in flags.values()):
            raise ValueError(f"allocation {data.get('index', '?')}: a field has the wrong type "
                             "or a negative index or size")
        kind = data["kind"]
        alloc = BufferAllocation(
            ints["index"], ints["size"], ints["color"],
            is_entry_computation_parameter=kind == PARAMETER,
            parameter_number=ints["parameter_number"], parameter_index=tuple(pindex), **flags)
        if alloc.kind != kind:
            raise ValueError(f"allocation {alloc.index}: kind {kind!r} contradicts its flags "
                             f"(which make it {alloc.kind!r})")
        return alloc

    def __repr__(self) -> str:
        return f"<allocation {self.index} {self.kind} size={self.size}>"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True, eq=False)
class Slice:
    """`size` bytes at `offset` of `allocation`: what emitters and runtimes consume."""

    allocation: BufferAllocation
    offset: int
    size: int

    @property
    def index(self) -> int:
        """The allocation's index (its position in the buffer table)."""
        return self.allocation.index

    def key(self) -> tuple[int, int, int]:
        """(allocation index, offset, size): equality and hashing."""
        return (self.allocation.index, self.offset, self.size)

    def overlaps(self, other: Slice) -> bool:
        """Whether the two slices share a byte (same allocation, intersecting ranges; an
        empty slice inside another counts, conservatively). Temps all live in one temp
        allocation, so comparing allocation indices is not enough."""
        return (self.index == other.index and self.offset < other.offset + other.size
                and other.offset < self.offset + self.size)

    def to_json(self) -> list[int]:
        """`[allocation index, offset, size]` (`from_json` inverts it)."""
        return [self.allocation.index, self.offset, self.size]

    @staticmethod
    def from_json(value: Any, allocations: Sequence[BufferAllocation]) -> Slice:
        """The slice `[index, offset, size]` of `allocations[index]`. ValueError unless the
        value is three non-negative integers naming an allocation of the table."""
        if not isinstance(value, (list, tuple)) or len(value) != 3 \
                or not all(_is_int(v) and v >= 0 for v in value):
            raise ValueError(f"a slice must be [allocation, offset, size], not {value!r}")
        index, offset, size = (int(v) for v in value)
        if index >= len(allocations) or allocations[index].index != index:
            raise ValueError(f"slice {list(value)} names allocation {index}, which the "
                             f"table of {len(allocations)} allocation(s) does not hold")
        return Slice(allocations[index], offset, size)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Slice) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __str__(self) -> str:
        return f"{{index:{self.allocation.index}, offset:{self.offset}, size:{self.size}}}"
