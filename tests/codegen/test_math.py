"""Accuracy of the in-IR transcendentals (xlc.codegen.math) against numpy, for f32 and f64, over
the whole float range (random bit patterns), dense in-domain samples and special values; plus a
check that the exp/tanh loops vectorise and call no libm function."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tests.codegen.kernel_helpers import KernelModule
from xlc.codegen import math as xm
from xlc.hlo.shape import PrimitiveType as P

LD = np.longdouble
# Max ulp error allowed per (function, dtype); the table in xlc/codegen/math.py documents them.
MAX_ULP = {
    "exp": (1, 1), "expm1": (2, 2), "log": (1, 1), "log1p": (2.5, 2.5), "tanh": (6, 3),
    "logistic": (3, 3), "erf": (3, 3.5), "sin": (2, 2), "cos": (2, 2), "tan": (3.5, 3.5),
    "sqrt": (0.5, 0.5), "rsqrt": (1.5, 1.5), "cbrt": (1, 1), "pow": (1, None),
    "atan2": (3.5, 3.5),
}
# Where sin/cos/tan are accurate (Cody-Waite reduction); beyond, only |result| <= 1 holds.
TRIG_LIMIT = {np.float32: np.inf, np.float64: np.inf}


def _erf(x: np.ndarray) -> np.ndarray:
    return np.frompyfunc(math.erf, 1, 1)(x.astype(np.float64)).astype(np.float64)


REF = {
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "tanh": np.tanh,
    "logistic": lambda x: 1 / (1 + np.exp(-x)), "erf": _erf, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "cbrt": np.cbrt,
    "pow": np.power, "atan2": np.arctan2,
}
DOMAIN = {  # dense in-domain sample range
    "exp": (-110, 90), "expm1": (-2, 2), "log": (0, 10), "log1p": (-1, 2), "tanh": (-12, 12),
    "logistic": (-100, 100), "erf": (-7, 7), "sin": (-100, 100), "cos": (-100, 100),
    "tan": (-100, 100), "sqrt": (0, 100), "rsqrt": (0, 100), "cbrt": (-100, 100),
    "pow": (0, 4), "atan2": (-5, 5),
}


@pytest.fixture(scope="module", params=["native", "portable", "wide"])
def kernels(request: pytest.FixtureRequest) -> KernelModule:
    """Every function for f32 and f64. "portable" builds them as for a target without a
    one-instruction ldexp (the GPU, x86 without AVX-512): 2^n by integer bit operations;
    "wide" builds them on 512-bit vectors (`<16 x float>`, `<8 x double>`) instead of scalars."""
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "portable":
            mp.setattr(xm, "has_vector_ldexp", lambda module: False)
        km = KernelModule("mathtest", vector_bits=512 if request.param == "wide" else 0)
        for name, fn in xm.UNARY.items():
            for pt in (P.F32, P.F64):
                km.add(f"{name}_{pt.text}", [pt], pt, lambda b, v, fn=fn: fn(b, v[0]))
        for name, fn in xm.BINARY.items():
            for pt in (P.F32, P.F64):
                km.add(f"{name}_{pt.text}", [pt, pt], pt,
                       lambda b, v, fn=fn: fn(b, v[0], v[1]))
        for pt in (P.F32, P.F64):  # the forms the elemental emitter uses on known ranges
            km.add(f"log_positive_{pt.text}", [pt], pt,
                   lambda b, v: xm.log(b, v[0], positive_normal=True))
            km.add(f"exp_nonpositive_{pt.text}", [pt], pt,
                   lambda b, v: xm.exp(b, v[0], arg_range=(-math.inf, 0.0)))
        km.compile()
    km.portable = request.param == "portable"  # type: ignore[attr-defined]
    return km


def _specials(dt: type) -> np.ndarray:
    fi = np.finfo(dt)
    v = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, fi.tiny, -fi.tiny,
         fi.smallest_subnormal, -fi.smallest_subnormal, fi.max, -fi.max, fi.tiny / 3,
         fi.eps, 1e-30, -1e-30, 88.7, -88.7, 709.7, -745.0, 100.0, -100.0, 1e5, 3.0, -3.0]
    return np.array(v, dtype=np.float64).astype(dt)


def _samples(dt: type, lo: float, hi: float, n: int = 20000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ity = np.uint32 if dt == np.float32 else np.uint64
    bits = rng.integers(0, np.iinfo(ity).max, size=n, dtype=ity, endpoint=True).view(dt)
    dense = rng.uniform(lo, hi, size=n).astype(dt)
    return np.concatenate([_specials(dt), bits, dense])


def ulp_error(got: np.ndarray, ref: np.ndarray, dt: type) -> np.ndarray:
    """|got - ref| in units of the spacing of ref rounded to dt (0 where both NaN or equal);
    a correctly rounded result has error <= 0.5."""
    with np.errstate(all="ignore"):
        ref_r = ref.astype(dt)
    both_nan = np.isnan(got) & np.isnan(ref_r)
    same = (got == ref_r) | both_nan
    with np.errstate(all="ignore"):
        sp = np.spacing(np.abs(ref_r).astype(dt)).astype(LD)
        err = np.abs(got.astype(LD) - ref.astype(LD)) / sp
    err = np.where(same, 0, err)
    err = np.where(np.isnan(err), np.inf, err)  # NaN vs number, or inf mismatch
    return err.astype(np.float64)


def _reference(name: str, args: list[np.ndarray], dt: type) -> np.ndarray:
    with np.errstate(all="ignore"):
        hp = [a.astype(np.float64 if dt == np.float32 else LD) for a in args]
        if name == "erf":
            return _erf(hp[0]).astype(LD)
        return np.asarray(REF[name](*hp)).astype(LD)


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(xm.UNARY))
def test_unary_accuracy(kernels: KernelModule, name: str, dt: type) -> None:
    x = _samples(dt, *DOMAIN[name])
    got = kernels(f"{name}_{'f32' if dt == np.float32 else 'f64'}", x)
    ref = _reference(name, [x], dt)
    check = np.ones(x.shape, bool)
    if name in ("sin", "cos", "tan"):
        big = ~(np.abs(x) <= TRIG_LIMIT[dt])
        check = ~big
        fin = np.isfinite(x)
        if name != "tan":
            assert np.all(np.abs(got[big & fin]) <= 1)
        assert np.all(np.isnan(got[~fin]))
    err = ulp_error(got[check], ref[check], dt)
    limit = MAX_ULP[name][0 if dt == np.float32 else 1]
    worst = int(np.argmax(err))
    assert err.max() <= limit, (
        f"{name} {dt.__name__}: {err.max():.2f} ulp at x={x[check][worst]!r} "
        f"got {got[check][worst]!r} want {ref[check][worst]!r}")


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
def test_range_specialised_forms(kernels: KernelModule, dt: type) -> None:
    """log with positive_normal=True on positive normal numbers, +inf and NaN; exp with a
    non-positive argument range on x <= 0, -inf and NaN: as accurate as the general forms."""
    tag = "f32" if dt == np.float32 else "f64"
    x = np.abs(_samples(dt, 0, 10))
    x = x[(x >= np.finfo(dt).tiny) | ~np.isfinite(x)]
    err = ulp_error(kernels(f"log_positive_{tag}", x), _reference("log", [x], dt), dt)
    assert err.max() <= MAX_ULP["log"][0], x[np.argmax(err)]
    x = -np.abs(_samples(dt, 0, 110))
    err = ulp_error(kernels(f"exp_nonpositive_{tag}", x), _reference("exp", [x], dt), dt)
    assert err.max() <= MAX_ULP["exp"][0], x[np.argmax(err)]


SIGNED_ZERO = {  # f(-0) is -0 for the odd functions, f(+-0) fixed for the others
    "tanh": -0.0, "sin": -0.0, "tan": -0.0, "erf": -0.0, "expm1": -0.0, "log1p": -0.0,
    "sqrt": -0.0, "cbrt": -0.0, "exp": 1.0, "cos": 1.0, "log": -np.inf, "logistic": 0.5,
}


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
def test_signed_zero(kernels: KernelModule, dt: type) -> None:
    tag = "f32" if dt == np.float32 else "f64"
    for name, want in SIGNED_ZERO.items():
        got = kernels(f"{name}_{tag}", np.array([-0.0, 0.0], dt))
        assert got[0] == want and np.signbit(got[0]) == np.signbit(want), (name, got[0])
        plus = abs(want) if want != -np.inf else want
        assert got[1] == plus and not np.signbit(got[1]) or name == "log", (name, got[1])


def test_exp_scales_with_ldexp_where_it_is_one_instruction(kernels: KernelModule) -> None:
    """x86 AVX-512: exp's 2^n step is llvm.ldexp (vscalef); the portable build never is."""
    from xlc.codegen import llvm_utils as lu

    text = str(kernels.ref)
    native = lu.has_vector_ldexp(lu.new_module("probe")) and not kernels.portable
    assert ("llvm.ldexp" in text) == native


