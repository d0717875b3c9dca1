"""Where the Payne-Hanek reductions of `xlc.codegen.trig_reduction` run: only when needed.

sin/cos/tan reduce by Cody-Waite (cheap, accurate below 2^25 (f32) / 2^48 (f64)); the
huge-argument form costs 3x (f32) to 6x (f64) a bounded sin, so `emit_trig` computes the
bounded form and then fixes up the lanes from the threshold up behind a branch taken only
when some lane of the vector needs it (`guarded`: the lanes' compare is or-reduced by a
bitcast of the `<n x i1>` mask to an integer, one `kortest` on x86).

On NVPTX every thread runs scalar code and the branch is taken per warp where needed. On CPU
targets the emitters produce scalar element code that LLVM's loop vectoriser vectorises, and
the vectoriser if-converts a branch in a loop body (both sides computed, then a select), which
would bring the cost back. So there the fix-up of a scalar is a call of an internal
`noinline` function `fix(x, bounded result)` with vector variants of the host's vector widths
announced by the `vector-function-abi-variant` attribute (`call_with_vector_variants`): the
vectoriser vectorises the bounded form inline as usual and calls the variant of its width
for the fix-up, the variants are inlined after it (`llvm_utils.inline_vector_variants`), and
inside them the guard tests all lanes at once. The huge form of a vector is an out-of-line
call (`_out_of_line`), so only x and the result live across the branch and the loop keeps
its constants in registers as the bounded loop does.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from llvmlite import ir

from xlc.codegen import llvm_utils as lu
from xlc.codegen.trig_reduction import THRESHOLD, THRESHOLD_F64

_PURE = ("memory(none)", "nounwind", "willreturn")
"""Attributes of the out-of-line functions (the f64 huge form reads only a constant table),
which the vectoriser needs to call them; llvmlite's list lacks them, so they are added as
text."""

Body = Callable[[ir.IRBuilder, list[ir.Value]], ir.Value]
TrigBody = Callable[[ir.IRBuilder, ir.Value, bool], ir.Value]


def any_lane(b: ir.IRBuilder, mask: ir.Value) -> ir.Value:
    """An i1 that is true when any lane of `mask` (i1 or <n x i1>) is: the mask bitcast to an
    n-bit integer and compared with 0 (x86: one `kortest`)."""
    if not isinstance(mask.type, ir.VectorType):
        return mask
    ity = ir.IntType(mask.type.count)
    return b.icmp_unsigned("!=", b.bitcast(mask, ity), ir.Constant(ity, 0))


def guarded(b: ir.IRBuilder, mask: ir.Value, fast: tuple[ir.Value, ...],
            slow: Callable[[], tuple[ir.Value, ...]]) -> tuple[ir.Value, ...]:
    """Per lane, `slow()`'s values where `mask` is set and `fast`'s elsewhere; `slow()` is
    emitted in a block of its own, entered (an unlikely branch) only when some lane of `mask`
    is set, so the common case pays one compare and branch instead of the slow code. The
    results are phis in the block after it (the builder is left there)."""
    entry = b.block
    with b.if_then(any_lane(b, mask), likely=False):
        picked = [b.select(mask, s, f) for s, f in zip(slow(), fast, strict=True)]
        slow_end = b.block
    out = []
    for f, p in zip(fast, picked, strict=True):
        phi = b.phi(f.type)
        phi.add_incoming(p, slow_end)
        phi.add_incoming(f, entry)
        out.append(phi)
    return tuple(out)


def _loop_vectorised(module: ir.Module) -> bool:
    """Whether `module`'s scalar element code is vectorised by LLVM's loop vectoriser (CPU
    targets; NVPTX threads stay scalar)."""
    return not module.triple.startswith("nvptx")


def _vector_bits() -> tuple[int, ...]:
    """The vector widths the loop vectoriser picks on the host: its widest registers (the main
    loop; `llvm_utils.host_cpu` keeps AVX-512 at 512 bits) and half of them (the epilogue).
    Each width costs a copy of the code to compile, so no others are offered."""
    features = lu.host_cpu()[1].split(",")
    top = 512 if "+avx512f" in features else 256 if "+avx" in features else 128
    return (top // 2, top)


def _module_function(module: ir.Module, prefix: str, make: Callable[[str], ir.Function]
                     ) -> ir.Function:
    """The function `prefix<n>` of `module`, made by `make(name)` the first time: one per
    module, its name unique in the process (the JIT refuses a name defined twice)."""
    for name, g in module.globals.items():
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            return g
    return make(prefix + lu.unique_symbol("fn").rsplit("_", 1)[1])


def _define(module: ir.Module, name: str, ty: ir.Type, nargs: int, inline: str,
            body: Body) -> ir.Function:
    """An internal function `ty name(ty, ...)` (nargs arguments) returning `body`'s value."""
    fn = ir.Function(module, ir.FunctionType(ty, [ty] * nargs), name=name)
    fn.linkage = "internal"
    for attr in (*_PURE, inline):
        set.add(fn.attributes, attr)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(body(b, list(fn.args)))
    return fn


