"""Compile each distinct kernel once: identical internal functions of an emitted module merge.

Stacked layers make the same kernels again and again: a transformer block's fusions, scalar
reducers and thread-pool jobs differ from the previous block's only in their names (the
buffers they touch are arguments, so their bodies are equal). Before LLVM sees the module,
`dedupe_functions` keys every internal function by its IR text (its own name left out, the
functions it references already replaced by their kept copies) and points every use of a
duplicate at the first function with the same key, then drops the duplicate. Functions are
visited callees first, so a job whose kernel merged becomes equal to the other jobs of that
kernel in the same sweep. Keys are exact IR text, attributes included (a kernel whose
arguments are `noalias` in one place and not in another stays two functions), so merging
never changes what runs.
"""
from __future__ import annotations

import logging

from llvmlite import ir

log = logging.getLogger("xlc.backend_cpu")


def _callees(fn: ir.Function, defined: dict[str, ir.Function]) -> list[ir.Function]:
    """The defined functions `fn`'s instructions reference (calls and function pointers)."""
    out: list[ir.Function] = []
    for block in fn.blocks:
        for ins in block.instructions:
            for op in getattr(ins, "operands", ()):
                if isinstance(op, ir.Function) and defined.get(op.name) is op:
                    out.append(op)
    return out


def _callees_first(defined: dict[str, ir.Function]) -> list[ir.Function]:
    """The defined functions, each after every function it references (cycles broken)."""
    order: list[ir.Function] = []
    state: dict[str, int] = {}
    for root in defined.values():
        if root.name in state:
            continue
        stack = [(root, iter(_callees(root, defined)))]
        state[root.name] = 1
        while stack:
            fn, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                state[fn.name] = 2
                order.append(fn)
            elif nxt.name not in state:
                state[nxt.name] = 1
                stack.append((nxt, iter(_callees(nxt, defined))))
    return order


def dedupe_functions(module: ir.Module) -> int:
    """Merge the internal functions of `module` whose IR is identical up to their names (see
    the module doc); returns how many functions were removed."""
    defined = {f.name: f for f in module.functions if f.blocks}
    replaced: dict[str, ir.Function] = {}
    kept: dict[str, ir.Function] = {}
    for fn in _callees_first(defined):
        for block in fn.blocks:
            for ins in block.instructions:
                ops = getattr(ins, "operands", ())
                for op in ops:
                    if isinstance(op, ir.Function) and op.name in replaced:
                        ins.replace_usage(op, replaced[op.name])
        if fn.linkage != "internal":
            continue
        text = str(fn).replace(fn.get_reference(), "@__self__", 1)
        first = kept.setdefault(text, fn)
        if first is not fn:
            replaced[fn.name] = first
    for name in replaced:
        del module.globals[name]
    if replaced:
        log.debug("merged %d duplicate functions of %s (%d left)", len(replaced), module.name,
                  len(defined) - len(replaced))
    return len(replaced)
