"""`infer_instruction_shape`: the shape an HloInstruction should have, computed from its
operands' shapes, its attributes and its called computations, through one dispatch table keyed
by Opcode. Raises ShapeError (message format in `shape_inference`) for bad operands or
attributes; returns None where the result shape is an input of the op.

Requires the attributes the verifier checks for (`direction` on compare, ...): a missing one
raises KeyError, so callers check attribute presence first (the verifier does). Layouts are
ignored: results have default layouts.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xlc.hlo import shape_inference as si
from xlc.hlo.attrs import Window
from xlc.hlo.ir import HloComputation, HloInstruction
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape
from xlc.hlo.shape_inference_nn import infer_fft
from xlc.hlo.shape_inference_util import fail, fmt

_Rule = Callable[[HloInstruction], "Shape | None"]


def _ops(inst: HloInstruction) -> list[Shape]:
    return [o.shape for o in inst.operands]


def _one_dim(inst: HloInstruction, key: str = "dimensions") -> int:
    """A single dimension given as `dimensions={d}` (a 1-tuple) or a bare int."""
    v: Any = inst.attrs[key]
    if isinstance(v, int):
        return v
    if len(v) != 1:
        fail(inst.opcode.text, f"{key} must name exactly one dimension", str(tuple(v)))
    return int(v[0])


def _called(inst: HloInstruction, i: int = 0) -> HloComputation | None:
    return inst.called[i] if len(inst.called) > i else None


def _target_type(inst: HloInstruction) -> PrimitiveType:
    if not inst.shape.is_array or inst.shape.element_type is None:
        fail(inst.opcode.text, "result must be an array", fmt(inst.shape))
    return inst.shape.element_type


def _unary(inst: HloInstruction) -> Shape:
    return si.infer_unary(inst.opcode, inst.operands[0].shape)


def _binary(inst: HloInstruction) -> Shape:
    return si.infer_binary(inst.opcode, inst.operands[0].shape, inst.operands[1].shape)


def _compare(inst: HloInstruction) -> Shape:
    return si.infer_compare(inst.operands[0].shape, inst.operands[1].shape,
                            inst.attrs["direction"], inst.attrs.get("type"))


def _convert(inst: HloInstruction) -> Shape:
    return si.infer_convert(inst.operands[0].shape, _target_type(inst))


def _bitcast_convert(inst: HloInstruction) -> Shape:
    return si.infer_bitcast_convert(inst.operands[0].shape, _target_type(inst))


def _broadcast(inst: HloInstruction) -> Shape:
    _target_type(inst)
    return si.infer_broadcast(inst.operands[0].shape, inst.shape.dims,
                              tuple(inst.attrs.get("dimensions", ())))


def _reshape(inst: HloInstruction) -> Shape:
    _target_type(inst)
    return si.infer_reshape(inst.operands[0].shape, inst.shape.dims)


def _dynamic_slice(inst: HloInstruction) -> Shape:
    return si.infer_dynamic_slice(inst.operands[0].shape, _ops(inst)[1:],
                                  tuple(inst.attrs["dynamic_slice_sizes"]))


def _dynamic_update_slice(inst: HloInstruction) -> Shape:
    s = _ops(inst)
    return si.infer_dynamic_update_slice(s[0], s[1], s[2:])


def _iota(inst: HloInstruction) -> Shape:
    return si.infer_iota(_target_type(inst), inst.shape.dims, int(inst.attrs["iota_dimension"]))


def _reduce(inst: HloInstruction) -> Shape:
    s = _ops(inst)
    n = len(s) // 2
    return si.infer_reduce(s[:n], s[n:], tuple(inst.attrs["dimensions"]), _called(inst))


def _reduce_window(inst: HloInstruction) -> Shape:
    s = _ops(inst)
    n = len(s) // 2
    return si.infer_reduce_window(s[:n], s[n:], inst.attrs["window"], _called(inst))


def _select_and_scatter(inst: HloInstruction) -> Shape:
    s = _ops(inst)
    return si.infer_select_and_scatter(s[0], s[1], s[2], inst.attrs["window"], _called(inst, 0),
                                       _called(inst, 1))


def _dot(inst: HloInstruction) -> Shape:
    a = inst.attrs
    return si.infer_dot(inst.operands[0].shape, inst.operands[1].shape,
                        tuple(a.get("lhs_batch_dims", ())), tuple(a.get("rhs_batch_dims", ())),
                        tuple(a.get("lhs_contracting_dims", ())),
                        tuple(a.get("rhs_contracting_dims", ())), _target_type(inst))


def _convolution(inst: HloInstruction) -> Shape:
    a = inst.attrs
    return si.infer_convolution(inst.operands[0].shape, inst.operands[1].shape,
                                a.get("window", Window(())), a["dim_labels"],
                                int(a.get("feature_group_count", 1)),
                                int(a.get("batch_group_count", 1)), _target_type(inst))


def _gather(inst: HloInstruction) -> Shape:
    a = inst.attrs
    return si.infer_gather(inst.operands[0].shape, inst.operands[1].shape,
                           tuple(a.get("offset_dims", ())),
                           tuple(a.get("collapsed_slice_dims", ())),
                           tuple(a["start_index_map"]), int(a["index_vector_dim"]),
                           tuple(a["slice_sizes"]), tuple(a.get("operand_batching_dims", ())),
                           tuple(a.get("start_indices_batching_dims", ())))


def _scatter(inst: HloInstruction) -> Shape:
    a = inst.attrs
    s = _ops(inst)
    n = (len(s) - 1) // 2
    return si.infer_scatter(s[:n], s[n], s[n + 1:], tuple(a.get("update_window_dims", ())),
                            tuple(a.get("inserted_window_dims", ())),
                            tuple(a["scatter_dims_to_operand_dims"]), int(a["index_vector_dim"]),
                            tuple(a.get("input_batching_dims", ())),
                            tuple(a.get("scatter_indices_batching_dims", ())), _called(inst))


def _map(inst: HloInstruction) -> Shape:
    dims = inst.attrs.get("dimensions")
    return si.infer_map(_ops(inst), _called(inst), None if dims is None else tuple(dims),
                        inst.shape.element_type)


def _gte(inst: HloInstruction) -> Shape:
    return si.infer_get_tuple_element(inst.operands[0].shape, int(inst.attrs["index"]))


def _root_of(inst: HloInstruction, i: int = 0) -> Shape | None:
    comp = _called(inst, i)
    if comp is None or comp.root is None:
        return None
    return comp.root.shape.with_default_layout()


def _operand0(inst: HloInstruction) -> Shape:
    return inst.operands[0].shape.with_default_layout()


def _all_operands(inst: HloInstruction) -> Shape:
    s = [o.shape.with_default_layout() for o in inst.operands]
    return s[0] if len(s) == 1 else Shape.tuple_of(s)


def _token(inst: HloInstruction) -> Shape:
    for o in inst.operands:
        if not o.shape.is_token:
            fail("after-all", "operands must be tokens", fmt(o.shape))
    return Shape.token()


def _u32_scalar(inst: HloInstruction) -> Shape:
    return Shape.array(PrimitiveType.U32, ())


def _none(inst: HloInstruction) -> None:
    return None


_RULES: dict[Opcode, _Rule] = {
    Opcode.CONVERT: _convert,
    Opcode.BITCAST_CONVERT: _bitcast_convert,
    Opcode.COPY: _unary,
    Opcode.COMPARE: _compare,
    Opcode.SELECT: lambda i: si.infer_select(*_ops(i)),
    Opcode.CLAMP: lambda i: si.infer_clamp(*_ops(i)),
    Opcode.BROADCAST: _broadcast,
    Opcode.RESHAPE: _reshape,
    Opcode.TRANSPOSE: lambda i: si.infer_transpose(i.operands[0].shape,
                                                   tuple(i.attrs["dimensions"])),
    Opcode.BITCAST: _none,  # byte-size check in the verifier
    Opcode.SLICE: lambda i: si.infer_slice(i.operands[0].shape, tuple(i.attrs["slice"])),
    Opcode.DYNAMIC_SLICE: _dynamic_slice,
    Opcode.DYNAMIC_UPDATE_SLICE: _dynamic_update_slice,
    Opcode.CONCATENATE: lambda i: si.infer_concatenate(_ops(i), _one_dim(i)),
    Opcode.PAD: lambda i: si.infer_pad(i.operands[0].shape, i.operands[1].shape,
                                       i.attrs["padding"]),
    Opcode.REVERSE: lambda i: si.infer_reverse(i.operands[0].shape, tuple(i.attrs["dimensions"])),
    Opcode.GATHER: _gather,
    Opcode.SCATTER: _scatter,
    Opcode.REDUCE: _reduce,
    Opcode.REDUCE_WINDOW: _reduce_window,
    Opcode.SELECT_AND_SCATTER: _select_and_scatter,
    Opcode.DOT: _dot,
    Opcode.CONVOLUTION: _convolution,
    Opcode.SORT: lambda i: si.infer_sort(_ops(i), _one_dim(i), _called(i)),
    Opcode.TOPK: lambda i: si.infer_topk(i.operands[0].shape, int(i.attrs["k"])),
    Opcode.MAP: _map,
    Opcode.FFT: lambda i: infer_fft(i.operands[0].shape, str(i.attrs["fft_type"]),
                                    tuple(i.attrs["fft_length"])),
    Opcode.PARAMETER: _none,
    Opcode.CONSTANT: _none,  # literal check in the verifier
    Opcode.IOTA: _iota,
    Opcode.RNG: _none,
    Opcode.RNG_BIT_GENERATOR: _none,
    Opcode.RNG_GET_AND_UPDATE_STATE: _none,
    Opcode.AFTER_ALL: _token,
    Opcode.TUPLE: lambda i: si.infer_tuple(_ops(i)),
    Opcode.GET_TUPLE_ELEMENT: _gte,
    Opcode.WHILE: _operand0,
    Opcode.CONDITIONAL: _root_of,
    Opcode.CALL: _root_of,
    Opcode.FUSION: _root_of,
    Opcode.CUSTOM_CALL: _none,
    Opcode.OPT_BARRIER: _operand0,
    Opcode.ADD_DEPENDENCY: _operand0,
    Opcode.DOMAIN: _operand0,
    Opcode.ALL_REDUCE: _all_operands,
    Opcode.PARTITION_ID: _u32_scalar,
    Opcode.REPLICA_ID: _u32_scalar,
    Opcode.COPY_START: lambda i: si.infer_copy_start(i.operands[0].shape),
    Opcode.COPY_DONE: lambda i: si.infer_copy_done(i.operands[0].shape),
}
for _op in Opcode:
    if _op not in _RULES:
        _RULES[_op] = _binary if _op.category == "binary" else _unary
assert all(op.category in ("unary", "binary") for op in Opcode
           if _RULES[op] in (_unary, _binary) and op is not Opcode.COPY)


def infer_instruction_shape(inst: HloInstruction) -> Shape | None:
    """The shape `inst` should have (default layout) given its operands, attributes and
    called computations (reducers, comparators and combiners are checked here too), or None
    where the result shape is an input of the op: parameter, constant, bitcast, rng,
    rng-bit-generator, custom-call, and call/conditional/fusion with no called computation.
    Requires the operand count and required attributes to be right (the verifier checks them
    first). Raises ShapeError for bad operand shapes or attribute values."""
    return _RULES[inst.opcode](inst)
