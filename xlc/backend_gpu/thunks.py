"""Thunks: the GPU executable's program, one step per launch or copy (XLA's ThunkSequence).

Every thunk is a plain dataclass that knows which buffer slices it reads and writes and
serialises to / from a plain dict (`to_dict` / `thunk_from_dict`) for the artifact. Slices are
the buffer assignment's `Slice(allocation, offset, size)` (JSON `[index, offset, size]`,
read back against the executable's allocation table): the runtime resolves them as
`base[slice.index] + offset`, so thunks never hold device addresses.

Stream fields (set by `streams.plan_streams`, default: everything on stream 0):
`stream`, `wait_events` (event ids the stream waits for before the thunk) and `record_event`
(the event recorded after it, when another stream depends on it).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from xlc.errors import ArtifactError
from xlc.passes.allocation import BufferAllocation, Slice


@dataclass
class KernelArg:
    """One kernel pointer argument: a slice and whether the kernel reads / writes it."""

    slice: Slice
    read: bool
    written: bool


@dataclass
class Thunk:
    """Base class: `hlo` is the instruction the thunk came from (for profiles and errors)."""

    hlo: str
    stream: int = field(default=0, kw_only=True)
    wait_events: list[int] = field(default_factory=list, kw_only=True)
    record_event: int | None = field(default=None, kw_only=True)

    kind = "thunk"

    def reads(self) -> list[Slice]:
        """Slices read by the thunk (nested thunks included)."""
        return []

    def writes(self) -> list[Slice]:
        """Slices written by the thunk (nested thunks included)."""
        return []

    def children(self) -> list[Thunk]:
        """Directly nested thunks (control flow)."""
        return []

    def walk(self) -> Iterator[Thunk]:
        """This thunk and every nested one, pre-order."""
        yield self
        for c in self.children():
            yield from c.walk()

    def _fields(self) -> dict[str, Any]:
        return {}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict; `thunk_from_dict` inverts it."""
        d: dict[str, Any] = {"kind": self.kind, "hlo": self.hlo, "stream": self.stream}
        if self.wait_events:
            d["wait_events"] = list(self.wait_events)
        if self.record_event is not None:
            d["record_event"] = self.record_event
        d.update(self._fields())
        return d


@dataclass
class KernelThunk(Thunk):
    """Launch `kernel` on a grid of `grid` blocks of `block` threads; `args` are its pointer
    arguments in order. `shared_bytes` records the kernel's static shared memory (declared in
    the PTX; launches pass 0 dynamic bytes)."""

    kernel: str = ""
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    shared_bytes: int = 0
    args: list[KernelArg] = field(default_factory=list)

    kind = "kernel"

    def reads(self) -> list[Slice]:
        return [a.slice for a in self.args if a.read]

    def writes(self) -> list[Slice]:
        return [a.slice for a in self.args if a.written]

    def _fields(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "grid": list(self.grid), "block": list(self.block),
                "shared_bytes": self.shared_bytes,
                "args": [[*a.slice.to_json(), int(a.read), int(a.written)] for a in self.args]}


@dataclass
class MemzeroThunk(Thunk):
    """Set every byte of `dest` to zero."""

    dest: Slice = field(kw_only=True)

    kind = "memzero"

    def writes(self) -> list[Slice]:
        return [self.dest]

    def _fields(self) -> dict[str, Any]:
        return {"dest": self.dest.to_json()}


@dataclass
class Memset32Thunk(Thunk):
    """Fill `dest` (size a multiple of 4) with the 32-bit pattern `value`."""

    dest: Slice = field(kw_only=True)
    value: int = 0

    kind = "memset32"

    def writes(self) -> list[Slice]:
        return [self.dest]

    def _fields(self) -> dict[str, Any]:
        return {"dest": self.dest.to_json(), "value": self.value}


@dataclass
class DeviceToDeviceCopyThunk(Thunk):
    """Copy `src.size` bytes from `src` to `dst` on the device."""

    src: Slice = field(kw_only=True)
    dst: Slice = field(kw_only=True)

    kind = "d2d_copy"

    def reads(self) -> list[Slice]:
        return [self.src]

    def writes(self) -> list[Slice]:
        return [self.dst]

    def _fields(self) -> dict[str, Any]:
        return {"src": self.src.to_json(), "dst": self.dst.to_json()}


