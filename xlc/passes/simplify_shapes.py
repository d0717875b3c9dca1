"""Shape-manipulation rewrites of the algebraic simplifier: reshape, transpose, broadcast,
slice, concatenate, pad, reverse, reduce and dot (see `xlc.passes.simplify` for the list).

Each function takes `(inst, rw)` and returns `(rewrite name, replacement)` or None; see
`xlc.passes.simplify_util` for the contract.
"""
from __future__ import annotations

from xlc.hlo.attrs import SliceDim
from xlc.hlo.ir import HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape
from xlc.passes.simplify_util import (
    Rewrite,
    Rewriter,
    add_reducer,
    identity_value,
    int_tuple,
    is_splat_of,
    replace_with_operand,
    simple_reducer,
)


def _is_scalar_broadcast(inst: HloInstruction) -> bool:
    return inst.opcode is Opcode.BROADCAST and inst.operands[0].shape.is_scalar


def rewrite_reshape(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`reshape-noop`: reshape to the operand's own dims -> operand; `reshape-reshape`:
    reshape(reshape(A)) -> reshape(A); `reshape-broadcast-scalar`: reshape(broadcast(s)) ->
    broadcast(s) for a scalar s."""
    (a,) = inst.operands
    if a.shape.dims == inst.shape.dims:
        return replace_with_operand(inst, a, "reshape-noop")
    if a.opcode is Opcode.RESHAPE:
        src = a.operands[0]
        if src.shape.dims == inst.shape.dims:
            return replace_with_operand(inst, src, "reshape-reshape")
        return "reshape-reshape", rw.add(Opcode.RESHAPE, inst.shape, (src,))
    if _is_scalar_broadcast(a):
        return "reshape-broadcast-scalar", rw.add(Opcode.BROADCAST, inst.shape, a.operands,
                                                  {"dimensions": ()})
    return None


def rewrite_transpose(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`transpose-identity`: transpose with dims {0,1,..} -> operand; `transpose-transpose`:
    transpose(transpose(A)) -> one transpose (or A); `transpose-broadcast-scalar`:
    transpose(broadcast(s)) -> broadcast(s) for a scalar s."""
    (a,) = inst.operands
    perm = int_tuple(inst.attrs.get("dimensions"))
    if perm == tuple(range(len(perm))):
        return replace_with_operand(inst, a, "transpose-identity")
    if a.opcode is Opcode.TRANSPOSE:
        inner = int_tuple(a.attrs.get("dimensions"))
        composed = tuple(inner[p] for p in perm)
        src = a.operands[0]
        if composed == tuple(range(len(composed))):
            return replace_with_operand(inst, src, "transpose-transpose")
        return "transpose-transpose", rw.add(Opcode.TRANSPOSE, inst.shape, (src,),
                                             {"dimensions": composed})
    if _is_scalar_broadcast(a):
        return "transpose-broadcast-scalar", rw.add(Opcode.BROADCAST, inst.shape, a.operands,
                                                    {"dimensions": ()})
    return _transpose_through_elementwise(inst, a, perm, rw)


def _undone_by(x: HloInstruction, perm: tuple[int, ...]) -> bool:
    """Whether `transpose(x, perm)` is x's own operand (x a transpose that perm inverts)."""
    if x.opcode is not Opcode.TRANSPOSE:
        return False
    inner = int_tuple(x.attrs.get("dimensions"))
    return tuple(inner[p] for p in perm) == tuple(range(len(perm)))


def _transpose_through_elementwise(inst: HloInstruction, a: HloInstruction,
                                   perm: tuple[int, ...], rw: Rewriter) -> Rewrite | None:
    if not a.opcode.is_elementwise or len(a.users) != 1 or not a.operands \
            or a.opcode is Opcode.CONVERT and a.shape.element_type != inst.shape.element_type:
        return None
    if not all(_undone_by(x, perm) or _is_scalar_broadcast(x) for x in a.operands) \
            or not any(_undone_by(x, perm) for x in a.operands):
        return None  # checked before anything is built: a rewrite that fails adds no code
    ops = []
    for x in a.operands:
        if _undone_by(x, perm):
            ops.append(x.operands[0])
        else:
            et = x.shape.element_type
            assert et is not None
            ops.append(rw.add(Opcode.BROADCAST, Shape.array(et, inst.shape.dims), x.operands,
                              {"dimensions": ()}))
    # a transpose keeps the element type: the new op has exactly the transpose's shape
    return "transpose-elementwise", rw.add(a.opcode, inst.shape, ops, a.attrs)


def rewrite_broadcast(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`broadcast-noop`: broadcast to the operand's own dims with dims {0,1,..} -> operand;
    `broadcast-broadcast`: broadcast(broadcast(A)) -> one broadcast of A."""
    (a,) = inst.operands
    dims = int_tuple(inst.attrs.get("dimensions"))
    if a.shape.dims == inst.shape.dims and dims == tuple(range(len(dims))):
        return replace_with_operand(inst, a, "broadcast-noop")
    if a.opcode is Opcode.BROADCAST:
        inner = int_tuple(a.attrs.get("dimensions"))
        composed = tuple(dims[d] for d in inner)
        return "broadcast-broadcast", rw.add(Opcode.BROADCAST, inst.shape, a.operands,
                                             {"dimensions": composed})
    return None


def rewrite_slice(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`slice-full`: a slice covering the whole operand with stride 1 -> operand;
    `slice-slice`: slice(slice(A)) -> one slice of A."""
    (a,) = inst.operands
    if "slice" not in inst.attrs:
        return None
    sl: tuple[SliceDim, ...] = tuple(inst.attrs["slice"])
    if all(s.start == 0 and s.limit == d and s.stride == 1 for s, d in zip(sl, a.shape.dims)):
        return replace_with_operand(inst, a, "slice-full")
    if a.opcode is Opcode.SLICE and "slice" in a.attrs:
        inner: tuple[SliceDim, ...] = tuple(a.attrs["slice"])
        merged = []
        for o, i, n in zip(sl, inner, inst.shape.dims):
            start = i.start + o.start * i.stride
            stride = i.stride * o.stride
            limit = start + (n - 1) * stride + 1 if n > 0 else start
            merged.append(SliceDim(start, limit, stride))
        return "slice-slice", rw.add(Opcode.SLICE, inst.shape, a.operands,
                                     {"slice": tuple(merged)})
    return None


def _concat_dim(inst: HloInstruction) -> int:
    return int_tuple(inst.attrs.get("dimensions"))[0]


def rewrite_concatenate(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`concat-single`: concatenate(A) -> A; `concat-flatten`: concatenate(A,
    concatenate(B, C), D) -> concatenate(A, B, C, D) on the same dimension (inner concat used
    only here)."""
    if len(inst.operands) == 1:
        return replace_with_operand(inst, inst.operands[0], "concat-single")
    dim = _concat_dim(inst)
    if not any(o.opcode is Opcode.CONCATENATE and _concat_dim(o) == dim and len(o.users) == 1
               for o in inst.operands):
        return None
    flat: list[HloInstruction] = []
    for o in inst.operands:
        if o.opcode is Opcode.CONCATENATE and _concat_dim(o) == dim and len(o.users) == 1:
            flat.extend(o.operands)
        else:
            flat.append(o)
    return "concat-flatten", rw.add(Opcode.CONCATENATE, inst.shape, flat, inst.attrs)


def rewrite_pad(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`pad-zero`: pad with all-zero low/high/interior padding -> operand."""
    cfg = inst.attrs.get("padding")
    if cfg is not None and all(d == (0, 0, 0) for d in cfg.dims):
        return replace_with_operand(inst, inst.operands[0], "pad-zero")
    return None


def rewrite_copy(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`copy-noop`: an array copy with its operand's shape, layout and memory space (tiling
    included) -> operand, as XLA's simplifier does. Copy insertion, which runs after every
    simplification, adds back each copy that aliasing needs (while state, in-place operands,
    live-out parameters, donated outputs); a copy the user or the tracer wrote (`jnp.copy`,
    the marker `xlc.vjp` puts on its inputs) otherwise kept a second buffer live."""
    (a,) = inst.operands
    if not inst.shape.is_array or not a.shape.is_array:
        return None
    tails = [s.layout.tail if s.layout is not None else "" for s in (inst.shape, a.shape)]
    if tails[0] != tails[1]:
        return None
    return replace_with_operand(inst, a, "copy-noop")


def rewrite_reverse(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`reverse-trivial`: reverse over no dims or only size-1 dims -> operand."""
    (a,) = inst.operands
    if all(a.shape.dims[d] == 1 for d in int_tuple(inst.attrs.get("dimensions"))):
        return replace_with_operand(inst, a, "reverse-trivial")
    return None


def rewrite_reduce(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`reduce-trivial`: a reduce over no dims or only size-1 dims becomes a reshape of the
    input, combined with the init value by the reducer's opcode unless the init is that
    opcode's identity. Only for one input whose reducer is `op(p0, p1)`, op commutative."""
    if len(inst.operands) != 2 or not inst.shape.is_array:
        return None
    x, init = inst.operands
    dims = int_tuple(inst.attrs.get("dimensions"))
    if not all(x.shape.dims[d] == 1 for d in dims):
        return None
    op = simple_reducer(inst.to_apply)
    et = inst.shape.element_type
    if op is None or et is None:
        return None
    reshaped = rw.reshape(x, inst.shape.dims)
    ident = identity_value(op, et)
    if ident is not None and is_splat_of(init, ident):
        if reshaped is x:
            return replace_with_operand(inst, x, "reduce-trivial")
        return "reduce-trivial", _with_shape(reshaped, inst)
    bc = rw.broadcast(init, inst.shape.with_default_layout(), ())
    return "reduce-trivial", rw.add(op, inst.shape, (bc, reshaped))


def _with_shape(new: HloInstruction, inst: HloInstruction) -> HloInstruction:
    """Give a freshly built instruction `inst`'s exact shape (its layout)."""
    new.shape = inst.shape
    return new


def _dot_dims(inst: HloInstruction) -> tuple[tuple[int, ...], ...]:
    a = inst.attrs
    return (int_tuple(a.get("lhs_contracting_dims")), int_tuple(a.get("rhs_contracting_dims")),
            int_tuple(a.get("lhs_batch_dims")), int_tuple(a.get("rhs_batch_dims")))


def rewrite_dot(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    """`dot-to-multiply`: a dot whose contracting dims all have size 1 (or that has none) is an
    outer product: multiply(broadcast(reshape(lhs)), broadcast(reshape(rhs)));
    `dot-vector-to-reduce`: a dot with no free dims (vector . vector, batched or not) is
    reduce(multiply(lhs, rhs), 0, add) over the contracting dims. Both require leading batch
    dims {0..nb-1} on both sides and one element type for operands and result."""
    lhs, rhs = inst.operands
    lc, rc, lb, rb = _dot_dims(inst)
    nb = len(lb)
    if (lb != tuple(range(nb)) or rb != lb or not inst.shape.is_array
            or not (lhs.shape.element_type == rhs.shape.element_type
                    == inst.shape.element_type)):
        return None
    if lhs.shape.rank == rhs.shape.rank == nb + len(lc) and _is_vector_dot(inst):
        return _vector_dot(inst, rw)
    if any(lhs.shape.dims[d] != 1 for d in lc) or any(rhs.shape.dims[d] != 1 for d in rc):
        return None
    lfree = [lhs.shape.dims[d] for d in range(lhs.shape.rank) if d >= nb and d not in lc]
    rfree = [rhs.shape.dims[d] for d in range(rhs.shape.rank) if d >= nb and d not in rc]
    batch = list(inst.shape.dims[:nb])
    if inst.shape.dims != tuple(batch + lfree + rfree):
        return None
    out = inst.shape.with_default_layout()
    lr = rw.reshape(lhs, batch + lfree)
    rr = rw.reshape(rhs, batch + rfree)
    nl = len(lfree)
    lbc = rw.broadcast(lr, out, list(range(nb + nl)))
    rbc = rw.broadcast(rr, out, list(range(nb)) + list(range(nb + nl, nb + nl + len(rfree))))
    return "dot-to-multiply", rw.add(Opcode.MULTIPLY, inst.shape, (lbc, rbc))


def _is_vector_dot(inst: HloInstruction) -> bool:
    lhs, rhs = inst.operands
    lc, rc, lb, _ = _dot_dims(inst)
    nb = len(lb)
    contracted = tuple(range(nb, lhs.shape.rank))
    return (lc == rc == contracted and lhs.shape.dims == rhs.shape.dims and len(lc) > 0
            and lhs.shape.num_elements > 0 and inst.shape.dims == lhs.shape.dims[:nb])


def _vector_dot(inst: HloInstruction, rw: Rewriter) -> Rewrite | None:
    lhs, rhs = inst.operands
    et = inst.shape.element_type
    module = rw.comp.module
    if et is None or module is None or et is PrimitiveType.PRED:
        return None
    lc = _dot_dims(inst)[0]
    prod = rw.add(Opcode.MULTIPLY, lhs.shape.with_default_layout(), (lhs, rhs))
    zero = rw.scalar_constant(0, et)
    reducer = add_reducer(module, et)
    return "dot-vector-to-reduce", rw.add(Opcode.REDUCE, inst.shape, (prod, zero),
                                          {"dimensions": lc}, (reducer,))


SHAPE_REWRITES = {
    Opcode.RESHAPE: rewrite_reshape,
    Opcode.TRANSPOSE: rewrite_transpose,
    Opcode.BROADCAST: rewrite_broadcast,
    Opcode.SLICE: rewrite_slice,
    Opcode.CONCATENATE: rewrite_concatenate,
    Opcode.PAD: rewrite_pad,
    Opcode.REVERSE: rewrite_reverse,
    Opcode.COPY: rewrite_copy,
    Opcode.REDUCE: rewrite_reduce,
    Opcode.DOT: rewrite_dot,
}
