"""The derivative table of `test_autodiff_ops.py`: every public function of xlc.numpy, xlc.lax
and xlc.nn (and of xlc.numpy.linalg and xlc.lax.linalg, keyed 'np.linalg.name' and
'lax.linalg.name') is either a `Case` in TABLE (how to call it on a float64 input `x`, and
where jax's counterpart lives) or in NOT_DIFFERENTIABLE with the reason.

A case's `call(f, x, ns)` applies the function `f` (the xlc one, or jax's) to `x` drawn
uniformly from [lo, hi) with `shape`; `ns` has the matching `np`, `lax` and `nn` namespaces
for helper calls. `jax` names the counterpart ("" = the same name, None = compare with finite
differences only)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Case:
    """How to differentiate one function (see the module docstring)."""

    call: Callable[[Any, Any, Any], Any]
    shape: tuple[int, ...] = (3, 4)
    lo: float = 0.5
    hi: float = 1.5
    jax: str | None = ""
    order2: bool = True
    nan: bool = False  # put a NaN into x (the nan* reductions)
    fd: bool = True  # False: finite differences cannot see the derivative (stop_gradient)
    kw: dict = field(default_factory=dict)


def U(lo: float = 0.5, hi: float = 1.5, jax: str | None = "", **kw: Any) -> Case:
    """A unary function f(x)."""
    return Case(lambda f, x, ns: f(x), (3, 4), lo, hi, jax, **kw)


def B(lo: float = 0.5, hi: float = 1.5, jax: str | None = "", **kw: Any) -> Case:
    """A binary function f(x[0], x[1])."""
    return Case(lambda f, x, ns: f(x[0], x[1]), (2, 3, 4), lo, hi, jax, **kw)


def C(call: Callable[[Any, Any, Any], Any], shape: tuple[int, ...] = (3, 4),
      **kw: Any) -> Case:
    """Any other call."""
    return Case(call, shape, **kw)


IDX = np.array([2, 0, 2, 1])
MASK = np.array([[True, False, True, True], [False, True, False, True],
                 [True, True, False, False]])
UNARY = {
    "abs": U(-1.5, 1.5), "absolute": U(-1.5, 1.5), "acos": U(-0.9, 0.9),
    "acosh": U(1.5, 2.5), "angle": U(), "arccos": U(-0.9, 0.9), "arccosh": U(1.5, 2.5),
    "arcsin": U(-0.9, 0.9), "arcsinh": U(-1.5, 1.5), "arctan": U(-1.5, 1.5),
    "arctanh": U(-0.9, 0.9), "asin": U(-0.9, 0.9), "asinh": U(), "atan": U(),
    "atanh": U(-0.9, 0.9), "cbrt": U(), "ceil": U(), "conj": U(), "conjugate": U(), "cos": U(),
    "cosh": U(), "deg2rad": U(), "degrees": U(), "erf": U(-1.5, 1.5, "scipy.special.erf"),
    "exp": U(), "exp2": U(), "expm1": U(), "fabs": U(-1.5, 1.5), "floor": U(), "i0": U(),
    "imag": U(), "log": U(), "log10": U(), "log1p": U(), "log2": U(),
    "logistic": U(-2.0, 2.0, "lax.logistic"), "nan_to_num": U(), "negative": U(),
    "positive": U(), "rad2deg": U(), "radians": U(), "real": U(), "reciprocal": U(),
    "rint": U(), "round": U(), "around": U(), "rsqrt": U(jax="lax.rsqrt"), "sign": U(-1.5, 1.5),
    "sin": U(), "sinc": U(), "sinh": U(), "sqrt": U(), "square": U(), "tan": U(),
    "tanh": U(), "trunc": U(), "copy": U(), "asarray": U(), "array": U(),
    "ravel": U(), "transpose": U(), "matrix_transpose": U(), "fliplr": U(), "flipud": U(),
    "atleast_1d": U(), "atleast_2d": U(), "atleast_3d": U(), "diag": U(), "diagflat": U(),
    "diagonal": U(), "trace": U(), "tril": U(), "triu": U(), "rot90": U(), "flip": U(),
    "sort": U(), "sort_complex": U(), "zeros_like": U(), "ones_like": U(),
    "empty_like": U(jax=None, order2=False),
    "histogram_bin_edges": U(), "unstack": U(), "ptp": U(), "median": U(),
    "var": U(), "std": U(), "mean": U(), "sum": U(), "prod": U(), "max": U(), "min": U(),
    "amax": U(), "amin": U(), "cumsum": U(), "cumprod": U(), "cummax": U(jax=None),
    "cummin": U(jax=None), "nanmax": U(nan=True), "nanmin": U(nan=True),
    "nansum": U(nan=True), "nanprod": U(nan=True), "nanmean": U(nan=True),
    "nanvar": U(nan=True), "nanstd": U(nan=True), "nanmedian": U(nan=True),
    "nancumsum": U(nan=True), "nancumprod": U(nan=True), "corrcoef": U(), "cov": U(),
    "squeeze": C(lambda f, x, ns: f(x[:, None, :1])), "average": U(),
}
BINARY = {
    "add": B(), "subtract": B(), "multiply": B(), "divide": B(), "true_divide": B(),
    "power": B(), "pow": B(), "float_power": B(), "arctan2": B(-1.5, 1.5),
    "atan2": B(-1.5, 1.5), "hypot": B(), "maximum": B(), "minimum": B(), "fmax": B(),
    "fmin": B(), "copysign": B(-1.5, 1.5), "logaddexp": B(), "logaddexp2": B(),
    "remainder": B(), "mod": B(), "fmod": B(), "floor_divide": B(), "heaviside": B(-1.5, 1.5),
    "dot": C(lambda f, x, ns: f(x, x.T)), "vdot": B(), "inner": B(), "outer": B(),
    "matmul": C(lambda f, x, ns: f(x[0], x[1].T), (2, 3, 4)),
    "tensordot": C(lambda f, x, ns: f(x[0], x[1], axes=([1], [1])), (2, 3, 4)),
    "einsum": C(lambda f, x, ns: f("ij,kj->ik", x[0], x[1] * x[1]), (2, 3, 4)),
    "divmod": B(), "modf": U(-2.0, 2.0), "frexp": U(-2.0, 2.0), "ldexp": C(
        lambda f, x, ns: f(x, np.array([[1, -2, 0, 3]] * 3, np.int32))),
    "clip": C(lambda f, x, ns: f(x, 0.8, 1.2)),
    "where": C(lambda f, x, ns: f(x[0] > 1.0, x[0] * x[1], -x[1]), (2, 3, 4)),
    "select": C(lambda f, x, ns: f([x < 0.8, x > 1.2], [x * x, ns.np.sin(x)], x[0, 0])),
    "piecewise": C(lambda f, x, ns: f(x, [x < 1.0, x >= 1.0],
                                       [lambda v: v * v, lambda v: 2.0 - v])),
}
SHAPES = {
    "reshape": C(lambda f, x, ns: f(x, (4, 3))), "swapaxes": C(lambda f, x, ns: f(x, 0, 1)),
    "moveaxis": C(lambda f, x, ns: f(x, 0, -1), (2, 3, 4)),
    "rollaxis": C(lambda f, x, ns: f(x, 2), (2, 3, 4)),
    "permute_dims": C(lambda f, x, ns: f(x, (2, 0, 1)), (2, 3, 4)),
    "expand_dims": C(lambda f, x, ns: f(x, 1)), "roll": C(lambda f, x, ns: f(x, 2, axis=1)),
    "tile": C(lambda f, x, ns: f(x, (2, 1))), "repeat": C(lambda f, x, ns: f(x, 2, axis=0)),
    "concatenate": C(lambda f, x, ns: f([x[0], x[1][:2]]), (2, 3, 4)),
    "concat": C(lambda f, x, ns: f([x[0], x[1]], axis=1), (2, 3, 4)),
    "stack": C(lambda f, x, ns: f([x[0], x[1] * 2], axis=1), (2, 3, 4)),
    "hstack": C(lambda f, x, ns: f([x[0], x[1]]), (2, 3, 4)),
    "vstack": C(lambda f, x, ns: f([x[0], x[1]]), (2, 3, 4)),
    "dstack": C(lambda f, x, ns: f([x[0], x[1]]), (2, 3, 4)),
    "column_stack": C(lambda f, x, ns: f([x[0], x[1]]), (2, 3, 4)),
    "block": C(lambda f, x, ns: f([[x[0], x[1]], [x[1], x[0]]]), (2, 3, 4)),
    "append": C(lambda f, x, ns: f(x[0], x[1], axis=0), (2, 3, 4)),
    "insert": C(lambda f, x, ns: f(x, 1, x[0] * 2, axis=0)),
    "delete": C(lambda f, x, ns: f(x, 1, axis=1)),
    "pad": C(lambda f, x, ns: f(x, ((1, 0), (2, 1)), mode="constant")),
    "split": C(lambda f, x, ns: f(x, 2, axis=1)),
    "array_split": C(lambda f, x, ns: f(x, 3, axis=1)),
    "hsplit": C(lambda f, x, ns: f(x, 2)), "vsplit": C(lambda f, x, ns: f(x, 3)),
    "dsplit": C(lambda f, x, ns: f(x, 2), (2, 3, 4)),
    "broadcast_to": C(lambda f, x, ns: f(x, (2, 3, 4))),
    "broadcast_arrays": C(lambda f, x, ns: f(x, x[0])),
    "take": C(lambda f, x, ns: f(x, IDX, axis=1)),
    "take_along_axis": C(lambda f, x, ns: f(x, np.array([[2, 0], [1, 1], [3, 0]]), axis=1)),
    "choose": C(lambda f, x, ns: f(np.array([0, 1, 1, 0]), [x[0], x[1]], mode="clip"), (2, 4)),
    "compress": C(lambda f, x, ns: f(np.array([True, False, True]), x, axis=0, size=2)),
    "extract": C(lambda f, x, ns: f(MASK, x, size=7)),
    "place": C(lambda f, x, ns: f(x, MASK, x[0] * 3, inplace=False)),
    "put": C(lambda f, x, ns: f(x, np.array([1, 5]), x[0, :2] ** 2, inplace=False)),
    "put_along_axis": C(lambda f, x, ns: f(x, np.array([[2], [0], [1]]), x[:, :1] ** 2, 1,
                                           inplace=False)),
    "fill_diagonal": C(lambda f, x, ns: f(x, x[0, 0] * 2, inplace=False)),
    "resize": C(lambda f, x, ns: f(x, (5, 3))),
    "partition": C(lambda f, x, ns: f(x, 2, axis=1)),
    "quantile": C(lambda f, x, ns: f(x, 0.3, axis=1)),
    "percentile": C(lambda f, x, ns: f(x, 70.0, axis=0)),
    "nanquantile": C(lambda f, x, ns: f(x, 0.3, axis=1), nan=True),
    "nanpercentile": C(lambda f, x, ns: f(x, 70.0, axis=0), nan=True),
    "cumulative_sum": C(lambda f, x, ns: f(x, axis=1)),
    "cumulative_prod": C(lambda f, x, ns: f(x, axis=0)),
    "bincount": C(lambda f, x, ns: f(np.array([0, 2, 2, 1]), weights=x[0], length=4)),
    "apply_along_axis": C(lambda f, x, ns: f(lambda r: ns.np.sum(r * r), 1, x)),
    "apply_over_axes": C(lambda f, x, ns: f(ns.np.sum, x, [1])),
    "vectorize": C(lambda f, x, ns: f(lambda a, b: a * ns.np.sin(b))(x, x[0])),
    "full": C(lambda f, x, ns: f((2, 3), x[0, 0])),
    "full_like": C(lambda f, x, ns: f(x, x[1, 2])),
    "linspace": C(lambda f, x, ns: f(x[0, 0], x[0, 1] + 1.0, 5)),
    "logspace": C(lambda f, x, ns: f(x[0, 0], x[0, 1] + 1.0, 5)),
    "geomspace": C(lambda f, x, ns: f(x[0, 0], x[0, 1] + 1.0, 5)),
    "meshgrid": C(lambda f, x, ns: f(x[0], x[1, :3]), (2, 4)),
    "kaiser": C(lambda f, x, ns: f(6, x[0, 0] * 3.0)),
    "convolve": C(lambda f, x, ns: f(x[0], x[1, :3]), (2, 4)),
    "correlate": C(lambda f, x, ns: f(x[0], x[1, :3], mode="full"), (2, 4)),
    "cross": C(lambda f, x, ns: f(x[0], x[1]), (2, 4, 3)),
    "kron": C(lambda f, x, ns: f(x[0], x[1]), (2, 2, 3)),
    "vecdot": B(), "matvec": C(lambda f, x, ns: f(x[0], x[1, 0]), (2, 3, 4)),
    "vecmat": C(lambda f, x, ns: f(x[1, :, 0], x[0]), (2, 3, 4)),
    "diff": C(lambda f, x, ns: f(x, axis=1)),
    "ediff1d": C(lambda f, x, ns: f(x[0], to_begin=x[1, :1])),
    "gradient": U(), "trapezoid": C(lambda f, x, ns: f(x, axis=1)),
    "unwrap": C(lambda f, x, ns: f(x * 4.0, axis=1)),
    "interp": C(lambda f, x, ns: f(x[0], np.linspace(0.0, 2.0, 5), x[1] ** 2), (2, 5)),
    "vander": C(lambda f, x, ns: f(x[0], 3)),
    "poly": C(lambda f, x, ns: f(x[0])), "polyder": C(lambda f, x, ns: f(x[0])),
    "polyint": C(lambda f, x, ns: f(x[0])),
    **{k: C(lambda f, x, ns: f(x[0], x[1, :2])) for k in ("polyadd", "polysub", "polymul",
                                                          "polydiv")},
    "polyval": C(lambda f, x, ns: f(x[0], x[1])),
    "astype": C(lambda f, x, ns: f(x * x, np.complex128)),
}
NUMPY = {f"np.{k}": v for d in (UNARY, BINARY, SHAPES) for k, v in d.items()}


def _kernel(x: Any, ns: Any) -> Any:
    """A (2, 3, 3, 2) OIHW kernel cut from a (2, 3, 6, 5) input, so both are differentiated."""
    return ns.np.stack([x[0, :, :3, :2], x[1, :, 1:4, 2:4] * 0.5])


def _argmax_reducer(ns: Any) -> Callable[..., Any]:
    """(value, index) pairs reduced to the first maximum; xlc.lax.reduce passes the four
    scalars, jax.lax.reduce two pairs."""
    def reducer(av: Any, ai: Any, bv: Any, bi: Any) -> Any:
        pick = ns.np.logical_or(av > bv, ns.np.logical_and(av == bv, ai < bi))
        return ns.lax.select(pick, av, bv), ns.lax.select(pick, ai, bi)
    return reducer if ns.xlc else lambda a, b: reducer(*a, *b)


def _iota(ns: Any, shape: tuple[int, ...], dim: int) -> Any:
    return ns.lax.broadcasted_iota(np.int32, shape, dim)


def _jax_scatter(kind: str) -> Callable[..., Any]:
    """lax.scatter_<kind> of (3, 4) updates into a (5, 4) operand, both cut from x (repeated
    rows, except for mul: jax differentiates it for unique indices only)."""
    def call(f: Any, x: Any, ns: Any) -> Any:
        dn = ns.lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                            scatter_dims_to_operand_dims=(0,))
        idx = np.array([[4], [1], [2]]) if kind == "mul" else np.array([[0], [3], [3]])
        operand, updates = ns.np.reshape(x[:20], (5, 4)), ns.np.reshape(x[20:], (3, 4))
        return f(operand, idx, updates, dn, unique_indices=kind == "mul")
    return call


CPLX = (2, 3, 4)  # x[0] + i x[1]
LAX = {
    "broadcast_in_dim": C(lambda f, x, ns: f(x, (2, 3, 4), (1, 2))),
    "clamp": C(lambda f, x, ns: f(0.8, x, 1.2)),
    "complex": B(), "conj": C(lambda f, x, ns: f(ns.lax.complex(x[0], x[1])), CPLX),
    "real": C(lambda f, x, ns: f(ns.lax.complex(x[0], x[1]) ** 2), CPLX),
    "imag": C(lambda f, x, ns: f(ns.lax.complex(x[0], x[1]) ** 2), CPLX),
    "concatenate": C(lambda f, x, ns: f([x[0], x[1]], 1), (2, 3, 4)),
    "conv": C(lambda f, x, ns: f(x, _kernel(x, ns), (1, 2), "SAME"), (2, 3, 6, 5)),
    "conv_general_dilated": C(lambda f, x, ns: f(
        x, _kernel(x, ns), (2, 1), [(1, 2), (0, 1)], lhs_dilation=(1, 2),
        rhs_dilation=(2, 1)), (2, 3, 6, 5)),
    "convert_element_type": C(lambda f, x, ns: f(x * x, np.complex128)),
    "cumsum": C(lambda f, x, ns: (f(x, axis=1), f(x, axis=0, reverse=True))),
    "cumprod": C(lambda f, x, ns: (f(x, axis=1), f(x, axis=0, reverse=True))),
    "cummax": C(lambda f, x, ns: (f(x, axis=1), f(x, axis=0, reverse=True))),
    "cummin": C(lambda f, x, ns: (f(x, axis=1), f(x, axis=0, reverse=True))),
    "cumlogsumexp": C(lambda f, x, ns: (f(x, axis=1), f(x, axis=0, reverse=True))),
    "div": B(), "rem": B(), "dot": C(lambda f, x, ns: f(x, x.T)),
    "dot_general": C(lambda f, x, ns: f(x[0], x[1], (((2,), (2,)), ((0,), (0,)))),
                     (2, 2, 3, 4)),
    "dynamic_index_in_dim": C(lambda f, x, ns: f(x, np.int32(2), 1)),
    "dynamic_slice": C(lambda f, x, ns: f(x, (np.int32(1), np.int32(5)), (2, 2))),
    "dynamic_slice_in_dim": C(lambda f, x, ns: f(x, np.int32(-2), 2, axis=1)),
    "dynamic_update_index_in_dim": C(lambda f, x, ns: f(x, x[0] * x[1], np.int32(2), 0)),
    "dynamic_update_slice": C(lambda f, x, ns: f(x, x[:2, :2] ** 2,
                                                 (np.int32(2), np.int32(3)))),
    "dynamic_update_slice_in_dim": C(lambda f, x, ns: f(x, x[:, :2] * 3, np.int32(3), 1)),
    "fft": C(lambda f, x, ns: (f(ns.lax.complex(x[0], x[1]), "FFT", (3, 4)),
                               f(x[0], "RFFT", (4,)),
                               f(ns.lax.complex(x[0, :, :3], x[1, :, 1:]), "IRFFT", (4,)),
                               f(ns.lax.complex(x[1], x[0]), "IFFT", (4,))), CPLX),
    "gather": C(lambda f, x, ns: f(x, np.array([[2], [0], [5]]), (1,), (0,), (0,), 1, (1, 3)),
                jax=None),
    "pad": C(lambda f, x, ns: f(x, x[0, 0], [(1, -1, 1), (0, 2, 0)])),
    "reduce": C(lambda f, x, ns: (f(x, 0.0, ns.lax.add, (1,)), f(
        (x, _iota(ns, (3, 4), 1)), (-np.inf, np.int32(0)), _argmax_reducer(ns), (1,))),
        jax=None),  # jax.grad fails on the variadic (value, index) reduce
    "reduce_precision": C(lambda f, x, ns: f(x, 11, 52)),
    "reduce_window": C(lambda f, x, ns: (f(x, -np.inf, ns.lax.max, (2, 3), (1, 2), "SAME"),
                                         f(x, 0.0, ns.lax.add, (2, 2), (2, 1), "VALID"))),
    "rev": C(lambda f, x, ns: f(x, (0, 1))), "reshape": C(lambda f, x, ns: f(x, (2, 6))),
    "scatter": C(lambda f, x, ns: f(x, np.array([[1], [7], [1]]), x[:, :3] ** 2, (1,), (0,),
                                    (0,), 1, ns.lax.Opcode.ADD), jax=None),
    "select": C(lambda f, x, ns: f(x > 1.0, x, x * x)),
    "slice": C(lambda f, x, ns: f(x, (0, 1), (3, 4), (2, 2))),
    "sort": C(lambda f, x, ns: (f(x, 0), f((x, x * x), num_keys=1))),
    "top_k": C(lambda f, x, ns: f(x, 2)), "transpose": C(lambda f, x, ns: f(x, (1, 0))),
    "cond": C(lambda f, x, ns: f(x[0, 0] > 1.0, lambda v: ns.np.sin(v) * v, ns.np.cos, x)),
    "switch": C(lambda f, x, ns: f(np.int32(1), [ns.np.sin, lambda v: v * v], x)),
    **{k: U(-0.9, 0.9) for k in ("asin", "acos", "atanh", "erf_inv")},
    **{k: U() for k in ("asinh", "atan", "cosh", "sinh", "exp2", "square", "reciprocal",
                        "lgamma", "digamma")},
    **{k: U(-1.5, 1.5) for k in ("erfc", "bessel_i0e", "bessel_i1e")},
    "acosh": U(1.5, 2.5), "igamma": B(), "igammac": B(),
    "betainc": C(lambda f, x, ns: f(np.full((3, 4), 1.5), np.full((3, 4), 2.5), x), lo=0.1,
                 hi=0.9),
    "polygamma": C(lambda f, x, ns: f(np.full((3, 4), 1.0), x)),
    "zeta": C(lambda f, x, ns: f(np.full((3, 4), 2.5), x), jax=None),  # jax: no derivative
    "integer_pow": C(lambda f, x, ns: f(x, 3)),
    "associative_scan": C(lambda f, x, ns: (f(ns.np.multiply, x, axis=1),
                                            f(ns.np.add, x, reverse=True))),
    "batch_matmul": C(lambda f, x, ns: f(x[0], ns.np.swapaxes(x[1], 1, 2)), (2, 2, 3, 4)),
    "broadcast": C(lambda f, x, ns: f(x, (2,))),
    "broadcast_like": C(lambda f, x, ns: f(x[0], x)),
    "broadcast_to_rank": C(lambda f, x, ns: f(x, 4)),
    "collapse": C(lambda f, x, ns: f(x, 0, 2), (2, 3, 4)),
    "composite": C(lambda f, x, ns: f(lambda v: ns.np.sin(v) * v, "my.op")(x), jax=None),
    "conv_general_dilated_patches": C(lambda f, x, ns: f(x, (2, 2), (1, 1), "VALID"),
                                      (2, 3, 5, 4)),
    "conv_transpose": C(lambda f, x, ns: f(ns.np.reshape(x[:32], (1, 2, 4, 4)),
                                           ns.np.reshape(x[32:], (3, 2, 2, 2)), (2, 2),
                                           "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")),
                         (56,)),
    "conv_with_general_padding": C(lambda f, x, ns: f(x, _kernel(x, ns), (1, 1),
                                                      [(1, 0), (0, 1)], (2, 1), (1, 1)),
                                   (2, 3, 6, 5)),
    "custom_linear_solve": C(lambda f, x, ns: f(lambda v: 2.0 * v, x, lambda mv, b: b / 2.0,
                                                symmetric=True)),
    "custom_root": C(lambda f, x, ns: f(lambda y: y - ns.np.sin(x), x,
                                        lambda g, y0: y0 - g(y0), lambda g, y: y)),
    "expand_dims": C(lambda f, x, ns: f(x, (0,))),
    "full": C(lambda f, x, ns: f((2, 3), x[0, 0])),
    "full_like": C(lambda f, x, ns: f(x, x[1, 2])),
    "index_in_dim": C(lambda f, x, ns: f(x, 1, axis=1)),
    "index_take": C(lambda f, x, ns: f(x, (np.array([0, 2]), np.array([1, 3])), (0, 1))),
    "map": C(lambda f, x, ns: f(lambda r: ns.np.sin(r) * r[0], x)),
    **{k: C(lambda f, x, ns: f(x, (1,))) for k in ("reduce_max", "reduce_min",
                                                   "reduce_prod", "reduce_sum")},
    "select_n": C(lambda f, x, ns: f(x > 1.0, x, x * x)),
    "slice_in_dim": C(lambda f, x, ns: f(x, 1, 4, 2, axis=1)),
    "sort_key_val": C(lambda f, x, ns: f(x, x * x, 1)),
    "split": C(lambda f, x, ns: f(x, (1, 3), axis=1)),
    "squeeze": C(lambda f, x, ns: f(x[None], (0,))),
    "stack": C(lambda f, x, ns: f([x, x * 2.0], 1)),
    "tile": C(lambda f, x, ns: f(x, (2, 1))), "unstack": C(lambda f, x, ns: f(x, axis=1)),
    **{k: C(lambda f, x, ns: f(x, 2)) for k in ("approx_max_k", "approx_min_k")},
    "ragged_dot": C(lambda f, x, ns: f(x, ns.np.stack([x.T, 2.0 * x.T]),
                                       np.array([1, 2], np.int32)),
                    jax=None),  # jax: "Unimplemented grad_x_dims" in its second derivative
    "conv_general_dilated_local": C(lambda f, x, ns: f(
        ns.np.reshape(x[:18], (1, 2, 3, 3)), ns.np.reshape(x[18:], (2, 8, 2, 2)), (1, 1),
        "VALID", (2, 2), dimension_numbers=("NCHW", "OIHW", "NCHW")), (82,)),
    "stop_gradient": C(lambda f, x, ns: f(x) * x, fd=False),
    "optimization_barrier": C(lambda f, x, ns: f((x, x * x))),
    "with_sharding_constraint": C(lambda f, x, ns: f(x, None) * x, jax=None),
    "platform_dependent": C(lambda f, x, ns: f(x, default=ns.np.sin)),
    **{f"scatter_{k}": C(_jax_scatter(k), (32,)) for k in ("add", "sub", "min", "max",
                                                            "mul")},
    "fori_loop": C(lambda f, x, ns: f(0, 3, lambda i, v: ns.np.sin(v) * 1.5, x)),
    "scan": C(lambda f, x, ns: f(lambda c, r: (c * r, ns.np.sin(c + r)), x[0], x[1:])),
}
# the elementwise spellings xlc.lax resolves lazily from xlc.numpy (not in dir(xlc.lax))
LAX_ALIASES = {
    **{k: U() for k in ("exp", "expm1", "log", "log1p", "tanh", "logistic", "sqrt", "rsqrt",
                        "cbrt", "sin", "cos", "tan", "floor", "ceil", "round", "neg")},
    **{k: U(-1.5, 1.5) for k in ("abs", "sign", "erf")},
    **{k: B() for k in ("add", "sub", "mul", "max", "min", "pow")}, "atan2": B(-1.5, 1.5),
}
NN = {
    **{k: U(-1.5, 1.5) for k in (
        "celu", "elu", "gelu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh",
        "identity", "leaky_relu", "log_sigmoid", "log_softmax", "logsumexp", "mish", "relu",
        "relu6", "selu", "sigmoid", "silu", "soft_sign", "softmax", "softplus", "sparse_plus",
        "sparse_sigmoid", "squareplus", "standardize", "swish", "tanh", "glu", "logmeanexp")},
    "log1mexp": U(0.5, 2.0),
    "layer_norm": C(lambda f, x, ns: f(x, x[0] * 2, x[1]), jax=None),
    "dot_product_attention": C(lambda f, x, ns: f(x[0], x[1], x[2] * x[0]), (3, 1, 3, 2, 4)),
}


def _gram(x: Any, ns: Any) -> Any:
    """x x^T + I (batch dims leading): a well-conditioned positive definite matrix."""
    return ns.np.matmul(x, ns.np.swapaxes(x, -1, -2)) + np.eye(x.shape[-2])


def _square(x: Any, ns: Any) -> Any:
    """The leading square block of x plus 2 I: a well-conditioned matrix."""
    n = x.shape[-2]
    return x[..., :n] + 2.0 * np.eye(n)


def _wide(x: Any) -> Any:
    """The 3 x 4 x plus diag(3, 2, 1): singular values well apart and away from 0 (their
    gaps and sizes divide the derivatives)."""
    return x + np.eye(3, 4) * np.array([[3.0], [2.0], [1.0]])


def _tall(x: Any, ns: Any) -> Any:
    """_wide(x) transposed: 4 x 3."""
    return ns.np.swapaxes(_wide(x), -1, -2)


MATS = (2, 3, 4)  # a batch of two 3 x 4 matrices
LINALG = {  # xlc.numpy.linalg, against jax.numpy.linalg
    "cholesky": C(lambda f, x, ns: f(_gram(x, ns)), MATS),
    "solve": C(lambda f, x, ns: (f(_square(x, ns), x[..., :2] ** 2),
                                 f(_square(x, ns)[0], x[1, :, 3])), MATS),
    "inv": C(lambda f, x, ns: f(_square(x, ns)), MATS),
    "det": C(lambda f, x, ns: f(_square(x, ns) * np.array([1.0, -1.0, 1.0])), MATS),
    "slogdet": C(lambda f, x, ns: f(_square(x, ns) * np.array([1.0, -1.0, 1.0])), MATS),
    "eigh": C(lambda f, x, ns: f(_gram(x, ns)), MATS),
    "eigvalsh": C(lambda f, x, ns: f(_gram(x, ns)), MATS),
    "qr": C(lambda f, x, ns: (f(_wide(x)), f(_tall(x, ns)),
                              f(_tall(x, ns)[..., :2], mode="complete")), MATS),
    "svd": C(lambda f, x, ns: (f(_wide(x), full_matrices=False),
                               f(_tall(x, ns), full_matrices=False),
                               f(_square(x, ns), compute_uv=False), f(_square(x, ns))), MATS),
    "triangular_solve": C(lambda f, x, ns: f(_square(x, ns), x, left_side=True, lower=True),
                          MATS, jax="lax.linalg.triangular_solve"),
}
LAX_LINALG = {  # xlc.lax.linalg, against jax.lax.linalg
    "cholesky": C(lambda f, x, ns: (f(_gram(x, ns)), f(_gram(x, ns), symmetrize_input=False)),
                  MATS),
    "triangular_solve": C(lambda f, x, ns: (
        f(_square(x, ns), x, left_side=True, lower=True),
        f(_square(x, ns), x[..., :2, :3], lower=False, transpose_a=True, unit_diagonal=True),
        f(_square(x, ns), x, left_side=True, transpose_a=True, conjugate_a=True)), MATS),
    "lu": C(lambda f, x, ns: (f(_square(x, ns)), f(_wide(x)), f(_tall(x, ns))), MATS),
    "qr": C(lambda f, x, ns: (f(_wide(x), full_matrices=False),
                              f(_tall(x, ns), full_matrices=False),
                              f(_tall(x, ns), full_matrices=True)), MATS),
    "eigh": C(lambda f, x, ns: (f(_gram(x, ns)),
                                f(_gram(x, ns), lower=False, symmetrize_input=False)), MATS),
    "svd": C(lambda f, x, ns: (f(_wide(x), full_matrices=False),
                               f(_tall(x, ns), full_matrices=False),
                               f(_square(x, ns), compute_uv=False), f(_square(x, ns))), MATS),
}
TABLE: dict[str, Case] = {**NUMPY, **{f"lax.{k}": v for k, v in {**LAX, **LAX_ALIASES}.items()},
                          **{f"nn.{k}": v for k, v in NN.items()},
                          **{f"np.linalg.{k}": v for k, v in LINALG.items()},
                          **{f"lax.linalg.{k}": v for k, v in LAX_LINALG.items()}}
"""'namespace.name' -> how to differentiate it."""

_INT = "integer or bool result: no derivative"
_INTERNAL = "an import of the tracing machinery, not an array function"
_META = "returns shapes, dtypes or type information, not arrays"
_CREATE = "creates arrays from shapes or static arguments only"
_SETS = "set operations: the result's size and members come from comparisons"
NOT_DIFFERENTIABLE: dict[str, str] = {
    **{f"np.{k}": _INT for k in (
        "all", "any", "allclose", "argmax", "argmin", "argpartition", "argsort", "argwhere",
        "array_equal", "array_equiv", "bitwise_and", "bitwise_count", "bitwise_invert",
        "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift",
        "bitwise_xor", "count_nonzero", "equal", "flatnonzero", "gcd", "greater",
        "greater_equal", "invert", "isclose", "iscomplex", "isfinite", "isin", "isinf",
        "isnan", "isneginf", "isposinf", "isreal", "lcm", "left_shift", "less", "less_equal",
        "lexsort", "logical_and", "logical_not", "logical_or", "logical_xor", "nanargmax",
        "nanargmin", "nonzero", "not_equal", "packbits", "ravel_multi_index", "right_shift",
        "signbit", "unpackbits", "unravel_index", "searchsorted", "digitize")},
    **{f"np.{k}": _INTERNAL for k in ("as_tracer", "eager_ok", "emit", "infer", "trace_error",
                                      "type_of", "promote")},
    **{f"np.{k}": _META for k in ("broadcast_shapes", "dtype", "finfo", "iinfo", "ndim",
                                  "result_type", "shape", "size")},
    **{f"np.{k}": _CREATE for k in (
        "arange", "diag_indices", "diag_indices_from", "empty", "eye", "fromfunction",
        "identity", "indices", "ix_", "mask_indices", "ones", "tri", "tril_indices",
        "tril_indices_from", "triu_indices", "triu_indices_from", "zeros")},
    **{f"np.{k}": _SETS for k in ("intersect1d", "setdiff1d", "setxor1d", "union1d", "unique",
                                  "unique_all", "unique_counts", "unique_inverse",
                                  "unique_values")},
    "np.trim_zeros": "the result's size depends on the values (needs concrete input)",
    "np.histogram": "bin counts are piecewise constant (the edges are histogram_bin_edges)",
    "np.nextafter": "the next float: piecewise constant, and jax defines no derivative",
    "np.spacing": "the float spacing: piecewise constant, and jax defines no derivative",
    **{f"lax.{k}": _INTERNAL for k in ("as_tracer", "eager_ok", "emit", "infer",
                                       "monoid_computation", "trace_error",
                                       "trace_scalar_computation", "type_of")},
    "lax.bitcast_convert_type": "reinterprets bits",
    **{f"lax.{k}": _INT for k in ("argmax", "argmin", "clz", "population_count", "mulhi",
                                  "shift_right_arithmetic", "shift_right_logical",
                                  "reduce_and", "reduce_or", "reduce_xor")},
    **{f"lax.{k}": _META for k in ("broadcast_shapes", "conv_dimension_numbers",
                                   "conv_general_permutations", "conv_general_shape_tuple",
                                   "conv_shape_tuple", "conv_transpose_shape_tuple", "dtype",
                                   "padtype_to_pads", "reduce_window_shape_tuple")},
    "lax.empty": _CREATE, "lax.create_token": "tokens order side effects",
    "lax.DotDimensionNumbers": _META,
    **{f"lax.{k}": "a derivative itself, computed by a while_loop; jax defines no derivative "
                   "of it" for k in ("igamma_grad_a", "random_gamma_grad")},
    "lax.after_all": "tokens order side effects",
    "lax.rng_bit_generator": "random bits", "lax.rng_uniform": "random numbers",
    "lax.nextafter": "the next float: piecewise constant, and jax defines no derivative",
    "lax.scatter_apply": "a scatter whose combiner applies a function to the old value has "
                         "no derivative rule (jax neither)",
    **{f"np.{k}": _CREATE for k in ("bartlett", "blackman", "hamming", "hanning")},
    "lax.linalg.lu_pivots_to_permutation": _INT,
    "lax.broadcasted_iota": _CREATE, "lax.iota": _CREATE, "lax.shape_of": _META,
    "lax.get_tuple_element": "tuple plumbing of the traced HLO (covered by sort and reduce)",
    "lax.while_loop": "a loop with a data-dependent trip count cannot be reversed (as in JAX)",
    **{f"lax.{k}": _INT for k in ("eq", "ne", "lt", "le", "gt", "ge", "is_finite",
                                  "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
                                  "shift_left")},
    **{f"nn.{k}": _INTERNAL for k in ("as_tracer", "eager_ok", "emit", "infer",
                                      "trace_error")},
    "nn.one_hot": "integer class labels in, a constant encoding out",
}
"""'namespace.name' -> why it has no derivative to test."""

PENDING: dict[str, str] = {
    "nn.dot_product_attention": "computes its softmax in f32 even for f64 input, as "
                                "jax.nn.dot_product_attention does, so f64 finite "
                                "differences of it are too coarse for the check",
    **{f"lax.{k}": "first derivatives work (custom_vjp rules); the second derivative with "
                   "respect to a goes through the while_loop of igamma_grad_a / the "
                   "continued fraction, which has no rule (nor has it in jax)"
       for k in ("betainc", "igamma", "igammac")},
}
"""TABLE cases whose function (not its derivative rules) has a known problem: run as
expected failures until fixed."""
