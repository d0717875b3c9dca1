"""InstructionFusion: every loop-fusible producer kind the issue lists is fused into its
consumer (kLoop) and into a reduction (kInput), written as HLO text with the expected fusion
and checked against the evaluator; and the duplication rule that keeps a chain of cheap binary
producers (a residual stream) from being recomputed, and kept alive, in every later fusion."""
from __future__ import annotations

import pytest

from tests.passes.filecheck import assert_same_numerics, filecheck, printed, run_passes
from xlc.hlo.opcodes import Opcode
from xlc.passes.fusion import InstructionFusion, kept_alive_sources
from xlc.passes.multi_output_fusion import MultiOutputFusion

ADD = """
add_f32 {
  ax = f32[] parameter(0)
  ay = f32[] parameter(1)
  ROOT as = f32[] add(ax, ay)
}
"""

# producer kind -> (parameters, the producer instruction `v` of shape f32[4,8])
PRODUCERS = {
    "elementwise": ("p = f32[4,8] parameter(0)", "v = f32[4,8] exponential(p)"),
    "broadcast": ("p = f32[8] parameter(0)", "v = f32[4,8] broadcast(p), dimensions={1}"),
    "reshape": ("p = f32[32] parameter(0)", "v = f32[4,8] reshape(p)"),
    "transpose": ("p = f32[8,4] parameter(0)", "v = f32[4,8] transpose(p), dimensions={1,0}"),
    "slice": ("p = f32[6,10] parameter(0)", "v = f32[4,8] slice(p), slice={[1:5], [2:10]}"),
    "pad": ("p = f32[2,6] parameter(0)\n  z = f32[] constant(0)",
            "v = f32[4,8] pad(p, z), padding=1_1x1_1"),
    "concatenate": ("p = f32[4,3] parameter(0)\n  p2 = f32[4,5] parameter(2)",
                    "v = f32[4,8] concatenate(p, p2), dimensions={1}"),
    "iota": ("p = f32[4,8] parameter(0)", "v = f32[4,8] iota(), iota_dimension=1"),
    "convert": ("p = s32[4,8] parameter(0)", "v = f32[4,8] convert(p)"),
    "select": ("p = pred[4,8] parameter(0)\n  p2 = f32[4,8] parameter(2)",
               "v = f32[4,8] select(p, p2, q)"),
    "dynamic-slice": ("p = f32[16,16] parameter(0)\n  i = s32[] parameter(2)",
                      "v = f32[4,8] dynamic-slice(p, i, i), dynamic_slice_sizes={4,8}"),
}


def _opcode_text(kind: str) -> str:
    return {"elementwise": "exponential"}.get(kind, kind)


@pytest.mark.parametrize("kind", list(PRODUCERS))
def test_producer_fuses_into_elementwise_consumer(kind: str) -> None:
    params, producer = PRODUCERS[kind]
    text = f"""
HloModule producer
ENTRY main {{
  {params}
  q = f32[4,8] parameter(1)
  {producer}
  ROOT r = f32[4,8] multiply(v, q)
}}
"""
    before, after, changed = run_passes(text, [InstructionFusion()])
    assert changed
    filecheck(printed(after), f"""
      CHECK: %fused_computation
      CHECK: {_opcode_text(kind)}(
      CHECK: ROOT %r = f32[4,8]{{1,0}} multiply(
      CHECK: ENTRY
      CHECK-NOT: {_opcode_text(kind)}(
      CHECK: ROOT %loop_fusion = f32[4,8]{{1,0}} fusion({{{{.*}}}}), kind=kLoop
    """)
    entry_ops = {i.opcode for i in after.entry.instructions}
    assert entry_ops <= {Opcode.PARAMETER, Opcode.FUSION}
    assert_same_numerics(before, after)


@pytest.mark.parametrize("kind", list(PRODUCERS))
def test_producer_fuses_into_reduction(kind: str) -> None:
    params, producer = PRODUCERS[kind]
    text = f"""
HloModule producer_reduce
{ADD}
ENTRY main {{
  {params}
  q = f32[4,8] parameter(1)
  {producer}
  zero = f32[] constant(0)
  ROOT r = f32[4] reduce(v, zero), dimensions={{1}}, to_apply=add_f32
}}
"""
    before, after, changed = run_passes(text, [InstructionFusion()])
    assert changed
    filecheck(printed(after), f"""
      CHECK: %fused_computation
      CHECK: {_opcode_text(kind)}(
      CHECK: ROOT %r = f32[4]{{0}} reduce(
      CHECK: ENTRY
      CHECK-NOT: {_opcode_text(kind)}(
      CHECK: ROOT %input_fusion = f32[4]{{0}} fusion({{{{.*}}}}), kind=kInput
    """)
    assert_same_numerics(before, after, rtol=1e-5, atol=1e-5)


