"""The one opcode table. Every pass, the parser, printer, verifier, evaluator and emitters ask this
table (`op.is_elementwise`, `op.arity`, ...) instead of keeping their own lists.

Columns: HLO text name, arity (-1 = variadic), category, flags.
Categories: "unary" / "binary" / "ternary" elementwise arithmetic, "compare", "data" (data
movement), "reduce", "control" (control flow), "leaf" (parameter/constant/iota/rng), "other".
Flags: E = elementwise, X = expensive (XLA's IsExpensive), S = side effect, F = float-only.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OpInfo:
    """One row of the opcode table."""

    text: str
    arity: int
    category: str
    flags: str = ""


# fmt: off
_TABLE: list[tuple[str, str, int, str, str]] = [
    # enum name, text, arity, category, flags
    # --- elementwise unary --------------------------------------------------------------
    ("ABS", "abs", 1, "unary", "E"),
    ("NEGATE", "negate", 1, "unary", "E"),
    ("EXP", "exponential", 1, "unary", "EXF"),
    ("EXPM1", "exponential-minus-one", 1, "unary", "EXF"),
    ("LOG", "log", 1, "unary", "EXF"),
    ("LOG1P", "log-plus-one", 1, "unary", "EXF"),
    ("SQRT", "sqrt", 1, "unary", "EXF"),
    ("RSQRT", "rsqrt", 1, "unary", "EXF"),
    ("CBRT", "cbrt", 1, "unary", "EXF"),
    ("TANH", "tanh", 1, "unary", "EXF"),
    ("LOGISTIC", "logistic", 1, "unary", "EXF"),
    ("SIN", "sine", 1, "unary", "EXF"),
    ("COS", "cosine", 1, "unary", "EXF"),
    ("TAN", "tan", 1, "unary", "EXF"),
    ("ERF", "erf", 1, "unary", "EXF"),
    ("FLOOR", "floor", 1, "unary", "EF"),
    ("CEIL", "ceil", 1, "unary", "EF"),
    ("ROUND_AFZ", "round-nearest-afz", 1, "unary", "EF"),
    ("ROUND_EVEN", "round-nearest-even", 1, "unary", "EF"),
    ("SIGN", "sign", 1, "unary", "E"),
    ("NOT", "not", 1, "unary", "E"),
    ("IS_FINITE", "is-finite", 1, "unary", "EF"),
    ("POPCNT", "popcnt", 1, "unary", "E"),
    ("CLZ", "count-leading-zeros", 1, "unary", "E"),
    ("REAL", "real", 1, "unary", "E"),
    ("IMAG", "imag", 1, "unary", "E"),
    ("CONVERT", "convert", 1, "unary", "E"),
    ("BITCAST_CONVERT", "bitcast-convert", 1, "unary", ""),
    ("REDUCE_PRECISION", "reduce-precision", 1, "unary", "EF"),
    ("COPY", "copy", 1, "data", ""),
    # --- elementwise binary -------------------------------------------------------------
    ("ADD", "add", 2, "binary", "E"),
    ("SUBTRACT", "subtract", 2, "binary", "E"),
    ("MULTIPLY", "multiply", 2, "binary", "E"),
    ("DIVIDE", "divide", 2, "binary", "E"),
    ("REMAINDER", "remainder", 2, "binary", "E"),
    ("MAXIMUM", "maximum", 2, "binary", "E"),
    ("MINIMUM", "minimum", 2, "binary", "E"),
    ("POWER", "power", 2, "binary", "EX"),
    ("ATAN2", "atan2", 2, "binary", "EXF"),
    ("AND", "and", 2, "binary", "E"),
    ("OR", "or", 2, "binary", "E"),
    ("XOR", "xor", 2, "binary", "E"),
    ("SHIFT_LEFT", "shift-left", 2, "binary", "E"),
    ("SHIFT_RIGHT_ARITHMETIC", "shift-right-arithmetic", 2, "binary", "E"),
    ("SHIFT_RIGHT_LOGICAL", "shift-right-logical", 2, "binary", "E"),
    ("COMPLEX", "complex", 2, "binary", "E"),
    ("COMPARE", "compare", 2, "compare", "E"),
    # --- elementwise ternary ------------------------------------------------------------
    ("SELECT", "select", 3, "ternary", "E"),
    ("CLAMP", "clamp", 3, "ternary", "E"),
    # --- data movement ------------------------------------------------------------------
    ("BROADCAST", "broadcast", 1, "data", ""),
    ("RESHAPE", "reshape", 1, "data", ""),
    ("TRANSPOSE", "transpose", 1, "data", ""),
    ("BITCAST", "bitcast", 1, "data", ""),
    ("SLICE", "slice", 1, "data", ""),
    ("DYNAMIC_SLICE", "dynamic-slice", -1, "data", ""),
    ("DYNAMIC_UPDATE_SLICE", "dynamic-update-slice", -1, "data", ""),
    ("CONCATENATE", "concatenate", -1, "data", ""),
    ("PAD", "pad", 2, "data", ""),
    ("REVERSE", "reverse", 1, "data", ""),
    ("GATHER", "gather", 2, "data", "X"),
    ("SCATTER", "scatter", -1, "data", "X"),
    # --- reductions and friends ---------------------------------------------------------
    ("REDUCE", "reduce", -1, "reduce", "X"),
    ("REDUCE_WINDOW", "reduce-window", -1, "reduce", "X"),
    ("SELECT_AND_SCATTER", "select-and-scatter", 3, "reduce", "X"),
    ("DOT", "dot", 2, "other", "X"),
    ("CONVOLUTION", "convolution", 2, "other", "X"),
    ("SORT", "sort", -1, "other", "X"),
    ("TOPK", "topk", 1, "other", "X"),
    ("MAP", "map", -1, "other", "X"),
    ("FFT", "fft", 1, "other", "X"),
    # --- leaves -------------------------------------------------------------------------
    ("PARAMETER", "parameter", 0, "leaf", "X"),
    ("CONSTANT", "constant", 0, "leaf", ""),
    ("IOTA", "iota", 0, "leaf", ""),
    ("RNG", "rng", 2, "leaf", "XS"),
    ("RNG_BIT_GENERATOR", "rng-bit-generator", 1, "leaf", "X"),
    ("RNG_GET_AND_UPDATE_STATE", "rng-get-and-update-state", 0, "leaf", "XS"),
    ("AFTER_ALL", "after-all", -1, "leaf", ""),
    # --- tuples and control flow --------------------------------------------------------
    ("TUPLE", "tuple", -1, "data", ""),
    ("GET_TUPLE_ELEMENT", "get-tuple-element", 1, "data", ""),
    ("WHILE", "while", 1, "control", "X"),
    ("CONDITIONAL", "conditional", -1, "control", "X"),
    ("CALL", "call", -1, "control", "X"),
    ("FUSION", "fusion", -1, "other", "X"),
    ("CUSTOM_CALL", "custom-call", -1, "other", "XS"),
    ("OPT_BARRIER", "opt-barrier", 1, "data", ""),
    ("ADD_DEPENDENCY", "add-dependency", 2, "data", ""),
    ("DOMAIN", "domain", 1, "data", ""),
    ("ALL_REDUCE", "all-reduce", -1, "other", "XS"),
    ("PARTITION_ID", "partition-id", 0, "leaf", ""),
    ("REPLICA_ID", "replica-id", 0, "leaf", ""),
    # --- asynchronous copies (host offload) ---------------------------------------------
    # copy-start(x) -> (destination, x, u32[] context); copy-done(start) -> destination
    ("COPY_START", "copy-start", 1, "data", ""),
    ("COPY_DONE", "copy-done", 1, "data", ""),
]
# fmt: on


class Opcode(enum.Enum):
    """HLO opcodes. Inside the compiler they are enums; strings only in the text format."""

    # Members are generated from _TABLE below; listed here for type checkers.
    ABS = "abs"
    NEGATE = "negate"
    EXP = "exponential"
    EXPM1 = "exponential-minus-one"
    LOG = "log"
    LOG1P = "log-plus-one"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    CBRT = "cbrt"
    TANH = "tanh"
    LOGISTIC = "logistic"
    SIN = "sine"
    COS = "cosine"
    TAN = "tan"
    ERF = "erf"
    FLOOR = "floor"
    CEIL = "ceil"
    ROUND_AFZ = "round-nearest-afz"
    ROUND_EVEN = "round-nearest-even"
    SIGN = "sign"
    NOT = "not"
    IS_FINITE = "is-finite"
    POPCNT = "popcnt"
    CLZ = "count-leading-zeros"
    REAL = "real"
    IMAG = "imag"
    CONVERT = "convert"
    BITCAST_CONVERT = "bitcast-convert"
    REDUCE_PRECISION = "reduce-precision"
    COPY = "copy"
    ADD = "add"
    SUBTRACT = "subtract"
    MULTIPLY = "multiply"
    DIVIDE = "divide"
    REMAINDER = "remainder"
    MAXIMUM = "maximum"
    MINIMUM = "minimum"
    POWER = "power"
    ATAN2 = "atan2"
    AND = "and"
    OR = "or"
    XOR = "xor"
    SHIFT_LEFT = "shift-left"
    SHIFT_RIGHT_ARITHMETIC = "shift-right-arithmetic"
    SHIFT_RIGHT_LOGICAL = "shift-right-logical"
    COMPLEX = "complex"
    COMPARE = "compare"
    SELECT = "select"
    CLAMP = "clamp"
    BROADCAST = "broadcast"
    RESHAPE = "reshape"
    TRANSPOSE = "transpose"
    BITCAST = "bitcast"
    SLICE = "slice"
    DYNAMIC_SLICE = "dynamic-slice"
    DYNAMIC_UPDATE_SLICE = "dynamic-update-slice"
    CONCATENATE = "concatenate"
    PAD = "pad"
    REVERSE = "reverse"
    GATHER = "gather"
    SCATTER = "scatter"
    REDUCE = "reduce"
    REDUCE_WINDOW = "reduce-window"
    SELECT_AND_SCATTER = "select-and-scatter"
    DOT = "dot"
    CONVOLUTION = "convolution"
    SORT = "sort"
    TOPK = "topk"
    MAP = "map"
    FFT = "fft"
    PARAMETER = "parameter"
    CONSTANT = "constant"
    IOTA = "iota"
    RNG = "rng"
    RNG_BIT_GENERATOR = "rng-bit-generator"
    RNG_GET_AND_UPDATE_STATE = "rng-get-and-update-state"
    AFTER_ALL = "after-all"
    TUPLE = "tuple"
    GET_TUPLE_ELEMENT = "get-tuple-element"
    WHILE = "while"
    CONDITIONAL = "conditional"
    CALL = "call"
    FUSION = "fusion"
    CUSTOM_CALL = "custom-call"
    OPT_BARRIER = "opt-barrier"
    ADD_DEPENDENCY = "add-dependency"
    DOMAIN = "domain"
    ALL_REDUCE = "all-reduce"
    PARTITION_ID = "partition-id"
    REPLICA_ID = "replica-id"
    COPY_START = "copy-start"
    COPY_DONE = "copy-done"

    # ---- table-backed properties ----------------------------------------------------------
    @property
    def info(self) -> OpInfo:
        return _INFO[self]

    @property
    def text(self) -> str:
        """The HLO text spelling."""
        return self.value

    @property
    def arity(self) -> int:
        """Number of operands; -1 when variadic."""
        return _INFO[self].arity

    @property
    def category(self) -> str:
        return _INFO[self].category

    @property
    def is_elementwise(self) -> bool:
        """Output element i depends only on operand elements i (same shapes)."""
        return "E" in _INFO[self].flags

    @property
    def is_elementwise_unary(self) -> bool:
        return self.is_elementwise and _INFO[self].category == "unary"

    @property
    def is_elementwise_binary(self) -> bool:
        return _INFO[self].category in ("binary", "compare")

    @property
    def is_expensive(self) -> bool:
        """XLA's IsExpensive: worth not duplicating into several fusions."""
        return "X" in _INFO[self].flags

    @property
    def has_side_effect(self) -> bool:
        return "S" in _INFO[self].flags

    @property
    def is_float_only(self) -> bool:
        return "F" in _INFO[self].flags

    @property
    def is_control_flow(self) -> bool:
        return _INFO[self].category == "control"

    @staticmethod
    def from_text(text: str) -> Opcode:
        """`exponential` -> Opcode.EXP; KeyError for unknown names (parsers wrap it)."""
        return _BY_TEXT[text]


