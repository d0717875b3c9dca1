"""Native export (`Compiled.export`, xlc/backend_cpu/export*.py): corpus programs (an MLP,
softmax, a while loop, a sort, a donating optimizer step) exported as C libraries, linked by
`cc` into a C driver that runs without Python, and compared bit for bit with the in-process
run; symbols of the libraries; custom-call targets (C source in the library, a shared-library
target linked by the user, a target's error); the errors of what cannot be exported; the
header from C++."""
from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlc
import xlc.ffi
from tests.conftest import requires_corpus
from xlc.errors import ArgumentError, UnsupportedOpError

TOOLS = ("cc", "c++", "objcopy", "ar", "nm")
needs_cc = pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS),
                              reason="needs cc, c++ and binutils")
pytestmark = needs_cc

DRIVER = r"""
/* driver IN.bin OUT.bin NTHREADS [inplace]: the arguments concatenated in IN.bin, the
   results concatenated into OUT.bin; "inplace" passes a donated argument's pointer as its
   result. Exit 3 with the library's message when the call fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include XLC_HEADER
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define F(x) CAT(XLC_NAME, x)

static void* block(size_t n) {
  size_t size = (n + 63) / 64 * 64 + 64;
  void* p = aligned_alloc(64, size);
  if (p) memset(p, 0xAB, size);
  return p;
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  int inplace = argc > 4 && strcmp(argv[4], "inplace") == 0;
  const void* args[F(_NUM_ARGS) + 1];
  void* results[F(_NUM_RESULTS) + 1];
  FILE* in = fopen(argv[1], "rb");
  if (!in) return 2;
  for (int i = 0; i < F(_NUM_ARGS); i++) {
    size_t n = F(_arg_bytes)(i);
    void* p = block(n);
    if (n && fread(p, 1, n, in) != n) return 2;
    args[i] = p;
  }
  fclose(in);
  for (int k = 0; k < F(_NUM_RESULTS); k++) {
    int a = F(_result_shares_arg)(k);
    results[k] = inplace && a >= 0 ? (void*)args[a] : block(F(_result_bytes)(k));
  }
  if (F(_check_cpu)()) return 4;
  void* temp = F(_alloc_temp)();
  int rc = F(_run)(args, results, temp, atoi(argv[3]));
  if (rc) { fprintf(stderr, "error %d: %s\n", rc, F(_last_error)()); return 3; }
  FILE* out = fopen(argv[2], "wb");
  for (int k = 0; k < F(_NUM_RESULTS); k++) fwrite(results[k], 1, F(_result_bytes)(k), out);
  fclose(out);
  F(_free_temp)(temp);
  return 0;
}
"""

ALLOWED_UNDEFINED = frozenset({
    # libc / libpthread
    "memcpy", "memset", "memmove", "aligned_alloc", "free", "snprintf", "clock_gettime",
    "getpid", "pthread_create", "pthread_detach", "syscall", "__stack_chk_fail",
    # libm (what the code generator may call)
    "fmod", "fmodf", "exp", "expf", "log", "logf", "pow", "powf", "sin", "sinf", "cos",
    "cosf", "tan", "tanf", "tanh", "tanhf", "atan2", "atan2f", "erf", "erff",
    # the linker, ld-linux (thread-local storage) and the C runtime's weak hooks
    "_GLOBAL_OFFSET_TABLE_", "__tls_get_addr", "__cxa_finalize", "__gmon_start__",
    "_ITM_deregisterTMCloneTable", "_ITM_registerTMCloneTable",
})
"""Undefined symbols an exported library may have (libc, libm, libpthread, ld-linux)."""


def _flat(out: Any) -> list[np.ndarray]:
    return [np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else [out])]


