"""Convolution on CPU vs the evaluator: layouts, padding, strides, dilations, groups."""
from __future__ import annotations

import pytest

from tests.backend_cpu.helpers import check, conv_text, rand, shape_dims


@pytest.mark.parametrize("lhs,rhs,out,attrs", [
    ("f32[2,3,9,9]", "f32[4,3,3,3]", "f32[2,4,9,9]",
     "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01"),
    ("f32[2,9,8,3]", "f32[3,2,3,4]", "f32[2,4,4,4]",
     "window={size=3x2 stride=2x2 pad=0_1x0_0}, dim_labels=b01f_01io->b01f"),
    ("f32[1,4,7,7]", "f32[6,2,3,3]", "f32[1,6,5,5]",
     "window={size=3x3 pad=1_1x1_1 rhs_dilate=2x2}, dim_labels=bf01_oi01->bf01, "
     "feature_group_count=2"),
    ("f32[1,2,5,5]", "f32[3,2,2,2]", "f32[1,3,10,10]",
     "window={size=2x2 pad=1_1x1_1 lhs_dilate=2x2}, dim_labels=bf01_oi01->bf01"),
    ("f32[4,2,6]", "f32[2,2,3]", "f32[2,2,4]",
     "window={size=3}, dim_labels=bf0_oi0->bf0, batch_group_count=2"),
])
def test_convolution(lhs: str, rhs: str, out: str, attrs: str) -> None:
    check(conv_text(lhs, rhs, out, attrs), rand(*shape_dims(lhs)),
          rand(*shape_dims(rhs), seed=3), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("lhs,rhs,out,attrs", [
    # NCHW / OIHW, same padding
    ("f32[2,3,9,9]", "f32[4,3,3,3]", "f32[2,4,9,9]",
     "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01"),
    # NHWC / HWIO, stride 2, asymmetric padding
    ("f32[2,9,8,3]", "f32[3,2,3,4]", "f32[2,4,4,4]",
     "window={size=3x2 stride=2x2 pad=0_1x0_0}, dim_labels=b01f_01io->b01f"),
    # window dilation, negative (cropping) padding, f64
    ("f64[1,2,11,10]", "f64[5,2,3,2]", "f64[1,5,7,6]",
     "window={size=3x2 pad=-1_1x0_-1 rhs_dilate=2x3}, dim_labels=bf01_oi01->bf01"),
    # 1-D and 3-D, output in yet another order
    ("f32[3,5,20]", "f32[7,5,4]", "f32[3,7,17]", "window={size=4}, dim_labels=bf0_oi0->bf0"),
    ("f32[2,4,4,4,3]", "f32[2,2,2,3,6]", "f32[6,2,3,3,3]",
     "window={size=2x2x2}, dim_labels=b012f_012io->fb012"),
    # a 1x1 convolution: a plain matrix product
    ("f32[4,16,7,7]", "f32[8,16,1,1]", "f32[4,8,7,7]",
     "window={size=1x1}, dim_labels=bf01_oi01->bf01"),
])
def test_convolution_runs_as_patches_times_kernel(lhs: str, rhs: str, out: str,
                                                  attrs: str) -> None:
    """The CPU pipeline lowers these to patches @ kernel (no convolution left) with the
    evaluator's values."""
    from xlc.backend_cpu import compile_cpu
    from xlc.hlo.opcodes import Opcode
    from xlc.hlo.parser import parse_module

    text = conv_text(lhs, rhs, out, attrs)
    exe = compile_cpu(parse_module(text))
    ops = {i.opcode for c in exe.module.computations for i in c.instructions}
    assert Opcode.CONVOLUTION not in ops and Opcode.DOT in ops
    dt = "float64" if lhs.startswith("f64") else "float32"
    check(text, rand(*shape_dims(lhs), dtype=dt), rand(*shape_dims(rhs), seed=3, dtype=dt),
          rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("attrs,reason", [
    ("window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01, feature_group_count=2",
     "feature groups"),
    ("window={size=2x2 pad=1_1x1_1 rhs_reversal=1x0}, dim_labels=bf01_oi01->bf01",
     "window reversal"),
])
def test_convolutions_the_lowering_leaves_alone(attrs: str, reason: str) -> None:
    from xlc.hlo.parser import parse_module
    from xlc.passes.conv_to_dot import ConvToDot

    out = "f32[1,4,7,7]" if "feature" in reason else "f32[1,4,8,8]"
    rhs = "f32[4,1,3,3]" if "feature" in reason else "f32[4,2,2,2]"
    m = parse_module(conv_text("f32[1,2,7,7]", rhs, out, attrs))
    assert ConvToDot().run(m) is False, reason


def test_huge_patch_matrices_run_one_position_per_dot(monkeypatch: pytest.MonkeyPatch) -> None:
    """A patch matrix over MAX_PATCH_BYTES is not built: smaller groups of window positions
    (here one per dot) replace it, not the direct emitter (tests/passes/test_conv_algorithms.py
    has the algorithms and their choice)."""
    from xlc.hlo.opcodes import Opcode
    from xlc.hlo.parser import parse_module
    from xlc.passes import conv_to_dot

    text = conv_text("f32[2,3,9,9]", "f32[4,3,3,3]", "f32[2,4,9,9]",
                      "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01")
    monkeypatch.setattr(conv_to_dot, "MAX_PATCH_BYTES", 1)
    m = parse_module(text)
    assert conv_to_dot.ConvToDot().run(m) is True
    assert m.entry is not None
    assert sum(1 for i in m.entry.instructions if i.opcode is Opcode.DOT) == 9
    check(text, rand(2, 3, 9, 9), rand(4, 3, 3, 3, seed=3), rtol=1e-4, atol=1e-4)
