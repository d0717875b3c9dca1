"""Polynomials, signal processing and calculus for `xlc.numpy`: polyval/polyadd/.../poly,
vander, convolve/correlate (HLO `convolution`), the window functions, searchsorted/digitize/
interp, diff/ediff1d/gradient/trapezoid/unwrap, and cross/kron/vecdot/matvec/vecmat.

As in `jax.numpy`, sizes are static (a polynomial's degree, a window's length), integer inputs
of float functions compute in f32, and sequential algorithms (Horner's rule, synthetic
division) run as `fori_loop`s over traced coefficients. polyfit and roots are missing: they
need a least-squares solver and a general eigensolver, which xlc does not have.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xlc.frontend import lax as _lax
from xlc.frontend import numpy_api as xnp
from xlc.frontend.control_flow import fori_loop
from xlc.frontend.eager import eager_ok
from xlc.frontend.numpy_math import _inexact, i0
from xlc.frontend.tracer import Tracer, as_tracer, trace_error
from xlc.hlo.shape import PrimitiveType as PT

__all__ = [
    "searchsorted", "digitize", "interp", "polyval", "polyadd", "polysub", "polymul",
    "polyder", "polyint", "polydiv", "poly", "vander", "convolve", "correlate", "bartlett",
    "blackman", "hamming", "hanning", "kaiser", "diff", "ediff1d", "gradient", "trapezoid",
    "unwrap", "cross", "kron", "vecdot", "matvec", "vecmat",
]


def _axis(axis: int, ndim: int, op: str) -> int:
    if not -ndim <= axis < ndim:
        raise trace_error(f"{op}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def _slice(x: Tracer, start: int | None, stop: int | None, axis: int) -> Tracer:
    """x[start:stop] along `axis` (static bounds, numpy's negative-index rules)."""
    lo, hi, _ = slice(start, stop).indices(x.shape[axis])
    starts, limits = [0] * x.ndim, list(x.shape)
    starts[axis], limits[axis] = lo, max(hi, lo)
    return _lax.slice(x, starts, limits)


def _vector(name: str, x: Any, what: str = "argument") -> Tracer:
    t = as_tracer(x)
    if t.ndim != 1:
        raise trace_error(f"{name}: the {what} must be 1-D, got {t.aval_text}")
    return t


# ---- searching and interpolation --------------------------------------------------------------
def _total_lt(a: Tracer, b: Tracer) -> Tracer:
    """a < b with NaNs after every number (the order of `sort`)."""
    if not a.ptype.is_float:
        return a < b
    return xnp.logical_or(a < b, xnp.logical_and(~xnp.isnan(a), xnp.isnan(b)))


@eager_ok
def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None, *,
                 method: str = "scan") -> Tracer:
    """Insertion indices (s32) of v into the sorted 1-D a (NaNs sort last): a binary search
    of ceil(log2(n + 1)) gathers ('scan', 'scan_unrolled', 'sort'), or one compare-and-sum
    against all of a ('compare_all')."""
    if side not in ("left", "right"):
        raise trace_error(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if method not in ("scan", "scan_unrolled", "sort", "compare_all"):
        raise trace_error(f"searchsorted: method must be 'scan', 'scan_unrolled', 'sort' or "
                          f"'compare_all', got {method!r}")
    at, vt = xnp.promote(a, v)
    _vector("searchsorted", at, "sorted array a")
    if sorter is not None:
        at = xnp.take(at, sorter)
    n = at.shape[0]
    if n == 0:
        return xnp.full(vt.shape, 0, np.int32)
    if method == "compare_all":
        ab = xnp.reshape(at, (n,) + (1,) * vt.ndim)
        hit = _total_lt(ab, vt) if side == "left" else ~_total_lt(vt, ab)
        return xnp.sum(hit, axis=0, dtype=np.int32)
    low, high = xnp.full(vt.shape, 0, np.int32), xnp.full(vt.shape, n, np.int32)
    for _ in range(int(np.ceil(np.log2(n + 1)))):  # static: one level of the search each
        mid = low + (high - low) // 2
        am = xnp.take(at, mid)
        go_left = ~_total_lt(am, vt) if side == "left" else _total_lt(vt, am)
        low, high = xnp.where(go_left, low, mid), xnp.where(go_left, mid, high)
    return high


@eager_ok
def digitize(x: Any, bins: Any, right: bool = False) -> Tracer:
    """Indices (s32) of the bins x falls into, for monotonic 1-D edges in either direction."""
    bt, xt = _vector("digitize", bins, "bins"), as_tracer(x)
    if bt.shape[0] == 0:
        return xnp.full(xt.shape, 0, np.int32)
    side = "left" if right else "right"
    up = searchsorted(bt, xt, side=side)
    down = bt.shape[0] - searchsorted(bt[::-1], xt, side=side)
    return xnp.where(bt[-1] >= bt[0], up, down)


@eager_ok
def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None,
           period: Any = None) -> Tracer:
    """Piecewise-linear interpolation of (xp, fp) at x, for increasing xp (`left`/`right`
    outside it, default the end values); with `period`, xp is periodic."""
    xt, xpt, fpt = _inexact("interp", x, xp, fp)
    if xpt.ndim != 1 or fpt.shape != xpt.shape or xpt.shape[0] == 0:
        raise trace_error(f"interp: xp and fp must be 1-D, non-empty and of equal length, got "
                          f"{xpt.aval_text} and {fpt.aval_text}")
    if period is not None:
        if left is not None or right is not None:
            raise trace_error("interp: left and right cannot be given with period")
        per = abs(as_tracer(period))
        xt, xpt = xt % per, xpt % per
        order = xnp.argsort(xpt)
        xpt, fpt = xnp.take(xpt, order), xnp.take(fpt, order)
        xpt = xnp.concatenate([xpt[-1:] - per, xpt, xpt[:1] + per])
        fpt = xnp.concatenate([fpt[-1:], fpt, fpt[:1]])
    n = xpt.shape[0]
    i = xnp.clip(searchsorted(xpt, xt, side="right"), 1, max(n - 1, 1))
    j = xnp.minimum(i, n - 1)
    x0, x1, f0, f1 = (xnp.take(v, k) for v, k in ((xpt, i - 1), (xpt, j), (fpt, i - 1),
                                                    (fpt, j)))
    dx = x1 - x0
    tiny = abs(dx) <= float(np.spacing(np.finfo(xpt.dtype).eps))
    f = xnp.where(tiny, f0, f0 + (xt - x0) / xnp.where(tiny, 1, dx) * (f1 - f0))
    if period is None:
        f = xnp.where(xt < xpt[0], fpt[0] if left is None else left, f)
        f = xnp.where(xt > xpt[-1], fpt[-1] if right is None else right, f)
    return f


