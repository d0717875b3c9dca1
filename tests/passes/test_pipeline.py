"""Pipeline machinery: bool check, error context, verifier runs, timings, FixedPoint, dumps;
and the filecheck helper itself."""
from __future__ import annotations

import logging
import os

import pytest

from tests.passes.filecheck import filecheck
from xlc.errors import ArgumentError, ParseError, VerificationError, XlcError
from xlc.hlo.ir import HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Shape
from xlc.options import CompileOptions
from xlc.passes import FixedPoint, Pipeline, dump_text, simplification_pipeline

F4 = Shape.array("f32", (4,))


def small_module(name: str = "m") -> HloModule:
    """ENTRY: p0 = f32[4] parameter(0); n = negate(p0); ROOT a = add(n, p0)."""
    m = HloModule(name)
    c = m.new_computation("main", entry=True)
    p = c.add_parameter(0, F4, "p0")
    n = c.add(Opcode.NEGATE, F4, (p,), name="n")
    c.root = c.add(Opcode.ADD, F4, (n, p), name="a")
    return m


class Recorder:
    """Changes the module (harmlessly) for its first `n` runs."""

    def __init__(self, name: str, n: int = 0):
        self.name = name
        self.n = n
        self.runs = 0

    def run(self, module: HloModule) -> bool:
        self.runs += 1
        return self.runs <= self.n


class Raiser:
    def __init__(self, name: str, err: Exception):
        self.name = name
        self.err = err

    def run(self, module: HloModule) -> bool:
        raise self.err


class Corrupter:
    """Gives the root a wrong shape; reports `changed` as configured."""

    name = "corrupter"

    def __init__(self, changed: bool = True):
        self.changed = changed

    def run(self, module: HloModule) -> bool:
        assert module.entry is not None and module.entry.root is not None
        module.entry.root.shape = Shape.array("f32", (5,))
        return self.changed


VERIFY = CompileOptions(verify=True)


def test_pass_must_return_bool():
    class Bad:
        name = "bad"

        def run(self, module):
            return 1

    with pytest.raises(XlcError, match=r"^in pass 'bad' of pipeline 'cpu': pass returned int "
                                       r"\(1\), expected bool$"):
        Pipeline("cpu", [Bad()]).run(small_module(), VERIFY)


def test_errors_reraised_with_same_class_and_context():
    p = Pipeline("cpu", [Raiser("fusion", VerificationError("operand 0 has the wrong shape"))])
    with pytest.raises(VerificationError,
                       match=r"^in pass 'fusion' of pipeline 'cpu': operand 0 has the wrong "
                             r"shape$"):
        p.run(small_module(), VERIFY)
    err = ParseError("bad token", line=3, column=7, filename="x.hlo")
    with pytest.raises(ParseError, match=r"^in pass 'p' of pipeline 'q': x.hlo:3:7: bad token$"):
        Pipeline("q", [Raiser("p", err)]).run(small_module(), VERIFY)


class TwoArgError(XlcError):
    def __init__(self, what: str, where: int):
        super().__init__(f"{what} at {where}")


def test_error_with_unusual_constructor_keeps_its_class():
    with pytest.raises(TwoArgError, match=r"^in pass 'p' of pipeline 'cpu': bad at 3$"):
        Pipeline("cpu", [Raiser("p", TwoArgError("bad", 3))]).run(small_module(), VERIFY)


def test_error_context_not_doubled_inside_fixed_point():
    fp = FixedPoint([Recorder("r", 1), Raiser("boom", XlcError("no"))], name="fp")
    with pytest.raises(XlcError, match=r"^in pass 'boom' of pipeline 'outer': no$"):
        Pipeline("outer", [fp]).run(small_module(), VERIFY)


def test_non_xlc_errors_get_a_note():
    with pytest.raises(ZeroDivisionError) as info:
        Pipeline("cpu", [Raiser("div", ZeroDivisionError("x"))]).run(small_module(), VERIFY)
    assert "in pass 'div' of pipeline 'cpu'" in info.value.__notes__


