"""Pytrees: nested tuples, lists, dicts (sorted keys), namedtuples and registered node types
(`register_node`, JAX's `register_pytree_node`) with array leaves.

`None` is an empty subtree (no leaves), as in JAX. So is a `float0` array (JAX's dtype of the
zero cotangents of integer inputs, `FLOAT0` below): it holds no data, so it is a node that
remembers its shape and never reaches a traced program or an executable's arguments. A
`TreeDef` is hashable and printable, so it can be part of a cache key and of error messages (a
registered node's auxiliary data must be hashable, as in JAX).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

# JAX's jax.dtypes.float0: a zero-size element type (the tangent/cotangent type of integer and
# boolean values); numpy arrays of it carry only a shape
FLOAT0 = np.dtype([("float0", np.void, 0)])


@dataclass(frozen=True, slots=True)
class TreeDef:
    """The structure of a pytree: kind in {"leaf", "none", "float0", "tuple", "list", "dict",
    "namedtuple", "custom"}, the dict keys (sorted; a float0 array's shape) and the children's
    TreeDefs."""

    kind: str
    children: tuple[TreeDef, ...] = ()
    keys: tuple[Any, ...] = ()
    node: Any = None  # the namedtuple class, or (registered class, aux data)

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __str__(self) -> str:
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        if self.kind == "float0":
            return f"float0{list(self.keys)}"
        if self.kind == "tuple":
            inner = ", ".join(str(c) for c in self.children)
            return f"({inner},)" if len(self.children) == 1 else f"({inner})"
        if self.kind == "list":
            return "[" + ", ".join(str(c) for c in self.children) + "]"
        if self.kind == "namedtuple":
            return f"{self.node.__name__}(" + ", ".join(
                f"{k}={c}" for k, c in zip(self.keys, self.children)) + ")"
        if self.kind == "custom":
            return f"{self.node[0].__name__}[" + ", ".join(str(c) for c in self.children) + "]"
        return "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(self.keys, self.children)) + "}"


LEAF = TreeDef("leaf")

_NODES: dict[type, tuple[Callable[[Any], tuple[Iterable[Any], Any]],
                         Callable[[Any, Iterable[Any]], Any]]] = {}


def register_node(cls: type, flatten_fn: Callable[[Any], tuple[Iterable[Any], Any]],
                  unflatten_fn: Callable[[Any, Iterable[Any]], Any]) -> None:
    """Make instances of `cls` pytree nodes: `flatten_fn(x) -> (children, aux)` and
    `unflatten_fn(aux, children) -> x` (JAX's register_pytree_node)."""
    _NODES[cls] = (flatten_fn, unflatten_fn)


def _sorted_keys(d: dict) -> list:
    try:
        return sorted(d)
    except TypeError:
        return sorted(d, key=repr)


def flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list[Any], TreeDef]:
    """Leaves in order (tuples/lists left to right, dicts by sorted key) and the TreeDef."""
    leaves: list[Any] = []

    def go(x: Any) -> TreeDef:
        if is_leaf is not None and is_leaf(x):
            leaves.append(x)
            return LEAF
        if x is None:
            return TreeDef("none")
        if isinstance(x, np.ndarray) and x.dtype == FLOAT0:
            return TreeDef("float0", keys=tuple(int(d) for d in x.shape))
        node = _NODES.get(type(x))
        if node is not None:
            children, aux = node[0](x)
            return TreeDef("custom", tuple(go(c) for c in children), node=(type(x), aux))
        if isinstance(x, tuple) and hasattr(x, "_fields"):
            return TreeDef("namedtuple", tuple(go(c) for c in x), tuple(x._fields),
                           node=type(x))
        if isinstance(x, tuple):
            return TreeDef("tuple", tuple(go(c) for c in x))
        if isinstance(x, list):
            return TreeDef("list", tuple(go(c) for c in x))
        if isinstance(x, dict):
            keys = _sorted_keys(x)
            return TreeDef("dict", tuple(go(x[k]) for k in keys), tuple(keys))
        leaves.append(x)
        return LEAF

    return leaves, go(tree)


def unflatten(treedef: TreeDef, leaves: Iterable[Any]) -> Any:
    """Rebuild a pytree of `treedef`'s structure from leaves (inverse of `flatten`)."""
    it = iter(leaves)

    def go(td: TreeDef) -> Any:
        if td.kind == "leaf":
            return next(it)
        if td.kind == "none":
            return None
        if td.kind == "float0":
            return np.zeros(td.keys, FLOAT0)
        kids = [go(c) for c in td.children]
        if td.kind == "tuple":
            return tuple(kids)
        if td.kind == "namedtuple":
            return td.node(*kids)
        if td.kind == "custom":
            cls, aux = td.node
            return _NODES[cls][1](aux, kids)
        if td.kind == "list":
            return kids
        return dict(zip(td.keys, kids))

    out = go(treedef)
    rest = list(it)
    assert not rest, f"unflatten: {len(rest)} leaves too many for {treedef}"
    return out


def leaf_paths(treedef: TreeDef, prefix: str = "") -> list[str]:
    """A readable path for every leaf (`[0]`, `['w']`, `[1][2]`), in leaf order."""
    if treedef.kind == "leaf":
        return [prefix]
    if treedef.kind in ("none", "float0"):
        return []
    out: list[str] = []
    if treedef.kind == "dict":
        for k, c in zip(treedef.keys, treedef.children):
            out += leaf_paths(c, f"{prefix}[{k!r}]")
    elif treedef.kind == "namedtuple":
        for k, c in zip(treedef.keys, treedef.children):
            out += leaf_paths(c, f"{prefix}.{k}")
    else:
        for i, c in enumerate(treedef.children):
            out += leaf_paths(c, f"{prefix}[{i}]")
    return out


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """Apply `fn` leaf-wise to trees of the same structure."""
    leaves, td = flatten(tree)
    others = [flatten(r)[0] for r in rest]
    return unflatten(td, [fn(x, *ys) for x, *ys in zip(leaves, *others)])
