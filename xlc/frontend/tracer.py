"""The tracer: `Tracer` values recorded as HLO instructions into the computation being built.

A trace is a stack of `Builder`s (one per computation: the entry, and nested while/cond bodies,
reducers, comparators). `emit` appends an instruction to the innermost builder, attaching
`metadata={op_name="jit(f)/add" source_file=... source_line=...}` that points at the user's line
(the first stack frame outside the xlc package). A tracer from an enclosing builder used inside a
nested one is *captured*: the nested builder asks its capture hook for a placeholder (e.g. a
get-tuple-element of the loop state) and the caller threads the outer value in.

Errors raised while tracing are `TraceError`s naming the user's `file:line`.
"""
from __future__ import annotations

import functools
import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from xlc.errors import ShapeError, TraceError
from xlc.frontend import dtypes
from xlc.hlo.attrs import Literal
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape

log = logging.getLogger("xlc.frontend")

_XLC_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


# ---- user locations -------------------------------------------------------------------------
# Frames in the xlc package are library frames and skipped when looking for the user's line,
# except frames in the source file of a function being traced by `xlc.jit` (`user_code`): a
# program that lives inside the package (xlc/cli/demo.py) is the user's code while it is traced.
# Without this, every op of such a program would point at the first frame outside the package,
# e.g. the `xlc` console script. The op library itself (xlc/frontend, xlc/hlo) never counts as
# user code: `xlc.jit(xlc.nn.softmax)` reports the line that called it, as JAX does.
_OP_LIBRARY_DIRS = tuple(os.path.join(_XLC_DIR, d) + os.sep for d in ("frontend", "hlo"))


def _user_files() -> list[str]:
    files = getattr(_state, "user_files", None)
    if files is None:
        files = _state.user_files = []
    return files


def source_file(fn: Any) -> str | None:
    """The file defining `fn` (through functools.wraps wrappers, partials, jitted functions
    and callable objects), or None when it has no Python source (builtins)."""
    seen = 0
    while seen < 100:  # unwrap chains; bounded against self-referencing wrappers
        seen += 1
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif getattr(fn, "__wrapped__", None) is not None:
            fn = fn.__wrapped__
        else:
            break
    code = getattr(fn, "__code__", None)
    if code is None and not isinstance(fn, type):  # a callable object: its __call__ method
        call = next((k.__dict__["__call__"] for k in type(fn).__mro__
                     if "__call__" in k.__dict__), None)
        code = getattr(call, "__code__", None)
    return code.co_filename if code is not None else None


class user_code:
    """Context manager: while active, frames in `fn`'s source file count as the user's code
    (for metadata and error locations) even when the file is inside the xlc package, unless it
    is part of the op library (xlc/frontend, xlc/hlo)."""

    def __init__(self, fn: Any):
        file = source_file(fn) if fn is not None else None
        self.file = None if file is None or file.startswith(_OP_LIBRARY_DIRS) else file

    def __enter__(self) -> None:
        _user_files().append(self.file or "")

    def __exit__(self, *exc: Any) -> None:
        _user_files().pop()


def _is_library_file(filename: str) -> bool:
    if filename.startswith("<frozen"):
        return True
    return filename.startswith(_XLC_DIR) and filename not in _user_files()


def _is_console_script(frame: Any) -> bool:
    """The `xlc` console-script wrapper (`from xlc.cli import main; sys.exit(main())`)."""
    main = frame.f_globals.get("main")
    return frame.f_globals.get("__name__") == "__main__" and \
        getattr(main, "__module__", None) == "xlc.cli.main"


def user_frame() -> tuple[str, int] | None:
    """(file, line) of the innermost stack frame of the user's code: outside the xlc package,
    or in the file of a function being traced (see `user_code`); None if there is none (e.g.
    `xlc compile xlc.nn:softmax` traces only library code)."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not _is_library_file(fn) and not _is_console_script(f):
            return fn, f.f_lineno
        f = f.f_back  # type: ignore[assignment]
    return None


def user_location() -> str:
    """`file:line` of the user's code (for error messages); `<unknown>` if none."""
    fr = user_frame()
    return f"{fr[0]}:{fr[1]}" if fr else "<unknown>"


def trace_error(message: str) -> TraceError:
    """A TraceError whose message ends with ` (at file:line)` of the user's code."""
    return TraceError(f"{message} (at {user_location()})")


