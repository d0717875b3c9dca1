"""spmd-annotations (sharding custom-calls are the identity on one device) and
batched-indexing (gathers/scatters with batching dims become plain ones): the rewritten
modules verify, give the evaluator's values of the original, and run on the CPU backend."""
from __future__ import annotations

import numpy as np
import pytest

from tests.passes.filecheck import filecheck, printed, run_passes
from xlc.backend_cpu import compile_cpu
from xlc.errors import UnsupportedOpError
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.parser import parse_module
from xlc.hlo.printer import print_module
from xlc.passes.batched_indexing import BatchedIndexing
from xlc.passes.spmd import SpmdAnnotations

SHARDED = """HloModule s
ENTRY e {
  x = f32[4,6] parameter(0)
  two = f32[] constant(2)
  b = f32[4,6] broadcast(two), dimensions={}
  m = f32[4,6] multiply(x, b)
  c = f32[4,6] custom-call(m), custom_call_target="Sharding", sharding={devices=[2,1]0,1}
  s = f32[4,6] custom-call(c), custom_call_target="SPMDFullToShardShape", sharding={manual}
  t = f32[4,6] negate(s)
  f = f32[4,6] custom-call(t), custom_call_target="SPMDShardToFullShape", sharding={replicated}
  ROOT r = f32[4,6]{0,1} custom-call(f), custom_call_target="Sharding", sharding={replicated}
}
"""

GATHER = """HloModule g
ENTRY e {
  x = f32[3,5] parameter(0)
  i = s32[3,2] parameter(1)
  ROOT g = f32[3,2] gather(x, i), offset_dims={}, collapsed_slice_dims={1},
    start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0},
    index_vector_dim=2, slice_sizes={1,1}
}
"""

SCATTER = """HloModule s
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
ENTRY e {
  x = f32[2,3,5] parameter(0)
  i = s32[2,4,1] parameter(1)
  u = f32[2,4,3] parameter(2)
  ROOT s = f32[2,3,5] scatter(x, i, u), update_window_dims={2}, inserted_window_dims={2},
    scatter_dims_to_operand_dims={2}, input_batching_dims={0},
    scatter_indices_batching_dims={0}, index_vector_dim=2, to_apply=add
}
"""


def _same_as_original(text: str, args: list[np.ndarray], passes: list) -> None:
    want = flatten_result(evaluate(parse_module(text), args))
    _before, after, changed = run_passes(text, passes)
    assert changed
    got = flatten_result(evaluate(after, args))
    cpu = compile_cpu(parse_module(text)).run(args)
    for g, c, w in zip(got, cpu, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
        np.testing.assert_array_equal(c, np.asarray(w))


def test_sharding_annotations_become_the_identity() -> None:
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    _same_as_original(SHARDED, [x], [SpmdAnnotations()])
    _before, after, _ = run_passes(SHARDED, [SpmdAnnotations()])
    text = printed(after)
    assert "custom-call" not in text
    filecheck(text, """
        CHECK: multiply
        CHECK: negate
        CHECK: ROOT {{.*}} = f32[4,6]{0,1} copy(
    """)


def test_printed_hlo_keeps_the_sharding_attribute() -> None:
    text = print_module(parse_module(SHARDED))
    assert 'custom_call_target="Sharding", sharding={devices=[2,1]0,1}' in text
    assert "sharding={manual}" in text


def test_a_shard_shape_is_refused_by_name() -> None:
    bad = SHARDED.replace('s = f32[4,6] custom-call(c), custom_call_target="SPMDFullToShard',
                          's = f32[2,6] custom-call(c), custom_call_target="SPMDFullToShard')
    bad = bad.replace("t = f32[4,6] negate(s)", "t = f32[2,6] negate(s)").replace(
        'f = f32[4,6] custom-call(t)', 'f = f32[4,6] custom-call(t)')
    with pytest.raises(UnsupportedOpError, match=r"custom-call 's' \(SPMDFullToShardShape\) "
                                                 r"changes f32\[4,6\]\{1,0\} to f32\[2,6\]"):
        compile_cpu(parse_module(bad))


def test_batched_gather_becomes_a_plain_gather() -> None:
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    i = np.array([[1, 4], [0, 0], [3, 2]], np.int32)
    _same_as_original(GATHER, [x, i], [BatchedIndexing()])
    _before, after, _ = run_passes(GATHER, [BatchedIndexing()])
    filecheck(printed(after), """
        CHECK: iota(), iota_dimension=0
        CHECK: s32[3,2,2]{{.*}} concatenate({{.*}}), dimensions={2}
        CHECK: collapsed_slice_dims={0,1}, start_index_map={1,0}, {{.*}}slice_sizes={1,1}
    """)
    assert "batching_dims" not in printed(after) and "index_vector_dim=2" in printed(after)


def test_batched_scatter_becomes_a_plain_scatter() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    i = rng.integers(0, 5, (2, 4, 1)).astype(np.int32)  # repeats: the adds accumulate
    u = rng.standard_normal((2, 4, 3)).astype(np.float32)
    want = flatten_result(evaluate(parse_module(SCATTER), [x, i, u]))
    _before, after, changed = run_passes(SCATTER, [BatchedIndexing()])
    assert changed and "batching_dims" not in printed(after)
    got = flatten_result(evaluate(after, [x, i, u]))
    cpu = compile_cpu(parse_module(SCATTER)).run([x, i, u])
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), rtol=1e-6)
    np.testing.assert_allclose(cpu[0], np.asarray(want[0]), rtol=1e-6)


def test_jax_vmapped_gather_and_scatter_run_on_the_cpu() -> None:
    jax = pytest.importorskip("jax")
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    i = np.array([[1, 4], [0, 0], [3, 2]], np.int32)
    for fn in (lambda x, i: x[i], lambda x, i: x.at[i].add(1.0)):
        f = jax.jit(jax.vmap(fn))
        text = f.lower(x, i).compiler_ir("hlo").as_hlo_text()
        got = compile_cpu(parse_module(text)).run([x, i])
        np.testing.assert_array_equal(got[0], np.asarray(f(x, i)))
