"""More `jax.lax` control flow and utilities, re-exported by `xlc.lax`: `associative_scan`,
`map`, `custom_root`, `custom_linear_solve`, `optimization_barrier`, `stop_gradient`, tokens
(`create_token`, `after_all`), `with_sharding_constraint`, `platform_dependent`, `composite`,
and the random-bit primitives `rng_bit_generator` (with `RandomAlgorithm`) and `rng_uniform`.

Derivatives: `custom_root` and `custom_linear_solve` compute the forward solve only; xlc does
not apply the implicit-function-theorem rules JAX attaches to them, so under `xlc.grad`
derivatives flow through the operations of `solve` as traced (correct for a direct solve,
unsupported for iterative ones built on `while_loop`).
"""
from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from xlc.frontend import dtypes, pytree
from xlc.frontend import lax as _lax
from xlc.frontend.eager import eager_ok
from xlc.frontend.tracer import Tracer, as_tracer, emit, is_arraylike, trace_error
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType as PT
from xlc.hlo.shape import Shape

__all__ = ["associative_scan", "map", "custom_root", "custom_linear_solve",
           "optimization_barrier", "stop_gradient", "create_token", "after_all",
           "with_sharding_constraint", "platform_dependent", "composite", "RandomAlgorithm",
           "rng_bit_generator", "rng_uniform"]


def _leaves(tree: Any, what: str) -> tuple[list[Tracer], pytree.TreeDef]:
    leaves, td = pytree.flatten(tree)
    for leaf in leaves:
        if not is_arraylike(leaf):
            raise trace_error(f"{what}: expected arrays, got a {type(leaf).__name__}")
    return [as_tracer(v) for v in leaves], td


# ---- scans ------------------------------------------------------------------------------------
def _slice_axis(x: Tracer, start: int, stop: int | None, stride: int, axis: int) -> Tracer:
    from xlc.frontend.lax_more import slice_in_dim

    return slice_in_dim(x, start, stop, stride, axis)


def _interleave(a: Tracer, b: Tracer, axis: int) -> Tracer:
    """a[0], b[0], a[1], b[1], ... along `axis` (len(a) == len(b) or len(b) + 1)."""
    n = a.shape[axis] + b.shape[axis]
    if b.shape[axis] < a.shape[axis]:  # pad b with one dummy element, cut it off again
        b = _lax.concatenate([b, _slice_axis(a, 0, 1, 1, axis)], axis)
    shape = a.shape[:axis + 1] + (1,) + a.shape[axis + 1:]
    pair = _lax.concatenate([_lax.reshape(a, shape), _lax.reshape(b, shape)], axis + 1)
    flat = _lax.reshape(pair, a.shape[:axis] + (2 * a.shape[axis],) + a.shape[axis + 1:])
    return _slice_axis(flat, 0, n, 1, axis)


@eager_ok
def associative_scan(fn: Callable[[Any, Any], Any], elems: Any, reverse: bool = False,
                     axis: int = 0) -> Any:
    """The inclusive scan of the associative `fn` along `axis`: [a, fn(a, b), fn(fn(a, b),
    c), ...] (with `reverse`, from the end: [..., fn(fn(z, y), x), fn(z, y), z]). `elems` is a
    pytree of arrays of one length along `axis`; `fn` combines two such pytrees elementwise.
    Blelloch's odd/even recursion: log2(n) levels of static slices, O(n) applications."""
    if not callable(fn):
        raise trace_error("associative_scan: fn must be callable")
    xs, td = _leaves(elems, "associative_scan")
    if not xs:
        return elems
    ax = int(axis) % max(xs[0].ndim, 1)
    n = xs[0].shape[ax] if xs[0].ndim else 0
    if any(x.ndim <= ax or x.shape[ax] != n for x in xs):
        raise trace_error("associative_scan: the arrays must have one length along axis "
                          f"{axis}, got " + ", ".join(x.aval_text for x in xs))
    if reverse:
        xs = [_lax.rev(x, (ax,)) for x in xs]

    def combine(a: list[Tracer], b: list[Tracer]) -> list[Tracer]:
        out, otd = pytree.flatten(fn(pytree.unflatten(td, a), pytree.unflatten(td, b)))
        if otd != td:
            raise trace_error(f"associative_scan: fn must return the structure of elems "
                              f"{td}, got {otd}")
        return [as_tracer(o) for o in out]

    def scan(level: list[Tracer]) -> list[Tracer]:
        m = level[0].shape[ax]
        if m < 2:
            return level
        pairs = combine([_slice_axis(e, 0, m - 1, 2, ax) for e in level],
                        [_slice_axis(e, 1, None, 2, ax) for e in level])
        odd = scan(pairs)
        if m % 2 == 0:
            even = combine([_slice_axis(e, 0, -1, 1, ax) for e in odd],
                           [_slice_axis(e, 2, None, 2, ax) for e in level])
        else:
            even = combine(odd, [_slice_axis(e, 2, None, 2, ax) for e in level])
        even = [_lax.concatenate([_slice_axis(e, 0, 1, 1, ax), v], ax) if v.shape[ax] else
                _slice_axis(e, 0, 1, 1, ax) for e, v in zip(level, even)]
        return [_interleave(e, o, ax) for e, o in zip(even, odd)]

    out = scan(xs)
    if reverse:
        out = [_lax.rev(o, (ax,)) for o in out]
    return pytree.unflatten(td, out)


