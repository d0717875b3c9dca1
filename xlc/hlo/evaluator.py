"""The numpy reference evaluator: runs an HloModule on numpy arrays with XLA's semantics.

Values are numpy arrays in logical (row-major index) order, tuples are Python tuples and tokens
are empty arrays. Every opcode has a handler in one dispatch table (`DISPATCH`, keyed by
`Opcode`); handlers take `(evaluator, instruction, operand_values)` and return the value.

Called scalar computations (reducers, comparators, combiners, map functions) are evaluated
vectorized: the same computation is run once on whole arrays, which is why elementwise
handlers rely on numpy broadcasting rather than the declared (scalar) shapes.

Random numbers: `rng` draws from a numpy Generator seeded from the module name (crc32) unless an
explicit `seed` is given to `Evaluator`; `rng-bit-generator` follows XLA's Threefry / Philox
bit generators exactly (see `xlc.hlo.evaluator_rng`).
"""
from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xlc.errors import ArgumentError, EvaluationError, UnsupportedOpError, XlcError
from xlc.hlo import host_calls
from xlc.hlo.evaluator_elementwise import ELEMENTWISE_HANDLERS, cast
from xlc.hlo.evaluator_indexing import INDEXING_HANDLERS, topk_arrays
from xlc.hlo.evaluator_ops import DATA_HANDLERS
from xlc.hlo.evaluator_rng import rng_bit_generator_handler
from xlc.hlo.ffi_registry import lookup as ffi_lookup
from xlc.hlo.gemm_call import GEMM_TARGET, gemm_call_dot
from xlc.hlo.ir import HloComputation, HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Shape
from xlc.hlo.sort_call import SORT_TARGET, sort_call_sort
from xlc.hlo.spmd import SPMD_TARGETS
from xlc.hlo.support import check_runnable

log = logging.getLogger("xlc.hlo.evaluator")

Handler = Callable[["Evaluator", HloInstruction, list[Any]], Any]
Value = Any  # np.ndarray | tuple[Value, ...]

_TOKEN = np.zeros((0,), dtype=np.bool_)


def _describe_array(x: np.ndarray) -> str:
    return f"{x.dtype}[{','.join(str(d) for d in x.shape)}]"


def flatten_result(result: Value) -> list[np.ndarray]:
    """The array leaves of a (nested) tuple result, in order; an array gives [array]."""
    if isinstance(result, tuple):
        out: list[np.ndarray] = []
        for r in result:
            out.extend(flatten_result(r))
        return out
    return [np.asarray(result)]


class Evaluator:
    """Evaluates HLO computations with numpy. `dispatch` maps every Opcode to its handler.

    `seed` seeds the Generator behind `rng` (default: crc32 of the module name)."""

    dispatch: dict[Opcode, Handler]

    def __init__(self, module: HloModule | None = None, seed: int | None = None):
        self.module = module
        if seed is None:
            seed = zlib.crc32(module.name.encode()) if module is not None else 0
        self.rng = np.random.default_rng(seed)
        self.rng_state = 0
        self.dispatch = dict(DISPATCH)
        self._orders: dict[int, list[HloInstruction]] = {}
        self._vectorized = 0  # > 0 while running a scalar lambda on whole arrays

    # ---- computations -------------------------------------------------------------------------
    def run(self, comp: HloComputation, args: Sequence[Value]) -> Value:
        """Evaluate `comp` on `args` (one value per parameter; no shape checks: scalar
        computations may be given whole arrays)."""
        if len(args) != comp.num_parameters:
            raise EvaluationError(f"computation '{comp.name}' takes {comp.num_parameters} "
                                  f"arguments, got {len(args)}")
        if comp.root is None:
            raise EvaluationError(f"computation '{comp.name}' has no root")
        values: dict[int, Value] = {}
        order = self._orders.get(id(comp))
        if order is None:
            order = list(comp.instructions) if _is_topological(comp) else comp.post_order()
            self._orders[id(comp)] = order
        for inst in order:
            if inst.opcode is Opcode.PARAMETER:
                values[id(inst)] = args[inst.parameter_number]
                continue
            ops = [values[id(o)] for o in inst.operands]
            value = self.evaluate_instruction(inst, ops)
            if not self._vectorized:
                _check_value(inst, inst.shape, value)
            values[id(inst)] = value
        return values[id(comp.root)]

    def call_leaves(self, comp: HloComputation, args: Sequence[Value]) -> list[np.ndarray]:
        """Evaluate a (scalar lambda) computation vectorized; its result leaves as arrays."""
        self._vectorized += 1
        try:
            res = self.run(comp, args)
        finally:
            self._vectorized -= 1
        return [np.asarray(r) for r in res] if isinstance(res, tuple) else [np.asarray(res)]

    def evaluate_instruction(self, inst: HloInstruction, ops: list[Value]) -> Value:
        """Evaluate one instruction on its operands' values (e.g. for constant folding).
        Raises UnsupportedOpError/EvaluationError naming the instruction."""
        handler = self.dispatch.get(inst.opcode)
        if handler is None:
            raise UnsupportedOpError(f"the evaluator has no handler for '{inst.opcode.text}' "
                                     f"('{inst.name}')")
        try:
            with np.errstate(all="ignore"):
                value = handler(self, inst, ops)
            # numpy ufuncs turn 0-d arrays into numpy scalars: values are always ndarrays.
            return value if isinstance(value, (np.ndarray, tuple)) else np.asarray(value)
        except XlcError:
            raise
        except Exception as e:  # numpy errors: name the instruction
            raise EvaluationError(f"evaluating '{inst.name}' ({inst.opcode.text}, shape "
                                  f"{inst.shape}): {type(e).__name__}: {e}") from e


