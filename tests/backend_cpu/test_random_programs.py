"""Random elementwise/data-movement HLO programs (hypothesis, several dtypes) compiled on CPU
match the reference evaluator."""
from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.backend_cpu.helpers import check
from tests.hlo_programs import (
    ASYNC_COPY_STEPS,
    WORKSPACE_STEPS,
    Program,
    _binary,
    _broadcast,
    _narrow_sum,
    _reduce,
    _transpose,
    _unary,
    hlo_programs,
)

FLOAT_UNARY = ["negate", "abs", "exponential", "tanh", "sine", "floor", "sqrt", "logistic"]
INT_UNARY = ["negate", "abs", "not", "popcnt"]
FLOAT_BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum"]
INT_BINARY = ["add", "subtract", "multiply", "divide", "remainder", "maximum", "and", "xor",
              "shift-right-logical"]
DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16,
          "bf16": ml_dtypes.bfloat16, "s8": np.int8, "s16": np.int16, "s32": np.int32,
          "s64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
          "u64": np.uint64}


@st.composite
def programs(draw: st.DrawFn) -> tuple[str, list[np.ndarray], str]:
    ty = draw(st.sampled_from(sorted(DTYPES)))
    is_float = ty[0] in "fb"
    dims = draw(st.lists(st.integers(1, 9), min_size=1, max_size=3))
    shape = f"{ty}[{','.join(map(str, dims))}]"
    lines = [f"  p0 = {shape} parameter(0)", f"  p1 = {shape} parameter(1)"]
    values = ["p0", "p1"]
    for k in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            op = draw(st.sampled_from(FLOAT_UNARY if is_float else INT_UNARY))
            a = draw(st.sampled_from(values))
            lines.append(f"  v{k} = {shape} {op}({a})")
        else:
            op = draw(st.sampled_from(FLOAT_BINARY if is_float else INT_BINARY))
            a, b = draw(st.sampled_from(values)), draw(st.sampled_from(values))
            lines.append(f"  v{k} = {shape} {op}({a}, {b})")
        values.append(f"v{k}")
    if len(dims) == 2 and draw(st.booleans()):
        tshape = f"{ty}[{dims[1]},{dims[0]}]"
        lines.append(f"  t = {tshape} transpose({values[-1]}), dimensions={{1,0}}")
        lines.append(f"  ROOT r = ({tshape}, {shape}) tuple(t, {values[-2]})")
    else:
        lines.append(f"  ROOT r = ({shape}) tuple({values[-1]})")
    text = "HloModule rnd\nENTRY e {\n" + "\n".join(lines) + "\n}"
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    if is_float:
        args = [(rng.standard_normal(dims) * 3).astype(DTYPES[ty]) for _ in range(2)]
    else:
        info = np.iinfo(DTYPES[ty])
        lo, hi = max(info.min, -1000), min(info.max, 1000)
        args = [rng.integers(lo, hi, dims, endpoint=True).astype(DTYPES[ty]) for _ in range(2)]
    return text, args, ty


@settings(max_examples=30, deadline=None)
@given(programs())
def test_random_elementwise_program_matches_evaluator(prog: tuple) -> None:
    text, args, ty = prog
    # chains of transcendentals amplify last-ulp differences (e.g. sine(exp(x)) near 50)
    tol = {"f16": 2e-3, "bf16": 2e-2}.get(ty, 2e-4)
    check(text, *args, rtol=tol, atol=tol)


