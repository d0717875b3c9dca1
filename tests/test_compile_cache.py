"""The persistent compile cache: keys, hits and misses, damaged entries, concurrent writers."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import xlc
from tests.conftest import CORPUS, ROOT, requires_corpus
from xlc.artifact import cache as compile_cache
from xlc.artifact.cache import CompileCache, cache_key, module_fingerprint
from xlc.hlo.parser import parse_module
from xlc.options import CompileOptions

PROGRAM = """HloModule {name}

ENTRY {entry} {{
  %{a} = f32[16] parameter(0)
  %{b} = f32[16] parameter(1)
  %{c} = f32[16] multiply(%{a}, %{b}), metadata={{op_name="{name}/mul" source_line={line}}}
  ROOT %{d} = f32[16] add(%{c}, %{a})
}}
"""


def program(name: str = "m", names: str = "abcd", line: int = 1, op: str = "add") -> str:
    text = PROGRAM.format(name=name, entry="main", a=names[0], b=names[1], c=names[2],
                          d=names[3], line=line)
    return text.replace(" add(", f" {op}(")


def test_fingerprint_ignores_names_and_metadata():
    a = module_fingerprint(parse_module(program("m", "abcd", 1)))
    b = module_fingerprint(parse_module(program("other", "wxyz", 99)))
    assert a == b
    c = module_fingerprint(parse_module(program(op="subtract")))
    assert c != a


@requires_corpus
def test_fingerprint_of_xla_text_with_calls_stack_frames_and_metadata():
    from xlc.hlo.printer import print_module

    text = (CORPUS / "cases" / "power_iteration" / "optimized.hlo").read_text()
    module = parse_module(text)
    assert module.stack_frames  # XLA's optimized text carries stack-frame tables
    before = print_module(module)
    fp = module_fingerprint(module)
    assert print_module(module) == before  # not modified
    renamed = module.clone()
    renamed.name = "other_name"
    renamed.stack_frames = ""
    for ci, comp in enumerate(renamed.computations):
        comp.name = f"comp_{ci}"
        for ii, inst in enumerate(comp.instructions):
            inst.name = f"v{ci}_{ii}"
    assert module_fingerprint(renamed) == fp
    changed = parse_module(text.replace("direction=LT", "direction=LE", 1))
    assert module_fingerprint(changed) != fp


def test_key_depends_on_options_backend_and_program():
    m = parse_module(program())
    base = CompileOptions()
    k = cache_key(m, "interpreter", base)
    assert k == cache_key(parse_module(program("n", "pqrs")), "interpreter", base)
    assert k != cache_key(m, "interpreter", base.replace(opt_level=1))
    assert k != cache_key(m, "cpu", base)
    assert k != cache_key(parse_module(program(op="subtract")), "interpreter", base)
    # options that do not influence code share entries
    assert k == cache_key(m, "interpreter", base.replace(dump_to="/tmp/x", verify=True))


def test_key_depends_on_xlc_version_and_target(monkeypatch):
    from xlc.artifact.manifest import TargetInfo
    from xlc.backend_cpu import artifact_io, parallel

    m = parse_module(program())
    opts = CompileOptions(threads=0)
    k = cache_key(m, "cpu", opts)
    assert k == cache_key(m, "cpu", opts)  # deterministic
    monkeypatch.setattr(xlc, "__version__", "99.0")
    assert cache_key(m, "cpu", opts) != k
    monkeypatch.undo()
    other = TargetInfo(triple="x86_64-unknown-linux-gnu", cpu_name="oldcpu",
                       cpu_features=["+sse2"])
    interp = cache_key(m, "interpreter", opts)
    monkeypatch.setattr(artifact_io, "host_target", lambda: other)
    assert cache_key(m, "cpu", opts) != k
    assert cache_key(m, "interpreter", opts) == interp  # no native code: no target
    monkeypatch.undo()
    # the thread count of `threads=0` is baked into parallel kernels: part of the target
    cores = parallel.host_threads(0)
    monkeypatch.setattr(parallel, "host_threads", lambda requested=0: requested or cores + 1)
    assert cache_key(m, "cpu", opts) != k


def _stats() -> dict[str, int]:
    return dict(compile_cache.STATS)


def test_miss_then_hit(tmp_path: Path):
    opts = CompileOptions(cache_dir=str(tmp_path))
    x = np.arange(16, dtype=np.float32)
    before = _stats()
    first = xlc.compile(program(), options=opts)
    assert _stats()["misses"] == before["misses"] + 1
    assert len(list(tmp_path.glob("*.xlc"))) == 1
    second = xlc.compile(program("renamed", "pqrs", 7), options=opts)
    assert _stats()["hits"] == before["hits"] + 1
    np.testing.assert_array_equal(first(x, x), second(x, x))
    np.testing.assert_array_equal(second(x, x), x * x + x)
    assert second.memory_stats() == first.memory_stats()
    assert second.as_text() == first.as_text()


def test_cpu_hit_loads_code_without_llvm(tmp_path: Path, monkeypatch):
    from xlc.backend_cpu import jit

    opts = CompileOptions(cache_dir=str(tmp_path), backend="cpu")
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    first = xlc.compile(program(), backend="cpu", options=opts)

    def forbidden(*a: object, **k: object) -> None:
        raise AssertionError("a cache hit must not run LLVM")

    monkeypatch.setattr(jit, "compile_module", forbidden)
    second = xlc.compile(program("again"), backend="cpu", options=opts)
    np.testing.assert_array_equal(first(x, x), second(x, x))


def test_jit_functions_with_other_names_share_an_entry(tmp_path: Path):
    import xlc.numpy as xnp

    def f(a, b):
        return xnp.sin(a) * b

    def g(u, v):
        return xnp.sin(u) * v

    opts = CompileOptions(cache_dir=str(tmp_path))
    x = np.ones(8, np.float32)
    before = _stats()
    r1 = xlc.api.Jitted(f, options=opts)(x, x)
    r2 = xlc.api.Jitted(g, options=opts)(x, x)
    assert _stats()["hits"] == before["hits"] + 1
    np.testing.assert_array_equal(r1, r2)


def test_damaged_entry_is_a_miss_and_is_replaced(tmp_path: Path):
    opts = CompileOptions(cache_dir=str(tmp_path))
    xlc.compile(program(), options=opts)
    (entry,) = tmp_path.glob("*.xlc")
    entry.write_bytes(entry.read_bytes()[:100])
    before = _stats()
    c = xlc.compile(program(), options=opts)
    assert _stats()["errors"] == before["errors"] + 1
    assert _stats()["misses"] == before["misses"] + 1
    x = np.ones(16, np.float32)
    np.testing.assert_array_equal(c(x, x), x * x + x)
    assert CompileCache(tmp_path).get(entry.stem) is not None


def test_a_swapped_entry_is_a_miss_never_another_program(tmp_path: Path, caplog):
    """Entries record their key: an entry moved into another key's file (swapped entries)
    must not run; the hit is refused (logged), the right program compiled and stored."""
    opts = CompileOptions(cache_dir=str(tmp_path), backend="interpreter")
    add = parse_module(program(op="add"))
    sub = parse_module(program(op="subtract"))
    xlc.compile(add, backend="interpreter", options=opts)
    xlc.compile(sub, backend="interpreter", options=opts)
    add_path = CompileCache(tmp_path).path_of(cache_key(add, "interpreter", opts))
    sub_path = CompileCache(tmp_path).path_of(cache_key(sub, "interpreter", opts))
    add_bytes, sub_bytes = add_path.read_bytes(), sub_path.read_bytes()
    add_path.write_bytes(sub_bytes)
    sub_path.write_bytes(add_bytes)
    before = _stats()
    with caplog.at_level("WARNING", logger="xlc.artifact.cache"):
        c = xlc.compile(program(op="add"), backend="interpreter", options=opts)
    x = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(c(x, x), x * x + x)  # the swapped entry gives x * x - x
    assert _stats()["mismatches"] == before["mismatches"] + 1
    assert _stats()["misses"] == before["misses"] + 1
    assert f"compile cache: entry {add_path} records key {sub_path.stem}, not its own" \
        in caplog.text
    assert CompileCache(tmp_path).get(add_path.stem) is not None  # replaced by the right one


def test_ls_info_clear(tmp_path: Path):
    opts = CompileOptions(cache_dir=str(tmp_path))
    xlc.compile(program(), options=opts)
    xlc.compile(program(op="subtract"), options=opts)
    cache = CompileCache(tmp_path)
    entries = cache.entries()
    assert len(entries) == 2 and {e.backend for e in entries} == {"cpu"}  # the default
    assert cache.info()["entries"] == 2
    assert cache.info()["total_bytes"] == sum(e.size for e in entries)
    assert cache.clear() == 2
    assert cache.entries() == []


WRITER = r"""
import json, sys, time
import numpy as np
import xlc
from xlc.artifact import cache as compile_cache
from xlc.options import CompileOptions
start = float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
opts = CompileOptions(cache_dir=sys.argv[1], backend="cpu")
c = xlc.compile(sys.stdin.read(), backend="cpu", options=opts)
x = np.arange(16, dtype=np.float32)
print(json.dumps({"stats": compile_cache.STATS, "out": c(x, x).tolist()}))
"""


@pytest.mark.parametrize("writers", [4])
def test_concurrent_writers_of_one_key(tmp_path: Path, writers: int):
    import time

    env = {k: v for k, v in os.environ.items() if k not in ("XLC_FLAGS", "XLC_CACHE_DIR")}
    start = time.time() + 3.0  # every process starts compiling at the same moment
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(start)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
             for _ in range(writers)]
    results = []
    for p in procs:
        out, err = p.communicate(program(), timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    x = np.arange(16, dtype=np.float32)
    for r in results:
        np.testing.assert_array_equal(np.asarray(r["out"], np.float32), x * x + x)
    assert sum(r["stats"]["errors"] for r in results) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 1 and names[0].endswith(".xlc"), names  # no temp files left behind
    # a later process hits the entry they wrote
    late = subprocess.run([sys.executable, "-c", WRITER, str(tmp_path), "0"], input=program(),
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert late.returncode == 0, late.stderr
    assert json.loads(late.stdout.strip().splitlines()[-1])["stats"]["hits"] == 1


def test_a_cache_hit_serializes_with_its_own_signature(tmp_path: Path):
    import xlc.numpy as xnp

    def f(d):
        return {"y": xnp.cos(d["x"]) + d["b"]}

    opts = CompileOptions(cache_dir=str(tmp_path / "cache"))
    arg = {"x": np.linspace(0, 1, 8, dtype=np.float32), "b": np.ones(8, np.float32)}
    xlc.api.Jitted(f, options=opts).lower(arg).compile()  # miss: stored
    before = _stats()
    hit = xlc.api.Jitted(f, options=opts).lower(arg).compile()
    assert _stats()["hits"] == before["hits"] + 1
    hit.serialize(str(tmp_path / "f.xlc"))
    loaded = xlc.load(str(tmp_path / "f.xlc"))
    np.testing.assert_array_equal(loaded(arg)["y"], np.cos(arg["x"]) + 1)
    assert loaded.manifest.signature.arg_names == ["d"]


RUNTIME_PROBE = r"""
import sys
import numpy as np
import xlc
from xlc.codegen import llvm_utils

