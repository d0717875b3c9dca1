"""Dataflow: LogicalBuffers, points-to sets, uses, alias sets, may-share rules."""
from __future__ import annotations

from xlc.hlo.parser import parse_module
from xlc.passes.dataflow import (
    DataflowAnalysis,
    can_share_operand_buffer,
    computation_kinds,
    in_place_pairs,
)

from .memory_builders import classic, counting_while


def names(bufs) -> list[str]:
    return sorted(f"{b.instruction.name}{list(b.index) if b.index else ''}" for b in bufs)


TUPLES = """
HloModule tuples

ENTRY main {
  a = f32[4]{0} parameter(0)
  b = f32[4]{0} negate(a)
  t = (f32[4]{0}, f32[4]{0}) tuple(a, b)
  c = (f32[4]{0}, f32[4]{0}) copy(t)
  g = f32[4]{0} get-tuple-element(c), index=1
  bc = f32[2,2]{1,0} bitcast(g)
  ROOT r = (f32[2,2]{1,0}, (f32[4]{0}, f32[4]{0})) tuple(bc, t)
}
"""


def test_tuple_defines_only_top_level_and_forwards_elements() -> None:
    m = parse_module(TUPLES, verify=True)
    df = DataflowAnalysis(m)
    e = m.entry
    t, c, g, bc, r = (e.instruction(n) for n in ("t", "c", "g", "bc", "r"))
    assert names(df.defines(t)) == ["t"]
    assert names(df.buffers_at(t, (0,))) == ["a"]
    assert names(df.buffers_at(t, (1,))) == ["b"]
    # copy is shallow: a new index table, the same elements
    assert names(df.defines(c)) == ["c"]
    assert names(df.buffers_at(c, (1,))) == ["b"]
    # get-tuple-element and bitcast forward
    assert df.defines(g) == [] and df.defines(bc) == []
    assert names(df.buffers_at(bc)) == ["b"]
    assert names(df.buffers_at(r, (1, 0))) == ["a"]
    assert names(df.live_out) == ["a", "b", "r", "t"]


def test_uses_skip_tuple_and_gte_reads_only_index_table() -> None:
    m = parse_module(TUPLES, verify=True)
    df = DataflowAnalysis(m)
    b = df.defined_at(m.entry.instruction("b"))
    c = df.defined_at(m.entry.instruction("c"))
    assert b is not None and c is not None
    # b is forwarded by t, c, g, bc, r; only `bc` (bitcast) reads it; the copy reads t's table
    assert sorted(u.user.name for u in df.uses(b)) == ["bc"]
    assert sorted(u.user.name for u in df.uses(c)) == ["g"]
    t = df.defined_at(m.entry.instruction("t"))
    assert sorted(u.user.name for u in df.uses(t)) == ["c"]


def test_while_values_are_colocated() -> None:
    m, d = counting_while()
    df = DataflowAnalysis(m)
    xn = df.defined_at(d["xn"])
    mul = df.defined_at(d["mul"])
    init = df.defined_at(d["init"])
    root = df.defined_at(d["body_root"])
    assert xn is not None and mul is not None and init is not None and root is not None
    assert df.must_alias(xn, mul)
    assert df.must_alias(init, root)
    assert not df.must_alias(xn, init)
    # body/condition parameters and the while result hold the carried values
    assert names(df.buffers_at(d["bp"], (1,))) == ["mul", "xn"]
    assert names(df.buffers_at(d["cp"], (1,))) == ["mul", "xn"]
    assert names(df.buffers_at(d["while"], (1,))) == ["mul", "xn"]
    assert df.defines(d["while"]) == [] and df.defines(d["bp"]) == []
    assert df.is_live_out(mul) and df.is_live_out(xn) and not df.is_live_out(init)


