"""Code generation shared by the CPU and GPU backends.

* `llvm_utils` - LLVM types for PrimitiveTypes, exact constants, intrinsics, `for_range` /
  `for_nest` loops, host target machine, verification (LoweringError), new-pass-manager
  optimisation, object/assembly emission.
* `ir_array` - `IrArray`: one array operand or output in LLVM IR (element type, physical
  order, linear offsets, element loads and stores), `physical_order`, `constant_bytes`.
* `math` - vectorisable transcendentals in IR (exp, expm1, log, log1p, tanh, logistic, erf,
  sin, cos, tan, pow, atan2, sqrt, rsqrt, cbrt) for f32/f64 with documented ulp bounds.
* `elemental` (+ `convert`, `scalar_types`) - one scalar generator per elementwise opcode,
  XLA semantics, dispatched by Opcode (`emit_elemental`).
* `indexing` - linear <-> multi-index arithmetic and `ElementalIrEmitter`, which generates an
  element of any instruction of a fused computation from an output index.
"""
from xlc.codegen.elemental import ELEMENTAL_GENERATORS, emit_elemental, has_elemental_generator
from xlc.codegen.indexing import (
    ElementalIrEmitter,
    IrIndex,
    has_elemental_ir_rule,
    linear_to_multi,
    multi_to_linear,
)

__all__ = [
    "ELEMENTAL_GENERATORS", "ElementalIrEmitter", "IrIndex", "emit_elemental",
    "has_elemental_generator",
    "has_elemental_ir_rule", "linear_to_multi", "multi_to_linear",
]