# ---- polynomials (coefficients highest power first) -------------------------------------------
@eager_ok
def polyval(p: Any, x: Any) -> Tracer:
    """The polynomial with coefficients p (along axis 0) at x, by Horner's rule."""
    pt, xt = xnp.promote(p, x)
    if pt.ndim == 0:
        raise trace_error(f"polyval: p must have at least one dimension, got {pt.aval_text}")
    shape = xnp.broadcast_shapes(pt.shape[1:], xt.shape, op="polyval")
    y0 = xnp.full(shape, 0, xt.dtype)
    return fori_loop(0, pt.shape[0], lambda i, y: y * xt + pt[i], y0)


@eager_ok
def polyadd(a1: Any, a2: Any) -> Tracer:
    """The sum of two polynomials (the shorter padded with leading zeros)."""
    a, b = xnp.promote(_vector("polyadd", a1), _vector("polyadd", a2))
    n = max(a.shape[0], b.shape[0])
    return xnp.pad(a, (n - a.shape[0], 0)) + xnp.pad(b, (n - b.shape[0], 0))


@eager_ok
def polysub(a1: Any, a2: Any) -> Tracer:
    """The difference of two polynomials."""
    a, b = xnp.promote(_vector("polysub", a1), _vector("polysub", a2))
    return polyadd(a, -b)


