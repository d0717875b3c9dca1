"""Top-k (one heap pass per row, rows over the threads) and radix sort against jax, numpy and
the evaluator: ties, NaNs of both signs, infinities, signed zeros, many shapes and dtypes."""
from __future__ import annotations

import numpy as np
import pytest
import xlc.lax

import xlc
from tests.backend_cpu.helpers import check
from xlc.backend_cpu.emit_radix_sort import sort_key
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module


def _special(n: int, dtype: str, seed: int) -> np.ndarray:
    """Data with many ties and, for floats, NaN, -NaN, +-inf and +-0 mixed in."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        x = rng.integers(info.min, int(info.max) + 1, size=n, dtype=np.int64)
        x[rng.random(n) < 0.5] = rng.integers(-3, 4, size=n)[rng.random(n) < 0.5].mean()
        x[: n // 4] = rng.integers(max(info.min, -3), 4, size=n // 4)
        return x.astype(dtype)
    x = rng.integers(-20, 20, size=n).astype(np.float64) / 4
    pick = rng.random(n)
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0])
    x[pick < 0.2] = specials[rng.integers(0, len(specials), size=int((pick < 0.2).sum()))]
    return x.astype(dtype)


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" or a.dtype.name == "bfloat16" \
        else a


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32",
                                   "uint8", "int8"])
@pytest.mark.parametrize("shape,k", [((1,), 1), ((37,), 5), ((1000,), 40), ((64,), 64),
                                     ((16, 3200), 40), ((3, 5, 7), 7), ((300, 130), 2)])
def test_topk_matches_jax(shape: tuple[int, ...], k: int, dtype: str) -> None:
    jax = pytest.importorskip("jax")
    import ml_dtypes

    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    x = _special(int(np.prod(shape)), dtype if dtype != "bfloat16" else "float32",
                 seed=len(shape) + k).astype(dt).reshape(shape)
    vals, idx = xlc.jit(lambda a: xlc.lax.top_k(a, k))(x)
    jv, ji = jax.jit(lambda a: jax.lax.top_k(a, k))(x)
    np.testing.assert_array_equal(np.asarray(idx), np.asarray(ji))
    np.testing.assert_array_equal(_bits(np.asarray(vals)), _bits(np.asarray(jv)))


def test_jax_top_k_hlo_matches_jax() -> None:
    jax = pytest.importorskip("jax")

    x = _special(8 * 3000, "float32", 5).reshape(8, 3000)
    fn = jax.jit(lambda a: jax.lax.top_k(a, 25))
    got = xlc.compile(fn.lower(x).as_text(dialect="hlo"))(x)
    for g, w in zip(got, fn(x)):
        np.testing.assert_array_equal(_bits(np.asarray(g)), _bits(np.asarray(w)))


@pytest.mark.parametrize("ty", ["f32", "f64", "s64"])
@pytest.mark.parametrize("largest", ["true", "false"])
@pytest.mark.parametrize("n,k", [(50, 7), (5000, 100), (4096, 4096)])
def test_topk_against_evaluator(n: int, k: int, largest: str, ty: str) -> None:
    text = f"""HloModule t
ENTRY e {{
  x = {ty}[4,{n}] parameter(0)
  ROOT t = ({ty}[4,{k}], s32[4,{k}]) topk(x), k={k}, largest={largest}
}}
"""
    dtype = {"f32": "float32", "f64": "float64", "s64": "int64"}[ty]
    x = np.stack([_special(n, dtype, s) for s in range(4)])
    x[1] = np.arange(n)  # ascending: every element enters the heap (the worst case)
    x[2] = 1.0  # all ties
    check(text, x)


def test_topk_rows_run_on_the_thread_pool() -> None:
    text = """HloModule t
