"""custom-call on the GPU.

* A PTX kernel registered for the GPU (`xlc.ffi.register(..., backend="gpu", ptx=...)`) is
  launched as a `KernelThunk` on the grid and block its launch rule gives, with the operands'
  then the results' addresses as its parameters; its PTX goes into the executable as a
  module of its own (`ffi_modules`).
* Targets with a host implementation (JAX's LAPACK targets, Python targets of `xlc.ffi`,
  `xlc.pure_callback`, `xlc.debug`) run on the host inside the executable, as a
  `HostCallThunk`: the runtime waits for the thunk's stream, copies the operands to the host,
  runs the call (`xlc.hlo.host_calls`) and copies the results back. Executables holding one
  are not captured into CUDA graphs (the host is in the loop, as with while loops).
* Any other target is an UnsupportedOpError naming it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from xlc.backend_gpu.thunks import HostCallThunk, KernelArg, KernelThunk, Thunk
from xlc.errors import UnsupportedOpError
from xlc.hlo.ffi_registry import FfiTarget, lookup
from xlc.hlo.host_calls import describe, handler_for, result_shapes
from xlc.hlo.ir import HloInstruction

if TYPE_CHECKING:
    from xlc.backend_gpu.emitter import GpuEmitter


def _launch_dims(value: object, what: str) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, int) else tuple(value)  # type: ignore[arg-type]
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and d >= 1 for d in dims):
        raise UnsupportedOpError(f"{what} must be 1 to 3 positive ints, got {value!r}")
    return tuple(dims) + (1,) * (3 - len(dims))  # type: ignore[return-value]


def _ptx_kernel(em: GpuEmitter, inst: HloInstruction, target: FfiTarget) -> list[Thunk]:
    results = result_shapes(inst)
    where = f"custom-call '{inst.name}' of GPU target '{target.name}'"
    assert target.launch is not None
    try:
        grid, block = target.launch([o.shape.dims for o in inst.operands],
                                    [s.dims for s in results])
    except Exception as e:  # noqa: BLE001 - the user's rule: its error names the call
        raise UnsupportedOpError(f"{where}: its launch rule failed: {type(e).__name__}: "
                                 f"{e}") from e
    name = f"ffi.{target.name}"
    em.ffi_modules[name] = {"ptx": target.obj.decode(), "symbol": target.symbol}
    outs = [(inst, (i,)) for i in range(len(results))] if inst.shape.is_tuple \
        else [(inst, ())]
    args = [KernelArg(em.buffer_slice(o), True, False) for o in inst.operands]
    args += [KernelArg(em.buffer_slice(x, i), False, True) for x, i in outs]
    return [KernelThunk(inst.name, kernel=name, grid=_launch_dims(grid, f"{where}: grid"),
                        block=_launch_dims(block, f"{where}: block"), shared_bytes=0,
                        args=args)]


def emit_custom_call(em: GpuEmitter, inst: HloInstruction) -> list[Thunk]:
    """A kernel launch for a registered PTX target, else a host call thunk for a target with
    a host implementation (module docstring)."""
    target = str(inst.attrs.get("custom_call_target", ""))
    user = lookup(target, "gpu")
    if user is not None and user.kind == "ptx":
        return _ptx_kernel(em, inst, user)
    if handler_for(target, "gpu") is None:
        raise UnsupportedOpError(
            f"GPU backend cannot compile 'custom-call' target '{target}' ({inst.name}): it has "
            "no device implementation and no host implementation (JAX's LAPACK targets and "
            "Python targets run on the host)")
    results = [(inst, (i,)) for i in range(len(result_shapes(inst)))] if inst.shape.is_tuple \
        else [(inst, ())]
    return [HostCallThunk(inst.name, desc=describe(inst, "gpu"),
                          operands=[em.buffer_slice(o) for o in inst.operands],
                          results=[em.buffer_slice(x, i) for x, i in results])]