CONTROL = """
HloModule control

neg {
  a = f32[8]{0} parameter(0)
  ROOT n = f32[8]{0} negate(a)
}

ident {
  b = f32[8]{0} parameter(0)
  ROOT e = f32[8]{0} exponential(b)
}

helper {
  h = f32[8]{0} parameter(0)
  ROOT s = f32[8]{0} sine(h)
}

ENTRY main {
  x = f32[8]{0} parameter(0)
  pr = pred[] parameter(1)
  y = f32[8]{0} cosine(x)
  cl = f32[8]{0} call(y), to_apply=helper
  ROOT cond = f32[8]{0} conditional(pr, cl, y), true_computation=neg, false_computation=ident
}
"""


def test_call_and_conditional_pass_values_across() -> None:
    m = parse_module(CONTROL, verify=True)
    df = DataflowAnalysis(m)
    kinds = computation_kinds(m)
    assert kinds[m.computation("neg")] == "control"
    assert names(df.buffers_at(m.computation("helper").instruction("h"))) == ["y"]
    assert names(df.buffers_at(m.entry.instruction("cl"))) == ["s"]
    assert names(df.buffers_at(m.computation("neg").instruction("a"))) == ["s"]
    assert names(df.buffers_at(m.computation("ident").instruction("b"))) == ["y"]
    assert names(df.buffers_at(m.entry.instruction("cond"))) == ["e", "n"]
    n = df.defined_at(m.computation("neg").instruction("n"))
    e = df.defined_at(m.computation("ident").instruction("e"))
    assert n is not None and e is not None and df.must_alias(n, e)


IN_PLACE = """
HloModule inplace, input_output_alias={ {0}: (0, {}, may-alias) }

fused {
  p0 = f32[8]{0} parameter(0)
  p1 = f32[2]{0} parameter(1)
  i = s32[] parameter(2)
  ROOT dus = f32[8]{0} dynamic-update-slice(p0, p1, i)
}

ENTRY main {
  x = f32[8]{0} parameter(0)
  u = f32[2]{0} parameter(1)
  k = s32[] parameter(2)
  c = f32[8]{0} copy(x)
  f = f32[8]{0} fusion(c, u, k), kind=kLoop, calls=fused
  d = f32[8]{0} dynamic-update-slice(f, u, k)
  ROOT r = (f32[8]{0}, f32[8]{0}) tuple(d, c)
}
"""


def test_in_place_ops_and_io_alias_must_alias() -> None:
    m = parse_module(IN_PLACE, verify=True)
    df = DataflowAnalysis(m)
    e = m.entry
    f, d, c = e.instruction("f"), e.instruction("d"), e.instruction("c")
    assert in_place_pairs(f) == [(0, (), ())]
    assert in_place_pairs(d) == [(0, (), ())]
    cb, fb, db = df.defined_at(c), df.defined_at(f), df.defined_at(d)
    assert cb is not None and fb is not None and db is not None
    assert df.must_alias(cb, fb) and df.must_alias(fb, db)
    # input_output_alias: output {0} (= d) shares parameter 0
    xb = df.defined_at(e.instruction("x"))
    assert xb is not None and df.must_alias(xb, db)
    ub = df.defined_at(e.instruction("u"))
    assert ub is not None and not df.must_alias(ub, db)


SHARE = """
HloModule share

loop_ok {
  a = f32[8]{0} parameter(0)
  n = f32[8]{0} negate(a)
  ROOT e = f32[8]{0} exponential(n)
}

loop_bcast {
  a2 = f32[8]{0} parameter(0)
  s2 = f32[] parameter(1)
  b2 = f32[8]{0} broadcast(s2), dimensions={}
  r2 = f32[8]{0} reverse(a2), dimensions={0}
  ROOT m2 = f32[8]{0} multiply(r2, b2)
}

ENTRY main {
  x = f32[8]{0} parameter(0)
  s = f32[] parameter(1)
  k = f32[8]{0} constant({1, 2, 3, 4, 5, 6, 7, 8})
  y = f32[8]{0} add(x, k)
  z = f32[16]{0} concatenate(y, y), dimensions={0}
  c = f32[8]{0} copy(y)
  f1 = f32[8]{0} fusion(y), kind=kLoop, calls=loop_ok
  f2 = f32[8]{0} fusion(y, s), kind=kLoop, calls=loop_bcast
  cv = s32[8]{0} convert(y)
  ROOT t = (f32[16]{0}, f32[8]{0}, f32[8]{0}, f32[8]{0}, s32[8]{0}) tuple(z, c, f1, f2, cv)
}
"""


