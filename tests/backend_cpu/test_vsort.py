"""The vectorised sort (`vsort_lib.py`, `emit_vsort.py`): the library against numpy, and
single-operand sorts through it against the evaluator and XLA, bit for bit, including the
inputs that must take the stable fallback (-0.0 next to +0.0, NaNs with payloads)."""
from __future__ import annotations

import ctypes
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import xlc.numpy as xnp
from hypothesis import given, settings

import xlc
from tests.backend_cpu.helpers import check
from tests.hlo_programs import Program, _sort_total, _unary, hlo_programs
from xlc.backend_cpu import compile_cpu, runtime_lib
from xlc.backend_cpu.artifact_io import undefined_symbols
from xlc.backend_cpu.vsort_lib import (
    MODE_CANON,
    MODE_DESCENDING,
    MODE_FLOAT,
    MODE_SIGNED,
    MODE_UNSIGNED,
    PARALLEL_MIN,
    available,
)
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.parser import parse_module

pytestmark = pytest.mark.skipif(not available(), reason="the vectorised sort needs AVX-512")

_SORT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                            ctypes.c_int64, ctypes.c_int64)
_SORT_I64 = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                             ctypes.c_int64, ctypes.c_int64)


def _library(bits: int) -> ctypes._CFuncPtr:
    import llvmlite.binding as llvm

    runtime_lib.ensure(f"vsort{bits}")
    return _SORT_FN(llvm.address_of_symbol(f"xlc_vsort_u{bits}"))


SIZES = [0, 1, 2, 15, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 300, 511, 513,
         1000, 4097, 20000, PARALLEL_MIN - 1, PARALLEL_MIN, 3 * PARALLEL_MIN + 5]


def _keys(kind: str, n: int, dtype: type, rng: np.random.Generator) -> np.ndarray:
    info = np.iinfo(dtype)
    if kind == "random":
        return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    if kind == "few":  # many equal keys, the extremes included
        return rng.choice(np.array([info.min, 0, 1, info.max], dtype=dtype), n)
    if kind == "sorted":
        return np.sort(rng.integers(0, 1000, n).astype(dtype))
    if kind == "reversed":
        return np.sort(rng.integers(0, 1000, n).astype(dtype))[::-1].copy()
    if kind == "organ":  # up then down: a classic bad case for sampled pivots
        half = np.arange(n // 2, dtype=dtype)
        return np.concatenate([half, half[::-1], np.zeros(n % 2, dtype)])
    return np.full(n, 7, dtype)


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("kind", ["random", "few", "sorted", "reversed", "organ", "equal"])
@pytest.mark.parametrize("threads", [1, 2])
def test_library_sorts_unsigned_keys_like_numpy(bits: int, kind: str, threads: int) -> None:
    """In place and into another buffer, every size around the vector, leaf, unroll and
    threading boundaries."""
    sort = _library(bits)
    dtype = np.uint32 if bits == 32 else np.uint64
    rng = np.random.default_rng(bits + threads)
    for n in SIZES:
        x = _keys(kind, n, dtype, rng)
        y = x.copy()
        sort(y.ctypes.data, y.ctypes.data, n, threads, MODE_UNSIGNED)
        np.testing.assert_array_equal(y, np.sort(x), err_msg=f"n={n}")
        out = np.empty_like(x)
        sort(x.ctypes.data, out.ctypes.data, n, threads, MODE_UNSIGNED)
        np.testing.assert_array_equal(out, np.sort(x), err_msg=f"n={n} (out of place)")


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("descending", [False, True])
def test_library_modes_map_signed_and_float_keys(dtype: type, descending: bool) -> None:
    """MODE_SIGNED / MODE_FLOAT (+ MODE_DESCENDING) sort values, not their bits; floats in
    total order (-NaN first, +NaN last, -0 before +0)."""
    bits = np.dtype(dtype).itemsize * 8
    sort = _library(bits)
    rng = np.random.default_rng(1)
    n = 3 * PARALLEL_MIN + 7
    if np.dtype(dtype).kind == "f":
        x = (rng.standard_normal(n) * 100).astype(dtype)
        x[:4] = [np.inf, -np.inf, 0.0, -0.0]
        mode = MODE_FLOAT
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, n, dtype=dtype)
        mode = MODE_SIGNED
    want = np.sort(x, kind="stable")
    if np.dtype(dtype).kind == "f":  # -0.0 before +0.0 (np.sort keeps their input order)
        zeros = np.flatnonzero(want == 0)
        want[zeros] = np.where(np.arange(len(zeros)) == 0, -0.0, 0.0).astype(dtype)
    if descending:
        want = want[::-1]
        mode |= MODE_DESCENDING
    for threads in (1, 2):
        got = np.empty_like(x)
        sort(x.ctypes.data, got.ctypes.data, n, threads, mode)
        assert got.view(f"u{bits // 8}").tolist() == want.view(f"u{bits // 8}").tolist()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("odd", ["-0.0", "payload", "-nan", None])