def _check_value(inst: HloInstruction, shape: Shape, value: Value) -> None:
    """Guard against evaluator bugs: a value must have its instruction's dims and dtype."""
    if shape.is_tuple:
        subs = shape.tuple_shapes or ()
        if isinstance(value, tuple) and len(value) == len(subs):
            for s, v in zip(subs, value):
                _check_value(inst, s, v)
            return
    elif shape.is_token or (isinstance(value, np.ndarray) and value.shape == shape.dims
                            and value.dtype == shape.dtype):
        return
    got = (f"a tuple of {len(value)}" if isinstance(value, tuple)
           else _describe_array(np.asarray(value)))
    raise EvaluationError(f"'{inst.name}' ({inst.opcode.text}) evaluated to {got} but its shape "
                          f"is {shape.to_text(False)} (an ill-typed module or an evaluator bug)")


def _is_topological(comp: HloComputation) -> bool:
    seen: set[int] = set()
    for inst in comp.instructions:
        for o in inst.operands:
            if id(o) not in seen:
                return False
        seen.add(id(inst))
    return True


# ---- argument checking --------------------------------------------------------------------------
def _check_argument(i: int, shape: Shape, arg: Any) -> Value:
    if shape.is_tuple:
        assert shape.tuple_shapes is not None
        if not isinstance(arg, (tuple, list)) or len(arg) != len(shape.tuple_shapes):
            raise ArgumentError(f"argument {i}: expected a tuple {shape.to_text(False)}, got "
                                f"{type(arg).__name__}")
        return tuple(_check_argument(i, s, a) for s, a in zip(shape.tuple_shapes, arg))
    if shape.is_token:
        return _TOKEN
    if isinstance(arg, (np.ndarray, np.generic)):
        x = np.asarray(arg)
    else:  # Python scalars and lists carry no dtype: take the parameter's
        x = np.asarray(arg, dtype=shape.dtype)
    if x.shape != shape.dims or x.dtype != shape.dtype:
        raise ArgumentError(f"argument {i}: expected {shape.to_text(False)}, got "
                            f"{_describe_array(x)}")
    return x


def check_arguments(comp: HloComputation, args: Sequence[Any]) -> list[Value]:
    """Check count, shapes and dtypes of entry arguments; raises ArgumentError saying which."""
    if len(args) != comp.num_parameters:
        raise ArgumentError(f"expected {comp.num_parameters} arguments, got {len(args)}")
    return [_check_argument(i, p.shape, a) for i, (p, a) in enumerate(zip(comp.parameters, args))]


def evaluate_computation(comp: HloComputation, args: Sequence[Any]) -> Value:
    """Evaluate one computation on already-built values (arrays / tuples), one per parameter.
    Arguments are checked against the parameter shapes (ArgumentError)."""
    ev = Evaluator(comp.module)
    return ev.run(comp, check_arguments(comp, args))


