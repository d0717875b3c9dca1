"""Random HLO programs with `input_output_alias` (donated parameters) for the backend tests.

An extension of `tests/hlo_programs.py` (kept apart so that file stays small while other
generators grow there): the programs read their parameters with ops that read elements other
than the one they write (reverse, transpose, gather, a cumulative-sum reduce-window,
dynamic-update-slice), and on a share of them some results are io-aliased to parameters of the
same shape - the donated buffer becomes the output's storage, so a backend that writes an
output over a parameter still being read returns wrong numbers. Results include the
parameters themselves (`donate a; return f(a), a`) and swapped parameters.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from tests.hlo_programs import (
    TOLERANCE,
    Program,
    Value,
    _argument,
    _binary,
    _Builder,
    _dynamic_update_slice,
    _gather_rows,
    _reverse,
    _slice,
    _transpose,
    _unary,
)


def _cumsum(b: _Builder) -> None:
    """A cumulative sum along one dimension (reduce-window with a full-length window padded
    in front: what `jnp.cumsum` lowers to)."""
    x = b.pick(lambda v: len(v.dims) >= 1 and v.ty != "pred")
    if x is None:
        return
    d = b.draw(st.integers(0, len(x.dims) - 1))
    size = "x".join(str(n if k == d else 1) for k, n in enumerate(x.dims))
    pad = "x".join(f"{n - 1}_0" if k == d else "0_0" for k, n in enumerate(x.dims))
    init = b.emit(x.ty, (), "constant(0)")
    name = b.reducer("add", x.ty)
    b.emit(x.ty, x.dims, f"reduce-window({x.name}, {init.name}), "
                         f"window={{size={size} pad={pad}}}, to_apply={name}")


def _param_reader(b: _Builder) -> None:
    """One of the readers applied to a parameter (what aliasing must protect)."""
    step = b.draw(st.sampled_from(ALIAS_READERS))
    values = b.values
    b.values = list(b.params)
    try:
        step(b)
    finally:
        b.values = values + [v for v in b.values if v not in values]


ALIAS_READERS = (_reverse, _transpose, _gather_rows, _cumsum, _dynamic_update_slice)
"""Ops that read elements of their operand other than the one they write."""
ALIAS_STEPS = ALIAS_READERS + (_param_reader, _param_reader, _unary, _binary, _slice)
"""The steps of aliasing programs: readers, readers of parameters, elementwise ops."""


def _alias_header(draw: st.DrawFn, params: list[Value], outs: list[Value]) -> str:
    """A random `input_output_alias` attribute: each parameter aliased to at most one result
    of its shape, each result to at most one parameter, at least one pair when a result has a
    parameter's shape ("" when none has)."""
    pairs: list[tuple[int, int]] = []
    free = list(range(len(outs)))
    for k in draw(st.permutations(range(len(params)))):
        p = params[k]
        cands = [j for j in free if outs[j].ty == p.ty and outs[j].dims == p.dims]
        if not cands or (pairs and not draw(st.booleans())):
            continue
        j = draw(st.sampled_from(cands))
        free.remove(j)
        pairs.append((j, k))
    if not pairs:
        return ""
    body = ", ".join(f"{{{j}}}: ({k}, {{}}, may-alias)" for j, k in sorted(pairs))
    return f", input_output_alias={{ {body} }}"


@st.composite
def hlo_programs_with_aliasing(draw: st.DrawFn,
                               dtypes: tuple[str, ...] = ("f32", "f64", "s32", "s64"),
                               max_steps: int = 6, alias_share: float = 0.85) -> Program:
    """A random program over ALIAS_STEPS whose result holds up to three values of the
    parameters' shape (results of readers of the parameters, or a parameter itself) and the
    last value computed; with probability `alias_share` it has `input_output_alias` entries
    pairing parameters with results of their shape. Square shapes are frequent so transposes
    keep the shape (and can be aliased)."""
    ty = draw(st.sampled_from(dtypes))
    b = _Builder(draw, ty)
    rank = draw(st.integers(1, 3))
    if draw(st.booleans()):
        dims = (draw(st.integers(2, 6)),) * rank
    else:
        dims = tuple(draw(st.lists(st.integers(1, 7), min_size=rank, max_size=rank)))
    b.param(ty, dims)
    b.param(ty, dims)
    for _ in range(draw(st.integers(1, max_steps))):
        draw(st.sampled_from(ALIAS_STEPS))(b)
    same = [v for v in b.values if v.dims == dims and v.ty == ty]
    outs = draw(st.lists(st.sampled_from(same), min_size=1, max_size=3, unique=True))
    last = b.values[-1]
    if last not in outs:
        outs.append(last)
    header = _alias_header(draw, b.params, outs) if draw(st.floats(0, 1)) < alias_share else ""
    root = ", ".join(v.name for v in outs)
    rshape = ", ".join(v.shape for v in outs)
    text = (f"HloModule rnd_alias{header}\n" + "".join(b.reducers.values()) + "ENTRY e {\n"
            + "\n".join(b.lines) + f"\n  ROOT out = ({rshape}) tuple({root})\n}}")
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    tol = max((TOLERANCE.get(v.ty, 0.0) for v in b.values), default=0.0)
    return Program(text, [_argument(rng, p) for p in b.params], ty, tol)
