"""custom-call from traced programs (`xlc.ffi.call`, `xlc.pure_callback`, `xlc.debug`)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xlc.frontend import lax as _lax
from xlc.frontend.tracer import Tracer, as_tracer, emit, trace_error
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType, Shape


def result_shapes(spec: Any, what: str) -> tuple[list[Shape], bool]:
    """(array shapes, whether the result is a tuple) of a result spec: a ShapeDtype or array
    (one result) or a tuple/list of them."""
    many = isinstance(spec, (tuple, list))
    out = []
    for s in (spec if many else [spec]):
        shape, dtype = getattr(s, "shape", None), getattr(s, "dtype", None)
        if shape is None or dtype is None:
            raise trace_error(f"{what}: results are described by xlc.ShapeDtype(shape, dtype) "
                              f"or arrays, got {type(s).__name__}")
        out.append(Shape.array(PrimitiveType.from_dtype(np.dtype(dtype)), tuple(shape)))
    return out, many


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def custom_call(target: str, spec: Any, args: Sequence[Any], backend_config: str = "",
                has_side_effect: bool = False) -> Any:
    """A custom-call of `target` on `args` with results `spec` (see `result_shapes`);
    `backend_config` goes into the HLO as is when it is a `{...}` dictionary, else quoted."""
    shapes, many = result_shapes(spec, f"custom-call '{target}'")
    ops = [as_tracer(a) for a in args]
    extra = []
    if has_side_effect:
        extra.append(("custom_call_has_side_effect", "true"))
    if backend_config:
        cfg = backend_config.strip()
        extra.append(("backend_config", cfg if cfg.startswith("{") else _quote(cfg)))
    shape = Shape.tuple_of(shapes) if many else shapes[0]
    r = emit(Opcode.CUSTOM_CALL, shape, ops, {"custom_call_target": target},
             op_name=target, extra=extra)
    if not many:
        return r
    parts: list[Tracer] = [_lax.get_tuple_element(r, i) for i in range(len(shapes))]
    return tuple(parts) if isinstance(spec, tuple) else parts
