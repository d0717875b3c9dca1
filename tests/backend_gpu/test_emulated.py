"""Numerics without a GPU: small programs covering every kernel family run through the host
emulator (emulator.py executes the very NVPTX IR we turn into PTX) and match the reference
evaluator; corpus cases with cheap kernels match XLA's outputs."""
from __future__ import annotations

import os

import numpy as np
import pytest

from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.helpers import compile_text, compiled_case
from tests.conftest import corpus_cases, requires_corpus
from xlc.hlo.evaluator import evaluate
from xlc.hlo.parser import parse_module

RNG = np.random.default_rng(7)


def _flat(v: object) -> list[np.ndarray]:
    if isinstance(v, tuple):
        return [x for e in v for x in _flat(e)]
    return [np.asarray(v)]


def check(text: str, args: list[np.ndarray], rtol: float = 1e-5, atol: float = 1e-6,
          **kw: object) -> None:
    """Run `text` through the GPU compiler + emulator and compare with the evaluator."""
    want = _flat(evaluate(parse_module(text), args))
    got = Emulator(compile_text(text, **kw)).run(args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        if g.dtype.kind in "fc":
            np.testing.assert_allclose(g.astype(np.float64) if g.dtype.kind == "f" else g,
                                       w.astype(np.float64) if w.dtype.kind == "f" else w,
                                       rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


REDUCE = """
HloModule m
{op} {{
  x = {t}[] parameter(0)
  y = {t}[] parameter(1)
  ROOT s = {t}[] {op}(x, y)
}}
ENTRY e {{
  a = {t}[{shape}] parameter(0)
  z = {t}[] constant({init})
  ROOT r = {t}[{out}] reduce(a, z), dimensions={{{dims}}}, to_apply={op}
}}
"""


@pytest.mark.parametrize("shape,dims,out", [
    ("5,20", "1", "5"),            # one warp per row
    ("3,70", "1", "3"),            # three warps: shared-memory round
    ("40,6", "0", "6"),            # column reduction
    ("4,6,5", "0,2", "6"),         # reduce major and minor dims
])
def test_reduce_add_with_non_identity_init(shape: str, dims: str, out: str) -> None:
    x = f32(*[int(s) for s in shape.split(",")])
    check(REDUCE.format(op="add", t="f32", shape=shape, out=out, dims=dims, init="1.5"), [x],
          rtol=1e-5, atol=1e-5)


def test_reduce_max_s32() -> None:
    x = RNG.integers(-1000, 1000, (3, 45)).astype(np.int32)
    check(REDUCE.format(op="maximum", t="s32", shape="3,45", out="3", dims="1",
                        init="-2147483648"), [x])


def test_variadic_argmax_reduce() -> None:
    text = """
HloModule m
argmax {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(av, bv), direction=GT
  eq = pred[] compare(av, bv), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  take = pred[] or(gt, tie)
  v = f32[] select(take, av, bv)
  i = s32[] select(take, ai, bi)
  ROOT r = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  x = f32[4,24] parameter(0)
  io = s32[4,24] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[4], s32[4]) reduce(x, io, ninf, zero), dimensions={1}, to_apply=argmax
}
"""
    check(text, [f32(4, 24)])


SOFTMAX = """
HloModule softmax
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[6,40] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[6] reduce(x, ninf), dimensions={1}, to_apply=max
  mb = f32[6,40] broadcast(mx), dimensions={0}
  d = f32[6,40] subtract(x, mb)
  ex = f32[6,40] exponential(d)
  zero = f32[] constant(0)
  s = f32[6] reduce(ex, zero), dimensions={1}, to_apply=add
  sb = f32[6,40] broadcast(s), dimensions={0}
  ROOT r = f32[6,40] divide(ex, sb)
}
"""


def test_softmax_fusions() -> None:
    check(SOFTMAX, [f32(6, 40)], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("t", ["f32", "s32", "f16"])
def test_batched_dot(t: str) -> None:
    text = f"""
HloModule m
ENTRY e {{
  a = {t}[2,12,20] parameter(0)
  b = {t}[2,20,10] parameter(1)
  ROOT d = {t}[2,12,10] dot(a, b), lhs_batch_dims={{0}}, rhs_batch_dims={{0}},
      lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}}
}}
"""
    if t == "s32":
        args = [RNG.integers(-9, 9, s).astype(np.int32) for s in ((2, 12, 20), (2, 20, 10))]
    else:
        args = [f32(2, 12, 20).astype(t.replace("f", "float")),
                f32(2, 20, 10).astype(t.replace("f", "float"))]
    check(text, args, rtol=2e-3 if t == "f16" else 1e-5, atol=1e-2 if t == "f16" else 1e-5)


def test_register_blocked_dot_with_ragged_edges() -> None:
    text = """
HloModule m
ENTRY e {
  a = f32[70,20] parameter(0)
  b = f32[20,66] parameter(1)
  ROOT d = f32[70,66] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
    exe = compile_text(text)
    (k,) = [t for t in exe.all_thunks() if t.kind == "kernel"]
    assert k.grid == (2, 2, 1) and k.block == (16, 16, 1)  # 64 x 64 tiles, 4 x 4 per thread
    check(text, [f32(70, 20), f32(20, 66)], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("t,out", [("f16", "f32"), ("bf16", "bf16"), ("f16", "f16")])
def test_tensor_core_dot(t: str, out: str) -> None:
    import ml_dtypes

    text = f"""
HloModule m
ENTRY e {{
  a = {t}[2,20,24] parameter(0)
  b = {t}[2,12,24]{{1,2,0}} parameter(1)
  ROOT d = {out}[2,20,12] dot(a, b), lhs_batch_dims={{0}}, rhs_batch_dims={{0}},
      lhs_contracting_dims={{2}}, rhs_contracting_dims={{2}}
}}
"""
    exe = compile_text(text)
    assert "mma.sync.aligned.m16n8k16.row.col.f32" in exe.ptx
    (k,) = [x for x in exe.all_thunks() if x.kind == "kernel"]
    assert k.grid == (1, 1, 2) and k.block == (128, 1, 1)  # 64 x 64 tiles, ragged edges
    dt = np.float16 if t == "f16" else ml_dtypes.bfloat16
    check(text, [f32(2, 20, 24).astype(dt), f32(2, 12, 24).astype(dt)], rtol=2e-2, atol=2e-2)


def test_dot_with_transposed_layouts_and_two_contracting_dims() -> None:
    text = """
HloModule m
ENTRY e {
  a = f32[5,3,4]{0,1,2} parameter(0)
  b = f32[3,4,7]{2,0,1} parameter(1)
  ROOT d = f32[5,7]{0,1} dot(a, b), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}
}
"""
    check(text, [f32(5, 3, 4), f32(3, 4, 7)], rtol=1e-5, atol=1e-5)


def test_tiled_transpose_and_layout_copy() -> None:
    text = """
HloModule m
ENTRY e {
  a = f32[40,36] parameter(0)
  t = f32[36,40] transpose(a), dimensions={1,0}
  c = f32[40,36]{0,1} copy(a)
  ROOT r = (f32[36,40], f32[40,36]{0,1}) tuple(t, c)
}
"""
    check(text, [f32(40, 36)], fusion=False)


def test_stable_sort_with_values_and_topk() -> None:
    text = """
HloModule m
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT c = pred[] compare(a, b), direction=LT
}
ENTRY e {
  x = f32[2,40] parameter(0)
  y = s32[2,40] iota(), iota_dimension=1
  s = (f32[2,40], s32[2,40]) sort(x, y), dimensions={1}, is_stable=true, to_apply=lt
  t = (f32[2,4], s32[2,4]) topk(x), k=4, largest=true
  s0 = f32[2,40] get-tuple-element(s), index=0
  s1 = s32[2,40] get-tuple-element(s), index=1
  t0 = f32[2,4] get-tuple-element(t), index=0
  t1 = s32[2,4] get-tuple-element(t), index=1
  ROOT r = (f32[2,40], s32[2,40], f32[2,4], s32[2,4]) tuple(s0, s1, t0, t1)
}
"""
    x = np.round(f32(2, 40) * 2) / 2  # many ties: checks stability
    check(text, [x], fusion=False)


def test_loop_fusion_data_movement_and_f16() -> None:
    text = """
HloModule m
ENTRY e {
  a = f32[8,16] parameter(0)
  b = f16[16,8] parameter(1)
  bt = f16[8,16] transpose(b), dimensions={1,0}
  bc = f32[8,16] convert(bt)
  s = f32[8,16] add(a, bc)
  p0 = f32[] constant(0.5)
  pd = f32[10,20] pad(s, p0), padding=1_1x2_2
  sl = f32[10,16] slice(pd), slice={[0:10], [1:17]}
  rv = f32[10,16] reverse(sl), dimensions={1}
  cc = f32[10,32] concatenate(sl, rv), dimensions={1}
  ROOT r = f16[10,32] convert(cc)
}
"""
    check(text, [f32(8, 16), f32(16, 8).astype(np.float16)], rtol=1e-3, atol=1e-3)


def test_gather_scatter_and_dynamic_update_slice() -> None:
    text = """
HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  o = f32[30,8] parameter(0)
  i = s32[12,1] parameter(1)
  u = f32[12,8] parameter(2)
  g = f32[12,8] gather(o, i), offset_dims={1}, collapsed_slice_dims={0},
      start_index_map={0}, index_vector_dim=1, slice_sizes={1,8}
  sc = f32[30,8] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
  k = s32[] constant(3)
  z = s32[] constant(0)
  d = f32[30,8] dynamic-update-slice(sc, u, k, z)
  ROOT r = (f32[12,8], f32[30,8]) tuple(g, d)
}
"""
    idx = RNG.integers(0, 30, (12, 1)).astype(np.int32)
    idx[3] = idx[5]  # duplicate targets: the adds accumulate
    check(text, [f32(30, 8), idx, f32(12, 8)], rtol=1e-5, atol=1e-5, fusion=False)


CONV = """
HloModule conv
ENTRY e {{
  x = f32[{xs}] parameter(0)
  w = f32[{ws}] parameter(1)
  ROOT c = f32[{os}] convolution(x, w), window={{{win}}}, dim_labels={labels}{extra}
}}
"""


@pytest.mark.parametrize("xs,ws,os,win,labels,extra", [
    # NHWC 3x3, stride 2, padding 1
    ("2,9,7,3", "3,3,3,4", "2,5,4,4", "size=3x3 stride=2x2 pad=1_1x1_1", "b01f_01io->b01f", ""),
    # NCHW with rhs dilation and reversal
    ("1,2,8,8", "3,2,2,2", "1,3,6,6", "size=2x2 rhs_dilate=2x2 rhs_reversal=1x0",
     "bf01_oi01->bf01", ""),
    # grouped (depthwise-like) with lhs dilation
    ("1,5,4", "3,1,4", "1,9,4", "size=3 pad=1_1 lhs_dilate=2", "b0f_0io->b0f",
     ", feature_group_count=4"),
])
def test_convolution(xs: str, ws: str, os: str, win: str, labels: str, extra: str) -> None:
    text = CONV.format(xs=xs, ws=ws, os=os, win=win, labels=labels, extra=extra)
    check(text, [f32(*map(int, xs.split(","))), f32(*map(int, ws.split(",")))],
          rtol=1e-5, atol=1e-5)


def test_scatter_with_a_non_add_combiner_map_and_reduce_window() -> None:
    text = """
