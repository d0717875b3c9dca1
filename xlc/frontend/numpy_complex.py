"""real / imag / conj for `xlc.numpy` (HLO `real`, `imag`, `complex`); on real arrays they
behave as numpy's (real is the identity, imag zeros, conj the identity)."""
from __future__ import annotations

from typing import Any

from xlc.frontend.eager import eager_ok
from xlc.frontend.tracer import Tracer, as_tracer, emit
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType as PT
from xlc.hlo.shape import Shape

__all__ = ["real", "imag", "conj", "conjugate"]

_PART = {PT.C64: PT.F32, PT.C128: PT.F64}


def _part(opcode: Opcode, t: Tracer) -> Tracer:
    return emit(opcode, Shape.array(_PART[t.ptype], t.shape), [t], op_name=opcode.text)


@eager_ok
def real(x: Any) -> Tracer:
    """The real part (the array itself when it is not complex)."""
    t = as_tracer(x)
    return _part(Opcode.REAL, t) if t.ptype in _PART else t


@eager_ok
def imag(x: Any) -> Tracer:
    """The imaginary part (zeros of the same type when it is not complex)."""
    from xlc.frontend.numpy_creation import zeros_like

    t = as_tracer(x)
    return _part(Opcode.IMAG, t) if t.ptype in _PART else zeros_like(t)


@eager_ok
def conj(x: Any) -> Tracer:
    """The complex conjugate (the array itself when it is not complex)."""
    from xlc.frontend.numpy_api import negative

    t = as_tracer(x)
    if t.ptype not in _PART:
        return t
    return emit(Opcode.COMPLEX, t.aval, [real(t), negative(imag(t))], op_name="conj")


conjugate = conj
