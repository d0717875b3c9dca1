"""Pytrees a JAX user brings: namedtuples and registered node classes through `xlc.jit`,
`xlc.tree_util` (flatten/unflatten/leaves/structure/map/register), `xlc.block_until_ready`,
`xlc.numpy.finfo/iinfo`."""
from __future__ import annotations

import collections

import numpy as np
import pytest
import xlc.lax
import xlc.numpy as xnp

import xlc
from xlc import tree_util

Params = collections.namedtuple("Params", "w b")


@tree_util.register_pytree_node_class
class Scaled:
    def __init__(self, value: object, scale: float) -> None:
        self.value, self.scale = value, scale

    def tree_flatten(self) -> tuple[tuple[object], float]:
        return (self.value,), self.scale

    @classmethod
    def tree_unflatten(cls, scale: float, children: list) -> Scaled:
        return cls(children[0], scale)


class Pair:
    def __init__(self, a: object, b: object) -> None:
        self.a, self.b = a, b


tree_util.register_pytree_node(Pair, lambda p: ((p.a, p.b), None),
                               lambda aux, ch: Pair(*ch))


def test_namedtuples_and_registered_nodes_through_jit() -> None:
    def step(p: Params, s: Scaled, q: Pair) -> tuple:
        return Params(p.w * s.scale, p.b + 1), Scaled(s.value * 2, s.scale), Pair(q.b, q.a)

    w, b = np.ones((2, 2), np.float32), np.zeros(2, np.float32)
    out_p, out_s, out_q = xlc.jit(step)(Params(w, b), Scaled(np.arange(3.0), 0.5),
                                        Pair(np.float32(1), np.float32(2)))
    assert isinstance(out_p, Params) and isinstance(out_s, Scaled) and isinstance(out_q, Pair)
    np.testing.assert_array_equal(out_p.w, w * 0.5)
    np.testing.assert_array_equal(out_s.value, np.arange(3.0) * 2)
    assert out_s.scale == 0.5 and out_q.a == 2 and out_q.b == 1


def test_namedtuple_carry_in_a_loop() -> None:
    def body(i: object, p: Params) -> Params:
        return Params(p.w + 1.0, p.b * 2.0)

    out = xlc.jit(lambda p: xlc.lax.fori_loop(0, 3, body, p))(Params(np.float32(0),
                                                                      np.float32(1)))
    assert isinstance(out, Params) and out.w == 3.0 and out.b == 8.0


def test_tree_util_functions() -> None:
    tree = {"p": Params(1, [2, 3]), "s": Scaled(4, 9.0), "n": None}
    leaves, td = tree_util.tree_flatten(tree)
    assert leaves == [1, 2, 3, 4]
    assert str(td) == "{'n': None, 'p': Params(w=*, b=[*, *]), 's': Scaled[*]}"
    again = tree_util.tree_unflatten(td, [10, 20, 30, 40])
    assert again["p"] == Params(10, [20, 30]) and again["s"].value == 40
    assert again["s"].scale == 9.0 and again["n"] is None
    assert tree_util.tree_leaves(tree_util.tree_map(lambda x: x * 2, tree)) == [2, 4, 6, 8]
    assert tree_util.tree_structure(tree) == td


def test_block_until_ready_returns_its_argument() -> None:
    out = xlc.jit(lambda x: {"y": x + 1})(np.ones(3))
    assert xlc.block_until_ready(out) is out


def test_finfo_iinfo() -> None:
    assert xnp.finfo(np.float32).eps == np.finfo(np.float32).eps
    assert float(xnp.finfo("bfloat16").eps) == 2 ** -7
    assert xnp.iinfo("int8").min == -128 and xnp.iinfo(np.uint16).max == 65535
    got = xlc.jit(lambda x: x * xnp.finfo(x.dtype).eps)(np.ones(2, np.float32))
    np.testing.assert_array_equal(got, np.full(2, np.finfo(np.float32).eps, np.float32))
    with pytest.raises(ValueError):
        xnp.iinfo(np.float32)
