"""Per-instruction rules of the HLO verifier: operand counts, required and well-formed
attributes, called-computation counts and signatures (while / conditional / call / fusion),
constant literals, bitcast sizes and rng operands. Each rule raises `Violation(rule, details)`;
`xlc.hlo.verifier` turns it into a `VerificationError` that names the instruction and shows the
module text around it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from xlc.hlo.attr_keys import allowed_attribute_keys, unknown_attribute_message
from xlc.hlo.attrs import ConvDimLabels, Literal, PaddingConfig, SliceDim, Window
from xlc.hlo.ir import HloComputation, HloInstruction
from xlc.hlo.opcodes import FUSION_KINDS, Opcode
from xlc.hlo.shape import PrimitiveType, Shape
from xlc.hlo.shape_inference_util import fmt, fmt_all


class Violation(Exception):
    """One broken rule: `rule` (short, stable wording) and `details` (shapes, names)."""

    def __init__(self, rule: str, details: str):
        super().__init__(f"{rule}: {details}")
        self.rule = rule
        self.details = details


# ---- operand counts ------------------------------------------------------------------------
_Count = tuple[Callable[[int], bool], str]
_VARIADIC_COUNTS: dict[Opcode, _Count] = {
    Opcode.DYNAMIC_SLICE: (lambda n: n >= 1, "at least 1"),
    Opcode.DYNAMIC_UPDATE_SLICE: (lambda n: n >= 2, "at least 2"),
    Opcode.CONCATENATE: (lambda n: n >= 1, "at least 1"),
    Opcode.SCATTER: (lambda n: n >= 3 and n % 2 == 1, "an odd number >= 3"),
    Opcode.REDUCE: (lambda n: n >= 2 and n % 2 == 0, "an even number >= 2"),
    Opcode.REDUCE_WINDOW: (lambda n: n >= 2 and n % 2 == 0, "an even number >= 2"),
    Opcode.SORT: (lambda n: n >= 1, "at least 1"),
    Opcode.MAP: (lambda n: n >= 1, "at least 1"),
    Opcode.CONDITIONAL: (lambda n: n >= 1, "at least 1"),
    Opcode.ALL_REDUCE: (lambda n: n >= 1, "at least 1"),
}


def check_operand_count(inst: HloInstruction) -> None:
    """The operand count agrees with the opcode table's arity (or the variadic rule)."""
    n = len(inst.operands)
    arity = inst.opcode.arity
    if arity >= 0:
        if n != arity:
            raise Violation("wrong number of operands", f"expected {arity}, got {n}")
        return
    rule = _VARIADIC_COUNTS.get(inst.opcode)
    if rule is not None and not rule[0](n):
        raise Violation("wrong number of operands", f"expected {rule[1]}, got {n}")


# ---- layouts --------------------------------------------------------------------------------
_INT64_MAX = 2**63 - 1


def check_layout(inst: HloInstruction) -> None:
    """Every array (sub)shape's layout, when present and non-empty, is a permutation of its
    dimensions (minor to major), and its byte size fits in int64 (XLA's ValidateShape)."""
    for _, sub in inst.shape.leaves():
        et = sub.element_type
        if sub.is_array and et is not None and sub.num_elements * max(1, et.byte_size) > \
                _INT64_MAX:
            raise Violation("shape is too large", f"{sub.to_text()} has {sub.num_elements} "
                                                  f"elements; its byte size overflows int64")
        lay = sub.layout
        if sub.is_array and lay is not None and lay.minor_to_major and \
                sorted(lay.minor_to_major) != list(range(sub.rank)):
            raise Violation("malformed layout", f"{sub.to_text()} (minor_to_major must be a "
                                                f"permutation of the {sub.rank} dimensions)")


