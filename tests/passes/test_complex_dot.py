"""ComplexDotExpander: complex dots become four real dots (the CPU's and GPU's GEMM kernels
then run them; neither had a complex dot). Checked against numpy and the evaluator, on the
pass alone, through the GPU emulator, on the CPU and through jit."""
from __future__ import annotations

import numpy as np
import pytest

import xlc
from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.helpers import compile_text
from xlc.hlo.evaluator import evaluate
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module
from xlc.hlo.verifier import verify_module
from xlc.passes.complex_dot import ComplexDotExpander

RNG = np.random.default_rng(8)

BATCHED = """
HloModule cdot
ENTRY e {
  a = @[2,5,3] parameter(0)
  b = @[2,4,5] parameter(1)
  ROOT d = @[2,3,4] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0},
    lhs_contracting_dims={1}, rhs_contracting_dims={2}
}
"""
"""A batched complex dot contracting the lhs's middle and the rhs's last dimension."""


def _complex(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


@pytest.mark.parametrize("ty, dtype, tol", [("c64", np.complex64, 1e-5),
                                            ("c128", np.complex128, 1e-12)])
def test_the_expansion_computes_the_complex_product(ty: str, dtype: type, tol: float) -> None:
    text = BATCHED.replace("@", ty)
    args = [_complex((2, 5, 3), dtype), _complex((2, 4, 5), dtype)]
    want = np.einsum("bkm,bnk->bmn", *args)
    module = parse_module(text)
    assert ComplexDotExpander().run(module)
    verify_module(module)
    entry = module.entry
    assert entry is not None and entry.root is not None
    dots = [i for i in entry.instructions if i.opcode is Opcode.DOT]
    assert len(dots) == 4 and all(not d.shape.element_type.is_complex for d in dots)
    assert entry.root.opcode is Opcode.COMPLEX and entry.root.name == "d"
    np.testing.assert_allclose(evaluate(module, args), want, rtol=tol, atol=tol)
    assert not ComplexDotExpander().run(module)   # nothing left to expand
    (got,) = Emulator(compile_text(text)).run(args)   # on the GPU: real GEMM kernels
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    cpu = xlc.compile(text, backend="cpu")   # on the CPU: the packed GEMM
    np.testing.assert_allclose(cpu(*args), want, rtol=tol, atol=tol)


def test_real_and_mixed_dots_are_left_alone() -> None:
    text = ("HloModule m\nENTRY e {\n  a = f32[2,3] parameter(0)\n  b = f32[3,2] parameter(1)\n"
            "  ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, "
            "rhs_contracting_dims={0}\n}\n")
    assert not ComplexDotExpander().run(parse_module(text))


def test_jit_complex_matmuls_run_as_gpu_kernels() -> None:
    import xlc.numpy as xnp

    f = xlc.jit(lambda a, b, w: xnp.abs(a @ b) @ w, backend="gpu")
    a, b = _complex((4, 6), np.complex64), _complex((6, 4), np.complex64)
    w = RNG.standard_normal((4, 3)).astype(np.float32)
    exe = f.lower(a, b, w).compile().executable()
    assert all(t.kind in ("sequential", "kernel") for t in exe.all_thunks())
    (got,) = Emulator(exe).run([a, b, w])
    np.testing.assert_allclose(got, np.abs(a @ b) @ w, rtol=1e-4, atol=1e-4)
