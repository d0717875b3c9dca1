"""Source locations: HLO metadata and trace errors point at the line of the user's code that
created the op, also when the traced program lives inside the xlc package (xlc/cli/demo.py)."""
from __future__ import annotations

import inspect
import io
import re
from pathlib import Path

import numpy as np
import pytest
import xlc.nn
import xlc.numpy as xnp

import xlc
import xlc.cli.demo
from xlc.frontend.tracer import source_file

XLC_DIR = Path(xlc.__file__).parent
META = re.compile(r'metadata=\{op_name="([^"]+)" source_file="([^"]+)" source_line=(\d+)\}')


def _locations(text: str) -> list[tuple[str, str, int]]:
    return [(m.group(1), m.group(2), int(m.group(3))) for m in META.finditer(text)]


def _lines_of(fn, *needles: str) -> list[int]:
    """Line numbers of the source lines of `fn` containing each needle."""
    src, start = inspect.getsourcelines(fn)
    out = []
    for needle in needles:
        hits = [start + i for i, ln in enumerate(src) if needle in ln]
        assert len(hits) == 1, (needle, hits)
        out.append(hits[0])
    return out


def test_demo_metadata_points_at_the_demo_model_lines() -> None:
    out = io.StringIO()
    assert xlc.cli.demo.run_demo(out, backend="interpreter") == 0
    locs = _locations(out.getvalue())
    hidden, dense, softmax = _lines_of(xlc.cli.demo.run_demo, "h = xnp.maximum(",
                                       "logits = h @", "return xlc.nn.softmax(")
    assert locs and {f for _, f, _ in locs} == {xlc.cli.demo.__file__}
    assert {line for _, _, line in locs} == {hidden, dense, softmax}
    lines = {op: line for op, _, line in locs}
    assert lines["jit(mlp)/maximum"] == hidden
    assert lines["jit(mlp)/exp"] == softmax  # ops made inside xlc.nn: the line calling it
    assert lines["jit(mlp)/maximum.reducer/maximum"] == softmax


def _in_package_program(tmp_name: str, source: str) -> dict:
    """Execute `source` as if it were a module file inside the xlc package (not written to
    disk: only the code objects' file name matters)."""
    namespace: dict = {"xlc": xlc, "xnp": xnp, "np": np}
    exec(compile(source, str(XLC_DIR / tmp_name), "exec"), namespace)  # noqa: S102
    return namespace


PROGRAM = '''
def helper(x, y):
    return x * y

def model(x, y):
    z = xnp.exp(x)
    return helper(z, y)
'''


def test_in_package_program_errors_point_at_its_lines() -> None:
    ns = _in_package_program("fake_user_program.py", PROGRAM)
    fake = str(XLC_DIR / "fake_user_program.py")
    with pytest.raises(xlc.TraceError, match=r"^multiply: shapes cannot be broadcast together: "
                                             r"f32\[3\] and f32\[4\] \(at " + re.escape(fake)
                       + r":3\)$"):
        xlc.jit(ns["model"])(np.ones(3, np.float32), np.ones(4, np.float32))
    text = xlc.jit(ns["model"]).lower(np.ones(3, np.float32), np.ones(3, np.float32)).as_text()
    assert {(op, f, line) for op, f, line in _locations(text)} == {
        ("jit(model)/exp", fake, 6), ("jit(model)/multiply", fake, 3)}


def test_in_package_file_is_user_code_only_while_its_function_is_traced() -> None:
    ns = _in_package_program("fake_user_program.py", PROGRAM)

    def outside(x, y):
        return ns["helper"](x, y)  # helper's file is not being traced: this line is reported

    line = inspect.getsourcelines(outside)[1] + 1
    with pytest.raises(xlc.TraceError, match=re.escape(f"(at {__file__}:{line})") + "$"):
        xlc.jit(outside)(np.ones(3, np.float32), np.ones(4, np.float32))


def test_jitting_a_library_function_points_at_the_caller() -> None:
    """The op library is never the user's code, even when jitted directly (as in JAX)."""
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    text = xlc.jit(xlc.nn.relu).lower(np.ones(3, np.float32)).as_text()
    locs = _locations(text)
    assert locs and {(f, n) for _, f, n in locs} == {(__file__, line)}
    line = inspect.currentframe().f_lineno + 2  # type: ignore[union-attr]
    with pytest.raises(xlc.TraceError, match=re.escape(f"(at {__file__}:{line})") + "$"):
        xlc.jit(xnp.add)(np.ones(3, np.float32), np.ones(4, np.float32))


def test_the_xlc_console_script_is_not_user_code() -> None:
    """`xlc compile xlc.nn:relu` traces only library code: no frame is the user's, so the
    metadata has no source location (rather than the console script's `sys.exit(main())`)."""
    import xlc.cli

    script = {"__name__": "__main__", "main": xlc.cli.main}  # what the generated script has
    exec(compile("def run(f, x):\n    return f.lower(x).as_text()\n", "/venv/bin/xlc", "exec"),
         script)  # noqa: S102
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    text = script["run"](xlc.jit(xlc.nn.relu), np.ones(3, np.float32))
    locs = _locations(text)  # the console-script frame is skipped: the next one is this test
    assert locs and {(f, n) for _, f, n in locs} == {(__file__, line)}


def test_eager_calls_point_at_the_caller() -> None:
    line = inspect.currentframe().f_lineno + 2  # type: ignore[union-attr]
    with pytest.raises(xlc.TraceError, match=re.escape(f"(at {__file__}:{line})") + "$"):
        xnp.add(np.ones(3, np.float32), np.ones(4, np.float32))


def test_source_file_unwraps() -> None:
    import functools

    def f(x):
        return x

    assert source_file(f) == __file__
    assert source_file(functools.partial(f, 1)) == __file__
    assert source_file(xlc.jit(f)) == __file__
    assert source_file(xnp.exp) == str(XLC_DIR / "frontend" / "numpy_api.py")
    assert source_file(len) is None

    class Model:
        def __call__(self, x):
            return x

    assert source_file(Model()) == __file__