def evaluate(module: HloModule, args: Sequence[Any]) -> Value:
    """Run the entry computation of `module` on `args` (numpy arrays in parameter order).

    Returns a numpy array, or (nested) tuples of arrays for a tuple-shaped root. Raises
    ArgumentError for a wrong argument count/shape/dtype and EvaluationError /
    UnsupportedOpError naming the instruction it cannot run."""
    if module.entry is None:
        raise EvaluationError(f"module '{module.name}' has no entry computation")
    check_runnable(module, "evaluator")  # dynamic dimensions need run-time sizes
    ev = Evaluator(module)
    return ev.run(module.entry, check_arguments(module.entry, args))


# ---- leaves, tuples, control flow ---------------------------------------------------------------
def _parameter(ev: Evaluator, inst: HloInstruction, ops: list[Value]) -> Value:
    raise EvaluationError(f"parameter '{inst.name}' evaluated outside its computation")


def _literal_value(inst: HloInstruction, lit: Any, shape: Shape) -> Value:
    if lit.elided:
        raise EvaluationError(f"constant '{inst.name}' is elided ({{...}}) in the HLO text and "
                              "cannot be evaluated; dump it with --xla_dump_large_constants")
    if lit.elements is not None:
        subs = shape.tuple_shapes or ()
        return tuple(_literal_value(inst, e, s) for e, s in zip(lit.elements, subs))
    arr = np.asarray(lit.array)
    return cast(arr, shape.dtype).reshape(shape.dims)


def _constant(ev: Evaluator, inst: HloInstruction, ops: list[Value]) -> Value:
    lit = inst.attrs.get("literal")
    if lit is None:
        raise EvaluationError(f"constant '{inst.name}' has no literal")
    return _literal_value(inst, lit, inst.shape)


def _tuple(ev: Evaluator, inst: HloInstruction, ops: list[Value]) -> Value:
    return tuple(ops)


def _get_tuple_element(ev: Evaluator, inst: HloInstruction, ops: list[Value]) -> Value:
    return ops[0][inst.tuple_index]


def _while(ev: Evaluator, inst: HloInstruction, ops: list[Value]) -> Value:
    cond, body = inst.called
    state = ops[0]
    trips = 0
    while bool(np.asarray(ev.run(cond, [state])).reshape(())):
        state = ev.run(body, [state])
        trips += 1
    log.debug("while '%s' ran %d iterations", inst.name, trips)
    return state


def _conditional(ev: Evaluator, inst: HloInstruction, ops: list[Value]) -> Value:
    sel = np.asarray(ops[0]).reshape(())
    branches = inst.called
    if sel.dtype == np.bool_:
        b = 0 if bool(sel) else 1
    else:
        b = int(sel)
        if b < 0 or b >= len(branches):
            b = len(branches) - 1
    return ev.run(branches[b], [ops[1 + b]])


def _call(ev: Evaluator, inst: HloInstruction, ops: list[Value]) -> Value:
    return ev.run(inst.called[0], ops)


def _custom_call(ev: Evaluator, inst: HloInstruction, ops: list[Value]) -> Value:
    target = str(inst.attrs.get("custom_call_target", ""))
    if target == "TopK":
        # XLA CPU's TopK: (values, s32 indices) of the k largest along the last dim.
        values_shape = inst.shape.subshape((0,)) if inst.shape.is_tuple else inst.shape
        return topk_arrays(np.asarray(ops[0]), values_shape.dims[-1], True)
    if target == GEMM_TARGET:  # xlc's dot with a workspace output (xlc/hlo/gemm_call.py)
        workspace = inst.shape.tuple_shapes[1]  # type: ignore[index]
        return (DATA_HANDLERS[Opcode.DOT](ev, gemm_call_dot(inst), ops),
                np.zeros(workspace.dims, np.uint8))
    if target == SORT_TARGET:  # xlc's sort with a workspace output (xlc/hlo/sort_call.py)
        workspace = inst.shape.tuple_shapes[-1]  # type: ignore[index]
        sorted_ = INDEXING_HANDLERS[Opcode.SORT](ev, sort_call_sort(inst), ops)
        parts = list(sorted_) if isinstance(sorted_, tuple) else [sorted_]
        return (*parts, np.zeros(workspace.dims, np.uint8))
    if target in SPMD_TARGETS:  # sharding annotations: identity on one device
        return ops[0]
    handler = host_calls.handler_for(target)  # LAPACK and Python targets: run them
    if handler is not None:
        out = host_calls.run_handler(handler, inst, [np.asarray(o) for o in ops])
        return tuple(out) if inst.shape.is_tuple else out[0]
    if ffi_lookup(target, "cpu") is not None:
        raise UnsupportedOpError(f"custom-call '{inst.name}': target '{target}' is C code; "
                                 "the evaluator runs Python targets only (compile for the CPU)")
    raise UnsupportedOpError(f"custom-call '{inst.name}': unknown custom_call_target "
                             f"{target!r}; the evaluator cannot run it")


