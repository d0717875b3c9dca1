"""User custom-call targets (`xlc.ffi`) on the CPU: binding their code to the symbols compiled
programs call, the call itself, and what `.xlc` files carry.

A custom-call of a registered C target T compiles to

    rc = xlc_ffi.T(args, nargs, results, nresults, attrs, error)

with `xlc_buffer` descriptors (`xlc/ffi/xlc_ffi.h`: dtype, rank, dims, data) built in the
calling function's frame, the backend_config text as `attrs` and a 256-byte error buffer; a
non-zero `rc` calls `xlc_ffi_failed` (`host_call.py`), which keeps a CustomCallError that the
executable raises when the call returns. `bind` makes `xlc_ffi.T` resolve to the target's
function: a shared library's symbol (ctypes) or the symbol of the target's object code linked
into an engine of its own. Python targets run as host calls instead.

Buffers are passed in row-major order: a custom-call of a C target whose operands or results
have other layouts is refused at compile time (UnsupportedOpError naming it).
"""
from __future__ import annotations

import ctypes
import json
import logging
import threading
from typing import Any

from llvmlite import ir

from xlc.codegen import llvm_utils as lu
from xlc.errors import ArgumentError, ArtifactError, UnsupportedOpError
from xlc.hlo import ffi_registry
from xlc.hlo.ffi_registry import SYMBOL_PREFIX, FfiTarget
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import PrimitiveType, Shape, physical_order

log = logging.getLogger("xlc.backend_cpu")

FFI_PREFIX = "code/ffi/"
"""`.xlc` members of object targets: `<prefix><name>.o` and `<prefix><name>.json`."""

DTYPE_CODES = {PrimitiveType.PRED: 1, PrimitiveType.S8: 2, PrimitiveType.S16: 3,
               PrimitiveType.S32: 4, PrimitiveType.S64: 5, PrimitiveType.U8: 6,
               PrimitiveType.U16: 7, PrimitiveType.U32: 8, PrimitiveType.U64: 9,
               PrimitiveType.F16: 10, PrimitiveType.F32: 11, PrimitiveType.F64: 12,
               PrimitiveType.C64: 15, PrimitiveType.BF16: 16, PrimitiveType.C128: 18}
"""`enum xlc_dtype` of xlc_ffi.h: XLA's PrimitiveType numbers."""

ERROR_SIZE = 256

_lock = threading.Lock()
_bound: dict[str, str] = {}        # link symbol -> fingerprint bound
_keep: list[Any] = []              # CDLL handles and engines of bound targets


# ---- binding ------------------------------------------------------------------------------
def _object_address(obj: bytes, symbol: str, what: str) -> int:
    from xlc.backend_cpu.jit import linked_engine

    engine = linked_engine(obj, f"{what}: its object code")
    address = engine.get_function_address(symbol)
    if not address:
        raise ArgumentError(f"{what}: the object code has no function '{symbol}'")
    _keep.append(engine)
    return int(address)


def bind(target: FfiTarget, obj: bytes | None = None, symbol: str | None = None) -> None:
    """Make `xlc_ffi.<name>` resolve to `target`'s function (or to `symbol` of `obj`, object
    code carried by a `.xlc` file). Rebinding the same code is free."""
    import llvmlite.binding as llvm

    code = obj if obj is not None else target.obj
    sym = symbol or target.symbol
    fp = ffi_registry.fingerprint("object", sym, code) if obj is not None \
        else target.fingerprint
    what = f"custom-call target '{target.name}'"
    with _lock:
        if _bound.get(target.link_symbol) == fp:
            return
        if target.kind == "library" and obj is None:
            lib = ctypes.CDLL(target.path)
            address = ctypes.cast(getattr(lib, sym), ctypes.c_void_p).value
            _keep.append(lib)
        elif target.kind == "object" or obj is not None:
            address = _object_address(code, sym, what)
        else:
            raise UnsupportedOpError(f"{what} is a Python function: it runs as a host call")
        llvm.add_symbol(target.link_symbol, int(address or 0))
        _bound[target.link_symbol] = fp
        log.debug("bound %s to %s", target.link_symbol, sym)


def check_object_symbol(target: FfiTarget) -> None:
    """ArgumentError unless `target`'s object code links and defines its symbol (binds it)."""
    bind(target)


# ---- the call -----------------------------------------------------------------------------
def _row_major(shape: Shape) -> bool:
    return physical_order(shape) == list(range(shape.rank))


def _dims(module: ir.Module, dims: tuple[int, ...]) -> ir.Value:
    const = ir.Constant(ir.ArrayType(lu.I64, max(len(dims), 1)), list(dims) or [0])
    return lu.global_constant(module, const, "ffi.dims")


