"""Which attribute keys each opcode takes in HLO text, as XLA's `hlo_parser` knows them.

XLA's parser refuses an attribute it does not know for the opcode (`unexpected attribute
"foo"`); so do `xlc.hlo.parse_module` and the verifier, instead of ignoring it silently. The
keys every instruction may carry (`metadata`, `sharding`, `backend_config`, ...) are in
`COMMON_KEYS`; the rest are listed per opcode in `_BY_OPCODE`, which also names the keys xlc
parses into typed attributes (`xlc.hlo.attrs`) and the called-computation keys.
"""
from __future__ import annotations

from xlc.hlo.opcodes import Opcode

COMMON_KEYS: frozenset[str] = frozenset({
    "metadata", "sharding", "frontend_attributes", "backend_config", "statistics",
    "control-predecessors", "original_value", "result_accuracy",
})
"""Keys XLA accepts on any instruction."""

_GATHER = ("offset_dims", "collapsed_slice_dims", "start_index_map", "index_vector_dim",
           "slice_sizes", "indices_are_sorted", "operand_batching_dims",
           "start_indices_batching_dims")
_SCATTER = ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
            "index_vector_dim", "indices_are_sorted", "unique_indices", "to_apply",
            "input_batching_dims", "scatter_indices_batching_dims")
_DOT = ("lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims", "rhs_contracting_dims",
        "operand_precision", "algorithm", "sparsity")
_CONV = ("window", "dim_labels", "feature_group_count", "batch_group_count",
         "operand_precision")
_CUSTOM_CALL = ("custom_call_target", "api_version", "operand_layout_constraints",
                "custom_call_has_side_effect", "output_to_operand_aliasing", "literal",
                "padding_type", "called_computations", "custom_call_schedule", "to_apply",
                "schedule", *_CONV)
_COLLECTIVE = ("replica_groups", "channel_id", "use_global_device_ids", "constrain_layout",
               "to_apply")

_BY_OPCODE: dict[Opcode, tuple[str, ...]] = {
    Opcode.PARAMETER: ("parameter_replication",),
    Opcode.IOTA: ("iota_dimension",),
    Opcode.COMPARE: ("direction", "type"),
    Opcode.REDUCE_PRECISION: ("exponent_bits", "mantissa_bits"),
    Opcode.BROADCAST: ("dimensions",),
    Opcode.RESHAPE: ("inferred_dimension",),
    Opcode.TRANSPOSE: ("dimensions",),
    Opcode.SLICE: ("slice",),
    Opcode.DYNAMIC_SLICE: ("dynamic_slice_sizes",),
    Opcode.CONCATENATE: ("dimensions",),
    Opcode.PAD: ("padding",),
    Opcode.REVERSE: ("dimensions",),
    Opcode.GATHER: _GATHER,
    Opcode.SCATTER: _SCATTER,
    Opcode.REDUCE: ("dimensions", "to_apply"),
    Opcode.REDUCE_WINDOW: ("window", "to_apply"),
    Opcode.SELECT_AND_SCATTER: ("window", "select", "scatter"),
    Opcode.DOT: _DOT,
    Opcode.CONVOLUTION: _CONV,
    Opcode.SORT: ("dimensions", "is_stable", "to_apply"),
    Opcode.TOPK: ("k", "largest"),
    Opcode.MAP: ("dimensions", "to_apply"),
    Opcode.FFT: ("fft_type", "fft_length"),
    Opcode.RNG: ("distribution",),
    Opcode.RNG_BIT_GENERATOR: ("algorithm",),
    Opcode.RNG_GET_AND_UPDATE_STATE: ("delta",),
    Opcode.GET_TUPLE_ELEMENT: ("index",),
    Opcode.WHILE: ("condition", "body"),
    Opcode.CONDITIONAL: ("branch_computations", "true_computation", "false_computation"),
    Opcode.CALL: ("to_apply",),
    Opcode.FUSION: ("kind", "calls", "output_to_operand_aliasing"),
    Opcode.CUSTOM_CALL: _CUSTOM_CALL,
    Opcode.DOMAIN: ("domain",),
    Opcode.ALL_REDUCE: _COLLECTIVE,
    # kept raw: XLA's cross-program prefetch marks (current and older spelling)
    Opcode.COPY_START: ("cross_program_prefetch_index", "is_cross_program_prefetch"),
}

_ALLOWED: dict[Opcode, frozenset[str]] = {
    op: COMMON_KEYS | frozenset(_BY_OPCODE.get(op, ())) for op in Opcode}


def allowed_attribute_keys(opcode: Opcode) -> frozenset[str]:
    """The attribute keys an instruction with `opcode` may carry in HLO text."""
    return _ALLOWED[opcode]


def unknown_attribute_message(opcode: Opcode, key: str) -> str:
    """The error wording for `key` on an `opcode` instruction (shared by parser and verifier),
    listing the keys the opcode does take besides the common ones."""
    own = sorted(_BY_OPCODE.get(opcode, ()))
    takes = f"expected one of {', '.join(own)} or" if own else "it takes only"
    return (f"unknown attribute '{key}' for {opcode.text} ({takes} a key every instruction "
            f"may carry, such as metadata)")