def _binary_samples(dt: type, name: str) -> tuple[np.ndarray, np.ndarray]:
    s = _specials(dt)
    xs, ys = np.meshgrid(s, np.concatenate([s, np.array([0.5, 3.0, -3.0, -2.5, 7.0], dt)]))
    x1, y1 = _samples(dt, *DOMAIN[name], n=8000, seed=1), _samples(dt, -8, 8, n=8000, seed=2)
    if name == "atan2":
        y1 = _samples(dt, *DOMAIN[name], n=8000, seed=2)
    return (np.concatenate([xs.ravel(), x1]).astype(dt),
            np.concatenate([ys.ravel(), y1]).astype(dt))


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(xm.BINARY))
def test_binary_accuracy(kernels: KernelModule, name: str, dt: type) -> None:
    x, y = _binary_samples(dt, name)
    key = f"{name}_{'f32' if dt == np.float32 else 'f64'}"
    if name == "atan2":
        got = kernels(key, y, x)
        ref = _reference(name, [y, x], dt)
    else:
        got = kernels(key, x, y)
        ref = _reference(name, [x, y], dt)
    err = ulp_error(got, ref, dt)
    limit = MAX_ULP[name][0 if dt == np.float32 else 1]
    if limit is None:
        # f64 pow: relative error ~ (2 + |y ln x|) 2^-53 (exp(y log x) without extra precision)
        with np.errstate(all="ignore"):
            bound = 4 + 2 * np.abs(y.astype(LD) * np.log(np.abs(x.astype(LD))))
        bound = np.where(np.isfinite(bound), bound, 4)
        bad = err > bound
    else:
        bad = err > limit
    i = int(np.argmax(err - (bound if limit is None else limit)))
    assert not bad.any(), (f"{name} {dt.__name__}: {err[i]:.2f} ulp at "
                           f"({x[i]!r}, {y[i]!r}) got {got[i]!r} want {ref[i]!r}")


