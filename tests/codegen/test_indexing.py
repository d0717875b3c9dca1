"""The fused elemental IR emitter (xlc.codegen.indexing): loop kernels generated from fused
computations written as HLO text, run through MCJIT and compared with xlc.hlo.evaluator."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llvmlite import ir

from xlc.backend_cpu import jit
from xlc.codegen import llvm_utils as lu
from xlc.codegen.indexing import ElementalIrEmitter, linear_to_multi, multi_to_linear
from xlc.errors import UnsupportedOpError
from xlc.hlo.evaluator import evaluate
from xlc.hlo.ir import HloModule
from xlc.hlo.parser import parse_module
from xlc.hlo.shape import Shape

CASES = {
    "broadcast_transpose_exp": ("""
fused {
  p0 = f32[3]{0} parameter(0)
  p1 = f32[4,3]{1,0} parameter(1)
  b = f32[4,3]{1,0} broadcast(p0), dimensions={1}
  a = f32[4,3]{1,0} add(b, p1)
  t = f32[3,4]{1,0} transpose(a), dimensions={1,0}
  ROOT e = f32[3,4]{1,0} exponential(t)
}""", ["f32[3]{0}", "f32[4,3]{1,0}"], "f32[3,4]{1,0}"),
    "reshape_slice_reverse": ("""
fused {
  p0 = f32[2,6,5]{2,1,0} parameter(0)
  r = f32[12,5]{1,0} reshape(p0)
  s = f32[5,2]{1,0} slice(r), slice={[1:11:2], [0:5:3]}
  ROOT v = f32[5,2]{1,0} reverse(s), dimensions={0,1}
}""", ["f32[2,6,5]{2,1,0}"], "f32[5,2]{1,0}"),
    "pad_concatenate": ("""
fused {
  p0 = f32[3,4]{1,0} parameter(0)
  p1 = f32[1,4]{1,0} parameter(1)
  z = f32[] constant(-7.5)
  pd = f32[6,9]{1,0} pad(p0, z), padding=-1_4x2_0_1
  c = f32[6,4]{1,0} concatenate(p1, p0, p1, p1), dimensions={0}
  c2 = f32[6,13]{1,0} concatenate(pd, c), dimensions={1}
  ROOT n = f32[6,13]{1,0} negate(c2)
}""", ["f32[3,4]{1,0}", "f32[1,4]{1,0}"], "f32[6,13]{1,0}"),
    "iota_dynamic_slice_select": ("""
fused {
  p0 = s32[8,5]{1,0} parameter(0)
  i = s32[] parameter(1)
  j = s32[] parameter(2)
  ds = s32[3,4]{1,0} dynamic-slice(p0, i, j), dynamic_slice_sizes={3,4}
  io = s32[3,4]{1,0} iota(), iota_dimension=1
  cmp = pred[3,4]{1,0} compare(ds, io), direction=GT
  ROOT sel = s32[3,4]{1,0} select(cmp, ds, io)
}""", ["s32[8,5]{1,0}", "s32[]", "s32[]"], "s32[3,4]{1,0}"),
    "constant_convert_layouts": ("""
fused {
  p0 = f32[4,3]{0,1} parameter(0)
  k = f32[4,3]{1,0} constant({{1,2,3},{4,5,6},{7,8,9},{10,11,12}})
  m = f32[4,3]{1,0} multiply(p0, k)
  t = f32[3,4]{0,1} transpose(m), dimensions={1,0}
  h = f16[3,4]{0,1} convert(t)
  ROOT bc = f16[12]{0} bitcast(h)
}""", ["f32[4,3]{0,1}"], "f16[12]{0}"),
    "clamp_scalar_bounds_bf16": ("""
fused {
  p0 = bf16[5,7]{1,0} parameter(0)
  lo = bf16[] constant(-1.5)
  hi = bf16[] constant(2.25)
  c = bf16[5,7]{1,0} clamp(lo, p0, hi)
  ROOT t = bf16[5,7]{1,0} tanh(c)
}""", ["bf16[5,7]{1,0}"], "bf16[5,7]{1,0}"),
}


def _module(body: str, params: list[str], out: str) -> HloModule:
    args = ", ".join(f"a{i}" for i in range(len(params)))
    decls = "\n".join(f"  a{i} = {p} parameter({i})" for i, p in enumerate(params))
    text = (f"HloModule m\n{body}\n\nENTRY main {{\n{decls}\n"
            f"  ROOT f = {out} fusion({args}), kind=kLoop, calls=fused\n}}\n")
    return parse_module(text)


def _physical(arr: np.ndarray, shape: Shape) -> np.ndarray:
    """The buffer contents of `arr` in `shape`'s layout."""
    m2m = shape.layout.minor_to_major if shape.layout else tuple(range(arr.ndim - 1, -1, -1))
    return np.ascontiguousarray(arr.transpose(list(reversed(m2m))))