# ---- attributes ----------------------------------------------------------------------------
_REQUIRED_ATTRS: dict[Opcode, tuple[str, ...]] = {
    Opcode.PARAMETER: ("parameter_number",),
    Opcode.CONSTANT: ("literal",),
    Opcode.COMPARE: ("direction",),
    Opcode.GET_TUPLE_ELEMENT: ("index",),
    Opcode.FUSION: ("kind",),
    Opcode.TRANSPOSE: ("dimensions",),
    Opcode.SLICE: ("slice",),
    Opcode.DYNAMIC_SLICE: ("dynamic_slice_sizes",),
    Opcode.CONCATENATE: ("dimensions",),
    Opcode.PAD: ("padding",),
    Opcode.REVERSE: ("dimensions",),
    Opcode.IOTA: ("iota_dimension",),
    Opcode.REDUCE: ("dimensions",),
    Opcode.REDUCE_WINDOW: ("window",),
    Opcode.SELECT_AND_SCATTER: ("window",),
    Opcode.CONVOLUTION: ("dim_labels",),
    Opcode.GATHER: ("start_index_map", "index_vector_dim", "slice_sizes"),
    Opcode.SCATTER: ("scatter_dims_to_operand_dims", "index_vector_dim"),
    Opcode.SORT: ("dimensions",),
    Opcode.TOPK: ("k",),
    Opcode.REDUCE_PRECISION: ("exponent_bits", "mantissa_bits"),
    Opcode.FFT: ("fft_type", "fft_length"),
    Opcode.CUSTOM_CALL: ("custom_call_target",),
}


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _is_int_tuple(v: Any) -> bool:
    return isinstance(v, tuple) and all(_is_int(x) for x in v)


_AttrCheck = tuple[Callable[[Any], bool], str]
_INT: _AttrCheck = (_is_int, "an integer")
_INTS: _AttrCheck = (_is_int_tuple, "a list of integers {a,b,...}")
_BOOL: _AttrCheck = (lambda v: isinstance(v, bool), "true or false")
_STR: _AttrCheck = (lambda v: isinstance(v, str), "a name")
_ATTR_TYPES: dict[str, _AttrCheck] = {
    **{k: _INTS for k in (
        "dimensions", "dynamic_slice_sizes", "slice_sizes", "lhs_batch_dims", "rhs_batch_dims",
        "lhs_contracting_dims", "rhs_contracting_dims", "offset_dims", "collapsed_slice_dims",
        "start_index_map", "operand_batching_dims", "start_indices_batching_dims",
        "update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
        "input_batching_dims", "scatter_indices_batching_dims", "fft_length")},
    **{k: _INT for k in (
        "index", "iota_dimension", "index_vector_dim", "k", "feature_group_count",
        "batch_group_count", "parameter_number", "inferred_dimension", "exponent_bits",
        "mantissa_bits")},
    **{k: _BOOL for k in ("is_stable", "largest", "indices_are_sorted", "unique_indices")},
    **{k: _STR for k in ("direction", "type", "kind", "custom_call_target", "distribution",
                         "algorithm", "fft_type")},
    "slice": (lambda v: isinstance(v, tuple) and all(isinstance(x, SliceDim) for x in v),
              "a list of [start:limit:stride] ranges"),
    "padding": (lambda v: isinstance(v, PaddingConfig), "a padding config lo_hi_interior"),
    "window": (lambda v: isinstance(v, Window), "a window {size=...}"),
    "dim_labels": (lambda v: isinstance(v, ConvDimLabels), "convolution dim_labels"),
    "literal": (lambda v: isinstance(v, Literal), "a literal"),
}


def check_attributes(inst: HloInstruction) -> None:
    """Required attributes are present; no attribute XLA does not know for the opcode (typed or
    raw, see `xlc.hlo.attr_keys`); every typed attribute has its documented type; a fusion kind
    is one of kLoop/kInput/kOutput/kCustom."""
    for key in _REQUIRED_ATTRS.get(inst.opcode, ()):
        if key not in inst.attrs:
            raise Violation("missing required attribute", f"'{key}' for {inst.opcode.text}")
    allowed = allowed_attribute_keys(inst.opcode)
    for key in [*inst.attrs, *(k for k, _ in inst.extra)]:
        if key not in allowed and key not in ("parameter_number", "literal"):  # operand-like
            rule, _, details = unknown_attribute_message(inst.opcode, key).partition(" (")
            raise Violation(rule, details.rstrip(")"))
    for key, value in inst.attrs.items():
        check = _ATTR_TYPES.get(key)
        if check is not None and not check[0](value):
            raise Violation(f"malformed attribute '{key}'", f"expected {check[1]}, got {value!r}")
    if inst.opcode is Opcode.FUSION and inst.attrs["kind"] not in FUSION_KINDS:
        raise Violation("unknown fusion kind", f"{inst.attrs['kind']} (expected one of "
                                               f"{', '.join(FUSION_KINDS)})")