calls = []
real = llvm_utils.optimize
def counting(ref, level=3):
    calls.append(level)
    return real(ref, level)
llvm_utils.optimize = counting
text = '''HloModule big_dot_%s
ENTRY e {
  a = f32[300,200] parameter(0)
  b = f32[200,%s] parameter(1)
  ROOT d = f32[300,%s] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}''' % ((sys.argv[1],) * 3)
c = xlc.compile(text, backend="cpu")
a = np.ones((300, 200), np.float32)
b = np.ones((200, int(sys.argv[1])), np.float32)
assert np.allclose(c(a, b), 200.0)
print(len(calls))
"""


def test_runtime_libraries_are_cached_across_processes(tmp_path: Path):
    """With the cache on, the generic GEMM and the thread pool are compiled by the first
    process only (`llvm_utils.optimize` compiles them; programs go through the CPU backend's
    own pipeline); a later one links their cached object code, and `clear` removes them."""
    env = {**os.environ, "XLC_CACHE_DIR": str(tmp_path)}

    def optimizations(n: int) -> int:
        r = subprocess.run([sys.executable, "-c", RUNTIME_PROBE, str(n)], capture_output=True,
                           text=True, env=env, cwd=ROOT, timeout=300)
        assert r.returncode == 0, r.stderr
        return int(r.stdout.strip())

    assert optimizations(500) == 2  # the GEMM library and the pool
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "runtime").iterdir()) == \
        ["gemm_f32", "pool"]
    assert optimizations(700) == 0  # another program: both linked from the cache
    CompileCache(tmp_path).clear()
    assert not list((tmp_path / "runtime").iterdir())
