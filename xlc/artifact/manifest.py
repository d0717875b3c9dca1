"""The manifest of a serialized executable (`manifest.json` inside an `.xlc` zip).

A pydantic model that describes everything a loader needs *before* it touches code: the format
version, the producing xlc version, the backend and target (triple, CPU name and features, or
GPU compute capability), the entry signature (pytree structure, shapes and dtypes), the
input/output aliasing, the buffer allocations with the slices of the outputs, the executable's
schedule (the entry computation's instruction sequence: its kernels/thunks), the constants,
per-pass compile times and the sha256 of every other member of the archive. The manifest's own
sha256 is the zip archive's comment (`xlc-manifest-sha256:<hex>`, see `seal` / `parse_manifest`),
so no byte of the file goes unchecked.

Also here: converting pytree `TreeDef`s and argument avals to and from JSON-able data.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from xlc.errors import ArtifactError
from xlc.hlo.shape import ShapeIndex
from xlc.passes.allocation import BufferAllocation, Slice

FORMAT = "xlc-executable"
FORMAT_VERSION = 3
"""2: the manifest is sealed by the sha256 in the zip comment; 3: an output slice is
`{"output_index", "slice": Slice.to_json()}` (was `{"output_index", "allocation", "offset",
"size"}`). Version 2 files are read (upgraded on parsing, `_upgrade`)."""
READABLE_VERSIONS = (2, FORMAT_VERSION)
MANIFEST_NAME = "manifest.json"
SEAL_PREFIX = b"xlc-manifest-sha256:"

# Member names inside the archive.
HLO_MEMBER = "optimized.hlo"
REPORT_MEMBER = "buffer_assignment.txt"
ASSIGNMENT_MEMBER = "buffer_assignment.json"
MEMORY_MEMBER = "memory.json"
OBJECT_MEMBER = "code/entry.o"
PTX_MEMBER = "code/kernels.ptx"
CUBIN_MEMBER = "code/kernels.cubin"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TargetInfo(_Model):
    """Where the code runs: the host triple and CPU (CPU backend), a compute capability (GPU),
    or nothing in particular (interpreter)."""

    triple: str = ""
    cpu_name: str = ""
    cpu_features: list[str] = Field(default_factory=list,
                                    description="the '+feature' names the code was built for")
    gpu_compute_capability: int | None = None


class TensorSpec(_Model):
    """One array leaf of the signature."""

    dtype: str = Field(description="HLO element type name, e.g. f32")
    shape: list[int]
    weak: bool = False

    def text(self) -> str:
        """The HLO spelling, e.g. f32[8,128]."""
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"


class Signature(_Model):
    """The callable's signature: flat input/output leaves plus their pytree structure
    (None when the executable was compiled from HLO and takes the entry parameters
    positionally)."""

    name: str
    arg_names: list[str] = Field(default_factory=list)
    in_tree: dict[str, Any] | None = None
    out_tree: dict[str, Any]
    inputs: list[TensorSpec | None]
    outputs: list[TensorSpec]


class AliasInfo(_Model):
    """One input_output_alias entry."""

    output_index: list[int]
    parameter_number: int
    parameter_index: list[int]
    kind: str = "may-alias"


def _allocation(value: Any) -> BufferAllocation:
    """A manifest allocation entry (`BufferAllocation.to_json()`) as the one type."""
    return value if isinstance(value, BufferAllocation) else BufferAllocation.from_json(value)


if TYPE_CHECKING:
    StoredAllocation = BufferAllocation
else:  # pydantic must not look inside the dataclass (its LogicalBuffer map is compile-time)
    StoredAllocation = Annotated[
        Any, PlainValidator(_allocation),
        PlainSerializer(lambda a: a.to_json(), return_type=dict),
        WithJsonSchema({"type": "object", "description": "BufferAllocation.to_json()"})]
"""A BufferAllocation stored as its JSON (flags only, no LogicalBuffers)."""


class OutputSlice(_Model):
    """Where one leaf of the entry root (an output) lives: `slice` is `Slice.to_json()`,
    `[allocation, offset, size]` (`Manifest.output_slice_table` resolves it)."""

    output_index: list[int]
    slice: list[int]


class ScheduledOp(_Model):
    """One instruction of the entry computation's schedule (a kernel or thunk to run)."""

    name: str
    opcode: str
    shape: str
    kind: str | None = Field(None, description="fusion kind, for fusions")