@dataclass
class HostToDeviceCopyThunk(Thunk):
    """Copy entry argument number `parameter` (host bytes) into `dst`."""

    parameter: int = 0
    dst: Slice = field(kw_only=True)

    kind = "h2d_copy"

    def writes(self) -> list[Slice]:
        return [self.dst]

    def _fields(self) -> dict[str, Any]:
        return {"parameter": self.parameter, "dst": self.dst.to_json()}


@dataclass
class DeviceToHostCopyThunk(Thunk):
    """Copy `src` back to the host as flat output number `output`."""

    output: int = 0
    src: Slice = field(kw_only=True)

    kind = "d2h_copy"

    def reads(self) -> list[Slice]:
        return [self.src]

    def _fields(self) -> dict[str, Any]:
        return {"output": self.output, "src": self.src.to_json()}


@dataclass
class CopyStartThunk(Thunk):
    """copy-start: begin copying `src` into `dst` (`src.size` bytes) on the thunk's stream,
    the copy stream for top-level copies (`streams.plan_streams`). `direction` says which
    memories: "d2h" device -> pinned host (`S(5)`), "h2d" back, "d2d" within the device. Its
    `wait_events` order it after the compute it depends on; the matching `CopyDoneThunk`
    waits for the event recorded after it."""

    src: Slice = field(kw_only=True)
    dst: Slice = field(kw_only=True)
    direction: str = "d2d"

    kind = "copy_start"

    def reads(self) -> list[Slice]:
        return [self.src]

    def writes(self) -> list[Slice]:
        return [self.dst]

    def _fields(self) -> dict[str, Any]:
        return {"src": self.src.to_json(), "dst": self.dst.to_json(),
                "direction": self.direction}


@dataclass
class CopyDoneThunk(Thunk):
    """copy-done: no work of its own; its `wait_events` (the event recorded after copy-start
    `start`) make its stream wait until the copy has finished."""

    start: str = ""

    kind = "copy_done"

    def _fields(self) -> dict[str, Any]:
        return {"start": self.start}


@dataclass
class SequentialThunk(Thunk):
    """Run `thunks` in order."""

    thunks: list[Thunk] = field(default_factory=list)

    kind = "sequential"

    def children(self) -> list[Thunk]:
        return list(self.thunks)

    def reads(self) -> list[Slice]:
        return [s for t in self.thunks for s in t.reads()]

    def writes(self) -> list[Slice]:
        return [s for t in self.thunks for s in t.writes()]

    def _fields(self) -> dict[str, Any]:
        return {"thunks": [t.to_dict() for t in self.thunks]}


@dataclass
class WhileThunk(Thunk):
    """loop { run `condition`; read the pred at `predicate` back to the host; stop if false;
    run `body` }. With `trip_count` known, the body runs that many times without syncs."""

    condition: SequentialThunk = field(default_factory=lambda: SequentialThunk("cond"))
    predicate: Slice = field(kw_only=True)
    body: SequentialThunk = field(default_factory=lambda: SequentialThunk("body"))
    trip_count: int | None = None

    kind = "while"

    def children(self) -> list[Thunk]:
        return [self.condition, self.body]

    def reads(self) -> list[Slice]:
        return self.condition.reads() + self.body.reads()

    def writes(self) -> list[Slice]:
        return self.condition.writes() + self.body.writes()

    def _fields(self) -> dict[str, Any]:
        return {"condition": self.condition.to_dict(), "predicate": self.predicate.to_json(),
                "body": self.body.to_dict(), "trip_count": self.trip_count}


@dataclass
class ConditionalThunk(Thunk):
    """Read the branch index at `index` (a pred when `index_is_pred`: true -> branch 0) and
    run that branch; an out-of-range s32 index runs the last branch (XLA semantics)."""

    index: Slice = field(kw_only=True)
    index_is_pred: bool = False
    branches: list[SequentialThunk] = field(default_factory=list)

    kind = "conditional"

    def children(self) -> list[Thunk]:
        return list(self.branches)

    def reads(self) -> list[Slice]:
        return [self.index] + [s for br in self.branches for s in br.reads()]

    def writes(self) -> list[Slice]:
        return [s for br in self.branches for s in br.writes()]

    def _fields(self) -> dict[str, Any]:
        return {"index": self.index.to_json(), "index_is_pred": self.index_is_pred,
                "branches": [b.to_dict() for b in self.branches]}


