"""User custom-call targets (`xlc.ffi`) on the CPU: C source, LLVM IR, a shared library and a
Python function, inside jitted programs; errors from a target; `.xlc` files (object code
travels, a shared-library target must be registered where the file is loaded, Python targets
cannot be saved); registrations in the compile-cache key; host callbacks."""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import xlc.lax

import xlc
import xlc.ffi
from xlc.errors import ArgumentError, ArtifactError, CustomCallError, UnsupportedOpError

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)")

SCALED_ADD = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "xlc_ffi.h"

/* out = x * scale + y for two f32 arrays of equal size; scale from backend_config */
int32_t scaled_add(const xlc_buffer *args, int64_t nargs, xlc_buffer *results,
                   int64_t nresults, const char *attrs, char *error) {
  if (nargs != 2 || nresults != 1 || args[0].dtype != XLC_F32 || args[1].dtype != XLC_F32) {
    snprintf(error, XLC_FFI_ERROR_SIZE, "want two f32 arrays, got %lld", (long long)nargs);
    return 3;
  }
  int64_t n = 1;
  for (int i = 0; i < args[0].rank; i++) n *= args[0].dims[i];
  const char *at = strstr(attrs, "scale=");
  float scale = at ? (float)atof(at + 6) : 1.0f;
  if (scale < 0) {
    snprintf(error, XLC_FFI_ERROR_SIZE, "negative scale %g", scale);
    return 7;
  }
  const float *x = args[0].data, *y = args[1].data;
  float *out = results[0].data;
  for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale + y[i];
  return 0;
}
"""

SQUARE_IR = """
define i32 @square(ptr %args, i64 %nargs, ptr %results, i64 %nres, ptr %attrs, ptr %err) {
entry:
  %rankp = getelementptr i8, ptr %args, i64 4
  %dimsp = getelementptr i8, ptr %args, i64 8
  %datap = getelementptr i8, ptr %args, i64 16
  %dims = load ptr, ptr %dimsp
  %n = load i64, ptr %dims
  %x = load ptr, ptr %datap
  %odatap = getelementptr i8, ptr %results, i64 16
  %out = load ptr, ptr %odatap
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %px = getelementptr double, ptr %x, i64 %i
  %v = load double, ptr %px
  %sq = fmul double %v, %v
  %po = getelementptr double, ptr %out, i64 %i
  store double %sq, ptr %po
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret i32 0
}
"""


@pytest.fixture(autouse=True)
def _clean_registry() -> Iterator[None]:
    yield
    for t in xlc.ffi.registered():
        if not t.name.startswith("xlc."):
            xlc.ffi.unregister(t.name, t.backend)


def _scaled_add(scale: str = "3"):
    return xlc.jit(lambda x, y: xlc.ffi.call("scaled_add", xlc.ShapeDtype(x.shape, x.dtype),
                                             x * 2, y, backend_config=f"scale={scale}") + 1)


X = np.arange(6, dtype=np.float32).reshape(2, 3)
Y = np.ones((2, 3), np.float32)


@needs_cc
def test_c_source_target_runs_inside_a_jitted_program() -> None:
    xlc.ffi.register("scaled_add", c_source=SCALED_ADD)
    np.testing.assert_array_equal(_scaled_add()(X, Y), X * 2 * 3 + Y + 1)
    text = _scaled_add().lower(X, Y).as_text()
    assert 'custom_call_target="scaled_add", backend_config="scale=3"' in text


@needs_cc
def test_an_error_from_the_target_names_it() -> None:
    xlc.ffi.register("scaled_add", c_source=SCALED_ADD)
    with pytest.raises(CustomCallError, match=r"custom-call target 'scaled_add' returned error "
                                              r"7: negative scale -1"):
        _scaled_add("-1")(X, Y)
    np.testing.assert_array_equal(_scaled_add()(X, Y), X * 6 + 2)  # nothing sticks


def test_llvm_ir_target() -> None:
    xlc.ffi.register("square", llvm_ir=SQUARE_IR)
    x = np.linspace(-2, 2, 7)
    f = xlc.jit(lambda v: xlc.ffi.call("square", v, v + 1.0))
    np.testing.assert_allclose(f(x), (x + 1) ** 2)


@needs_cc
def test_shared_library_target(tmp_path: Path) -> None:
    so = _shared_library(tmp_path)
    xlc.ffi.register("scaled_add", shared_library=so)
    np.testing.assert_array_equal(_scaled_add()(X, Y), X * 6 + Y + 1)


def _shared_library(tmp_path: Path) -> Path:
    src = tmp_path / "scaled_add.c"
    src.write_text(SCALED_ADD)
    so = tmp_path / "libscaled.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-I", xlc.ffi.include_dir(), str(src),
                    "-o", str(so)], check=True)
    return so


def test_python_target_on_the_cpu_and_the_interpreter() -> None:
    xlc.ffi.register("twice_and_sum", python=lambda a: (a * 2, np.sum(a, keepdims=True)))

    def f(v):
        return xlc.ffi.call("twice_and_sum", (v, xlc.ShapeDtype((1,), v.dtype)), v)

    x = np.arange(4.0)
    for backend in ("cpu", "interpreter"):
        twice, total = xlc.jit(f, backend=backend)(x)
        np.testing.assert_array_equal(twice, x * 2)
        np.testing.assert_array_equal(total, [6.0])


@needs_cc
def test_object_code_travels_in_the_xlc_file(tmp_path: Path) -> None:
    """C source and LLVM IR targets: a fresh process that registered nothing runs the file."""
    xlc.ffi.register("scaled_add", c_source=SCALED_ADD)
    xlc.ffi.register("square", llvm_ir=SQUARE_IR)
    f = xlc.jit(lambda x, y: xlc.ffi.call(  # square is 1-D only: n = dims[0]
        "square", xlc.ShapeDtype((6,), np.float64),
        xlc.ffi.call("scaled_add", x, x, y).astype("float64").reshape(-1)).reshape(2, 3))
    path = tmp_path / "ffi.xlc"
    f.lower(X, Y).compile().serialize(path)
    out = _run_fresh(f"""
        exe = xlc.load({str(path)!r})
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        print(np.asarray(exe(x, np.ones((2, 3), np.float32))).tolist())
    """)
    assert out == str(((X + Y).astype(np.float64) ** 2).tolist())


@needs_cc
def test_a_shared_library_target_must_be_registered_where_the_file_loads(
        tmp_path: Path) -> None:
    so = _shared_library(tmp_path)
    xlc.ffi.register("scaled_add", shared_library=so)
    path = tmp_path / "lib.xlc"
    _scaled_add().lower(X, Y).compile().serialize(path)
    refused = _run_fresh(f"""
        try:
            xlc.load({str(path)!r})
        except xlc.ArtifactError as e:
            print(e)
    """)
    assert refused.endswith("the program calls custom-call target 'scaled_add', which is not "
                            "registered in this process (register it with xlc.ffi.register "
                            "before loading)")
    works = _run_fresh(f"""
        import xlc.ffi
        xlc.ffi.register("scaled_add", shared_library={str(so)!r})
        exe = xlc.load({str(path)!r})
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        print(np.asarray(exe(x, np.ones((2, 3), np.float32))).tolist())
    """)
    assert works == str((X * 6 + Y + 1).tolist())


def _run_fresh(body: str) -> str:
    script = "import numpy as np, xlc\n" + textwrap.dedent(body)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.strip()


def test_python_targets_and_callbacks_cannot_be_serialized(tmp_path: Path) -> None:
    f = xlc.jit(lambda v: xlc.pure_callback(np.sin, v, v))
    with pytest.raises(ArtifactError, match=r"cannot serialize: the program calls custom-call "
                                            r"target 'xlc.pure_callback.\d+', a Python "
                                            r"function \(xlc.pure_callback, xlc.debug or "
                                            r"xlc.ffi.register\(python=...\)\), which cannot "
                                            r"be saved"):
        f.lower(np.ones(3)).compile().serialize(tmp_path / "cb.xlc")


@needs_cc
def test_registration_errors() -> None:
    with pytest.raises(ArgumentError, match=r"a custom-call target name must be letters"):
        xlc.ffi.register("bad name", python=print)
    with pytest.raises(ArgumentError, match=r"give exactly one of shared_library, c_source, "
                                            r"llvm_ir, python or ptx \(got c_source, "
                                            r"python\)"):
        xlc.ffi.register("t", c_source="int x;", python=print)
    with pytest.raises(ArgumentError, match=r"the C source does not compile"):
        xlc.ffi.register("t", c_source="int f( {")
    with pytest.raises(ArgumentError, match=r"the object code has no function 'nothere'"):
        xlc.ffi.register("t", c_source=SCALED_ADD, symbol="nothere")
    with pytest.raises(ArgumentError, match=r"no shared library"):
        xlc.ffi.register("t", shared_library="/nonexistent/lib.so")
    with pytest.raises(ArgumentError, match=r"the LLVM IR is invalid"):
        xlc.ffi.register("t", llvm_ir="define i32 @t( {")


def test_an_unregistered_target_is_refused_by_name() -> None:
    f = xlc.jit(lambda v: xlc.ffi.call("nobody_registered_me", v, v))
    with pytest.raises(UnsupportedOpError, match=r"'custom-call' target 'nobody_registered_me' "
                                                 r"\(custom-call\): it is not registered"):
        f(np.ones(2))


def test_the_registration_is_part_of_the_cache_key() -> None:
    from xlc.artifact.cache import cache_key
    from xlc.hlo.parser import parse_module

    text = xlc.jit(lambda v: xlc.ffi.call("k", v, v)).lower(np.ones(2)).as_text()
    module = parse_module(text)
    options = xlc.CompileOptions()
    keys = []
    for op in ("fmul", "fadd"):  # x * x, then x + x: other code, another key
        ir_text = SQUARE_IR.replace("@square", "@k").replace("fmul double", f"{op} double")
        xlc.ffi.register("k", llvm_ir=ir_text)
        keys.append(cache_key(module, "cpu", options))
    assert keys[0] != keys[1]


def test_non_row_major_buffers_are_refused() -> None:
    from xlc.backend_cpu import compile_cpu
    from xlc.hlo.parser import parse_module

    xlc.ffi.register("square", llvm_ir=SQUARE_IR)
    text = """HloModule m