RESIDUAL = """
HloModule residual
""" + ADD + """
ENTRY main {
  x = f32[16,64] parameter(0)
  w = f32[64,64] parameter(1)
  zero = f32[] constant(0)
  d1 = f32[16,64] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r1 = f32[16,64] add(x, d1)
  s1 = f32[16] reduce(r1, zero), dimensions={1}, to_apply=add_f32
  b1 = f32[16,64] broadcast(s1), dimensions={0}
  n1 = f32[16,64] subtract(r1, b1)
  d2 = f32[16,64] dot(n1, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r2 = f32[16,64] add(r1, d2)
  s2 = f32[16] reduce(r2, zero), dimensions={1}, to_apply=add_f32
  b2 = f32[16,64] broadcast(s2), dimensions={0}
  n2 = f32[16,64] subtract(r2, b2)
  d3 = f32[16,64] dot(n2, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r3 = f32[16,64] add(r2, d3)
}
"""


def test_residual_stream_is_not_duplicated_into_every_later_fusion() -> None:
    """r2 = add(r1, d2) reads two computed values: duplicating it into its three users (as
    XLA's all-users rule alone would allow) would keep d1 and d2 alive to the end and
    recompute r1 in every fusion of every later layer. r1 = add(x, d1) reads one computed
    value and a parameter, so it is still duplicated."""
    before, after, _ = run_passes(RESIDUAL, [InstructionFusion()])
    filecheck(printed(after).split("ENTRY")[1], """
      CHECK: %d1 = f32[16,64]{1,0} dot(%x, %w)
      CHECK: %d2 = f32[16,64]{1,0} dot(
      CHECK-NEXT: %loop_fusion.1 = f32[16,64]{1,0} fusion(%x, %d1, %d2), kind=kLoop
      CHECK-NOT: %d1
      CHECK-NOT: %d2
      CHECK: %d3 = f32[16,64]{1,0} dot(
      CHECK-NEXT: ROOT %r3 = f32[16,64]{1,0} add(%loop_fusion.1, %d3)
    """)
    # r2 is computed exactly once (one `add` named r2), r1 in each of its three users
    def adds(module, prefix):
        return [i for c in module.computations for i in c.instructions
                if i.opcode is Opcode.ADD and i.name.startswith(prefix)]
    assert len(adds(after, "r2")) == 1
    assert len(adds(after, "r1")) == 3
    assert_same_numerics(before, after, rtol=1e-4, atol=1e-4)
    # multi-output fusion then exports r2 from one of its consumers: still computed once
    before, after, _ = run_passes(RESIDUAL, [InstructionFusion(), MultiOutputFusion()])
    assert len(adds(after, "r2")) == 1
    assert_same_numerics(before, after, rtol=1e-4, atol=1e-4)


def test_kept_alive_sources_look_through_cheap_unary_producers() -> None:
    text = """
HloModule lse
max_f32 {
  mx = f32[] parameter(0)
  my = f32[] parameter(1)
  ROOT mm = f32[] maximum(mx, my)
}
ENTRY main {
  p = f32[8,32] parameter(0)
  ninf = f32[] constant(-inf)
  red = f32[8] reduce(p, ninf), dimensions={1}, to_apply=max_f32
  nb = f32[8] broadcast(ninf), dimensions={}
  m = f32[8] maximum(red, nb)
  fin = pred[8] is-finite(m)
  zero = f32[] constant(0)
  zb = f32[8] broadcast(zero), dimensions={}
  sel = f32[8] select(fin, m, zb)
  ROOT out = (f32[8], f32[8]) tuple(sel, m)
}
"""
    from xlc.hlo.parser import parse_module

    m = parse_module(text, verify=True)
    sel = m.entry.instruction("sel")
    assert [s.name for s in kept_alive_sources(sel)] == ["red"]
    assert [s.name for s in kept_alive_sources(m.entry.instruction("red"))] == []  # p, ninf
