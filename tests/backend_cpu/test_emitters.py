"""Small hand-written HLO programs per CPU emitter, compared with the reference evaluator."""
from __future__ import annotations

import numpy as np
import pytest

from tests.backend_cpu.helpers import check, rand

ADD_F32 = """
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""
MAX_F32 = """
max_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
"""


def test_elementwise_chain_fusion() -> None:
    text = """HloModule m
ENTRY e {
  a = f32[37,100] parameter(0)
  b = f32[37,100] parameter(1)
  t = f32[37,100] tanh(a)
  x = f32[37,100] exponential(b)
  m = f32[37,100] multiply(t, x)
  ROOT r = f32[37,100] add(m, a)
}"""
    check(text, rand(37, 100), rand(37, 100, seed=1))


def test_int_and_pred_ops() -> None:
    text = """HloModule m
ENTRY e {
  a = s32[64] parameter(0)
  b = s32[64] parameter(1)
  d = s32[64] divide(a, b)
  r = s32[64] remainder(a, b)
  s = s32[64] shift-left(a, b)
  c = pred[64] compare(d, r), direction=LT
  n = pred[64] not(c)
  ROOT t = (s32[64], s32[64], s32[64], pred[64]) tuple(d, r, s, n)
}"""
    rng = np.random.default_rng(0)
    a = rng.integers(-100, 100, 64).astype(np.int32)
    b = rng.integers(-3, 40, 64).astype(np.int32)
    check(text, a, b)


def test_data_movement_ops() -> None:
    text = """HloModule m
ENTRY e {
  a = f32[4,6] parameter(0)
  t = f32[6,4] transpose(a), dimensions={1,0}
  r = f32[3,8] reshape(t)
  s = f32[2,4] slice(r), slice={[1:3], [0:8:2]}
  z = f32[] constant(-1)
  p = f32[5,10] pad(r, z), padding=1_1x1_1
  c = f32[12,4] concatenate(t, t), dimensions={0}
  v = f32[12,4] reverse(c), dimensions={0,1}
  i = f32[12,4] iota(), iota_dimension=1
  w = f32[12,4] add(v, i)
  b = f32[2,12,4] broadcast(w), dimensions={1,2}
  ROOT o = (f32[2,4], f32[5,10], f32[2,12,4]) tuple(s, p, b)
}"""
    check(text, rand(4, 6))


def test_transposed_layouts_and_copy() -> None:
    text = """HloModule m
ENTRY e {
  a = f32[8,5]{0,1} parameter(0)
  c = f32[8,5]{1,0} copy(a)
  ROOT n = f32[8,5]{1,0} negate(c)
}"""
    check(text, rand(8, 5))


def test_convert_select_clamp() -> None:
    text = """HloModule m
ENTRY e {
  a = f32[50] parameter(0)
  p = pred[50] parameter(1)
  i = s32[50] convert(a)
  lo = f32[] constant(-0.5)
  hi = f32[] constant(0.5)
  c = f32[50] clamp(lo, a, hi)
  n = f32[50] negate(a)
  s = f32[50] select(p, c, n)
  h = f16[50] convert(s)
  ROOT t = (s32[50], f32[50], f16[50]) tuple(i, s, h)
}"""
    check(text, rand(50) * 10, rand(50, seed=2) > 0, atol=1e-3)


@pytest.mark.parametrize("dims,shape", [("{1}", (33, 70)), ("{0}", (33, 70)),
                                        ("{0,1}", (33, 70)), ("{0,2}", (5, 6, 7))])
def test_reduce_rows_columns(dims: str, shape: tuple[int, ...]) -> None:
    kept = [d for d in range(len(shape)) if str(d) not in dims]
    out = ",".join(str(shape[d]) for d in kept)
    ins = ",".join(map(str, shape))
    text = f"""HloModule m
{ADD_F32}
ENTRY e {{
  a = f32[{ins}] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[{out}] reduce(a, z), dimensions={dims}, to_apply=add_f32
}}"""
    check(text, rand(*shape), rtol=1e-4, atol=1e-4)


def test_softmax_input_fusion_and_multi_output() -> None:
    text = f"""HloModule m
{ADD_F32}
{MAX_F32}
ENTRY e {{
  x = f32[16,300] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[16] reduce(x, ninf), dimensions={{1}}, to_apply=max_f32
  mb = f32[16,300] broadcast(mx), dimensions={{0}}
  d = f32[16,300] subtract(x, mb)
  ex = f32[16,300] exponential(d)
  z = f32[] constant(0)
  s = f32[16] reduce(ex, z), dimensions={{1}}, to_apply=add_f32
  sb = f32[16,300] broadcast(s), dimensions={{0}}
  ROOT o = f32[16,300] divide(ex, sb)
}}"""
    check(text, rand(16, 300) * 5, rtol=1e-5, atol=1e-7)


def test_variadic_argmax_reduce() -> None:
    text = """HloModule m