class ConstantInfo(_Model):
    """A constant of the entry computation (its bytes live in the code or the HLO text)."""

    name: str
    shape: str
    bytes: int


class MemberInfo(_Model):
    """Checksum and size of one archive member."""

    sha256: str
    size: int


class PassTime(_Model):
    """Wall time of one pass or backend stage of the original compile."""
    name: str
    seconds: float


class Manifest(_Model):
    """The complete description of an `.xlc` archive (see the module docstring)."""

    format: Literal["xlc-executable"] = "xlc-executable"
    format_version: int = FORMAT_VERSION
    xlc_version: str
    backend: str
    target: TargetInfo = Field(default_factory=TargetInfo)
    module_name: str
    entry_symbol: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    signature: Signature
    input_output_alias: list[AliasInfo] = Field(default_factory=list)
    allocations: list[StoredAllocation] = Field(default_factory=list)
    output_slices: list[OutputSlice] = Field(default_factory=list)
    schedule: list[ScheduledOp] = Field(default_factory=list)
    constants: list[ConstantInfo] = Field(default_factory=list)
    memory_stats: dict[str, int] = Field(default_factory=dict)
    pass_timings: list[PassTime] = Field(default_factory=list)
    memory_budget: list[str] = Field(default_factory=list, description="what fitting under "
                                     "memory_limit did: the summary line, then one line per "
                                     "pass and per recomputed or offloaded value")
    compile_seconds: dict[str, float] = Field(default_factory=dict)
    cache_key: str | None = Field(None, description="the compile-cache key an entry of the "
                                  "cache was stored under (checked on every hit)")
    members: dict[str, MemberInfo] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_tables(self) -> Manifest:
        """The allocation table is numbered 0..n-1 and every output slice names one of it."""
        for position, a in enumerate(self.allocations):
            if a.index != position:
                raise ValueError(f"allocation {a.index} is listed at position {position}")
        self.output_slice_table()
        return self

    def output_slice_table(self) -> dict[ShapeIndex, Slice]:
        """Output index -> the Slice (of `allocations`) holding that leaf of the entry root.
        ValueError for a slice the allocation table does not hold."""
        return {tuple(s.output_index): Slice.from_json(s.slice, self.allocations)
                for s in self.output_slices}


def seal(manifest_bytes: bytes) -> bytes:
    """The zip comment that carries the sha256 of `manifest_bytes`."""
    import hashlib

    return SEAL_PREFIX + hashlib.sha256(manifest_bytes).hexdigest().encode()


def parse_manifest(data: bytes, where: str, comment: bytes | None = None) -> Manifest:
    """Validate manifest bytes. Checks the format name and version first so that a file from
    a newer xlc gets a sentence about versions, not a schema error; then, unless `comment` is
    None, that the archive comment `comment` seals exactly these bytes (`seal`)."""
    import json

    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ArtifactError(f"{where}: the manifest is not valid JSON; the file is damaged"
                            ) from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ArtifactError(f"{where}: not an xlc executable (the manifest has no "
                            f"format '{FORMAT}')")
    version = raw.get("format_version")
    if version not in READABLE_VERSIONS:
        raise ArtifactError(f"{where}: unsupported format version {version!r}; this xlc reads "
                            f"version {FORMAT_VERSION} or 2 (written by xlc "
                            f"{raw.get('xlc_version', '?')}); recompile it with this xlc")
    if comment is not None and comment != seal(data):
        if not comment.startswith(SEAL_PREFIX):
            raise ArtifactError(f"{where}: {MANIFEST_NAME} carries no checksum; the file was "
                                "not written by xlc or was modified, refusing to load it")
        raise ArtifactError(f"{where}: checksum mismatch for {MANIFEST_NAME}; the file was "
                            "modified or damaged, refusing to load it")
    try:
        return Manifest.model_validate(_upgrade(raw))
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ArtifactError(f"{where}: the manifest is malformed ({loc + ': ' if loc else ''}"
                            f"{err['msg']})") from None


