"""The HLO IR: shapes, the opcode table, instructions/computations/modules, text parser and
printer, shape inference, the verifier and the numpy reference evaluator."""
from xlc.hlo.attrs import Attrs, ConvDimLabels, Literal, PaddingConfig, SliceDim, Window, WindowDim
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule, IOAlias
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Layout, PrimitiveType, Shape, ShapeIndex

__all__ = [
    "Attrs", "ConvDimLabels", "Literal", "PaddingConfig", "SliceDim", "Window", "WindowDim",
    "HloComputation", "HloInstruction", "HloModule", "IOAlias", "Opcode", "Layout",
    "PrimitiveType", "Shape", "ShapeIndex", "parse_module", "print_module", "verify_module",
    "evaluate",
]


def __getattr__(name: str):  # lazy: parser/printer/verifier/evaluator import this package
    if name == "parse_module":
        from xlc.hlo.parser import parse_module
        return parse_module
    if name == "print_module":
        from xlc.hlo.printer import print_module
        return print_module
    if name == "verify_module":
        from xlc.hlo.verifier import verify_module
        return verify_module
    if name == "evaluate":
        from xlc.hlo.evaluator import evaluate
        return evaluate
    raise AttributeError(name)
