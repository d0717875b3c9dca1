"""Random HLO programs (the CPU backend's hypothesis strategies: elementwise chains over several
dtypes, reductions over random dimension sets; and, where `tests/hlo_programs.py` exists, mixed
programs over many opcodes and every dtype) compiled for the GPU and run in the host emulator
match the reference evaluator. The `gpu` variants run them on the device."""
from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.backend_cpu.test_random_programs import programs, reduce_programs
from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.helpers import compile_text
from tests.hlo_programs import Program, _binary, _tensor_core_dot, _transpose, _unary, hlo_programs
from xlc.errors import XlcError
from xlc.hlo.attrs import Literal
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module
from xlc.hlo.shape import PrimitiveType, Shape


def _gpu_available() -> bool:
    try:
        from xlc.backend_gpu.cuda import primary_context

        primary_context()
    except XlcError:
        return False
    return True


RUNNERS = ["emulator", pytest.param("gpu", marks=[
    pytest.mark.gpu, pytest.mark.skipif(not _gpu_available(),
                                        reason="no CUDA device available (GPU + cuda-python)")])]
HAVE_MIXED = importlib.util.find_spec("tests.hlo_programs") is not None


_TRIG = re.compile(r"^\s*\S+ = \S+ (?:sine|cosine|tan)\((\w+)\)", re.M)


def _trig_in_range(text: str, args: list[np.ndarray]) -> bool:
    """Whether every sine/cosine/tan operand stays within |x| <= 1e4. Beyond, sin/cos/tan are
    accurate (Payne-Hanek), but an operand's own last-ulp error, e.g. from exp in
    sine(exp(x * x)), moves a huge argument by whole periods, so no tolerance can hold."""
    names = sorted(set(_TRIG.findall(text)))
    if not names:
        return True
    shapes = [re.search(rf"^\s*{n} = (\S+) ", text, re.M).group(1)  # type: ignore[union-attr]
              for n in names]
    head, entry = text.split("ENTRY", 1)
    probe = head + "ENTRY" + re.sub(r"^\s*ROOT .*$", f"  ROOT probe = ({', '.join(shapes)}) "
                                    f"tuple({', '.join(names)})", entry, flags=re.M)
    with np.errstate(all="ignore"):
        values = evaluate(parse_module(probe), list(args))
    return all(np.all(~np.isfinite(v) | (np.abs(np.asarray(v, np.float64)) <= 1e4))
               for v in values)


def _check(text: str, args: list[np.ndarray], tol: float, runner: str) -> None:
    assume(_trig_in_range(text, args))
    # f32 dots in FP32, as the evaluator computes them (TF32: test_gemm_pipelined.py)
    exe = compile_text(text, default_matmul_precision="highest")
    got = exe.run(list(args)) if runner == "gpu" else Emulator(exe).run(list(args))
    want = evaluate(parse_module(text), list(args))
    want = list(want) if isinstance(want, tuple) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        if g.dtype.kind == "f" or g.dtype.name == "bfloat16":
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol,
                                       atol=tol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("runner", RUNNERS)
@settings(max_examples=40, deadline=None)
@given(prog=programs())
def test_random_elementwise_program_on_the_gpu_path(prog: tuple, runner: str) -> None:
    text, args, ty = prog
    _check(text, args, {"f16": 2e-3, "bf16": 2e-2}.get(ty, 2e-4), runner)


@pytest.mark.parametrize("runner", RUNNERS)
@settings(max_examples=30, deadline=None)
@given(prog=reduce_programs())
def test_random_reduction_on_the_gpu_path(prog: tuple, runner: str) -> None:
    text, args, ty = prog
    _check(text, args, 1e-5, runner)


def _mixed() -> st.SearchStrategy:
    if not HAVE_MIXED:
        return st.nothing()
    from tests.hlo_programs import hlo_programs

    return hlo_programs()


@pytest.mark.skipif(not HAVE_MIXED, reason="tests/hlo_programs.py (mixed programs) missing")
@pytest.mark.parametrize("runner", RUNNERS)
@settings(max_examples=60, deadline=None)
@given(prog=_mixed())
def test_random_mixed_program_on_the_gpu_path(prog: object, runner: str) -> None:
    """Data movement, reductions, dots, converts and selects over every dtype."""
    _check(prog.text, prog.args, prog.tolerance, runner)  # type: ignore[attr-defined]


def tf32_reference(text: str) -> HloModule:
    """`text` with every f32 dot's operands rounded to TF32 first, as `cvt.rna.tf32.f32`
    does for finite values (to nearest, ties away from zero: add half a TF32 ulp to the bits,
    clear the 13 low ones): what the GPU computes at DEFAULT precision, up to the order of
    the f32 sums."""
    mod = parse_module(text)
    for comp in mod.computations:
        for inst in list(comp.instructions):
            if inst.opcode is not Opcode.DOT or \
                    inst.shape.element_type is not PrimitiveType.F32:
                continue
            inst.set_operands([_round_tf32(comp, op) for op in inst.operands])
        comp.sort_post_order()
    return mod


def _round_tf32(comp: HloComputation, x: HloInstruction) -> HloInstruction:
    u32 = x.shape.with_type(PrimitiveType.U32)

    def splat(v: int) -> HloInstruction:
        c = comp.add(Opcode.CONSTANT, Shape.array(PrimitiveType.U32, ()), (),
                     {"literal": Literal(np.uint32(v))})
        return comp.add(Opcode.BROADCAST, u32, (c,), {"dimensions": ()})
    bits = comp.add(Opcode.BITCAST_CONVERT, u32, (x,))
    up = comp.add(Opcode.ADD, u32, (bits, splat(0x1000)))
    cut = comp.add(Opcode.AND, u32, (up, splat(0xFFFFE000)))
    return comp.add(Opcode.BITCAST_CONVERT, x.shape, (cut,))


@settings(max_examples=15, deadline=None)
@given(prog=hlo_programs(dtypes=("f32",), steps=(_tensor_core_dot, _tensor_core_dot, _unary,
                                                 _binary, _transpose), max_steps=6))
def test_random_f32_dots_in_tf32(prog: Program) -> None:
    """Random f32 programs whose dots take the TF32 tensor-core kernel (compiled at DEFAULT
    precision), against the evaluator run on TF32-rounded dot operands."""
    exe = compile_text(prog.text)
    dots = [i for c in exe.module.computations for i in c.instructions
            if i.opcode is Opcode.DOT]
    assert ("m16n8k8.row.col.f32.tf32" in exe.ptx) == bool(dots)   # every dot in TF32
    got = Emulator(exe).run(list(prog.args))
    want = flatten_result(evaluate(tf32_reference(prog.text), list(prog.args)))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                   rtol=prog.tolerance, atol=prog.tolerance, err_msg=prog.text)
