"""The generated GEMM (xlc.backend_cpu.gemm) against numpy: packed and plain paths, edge sizes,
transposed and batched operands, strided outputs, accumulation, f64, thread counts; plus the
emitted function's signature, scratch sizing and error messages."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llvmlite import ir

from tests.conftest import CORPUS, requires_corpus
from xlc.backend_cpu import gemm as G
from xlc.backend_cpu import jit
from xlc.backend_cpu.gemm import GemmSpec, compile_gemm, scratch_bytes, use_simple
from xlc.codegen import llvm_utils as lu
from xlc.errors import ArgumentError, UnsupportedOpError
from xlc.hlo.shape import PrimitiveType as P

RNG = np.random.default_rng(1234)


def _operands(m: int, n: int, k: int, batch: int | None, dt: type, ta: bool = False,
              tb: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Random A (m x k) and B (k x n), optionally as transposed views, optionally batched."""
    lead = () if batch is None else (batch,)
    a = RNG.standard_normal(lead + ((k, m) if ta else (m, k))).astype(dt)
    b = RNG.standard_normal(lead + ((n, k) if tb else (k, n))).astype(dt)
    return (np.swapaxes(a, -1, -2) if ta else a), (np.swapaxes(b, -1, -2) if tb else b)


def _check(c: np.ndarray, a: np.ndarray, b: np.ndarray, c0: np.ndarray | None = None) -> None:
    """c == a @ b (+ c0) within 8 sqrt(K) eps |A||B| (the usual floating-point dot bound)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = a64 @ b64 + (0 if c0 is None else c0)
    k = a.shape[-1]
    eps = np.finfo(a.dtype).eps
    bound = 8 * np.sqrt(max(k, 1)) * eps * (np.abs(a64) @ np.abs(b64) + 1e-30)
    if c0 is not None:
        bound += eps * np.abs(c0)
    assert c.shape == ref.shape
    err = np.abs(c - ref)
    assert np.all(err <= bound), f"max err {err.max()} (bound at worst {bound.flat[err.argmax()]})"


PACKED_SHAPES = [
    (64, 64, 65), (1000, 999, 1001), (15, 33, 1100), (14, 40, 1000), (29, 65, 257),
    (300, 17, 70), (3, 600, 200), (520, 40, 20),
]


@pytest.mark.parametrize("m,n,k", PACKED_SHAPES)
def test_packed_f32_matches_numpy(m: int, n: int, k: int) -> None:
    a, b = _operands(m, n, k, None, np.float32)
    spec = GemmSpec.for_arrays(a, b)
    assert not use_simple(spec)
    _check(compile_gemm(spec, nthreads=2)(a, b), a, b)


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (5, 7, 3), (1, 300, 200), (300, 1, 200),
                                   (16, 16, 16), (2, 3, 0), (0, 4, 5), (4, 0, 5)])
def test_simple_path_matches_numpy(m: int, n: int, k: int) -> None:
    a, b = _operands(m, n, k, None, np.float32)
    spec = GemmSpec.for_arrays(a, b)
    assert use_simple(spec) and scratch_bytes(spec, 2) == 0
    _check(compile_gemm(spec, nthreads=2)(a, b), a, b)


@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("m,n,k", [(131, 77, 203), (300, 150, 9)])
def test_transposed_operands(ta: bool, tb: bool, m: int, n: int, k: int) -> None:
    """k = 9 is below the vector width: the packers' generic loops instead of transposes."""
    a, b = _operands(m, n, k, None, np.float32, ta, tb)
    spec = GemmSpec.for_arrays(a, b)
    assert not use_simple(spec)
    assert spec.a_strides[1:] == ((1, m) if ta else (k, 1))
    _check(compile_gemm(spec, nthreads=2)(a, b), a, b)


@pytest.mark.parametrize("batch,m,n,k,ta", [(3, 70, 50, 90, False), (4, 33, 40, 40, True),
                                             (5, 4, 3, 6, False), (2, 200, 1, 64, True)])
