"""Every simplification pass preserves numerics on every public corpus case (each pass alone and
the whole pipeline, verifier on after every pass), and on random elementwise / broadcast /
reshape / transpose / reduce programs (hypothesis)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import corpus_cases, requires_corpus
from tests.passes.filecheck import assert_same_numerics, flatten, parse
from xlc.hlo.attrs import Literal, SliceDim
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape
from xlc.options import CompileOptions
from xlc.passes import (
    AlgebraicSimplifier,
    CallInliner,
    CommonSubexpressionElimination,
    ConstantFolding,
    DeadCodeElimination,
    Pipeline,
    simplification_pipeline,
)

VERIFY = CompileOptions(verify=True)
SMALL_CASES = corpus_cases(include_benchmarks=False)
BENCH_CASES = [c for c in corpus_cases() if c not in SMALL_CASES]
PASSES = {
    "call-inliner": CallInliner, "algebraic-simplifier": AlgebraicSimplifier,
    "constant-folding": ConstantFolding, "cse": CommonSubexpressionElimination,
    "dce": DeadCodeElimination,
}


def _check_outputs(module: HloModule, case) -> None:
    from xlc.hlo.evaluator import evaluate

    got = flatten(evaluate(module, case.inputs))
    assert len(got) == len(case.outputs)
    for i, (g, w) in enumerate(zip(got, case.outputs)):
        assert g.shape == w.shape and g.dtype == w.dtype, (i, g.shape, g.dtype, w.shape, w.dtype)
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol, err_msg=f"out{i}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"out{i}")


@requires_corpus
@pytest.mark.parametrize("name", SMALL_CASES)
def test_corpus_case_simplification_pipeline(name):
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    module = parse(case.module_text)
    pipeline = simplification_pipeline(VERIFY)
    pipeline.run(module, VERIFY)
    assert not any(i.opcode is Opcode.CALL for i in module.instructions())
    _check_outputs(module, case)
    # a second run finds nothing left to do
    assert simplification_pipeline(VERIFY).run(module, VERIFY) is False


@requires_corpus
@pytest.mark.parametrize("pass_name", list(PASSES))
def test_each_pass_alone_on_every_corpus_case(pass_name):
    from corpus import load_case  # type: ignore[import-not-found]

    for name in SMALL_CASES:
        case = load_case(name)
        module = parse(case.module_text)
        Pipeline("corpus", [PASSES[pass_name]()]).run(module, VERIFY)
        _check_outputs(module, case)


@requires_corpus
@pytest.mark.parametrize("name", BENCH_CASES)
def test_benchmark_cases_simplify_and_verify(name):
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    module = parse(case.module_text)
    simplification_pipeline(VERIFY).run(module, VERIFY)
    assert not any(i.opcode is Opcode.CALL for i in module.instructions())


# ---- random programs ----------------------------------------------------------------------------

F32 = PrimitiveType.F32


def _scalar_comp(module: HloModule, op: Opcode) -> HloComputation:
    comp = module.new_computation(f"{op.text}_f32")
    s = Shape.array(F32, ())
    a, b = comp.add_parameter(0, s, "lhs"), comp.add_parameter(1, s, "rhs")
    comp.root = comp.add(op, s, (a, b), name="r")
    return comp


class _Builder:
    """Random program state: a pool of f32 values of a few shapes."""

    def __init__(self, draw, dims: tuple[int, int]):
        self.draw = draw
        self.m = HloModule("rand")
        self.reducers = {op: _scalar_comp(self.m, op) for op in (Opcode.ADD, Opcode.MAXIMUM)}
        self.c = self.m.new_computation("main", entry=True)
        self.dims = dims
        shape = Shape.array(F32, dims)
        self.pool: list[HloInstruction] = [self.c.add_parameter(i, shape, f"p{i}")
                                           for i in range(2)]

    def pick(self, shape: Shape | None = None) -> HloInstruction:
        cands = [v for v in self.pool if shape is None or v.shape.dims == shape.dims]
        return cands[self.draw(st.integers(0, len(cands) - 1))] if cands else self.splat(shape)

    def add(self, op: Opcode, shape: Shape, operands, attrs=None, called=()) -> HloInstruction:
        inst = self.c.add(op, shape, operands, attrs, called)
        self.pool.append(inst)
        return inst

    def scalar(self, value: float) -> HloInstruction:
        return self.c.add(Opcode.CONSTANT, Shape.array(F32, ()), (),
                          {"literal": Literal(np.asarray(value, np.float32))})

    def splat(self, shape: Shape | None) -> HloInstruction:
        assert shape is not None
        v = self.draw(st.sampled_from([0.0, 1.0, 2.0, 0.5, -3.0]))
        return self.c.add(Opcode.BROADCAST, shape, (self.scalar(v),), {"dimensions": ()})

    def step(self) -> None:
        kind = self.draw(st.sampled_from(["unary", "binary", "binary", "const", "reshape",
                                          "transpose", "reduce", "select", "convert", "dot",
                                          "negate2", "slice"]))
        x = self.pick()
        s = x.shape
        if kind == "unary":
            op = self.draw(st.sampled_from([Opcode.NEGATE, Opcode.ABS, Opcode.TANH, Opcode.EXP]))
            if op is Opcode.EXP:
                x = self.add(Opcode.TANH, s, (x,))
            self.add(op, s, (x,))
        elif kind in ("binary", "const"):
            op = self.draw(st.sampled_from([Opcode.ADD, Opcode.SUBTRACT, Opcode.MULTIPLY,
                                            Opcode.MAXIMUM, Opcode.MINIMUM, Opcode.DIVIDE]))
            y = self.splat(s) if kind == "const" or op is Opcode.DIVIDE else self.pick(s)
            if op is Opcode.DIVIDE and y.operands[0].attrs["literal"].array == 0:
                op = Opcode.MULTIPLY
            self.add(op, s, (x, y) if self.draw(st.booleans()) or op is Opcode.DIVIDE
                     else (y, x))
        elif kind == "reshape":
            n = s.num_elements
            options = [(n,), (1, n)] + [d for d in (self.dims, self.dims[::-1])
                                        if d[0] * d[1] == n]
            target = self.draw(st.sampled_from(options))
            self.add(Opcode.RESHAPE, s.with_dims(target), (x,))
        elif kind == "transpose" and s.rank == 2:
            self.add(Opcode.TRANSPOSE, s.with_dims(s.dims[::-1]), (x,), {"dimensions": (1, 0)})
        elif kind == "reduce" and s.rank >= 1:
            op = self.draw(st.sampled_from([Opcode.ADD, Opcode.MAXIMUM]))
            d = self.draw(st.integers(0, s.rank - 1))
            init = self.scalar(0.0 if op is Opcode.ADD else -np.inf)
            kept = tuple(i for i in range(s.rank) if i != d)
            r = self.add(Opcode.REDUCE, s.with_dims(tuple(s.dims[i] for i in kept)),
                         (x, init), {"dimensions": (d,)}, (self.reducers[op],))
            self.add(Opcode.BROADCAST, s, (r,), {"dimensions": kept})
        elif kind == "select":
            y = self.pick(s)
            p = self.c.add(Opcode.COMPARE, Shape.array(PrimitiveType.PRED, s.dims), (x, y),
                           {"direction": self.draw(st.sampled_from(["LT", "GE", "EQ"]))})
            self.add(Opcode.SELECT, s, (p, x, y) if self.draw(st.booleans()) else (p, x, x))
        elif kind == "dot":
            n = (s.num_elements,)
            a = self.c.add(Opcode.RESHAPE, s.with_dims(n), (x,))
            b = self.c.add(Opcode.RESHAPE, s.with_dims(n), (self.pick(s),))
            d = self.c.add(Opcode.DOT, s.with_dims(()), (a, b),
                           {"lhs_contracting_dims": (0,), "rhs_contracting_dims": (0,)})
            self.add(Opcode.BROADCAST, s, (d,), {"dimensions": ()})
        elif kind == "negate2":
            self.add(Opcode.NEGATE, s, (self.c.add(Opcode.NEGATE, s, (x,)),))
        elif kind == "slice" and s.rank >= 1:
            full = tuple(SliceDim(0, d) for d in s.dims)
            inner = self.c.add(Opcode.SLICE, s, (x,), {"slice": full})
            last = s.dims[-1]
            part = full[:-1] + (SliceDim(last - 1, last),)
            self.add(Opcode.SLICE, s.with_dims(s.dims[:-1] + (1,)), (inner,), {"slice": part})
        elif kind == "convert":
            wide = self.c.add(Opcode.CONVERT, s.with_type(PrimitiveType.F64), (x,))
            self.add(Opcode.CONVERT, s, (wide,))

    def finish(self) -> HloModule:
        outs = self.pool[-2:]
        self.c.root = self.c.add(Opcode.TUPLE, Shape.tuple_of([o.shape for o in outs]), outs)
        return self.m


@st.composite
def random_programs(draw) -> str:
    dims = (draw(st.sampled_from([1, 2, 3])), draw(st.sampled_from([1, 4])))
    b = _Builder(draw, dims)
    for _ in range(draw(st.integers(1, 12))):
        b.step()
    from xlc.hlo.printer import print_module

    return print_module(b.finish())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_programs(), st.integers(0, 2**16))
def test_simplification_preserves_numerics_on_random_programs(text, seed):
    before, after = parse(text), parse(text)
    simplification_pipeline(VERIFY).run(after, VERIFY)
    from tests.passes.filecheck import random_args

    assert_same_numerics(before, after, random_args(before, seed), rtol=1e-5, atol=1e-6)
