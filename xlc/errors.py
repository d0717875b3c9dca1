"""The one error hierarchy of xlc. Error wording is API: tests assert it."""
from __future__ import annotations


class XlcError(Exception):
    """Base class of every error xlc raises on purpose."""


class ParseError(XlcError):
    """Malformed HLO text. Carries the line and column (1-based) of the offending token."""

    def __init__(self, message: str, line: int = 0, column: int = 0, filename: str = "<hlo>"):
        self.message = message
        self.line = line
        self.column = column
        self.filename = filename
        super().__init__(f"{filename}:{line}:{column}: {message}" if line else message)


class VerificationError(XlcError):
    """A module breaks an HLO rule (shapes, operand counts, attributes, graph structure).

    When the offending instruction was parsed from HLO text, `filename`, `line` and `column`
    (1-based) say where it is defined and `location` is `file:line:column`; otherwise they are
    None / 0. The message itself never includes the location (wording is API)."""

    def __init__(self, message: str, filename: str | None = None, line: int = 0,
                 column: int = 0):
        self.message = message
        self.filename = filename
        self.line = line
        self.column = column
        super().__init__(message)

    @property
    def location(self) -> str | None:
        """`file:line:column` of the offending instruction in the parsed text, or None."""
        return f"{self.filename}:{self.line}:{self.column}" if self.filename else None


class TraceError(XlcError):
    """A Python function could not be traced (Python control flow on traced values, bad shapes)."""


class UnsupportedOpError(XlcError):
    """An opcode or configuration that a component does not support."""


class LoweringError(XlcError):
    """Code generation failed (LLVM verification, ptxas)."""


class ArtifactError(XlcError):
    """A serialized executable is unreadable, corrupted, tampered with or incompatible."""


class ArgumentError(XlcError):
    """Arguments passed to a compiled function do not match its signature."""


class EvaluationError(XlcError):
    """The reference evaluator cannot run a module (e.g. an elided constant `{...}`)."""


class ShapeError(XlcError):
    """Operand shapes or attributes that an op does not accept (raised by shape inference;
    the verifier wraps it into VerificationError, the tracer into TraceError)."""


class CustomCallError(XlcError):
    """A custom-call failed at run time: a user FFI target returned an error, or a host call
    (a LAPACK target, a Python callback) raised. The message names the target."""


class MemoryLimitError(XlcError):
    """The program cannot be brought under `memory_limit` (raised with `memory_limit_strict`;
    the message gives the limit, the smallest peak reached and what was tried)."""
