"""Compiler-level checks: opcode coverage, compile-time errors, LLVM verification, the
executable's runtime contract (alignment, no input mutation, donation, stats, text)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.backend_cpu.helpers import check, rand
from xlc.backend_cpu import compile_cpu
from xlc.backend_cpu.emitter import UNSUPPORTED
from xlc.backend_cpu.registry import EMITTERS
from xlc.codegen import llvm_utils as lu
from xlc.errors import UnsupportedOpError
from xlc.hlo.opcodes import Opcode
from xlc.hlo.parser import parse_module
from xlc.passes.row_fusion import is_row_fusion

SIMPLE = """HloModule m
ENTRY e {
  a = f32[64] parameter(0)
  b = f32[64] parameter(1)
  ROOT r = f32[64] add(a, b)
}"""


def test_every_opcode_has_an_emitter_or_a_reason() -> None:
    missing = [op.text for op in Opcode if op not in EMITTERS and op not in UNSUPPORTED]
    assert missing == []
    assert not set(EMITTERS) & set(UNSUPPORTED)


def test_custom_call_is_rejected_at_compile_time_naming_it() -> None:
    text = """HloModule m
ENTRY e {
  a = f32[4] parameter(0)
  ROOT c = f32[4] custom-call(a), custom_call_target="my_kernel"
}"""
    with pytest.raises(UnsupportedOpError,
                       match=r"CPU backend cannot compile 'custom-call' target 'my_kernel' "
                             r"\(c\): it is not registered \(xlc.ffi.register\) and not one "
                             r"xlc knows"):
        compile_cpu(parse_module(text))


def test_llvm_module_verifies_and_object_code_is_kept() -> None:
    exe = compile_cpu(parse_module(SIMPLE))
    ref = lu.parse_and_verify(exe.llvm_ir, "check")  # raises LoweringError if invalid
    assert any(f.name == exe.entry_name for f in ref.functions)
    assert "noalias" in exe.llvm_ir
    assert exe.object_code()[:4] == b"\x7fELF"


def test_outputs_aligned_inputs_untouched_and_reusable() -> None:
    exe = compile_cpu(parse_module(SIMPLE))
    a, b = rand(64), rand(64, seed=1)
    a0 = a.copy()
    r1 = exe.run([a, b])[0]
    r2 = exe.run([a, b])[0]
    assert r1.ctypes.data % 64 == 0 and r1.ctypes.data != r2.ctypes.data
    np.testing.assert_array_equal(r1, a + b)
    np.testing.assert_array_equal(a, a0)


DONATING = """HloModule m, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY e {
  a = f32[32] parameter(0)
  b = f32[32] parameter(1)
  ROOT r = f32[32] multiply(a, b)
}"""


def test_donation_reuses_the_argument_in_place() -> None:
    from xlc.backend_cpu.executable import aligned_empty

    exe = compile_cpu(parse_module(DONATING))
    b = rand(32, seed=2)
    a = aligned_empty(32 * 4).view(np.float32)
    a[:] = rand(32)
    a0 = a.copy()
    out = exe.run([a, b])[0]
    assert np.shares_memory(out, a)  # the donated buffer is the output: no allocation
    np.testing.assert_allclose(out, a0 * b, rtol=1e-6)
    # the loop `x = f(x)` keeps reusing one buffer (outputs are aligned, hence donatable)
    out2 = exe.run([out, b])[0]
    assert np.shares_memory(out2, a)
    np.testing.assert_allclose(out2, a0 * b * b, rtol=1e-6)


@pytest.mark.parametrize("how", ["read-only", "misaligned", "also-argument-1", "list"])
def test_donated_argument_that_cannot_be_reused_is_copied(how: str) -> None:
    from xlc.backend_cpu.executable import aligned_empty

    exe = compile_cpu(parse_module(DONATING))
    a = aligned_empty(32 * 4).view(np.float32)
    a[:] = rand(32)
    b = rand(32, seed=2)
    if how == "read-only":
        a.flags.writeable = False
    elif how == "misaligned":
        a = np.concatenate([np.zeros(1, np.float32), a])[1:]
        assert a.ctypes.data % 64
    elif how == "also-argument-1":
        b = a
    a0, b0 = np.array(a), np.array(b)
    arg = a.tolist() if how == "list" else a
    out = exe.run([arg, b])[0]
    assert not np.shares_memory(out, a)
    np.testing.assert_array_equal(a, a0)  # untouched
    np.testing.assert_allclose(out, a0 * b0, rtol=1e-6)


def test_memory_stats_and_text() -> None:
    exe = compile_cpu(parse_module(SIMPLE))
    stats = exe.memory_stats()
    assert stats["parameter_bytes"] == 512 and stats["output_bytes"] == 256
    assert "add(" in exe.as_text()


def test_argument_count_checked() -> None:
    from xlc.errors import ArgumentError

    exe = compile_cpu(parse_module(SIMPLE))
    with pytest.raises(ArgumentError, match="expected 2 arguments, got 1"):
        exe.run([rand(64)])


def test_reduce_window_and_map() -> None:
    text = """HloModule m
mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
sq {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  p = f32[] multiply(a, b)
  ROOT s = f32[] subtract(p, a)
}
ENTRY e {
  x = f32[9,12] parameter(0)
  ninf = f32[] constant(-inf)
  w = f32[5,6] reduce-window(x, ninf), window={size=3x2 stride=2x2 pad=1_1x0_0}, to_apply=mx
  y = f32[5,6] parameter(1)
  ROOT m = f32[5,6] map(w, y), dimensions={0,1}, to_apply=sq
}"""
    check(text, rand(9, 12), rand(5, 6, seed=7))


@pytest.mark.parametrize("body,args", [
    ("  a = f32[3] parameter(0)\n  ROOT r = f32[3] copy(a)", [rand(3)]),
    ("  a = f32[3] parameter(0)\n  ROOT r = (f32[3], f32[3]) tuple(a, a)", [rand(3)]),
    ("  a = f32[3] parameter(0)\n  ROOT c = f32[2] constant({1.5, -2})", [rand(3)]),
    ("  a = f32[3] parameter(0)\n  n = f32[3] negate(a)\n  ROOT r = (f32[3], f32[3]) "
     "tuple(n, n)", [rand(3)]),
    ("  a = f32[0,4] parameter(0)\n  ROOT r = f32[0,4] negate(a)",
     [np.zeros((0, 4), np.float32)]),
    ("  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT r = pred[] compare(a, b), "
     "direction=GT", [np.int32(3), np.int32(2)]),
    ("  a = f32[3] parameter(0)\n  ROOT r = f32[3] parameter(1)", [rand(3), rand(3, seed=4)]),
])
def test_entry_edge_cases(body: str, args: list) -> None:
    check("HloModule m\nENTRY e {\n" + body + "\n}", *args)


def test_threaded_kernels_run_on_the_thread_pool() -> None:
    from xlc.backend_cpu.parallel import host_threads

    text = """HloModule m
ENTRY e {
  x = f32[1024,1024] parameter(0)
  ROOT t = f32[1024,1024] tanh(x)
}"""
    exe = compile_cpu(parse_module(text))
    assert ("xlc_pool_run" in exe.llvm_ir) == (host_threads() > 1)
    assert "pthread_create" not in exe.llvm_ir  # no thread started per call
    x = rand(1024, 1024)
    np.testing.assert_allclose(exe.run([x])[0], np.tanh(x), rtol=1e-5, atol=1e-6)


def test_large_outputs_use_nontemporal_stores() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[2048,1024] parameter(0)
  y = f32[2048,1024] parameter(1)
  s = f32[2048,1024] subtract(x, y)
  ROOT t = f32[2048,1024] tanh(s)
}"""
    exe = compile_cpu(parse_module(text))
    assert "!nontemporal" in exe.llvm_ir
    x, y = rand(2048, 1024), rand(2048, 1024, seed=1)
    np.testing.assert_allclose(exe.run([x, y])[0], np.tanh(x - y), rtol=1e-5, atol=1e-6)


