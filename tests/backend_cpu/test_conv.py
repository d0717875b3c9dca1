"""Convolution on CPU vs the evaluator: layouts, padding, strides, dilations, groups."""
from __future__ import annotations

import pytest

from tests.backend_cpu.helpers import check, rand


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
    def dims(s: str) -> list[int]:
        return [int(v) for v in s[s.index("[") + 1:-1].split(",")]
    text = f"""HloModule m
ENTRY e {{
  a = {lhs} parameter(0)
  k = {rhs} parameter(1)
  ROOT c = {out} convolution(a, k), {attrs}
}}"""
    check(text, rand(*dims(lhs)), rand(*dims(rhs), seed=3), rtol=1e-4, atol=1e-4)
