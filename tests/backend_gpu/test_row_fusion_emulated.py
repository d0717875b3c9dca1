"""Row fusions on the GPU (issue 13): softmax, log-softmax, layer norm and RMS norm compile to
ONE kernel (block per row, every reduce folded once per row) and match the evaluator in the
host emulator; the PTX assembles with ptxas without spills."""
from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import xlc.nn
import xlc.numpy as xnp
from hypothesis import given, settings

import xlc
from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.helpers import compile_text, requires_ptxas
from tests.hlo_programs import (
    Program,
    _binary,
    _broadcast,
    _reduce,
    _row_softmax,
    _transpose,
    _unary,
    hlo_programs,
)
from xlc.backend_gpu import nvptx
from xlc.backend_gpu.emit_row_fusion import WARP_ROW_MAX
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.parser import parse_module
from xlc.hlo.printer import print_module


def _layer_norm(x: Any) -> Any:
    m = xnp.mean(x, axis=-1, keepdims=True)
    v = xnp.mean((x - m) ** 2, axis=-1, keepdims=True)
    return (x - m) / xnp.sqrt(v + 1e-5)


def _rms_norm(x: Any) -> Any:
    return x / xnp.sqrt(xnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)


def _softmax_and_max(x: Any) -> Any:
    return xlc.nn.softmax(x, axis=-1), xlc.nn.log_softmax(x, axis=-1)


PROGRAMS: dict[str, Callable[[Any], Any]] = {
    "softmax": lambda x: xlc.nn.softmax(x, axis=-1),
    "log_softmax": lambda x: xlc.nn.log_softmax(x, axis=-1),
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
}

# a warp per row (short rows with idle lanes, a warp's worth, several elements per lane, rows
# not a multiple of the 8 per block, 3-D) and a block per row (long rows, strided)
SHAPES = [(3, 7), (4, 32), (6, 300), (37, 100), (2, 3, 257), (2, 5000), (1, 2048)]


def _text(fn: Callable[[Any], Any], x: np.ndarray) -> str:
    return print_module(xlc.jit(fn).lower(x).module)


@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_row_programs_are_one_kernel_and_match_the_evaluator(name: str,
                                                             shape: tuple[int, ...]) -> None:
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32) * 3
    text = _text(PROGRAMS[name], x)
    exe = compile_text(text)
    assert len(exe.kernel_names) == 1, exe.kernel_names
    # a warp per row needs no barrier; a block per row combines its warps in shared memory
    assert ("bar.sync" in exe.ptx) == (shape[-1] > WARP_ROW_MAX)
    (got,) = Emulator(exe).run([x])
    (want,) = flatten_result(evaluate(parse_module(text), [x]))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "both"])
def test_nan_and_infinite_rows(name: str) -> None:
    """Rows with NaN, -inf and +inf: the max and the sums propagate as the evaluator's do. (Both
    outputs of one program share their reduces, which row fusion does not merge: the pass
    fuses a reduce only into a fusion that is its one user; then several kernels.)"""
    x = np.random.default_rng(1).standard_normal((5, 70)).astype(np.float32)
    x[1, 3] = np.nan
    x[2, :] = -np.inf
    x[3, 10] = np.inf
    text = _text(_softmax_and_max if name == "both" else PROGRAMS[name], x)
    exe = compile_text(text)
    if name != "both":
        assert len(exe.kernel_names) == 1
    got = Emulator(exe).run([x])
    want = flatten_result(evaluate(parse_module(text), [x]))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6, equal_nan=True)


@requires_ptxas
def test_row_fusion_kernels_assemble_without_spills() -> None:
    x = np.zeros((64, 4096), np.float32)
    for name, fn in PROGRAMS.items():
        ptx = compile_text(_text(fn, x)).ptx
        path = nvptx.ptxas_path()
        assert path is not None
        proc = subprocess.run([path, "-arch=sm_80", "-v", "-", "-o", "/dev/null"], input=ptx,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", proc.stderr)]
        assert spills and max(spills) == 0, (name, proc.stderr)


@pytest.mark.parametrize("shape", [(37, 50), (9, 1), (3, 1024), (2, 1500)])
def test_row_reductions_with_a_side_output(shape: tuple[int, ...]) -> None:
    """A row reduction with an elementwise output of the same fusion (kInput, multi-output):
    a warp per row (37 rows: the last block's group has idle warps, which must write nothing)
    or a block per row."""
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    text = _text(lambda x: (xnp.sum(x * x, axis=-1), xnp.exp(x)), x)
    exe = compile_text(text)
    got = Emulator(exe).run([x])
    want = flatten_result(evaluate(parse_module(text), [x]))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)


@settings(max_examples=25, deadline=None)
@given(hlo_programs(dtypes=("f32", "f64"), max_steps=5,
                    steps=(_row_softmax, _row_softmax, _unary, _binary, _broadcast, _transpose,
                           _reduce)))
def test_random_row_programs_on_the_gpu_path(prog: Program) -> None:
    """Random programs with row softmaxes among other steps (the row fusion pass fuses them,
    with whatever producers and consumers the program has), run in the emulator."""
    got = Emulator(compile_text(prog.text)).run(list(prog.args))
    want = flatten_result(evaluate(parse_module(prog.text), list(prog.args)))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=prog.tolerance, atol=prog.tolerance,
                                   equal_nan=True)
