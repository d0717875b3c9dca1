"""The interpreter backend: the optimized module (fusions, copies and all) run on the numpy
reference evaluator (`xlc.hlo.evaluator`), so every pass is exercised end to end against the
oracle. Its `.xlc` files hold no code: loading runs the stored optimized HLO.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from xlc.hlo.ir import HloModule
from xlc.hlo.shape import Shape
from xlc.options import CompileOptions
from xlc.passes.heap_simulator import DEFAULT_ALIGNMENT


def flatten_value(value: Any, shape: Shape) -> list[np.ndarray]:
    """The leaves of an evaluator result of `shape`, in order (tuples flattened)."""
    if shape.is_tuple:
        assert shape.tuple_shapes is not None
        out: list[np.ndarray] = []
        for v, s in zip(value, shape.tuple_shapes):
            out += flatten_value(v, s)
        return out
    return [np.asarray(value)]


class InterpreterRunner:
    """Runs an optimized module on the evaluator: `run(flat_args) -> flat outputs`."""

    def __init__(self, module: HloModule):
        self.module = module

    def run(self, flat_args: list[np.ndarray]) -> list[np.ndarray]:
        """Run on flat, checked arguments (tuple-shaped parameters as their leaves, in order);
        flat outputs."""
        from xlc.frontend import pytree
        from xlc.frontend.arguments import shape_tree
        from xlc.hlo.evaluator import evaluate

        assert self.module.entry is not None and self.module.entry.root is not None
        args: list[Any] = []
        for p in self.module.entry.parameters:
            n = sum(1 for _ in p.shape.leaves())
            leaves, flat_args = flat_args[:n], flat_args[n:]
            args.append(pytree.unflatten(shape_tree(p.shape), leaves) if p.shape.is_tuple
                        else leaves[0])
        result = evaluate(self.module, args)
        return flatten_value(result, self.module.entry.root.shape)


class InterpreterExecutable(InterpreterRunner):
    """The interpreter backend's executable: the module optimized by the interpreter pipeline
    (kept in `optimized`), run on the evaluator."""

    def __init__(self, module: HloModule, options: CompileOptions,
                 backend: InterpreterBackend | None = None):
        from xlc.hlo.support import check_runnable

        backend = backend or InterpreterBackend()
        check_runnable(module, "interpreter backend")  # before the passes
        self.optimized = backend.optimize(module, options)
        self.options = options
        super().__init__(self.optimized.module)


class InterpreterBackend:
    """`xlc.backends.Backend` for the evaluator: the standard pass list, 64-byte slices, no
    code stages and no code members in `.xlc` files."""

    name = "interpreter"
    alignment = DEFAULT_ALIGNMENT

    def passes(self, options: CompileOptions) -> list[Any]:
        """The interpreter pipeline (`xlc.passes.optimize.interpreter_passes`)."""
        from xlc.passes.optimize import interpreter_passes

        return interpreter_passes(options)

    def optimize(self, module: HloModule, options: CompileOptions) -> Any:
        """Run the pass list and assign buffers (`xlc.passes.optimize.optimize_module`)."""
        from xlc.passes.optimize import optimize_module

        opts = options if options.backend == self.name else options.replace(backend=self.name)
        return optimize_module(module, opts, passes=self.passes(opts),
                               alignment=self.alignment, name=self.name)

    def compile(self, module: HloModule, options: CompileOptions) -> InterpreterExecutable:
        """The optimized module, ready to run on the evaluator."""
        return InterpreterExecutable(module, options, self)

    def target(self, options: CompileOptions) -> dict[str, Any]:
        """Nothing: the evaluator runs anywhere."""
        return {}

    def dump_stages(self, module: HloModule, options: CompileOptions) -> None:
        """No code stages beyond the HLO dumps."""

    def pack(self, exe: Any) -> Any:
        """No code members: the stored optimized HLO is the program."""
        from xlc.artifact.store import PackedCode

        return PackedCode()

    def unpack(self, manifest: Any, members: dict[str, bytes], module: HloModule,
               assignment: Any, where: str) -> InterpreterRunner:
        """Run the stored optimized HLO."""
        return InterpreterRunner(module)

    def describe(self, members: dict[str, bytes]) -> dict[str, Any]:
        """Nothing beyond the manifest."""
        return {}

    def describe_text(self, data: dict[str, Any]) -> list[str]:
        """Nothing beyond the manifest."""
        return []
