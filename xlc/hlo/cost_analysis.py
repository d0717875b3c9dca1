"""Cost analysis of an HLO module: FLOPs, transcendentals and bytes accessed per instruction
(XLA's HloCostAnalysis, the figures `jax.stages.Compiled.cost_analysis()` reports), and a
roofline estimate per kernel for a device.

Counting rules (XLA's):
* elementwise arithmetic, compare and select: one flop per output element; exp, log, tanh,
  sin, cos, tan, power, sqrt, rsqrt, cbrt, logistic, atan2, erf, expm1, log1p: one
  transcendental per element instead; data movement (copy, convert, broadcast, slice,
  transpose, reshape, ...) no flops;
* dot: 2 x output elements x contracted size (also an `__xlc$gemm` custom-call);
  convolution: 2 x output elements x kernel window x input features per group;
* reduce and reduce-window: the reducer's flops once per reduced input element;
* a fusion: the sum of its fused instructions' flops; its bytes are those of its operands and
  outputs only (fused values never touch memory);
* bytes accessed of a top-level instruction: its array operands' and outputs' bytes; no code
  (parameter, constant, tuple, get-tuple-element, bitcast): nothing.
Control flow (while, conditional, call) counts its called computations once.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

from xlc.hlo.gemm_call import GEMM_TARGET, gemm_call_dot
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.precision import dot_precision
from xlc.hlo.shape import PrimitiveType, Shape

TRANSCENDENTAL = frozenset({
    Opcode.EXP, Opcode.EXPM1, Opcode.LOG, Opcode.LOG1P, Opcode.TANH, Opcode.SIN, Opcode.COS,
    Opcode.TAN, Opcode.POWER, Opcode.SQRT, Opcode.RSQRT, Opcode.CBRT, Opcode.LOGISTIC,
    Opcode.ATAN2, Opcode.ERF,
})
_ARITHMETIC = ("unary", "binary", "compare", "ternary")
_NO_CODE = frozenset({Opcode.PARAMETER, Opcode.CONSTANT, Opcode.TUPLE,
                      Opcode.GET_TUPLE_ELEMENT, Opcode.BITCAST, Opcode.AFTER_ALL})
_CONTROL = frozenset({Opcode.WHILE, Opcode.CONDITIONAL, Opcode.CALL})


@dataclass
class Cost:
    """What one instruction (a kernel, for top-level ones) computes and moves."""

    name: str
    opcode: str
    flops: int = 0
    transcendentals: int = 0
    bytes_accessed: int = 0
    tensor16_flops: int = 0
    """The part of `flops` in dots of f16 / bf16 operands (tensor cores at 16 bits)."""
    tf32_flops: int = 0
    """The part of `flops` in f32 dots below `highest` precision (TF32 tensor cores)."""

    def add(self, other: Cost) -> None:
        """Accumulate `other`'s counts into this one."""
        self.flops += other.flops
        self.transcendentals += other.transcendentals
        self.bytes_accessed += other.bytes_accessed
        self.tensor16_flops += other.tensor16_flops
        self.tf32_flops += other.tf32_flops


def _elements(shape: Shape) -> int:
    if shape.is_tuple:
        return sum(_elements(s) for s in shape.tuple_shapes or ())
    return shape.num_elements


def _bytes(shape: Shape) -> int:
    if shape.is_tuple:
        return sum(_bytes(s) for s in shape.tuple_shapes or ())
    return shape.byte_size()


def _dot_flops(out: Shape, lhs: Shape, contracting: object) -> int:
    dims = [int(d) for d in contracting or ()]  # type: ignore[attr-defined]
    return 2 * out.num_elements * prod(lhs.dims[d] for d in dims)


def _dot_cost(cost: Cost, dot: HloInstruction) -> None:
    """A dot's flops, and which tensor-core class they fall in (as the GPU runs them)."""
    lhs, rhs = dot.operands
    cost.flops = _dot_flops(dot.shape, lhs.shape, dot.attrs.get("lhs_contracting_dims"))
    lt, rt = lhs.shape.element_type, rhs.shape.element_type
    if lt is rt and lt in (PrimitiveType.F16, PrimitiveType.BF16):
        cost.tensor16_flops = cost.flops
    elif lt is rt is PrimitiveType.F32 and dot_precision(dot) != "highest":
        cost.tf32_flops = cost.flops


def _computation_flops(comp: HloComputation) -> Cost:
    total = Cost(comp.name, "computation")
    for inst in comp.instructions:
        total.add(_compute(inst))
    return total