def _logical(buf: np.ndarray, shape: Shape) -> np.ndarray:
    m2m = shape.layout.minor_to_major if shape.layout else tuple(range(len(shape.dims) - 1,
                                                                       -1, -1))
    phys_dims = [shape.dims[d] for d in reversed(m2m)]
    inv = np.argsort(list(reversed(m2m)))
    return buf.reshape(phys_dims).transpose(inv)


def _emit_fusion_kernel(mod: ir.Module, name: str, fused) -> None:
    params = fused.parameters
    fnty = ir.FunctionType(lu.VOID, [lu.PTR] * (1 + len(params)))
    fn = ir.Function(mod, fnty, name=name)
    for a in fn.args:
        a.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    root = fused.root
    shapes = {p.parameter_number: p.shape for p in params}

    def read_param(n: int, index: list[ir.Value]) -> ir.Value:
        s = shapes[n]
        return lu.load_element(b, fn.args[1 + n], multi_to_linear(b, index, s), s.element_type)

    with lu.for_range(b, root.shape.num_elements) as i:
        em = ElementalIrEmitter(b, read_param)
        v = em.generate(root, linear_to_multi(b, i, root.shape))
        lu.store_element(b, v, fn.args[0], i, root.shape.element_type)
    b.ret_void()


@pytest.fixture(scope="module")
def compiled() -> dict:
    name = lu.unique_symbol("indexing_test")
    mod = lu.new_module(name)
    out = {}
    for k, (body, params, res) in CASES.items():
        m = _module(body, params, res)
        fused = m.entry.root.fused_computation
        sym = f"{name}_{k}"
        _emit_fusion_kernel(mod, sym, fused)
        out[k] = (m, sym)
    jit.compile_module(mod, name)
    return out


def _inputs(m: HloModule, rng: np.random.Generator) -> list[np.ndarray]:
    arrs = []
    for p in m.entry.parameters:
        s = p.shape
        if s.element_type.is_integer:
            arrs.append(rng.integers(-20, 20, size=s.dims).astype(s.dtype))
        else:
            arrs.append((rng.standard_normal(s.dims) * 2).astype(s.dtype))
    return arrs


@pytest.mark.parametrize("case", sorted(CASES))
def test_fusion_matches_evaluator(compiled: dict, case: str) -> None:
    m, sym = compiled[case]
    rng = np.random.default_rng(1)
    for trial in range(3):
        args = _inputs(m, rng)
        if case == "iota_dynamic_slice_select":  # starts in range, negative, past the end
            args[1][...] = [2, -4, 7][trial]
            args[2][...] = [1, 3, -2][trial]
        want = np.asarray(evaluate(m, args))
        root = m.entry.root
        out = np.empty(root.shape.num_elements, root.shape.dtype)
        bufs = [_physical(a, p.shape) for a, p in zip(args, m.entry.parameters)]
        proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (1 + len(bufs))))
        proto(jit.jit_engine().address(sym))(out.ctypes.data, *[x.ctypes.data for x in bufs])
        got = _logical(out, root.shape)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=1e-6 if root.shape.dtype.itemsize > 2 else 8e-3)