def test_pow_special_cases(kernels: KernelModule) -> None:
    cases = [(-2.0, 3.0, -8.0), (-2.0, 0.5, np.nan), (-0.0, -3.0, -np.inf), (0.0, -2.0, np.inf),
             (np.nan, 0.0, 1.0), (1.0, np.nan, 1.0), (-1.0, np.inf, 1.0), (-np.inf, 3.0, -np.inf),
             (-np.inf, -3.0, -0.0), (0.5, -np.inf, np.inf), (2.0, -np.inf, 0.0)]
    x = np.array([c[0] for c in cases])
    y = np.array([c[1] for c in cases])
    want = np.array([c[2] for c in cases])
    for key, dt in (("pow_f32", np.float32), ("pow_f64", np.float64)):
        got = kernels(key, x.astype(dt), y.astype(dt))
        np.testing.assert_array_equal(got, want.astype(dt))
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_exp_and_tanh_loops_vectorize(kernels: KernelModule) -> None:
    ir_text = str(kernels.ref)
    for key in ("exp_f32", "tanh_f32"):
        sym = kernels.kernels[key][0]
        body = ir_text.split(f"@{sym}(")[1].split("\n}\n")[0]
        assert "<16 x float>" in body or "<8 x float>" in body, key
    for libm in ("@expf", "@tanhf", "@exp(", "@tanh(", "llvm.exp.", "llvm.tanh."):
        assert libm not in ir_text


