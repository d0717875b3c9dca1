"""Width-changing bitcast-convert (issue 11, item 22) on every backend: XLA semantics (a narrower
result gains a minor-most dim, element j holding bits [j w, (j+1) w) of the operand element,
little-endian; a wider result joins the operand's minor-most dim), against numpy's `view`; and
JAX's rbg / unsafe_rbg `jax.random` programs and `lax.rng_bit_generator` against jax."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tests.backend_cpu.helpers import check
from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.helpers import compile_text
from xlc.backend_cpu import compile_cpu
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.parser import parse_module

NP = {"u8": np.uint8, "s8": np.int8, "u16": np.uint16, "s16": np.int16, "f16": np.float16,
      "bf16": ml_dtypes.bfloat16, "u32": np.uint32, "s32": np.int32, "f32": np.float32,
      "u64": np.uint64, "s64": np.int64, "f64": np.float64}
CASES = [("u32", (3, 2), "u64"), ("u64", (2,), "u32"), ("f32", (5,), "u8"),
         ("u8", (5, 4), "f32"), ("f64", (3,), "f16"), ("bf16", (2, 3, 2), "f32"),
         ("s16", (4, 2), "s32"), ("f32", (2, 3), "s16"), ("s8", (2, 8), "f64"),
         ("u64", (), "bf16"), ("f16", (4,), "u8")]


def bitcast_text(src: str, dims: tuple[int, ...], dst: str) -> tuple[str, tuple[int, ...]]:
    """An entry bitcast-converting its parameter (negated first, so the op is not the only
    one) to `dst`; and the result dims."""
    ratio = np.dtype(NP[src]).itemsize / np.dtype(NP[dst]).itemsize
    out = dims if ratio == 1 else dims + (int(ratio),) if ratio > 1 else dims[:-1]
    shape = f"{src}[{','.join(map(str, dims))}]"
    oshape = f"{dst}[{','.join(map(str, out))}]"
    neg = "not" if src.startswith("u") else "negate"
    text = (f"HloModule m\nENTRY e {{\n  p = {shape} parameter(0)\n  n = {shape} {neg}(p)\n"
            f"  ROOT r = {oshape} bitcast-convert(n)\n}}\n")
    return text, out


def argument(src: str, dims: tuple[int, ...]) -> np.ndarray:
    """Random bits of type `src` with no NaN (NaN payloads need not survive negate)."""
    rng = np.random.default_rng(len(dims) + sum(dims))
    raw = rng.integers(0, 256, int(np.prod(dims, dtype=np.int64)) * np.dtype(NP[src]).itemsize,
                       dtype=np.uint8)
    x = raw.view(NP[src]).reshape(dims)
    if np.dtype(NP[src]).kind == "f" or src == "bf16":
        x = np.where(np.isfinite(x.astype(np.float64)), x, NP[src](1.5))
    return np.asarray(x, NP[src])


def numpy_bitcast(x: np.ndarray, dst: str, out: tuple[int, ...]) -> np.ndarray:
    y = x if x.dtype.kind in "ui" else -x
    if x.dtype.kind == "u":
        y = ~x
    elif x.dtype.kind == "i":
        y = (-x.astype(np.int64)).astype(x.dtype)
    return np.ascontiguousarray(y).view(NP[dst]).reshape(out)


@pytest.mark.parametrize("src,dims,dst", CASES)
def test_evaluator_matches_numpy_view(src: str, dims: tuple[int, ...], dst: str) -> None:
    text, out = bitcast_text(src, dims, dst)
    x = argument(src, dims)
    got = np.asarray(evaluate(parse_module(text), [x]))
    np.testing.assert_array_equal(got.view(np.uint8), numpy_bitcast(x, dst, out).view(np.uint8))


@pytest.mark.parametrize("src,dims,dst", CASES)
def test_cpu_matches_evaluator(src: str, dims: tuple[int, ...], dst: str) -> None:
    """Failed before with UnsupportedOpError: no elemental generator for 'bitcast-convert'."""
    text, out = bitcast_text(src, dims, dst)
    x = argument(src, dims)
    got = compile_cpu(parse_module(text)).run([x])[0]
    assert got.shape == out
    np.testing.assert_array_equal(got.view(np.uint8), numpy_bitcast(x, dst, out).view(np.uint8))


@pytest.mark.parametrize("src,dims,dst", CASES)
def test_gpu_emulated_matches_evaluator(src: str, dims: tuple[int, ...], dst: str) -> None:
    text, out = bitcast_text(src, dims, dst)
    x = argument(src, dims)
    got = Emulator(compile_text(text)).run([x])[0]
    assert got.shape == out
    np.testing.assert_array_equal(got.view(np.uint8), numpy_bitcast(x, dst, out).view(np.uint8))


def test_fused_with_layouts_matches_evaluator() -> None:
    """Inside a fusion, from a transposed operand with a non-default layout."""
    text = """HloModule m