# ---- called computations -------------------------------------------------------------------
_CALLED_COUNTS: dict[Opcode, tuple[Callable[[int], bool], str]] = {
    **{op: (lambda n: n == 1, "1") for op in (
        Opcode.REDUCE, Opcode.REDUCE_WINDOW, Opcode.MAP, Opcode.SORT, Opcode.SCATTER,
        Opcode.CALL, Opcode.FUSION, Opcode.ALL_REDUCE)},
    Opcode.WHILE: (lambda n: n == 2, "2 (condition, body)"),
    Opcode.SELECT_AND_SCATTER: (lambda n: n == 2, "2 (select, scatter)"),
    Opcode.CONDITIONAL: (lambda n: n >= 1, "at least 1"),
    Opcode.CUSTOM_CALL: (lambda n: True, "any number"),
}


def check_called_count(inst: HloInstruction) -> None:
    """The number of called computations suits the opcode (none for plain ops)."""
    ok, want = _CALLED_COUNTS.get(inst.opcode, (lambda n: n == 0, "0"))
    if not ok(len(inst.called)):
        names = ", ".join(f"'{c.name}'" for c in inst.called) or "none"
        raise Violation("wrong number of called computations", f"expected {want}, got {names}")


def _params(comp: HloComputation) -> list[Shape | None]:
    return [p.shape if p is not None else None for p in comp.parameters]


def _spell(shapes: list[Shape | None]) -> str:
    return "(" + ", ".join("?" if s is None else fmt(s) for s in shapes) + ")"


def _check_signature(role: str, comp: HloComputation, params: list[Shape],
                     result: Shape | None) -> None:
    """`comp` takes parameters compatible with `params` and (when given) returns `result`."""
    have = _params(comp)
    if len(have) != len(params) or not all(
            h is not None and h.compatible(w) for h, w in zip(have, params)):
        raise Violation(f"{role} computation '{comp.name}' has the wrong parameters",
                        f"expected {_spell(list(params))}, got {_spell(have)}")
    if result is not None and comp.root is not None and not comp.root.shape.compatible(result):
        raise Violation(f"{role} computation '{comp.name}' returns the wrong shape",
                        f"expected {fmt(result)}, got {fmt(comp.root.shape)}")


def _check_while(inst: HloInstruction) -> None:
    cond, body = inst.called
    state = inst.operands[0].shape
    _check_signature("condition", cond, [state], Shape.array(PrimitiveType.PRED, ()))
    _check_signature("body", body, [state], state)
    if not inst.shape.compatible(state):
        raise Violation("while result must have the loop state shape",
                        f"{fmt(inst.shape)} vs init {fmt(state)}")


def _check_conditional(inst: HloInstruction) -> None:
    sel = inst.operands[0].shape
    n = len(inst.called)
    if sel.is_scalar and sel.element_type is PrimitiveType.PRED:
        if n != 2:
            raise Violation("a pred conditional needs 2 branch computations", f"got {n}")
    elif sel.is_scalar and sel.element_type is PrimitiveType.S32:
        pass
    else:
        raise Violation("conditional selector must be pred[] or s32[]", fmt(sel))
    if len(inst.operands) != n + 1:
        raise Violation("conditional needs one operand per branch after the selector",
                        f"{n} branches, {len(inst.operands) - 1} branch operands")
    for i, comp in enumerate(inst.called):
        _check_signature(f"branch {i}", comp, [inst.operands[i + 1].shape], inst.shape)


def _check_call(inst: HloInstruction) -> None:
    _check_signature("called", inst.called[0], [o.shape for o in inst.operands], inst.shape)


def _check_fusion(inst: HloInstruction) -> None:
    comp = inst.called[0]
    if not comp.is_fusion_computation:
        raise Violation(f"fusion calls '{comp.name}', which is not a fusion computation",
                        fmt(inst.shape))
    _check_signature("fused", comp, [o.shape for o in inst.operands], inst.shape)