# ---- builders and the trace stack -------------------------------------------------------------
class CaptureList:
    """Outer values threaded into nested computations; shared by the computations of one
    control-flow op (while cond+body, all branches of a conditional) so indices agree."""

    def __init__(self) -> None:
        self.values: list[Tracer] = []
        self._index: dict[int, int] = {}

    def index_of(self, outer: Tracer) -> int:
        key = id(outer.inst)
        if key not in self._index:
            self._index[key] = len(self.values)
            self.values.append(outer)
        return self._index[key]


class Builder:
    """One computation under construction.

    `capture` is None when the computation may not use outer values (reducers, comparators);
    otherwise (captures, make_placeholder) where make_placeholder(builder, k, outer) creates the
    inner value standing for capture k."""

    def __init__(self, module: HloModule, comp: HloComputation, name_stack: str,
                 parent: Builder | None = None,
                 capture: tuple[CaptureList, Callable[[Builder, int, Tracer], Tracer]] | None
                 = None, what: str = "function"):
        self.module = module
        self.comp = comp
        self.name_stack = name_stack
        self.parent = parent
        self.capture = capture
        self.what = what
        self._inner: dict[int, Tracer] = {}

    def lift(self, t: Tracer) -> Tracer:
        """The value standing for tracer `t` inside this computation (captures it if needed)."""
        if t.builder is self:
            return t
        if self.parent is None or not _on_stack(t.builder):
            raise trace_error(f"a traced value {t.aval_text} escaped from the function that "
                              "created it (e.g. stored in a global or a closure of a finished "
                              "trace); pass it as an argument instead")
        if self.capture is None:
            raise trace_error(f"the {self.what} must not use traced values of the enclosing "
                              f"function (it used a captured {t.aval_text}); pass them as "
                              "operands instead")
        outer = self.parent.lift(t)
        caps, make = self.capture
        k = caps.index_of(outer)
        if k not in self._inner:
            with push_builder(self):  # the placeholder lives in this computation
                self._inner[k] = make(self, k, outer)
        return self._inner[k]

    def metadata(self, op_name: str) -> str:
        fr = user_frame()
        text = f'op_name="{self.name_stack}/{op_name}"'
        if fr is not None:
            path = fr[0].replace("\\", "\\\\").replace('"', '\\"')
            text += f' source_file="{path}" source_line={fr[1]}'
        return "{" + text + "}"


_state = threading.local()


def _stack() -> list[Builder]:
    st = getattr(_state, "stack", None)
    if st is None:
        st = _state.stack = []
    return st


def _on_stack(b: Builder) -> bool:
    return any(x is b for x in _stack())


def current_builder() -> Builder | None:
    """The innermost builder, or None outside any trace."""
    st = _stack()
    return st[-1] if st else None


T = TypeVar("T", bound="set[Any] | dict[Any, Any]")
_TRACE_SCOPED: list[Any] = []


def trace_scoped(table: T) -> T:
    """Register a module-level side table keyed by the instructions of a trace (autodiff's
    marks, loop trip counts): it is cleared when the outermost trace ends, since no later
    trace can see those instructions. Returns the table."""
    _TRACE_SCOPED.append(table)
    return table


def end_of_outermost_trace() -> None:
    """Clear the `trace_scoped` tables (called by staging when no trace is active any more)."""
    if current_builder() is None:
        for table in _TRACE_SCOPED:
            table.clear()


def require_builder(what: str) -> Builder:
    b = current_builder()
    if b is None:
        raise trace_error(f"{what} needs an active trace (call it inside an xlc.jit function)")
    return b


class push_builder:
    """Context manager making `builder` the innermost builder."""

    def __init__(self, builder: Builder):
        self.builder = builder

    def __enter__(self) -> Builder:
        _stack().append(self.builder)
        return self.builder

    def __exit__(self, *exc: Any) -> None:
        popped = _stack().pop()
        assert popped is self.builder


# ---- emitting instructions --------------------------------------------------------------------
def infer(fn_name: str, *args: Any, **kw: Any) -> Shape:
    """Call `xlc.hlo.shape_inference.<fn_name>`; its ShapeError becomes a TraceError at the
    user's line."""
    from xlc.hlo import shape_inference

    try:
        return getattr(shape_inference, fn_name)(*args, **kw)
    except ShapeError as e:
        raise trace_error(str(e)) from None