def _no_trim(name: str, trim_leading_zeros: bool) -> None:
    if trim_leading_zeros:
        raise trace_error(f"{name}: trim_leading_zeros=True gives a data-dependent shape and "
                          "cannot be traced")


@eager_ok
def polymul(a1: Any, a2: Any, *, trim_leading_zeros: bool = False) -> Tracer:
    """The product of two polynomials (their full convolution)."""
    _no_trim("polymul", trim_leading_zeros)
    a, b = _inexact("polymul", _vector("polymul", a1), _vector("polymul", a2))
    a = a if a.shape[0] else xnp.zeros(1, a.dtype)
    b = b if b.shape[0] else xnp.zeros(1, b.dtype)
    return convolve(a, b, mode="full")


@eager_ok
def polyder(p: Any, m: int = 1) -> Tracer:
    """The m-th derivative of a polynomial."""
    (t,) = _inexact("polyder", _vector("polyder", p))
    if m < 0:
        raise trace_error(f"polyder: the order m must be non-negative, got {m}")
    if m == 0:
        return t
    deg = np.arange(m, t.shape[0])[None, :] - np.arange(m)[:, None]
    coeff = np.prod(deg, axis=0)[::-1]  # static: d (d - 1) ... (d - m + 1) per power d
    return _slice(t, None, -m, 0) * np.asarray(coeff, t.dtype)


@eager_ok
def polyint(p: Any, m: int = 1, k: Any = None) -> Tracer:
    """The m-th antiderivative of a polynomial, with integration constants k (scalar or m)."""
    (t,) = _inexact("polyint", _vector("polyint", p))
    if m < 0:
        raise trace_error(f"polyint: the order m must be non-negative, got {m}")
    if m == 0:
        return t
    kt = xnp.asarray(0 if k is None else k, t.dtype)
    if kt.ndim == 0:
        kt = xnp.full((m,), kt, t.dtype)
    if kt.shape != (m,):
        raise trace_error(f"polyint: k must be a scalar or have m={m} values, got {kt.aval_text}")
    grid = np.arange(t.shape[0] + m)[None, :] - np.arange(m)[:, None]
    coeff = np.prod(np.maximum(1, grid), axis=0)[::-1]
    return xnp.concatenate([t, kt]) / np.asarray(coeff, t.dtype)


@eager_ok
def polydiv(u: Any, v: Any, *, trim_leading_zeros: bool = False) -> tuple[Tracer, Tracer]:
    """(quotient, remainder) of polynomial division by synthetic division; the remainder keeps
    u's length (leading zeros are not trimmed)."""
    _no_trim("polydiv", trim_leading_zeros)
    ut, vt = _inexact("polydiv", _vector("polydiv", u), _vector("polydiv", v))
    m, n = ut.shape[0] - 1, vt.shape[0] - 1
    if n < 0:
        raise trace_error("polydiv: the divisor must not be empty")
    q0 = xnp.zeros(max(m - n + 1, 1), ut.dtype)
    scale = 1 / vt[0]

    def step(k: Tracer, qr: tuple[Tracer, Tracer]) -> tuple[Tracer, Tracer]:
        q, r = qr
        d = scale * _lax.dynamic_slice(r, [k], [1])
        seg = _lax.dynamic_slice(r, [k], [n + 1]) - d * vt
        return _lax.dynamic_update_slice(q, d, [k]), _lax.dynamic_update_slice(r, seg, [k])

    return fori_loop(0, max(m - n + 1, 0), step, (q0, ut))