@st.composite
def reduce_programs(draw: st.DrawFn) -> tuple[str, list[np.ndarray], str]:
    ty = draw(st.sampled_from(["f32", "f64", "s32", "s64", "u8"]))
    dims = draw(st.lists(st.integers(1, 12), min_size=1, max_size=3))
    rdims = sorted(draw(st.sets(st.integers(0, len(dims) - 1), min_size=1)))
    kept = [d for d in range(len(dims)) if d not in rdims]
    op = draw(st.sampled_from(["add", "maximum", "minimum", "multiply"]))
    init = {"add": "0", "multiply": "1", "maximum": "-inf" if ty[0] == "f" else "-100",
            "minimum": "inf" if ty[0] == "f" else "100"}[op]
    if ty == "u8" and op in ("maximum", "minimum"):
        init = "0" if op == "maximum" else "255"
    shape = f"{ty}[{','.join(map(str, dims))}]"
    out = f"{ty}[{','.join(str(dims[d]) for d in kept)}]"
    text = f"""HloModule rr
red {{
  a = {ty}[] parameter(0)
  b = {ty}[] parameter(1)
  ROOT r = {ty}[] {op}(a, b)
}}
ENTRY e {{
  x = {shape} parameter(0)
  n = {shape} negate(x)
  i = {ty}[] constant({init})
  ROOT r = {out} reduce(n, i), dimensions={{{','.join(map(str, rdims))}}}, to_apply=red
}}"""
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    if ty[0] == "f":
        x = rng.uniform(0.5, 1.5, dims).astype(DTYPES[ty])
    else:
        x = rng.integers(0, 4, dims).astype(DTYPES[ty])
    return text, [x], ty


@settings(max_examples=25, deadline=None)
@given(reduce_programs())
def test_random_reduce_program_matches_evaluator(prog: tuple) -> None:
    text, args, ty = prog
    check(text, *args, rtol=1e-4, atol=1e-4)


@settings(max_examples=60, deadline=None)
@given(hlo_programs())
def test_random_mixed_program_matches_evaluator(prog: Program) -> None:
    """Mixed programs (data movement, reductions, dots, converts, control of values through
    select) over every dtype compile and match the evaluator (exactly for integers)."""
    tol = prog.tolerance
    check(prog.text, *prog.args, rtol=tol, atol=tol)


@settings(max_examples=20, deadline=None)
@given(hlo_programs(big=True))
def test_random_large_program_matches_evaluator(prog: Program) -> None:
    """The same on arrays large enough for the vectorised, non-temporal-store and
    multi-threaded kernel paths."""
    check(prog.text, *prog.args, rtol=prog.tolerance, atol=prog.tolerance)


@settings(max_examples=20, deadline=None)
@given(hlo_programs(dtypes=("f32", "f64", "s32"), big=True, max_steps=5, steps=WORKSPACE_STEPS))
def test_random_programs_with_workspace_calls_match_evaluator(prog: Program) -> None:
    """Big programs with wide dots and sorts of long lines: the GEMM and sort kernels take
    their scratch from `__xlc$gemm` / `__xlc$sort` workspace outputs (gemm-workspace,
    sort-workspace passes)."""
    check(prog.text, *prog.args, rtol=prog.tolerance, atol=prog.tolerance)


@settings(max_examples=15, deadline=None)
@given(hlo_programs(dtypes=("f16", "bf16"), big=True, max_steps=5,
                    steps=(_narrow_sum, _narrow_sum, _unary, _binary, _broadcast, _transpose,
                           _reduce)))
def test_random_16bit_sum_program_matches_evaluator(prog: Program) -> None:
    """f16/bf16 add-reductions over up to 2**17 elements (issue 11 item 2: accumulated in 16
    bits they stall, bf16 at 256 for ones) accumulate in f32 as in the evaluator."""
    check(prog.text, *prog.args, rtol=prog.tolerance, atol=prog.tolerance)


@settings(max_examples=15, deadline=None)
@given(hlo_programs(dtypes=("f32", "s32", "f16"), max_steps=6, steps=ASYNC_COPY_STEPS))
def test_random_async_copy_program_matches_evaluator(prog: Program) -> None:
    """copy-start / copy-done pairs (run as copies on the CPU) among the other ops."""
    check(prog.text, *prog.args, rtol=prog.tolerance, atol=prog.tolerance)
