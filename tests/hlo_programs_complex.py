"""Random HLO programs the main generator (`tests/hlo_programs.py`) lacks, kept apart so that
file stays small while other generators grow there:

- `complex_programs`: c64/c128 elementwise programs with complex constants written as XLA
  prints them (`(re, im)` per element, scalars and arrays), `complex(re, im)` from float
  parts, `real`/`imag`/`abs` back to floats, compares and selects, and complex dots over the
  last dimension (extra outputs; the backends run them as four real dots). With
  `transcendental=True` some programs also use an op the native backends have no complex rule
  for (`exponential`, `sqrt`, `power`, ...): the tests then expect an UnsupportedOpError
  from the CPU compile (the GPU runs those on the host), while the evaluator and the
  interpreter still agree.
- `recursive_programs`: negative tests: modules whose call graph has a cycle (a computation
  calling itself, or 2-3 computations calling each other, through `call`, a `while` body or a
  `conditional` branch); the verifier must reject every one of them (they used to hang the
  compiler).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from tests.hlo_programs import Program, Value, _Builder, shape_text

COMPLEX = {"c64": (np.complex64, "f32"), "c128": (np.complex128, "f64")}
SUPPORTED_UNARY = ("negate",)
SUPPORTED_BINARY = ("add", "subtract", "multiply", "divide")
UNSUPPORTED = ("exponential", "log", "sqrt", "tanh", "sine", "power")
"""Complex ops the CPU and GPU elemental emitters have no rule for (XLA has them)."""


def _literal(draw: st.DrawFn, n: int) -> str:
    """n complex elements as XLA prints them: `(1.5, -2)`."""
    parts = st.sampled_from([0.0, -0.0, 1.0, -1.5, 0.25, 2.0, 3.5, -0.125])
    return ", ".join(f"({draw(parts):g}, {draw(parts):g})" for _ in range(n))


def _constant(b: _Builder, dims: tuple[int, ...]) -> Value:
    """A complex constant: a scalar broadcast to `dims`, or a full rank-1 literal."""
    ty = b.ty
    if len(dims) == 1 and b.draw(st.booleans()):
        return b.emit(ty, dims, f"constant({{{_literal(b.draw, dims[0])}}})")
    s = b.emit(ty, (), f"constant({_literal(b.draw, 1)})")
    return b.emit(ty, dims, f"broadcast({s.name}), dimensions={{}}")


def _complex_step(b: _Builder, dims: tuple[int, ...], unsupported: list[str] | None,
                  dots: list[Value]) -> None:
    ty, part = b.ty, COMPLEX[b.ty][1]
    cvals = [v for v in b.values if v.ty == ty and v.dims == dims]
    kind = b.draw(st.sampled_from(["unary", "binary", "binary", "constant", "parts", "select",
                                   "dot", "unsupported"]))
    if kind == "unary":
        b.emit(ty, dims, f"negate({b.draw(st.sampled_from(cvals)).name})")
    elif kind == "binary":
        x, y = b.draw(st.sampled_from(cvals)), b.draw(st.sampled_from(cvals))
        b.emit(ty, dims, f"{b.draw(st.sampled_from(SUPPORTED_BINARY))}({x.name}, {y.name})")
    elif kind == "constant":
        c = _constant(b, dims)
        b.emit(ty, dims, f"multiply({b.draw(st.sampled_from(cvals)).name}, {c.name})")
    elif kind == "parts":  # to floats and back: complex(real(x) + |y|, imag(x))
        x, y = b.draw(st.sampled_from(cvals)), b.draw(st.sampled_from(cvals))
        re = b.emit(part, dims, f"real({x.name})")
        im = b.emit(part, dims, f"imag({x.name})")
        mag = b.emit(part, dims, f"abs({y.name})")
        s = b.emit(part, dims, f"add({re.name}, {mag.name})")
        b.emit(ty, dims, f"complex({s.name}, {im.name})")
    elif kind == "dot":  # x . y over the last dimension: c[m,m] (rank 2) or c[] (rank 1)
        x, y = b.draw(st.sampled_from(cvals)), b.draw(st.sampled_from(cvals))
        last = len(dims) - 1
        dots.append(b.emit(ty, dims[:-1] * 2, f"dot({x.name}, {y.name}), "
                           f"lhs_contracting_dims={{{last}}}, rhs_contracting_dims={{{last}}}"))
    elif kind == "select":
        x, y = b.draw(st.sampled_from(cvals)), b.draw(st.sampled_from(cvals))
        p = b.emit("pred", dims, f"compare({x.name}, {y.name}), direction=NE")
        b.emit(ty, dims, f"select({p.name}, {x.name}, {y.name})")
    elif unsupported is not None and b.draw(st.booleans()):
        op = b.draw(st.sampled_from(UNSUPPORTED))
        x = b.draw(st.sampled_from(cvals))
        args = f"{x.name}, {x.name}" if op == "power" else x.name
        v = b.emit(ty, dims, f"{op}({args})")
        unsupported.append(v.name)


@dataclass
class ComplexProgram(Program):
    """A complex program; `unsupported` names the values computed by ops the CPU/GPU have no
    complex rule for (all live: they are outputs), so compiling must raise UnsupportedOpError
    `no elemental generator for '<op>' on <ty> (<one of them>)`; empty when the backends run
    it."""

    unsupported: tuple[str, ...] = ()


@st.composite
def complex_programs(draw: st.DrawFn, max_steps: int = 6,
                     transcendental: bool = False) -> ComplexProgram:
    """A random c64/c128 elementwise program with complex constants; the root is a tuple of the
    last complex value and a float value derived from it (`abs`)."""
    ty = draw(st.sampled_from(sorted(COMPLEX)))
    dims = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=2)))
    b = _Builder(draw, ty)
    b.param(ty, dims)
    b.param(ty, dims)
    unsupported: list[str] = []
    dots: list[Value] = []
    c = _constant(b, dims)  # every program has a complex constant
    b.emit(ty, dims, f"add({b.params[0].name}, {c.name})")
    for _ in range(draw(st.integers(1, max_steps))):
        _complex_step(b, dims, unsupported if transcendental else None, dots)
    last = [v for v in b.values if v.ty == ty and v.dims == dims][-1]
    mag = b.emit(COMPLEX[ty][1], dims, f"abs({last.name})")
    outs = [last, mag] + [v for v in b.values if v.name in unsupported and v is not last] + dots
    text = ("HloModule cplx\nENTRY e {\n" + "\n".join(b.lines) +
            f"\n  ROOT out = ({', '.join(v.shape for v in outs)}) "
            f"tuple({', '.join(v.name for v in outs)})\n}}")
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    dt = COMPLEX[ty][0]
    args = [(rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dt)
            for _ in b.params]
    return ComplexProgram(text, args, ty, 1e-4 if ty == "c64" else 1e-10,
                          tuple(unsupported))


# ---- recursive calls (negative tests) --------------------------------------------------------
def _caller(kind: str, name: str, callee: str, shape: str) -> list[str]:
    """Lines of computation `name` (one `shape` parameter) that reach `callee` through `kind`."""
    head = [f"{name} {{", f"  p = {shape} parameter(0)"]
    if kind == "call":
        body = [f"  n = {shape} negate(p)", f"  ROOT c = {shape} call(n), to_apply={callee}"]
    elif kind == "while":
        body = [f"  t = ({shape}) tuple(p)",
                f"  w = ({shape}) while(t), condition={name}_cond, body={name}_body",
                f"  ROOT r = {shape} get-tuple-element(w), index=0"]
        cond = [f"{name}_cond {{", f"  s = ({shape}) parameter(0)",
                "  ROOT f = pred[] constant(false)", "}"]
        loop = [f"{name}_body {{", f"  s = ({shape}) parameter(0)",
                f"  v = {shape} get-tuple-element(s), index=0",
                f"  c = {shape} call(v), to_apply={callee}",
                f"  ROOT t = ({shape}) tuple(c)", "}"]
        return cond + loop + head + body + ["}"]
    else:  # conditional: branch 0 recurses, branch 1 is the identity
        body = ["  k = pred[] constant(true)",
                f"  ROOT c = {shape} conditional(k, p, p), true_computation={callee}, "
                f"false_computation={name}_id"]
        ident = [f"{name}_id {{", f"  q = {shape} parameter(0)", f"  ROOT r = {shape} copy(q)",
                 "}"]
        return ident + head + body + ["}"]
    return head + body + ["}"]


@dataclass
class RecursiveProgram:
    """A module whose call graph has the cycle `cycle` (computation names, first repeated)."""

    text: str
    cycle: list[str]


@st.composite
def recursive_programs(draw: st.DrawFn) -> RecursiveProgram:
    """A module with a call-graph cycle of 1 to 3 computations, each reaching the next through
    `call`, a `while` body or a `conditional` branch; the entry calls into the cycle."""
    n = draw(st.integers(1, 3))
    names = [f"f{i}" for i in range(n)]
    shape = shape_text(draw(st.sampled_from(["f32", "s32", "c64"])),
                       tuple(draw(st.lists(st.integers(1, 4), max_size=2))))
    lines: list[str] = ["HloModule recursive"]
    for i, name in enumerate(names):
        kind = draw(st.sampled_from(["call", "while", "conditional"]))
        lines += _caller(kind, name, names[(i + 1) % n], shape)
    lines += ["ENTRY main {", f"  x = {shape} parameter(0)",
              f"  ROOT r = {shape} call(x), to_apply={names[0]}", "}"]
    return RecursiveProgram("\n".join(lines), names + [names[0]])