def _compute(inst: HloInstruction) -> Cost:
    """Flops and transcendentals of `inst` itself (no bytes)."""
    op = inst.opcode
    cost = Cost(inst.name, op.text)
    if op in TRANSCENDENTAL:
        cost.transcendentals = _elements(inst.shape)
    elif op.is_elementwise and op.category in _ARITHMETIC:
        cost.flops = _elements(inst.shape)
    elif op is Opcode.DOT:
        _dot_cost(cost, inst)
    elif op is Opcode.CUSTOM_CALL and inst.attrs.get("custom_call_target") == GEMM_TARGET:
        _dot_cost(cost, gemm_call_dot(inst))
    elif op is Opcode.CONVOLUTION:
        kernel = inst.operands[1].shape
        labels = inst.attrs.get("dim_labels")
        spatial = getattr(labels, "kernel_spatial", None)
        window = prod(kernel.dims[d] for d in spatial) if spatial is not None else 1
        in_feature = getattr(labels, "kernel_input_feature", None)
        features = kernel.dims[in_feature] if in_feature is not None else 1
        cost.flops = 2 * inst.shape.num_elements * window * features
    elif op in (Opcode.REDUCE, Opcode.REDUCE_WINDOW) and inst.called:
        per = _computation_flops(inst.called[0])
        n = _elements(inst.operands[0].shape)
        cost.flops, cost.transcendentals = per.flops * n, per.transcendentals * n
    elif op is Opcode.FUSION:
        fused = _computation_flops(inst.called[0])
        cost.flops, cost.transcendentals = fused.flops, fused.transcendentals
        cost.tensor16_flops, cost.tf32_flops = fused.tensor16_flops, fused.tf32_flops
    return cost


def instruction_cost(inst: HloInstruction, matmul_precision: str = "default") -> Cost:
    """The cost of top-level instruction `inst`: its flops and transcendentals and the bytes
    of its array operands and outputs (nothing for instructions that emit no code). With
    `matmul_precision` "highest" (the compile option) no f32 dot counts as TF32."""
    cost = _compute(inst)
    if matmul_precision == "highest":
        cost.tf32_flops = 0
    if inst.opcode not in _NO_CODE and inst.opcode not in _CONTROL:
        cost.bytes_accessed = _bytes(inst.shape) + sum(_bytes(o.shape) for o in inst.operands)
    return cost


def module_costs(module: HloModule) -> list[Cost]:
    """The cost of every instruction of the entry computation that emits code, in order
    (while/conditional/call: the summed cost of their computations, counted once)."""
    assert module.entry is not None
    out: list[Cost] = []

    def walk(comp: HloComputation, into: list[Cost]) -> None:
        for inst in comp.instructions:
            if inst.opcode in _CONTROL:
                inner: list[Cost] = []
                for callee in inst.called:
                    walk(callee, inner)
                total = Cost(inst.name, inst.opcode.text)
                for c in inner:
                    total.add(c)
                into.append(total)
            elif inst.opcode not in _NO_CODE:
                into.append(instruction_cost(inst))

    walk(module.entry, out)
    return out


def cost_analysis(module: HloModule) -> dict[str, float]:
    """The module's totals with JAX's key names: `flops`, `transcendentals`,
    `bytes accessed`."""
    total = Cost(module.name, "module")
    for c in module_costs(module):
        total.add(c)
    return {"flops": float(total.flops), "transcendentals": float(total.transcendentals),
            "bytes accessed": float(total.bytes_accessed)}


@dataclass(frozen=True)
class Device:
    """A roofline: memory bandwidth (bytes/s, read + write) and peak arithmetic (flops/s)."""

    name: str
    bandwidth: float
    peak_flops: float
    tensor16_flops: float = 0.0
    """Peak of dots of f16/bf16 operands (0: as `peak_flops`)."""
    tf32_flops: float = 0.0
    """Peak of f32 dots in TF32 (0: as `peak_flops`)."""

    def seconds(self, cost: Cost) -> float:
        """The roofline time of `cost`: the larger of its memory and arithmetic time (each
        class of flops at its own peak)."""
        scalar = cost.flops - cost.tensor16_flops - cost.tf32_flops
        compute = scalar / self.peak_flops \
            + cost.tensor16_flops / (self.tensor16_flops or self.peak_flops) \
            + cost.tf32_flops / (self.tf32_flops or self.peak_flops)
        return max(cost.bytes_accessed / self.bandwidth, compute)


H100 = Device("H100 (measured copy bandwidth, FP32 / tensor-core peaks)", 2.93e12, 67e12,
              tensor16_flops=989e12, tf32_flops=495e12)
"""Calibrated with ../shared/reference/gpu-h100.md: a device copy moves 2.90-2.97 TB/s
(read + write); 67 TFLOP/s is the SXM part's FP32 (non-tensor-core) peak, 989 / 495 TFLOP/s
its dense f16/bf16 and TF32 tensor-core peaks (cuBLAS reached 708 at bf16 4096^3 there)."""