HloModule m
mx {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] maximum(x, y)
}
mul {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT p = f32[] multiply(x, y)
}
ENTRY e {
  o = f32[20,4] parameter(0)
  i = s32[9,1] parameter(1)
  u = f32[9,4] parameter(2)
  sc = f32[20,4] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=mx
  mp = f32[20,4] map(o, sc), dimensions={0,1}, to_apply=mul
  ninf = f32[] constant(-inf)
  rw = f32[10,3] reduce-window(mp, ninf), window={size=3x2 stride=2x1 pad=1_0x0_0},
      to_apply=mx
  ROOT r = (f32[20,4], f32[10,3]) tuple(sc, rw)
}
"""
    idx = RNG.integers(-2, 22, (9, 1)).astype(np.int32)  # some windows out of bounds
    check(text, [f32(20, 4), idx, f32(9, 4)], fusion=False)


def test_batch_grouped_convolution() -> None:
    text = """
HloModule m
ENTRY e {
  x = f32[4,6,3] parameter(0)
  w = f32[3,3,4] parameter(1)
  ROOT c = f32[2,6,4] convolution(x, w), window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f,
      batch_group_count=2
}
"""
    check(text, [f32(4, 6, 3), f32(3, 3, 4)], rtol=1e-5, atol=1e-5)


def test_integer_and_predicate_ops() -> None:
    text = """
