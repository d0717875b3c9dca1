"""sort-workspace: radix and merge sorts take their scratch from the buffer assignment (the
last output of a `__xlc$sort` custom-call), never from malloc."""
from __future__ import annotations

import numpy as np
import pytest
import xlc.lax
import xlc.numpy as xnp

import xlc
from tests.passes.filecheck import assert_same_numerics, filecheck, printed, run_passes
from xlc.backend_cpu import compile_cpu
from xlc.backend_cpu.sort_workspace import SortWorkspace, sort_workspace_bytes
from xlc.hlo.parser import parse_module
from xlc.hlo.sort_call import SORT_TARGET, sort_call_sort

SORT = """HloModule s
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT l = pred[] compare(a, b), direction=LT, type=TOTALORDER
}
ENTRY e {
  x = f32[16,1000] parameter(0)
  i = s32[16,1000] iota(), iota_dimension=1
  ROOT s = (f32[16,1000], s32[16,1000]) sort(x, i), dimensions={1}, is_stable=true, to_apply=lt
}
"""

SHORT = SORT.replace("1000", "40")


def test_a_long_sort_becomes_a_custom_call_with_its_workspace() -> None:
    before, after, changed = run_passes(SORT, [SortWorkspace(2)])
    assert changed
    size = sort_workspace_bytes(parse_module(SORT).entry.root, 2)
    assert size > 0
    filecheck(printed(after), f"""
        CHECK: %s.sort = (f32[16,1000]{{1,0}}, s32[16,1000]{{1,0}}, u8[{size}]{{0}}) custom-call
        CHECK-NEXT: %s.0 = f32[16,1000]{{1,0}} get-tuple-element(%s.sort), index=0
        CHECK-NEXT: %s.1 = s32[16,1000]{{1,0}} get-tuple-element(%s.sort), index=1
        CHECK-NEXT: ROOT %s = (f32[16,1000]{{1,0}}, s32[16,1000]{{1,0}}) tuple(%s.0, %s.1)
    """)
    call = after.entry.root.operands[0].operands[0]
    assert call.attrs["custom_call_target"] == SORT_TARGET
    sort = sort_call_sort(call)
    assert dict(sort.attrs) == {"dimensions": (1,), "is_stable": True}
    assert_same_numerics(before, after)  # the evaluator runs the call as the sort
    assert printed(parse_module(printed(after))) == printed(after)
    _, short, changed = run_passes(SHORT, [SortWorkspace(2)])
    assert not changed and "custom-call" not in printed(short)


@pytest.mark.parametrize("shape,axis", [((100000,), 0), ((64, 4096), -1), ((300, 50), 0),
                                        ((7, 1000), 1)])
def test_sorts_match_numpy_and_allocate_nothing(shape: tuple[int, ...], axis: int) -> None:
    rng = np.random.default_rng(len(shape) + shape[0])
    x = rng.standard_normal(shape).astype(np.float32)
    x.flat[::97] = 0.0
    x.flat[::101] = -0.0
    f = xlc.jit(lambda x: xnp.sort(x, axis=axis))
    g = xlc.jit(lambda x: xnp.argsort(x, axis=axis))
    want = np.sort(x, axis=axis, kind="stable")  # stable: -0 and 0 keep their order
    np.testing.assert_array_equal(f(x).view(np.uint32), want.view(np.uint32))
    np.testing.assert_array_equal(g(x), np.argsort(x, axis=axis, kind="stable"))
    compiled = f.lower(x).compile()
    assert "__xlc$sort" in compiled.as_text()
    assert compiled.memory_stats()["temp_bytes"] > 0


def test_merge_sort_of_several_operands_and_no_malloc_in_the_code() -> None:
    rng = np.random.default_rng(5)
    k = rng.integers(0, 10, 5000).astype(np.int32)
    v = rng.standard_normal(5000).astype(np.float32)
    h = xlc.jit(lambda k, v: xlc.lax.sort((k, v), num_keys=1))
    a, b = h(k, v)
    order = np.argsort(k, kind="stable")
    np.testing.assert_array_equal(a, k[order])
    np.testing.assert_array_equal(b, v[order])
    exe = compile_cpu(parse_module(SORT))
    assert "@malloc" not in exe.llvm_ir and "@free" not in exe.llvm_ir
    x = rng.standard_normal((16, 1000)).astype(np.float32)
    vals, idx = exe.run([x])
    np.testing.assert_array_equal(vals, np.sort(x, axis=1))
    np.testing.assert_array_equal(idx, np.argsort(x, axis=1, kind="stable"))