def test_batched(batch: int, m: int, n: int, k: int, ta: bool) -> None:
    a, b = _operands(m, n, k, batch, np.float32, ta=ta)
    _check(compile_gemm(GemmSpec.for_arrays(a, b), nthreads=2)(a, b), a, b)


@pytest.mark.parametrize("m,n,k,batch,dt,accumulate", [
    (300, 17, 70, None, np.float32, False), (16384 // 64, 32, 144, None, np.float32, False),
    (29, 32, 600, None, np.float32, True), (13, 5, 2000, 3, np.float32, False),
    (101, 16, 300, 2, np.float64, True), (45, 9, 257, None, np.float64, False),
])
def test_single_column_panel_reads_a_in_place(m: int, n: int, k: int, batch: int | None,
                                              dt: type, accumulate: bool) -> None:
    """n <= one panel (32 f32 / 16 f64 columns) with row-major A: the microkernel reads A
    in place (no packing); row remainders (m % 14), several k blocks, batches and
    accumulation all give numpy's result, on one and on two threads."""
    a, b = _operands(m, n, k, batch, dt)
    c_shape = ((batch,) if batch else ()) + (m, n)
    c0 = RNG.standard_normal(c_shape).astype(dt)
    for nt in (1, 2):
        c = c0.copy()
        out = compile_gemm(GemmSpec.for_arrays(a, b, accumulate=accumulate), nthreads=nt)(
            a, b, c if accumulate else None)
        _check(out, a, b, c0.astype(np.float64) if accumulate else None)


def test_f64_packed_and_transposed() -> None:
    a, b = _operands(97, 45, 130, None, np.float64, tb=True)
    _check(compile_gemm(GemmSpec.for_arrays(a, b), nthreads=2)(a, b), a, b)


def test_accumulate_adds_to_c() -> None:
    a, b = _operands(90, 70, 300, None, np.float32)
    c0 = RNG.standard_normal((90, 70)).astype(np.float32)
    c = c0.copy()
    out = compile_gemm(GemmSpec.for_arrays(a, b, accumulate=True), nthreads=2)(a, b, c)
    assert out is c
    _check(c, a, b, c0.astype(np.float64))


def test_accumulate_simple_path() -> None:
    a, b = _operands(300, 1, 20, None, np.float32)
    c0 = RNG.standard_normal((300, 1)).astype(np.float32)
    c = c0.copy()
    compile_gemm(GemmSpec.for_arrays(a, b, accumulate=True))(a, b, c)
    _check(c, a, b, c0.astype(np.float64))


@pytest.mark.parametrize("c_strides", [(0, 1, 40), (0, 80, 1)])
def test_strided_output(c_strides: tuple[int, int, int]) -> None:
    """Column-major C (no unit column stride: the tile-copy path) and a padded row stride."""
    a, b = _operands(40, 35, 200, None, np.float32)
    st = GemmSpec.for_arrays(a, b)
    spec = GemmSpec(40, 35, 200, 1, st.a_strides, st.b_strides, c_strides)
    c = compile_gemm(spec, nthreads=2)(a, b)
    assert c.strides == (c_strides[1] * 4, c_strides[2] * 4)
    _check(c, a, b)


@pytest.mark.parametrize("nthreads", [1, 3, 5])
def test_thread_counts_agree(nthreads: int) -> None:
    """Every thread count gives the same bits (each C element is computed by one thread)."""
    a, b = _operands(150, 130, 80, 2, np.float32)
    spec = GemmSpec.for_arrays(a, b)
    assert np.array_equal(compile_gemm(spec, nthreads=nthreads)(a, b),
                          compile_gemm(spec, nthreads=2)(a, b))


def test_emit_gemm_signature_and_verification() -> None:
    spec = GemmSpec(100, 100, 100, 1, (0, 100, 1), (0, 100, 1), (0, 100, 1))
    module = lu.new_module("gemm_sig")
    G.emit_gemm(module, "my_gemm", spec)
    fn = module.globals["my_gemm"]
    assert fn.function_type == ir.FunctionType(lu.VOID, [lu.PTR] * 4 + [lu.I64] * 3)
    lu.parse_and_verify(module, "my_gemm")  # raises LoweringError when invalid


def test_scratch_bytes_scales_with_threads() -> None:
    """Packing buffers per thread slot (an A block and a B block), or one block of B packed
    once plus an A block per slot where the shares split m (on one thread too; the slots then
    hold no B block)."""
    spec = GemmSpec(512, 512, 512, 1, (0, 512, 1), (0, 512, 1), (0, 512, 1))
    one, two = scratch_bytes(spec, 1), scratch_bytes(spec, 2)
    assert G.packs_b_once(spec)
    bl = G.blocking(spec)
    a_block, b_block = (bl.mc * bl.kc * 4 + 64 + 63) // 64 * 64, bl.kc * bl.nc * 4
    once_a = (G.ONCE_MC_PANELS * 14 * bl.kc * 4 + 64 + 63) // 64 * 64
    assert one == 64 + G.PACKED_BLOCK_BYTES + 64 + once_a
    # split m: a share covers at most ceil(37 panels / shares) of 14 rows
    shares = G.gemm_shares(spec, 2)
    rows = min(bl.mc, G.ONCE_MC_PANELS * 14, -(-37 // shares) * 14)
    # B packed once one block of KC = 256 rows by 256 columns (256 KiB) at a time: column
    # blocks outer, k blocks inner (the second k block of each accumulating)
    blocks = G.b_blocks(spec)
    assert [(ko, no, s.k, s.n, s.accumulate) for ko, no, s in blocks] == [
        (0, 0, 256, 256, False), (256, 0, 256, 256, True),
        (0, 256, 256, 256, False), (256, 256, 256, 256, True)]
    first = blocks[0][2]
    assert two == 64 + G.packed_b_bytes(first) + 2 * ((rows * bl.kc * 4 + 64 + 63) // 64 * 64)
    assert G.packed_b_bytes(first) == G.PACKED_BLOCK_BYTES + 64
    assert G.packed_b_bytes(spec) == 512 * 512 * 4 + 64
    batched = GemmSpec(512, 512, 512, 2, (0, 512, 1), (0, 512, 1), (0, 512, 1))
    assert not G.packs_b_once(batched)
    assert scratch_bytes(batched, 1) - 64 == a_block + b_block
    # 2 threads: 8 shares over 2 x 37 m-panels, each at most 10 panels (140 rows) of A
    assert G.gemm_shares(batched, 2) == 8
    assert scratch_bytes(batched, 2) - 64 == 2 * ((140 * 256 * 4 + 64 + 63) // 64 * 64 + b_block)


@pytest.mark.parametrize("m,n,k,batch,nthreads", [
    (1024, 300, 700, 1, 2),   # split m, B packed once, A blocks clipped to a share's rows
    (256, 1024, 512, 1, 2),   # split n: B blocks clipped to a share's columns
    (200, 900, 300, 3, 4),    # batched, split n, more slots than cores
    (777, 129, 1025, 1, 3),   # split m, uneven shares, k in 5 blocks
    (90, 2000, 64, 2, 2),     # batched, split n, shares spanning two batches
])
def test_scratch_bytes_is_exactly_enough(m: int, n: int, k: int, batch: int,
                                         nthreads: int) -> None:
    """The packing never writes past `scratch_bytes(spec, nthreads)` (a canary after it stays
    intact) and slots clipped to one share's panels give the right product."""
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = rng.standard_normal((batch, k, n)).astype(np.float32)
    spec = GemmSpec.for_arrays(a, b)
    g = compile_gemm(spec, nthreads=nthreads)
    need = scratch_bytes(spec, nthreads)
    full = 64 + nthreads * (G.blocking(spec).mc * G.blocking(spec).kc * 4 + 128
                            + G.blocking(spec).kc * G.blocking(spec).nc * 4)
    assert need < full  # the clipped slots are smaller than full-size blocks
    raw = np.full(need + 64 + 4096, 0xA5, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64  # aligned: the function then uses all `need` - 64 bytes
    g._scratch, g._scratch_ptr = raw, raw.ctypes.data + start
    c = g(a, b)
    np.testing.assert_allclose(c, np.matmul(a.astype(np.float64), b), rtol=1e-4, atol=1e-3)
    assert (raw[start + need:] == 0xA5).all()


@pytest.mark.parametrize("m,n,k,batch,nthreads,accumulate", [
    (64, 64, 64, 1, 1, False),    # the attention projections' shape
    (45, 96, 70, 1, 2, False),    # m not a multiple of MR, split over n on two threads
    (100, 32, 30, 3, 2, True),    # batched, accumulating, one NR panel
    (32, 64, 256, 1, 1, False),   # k in one block of 256
    (29, 64, 300, 2, 3, False),   # k in two blocks (150 + 150), batch split over shares
])
def test_in_place_gemm_matches_numpy(m: int, n: int, k: int, batch: int, nthreads: int,
                                     accumulate: bool) -> None:
    """Small products read A and B in place: no scratch, and the product of numpy (the
    accumulating form adds to C)."""
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = rng.standard_normal((batch, k, n)).astype(np.float32)
    spec = GemmSpec.for_arrays(a, b, accumulate=accumulate)
    assert G.reads_in_place(spec) and scratch_bytes(spec, nthreads) == 0
    c0 = rng.standard_normal((batch, m, n)).astype(np.float32)
    c = compile_gemm(spec, nthreads=nthreads)(a, b, c0.copy() if accumulate else None)
    want = np.matmul(a.astype(np.float64), b) + (c0 if accumulate else 0)
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-3)


def test_in_place_needs_unit_strides_whole_panels_and_a_small_product() -> None:
    """Transposed B, n not a multiple of NR, column-major A and big products are packed."""
    def spec(m: int, n: int, k: int, a_st: tuple[int, int, int] | None = None,
             b_st: tuple[int, int, int] | None = None) -> GemmSpec:
        return GemmSpec(m, n, k, 1, a_st or (0, k, 1), b_st or (0, n, 1), (0, n, 1))
    assert G.reads_in_place(spec(64, 64, 64))
    assert not G.reads_in_place(spec(64, 64, 64, b_st=(0, 1, 64)))  # B^T
    assert not G.reads_in_place(spec(64, 64, 64, a_st=(0, 1, 64)))  # column-major A
    assert not G.reads_in_place(spec(64, 48, 64))  # a partial NR panel
    assert not G.reads_in_place(spec(128, 128, 128))  # past IN_PLACE_FLOPS
    assert not G.reads_in_place(spec(8, 512, 256))  # past IN_PLACE_BYTES
    assert not G.reads_in_place(spec(30, 32, 30))  # the plain loop nest's size
    assert scratch_bytes(spec(64, 48, 64), 1) > 0


def test_spec_errors() -> None:
    with pytest.raises(ArgumentError, match=r"GemmSpec.b_strides must be 3 non-negative"):
        GemmSpec(2, 2, 2, 1, (0, 2, 1), (2, 1), (0, 2, 1))
    with pytest.raises(UnsupportedOpError, match=r"supports f32 and f64, not 's32'"):
        GemmSpec(2, 2, 2, 1, (0, 2, 1), (0, 2, 1), (0, 2, 1), dtype=P.S32)
    with pytest.raises(ArgumentError, match=r"cannot multiply float32\[2, 3\] by float32\[2, 3\]"):
        GemmSpec.for_arrays(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32))


def test_call_checks_layout() -> None:
    a, b = _operands(20, 20, 20, None, np.float32)
    g = compile_gemm(GemmSpec.for_arrays(a, b))
    with pytest.raises(ArgumentError, match=r"GEMM operand A: expected f32\[1, 20, 20\] with "
                                            r"element strides \(0, 20, 1\)"):
        g(np.asfortranarray(a), b)


@pytest.mark.parametrize("m,n,k,ta,tb,form", [
    (12, 9, 20, False, False, "axpy_n"), (12, 9, 20, False, True, "dot"),
    (12, 9, 20, True, True, "dot"), (40, 1, 30, True, False, "axpy_m"),
    (40, 1, 30, False, False, "dot"), (1, 50, 30, False, True, "dot"),
    (1, 50, 30, False, False, "axpy_n"), (9, 7, 5, True, True, "axpy_m"),
])
def test_simple_loop_forms(m: int, n: int, k: int, ta: bool, tb: bool, form: str) -> None:
    """Each plain-nest form (chosen from the strides) against numpy, f32 and f64."""
    for dt in (np.float32, np.float64):
        a, b = _operands(m, n, k, None, dt, ta, tb)
        spec = GemmSpec.for_arrays(a, b)
        st = (spec.a_strides[1:], spec.b_strides[1:], spec.c_strides[1:])
        assert use_simple(spec) and G.simple_loop_order(m, n, k, *st) == form
        _check(compile_gemm(spec)(a, b), a, b)


def test_recommended_threads() -> None:
    small = GemmSpec(64, 64, 64, 1, (0, 64, 1), (0, 64, 1), (0, 64, 1))
    big = GemmSpec(1024, 1024, 1024, 1, (0, 1024, 1), (0, 1024, 1), (0, 1024, 1))
    assert G.recommended_threads(small, 2) == 1
    assert G.recommended_threads(big, 2) == 2
    assert G.recommended_threads(big, 1) == 1


# ---- HLO dot -> GemmSpec ---------------------------------------------------------------------
_DOTS = """HloModule dots

ENTRY main {
  a = f32[6,4,5,7]{3,2,1,0} parameter(0)
  b = f32[6,5,7,3]{3,2,1,0} parameter(1)
  m = f32[6,4,3]{2,1,0} dot(a, b), BATCH, lhs_contracting_dims={2,3}, rhs_contracting_dims={1,2}
  x = f32[40,30]{0,1} parameter(2)
  y = f32[30,20]{1,0} parameter(3)
  t = f32[40,20]{1,0} dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = f32[6,5,7,3]{3,1,2,0} parameter(4)
  bad = f32[6,4,3]{2,1,0} dot(a, z), BATCH, lhs_contracting_dims={2,3}, rhs_contracting_dims={1,2}
  i = s32[4,4]{1,0} parameter(5)
  int = s32[4,4]{1,0} dot(i, i), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = (f32[6,4,3]{2,1,0}, f32[40,20]{1,0}, f32[6,4,3]{2,1,0}, s32[4,4]{1,0}) RESULT
}
""".replace("BATCH", "lhs_batch_dims={0}, rhs_batch_dims={0}").replace("RESULT",
                                                                      "tuple(m, t, bad, int)")


def test_gemm_spec_for_dot_merges_dims_and_reads_layouts() -> None:
    from xlc.backend_cpu.gemm_dot import gemm_spec_for_dot
    from xlc.hlo.parser import parse_module

    insts = {i.name: i for i in parse_module(_DOTS).entry.instructions}
    spec = gemm_spec_for_dot(insts["m"])
    assert spec is not None
    assert (spec.m, spec.n, spec.k, spec.batch) == (4, 3, 35, 6)
    assert spec.a_strides == (140, 35, 1) and spec.b_strides == (105, 3, 1)
    assert spec.c_strides == (12, 3, 1)
    t = gemm_spec_for_dot(insts["t"])
    assert t is not None and t.a_strides[1:] == (1, 40) and t.b_strides[1:] == (20, 1)
    assert gemm_spec_for_dot(insts["bad"]) is None  # contracting dims not nested in z's layout
    assert gemm_spec_for_dot(insts["int"]) is None
    # numbers: a column-major lhs buffer
    x = RNG.standard_normal((40, 30)).astype(np.float32)
    y = RNG.standard_normal((30, 20)).astype(np.float32)
    xc = np.asfortranarray(x)  # logical x, physical layout {0,1}
    _check(compile_gemm(t)(xc, y), x, y)


@requires_corpus
def test_batched_matmul_corpus_case() -> None:
    """Both dots of the corpus case `batched_matmul` (one with a transposed rhs)."""
    from xlc.backend_cpu.gemm_dot import gemm_spec_for_dot
    from xlc.hlo.parser import parse_module

    case = CORPUS / "cases" / "batched_matmul"
    module = parse_module((case / "module.hlo").read_text())
    ins, outs = np.load(case / "inputs.npz"), np.load(case / "outputs.npz")
    dots = [i for i in module.entry.instructions if i.opcode.name == "DOT"]
    for dot, rhs, out in zip(dots, ("in1", "in2"), ("out0", "out1")):
        spec = gemm_spec_for_dot(dot)
        assert spec is not None
        b = ins[rhs] if rhs == "in1" else np.swapaxes(ins[rhs], 1, 2)
        got = compile_gemm(spec)(ins["in0"], b)
        np.testing.assert_allclose(got, outs[out], rtol=1e-5, atol=1e-5)


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 90), n=st.integers(1, 90), k=st.integers(1, 90),
       batch=st.integers(1, 2), ta=st.booleans(), tb=st.booleans(),
       f64=st.booleans(), acc=st.booleans(), nthreads=st.integers(1, 3))
def test_random_gemms(m: int, n: int, k: int, batch: int, ta: bool, tb: bool, f64: bool,
                      acc: bool, nthreads: int) -> None:
    """Random sizes/layouts/dtypes, both paths, with and without accumulation."""
    dt = np.float64 if f64 else np.float32
    a, b = _operands(m, n, k, batch, dt, ta, tb)
    spec = GemmSpec.for_arrays(a, b, accumulate=acc)
    c0 = RNG.standard_normal((batch, m, n)).astype(dt)
    c = compile_gemm(spec, nthreads=nthreads)(a, b, c0.copy() if acc else None)
    _check(c, a, b, c0.astype(np.float64) if acc else None)


def test_two_gemms_in_one_module() -> None:
    """emit_gemm twice into one module (as the CPU backend does), called through one caller
    function that runs both on two threads via emit_gemm_entry (5 and 2 shares)."""
    import ctypes

    a, b = _operands(100, 80, 120, None, np.float32)
    d, e = _operands(60, 90, 50, None, np.float64, tb=True)
    s1, s2 = GemmSpec.for_arrays(a, b), GemmSpec.for_arrays(d, e)
    sym = lu.unique_symbol("two_gemms")
    module = lu.new_module(sym)
    G.emit_gemm(module, f"{sym}_f32", s1)
    G.emit_gemm(module, f"{sym}_f64", s2)
    entries = [G.emit_gemm_entry(module, f"{sym}_mt{i}", f"{sym}_{t}", spec)
               for i, (t, spec) in enumerate((("f32", s1), ("f64", s2)))]
    caller = ir.Function(module, ir.FunctionType(lu.VOID, [lu.PTR] * 8), name=sym)
    bld = ir.IRBuilder(caller.append_basic_block("entry"))
    for i, entry in enumerate(entries):
        bld.call(entry, list(caller.args[4 * i:4 * i + 4])
                 + [ir.Constant(lu.I64, (5, 2)[i]), ir.Constant(lu.I64, 2)])
    bld.ret_void()
    jit.compile_module(module, sym)
    c1, c2 = np.empty((100, 80), np.float32), np.empty((60, 90), np.float64)
    assert G.packs_b_once(s1)  # 100 x 80: its shares split m, after a pack phase
    scratch = np.empty(max(scratch_bytes(s1, 2), scratch_bytes(s2, 2)), np.uint8)
    fn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 8)(jit.jit_engine().address(sym))
    fn(a.ctypes.data, b.ctypes.data, c1.ctypes.data, scratch.ctypes.data,
       d.ctypes.data, e.ctypes.data, c2.ctypes.data, scratch.ctypes.data)
    _check(c1, a, b)
    _check(c2, d, e)


@pytest.mark.parametrize("m,n,k,batch", [(300, 90, 70, None), (40, 700, 60, None),
                                         (120, 100, 80, 3), (1900, 4100, 250, None)])
def test_shares_outnumber_threads_and_any_slot_takes_any_share(m: int, n: int, k: int,
                                                               batch: int | None) -> None:
    """A threaded GEMM is split into several shares per thread (a preempted thread then holds
    a small part of it), each packing into the scratch of the slot running it: the shares,
    run in any order in any slot, give numpy's product; through the pool too.
    Where the shares split m of one batch, B is packed once by a pack phase first (1900 x
    4100 x 250: two column blocks of NC, one k block; the entry packs and runs them block by
    block, `test_b_packed_once_per_block`, called by hand the pack phase packs all of B into
    a scratch of `packed_b_bytes`; a short last panel)."""
    import ctypes

    a, b = _operands(m, n, k, batch, np.float32)
    spec = GemmSpec.for_arrays(a, b)
    g = compile_gemm(spec, nthreads=2)
    assert g.nshares > 2 and g.nshares == G.gemm_shares(spec, 2)
    _check(g(a, b), a, b)
    proto = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 4, *[ctypes.c_int64] * 3)
    once = G.packs_b_once(spec)
    kernels = [proto(g.pack_address)] if once else []
    kernels.append(proto(g.kernel_address))
    a_slot = G._thread_bytes(spec, G.blocking(spec), g.nshares)[0]
    scratch = np.empty(64 + G.packed_b_bytes(spec) + 2 * a_slot if once
                       else scratch_bytes(spec, 2), np.uint8)
    c = np.full(((batch or 1), m, n), np.nan, np.float32)
    for kernel in kernels:  # the pack phase (if any), then the shares
        order = RNG.permutation(g.nshares)
        for i, share in enumerate(order):  # shares in a random order, the slots alternating
            kernel(a.ctypes.data, b.ctypes.data, c.ctypes.data, scratch.ctypes.data,
                   int(share), g.nshares, i % 2)
    _check(c if batch else c[0], a, b)