@eager_ok
def poly(seq_of_zeros: Any) -> Tracer:
    """The coefficients of the monic polynomial with the given 1-D roots."""
    (z,) = _inexact("poly", as_tracer(seq_of_zeros))
    if z.ndim != 1:
        raise trace_error(f"poly: the roots must be 1-D (a matrix's characteristic polynomial "
                          f"needs eigvals, which xlc lacks), got {z.aval_text}")
    n = z.shape[0]
    a0 = xnp.concatenate([xnp.ones(1, z.dtype), xnp.zeros(n, z.dtype)])

    def times_root(k: Tracer, a: Tracer) -> Tracer:  # a * (x - z[k])
        return a - z[k] * xnp.concatenate([xnp.zeros(1, a.dtype), a[:-1]])

    return fori_loop(0, n, times_root, a0)


@eager_ok
def vander(x: Any, N: int | None = None, increasing: bool = False) -> Tracer:  # noqa: N803
    """The Vandermonde matrix of the 1-D x: columns x**(N-1), ..., x, 1 (reversed with
    `increasing`), by cumulative products (exact for integers)."""
    t = _vector("vander", x)
    cols = t.shape[0] if N is None else int(N)
    if cols < 0:
        raise trace_error(f"vander: N must be non-negative, got {N}")
    if cols == 0:
        return xnp.zeros((t.shape[0], 0), t.dtype)
    ones = xnp.full((t.shape[0], 1), 1, t.dtype)
    powers = xnp.cumprod(xnp.concatenate(
        [ones, xnp.broadcast_to(xnp.expand_dims(t, 1), (t.shape[0], cols - 1))], 1), axis=1)
    powers = xnp.astype(powers, t.dtype)
    return powers if increasing else xnp.flip(powers, 1)


