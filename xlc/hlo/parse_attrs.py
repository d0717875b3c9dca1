"""Typed attribute values of HLO instructions: one small parser per value syntax, and the table
`ATTR_PARSERS` mapping XLA's attribute key to its parser (the contract of `xlc.hlo.attrs`).

Keys naming called computations are listed in `COMPUTATION_KEYS` / `COMPUTATION_LIST_KEYS`; the
instruction parser resolves them once every computation of the module is known. Keys found in
none of these tables are kept as raw text in `HloInstruction.extra`.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from xlc.hlo.attrs import ConvDimLabels, PaddingConfig, SliceDim, Window, WindowDim
from xlc.hlo.lexer import Cursor
from xlc.hlo.shape import Layout, PrimitiveType, Shape, ShapeIndex

_PRIM = re.compile(r"([a-z][a-z0-9]*)\[")
_SIMPLE_SHAPE = re.compile(r"([a-z][a-z0-9]*)\[([0-9,]*)\](?:\{([0-9,]*)\})?(?![{:\[])")
_DIMS_X = re.compile(r"-?\d+(?:x-?\d+)*")
_PAD = re.compile(r"-?\d+_-?\d+(?:_-?\d+)?(?:x-?\d+_-?\d+(?:_-?\d+)?)*")
_DIM_LABELS = re.compile(r"[0-9a-z?]+_[0-9a-z?]+->[0-9a-z?]+")
_BARE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_LAYOUT_TAIL = re.compile(r"[^}]*")

_shape_cache: dict[str, Shape] = {}


# ---- shapes -------------------------------------------------------------------------------
def parse_shape_at(cur: Cursor) -> Shape:
    """Parse a shape (`f32[8,128]{1,0}`, `(f32[], s32[2]{0})`, `token[]`) at the cursor.
    Guarantees: array shapes always carry a layout (row-major when the text has none)."""
    c = cur.peek()
    if c == "(":
        cur.pos += 1
        elems: list[Shape] = []
        if not cur.accept(")"):
            while True:
                elems.append(parse_shape_at(cur))
                if cur.accept(")"):
                    break
                cur.expect(",")
        return Shape.tuple_of(elems)
    text = cur.text
    start = cur.pos
    m = _SIMPLE_SHAPE.match(text, start)
    if m:
        key = m.group(0)
        shape = _shape_cache.get(key)
        if shape is not None:
            cur.pos = m.end()
            return shape
    pm = _PRIM.match(text, start)
    if not pm:
        cur.error(f"expected shape but found {cur.describe()}")
    try:
        et = PrimitiveType.from_text(pm.group(1))
    except KeyError:
        cur.error(f"unknown primitive type '{pm.group(1)}'")
    cur.pos = pm.end()
    dims: list[int] = []
    dynamic: list[int] = []
    if not cur.accept("]"):
        while True:
            if cur.peek_str("?"):
                cur.error("unbounded dynamic dimensions ('?') are not supported; give a bound "
                          "('<=N')")
            if cur.accept("<="):
                dynamic.append(len(dims))
            d = cur.integer("dimension size")
            if d < 0:
                cur.error(f"negative dimension size {d}")
            dims.append(d)
            if cur.accept("]"):
                break
            cur.expect(",")
    if et is PrimitiveType.TOKEN:
        shape = Shape.token()
    else:
        layout = _parse_layout(cur, len(dims))
        shape = Shape.array(et, tuple(dims), layout)
        if dynamic:
            shape = dataclasses.replace(shape, dynamic_dims=tuple(dynamic))
    if m and cur.pos == m.end():
        if len(_shape_cache) > 4096:  # bound the memo in long-running processes
            _shape_cache.clear()
        _shape_cache[m.group(0)] = shape
    return shape


def _parse_layout(cur: Cursor, rank: int) -> Layout | None:
    """`{1,0}` / `{1,0:T(8,128)S(1)}` after a shape; only when `{` is followed by an int or `:`
    (so `-> f32[4] {` still opens a computation body)."""
    text = cur.text
    i = cur.pos
    n = len(text)
    if i >= n or text[i] != "{":
        return None
    j = i + 1
    while j < n and text[j] == " ":
        j += 1
    if j >= n or not (text[j].isdigit() or text[j] in ":}"):
        return None
    if text[j] == "}" and rank != 0:
        return None
    start = cur.pos
    cur.pos += 1
    m2m: list[int] = []
    tail = ""
    while not cur.accept("}"):
        if cur.accept(":"):
            tail = cur.match(_LAYOUT_TAIL).group(0).strip()  # type: ignore[union-attr]
            cur.expect("}")
            break
        if m2m:
            cur.expect(",")
        if not cur.peek_integer():
            cur.error("bad layout")
        m2m.append(cur.integer())
    if sorted(m2m) != list(range(rank)):
        cur.error(f"bad layout {{{','.join(map(str, m2m))}}} for rank {rank}", start)
    return Layout(tuple(m2m), tail)


def parse_shape_index(cur: Cursor) -> ShapeIndex:
    """`{}` or `{1,0}`."""
    return tuple(parse_int_list(cur))


# ---- scalar and list values ---------------------------------------------------------------
def parse_int_list(cur: Cursor) -> tuple[int, ...]:
    """`{1,2,3}` (possibly empty)."""
    cur.expect("{")
    out: list[int] = []
    if cur.accept("}"):
        return ()
    while True:
        out.append(cur.integer())
        if cur.accept("}"):
            return tuple(out)
        cur.expect(",")


def parse_int(cur: Cursor) -> int:
    """`3` / `-1`."""
    return cur.integer()


def parse_bool(cur: Cursor) -> bool:
    """`true` / `false`."""
    cur.skip()
    start = cur.pos
    word = cur.bare()
    if word == "true":
        return True
    if word == "false":
        return False
    if word:
        cur.error(f"expected 'true' or 'false' but found '{word}'", start)
    cur.error(f"expected 'true' or 'false' but found {cur.describe()}")


def parse_word(cur: Cursor) -> str:
    """A bare identifier-like value (`LT`, `kLoop`, `rng_uniform`)."""
    m = cur.match(_BARE_WORD)
    if not m:
        cur.error("expected attribute value")
    return m.group(0)


def parse_quoted(cur: Cursor) -> str:
    """A double-quoted string; returns the unescaped contents."""
    return cur.string()


def parse_slice(cur: Cursor) -> tuple[SliceDim, ...]:
    """`{[0:8], [2:10:2]}`."""
    cur.expect("{")
    out: list[SliceDim] = []
    if cur.accept("}"):
        return ()
    while True:
        cur.expect("[")
        start = cur.integer("slice start")
        cur.expect(":")
        limit = cur.integer("slice limit")
        stride = 1
        if cur.accept(":"):
            stride = cur.integer("slice stride")
        cur.expect("]")
        out.append(SliceDim(start, limit, stride))
        if cur.accept("}"):
            return tuple(out)
        cur.expect(",")


def parse_padding(cur: Cursor) -> PaddingConfig:
    """`0_0x1_2_1`: low_high[_interior] per dimension, joined by `x`."""
    m = cur.match(_PAD)
    if not m:
        bad = re.match(r"[^\s,{}]*", cur.text[cur.pos:]).group(0)  # type: ignore[union-attr]
        cur.error(f"bad padding '{bad}': expected low_high[_interior]x...")
    dims = []
    for part in m.group(0).split("x"):
        nums = [int(v) for v in re.findall(r"-?\d+", part)]
        dims.append((nums[0], nums[1], nums[2] if len(nums) > 2 else 0))
    return PaddingConfig(tuple(dims))


def _xs(cur: Cursor) -> list[int]:
    m = cur.match(_DIMS_X)
    if not m:
        cur.error(f"expected NxN... but found {cur.describe()}")
    return [int(v) for v in m.group(0).split("x")]


def parse_window(cur: Cursor) -> Window:
    """`{size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x0}`."""
    start = cur.expect("{")
    fields: dict[str, Any] = {}
    while not cur.accept("}"):
        key_pos = cur.pos
        key = cur.name("window field")
        cur.expect("=")
        if key == "pad":
            fields[key] = [(lo, hi) for lo, hi, _ in parse_padding(cur).dims]
        elif key in ("size", "stride", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
            fields[key] = _xs(cur)
        else:
            cur.error(f"unknown window field '{key}'", key_pos)
        cur.accept(",")
    if "size" not in fields:
        if fields:
            cur.error("window has no size", start)
        return Window(())
    n = len(fields["size"])
    for key, vals in fields.items():
        if len(vals) != n:
            cur.error(f"window {key} has {len(vals)} dimensions but size has {n}", start)
    dims = []
    for i in range(n):
        lo, hi = fields["pad"][i] if "pad" in fields else (0, 0)
        dims.append(WindowDim(
            size=fields["size"][i],
            stride=fields["stride"][i] if "stride" in fields else 1,
            pad_low=lo, pad_high=hi,
            window_dilation=fields["rhs_dilate"][i] if "rhs_dilate" in fields else 1,
            base_dilation=fields["lhs_dilate"][i] if "lhs_dilate" in fields else 1,
            reversal=bool(fields["rhs_reversal"][i]) if "rhs_reversal" in fields else False))
    return Window(tuple(dims))


def parse_dim_labels(cur: Cursor) -> ConvDimLabels:
    """`b01f_01io->b01f`."""
    cur.skip()
    start = cur.pos
    m = cur.match(_DIM_LABELS)
    if not m:
        cur.error(f"bad dim_labels {cur.describe()}: expected e.g. b01f_01io->b01f")
    try:
        return ConvDimLabels.from_text(m.group(0))
    except ValueError as e:
        cur.error(f"bad dim_labels '{m.group(0)}': {e}", start)


def parse_computation_ref(cur: Cursor) -> list[tuple[str, int]]:
    """`%name` -> [(name, position)]."""
    cur.skip()
    pos = cur.pos
    return [(cur.name("computation name"), pos)]


def parse_computation_list(cur: Cursor) -> list[tuple[str, int]]:
    """`{%a, %b}` -> [(name, position), ...]."""
    cur.expect("{")
    out: list[tuple[str, int]] = []
    if cur.accept("}"):
        return out
    while True:
        cur.skip()
        pos = cur.pos
        out.append((cur.name("computation name"), pos))
        if cur.accept("}"):
            return out
        cur.expect(",")


AttrParser = Callable[[Cursor], Any]

_INT_LIST_KEYS = (
    "dimensions", "dynamic_slice_sizes", "slice_sizes", "lhs_batch_dims", "rhs_batch_dims",
    "lhs_contracting_dims", "rhs_contracting_dims", "offset_dims", "collapsed_slice_dims",
    "start_index_map", "operand_batching_dims", "start_indices_batching_dims",
    "update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
    "input_batching_dims", "scatter_indices_batching_dims", "fft_length",
)
_INT_KEYS = ("index", "iota_dimension", "index_vector_dim", "k", "feature_group_count",
             "batch_group_count", "inferred_dimension", "exponent_bits", "mantissa_bits")
_BOOL_KEYS = ("is_stable", "largest", "indices_are_sorted", "unique_indices")
_WORD_KEYS = ("direction", "type", "kind", "distribution", "algorithm", "fft_type")

ATTR_PARSERS: dict[str, AttrParser] = {
    **{k: parse_int_list for k in _INT_LIST_KEYS},
    **{k: parse_int for k in _INT_KEYS},
    **{k: parse_bool for k in _BOOL_KEYS},
    **{k: parse_word for k in _WORD_KEYS},
    "custom_call_target": parse_quoted,
    "slice": parse_slice,
    "padding": parse_padding,
    "window": parse_window,
    "dim_labels": parse_dim_labels,
}
"""Typed attribute key -> value parser (see the table in `xlc.hlo.attrs`)."""

COMPUTATION_KEYS = ("to_apply", "calls", "condition", "body", "true_computation",
                    "false_computation", "select", "scatter")
COMPUTATION_LIST_KEYS = ("branch_computations", "called_computations")

# Typed attributes print in this order (XLA's order within each opcode).
ATTR_PRINT_ORDER: tuple[str, ...] = (
    "kind", "index", "iota_dimension", "dimensions", "slice", "dynamic_slice_sizes", "padding",
    "window", "dim_labels", "feature_group_count", "batch_group_count",
    "lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims",
    "offset_dims", "collapsed_slice_dims", "operand_batching_dims",
    "start_indices_batching_dims", "start_index_map", "update_window_dims",
    "inserted_window_dims", "input_batching_dims", "scatter_indices_batching_dims",
    "scatter_dims_to_operand_dims", "index_vector_dim", "slice_sizes", "indices_are_sorted",
    "unique_indices", "direction", "type", "is_stable", "k", "largest", "distribution",
    "algorithm", "exponent_bits", "mantissa_bits", "inferred_dimension", "fft_type",
    "fft_length", "custom_call_target",
)