argmax {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(av, bv), direction=GT
  eq = pred[] compare(av, bv), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  keep = pred[] or(gt, tie)
  v = f32[] select(keep, av, bv)
  i = s32[] select(keep, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  x = f32[9,40] parameter(0)
  io = s32[9,40] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zi = s32[] constant(0)
  ROOT r = (f32[9], s32[9]) reduce(x, io, ninf, zi), dimensions={1}, to_apply=argmax
}"""
    check(text, rand(9, 40))


@pytest.mark.parametrize("text_dims,lhs,rhs", [
    ("lhs_contracting_dims={1}, rhs_contracting_dims={0}", (40, 30), (30, 50)),
    ("lhs_contracting_dims={0}, rhs_contracting_dims={1}", (30, 40), (50, 30)),
    ("lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
     "rhs_contracting_dims={1}", (3, 7, 9), (3, 9, 5)),
    ("lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}", (6, 4, 5), (4, 5, 3)),
])
def test_dot_general(text_dims: str, lhs: tuple, rhs: tuple) -> None:
    dims = _dot_out_dims(lhs, rhs, text_dims)
    check(_dot_text(lhs, rhs, text_dims, f"f32[{','.join(map(str, dims))}]"), rand(*lhs),
          rand(*rhs, seed=3), rtol=1e-4, atol=1e-4)


def _dot_out_dims(lhs: tuple, rhs: tuple, text_dims: str) -> list[int]:
    import re

    def grab(key: str) -> list[int]:
        m = re.search(key + r"=\{([0-9,]*)\}", text_dims)
        return [int(v) for v in m.group(1).split(",")] if m and m.group(1) else []
    lb, rb = grab("lhs_batch_dims"), grab("rhs_batch_dims")
    lc, rc = grab("lhs_contracting_dims"), grab("rhs_contracting_dims")
    return ([lhs[d] for d in lb] + [lhs[d] for d in range(len(lhs)) if d not in lb + lc]
            + [rhs[d] for d in range(len(rhs)) if d not in rb + rc])


def _dot_text(lhs: tuple, rhs: tuple, text_dims: str, out: str, ty: str = "f32") -> str:
    return f"""HloModule m
ENTRY e {{
  a = {ty}[{','.join(map(str, lhs))}] parameter(0)
  b = {ty}[{','.join(map(str, rhs))}] parameter(1)
  ROOT d = {out} dot(a, b), {text_dims}
}}"""


def test_dot_large_blocked_and_int() -> None:
    dims = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    check(_dot_text((70, 300), (300, 600), dims, "f32[70,600]"), rand(70, 300),
          rand(300, 600, seed=4), rtol=1e-4, atol=1e-3)
    rng = np.random.default_rng(1)
    a = rng.integers(-9, 9, (5, 6)).astype(np.int32)
    b = rng.integers(-9, 9, (6, 4)).astype(np.int32)
    check(_dot_text((5, 6), (6, 4), dims, "s32[5,4]", "s32"), a, b)


def test_dot_bf16_accumulates_in_f32() -> None:
    import ml_dtypes

    dims = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    a = rand(8, 64).astype(ml_dtypes.bfloat16)
    b = rand(64, 8, seed=5).astype(ml_dtypes.bfloat16)
    check(_dot_text((8, 64), (64, 8), dims, "bf16[8,8]", "bf16"), a, b, rtol=2e-2, atol=2e-2)


def test_while_loop() -> None:
    text = """HloModule m
cond {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(5)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[8] multiply(x, x)
  h = f32[] constant(0.5)
  hb = f32[8] broadcast(h), dimensions={}
  z = f32[8] add(y, hb)
  ROOT t = (s32[], f32[8]) tuple(j, z)
}
ENTRY e {
  x = f32[8] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], f32[8]) tuple(zero, x)
  w = (s32[], f32[8]) while(t), condition=cond, body=body
  ROOT r = f32[8] get-tuple-element(w), index=1
}"""
    check(text, rand(8) * 0.3, rtol=1e-5)


@pytest.mark.parametrize("sel", [0, 1, 7])
def test_conditional_index_and_pred(sel: int) -> None:
    text = """HloModule m
