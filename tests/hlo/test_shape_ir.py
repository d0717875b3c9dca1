"""xlc.hlo.shape (PrimitiveType, Shape, Layout, ShapeIndex, byte sizes) and xlc.hlo.ir (users,
post order, clone, replace-uses) as unit tests."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from xlc.hlo.ir import HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module, parse_shape
from xlc.hlo.printer import print_module
from xlc.hlo.shape import POINTER_SIZE, Layout, PrimitiveType, Shape, array_shape_of
from xlc.hlo.verifier import verify_module

TYPES = [("pred", np.bool_, 1), ("s8", np.int8, 1), ("s16", np.int16, 2), ("s32", np.int32, 4),
         ("s64", np.int64, 8), ("u8", np.uint8, 1), ("u16", np.uint16, 2), ("u32", np.uint32, 4),
         ("u64", np.uint64, 8), ("f16", np.float16, 2), ("bf16", ml_dtypes.bfloat16, 2),
         ("f32", np.float32, 4), ("f64", np.float64, 8)]


@pytest.mark.parametrize("text, dtype, size", TYPES, ids=[t[0] for t in TYPES])
def test_primitive_types(text: str, dtype: type, size: int) -> None:
    pt = PrimitiveType.from_text(text)
    assert pt.text == text and pt.dtype == np.dtype(dtype) and pt.byte_size == size
    assert PrimitiveType.from_dtype(dtype) is pt
    assert pt.is_integer == (text[0] in "su") and pt.is_float == (text[0] in "fb")
    assert pt.is_signed_int == (text[0] == "s") and pt.is_unsigned_int == (text[0] == "u")
    assert pt.bit_width == (1 if text == "pred" else 8 * size)


def test_array_shapes_layouts_and_byte_sizes() -> None:
    s = Shape.array("f32", (2, 3, 4))
    assert s.layout == Layout((2, 1, 0)) and str(s) == "f32[2,3,4]{2,1,0}"
    assert s.byte_size() == 96 and s.num_elements == 24 and s.rank == 3
    t = Shape.array(PrimitiveType.BF16, (8, 16), layout=(0, 1))
    assert t.to_text() == "bf16[8,16]{0,1}" and t.to_text(layout=False) == "bf16[8,16]"
    assert t.compatible(Shape.array("bf16", (8, 16))) and t != Shape.array("bf16", (8, 16))
    assert Shape.array("s8", ()).is_scalar and Shape.array("s8", ()).byte_size() == 1
    assert Shape.array("f32", (0, 5)).byte_size() == 0
    assert array_shape_of(np.zeros((2, 5), np.uint16)) == Shape.array("u16", (2, 5))
    tiled = parse_shape("f32[8,128]{1,0:T(8,128)S(1)}")
    assert tiled.layout is not None and tiled.layout.tail == "T(8,128)S(1)"
    assert tiled.layout.memory_space == 1 and str(tiled) == "f32[8,128]{1,0:T(8,128)S(1)}"


def test_tuple_shapes_shape_index_and_pointer_tables() -> None:
    inner = Shape.tuple_of([Shape.array("s32", ()), Shape.array("f16", (4,))])
    t = Shape.tuple_of([Shape.array("f32", (2, 2)), inner, Shape.token()])
    assert t.to_text(layout=False) == "(f32[2,2], (s32[], f16[4]), token[])"
    assert t.byte_size() == 3 * POINTER_SIZE and inner.byte_size(pointer_size=4) == 8
    assert t.subshape((1, 1)) == Shape.array("f16", (4,)) and t.subshape(()) is t
    assert [idx for idx, _ in t.subshapes()] == [(), (0,), (1,), (1, 0), (1, 1), (2,)]
    assert [idx for idx, _ in t.leaves()] == [(0,), (1, 0), (1, 1), (2,)]
    assert not t.compatible(inner) and t.compatible(parse_shape(t.to_text()))
    with pytest.raises(AssertionError, match=r"non-tuple shape"):
        t.subshape((0, 0))


def _chain() -> tuple[HloModule, list[HloInstruction]]:
    m = HloModule("m")
    c = m.new_computation("main", entry=True)
    f4 = Shape.array("f32", (4,))
    p = c.add_parameter(0, f4, name="p")
    a = c.add(Opcode.NEGATE, f4, [p])
    b = c.add(Opcode.ADD, f4, [a, p])
    r = c.add(Opcode.MULTIPLY, f4, [b, b])
    c.set_root(r)
    return m, [p, a, b, r]


def test_users_names_and_post_order() -> None:
    m, (p, a, b, r) = _chain()
    assert p.users == [a, b] and a.users == [b] and b.users == [r] and r.is_root
    assert [i.name for i in m.entry.instructions] == ["p", "negate", "add", "multiply"]
    assert m.unique_name("add") == "add.1" and m.unique_name("add.1") == "add.2"
    c = m.entry
    c.instructions.reverse()  # post_order does not depend on the list order being valid
    order = c.post_order()
    assert order.index(p) < order.index(a) < order.index(b) < order.index(r)
    c.sort_post_order()
    assert c.instructions[0] is p and c.instructions[-1] is r
    verify_module(m)


def test_replace_all_uses_and_remove() -> None:
    m, (p, a, b, r) = _chain()
    c = m.entry
    f4 = Shape.array("f32", (4,))
    e = c.add(Opcode.EXP, f4, [p])
    a.replace_all_uses_with(e)
    assert b.operands == (e, p) and a.users == [] and e.users == [b]
    c.remove_instruction(a)
    assert a.parent is None and a not in p.users and a not in c.instructions
    with pytest.raises(AssertionError, match=r"cannot remove add: it still has users"):
        c.remove_instruction(b)
    new_root = c.add(Opcode.COPY, f4, [b])
    r.replace_all_uses_with(new_root)  # the root slot moves too
    assert c.root is new_root
    c.remove_instruction(r)
    assert b.users == [new_root]
    verify_module(m)


def test_control_predecessors_are_ordered_and_replaced() -> None:
    m, (p, a, b, r) = _chain()
    c = m.entry
    f4 = Shape.array("f32", (4,))
    side = c.add(Opcode.COPY, f4, [p])
    a.add_control_predecessor(side)
    order = c.post_order()
    assert order.index(side) < order.index(a)
    other = c.add(Opcode.ABS, f4, [p])
    assert side.control_successors == [a]
    side.replace_all_uses_with(other)
    assert a.control_predecessors == (other,)
    assert side.control_successors == [] and other.control_successors == [a]
    a.drop_control_dependencies()
    assert a.control_predecessors == () and other.control_successors == []
    # removing a control predecessor drops the edge from its successors
    a.add_control_predecessor(other)
    c.remove_instruction(other)
    assert a.control_predecessors == ()


def test_clone_with_and_replace_instruction() -> None:
    m, (p, a, b, r) = _chain()
    c = m.entry
    twin = b.clone_with(operands=[p, p], name="add_pp")
    assert twin.parent is None and twin.users == [] and twin.operands == (p, p)
    assert twin.opcode is b.opcode and twin.shape == b.shape and twin.attrs == b.attrs
    c.replace_instruction(b, twin)
    assert r.operands == (twin, twin) and b.parent is None and twin.parent is c
    # `a` is now dead but stays (removing dead code is DCE's job)
    assert a in c.instructions and a.users == []
    verify_module(m)


def test_module_clone_is_deep_and_prints_identically() -> None:
    text = """HloModule m

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY main {
  a = f32[4,8]{0,1} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4]{0} reduce(a, z), dimensions={1}, to_apply=add
}
"""
    m = parse_module(text)
    c = m.clone("copy")
    assert c.name == "copy" and print_module(c).replace("copy", "m", 1) == print_module(m)
    assert all(x is not y for x, y in zip(c.instructions(), m.instructions()))
    assert c.entry is not None and c.entry.root is not None
    assert c.entry.root.called[0] is c.computation("add")
    assert c.entry.root.called[0] is not m.computation("add")