@pytest.mark.parametrize("threads", [1, 2])
def test_library_canon_mode_refuses_lines_with_odd_floats(dtype: type, odd: str | None,
                                                          threads: int) -> None:
    """MODE_CANON: a line with -0.0 or a NaN other than the canonical +NaN is refused (1) and
    left as it was, even when sorted in place; otherwise it is sorted (0), canonical NaNs
    last."""
    bits = np.dtype(dtype).itemsize * 8
    sort = _library(bits)
    x = np.random.default_rng(2).standard_normal(2 * PARALLEL_MIN + 3).astype(dtype)
    x[10] = np.nan  # canonical: allowed
    u = x.view(f"u{bits // 8}")
    if odd == "-0.0":
        x[PARALLEL_MIN + 1] = -0.0
    elif odd == "payload":
        x[-1] = np.nan
        u[-1] |= 3
    elif odd == "-nan":
        x[0] = -np.nan
    before = x.copy()
    status = _SORT_I64(ctypes.cast(sort, ctypes.c_void_p).value)(
        x.ctypes.data, x.ctypes.data, len(x), threads, MODE_FLOAT | MODE_CANON)
    if odd is None:
        assert status == 0
        _same_bits(x, np.sort(before))
    else:
        assert status == 1
        _same_bits(x, before)


def _calls_vsort(exe: object) -> bool:
    return any(s.startswith("xlc_vsort_u") for s in undefined_symbols(exe.object_code()))


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(f"u{got.dtype.itemsize}"),
                                  want.view(f"u{want.dtype.itemsize}"))


SORT_HLO = """HloModule s
cmp {{
  a = {ty}[] parameter(0)
  b = {ty}[] parameter(1)
  ROOT r = pred[] compare(a, b), direction={dir}{order}
}}
ENTRY e {{
  x = {ty}[{dims}] parameter(0)
  ROOT s = {ty}[{dims}] sort(x), dimensions={{{dim}}}, to_apply=cmp
}}
"""


@pytest.mark.parametrize("ty", ["f32", "s32", "u32", "f64", "s64", "u64"])
@pytest.mark.parametrize("direction", ["LT", "GT"])
@pytest.mark.parametrize("dims,dim", [("100000", 0), ("9,3000", 1), ("3000,9", 0)])
def test_sorts_take_the_vectorised_path_and_match_the_evaluator(
        ty: str, direction: str, dims: str, dim: int) -> None:
    """Long lines, rows (threaded over lines) and columns (not contiguous: through scratch),
    ascending and descending, all six element types: bit-equal to the evaluator."""
    order = ", type=TOTALORDER" if ty[0] == "f" else ""
    text = SORT_HLO.format(ty=ty, dir=direction, order=order, dims=dims, dim=dim)
    shape = tuple(int(d) for d in dims.split(","))
    np_ty = {"f": "float", "s": "int", "u": "uint"}[ty[0]] + ty[1:]
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 1000).astype(np_ty)
    exe = compile_cpu(parse_module(text))
    assert _calls_vsort(exe)
    got, = exe.run([x])
    want, = flatten_result(evaluate(parse_module(text), [x]))
    _same_bits(got, np.asarray(want))


