"""Host calls: custom-calls that compiled CPU code runs by calling back into Python.

JAX's LAPACK targets (`xlc/hlo/lapack.py`, on scipy's LAPACK) run this way. The kernel of
such a custom-call is one call

    i32 xlc_host_call(ptr desc, ptr buffers)

where `desc` is a constant C string describing the call (JSON: target, backend_config and
every operand and result shape with its layout) and `buffers` the addresses of the operands'
buffers followed by the results' (one per result array, in tuple order). `xlc_host_call` is a
ctypes callback registered in the process (`ensure_registered`, once); it decodes `desc`
(cached), views the buffers as numpy arrays in their logical order, runs the target's handler
(`xlc.hlo.host_calls`: LAPACK and Python targets) on copies of the operands and writes the
results. The descriptor is plain data,
so a `.xlc` file holding host calls loads in another process as long as the target is known
there.

The compiled code cannot stop halfway, so a handler's exception is kept (per thread) and
returned 1; the executable raises it when the call returns (`raise_pending`), as an XlcError
naming the target.
"""
from __future__ import annotations

import ctypes
import logging
import threading
from typing import Any

import numpy as np
from llvmlite import ir

from xlc.codegen import llvm_utils as lu
from xlc.errors import CustomCallError, UnsupportedOpError
from xlc.hlo import host_calls
from xlc.hlo.ir import HloInstruction
from xlc.hlo.shape import Shape

log = logging.getLogger("xlc.backend_cpu")

SYMBOL = "xlc_host_call"

HostCallError = CustomCallError
"""A host call (a custom-call run in Python: a LAPACK target, a Python FFI target) failed."""


# ---- the callback -------------------------------------------------------------------------
_pending = threading.local()
_CALLBACK_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_char_p,
                                  ctypes.POINTER(ctypes.c_void_p))
_FAILED_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int32, ctypes.c_char_p)
FAILED_SYMBOL = "xlc_ffi_failed"
_lock = threading.Lock()
_callback: Any = None
_failed_callback: Any = None


def _view(address: int, shape: Shape) -> np.ndarray:
    """The array at `address` in `shape`'s layout, indexed logically (a view)."""
    count = int(np.prod(shape.dims, dtype=np.int64))
    dtype = shape.element_type.dtype  # type: ignore[union-attr]
    if count == 0:
        return np.zeros(shape.dims, dtype)
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(address)
    return host_calls.logical_view(np.frombuffer(memoryview(raw), dtype=dtype, count=count),
                                   shape)


def _dispatch(desc: bytes, buffers: Any) -> int:
    try:
        text = desc.decode()
        _call, op_shapes, res_shapes, _handler = host_calls.decode(text)
        n = len(op_shapes)
        operands = [_view(buffers[i], s).copy() for i, s in enumerate(op_shapes)]
        outs = host_calls.run(text, operands)
        for i, (shape, value) in enumerate(zip(res_shapes, outs)):
            _view(buffers[n + i], shape)[...] = np.asarray(value)
        return 0
    except BaseException as e:  # noqa: BLE001 - kept and raised after the call returns
        if getattr(_pending, "error", None) is None:
            _pending.error = (desc, e)
        return 1


def _ffi_failed(target: bytes, code: int, message: bytes) -> None:
    """`void xlc_ffi_failed(const char* target, int32 code, const char* message)`: a C target
    returned `code`; keep the error for `raise_pending`."""
    if getattr(_pending, "error", None) is None:
        text = (message or b"").decode(errors="replace").strip() or "no message"
        _pending.error = (target, CustomCallError(
            f"custom-call target '{target.decode(errors='replace')}' returned error {code}: "
            f"{text}"))


def ensure_registered() -> None:
    """Make `xlc_host_call` and `xlc_ffi_failed` resolvable by compiled and loaded code
    (once per process)."""
    global _callback, _failed_callback
    import llvmlite.binding as llvm

    with _lock:
        if _callback is None:
            _callback = _CALLBACK_TYPE(_dispatch)
            llvm.add_symbol(SYMBOL, ctypes.cast(_callback, ctypes.c_void_p).value)
            _failed_callback = _FAILED_TYPE(_ffi_failed)
            llvm.add_symbol(FAILED_SYMBOL,
                            ctypes.cast(_failed_callback, ctypes.c_void_p).value)


def declare_ffi_failed(module: ir.Module) -> ir.Function:
    """`xlc_ffi_failed` declared in `module` (once)."""
    fn = module.globals.get(FAILED_SYMBOL)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [lu.PTR, lu.I32, lu.PTR]),
                         name=FAILED_SYMBOL)
    return fn


def raise_pending() -> None:
    """Raise the HostCallError of a host call that failed on this thread since the last
    check, if any."""
    failed = getattr(_pending, "error", None)
    if failed is None:
        return
    _pending.error = None
    desc, e = failed
    raise host_calls.failure(desc.decode(), e) from e


# ---- emission ----------------------------------------------------------------------------
def emit_host_call(em: Any, ctx: Any, inst: HloInstruction) -> None:
    """Emit custom-call `inst` as a host call (module docstring) at `ctx`'s position."""
    target = str(inst.attrs.get("custom_call_target", ""))
    if host_calls.handler_for(target) is None:
        raise UnsupportedOpError(f"CPU backend has no host implementation of custom-call "
                                 f"target '{target}' ({inst.name})")
    ensure_registered()
    b = ctx.b
    module = b.module
    desc = lu.c_string(module, host_calls.describe(inst), "host_call.desc")
    leaves: list[tuple[HloInstruction, tuple[int, ...]]] = [(o, ()) for o in inst.operands]
    if inst.shape.is_tuple:
        leaves += [(inst, (i,)) for i in range(len(inst.shape.tuple_shapes or ()))]
    else:
        leaves.append((inst, ()))
    with b.goto_entry_block():
        table = b.alloca(lu.PTR, size=len(leaves), name="host_call.buffers")
    for i, (x, index) in enumerate(leaves):
        b.store(em.address(ctx, x, index), b.gep(table, [ir.Constant(lu.I64, i)],
                                                 source_etype=lu.PTR))
    fn = module.globals.get(SYMBOL)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(lu.I32, [lu.PTR, lu.PTR]), name=SYMBOL)
    b.call(fn, [b.bitcast(desc, lu.PTR), table])
