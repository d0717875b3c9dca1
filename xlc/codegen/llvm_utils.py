"""llvmlite helpers shared by the CPU and GPU backends.

What lives here: LLVM types for PrimitiveTypes, exact constants (scalars or splatted vectors),
intrinsic calls (with LLVM's name mangling, vector types included), loop helpers built on
llvmlite's IRBuilder (`for_range`, `for_nest`), host target machine creation, verification
(`LoweringError` carrying LLVM's message and the kernel name), O0-O3 optimisation through the new
pass builder, object/assembly emission, process-unique symbol names. (The CPU's MCJIT engine
is `xlc/backend_cpu/jit.py`.)

Value representation used by every emitter (`value_type`): pred -> i1, s*/u* -> iN,
f16 -> half, bf16 -> i16 (raw bits; llvmlite has no bfloat type), f32 -> float, f64 -> double,
c64/c128 -> {float, float} / {double, double}. In memory (`storage_type`) pred is i8.
"""
from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Sequence

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from xlc.errors import LoweringError, UnsupportedOpError
from xlc.hlo.shape import PrimitiveType

log = logging.getLogger("xlc.codegen")

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F16 = ir.HalfType()
F32 = ir.FloatType()
F64 = ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()

_VALUE_TYPES: dict[PrimitiveType, ir.Type] = {
    PrimitiveType.PRED: I1,
    PrimitiveType.S8: I8, PrimitiveType.U8: I8,
    PrimitiveType.S16: I16, PrimitiveType.U16: I16,
    PrimitiveType.S32: I32, PrimitiveType.U32: I32,
    PrimitiveType.S64: I64, PrimitiveType.U64: I64,
    PrimitiveType.F16: F16, PrimitiveType.BF16: I16,
    PrimitiveType.F32: F32, PrimitiveType.F64: F64,
    PrimitiveType.C64: ir.LiteralStructType([F32, F32]),
    PrimitiveType.C128: ir.LiteralStructType([F64, F64]),
}


# ---- types ---------------------------------------------------------------------------------
def value_type(pt: PrimitiveType) -> ir.Type:
    """The LLVM type of one element held in a register (pred is i1, bf16 is raw i16 bits).

    Raises UnsupportedOpError for element types without a value representation (token)."""
    try:
        return _VALUE_TYPES[pt]
    except KeyError:
        raise UnsupportedOpError(f"no LLVM value type for element type '{pt.text}'") from None


def storage_type(pt: PrimitiveType) -> ir.Type:
    """The LLVM type of one element in memory (pred is stored as one byte)."""
    return I8 if pt is PrimitiveType.PRED else value_type(pt)


def vector_of(ty: ir.Type, width: int) -> ir.VectorType:
    """`<width x ty>`."""
    return ir.VectorType(ty, width)


def scalar_type(ty: ir.Type) -> ir.Type:
    """The element type of a vector type, or the type itself."""
    return ty.element if isinstance(ty, ir.VectorType) else ty


def vector_width(ty: ir.Type) -> int:
    """Number of lanes (1 for scalars)."""
    return ty.count if isinstance(ty, ir.VectorType) else 1


def with_scalar(like: ir.Type, scalar: ir.Type) -> ir.Type:
    """`scalar`, or a vector of it with as many lanes as `like` has."""
    return ir.VectorType(scalar, like.count) if isinstance(like, ir.VectorType) else scalar


def is_float_type(ty: ir.Type) -> bool:
    """True for half/float/double scalars or vectors of them."""
    return isinstance(scalar_type(ty), (ir.HalfType, ir.FloatType, ir.DoubleType))


def float_bits(ty: ir.Type) -> int:
    """Bit width of a (vector of) half/float/double."""
    s = scalar_type(ty)
    if isinstance(s, ir.HalfType):
        return 16
    if isinstance(s, ir.FloatType):
        return 32
    if isinstance(s, ir.DoubleType):
        return 64
    raise LoweringError(f"expected a floating-point LLVM type, got {ty}")


# ---- constants ----------------------------------------------------------------------------
_NP_FLOAT = {16: np.float16, 32: np.float32, 64: np.float64}