def test_verifier_runs_after_changing_pass():
    pytest.importorskip("xlc.hlo.verifier")
    with pytest.raises(VerificationError, match=r"^in pass 'corrupter' of pipeline 'cpu': "):
        Pipeline("cpu", [Corrupter(changed=True)]).run(small_module(), VERIFY)


def test_verifier_skipped_when_unchanged_or_off():
    Pipeline("cpu", [Corrupter(changed=False)]).run(small_module(), VERIFY)
    Pipeline("cpu", [Corrupter(changed=True)]).run(small_module(), CompileOptions(verify=False))


def test_timings_recorded_and_formatted():
    p = Pipeline("cpu", [Recorder("a", 1), Recorder("b", 0)])
    assert p.run(small_module(), VERIFY) is True
    assert [(t.name, t.changed) for t in p.timings] == [("a", True), ("b", False)]
    assert all(t.seconds >= 0 for t in p.timings)
    table = p.format_timings()
    filecheck(table, """
        CHECK: pipeline 'cpu':
        CHECK-NEXT: pass  runs  changed  total ms
        CHECK-NEXT: a        1        1
        CHECK-NEXT: b        1        0
    """)


def test_fixed_point_iterates_until_no_change():
    a, b = Recorder("a", 3), Recorder("b", 1)
    fp = FixedPoint([a, b], max_iters=10, name="fp")
    p = Pipeline("cpu", [fp])
    assert p.run(small_module(), VERIFY) is True
    assert (a.runs, b.runs, fp.last_iterations) == (4, 4, 4)
    assert len(p.timings) == 8


def test_fixed_point_gives_up_after_max_iters(caplog):
    a = Recorder("a", 100)
    fp = FixedPoint([a], max_iters=5, name="fp")
    with caplog.at_level(logging.WARNING, logger="xlc.passes"):
        assert fp.run(small_module()) is True
    assert a.runs == 5
    assert "fixed point 'fp' did not converge in 5 iterations" in caplog.text


def test_fixed_point_rejects_bad_max_iters():
    with pytest.raises(XlcError, match=r"FixedPoint 'x': max_iters must be >= 1, got 0"):
        FixedPoint([], max_iters=0, name="x")


def test_unchanged_pipeline_returns_false():
    assert Pipeline("cpu", [Recorder("a"), FixedPoint([Recorder("b")])]).run(
        small_module(), VERIFY) is False


def test_dump_text(tmp_path):
    assert dump_text(CompileOptions(), "m", "schedule.txt", "x") is None
    opts = CompileOptions(dump_to=str(tmp_path / "d"))
    path = dump_text(opts, "jit f", "buffer-assignment.txt", "report")
    assert path == str(tmp_path / "d" / "jit_f.buffer-assignment.txt")
    assert open(path).read() == "report"


def _unprefixed(directory) -> list[str]:
    """The dump files in `directory`, sorted, without their `module_IIII.` prefix; asserts
    they all carry one prefix."""
    import re

    files = sorted(os.listdir(directory))
    assert len({re.match(r"module_\d{4,}\.", f).group(0) for f in files}) == 1, files
    return [f.split(".", 1)[1] for f in files]


def test_dumps_after_matching_passes(tmp_path):
    pytest.importorskip("xlc.hlo.printer")
    opts = CompileOptions(dump_to=str(tmp_path), dump_pass_re="^(a|c)$", verify=True)
    m = small_module("mod")
    Pipeline("cpu", [Recorder("a", 1), Recorder("b", 1), Recorder("c", 1), Recorder("c")]).run(
        m, opts)  # unchanged passes are not dumped
    Pipeline("late", [Recorder("a", 1)]).run(m, opts)  # numbering continues per module
    assert _unprefixed(tmp_path) == ["mod.0000.before_optimizations.hlo", "mod.0001.a.hlo",
                                     "mod.0002.c.hlo", "mod.0003.a.hlo"]
    (a_dump,) = tmp_path.glob("module_*.mod.0001.a.hlo")
    filecheck(a_dump.read_text(), """
        CHECK: HloModule mod
        CHECK: negate(
        CHECK: ROOT {{.*}}add(
    """)


