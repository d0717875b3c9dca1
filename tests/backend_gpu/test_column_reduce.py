"""Column reductions on the GPU (issue 13): blocks of 32 x 8 threads, 8 threads per column
combining their partials through shared memory. Checked in the host emulator against the
evaluator: ragged tiles, fewer reduced elements than lanes, a non-identity init (applied
once), variadic (argmax-like) and predicate reductions, several kept dims."""
from __future__ import annotations

import numpy as np
import pytest

from tests.backend_gpu.emulator import Emulator
from tests.backend_gpu.helpers import compile_text
from xlc.backend_gpu.thunks import KernelThunk
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.parser import parse_module

SUM = """
HloModule m
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}
ENTRY e {{
  x = f32[{r},{c}] parameter(0)
  init = f32[] constant({init})
  ROOT s = f32[{c}] reduce(x, init), dimensions={{0}}, to_apply=add
}}"""

ARGMAX = """
HloModule m
pick {
  a = f32[] parameter(0)
  i = s32[] parameter(1)
  b = f32[] parameter(2)
  j = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(i, j), direction=LT
  tie = pred[] and(eq, lt)
  keep = pred[] or(gt, tie)
  v = f32[] select(keep, a, b)
  k = s32[] select(keep, i, j)
  ROOT t = (f32[], s32[]) tuple(v, k)
}
ENTRY e {
  x = f32[3,37,5] parameter(0)
  idx = s32[3,37,5] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[3,5], s32[3,5]) reduce(x, idx, ninf, zero), dimensions={1}, to_apply=pick
}"""

ALL = """
HloModule m
and {
  a = pred[] parameter(0)
  b = pred[] parameter(1)
  ROOT s = pred[] and(a, b)
}
ENTRY e {
  x = f32[20,45] parameter(0)
  z = f32[] constant(-1.5)
  zb = f32[20,45] broadcast(z), dimensions={}
  p = pred[20,45] compare(x, zb), direction=GT
  t = pred[] constant(true)
  ROOT r = pred[45] reduce(p, t), dimensions={0}, to_apply=and
}"""


def _run(text: str, seed: int = 0) -> list[KernelThunk]:
    exe = compile_text(text)
    mod = parse_module(text)
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(p.shape.dims).astype(np.float32)
            for p in mod.entry.parameters]
    got = Emulator(exe).run([a.copy() for a in args])
    want = flatten_result(evaluate(parse_module(text), args))
    for g, w in zip(got, want):
        if np.asarray(w).dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(g, w)
    return [t for t in exe.all_thunks() if isinstance(t, KernelThunk)]


@pytest.mark.parametrize("r,c,init", [(50, 70, 0), (3, 33, 2.5), (2, 5, 0), (129, 32, -1)])
def test_column_sum(r: int, c: int, init: float) -> None:
    (k,) = _run(SUM.format(r=r, c=c, init=init))
    assert k.block == (32, 8, 1) and k.grid == (-(-c // 32), 1, 1)


def test_variadic_column_reduction_over_a_middle_dim() -> None:
    _run(ARGMAX, seed=1)


def test_predicate_column_reduction() -> None:
    _run(ALL, seed=2)
