"""tools/xla_heap.py: the malloc-counting shim and what it measures of XLA's CPU runtime.

Every measurement runs in a child process with the shim preloaded."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if shutil.which("cc") is None:
    pytest.skip("no C compiler (`cc`)", allow_module_level=True)

from tests.backend_cpu.test_gemm_rowdot import GEMM_WORKSPACE_ABOVE_XLA  # noqa: E402
from tests.conftest import CORPUS, requires_corpus  # noqa: E402
from tools.xla_heap import build_shim, measure_cases  # noqa: E402
from xlc.api import optimize_module  # noqa: E402
from xlc.hlo.parser import parse_module  # noqa: E402
from xlc.options import CompileOptions  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# The child: a known malloc, calloc, aligned allocation, realloc and anonymous mmap, each with
# the shim's counters read around it (deltas in bytes; `usable` is malloc's size of the block).
COUNT_SCRIPT = """
import ctypes, json, mmap, sys
sys.path.insert(0, "tools")
from xla_heap import HeapCounters
c = HeapCounters(sys.argv[1])
libc = ctypes.CDLL(None)
for f in ("malloc", "calloc", "realloc"):
    getattr(libc, f).restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.calloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
libc.realloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.malloc_usable_size.argtypes = [ctypes.c_void_p]
libc.malloc_usable_size.restype = ctypes.c_size_t
out = {}
def step(name, fn):
    before = c.stats()
    c.reset()
    r = fn()
    after = c.stats()
    out[name] = {"live": after.heap_live - before.heap_live,
                 "peak": after.heap_peak - before.heap_live,
                 "mmap": after.mmap_live - before.mmap_live}
    return r
p = step("malloc", lambda: libc.malloc(1 << 20))
out["malloc_usable"] = libc.malloc_usable_size(p)
step("free", lambda: libc.free(p))
q = step("calloc", lambda: libc.calloc(3, 100000))
out["calloc_usable"] = libc.malloc_usable_size(q)
old = libc.malloc_usable_size(q)
q = step("realloc", lambda: libc.realloc(q, 500000))
out["realloc_usable"] = libc.malloc_usable_size(q) - old
libc.free(q)
ptr = ctypes.c_void_p()
step("posix_memalign", lambda: libc.posix_memalign(ctypes.byref(ptr), 4096, 3 << 20))
out["posix_memalign_usable"] = libc.malloc_usable_size(ptr)
out["aligned"] = ptr.value % 4096
libc.free(ptr)
m = step("mmap", lambda: mmap.mmap(-1, 5 << 20))
step("munmap", m.close)
print(json.dumps(out))
"""

ADD = """module @jit_add {
  func.func public @main(%arg0: tensor<1024x256xf32>, %arg1: tensor<1024x256xf32>)
      -> tensor<1024x256xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<1024x256xf32>
    return %0 : tensor<1024x256xf32>
  }
}
"""

# tanh(x @ w1) @ w2: the 64x256 hidden value is XLA's temp (64 KiB).
MLP = """module @jit_mlp {
  func.func public @main(%arg0: tensor<64x256xf32>, %arg1: tensor<256x256xf32>,
                         %arg2: tensor<256x64xf32>) -> tensor<64x64xf32> {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0]
        : (tensor<64x256xf32>, tensor<256x256xf32>) -> tensor<64x256xf32>
    %1 = stablehlo.tanh %0 : tensor<64x256xf32>
    %2 = stablehlo.dot_general %1, %arg2, contracting_dims = [1] x [0]
        : (tensor<64x256xf32>, tensor<256x64xf32>) -> tensor<64x64xf32>
    return %2 : tensor<64x64xf32>
  }
}
"""


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_shim(tmp_path_factory.mktemp("xla_heap"))


def test_shim_counts_known_allocations_exactly(shim: Path) -> None:
    env = dict(os.environ, LD_PRELOAD=str(shim))
    proc = subprocess.run([sys.executable, "-c", COUNT_SCRIPT, str(shim)], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True, timeout=60)
    out = json.loads(proc.stdout)
    assert out["malloc_usable"] >= 1 << 20
    assert out["malloc"] == {"live": out["malloc_usable"], "peak": out["malloc_usable"],
                             "mmap": 0}
    assert out["free"]["live"] == -out["malloc_usable"]
    assert out["calloc"]["live"] == out["calloc_usable"] >= 300000
    assert out["realloc"]["live"] == out["realloc_usable"] >= 500000 - 300000
    assert out["posix_memalign"]["live"] == out["posix_memalign_usable"] >= 3 << 20
    assert out["aligned"] == 0
    # The mmap module maps anonymous memory itself: counted apart from the heap.
    assert out["mmap"] == {"live": 0, "peak": 0, "mmap": 5 << 20}
    assert out["munmap"]["mmap"] == -(5 << 20)


def _case(root: Path, name: str, text: str, shapes: list[list[int]]) -> Path:
    d = root / name
    d.mkdir()
    (d / "module.stablehlo.mlir").write_text(text)
    inputs = [{"key": f"in{i}", "shape": s, "dtype": "float32"} for i, s in enumerate(shapes)]
    (d / "meta.json").write_text(json.dumps({"seed": 1, "inputs": inputs}))
    return d


def test_xla_calls_add_and_mlp(shim: Path, tmp_path: Path) -> None:
    pytest.importorskip("jax")
    cases = [_case(tmp_path, "add", ADD, [[1024, 256], [1024, 256]]),
             _case(tmp_path, "mlp", MLP, [[64, 256], [256, 256], [256, 64]])]
    add, mlp = measure_cases(cases, repeats=3, shim=shim)
    assert "error" not in add and "error" not in mlp, (add, mlp)
    # Elementwise add: the call allocates its 1 MiB output and a few KiB of bookkeeping.
    assert add["outputs"] == 1 << 20 and add["compiled_temp"] == 0
    for call in add["calls"][3:]:
        assert 1 << 20 <= call["outputs_allocated"] <= (1 << 20) + 8192
        assert call["outputs_allocated"] <= call["peak"] <= call["outputs_allocated"] + 16384
    assert 0 < add["heap_temp"] <= 16384
    # Two dots: XLA's reported temp (the hidden value) is malloc'd on every call, so the heap
    # temp is at least that; the GEMM library's packing buffers come on top.
    assert mlp["outputs"] == 64 * 64 * 4
    assert mlp["compiled_temp"] == 64 * 256 * 4
    assert mlp["heap_temp"] >= mlp["compiled_temp"]


@requires_corpus
def test_big_gemm_cases_take_at_most_xlas_measured_heap(shim: Path) -> None:
    """The corpus cases above XLA's reported temp only by their GEMM workspace (which XLA's
    GEMM library mallocs outside its reported temp) take at most the temp XLA really holds
    during a call, both on two threads."""
    pytest.importorskip("jax")
    names = sorted(GEMM_WORKSPACE_ABOVE_XLA)
    rows = measure_cases([CORPUS / "cases" / n for n in names], repeats=3, threads=2,
                         shim=shim)
    for name, row in zip(names, rows):
        assert "error" not in row, row
        module = parse_module((CORPUS / "cases" / name / "module.hlo").read_text())
        temp = optimize_module(module, "cpu", CompileOptions(backend="cpu", threads=2)
                               ).assignment.stats()["temp_bytes"]
        assert temp <= row["heap_temp"], (name, temp, row["heap_temp"])