def test_bad_dump_regex(tmp_path):
    opts = CompileOptions(dump_to=str(tmp_path), dump_pass_re="(")
    with pytest.raises(ArgumentError, match=r"dump_pass_re '\(' is not a valid regular "):
        Pipeline("cpu", [Recorder("a")]).run(small_module(), opts)


def test_dump_only_before_optimizations_without_regex(tmp_path):
    pytest.importorskip("xlc.hlo.printer")
    opts = CompileOptions(dump_to=str(tmp_path))
    Pipeline("cpu", [Recorder("a", 1)]).run(small_module("mod"), opts)
    assert _unprefixed(tmp_path) == ["mod.0000.before_optimizations.hlo"]


def test_dumps_of_different_compiles_never_overwrite_each_other(tmp_path, monkeypatch):
    """Two modules of one name (two signatures of one jitted function), and a later process
    dumping into the same directory, each get their own `module_IIII.` prefix."""
    pytest.importorskip("xlc.hlo.printer")
    from xlc.passes import pipeline

    opts = CompileOptions(dump_to=str(tmp_path), dump_pass_re="a")
    first, second = small_module("mod"), small_module("mod")
    Pipeline("cpu", [Recorder("a", 1)]).run(first, opts)
    Pipeline("cpu", [Recorder("a", 1)]).run(second, opts)
    dump_text(opts, "mod", "buffer-assignment.txt", "second's report")  # by name: the latest
    ids = sorted({f.split(".")[0] for f in os.listdir(tmp_path)})
    assert len(ids) == 2 and len(os.listdir(tmp_path)) == 5
    assert (tmp_path / f"{ids[1]}.mod.buffer-assignment.txt").read_text() == "second's report"
    # a new process (its counter starts at 0) continues after the directory's largest id
    monkeypatch.setattr(pipeline, "_next_dump_id", 0)
    third = small_module("mod")
    Pipeline("cpu", [Recorder("a", 1)]).run(third, opts)
    assert pipeline.dump_prefix(opts, third) == f"module_{int(ids[1][7:]) + 1:04d}.mod"
    assert len(os.listdir(tmp_path)) == 7


SOFTMAX = """
HloModule sm
max_f32 {
  mx = f32[] parameter(0)
  my = f32[] parameter(1)
  ROOT mm = f32[] maximum(mx, my)
}
ENTRY main {
  x = f32[8,32] parameter(0)
  ninf = f32[] constant(-inf)
  m = f32[8] reduce(x, ninf), dimensions={1}, to_apply=max_f32
  mb = f32[8,32] broadcast(m), dimensions={0}
  d = f32[8,32] subtract(x, mb)
  ROOT e = f32[8,32] exponential(d)
}
"""


def test_optimize_module_dumps_passes_schedule_and_buffer_assignment(tmp_path):
    """`optimize_module` with dumping on: the input, each matching changing pass, the final
    scheduled module (printed in schedule order, re-parsed with the same schedule) and the
    buffer-assignment report."""
    from xlc.hlo.parser import parse_module
    from xlc.passes.optimize import interpreter_passes, optimize_module

    opts = CompileOptions(dump_to=str(tmp_path), dump_pass_re="fusion|scheduler", verify=True)
    result = optimize_module(parse_module(SOFTMAX), opts, passes=interpreter_passes(opts))
    assert _unprefixed(tmp_path) == ["sm.0000.before_optimizations.hlo", "sm.0001.fusion.hlo",
                                     "sm.0002.row_fusion.hlo", "sm.0003.memory_scheduler.hlo",
                                     "sm.after_optimizations.hlo", "sm.buffer-assignment.txt"]
    (final_dump,) = tmp_path.glob("module_*.sm.after_optimizations.hlo")
    final = final_dump.read_text()
    filecheck(final, """
        CHECK: HloModule sm, is_scheduled=true
        CHECK: ENTRY
        CHECK-NEXT: %x = f32[8,32]{1,0} parameter(0)
        CHECK-NEXT: ROOT %loop_fusion = f32[8,32]{1,0} fusion(%x), kind=kLoop
    """)
    again = parse_module(final)
    assert again.schedule is not None
    assert [i.name for i in again.schedule[again.entry]] == \
        [i.name for i in result.module.schedule[result.module.entry]]
    (report_dump,) = tmp_path.glob("module_*.sm.buffer-assignment.txt")
    report = report_dump.read_text()
    assert report == result.assignment.report()
    filecheck(report, """
        CHECK: BufferAssignment:
        CHECK-NEXT: allocation 0: size 1024, parameter 0, shape |f32[8,32]{1,0}| at ShapeIndex {}:
        CHECK: maybe-live-out
        CHECK: BufferAssignment stats:
    """)
    names = [t.name for t in result.timings]
    assert names[-1] == "buffer_assignment" and "fusion" in names
    assert all(t.seconds >= 0 for t in result.timings)