def const(ty: ir.Type, value: float | int | bool) -> ir.Constant:
    """A constant of `ty` (splatted when `ty` is a vector).

    Floats are first rounded to the target precision with numpy, so the IR text holds the exact
    value as a 64-bit hex literal (LLVM rejects inexact float literals)."""
    s = scalar_type(ty)
    if isinstance(s, ir.IntType):
        v: float | int = int(value) & ((1 << s.width) - 1)
        if s.width > 1 and v >> (s.width - 1):
            v -= 1 << s.width
    else:
        v = float(_NP_FLOAT[float_bits(s)](value))
    c = ir.Constant(s, v)
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [c] * ty.count)
    return c


def const_like(value: ir.Value, v: float | int | bool) -> ir.Constant:
    """A constant with the same (vector) type as `value`."""
    return const(value.type, v)


# ---- intrinsics ---------------------------------------------------------------------------
def _mangle(ty: ir.Type) -> str:
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{_mangle(ty.element)}"
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    if isinstance(ty, ir.PointerType):
        return "p0"
    return {16: "f16", 32: "f32", 64: "f64"}[float_bits(ty)]


def intrinsic(builder: ir.IRBuilder, name: str, args: Sequence[ir.Value],
              ret: ir.Type | None = None, overloads: Sequence[ir.Type] | None = None,
              ) -> ir.Value:
    """Call the LLVM intrinsic `name` (e.g. 'llvm.fabs') on `args`.

    The name is mangled with `overloads` (default: the first argument's type), the return type
    defaults to the first argument's type. The declaration is added to the module once."""
    assert args, "intrinsics here take at least one argument"
    over = list(overloads) if overloads is not None else [args[0].type]
    full = name + "".join("." + _mangle(t) for t in over)
    module = builder.module
    fn = module.globals.get(full)
    if fn is None:
        fnty = ir.FunctionType(ret or args[0].type, [a.type for a in args])
        fn = ir.Function(module, fnty, name=full)
    return builder.call(fn, list(args))


# ---- loops --------------------------------------------------------------------------------
@contextlib.contextmanager
def for_range(builder: ir.IRBuilder, stop: ir.Value | int, start: ir.Value | int = 0,
              step: int = 1, name: str = "i") -> Iterator[ir.Value]:
    """`for (i = start; i < stop; i += step)` with an i64 (or `stop`'s type) induction variable.

    Inside the `with` body the builder is positioned in the loop body and the yielded value is
    the induction variable; afterwards it is positioned after the loop. Requires step > 0."""
    ty = stop.type if isinstance(stop, ir.Value) else I64
    stop_v = stop if isinstance(stop, ir.Value) else ir.Constant(ty, stop)
    start_v = start if isinstance(start, ir.Value) else ir.Constant(ty, start)
    pre = builder.basic_block
    cond_bb = builder.append_basic_block(f"{name}.cond")
    body_bb = builder.append_basic_block(f"{name}.body")
    end_bb = builder.append_basic_block(f"{name}.end")
    builder.branch(cond_bb)
    builder.position_at_end(cond_bb)
    idx = builder.phi(ty, name=name)
    idx.add_incoming(start_v, pre)
    builder.cbranch(builder.icmp_signed("<", idx, stop_v), body_bb, end_bb)
    builder.position_at_end(body_bb)
    yield idx
    nxt = builder.add(idx, ir.Constant(ty, step), name=f"{name}.next", flags=["nsw"])
    idx.add_incoming(nxt, builder.basic_block)
    builder.branch(cond_bb)
    builder.position_at_end(end_bb)


@contextlib.contextmanager
def for_nest(builder: ir.IRBuilder, dims: Sequence[int | ir.Value], name: str = "i",
             ) -> Iterator[list[ir.Value]]:
    """A loop nest over `dims` (outermost first); yields the list of i64 induction variables."""
    with contextlib.ExitStack() as stack:
        idx = [stack.enter_context(for_range(builder, d, name=f"{name}{k}"))
               for k, d in enumerate(dims)]
        yield idx


# ---- memory -------------------------------------------------------------------------------
def load_element(builder: ir.IRBuilder, base: ir.Value, offset: ir.Value,
                 pt: PrimitiveType, align: int | None = None) -> ir.Value:
    """Load element number `offset` of an array of `pt` at `base`; returns a value_type(pt)."""
    st = storage_type(pt)
    ptr = builder.gep(base, [offset], inbounds=True, source_etype=st)
    v = builder.load(ptr, typ=st, align=align or max(1, pt.byte_size))
    return builder.icmp_unsigned("!=", v, ir.Constant(I8, 0)) if pt is PrimitiveType.PRED else v


