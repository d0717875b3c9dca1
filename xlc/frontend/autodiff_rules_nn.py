"""Transpose rules for the structured ops of reverse-mode autodiff (see `autodiff_rules.py`
for the calling convention): convolution, fft, reductions (monoid, arbitrary and variadic),
reduce-window (sums, max/min pooling, running reductions, anything else), select-and-scatter
and map.

Where an op's reducer is not one of the monoids with a closed-form transpose, the rule
re-expresses the op with differentiable primitives (the reducer applied elementwise by
`lax_autodiff_ops.map_computation` over a log-depth tree, a prefix scan, or window slices) and
returns that expression's vector-Jacobian product, as JAX does for its generic reductions. The
re-expression is used for the derivative only; the forward value is the original op's.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlc.errors import UnsupportedOpError
from xlc.frontend import lax as _lax
from xlc.frontend import lax_autodiff_ops as _ops
from xlc.frontend.tracer import Tracer
from xlc.hlo.attrs import ConvDimLabels, Window, WindowDim
from xlc.hlo.ir import HloComputation, HloInstruction
from xlc.hlo.opcodes import Opcode

__all__ = ["RULES", "TUPLE_RULES", "monoid_of", "vjp_of"]


def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


def _diff(t: Tracer) -> bool:
    return t.ptype.is_float or t.ptype.is_complex


def monoid_of(comp: HloComputation) -> Opcode | None:
    """The opcode of a two-scalar computation that is just `op(p0, p1)` (either order), or
    `None` for anything else."""
    root, params = comp.root, comp.parameters
    if root is None or len(params) != 2 or len(root.operands) != 2:
        return None
    if {id(o) for o in root.operands} != {id(params[0]), id(params[1])}:
        return None
    return root.opcode


def vjp_of(fn: Callable[..., Sequence[Tracer]], args: Sequence[Tracer],
           cts: Sequence[Tracer | None]) -> list[Tracer | None]:
    """Cotangents of the differentiable `args` of `fn(*args)` (a list of outputs) for output
    cotangents `cts` (None: none reached that output), by `xlc.vjp` of `fn`; None for args
    that are not float or complex."""
    from xlc.frontend import autodiff

    diff = [i for i, a in enumerate(args) if _diff(a)]
    live = [k for k, c in enumerate(cts) if c is not None]
    if not diff or not live:
        return [None] * len(args)

    def part(*d: Tracer) -> tuple[Tracer, ...]:
        full = list(args)
        for i, v in zip(diff, d):
            full[i] = v
        outs = fn(*full)
        return tuple(outs[k] for k in live)

    _, pull = autodiff.pullback(part, *[args[i] for i in diff])
    got = pull(tuple(cts[k] for k in live))
    res: list[Tracer | None] = [None] * len(args)
    for i, g in zip(diff, got):
        res[i] = g
    return res


# ---- convolution ---------------------------------------------------------------------------
def _specs(dl: ConvDimLabels) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """JAX's ConvDimensionNumbers: (batch, feature, spatial...) of the input and output,
    (out feature, in feature, spatial...) of the kernel."""
    return ((dl.input_batch, dl.input_feature, *dl.input_spatial),
            (dl.kernel_output_feature, dl.kernel_input_feature, *dl.kernel_spatial),
            (dl.output_batch, dl.output_feature, *dl.output_spatial))


def _labels(lhs: Sequence[int], rhs: Sequence[int], out: Sequence[int]) -> ConvDimLabels:
    return ConvDimLabels(lhs[0], lhs[1], tuple(lhs[2:]), rhs[1], rhs[0], tuple(rhs[2:]),
                         out[0], out[1], tuple(out[2:]))


def _swap(spec: Sequence[int]) -> tuple[int, ...]:
    return (spec[1], spec[0], *spec[2:])


def _axis_out_of(src: int, size1: int, x: Tracer) -> Tracer:
    """Split dim `src` of x into (size1, rest)."""
    shape = list(x.shape)
    shape[src:src + 1] = [size1, shape[src] // size1]
    return _lax.reshape(x, shape)


def _axis_into(src: int, dst: int, x: Tracer) -> Tracer:
    """Merge dim `src` into dim `dst` (numbered with `src` removed) as its major part."""
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    shape = [n for i, n in enumerate(x.shape) if i != src]
    shape[dst] *= x.shape[src]
    return _lax.reshape(_lax.transpose(x, perm), shape)


def _dilate(n: int, d: int) -> int:
    return 0 if n == 0 else (n - 1) * d + 1


def _conv_window(sizes: Sequence[int], strides: Sequence[int],
                 pads: Sequence[tuple[int, int]], lhs_dil: Sequence[int],
                 rhs_dil: Sequence[int]) -> Window:
    return Window(tuple(WindowDim(int(s), int(st), int(p[0]), int(p[1]), int(rd), int(ld))
                        for s, st, p, ld, rd in zip(sizes, strides, pads, lhs_dil, rhs_dil)))


def _conv(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer) -> Sequence[Any]:
    """Input cotangent: a convolution of the cotangent (dilated by the forward strides) with
    the spatially flipped kernel, input and output features swapped; kernel cotangent: a
    convolution of the input with the cotangent. Group counts as jax's
    _conv_general_dilated_transpose_lhs/rhs."""
    lhs, rhs = ops
    dl: ConvDimLabels = inst.attrs["dim_labels"]
    fgc = int(inst.attrs.get("feature_group_count", 1))
    bgc = int(inst.attrs.get("batch_group_count", 1))
    dims = inst.attrs["window"].dims
    lhs_spec, rhs_spec, out_spec = _specs(dl)
    flipped = [rhs_spec[2 + i] for i, d in enumerate(dims) if d.reversal]
    kernel = _lax.rev(rhs, flipped) if flipped else rhs
    g = _np().astype(ct, lhs.dtype) if ct.ptype is not lhs.ptype else ct
    strides = [d.stride for d in dims]
    ld = [d.base_dilation for d in dims]
    rd = [d.window_dilation for d in dims]
    in_sp = [lhs.shape[d] for d in lhs_spec[2:]]
    k_sp = [rhs.shape[d] for d in rhs_spec[2:]]
    o_sp = [g.shape[d] for d in out_spec[2:]]
    d_in, d_k = [_dilate(n, s) for n, s in zip(in_sp, ld)], [_dilate(n, s) for n, s in
                                                              zip(k_sp, rd)]
    d_out = [_dilate(n, s) for n, s in zip(o_sp, strides)]
    lows = [d.pad_low for d in dims]

    # the input's cotangent
    w, groups = kernel, fgc
    if fgc > 1 or bgc > 1:
        w = _axis_into(rhs_spec[0], rhs_spec[1], _axis_out_of(rhs_spec[0], max(fgc, bgc), w))
        groups = max(fgc, bgc)
    before = [k - lo - 1 for k, lo in zip(d_k, lows)]
    pads = [(b, i + k - 1 - o - b) for b, i, k, o in zip(before, d_in, d_k, d_out)]
    w = _lax.rev(w, rhs_spec[2:])
    ct_lhs = _ops.convolution(g, w, _conv_window(k_sp, ld, pads, strides, rd),
                              _labels(out_spec, _swap(rhs_spec), lhs_spec), groups, 1)
    if bgc > 1:
        ct_lhs = _axis_into(lhs_spec[1], lhs_spec[0], _axis_out_of(lhs_spec[1], bgc, ct_lhs))

    # the kernel's cotangent
    f2, b2 = (bgc, 1) if bgc > 1 else (1, fgc)
    pads = [(lo, o - i + k - lo - 1) for lo, o, i, k in zip(lows, d_out, d_in, d_k)]
    ct_rhs = _ops.convolution(lhs, g, _conv_window(o_sp, rd, pads, ld, strides),
                              _labels(_swap(lhs_spec), _swap(out_spec), _swap(rhs_spec)),
                              f2, b2)
    if flipped:
        ct_rhs = _lax.rev(ct_rhs, flipped)
    return ct_lhs, ct_rhs


# ---- fft -----------------------------------------------------------------------------------
def _fft(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer) -> Sequence[Any]:
    """FFT and IFFT are their own transposes (the DFT matrix is symmetric); RFFT transposes to
    the real part of the FFT of the zero-extended cotangent; IRFFT as jax's
    _irfft_transpose (an RFFT, scaled, the Hermitian-duplicated bins doubled, conjugated)."""
    xnp = _np()
    kind = str(inst.attrs["fft_type"])
    lengths = tuple(int(n) for n in inst.attrs["fft_length"])
    if kind in ("FFT", "IFFT"):
        return (_ops.fft(ct, kind, lengths),)
    if kind == "RFFT":
        extra = lengths[-1] - ct.shape[-1]
        full = _lax.pad(ct, 0, [(0, 0, 0)] * (ct.ndim - 1) + [(0, extra, 0)])
        return (_ops.real(_ops.fft(full, "FFT", lengths)),)
    x = _ops.fft(ct, "RFFT", lengths)
    n = x.shape[-1]
    mask = np.full(n, 2.0)
    mask[0] = 1.0
    if lengths[-1] % 2 == 0:
        mask[-1] = 1.0
    scaled = xnp.multiply(x, xnp.asarray(mask / np.prod(lengths), x.dtype))
    return (_ops.conj(scaled),)


# ---- reductions ----------------------------------------------------------------------------
def _tree_reduce(comp: HloComputation, dims: Sequence[int], xs: Sequence[Tracer],
                 inits: Sequence[Tracer]) -> list[Tracer]:
    """`reduce` re-expressed: the reduced dims flattened last and combined pairwise in
    log2(n) rounds of `comp` applied elementwise (an odd element is paired with the init
    values), then the init values folded in once, as XLA's reduce does."""
    x0 = xs[0]
    kept = [d for d in range(x0.ndim) if d not in dims]
    kept_shape = tuple(x0.shape[d] for d in kept)
    m = int(np.prod([x0.shape[d] for d in dims], dtype=np.int64))
    if m == 0:
        return [_lax.broadcast_in_dim(i, kept_shape, ()) for i in inits]
    ys = [_lax.reshape(_lax.transpose(x, kept + list(dims)), kept_shape + (m,)) for x in xs]
    r = len(kept_shape)
    while m > 1:
        if m % 2:
            ys = [_lax.concatenate([y, _lax.broadcast_in_dim(i, kept_shape + (1,), ())], r)
                  for y, i in zip(ys, inits)]
            m += 1
        lo, hi = [0] * (r + 1), list(kept_shape) + [m]
        ys = _ops.map_computation(comp, [_lax.slice(y, lo, hi, [1] * r + [2]) for y in ys]
                                  + [_lax.slice(y, lo[:r] + [1], hi, [1] * r + [2])
                                     for y in ys])
        m //= 2
    ys = [_lax.reshape(y, kept_shape) for y in ys]
    return _ops.map_computation(comp, list(inits) + ys)


