"""matmul / dot / einsum / outer / inner / tensordot for `xlc.numpy`, all lowered to HLO `dot`
(dot_general) plus reshapes/transposes/broadcasts. Batch dims of matmul broadcast like numpy."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xlc.frontend import lax as _lax
from xlc.frontend.eager import eager_ok
from xlc.frontend.tracer import Tracer, trace_error

__all__ = ["matmul", "dot", "einsum", "outer", "inner", "tensordot", "vdot"]


def _check_contract(op: str, a: Tracer, b: Tracer, da: int, db: int) -> None:
    if a.shape[da] != b.shape[db]:
        raise trace_error(f"{op}: contracting dimensions do not match: {a.aval_text} "
                          f"(dim {da}, size {a.shape[da]}) and {b.aval_text} "
                          f"(dim {db}, size {b.shape[db]})")


@eager_ok
def matmul(a: Any, b: Any, precision: Any = None) -> Tracer:
    """numpy.matmul / `@`: 1-D operands are promoted to matrices and the extra dim removed;
    leading (batch) dims broadcast. `precision` as in `lax.dot_general`."""
    from xlc.frontend.numpy_api import broadcast_shapes, promote
    from xlc.frontend.numpy_shape import broadcast_to, reshape

    x, y = promote(a, b)
    if x.ndim == 0 or y.ndim == 0:
        raise trace_error(f"matmul: operands must not be scalars, got {x.aval_text} and "
                          f"{y.aval_text}")
    if x.ndim == 1 and y.ndim == 1:
        _check_contract("matmul", x, y, 0, 0)
        return _lax.dot_general(x, y, (((0,), (0,)), ((), ())), precision)
    if x.ndim == 1:
        return reshape(matmul(reshape(x, (1, -1)), y, precision),
                       y.shape[:-2] + (y.shape[-1],))
    if y.ndim == 1:
        _check_contract("matmul", x, y, x.ndim - 1, 0)
        return _lax.dot_general(x, y, (((x.ndim - 1,), (0,)), ((), ())), precision)
    _check_contract("matmul", x, y, x.ndim - 1, y.ndim - 2)
    if y.ndim == 2:
        # [..., m, k] @ [k, n]: one dot contracting k, no batch dims, as JAX emits it - the
        # matrix is not broadcast (copied) over the leading dims
        return _lax.dot_general(x, y, (((x.ndim - 1,), (0,)), ((), ())), precision)
    try:
        batch = broadcast_shapes(x.shape[:-2], y.shape[:-2], op="matmul")
    except Exception:
        raise trace_error(f"matmul: batch dimensions cannot be broadcast together: "
                          f"{x.aval_text} and {y.aval_text}") from None
    x = broadcast_to(x, batch + x.shape[-2:])
    y = broadcast_to(y, batch + y.shape[-2:])
    nb = len(batch)
    bd = tuple(range(nb))
    return _lax.dot_general(x, y, (((nb + 1,), (nb,)), (bd, bd)), precision)


@eager_ok
def dot(a: Any, b: Any, precision: Any = None) -> Tracer:
    """numpy.dot: inner product of 1-D arrays, matrix product of 2-D, and for N-D a sum over
    the last axis of `a` and the second-to-last of `b`."""
    from xlc.frontend.numpy_api import multiply, promote

    x, y = promote(a, b)
    if x.ndim == 0 or y.ndim == 0:
        return multiply(x, y)
    db = 0 if y.ndim == 1 else y.ndim - 2
    _check_contract("dot", x, y, x.ndim - 1, db)
    return _lax.dot_general(x, y, (((x.ndim - 1,), (db,)), ((), ())), precision)


@eager_ok
def vdot(a: Any, b: Any, precision: Any = None) -> Tracer:
    """Dot product of the flattened inputs."""
    from xlc.frontend.numpy_shape import ravel

    return dot(ravel(a), ravel(b), precision)


@eager_ok
def inner(a: Any, b: Any, precision: Any = None) -> Tracer:
    """Sum product over the last axes."""
    from xlc.frontend.numpy_api import multiply, promote

    x, y = promote(a, b)
    if x.ndim == 0 or y.ndim == 0:
        return multiply(x, y)
    _check_contract("inner", x, y, x.ndim - 1, y.ndim - 1)
    return _lax.dot_general(x, y, (((x.ndim - 1,), (y.ndim - 1,)), ((), ())), precision)


@eager_ok
def outer(a: Any, b: Any) -> Tracer:
    """Outer product of the flattened inputs."""
    from xlc.frontend.numpy_api import multiply
    from xlc.frontend.numpy_shape import ravel, reshape

    return multiply(reshape(ravel(a), (-1, 1)), reshape(ravel(b), (1, -1)))


@eager_ok
def tensordot(a: Any, b: Any, axes: int | Sequence[Sequence[int]] = 2,
              precision: Any = None) -> Tracer:
    """Sum products over the given axes (an int n = last n of a with first n of b)."""
    from xlc.frontend.numpy_api import promote

    x, y = promote(a, b)
    if isinstance(axes, int):
        ax_a = tuple(range(x.ndim - axes, x.ndim))
        ax_b = tuple(range(axes))
    else:
        ax_a = tuple(int(i) % x.ndim for i in axes[0])
        ax_b = tuple(int(i) % y.ndim for i in axes[1])
    for i, j in zip(ax_a, ax_b):
        _check_contract("tensordot", x, y, i, j)
    return _lax.dot_general(x, y, ((ax_a, ax_b), ((), ())), precision)


def _parse_einsum(spec: str, n_ops: int) -> tuple[list[str], str]:
    spec = spec.replace(" ", "")
    if "." in spec:
        raise trace_error(f"einsum: ellipsis ('...') is not supported, got {spec!r}")
    if "->" in spec:
        ins, out = spec.split("->")
    else:
        ins = spec
        letters = ins.replace(",", "")
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    terms = ins.split(",")
    if len(terms) != n_ops:
        raise trace_error(f"einsum: {spec!r} names {len(terms)} operands but {n_ops} were "
                          "given")
    return terms, out


def _sum_out(x: Tracer, term: str, keep: set[str]) -> tuple[Tracer, str]:
    from xlc.frontend.numpy_reductions import sum as _sum

    if len(set(term)) != len(term):
        raise trace_error(f"einsum: repeated index in one operand ({term!r}, a diagonal) is "
                          "not supported")
    drop = [i for i, c in enumerate(term) if c not in keep]
    if drop:
        x = _sum(x, axis=tuple(drop))
        term = "".join(c for c in term if c in keep)
    return x, term


@eager_ok
def einsum(subscripts: str, *operands: Any, precision: Any = None) -> Tracer:
    """Einstein summation for one or two operands (`ij,jk->ik`, `bij,bjk->bik`, `ij->ji`,
    `i,i->`, `bhqd,bhkd->bhqk`, ...), lowered to one dot_general plus transposes (with
    `precision`, as in `lax.dot_general`)."""
    from xlc.frontend.numpy_api import promote
    from xlc.frontend.numpy_shape import transpose

    if len(operands) not in (1, 2):
        raise trace_error(f"einsum: only one or two operands are supported, got "
                          f"{len(operands)}")
    terms, out = _parse_einsum(subscripts, len(operands))
    xs = promote(*operands)
    for x, t in zip(xs, terms):
        if len(t) != x.ndim:
            raise trace_error(f"einsum: operand {x.aval_text} has rank {x.ndim} but its "
                              f"subscripts {t!r} name {len(t)} dims")
    if len(xs) == 1:
        x, t = _sum_out(xs[0], terms[0], set(out))
        return transpose(x, [t.index(c) for c in out])
    (a, b), (ta, tb) = xs, terms
    a, ta = _sum_out(a, ta, set(out) | set(tb))
    b, tb = _sum_out(b, tb, set(out) | set(ta))
    batch = [c for c in ta if c in tb and c in out]
    contract = [c for c in ta if c in tb and c not in out]
    for c in batch + contract:
        if a.shape[ta.index(c)] != b.shape[tb.index(c)]:
            raise trace_error(f"einsum: size of index {c!r} differs: {a.aval_text} "
                              f"({ta}) vs {b.aval_text} ({tb})")
    dn = ((tuple(ta.index(c) for c in contract), tuple(tb.index(c) for c in contract)),
          (tuple(ta.index(c) for c in batch), tuple(tb.index(c) for c in batch)))
    r = _lax.dot_general(a, b, dn, precision)
    got = batch + [c for c in ta if c not in batch and c not in contract] + \
        [c for c in tb if c not in batch and c not in contract]
    missing = [c for c in out if c not in got]
    if missing:
        raise trace_error(f"einsum: output index {missing[0]!r} does not appear in the inputs")
    return transpose(r, [got.index(c) for c in out])