# ---- convolution and windows --------------------------------------------------------------
def _conv(op: str, a: Any, v: Any, mode: str) -> Tracer:
    """JAX's 1-D convolve/correlate through HLO `convolution` (the longer input slides)."""
    x, y = _inexact(op, _vector(op, a), _vector(op, v))
    if x.shape[0] == 0 or y.shape[0] == 0:
        raise trace_error(f"{op}: inputs must not be empty, got {x.aval_text} and {y.aval_text}")
    reverse = False
    if x.shape[0] < y.shape[0]:
        x, y, reverse = y, x, op == "correlate"
    if op == "convolve":
        y = xnp.flip(y)
    k = y.shape[0]
    pads = {"valid": (0, 0), "same": (k // 2, k - k // 2 - 1), "full": (k - 1, k - 1)}
    if mode not in pads:
        raise trace_error(f"{op}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    r = _lax.conv_general_dilated(xnp.reshape(x, (1, 1, -1)), xnp.reshape(y, (1, 1, -1)), (1,),
                                  [pads[mode]])
    r = xnp.reshape(r, (-1,))
    return xnp.flip(r) if reverse else r


@eager_ok
def convolve(a: Any, v: Any, mode: str = "full") -> Tracer:
    """Discrete linear convolution of two 1-D arrays (mode 'full', 'same' or 'valid')."""
    return _conv("convolve", a, v, mode)


@eager_ok
def correlate(a: Any, v: Any, mode: str = "valid") -> Tracer:
    """Cross-correlation of two 1-D arrays (mode 'valid', 'same' or 'full')."""
    return _conv("correlate", a, v, mode)


def _window(M: int, fn: Any, ptype: PT = PT.F32) -> Tracer:  # noqa: N803
    """fn(n, M) for n = 0, 1, ..., M - 1 as `ptype` (ones for M <= 1)."""
    if int(M) <= 1:
        return xnp.ones(max(int(M), 0), ptype.dtype)
    return fn(_lax.iota(ptype, int(M)), int(M))


@eager_ok
def bartlett(M: int) -> Tracer:  # noqa: N803
    """The Bartlett (triangular) window of M points (f32)."""
    return _window(M, lambda n, m: 1 - abs(2 * n + 1 - m) / (m - 1))


@eager_ok
def blackman(M: int) -> Tracer:  # noqa: N803
    """The Blackman window of M points."""
    return _window(M, lambda n, m: 0.42 - 0.5 * xnp.cos(2 * np.pi * n / (m - 1))
                   + 0.08 * xnp.cos(4 * np.pi * n / (m - 1)))


@eager_ok
def hamming(M: int) -> Tracer:  # noqa: N803
    """The Hamming window of M points."""
    return _window(M, lambda n, m: 0.54 - 0.46 * xnp.cos(2 * np.pi * n / (m - 1)))


@eager_ok
def hanning(M: int) -> Tracer:  # noqa: N803
    """The Hann window of M points."""
    return _window(M, lambda n, m: 0.5 * (1 - xnp.cos(2 * np.pi * n / (m - 1))))


@eager_ok
def kaiser(M: int, beta: Any) -> Tracer:  # noqa: N803
    """The Kaiser window of M points with shape parameter beta, in beta's float type (f32 for
    a Python number or an integer, f64 for an f64 beta, as JAX with x64 keeps it)."""
    (b,) = _inexact("kaiser", beta)

    def f(n: Tracer, m: int) -> Tracer:
        alpha = 0.5 * (m - 1)
        return i0(b * xnp.sqrt(1 - ((n - alpha) / alpha) ** 2)) / i0(b)

    return _window(M, f, b.ptype)


# ---- differences and calculus ------------------------------------------------------------
def _edge(v: Any, t: Tracer, axis: int) -> Tracer:
    """A prepend/append value: scalars become one slice of t along `axis`."""
    e = as_tracer(v)
    if e.ndim:
        return e
    shape = list(t.shape)
    shape[axis] = 1
    return xnp.broadcast_to(e, shape)


@eager_ok
def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Tracer:
    """The n-th discrete difference along `axis` (`!=` for bools), after adding `prepend` /
    `append`."""
    t = as_tracer(a)
    if n < 0:
        raise trace_error(f"diff: the order n must be non-negative, got {n}")
    if n == 0:
        return t
    if t.ndim == 0:
        raise trace_error(f"diff: needs an array of at least one dimension, got {t.aval_text}")
    ax = _axis(axis, t.ndim, "diff")
    parts = [_edge(v, t, ax) for v in (prepend,) if v is not None] + [t] + \
        [_edge(v, t, ax) for v in (append,) if v is not None]
    t = xnp.concatenate(parts, ax) if len(parts) > 1 else t
    for _ in range(n):  # static: the order of the difference
        hi, lo = _slice(t, 1, None, ax), _slice(t, None, -1, ax)
        t = hi != lo if t.ptype is PT.PRED else hi - lo
    return t


@eager_ok
def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Tracer:
    """Differences of the flattened array, with optional values before and after."""
    t = xnp.ravel(ary)
    parts = [_slice(t, 1, None, 0) - _slice(t, None, -1, 0)]
    if to_begin is not None:
        parts.insert(0, xnp.astype(xnp.ravel(to_begin), t.dtype))
    if to_end is not None:
        parts.append(xnp.astype(xnp.ravel(to_end), t.dtype))
    return xnp.concatenate(parts) if len(parts) > 1 else parts[0]


def _gradient_along(a: Tracer, h: Tracer, ax: int) -> Tracer:
    """Central differences inside, one-sided at the ends, for scalar or 1-D coordinates h."""
    def sl(x: Tracer, lo: int | None, hi: int | None) -> Tracer:
        return _slice(x, lo, hi, ax)

    upper, lower = sl(a, 1, 2) - sl(a, 0, 1), sl(a, -1, None) - sl(a, -2, -1)
    if h.ndim == 0:
        return xnp.concatenate([upper / h, (sl(a, 2, None) - sl(a, None, -2)) * 0.5 / h,
                                lower / h], ax)
    if h.ndim != 1 or h.shape[0] != a.shape[ax]:
        raise trace_error(f"gradient: spacing {h.aval_text} must be a scalar or 1-D of length "
                          f"{a.shape[ax]}")
    x = xnp.reshape(h, [a.shape[ax] if d == ax else 1 for d in range(a.ndim)])
    dx1, dx2 = sl(x, 1, -1) - sl(x, 0, -2), sl(x, 2, None) - sl(x, 1, -1)
    inner = (-dx2 / (dx1 * (dx1 + dx2)) * sl(a, 0, -2) + (dx2 - dx1) / (dx1 * dx2) * sl(a, 1, -1)
             + dx1 / (dx2 * (dx1 + dx2)) * sl(a, 2, None))
    return xnp.concatenate([upper / (sl(x, 1, 2) - sl(x, 0, 1)), inner,
                            lower / (sl(x, -1, None) - sl(x, -2, -1))], ax)


@eager_ok
def gradient(f: Any, *varargs: Any, axis: int | Sequence[int] | None = None,
             edge_order: int | None = None) -> Any:
    """Second-order central differences of f along `axis` (all axes by default: a list), with
    scalar spacings or 1-D coordinates per axis."""
    if edge_order is not None:
        raise trace_error("gradient: edge_order is not supported (as in jax.numpy)")
    a, *spacing = _inexact("gradient", f, *varargs)
    given = range(a.ndim) if axis is None else [axis] if isinstance(axis, int) else axis
    axes = [_axis(int(x), a.ndim, "gradient") for x in given]
    if not axes:
        return []
    if min(a.shape[d] for d in axes) < 2:
        raise trace_error(f"gradient: needs at least 2 elements along each axis, got "
                          f"{a.aval_text}")
    if len(spacing) not in (0, 1, len(axes)):
        raise trace_error(f"gradient: {len(spacing)} spacings for {len(axes)} axes")
    hs = [as_tracer(1.0)] * len(axes) if not spacing else \
        (spacing * len(axes) if len(spacing) == 1 else spacing)
    out = [_gradient_along(a, h, d) for d, h in zip(axes, hs)]
    return out[0] if len(axes) == 1 else out


@eager_ok
def trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Tracer:
    """The integral of y along `axis` by the trapezoidal rule (sample points x, or spacing
    dx)."""
    if x is None:
        (yt,) = _inexact("trapezoid", y)
        d = as_tracer(dx)
    else:
        yt, xt = _inexact("trapezoid", y, x)
        d = diff(xt) if xt.ndim == 1 else xnp.moveaxis(diff(xt, axis=axis), axis, -1)
    yt = xnp.moveaxis(yt, _axis(axis, yt.ndim, "trapezoid"), -1)
    if d.ndim == 0:
        return d * (xnp.sum(yt, -1) - 0.5 * (yt[..., 0] + yt[..., -1]))
    return 0.5 * xnp.sum(d * (yt[..., 1:] + yt[..., :-1]), -1)


@eager_ok
def unwrap(p: Any, discont: Any = None, axis: int = -1, period: Any = 2 * np.pi) -> Tracer:
    """Unwrap phase jumps larger than `discont` (default period / 2) along `axis` by adding
    multiples of `period`."""
    t, per = xnp.promote(p, period)
    if t.ptype.is_complex:
        raise trace_error(f"unwrap: complex inputs are not supported, got {t.aval_text}")
    ax = _axis(axis, t.ndim, "unwrap")
    if t.shape[ax] == 0:
        return t
    interval = per // 2 if t.ptype.is_integer else per / 2
    dd = diff(t, axis=ax)
    ddmod = (dd + interval) % per - interval
    ddmod = xnp.where(xnp.logical_and(ddmod == -interval, dd > 0), interval, ddmod)
    lim = per / 2 if discont is None else discont
    correct = xnp.where(abs(dd) < lim, 0, ddmod - dd)
    return xnp.concatenate([_slice(t, 0, 1, ax),
                            _slice(t, 1, None, ax) + xnp.cumsum(correct, axis=ax)], ax)


# ---- small linear algebra ------------------------------------------------------------------
@eager_ok
def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: int | None = None) -> Tracer:
    """The cross product of 2- or 3-vectors along the given axes (a scalar z for two
    2-vectors)."""
    if axis is not None:
        axisa = axisb = axisc = axis
    x, y = xnp.promote(a, b)
    x, y = xnp.moveaxis(x, axisa, -1), xnp.moveaxis(y, axisb, -1)
    if x.shape[-1] not in (2, 3) or y.shape[-1] not in (2, 3):
        raise trace_error(f"cross: vectors must have 2 or 3 components, got {x.aval_text} and "
                          f"{y.aval_text}")
    if x.shape[-1] == 2 and y.shape[-1] == 2:
        return x[..., 0] * y[..., 1] - x[..., 1] * y[..., 0]
    a0, a1, b0, b1 = x[..., 0], x[..., 1], y[..., 0], y[..., 1]
    a2 = x[..., 2] if x.shape[-1] == 3 else xnp.zeros_like(a0)
    b2 = y[..., 2] if y.shape[-1] == 3 else xnp.zeros_like(b0)
    c = xnp.stack(xnp.broadcast_arrays(a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0))
    return xnp.moveaxis(c, 0, axisc)


@eager_ok
def kron(a: Any, b: Any) -> Tracer:
    """The Kronecker product (blocks of a's entries times b)."""
    x, y = xnp.promote(a, b)
    nd = max(x.ndim, y.ndim)
    x = xnp.reshape(x, (1,) * (nd - x.ndim) + x.shape)
    y = xnp.reshape(y, (1,) * (nd - y.ndim) + y.shape)
    xs = xnp.reshape(x, [s for d in x.shape for s in (d, 1)])
    ys = xnp.reshape(y, [s for d in y.shape for s in (1, d)])
    return xnp.reshape(xs * ys, [p * q for p, q in zip(x.shape, y.shape)])


def _contract(name: str, x: Tracer, y: Tracer, xa: int, ya: int) -> None:
    if x.ndim <= max(xa, -1 - xa) or y.ndim <= max(ya, -1 - ya) or x.shape[xa] != y.shape[ya]:
        raise trace_error(f"{name}: the contracted dimensions of {x.aval_text} and "
                          f"{y.aval_text} differ")


@eager_ok
def vecdot(x1: Any, x2: Any, axis: int = -1) -> Tracer:
    """conj(x1) . x2 along `axis`, the other dims broadcast."""
    x, y = xnp.promote(x1, x2)
    _contract("vecdot", x, y, axis, axis)
    x, y = xnp.moveaxis(x, axis, -1), xnp.moveaxis(y, axis, -1)
    return xnp.sum(xnp.conj(x) * y, axis=-1, dtype=x.dtype)


@eager_ok
def matvec(x1: Any, x2: Any) -> Tracer:
    """Matrix-vector products over broadcast batch dims: (..., m, n) x (..., n) -> (..., m)."""
    x, y = xnp.promote(x1, x2)
    _contract("matvec", x, y, -1, -1)
    if x.ndim < 2:
        raise trace_error(f"matvec: x1 must be a matrix, got {x.aval_text}")
    return xnp.sum(x * xnp.expand_dims(y, -2), axis=-1, dtype=x.dtype)


@eager_ok
def vecmat(x1: Any, x2: Any) -> Tracer:
    """Vector-matrix products, conj(x1) (..., n) x (..., n, m) -> (..., m)."""
    x, y = xnp.promote(x1, x2)
    _contract("vecmat", x, y, -1, -2)
    return xnp.sum(xnp.expand_dims(xnp.conj(x), -1) * y, axis=-2, dtype=x.dtype)

