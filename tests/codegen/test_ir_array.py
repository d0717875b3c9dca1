"""`xlc.codegen.ir_array`: element reads and writes through compiled LLVM for several element
types and layouts against numpy, `physical_order` against the implementations it replaced,
and `constant_bytes`."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from llvmlite import ir

from xlc.backend_cpu import jit
from xlc.codegen import llvm_utils as lu
from xlc.codegen.ir_array import IrArray, constant_bytes
from xlc.errors import UnsupportedOpError
from xlc.hlo.evaluator_ops import from_physical, to_physical
from xlc.hlo.parser import parse_module
from xlc.hlo.shape import Layout, PrimitiveType, Shape, default_layout, physical_order

P = PrimitiveType

# (element type, dims, source minor_to_major, destination minor_to_major)
CASES = [
    (P.F32, (3, 5), (1, 0), (0, 1)),
    (P.F64, (2, 3, 4), (0, 2, 1), (2, 1, 0)),
    (P.F16, (4, 3), (0, 1), (1, 0)),
    (P.BF16, (2, 3, 5), (1, 0, 2), (0, 1, 2)),
    (P.PRED, (3, 7), (0, 1), (1, 0)),
    (P.S8, (5, 1, 3), (2, 1, 0), (0, 2, 1)),
    (P.U16, (2, 2, 2, 3), (3, 1, 0, 2), (0, 1, 2, 3)),
    (P.S32, (7,), (0,), (0,)),
    (P.U64, (3, 4), (1, 0), (0, 1)),
    (P.C64, (2, 3), (0, 1), (1, 0)),
    (P.F32, (), (), ()),
]


def _old_physical_order(shape: Shape) -> list[int]:
    """How both backends' emitters and executables computed it before `ir_array`."""
    lay = shape.layout or default_layout(shape.rank)
    return list(reversed(lay.minor_to_major))