b0 {
  p = f32[4] parameter(0)
  ROOT r = f32[4] negate(p)
}
b1 {
  p = f32[4] parameter(0)
  ROOT r = f32[4] exponential(p)
}
b2 {
  p = f32[4] parameter(0)
  ROOT r = f32[4] sine(p)
}
ENTRY e {
  i = s32[] parameter(0)
  x = f32[4] parameter(1)
  c = f32[4] conditional(i, x, x, x), branch_computations={b0, b1, b2}
  z = s32[] constant(1)
  p = pred[] compare(i, z), direction=EQ
  d = f32[4] conditional(p, c, c), true_computation=b1, false_computation=b0
  ROOT t = (f32[4], f32[4]) tuple(c, d)
}"""
    check(text, np.int32(sel), rand(4))


def test_dynamic_slice_and_update_in_place() -> None:
    text = """HloModule m
ENTRY e {
  a = f32[16,16] parameter(0)
  u = f32[4,4] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  s = f32[4,4] dynamic-slice(a, i, j), dynamic_slice_sizes={4,4}
  v = f32[4,4] add(s, u)
  ROOT d = f32[16,16] dynamic-update-slice(a, v, j, i)
}"""
    check(text, rand(16, 16), rand(4, 4), np.int32(3), np.int32(14))
    check(text, rand(16, 16), rand(4, 4), np.int32(-2), np.int32(5))


def test_sort_multi_operand_stable() -> None:
    text = """HloModule m
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  x = f32[6,33] parameter(0)
  i = s32[6,33] iota(), iota_dimension=1
  ROOT s = (f32[6,33], s32[6,33]) sort(x, i), dimensions={1}, is_stable=true, to_apply=cmp
}"""
    x = np.round(rand(6, 33) * 2).astype(np.float32)  # many ties
    check(text, x)


@pytest.mark.parametrize("largest", ["true", "false"])
def test_topk(largest: str) -> None:
    text = f"""HloModule m
ENTRY e {{
  x = f32[5,40] parameter(0)
  ROOT t = (f32[5,3], s32[5,3]) topk(x), k=3, largest={largest}
}}"""
    x = np.round(rand(5, 40) * 2).astype(np.float32)
    check(text, x)


def test_gather_rows() -> None:
    text = """HloModule m
ENTRY e {
  t = f32[10,4] parameter(0)
  i = s32[6,1] parameter(1)
  ROOT g = f32[6,4] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, """ \
        """start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}
}"""
    check(text, rand(10, 4), np.array([[0], [3], [9], [12], [-1], [5]], dtype=np.int32))


def test_scatter_add() -> None:
    text = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  t = f32[10,4] parameter(0)
  i = s32[5,1] parameter(1)
  u = f32[5,4] parameter(2)
  ROOT s = f32[10,4] scatter(t, i, u), update_window_dims={1}, inserted_window_dims={0}, """ \
        """scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}"""
    check(text, rand(10, 4), np.array([[0], [3], [3], [12], [9]], dtype=np.int32),
          rand(5, 4, seed=9))


