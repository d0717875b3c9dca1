"""Every loop-style fusion in the corpus's XLA-optimized HLO whose instructions all have an
elemental form is compiled through ElementalIrEmitter and compared with the evaluator."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from llvmlite import ir

from tests.conftest import corpus_cases, requires_corpus
from xlc.backend_cpu import jit
from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import (
    ElementalIrEmitter,
    has_elemental_ir_rule,
    linear_to_multi,
    multi_to_linear,
)
from xlc.hlo.evaluator import evaluate_computation
from xlc.hlo.ir import HloComputation
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module
from xlc.hlo.shape import Shape


def _eligible(fc: HloComputation) -> bool:
    if fc.root is None or fc.root.shape.is_tuple:
        return False
    if any(p.shape.is_tuple for p in fc.parameters):
        return False
    for inst in fc.instructions:
        if not has_elemental_ir_rule(inst.opcode):
            return False
        if inst.opcode is Opcode.CONSTANT and inst.attrs["literal"].elided:
            return False
    return True


def _physical(arr: np.ndarray, shape: Shape) -> np.ndarray:
    m2m = shape.layout.minor_to_major if shape.layout else tuple(range(arr.ndim - 1, -1, -1))
    return np.ascontiguousarray(arr.transpose(list(reversed(m2m))))


def _logical(buf: np.ndarray, shape: Shape) -> np.ndarray:
    m2m = shape.layout.minor_to_major if shape.layout else tuple(
        range(len(shape.dims) - 1, -1, -1))
    inv = np.argsort(list(reversed(m2m)))
    return buf.reshape([shape.dims[d] for d in reversed(m2m)]).transpose(inv)


def _emit(mod: ir.Module, sym: str, fc: HloComputation) -> None:
    fn = ir.Function(mod, ir.FunctionType(lu.VOID, [lu.PTR] * (1 + len(fc.parameters))),
                     name=sym)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    shapes = {p.parameter_number: p.shape for p in fc.parameters}

    def read_param(n: int, index: list[ir.Value]) -> ir.Value:
        s = shapes[n]
        return lu.load_element(b, fn.args[1 + n], multi_to_linear(b, index, s), s.element_type)

    root = fc.root
    with lu.for_range(b, root.shape.num_elements) as i:
        v = ElementalIrEmitter(b, read_param).generate(root, linear_to_multi(b, i, root.shape))
        lu.store_element(b, v, fn.args[0], i, root.shape.element_type)
    b.ret_void()


def _random(shape: Shape, rng: np.random.Generator) -> np.ndarray:
    et = shape.element_type
    if et.is_float:
        return (rng.standard_normal(shape.dims) * 2).astype(shape.dtype)
    if et.is_integer:
        return rng.integers(-40 if et.is_signed_int else 0, 40, size=shape.dims).astype(
            shape.dtype)
    return rng.integers(0, 2, size=shape.dims).astype(bool)


@requires_corpus
@pytest.mark.parametrize("case", corpus_cases(include_benchmarks=True))
def test_corpus_loop_fusions(case: str) -> None:
    from corpus import CASES  # type: ignore[import-not-found]

    text = (CASES / case / "optimized.hlo").read_text()
    module = parse_module(text)
    fusions = [inst for comp in module.computations for inst in comp.instructions
               if inst.opcode is Opcode.FUSION and _eligible(inst.fused_computation)]
    if not fusions:
        pytest.skip("no fully elemental fusion")
    big = [f for f in fusions if f.shape.num_elements > 1 << 18]
    fusions = [f for f in fusions if f not in big] + big[:1]  # keep benchmark cases quick
    name = lu.unique_symbol(f"corpus_{case}")
    mod = lu.new_module(name)
    syms = []
    for k, f in enumerate(fusions):
        syms.append(f"{name}_{k}")
        _emit(mod, syms[-1], f.fused_computation)
    jit.compile_module(mod, name)
    rng = np.random.default_rng(0)
    for f, sym in zip(fusions, syms):
        fc = f.fused_computation
        args = [_random(p.shape, rng) for p in fc.parameters]
        with np.errstate(all="ignore"):
            want = np.asarray(evaluate_computation(fc, args))
        out = np.empty(fc.root.shape.num_elements, fc.root.shape.dtype)
        bufs = [_physical(a, p.shape) for a, p in zip(args, fc.parameters)]
        ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (1 + len(bufs))))(
            jit.jit_engine().address(sym))(out.ctypes.data, *[x.ctypes.data for x in bufs])
        got = _logical(out, fc.root.shape)
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=3e-5, atol=1e-6, equal_nan=True,
                                       err_msg=f"{case}: fusion {f.name}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{case}: fusion {f.name}")
