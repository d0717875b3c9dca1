"""Unit tests of xlc.hlo.shape_inference: every infer_* function, good and bad cases, with the
exact ShapeError messages (they are API). Shapes are compared ignoring layouts."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlc.errors import ShapeError
from xlc.hlo import shape_inference as si
from xlc.hlo.attrs import ConvDimLabels, PaddingConfig, SliceDim, Window, WindowDim
from xlc.hlo.ir import HloComputation, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType as P
from xlc.hlo.shape import Shape


def S(text: str) -> Shape:
    """`f32[4,8]` -> Shape (tests only; no layouts)."""
    et, dims = text.rstrip("]").split("[")
    return Shape.array(et, tuple(int(d) for d in dims.split(",") if d))


def T(*texts: str) -> Shape:
    return Shape.tuple_of([S(t) for t in texts])


def same(a: Shape, b: Shape) -> bool:
    return a.compatible(b)


def lam(types: list[str], root: str | list[str], name: str = "f") -> HloComputation:
    """A scalar lambda taking scalars of `types` and returning a constant-free root built from
    its parameters: a copy of param 0 (or a tuple of params when `root` is a list)."""
    m = HloModule("m")
    c = m.new_computation(name)
    ps = [c.add_parameter(i, Shape.array(t, ())) for i, t in enumerate(types)]
    if isinstance(root, list):
        r = c.add(Opcode.TUPLE, Shape.tuple_of([Shape.array(t, ()) for t in root]),
                  ps[:len(root)])
    elif root == "pred":
        r = c.add(Opcode.COMPARE, Shape.array("pred", ()), (ps[0], ps[1]),
                  {"direction": "LT"})
    else:
        r = c.add(Opcode.COPY, Shape.array(root, ()), (ps[0],))
    c.set_root(r)
    return c


# ---- unary ---------------------------------------------------------------------------------
@pytest.mark.parametrize("op,inp,out", [
    (Opcode.EXP, "f32[4,8]", "f32[4,8]"),
    (Opcode.IS_FINITE, "f16[3]", "pred[3]"),
    (Opcode.ABS, "s32[2]", "s32[2]"),
    (Opcode.ABS, "c64[2]", "f32[2]"),
    (Opcode.NOT, "pred[5]", "pred[5]"),
    (Opcode.NOT, "u8[5]", "u8[5]"),
    (Opcode.POPCNT, "s32[]", "s32[]"),
    (Opcode.CLZ, "u64[2]", "u64[2]"),
    (Opcode.NEGATE, "s8[2]", "s8[2]"),
    (Opcode.SIGN, "f32[2]", "f32[2]"),
    (Opcode.FLOOR, "bf16[2]", "bf16[2]"),
    (Opcode.REAL, "c128[3]", "f64[3]"),
    (Opcode.COPY, "s32[3]", "s32[3]"),
])
def test_unary_ok(op: Opcode, inp: str, out: str) -> None:
    assert same(si.infer_unary(op, S(inp)), S(out))


@pytest.mark.parametrize("op,inp,msg", [
    (Opcode.EXP, "s32[4]", "exponential: expected a floating-point or complex operand, got s32[4]"),
    (Opcode.TANH, "pred[4]", "tanh: expected a floating-point or complex operand, got pred[4]"),
    (Opcode.IS_FINITE, "s32[4]", "is-finite: expected a floating-point operand, got s32[4]"),
    (Opcode.NOT, "f32[4]", "not: expected a pred or integer operand, got f32[4]"),
    (Opcode.POPCNT, "f32[4]", "popcnt: expected an integer operand, got f32[4]"),
    (Opcode.CLZ, "pred[4]", "count-leading-zeros: expected an integer operand, got pred[4]"),
    (Opcode.SIGN, "u32[4]", "sign: expected a signed integer, floating-point or complex "
                            "operand, got u32[4]"),
    (Opcode.ABS, "pred[4]", "abs: expected a numeric operand, got pred[4]"),
    (Opcode.NEGATE, "pred[]", "negate: expected a numeric operand, got pred[]"),
    (Opcode.CONVERT, "f32[4]", "convert: needs a target element type"),
    (Opcode.ADD, "f32[4]", "add: is not an elementwise unary op"),
])
def test_unary_errors(op: Opcode, inp: str, msg: str) -> None:
    with pytest.raises(ShapeError, match=msg.replace("[", r"\[").replace("]", r"\]")):
        si.infer_unary(op, S(inp))


def test_unary_rejects_tuples() -> None:
    with pytest.raises(ShapeError, match=r"^negate: expected an array operand, got \(f32\[\]\)$"):
        si.infer_unary(Opcode.NEGATE, T("f32[]"))
    assert same(si.infer_unary(Opcode.COPY, T("f32[]", "s32[2]")), T("f32[]", "s32[2]"))


# ---- binary / compare / select / clamp -----------------------------------------------------
def test_binary_ok() -> None:
    assert same(si.infer_binary(Opcode.ADD, S("f32[4,8]"), S("f32[4,8]")), S("f32[4,8]"))
    assert same(si.infer_binary(Opcode.AND, S("pred[3]"), S("pred[3]")), S("pred[3]"))
    assert same(si.infer_binary(Opcode.SHIFT_LEFT, S("u32[3]"), S("u32[3]")), S("u32[3]"))
    assert same(si.infer_binary(Opcode.COMPLEX, S("f32[2]"), S("f32[2]")), S("c64[2]"))
    assert same(si.infer_binary(Opcode.COMPARE, S("s32[2]"), S("s32[2]")), S("pred[2]"))


@pytest.mark.parametrize("op,lhs,rhs,msg", [
    (Opcode.ADD, "f32[4,8]", "f32[8,4]",
     "add: operand shapes must match, got f32[4,8] and f32[8,4]"),
    (Opcode.MULTIPLY, "f32[4]", "f32[]",
     "multiply: operand shapes must match, got f32[4] and f32[]"),
    (Opcode.ADD, "f32[4]", "s32[4]",
     "add: operand element types must match, got f32[4] and s32[4]"),
    (Opcode.AND, "f32[4]", "f32[4]", "and: expected a pred or integer operand, got f32[4]"),
    (Opcode.SHIFT_RIGHT_LOGICAL, "f32[4]", "f32[4]",
     "shift-right-logical: expected an integer operand, got f32[4]"),
    (Opcode.ATAN2, "s32[4]", "s32[4]", "atan2: expected a floating-point or complex operand"),
    (Opcode.NEGATE, "f32[4]", "f32[4]", "negate: is not an elementwise binary op"),
])
def test_binary_errors(op: Opcode, lhs: str, rhs: str, msg: str) -> None:
    with pytest.raises(ShapeError, match=msg.replace("[", r"\[").replace("]", r"\]")):
        si.infer_binary(op, S(lhs), S(rhs))


def test_compare() -> None:
    assert same(si.infer_compare(S("f32[3]"), S("f32[3]"), "LT"), S("pred[3]"))
    assert same(si.infer_compare(S("u8[3]"), S("u8[3]"), "GE", "UNSIGNED"), S("pred[3]"))
    assert same(si.infer_compare(S("f32[]"), S("f32[]"), "EQ", "TOTALORDER"), S("pred[]"))
    with pytest.raises(ShapeError, match=r"^compare: unknown comparison direction, got XX$"):
        si.infer_compare(S("f32[3]"), S("f32[3]"), "XX")
    with pytest.raises(ShapeError, match=r"compare: operand shapes must match, got f32\[3\] and "
                                         r"f32\[4\]"):
        si.infer_compare(S("f32[3]"), S("f32[4]"), "EQ")
    with pytest.raises(ShapeError, match=r"compare: comparison type SIGNED does not fit the "
                                         r"operands, got f32\[3\]"):
        si.infer_compare(S("f32[3]"), S("f32[3]"), "EQ", "SIGNED")
    with pytest.raises(ShapeError, match=r"compare: operand element types must match"):
        si.infer_compare(S("f32[3]"), S("s32[3]"), "EQ")


def test_select() -> None:
    assert same(si.infer_select(S("pred[4]"), S("f32[4]"), S("f32[4]")), S("f32[4]"))
    assert same(si.infer_select(S("pred[]"), S("f32[4]"), S("f32[4]")), S("f32[4]"))
    assert same(si.infer_select(S("pred[]"), T("f32[]"), T("f32[]")), T("f32[]"))
    with pytest.raises(ShapeError, match=r"select: predicate must be a pred array, got s32\[4\]"):
        si.infer_select(S("s32[4]"), S("f32[4]"), S("f32[4]"))
    with pytest.raises(ShapeError, match=r"select: branch shapes must match, got f32\[4\] and "
                                         r"s32\[4\]"):
        si.infer_select(S("pred[4]"), S("f32[4]"), S("s32[4]"))
    with pytest.raises(ShapeError, match=r"select: predicate dimensions must match the branches, "
                                         r"got pred\[3\] and f32\[4\]"):
        si.infer_select(S("pred[3]"), S("f32[4]"), S("f32[4]"))


def test_clamp() -> None:
    assert same(si.infer_clamp(S("f32[]"), S("f32[4,2]"), S("f32[]")), S("f32[4,2]"))
    assert same(si.infer_clamp(S("s32[4]"), S("s32[4]"), S("s32[4]")), S("s32[4]"))
    with pytest.raises(ShapeError, match=r"clamp: bounds must be scalars or match the operand, "
                                         r"got f32\[3\] and f32\[4\]"):
        si.infer_clamp(S("f32[3]"), S("f32[4]"), S("f32[]"))
    with pytest.raises(ShapeError, match=r"clamp: operand element types must match"):
        si.infer_clamp(S("s32[]"), S("f32[4]"), S("f32[]"))


# ---- convert / bitcast-convert -------------------------------------------------------------
def test_convert() -> None:
    assert same(si.infer_convert(S("f32[4]"), P.S32), S("s32[4]"))
    assert same(si.infer_convert(S("pred[4]"), P.BF16), S("bf16[4]"))
    with pytest.raises(ShapeError, match=r"convert: cannot convert complex to a real type, "
                                         r"got c64\[2\] to f32"):
        si.infer_convert(S("c64[2]"), P.F32)


@pytest.mark.parametrize("inp,et,out", [
    ("f32[4]", P.S32, "s32[4]"),
    ("f32[4]", P.U8, "u8[4,4]"),
    ("f64[2,3]", P.F16, "f16[2,3,4]"),
    ("u8[3,4]", P.F32, "f32[3]"),
    ("s16[2]", P.F32, "f32[]"),
])
def test_bitcast_convert_width_changes(inp: str, et: P, out: str) -> None:
    assert same(si.infer_bitcast_convert(S(inp), et), S(out))


def test_bitcast_convert_bad_minor_dim() -> None:
    with pytest.raises(ShapeError, match=r"bitcast-convert: converting to a wider type needs a "
                                         r"minor dimension of size 4, got u8\[3,2\] to f32"):
        si.infer_bitcast_convert(S("u8[3,2]"), P.F32)


# ---- data movement -------------------------------------------------------------------------
def test_broadcast() -> None:
    assert same(si.infer_broadcast(S("f32[3]"), (2, 3), (1,)), S("f32[2,3]"))
    assert same(si.infer_broadcast(S("f32[]"), (2, 3), ()), S("f32[2,3]"))
    assert same(si.infer_broadcast(S("f32[1,3]"), (4, 3), (0, 1)), S("f32[4,3]"))
    with pytest.raises(ShapeError, match=r"broadcast: operand dimension 0 \(size 3\) must be 1 "
                                         r"or equal output dimension 1 \(size 4\), got f32\[3\] "
                                         r"into f32\[2,4\]"):
        si.infer_broadcast(S("f32[3]"), (2, 4), (1,))
    with pytest.raises(ShapeError, match=r"broadcast: dimensions \{\} must have one entry per "
                                         r"operand dimension"):
        si.infer_broadcast(S("f32[3]"), (3,), ())
    with pytest.raises(ShapeError, match=r"broadcast: dimensions out of range, got \{2\} for "
                                         r"f32\[3,3\]"):
        si.infer_broadcast(S("f32[3]"), (3, 3), (2,))
    # XLA's verifier accepts unsorted dimensions (the broadcast also transposes)
    assert same(si.infer_broadcast(S("f32[2,3]"), (3, 4, 2), (2, 0)), S("f32[3,4,2]"))
    with pytest.raises(ShapeError, match=r"broadcast: dimensions must be unique, got \{1,1\}"):
        si.infer_broadcast(S("f32[3,3]"), (3, 3), (1, 1))


def test_reshape_transpose() -> None:
    assert same(si.infer_reshape(S("f32[4,8]"), (2, 16)), S("f32[2,16]"))
    assert same(si.infer_reshape(S("f32[1]"), ()), S("f32[]"))
    with pytest.raises(ShapeError, match=r"^reshape: element counts must match, got f32\[4,8\] "
                                         r"into f32\[5,6\]$"):
        si.infer_reshape(S("f32[4,8]"), (5, 6))
    assert same(si.infer_transpose(S("f32[2,3,4]"), (2, 0, 1)), S("f32[4,2,3]"))
    with pytest.raises(ShapeError, match=r"transpose: dimensions \{0,0\} must be a permutation of "
                                         r"the operand dimensions, got f32\[2,3\]"):
        si.infer_transpose(S("f32[2,3]"), (0, 0))


def test_slice() -> None:
    out = si.infer_slice(S("f32[10,8]"), (SliceDim(1, 9, 3), SliceDim(0, 8)))
    assert same(out, S("f32[3,8]"))
    assert np.zeros((10, 8))[1:9:3, 0:8].shape == out.dims
    with pytest.raises(ShapeError, match=r"slice: range \[0:11\] out of bounds in dimension 0, "
                                         r"got f32\[10\]"):
        si.infer_slice(S("f32[10]"), (SliceDim(0, 11),))
    with pytest.raises(ShapeError, match=r"slice: needs one range per dimension \(1 given\)"):
        si.infer_slice(S("f32[10,2]"), (SliceDim(0, 1),))


def test_dynamic_slice_and_update() -> None:
    idx = [S("s32[]"), S("s32[]")]
    assert same(si.infer_dynamic_slice(S("f32[64,64]"), idx, (16, 8)), S("f32[16,8]"))
    assert same(si.infer_dynamic_slice(S("f32[64,64]"), [S("s32[2]")], (16, 8)), S("f32[16,8]"))
    with pytest.raises(ShapeError, match=r"dynamic-slice: slice size 65 out of bounds in "
                                         r"dimension 1, got f32\[64,64\]"):
        si.infer_dynamic_slice(S("f32[64,64]"), idx, (1, 65))
    with pytest.raises(ShapeError, match=r"dynamic-slice: start index must be an integer scalar, "
                                         r"got f32\[\]"):
        si.infer_dynamic_slice(S("f32[64,64]"), [S("s32[]"), S("f32[]")], (1, 1))
    with pytest.raises(ShapeError, match=r"dynamic-slice: needs one start index per operand "
                                         r"dimension \(1 given\)"):
        si.infer_dynamic_slice(S("f32[64,64]"), [S("s32[]")], (1, 1))
    assert same(si.infer_dynamic_update_slice(S("f32[64,64]"), S("f32[8,8]"), idx),
                S("f32[64,64]"))
    with pytest.raises(ShapeError, match=r"dynamic-update-slice: update must fit inside the "
                                         r"operand, got f32\[4,4\] and f32\[8,8\]"):
        si.infer_dynamic_update_slice(S("f32[4,4]"), S("f32[8,8]"), idx)
    with pytest.raises(ShapeError, match=r"dynamic-update-slice: operand element types must "
                                         r"match"):
        si.infer_dynamic_update_slice(S("f32[4,4]"), S("s32[2,2]"), idx)


def test_concatenate() -> None:
    assert same(si.infer_concatenate([S("f32[2,3]"), S("f32[5,3]")], 0), S("f32[7,3]"))
    with pytest.raises(ShapeError, match=r"concatenate: operand dimensions must match except "
                                         r"dimension 0, got f32\[2,3\] and f32\[5,4\]"):
        si.infer_concatenate([S("f32[2,3]"), S("f32[5,4]")], 0)
    with pytest.raises(ShapeError, match=r"concatenate: dimension 2 out of range, got f32\[2,3\]"):
        si.infer_concatenate([S("f32[2,3]")], 2)
    with pytest.raises(ShapeError, match=r"concatenate: needs at least one operand, got none"):
        si.infer_concatenate([], 0)


@pytest.mark.parametrize("dims,padding,expect", [
    ((4,), [(1, 2, 0)], (7,)),
    ((4,), [(0, 0, 1)], (7,)),
    ((4, 3), [(-1, -1, 0), (2, 0, 2)], (2, 9)),
    ((16, 32), [(2, 0, 1), (0, 0, 0)], (33, 32)),
    ((0,), [(1, 1, 3)], (2,)),
])
def test_pad(dims: tuple[int, ...], padding: list, expect: tuple[int, ...]) -> None:
    out = si.infer_pad(Shape.array("f32", dims), S("f32[]"), PaddingConfig(tuple(padding)))
    assert out.dims == expect


def test_pad_errors() -> None:
    with pytest.raises(ShapeError, match=r"pad: negative output size in dimension 0, got "
                                         r"-3_-2 for f32\[4\]"):
        si.infer_pad(S("f32[4]"), S("f32[]"), PaddingConfig(((-3, -2, 0),)))
    with pytest.raises(ShapeError, match=r"pad: padding value must be a scalar of the operand's "
                                         r"type, got f32\[4\] and s32\[\]"):
        si.infer_pad(S("f32[4]"), S("s32[]"), PaddingConfig(((0, 0, 0),)))
    with pytest.raises(ShapeError, match=r"pad: interior padding must be non-negative"):
        si.infer_pad(S("f32[4]"), S("f32[]"), PaddingConfig(((0, 0, -1),)))


def test_reverse_iota() -> None:
    assert same(si.infer_reverse(S("f32[2,3]"), (0, 1)), S("f32[2,3]"))
    with pytest.raises(ShapeError, match=r"reverse: dimensions must be unique, got \{1,1\} for "
                                         r"f32\[2,3\]"):
        si.infer_reverse(S("f32[2,3]"), (1, 1))
    assert same(si.infer_iota(P.S32, (4, 5), 1), S("s32[4,5]"))
    with pytest.raises(ShapeError, match=r"iota: iota_dimension 2 out of range, got s32\[4,5\]"):
        si.infer_iota(P.S32, (4, 5), 2)
    with pytest.raises(ShapeError, match=r"iota: expected a numeric element type, got pred\[4\]"):
        si.infer_iota(P.PRED, (4,), 0)


# ---- reduce / reduce-window / select-and-scatter -----------------------------------------
def test_reduce() -> None:
    add = lam(["f32", "f32"], "f32")
    assert same(si.infer_reduce([S("f32[4,8,2]")], [S("f32[]")], (1,), add), S("f32[4,2]"))
    assert same(si.infer_reduce([S("f32[4,8]")], [S("f32[]")], (0, 1)), S("f32[]"))
    with pytest.raises(ShapeError, match=r"reduce: init value must be a scalar of the operand's "
                                         r"element type, got f32\[4\] and s32\[\]"):
        si.infer_reduce([S("f32[4]")], [S("s32[]")], (0,))
    # a wider float accumulator (bf16 inputs summed in f32) gives an f32 result
    acc = lam(["f32", "bf16"], "f32")
    assert same(si.infer_reduce([S("bf16[4,8]")], [S("f32[]")], (1,), acc), S("f32[4]"))
    with pytest.raises(ShapeError, match=r"reduce: dimensions out of range, got \{2\} for "
                                         r"f32\[4,8\]"):
        si.infer_reduce([S("f32[4,8]")], [S("f32[]")], (2,))
    with pytest.raises(ShapeError, match=r"reduce: to_apply computation 'g' must take 2 scalar "
                                         r"parameters \(f32\[\], f32\[\]\), got \(f32\[\]\)"):
        si.infer_reduce([S("f32[4]")], [S("f32[]")], (0,), lam(["f32"], "f32", "g"))
    with pytest.raises(ShapeError, match=r"reduce: to_apply computation 'f' must return f32\[\], "
                                         r"got s32\[\]"):
        si.infer_reduce([S("f32[4]")], [S("f32[]")], (0,), lam(["f32", "f32"], "s32"))


def test_reduce_argmax_two_operands() -> None:
    reducer = lam(["f32", "s32", "f32", "s32"], ["f32", "s32"])
    out = si.infer_reduce([S("f32[4,8]"), S("s32[4,8]")], [S("f32[]"), S("s32[]")], (1,),
                          reducer)
    assert same(out, T("f32[4]", "s32[4]"))
    with pytest.raises(ShapeError, match=r"reduce: to_apply computation 'f' must return "
                                         r"\(f32\[\], s32\[\]\), got f32\[\]"):
        si.infer_reduce([S("f32[4,8]"), S("s32[4,8]")], [S("f32[]"), S("s32[]")], (1,),
                        lam(["f32", "s32", "f32", "s32"], "f32"))
    with pytest.raises(ShapeError, match=r"reduce: operand dimensions must match, got f32\[4,8\] "
                                         r"and s32\[4,7\]"):
        si.infer_reduce([S("f32[4,8]"), S("s32[4,7]")], [S("f32[]"), S("s32[]")], (1,))
    with pytest.raises(ShapeError, match=r"reduce: needs N operands and N init values, got 2 "
                                         r"operands and 1 init values"):
        si.infer_reduce([S("f32[4,8]"), S("s32[4,8]")], [S("f32[]")], (1,))


def _win(*dims: WindowDim) -> Window:
    return Window(tuple(dims))


def test_reduce_window() -> None:
    w = _win(WindowDim(2, 2), WindowDim(3, 1, 1, 1))
    assert same(si.infer_reduce_window([S("f32[8,5]")], [S("f32[]")], w), S("f32[4,5]"))
    dil = _win(WindowDim(3, 1, 0, 0, window_dilation=2, base_dilation=2))
    # base 5 dilated -> 9, window 3 dilated -> 5: 9 - 5 + 1 = 5
    assert same(si.infer_reduce_window([S("f32[5]")], [S("f32[]")], dil), S("f32[5]"))
    with pytest.raises(ShapeError, match=r"reduce-window: window must have one dimension per "
                                         r"operand dimension"):
        si.infer_reduce_window([S("f32[8]")], [S("f32[]")], w)


def test_select_and_scatter() -> None:
    w = _win(WindowDim(2, 2), WindowDim(2, 2))
    sel = lam(["f32", "f32"], "pred", "ge")
    sc = lam(["f32", "f32"], "f32", "add")
    out = si.infer_select_and_scatter(S("f32[4,6]"), S("f32[2,3]"), S("f32[]"), w, sel, sc)
    assert same(out, S("f32[4,6]"))
    with pytest.raises(ShapeError, match=r"select-and-scatter: source must have the windowed "
                                         r"operand shape f32\[2,3\], got f32\[2,2\]"):
        si.infer_select_and_scatter(S("f32[4,6]"), S("f32[2,2]"), S("f32[]"), w)
    with pytest.raises(ShapeError, match=r"select-and-scatter: select computation 'add' must "
                                         r"return pred\[\], got f32\[\]"):
        si.infer_select_and_scatter(S("f32[4,6]"), S("f32[2,3]"), S("f32[]"), w, sc, sc)


# ---- dot / convolution ---------------------------------------------------------------------
def test_dot() -> None:
    assert same(si.infer_dot(S("f32[4,3]"), S("f32[3,5]"), (), (), (1,), (0,)), S("f32[4,5]"))
    assert same(si.infer_dot(S("f32[8,32,64]"), S("f32[8,64,16]"), (0,), (0,), (2,), (1,)),
                S("f32[8,32,16]"))
    # batch dims first, then lhs free, then rhs free (batch not leading in the operands)
    out = si.infer_dot(S("f32[3,7,2]"), S("f32[2,5,3]"), (2,), (0,), (0,), (2,))
    assert out.dims == (2, 7, 5)
    assert same(si.infer_dot(S("bf16[4,3]"), S("f32[3,5]"), (), (), (1,), (0,), P.F32),
                S("f32[4,5]"))
    assert same(si.infer_dot(S("f32[4]"), S("f32[5]"), (), (), (), ()), S("f32[4,5]"))
    assert same(si.infer_dot(S("s8[4,3]"), S("s8[3,5]"), (), (), (1,), (0,), P.S32),
                S("s32[4,5]"))


def test_dot_result_types() -> None:
    with pytest.raises(ShapeError, match=r"dot: result element type s8 does not fit the "
                                         r"operands, got f32\[4,3\] and f32\[3,5\]"):
        si.infer_dot(S("f32[4,3]"), S("f32[3,5]"), (), (), (1,), (0,), P.S8)
    with pytest.raises(ShapeError, match=r"dot: mixed-precision operands need a result element "
                                         r"type, got bf16\[4,3\] and f32\[3,5\]"):
        si.infer_dot(S("bf16[4,3]"), S("f32[3,5]"), (), (), (1,), (0,))


@pytest.mark.parametrize("args,msg", [
    (("f32[4,3]", "f32[4,5]", (), (), (1,), (0,)),
     r"dot: contracting dimension sizes must match, got lhs f32\[4,3\] dim 1 and rhs f32\[4,5\] "
     r"dim 0"),
    (("f32[8,4,3]", "f32[7,3,5]", (0,), (0,), (2,), (1,)),
     r"dot: batch dimension sizes must match, got lhs f32\[8,4,3\] dim 0 and rhs f32\[7,3,5\] "
     r"dim 0"),
    (("f32[8,4,3]", "f32[8,3,5]", (0,), (), (2,), (1,)),
     r"dot: lhs and rhs must have the same number of batch dimensions, got \{0\} and \{\}"),
    (("f32[4,3]", "f32[3,5]", (), (), (2,), (0,)),
     r"dot: lhs batch and contracting dimensions out of range, got \{2\} for f32\[4,3\]"),
    (("f32[4,3]", "f32[3,5]", (1,), (0,), (1,), (0,)),
     r"dot: lhs batch and contracting dimensions must be unique, got \{1,1\} for f32\[4,3\]"),
    (("f32[4,3]", "s32[3,5]", (), (), (1,), (0,)),
     r"dot: operand element types must match, got f32\[4,3\] and s32\[3,5\]"),
])
def test_dot_errors(args: tuple, msg: str) -> None:
    lhs, rhs, *rest = args
    with pytest.raises(ShapeError, match=msg):
        si.infer_dot(S(lhs), S(rhs), *rest)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 4), st.integers(1, 4))
def test_dot_matches_numpy_einsum(b: int, m: int, k: int, n: int) -> None:
    out = si.infer_dot(Shape.array("f32", (b, m, k)), Shape.array("f32", (k, b, n)),
                       (0,), (1,), (2,), (0,))
    ref = np.einsum("bmk,kbn->bmn", np.zeros((b, m, k)), np.zeros((k, b, n)))
    assert out.dims == ref.shape


def _labels(text: str) -> ConvDimLabels:
    return ConvDimLabels.from_text(text)


def test_convolution() -> None:
    w = _win(WindowDim(3, 1, 1, 1), WindowDim(3, 1, 1, 1))
    out = si.infer_convolution(S("f32[1,8,8,4]"), S("f32[3,3,4,6]"), w,
                               _labels("b01f_01io->b01f"))
    assert same(out, S("f32[1,8,8,6]"))
    # feature groups: 4 input features in 2 groups of 2
    out = si.infer_convolution(S("f32[1,8,8,4]"), S("f32[3,3,2,6]"), w,
                               _labels("b01f_01io->b01f"), feature_group_count=2)
    assert same(out, S("f32[1,8,8,6]"))
    # NCHW / OIHW, stride 2, no padding, output in NCHW
    w2 = _win(WindowDim(3, 2), WindowDim(3, 2))
    out = si.infer_convolution(S("f32[2,3,9,9]"), S("f32[5,3,3,3]"), w2,
                               _labels("bf01_oi01->bf01"))
    assert same(out, S("f32[2,5,4,4]"))
    # batch groups: batch 4 in 2 groups
    out = si.infer_convolution(S("f32[4,5,3]"), S("f32[3,3,6]"), _win(WindowDim(3)),
                               _labels("b0f_0io->b0f"), batch_group_count=2)
    assert same(out, S("f32[2,3,6]"))


def test_convolution_errors() -> None:
    w = _win(WindowDim(3, 1, 1, 1), WindowDim(3, 1, 1, 1))
    with pytest.raises(ShapeError, match=r"convolution: input features must equal kernel input "
                                         r"features x feature_group_count \(3\), got lhs "
                                         r"f32\[1,8,8,4\] and rhs f32\[3,3,2,6\]"):
        si.infer_convolution(S("f32[1,8,8,4]"), S("f32[3,3,2,6]"), w,
                             _labels("b01f_01io->b01f"), feature_group_count=3)
    with pytest.raises(ShapeError, match=r"convolution: kernel output features must be "
                                         r"divisible by feature_group_count \(2\)"):
        si.infer_convolution(S("f32[1,8,8,4]"), S("f32[3,3,2,5]"), w,
                             _labels("b01f_01io->b01f"), feature_group_count=2)
    with pytest.raises(ShapeError, match=r"convolution: window size 3 must equal kernel spatial "
                                         r"dimension 0 \(size 2\)"):
        si.infer_convolution(S("f32[1,8,8,4]"), S("f32[2,3,4,6]"), w,
                             _labels("b01f_01io->b01f"))
    with pytest.raises(ShapeError, match=r"convolution: dim_labels b01f_01io->b01f need rank-4 "
                                         r"operands, got f32\[8,8,4\] and f32\[3,3,4,6\]"):
        si.infer_convolution(S("f32[8,8,4]"), S("f32[3,3,4,6]"), w, _labels("b01f_01io->b01f"))


# ---- gather / scatter ----------------------------------------------------------------------
def test_gather_like_take() -> None:
    # jnp.take(x, idx, axis=0) for x f32[10,5], idx s32[3]
    out = si.infer_gather(S("f32[10,5]"), S("s32[3]"), offset_dims=(1,),
                          collapsed_slice_dims=(0,), start_index_map=(0,), index_vector_dim=1,
                          slice_sizes=(1, 5))
    assert same(out, S("f32[3,5]"))
    # jnp.take(x, idx, axis=1) with idx s32[7,1] (explicit index vector dim)
    out = si.infer_gather(S("f32[10,5]"), S("s32[7,1]"), (0,), (1,), (1,), 1, (10, 1))
    assert same(out, S("f32[10,7]"))
    # the corpus form: no collapsed dims, slice of size 1 kept as an offset dim
    out = si.infer_gather(S("f32[64]"), S("s32[512,1]"), (1,), (), (0,), 1, (1,))
    assert same(out, S("f32[512,1]"))
    # x[i, j] for index pairs s32[4,2]
    out = si.infer_gather(S("f32[10,5]"), S("s32[4,2]"), (), (0, 1), (0, 1), 1, (1, 1))
    assert same(out, S("f32[4]"))
    # batching dims: per-batch take
    out = si.infer_gather(S("f32[3,10,5]"), S("s32[3,7,1]"), (2,), (1,), (1,), 2, (1, 1, 5),
                          operand_batching_dims=(0,), start_indices_batching_dims=(0,))
    assert same(out, S("f32[3,7,5]"))


@pytest.mark.parametrize("args,msg", [
    (("f32[10,5]", "s32[3]", (1,), (0,), (0,), 1, (1, 6)),
     r"gather: slice size 6 out of bounds in dimension 1, got f32\[10,5\]"),
    (("f32[10,5]", "s32[3,2]", (1,), (0,), (0,), 1, (1, 5)),
     r"gather: index vector size 2 must equal the length of start_index_map \{0\}, got s32\[3,2\]"),
    (("f32[10,5]", "s32[3]", (1,), (0,), (0,), 1, (2, 5)),
     r"gather: collapsed and batching dimensions need slice size <= 1 \(dimension 0\)"),
    (("f32[10,5]", "s32[3]", (1,), (), (0,), 1, (1, 5)),
     r"gather: offset_dims \+ collapsed_slice_dims \+ operand_batching_dims must cover the "
     r"operand rank"),
    (("f32[10,5]", "f32[3]", (1,), (0,), (0,), 1, (1, 5)),
     r"gather: indices must be integers, got f32\[3\]"),
    (("f32[10,5]", "s32[3]", (1,), (0,), (0,), 3, (1, 5)),
     r"gather: index_vector_dim 3 out of range, got s32\[3\]"),
])
def test_gather_errors(args: tuple, msg: str) -> None:
    operand, indices, *rest = args
    with pytest.raises(ShapeError, match=msg):
        si.infer_gather(S(operand), S(indices), *rest)


def test_scatter_like_at_set() -> None:
    # x.at[idx].set(v): x f32[10,5], idx s32[3,1], v f32[3,5]
    out = si.infer_scatter([S("f32[10,5]")], S("s32[3,1]"), [S("f32[3,5]")],
                           update_window_dims=(1,), inserted_window_dims=(0,),
                           scatter_dims_to_operand_dims=(0,), index_vector_dim=1,
                           to_apply=lam(["f32", "f32"], "f32"))
    assert same(out, S("f32[10,5]"))
    # x.at[i, j].add(v) with scalar updates per index pair
    out = si.infer_scatter([S("f32[10,5]")], S("s32[4,2]"), [S("f32[4]")], (), (0, 1), (0, 1), 1)
    assert same(out, S("f32[10,5]"))
    # two operands scattered together -> a tuple
    out = si.infer_scatter([S("f32[10]"), S("s32[10]")], S("s32[3]"), [S("f32[3]"), S("s32[3]")],
                           (), (0,), (0,), 1,
                           to_apply=lam(["f32", "s32", "f32", "s32"], ["f32", "s32"]))
    assert same(out, T("f32[10]", "s32[10]"))


def test_scatter_errors() -> None:
    with pytest.raises(ShapeError, match=r"scatter: update scatter dimensions must match the "
                                         r"index batch dimensions, got f32\[4,5\] and indices "
                                         r"s32\[3,1\]"):
        si.infer_scatter([S("f32[10,5]")], S("s32[3,1]"), [S("f32[4,5]")], (1,), (0,), (0,), 1)
    with pytest.raises(ShapeError, match=r"scatter: update window dimension 1 \(size 6\) exceeds "
                                         r"the operand bound 5"):
        si.infer_scatter([S("f32[10,5]")], S("s32[3,1]"), [S("f32[3,6]")], (1,), (0,), (0,), 1)
    with pytest.raises(ShapeError, match=r"scatter: update element types must match the "
                                         r"operands, got f32\[10,5\] and s32\[3,5\]"):
        si.infer_scatter([S("f32[10,5]")], S("s32[3,1]"), [S("s32[3,5]")], (1,), (0,), (0,), 1)
    with pytest.raises(ShapeError, match=r"scatter: to_apply computation 'f' must take 2 scalar "
                                         r"parameters \(f32\[\], f32\[\]\), got \(s32\[\], "
                                         r"s32\[\]\)"):
        si.infer_scatter([S("f32[10,5]")], S("s32[3,1]"), [S("f32[3,5]")], (1,), (0,), (0,), 1,
                         to_apply=lam(["s32", "s32"], "s32"))


# ---- sort / topk / tuples / map ------------------------------------------------------------
def test_sort_topk() -> None:
    assert same(si.infer_sort([S("f32[64,128]")], 1, lam(["f32", "f32"], "pred")),
                S("f32[64,128]"))
    cmp2 = lam(["f32", "f32", "s32", "s32"], "pred")
    assert same(si.infer_sort([S("f32[4,8]"), S("s32[4,8]")], 1, cmp2), T("f32[4,8]", "s32[4,8]"))
    with pytest.raises(ShapeError, match=r"sort: comparator computation 'f' must take 4 scalar "
                                         r"parameters \(f32\[\], f32\[\], s32\[\], s32\[\]\), got "
                                         r"\(f32\[\], f32\[\]\)"):
        si.infer_sort([S("f32[4,8]"), S("s32[4,8]")], 1, lam(["f32", "f32"], "pred"))
    with pytest.raises(ShapeError, match=r"sort: dimension 2 out of range, got f32\[4,8\]"):
        si.infer_sort([S("f32[4,8]")], 2)
    assert same(si.infer_topk(S("f32[64,128]"), 5), T("f32[64,5]", "s32[64,5]"))
    with pytest.raises(ShapeError, match=r"topk: k=9 must be within the minor dimension, got "
                                         r"f32\[4,8\]"):
        si.infer_topk(S("f32[4,8]"), 9)


def test_tuple_gte_map() -> None:
    t = si.infer_tuple([S("f32[2]"), S("s32[]")])
    assert same(t, T("f32[2]", "s32[]"))
    assert same(si.infer_get_tuple_element(t, 1), S("s32[]"))
    with pytest.raises(ShapeError, match=r"get-tuple-element: index 2 out of range, got "
                                         r"\(f32\[2\], s32\[\]\)"):
        si.infer_get_tuple_element(t, 2)
    with pytest.raises(ShapeError, match=r"get-tuple-element: operand must be a tuple, got "
                                         r"f32\[2\]"):
        si.infer_get_tuple_element(S("f32[2]"), 0)
    to_pred = lam(["f32", "f32"], "pred")
    assert same(si.infer_map([S("f32[3]"), S("f32[3]")], to_pred, (0,)), S("pred[3]"))
    with pytest.raises(ShapeError, match=r"map: dimensions \{1\} must list every operand "
                                         r"dimension, got f32\[3\]"):
        si.infer_map([S("f32[3]"), S("f32[3]")], to_pred, (1,))
    with pytest.raises(ShapeError, match=r"map: operand dimensions must match, got f32\[3\] and "
                                         r"f32\[4\]"):
        si.infer_map([S("f32[3]"), S("f32[4]")])