def test_matmul_kernel_tails_batch_threads_and_f64() -> None:
    # M % 6 != 0, N % 64 != 0, K > KC, batch 2, enough flops to use the threaded path
    dims = ("lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
            "rhs_contracting_dims={1}")
    check(_dot_text((2, 130, 333), (2, 333, 200), dims, "f32[2,130,200]"),
          rand(2, 130, 333), rand(2, 333, 200, seed=6), rtol=1e-4, atol=1e-3)
    plain = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    check(_dot_text((13, 40), (40, 70), plain, "f64[13,70]", "f64"),
          rand(13, 40, dtype="float64"), rand(40, 70, seed=8, dtype="float64"),
          rtol=1e-12, atol=1e-12)


def test_threaded_loop_and_row_reduction() -> None:
    text = f"""HloModule m
{ADD_F32}
ENTRY e {{
  x = f32[1030,600] parameter(0)
  t = f32[1030,600] tanh(x)
  z = f32[] constant(0)
  s = f32[1030] reduce(t, z), dimensions={{1}}, to_apply=add_f32
  c = f32[600] reduce(t, z), dimensions={{0}}, to_apply=add_f32
  ROOT o = (f32[1030,600], f32[1030], f32[600]) tuple(t, s, c)
}}"""
    check(text, rand(1030, 600), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("n", [49, 1000])
def test_long_sort_is_stable_merge_sort(n: int) -> None:
    text = f"""HloModule m
cmp {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=GT
}}
ENTRY e {{
  x = f32[3,{n}] parameter(0)
  i = s32[3,{n}] iota(), iota_dimension=1
  ROOT s = (f32[3,{n}], s32[3,{n}]) sort(x, i), dimensions={{1}}, is_stable=true, to_apply=cmp
}}"""
    x = np.round(rand(3, n) * 3).astype(np.float32)  # many ties
    check(text, x)


def test_long_sort_along_major_dimension() -> None:
    text = """HloModule m
cmp {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  x = s32[100,7] parameter(0)
  ROOT s = s32[100,7] sort(x), dimensions={0}, to_apply=cmp
}"""
    check(text, np.random.default_rng(1).integers(0, 20, (100, 7)).astype(np.int32))


def test_complex_elementwise_bf16_reduce_f16_dot() -> None:
    import ml_dtypes

    text = """HloModule m
ENTRY e {
  a = c64[8] parameter(0)
  b = c64[8] parameter(1)
  m = c64[8] multiply(a, b)
  s = c64[8] add(m, a)
  r = f32[8] real(s)
  ROOT t = (c64[8], f32[8]) tuple(s, r)
}"""
    a = (rand(8) + 1j * rand(8, seed=2)).astype(np.complex64)
    b = (rand(8, seed=3) + 1j * rand(8, seed=4)).astype(np.complex64)
    check(text, a, b)
    text = """HloModule m
add {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}
ENTRY e {
  x = bf16[4,64] parameter(0)
  z = bf16[] constant(0)
  ROOT r = bf16[4] reduce(x, z), dimensions={1}, to_apply=add
}"""
    check(text, rand(4, 64).astype(ml_dtypes.bfloat16), rtol=2e-2, atol=5e-2)
    dims = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    check(_dot_text((4, 64), (64, 8), dims, "f16[4,8]", "f16"), rand(4, 64).astype(np.float16),
          rand(64, 8, seed=1).astype(np.float16), rtol=1e-2, atol=1e-2)


def test_matrix_vector_and_vector_dot() -> None:
    dims = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    check(_dot_text((33, 300), (300,), dims, "f32[33]"), rand(33, 300), rand(300, seed=2),
          rtol=1e-4, atol=1e-4)
    vdims = "lhs_contracting_dims={0}, rhs_contracting_dims={0}"
    check(_dot_text((500,), (500,), vdims, "f64[]", "f64"), rand(500, dtype="float64"),
          rand(500, seed=1, dtype="float64"), rtol=1e-10, atol=1e-10)


def test_tiled_transpose_and_layout_copy() -> None:
    text = """HloModule m
ENTRY e {
  a = f32[300,170] parameter(0)
  t = f32[170,300] transpose(a), dimensions={1,0}
  c = f32[300,170]{0,1} copy(a)
  ROOT r = (f32[170,300], f32[300,170]{0,1}) tuple(t, c)
}"""
    check(text, rand(300, 170))
    text3 = """HloModule m
ENTRY e {
  a = f32[6,50,70] parameter(0)
  ROOT t = f32[70,6,50] transpose(a), dimensions={2,0,1}
}"""
    check(text3, rand(6, 50, 70))


def test_topk_custom_call() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[4,30] parameter(0)
  ROOT t = (f32[4,5], s32[4,5]) custom-call(x), custom_call_target="TopK"
}"""
    check(text, np.round(rand(4, 30) * 2).astype(np.float32))


def test_reduce_nested_inside_a_loop_fusion() -> None:
    # XLA's optimized HLO fuses small reduces into loop fusions as non-root instructions
    text = f"""HloModule m
{ADD_F32}
fused {{
  p0 = f32[6,9] parameter(0)
  z = f32[] constant(0)
  r = f32[6] reduce(p0, z), dimensions={{1}}, to_apply=add_f32
  rb = f32[6,9] broadcast(r), dimensions={{0}}
  ROOT d = f32[6,9] subtract(p0, rb)
}}
ENTRY e {{
  x = f32[6,9] parameter(0)
  ROOT f = f32[6,9] fusion(x), kind=kLoop, calls=fused
}}"""
    check(text, rand(6, 9), rtol=1e-5, atol=1e-5)


def test_transposed_operands_big_dot_uses_packed_gemm() -> None:
    from xlc.backend_cpu import compile_cpu
    from xlc.hlo.parser import parse_module

    # q @ k^T: rhs contracting dim is its minor dim (strided along n) -> xlc.backend_cpu.gemm
    dims = "lhs_contracting_dims={1}, rhs_contracting_dims={1}"
    text = _dot_text((130, 96), (200, 96), dims, "f32[130,200]")
    assert ".gemm." in compile_cpu(parse_module(text)).llvm_ir
    check(text, rand(130, 96), rand(200, 96, seed=3), rtol=1e-4, atol=1e-3)
    bdims = ("lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, "
             "rhs_contracting_dims={2}")
    check(_dot_text((2, 100, 120), (2, 110, 100), bdims, "f32[2,120,110]"),
          rand(2, 100, 120), rand(2, 110, 100, seed=5), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("hlo_text", [
    # a vector times a matrix read along its rows (h @ w.T): the contiguous-reduction kernel
    """HloModule vm
ENTRY e {
  h = f32[1,64] parameter(0)
  w = f32[48,64] parameter(1)
  ROOT d = f32[1,48] dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={1}
}""",
    """HloModule vm64
ENTRY e {
  h = f64[3,1,40] parameter(0)
  w = f64[3,24,40] parameter(1)
  ROOT d = f64[3,1,24] dot(h, w), lhs_batch_dims={0}, rhs_batch_dims={0},
    lhs_contracting_dims={2}, rhs_contracting_dims={2}
}""",
    # the rhs contracting dim is not the contiguous one here: another kernel, same numbers
    """HloModule vmcol
ENTRY e {
  h = f32[1,64] parameter(0)
  w = f32[64,48]{0,1} parameter(1)
  ROOT d = f32[1,48] dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""",
])
def test_vector_times_row_major_matrix_matches_the_evaluator(hlo_text):
    import xlc
    from xlc.hlo.evaluator import evaluate
    from xlc.hlo.parser import parse_module

    module = parse_module(hlo_text)
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(p.shape.dims).astype(p.shape.element_type.dtype)
            for p in module.entry.parameters]
    got = xlc.compile(hlo_text)(*args)
    want = evaluate(parse_module(hlo_text), args)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