def test_short_lines_and_other_types_do_not_call_the_library() -> None:
    """Lines of up to INSERTION_MAX are insertion-sorted; 16-bit and 8-bit keys and sorts
    with several operands keep the radix sort."""
    short = SORT_HLO.format(ty="f32", dir="LT", order=", type=TOTALORDER", dims="40", dim=0)
    assert not _calls_vsort(compile_cpu(parse_module(short)))
    half = SORT_HLO.format(ty="f16", dir="LT", order=", type=TOTALORDER", dims="4000", dim=0)
    assert not _calls_vsort(compile_cpu(parse_module(half)))


@pytest.mark.parametrize("spice", ["-0.0", "nan payload", "negative nan", "clean"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_xnp_sort_keeps_zeros_and_nans_in_input_order_like_xla(spice: str, dtype: str) -> None:
    """xnp.sort's comparator equates -0.0 with +0.0 and every NaN: their order must be the
    stable sort's (input order), so such lines take the radix fallback; XLA agrees bit for
    bit."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    rng = np.random.default_rng(3)
    x = rng.standard_normal(200_000).astype(dtype)
    bits = x.view(f"u{x.itemsize}")
    if spice == "-0.0":
        x[::7] = 0.0
        x[::11] = -0.0
    elif spice == "nan payload":
        x[::13] = np.nan
        bits[::26] |= 5  # a payload on every other NaN
    elif spice == "negative nan":
        x[::17] = -np.nan
    f = xlc.jit(lambda v: xnp.sort(v))
    got = np.asarray(f(x))
    with jax.enable_x64(dtype == "float64"):
        want = np.asarray(jax.jit(lambda v: jnp.sort(v))(x))
    _same_bits(got, want)


def test_in_place_sort_of_a_donated_argument() -> None:
    """A donated argument sorted into its own buffer (src == dst for the library)."""
    x = np.random.default_rng(4).standard_normal(150_000).astype(np.float32)
    f = xlc.jit(lambda v: xnp.sort(v), donate_argnums=0)
    want = np.sort(x)
    got = np.asarray(f(x.copy()))
    _same_bits(got, want)


def test_saved_executable_carries_the_library_and_the_pool(tmp_path) -> None:
    """A `.xlc` file of a vectorised f32 sort carries `vsort32` (not `vsort64`) and the thread
    pool it calls, and a fresh process links them (the pool first) and sorts correctly."""
    text = SORT_HLO.format(ty="f32", dir="LT", order=", type=TOTALORDER", dims="200000", dim=0)
    hlo = tmp_path / "s.hlo"
    hlo.write_text(text)
    out = tmp_path / "s.xlc"
    subprocess.run([sys.executable, "-m", "xlc.cli", "compile", str(hlo), "-o", str(out)],
                   check=True, capture_output=True)
    import zipfile

    names = zipfile.ZipFile(out).namelist()
    assert "code/lib/vsort32.o" in names and "code/lib/pool.o" in names
    assert "code/lib/vsort64.o" not in names
    script = textwrap.dedent(f"""
        import numpy as np, xlc
        exe = xlc.load({str(out)!r})
        x = np.random.default_rng(5).standard_normal(200000).astype(np.float32)
        got = np.asarray(exe(x))
        assert np.array_equal(got, np.sort(x)), "wrong"
        print("ok")
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


@settings(max_examples=25, deadline=None)
@given(hlo_programs(dtypes=("f32", "f64", "s32"), big=True, max_steps=3,
                    steps=(_sort_total, _sort_total, _unary)))
def test_random_total_order_sorts_match_evaluator(prog: Program) -> None:
    """Random programs of total-order sorts (ascending, descending, "NaNs last"), some of
    values with -0.0s or NaNs, along any dimension of big arrays."""
    check(prog.text, *prog.args, rtol=prog.tolerance, atol=prog.tolerance)