@dataclass
class HostCallThunk(Thunk):
    """A custom-call run on the host (`emit_custom_call.py`): `desc` is its descriptor
    (`xlc.hlo.host_calls.describe`), `operands` and `results` the slices of its operand and
    result arrays, in order."""

    desc: str
    operands: list[Slice]
    results: list[Slice]

    kind = "host_call"

    def reads(self) -> list[Slice]:
        return list(self.operands)

    def writes(self) -> list[Slice]:
        return list(self.results)

    def _fields(self) -> dict[str, Any]:
        return {"desc": self.desc, "operands": [s.to_json() for s in self.operands],
                "results": [s.to_json() for s in self.results]}


# ---- deserialisation ---------------------------------------------------------------------
_Table = Sequence[BufferAllocation]


def _sl(d: dict[str, Any], key: str, allocs: _Table) -> Slice:
    return Slice.from_json(d[key], allocs)


def _seq(d: dict[str, Any], allocs: _Table) -> SequentialThunk:
    t = thunk_from_dict(d, allocs)
    if not isinstance(t, SequentialThunk):
        raise ArtifactError(f"expected a sequential thunk, got {d.get('kind')!r}")
    return t


_DECODERS: dict[str, Callable[[dict[str, Any], str, _Table], Thunk]] = {
    "kernel": lambda d, h, al: KernelThunk(
        h, kernel=d["kernel"], grid=tuple(d["grid"]), block=tuple(d["block"]),  # type: ignore
        shared_bytes=int(d["shared_bytes"]),
        args=[KernelArg(Slice.from_json(a[:3], al), bool(a[3]), bool(a[4]))
              for a in d["args"]]),
    "memzero": lambda d, h, al: MemzeroThunk(h, dest=_sl(d, "dest", al)),
    "memset32": lambda d, h, al: Memset32Thunk(h, dest=_sl(d, "dest", al),
                                               value=int(d["value"])),
    "d2d_copy": lambda d, h, al: DeviceToDeviceCopyThunk(h, src=_sl(d, "src", al),
                                                         dst=_sl(d, "dst", al)),
    "h2d_copy": lambda d, h, al: HostToDeviceCopyThunk(h, parameter=int(d["parameter"]),
                                                       dst=_sl(d, "dst", al)),
    "d2h_copy": lambda d, h, al: DeviceToHostCopyThunk(h, output=int(d["output"]),
                                                       src=_sl(d, "src", al)),
    "copy_start": lambda d, h, al: CopyStartThunk(h, src=_sl(d, "src", al),
                                                  dst=_sl(d, "dst", al),
                                                  direction=str(d["direction"])),
    "copy_done": lambda d, h, al: CopyDoneThunk(h, start=str(d["start"])),
    "sequential": lambda d, h, al: SequentialThunk(h, thunks=[thunk_from_dict(t, al)
                                                              for t in d["thunks"]]),
    "while": lambda d, h, al: WhileThunk(h, condition=_seq(d["condition"], al),
                                         predicate=_sl(d, "predicate", al),
                                         body=_seq(d["body"], al),
                                         trip_count=d.get("trip_count")),
    "host_call": lambda d, h, al: HostCallThunk(
        h, desc=str(d["desc"]), operands=[Slice.from_json(s, al) for s in d["operands"]],
        results=[Slice.from_json(s, al) for s in d["results"]]),
    "conditional": lambda d, h, al: ConditionalThunk(
        h, index=_sl(d, "index", al), index_is_pred=bool(d["index_is_pred"]),
        branches=[_seq(b, al) for b in d["branches"]]),
}


def thunk_from_dict(d: dict[str, Any], allocations: Sequence[BufferAllocation]) -> Thunk:
    """Rebuild a thunk (tree) from `Thunk.to_dict()` output, resolving its slices in
    `allocations` (the executable's table, indexed by allocation number). ArtifactError on
    unknown kinds, ValueError (`Slice.from_json`) on a slice the table does not hold."""
    try:
        decode = _DECODERS[d["kind"]]
    except KeyError:
        raise ArtifactError(f"unknown thunk kind {d.get('kind')!r} in artifact") from None
    t = decode(d, str(d.get("hlo", "")), allocations)
    t.stream = int(d.get("stream", 0))
    t.wait_events = [int(e) for e in d.get("wait_events", [])]
    rec = d.get("record_event")
    t.record_event = None if rec is None else int(rec)
    return t
