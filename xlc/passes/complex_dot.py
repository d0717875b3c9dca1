"""Expand complex matrix products into real ones, for backends without a complex GEMM (the
CPU and the GPU).

    d = c64[M,N] dot(c64[M,K] a, c64[K,N] b), <dims>
becomes, with ar/ai = real(a)/imag(a) and br/bi = real(b)/imag(b) (f32), four real dots of
the same dimensions and
    d = c64[M,N] complex(rr - ii, ri + ir)
where rr = dot(ar, br), ii = dot(ai, bi), ri = dot(ar, bi), ir = dot(ai, br). Each output
element gets the sums of the same products the complex dot adds (a naive complex product,
as XLA's CPU emitter and the evaluator compute it), so only the order of the additions differs.
The real dots then use the backend's GEMM (tiled kernels, and the GPU's tensor-core and
epilogue paths as they grow); the real/imag splits and the final complex fuse with them or
with each other.

Requires: a verified module before fusion (fusion computations are left alone). Guarantees: no
dot with complex operands is left outside fusions; every other instruction, and every shape
at a use, is unchanged. Dots mixing a complex and a real operand are left alone (XLA requires
equal operand types after its own expansion; the backends refuse them with a reason).
"""
from __future__ import annotations

import logging

from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType
from xlc.passes.edit import rewrite_each, substitute

log = logging.getLogger("xlc.passes.complex_dot")

REAL_PART = {PrimitiveType.C64: PrimitiveType.F32, PrimitiveType.C128: PrimitiveType.F64}
"""The real type of each complex element type."""


def expandable(inst: HloInstruction) -> bool:
    """A dot whose operands and result are all the same complex type."""
    if inst.opcode is not Opcode.DOT or not inst.shape.is_array:
        return False
    pt = inst.shape.element_type
    return pt in REAL_PART and all(o.shape.is_array and o.shape.element_type is pt
                                   for o in inst.operands)


def expand(comp: HloComputation, inst: HloInstruction) -> HloInstruction:
    """Replace complex dot `inst` of `comp` by four real dots (module docstring); returns the
    final `complex`."""
    a, b = inst.operands
    real = REAL_PART[inst.shape.element_type]  # type: ignore[index]

    def part(x: HloInstruction, op: Opcode) -> HloInstruction:
        suffix = "re" if op is Opcode.REAL else "im"
        return comp.add(op, x.shape.with_type(real), (x,), name=f"{x.name}.{suffix}")
    ar, ai, br, bi = part(a, Opcode.REAL), part(a, Opcode.IMAG), part(b, Opcode.REAL), \
        part(b, Opcode.IMAG)
    shape = inst.shape.with_type(real)

    def dot(x: HloInstruction, y: HloInstruction, tag: str) -> HloInstruction:
        return comp.add(Opcode.DOT, shape, (x, y), inst.attrs, name=f"{inst.name}.{tag}",
                        extra=inst.extra)
    rr, ii, ri, ir_ = dot(ar, br, "rr"), dot(ai, bi, "ii"), dot(ar, bi, "ri"), dot(ai, br, "ir")
    re = comp.add(Opcode.SUBTRACT, shape, (rr, ii), name=f"{inst.name}.real")
    im = comp.add(Opcode.ADD, shape, (ri, ir_), name=f"{inst.name}.imag")
    out = comp.add(Opcode.COMPLEX, inst.shape, (re, im), name=f"{inst.name}.complex")
    substitute(comp, inst, out, (ar, ai, br, bi))
    return out


class ComplexDotExpander:
    """The HloPass: complex dots as four real dots (module docstring)."""

    name = "complex-dot-expander"

    def run(self, module: HloModule) -> bool:
        """Rewrite in place; True if any dot was expanded."""
        count = rewrite_each(module, expandable, expand)
        if count:
            log.debug("expanded %d complex dot(s) into real dots", count)
        return count > 0
