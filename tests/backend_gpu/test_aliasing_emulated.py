"""Donated (io-aliased) parameters on the GPU path, run in the host emulator and through the
runtime with the fake driver: a result written into a donated parameter's block must not
clobber values still to be read (issue 11 item 1, the GPU side of the hole)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.fake_driver import FakeDriver
from tests.backend_gpu.helpers import compile_text
from tests.hlo_programs import Program, bias_grad_programs
from tests.hlo_programs_aliasing import hlo_programs_with_aliasing
from xlc.backend_gpu import cuda
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.parser import parse_module

REVERSE = """HloModule rev, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY main {
  a = f32[64]{0} parameter(0)
  ROOT r = f32[64]{0} reverse(a), dimensions={0}
}
"""

ABS_AND_SELF = """HloModule jit_f, input_output_alias={ {0}: (0, {}, may-alias) }
ENTRY main {
  a = f32[64]{0} parameter(0)
  b = f32[64]{0} abs(a)
  ROOT t = (f32[64]{0}, f32[64]{0}) tuple(b, a)
}
"""

TRANSPOSE = """HloModule tr, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY main {
  a = f32[16,16]{1,0} parameter(0)
  ROOT t = f32[16,16]{1,0} transpose(a), dimensions={1,0}
}
"""


def _want(text: str, args: list[np.ndarray]) -> list[np.ndarray]:
    """The evaluator's results (f32 dots in FP32: compile dots at `highest` to compare)."""
    return [np.asarray(w) for w in flatten_result(evaluate(parse_module(text),
                                                           [a.copy() for a in args]))]


@pytest.mark.parametrize("streams", [1, 4])
@pytest.mark.parametrize("text", [REVERSE, ABS_AND_SELF, TRANSPOSE],
                         ids=["reverse", "abs_and_self", "transpose"])
def test_donated_parameter_through_the_runtime(text: str, streams: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the runtime (fake driver: argument binding of donated blocks, copies, events,
    kernels in the emulator). The reverse gave [63 ... 32 32 33 ... 63] before the fix."""
    exe = compile_text(text, gpu_streams=streams)
    monkeypatch.setattr(cuda, "_driver", FakeDriver(exe))
    monkeypatch.setattr(cuda, "_context", None)
    args = [-np.arange(np.prod(exe.parameters[0].dims), dtype=np.float32)
            .reshape(exe.parameters[0].dims)]
    got = exe.run([a.copy() for a in args])
    for g, w in zip(got, _want(text, args)):
        np.testing.assert_array_equal(g, w)


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(hlo_programs_with_aliasing(dtypes=("f32", "s32")))
def test_random_aliased_programs_in_the_emulator(prog: Program) -> None:
    exe = compile_text(prog.text, default_matmul_precision="highest")
    got = Emulator(exe).run([a.copy() for a in prog.args])
    want = _want(prog.text, prog.args)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=prog.tolerance, atol=prog.tolerance,
                                   err_msg=f"result {k} of\n{prog.text}")


@pytest.mark.parametrize("rows,cols,dims", [(48, 40, "0"), (40, 96, "1"), (33, 40, "0")])
def test_bias_gradient_fusion_writes_dz_over_dh_in_the_emulator(rows: int, cols: int,
                                                                 dims: str) -> None:
    """The GPU side of dz stored over dh in the bias gradient's fusion (column and row
    kernels): the buffers are shared and the emulated kernels match the evaluator."""
    from tests.backend_cpu.test_output_sharing import BIAS_GRAD

    text = BIAS_GRAD.format(r=rows, c=cols, dims=dims, kept=cols if dims == "0" else rows)
    exe = compile_text(text, default_matmul_precision="highest")   # FP32 dots: see _want
    fusion = next(i for i in exe.module.entry.instructions
                  if i.opcode.text == "fusion" and i.shape.is_tuple)
    dh = next(o for o in fusion.operands if o.name == "dh")
    assert exe.assignment.slice_of(fusion, (1,)) == exe.assignment.slice_of(dh)
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype(np.float32)
            for s in ((rows, 64), (64, cols), (rows, cols), (cols, 48))]
    got = Emulator(exe).run([a.copy() for a in args])
    for g, w in zip(got, _want(text, args)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@settings(max_examples=8, deadline=None)
@given(bias_grad_programs(small=True))
def test_random_bias_gradient_fusions_in_the_emulator(prog: tuple) -> None:
    text, args = prog
    exe = compile_text(text, default_matmul_precision="highest")
    got = Emulator(exe).run([a.copy() for a in args])
    for g, w in zip(got, _want(text, args)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