def _literal_problem(lit: Literal, shape: Shape) -> str | None:
    """Why `lit` does not fit `shape`, or None."""
    if lit.elided:
        return None
    if shape.tuple_shapes is not None:
        if lit.elements is None or len(lit.elements) != len(shape.tuple_shapes):
            return f"literal is not a {len(shape.tuple_shapes)}-tuple"
        for e, s in zip(lit.elements, shape.tuple_shapes):
            why = _literal_problem(e, s)
            if why:
                return why
        return None
    if lit.array is None:
        return "literal is a tuple"
    if shape.is_token:
        return "token constants are not allowed"
    if tuple(lit.array.shape) != shape.dims:
        return f"literal has dims {list(lit.array.shape)}"
    if lit.array.dtype != shape.dtype:
        return f"literal has dtype {lit.array.dtype}"
    return None


def _check_constant(inst: HloInstruction) -> None:
    why = _literal_problem(inst.attrs["literal"], inst.shape)
    if why:
        raise Violation("constant literal does not match its shape", f"{why} for {fmt(inst.shape)}")


def _check_bitcast(inst: HloInstruction) -> None:
    src = inst.operands[0].shape
    if not (src.is_array and inst.shape.is_array) or src.byte_size() != inst.shape.byte_size():
        raise Violation("bitcast must keep the byte size",
                        f"{fmt(src)} ({src.byte_size()} bytes) to {fmt(inst.shape)} "
                        f"({inst.shape.byte_size()} bytes)")


def _check_rng(inst: HloInstruction) -> None:
    if not inst.shape.is_array:
        raise Violation("rng result must be an array", fmt(inst.shape))
    for o in inst.operands:
        if not o.shape.is_scalar or o.shape.element_type != inst.shape.element_type:
            raise Violation("rng parameters must be scalars of the result type",
                            f"{fmt_all(o.shape for o in inst.operands)} for {fmt(inst.shape)}")
    dist = inst.attrs.get("distribution", "rng_uniform")
    if dist not in ("rng_uniform", "rng_normal"):
        raise Violation("unknown rng distribution", str(dist))


RNG_ALGORITHMS = ("rng_default", "rng_three_fry", "rng_philox")
"""XLA's RandomAlgorithm values as HLO text spells them."""


def _check_rng_bit_generator(inst: HloInstruction) -> None:
    algorithm = inst.attrs.get("algorithm", "rng_default")
    if algorithm not in RNG_ALGORITHMS:
        raise Violation("unknown rng algorithm",
                        f"{algorithm} (expected one of {', '.join(RNG_ALGORITHMS)})")
    state = inst.operands[0].shape
    ts = inst.shape.tuple_shapes
    if ts is None or len(ts) != 2 or not ts[0].compatible(state):
        raise Violation("rng-bit-generator must return (state, values)",
                        f"state {fmt(state)}, result {fmt(inst.shape)}")


def _check_reduce_precision(inst: HloInstruction) -> None:
    """XLA's shape inference: at least 1 exponent bit, no negative mantissa bits."""
    exponent, mantissa = inst.attrs["exponent_bits"], inst.attrs["mantissa_bits"]
    if exponent < 1:
        raise Violation("reduce-precision needs exponent_bits >= 1", f"got {exponent}")
    if mantissa < 0:
        raise Violation("reduce-precision needs mantissa_bits >= 0", f"got {mantissa}")


_SPECIFIC: dict[Opcode, Callable[[HloInstruction], None]] = {
    Opcode.REDUCE_PRECISION: _check_reduce_precision,
    Opcode.WHILE: _check_while,
    Opcode.CONDITIONAL: _check_conditional,
    Opcode.CALL: _check_call,
    Opcode.FUSION: _check_fusion,
    Opcode.CONSTANT: _check_constant,
    Opcode.BITCAST: _check_bitcast,
    Opcode.RNG: _check_rng,
    Opcode.RNG_BIT_GENERATOR: _check_rng_bit_generator,
}


def check_specific(inst: HloInstruction) -> None:
    """Opcode-specific rules beyond shape inference: control-flow and fusion signatures,
    constant literals, bitcast byte sizes, rng operands."""
    rule = _SPECIFIC.get(inst.opcode)
    if rule is not None:
        rule(inst)