def test_can_share_operand_buffer_rules() -> None:
    m = parse_module(SHARE, verify=True)
    e = m.entry
    x, k, y = e.instruction("x"), e.instruction("k"), e.instruction("y")
    assert can_share_operand_buffer(x, y)            # elementwise user, same shape
    assert not can_share_operand_buffer(k, y)        # never a constant
    assert not can_share_operand_buffer(y, e.instruction("z"))   # different shape
    assert not can_share_operand_buffer(y, e.instruction("c"))   # copy never shares
    assert can_share_operand_buffer(y, e.instruction("f1"))      # elementwise loop fusion
    assert not can_share_operand_buffer(y, e.instruction("f2"))  # reverse is not elementwise
    assert not can_share_operand_buffer(y, e.instruction("cv"))  # element type differs
    assert not can_share_operand_buffer(x, e.instruction("z"))   # not an operand


def test_classic_buffers_and_live_out() -> None:
    m, d = classic()
    df = DataflowAnalysis(m)
    assert [b.instruction.name for b in df.buffers] == ["param", "negate", "exp", "add"]
    assert all(b.size == 16 for b in df.buffers)
    assert names(df.live_out) == ["add"]
    p = df.defined_at(d["param"])
    assert p is not None
    assert sorted(u.user.name for u in df.uses(p)) == ["exp", "negate"]


DECLARED = """
HloModule declared

add_f32 {
  l = f32[] parameter(0)
  r = f32[] parameter(1)
  ROOT s = f32[] add(l, r)
}

ENTRY main {
  x = f32[8]{0} parameter(0)
  y = f32[8]{0} negate(x)
  idx = s32[2,1]{1,0} parameter(1)
  upd = f32[2]{0} parameter(2)
  sc = f32[8]{0} scatter(y, idx, upd), update_window_dims={}, inserted_window_dims={0},
                 scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f32
  z = f32[8]{0} exponential(sc)
  cc = f32[8]{0} custom-call(z), custom_call_target="foo", output_to_operand_aliasing={{}: (0, {})}
  ROOT r = f32[8]{0} add(cc, x)
}
"""


def test_scatter_and_declared_output_to_operand_aliasing() -> None:
    m = parse_module(DECLARED, verify=True)
    df = DataflowAnalysis(m)
    e = m.entry
    sc, cc = e.instruction("sc"), e.instruction("cc")
    assert in_place_pairs(sc) == [(0, (), ())]
    assert in_place_pairs(cc) == [(0, (), ())]
    y, s, z, c = (df.defined_at(e.instruction(n)) for n in ("y", "sc", "z", "cc"))
    assert y is not None and s is not None and z is not None and c is not None
    assert df.must_alias(y, s) and df.must_alias(z, c) and not df.must_alias(s, z)
    # the reduce lambda of the scatter is embedded (thread-local)
    assert computation_kinds(m)[m.computation("add_f32")] == "embedded"