def _keep(module: ir.Module, fns: list[ir.Function]) -> None:
    """Add `fns` to `@llvm.compiler.used`: the vector variants have no caller until the loop
    vectoriser calls them, so without it they would be dropped as dead before it runs."""
    gv = module.globals.get("llvm.compiler.used")
    old = list(gv.initializer.constant) if gv is not None else []
    aty = ir.ArrayType(lu.PTR, len(old) + len(fns))
    if gv is None:
        gv = ir.GlobalVariable(module, aty, name="llvm.compiler.used")
        gv.linkage = "appending"
        gv.section = "llvm.metadata"
    gv.value_type = aty
    gv.initializer = ir.Constant(aty, old + fns)


def _type_tag(x: ir.Value) -> str:
    return f"f{lu.float_bits(x.type)}"


def call_with_vector_variants(b: ir.IRBuilder, name: str, args: list[ir.Value],
                              body: Body) -> ir.Value:
    """`body(b, args)` (values of one float type): inline for vectors and NVPTX; for scalars
    in CPU code a call of `xlc.<name>.<type>.<n>` (noinline) whose vector variants (`.v16`
    and `.v8` for f32 on AVX-512, see `_vector_bits`) the loop vectoriser calls instead."""
    module = b.module
    x = args[0]
    if isinstance(x.type, ir.VectorType) or not _loop_vectorised(module):
        return body(b, args)
    bits = lu.float_bits(x.type)

    def make(sname: str) -> ir.Function:
        fn = _define(module, sname, x.type, len(args), "noinline", body)
        variants = [_define(module, f"{sname}.v{n // bits}", ir.VectorType(x.type, n // bits),
                            len(args), "alwaysinline", body)
                    for n in _vector_bits() if n // bits >= 2]
        _keep(module, variants)
        abi = ",".join(f"_ZGV_LLVM_N{v.args[0].type.count}{'v' * len(args)}_{sname}({v.name})"
                       for v in variants)
        set.add(fn.attributes, f'"vector-function-abi-variant"="{abi}"')
        return fn
    return b.call(_module_function(module, f"xlc.{name}.{_type_tag(x)}.", make), args)


def _out_of_line(b: ir.IRBuilder, name: str, x: ir.Value,
                 body: Callable[[ir.IRBuilder, ir.Value], ir.Value]) -> ir.Value:
    """`body(b, x)`, for a vector in CPU code as a call of a noinline function
    `xlc.<name>.<type>x<lanes>.<n>` (its many live values stay out of the loop), inline
    elsewhere."""
    module = b.module
    if not isinstance(x.type, ir.VectorType) or not _loop_vectorised(module):
        return body(b, x)

    def make(sname: str) -> ir.Function:
        return _define(module, sname, x.type, 1, "noinline", lambda bb, v: body(bb, v[0]))
    prefix = f"xlc.{name}.{_type_tag(x)}x{x.type.count}."
    return b.call(_module_function(module, prefix, make), [x])


def _threshold(x: ir.Value) -> float:
    return THRESHOLD if lu.float_bits(x.type) == 32 else THRESHOLD_F64


def _fix_huge(b: ir.IRBuilder, name: str, x: ir.Value, res: ir.Value, body: TrigBody
              ) -> ir.Value:
    """`res` (the bounded form's result) with the lanes where threshold <= |x| < inf replaced
    by the huge form's, which runs only when some lane needs it (inf and NaN lanes keep the
    bounded form's NaN)."""
    ax = lu.intrinsic(b, "llvm.fabs", [x])
    big = b.and_(b.fcmp_ordered(">=", ax, lu.const(ax.type, _threshold(x))),
                 b.fcmp_ordered("<", ax, lu.const(ax.type, math.inf)))
    (out,) = guarded(b, big, (res,), lambda: (_out_of_line(
        b, f"{name}_huge", x, lambda bb, v: body(bb, v, True)),))
    return out


def emit_trig(b: ir.IRBuilder, name: str, x: ir.Value, arg_range: tuple[float, float],
              body: TrigBody) -> ir.Value:
    """sin/cos/tan `name` of `x`, where `body(b, x, huge)` builds the bounded (Cody-Waite)
    or the huge (Payne-Hanek) form: the bounded form, plus the guarded fix-up unless
    `arg_range` keeps |x| below the threshold of x's type."""
    res = body(b, x, False)
    if max(abs(arg_range[0]), abs(arg_range[1])) < _threshold(x):
        return res
    return call_with_vector_variants(b, f"{name}_fix", [x, res],
                                     lambda bb, v: _fix_huge(bb, name, v[0], v[1], body))
