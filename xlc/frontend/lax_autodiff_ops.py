"""`xlc.lax` functions the derivative rules (`autodiff_rules*.py`) need beyond `lax.py`:
complex numbers (`complex`, `real`, `imag`, `conj`), `fft`, `reduce_precision`, the
cumulative reductions of `jax.lax` (`cumsum`, `cumprod`, `cummax`, `cummin`,
`cumlogsumexp`), re-exported by `xlc.lax`; and helpers of the rules that are not public API:
`convolution` (HLO `convolution` from an explicit window and dim labels), `map_computation`
(a scalar computation applied elementwise to arrays, as HLO `map` would, but as ordinary
differentiable ops), `select_and_scatter_add` (max/min pooling transposed) and
`select_and_gather_add` (its transpose), `window_of`. Semantics follow `jax.lax`.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xlc.errors import ShapeError, UnsupportedOpError
from xlc.frontend import dtypes
from xlc.frontend import lax as _lax
from xlc.frontend.eager import eager_ok
from xlc.frontend.staging import monoid_computation, trace_scalar_computation
from xlc.frontend.tracer import Tracer, as_tracer, emit, infer, trace_error
from xlc.hlo.attrs import ConvDimLabels, Window, WindowDim
from xlc.hlo.ir import HloComputation
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType as PT
from xlc.hlo.shape import Shape
from xlc.hlo.shape_inference_nn import infer_fft

__all__ = ["complex", "real", "imag", "conj", "fft", "reduce_precision", "cumsum", "cumprod",
           "cummax", "cummin", "cumlogsumexp"]

_REAL_OF = {PT.C64: PT.F32, PT.C128: PT.F64}
_FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


# ---- complex numbers -------------------------------------------------------------------------
@eager_ok
def complex(x: Any, y: Any) -> Tracer:  # noqa: A001 - jax.lax.complex's name
    """HLO `complex`: x + i*y from f32 (-> c64) or f64 (-> c128) parts, broadcast together."""
    a, b = _np()._broadcast_all("complex", _np().promote(x, y))
    if not a.ptype.is_float:
        a, b = (_lax.convert_element_type(t, dtypes.canonical_float(t.ptype)) for t in (a, b))
    if a.ptype not in (PT.F32, PT.F64):
        a, b = (_lax.convert_element_type(t, PT.F32) for t in (a, b))
    return emit(Opcode.COMPLEX, infer("infer_binary", Opcode.COMPLEX, a.aval, b.aval), [a, b],
                op_name="complex")


@eager_ok
def real(x: Any) -> Tracer:
    """HLO `real`: the real part of a complex array (a real array is returned as is)."""
    t = as_tracer(x)
    if t.ptype not in _REAL_OF:
        return t
    return emit(Opcode.REAL, Shape.array(_REAL_OF[t.ptype], t.shape), [t], op_name="real")


@eager_ok
def imag(x: Any) -> Tracer:
    """HLO `imag`: the imaginary part of a complex array (zeros for a real array)."""
    t = as_tracer(x)
    if t.ptype not in _REAL_OF:
        return _np().zeros_like(t)
    return emit(Opcode.IMAG, Shape.array(_REAL_OF[t.ptype], t.shape), [t], op_name="imag")


@eager_ok
def conj(x: Any) -> Tracer:
    """The complex conjugate (a real array is returned as is)."""
    t = as_tracer(x)
    if t.ptype not in _REAL_OF:
        return t
    return complex(real(t), _np().negative(imag(t)))


# ---- fft and reduce-precision ----------------------------------------------------------------
@eager_ok
def fft(x: Any, fft_type: str, fft_lengths: Sequence[int]) -> Tracer:
    """HLO `fft` over the innermost len(fft_lengths) dims (`jax.lax.fft`): fft_type is "FFT",
    "IFFT" (complex -> complex), "RFFT" (real -> complex, last dim n // 2 + 1) or "IRFFT"
    (complex -> real, last dim fft_lengths[-1]). A real operand of FFT/IFFT is made complex, a
    narrower float operand of RFFT becomes f32. The CPU backend has no FFT: run it with
    `xlc.jit(..., backend="interpreter")`."""
    kind = str(getattr(fft_type, "name", fft_type)).upper()
    if kind not in _FFT_TYPES:
        raise trace_error(f"fft: fft_type must be one of {', '.join(_FFT_TYPES)}, got "
                          f"{fft_type!r}")
    t = as_tracer(x)
    if kind != "RFFT" and not t.ptype.is_complex:
        t = complex(t, _np().zeros_like(t))
    if kind == "RFFT" and t.ptype not in (PT.F32, PT.F64):
        t = _lax.convert_element_type(t, PT.F32 if t.ptype is not PT.F64 else PT.F64)
    lengths = tuple(int(n) for n in fft_lengths)
    try:
        out = infer_fft(t.aval, kind, lengths)
    except ShapeError as e:
        raise trace_error(str(e)) from None
    return emit(Opcode.FFT, out, [t], {"fft_type": kind, "fft_length": lengths}, op_name="fft")


@eager_ok
def reduce_precision(x: Any, exponent_bits: int, mantissa_bits: int) -> Tracer:
    """HLO `reduce-precision`: round floats to `mantissa_bits` (nearest even) and the range of
    `exponent_bits`, keeping the type (`jax.lax.reduce_precision`)."""
    t = as_tracer(x)
    out = infer("infer_unary", Opcode.REDUCE_PRECISION, t.aval)
    return emit(Opcode.REDUCE_PRECISION, out, [t],
                {"exponent_bits": int(exponent_bits), "mantissa_bits": int(mantissa_bits)},
                op_name="reduce_precision", weak=t.weak_type)


# ---- cumulative reductions -------------------------------------------------------------------
def _cumulative(x: Any, axis: int, reverse: bool, reducer: Opcode | Any, init: Any,
                op: str) -> Tracer:
    """A running reduction along `axis` as one reduce-window whose window covers the whole
    axis and whose padding puts n - 1 init values before (after, with `reverse`) it."""
    t = as_tracer(x)
    if not -t.ndim <= int(axis) < max(t.ndim, 1):
        raise trace_error(f"{op}: axis {axis} is out of bounds for {t.aval_text}")
    ax = int(axis) % max(t.ndim, 1)
    if t.ndim == 0 or t.shape[ax] == 0:
        return t
    n = t.shape[ax]
    window = [1] * t.ndim
    window[ax] = n
    pads = [(0, 0)] * t.ndim
    pads[ax] = (0, n - 1) if reverse else (n - 1, 0)
    return _lax.reduce_window(t, np.asarray(init(t.ptype) if callable(init) else init, t.dtype),
                              reducer, window, None, pads)


def _lowest(pt: PT) -> Any:
    return -np.inf if pt.is_float else np.iinfo(pt.dtype).min


def _highest(pt: PT) -> Any:
    return np.inf if pt.is_float else np.iinfo(pt.dtype).max


@eager_ok
def cumsum(operand: Any, axis: int = 0, reverse: bool = False) -> Tracer:
    """Inclusive running sum along `axis` (`jax.lax.cumsum`; from the end with `reverse`)."""
    return _cumulative(operand, axis, reverse, Opcode.ADD, 0, "cumsum")


@eager_ok
def cumprod(operand: Any, axis: int = 0, reverse: bool = False) -> Tracer:
    """Inclusive running product along `axis` (`jax.lax.cumprod`)."""
    return _cumulative(operand, axis, reverse, Opcode.MULTIPLY, 1, "cumprod")


@eager_ok
def cummax(operand: Any, axis: int = 0, reverse: bool = False) -> Tracer:
    """Running maximum along `axis` (`jax.lax.cummax`)."""
    return _cumulative(operand, axis, reverse, Opcode.MAXIMUM, _lowest, "cummax")


@eager_ok
def cummin(operand: Any, axis: int = 0, reverse: bool = False) -> Tracer:
    """Running minimum along `axis` (`jax.lax.cummin`)."""
    return _cumulative(operand, axis, reverse, Opcode.MINIMUM, _highest, "cummin")


def _logaddexp(a: Tracer, b: Tracer) -> Tracer:
    """log(exp(a) + exp(b)) without overflow; -inf + -inf stays -inf (as jnp.logaddexp)."""
    xnp = _np()
    delta = xnp.subtract(a, b)
    big = xnp.maximum(a, b)
    stable = xnp.add(big, xnp.log1p(xnp.exp(xnp.negative(xnp.abs(delta)))))
    return xnp.where(xnp.isnan(delta), xnp.add(a, b), stable)


@eager_ok
def cumlogsumexp(operand: Any, axis: int = 0, reverse: bool = False) -> Tracer:
    """Running log(sum(exp(x))) along `axis` (`jax.lax.cumlogsumexp`), float inputs."""
    t = as_tracer(operand)
    if not t.ptype.is_float:
        t = _lax.convert_element_type(t, dtypes.canonical_float(t.ptype))
    return _cumulative(t, axis, reverse, _logaddexp, -np.inf, "cumlogsumexp")


# ---- helpers of the derivative rules ---------------------------------------------------------
def convolution(lhs: Tracer, rhs: Tracer, window: Window, labels: ConvDimLabels,
                feature_group_count: int = 1, batch_group_count: int = 1) -> Tracer:
    """HLO `convolution` of `lhs` and `rhs` (same element type) with an explicit window
    (sizes must be the kernel's spatial sizes) and dim labels."""
    out = infer("infer_convolution", lhs.aval, rhs.aval, window, labels,
                int(feature_group_count), int(batch_group_count), None)
    return emit(Opcode.CONVOLUTION, out, [lhs, rhs],
                {"window": window, "dim_labels": labels,
                 "feature_group_count": int(feature_group_count),
                 "batch_group_count": int(batch_group_count)}, op_name="conv_general_dilated")


def map_computation(comp: HloComputation, args: Sequence[Any]) -> list[Tracer]:
    """Apply scalar computation `comp` elementwise to `args` (arrays of one shape, or
    scalars broadcast to it), emitting its instructions on arrays: what HLO `map` computes,
    but as ordinary elementwise ops that autodiff can differentiate. Returns the outputs (a
    list of one unless the root is a tuple). Only elementwise instructions, constants, tuples
    and calls may appear in `comp`."""
    xs = [as_tracer(a) for a in args]
    dims = max((x.shape for x in xs), key=len, default=())
    xs = [x if x.shape == dims else _lax.broadcast_in_dim(x, dims, ()) for x in xs]
    env: dict[int, Any] = {}
    for inst in comp.instructions:
        op = inst.opcode
        if op is Opcode.PARAMETER:
            env[id(inst)] = xs[inst.parameter_number]
        elif op is Opcode.CONSTANT:
            value = inst.attrs["literal"].array
            env[id(inst)] = _np().full(dims, value, value.dtype)
        elif op is Opcode.TUPLE:
            env[id(inst)] = [env[id(o)] for o in inst.operands]
        elif op is Opcode.GET_TUPLE_ELEMENT:
            env[id(inst)] = env[id(inst.operands[0])][int(inst.attrs["index"])]
        elif op is Opcode.CALL:
            res = map_computation(inst.called[0], [env[id(o)] for o in inst.operands])
            env[id(inst)] = res if inst.shape.is_tuple else res[0]
        elif op.is_elementwise or op is Opcode.COPY:
            et = inst.shape.element_type
            assert et is not None
            env[id(inst)] = emit(op, Shape.array(et, dims), [env[id(o)] for o in inst.operands],
                                 inst.attrs, op_name=op.text)
        else:
            raise UnsupportedOpError(f"xlc.grad: cannot differentiate through '{op.text}' "
                                     f"inside the computation {comp.name}")
    assert comp.root is not None
    out = env[id(comp.root)]
    return list(out) if isinstance(out, list) else [out]


def select_and_gather_add(tangents: Tracer, operand: Tracer, select: HloComputation,
                          window: Window) -> Tracer:
    """For every window of `operand`, the element of `tangents` at the position that
    select-and-scatter with `select` (a >= or <= comparison) would choose: a two-operand
    reduce-window of (operand, tangents) that keeps the pair `select` prefers (the first on
    ties). The transpose of select-and-scatter with add."""
    root = select.root
    direction = root.attrs.get("direction") if root is not None else None
    if root is None or root.opcode is not Opcode.COMPARE or direction not in ("GE", "GT", "LE",
                                                                              "LT"):
        raise UnsupportedOpError("xlc.grad: select-and-scatter needs a >= / <= select "
                                 "computation to be differentiated")
    pt = operand.ptype
    init = _lowest(pt) if direction in ("GE", "GT") else _highest(pt)

    def keep(av: Tracer, at: Tracer, bv: Tracer, bt: Tracer) -> tuple[Tracer, Tracer]:
        first = map_computation(select, [av, bv])[0]
        return _lax.select(first, av, bv), _lax.select(first, at, bt)

    reducer, _ = trace_scalar_computation("select_and_gather", keep, [pt, tangents.ptype] * 2,
                                          "select-and-gather reducer")
    inits = [as_tracer(np.asarray(init, pt.dtype)),
             as_tracer(np.zeros((), tangents.dtype))]
    out = infer("infer_reduce_window", [operand.aval, tangents.aval], [i.aval for i in inits],
                window, reducer)
    r = emit(Opcode.REDUCE_WINDOW, out, [operand, tangents, *inits], {"window": window},
             (reducer,), op_name="select_and_gather_add")
    return _lax.get_tuple_element(r, 1)


def select_and_scatter_add(source: Tracer, operand: Tracer, is_max: bool,
                           window: Window) -> Tracer:
    """Max (min) pooling transposed: each window's `source` value added at the element of
    `operand` the window chose (the first one on ties); zeros elsewhere."""
    xnp = _np()

    def pick(a: Tracer, b: Tracer) -> Tracer:
        return xnp.greater_equal(a, b) if is_max else xnp.less_equal(a, b)

    select, _ = trace_scalar_computation("select", pick, [operand.ptype, operand.ptype],
                                         "select-and-scatter select")
    add = monoid_computation(Opcode.ADD, operand.ptype)
    zero = as_tracer(np.zeros((), operand.dtype))
    return emit(Opcode.SELECT_AND_SCATTER, operand.aval,
                [operand, _lax.convert_element_type(source, operand.ptype), zero],
                {"window": window}, (select, add), op_name="select_and_scatter_add")


def window_of(sizes: Sequence[int], strides: Sequence[int], pads: Sequence[tuple[int, int]],
              base_dilation: Sequence[int] | None = None,
              window_dilation: Sequence[int] | None = None) -> Window:
    """A Window from per-dimension sizes, strides, (low, high) pads and dilations."""
    n = len(sizes)
    bd = base_dilation or [1] * n
    wd = window_dilation or [1] * n
    return Window(tuple(WindowDim(int(sizes[i]), int(strides[i]), int(pads[i][0]),
                                  int(pads[i][1]), int(wd[i]), int(bd[i])) for i in range(n)))