def _reduce(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
            ) -> Sequence[Any]:
    """Sums broadcast the cotangent back; max/min share it among the elements equal to the
    result; products and any other reducer go through `_tree_reduce`."""
    dims = tuple(int(d) for d in inst.attrs["dimensions"])
    x = ops[0]
    kept = tuple(d for d in range(x.ndim) if d not in dims)
    kind = monoid_of(inst.called[0])
    xnp = _np()
    if kind is Opcode.ADD and ops[1].inst.opcode is Opcode.CONSTANT:
        return _lax.broadcast_in_dim(ct, x.shape, kept), None
    if kind in (Opcode.MAXIMUM, Opcode.MINIMUM) and ops[1].inst.opcode is Opcode.CONSTANT:
        back = _lax.broadcast_in_dim(ct, x.shape, kept)
        hit = xnp.astype(xnp.equal(x, _lax.broadcast_in_dim(out, x.shape, kept)), ct.dtype)
        count = _lax.broadcast_in_dim(xnp.sum(hit, axis=dims), x.shape, kept)
        return xnp.divide(xnp.multiply(back, hit), count), None
    return _variadic_reduce(inst, [out], ops, [ct])


def _variadic_reduce(inst: HloInstruction, elems: list[Tracer], ops: list[Tracer],
                     parts: list[Tracer | None]) -> Sequence[Any]:
    """Any reduce (argmax-style (value, index) pairs included): the VJP of `_tree_reduce`."""
    n = len(ops) // 2
    dims = tuple(int(d) for d in inst.attrs["dimensions"])

    def fn(*args: Tracer) -> list[Tracer]:
        return _tree_reduce(inst.called[0], dims, args[:n], args[n:])

    return vjp_of(fn, ops, parts)