def store_element(builder: ir.IRBuilder, value: ir.Value, base: ir.Value, offset: ir.Value,
                  pt: PrimitiveType, align: int | None = None) -> None:
    """Store a value_type(pt) value as element number `offset` of the array at `base`."""
    st = storage_type(pt)
    if pt is PrimitiveType.PRED:
        value = builder.zext(value, I8)
    ptr = builder.gep(base, [offset], inbounds=True, source_etype=st)
    builder.store(value, ptr, align=align or max(1, pt.byte_size))


def splat(builder: ir.IRBuilder, scalar: ir.Value, width: int) -> ir.Value:
    """`<width x T>` with every lane equal to `scalar`."""
    vty = ir.VectorType(scalar.type, width)
    one = builder.insert_element(ir.Constant(vty, ir.Undefined), scalar, ir.Constant(I32, 0))
    return builder.shuffle_vector(one, ir.Constant(vty, ir.Undefined),
                                  ir.Constant(ir.VectorType(I32, width), [0] * width))


def load_vector(builder: ir.IRBuilder, base: ir.Value, offset: ir.Value, pt: PrimitiveType,
                width: int, align: int | None = None) -> ir.Value:
    """Load `width` consecutive elements of `pt` starting at element `offset` as a vector
    (pred is loaded as bytes and compared, giving `<width x i1>`)."""
    st = storage_type(pt)
    vty = ir.VectorType(st, width)
    ptr = builder.gep(base, [offset], inbounds=True, source_etype=st)
    v = builder.load(ptr, typ=vty, align=align or max(1, pt.byte_size))
    if pt is PrimitiveType.PRED:
        return builder.icmp_unsigned("!=", v, const(vty, 0))
    return v


def store_vector(builder: ir.IRBuilder, value: ir.Value, base: ir.Value, offset: ir.Value,
                 pt: PrimitiveType, align: int | None = None,
                 nontemporal: bool = False) -> None:
    """Store a vector of value_type(pt) to consecutive elements from element `offset`.

    `nontemporal` marks the store `!nontemporal` (streaming; cpu-perf.md lesson 3: needs an
    aligned full-vector store to pay off, e.g. 64 bytes for <16 x float>)."""
    st = storage_type(pt)
    if pt is PrimitiveType.PRED:
        value = builder.zext(value, ir.VectorType(I8, vector_width(value.type)))
    ptr = builder.gep(base, [offset], inbounds=True, source_etype=st)
    inst = builder.store(value, ptr, align=align or max(1, pt.byte_size))
    if nontemporal:
        inst.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(I32, 1)]))


# ---- target machine, verification, optimisation ------------------------------------------
_lock = threading.RLock()
_target_machines: dict[tuple[int, bool, bool], llvm.TargetMachine] = {}


def host_cpu() -> tuple[str, str]:
    """(cpu name, feature string) of the host, as LLVM sees them, plus `-prefer-256-bit` on
    AVX-512 CPUs.

    LLVM tunes Intel server CPUs (and the generic model names a VM may report) to vectorise with
    256-bit registers. Our kernels are polynomial math and reductions that stay in registers,
    where full 512-bit vectors pay: measured on a 2-core Xeon with AMX/AVX-512 (LLVM calls it
    "rocketlake"), `bench_elementwise_chain` 7.0 -> 4.7 ms and `bench_softmax` 2.85 -> 2.25 ms.
    AMD Zen 4/5 are tuned for 512-bit vectors already, so nothing changes there."""
    cpu = llvm.get_host_cpu_name()
    features = llvm.get_host_cpu_features().flatten()
    if "+avx512f" in features.split(","):
        features += ",-prefer-256-bit"
    return cpu, features


def has_vector_ldexp(module: ir.Module) -> bool:
    """Whether `llvm.ldexp` on float vectors is one instruction for `module`'s target: x86-64
    with AVX-512 (vscalefps/pd). Elsewhere LLVM may expand it into libm calls per lane, so
    the math functions scale by 2^n with integer bit operations instead."""
    return module.triple.startswith("x86_64") and "+avx512f" in host_cpu()[1].split(",")


