"""Dot precision (xlc.hlo.precision): read from XLA's HLO text, written by the frontend's
`precision=` arguments, kept through autodiff and CSE, and the compile option that sets the
least precision of every dot. The GPU side (TF32 vs FP32 kernels) is in
tests/backend_gpu/test_gemm_pipelined.py."""
from __future__ import annotations

import numpy as np
import pytest
import xlc.numpy as xnp

import xlc
from xlc import lax
from xlc.errors import ArgumentError
from xlc.hlo.parser import parse_module
from xlc.hlo.precision import dot_precision, level_of, precision_extra
from xlc.options import CompileOptions, parse_flags

X = np.ones((4, 8), np.float32)
W = np.ones((8, 3), np.float32)

DOT = """
HloModule m
ENTRY e {{
  a = f32[4,8] parameter(0)
  b = f32[8,3] parameter(1)
  ROOT d = f32[4,3] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}{extra}
}}"""


@pytest.mark.parametrize("extra,level", [
    ("", "default"),
    (", operand_precision={default,default}", "default"),
    (", operand_precision={high,default}", "high"),
    (", operand_precision={default,highest}", "highest"),
    (", operand_precision={HIGHEST,HIGHEST}", "highest"),
    (", algorithm=dot_f32_f32_f32", "highest"),
    (", algorithm=dot_tf32_tf32_f32", "high"),
])
def test_dot_precision_from_hlo_text(extra: str, level: str) -> None:
    mod = parse_module(DOT.format(extra=extra))
    assert dot_precision(mod.entry.root) == level
    # printed back unchanged
    assert extra.lstrip(", ") in mod.to_text()


def test_jax_precision_text_is_read() -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    for prec, level in ((jax.lax.Precision.HIGHEST, "highest"),
                        (jax.lax.Precision.DEFAULT, "default"),
                        (jax.lax.DotAlgorithmPreset.F32_F32_F32, "highest")):
        text = jax.jit(lambda x, w: jnp.dot(x, w, precision=prec)).lower(X, W).as_text(  # noqa: B023
            dialect="hlo")
        mod = parse_module(text)
        (dot,) = [i for i in mod.entry.instructions if i.opcode.text == "dot"]
        assert dot_precision(dot) == level


def test_level_names() -> None:
    assert [level_of(v) for v in (None, "HIGH", lax.Precision.HIGHEST, "float32",
                                  "tensorfloat32", "bfloat16")] == \
        ["default", "high", "highest", "highest", "high", "default"]
    with pytest.raises(ArgumentError, match=r"^dot: expected one of default, high, highest "
                                            r"\(or a lax.Precision\), got 'fast'$"):
        level_of("fast", "dot")
    with pytest.raises(ArgumentError, match=r"^dot: a precision pair needs 2 entries"):
        precision_extra(("high",), "dot")
    assert precision_extra(None) == precision_extra("default") == ()
    assert precision_extra(("highest", "high")) == (("operand_precision", "{highest,high}"),)


def _dots(f: object, *args: np.ndarray) -> list[str]:
    text = xlc.jit(f).lower(*args).as_text()  # type: ignore[arg-type]
    return [line for line in text.splitlines() if " dot(" in line]


def test_frontend_precision_arguments() -> None:
    (d,) = _dots(lambda x, w: lax.dot(x, w, precision=lax.Precision.HIGHEST), X, W)
    assert "operand_precision={highest,highest}" in d
    (d,) = _dots(lambda x, w: xnp.matmul(x, w, precision=("highest", "default")), X, W)
    assert "operand_precision={highest,default}" in d
    (d,) = _dots(lambda x, w: xnp.einsum("ij,jk->ik", x, w, precision="high"), X, W)
    assert "operand_precision={high,high}" in d
    (d,) = _dots(lambda x, w: x @ w, X, W)
    assert "operand_precision" not in d          # default: printed as XLA prints it
    with pytest.raises(xlc.XlcError, match="expected one of default, high, highest"):
        _dots(lambda x, w: lax.dot_general(x, w, (((1,), (0,)), ((), ())), precision="x"),
              X, W)


def test_gradient_dots_keep_the_precision() -> None:
    def loss(x: object, w: object) -> object:
        return xnp.sum(lax.dot(x, w, precision="highest"))

    dots = _dots(xlc.grad(loss, argnums=(0, 1)), X, W)
    assert len(dots) == 3 and all("operand_precision={highest,highest}" in d for d in dots)
    gx, gw = xlc.jit(xlc.grad(loss, argnums=(0, 1)))(X, W)
    np.testing.assert_allclose(gx, np.ones((4, 3)) @ W.T)
    np.testing.assert_allclose(gw, X.T @ np.ones((4, 3)))


def test_cse_keeps_dots_of_different_precision_apart() -> None:
    f = xlc.jit(lambda x, w: (lax.dot(x, w, precision="highest"), lax.dot(x, w),
                              lax.dot(x, w)))
    text = f.lower(X, W).compile().as_text()
    dots = [line for line in text.splitlines() if " dot(" in line]
    assert len(dots) == 2
    assert sum("operand_precision={highest,highest}" in d for d in dots) == 1


def test_default_matmul_precision_option() -> None:
    assert CompileOptions().default_matmul_precision == "default"
    assert parse_flags("--default-matmul-precision=highest") == \
        {"default_matmul_precision": "highest"}
    with pytest.raises(ArgumentError, match="default_matmul_precision"):
        CompileOptions().replace(default_matmul_precision="tf32")
    # part of the compile-cache key: a TF32 and an FP32 program are different code
    assert CompileOptions().cache_key() != \
        CompileOptions(default_matmul_precision="highest").cache_key()
