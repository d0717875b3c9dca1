"""GPU emitters: opcode coverage, error messages, and the PTX features each kernel family is
meant to use (vector accesses, shuffles, shared memory, barriers, atomics), across dtypes."""
from __future__ import annotations

import pytest

from tests.backend_gpu.helpers import compile_text, gpu_options, requires_ptxas
from xlc.backend_gpu import nvptx
from xlc.backend_gpu.compiler import run_gpu_passes
from xlc.backend_gpu.emitter import GpuEmitter
from xlc.backend_gpu.registry import EMITTERS, FUSION_EMITTERS, UNSUPPORTED
from xlc.backend_gpu.thunks import KernelThunk
from xlc.errors import UnsupportedOpError
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module


def test_every_opcode_has_a_gpu_emitter_or_a_reason() -> None:
    """The explicit table of registry.py: every opcode is emitted or unsupported with a
    reason, never both."""
    missing = [op.text for op in Opcode if op not in EMITTERS and op not in UNSUPPORTED]
    assert missing == []
    assert not set(EMITTERS) & set(UNSUPPORTED)
    assert all(why.strip() for why in UNSUPPORTED.values())
    assert all(callable(fn) for fn in EMITTERS.values())
    assert set(FUSION_EMITTERS) == {"kLoop", "kInput", "kOutput"}


def test_importing_the_emit_modules_registers_nothing() -> None:
    """The table lives in registry.py only: the emitter module has no global table that
    importing the emit_* modules could fill."""
    from xlc.backend_gpu import emit_loop, emitter

    assert not hasattr(emitter, "EMITTERS") and not hasattr(emitter, "register")
    assert not hasattr(emit_loop, "FUSION_EMITTERS")


def test_an_opcode_missing_from_the_table_is_named() -> None:
    """A GpuEmitter given a table without an opcode raises UnsupportedOpError naming it."""
    module = parse_module("""
HloModule m
ENTRY e {
  a = f32[8] parameter(0)
  ROOT r = f32[8] cbrt(a)
}
""")
    opt, _ = run_gpu_passes(module, gpu_options())
    table = {op: fn for op, fn in EMITTERS.items() if op is not Opcode.CBRT}
    em = GpuEmitter(module, opt.assignment, table, UNSUPPORTED)
    with pytest.raises(UnsupportedOpError,
                       match=r"^GPU backend cannot compile 'cbrt' \(r\): "
                             r"no GPU emitter for 'cbrt'$"):
        em.emit()


def test_unsupported_opcode_names_the_instruction() -> None:
    with pytest.raises(UnsupportedOpError,
                       match=r"GPU backend cannot compile 'custom-call' target 'foo' "
                             r"\(cc\): it has no device implementation and no host "
                             r"implementation"):
        compile_text("""
HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  ROOT cc = f32[8] custom-call(p), custom_call_target="foo"
}
""")


def _kernels(exe: object) -> list[KernelThunk]:
    return [t for t in exe.all_thunks() if isinstance(t, KernelThunk)]  # type: ignore[attr-defined]