def new_target_machine(opt: int = 3, jit: bool = False, pic: bool = False,
                       ) -> llvm.TargetMachine:
    """A new, uncached target machine for the host CPU with all its features, for a consumer
    that takes ownership of it (`llvm.create_mcjit_compiler` does)."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()  # inline assembly (vsort_kernels' knot)
    cpu, features = host_cpu()
    return llvm.Target.from_default_triple().create_target_machine(
        cpu=cpu, features=features, opt=opt, reloc="pic" if pic else "default",
        codemodel="jitdefault", jit=jit)


def target_machine(opt: int = 3, jit: bool = False, pic: bool = False) -> llvm.TargetMachine:
    """A cached target machine for the host CPU with all its features.

    `pic=True` gives position-independent code for object files that are saved and linked
    elsewhere; code added to the MCJIT engine must use the default relocation model (PIC code
    crashed in MCJIT once several modules were loaded)."""
    with _lock:
        key = (opt, jit, pic)
        tm = _target_machines.get(key)
        if tm is None:
            tm = new_target_machine(opt, jit, pic)
            _target_machines[key] = tm
        return tm


def new_module(name: str) -> ir.Module:
    """An empty llvmlite module with the host triple and data layout set."""
    mod = ir.Module(name=name)
    tm = target_machine()
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    return mod


def parse_and_verify(module: ir.Module | str, kernel_name: str,
                     verify: bool = True) -> llvm.ModuleRef:
    """Parse llvmlite IR (or IR text) into an LLVM module and verify it.

    Raises LoweringError("LLVM verification failed for kernel 'k': <LLVM's message>") when the
    IR does not parse or does not verify."""
    text = str(module)
    try:
        ref = llvm.parse_assembly(text)
        if verify:
            ref.verify()
    except RuntimeError as e:
        log.debug("bad IR for %s:\n%s", kernel_name, text)
        raise LoweringError(
            f"LLVM verification failed for kernel '{kernel_name}': {str(e).strip()}") from None
    ref.name = kernel_name
    tm = target_machine()
    ref.triple = tm.triple
    ref.data_layout = str(tm.target_data)
    return ref


def optimize(ref: llvm.ModuleRef, level: int = 3) -> llvm.ModuleRef:
    """Run the new-pass-manager pipeline at O`level` (0..3) with loop and SLP vectorisation
    for the host target, in place; returns `ref`."""
    if not 0 <= level <= 3:
        raise LoweringError(f"optimisation level must be 0..3, got {level}")
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    if level >= 2:
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_interleaving = True
        pto.loop_unrolling = True
    pb = llvm.create_pass_builder(target_machine(), pto)
    pb.getModulePassManager().run(ref, pb)
    if level >= 2:
        inline_vector_variants(ref, pb)
    return ref


def inline_vector_variants(ref: llvm.ModuleRef, pb: llvm.PassBuilder) -> None:
    """Inline the `alwaysinline` functions called after the O2/O3 pipeline's inliner ran: the
    vector variants the loop vectoriser calls (`xlc.codegen.trig_guard`)."""
    post = llvm.create_new_module_pass_manager()
    post.add_always_inliner_pass()
    post.run(ref, pb)


def emit_object(ref: llvm.ModuleRef, pic: bool = True) -> bytes:
    """Host object code (ELF, position-independent by default) of a (usually optimised)
    module."""
    return target_machine(pic=pic).emit_object(ref)


def emit_assembly(ref: llvm.ModuleRef) -> str:
    """Host assembly text of a module (for tests and dumps)."""
    return target_machine().emit_assembly(ref)


# ---- constant data ------------------------------------------------------------------------
def global_constant(module: ir.Module, const: ir.Constant, name: str) -> ir.GlobalVariable:
    """An internal constant global of `module` holding `const` (a unique name from `name`)."""
    gv = ir.GlobalVariable(module, const.type, module.get_unique_name(name))
    gv.global_constant = True
    gv.linkage = "internal"
    gv.initializer = const
    return gv


def c_string(module: ir.Module, text: str, name: str) -> ir.GlobalVariable:
    """A NUL-terminated constant string global (`const char*` for run-time callbacks)."""
    data = text.encode() + b"\0"
    return global_constant(module, ir.Constant(ir.ArrayType(I8, len(data)), bytearray(data)),
                           name)


# ---- symbols ------------------------------------------------------------------------------
_counter = iter(range(1 << 62))


def unique_symbol(base: str) -> str:
    """A process-unique symbol name starting with `base` (for JIT-compiled kernels)."""
    with _lock:
        return f"{base}_{next(_counter)}"