HloModule m
ENTRY e {
  a = s32[64] parameter(0)
  b = s32[64] parameter(1)
  q = s32[64] divide(a, b)
  r = s32[64] remainder(a, b)
  sh = s32[64] shift-right-arithmetic(a, b)
  c = pred[64] compare(q, r), direction=GT
  n = pred[64] not(c)
  ROOT t = (s32[64], s32[64], s32[64], pred[64]) tuple(q, r, sh, n)
}
"""
    a = RNG.integers(-100, 100, 64).astype(np.int32)
    b = RNG.integers(-5, 40, 64).astype(np.int32)
    check(text, [a, b])


@requires_corpus
@pytest.mark.parametrize("name", ["adam_update", "dynamic_slice_update", "int_bool_ops",
                                  "iota_clamp_select", "gelu_tanh", "cond_switch",
                                  "shape_ops", "sigmoid", "baked_constants"])
def test_corpus_case_emulated(name: str) -> None:
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    outs = Emulator(compiled_case(name)).run(case.inputs)
    for got, want in zip(outs, case.outputs):
        assert got.shape == want.shape and got.dtype == want.dtype
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol)
        else:
            np.testing.assert_array_equal(got, want)


@requires_corpus
@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("XLC_GPU_EMULATE_ALL"),
                    reason="set XLC_GPU_EMULATE_ALL=1 (about 10 minutes: every small corpus "
                           "case in the emulator, one and four streams)")
@pytest.mark.parametrize("streams", [1, 4])
@pytest.mark.parametrize("name", corpus_cases(include_benchmarks=False))
def test_every_corpus_case_emulated(name: str, streams: int) -> None:
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    outs = Emulator(compiled_case(name, streams=streams)).run(case.inputs)
    for got, want in zip(outs, case.outputs):
        assert got.shape == want.shape and got.dtype == want.dtype
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol)
        else:
            np.testing.assert_array_equal(got, want)