def _random(pt: PrimitiveType, dims: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if pt is P.PRED:
        return rng.random(dims) < 0.5
    if pt.is_complex:
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(pt.dtype)
    if pt.is_float:
        return rng.standard_normal(dims).astype(pt.dtype)
    info = np.iinfo(pt.dtype)
    return rng.integers(info.min, info.max, size=dims, dtype=pt.dtype, endpoint=True)


def _emit_copies(module: ir.Module, name: str, src: Shape, dst: Shape) -> None:
    """`name_nest(dst, src)`: a loop nest over logical indices reading `src` and writing `dst`;
    `name_linear(dst, src)`: a loop over `src`'s physical elements, through `multi_index`."""
    fnty = ir.FunctionType(lu.VOID, [lu.PTR, lu.PTR])
    nest = ir.Function(module, fnty, name=f"{name}_nest")
    b = ir.IRBuilder(nest.append_basic_block("entry"))
    out, inp = IrArray(nest.args[0], dst), IrArray(nest.args[1], src)
    with lu.for_nest(b, list(src.dims)) as idx:
        out.write(b, inp.read(b, idx), idx)
    b.ret_void()

    linear = ir.Function(module, fnty, name=f"{name}_linear")
    b = ir.IRBuilder(linear.append_basic_block("entry"))
    out, inp = IrArray(linear.args[0], dst), IrArray(linear.args[1], src)
    with lu.for_range(b, max(1, src.num_elements)) as i:
        idx = inp.multi_index(b, i)
        if src.rank:
            assert inp.linear_offset(b, idx) is i  # the IrIndex keeps its offset
        out.write(b, inp.read(b, idx), idx)
    b.ret_void()


@pytest.fixture(scope="module")
def copies() -> dict[int, tuple[str, Shape, Shape]]:
    name = lu.unique_symbol("ir_array_copy")
    module = lu.new_module(name)
    made = {}
    for k, (pt, dims, m2m_src, m2m_dst) in enumerate(CASES):
        src = Shape.array(pt, dims, m2m_src)
        dst = Shape.array(pt, dims, m2m_dst)
        _emit_copies(module, f"{name}_{k}", src, dst)
        made[k] = (f"{name}_{k}", src, dst)
    jit.compile_module(module, name, opt_level=2)
    return made


@pytest.mark.parametrize("k", range(len(CASES)),
                         ids=[f"{c[0].text}{list(c[1])}" for c in CASES])
@pytest.mark.parametrize("variant", ["nest", "linear"])
def test_read_write_round_trip(copies, k: int, variant: str) -> None:
    sym, src, dst = copies[k]
    pt = src.element_type
    assert pt is not None
    x = _random(pt, src.dims, np.random.default_rng(k))
    src_buf = np.ascontiguousarray(to_physical(x, src.layout).astype(pt.dtype))
    dst_buf = np.zeros(max(1, dst.num_elements), dtype=pt.dtype)
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(
        jit.jit_engine().address(f"{sym}_{variant}"))
    fn(dst_buf.ctypes.data, src_buf.ctypes.data)
    np.testing.assert_array_equal(dst_buf.view(np.uint8),
                                  to_physical(x, dst.layout).astype(pt.dtype).view(np.uint8))
    np.testing.assert_array_equal(from_physical(dst_buf, dst), x)


def test_storage_conventions() -> None:
    """pred is i1 in registers and a byte in memory; f16 is half; bf16 its raw i16 bits."""
    ptr = ir.Constant(lu.PTR, None)
    pred = IrArray(ptr, Shape.array(P.PRED, (2,)))
    assert (pred.value_type, pred.storage_type) == (lu.I1, lu.I8)
    assert IrArray(ptr, Shape.array(P.F16, (2,))).value_type == lu.F16
    bf16 = IrArray(ptr, Shape.array(P.BF16, (2,)))
    assert (bf16.value_type, bf16.storage_type) == (lu.I16, lu.I16)
    with pytest.raises(UnsupportedOpError, match="t needs an array shape"):
        IrArray(ptr, Shape.tuple_of([Shape.array(P.F32, (2,))]), "t")


LAYOUTS = [(), (0,), (1, 0), (0, 1), (2, 1, 0), (0, 1, 2), (1, 2, 0), (2, 0, 1),
           (3, 2, 1, 0), (0, 3, 1, 2)]


@pytest.mark.parametrize("m2m", LAYOUTS, ids=[str(list(m)) for m in LAYOUTS])
def test_physical_order_matches_the_old_implementations(m2m: tuple[int, ...]) -> None:
    """The one physical_order (xlc/hlo/shape.py) against the old formula and every user."""
    from xlc.backend_cpu.executable import _physical_perm
    from xlc.backend_gpu.executable import physical_perm
    from xlc.hlo.shape import layout_order

    dims = tuple(range(2, 2 + len(m2m)))
    for shape in (Shape.array(P.F32, dims, m2m), Shape(P.F32, dims, None)):
        order = physical_order(shape)
        assert order == _old_physical_order(shape)
        assert order == layout_order(shape.layout, shape.rank)  # the evaluator's form
        row_major = order == list(range(shape.rank))
        assert _physical_perm(shape) == (None if row_major else order)
        assert physical_perm(shape) == (None if row_major else tuple(order))
    assert physical_order(Shape.array(P.F32, dims, Layout(m2m, "T(8,128)"))) == \
        list(reversed(m2m))


def _constant(text: str):
    module = parse_module(f"HloModule m\nENTRY e {{\n  ROOT c = {text}\n}}\n")
    root = module.entry.root
    assert root is not None
    return root


def test_constant_bytes_are_physical() -> None:
    c = _constant("f32[2,3]{0,1} constant({ { 1, 2, 3 }, { 4, 5, 6 } })")
    want = np.array([[1, 2, 3], [4, 5, 6]], np.float32).T.copy().tobytes()
    assert constant_bytes(c) == want
    c = _constant("f32[2,3]{1,0} constant({ { 1, 2, 3 }, { 4, 5, 6 } })")
    assert constant_bytes(c) == np.arange(1, 7, dtype=np.float32).tobytes()
    c = _constant("pred[3] constant({true, false, true})")
    assert constant_bytes(c) == b"\x01\x00\x01"
    c = _constant("bf16[2] constant({1, -2})")
    assert constant_bytes(c) == np.array([1, -2], P.BF16.dtype).tobytes()
    assert len(constant_bytes(c)) == 4


def test_constant_bytes_of_an_elided_literal_is_an_error() -> None:
    c = _constant("f32[2,3] constant({...})")
    with pytest.raises(UnsupportedOpError, match="constant c has no value"):
        constant_bytes(c)