def test_unsupported_op_in_fusion_names_instruction() -> None:
    m = _module("""
fused {
  p0 = f32[4,4]{1,0} parameter(0)
  ROOT d = f32[4,4]{1,0} dot(p0, p0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", ["f32[4,4]{1,0}"], "f32[4,4]{1,0}")
    mod = lu.new_module("unsupported")
    with pytest.raises(UnsupportedOpError, match=r"no elemental IR emitter for 'dot' \(d\)"):
        _emit_fusion_kernel(mod, "k", m.entry.root.fused_computation)


def test_verification_error_names_kernel() -> None:
    mod = lu.new_module("bad")
    fn = ir.Function(mod, ir.FunctionType(lu.I32, []), name="broken_kernel")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(ir.Constant(lu.I64, 0))  # wrong return type
    from xlc.errors import LoweringError

    with pytest.raises(LoweringError, match="LLVM verification failed for kernel 'bad_k'"):
        lu.parse_and_verify(mod, "bad_k")


def test_for_nest_and_index_round_trip() -> None:
    """for_nest over a [3,4,5] array with layout {0,2,1}: multi_to_linear then
    linear_to_multi gives back the loop indices; each element stores its physical offset."""
    from xlc.hlo.parser import parse_shape
    from xlc.hlo.shape import PrimitiveType

    shape = parse_shape("s64[3,4,5]{0,2,1}")
    name = lu.unique_symbol("nest")
    mod = lu.new_module(name)
    fn = ir.Function(mod, ir.FunctionType(lu.VOID, [lu.PTR, lu.PTR]), name=name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    with lu.for_nest(b, shape.dims) as idx:
        lin = multi_to_linear(b, idx, shape)
        back = linear_to_multi(b, lin, shape)
        ok = b.and_(b.and_(b.icmp_signed("==", back[0], idx[0]),
                           b.icmp_signed("==", back[1], idx[1])),
                    b.icmp_signed("==", back[2], idx[2]))
        lu.store_element(b, lin, fn.args[0], lin, shape.element_type)
        lu.store_element(b, ok, fn.args[1], lin, PrimitiveType.PRED)
    b.ret_void()
    jit.compile_module(mod, name)
    out = np.full(60, -1, np.int64)
    ok_buf = np.zeros(60, np.bool_)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(jit.jit_engine().address(name))(
        out.ctypes.data, ok_buf.ctypes.data)
    np.testing.assert_array_equal(out, np.arange(60))
    assert ok_buf.all()
    # the element at logical (i, j, k) sits at physical offset of layout {0,2,1}: j major
    logical = _logical(out, shape)
    assert logical[1, 2, 3] == (2 * 5 + 3) * 3 + 1


# ---- property test: random chains of data-movement ops ------------------------------------


def _txt(dims: list[int]) -> str:
    return "f32[" + ",".join(map(str, dims)) + "]"


@st.composite
def _movement_chain(draw: st.DrawFn) -> tuple[str, list[int], tuple[int, ...]]:
    """HLO fused-computation text applying 1-4 random movement ops to a random parameter."""
    rank = draw(st.integers(1, 3))
    dims = [draw(st.integers(1, 5)) for _ in range(rank)]
    layout = tuple(draw(st.permutations(list(range(rank)))))
    lines = [f"  v0 = {_txt(dims)}{{{','.join(map(str, layout))}}} parameter(0)"]
    cur = list(dims)
    for k in range(1, draw(st.integers(1, 4)) + 1):
        kind = draw(st.sampled_from(["transpose", "reverse", "slice", "pad", "reshape",
                                     "broadcast", "concatenate"]))
        r = len(cur)
        src = f"v{k - 1}"
        if kind == "transpose":
            perm = draw(st.permutations(list(range(r))))
            new = [cur[p] for p in perm]
            attr = f"transpose({src}), dimensions={{{','.join(map(str, perm))}}}"
        elif kind == "reverse":
            ds = sorted(draw(st.sets(st.integers(0, r - 1), min_size=1)))
            new, attr = cur, f"reverse({src}), dimensions={{{','.join(map(str, ds))}}}"
        elif kind == "slice":
            parts, new = [], []
            for d in cur:
                a = draw(st.integers(0, d - 1))
                bnd = draw(st.integers(a + 1, d))
                s = draw(st.integers(1, 3))
                parts.append(f"[{a}:{bnd}:{s}]")
                new.append((bnd - a + s - 1) // s)
            attr = f"slice({src}), slice={{{', '.join(parts)}}}"
        elif kind == "pad":
            parts, new = [], []
            for d in cur:
                lo = draw(st.integers(-1 if d > 1 else 0, 2))
                hi = draw(st.integers(0, 2))
                it = draw(st.integers(0, 1))
                parts.append(f"{lo}_{hi}_{it}")
                new.append(d + lo + hi + it * (d - 1))
            lines.append(f"  z{k} = f32[] constant(-3.5)")
            attr = f"pad({src}, z{k}), padding={'x'.join(parts)}"
        elif kind == "reshape":
            n = 1
            for d in cur:
                n *= d
            first = draw(st.sampled_from([f for f in range(1, n + 1) if n % f == 0]))
            new = [first, n // first] if draw(st.booleans()) else [n]
            attr = f"reshape({src})"
        elif kind == "broadcast":
            pos = draw(st.integers(0, r))
            new = cur[:pos] + [draw(st.integers(1, 3))] + cur[pos:]
            keep = [i for i in range(r + 1) if i != pos]
            attr = f"broadcast({src}), dimensions={{{','.join(map(str, keep))}}}"
        else:
            d = draw(st.integers(0, r - 1))
            new = list(cur)
            new[d] *= 2
            attr = f"concatenate({src}, {src}), dimensions={{{d}}}"
        lines.append(f"  v{k} = {_txt(new)} {attr}")
        cur = new
    last = len([ln for ln in lines if ln.strip().startswith("v")]) - 1
    lines.append(f"  ROOT out = {_txt(cur)} negate(v{last})")
    return "fused {\n" + "\n".join(lines) + "\n}", dims, layout


@settings(max_examples=25, deadline=None)
@given(_movement_chain())
def test_random_movement_chains_match_evaluator(chain: tuple) -> None:
    body, dims, layout = chain
    param = f"{_txt(dims)}{{{','.join(map(str, layout))}}}"
    out_dims = body.split("ROOT out = ")[1].split(" ")[0]
    m = _module(body, [param], out_dims)
    name = lu.unique_symbol("chain")
    mod = lu.new_module(name)
    _emit_fusion_kernel(mod, name, m.entry.root.fused_computation)
    jit.compile_module(mod, name, opt_level=1)
    x = np.random.default_rng(0).standard_normal(dims).astype(np.float32)
    want = np.asarray(evaluate(m, [x]))
    root = m.entry.root
    out = np.empty(root.shape.num_elements, np.float32)
    buf = _physical(x, m.entry.parameters[0].shape)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(jit.jit_engine().address(name))(
        out.ctypes.data, buf.ctypes.data)
    np.testing.assert_array_equal(_logical(out, root.shape), want, err_msg=body)