@eager_ok
def map(f: Callable[[Any], Any], xs: Any, *, batch_size: int | None = None) -> Any:  # noqa: A001
    """`f` applied to every slice of `xs` along its leading axis, stacked (a `scan`); with
    `batch_size`, `xlc.vmap(f)` over batches of that many slices (the remainder last)."""
    from xlc.frontend.control_flow import scan

    if batch_size is None:
        return scan(lambda c, x: (c, f(x)), (), xs)[1]
    from xlc.frontend.vmap import vmap

    leaves, td = _leaves(xs, "map")
    n = leaves[0].shape[0]
    size = int(batch_size)
    if size <= 0:
        raise trace_error(f"map: batch_size must be positive, got {batch_size}")
    full, rest = divmod(n, size)
    parts = []
    if full:
        head = [_lax.reshape(_slice_axis(x, 0, full * size, 1, 0), (full, size) + x.shape[1:])
                for x in leaves]
        ys = scan(lambda c, x: (c, vmap(f)(x)), (), pytree.unflatten(td, head))[1]
        y_leaves, y_td = pytree.flatten(ys)
        parts.append([_lax.reshape(y, (full * size,) + y.shape[2:]) for y in y_leaves])
    if rest:
        tail = [_slice_axis(x, full * size, None, 1, 0) for x in leaves]
        y_leaves, y_td = pytree.flatten(vmap(f)(pytree.unflatten(td, tail)))
        parts.append([as_tracer(y) for y in y_leaves])
    if len(parts) == 1:
        return pytree.unflatten(y_td, parts[0])
    return pytree.unflatten(y_td, [_lax.concatenate([a, b], 0) for a, b in zip(*parts)])


# ---- implicit solves ----------------------------------------------------------------------------
def custom_root(f: Callable[[Any], Any], initial_guess: Any,
                solve: Callable[[Callable[[Any], Any], Any], Any],
                tangent_solve: Callable[[Callable[[Any], Any], Any], Any],
                has_aux: bool = False) -> Any:
    """A root of `f` found by `solve(f, initial_guess)` (which returns (root, aux) with
    `has_aux`). Forward only: `tangent_solve` is not used (see the module docstring)."""
    return solve(f, initial_guess)


def custom_linear_solve(matvec: Callable[[Any], Any], b: Any,
                        solve: Callable[[Callable[[Any], Any], Any], Any],
                        transpose_solve: Callable[[Callable[[Any], Any], Any], Any] | None = None,
                        symmetric: bool = False, has_aux: bool = False) -> Any:
    """x with matvec(x) = b, as `solve(matvec, b)` computes it (which returns (x, aux) with
    `has_aux`). Forward only: `transpose_solve` is not used (see the module docstring)."""
    return solve(matvec, b)


# ---- barriers, tokens, annotations ------------------------------------------------------------
@eager_ok
def optimization_barrier(operand: Any) -> Any:
    """`operand` (a pytree of arrays) through HLO `opt-barrier`: the compiler may not move
    computations across it."""
    leaves, td = _leaves(operand, "optimization_barrier")
    if not leaves:
        return operand
    shape = Shape.tuple_of([x.aval for x in leaves])
    t = emit(Opcode.TUPLE, shape, leaves, op_name="tuple")
    b = emit(Opcode.OPT_BARRIER, shape, [t], op_name="optimization_barrier")
    out = [Tracer(_lax.get_tuple_element(b, i).inst, b.builder, x.weak_type)
           for i, x in enumerate(leaves)]
    return pytree.unflatten(td, out)


def stop_gradient(x: Any) -> Any:
    """`x` (a pytree), through which no derivative flows (`xlc.stop_gradient`)."""
    from xlc.frontend.autodiff import stop_gradient as stop

    return stop(x)


def create_token(_: Any = None) -> Tracer:
    """A fresh token (HLO `after-all` of nothing), for ordering side effects."""
    return emit(Opcode.AFTER_ALL, Shape.token(), [], op_name="create_token")


def after_all(*operands: Tracer) -> Tracer:
    """A token that depends on all the token `operands` (HLO `after-all`)."""
    toks = [as_tracer(o) for o in operands]
    bad = [t.aval_text for t in toks if not t.aval.is_token]
    if bad:
        raise trace_error(f"after_all: operands must be tokens, got {', '.join(bad)}")
    return emit(Opcode.AFTER_ALL, Shape.token(), toks, op_name="after_all")