# ---- reduce-window -------------------------------------------------------------------------
def _window_slices(x: Tracer, init: Tracer, dims: Sequence[WindowDim],
                   out_shape: Sequence[int]) -> list[Tracer]:
    """The operand element each window position reads, for every position of the window in
    order: x padded (and base-dilated) with `init`, then one strided slice per position."""
    xp = _lax.pad(x, init, [(d.pad_low, d.pad_high, d.base_dilation - 1) for d in dims])
    res = []
    for pos in itertools.product(*[range(d.size) for d in dims]):
        start = [k * d.window_dilation for k, d in zip(pos, dims)]
        limit = [s + (n - 1) * d.stride + 1 for s, n, d in zip(start, out_shape, dims)]
        res.append(_lax.slice(xp, start, limit, [d.stride for d in dims]))
    return res


def _windows_generic(comp: HloComputation, dims: Sequence[WindowDim], out_shape: Sequence[int],
                     xs: Sequence[Tracer], inits: Sequence[Tracer]) -> list[Tracer]:
    """reduce-window re-expressed: the init values, then `comp` folded over the window
    positions in order (XLA's semantics for any reducer and window)."""
    acc = [_lax.broadcast_in_dim(i, tuple(out_shape), ()) for i in inits]
    if 0 in out_shape:
        return acc
    per = [_window_slices(x, i, dims, out_shape) for x, i in zip(xs, inits)]
    for k in range(len(per[0])):
        acc = _ops.map_computation(comp, acc + [p[k] for p in per])
    return acc