def _identity(ev: Evaluator, inst: HloInstruction, ops: list[Value]) -> Value:
    return ops[0] if len(ops) == 1 else tuple(ops)


def _first_operand(ev: Evaluator, inst: HloInstruction, ops: list[Value]) -> Value:
    return ops[0]


def _token(ev: Evaluator, inst: HloInstruction, ops: list[Value]) -> Value:
    return _TOKEN


def _zero_id(ev: Evaluator, inst: HloInstruction, ops: list[Value]) -> Value:
    return np.zeros((), dtype=inst.shape.dtype)


def _rng(ev: Evaluator, inst: HloInstruction, ops: list[Value]) -> Value:
    a, b = np.asarray(ops[0]), np.asarray(ops[1])
    dims = inst.shape.dims
    dt = inst.shape.dtype
    dist = str(inst.attrs.get("distribution", "rng_uniform"))
    if dist == "rng_uniform":
        if dt.kind in "iu":
            return ev.rng.integers(int(a), int(b), size=dims, endpoint=False).astype(dt)
        if dt == np.bool_:
            return ev.rng.random(size=dims) < 0.5
        lo, hi = float(a), float(b)
        return cast(ev.rng.uniform(lo, hi, size=dims), dt)
    if dist == "rng_normal":
        return cast(ev.rng.normal(float(a), float(b), size=dims), dt)
    raise UnsupportedOpError(f"rng '{inst.name}': unknown distribution {dist!r}")


def _rng_get_and_update_state(ev: Evaluator, inst: HloInstruction, ops: list[Value]) -> Value:
    state = ev.rng_state
    ev.rng_state += int(inst.attrs.get("delta", inst.get_extra("delta") or 1))
    out = np.zeros(inst.shape.dims, dtype=inst.shape.dtype)
    out.reshape(-1)[0] = state
    return out


def _copy_start(ev: Evaluator, inst: HloInstruction, ops: list[Value]) -> Value:
    """(destination, source, context): host memory is the evaluator's only memory, so the
    destination is a plain copy of the source."""
    src = np.asarray(ops[0])
    return (src.copy(), src, np.zeros((), dtype=np.uint32))


def _copy_done(ev: Evaluator, inst: HloInstruction, ops: list[Value]) -> Value:
    return ops[0][0]


def _fusion(ev: Evaluator, inst: HloInstruction, ops: list[Value]) -> Value:
    return ev.run(inst.called[0], ops)


_CONTROL_HANDLERS: dict[Opcode, Handler] = {
    Opcode.PARAMETER: _parameter,
    Opcode.CONSTANT: _constant,
    Opcode.TUPLE: _tuple,
    Opcode.GET_TUPLE_ELEMENT: _get_tuple_element,
    Opcode.WHILE: _while,
    Opcode.CONDITIONAL: _conditional,
    Opcode.CALL: _call,
    Opcode.FUSION: _fusion,
    Opcode.CUSTOM_CALL: _custom_call,
    Opcode.OPT_BARRIER: _identity,
    Opcode.ADD_DEPENDENCY: _first_operand,
    Opcode.DOMAIN: _first_operand,
    Opcode.ALL_REDUCE: _identity,  # one replica: the sum over one participant is the operand
    Opcode.AFTER_ALL: _token,
    Opcode.PARTITION_ID: _zero_id,
    Opcode.REPLICA_ID: _zero_id,
    Opcode.RNG: _rng,
    Opcode.RNG_BIT_GENERATOR: rng_bit_generator_handler,
    Opcode.RNG_GET_AND_UPDATE_STATE: _rng_get_and_update_state,
    Opcode.COPY_START: _copy_start,
    Opcode.COPY_DONE: _copy_done,
}

DISPATCH: dict[Opcode, Handler] = {
    **ELEMENTWISE_HANDLERS, **DATA_HANDLERS, **INDEXING_HANDLERS, **_CONTROL_HANDLERS,
}
"""Every Opcode -> its evaluator handler (a test asserts the coverage)."""

_missing = set(Opcode) - set(DISPATCH)
assert not _missing, f"evaluator handlers missing for {sorted(o.text for o in _missing)}"