ENTRY e {
  x = f64[2,3]{0,1} parameter(0)
  ROOT c = f64[2,3]{0,1} custom-call(x), custom_call_target="square"
}
"""
    with pytest.raises(UnsupportedOpError, match=r"the C calling convention passes row-major "
                                                 r"buffers, not f64\[2,3\]\{0,1\}"):
        compile_cpu(parse_module(text))


def test_pure_callback_and_debug_print(capsys: pytest.CaptureFixture[str]) -> None:
    def f(x):
        lo, hi = xlc.pure_callback(lambda a: (np.min(a), np.max(a)),
                                   (xlc.ShapeDtype((), x.dtype), xlc.ShapeDtype((), x.dtype)),
                                   x)
        xlc.debug.print("range {} .. {hi}", lo, hi=hi)
        return hi - lo

    x = np.array([3.0, -1.0, 2.5])
    assert xlc.jit(f)(x) == 4.0
    assert capsys.readouterr().out == "range -1.0 .. 3.0\n"
    assert xlc.jit(f, backend="interpreter")(x) == 4.0
    assert capsys.readouterr().out == "range -1.0 .. 3.0\n"


def test_a_callback_returning_the_wrong_shape_is_an_error() -> None:
    f = xlc.jit(lambda v: xlc.pure_callback(lambda a: a[:2], xlc.ShapeDtype((3,), v.dtype), v))
    with pytest.raises(CustomCallError, match=r"custom-call target 'xlc.pure_callback.\d+' "
                                              r"failed on the host: ValueError: result 0 has "
                                              r"shape \(2,\), the custom-call declares f64\[3\]"):
        f(np.ones(3))


def test_debug_print_of_a_value_computed_inside_a_loop(capsys: pytest.CaptureFixture[str],
                                                       ) -> None:
    def body(i, acc):
        xlc.debug.print("step {}", i)
        return acc + i

    assert xlc.jit(lambda n: xlc.lax.fori_loop(0, 3, body, n))(np.int32(0)) == 3
    assert capsys.readouterr().out == "step 0\nstep 1\nstep 2\n"
