"""Small IR builders for the memory tests (dataflow, ordering, heap, buffer assignment).

They build modules through the IR API directly, so the memory tests do not depend on the parser.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from xlc.hlo.attrs import Literal
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Shape


def f32(*dims: int) -> Shape:
    return Shape.array("f32", dims)


def s32(*dims: int) -> Shape:
    return Shape.array("s32", dims)


def pred() -> Shape:
    return Shape.array("pred", ())


def tup(*shapes: Shape) -> Shape:
    return Shape.tuple_of(list(shapes))


def new_module(name: str = "m") -> tuple[HloModule, HloComputation]:
    m = HloModule(name)
    entry = m.new_computation("main", entry=True)
    return m, entry


def const(comp: HloComputation, value: float | int | np.ndarray, shape: Shape,
          name: str = "c") -> HloInstruction:
    arr = np.asarray(value, dtype=shape.dtype).reshape(shape.dims)
    return comp.add(Opcode.CONSTANT, shape, (), {"literal": Literal(arr)}, name=name)


def gte(comp: HloComputation, t: HloInstruction, i: int, name: str = "") -> HloInstruction:
    assert t.shape.tuple_shapes is not None
    return comp.add(Opcode.GET_TUPLE_ELEMENT, t.shape.tuple_shapes[i], (t,), {"index": i},
                    name=name or f"gte{i}")


def tuple_(comp: HloComputation, ops: Sequence[HloInstruction], name: str = "tuple"
           ) -> HloInstruction:
    return comp.add(Opcode.TUPLE, tup(*(o.shape for o in ops)), ops, name=name)


def add_fn(m: HloModule, name: str = "add_f32") -> HloComputation:
    """A scalar add computation (reduce's to_apply)."""
    c = m.new_computation(name)
    a = c.add_parameter(0, f32())
    b = c.add_parameter(1, f32())
    c.set_root(c.add(Opcode.ADD, f32(), (a, b), name="sum"))
    return c


def classic(name: str = "classic", size: int = 4
            ) -> tuple[HloModule, dict[str, HloInstruction]]:
    """param -> negate, param -> exp, add(negate, exp) (XLA's OverlappedBuffers example), all
    f32[size]."""
    m, e = new_module(name)
    p = e.add_parameter(0, f32(size), "param")
    neg = e.add(Opcode.NEGATE, f32(size), (p,), name="negate")
    ex = e.add(Opcode.EXP, f32(size), (p,), name="exp")
    add = e.add(Opcode.ADD, f32(size), (neg, ex), name="add")
    e.set_root(add)
    return m, {"param": p, "negate": neg, "exp": ex, "add": add}


def counting_while(n: int = 5, size: int = 4, name: str = "loop"
                   ) -> tuple[HloModule, dict[str, HloInstruction]]:
    """while (i < n) { i += 1; x = x * 2 } over a tuple (s32[], f32[size]); returns x."""
    m = HloModule(name)
    st = tup(s32(), f32(size))
    cond = m.new_computation("cond")
    cp = cond.add_parameter(0, st, "cp")
    ci = gte(cond, cp, 0, "ci")
    lim = const(cond, n, s32(), "limit")
    cond.set_root(cond.add(Opcode.COMPARE, pred(), (ci, lim), {"direction": "LT"}, name="lt"))
    body = m.new_computation("body")
    bp = body.add_parameter(0, st, "bp")
    bi = gte(body, bp, 0, "bi")
    bx = gte(body, bp, 1, "bx")
    one = const(body, 1, s32(), "one")
    two = const(body, 2.0, f32(), "two")
    inc = body.add(Opcode.ADD, s32(), (bi, one), name="inc")
    two_b = body.add(Opcode.BROADCAST, f32(size), (two,), {"dimensions": ()}, name="two_b")
    mul = body.add(Opcode.MULTIPLY, f32(size), (bx, two_b), name="mul")
    broot = tuple_(body, [inc, mul], "body_root")
    body.set_root(broot)
    e = m.new_computation("main", entry=True)
    x = e.add_parameter(0, f32(size), "x")
    zero = const(e, 0, s32(), "zero")
    xn = e.add(Opcode.NEGATE, f32(size), (x,), name="xn")
    init = tuple_(e, [zero, xn], "init")
    w = e.add(Opcode.WHILE, st, (init,), called=(cond, body), name="while")
    out = gte(e, w, 1, "result")
    e.set_root(out)
    return m, {"x": x, "zero": zero, "xn": xn, "init": init, "while": w, "result": out,
               "bp": bp, "bx": bx, "mul": mul, "inc": inc, "body_root": broot, "cp": cp,
               "two_b": two_b}


def post_order_schedule(m: HloModule) -> dict[HloComputation, list[HloInstruction]]:
    """Post order of every non-fusion computation (a valid schedule)."""
    return {c: c.post_order() for c in m.computations if not c.is_fusion_computation}
