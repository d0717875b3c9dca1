"""Arguments of jitted and compiled functions: `ShapeDtype` (an abstract argument), the
abstract value of each leaf, its label in error messages, and the checked conversion of a
leaf to the numpy array an executable takes. Every mismatch is an ArgumentError naming the
function, the argument and what was expected."""
from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from xlc.errors import ArgumentError
from xlc.frontend import dtypes, pytree
from xlc.frontend.staging import Aval
from xlc.hlo.shape import PrimitiveType, Shape


class ShapeDtype:
    """An abstract argument for `lower`: a shape and a dtype (numpy dtype, name or
    PrimitiveType)."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: Sequence[int], dtype: Any):
        try:
            self.shape = tuple(operator.index(d) for d in shape)
        except TypeError:
            raise ArgumentError(f"ShapeDtype: shape must be a sequence of ints, got "
                                f"{shape!r}") from None
        if any(d < 0 for d in self.shape):
            raise ArgumentError(f"ShapeDtype: dimensions must be >= 0, got {self.shape}")
        self.dtype = dtypes.to_ptype(dtype).dtype

    def __repr__(self) -> str:
        return f"ShapeDtype({self.shape}, {self.dtype})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShapeDtype) and (self.shape, self.dtype) == (other.shape,
                                                                              other.dtype)

    def __hash__(self) -> int:
        return hash((self.shape, str(self.dtype)))


def leaf_aval(x: Any, where: str, allow_abstract: bool) -> Aval:
    if isinstance(x, ShapeDtype):
        if not allow_abstract:
            raise ArgumentError(f"{where}: ShapeDtype arguments are only accepted by lower(); "
                                "pass arrays to call the function")
        return Aval(PrimitiveType.from_dtype(x.dtype), x.shape)
    dev = _device_leaf(x, where)
    if dev is not None:
        return Aval(_ptype(dev.dtype, where), dev.shape)
    if isinstance(x, (np.ndarray, np.generic)):
        return Aval(_ptype(x.dtype, where), tuple(x.shape))
    if dtypes.is_python_scalar(x):
        ptype = dtypes.python_scalar_type(x)
        if ptype.is_integer and not np.iinfo(ptype.dtype).min <= x <= np.iinfo(ptype.dtype).max:
            raise ArgumentError(f"{where}: Python int {x} does not fit in {ptype.text}, the type "
                                "of Python int arguments; pass a numpy value such as "
                                f"np.int64({x})")
        return Aval(ptype, (), not isinstance(x, bool))
    from xlc.frontend.tracer import Tracer

    if isinstance(x, Tracer):
        raise ArgumentError(f"{where}: a traced value leaked out of its trace")
    raise ArgumentError(f"{where}: unsupported argument type {type(x).__name__}; pass numpy "
                        "arrays or scalars, or mark the argument static with static_argnums")


def _ptype(dtype: Any, where: str) -> PrimitiveType:
    try:
        return PrimitiveType.from_dtype(dtype)
    except TypeError:
        raise ArgumentError(f"{where}: unsupported dtype {dtype}") from None


def _device_leaf(x: Any, where: str) -> Any:
    """`x` as an `xlc.DeviceArray` when it lives on a GPU (a DeviceArray or any object with
    `__cuda_array_interface__`), else None. Device arrays are passed to the backend as they
    are: the GPU backend uses them in place, the others copy them to the host. An
    `xlc.DeviceArray` is recognised by its class (reading its `__cuda_array_interface__` would
    wait for the call computing it)."""
    if getattr(type(x), "xlc_device_array", False):
        return x
    if not hasattr(x, "__cuda_array_interface__"):
        return None
    from xlc.backends import as_device_array

    try:
        return as_device_array(x)
    except (TypeError, KeyError, ValueError) as e:
        raise ArgumentError(f"{where}: unusable device array ({e})") from None


def leaf_labels(in_tree: pytree.TreeDef, arg_names: Sequence[str]) -> list[str]:
    """`argument 0 ('x')['w']`-style labels for the leaves of ((args...), {kwargs})."""
    arg_td, kw_td = in_tree.children
    out = []
    for i, td in enumerate(arg_td.children):
        name = arg_names[i] if i < len(arg_names) and arg_names[i] else ""
        label = f"argument {i} ('{name}')" if name else f"argument {i}"
        out += [label + p for p in pytree.leaf_paths(td)]
    for k, td in zip(kw_td.keys, kw_td.children):
        out += [f"keyword argument '{k}'" + p for p in pytree.leaf_paths(td)]
    return out


def param_names(in_tree: pytree.TreeDef, arg_names: Sequence[str]) -> list[str]:
    """HLO parameter names from argument names and pytree paths (`x`, `params_w`, `Arg_1`)."""
    arg_td, kw_td = in_tree.children
    out = []
    bases = [(arg_names[i] if i < len(arg_names) and arg_names[i] else f"Arg_{i}", td)
             for i, td in enumerate(arg_td.children)]
    bases += [(str(k), td) for k, td in zip(kw_td.keys, kw_td.children)]
    for base, td in bases:
        for p in pytree.leaf_paths(td):
            name = re.sub(r"[^A-Za-z0-9_]+", "_", base + p).strip("_")
            out.append(name if name and not name[0].isdigit() else f"Arg_{name}")
    return out


def shape_tree(shape: Shape) -> pytree.TreeDef:
    if shape.tuple_shapes is not None:
        return pytree.TreeDef("tuple", tuple(shape_tree(s) for s in shape.tuple_shapes))
    return pytree.LEAF


def convert_arg(x: Any, aval: Aval, where: str) -> np.ndarray:
    expected = aval.shape.to_text(layout=False)
    if dtypes.is_python_scalar(x):
        if aval.dims != ():
            raise ArgumentError(f"{where}: expected {expected}, got a Python scalar")
        kind = dtypes.python_scalar_type(x)
        ok = kind is aval.ptype or (kind.is_integer and (aval.ptype.is_integer
                                                         or aval.ptype.is_float)) \
            or (kind.is_float and aval.ptype.is_float)
        if not ok:
            raise ArgumentError(f"{where}: expected {expected}, got Python "
                                f"{type(x).__name__} {x!r}")
        return np.asarray(x, dtype=aval.ptype.dtype)
    if isinstance(x, ShapeDtype):
        raise ArgumentError(f"{where}: ShapeDtype arguments are only accepted by lower(); "
                            "pass arrays to call the function")
    dev = _device_leaf(x, where)
    if dev is not None:
        got = Shape.array(_ptype(dev.dtype, where), dev.shape).to_text(layout=False)
        if got != expected:
            raise ArgumentError(f"{where}: expected {expected}, got {got} (on the GPU)")
        return dev  # type: ignore[no-any-return]
    if not isinstance(x, (np.ndarray, np.generic)):
        raise ArgumentError(f"{where}: expected {expected}, got {type(x).__name__}")
    arr = np.asarray(x)
    try:
        got = Shape.array(PrimitiveType.from_dtype(arr.dtype), arr.shape).to_text(layout=False)
    except TypeError:
        raise ArgumentError(f"{where}: unsupported dtype {arr.dtype}") from None
    if got != expected:
        raise ArgumentError(f"{where}: expected {expected}, got {got}")
    return arr


_SORTED_KEYS: dict[tuple, tuple] = {}
"""Dict keys in insertion order -> in pytree (sorted) order, for `fast_signature`."""


def _sorted_dict_keys(keys: tuple) -> tuple:
    order = _SORTED_KEYS.get(keys)
    if order is None:
        order = tuple(pytree._sorted_keys(dict.fromkeys(keys)))
        if len(_SORTED_KEYS) < 4096:
            _SORTED_KEYS[keys] = order
    return order


_SCALAR_DTYPES = {bool: dtypes.python_scalar_type(True).dtype,
                  int: dtypes.DEFAULT_INT.dtype, float: dtypes.DEFAULT_FLOAT.dtype}
_INT_RANGE = (int(np.iinfo(dtypes.DEFAULT_INT.dtype).min),
              int(np.iinfo(dtypes.DEFAULT_INT.dtype).max))


def _walk(x: Any, key: list[Any], leaves: list[Any]) -> bool:
    """Append `x`'s part of a `fast_signature` key and its leaves; False for anything but
    plain numpy arrays, `xlc.DeviceArray`s and Python bools, ints (in range) and floats in
    tuples, lists, dicts and Nones."""
    t = type(x)
    if t is np.ndarray:
        key.append(x.dtype)
        key.append(x.shape)
        leaves.append(x)
        return True
    if getattr(t, "xlc_device_array", False):  # an xlc.DeviceArray: passed as it is
        key.append(t)
        key.append(x.dtype)
        key.append(x.shape)
        leaves.append(x)
        return True
    dtype = _SCALAR_DTYPES.get(t)
    if dtype is not None:  # weakly typed, converted as `convert_arg` does
        if t is int and not _INT_RANGE[0] <= x <= _INT_RANGE[1]:
            return False
        key.append(t)
        leaves.append(np.asarray(x, dtype=dtype))
        return True
    if t is tuple or t is list:
        key.append(t)
        key.append(len(x))
        return all(_walk(c, key, leaves) for c in x)
    if t is dict:
        keys = tuple(x)
        key.append(dict)
        key.append(keys)
        return all(_walk(x[k], key, leaves) for k in _sorted_dict_keys(keys))
    if x is None:
        key.append(None)
        return True
    return False


def fast_signature(args: tuple, statics: frozenset[int]) -> tuple[tuple, list] | None:
    """The per-call fast path's view of positional `args`: (key, leaves) when every dynamic
    leaf is a plain `np.ndarray`, an `xlc.DeviceArray` or a Python bool, int or float, inside
    tuples, lists, dicts and Nones, else None.

    The key holds each array leaf's dtype and shape, each scalar leaf's Python type (its
    leaf is the array `convert_arg` makes of it), the containers' kinds, lengths and dict keys
    (each item led by its own marker, so different structures never give equal keys), and
    the values of the static positions `statics` (unhashable ones make the lookup raise
    TypeError); the leaves come in `pytree.flatten` order. Two calls with equal keys have the
    same signature, so a jitted function's executable can be found without building avals,
    labels or shapes; a key seen for the first time goes through the checked path, which
    raises every error about bad arguments."""
    key: list[Any] = [len(args)]
    leaves: list[Any] = []
    for i, a in enumerate(args):
        if statics and i in statics:
            key.append(("static", a))
        elif type(a) is np.ndarray:  # the common case, inline
            key.append(a.dtype)
            key.append(a.shape)
            leaves.append(a)
        elif not _walk(a, key, leaves):
            return None
    return tuple(key), leaves


def _arg_label(i: int, arg_names: Sequence[str]) -> str:
    if i < len(arg_names) and arg_names[i]:
        return f"argument {i} ('{arg_names[i]}')"
    return f"argument {i}"


def flat_call_args(name: str, args: tuple, kwargs: dict, in_tree: pytree.TreeDef | None,
                   param_trees: Sequence[pytree.TreeDef], in_avals: Sequence[Aval],
                   arg_names: Sequence[str]) -> list[np.ndarray]:
    """The checked, converted leaves of a call of executable `name` (`convert_arg` per leaf).
    `in_tree` None: an HLO module, one argument per entry parameter (`param_trees`: nested
    tuples for tuple-shaped parameters, no keyword arguments); else the (args, kwargs) tree a
    traced function was lowered for. ArgumentError naming the argument for a wrong count,
    structure, dtype or shape."""
    if in_tree is None:
        if kwargs:
            raise ArgumentError(f"{name}: keyword arguments are not accepted by a compiled "
                                "HLO module")
        if len(args) != len(param_trees):
            raise ArgumentError(f"{name}: expected {len(param_trees)} arguments, got "
                                f"{len(args)}")
        if all(td.kind == "leaf" for td in param_trees):  # no tuple parameters
            return [convert_arg(a, av, f"{name}: {_arg_label(i, arg_names)}")
                    for i, (a, av) in enumerate(zip(args, in_avals))]
        flat: list[Any] = []
        for i, (a, td) in enumerate(zip(args, param_trees)):
            got, got_td = pytree.flatten(a)
            if got_td != td:
                raise ArgumentError(f"{name}: {_arg_label(i, arg_names)} has pytree structure "
                                    f"{got_td}, expected {td} (the parameter's tuple shape)")
            flat += got
        return [convert_arg(x, av, f"{name}: argument leaf {k}")
                for k, (x, av) in enumerate(zip(flat, in_avals))]
    arg_td, kw_td = in_tree.children
    if len(args) != len(arg_td.children):
        raise ArgumentError(f"{name}: expected {len(arg_td.children)} positional arguments, "
                            f"got {len(args)}")
    if set(kwargs) != set(kw_td.keys):
        raise ArgumentError(f"{name}: expected keyword arguments {sorted(kw_td.keys)}, got "
                            f"{sorted(kwargs)}")
    items = [(_arg_label(i, arg_names), a, td)
             for i, (a, td) in enumerate(zip(args, arg_td.children))]
    items += [(f"keyword argument '{k}'", kwargs[k], td)
              for k, td in zip(kw_td.keys, kw_td.children)]
    leaves: list[Any] = []
    for label, a, td in items:
        got, got_td = pytree.flatten(a)
        if got_td != td:
            raise ArgumentError(f"{name}: {label} has pytree structure {got_td}, expected "
                                f"{td}")
        leaves += got
    labels = leaf_labels(in_tree, arg_names)
    return [convert_arg(x, av, f"{name}: {lab}")
            for x, av, lab in zip(leaves, in_avals, labels)]
