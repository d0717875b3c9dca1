"""Cost analysis (xlc/hlo/cost_analysis.py): XLA's counting rules, `Compiled.cost_analysis()`
with JAX's keys, and `xlc inspect --cost` with the GPU roofline."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xlc.nn

import xlc
from xlc.hlo.cost_analysis import H100, Cost, cost_analysis, module_costs
from xlc.hlo.parser import parse_module

TEXT = """HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
fused {
  p = f32[8,16] parameter(0)
  e = f32[8,16] exponential(p)
  ROOT m = f32[8,16] multiply(e, p)
}
ENTRY e {
  a = f32[8,32] parameter(0)
  b = f32[32,16] parameter(1)
  d = f32[8,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  f = f32[8,16] fusion(d), kind=kLoop, calls=fused
  z = f32[] constant(0)
  r = f32[8] reduce(f, z), dimensions={1}, to_apply=add
  ROOT t = (f32[8,16], f32[8]) tuple(f, r)
}
"""


def test_counting_rules() -> None:
    costs = {c.name: c for c in module_costs(parse_module(TEXT))}
    assert set(costs) == {"d", "f", "r"}  # parameters, constants, tuples emit no code
    d, f, r = costs["d"], costs["f"], costs["r"]
    assert (d.flops, d.bytes_accessed) == (2 * 8 * 16 * 32, 4 * (8 * 16 + 8 * 32 + 32 * 16))
    # the fusion: exp is a transcendental, multiply a flop; bytes of its operand and output
    assert (f.flops, f.transcendentals, f.bytes_accessed) == (128, 128, 4 * 2 * 128)
    assert (r.flops, r.bytes_accessed) == (128, 4 * (8 + 128 + 1))
    assert cost_analysis(parse_module(TEXT)) == {
        "flops": float(d.flops + f.flops + r.flops), "transcendentals": 128.0,
        "bytes accessed": float(d.bytes_accessed + f.bytes_accessed + r.bytes_accessed)}
    assert H100.seconds(Cost("x", "dot", flops=67 * 10**12)) == pytest.approx(1.0)


def test_compiled_cost_analysis_matches_jax() -> None:
    x = np.zeros((64, 256), np.float32)
    w = np.zeros((256, 128), np.float32)
    ours = xlc.jit(lambda x, w: xlc.nn.softmax(x @ w, axis=-1)).lower(x, w).compile()
    costs = ours.cost_analysis()
    assert set(costs) == {"flops", "transcendentals", "bytes accessed"}
    assert costs["flops"] >= 2 * 64 * 256 * 128 and costs["transcendentals"] == 64 * 128
    jax = pytest.importorskip("jax")
    theirs = jax.jit(lambda x, w: jax.nn.softmax(x @ w, axis=-1)).lower(x, w).compile()
    want = theirs.cost_analysis()
    want = want[0] if isinstance(want, list) else want
    assert costs["flops"] == pytest.approx(want["flops"], rel=0.01)
    assert costs["transcendentals"] == want["transcendentals"]


def _inspect(path: Path, *flags: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "xlc.cli", "inspect", str(path), *flags],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_inspect_cost(tmp_path: Path, backend: str) -> None:
    x = np.zeros((64, 4096), np.float32)
    f = xlc.jit(lambda x: xlc.nn.softmax(x * 2.0, axis=-1), backend=backend)
    path = tmp_path / "s.xlc"
    f.lower(x).compile().serialize(str(path))
    data = json.loads(_inspect(path, "--cost", "--json"))
    assert data["totals"]["transcendentals"] == 64 * 4096
    rows = data["kernels"]
    assert rows and all(r["bytes accessed"] > 0 for r in rows)
    text = _inspect(path, "--cost")
    if backend == "gpu":  # one row-fusion kernel, its roofline time on an H100
        assert data["device"] == H100.name and len(rows) == 1
        assert rows[0]["roofline_us"] == pytest.approx(2 * 64 * 4096 * 4 / 2.93e12 * 1e6)
        assert "roofline on H100" in text
    else:
        assert data["device"] is None and "roofline" not in text


def test_dot_flops_at_their_tensor_core_peaks() -> None:
    """The H100 roofline prices dots by how the GPU runs them: f16/bf16 operands and f32 at
    DEFAULT precision on tensor cores (989 / 495 TFLOP/s), f32 at HIGHEST on CUDA cores
    (67 TFLOP/s); one kOutput fusion keeps its dot's class."""
    def dot(t: str, extra: str = "") -> Cost:
        mod = parse_module(f"""HloModule m
ENTRY e {{
  a = {t}[4096,4096] parameter(0)
  b = {t}[4096,4096] parameter(1)
  ROOT d = f32[4096,4096] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}{extra}
}}""")
        (c,) = module_costs(mod)
        return c

    flops = 2 * 4096 ** 3
    c16, tf32, fp32 = dot("bf16"), dot("f32"), dot("f32", ", operand_precision={highest,highest}")
    assert (c16.tensor16_flops, c16.tf32_flops) == (flops, 0)
    assert (tf32.tensor16_flops, tf32.tf32_flops) == (0, flops)
    assert (fp32.tensor16_flops, fp32.tf32_flops) == (0, 0)
    assert H100.seconds(c16) == pytest.approx(flops / 989e12)
    assert H100.seconds(tf32) == pytest.approx(flops / 495e12)
    assert H100.seconds(fp32) == pytest.approx(flops / 67e12)
    x = np.ones((256, 512), np.float32)
    w = np.ones((512, 1024), np.float32)
    f = xlc.jit(lambda x, w: xlc.numpy.maximum(x @ w, 0), backend="gpu")
    (k,) = module_costs(parse_module(f.lower(x, w).compile().as_text()))
    assert k.opcode == "fusion" and k.tf32_flops == 2 * 256 * 512 * 1024