BIAS_GRAD = """
HloModule bias_grad

add_f32 {
  l = f32[] parameter(0)
  r = f32[] parameter(1)
  ROOT s = f32[] add(l, r)
}

dz_and_db {
  dh = f32[64,32]{1,0} parameter(0)
  x = f32[64,32]{1,0} parameter(1)
  one = f32[] constant(1)
  ones = f32[64,32]{1,0} broadcast(one), dimensions={}
  sq = f32[64,32]{1,0} multiply(x, x)
  d = f32[64,32]{1,0} subtract(ones, sq)
  dz = f32[64,32]{1,0} multiply(dh, d)
  zero = f32[] constant(0)
  db = f32[32]{0} reduce(dz, zero), dimensions={0}, to_apply=add_f32
  ROOT t = (f32[32]{0}, f32[64,32]{1,0}) tuple(db, dz)
}

softmax_like {
  s = f32[64,32]{1,0} parameter(0)
  z0 = f32[] constant(0)
  m = f32[64]{0} reduce(s, z0), dimensions={1}, to_apply=add_f32
  mb = f32[64,32]{1,0} broadcast(m), dimensions={0}
  e = f32[64,32]{1,0} subtract(s, mb)
  ROOT t2 = (f32[64]{0}, f32[64,32]{1,0}) tuple(m, e)
}

shifted {
  v = f32[64,32]{1,0} parameter(0)
  rv = f32[64,32]{1,0} reverse(v), dimensions={0}
  z1 = f32[] constant(0)
  sv = f32[32]{0} reduce(rv, z1), dimensions={0}, to_apply=add_f32
  ROOT t3 = (f32[32]{0}, f32[64,32]{1,0}) tuple(sv, v)
}

twice {
  p = f32[64,32]{1,0} parameter(0)
  q = f32[64,32]{1,0} parameter(1)
  z2 = f32[] constant(0)
  sp = f32[32]{0} reduce(q, z2), dimensions={0}, to_apply=add_f32
  n = f32[64,32]{1,0} negate(p)
  ROOT t4 = (f32[32]{0}, f32[64,32]{1,0}) tuple(sp, n)
}

ENTRY main {
  h0 = f32[64,32]{1,0} parameter(0)
  x0 = f32[64,32]{1,0} parameter(1)
  g = f32[64,32]{1,0} negate(h0)
  f = (f32[32]{0}, f32[64,32]{1,0}) fusion(g, x0), kind=kInput, calls=dz_and_db
  sm = (f32[64]{0}, f32[64,32]{1,0}) fusion(g), kind=kInput, calls=softmax_like
  sh = (f32[32]{0}, f32[64,32]{1,0}) fusion(g), kind=kInput, calls=shifted
  bc = f32[64,32]{1,0} bitcast(g)
  tw = (f32[32]{0}, f32[64,32]{1,0}) fusion(g, bc), kind=kInput, calls=twice
  ROOT r = ((f32[32]{0}, f32[64,32]{1,0}), (f32[64]{0}, f32[64,32]{1,0}),
            (f32[32]{0}, f32[64,32]{1,0}), (f32[32]{0}, f32[64,32]{1,0})) tuple(f, sm, sh, tw)
}
"""


def test_input_fusion_output_may_take_an_operand_its_reduce_reads_at_the_same_index() -> None:
    """A kInput fusion's elementwise output may reuse an operand that its reduce also reads,
    when every read of the operand is at the index being written (the bias gradient's
    fusion: dz over dh, db = column sum of dz); not when the reduce's result is read back
    inside (softmax-like), the operand is read at other indices (reverse), or another operand
    is the same storage (a bitcast of it)."""
    m = parse_module(BIAS_GRAD, verify=True)
    e = m.entry
    g = e.instruction("g")
    f = e.instruction("f")
    assert can_share_operand_buffer(g, f, (), (1,))
    assert can_share_operand_buffer(e.instruction("x0"), f, (), (1,))
    assert not can_share_operand_buffer(g, f, (), (0,))  # the reduce's output: other shape
    assert not can_share_operand_buffer(g, e.instruction("sm"), (), (1,))
    assert not can_share_operand_buffer(g, e.instruction("sh"), (), (1,))
    assert not can_share_operand_buffer(g, e.instruction("tw"), (), (1,))