def test_dump_writes_llvm_ir(tmp_path) -> None:
    from xlc.options import CompileOptions

    compile_cpu(parse_module(SIMPLE), CompileOptions(backend="cpu", dump_to=str(tmp_path)))
    names = sorted(p.name.split(".", 1)[1] for p in tmp_path.iterdir())  # one module_IIII.
    assert len({p.name.split(".", 1)[0] for p in tmp_path.iterdir()}) == 1
    assert {"m.ir-no-opt.ll", "m.ir-with-opt.ll", "m.o"} <= set(names)
    assert "define" in next(tmp_path.glob("module_*.m.ir-with-opt.ll")).read_text()
    assert next(tmp_path.glob("module_*.m.o")).read_bytes()[:4] == b"\x7fELF"


SOFTMAX_BIG = """HloModule m
mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ad {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[700,257] parameter(0)
  ninf = f32[] constant(-inf)
  m = f32[700] reduce(x, ninf), dimensions={1}, to_apply=mx
  mb = f32[700,257] broadcast(m), dimensions={0}
  d = f32[700,257] subtract(x, mb)
  ex = f32[700,257] exponential(d)
  z = f32[] constant(0)
  s = f32[700] reduce(ex, z), dimensions={1}, to_apply=ad
  sb = f32[700,257] broadcast(s), dimensions={0}
  ROOT o = f32[700,257] divide(ex, sb)
}"""


def _softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_softmax_is_one_row_fusion_kernel() -> None:
    exe = compile_cpu(parse_module(SOFTMAX_BIG))
    entry = exe.module.entry
    kernels = [i for i in entry.instructions if i.opcode is Opcode.FUSION]
    assert len(kernels) == 1 and is_row_fusion(kernels[0])
    assert ".rows." not in exe.llvm_ir  # nothing left to pipeline
    x = rand(700, 257) * 4
    np.testing.assert_allclose(exe.run([x])[0], _softmax_ref(x), rtol=1e-5, atol=1e-7)


def test_row_group_pipelines_softmax_rows_when_row_sums_are_outputs() -> None:
    # The row sums are a program output, so row fusion cannot absorb their kernel; the
    # backend still runs the kernels block of rows by block of rows.
    text = SOFTMAX_BIG.replace(
        "ROOT o = f32[700,257] divide(ex, sb)",
        "o = f32[700,257] divide(ex, sb)\n  ROOT t = (f32[700,257], f32[700]) tuple(o, s)")
    exe = compile_cpu(parse_module(text))
    assert ".rows." in exe.llvm_ir
    x = rand(700, 257) * 4
    out, sums = exe.run([x])
    np.testing.assert_allclose(out, _softmax_ref(x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(sums, np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1),
                               rtol=1e-5)


def test_no_row_group_when_rows_are_not_local() -> None:
    text = """HloModule m
ad {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[400,400] parameter(0)
  z = f32[] constant(0)
  s = f32[400] reduce(x, z), dimensions={1}, to_apply=ad
  sb = f32[400,400] broadcast(s), dimensions={1}
  ROOT o = f32[400,400] add(x, sb)
}"""
    exe = compile_cpu(parse_module(text))
    assert ".rows." not in exe.llvm_ir
    check(text, rand(400, 400), rtol=1e-4, atol=1e-4)


def test_compile_verifies_its_input_even_without_verify_option() -> None:
    """A malformed module is refused before any pass runs, whatever the options say (the
    reduce-window below declares a shape its window cannot produce)."""
    import xlc
    from xlc.errors import VerificationError
    from xlc.options import CompileOptions

    text = """HloModule m
ad {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[7,9] parameter(0)
  z = f32[] constant(0.5)
  ROOT r = f32[7,6] reduce-window(x, z), to_apply=ad,
    window={size=3x4 stride=2x3 pad=1_2x2_1 lhs_dilate=2x2 rhs_dilate=1x2}
}"""
    for backend in ("cpu", "interpreter"):
        with pytest.raises(VerificationError, match=r"instruction 'r' in computation 'e': result "
                           r"shape does not match the inferred shape: declared f32\[7,6\] vs "
                           r"inferred f32\[7,5\]"):
            xlc.compile(text, backend=backend, options=CompileOptions(verify=False))