def test_simplification_pipeline_layout():
    p = simplification_pipeline()
    assert [e.name for e in p.passes] == ["call-inliner", "simplify"]
    fp = p.passes[1]
    assert isinstance(fp, FixedPoint)
    assert [e.name for e in fp.passes] == ["algebraic-simplifier", "constant-folding", "cse",
                                          "dce"]
    opts = CompileOptions(constant_folding_limit=7)
    assert simplification_pipeline(opts).passes[1].passes[1].limit == 7


# ---- the filecheck helper ---------------------------------------------------------------------

TEXT = "a = add(x, y)\nb = negate(a)\nc = exp(b)\nROOT t = tuple(c)"


def test_filecheck_accepts():
    filecheck(TEXT, """
        CHECK: add(
        CHECK-NEXT: negate(a)
        CHECK-NOT: add
        CHECK: ROOT {{[a-z]+}} = tuple
    """)


@pytest.mark.parametrize("checks, msg", [
    ("CHECK: mul", r"CHECK: 'mul' not found after line -1"),
    ("CHECK: negate\nCHECK-NEXT: tuple", r"CHECK-NEXT: 'tuple' does not match line 2"),
    ("CHECK: add\nCHECK-NOT: exp\nCHECK: tuple", r"CHECK-NOT: 'exp' matched line 2"),
    ("CHECK: exp\nCHECK: add", r"CHECK: 'add' not found after line 2"),
    ("no checks", r"no CHECK lines given"),
])
def test_filecheck_rejects(checks, msg):
    with pytest.raises(AssertionError, match=msg):
        filecheck(TEXT, checks)


def test_bad_xlc_flags_value_is_an_argument_error(monkeypatch):
    """A pipeline option with a bad value in XLC_FLAGS names the flag, not a pydantic field."""
    from xlc.options import default_options

    monkeypatch.setenv("XLC_FLAGS", "--verify --scheduler=fifo")
    with pytest.raises(ArgumentError, match=r"^XLC_FLAGS: invalid value: --scheduler=fifo: "
                                            r"Input should be 'default', 'list', 'dfs' or "
                                            r"'post_order'$"):
        default_options()
    monkeypatch.setenv("XLC_FLAGS", "--constant-folding-limit=many")
    with pytest.raises(ArgumentError, match=r"--constant-folding-limit=many: Input should be "
                                            r"a valid integer"):
        default_options()


def test_input_is_verified_before_the_first_pass() -> None:
    """With verification on, a module that comes in broken is reported as such, not as the
    first pass's fault."""
    from xlc.errors import VerificationError
    from xlc.hlo.parser import parse_module
    from xlc.options import CompileOptions
    from xlc.passes.dce import DeadCodeElimination
    from xlc.passes.pipeline import Pipeline

    m = parse_module("""HloModule m
ENTRY e {
  a = f32[4] parameter(0)
  ROOT n = f32[5] negate(a)
}""")
    with pytest.raises(VerificationError) as info:
        Pipeline("p", [DeadCodeElimination()]).run(m, CompileOptions(verify=True))
    assert str(info.value).startswith("instruction 'n' in computation 'e'")