def emit(opcode: Opcode, shape: Shape, operands: Sequence[Tracer] = (),
         attrs: Mapping[str, Any] | None = None, called: Sequence[HloComputation] = (),
         op_name: str | None = None, weak: bool = False, name: str = "",
         extra: Sequence[tuple[str, str]] = ()) -> Tracer:
    """Append an instruction to the innermost builder and return its Tracer (`extra`: raw
    attributes such as a custom-call's backend_config, printed before the metadata)."""
    b = require_builder(f"xlc op '{op_name or opcode.text}'")
    ops = [b.lift(o) for o in operands]
    inst = b.comp.add(opcode, shape, [o.inst for o in ops], attrs, called,
                      name=name or opcode.text,
                      extra=(*extra, ("metadata", b.metadata(op_name or opcode.text))))
    return Tracer(inst, b, weak)


def constant(value: Any, ptype: PrimitiveType | None = None, weak: bool = False) -> Tracer:
    """A constant instruction holding `value` (a scalar or array) as `ptype`."""
    if ptype is None:
        if dtypes.is_python_scalar(value):
            ptype, weak = dtypes.python_scalar_type(value), True
        else:
            ptype = PrimitiveType.from_dtype(np.asarray(value).dtype)
    if isinstance(value, int) and not isinstance(value, bool) and ptype.is_integer:
        info = np.iinfo(ptype.dtype)
        if not info.min <= value <= info.max:  # would wrap silently (numpy 2 refuses too)
            raise trace_error(f"Python int {value} does not fit in {ptype.text} (range "
                              f"{info.min}..{info.max}), the type it takes here; use an array "
                              "of a wider integer type")
    arr = np.asarray(value).astype(ptype.dtype)
    return emit(Opcode.CONSTANT, Shape.array(ptype, arr.shape), (), {"literal": Literal(arr)},
                op_name="constant", weak=weak)


def is_arraylike(x: Any) -> bool:
    """Tracers, numpy arrays/scalars and Python scalars."""
    return isinstance(x, (Tracer, np.ndarray, np.generic)) or dtypes.is_python_scalar(x)


def type_of(x: Any) -> tuple[PrimitiveType, bool]:
    """(element type, weak) of a Tracer, numpy value or Python scalar."""
    if isinstance(x, Tracer):
        return x.ptype, x.weak_type
    if dtypes.is_python_scalar(x):
        return dtypes.python_scalar_type(x), not isinstance(x, bool)
    if isinstance(x, (np.ndarray, np.generic)):
        try:
            return PrimitiveType.from_dtype(x.dtype), False
        except TypeError:
            raise trace_error(f"unsupported dtype {x.dtype}") from None
    raise trace_error(f"expected an array, a traced value or a Python scalar, got "
                      f"{type(x).__name__}")


def as_tracer(x: Any, ptype: PrimitiveType | None = None) -> Tracer:
    """Turn a Tracer / numpy value / Python scalar into a Tracer of the innermost builder,
    converting to `ptype` when given."""
    if isinstance(x, Tracer):
        if ptype is not None and ptype is not x.ptype:
            return convert(x, ptype)
        return x
    pt, weak = type_of(x)
    return constant(x, ptype or pt, weak=weak and ptype is None)


def convert(x: Tracer, ptype: PrimitiveType, weak: bool = False) -> Tracer:
    """convert(x) to `ptype` (no-op when already of that type)."""
    if x.ptype is ptype:
        return x if x.weak_type == weak else Tracer(x.inst, x.builder, weak)
    return emit(Opcode.CONVERT, infer("infer_convert", x.aval, ptype), [x],
                op_name="convert_element_type", weak=weak)


# ---- the Tracer ---------------------------------------------------------------------------------
def _np() -> Any:
    from xlc.frontend import numpy_api

    return numpy_api


def _red() -> Any:
    from xlc.frontend import numpy_reductions

    return numpy_reductions


