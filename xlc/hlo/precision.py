"""A dot's or convolution's requested precision, as XLA's HLO text carries it.

XLA prints the PrecisionConfig of a `dot` / `convolution` as `operand_precision={highest,
highest}` (one entry per operand: default, high, highest; absent means default) and may name
an explicit algorithm (`algorithm=dot_f32_f32_f32`, `dot_tf32_tf32_f32`, ...). xlc keeps the
first verbatim in `HloInstruction.extra` and the second as the `algorithm` attribute; this
module reads both and writes the first.

What the levels mean is the backend's choice, as in XLA: the CPU computes f32 dots in full
FP32 whatever is asked; the GPU uses TF32 tensor cores for f32 dots at `default` and `high`
and full FP32 at `highest` (docs/gpu.md, "Numerics").
"""
from __future__ import annotations

from typing import Literal

from xlc.errors import ArgumentError
from xlc.hlo.ir import HloInstruction

Level = Literal["default", "high", "highest"]
LEVELS: tuple[Level, ...] = ("default", "high", "highest")

_FULL_F32 = ("dot_f32_f32_f32", "dot_f64_f64_f64")
_TF32 = ("dot_tf32_tf32_f32", "dot_tf32_tf32_f32_x3")


def level_of(value: object, what: str = "precision") -> Level:
    """A precision level from a name ("default", "HIGHEST", "fastest"/"float32"/
    "tensorfloat32"/"bfloat16" as JAX spells them), a `lax.Precision` member, or None
    (default). ArgumentError for anything else."""
    if value is None:
        return "default"
    name = getattr(value, "name", value)
    if isinstance(name, str):
        key = name.strip().lower()
        aliases: dict[str, Level] = {"fastest": "default", "bfloat16": "default",
                                     "tensorfloat32": "high", "float32": "highest"}
        if key in LEVELS:
            return key  # type: ignore[return-value]
        if key in aliases:
            return aliases[key]
    raise ArgumentError(f"{what}: expected one of default, high, highest (or a lax.Precision), "
                        f"got {value!r}")


def operand_precision_text(lhs: Level, rhs: Level) -> str:
    """The `operand_precision` attribute value for two operand levels."""
    return "{" + f"{lhs},{rhs}" + "}"


def dot_precision(inst: HloInstruction) -> Level:
    """The precision a dot asks for: the highest of its operands' levels, or what its
    `algorithm` implies (full-FP32 algorithms: highest; TF32 ones: high)."""
    algo = str(inst.attrs.get("algorithm") or inst.get_extra("algorithm") or "").strip().lower()
    if algo in _FULL_F32:
        return "highest"
    if algo in _TF32:
        return "high"
    raw = inst.get_extra("operand_precision")
    if not raw:
        return "default"
    names = [p.strip().lower() for p in raw.strip().strip("{}").split(",") if p.strip()]
    levels = [n if n in LEVELS else "default" for n in names]
    return max(levels, key=LEVELS.index, default="default")  # type: ignore[return-value]


def precision_extra(value: object, what: str = "precision") -> tuple[tuple[str, str], ...]:
    """The `extra` attributes of a dot asked for `value`: None, one level for both operands
    (a name or a `lax.Precision`) or a pair, one per operand. Nothing for (default, default),
    so such dots print as XLA prints them."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ArgumentError(f"{what}: a precision pair needs 2 entries (lhs, rhs), got "
                                f"{len(value)}")
        lhs, rhs = level_of(value[0], what), level_of(value[1], what)
    else:
        lhs = rhs = level_of(value, what)
    if lhs == rhs == "default":
        return ()
    return (("operand_precision", operand_precision_text(lhs, rhs)),)
