"""Typed values of opcode-specific attributes, frozen and hashable.

Attribute keys are exactly XLA's text keys (`dimensions`, `slice`, `padding`, `window`,
`dim_labels`, `lhs_contracting_dims`, `direction`, `index`, `kind`, ...). Their Python types:

| key(s)                                                   | type                          |
|----------------------------------------------------------|-------------------------------|
| dimensions, dynamic_slice_sizes, slice_sizes, *_dims,     | tuple[int, ...]               |
|   start_index_map, scatter_dims_to_operand_dims,          |                               |
|   fft_length, ...                                         |                               |
| index, iota_dimension, index_vector_dim, k,               | int                           |
|   feature_group_count, batch_group_count, parameter_number,|                              |
|   inferred_dimension, exponent_bits, mantissa_bits        |                               |
| is_stable, largest, indices_are_sorted, unique_indices    | bool                          |
| direction, type, kind, custom_call_target, distribution,  | str                           |
|   algorithm, fft_type (FFT, IFFT, RFFT, IRFFT)            |                               |
| slice                                                     | tuple[SliceDim, ...]          |
| padding                                                   | PaddingConfig                 |
| window                                                    | Window                        |
| dim_labels                                                | ConvDimLabels                 |
| literal (constant)                                        | Literal                       |

The other keys XLA knows for an opcode (`xlc.hlo.attr_keys`: metadata, backend_config, sharding,
frontend_attributes, operand_precision, ...) are kept verbatim as raw text in
`HloInstruction.extra` and printed back unchanged.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


class Attrs(Mapping[str, Any]):
    """An immutable, hashable mapping of attribute key -> typed value."""

    __slots__ = ("_d", "_hash")

    def __init__(self, items: Mapping[str, Any] | None = None, **kw: Any):
        d = dict(items or {})
        d.update(kw)
        self._d = d
        self._hash: int | None = None

    def __getitem__(self, key: str) -> Any:
        return self._d[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(sorted(self._d.items(), key=lambda kv: kv[0])))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Attrs):
            return self._d == other._d
        if isinstance(other, Mapping):
            return self._d == dict(other)
        return NotImplemented

    def replace(self, **kw: Any) -> Attrs:
        """A copy with some keys set (a value of None removes the key)."""
        d = dict(self._d)
        for k, v in kw.items():
            if v is None:
                d.pop(k, None)
            else:
                d[k] = v
        return Attrs(d)

    def __repr__(self) -> str:
        return f"Attrs({self._d!r})"


@dataclass(frozen=True, slots=True)
class SliceDim:
    """One `[start:limit:stride]` entry of a `slice=` attribute."""

    start: int
    limit: int
    stride: int = 1

    def __str__(self) -> str:
        s = f"[{self.start}:{self.limit}"
        return s + (f":{self.stride}]" if self.stride != 1 else "]")


@dataclass(frozen=True, slots=True)
class PaddingConfig:
    """`padding=lo_hi[_interior]x...`: per dim (low, high, interior); low/high may be negative."""

    dims: tuple[tuple[int, int, int], ...]

    def __str__(self) -> str:
        parts = []
        for lo, hi, it in self.dims:
            parts.append(f"{lo}_{hi}" + (f"_{it}" if it else ""))
        return "x".join(parts)


@dataclass(frozen=True, slots=True)
class WindowDim:
    """One dimension of a `window={...}` attribute."""

    size: int
    stride: int = 1
    pad_low: int = 0
    pad_high: int = 0
    window_dilation: int = 1  # rhs_dilate
    base_dilation: int = 1  # lhs_dilate
    reversal: bool = False


@dataclass(frozen=True, slots=True)
class Window:
    """`window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=.. rhs_dilate=.. rhs_reversal=..}`."""

    dims: tuple[WindowDim, ...]

    def __str__(self) -> str:
        if not self.dims:
            return "{}"
        ds = self.dims
        parts = ["size=" + "x".join(str(d.size) for d in ds)]
        if any(d.stride != 1 for d in ds):
            parts.append("stride=" + "x".join(str(d.stride) for d in ds))
        if any(d.pad_low or d.pad_high for d in ds):
            parts.append("pad=" + "x".join(f"{d.pad_low}_{d.pad_high}" for d in ds))
        if any(d.base_dilation != 1 for d in ds):
            parts.append("lhs_dilate=" + "x".join(str(d.base_dilation) for d in ds))
        if any(d.window_dilation != 1 for d in ds):
            parts.append("rhs_dilate=" + "x".join(str(d.window_dilation) for d in ds))
        if any(d.reversal for d in ds):
            parts.append("rhs_reversal=" + "x".join(str(int(d.reversal)) for d in ds))
        return "{" + " ".join(parts) + "}"


@dataclass(frozen=True, slots=True)
class ConvDimLabels:
    """Convolution dimension numbers, spelled `dim_labels=b01f_01io->b01f`.

    Spatial dims are listed in spatial order (digit 0, 1, ...)."""

    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]

    def __str__(self) -> str:
        def spell(rank: int, named: dict[int, str], spatial: tuple[int, ...]) -> str:
            chars = ["?"] * rank
            for pos, ch in named.items():
                chars[pos] = ch
            for i, pos in enumerate(spatial):
                chars[pos] = str(i)
            return "".join(chars)

        n = len(self.input_spatial) + 2
        lhs = spell(n, {self.input_batch: "b", self.input_feature: "f"}, self.input_spatial)
        rhs = spell(n, {self.kernel_input_feature: "i", self.kernel_output_feature: "o"},
                    self.kernel_spatial)
        out = spell(n, {self.output_batch: "b", self.output_feature: "f"}, self.output_spatial)
        return f"{lhs}_{rhs}->{out}"

    @staticmethod
    def from_text(text: str) -> ConvDimLabels:
        """Parse `b01f_01io->b01f`; raises ValueError when malformed."""
        try:
            lhs_rhs, out = text.split("->")
            lhs, rhs = lhs_rhs.split("_")
        except ValueError:
            raise ValueError(f"malformed dim_labels {text!r}") from None
        if not (len(lhs) == len(rhs) == len(out)):
            raise ValueError(f"dim_labels {text!r}: input, kernel and output ranks differ")

        def roles(s: str, a: str, b: str) -> tuple[int, int, tuple[int, ...]]:
            if s.count(a) != 1 or s.count(b) != 1:
                raise ValueError(f"dim_labels part {s!r} needs exactly one {a!r} and one {b!r}")
            spatial = sorted((int(c), i) for i, c in enumerate(s) if c.isdigit())
            if [d for d, _ in spatial] != list(range(len(s) - 2)):
                raise ValueError(f"dim_labels part {s!r} has bad spatial digits")
            return s.index(a), s.index(b), tuple(i for _, i in spatial)

        ib, if_, isp = roles(lhs, "b", "f")
        ki, ko, ksp = roles(rhs, "i", "o")
        ob, of, osp = roles(out, "b", "f")
        return ConvDimLabels(ib, if_, isp, ki, ko, ksp, ob, of, osp)


class Literal:
    """A constant's value: a numpy array (or a tuple of Literals), or elided (`{...}`).

    Equality and hashing go by dtype, shape and bytes, so CSE can merge equal constants."""

    __slots__ = ("array", "elements", "elided", "_hash")

    def __init__(self, array: np.ndarray | None = None, elements: tuple[Literal, ...] | None = None,
                 elided: bool = False):
        if array is not None:
            array = np.ascontiguousarray(array).reshape(np.shape(array))  # keep 0-d arrays 0-d
            array.setflags(write=False)
        self.array = array
        self.elements = elements
        self.elided = elided
        self._hash: int | None = None

    @property
    def is_tuple(self) -> bool:
        return self.elements is not None

    def _key(self) -> tuple:
        if self.elided:
            return ("elided", id(self))
        if self.elements is not None:
            return ("tuple", tuple(e._key() for e in self.elements))
        assert self.array is not None
        return (str(self.array.dtype), self.array.shape, self.array.tobytes())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Literal) and self._key() == other._key()

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self._key())
        return self._hash

    def __repr__(self) -> str:
        if self.elided:
            return "Literal({...})"
        if self.elements is not None:
            return f"Literal({self.elements!r})"
        return f"Literal({self.array!r})"