def test_loop_fusion_uses_128bit_loads_and_stores() -> None:
    exe = compile_text("""
HloModule m
ENTRY e {
  a = f32[256,128] parameter(0)
  b = f32[256,128] parameter(1)
  m = f32[256,128] multiply(a, b)
  ROOT r = f32[256,128] tanh(m)
}
""")
    assert "ld.global.nc.v4" in exe.ptx and "st.global.v4" in exe.ptx
    (k,) = _kernels(exe)
    assert k.block == (128, 1, 1) and k.grid == (256 * 128 // 4 // 128, 1, 1)


def test_odd_sized_loop_is_scalar_and_grid_strided() -> None:
    exe = compile_text("""
HloModule m
ENTRY e {
  a = f32[1001] parameter(0)
  ROOT r = f32[1001] exponential(a)
}
""")
    assert "ld.global.nc.v4" not in exe.ptx and "nctaid.x" in exe.ptx
    (k,) = _kernels(exe)
    assert k.grid == (8, 1, 1) and k.block == (128, 1, 1)


ROW_REDUCE = """
HloModule m
add {
  x = {t}[] parameter(0)
  y = {t}[] parameter(1)
  ROOT s = {t}[] add(x, y)
}
ENTRY e {
  a = {t}[64,1000] parameter(0)
  z = {t}[] constant(0)
  ROOT r = {t}[64] reduce(a, z), dimensions={1}, to_apply=add
}
"""


@pytest.mark.parametrize("t", ["f32", "f64", "f16", "bf16", "s32", "s64", "s8"])
def test_row_reduction_uses_warp_shuffles_and_shared_memory(t: str) -> None:
    """Rows longer than WARP_ROW_MAX: a block per row (shuffles, then shared memory)."""
    exe = compile_text(ROW_REDUCE.replace("{t}", t).replace("1000]", "4000]"))
    assert "shfl.sync.bfly.b32" in exe.ptx and "bar.sync" in exe.ptx
    assert ".shared" in exe.ptx
    # f16/bf16 sums accumulate in f32 (widen-narrow-reductions): the reduction kernel writes
    # f32, and a loop kernel converts its 64 results to the 16-bit output
    k, *convert = _kernels(exe)
    assert len(convert) == (1 if t in ("f16", "bf16") else 0)
    assert k.grid == (64, 1, 1) and k.block == (256, 1, 1)
    if nvptx.ptxas_path():
        nvptx.ptxas(exe.ptx, 80)


def test_short_rows_get_a_warp_each() -> None:
    """Rows of up to WARP_ROW_MAX elements: a warp per row, 8 rows per 256-thread block, the
    warp's shuffles alone (no shared memory, no barrier)."""
    exe = compile_text(ROW_REDUCE.replace("{t}", "f32"))
    assert "shfl.sync.bfly.b32" in exe.ptx and "bar.sync" not in exe.ptx
    assert ".shared" not in exe.ptx
    (k,) = _kernels(exe)
    assert k.grid == (8, 1, 1) and k.block == (256, 1, 1)


def test_column_reduction_is_tiled_over_shared_memory() -> None:
    """32 outputs per block, 8 threads per column, partials through shared memory (was one
    thread per output: 8 blocks of 128 threads here)."""
    exe = compile_text(ROW_REDUCE.replace("{t}", "f32").replace("dimensions={1}",
                                                                "dimensions={0}")
                       .replace("f32[64] reduce", "f32[1000] reduce"))
    (k,) = _kernels(exe)
    assert k.grid == (32, 1, 1) and k.block == (32, 8, 1)
    assert "shfl" not in exe.ptx and "bar.sync" in exe.ptx and ".shared" in exe.ptx


@pytest.mark.parametrize("t,acc", [("f32", "fma.rn.f32"), ("f64", "fma.rn.f64"),
                                   ("s32", "mad.lo.s32")])
def test_dot_is_a_tiled_shared_memory_gemm(t: str, acc: str) -> None:
    exe = compile_text(f"""
HloModule m
ENTRY e {{
  a = {t}[8,100,70] parameter(0)
  b = {t}[8,70,50] parameter(1)
  ROOT d = {t}[8,100,50] dot(a, b), lhs_batch_dims={{0}}, rhs_batch_dims={{0}},
      lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}}
}}
""")
    (k,) = _kernels(exe)
    assert k.block == (16, 16, 1) and k.grid == (4, 7, 8)
    assert ".shared" in exe.ptx and "bar.sync" in exe.ptx and acc in exe.ptx
    if nvptx.ptxas_path():
        nvptx.ptxas(exe.ptx, 80)


@requires_ptxas
@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_half_precision_dot_uses_tensor_cores(t: str) -> None:
    text = f"""
HloModule m
ENTRY e {{
  a = {t}[8,100,70] parameter(0)
  b = {t}[8,70,50] parameter(1)
  ROOT d = f32[8,100,50] dot(a, b), lhs_batch_dims={{0}}, rhs_batch_dims={{0}},
      lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}}
}}
"""
    exe = compile_text(text)
    (k,) = _kernels(exe)
    assert k.block == (128, 1, 1) and k.grid == (1, 2, 8)
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32" in exe.ptx
    nvptx.ptxas(exe.ptx, 80)
    nvptx.ptxas(exe.ptx, 90)
    # before sm_80 there is no m16n8k16 bf16 mma: the CUDA-core kernel is used
    old = compile_text(text, gpu_sm=75)
    assert "mma.sync" not in old.ptx


def test_scatter_add_uses_atomics() -> None:
    exe = compile_text("""
HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  o = f32[100,8] parameter(0)
  i = s32[50,1] parameter(1)
  u = f32[50,8] parameter(2)
  ROOT s = f32[100,8] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}
""")
    assert "atom.global.add.f32" in exe.ptx or "red.global.add.f32" in exe.ptx
    assert [t.kind for t in exe.thunks.thunks] == ["d2d_copy", "kernel"]


@requires_ptxas
@pytest.mark.parametrize("t", ["f16", "bf16", "f64", "s8", "u16", "pred", "c64"])
def test_elementwise_ops_assemble_for_every_dtype(t: str) -> None:
    op = "and" if t == "pred" else ("add" if t == "c64" else "maximum")
    exe = compile_text(f"""
HloModule m
ENTRY e {{
  a = {t}[33,17] parameter(0)
  b = {t}[33,17] parameter(1)
  c = {t}[33,17] {op}(a, b)
  ROOT r = {t}[17,33] transpose(c), dimensions={{1,0}}
}}
""")
    nvptx.ptxas(exe.ptx, 80)


@requires_ptxas
def test_sort_and_topk_kernels() -> None:
    exe = compile_text("""
HloModule m
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT c = pred[] compare(a, b), direction=LT
}
ENTRY e {
  x = f32[16,300] parameter(0)
  y = s32[16,300] iota(), iota_dimension=1
  s = (f32[16,300], s32[16,300]) sort(x, y), dimensions={1}, to_apply=lt
  t = (f32[16,3], s32[16,3]) topk(x), k=3, largest=true
  ROOT r = ((f32[16,300], s32[16,300]), (f32[16,3], s32[16,3])) tuple(s, t)
}
""", fusion=False)
    ks = {t.hlo: t for t in _kernels(exe)}
    assert ks["s"].grid == (16, 1, 1) and ks["s"].block == (256, 1, 1)
    assert ks["s"].shared_bytes == 512 * 12
    nvptx.ptxas(exe.ptx, 80)


@requires_ptxas
def test_convolution_assembles() -> None:
    exe = compile_text("""
HloModule m
ENTRY e {
  x = f16[2,9,7,3] parameter(0)
  w = f16[3,3,3,4] parameter(1)
  ROOT c = f16[2,5,4,4] convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1},
      dim_labels=b01f_01io->b01f
}
""")
    (k,) = _kernels(exe)
    assert k.grid == (2, 1, 1) and k.block == (128, 1, 1)  # one thread per output element
    nvptx.ptxas(exe.ptx, 80)
    nvptx.ptxas(exe.ptx, 90)
