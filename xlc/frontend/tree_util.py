"""`xlc.tree_util`: JAX's tree utilities over xlc's pytrees (tuples, lists, dicts,
namedtuples, None and registered node classes)."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from xlc.frontend.pytree import TreeDef, flatten, register_node, tree_map, unflatten

__all__ = ["tree_flatten", "tree_unflatten", "tree_leaves", "tree_structure", "tree_map",
           "register_pytree_node", "register_pytree_node_class", "TreeDef"]

T = TypeVar("T", bound=type)


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None,
                 ) -> tuple[list[Any], TreeDef]:
    """(leaves, treedef) of `tree`."""
    return flatten(tree, is_leaf)


def tree_unflatten(treedef: TreeDef, leaves: Iterable[Any]) -> Any:
    """The tree of `treedef`'s structure holding `leaves`."""
    return unflatten(treedef, leaves)


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """The leaves of `tree`, in order."""
    return flatten(tree, is_leaf)[0]


def tree_structure(tree: Any) -> TreeDef:
    """The TreeDef of `tree`."""
    return flatten(tree)[1]


def register_pytree_node(cls: type, flatten_func: Callable[[Any], tuple[Iterable[Any], Any]],
                         unflatten_func: Callable[[Any, Iterable[Any]], Any]) -> None:
    """Make `cls` a pytree node: `flatten_func(x) -> (children, aux_data)` (aux data
    hashable) and `unflatten_func(aux_data, children) -> x`."""
    register_node(cls, flatten_func, unflatten_func)


def register_pytree_node_class(cls: T) -> T:
    """Class decorator: a class with `tree_flatten(self)` and classmethod
    `tree_unflatten(aux_data, children)` becomes a pytree node."""
    register_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)  # type: ignore[attr-defined]
    return cls
