"""The elemental generators (xlc.codegen.elemental) against numpy formulas of XLA semantics:
one JIT module with a loop kernel per (opcode, element type) case."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tests.codegen.kernel_helpers import KernelModule
from xlc.codegen import elemental
from xlc.errors import UnsupportedOpError
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType as P
from xlc.hlo.shape import Shape

N = 64
BF16 = ml_dtypes.bfloat16


def make_inst(op: Opcode, out: P, ins: list[P], **attrs: object) -> HloInstruction:
    params = [HloInstruction(Opcode.PARAMETER, Shape.array(pt, [N]), attrs={"parameter_number": i})
              for i, pt in enumerate(ins)]
    return HloInstruction(op, Shape.array(out, [N]), params, attrs=attrs)


def _int_div(x: np.ndarray, y: np.ndarray, rem: bool) -> np.ndarray:
    out = []
    info = np.iinfo(x.dtype)
    for a, b in zip(x.tolist(), y.tolist()):
        if b == 0:
            out.append(a if rem else -1)
        elif info.min < 0 and a == info.min and b == -1:
            out.append(0 if rem else a)
        else:
            q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
            out.append(a - q * b if rem else q)
    return np.array(out).astype(x.dtype) if info.min < 0 else \
        np.array([(v & info.max) for v in out], dtype=x.dtype)


def _shift(x: np.ndarray, y: np.ndarray, kind: str) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    uy = y.astype(np.uint64) if y.dtype.kind == "u" else y.view(f"u{y.dtype.itemsize}").astype(
        np.uint64)
    out = []
    for a, s in zip(x.tolist(), uy.tolist()):
        ua = a & ((1 << bits) - 1)
        if kind == "shl":
            r = 0 if s >= bits else (ua << s) & ((1 << bits) - 1)
        elif kind == "lshr":
            r = 0 if s >= bits else ua >> s
        else:
            sa = ua - (1 << bits) if ua >> (bits - 1) else ua  # XLA: ashr on the bits
            r = sa >> min(s, bits - 1)
        out.append(r)
    return np.array([v & ((1 << bits) - 1) for v in out], dtype=f"u{x.dtype.itemsize}").view(
        x.dtype)


def _nanmax(x: np.ndarray, y: np.ndarray, is_max: bool) -> np.ndarray:
    return np.maximum(x, y) if is_max else np.minimum(x, y)  # numpy also propagates NaN


def _round_afz(x: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(x), np.trunc(x + np.copysign(0.5 - np.spacing(
        np.float32(0.5)) * 0, x)), x).astype(x.dtype)


def _sat(x: np.ndarray, dt: type) -> np.ndarray:
    info = np.iinfo(dt)
    return np.array([0 if np.isnan(v) else int(max(min(v, info.max), info.min))
                     for v in x.astype(np.float64).tolist()], dtype=dt)


def _total_key(x: np.ndarray) -> np.ndarray:
    bits = x.view(f"i{x.dtype.itemsize}").astype(np.int64)
    mask = (1 << (x.dtype.itemsize * 8 - 1)) - 1
    return np.where(bits < 0, bits ^ mask, bits)


def _reduce_prec_f16(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        y = x.astype(np.float16).astype(np.float32)
    return np.where(np.abs(y) < 2.0 ** -14, np.copysign(np.float32(0), x), y)


def _make_complex(re: np.ndarray, im: np.ndarray) -> np.ndarray:
    out = np.empty(re.shape, np.complex64)
    out.real, out.imag = re, im
    return out


def _f32_samples(rng: np.random.Generator) -> np.ndarray:
    base = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, -0.5, 1.5, 2.5, -2.5, 1e10,
                     -1e10, 3e9, -3e9, 255.7, -129.2, 65504.0, 65520.0, 1e-8, 7.0], np.float32)
    rest = (rng.standard_normal(N - base.size) * 50).astype(np.float32)
    return np.concatenate([base, rest])


def _ints(rng: np.random.Generator, dt: type) -> np.ndarray:
    info = np.iinfo(dt)
    base = np.array([0, 1, info.max, info.min, 7, 2, 3], dtype=dt)
    if info.min < 0:
        base = np.concatenate([base, np.array([-1, -7, info.min + 1], dtype=dt)])
    rest = rng.integers(info.min, info.max, size=N - base.size, dtype=dt, endpoint=True)
    return np.concatenate([base, rest])


def _small(rng: np.random.Generator, dt: type) -> np.ndarray:
    v = rng.integers(-3 if np.iinfo(dt).min < 0 else 0, 70, size=N).astype(dt)
    v[:4] = np.array([0, 1, 2, 3 if np.iinfo(dt).min >= 0 else -1], dtype=dt)
    return v


def _cases() -> list[tuple]:
    """(id, opcode, out type, in types, attrs, inputs(rng), reference(*inputs))."""
    rng = np.random.default_rng(0)
    f = _f32_samples(rng)
    g = np.roll(f, 7)
    cs: list[tuple] = []
    for dt, pt in ((np.int8, P.S8), (np.int32, P.S32), (np.uint32, P.U32), (np.int64, P.S64)):
        x, y = _ints(rng, dt), np.roll(_ints(rng, dt), 3)
        y[::5] = 0
        if np.iinfo(dt).min < 0:
            x[0], y[0] = np.iinfo(dt).min, -1
        cs.append((f"div_{pt.text}", Opcode.DIVIDE, pt, [pt, pt], {}, (x, y),
                   lambda a, b: _int_div(a, b, False)))
        cs.append((f"rem_{pt.text}", Opcode.REMAINDER, pt, [pt, pt], {}, (x, y),
                   lambda a, b: _int_div(a, b, True)))
        s = _small(rng, dt)
        for op, kind in ((Opcode.SHIFT_LEFT, "shl"), (Opcode.SHIFT_RIGHT_LOGICAL, "lshr"),
                         (Opcode.SHIFT_RIGHT_ARITHMETIC, "ashr")):
            cs.append((f"{kind}_{pt.text}", op, pt, [pt, pt], {}, (x, s),
                       lambda a, b, k=kind: _shift(a, b, k)))
        cs.append((f"max_{pt.text}", Opcode.MAXIMUM, pt, [pt, pt], {}, (x, y), np.maximum))
        cs.append((f"min_{pt.text}", Opcode.MINIMUM, pt, [pt, pt], {}, (x, y), np.minimum))
        cs.append((f"popcnt_{pt.text}", Opcode.POPCNT, pt, [pt], {}, (x,),
                   lambda a: np.array([bin(int(v) & ((1 << (a.itemsize * 8)) - 1)).count("1")
                                       for v in a], dtype=a.dtype)))
        cs.append((f"clz_{pt.text}", Opcode.CLZ, pt, [pt], {}, (x,),
                   lambda a: np.array([a.itemsize * 8 - (int(v) & ((1 << (a.itemsize * 8)) - 1)
                                                         ).bit_length() for v in a], a.dtype)))
        cs.append((f"sign_{pt.text}", Opcode.SIGN, pt, [pt], {}, (x,), np.sign))
        cs.append((f"abs_{pt.text}", Opcode.ABS, pt, [pt], {}, (x,),
                   lambda a: np.abs(a).astype(a.dtype)))
        cs.append((f"f32_to_{pt.text}", Opcode.CONVERT, pt, [P.F32], {}, (f,),
                   lambda a, dt=dt: _sat(a, dt)))
        cs.append((f"{pt.text}_to_f32", Opcode.CONVERT, P.F32, [pt], {}, (x,),
                   lambda a: a.astype(np.float32)))
    xs, ys = _small(rng, np.int32) - 5, _small(rng, np.int32) % 9 - 2
    xs[:3] = [1, -1, 2]
    ys[:3] = [-5, -3, 40]
    cs.append(("pow_s32", Opcode.POWER, P.S32, [P.S32, P.S32], {}, (xs, ys),
               lambda a, b: np.array([(x_ ** y_ if y_ >= 0 else (1 if x_ == 1 else 0))
                                      for x_, y_ in zip(a.tolist(), b.tolist())],
                                     dtype=np.int64).astype(np.int32)))
    for pt, dt in ((P.F32, np.float32), (P.F16, np.float16), (P.BF16, BF16), (P.F64, np.float64)):
        a, b = f.astype(dt), g.astype(dt)
        for op, fn in ((Opcode.ADD, np.add), (Opcode.SUBTRACT, np.subtract),
                       (Opcode.MULTIPLY, np.multiply), (Opcode.DIVIDE, np.divide),
                       (Opcode.MAXIMUM, lambda p, q: _nanmax(p, q, True)),
                       (Opcode.MINIMUM, lambda p, q: _nanmax(p, q, False)),
                       (Opcode.REMAINDER, np.fmod)):
            cs.append((f"{op.text}_{pt.text}", op, pt, [pt, pt], {}, (a, b),
                       lambda p, q, fn=fn, dt=dt: fn(p.astype(np.float64), q.astype(np.float64)
                                                     ).astype(np.float32).astype(dt)
                       if dt != np.float64 else fn(p, q)))
        for op, fn in ((Opcode.FLOOR, np.floor), (Opcode.CEIL, np.ceil),
                       (Opcode.ROUND_EVEN, np.rint), (Opcode.ROUND_AFZ, _round_afz),
                       (Opcode.SIGN, np.sign), (Opcode.ABS, np.abs), (Opcode.NEGATE, np.negative),
                       (Opcode.SQRT, np.sqrt)):
            cs.append((f"{op.text}_{pt.text}", op, pt, [pt], {}, (a,),
                       lambda p, fn=fn, dt=dt: fn(p.astype(np.float32)).astype(dt)
                       if dt != np.float64 else fn(p)))
        cs.append((f"isfinite_{pt.text}", Opcode.IS_FINITE, P.PRED, [pt], {}, (a,), np.isfinite))
        cs.append((f"{pt.text}_to_pred", Opcode.CONVERT, P.PRED, [pt], {}, (a,),
                   lambda p: p.astype(np.float32) != 0))
    for d in ("EQ", "NE", "LT", "LE", "GT", "GE"):
        npop = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
                "GT": np.greater, "GE": np.greater_equal}[d]
        cs.append((f"cmp_float_{d}", Opcode.COMPARE, P.PRED, [P.F32, P.F32], {"direction": d},
                   (f, g), npop))
        cs.append((f"cmp_total_{d}", Opcode.COMPARE, P.PRED, [P.F32, P.F32],
                   {"direction": d, "type": "TOTALORDER"},
                   (f, np.where(np.arange(N) % 3 == 0, f, g)),
                   lambda p, q, npop=npop: npop(_total_key(p), _total_key(q))))
        si, sj = _ints(rng, np.int32), np.roll(_ints(rng, np.int32), 1)
        cs.append((f"cmp_signed_{d}", Opcode.COMPARE, P.PRED, [P.S32, P.S32], {"direction": d},
                   (si, sj), npop))
        cs.append((f"cmp_unsigned_{d}", Opcode.COMPARE, P.PRED, [P.S32, P.S32],
                   {"direction": d, "type": "UNSIGNED"}, (si, sj),
                   lambda p, q, npop=npop: npop(p.view(np.uint32), q.view(np.uint32))))
    d64 = np.concatenate([f.astype(np.float64) * (1 + 2.0 ** -30), np.array(
        [1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -8 + 2.0 ** -45], np.float64)])[:N]
    cs.append(("f64_to_f16", Opcode.CONVERT, P.F16, [P.F64], {}, (d64,),
               lambda p: p.astype(np.float16)))
    cs.append(("f64_to_bf16", Opcode.CONVERT, P.BF16, [P.F64], {}, (d64,),
               lambda p: p.astype(BF16)))
    cs.append(("f32_to_bf16", Opcode.CONVERT, P.BF16, [P.F32], {}, (f,),
               lambda p: p.astype(BF16)))
    cs.append(("bf16_to_f64", Opcode.CONVERT, P.F64, [P.BF16], {}, (f.astype(BF16),),
               lambda p: p.astype(np.float64)))
    big = _ints(rng, np.int32)
    cs.append(("s32_to_f16", Opcode.CONVERT, P.F16, [P.S32], {}, (big % 70000,),
               lambda p: p.astype(np.float16)))
    cs.append(("s64_to_bf16", Opcode.CONVERT, P.BF16, [P.S64], {}, (_ints(rng, np.int64) >> 11,),
               lambda p: p.astype(np.float64).astype(BF16)))
    cs.append(("pred_to_f32", Opcode.CONVERT, P.F32, [P.PRED], {}, (f > 0,),
               lambda p: p.astype(np.float32)))
    cs.append(("u8_to_s32", Opcode.CONVERT, P.S32, [P.U8], {}, (_ints(rng, np.uint8),),
               lambda p: p.astype(np.int32)))
    cs.append(("s32_to_s8", Opcode.CONVERT, P.S8, [P.S32], {}, (big,),
               lambda p: p.astype(np.int8)))
    cs.append(("select", Opcode.SELECT, P.F32, [P.PRED, P.F32, P.F32], {}, (f > g, f, g),
               np.where))
    lo, hi = np.minimum(f, g), np.maximum(f, g)
    cs.append(("clamp", Opcode.CLAMP, P.F32, [P.F32, P.F32, P.F32], {},
               (lo, np.roll(f, 11), hi),
               lambda a, x, b: np.minimum(np.maximum(x, a), b)))
    cs.append(("clamp_s32", Opcode.CLAMP, P.S32, [P.S32, P.S32, P.S32], {},
               (np.full(N, -5, np.int32), _ints(rng, np.int32), np.full(N, 9, np.int32)),
               lambda a, x, b: np.minimum(np.maximum(x, a), b)))
    cs.append(("reduce_precision", Opcode.REDUCE_PRECISION, P.F32, [P.F32],
               {"exponent_bits": 5, "mantissa_bits": 10}, (f * np.float32(1e-3),),
               _reduce_prec_f16))
    cs.append(("bitcast_f32_s32", Opcode.BITCAST_CONVERT, P.S32, [P.F32], {}, (f,),
               lambda p: p.view(np.int32)))
    cs.append(("not_pred", Opcode.NOT, P.PRED, [P.PRED], {}, (f > 0,), np.logical_not))
    cs.append(("and_pred", Opcode.AND, P.PRED, [P.PRED, P.PRED], {}, (f > 0, g > 0),
               np.logical_and))
    cs.append(("xor_u8", Opcode.XOR, P.U8, [P.U8, P.U8], {},
               (_ints(rng, np.uint8), _ints(rng, np.uint8)), np.bitwise_xor))
    c1 = (f + 1j * g).astype(np.complex64)
    c1 = np.where(np.isfinite(c1), c1, 1 + 2j).astype(np.complex64)
    c2 = np.roll(c1, 5)
    for op, fn in ((Opcode.ADD, np.add), (Opcode.MULTIPLY, np.multiply),
                   (Opcode.DIVIDE, np.divide), (Opcode.SUBTRACT, np.subtract)):
        cs.append((f"{op.text}_c64", op, P.C64, [P.C64, P.C64], {}, (c1, c2), fn))
    cs.append(("abs_c64", Opcode.ABS, P.F32, [P.C64], {}, (c1,), np.abs))
    cs.append(("real_c64", Opcode.REAL, P.F32, [P.C64], {}, (c1,), np.real))
    cs.append(("imag_c64", Opcode.IMAG, P.F32, [P.C64], {}, (c1,), np.imag))
    cs.append(("complex", Opcode.COMPLEX, P.C64, [P.F32, P.F32], {}, (f, g),
               _make_complex))
    for op, fn in ((Opcode.TANH, np.tanh), (Opcode.EXP, np.exp), (Opcode.LOG, np.log),
                   (Opcode.LOGISTIC, lambda v: 1 / (1 + np.exp(-v)))):
        for pt, dt in ((P.F16, np.float16), (P.BF16, BF16)):
            cs.append((f"{op.text}_{pt.text}", op, pt, [pt], {}, (f.astype(dt),),
                       lambda p, fn=fn, dt=dt: fn(p.astype(np.float64)).astype(dt)))
    return cs


with np.errstate(all="ignore"):  # the samples overflow f16/bf16 on purpose
    CASES = _cases()
# ulp slack for cases that go through an approximation (transcendentals in f16/bf16: 1 ulp)
APPROX = {"tanh", "exponential", "log", "logistic"}


@pytest.fixture(scope="module")
def kernels() -> KernelModule:
    km = KernelModule("elemental_test")
    for cid, op, out, ins, attrs, _, _ in CASES:
        inst = make_inst(op, out, ins, **attrs)
        km.add(cid, ins, out, lambda b, vals, inst=inst: elemental.emit_elemental(b, inst, vals))
    km.compile()
    return km


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_elemental_matches_numpy(kernels: KernelModule, case: tuple) -> None:
    cid, op, out, ins, attrs, inputs, ref = case
    got = kernels(cid, *inputs)
    with np.errstate(all="ignore"):
        want = np.asarray(ref(*inputs)).astype(out.dtype)
    if out is P.BF16:  # compare bf16 through f32 (NaN-aware)
        got, want = got.astype(np.float32), want.astype(np.float32)
    if out.is_float and op.text.split("_")[0] in APPROX:
        g64, w64 = got.astype(np.float64), want.astype(np.float64)
        with np.errstate(all="ignore"):
            sp = np.spacing(np.abs(want)).astype(np.float64)
            ok = (got == want) | (np.isnan(g64) & np.isnan(w64)) | (np.abs(g64 - w64) <= sp)
        assert ok.all(), (inputs[0][~ok], got[~ok], want[~ok])
    elif out.is_complex or (out.is_float and op in (Opcode.REMAINDER,)) or cid == "abs_c64":
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=0, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)
    if out.is_float and op not in (Opcode.REMAINDER, Opcode.SIGN):  # XLA: sign(-0) = -0
        np.testing.assert_array_equal(np.signbit(got[~np.isnan(got.astype(np.float32))]),
                                      np.signbit(want[~np.isnan(got.astype(np.float32))]))


def test_every_elementwise_opcode_has_a_generator() -> None:
    missing = [op.text for op in Opcode
               if (op.is_elementwise or op is Opcode.BITCAST_CONVERT)
               and not elemental.has_elemental_generator(op)]
    assert missing == []


def test_missing_generator_raises() -> None:
    from llvmlite import ir

    inst = make_inst(Opcode.DOT, P.F32, [P.F32, P.F32])
    b = ir.IRBuilder()
    with pytest.raises(UnsupportedOpError, match="no elemental generator for 'dot'"):
        elemental.emit_elemental(b, inst, [])


def test_float_only_op_on_ints_raises() -> None:
    from llvmlite import ir

    inst = make_inst(Opcode.EXP, P.S32, [P.S32])
    with pytest.raises(UnsupportedOpError,
                       match="no elemental generator for 'exponential' on s32"):
        elemental.emit_elemental(ir.IRBuilder(), inst, [ir.Constant(ir.IntType(32), 1)])


VECTOR_CASES = [c for c in CASES if not (c[2].is_complex or any(t.is_complex for t in c[3]))]


def test_generators_work_on_vectors() -> None:
    """The same generators applied to <8 x T> values give the scalar results."""
    from llvmlite import ir

    from xlc.backend_cpu import jit
    from xlc.codegen import llvm_utils as lu

    name = lu.unique_symbol("elemental_vec")
    mod = lu.new_module(name)
    syms = {}
    for k, (cid, op, out, ins, attrs, _, _) in enumerate(VECTOR_CASES):
        inst = make_inst(op, out, ins, **attrs)
        fn = ir.Function(mod, ir.FunctionType(lu.VOID, [lu.PTR] * (1 + len(ins))),
                         name=f"{name}_{k}")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        with lu.for_range(b, N // 8) as i:
            off = b.mul(i, ir.Constant(lu.I64, 8))
            vals = [lu.load_vector(b, fn.args[1 + j], off, pt, 8) for j, pt in enumerate(ins)]
            lu.store_vector(b, elemental.emit_elemental(b, inst, vals), fn.args[0], off, out)
        b.ret_void()
        syms[cid] = fn.name
    jit.compile_module(mod, name)
    import ctypes

    scalar = KernelModule("elemental_scalar")
    for cid, op, out, ins, attrs, _, _ in VECTOR_CASES:
        inst = make_inst(op, out, ins, **attrs)
        scalar.add(cid, ins, out, lambda b, v, inst=inst: elemental.emit_elemental(b, inst, v))
    scalar.compile()
    for cid, _op, out, ins, _attrs, inputs, _ in VECTOR_CASES:
        bufs = [np.ascontiguousarray(a, dtype=pt.dtype) for a, pt in zip(inputs, ins)]
        got = np.empty(N, out.dtype)
        ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (1 + len(bufs))))(
            jit.jit_engine().address(syms[cid]))(got.ctypes.data, *[a.ctypes.data for a in bufs])
        want = scalar(cid, *inputs)
        np.testing.assert_array_equal(got.view(f"u{out.dtype.itemsize}") if out.byte_size > 1
                                      else got, want.view(f"u{out.dtype.itemsize}")
                                      if out.byte_size > 1 else want, err_msg=cid)


def test_generators_lower_to_ptx() -> None:
    """Device-free GPU tier: every case compiles for NVPTX without any call (no libm; LLVM
    expands frem and the saturating conversions itself)."""
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
    mod = ir.Module("ptx_elemental")
    mod.triple = "nvptx64-nvidia-cuda"
    mod.data_layout = str(tm.target_data)
    for k, (_cid, op, out, ins, attrs, _, _) in enumerate(CASES):
        inst = make_inst(op, out, ins, **attrs)
        fn = ir.Function(mod, ir.FunctionType(lu.VOID, [lu.PTR] * (1 + len(ins)) + [lu.I64]),
                         name=f"k{k}")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        i = fn.args[-1]
        vals = [lu.load_element(b, fn.args[1 + j], i, pt) for j, pt in enumerate(ins)]
        lu.store_element(b, elemental.emit_elemental(b, inst, vals), fn.args[0], i, out)
        b.ret_void()
    ref = llvm.parse_assembly(str(mod))
    ref.verify()
    ptx = tm.emit_assembly(ref)
    assert re.search(r"\bcall\b", ptx) is None


# the evaluator builds complex(re, im) as re + 1j*im, which turns (x, inf) into (nan, inf)
EVALUATOR_DIFFERS = {"complex"}


@pytest.mark.parametrize("case", [c for c in CASES if c[0] not in EVALUATOR_DIFFERS],
                         ids=[c[0] for c in CASES if c[0] not in EVALUATOR_DIFFERS])
def test_elemental_matches_evaluator(kernels: KernelModule, case: tuple) -> None:
    """Same cases against xlc.hlo.evaluator (what the compiled backends are checked against)."""
    from xlc.hlo.evaluator import evaluate_computation
    from xlc.hlo.ir import HloComputation

    cid, op, out, ins, attrs, inputs, _ = case
    inst = make_inst(op, out, ins, **attrs)
    comp = HloComputation(f"single_{cid}")
    for p in inst.operands:
        comp.add_instruction(p)
    comp.parameters = list(inst.operands)
    comp.add_instruction(inst)
    comp.root = inst
    args = [np.ascontiguousarray(a, dtype=pt.dtype) for a, pt in zip(inputs, ins)]
    with np.errstate(all="ignore"):
        want = np.asarray(evaluate_computation(comp, args))
    got = kernels(cid, *inputs)
    if out.is_float or out.is_complex:
        g = got.astype(np.complex128 if out.is_complex else np.float64)
        w = want.astype(g.dtype)
        ok = (g == w) | (np.isnan(g) & np.isnan(w))
        inexact = op in (Opcode.TANH, Opcode.EXP, Opcode.LOG, Opcode.LOGISTIC, Opcode.REMAINDER,
                         Opcode.DIVIDE) or out.is_complex or cid == "abs_c64"
        if inexact:
            ok |= np.isclose(g, w, rtol=1e-2 if out.byte_size == 2 else 2e-6, atol=0)
    else:
        ok = got == want
    assert np.all(ok), (cid, [a[~ok][:3] for a in inputs], got[~ok][:3], want[~ok][:3])