ENTRY e {
  p = u32[2,3]{0,1} parameter(0)
  t = u32[3,2]{1,0} transpose(p), dimensions={1,0}
  w = u64[3]{0} bitcast-convert(t)
  n = u8[3,8]{1,0} bitcast-convert(w)
  c = u8[3,8]{1,0} add(n, n)
  ROOT r = (u64[3], u8[3,8]) tuple(w, c)
}
"""
    x = np.arange(6, dtype=np.uint32).reshape(2, 3) * 0x01020304
    check(text, x, rtol=0, atol=0)
    want = flatten_result(evaluate(parse_module(text), [x]))
    got = Emulator(compile_text(text)).run([x])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, np.asarray(w))


def _jax_programs() -> list[tuple[str, object, object]]:
    jax = pytest.importorskip("jax")
    from jax import lax

    out = []
    for impl in ("rbg", "unsafe_rbg"):
        def draws(kd: object, impl: str = impl) -> tuple:
            k = jax.random.wrap_key_data(kd, impl=impl)
            k1, k2 = jax.random.split(k)
            return (jax.random.uniform(k1, (4, 3)), jax.random.normal(k2, (5,)),
                    jax.random.bits(k, (2, 3), dtype="uint8"),
                    jax.random.randint(k2, (6,), 0, 100))
        out.append((impl, draws, jax.random.key_data(jax.random.key(0, impl=impl))))
    for algo in (lax.RandomAlgorithm.RNG_THREE_FRY, lax.RandomAlgorithm.RNG_PHILOX):
        def gen(key: object, algo: object = algo) -> tuple:
            k2, bits32 = lax.rng_bit_generator(key, (3, 4), dtype="uint32", algorithm=algo)
            _, bits8 = lax.rng_bit_generator(k2, (5,), dtype="uint8", algorithm=algo)
            return k2, bits32, bits8
        out.append((str(algo), gen, np.array([1, 2, 3, 4], np.uint32)))
    return out


@pytest.mark.parametrize("backend", ["cpu", "gpu-emulator"])
def test_jax_rbg_random_programs_match_jax(backend: str) -> None:
    """jax.random with rbg / unsafe_rbg keys (u32[4] keys bitcast to u64[2] for
    rng-bit-generator, u64 bits back to u32) and lax.rng_bit_generator: CPU compile failed
    with 'no elemental generator for bitcast-convert from u32 to u64'."""
    jax = pytest.importorskip("jax")
    for name, fn, key in _jax_programs():
        text = jax.jit(fn).lower(key).as_text(dialect="hlo")
        want = [np.asarray(w) for w in jax.tree_util.tree_leaves(jax.jit(fn)(key))]
        args = [np.asarray(key)]
        if backend == "cpu":
            got = compile_cpu(parse_module(text)).run(args)
        else:
            got = Emulator(compile_text(text)).run(args)
        assert len(got) == len(want), name
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=name)