def test_a_short_workspace_is_refused() -> None:
    """A hand-written `__xlc$sort` whose workspace is too small: a LoweringError naming it."""
    text = SORT.replace(
        "ROOT s = (f32[16,1000], s32[16,1000]) sort(x, i), dimensions={1}, is_stable=true, "
        "to_apply=lt",
        'ROOT s = (f32[16,1000], s32[16,1000], u8[64]) custom-call(x, i), '
        'custom_call_target="__xlc$sort", called_computations={lt}, '
        'backend_config="dimensions={1};is_stable=true"')
    assert "__xlc$sort" in text
    with pytest.raises(xlc.LoweringError, match="the workspace of sort s holds 64 bytes, its "
                       "(radix|merge) sort needs"):
        xlc.compile(text, backend="cpu")


def _with_workspace(nbytes: int) -> str:
    """SORT as a hand-written `__xlc$sort` whose workspace holds `nbytes`."""
    return SORT.replace(
        "ROOT s = (f32[16,1000], s32[16,1000]) sort(x, i), dimensions={1}, is_stable=true, "
        "to_apply=lt",
        f's = (f32[16,1000], s32[16,1000], u8[{nbytes}]) custom-call(x, i), '
        'custom_call_target="__xlc$sort", called_computations={lt}, '
        'backend_config="dimensions={1};is_stable=true"\n'
        '  v = f32[16,1000] get-tuple-element(s), index=0\n'
        '  k = s32[16,1000] get-tuple-element(s), index=1\n'
        '  ROOT r = (f32[16,1000], s32[16,1000]) tuple(v, k)')


def test_shrunk_sort_workspaces_sort_one_line_at_a_time_or_merge() -> None:
    """A workspace of one radix line runs the radix sort on one thread; less than that, the
    merge sort: both give numpy's stable order (the pass picks these sizes under a limit)."""
    from xlc.backend_cpu.sort_workspace import SortWorkspaceShrink, _scratch_forms

    sort = parse_module(SORT).entry.root
    merge, per_line, slots = _scratch_forms(sort, 2)
    assert per_line > 0 and merge > 0 and slots >= 1
    assert merge < per_line  # so a workspace of `merge` bytes runs the merge sort
    shrink = SortWorkspaceShrink(2)
    for held, want in ((4 * per_line, (per_line, "radix sort, one line at a time")),
                       (per_line, (merge, "merge sort")), (merge, None)):
        call = parse_module(_with_workspace(held)).entry.instruction("s")
        assert shrink.smaller(call, 0) == want  # one form down per round
    x = np.random.default_rng(3).standard_normal((16, 1000)).astype(np.float32)
    x[:, ::7] = x[:, :1]  # ties: the order among them is the stable one
    for nbytes in (per_line, merge):
        exe = xlc.compile(_with_workspace(nbytes), backend="cpu")
        vals, idx = exe(x)
        np.testing.assert_array_equal(vals, np.sort(x, axis=1))
        np.testing.assert_array_equal(idx, np.argsort(x, axis=1, kind="stable"))


@pytest.mark.parametrize("tight", [False, True], ids=["radix-line", "merge"])
def test_a_sort_fits_under_a_memory_limit_by_its_workspace(tight: bool) -> None:
    """Under a memory limit below the threaded radix sort's peak the sort's workspace shrinks
    (sort-workspace-shrink) only as far as needed: to one radix line, or, when even that does
    not fit, to the merge sort's scratch; the program fits and sorts like numpy."""
    from xlc.backend_cpu.parallel import host_threads
    from xlc.backend_cpu.sort_workspace import _scratch_forms

    if host_threads(0) < 2:
        pytest.skip("one thread: the radix sort already keeps one line of scratch")
    x = np.random.default_rng(4).standard_normal((64, 4096)).astype(np.float32)
    free = xlc.jit(lambda x: xnp.sort(x, axis=1)).lower(x).compile()
    stats = free.memory_stats()
    fixed = stats["peak_bytes"] - stats["temp_bytes"]
    call = next(i for i in free.executable().optimized.module.entry.instructions
                if i.attrs.get("custom_call_target") == SORT_TARGET)
    merge, per_line, slots = _scratch_forms(sort_call_sort(call), host_threads(0))
    assert slots > 1 and merge < per_line
    limit = fixed + ((merge + per_line) // 2 if tight else 2 * per_line)
    c = xlc.jit(lambda x: xnp.sort(x, axis=1), memory_limit=limit).lower(x).compile()
    lines = c.executable().optimized.budget.lines()
    want = "(merge sort)" if tight else "(radix sort, one line at a time)"
    assert any("shrank the workspace of sort.sort" in line and want in line
               for line in lines), lines
    assert c.memory_stats()["peak_bytes"] <= limit
    np.testing.assert_array_equal(c(x), np.sort(x, axis=1))