def _running_axis(x: Tracer, dims: Sequence[WindowDim]) -> tuple[int, bool] | None:
    """(axis, reverse) when the window is a running reduction along one axis (cumsum-like),
    else None."""
    found = None
    for ax, (n, d) in enumerate(zip(x.shape, dims)):
        if d.stride != 1 or d.base_dilation != 1 or d.window_dilation != 1:
            return None
        if d.size == 1 and d.pad_low == d.pad_high == 0:
            continue
        if found is not None or d.size != n or (d.pad_low, d.pad_high) not in ((n - 1, 0),
                                                                           (0, n - 1)):
            return None
        found = (ax, d.pad_low == 0)
    return found


def _prefix_scan(comp: HloComputation, x: Tracer, init: Tracer, axis: int,
                 reverse: bool) -> Tracer:
    """A running reduction re-expressed as a Hillis-Steele scan: log2(n) rounds combining
    each element with the one `shift` before (after) it; needs `comp` associative with `init`
    its identity, as every running reduction is."""
    n, y, shift = x.shape[axis], x, 1
    while shift < n:
        cfg = [(0, 0, 0)] * x.ndim
        cfg[axis] = (-shift, shift, 0) if reverse else (shift, -shift, 0)
        moved = _lax.pad(y, init, cfg)
        y = _ops.map_computation(comp, [y, moved] if reverse else [moved, y])[0]
        shift *= 2
    return y


def _reduce_window(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
                   ) -> Sequence[Any]:
    """Window sums transpose to a window sum of the dilated, padded cotangent; max/min windows
    send each window's cotangent to the element it chose (select-and-scatter); running
    reductions and everything else are differentiated through a re-expression."""
    x, init = ops
    dims = inst.attrs["window"].dims
    comp = inst.called[0]
    kind = monoid_of(comp)
    fixed_init = init.inst.opcode is Opcode.CONSTANT
    if kind is Opcode.ADD and fixed_init:
        return _window_sum_transpose(x, ct, dims), None
    if kind in (Opcode.MAXIMUM, Opcode.MINIMUM) and fixed_init and all(
            d.window_dilation == 1 for d in dims):
        return _window_chooser(x, ct, dims, kind is Opcode.MAXIMUM), None
    running = _running_axis(x, dims)
    if running is not None and fixed_init:
        def scan(v: Tracer) -> list[Tracer]:
            return [_prefix_scan(comp, v, init, *running)]
        return vjp_of(scan, [x], [ct])[0], None
    return _tuple_reduce_window(inst, [out], ops, [ct])


