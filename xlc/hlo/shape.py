"""Primitive types, array/tuple shapes, layouts and shape indices (XLA's semantics).

A `Shape` is either an array (element type, dims, layout) or a tuple of shapes. Byte sizes follow
`ShapeUtil::ByteSizeOf`: an array is elements x element size; a tuple is only its index table
(pointer size x arity); a token is 0 bytes.
"""
from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass

import ml_dtypes
import numpy as np

ShapeIndex = tuple[int, ...]
"""A path of tuple indices: () is the top level, (1, 0) element 0 of element 1."""

POINTER_SIZE = 8


class PrimitiveType(enum.Enum):
    """Element types. Value = (HLO text name, byte size, numpy dtype name or None)."""

    PRED = ("pred", 1, "bool")
    S8 = ("s8", 1, "int8")
    S16 = ("s16", 2, "int16")
    S32 = ("s32", 4, "int32")
    S64 = ("s64", 8, "int64")
    U8 = ("u8", 1, "uint8")
    U16 = ("u16", 2, "uint16")
    U32 = ("u32", 4, "uint32")
    U64 = ("u64", 8, "uint64")
    F16 = ("f16", 2, "float16")
    BF16 = ("bf16", 2, "bfloat16")
    F32 = ("f32", 4, "float32")
    F64 = ("f64", 8, "float64")
    S4 = ("s4", 1, "int4")  # one element per byte (XLA's unpacked in-memory form)
    U4 = ("u4", 1, "uint4")
    C64 = ("c64", 8, "complex64")
    C128 = ("c128", 16, "complex128")
    TOKEN = ("token", 0, None)

    @property
    def text(self) -> str:
        """The HLO text spelling (`f32`)."""
        return self.value[0]

    @property
    def byte_size(self) -> int:
        """Bytes per element."""
        return self.value[1]

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype (ml_dtypes for bf16)."""
        return _DTYPES[self]

    @property
    def is_float(self) -> bool:
        return self in (PrimitiveType.F16, PrimitiveType.BF16, PrimitiveType.F32, PrimitiveType.F64)

    @property
    def is_complex(self) -> bool:
        return self in (PrimitiveType.C64, PrimitiveType.C128)

    @property
    def is_signed_int(self) -> bool:
        return self in (PrimitiveType.S4, PrimitiveType.S8, PrimitiveType.S16, PrimitiveType.S32,
                        PrimitiveType.S64)

    @property
    def is_unsigned_int(self) -> bool:
        return self in (PrimitiveType.U4, PrimitiveType.U8, PrimitiveType.U16, PrimitiveType.U32,
                        PrimitiveType.U64)

    @property
    def is_integer(self) -> bool:
        return self.is_signed_int or self.is_unsigned_int

    @property
    def bit_width(self) -> int:
        if self in (PrimitiveType.S4, PrimitiveType.U4):
            return 4
        return 1 if self is PrimitiveType.PRED else self.byte_size * 8

    @staticmethod
    def from_text(name: str) -> PrimitiveType:
        """`f32` -> PrimitiveType.F32; raises KeyError for unknown names (parsers wrap it)."""
        return _BY_TEXT[name]

    @staticmethod
    def from_dtype(dtype: object) -> PrimitiveType:
        """numpy dtype (or anything np.dtype accepts) -> PrimitiveType."""
        dt = np.dtype(dtype)  # type: ignore[call-overload]
        try:
            return _BY_DTYPE[dt]
        except KeyError:
            raise TypeError(f"unsupported dtype {dt}") from None


_DTYPES: dict[PrimitiveType, np.dtype] = {}
for _pt in PrimitiveType:
    if _pt.value[2] in ("bfloat16", "int4", "uint4"):
        _DTYPES[_pt] = np.dtype(getattr(ml_dtypes, _pt.value[2]))
    elif _pt.value[2] is not None:
        _DTYPES[_pt] = np.dtype(_pt.value[2])
_BY_TEXT = {pt.text: pt for pt in PrimitiveType}
_BY_DTYPE = {dt: pt for pt, dt in _DTYPES.items()}


@dataclass(frozen=True, slots=True)
class Layout:
    """Physical layout: `minor_to_major` order of dims, plus any tiling/memory-space suffix
    (`T(8,128)`, `S(1)`, ...) kept verbatim as `tail` so it round-trips."""

    minor_to_major: tuple[int, ...]
    tail: str = ""

    def __str__(self) -> str:
        body = ",".join(str(d) for d in self.minor_to_major)
        return "{" + body + (":" + self.tail if self.tail else "") + "}"

    @property
    def memory_space(self) -> int:
        """The `S(n)` memory space (buffer color); 0 when absent."""
        if "S(" in self.tail:
            return int(self.tail.split("S(")[1].split(")")[0])
        return 0


def default_layout(rank: int) -> Layout:
    """Row-major layout `{rank-1, ..., 0}`."""
    return Layout(tuple(range(rank - 1, -1, -1)))


def layout_order(layout: Layout | None, rank: int) -> list[int]:
    """The logical dims from the most major to the most minor under `layout` (the reverse of
    its minor_to_major); row-major `[0, 1, ..., rank-1]` without a layout or with one of
    another rank (which the verifier refuses)."""
    if layout is None or len(layout.minor_to_major) != rank:
        return list(range(rank))
    return list(reversed(layout.minor_to_major))


def physical_order(shape: Shape) -> list[int]:
    """THE physical order of array `shape`: its logical dims from the most major to the most
    minor (`layout_order` of its layout). Every backend, the executables and the evaluator
    use this one."""
    return layout_order(shape.layout, shape.rank)


@dataclass(frozen=True, slots=True)
class Shape:
    """An array shape (`element_type`, `dims`, `layout`) or a tuple shape (`tuple_shapes`).
    `dynamic_dims` lists the bounded dynamic dimensions (`f32[<=8]`: dims holds the bound)."""

    element_type: PrimitiveType | None
    dims: tuple[int, ...] = ()
    layout: Layout | None = None
    tuple_shapes: tuple[Shape, ...] | None = None
    dynamic_dims: tuple[int, ...] = ()

    # ---- constructors -------------------------------------------------------------------
    @staticmethod
    def array(element_type: PrimitiveType | str, dims: tuple[int, ...] | list[int] = (),
              layout: Layout | tuple[int, ...] | None = None) -> Shape:
        """An array shape; the layout defaults to row-major."""
        et = (PrimitiveType.from_text(element_type) if isinstance(element_type, str)
              else element_type)
        d = tuple(int(x) for x in dims)
        if layout is None:
            lay = default_layout(len(d))
        elif isinstance(layout, Layout):
            lay = layout
        else:
            lay = Layout(tuple(layout))
        return Shape(et, d, lay, None)

    @staticmethod
    def tuple_of(shapes: tuple[Shape, ...] | list[Shape]) -> Shape:
        """A tuple shape."""
        return Shape(None, (), None, tuple(shapes))

    @staticmethod
    def token() -> Shape:
        return Shape(PrimitiveType.TOKEN, (), None, None)

    # ---- queries --------------------------------------------------------------------------
    @property
    def is_tuple(self) -> bool:
        return self.tuple_shapes is not None

    @property
    def is_array(self) -> bool:
        return self.tuple_shapes is None and self.element_type is not PrimitiveType.TOKEN

    @property
    def is_token(self) -> bool:
        return self.element_type is PrimitiveType.TOKEN

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def is_static(self) -> bool:
        """No bounded dynamic dimension anywhere in the shape."""
        if self.tuple_shapes is not None:
            return all(s.is_static for s in self.tuple_shapes)
        return not self.dynamic_dims

    @property
    def is_scalar(self) -> bool:
        return self.is_array and not self.dims

    @property
    def num_elements(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def dtype(self) -> np.dtype:
        assert self.element_type is not None, "tuple shapes have no dtype"
        return self.element_type.dtype

    def byte_size(self, pointer_size: int = POINTER_SIZE) -> int:
        """ByteSizeOf: array = elements x element size; tuple = its index table."""
        if self.tuple_shapes is not None:
            return pointer_size * len(self.tuple_shapes)
        assert self.element_type is not None
        return self.num_elements * self.element_type.byte_size

    def subshape(self, index: ShapeIndex) -> Shape:
        """The shape at a ShapeIndex."""
        s = self
        for i in index:
            assert s.tuple_shapes is not None, f"index {index} into non-tuple shape {self}"
            s = s.tuple_shapes[i]
        return s

    def subshapes(self, prefix: ShapeIndex = ()) -> Iterator[tuple[ShapeIndex, Shape]]:
        """Every (index, subshape), tuple nodes before their elements (pre-order)."""
        yield prefix, self
        if self.tuple_shapes is not None:
            for i, s in enumerate(self.tuple_shapes):
                yield from s.subshapes(prefix + (i,))

    def leaves(self, prefix: ShapeIndex = ()) -> Iterator[tuple[ShapeIndex, Shape]]:
        """Every non-tuple (index, subshape) in order."""
        for idx, s in self.subshapes(prefix):
            if s.tuple_shapes is None:
                yield idx, s

    def with_dims(self, dims: tuple[int, ...]) -> Shape:
        """Same element type, new dims, default layout."""
        assert self.element_type is not None
        return Shape.array(self.element_type, dims)

    def with_type(self, element_type: PrimitiveType) -> Shape:
        """Same dims and layout, new element type."""
        return Shape(element_type, self.dims, self.layout, None)

    def with_default_layout(self) -> Shape:
        if self.tuple_shapes is not None:
            return Shape.tuple_of([s.with_default_layout() for s in self.tuple_shapes])
        if self.is_token:
            return self
        return Shape(self.element_type, self.dims, default_layout(self.rank), None)

    def compatible(self, other: Shape) -> bool:
        """Equal ignoring layouts."""
        if self.is_tuple != other.is_tuple:
            return False
        if self.tuple_shapes is not None:
            assert other.tuple_shapes is not None
            return len(self.tuple_shapes) == len(other.tuple_shapes) and all(
                a.compatible(b) for a, b in zip(self.tuple_shapes, other.tuple_shapes))
        return self.element_type == other.element_type and self.dims == other.dims

    def same_dims(self, other: Shape) -> bool:
        return self.is_array and other.is_array and self.dims == other.dims

    # ---- printing ---------------------------------------------------------------------------
    def to_text(self, layout: bool = True) -> str:
        """XLA spelling: `f32[8,128]{1,0}`, `(f32[], s32[4]{0})`, `token[]`."""
        if self.tuple_shapes is not None:
            return "(" + ", ".join(s.to_text(layout) for s in self.tuple_shapes) + ")"
        assert self.element_type is not None
        dims = ",".join(("<=" if i in self.dynamic_dims else "") + str(d)
                        for i, d in enumerate(self.dims))
        text = f"{self.element_type.text}[{dims}]"
        if layout and self.layout is not None and (self.dims or self.layout.tail):
            text += str(self.layout)  # a scalar's only layout is its tail: `f32[]{:S(5)}`
        return text

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"Shape({self.to_text()})"


def array_shape_of(arr: np.ndarray) -> Shape:
    """The default-layout Shape of a numpy array."""
    return Shape.array(PrimitiveType.from_dtype(arr.dtype), arr.shape)


def parse_shape_text(text: str) -> Shape:
    """Parse a shape spelled as in HLO text (`f32[8,128]`, `(f32[], s32[2]{0})`)."""
    from xlc.hlo.parser import parse_shape  # local import: parser depends on this module

    return parse_shape(text)


def _physical_dims(shape: Shape) -> tuple[int, ...]:
    """The dimensions of size > 1, physically major to minor."""
    lay = shape.layout
    m2m = lay.minor_to_major if lay is not None and lay.minor_to_major else \
        tuple(range(shape.rank - 1, -1, -1))
    return tuple(d for d in reversed(m2m) if shape.dims[d] != 1)


def bitcast_is_reshape(src: Shape, dst: Shape) -> bool:
    """Whether `bitcast` from `src` to `dst` (which reinterprets the physical buffer, XLA's
    semantics) gives the same logical values as `reshape`: same element type and count, and
    either both layouts keep their non-unit dims in row-major order, or the two shapes differ
    only in unit dims and order the others alike. A layout-changing bitcast such as
    `f32[4,4]{1,0} -> f32[4,4]{0,1}` is a transpose, not a reshape."""
    if not (src.is_array and dst.is_array) or src.element_type != dst.element_type \
            or src.num_elements != dst.num_elements:
        return False
    ps, pd = _physical_dims(src), _physical_dims(dst)
    if list(ps) == sorted(ps) and list(pd) == sorted(pd):
        return True
    return [src.dims[d] for d in ps] == [dst.dims[d] for d in pd] and \
        [d for d in src.dims if d != 1] == [d for d in dst.dims if d != 1] and \
        sorted(range(len(ps)), key=lambda i: ps[i]) == sorted(range(len(pd)), key=lambda i: pd[i])