class Exported:
    """An exported program with its C driver linked against the static and shared library."""

    def __init__(self, compiled: Any, name: str, directory: Path):
        self.compiled, self.name, self.dir = compiled, name, directory
        self.files = compiled.export(directory, name)
        (directory / "driver.c").write_text(DRIVER)
        common = ["-O2", "-std=c11", "-Wall", "-Werror", f"-DXLC_NAME={name}",
                  f'-DXLC_HEADER="{name}.h"', f"-I{directory}", str(directory / "driver.c")]
        self.drivers = {
            "static": self._cc(common + [str(directory / f"lib{name}.a"), "-lm", "-lpthread"],
                               "static"),
            "shared": self._cc(common + [f"-L{directory}", f"-l{name}",
                                         f"-Wl,-rpath,{directory}"], "shared"),
        }

    def _cc(self, args: list[str], kind: str) -> Path:
        exe = self.dir / f"driver_{kind}"
        subprocess.run(["cc", *args, "-o", str(exe)], check=True, capture_output=True)
        return exe

    def run(self, inputs: list[np.ndarray], kind: str, nthreads: int = 0,
            inplace: bool = False) -> list[np.ndarray]:
        """The results of the C driver (no Python in that process)."""
        src, dst = self.dir / "in.bin", self.dir / "out.bin"
        src.write_bytes(b"".join(np.ascontiguousarray(x).tobytes() for x in inputs))
        cmd = [str(self.drivers[kind]), str(src), str(dst), str(nthreads)]
        proc = subprocess.run(cmd + (["inplace"] if inplace else []), capture_output=True,
                              text=True, timeout=60)
        if proc.returncode:
            raise RuntimeError(f"driver exit {proc.returncode}: {proc.stderr.strip()}")
        raw, outs, at = dst.read_bytes(), [], 0
        for leaf in self.compiled.optimized().module.entry.root.shape.leaves():
            shape = leaf[1]
            n = shape.byte_size()
            outs.append(np.frombuffer(raw[at:at + n], shape.dtype).reshape(shape.dims))
            at += n
        assert at == len(raw)
        return outs


