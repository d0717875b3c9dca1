"""Run-time profiles of CPU executables (docs/profiling.md): the trace-event format, per-kernel
times that add up to the call, costs from the cost analysis, per-thread share events, nested
computations, `.xlc` files, `XLC_FLAGS=--profile=DIR`, and unprofiled code left unchanged."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xlc.nn as xnn
import xlc.numpy as xnp

import xlc
from xlc.api import Jitted
from xlc.backend_cpu import profiler
from xlc.errors import ArgumentError
from xlc.hlo.cost_analysis import instruction_cost
from xlc.options import default_options, parse_flags
from xlc.profiling import Profile

ROOT = Path(__file__).resolve().parents[2]


# ---- a small validator of the Chrome trace-event format ----------------------------------
_PH = {"X", "M", "B", "E", "i", "I", "C"}
_COMMON = {"name": str, "ph": str, "pid": int, "tid": int}


def validate_trace(trace: Any) -> list[str]:
    """Problems of `trace` against the trace-event format (JSON object form): a
    `traceEvents` list of events with name/ph/pid/tid; complete events ("X") with numeric
    non-negative ts and dur and an args object; metadata events ("M") with args.name."""
    problems = []
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return ["not an object with a traceEvents list"]
    if trace.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        problems.append("displayTimeUnit must be ms or ns")
    for k, ev in enumerate(trace["traceEvents"]):
        if not isinstance(ev, dict):
            problems.append(f"event {k} is not an object")
            continue
        for key, ty in _COMMON.items():
            if not isinstance(ev.get(key), ty) or isinstance(ev.get(key), bool):
                problems.append(f"event {k}: {key} must be {ty.__name__}")
        if ev.get("ph") not in _PH:
            problems.append(f"event {k}: unknown ph {ev.get('ph')!r}")
        if ev.get("ph") == "X":
            for key in ("ts", "dur"):
                v = ev.get(key)
                if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
                    problems.append(f"event {k}: {key} must be a number >= 0")
            if not isinstance(ev.get("args", {}), dict) or not isinstance(ev.get("cat"), str):
                problems.append(f"event {k}: args must be an object and cat a string")
        if ev.get("ph") == "M" and not isinstance(ev.get("args", {}).get("name"), str):
            problems.append(f"event {k}: metadata without args.name")
    return problems


def test_the_validator_rejects_malformed_traces() -> None:
    assert validate_trace({"events": []}) == ["not an object with a traceEvents list"]
    bad = {"traceEvents": [{"name": "k", "ph": "Q", "pid": 1, "tid": "t"},
                           {"name": "k", "ph": "X", "pid": 1, "tid": 2, "ts": -1, "dur": 1,
                            "cat": "kernel", "args": {}}]}
    assert validate_trace(bad) == ["event 0: tid must be int", "event 0: unknown ph 'Q'",
                                   "event 1: ts must be a number >= 0"]


# ---- a transformer block ---------------------------------------------------------------------
def block(p: dict, x: Any) -> Any:
    """Pre-norm transformer block (as tools/bench_models.py): LN, 4-head attention, LN,
    GELU MLP."""
    def ln(x: Any, g: Any, b: Any) -> Any:
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / xnp.sqrt(v + 1e-5) * g + b
    bsz, t, d = x.shape
    heads, hd = 4, d // 4
    h = ln(x, p["g1"], p["b1"])
    q, k, v = ((h @ p[w]).reshape(bsz, t, heads, hd).transpose(0, 2, 1, 3)
               for w in ("wq", "wk", "wv"))
    a = xnn.softmax(q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(hd)), axis=-1)
    x = x + (a @ v).transpose(0, 2, 1, 3).reshape(bsz, t, d) @ p["wo"]
    return x + xnn.gelu(ln(x, p["g2"], p["b2"]) @ p["w1"]) @ p["w2"]


def _params(d: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    shapes = dict(wq=(d, d), wk=(d, d), wv=(d, d), wo=(d, d), w1=(d, 4 * d), w2=(4 * d, d))
    p = {k: (rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32)
         for k, s in shapes.items()}
    p.update(g1=np.ones(d, np.float32), b1=np.zeros(d, np.float32),
             g2=np.ones(d, np.float32), b2=np.zeros(d, np.float32))
    return p


@pytest.fixture(scope="module")
def profiled_block() -> tuple[Any, Any, dict, np.ndarray, Profile]:
    """(profiled Compiled, unprofiled Compiled, params, x, the profile of 5 calls)."""
    p = _params(128)
    x = np.random.default_rng(1).standard_normal((2, 64, 128)).astype(np.float32)
    opts = default_options().replace(profile=True)
    compiled = Jitted(block, options=opts).lower(p, x).compile()
    plain = Jitted(block).lower(p, x).compile()
    compiled(p, x)  # warm up (workers started, pages touched)
    profiler.collect()
    for _ in range(5):
        compiled(p, x)
    return compiled, plain, p, x, profiler.collect()


def test_profiled_block_computes_what_the_unprofiled_one_does(profiled_block: Any) -> None:
    compiled, plain, p, x, _ = profiled_block
    np.testing.assert_array_equal(compiled(p, x), plain(p, x))
    assert "xlc_prof" in compiled.executable().optimized_ir
    assert "xlc_prof" not in plain.executable().optimized_ir


def test_block_trace_is_valid_trace_event_json(profiled_block: Any, tmp_path: Path) -> None:
    *_, profile = profiled_block
    path = tmp_path / "block.trace.json"
    profile.write_chrome_trace(path)
    trace = json.loads(path.read_text())
    assert validate_trace(trace) == []
    cats = {ev.get("cat") for ev in trace["traceEvents"] if ev["ph"] == "X"}
    assert {"call", "kernel"} <= cats
    names = {ev["args"]["name"] for ev in trace["traceEvents"]
             if ev["ph"] == "M" and ev["name"] == "thread_name"}
    assert "MainThread" in names


def test_block_kernel_times_add_up_to_the_call(profiled_block: Any) -> None:
    """Issue 19's criterion: the top-level kernels' times (calling thread) add up to the
    call's own span, recorded by the same clock, within 10 %. Every call's kernels lie inside
    it without overlapping; the 10 % is asserted for the best of the 5 calls, since on a
    loaded machine the scheduler may park the thread between two kernels of any one call
    (`tools/bench_profile.py` measures the coverage over many calls)."""
    *_, profile = profiled_block
    calls = profile.calls()
    assert len(calls) == 5
    coverage = []
    for call in calls:
        kernels = profile.kernels_in(call)
        covered = sum(k.t1 - k.t0 for k in kernels)
        assert len(kernels) >= 10
        assert covered <= call.t1 - call.t0
        spans = sorted((k.t0, k.t1) for k in kernels)  # sequential: no overlap
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        assert call.t0 <= spans[0][0] and spans[-1][1] <= call.t1
        coverage.append(covered / (call.t1 - call.t0))
    assert max(coverage) >= 0.9, coverage


def test_block_event_costs_are_the_cost_analysis(profiled_block: Any) -> None:
    compiled, *_, profile = profiled_block
    module = compiled.optimized().module
    by_name = {i.name: i for c in module.computations for i in c.instructions}
    for stat in profile.kernel_stats():
        insts = [by_name[n] for n in stat.info["instructions"]]
        assert stat.info["name"] == insts[0].name
        assert stat.info["opcode"] == insts[0].opcode.text
        assert stat.info["flops"] == sum(instruction_cost(i).flops for i in insts)
        assert stat.info["bytes"] == sum(instruction_cost(i).bytes_accessed for i in insts)
    call = profile.calls()[0]
    assert call.info["flops"] == compiled.cost_analysis()["flops"]
    top = [s for s in profile.kernel_stats() if s.info["top"]]
    assert sum(s.info["flops"] for s in top) == call.info["flops"]


def test_split_kernels_record_one_event_per_share_inside_the_kernel() -> None:
    opts = default_options().replace(profile=True, threads=2)
    x = np.linspace(-3, 3, 1 << 17, dtype=np.float32)
    compiled = Jitted(lambda x: xnp.tanh(x) * 2.0, options=opts).lower(x).compile()
    profiler.collect()
    np.testing.assert_allclose(compiled(x), np.tanh(x) * 2.0, rtol=2e-6, atol=1e-6)
    profile = profiler.collect()
    kernels = [e for e in profile.events if e.kind == "kernel"]
    shares = [e for e in profile.events if e.kind == "share"]
    assert len(kernels) == 1 and len(shares) == 8  # 4 shares per thread, 2 threads
    assert sorted(s.share for s in shares) == list(range(8))
    k = kernels[0]
    assert all(k.t0 <= s.t0 and s.t1 <= k.t1 and s.info is k.info for s in shares)


def test_loop_bodies_are_nested_events_inside_the_while() -> None:
    from xlc import lax

    opts = default_options().replace(profile=True)

    def f(x: Any) -> Any:
        return lax.fori_loop(0, 3, lambda i, v: xnp.sin(v) + 1.0, x)

    x = np.arange(64, dtype=np.float32)
    compiled = Jitted(f, options=opts).lower(x).compile()
    profiler.collect()
    expected = x
    for _ in range(3):
        expected = np.sin(expected) + np.float32(1.0)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-5)
    profile = profiler.collect()
    loops = [e for e in profile.events if e.kind == "kernel" and e.info["opcode"] == "while"]
    nested = [e for e in profile.events if e.kind == "kernel" and not e.info["top"]]
    assert len(loops) == 1 and loops[0].info["top"]
    assert len(nested) >= 3
    assert all(loops[0].t0 <= e.t0 and e.t1 <= loops[0].t1 for e in nested)


def test_profiled_xlc_file_records_with_its_own_table(tmp_path: Path) -> None:
    opts = default_options().replace(profile=True)
    x = np.ones((4, 8), np.float32)
    compiled = Jitted(lambda x: xnp.exp(x).sum(axis=0), options=opts).lower(x).compile()
    compiled.serialize(str(tmp_path / "p.xlc"))
    loaded = xlc.load(tmp_path / "p.xlc")
    profiler.collect()
    np.testing.assert_allclose(loaded(x), np.exp(x).sum(axis=0), rtol=1e-6)
    profile = profiler.collect()
    assert [c.program for c in profile.calls()] == [compiled.optimized().module.name]
    assert {e.info["opcode"] for e in profile.events if e.kind == "kernel"} == {"fusion"}


def test_profile_option_is_in_the_cache_key_and_flags() -> None:
    base = default_options()
    assert base.replace(profile=True).cache_key() != base.cache_key()
    assert base.replace(profile=True, profile_dir="/a").cache_key() == \
        base.replace(profile=True, profile_dir="/b").cache_key()
    assert base.replace(explain_cache_misses=True).cache_key() == base.cache_key()
    assert parse_flags("--profile=/tmp/p --explain-cache-misses") == {
        "profile_dir": "/tmp/p", "profile": True, "explain_cache_misses": True}
    with pytest.raises(ArgumentError, match=r"^XLC_FLAGS: --profile needs a directory: "
                                            r"--profile=DIR$"):
        parse_flags("--profile")


def test_xlc_flags_profile_writes_one_trace_per_process_at_exit(tmp_path: Path) -> None:
    script = ("import numpy as np, xlc, xlc.numpy as xnp\n"
              "f = xlc.jit(lambda x: xnp.cos(x) + 1.0)\n"
              "for _ in range(3): f(np.ones(16, np.float32))\n"
              "import os; print(os.getpid())\n")
    env = {**os.environ, "XLC_FLAGS": f"--profile={tmp_path / 'prof'}",
           "PYTHONPATH": str(ROOT)}
    env.pop("XLC_CACHE_DIR", None)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    pid = int(out.stdout.split()[-1])
    trace = json.loads((tmp_path / "prof" / f"xlc-{pid}.trace.json").read_text())
    assert validate_trace(trace) == []
    calls = [ev for ev in trace["traceEvents"] if ev.get("cat") == "call"]
    assert [ev["name"] for ev in calls] == ["call jit_lambda"] * 3