@eager_ok
def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """`x` (a pytree of arrays) annotated with a sharding: a `Sharding` custom-call per leaf,
    as JAX lowers it. xlc runs on one device, so every annotation says `{replicated}` and the
    `spmd-annotations` pass removes it before code generation."""
    leaves, td = _leaves(x, "with_sharding_constraint")
    out = [emit(Opcode.CUSTOM_CALL, t.aval, [t], {"custom_call_target": "Sharding"},
                op_name="sharding_constraint", weak=t.weak_type,
                extra=[("sharding", "{replicated}")]) for t in leaves]
    return pytree.unflatten(td, out)


def platform_dependent(*args: Any, default: Callable[..., Any] | None = None,
                       **per_platform: Callable[..., Any]) -> Any:
    """One of the functions applied to `args`: xlc traces once for any backend, so this picks
    `default` when given, else the "cpu" function, else the only one there is."""
    if default is not None:
        return default(*args)
    if "cpu" in per_platform:
        return per_platform["cpu"](*args)
    if len(per_platform) == 1:
        return next(iter(per_platform.values()))(*args)
    raise trace_error("platform_dependent: give a default (or a 'cpu' branch): xlc traces "
                      f"once for every backend, and cannot choose among {sorted(per_platform)}")


def composite(decomposition: Callable[..., Any], name: str, version: int = 0
              ) -> Callable[..., Any]:
    """`decomposition` as a composite op named `name` (JAX emits a stablehlo.composite; xlc
    inlines the decomposition)."""
    @functools.wraps(decomposition)
    def call(*args: Any, **kwargs: Any) -> Any:
        return decomposition(*args, **kwargs)

    return call


# ---- random bits ------------------------------------------------------------------------------
class RandomAlgorithm(enum.IntEnum):
    """The bit-generator algorithms of `rng_bit_generator` (XLA's RandomAlgorithm)."""

    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2


_ALGORITHMS = {"RNG_DEFAULT": "rng_default", "RNG_THREE_FRY": "rng_three_fry",
               "RNG_PHILOX": "rng_philox"}


@eager_ok
def rng_bit_generator(key: Any, shape: Any, dtype: Any = np.uint32,
                      algorithm: Any = RandomAlgorithm.RNG_DEFAULT) -> tuple[Tracer, Tracer]:
    """(new key, random bits of `shape` and unsigned `dtype`) from HLO `rng-bit-generator`.
    `key` is u32[4] (as JAX represents it) or u64[2]; RNG_DEFAULT is Philox on the CPU (as in
    XLA), so the bits equal jax.lax.rng_bit_generator's there."""
    k = as_tracer(key)
    pt = dtypes.to_ptype(dtype)
    if pt not in (PT.U8, PT.U16, PT.U32, PT.U64):
        raise trace_error(f"rng_bit_generator: dtype must be uint8/16/32/64, got {dtype!r}")
    name = getattr(algorithm, "name", str(algorithm))
    if name not in _ALGORITHMS:
        raise trace_error(f"rng_bit_generator: unknown algorithm {algorithm!r}")
    as_u32 = k.ptype is PT.U32 and k.shape == (4,)
    if not as_u32 and not (k.ptype is PT.U64 and k.shape == (2,)):
        raise trace_error(f"rng_bit_generator: key must be u32[4] or u64[2], got {k.aval_text}")
    state = _lax.bitcast_convert_type(_lax.reshape(k, (2, 2)), PT.U64) if as_u32 else k
    dims = tuple(int(d) for d in ([shape] if isinstance(shape, (int, np.integer)) else shape))
    out = Shape.tuple_of([state.aval, Shape.array(pt, dims)])
    r = emit(Opcode.RNG_BIT_GENERATOR, out, [state], {"algorithm": _ALGORITHMS[name]},
             op_name="rng_bit_generator")
    new, bits = _lax.get_tuple_element(r, 0), _lax.get_tuple_element(r, 1)
    if as_u32:
        new = _lax.reshape(_lax.bitcast_convert_type(new, PT.U32), (4,))
    return new, bits


@eager_ok
def rng_uniform(a: Any, b: Any, shape: Any) -> Tracer:
    """Uniform values in [a, b) from the stateful HLO `rng` (scalar bounds of one type). The
    reference evaluator runs it; the CPU backend has no emitter for it (use `xlc.random` or
    `rng_bit_generator` there)."""
    lo, hi = _lax._same_type(a, b)
    if lo.ndim or hi.ndim:
        raise trace_error(f"rng_uniform: bounds must be scalars, got {lo.aval_text} and "
                          f"{hi.aval_text}")
    dims = tuple(int(d) for d in shape)
    return emit(Opcode.RNG, Shape.array(lo.ptype, dims), [lo, hi],
                {"distribution": "rng_uniform"}, op_name="rng_uniform")