def _tuple_reduce_window(inst: HloInstruction, elems: list[Tracer], ops: list[Tracer],
                         parts: list[Tracer | None]) -> Sequence[Any]:
    """Any (variadic) reduce-window: the VJP of `_windows_generic`."""
    n = len(ops) // 2
    dims = inst.attrs["window"].dims
    shape = elems[0].shape

    def fn(*args: Tracer) -> list[Tracer]:
        return _windows_generic(inst.called[0], dims, shape, args[:n], args[n:])

    return vjp_of(fn, ops, parts)


def _window_sum_transpose(x: Tracer, ct: Tracer, dims: Sequence[WindowDim]) -> Tracer:
    """jax's _reduce_window_sum_transpose_rule: pad the cotangent (interior: stride - 1) so
    every input element sees each window that covered it, then sum windows again with the
    base dilation as stride."""
    cfg = []
    for n, o, d in zip(x.shape, ct.shape, dims):
        k = _dilate(d.size, d.window_dilation)
        before = k - d.pad_low - 1
        cfg.append((before, _dilate(n, d.base_dilation) + k - 1 - _dilate(o, d.stride) - before,
                    d.stride - 1))
    padded = _lax.pad(ct, 0, cfg)
    return _lax.reduce_window(padded, _np().asarray(0, ct.dtype), Opcode.ADD,
                              [d.size for d in dims], [d.base_dilation for d in dims],
                              [(0, 0)] * x.ndim, None, [d.window_dilation for d in dims])


def _window_chooser(x: Tracer, ct: Tracer, dims: Sequence[WindowDim], is_max: bool) -> Tracer:
    """Max/min pooling transposed: select-and-scatter with add on x (base dilation made
    explicit with holes that are never chosen, as jax does)."""
    dilated = any(d.base_dilation != 1 for d in dims)
    xd = x
    if dilated:
        hole = -np.inf if is_max else np.inf
        if not x.ptype.is_float:
            info = np.iinfo(x.dtype)
            hole = info.min if is_max else info.max
        xd = _lax.pad(x, _np().asarray(hole, x.dtype),
                      [(0, 0, d.base_dilation - 1) for d in dims])
    window = Window(tuple(WindowDim(d.size, d.stride, d.pad_low, d.pad_high) for d in dims))
    res = _ops.select_and_scatter_add(ct, xd, is_max, window)
    if dilated:
        res = _lax.slice(res, [0] * x.ndim, list(res.shape), [d.base_dilation for d in dims])
    return res


def _select_and_scatter(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer
                        ) -> Sequence[Any]:
    """Linear in the source: its cotangent gathers, from every window, the cotangent at the
    chosen element; every output element starts from the init value."""
    select, scatter = inst.called
    if monoid_of(scatter) is not Opcode.ADD:
        raise UnsupportedOpError(f"xlc.grad: no derivative rule for a select-and-scatter "
                                 f"whose scatter is not an add ({inst.name})")
    x = ops[0]
    g = _np().astype(ct, x.dtype) if ct.ptype is not x.ptype else ct
    ct_src = _ops.select_and_gather_add(g, x, select, inst.attrs["window"])
    return None, ct_src, _np().sum(ct)


def _map(inst: HloInstruction, out: Tracer, ops: list[Tracer], ct: Tracer) -> Sequence[Any]:
    """HLO `map`: the VJP of its computation applied elementwise."""
    def fn(*args: Tracer) -> list[Tracer]:
        return _ops.map_computation(inst.called[0], args)

    return vjp_of(fn, ops, [ct])


RULES: dict[Opcode, Callable[..., Sequence[Any]]] = {
    Opcode.CONVOLUTION: _conv, Opcode.FFT: _fft, Opcode.REDUCE: _reduce,
    Opcode.REDUCE_WINDOW: _reduce_window, Opcode.SELECT_AND_SCATTER: _select_and_scatter,
    Opcode.MAP: _map,
}
"""Single-result rules of this module (merged into `autodiff_rules.RULES`)."""

TUPLE_RULES: dict[Opcode, Callable[..., Sequence[Any]]] = {
    Opcode.REDUCE: _variadic_reduce, Opcode.REDUCE_WINDOW: _tuple_reduce_window,
}
"""Multi-result rules of this module (merged into `autodiff_rules.TUPLE_RULES`)."""