def _same_bits(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert g.tobytes() == np.ascontiguousarray(w).tobytes()


@pytest.fixture(scope="module")
def corpus_exports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from corpus import load_case  # type: ignore[import-not-found]

    out = {}
    for case in ("mlp2", "softmax", "power_iteration", "sort_topk", "adam_update"):
        c = load_case(case)
        compiled = xlc.compile(c.module_text, backend="cpu")
        out[case] = (Exported(compiled, case, tmp_path_factory.mktemp(case)), c.inputs)
    yield out


@requires_corpus
@pytest.mark.parametrize("case", ["mlp2", "softmax", "power_iteration", "sort_topk",
                                  "adam_update"])
def test_corpus_program_runs_from_c_bit_for_bit(corpus_exports: dict[str, Any],
                                                case: str) -> None:
    exported, inputs = corpus_exports[case]
    want = _flat(exported.compiled(*[x.copy() for x in inputs]))  # copies: donation
    for kind in ("static", "shared"):
        for nthreads in (0, 1):
            _same_bits(exported.run(inputs, kind, nthreads), want)


@requires_corpus
def test_donated_arguments_in_place_and_copied(corpus_exports: dict[str, Any]) -> None:
    exported, inputs = corpus_exports["adam_update"]
    header = (exported.dir / "adam_update.h").read_text()
    assert "#define adam_update_RESULT3_SHARES_ARG 6" in header
    want = _flat(exported.compiled(*[x.copy() for x in inputs]))
    _same_bits(exported.run(inputs, "static", inplace=True), want)
    _same_bits(exported.run(inputs, "shared", inplace=False), want)


@requires_corpus
def test_libraries_define_only_the_api_and_need_only_system_symbols(
        corpus_exports: dict[str, Any]) -> None:
    for case, (exported, _inputs) in corpus_exports.items():
        lib_a, lib_so = exported.dir / f"lib{case}.a", exported.dir / f"lib{case}.so"
        for cmd in (["nm", "-u", str(lib_a)], ["nm", "-D", "--undefined-only", str(lib_so)]):
            text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            names = {line.split()[-1].split("@")[0] for line in text.splitlines()
                     if line.strip() and not line.endswith(":")}
            assert names - ALLOWED_UNDEFINED == set(), (case, cmd[1])
        text = subprocess.run(["nm", "-g", "--defined-only", str(lib_a)], check=True,
                              capture_output=True, text=True).stdout
        defined = {line.split()[-1] for line in text.splitlines() if len(line.split()) == 3}
        assert defined and all(s.startswith(f"{case}_") for s in defined), defined


ALIAS_HLO = """HloModule step, input_output_alias={ {0}: (0, {}, may-alias) }
ENTRY e {
  p = f32[16] parameter(0)
  q = f32[16] parameter(1)
  a = f32[16] add(p, q)
  ROOT t = (f32[16], f32[16], f32[16]) tuple(a, q, q)
}"""


def test_aliased_and_returned_parameters(tmp_path: Path) -> None:
    compiled = xlc.compile(ALIAS_HLO, backend="cpu")
    exported = Exported(compiled, "step", tmp_path)
    x, y = np.arange(16, dtype=np.float32), np.full(16, 0.5, np.float32)
    want = _flat(compiled(x.copy(), y.copy()))
    _same_bits(exported.run([x, y], "static"), want)
    _same_bits(exported.run([x, y], "shared", inplace=True), want)


SCALED_ADD = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "xlc_ffi.h"
int32_t scaled_add(const xlc_buffer *args, int64_t nargs, xlc_buffer *results,
                   int64_t nresults, const char *attrs, char *error) {
  int64_t n = 1;
  for (int i = 0; i < args[0].rank; i++) n *= args[0].dims[i];
  const char *at = strstr(attrs, "scale=");
  float scale = at ? (float)atof(at + 6) : 1.0f;
  if (scale < 0) { snprintf(error, XLC_FFI_ERROR_SIZE, "negative scale %g", scale); return 7; }
  const float *x = args[0].data, *y = args[1].data;
  float *out = results[0].data;
  for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale + y[i];
  return 0;
}
"""
X = np.arange(6, dtype=np.float32).reshape(2, 3)
Y = np.ones((2, 3), np.float32)


@pytest.fixture
def _clean_ffi() -> Iterator[None]:
    yield
    xlc.ffi.unregister("scaled_add")


def _scaled_add(scale: str) -> Any:
    return xlc.jit(lambda x, y: xlc.ffi.call("scaled_add", xlc.ShapeDtype(x.shape, x.dtype),
                                             x * 2, y, backend_config=f"scale={scale}") + 1)


def test_c_source_target_goes_into_the_library(tmp_path: Path, _clean_ffi: None) -> None:
    xlc.ffi.register("scaled_add", c_source=SCALED_ADD)
    good = _scaled_add("3").lower(X, Y).compile()
    exported = Exported(good, "ffi_good", tmp_path / "good")
    _same_bits(exported.run([X, Y], "static"), _flat(good(X, Y)))
    bad = Exported(_scaled_add("-1").lower(X, Y).compile(), "ffi_bad", tmp_path / "bad")
    with pytest.raises(RuntimeError, match=r"^driver exit 3: error 2: custom-call target "
                                           r"'scaled_add' returned error 7: negative scale "
                                           r"-1$"):
        bad.run([X, Y], "shared")


def test_shared_library_target_stays_an_undefined_symbol(tmp_path: Path,
                                                        _clean_ffi: None) -> None:
    so = tmp_path / "libscaled.so"
    (tmp_path / "scaled.c").write_text(SCALED_ADD)
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-I", xlc.ffi.include_dir(),
                    str(tmp_path / "scaled.c"), "-o", str(so)], check=True)
    xlc.ffi.register("scaled_add", shared_library=so)
    compiled = _scaled_add("3").lower(X, Y).compile()
    out = tmp_path / "lib"
    compiled.export(out, "ext", shared=False)
    assert f" *   scaled_add  (target 'scaled_add', from {so})" in (out / "ext.h").read_text()
    undefined = subprocess.run(["nm", "-u", str(out / "libext.a")], check=True,
                               capture_output=True, text=True).stdout.split()
    assert "scaled_add" in undefined
    (out / "driver.c").write_text(DRIVER)
    subprocess.run(["cc", "-O2", "-DXLC_NAME=ext", '-DXLC_HEADER="ext.h"', f"-I{out}",
                    str(out / "driver.c"), str(out / "libext.a"), str(so),
                    f"-Wl,-rpath,{tmp_path}", "-lm", "-lpthread", "-o", str(out / "drv")],
                   check=True)
    (out / "in.bin").write_bytes(X.tobytes() + Y.tobytes())
    subprocess.run([str(out / "drv"), str(out / "in.bin"), str(out / "out.bin"), "0"],
                   check=True)
    want = np.asarray(compiled(X, Y))
    assert (out / "out.bin").read_bytes() == want.tobytes()


def test_host_calls_cannot_be_exported(tmp_path: Path) -> None:
    import xlc.numpy as xnp

    inv = xlc.jit(xnp.linalg.inv).lower(xlc.ShapeDtype((4, 4), np.float32)).compile()
    with pytest.raises(UnsupportedOpError, match=(
            r"^cannot export inv: custom-call '[\w.-]+' calls target 'lapack_sgetrf_ffi', "
            r"which runs in Python on the host \(LAPACK targets, callbacks and Python targets "
            r"cannot be exported\); register C source or LLVM IR for it with "
            r"xlc.ffi.register$")):
        inv.export(tmp_path, "inv")
    assert not list(tmp_path.iterdir())


def test_other_backends_existing_files_and_bad_names(tmp_path: Path) -> None:
    text = "HloModule m\nENTRY e { p = f32[4] parameter(0) ROOT a = f32[4] add(p, p) }"
    gpu = xlc.compile(text, backend="gpu")
    with pytest.raises(ArgumentError, match=r"^m: native export is CPU-only for now \(this "
                                            r"executable is for backend 'gpu'\)$"):
        gpu.export(tmp_path, "m")
    cpu = xlc.compile(text, backend="cpu")
    with pytest.raises(ArgumentError, match=r"the library name must be a C identifier .*"
                                            r"got '2x'$"):
        cpu.export(tmp_path, "2x")
    cpu.export(tmp_path, "twice", shared=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.txt", "libtwice.a",
                                                          "twice.h"]
    with pytest.raises(ArgumentError, match=rf"^{tmp_path}/twice.h: already exists \(pass "
                                            r"force=True, or --force, to overwrite it\)$"):
        cpu.export(tmp_path, "twice")
    assert len(cpu.export(tmp_path, "twice", force=True)) == 4


CPP_DRIVER = r"""
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>
#include "twice.h"

int main() {
  static_assert(twice_NUM_ARGS == 1 && twice_ARG0_BYTES == 16, "header constants");
  std::vector<float> x = {1.5f, -2.0f, 0.25f, 8.0f};
  struct Free { void operator()(void* p) const { twice_free_temp(p); } };
  std::unique_ptr<void, Free> temp(twice_alloc_temp());
  alignas(64) float y[4];
  const void* args[] = {x.data()};
  void* results[] = {y};
  void* misaligned[] = {y + 1};
  if (twice_run(args, misaligned, temp.get(), 1) != twice_ERR_ARGUMENT) return 1;
  std::printf("%s\n", twice_last_error());
  if (twice_run(args, results, temp.get(), 1) != 0) return 1;
  for (float v : y) std::printf("%g\n", v);
  return std::strlen(twice_version()) > 0 ? 0 : 1;
}
"""


def test_header_from_cpp(tmp_path: Path) -> None:
    text = "HloModule m\nENTRY e { p = f32[4] parameter(0) ROOT a = f32[4] add(p, p) }"
    xlc.compile(text, backend="cpu").export(tmp_path, "twice", static=False)
    (tmp_path / "main.cpp").write_text(CPP_DRIVER)
    subprocess.run(["c++", "-std=c++17", "-Wall", "-Werror", "-O2", f"-I{tmp_path}",
                    str(tmp_path / "main.cpp"), f"-L{tmp_path}", "-ltwice",
                    f"-Wl,-rpath,{tmp_path}", "-o", str(tmp_path / "main")], check=True)
    out = subprocess.run([str(tmp_path / "main")], check=True, capture_output=True, text=True)
    assert out.stdout.splitlines() == [
        "twice_run: results[0] is NULL or not 64-byte aligned", "3", "-4", "0.5", "16"]