ENTRY e {
  x = f32[16,32000] parameter(0)
  ROOT t = (f32[16,40], s32[16,40]) topk(x), k=40, largest=true
}
"""
    x = np.random.default_rng(0).standard_normal((16, 32000)).astype(np.float32)
    check(text, x)
    from xlc.backend_cpu import compile_cpu

    exe = compile_cpu(parse_module(text), xlc.CompileOptions(threads=2))
    assert "xlc_pool_run" in exe.llvm_ir


# ---- radix sort ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "uint16", "int8",
                                   "uint32"])
@pytest.mark.parametrize("shape", [(49,), (3000,), (64, 700), (700, 3)])
def test_xnp_sort_and_argsort_match_jax(shape: tuple[int, ...], dtype: str) -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import ml_dtypes
    import xlc.numpy as xnp

    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    x = _special(int(np.prod(shape)), dtype if dtype != "bfloat16" else "float32",
                 seed=sum(shape)).astype(dt).reshape(shape)
    axis = 0 if shape == (700, 3) else -1
    got = xlc.jit(lambda a: (xnp.sort(a, axis=axis), xnp.argsort(a, axis=axis)))(x)
    want = jax.jit(lambda a: (jnp.sort(a, axis=axis), jnp.argsort(a, axis=axis, stable=True)))(x)
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))
    # values: NaNs of either sign are one class for both sorts, as are -0 and +0
    gv, wv = np.asarray(got[0]), np.asarray(want[0])
    if gv.dtype.kind == "f" or gv.dtype.name == "bfloat16":
        gv, wv = gv.astype(np.float64), wv.astype(np.float64)
        np.testing.assert_array_equal(np.isnan(gv), np.isnan(wv))
        gv, wv = np.nan_to_num(gv), np.nan_to_num(wv)
    np.testing.assert_array_equal(gv, wv)


@pytest.mark.parametrize("n", [100, 5000])
def test_jax_sort_hlo_matches_jax(n: int) -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    x = _special(3 * n, "float32", n).reshape(3, n)
    fns = [lambda a: jnp.sort(a), lambda a: jnp.argsort(a, stable=True),
           lambda a: jnp.sort(a, descending=True),
           lambda a: jax.lax.sort((a, a * 2), num_keys=1)]
    for fn in fns:
        text = jax.jit(fn).lower(x).as_text(dialect="hlo")
        sorts = [i for c in parse_module(text).computations for i in c.instructions
                 if i.opcode is Opcode.SORT]
        assert sorts and all(sort_key(i.called[0]) is not None for i in sorts), text
        got = xlc.compile(text)(x)
        want = jax.jit(fn)(x)
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            np.testing.assert_array_equal(_bits(np.asarray(g)), _bits(np.asarray(w)))


CMP = """cmp {{
  a = {ty}[] parameter(0)
  b = {ty}[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare({lhs}, {rhs}), direction={dir}{extra}
}}
"""


@pytest.mark.parametrize("ty,dir,extra,swap", [
    ("f32", "LT", ", type=TOTALORDER", False), ("f32", "GT", ", type=TOTALORDER", False),
    ("f32", "LT", ", type=TOTALORDER", True), ("f64", "GT", ", type=TOTALORDER", False),
    ("s64", "LT", "", False), ("u8", "GT", "", False), ("s16", "LT", "", True),
    ("f32", "LT", "", False), ("f32", "LE", ", type=TOTALORDER", False)])
@pytest.mark.parametrize("dim", [0, 1])
def test_comparator_sorts_against_evaluator(ty: str, dir: str, extra: str, swap: bool,
                                            dim: int) -> None:
    lhs, rhs = ("b", "a") if swap else ("a", "b")
    shape = "[300,64]" if dim == 0 else "[4,3000]"
    text = f"""HloModule s
{CMP.format(ty=ty, lhs=lhs, rhs=rhs, dir=dir, extra=extra)}
ENTRY e {{
  x = {ty}{shape} parameter(0)
  i = s32{shape} iota(), iota_dimension={dim}
  ROOT s = ({ty}{shape}, s32{shape}) sort(x, i), dimensions={{{dim}}}, is_stable=true, to_apply=cmp
}}
"""
    dtype = {"f32": "float32", "f64": "float64", "s64": "int64", "u8": "uint8",
             "s16": "int16"}[ty]
    dims = (300, 64) if dim == 0 else (4, 3000)
    x = _special(dims[0] * dims[1], dtype, 1).reshape(dims)
    if extra == "" and ty == "f32":
        x = np.nan_to_num(x, nan=1.5)  # a partial order: only defined without NaNs
    check(text, x)


def test_sort_key_recognition() -> None:
    def key_of(cmp: str) -> object:
        m = parse_module(f"HloModule k\n{cmp}\nENTRY e {{ x = f32[64] parameter(0)\n"
                         "  ROOT s = f32[64] sort(x), dimensions={0}, to_apply=cmp }\n")
        return sort_key(m.entry.root.called[0])

    total = key_of(CMP.format(ty="f32", lhs="a", rhs="b", dir="GT", extra=", type=TOTALORDER"))
    assert total is not None and total.descending and total.operand == 0
    assert key_of(CMP.format(ty="f32", lhs="a", rhs="b", dir="LT", extra="")) is None
    assert key_of(CMP.format(ty="f32", lhs="a", rhs="b", dir="LE",
                             extra=", type=TOTALORDER")) is None
    two_keys = """cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  lt = pred[] compare(a, b), direction=LT, type=TOTALORDER
  eq = pred[] compare(a, b), direction=EQ, type=TOTALORDER
  lt2 = pred[] compare(c, d), direction=LT
  tie = pred[] and(eq, lt2)
  ROOT r = pred[] or(lt, tie)
}"""
    assert key_of(two_keys) is None


def test_sort_rows_run_on_the_thread_pool() -> None:
    text = f"""HloModule s
{CMP.format(ty="f32", lhs="a", rhs="b", dir="LT", extra=", type=TOTALORDER")}
ENTRY e {{
  x = f32[64,4096] parameter(0)
  i = s32[64,4096] iota(), iota_dimension=1
  ROOT s = (f32[64,4096], s32[64,4096]) sort(x, i), dimensions={{1}}, to_apply=cmp
}}
"""
    check(text, _special(64 * 4096, "float32", 3).reshape(64, 4096))
    from xlc.backend_cpu import compile_cpu

    exe = compile_cpu(parse_module(text), xlc.CompileOptions(threads=2))
    assert "xlc_pool_run" in exe.llvm_ir


def test_topk_and_radix_sort_honour_layouts() -> None:
    x = np.random.default_rng(0).standard_normal((4, 3000)).astype(np.float32)
    check("""HloModule t
