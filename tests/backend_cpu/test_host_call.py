"""Host calls (`xlc/backend_cpu/host_call.py`): LAPACK custom-calls run from compiled code by
calling back into Python; they survive `.xlc` serialize/load in a fresh process, honour
layouts, and a failure in the handler is a HostCallError naming the target."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("scipy")

from xlc.backend_cpu import compile_cpu  # noqa: E402
from xlc.backend_cpu.host_call import HostCallError  # noqa: E402
from xlc.hlo import host_calls  # noqa: E402
from xlc.hlo.host_calls import describe  # noqa: E402
from xlc.hlo.parser import parse_module  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "linalg"

POTRF = """HloModule c
ENTRY e {
  a = f64[3,3]{0,1} parameter(0)
  ROOT c = (f64[3,3]{0,1}, s32[]) custom-call(a), custom_call_target="lapack_dpotrf_ffi",
    operand_layout_constraints={f64[3,3]{0,1}}, output_to_operand_aliasing={{0}: (0, {})},
    api_version=API_VERSION_TYPED_FFI, backend_config={uplo = 76 : ui8}
}
"""


def _spd() -> np.ndarray:
    x = np.arange(9.0).reshape(3, 3) / 7
    return x @ x.T + 3 * np.eye(3)


def test_column_major_operands_and_results() -> None:
    """The operand and the factor are column-major ({0,1}): the host call reads and writes
    them through their layouts, aliased or not."""
    a = _spd()
    got, info = compile_cpu(parse_module(POTRF)).run([a])
    np.testing.assert_allclose(np.tril(got), np.linalg.cholesky(a), rtol=1e-12)
    assert info == 0


def test_descriptor_names_target_config_and_layouts() -> None:
    inst = parse_module(POTRF).entry.root
    assert describe(inst) == (
        '{"backend": "cpu", "config": "{uplo = 76 : ui8}", "operands": ["f64[3,3]{0,1}"], '
        '"results": ["f64[3,3]{0,1}", "s32[]"], "target": "lapack_dpotrf_ffi"}')


def test_a_failing_host_call_raises_naming_the_target(monkeypatch: pytest.MonkeyPatch) -> None:
    exe = compile_cpu(parse_module(POTRF))

    def broken(call: dict, operands: list, results: list) -> list:
        raise RuntimeError("the LAPACK stand-in broke")

    host_calls.decode.cache_clear()
    monkeypatch.setattr(host_calls, "handler_for", lambda target, backend="cpu": broken)
    with pytest.raises(HostCallError, match=r"custom-call target 'lapack_dpotrf_ffi' failed "
                                            r"on the host: RuntimeError: the LAPACK stand-in "
                                            r"broke"):
        exe.run([_spd()])
    monkeypatch.undo()
    host_calls.decode.cache_clear()
    got, info = exe.run([_spd()])  # the error does not stick
    assert info == 0


def test_lapack_program_survives_serialize_and_load(tmp_path: Path) -> None:
    """JAX's cho_solve compiled to .xlc runs in a fresh process (the host-call callback is
    registered there when the code is linked)."""
    out = tmp_path / "cho.xlc"
    subprocess.run([sys.executable, "-m", "xlc.cli", "compile", str(DATA / "cho_solve_f32.hlo"),
                    "-o", str(out)], check=True, capture_output=True)
    script = textwrap.dedent(f"""
        import numpy as np, xlc
        data = np.load({str(DATA / 'cho_solve_f32.npz')!r})
        exe = xlc.load({str(out)!r})
        got = np.asarray(exe(data["arg0"], data["arg1"]))
        np.testing.assert_allclose(got, data["out0"], rtol=1e-4, atol=1e-5)
        print("ok")
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]