def _upgrade(raw: dict[str, Any]) -> dict[str, Any]:
    """A format-2 manifest in the current format: its output slices become
    `{"output_index", "slice"}` (nothing else changed). Later versions pass through."""
    if raw.get("format_version") != 2:
        return raw
    slices = raw.get("output_slices", [])
    if isinstance(slices, list):
        raw = {**raw, "output_slices": [_upgrade_slice(s) for s in slices]}
    return {**raw, "format_version": FORMAT_VERSION}


def _upgrade_slice(entry: Any) -> Any:
    if not isinstance(entry, dict) or "slice" in entry:
        return entry
    rest = {k: v for k, v in entry.items() if k not in ("allocation", "offset", "size")}
    return {**rest, "slice": [entry.get("allocation"), entry.get("offset"), entry.get("size")]}


# ---- pytree and aval conversion ------------------------------------------------------------
_KEY_TYPES = (str, int, float, bool, type(None))


def tree_to_json(td: Any) -> dict[str, Any]:
    """A `pytree.TreeDef` as nested dicts. Dict keys must be str/int/float/bool/None."""
    out: dict[str, Any] = {"kind": td.kind}
    if td.children:
        out["children"] = [tree_to_json(c) for c in td.children]
    if td.keys:
        for k in td.keys:
            if not isinstance(k, _KEY_TYPES):
                raise ArtifactError(f"cannot serialize a pytree dict key of type "
                                    f"{type(k).__name__} ({k!r}); use str keys")
        out["keys"] = [[type(k).__name__, k] for k in td.keys]
    return out


def tree_from_json(data: dict[str, Any]) -> Any:
    """Inverse of `tree_to_json`."""
    from xlc.frontend.pytree import TreeDef

    kinds = ("leaf", "none", "float0", "tuple", "list", "dict")
    kind = data.get("kind")
    if kind not in kinds:
        raise ArtifactError(f"manifest: unknown pytree node kind {kind!r}")
    children = tuple(tree_from_json(c) for c in data.get("children", []))
    keys = tuple(_key_from_json(k) for k in data.get("keys", []))
    return TreeDef(kind, children, keys)


def _key_from_json(item: list[Any]) -> Any:
    tname, value = item
    if tname == "NoneType":
        return None
    conv = {"str": str, "int": int, "float": float, "bool": bool}.get(tname)
    if conv is None:
        raise ArtifactError(f"manifest: bad pytree key type {tname!r}")
    return conv(value)


def shape_to_spec(shape: Any) -> TensorSpec | None:
    """An array `Shape` as a TensorSpec (None for a tuple shape)."""
    if not shape.is_array or shape.element_type is None:
        return None
    return TensorSpec(dtype=shape.element_type.text, shape=list(shape.dims))


def aval_to_spec(aval: Any) -> TensorSpec | None:
    """An `xlc.frontend.staging.Aval` (or None for a tuple parameter) as a TensorSpec."""
    if aval is None:
        return None
    return TensorSpec(dtype=aval.ptype.text, shape=list(aval.dims), weak=bool(aval.weak))


def spec_to_aval(spec: TensorSpec | None) -> Any:
    """Inverse of `aval_to_spec`."""
    if spec is None:
        return None
    from xlc.frontend.staging import Aval
    from xlc.hlo.shape import PrimitiveType

    try:
        ptype = PrimitiveType.from_text(spec.dtype)
    except KeyError:
        raise ArtifactError(f"manifest: unknown element type {spec.dtype!r}") from None
    return Aval(ptype, tuple(spec.shape), spec.weak)