def test_explicit_vector_kernel_with_nontemporal_stores() -> None:
    """math functions on <16 x float> values, vector loads and !nontemporal stores."""
    from llvmlite import ir

    from xlc.backend_cpu import jit
    from xlc.codegen import llvm_utils as lu

    name = lu.unique_symbol("vec_tanh")
    mod = lu.new_module(name)
    fn = ir.Function(mod, ir.FunctionType(lu.VOID, [lu.PTR, lu.PTR, lu.I64]), name=name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    out, inp, n = fn.args
    with lu.for_range(b, b.udiv(n, ir.Constant(lu.I64, 16))) as i:
        off = b.mul(i, ir.Constant(lu.I64, 16))
        v = lu.load_vector(b, inp, off, P.F32, 16, align=64)
        half = lu.splat(b, ir.Constant(lu.F32, 0.5), 16)
        y = b.fmul(xm.tanh(b, xm.exp(b, b.fmul(v, half))), half)
        lu.store_vector(b, y, out, off, P.F32, align=64, nontemporal=True)
    b.ret_void()
    assert "!nontemporal" in str(mod)
    ref = jit.compile_module(mod, name)
    asm = lu.emit_assembly(ref)
    assert "vmovntps" in asm and "zmm" in asm
    assert lu.emit_object(ref)[:4] == b"\x7fELF"
    import ctypes

    buf = np.empty(4096 + 16, np.float32)
    start = (-buf.ctypes.data % 64) // 4
    x = buf[start:start + 4096]
    x[:] = np.linspace(-20, 20, 4096, dtype=np.float32)
    o = np.empty(4096 + 16, np.float32)
    ostart = (-o.ctypes.data % 64) // 4
    y = o[ostart:ostart + 4096]
    ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        jit.jit_engine().address(name))(y.ctypes.data, x.ctypes.data, 4096)
    want = np.tanh(np.exp(x.astype(np.float64) * 0.5)) * 0.5
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=0)


def test_math_lowers_to_ptx_without_calls() -> None:
    """Device-free GPU tier: the same IR compiles for NVPTX with no libcalls or externs."""
    import re

    import llvmlite.binding as llvm
    from llvmlite import ir

    from xlc.codegen import llvm_utils as lu

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    try:
        target = llvm.Target.from_triple("nvptx64-nvidia-cuda")
    except RuntimeError:
        pytest.skip("this LLVM has no NVPTX target")
    tm = target.create_target_machine(cpu="sm_80", opt=2)
    mod = ir.Module("ptx_math")
    mod.triple = "nvptx64-nvidia-cuda"
    mod.data_layout = str(tm.target_data)
    fns = [(n, f, 1) for n, f in xm.UNARY.items()] + [(n, f, 2) for n, f in xm.BINARY.items()]
    for name, fn, arity in fns:
        for ty, tag in ((lu.F32, "f32"), (lu.F64, "f64")):
            func = ir.Function(mod, ir.FunctionType(ty, [ty] * arity), name=f"{name}_{tag}")
            b = ir.IRBuilder(func.append_basic_block("entry"))
            b.ret(fn(b, *func.args))
    ref = llvm.parse_assembly(str(mod))
    ref.verify()
    ptx = tm.emit_assembly(ref)
    assert re.search(r"\bcall\b", ptx) is None
    assert ".extern" not in ptx