def emit_ffi_call(em: Any, ctx: Any, inst: HloInstruction, target: FfiTarget) -> None:
    """Emit custom-call `inst` as a call of C target `target` (see the module docstring)."""
    from xlc.backend_cpu.host_call import declare_ffi_failed, ensure_registered

    results = list(inst.shape.tuple_shapes or ()) if inst.shape.is_tuple else [inst.shape]
    shapes = [o.shape for o in inst.operands] + results
    for s in shapes:
        if not s.is_array or s.element_type not in DTYPE_CODES:
            raise UnsupportedOpError(f"custom-call '{inst.name}' of target '{target.name}': "
                                     f"{s} cannot be passed as an xlc_buffer")
        if not _row_major(s):
            raise UnsupportedOpError(f"custom-call '{inst.name}' of target '{target.name}': "
                                     f"the C calling convention passes row-major buffers, not "
                                     f"{s}")
    bind(target)
    ensure_registered()
    b = ctx.b
    module = b.module
    leaves: list[tuple[HloInstruction, tuple[int, ...]]] = [(o, ()) for o in inst.operands]
    leaves += [(inst, (i,)) for i in range(len(results))] if inst.shape.is_tuple \
        else [(inst, ())]
    n_in = len(inst.operands)
    with b.goto_entry_block():
        # xlc_buffer {i32 dtype; i32 rank; ptr dims; ptr data} as three i64 words each
        # (little-endian: dtype in the low half of the first)
        bufs = b.alloca(lu.I64, size=3 * len(leaves), name="ffi.buffers")
        err = b.alloca(lu.I8, size=ERROR_SIZE, name="ffi.error")

    def word(k: int) -> ir.Value:
        return b.gep(bufs, [ir.Constant(lu.I64, k)], source_etype=lu.I64)

    for i, ((x, index), shape) in enumerate(zip(leaves, shapes)):
        code = DTYPE_CODES[shape.element_type]  # type: ignore[index]
        b.store(ir.Constant(lu.I64, code | (shape.rank << 32)), word(3 * i))
        b.store(b.ptrtoint(_dims(module, shape.dims), lu.I64), word(3 * i + 1))
        b.store(b.ptrtoint(em.address(ctx, x, index), lu.I64), word(3 * i + 2))
    b.store(ir.Constant(lu.I8, 0), err)
    attrs = lu.c_string(module, _config_text(inst), "ffi.attrs")
    name = lu.c_string(module, target.name, "ffi.target")
    fnty = ir.FunctionType(lu.I32, [lu.PTR, lu.I64, lu.PTR, lu.I64, lu.PTR, lu.PTR])
    fn = module.globals.get(target.link_symbol) or ir.Function(module, fnty,
                                                              name=target.link_symbol)
    rc = b.call(fn, [b.bitcast(bufs, lu.PTR), ir.Constant(lu.I64, n_in),
                     b.bitcast(word(3 * n_in), lu.PTR),
                     ir.Constant(lu.I64, len(leaves) - n_in), b.bitcast(attrs, lu.PTR), err])
    with b.if_then(b.icmp_signed("!=", rc, ir.Constant(lu.I32, 0))):
        b.call(declare_ffi_failed(module), [b.bitcast(name, lu.PTR), rc, err])


def _config_text(inst: HloInstruction) -> str:
    text = inst.get_extra("backend_config") or ""
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = json.loads(text)  # HLO's quoted string: C-style escapes
    return text


# ---- .xlc files ---------------------------------------------------------------------------
def ffi_symbols(symbols: list[str]) -> list[str]:
    """The target names that undefined `symbols` of compiled code call."""
    return sorted(s[len(SYMBOL_PREFIX):] for s in symbols if s.startswith(SYMBOL_PREFIX))


def pack_members(names: list[str], where: str = "the program") -> dict[str, bytes]:
    """`.xlc` members for the targets `names` that the code calls: object code travels; a
    shared-library target must be registered where the file is loaded."""
    members: dict[str, bytes] = {}
    for name in names:
        t = ffi_registry.lookup(name, "cpu")
        if t is None:
            raise ArtifactError(f"{where} calls custom-call target '{name}', which is no "
                                "longer registered")
        meta = {"kind": t.kind, "symbol": t.symbol, "source": t.source,
                "fingerprint": t.fingerprint}
        members[f"{FFI_PREFIX}{name}.json"] = json.dumps(meta, sort_keys=True).encode()
        if t.kind == "object":
            members[f"{FFI_PREFIX}{name}.o"] = t.obj
    return members


def link_members(names: list[str], members: dict[str, bytes], where: str) -> None:
    """Bind every target the loaded code calls: from the file's object code, else from this
    process's registration; ArtifactError naming a target that is neither."""
    for name in names:
        obj = members.get(f"{FFI_PREFIX}{name}.o")
        meta_raw = members.get(f"{FFI_PREFIX}{name}.json")
        t = ffi_registry.lookup(name, "cpu")
        if obj is not None and meta_raw is not None:
            meta = json.loads(meta_raw)
            stub = t if t is not None else FfiTarget(name, "cpu", "object",
                                                     symbol=meta["symbol"])
            bind(stub, obj=obj, symbol=str(meta["symbol"]))
        elif t is not None and t.kind in ("library", "object"):
            bind(t)
        else:
            raise ArtifactError(f"{where}: the program calls custom-call target '{name}', "
                                "which is not registered in this process (register it with "
                                "xlc.ffi.register before loading)")