_PINNED_GEMM = """
import os, statistics, sys, time
sys.path.insert(0, {root!r})
import numpy as np
from xlc.backend_cpu import compile_cpu
from xlc.backend_cpu.gemm import GemmSpec, gemm_shares
from xlc.hlo.parser import parse_module
from xlc.options import CompileOptions
text = '''HloModule m
ENTRY e {{
  a = f32[512,256] parameter(0)
  b = f32[256,384] parameter(1)
  ROOT d = f32[512,384] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}'''
spec = GemmSpec(512, 384, 256, 1, (0, 256, 1), (0, 384, 1), (0, 384, 1))
assert gemm_shares(spec, 2) > 2, gemm_shares(spec, 2)
pooled = compile_cpu(parse_module(text), CompileOptions(backend="cpu", threads=2))
single = compile_cpu(parse_module(text), CompileOptions(backend="cpu", threads=1))
rng = np.random.default_rng(0)
a = rng.standard_normal((512, 256)).astype(np.float32)
b = rng.standard_normal((256, 384)).astype(np.float32)
ref = a.astype(np.float64) @ b.astype(np.float64)
pooled.run([a, b])  # starts the worker
cpu = min(os.sched_getaffinity(0))
for tid in os.listdir("/proc/self/task"):  # caller and worker now share one CPU
    os.sched_setaffinity(int(tid), {{cpu}})
def median(exe):
    ts = []
    for _ in range(15):
        t = time.perf_counter()
        out = exe.run([a, b])[0]
        ts.append(time.perf_counter() - t)
        err = float(np.max(np.abs(out - ref)))
        assert err < 1e-3, err
    return statistics.median(ts)
print(min(median(pooled) / median(single) for _ in range(3)))
"""


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"),
                    reason="needs sched_setaffinity")