ENTRY e {
  x = f32[4,3000]{0,1} parameter(0)
  ROOT t = (f32[4,7]{0,1}, s32[4,7]{1,0}) topk(x), k=7, largest=true
}
""", x)
    check(f"""HloModule s
{CMP.format(ty="f32", lhs="a", rhs="b", dir="LT", extra=", type=TOTALORDER")}
ENTRY e {{
  x = f32[4,3000]{{0,1}} parameter(0)
  i = s32[4,3000]{{1,0}} iota(), iota_dimension=1
  ROOT s = (f32[4,3000]{{1,0}}, s32[4,3000]{{0,1}}) sort(x, i), dimensions={{1}}, to_apply=cmp
}}
""", x)


@pytest.mark.parametrize("dir", ["LT", "GT"])
def test_radix_sort_of_pred_keys(dir: str) -> None:
    text = f"""HloModule s
cmp {{
  a = pred[] parameter(0)
  b = pred[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction={dir}
}}
ENTRY e {{
  x = pred[2,300] parameter(0)
  i = s32[2,300] iota(), iota_dimension=1
  ROOT s = (pred[2,300], s32[2,300]) sort(x, i), dimensions={{1}}, is_stable=true, to_apply=cmp
}}
"""
    check(text, np.random.default_rng(0).random((2, 300)) < 0.5)
