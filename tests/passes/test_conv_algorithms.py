"""ConvToDot's algorithms (im2col, groups of window positions, one GEMM per position) against
the evaluator and the CPU backend, the cost model's choice with and without a memory limit,
and the temp bytes each one leaves in the buffer assignment."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.backend_cpu.helpers import conv_text, rand, shape_dims
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.ir import HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module
from xlc.hlo.verifier import verify_module
from xlc.options import default_options
from xlc.passes import conv_to_dot
from xlc.passes.conv_lowering import (
    BATCH_FEATURE,
    FEATURE_FIRST,
    FEATURE_LAST,
    TRANSPOSED,
    dot_form,
    geometry,
)
from xlc.passes.conv_to_dot import ConvToDot


def _conv(module: HloModule) -> HloInstruction:
    assert module.entry is not None
    return next(i for i in module.entry.instructions if i.opcode is Opcode.CONVOLUTION)


def _args(lhs: str, rhs: str) -> list[np.ndarray]:
    dt = "float64" if lhs.startswith("f64") else "float32"
    return [rand(*shape_dims(lhs), dtype=dt), rand(*shape_dims(rhs), seed=3, dtype=dt)]


def _tol(lhs: str) -> float:
    """rtol = atol for the dtype of `lhs`."""
    return 1e-10 if lhs.startswith("f64") else 1e-4


CONVS = [
    # NCHW / OIHW, same padding, batch 2 (batch-feature form)
    ("f32[2,3,9,9]", "f32[4,3,3,3]", "f32[2,4,9,9]",
     "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01"),
    # NHWC / HWIO, stride 2, asymmetric padding (feature-last form)
    ("f32[2,9,8,3]", "f32[3,2,3,4]", "f32[2,4,4,4]",
     "window={size=3x2 stride=2x2 pad=0_1x0_0}, dim_labels=b01f_01io->b01f"),
    # window dilation, negative (cropping) padding, f64, batch 1
    ("f64[1,2,11,10]", "f64[5,2,3,2]", "f64[1,5,7,6]",
     "window={size=3x2 pad=-1_1x0_-1 rhs_dilate=2x3}, dim_labels=bf01_oi01->bf01"),
    # 1-D, f64, stride and padding
    ("f64[3,20,5]", "f64[4,5,7]", "f64[3,10,7]",
     "window={size=4 stride=2 pad=2_1}, dim_labels=b0f_0io->b0f"),
    # 3-D, output feature first
    ("f32[2,4,4,4,3]", "f32[2,2,2,3,6]", "f32[6,2,3,3,3]",
     "window={size=2x2x2}, dim_labels=b012f_012io->fb012"),
    # spatial dims permuted in the output, feature in the middle (transposed form)
    ("f32[2,6,5,3]", "f32[3,2,3,4]", "f32[4,2,4,5]",
     "window={size=3x2 pad=1_0x0_0}, dim_labels=b01f_01io->1bf0"),
    # base dilation (a strided convolution's input gradient) with window dilation, io kernel
    ("f32[2,3,4,4]", "f32[3,5,3,3]", "f32[2,5,8,7]",
     "window={size=3x3 pad=2_1x2_-1 lhs_dilate=2x3 rhs_dilate=1x2}, "
     "dim_labels=bf01_io01->bf01"),
    # NCHW whose kernel repeated per batch element would outweigh the output (transposed)
    ("f32[3,6,3,3]", "f32[5,6,2,2]", "f32[3,5,1,1]",
     "window={size=2x2 stride=2x2}, dim_labels=bf01_oi01->bf01"),
]


@pytest.mark.parametrize("lhs,rhs,out,attrs", CONVS)
def test_every_group_size_matches_the_evaluator(lhs: str, rhs: str, out: str,
                                                attrs: str) -> None:
    text = conv_text(lhs, rhs, out, attrs)
    args = _args(lhs, rhs)
    want = flatten_result(evaluate(parse_module(text), args))[0]
    positions = geometry(_conv(parse_module(text))).positions
    for group in sorted({1, 2, positions}):
        m = parse_module(text)
        assert ConvToDot(group=group).run(m) is True
        verify_module(m)
        assert m.entry is not None
        ops = [i.opcode for i in m.entry.instructions]
        assert Opcode.CONVOLUTION not in ops
        assert ops.count(Opcode.DOT) == -(-positions // group)
        got = flatten_result(evaluate(m, args))[0]
        np.testing.assert_allclose(got, want, rtol=_tol(lhs), atol=_tol(lhs),
                                   err_msg=f"group {group}")


def test_the_dot_forms() -> None:
    forms = [dot_form(_conv(parse_module(conv_text(*c)))) for c in CONVS]
    assert forms == [BATCH_FEATURE, FEATURE_LAST, BATCH_FEATURE, FEATURE_LAST, FEATURE_FIRST,
                     TRANSPOSED, BATCH_FEATURE, TRANSPOSED]


@pytest.mark.parametrize("case", [0, 1, 2, 4, 6, 7])
def test_per_position_on_the_cpu_backend(case: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """One GEMM per window position, compiled for the CPU, against the evaluator."""
    from functools import partial

    from xlc.backend_cpu import compile_cpu, compiler

    lhs, rhs, out, attrs = CONVS[case]
    text = conv_text(lhs, rhs, out, attrs)
    args = _args(lhs, rhs)
    monkeypatch.setattr(compiler, "ConvToDot", partial(ConvToDot, group=1))
    exe = compile_cpu(parse_module(text))
    ops = {i.opcode for c in exe.module.computations for i in c.instructions}
    assert Opcode.CONVOLUTION not in ops
    want = flatten_result(evaluate(parse_module(text), args))[0]
    np.testing.assert_allclose(exe.run(args)[0], want, rtol=_tol(lhs), atol=_tol(lhs))


# NHWC 3x3, 32 -> 32 features on [4,16,16]: im2col's patches are 9 x 128 KiB
BIG = conv_text("f32[4,16,16,32]", "f32[3,3,32,32]", "f32[4,16,16,32]",
            "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f")
BIG_NCHW = conv_text("f32[4,32,16,16]", "f32[32,32,3,3]", "f32[4,32,16,16]",
                 "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01")
SLICE = 4 * 16 * 16 * 32 * 4


def _optimize(text: str, group: int | None = None, limit: int | None = None) -> Any:
    from xlc.backend_cpu.backend import CPU_ALIGNMENT
    from xlc.backend_cpu.compiler import cpu_passes
    from xlc.passes.optimize import optimize_module

    opts = default_options().replace(memory_limit=limit, verify=True)
    passes = cpu_passes(opts)
    if group is not None:
        assert isinstance(passes[0], ConvToDot)
        passes[0] = ConvToDot(limit, group=group)
    return optimize_module(parse_module(text), opts, passes=passes, alignment=CPU_ALIGNMENT)


def _temp(text: str, group: int | None = None, limit: int | None = None) -> int:
    return int(_optimize(text, group, limit).assignment.stats()["temp_bytes"])


def _gemm_scratch(module: HloModule) -> int:
    """The largest GEMM packing workspace of `module` (the backend's, not the lowering's)."""
    sizes = [(i.shape.tuple_shapes or ())[-1].byte_size() for c in module.computations
             for i in c.instructions if i.opcode is Opcode.CUSTOM_CALL
             and i.attrs.get("custom_call_target") == "__xlc$gemm"]
    return max(sizes, default=0)


@pytest.mark.parametrize("text", [BIG, BIG_NCHW])
def test_per_position_temp_is_a_slice_and_a_dot_result(text: str) -> None:
    """im2col keeps its 9-slice patch matrix; per position one slice, one dot result (the
    running sum lives in the output) and small kernel slices, well under half of it."""
    im2col = _temp(text, group=9)
    opt = _optimize(text, group=1)
    per_position = opt.assignment.stats()["temp_bytes"]
    rows = _temp(text, group=3)
    assert im2col >= 9 * SLICE
    assert per_position < rows < im2col
    # a slice, a dot result, a kernel slice (x batch for NCHW) and the GEMM's packing scratch
    kernel_slice = 4 * 32 * 32 * 4
    assert per_position <= 2 * SLICE + kernel_slice + _gemm_scratch(opt.module)


# NCHW 3x3, 16 -> 32 features on [16,32,32]: a 2 MiB output, K = 16 per position
WIDE = conv_text("f32[16,16,32,32]", "f32[32,16,3,3]", "f32[16,32,32,32]",
             "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01")
# the same with 4 input features: K = 4 per position starves the GEMM
NARROW = conv_text("f32[16,4,32,32]", "f32[32,4,3,3]", "f32[16,32,32,32]",
               "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01")


def _estimates(text: str) -> dict[int, conv_to_dot.Estimate]:
    return {c.group: c for c in ConvToDot(threads=2).candidates(_conv(parse_module(text)))}


def test_without_a_limit_the_least_temp_that_is_not_measurably_slower() -> None:
    for text in (WIDE, NARROW):
        cands = _estimates(text)
        assert sorted(cands) == list(range(1, 10))
        g = ConvToDot(threads=2).choose(_conv(parse_module(text)))
        fastest = min(c.seconds for c in cands.values())
        near = [c for c in cands.values()
                if c.seconds <= fastest * conv_to_dot.TIME_TOLERANCE + conv_to_dot.SMALL_S]
        assert cands[g] in near
        assert cands[g].temp_bytes == min(c.temp_bytes for c in near)
    # 16 input features, a 2 MiB output: groups of several positions (8 adds of 2 MiB and
    # K = 16 would be measurably slower), less temp than im2col
    wide = _estimates(WIDE)
    g = ConvToDot(threads=2).choose(_conv(parse_module(WIDE)))
    assert 1 < g < 9 and wide[g].temp_bytes < wide[9].temp_bytes
    # a 1-D window over 64 features, a 512 KiB output: one position per dot
    one_d = conv_text("f32[8,256,64]", "f32[5,64,64]", "f32[8,256,64]",
                  "window={size=5 pad=2_2}, dim_labels=b0f_0io->b0f")
    assert ConvToDot(threads=2).choose(_conv(parse_module(one_d))) == 1
    # 4 input features: im2col, clearly the fastest
    narrow = _estimates(NARROW)
    assert ConvToDot(threads=2).choose(_conv(parse_module(NARROW))) == 9
    assert narrow[1].seconds > 1.2 * narrow[9].seconds


def test_a_tiny_convolution_takes_the_least_memory_without_a_limit() -> None:
    """Estimated microseconds apart: not measurably slower, so the smaller temp wins."""
    text = conv_text("f32[1,8,8,4]", "f32[3,3,4,4]", "f32[1,8,8,4]",
                 "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f")
    assert ConvToDot().choose(_conv(parse_module(text))) < 9


def _picked(text: str, limit: int | None) -> int:
    """The group size ConvToDot(limit) lowers the convolution of `text` with (0: none)."""
    m = parse_module(text)
    if not ConvToDot(limit, threads=2).run(m):  # sets the budget from the module, chooses
        return 0
    assert m.entry is not None
    dots = [i for i in m.entry.instructions if i.opcode is Opcode.DOT]
    group = dots[0].operands[0].shape.dims[2]  # [batch, out f, positions, in f]
    assert len(dots) == -(-9 // group)
    return group


def test_the_memory_limit_decides() -> None:
    io = conv_to_dot.entry_io_bytes(parse_module(NARROW))
    assert io == (16 * 4 + 16 * 32) * 32 * 32 * 4 + 32 * 4 * 9 * 4
    cands = _estimates(NARROW)
    share = int(1 / conv_to_dot.WORKSPACE_SHARE)
    assert _picked(NARROW, 1 << 40) == 9 == min(cands.values(), key=lambda c: c.seconds).group
    # room for im2col's patches (no dot result beside them): im2col
    assert _picked(NARROW, io + share * cands[9].temp_bytes) == 9
    # room for one slice and one dot result only: one position per dot
    assert cands[1].temp_bytes < cands[9].temp_bytes
    assert _picked(NARROW, io + share * cands[1].temp_bytes) == 1
    # too little for any: the direct emitter keeps the convolution
    assert _picked(NARROW, io + share * cands[1].temp_bytes // 2) == 0
    assert _picked(NARROW, 0) == 0


def test_a_memory_limit_lowers_the_temp_bytes() -> None:
    """Compiled with a limit that im2col would exceed, the temp drops below im2col's."""
    im2col = _temp(BIG, group=9)
    limited = _temp(BIG, limit=4 * SLICE)
    assert limited < im2col / 2


def test_huge_patch_matrices_run_per_position(monkeypatch: pytest.MonkeyPatch) -> None:
    text = conv_text("f32[2,3,9,9]", "f32[4,3,3,3]", "f32[2,4,9,9]",
                 "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01")
    slice_bytes = 2 * 9 * 9 * 3 * 4  # rows x features x bytes
    monkeypatch.setattr(conv_to_dot, "MAX_PATCH_BYTES", slice_bytes * 2)
    cands = ConvToDot().candidates(_conv(parse_module(text)))
    assert [c.group for c in cands] == [1, 2]
    monkeypatch.setattr(conv_to_dot, "MAX_PATCH_BYTES", 1)
    assert [c.group for c in ConvToDot().candidates(_conv(parse_module(text)))] == [1]