class Tracer:
    """A traced array value: the HloInstruction it stands for, its builder and weak-typedness.

    Behaves like a numpy array of known shape and dtype whose values are unknown: arithmetic,
    comparison, indexing and methods record HLO; anything needing a concrete value (`bool()`,
    `int()`, `np.asarray`) raises TraceError."""

    __slots__ = ("inst", "builder", "weak_type")
    __array_priority__ = 1000
    __array_ufunc__ = None  # numpy defers `ndarray + tracer` to Tracer.__radd__

    def __init__(self, inst: HloInstruction, builder: Builder, weak_type: bool = False):
        self.inst = inst
        self.builder = builder
        self.weak_type = weak_type

    # ---- abstract value -------------------------------------------------------------------------
    @property
    def aval(self) -> Shape:
        return self.inst.shape

    @property
    def aval_text(self) -> str:
        return self.inst.shape.to_text(layout=False)

    @property
    def ptype(self) -> PrimitiveType:
        et = self.inst.shape.element_type
        assert et is not None, "tuple-shaped tracer"
        return et

    @property
    def shape(self) -> tuple[int, ...]:
        return self.inst.shape.dims

    @property
    def dtype(self) -> np.dtype:
        return self.ptype.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def T(self) -> Tracer:
        return _np().transpose(self)

    def __repr__(self) -> str:
        return f"Tracer<{self.aval_text}{', weak' if self.weak_type else ''}>"

    # ---- concretization errors ------------------------------------------------------------------
    def _concrete(self, what: str) -> TraceError:
        return trace_error(
            f"{what} of a traced value {self.aval_text}: its value is not known while tracing. "
            "Use xlc.lax.cond / xlc.lax.switch for value-dependent branches, "
            "xlc.lax.while_loop / xlc.lax.fori_loop for loops, or mark the argument static "
            "with static_argnums")

    def __bool__(self) -> bool:
        raise self._concrete("Python control flow (if/while/and/or/bool())")

    def __int__(self) -> int:
        raise self._concrete("int()")

    def __float__(self) -> float:
        raise self._concrete("float()")

    def __complex__(self) -> complex:
        raise self._concrete("complex()")

    def __index__(self) -> int:
        raise self._concrete("use as a Python index (__index__)")

    def __array__(self, *a: Any, **k: Any) -> np.ndarray:
        raise self._concrete("np.asarray()/numpy conversion")

    def tolist(self) -> Any:
        raise self._concrete("tolist()")

    def item(self) -> Any:
        raise self._concrete("item()")

    def __len__(self) -> int:
        if not self.shape:
            raise trace_error(f"len() of an unsized (rank-0) traced value {self.aval_text}")
        return self.shape[0]

    def __iter__(self) -> Any:
        if not self.shape:
            raise trace_error(f"iteration over a rank-0 traced value {self.aval_text}")
        return (self[i] for i in range(self.shape[0]))

    __hash__ = None  # type: ignore[assignment]

    # ---- operators -------------------------------------------------------------------------------
    def __add__(self, o: Any) -> Tracer: return _np().add(self, o)
    def __radd__(self, o: Any) -> Tracer: return _np().add(o, self)
    def __sub__(self, o: Any) -> Tracer: return _np().subtract(self, o)
    def __rsub__(self, o: Any) -> Tracer: return _np().subtract(o, self)
    def __mul__(self, o: Any) -> Tracer: return _np().multiply(self, o)
    def __rmul__(self, o: Any) -> Tracer: return _np().multiply(o, self)
    def __truediv__(self, o: Any) -> Tracer: return _np().true_divide(self, o)
    def __rtruediv__(self, o: Any) -> Tracer: return _np().true_divide(o, self)
    def __floordiv__(self, o: Any) -> Tracer: return _np().floor_divide(self, o)
    def __rfloordiv__(self, o: Any) -> Tracer: return _np().floor_divide(o, self)
    def __mod__(self, o: Any) -> Tracer: return _np().remainder(self, o)
    def __rmod__(self, o: Any) -> Tracer: return _np().remainder(o, self)
    def __pow__(self, o: Any) -> Tracer: return _np().power(self, o)
    def __rpow__(self, o: Any) -> Tracer: return _np().power(o, self)
    def __matmul__(self, o: Any) -> Tracer: return _np().matmul(self, o)
    def __rmatmul__(self, o: Any) -> Tracer: return _np().matmul(o, self)
    def __and__(self, o: Any) -> Tracer: return _np().bitwise_and(self, o)
    def __rand__(self, o: Any) -> Tracer: return _np().bitwise_and(o, self)
    def __or__(self, o: Any) -> Tracer: return _np().bitwise_or(self, o)
    def __ror__(self, o: Any) -> Tracer: return _np().bitwise_or(o, self)
    def __xor__(self, o: Any) -> Tracer: return _np().bitwise_xor(self, o)
    def __rxor__(self, o: Any) -> Tracer: return _np().bitwise_xor(o, self)
    def __lshift__(self, o: Any) -> Tracer: return _np().left_shift(self, o)
    def __rlshift__(self, o: Any) -> Tracer: return _np().left_shift(o, self)
    def __rshift__(self, o: Any) -> Tracer: return _np().right_shift(self, o)
    def __rrshift__(self, o: Any) -> Tracer: return _np().right_shift(o, self)
    def __lt__(self, o: Any) -> Tracer: return _np().less(self, o)
    def __le__(self, o: Any) -> Tracer: return _np().less_equal(self, o)
    def __gt__(self, o: Any) -> Tracer: return _np().greater(self, o)
    def __ge__(self, o: Any) -> Tracer: return _np().greater_equal(self, o)
    def __eq__(self, o: Any) -> Tracer: return _np().equal(self, o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Tracer: return _np().not_equal(self, o)  # type: ignore[override]
    def __neg__(self) -> Tracer: return _np().negative(self)
    def __pos__(self) -> Tracer: return self
    def __abs__(self) -> Tracer: return _np().abs(self)
    def __invert__(self) -> Tracer: return _np().invert(self)

    # ---- indexing --------------------------------------------------------------------------------
    def __getitem__(self, idx: Any) -> Tracer:
        from xlc.frontend import indexing

        return indexing.getitem(self, idx)

    def __setitem__(self, idx: Any, value: Any) -> None:
        raise trace_error("traced arrays are immutable: use x = x.at[idx].set(value) instead "
                          "of x[idx] = value")

    @property
    def at(self) -> Any:
        from xlc.frontend import indexing

        return indexing.IndexUpdateHelper(self)

    # ---- methods ---------------------------------------------------------------------------------
    def astype(self, dtype: Any) -> Tracer: return _np().astype(self, dtype)
    def reshape(self, *shape: Any) -> Tracer:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return _np().reshape(self, shape)
    def transpose(self, *axes: Any) -> Tracer:
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return _np().transpose(self, axes or None)
    def swapaxes(self, a: int, b: int) -> Tracer: return _np().swapaxes(self, a, b)
    def squeeze(self, axis: Any = None) -> Tracer: return _np().squeeze(self, axis)
    def flatten(self) -> Tracer: return _np().reshape(self, (-1,))
    def ravel(self) -> Tracer: return _np().reshape(self, (-1,))
    def clip(self, a_min: Any = None, a_max: Any = None) -> Tracer:
        return _np().clip(self, a_min, a_max)
    def round(self, decimals: int = 0) -> Tracer: return _np().round(self, decimals)
    def dot(self, o: Any) -> Tracer: return _np().dot(self, o)
    def sum(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Tracer:
        return _red().sum(self, axis=axis, dtype=dtype, keepdims=keepdims)
    def prod(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Tracer:
        return _red().prod(self, axis=axis, dtype=dtype, keepdims=keepdims)
    def mean(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Tracer:
        return _red().mean(self, axis=axis, dtype=dtype, keepdims=keepdims)
    def max(self, axis: Any = None, keepdims: bool = False) -> Tracer:
        return _red().max(self, axis=axis, keepdims=keepdims)
    def min(self, axis: Any = None, keepdims: bool = False) -> Tracer:
        return _red().min(self, axis=axis, keepdims=keepdims)
    def any(self, axis: Any = None, keepdims: bool = False) -> Tracer:
        return _red().any(self, axis=axis, keepdims=keepdims)
    def all(self, axis: Any = None, keepdims: bool = False) -> Tracer:
        return _red().all(self, axis=axis, keepdims=keepdims)
    def argmax(self, axis: Any = None, keepdims: bool = False) -> Tracer:
        return _red().argmax(self, axis=axis, keepdims=keepdims)
    def argmin(self, axis: Any = None, keepdims: bool = False) -> Tracer:
        return _red().argmin(self, axis=axis, keepdims=keepdims)
    def var(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Tracer:
        return _red().var(self, axis=axis, ddof=ddof, keepdims=keepdims)
    def std(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Tracer:
        return _red().std(self, axis=axis, ddof=ddof, keepdims=keepdims)
    def cumsum(self, axis: Any = None) -> Tracer: return _red().cumsum(self, axis=axis)
    def cumprod(self, axis: Any = None) -> Tracer: return _red().cumprod(self, axis=axis)
    def sort(self, axis: int = -1) -> Tracer: return _red().sort(self, axis=axis)
    def argsort(self, axis: int = -1) -> Tracer: return _red().argsort(self, axis=axis)
    def take(self, indices: Any, axis: Any = None) -> Tracer:
        return _np().take(self, indices, axis=axis)
    def repeat(self, repeats: int, axis: Any = None) -> Tracer:
        return _np().repeat(self, repeats, axis=axis)