_INFO: dict[Opcode, OpInfo] = {}
for _name, _text, _arity, _cat, _flags in _TABLE:
    _op = Opcode[_name]
    assert _op.value == _text, (_name, _text)
    _INFO[_op] = OpInfo(_text, _arity, _cat, _flags)
assert set(_INFO) == set(Opcode), set(Opcode) - set(_INFO)
_BY_TEXT: dict[str, Opcode] = {op.value: op for op in Opcode}
# Old spellings XLA still accepts.
_BY_TEXT["clz"] = Opcode.CLZ
_BY_TEXT["optimization-barrier"] = Opcode.OPT_BARRIER

ELEMENTWISE_OPCODES: frozenset[Opcode] = frozenset(op for op in Opcode if op.is_elementwise)

# Computations called by each opcode, by attribute key, in printing order.
CALLED_COMPUTATION_KEYS: dict[Opcode, tuple[str, ...]] = {
    Opcode.REDUCE: ("to_apply",),
    Opcode.REDUCE_WINDOW: ("to_apply",),
    Opcode.MAP: ("to_apply",),
    Opcode.SORT: ("to_apply",),
    Opcode.SCATTER: ("to_apply",),
    Opcode.ALL_REDUCE: ("to_apply",),
    Opcode.CALL: ("to_apply",),
    Opcode.FUSION: ("calls",),
    Opcode.WHILE: ("condition", "body"),
    Opcode.SELECT_AND_SCATTER: ("select", "scatter"),
    # conditional: true_computation/false_computation or branch_computations={...}
    # custom-call: to_apply= or called_computations={...}
}

# Opcodes whose called computations are embedded ("thread-local"): their parameters define
# fresh scalar/fused values. The rest (call/while/conditional) are control flow.
EMBEDDED_CALLERS: frozenset[Opcode] = frozenset({
    Opcode.REDUCE, Opcode.REDUCE_WINDOW, Opcode.MAP, Opcode.SORT, Opcode.SCATTER,
    Opcode.SELECT_AND_SCATTER, Opcode.FUSION, Opcode.CUSTOM_CALL, Opcode.ALL_REDUCE,
})

COMPARISON_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
COMPARISON_TYPES = ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")
FUSION_KINDS = ("kLoop", "kInput", "kOutput", "kCustom")

ASYNC_COPY_OPCODES: frozenset[Opcode] = frozenset({Opcode.COPY_START, Opcode.COPY_DONE})
"""The asynchronous copy pair: `copy-start` begins a copy (to another memory space, e.g. the
pinned host memory `S(5)`) and `copy-done` waits for it (XLA's semantics)."""
