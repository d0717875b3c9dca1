"""Compile-time mechanisms of the CPU backend: identical kernels compiled once, the garbage
collector paused during compiles, stage log lines and the CLI's progress bar."""
from __future__ import annotations

import gc
import io
import logging
import re

import numpy as np
import pytest

from tests.backend_cpu.helpers import check, rand
from xlc.backend_cpu import compile_cpu
from xlc.backend_cpu import compiler as cpu_compiler
from xlc.compile_stages import gc_paused, progress_bar
from xlc.hlo.parser import parse_module


def _layer(i: int, x: str, last: bool) -> str:
    root = "ROOT " if last else ""
    dims = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    return f"""  h{i} = f32[64,256] dot({x}, w{i}), {dims}
  m{i} = f32[64] reduce(h{i}, ninf), dimensions={{1}}, to_apply=max
  mb{i} = f32[64,256] broadcast(m{i}), dimensions={{0}}
  c{i} = f32[64,256] subtract(h{i}, mb{i})
  e{i} = f32[64,256] exponential(c{i})
  s{i} = f32[64] reduce(e{i}, zero), dimensions={{1}}, to_apply=add
  sb{i} = f32[64,256] broadcast(s{i}), dimensions={{0}}
  d{i} = f32[64,256] divide(e{i}, sb{i})
  {root}y{i} = f32[64,256] tanh(d{i})
"""


def stacked(n: int) -> str:
    """HLO text of `n` identical layers (a row softmax, then tanh), each with its weights."""
    params = "".join(f"  w{i} = f32[256,256] parameter({i + 1})\n" for i in range(n))
    layers = "".join(_layer(i, "x" if i == 0 else f"y{i - 1}", i == n - 1) for i in range(n))
    return f"""HloModule stacked
add {{ a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }}
max {{ a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] maximum(a, b) }}
ENTRY e {{
  x = f32[64,256] parameter(0)
{params}  ninf = f32[] constant(-inf)
  zero = f32[] constant(0)
{layers}}}
"""


STACKED = stacked(3)


def _defined_functions(ir_text: str) -> list[str]:
    return re.findall(r'^define [^@]*@"?([^"(]+)"?\(', ir_text, re.M)


def test_identical_kernels_compile_once() -> None:
    args = [rand(64, 256)] + [rand(256, 256, seed=s) / 16 for s in range(3)]
    check(STACKED, *args, rtol=1e-4)
    exe = compile_cpu(parse_module(STACKED))
    kernels = [f for f in _defined_functions(exe.llvm_ir) if ".k." in f]
    one = [f for f in _defined_functions(compile_cpu(parse_module(stacked(1))).llvm_ir)
           if ".k." in f]
    # every layer's kernels equal the first layer's up to their names: one copy each survives
    assert one and len(kernels) == len(one), (kernels, one)


def test_dedupe_keeps_distinct_kernels_apart() -> None:
    # same structure, different constants: two kernels, both right
    text = """HloModule two
ENTRY e {
  x = f32[1024] parameter(0)
  one = f32[] constant(1)
  two = f32[] constant(2)
  ob = f32[1024] broadcast(one), dimensions={}
  a = f32[1024] add(x, ob)
  b = f32[1024] multiply(a, a)
  tb = f32[1024] broadcast(two), dimensions={}
  c = f32[1024] add(b, tb)
  ROOT d = f32[1024] multiply(c, b)
}
"""
    check(text, rand(1024))


def test_gc_is_paused_while_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    real = cpu_compiler.optimize_cpu

    def spy(ref: object, level: int) -> None:
        seen.append(gc.isenabled())
        real(ref, level)  # type: ignore[arg-type]

    monkeypatch.setattr(cpu_compiler, "optimize_cpu", spy)
    assert gc.isenabled()
    compile_cpu(parse_module(STACKED))
    assert seen == [False]
    assert gc.isenabled()


def test_gc_paused_nests_and_restores() -> None:
    assert gc.isenabled()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with gc_paused():
            raise RuntimeError("boom")
    assert gc.isenabled()


def test_stage_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="xlc.compile"):
        compile_cpu(parse_module(STACKED))
    lines = [r.getMessage() for r in caplog.records if r.name == "xlc.compile"]
    done = [m for m in lines if " done in " in m]
    assert [m.split()[2:4] for m in done] == [
        ["1/4", "hlo-passes"], ["2/4", "emit"], ["3/4", "llvm-optimize"],
        ["4/4", "llvm-codegen"]], lines
    assert all(m.startswith("stacked [cpu] ") for m in lines), lines


def test_progress_bar_only_for_slow_compiles() -> None:
    quick = io.StringIO()
    with progress_bar(quick, after_s=30.0):
        compile_cpu(parse_module(STACKED))
    assert quick.getvalue() == ""
    slow = io.StringIO()
    with progress_bar(slow, after_s=0.0):
        exe = compile_cpu(parse_module(STACKED))
    out = slow.getvalue()
    assert "compiling [" in out and "/4 " in out and out.endswith("\n"), out
    x = [rand(64, 256)] + [rand(256, 256, seed=s) / 16 for s in range(3)]
    assert np.isfinite(exe.run(x)[0]).all()
    # the logger is left as it was
    assert not logging.getLogger("xlc.compile").handlers


def test_cli_compile_shows_progress(tmp_path: object, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture) -> None:
    import functools
    from pathlib import Path

    from xlc import compile_stages
    from xlc.cli import commands as cli_commands
    from xlc.cli import main as cli_main

    src = Path(str(tmp_path)) / "m.hlo"
    src.write_text(STACKED)
    out = Path(str(tmp_path)) / "m.xlc"
    # a compile "over 2 s": the bar's delay set to 0
    monkeypatch.setattr(cli_commands, "progress_bar",
                        functools.partial(compile_stages.progress_bar, after_s=0.0))
    assert cli_main(["compile", str(src), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "compiling [" in err and "4/4 llvm-codegen" in err, err
    assert out.exists()


def test_api_compile_clones_the_module_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import xlc
    from xlc.hlo.ir import HloModule

    calls: list[str] = []
    real = HloModule.clone

    def counting(self: HloModule, name: str | None = None) -> HloModule:
        calls.append(self.name)
        return real(self, name)

    monkeypatch.setattr(HloModule, "clone", counting)
    module = parse_module(STACKED)
    before = module.to_text()
    compiled = xlc.compile(module, backend="cpu")
    assert calls == ["stacked"]  # the API's private copy, compiled in place by the backend
    assert module.to_text() == before  # the caller's module is untouched
    x = [rand(64, 256)] + [rand(256, 256, seed=s) / 16 for s in range(3)]
    np.testing.assert_allclose(np.asarray(compiled(*x)),
                               np.asarray(compile_cpu(parse_module(STACKED)).run(x)[0]),
                               rtol=1e-6)