def test_gemm_with_more_shares_than_threads_on_one_cpu() -> None:
    """A two-thread dot whose caller and worker share one CPU (as when another process keeps
    the worker's CPU busy) runs its shares in whichever thread is on the CPU: numpy's result,
    at about the cost of one thread."""
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.run([sys.executable, "-c", _PINNED_GEMM.format(root=root)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    ratio = float(proc.stdout.split()[-1])
    assert ratio < 3.0, f"two threads on one CPU cost {ratio:.1f}x one thread"


@pytest.mark.parametrize("m,n,k,split_m", [
    (224, 1024, 256, True),    # 16 row panels, 32 column panels: split m, B packed once
    (210, 1024, 256, False),   # 15 row panels: split n, every share packs its own B block
    (224, 8448, 256, False),   # B packed would take 8.6 MB > PACK_ONCE_BYTES: split n
])
def test_one_batch_of_many_rows_splits_m(m: int, n: int, k: int, split_m: bool) -> None:
    """One batch of at least SPLIT_M_PANELS row panels whose B packs within PACK_ONCE_BYTES is
    split along m even where n has more panels (B packed once, each share packing only its
    own rows of A); the library takes the same decision at run time, so the product is
    numpy's and bit for bit the one-thread product."""
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    spec = GemmSpec.for_arrays(a, b)
    assert G._split_m(spec, G.blocking(spec)) == split_m
    assert G.packs_b_once(spec) == split_m
    two = compile_gemm(spec, nthreads=2)(a, b)
    np.testing.assert_array_equal(two, compile_gemm(spec, nthreads=1)(a, b))
    np.testing.assert_allclose(two, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("m,n,k,dtype,accumulate", [
    (600, 64, 700, np.float32, False),   # blocks of 234, 234 and 232 rows of B
    (600, 64, 700, np.float64, True),    # accumulating into C from the first block on
    (1024, 1024, 1024, np.float32, False),  # 4 x 4 blocks of 256 x 256: 256 KiB, not 4 MiB
    (300, 600, 300, np.float32, True),   # column blocks of 224, 224 and 152, two k blocks
    (256, 1024, 1024, np.float32, False),  # more n panels than m, split m (SPLIT_M_PANELS)
])
def test_b_packed_once_per_block(m: int, n: int, k: int, dtype: type,
                                 accumulate: bool) -> None:
    """A product whose shares split m packs B once per block of KC rows and at most
    PACKED_BLOCK_BYTES (a pack phase, then the shares, per block): the scratch holds one
    block of packed B, the product is numpy's and bit for bit the one-thread product (the
    same sums in the same order)."""
    rng = np.random.default_rng(k)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    spec = GemmSpec.for_arrays(a, b, accumulate=accumulate)
    blocks = G.b_blocks(spec)
    bl = G.blocking(spec)
    kc, nb = blocks[0][2].k, blocks[0][2].n
    assert len(blocks) > 1 and (nb % bl.nr == 0 or nb == n)
    # column blocks outer, k blocks inner, covering B exactly once
    assert [(ko, no) for ko, no, _ in blocks] == [(ko, no) for no in range(0, n, nb)
                                                  for ko in range(0, k, kc)]
    assert all(s.k == min(kc, k - ko) and s.n == min(nb, n - no) for ko, no, s in blocks)
    assert all(s.accumulate == (accumulate or ko > 0) for ko, _, s in blocks)
    assert all(G.packed_b_bytes(s) <= G.PACKED_BLOCK_BYTES + 64 for _, _, s in blocks)
    assert G.packs_b_once(spec)
    a_slot = G._thread_bytes(spec, bl, G.gemm_shares(spec, 2))[0]
    # one block of B packed (not all of it) and an A block per slot
    assert scratch_bytes(spec, 2) == 64 + G.packed_b_bytes(blocks[0][2]) + 2 * a_slot
    assert G.packed_b_bytes(blocks[0][2]) < G.packed_b_bytes(spec)
    c0 = rng.standard_normal((m, n)).astype(dtype)
    two = compile_gemm(spec, nthreads=2)(a, b, c0.copy() if accumulate else None)
    one = compile_gemm(spec, nthreads=1)(a, b, c0.copy() if accumulate else None)
    np.testing.assert_array_equal(two, one)
    tol = 1e-4 if dtype is np.float32 else 1e-12
    np.testing.assert_allclose(two, a.astype(np.float64) @ b + (c0 if accumulate else 0),
                               rtol=tol, atol=tol * 100)
