"""CUDA graphs of a runtime's thunk schedule, replayed without copying arguments or results.

The schedule is captured once (stream capture of `GpuRuntime._run_schedule`) and instantiated.
Kernel nodes are then matched to their kernel thunks: `cuGraphKernelNodeGetParams` gives a
node's function and the argument values the capture recorded, which are the thunk's argument
addresses at capture time. On a later call, the kernels whose arguments moved (a parameter
bound to another device array, a result in a fresh pooled block: `PackedParams.patch` says
which) get their new addresses through `cuGraphExecKernelNodeSetParams` (the node's own
parameters with `kernelParams` pointing at the thunk's packed array), then the graph is
launched. Temps keep one block per runtime, so nodes that only touch them never change.

Only kernels can follow a moved allocation this way. A schedule in which a memset, copy or
copy-start touches a parameter or output allocation is replayed in **copy mode** instead:
fixed argument and result blocks, arguments copied in and results copied out (as before
graph updates existed). `uses_copy_mode` decides, once per executable.
"""
from __future__ import annotations

import ctypes
import logging
from typing import TYPE_CHECKING, Any

from xlc.backend_gpu.cuda import check
from xlc.backend_gpu.thunks import KernelThunk, SequentialThunk
from xlc.errors import XlcError

if TYPE_CHECKING:
    from xlc.backend_gpu.runtime import GpuRuntime

log = logging.getLogger("xlc.backend_gpu")


def _handle(h: Any) -> Any:
    """A driver handle as a dict key (cuda-python handles convert to their address)."""
    try:
        return int(h)
    except TypeError:
        return h


def uses_copy_mode(rt: GpuRuntime) -> bool:
    """Whether a non-kernel thunk touches a parameter or output allocation (whose address
    changes between calls): then graphs copy arguments and results (see the docstring)."""
    moving = {a.index for a in rt.exe.allocations
              if a.kind == "output" or a.is_entry_computation_parameter}
    for t in rt.exe.plan.thunks.walk():
        if isinstance(t, (KernelThunk, SequentialThunk)):
            continue
        if any(sl.index in moving for sl in t.reads() + t.writes()):
            return True
    return False


class ScheduleGraph:
    """The instantiated graph of one runtime's schedule and its kernel nodes by thunk."""

    def __init__(self, rt: GpuRuntime):
        """Capture `rt`'s schedule under its current bindings and instantiate it; with
        `rt.graph_updates`, match the kernel nodes to their thunks (XlcError when a node or a
        thunk stays unmatched)."""
        drv, s0 = rt.drv, rt.streams[0]
        mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL
        check(drv.cuStreamBeginCapture(s0, mode), "cuStreamBeginCapture")
        rt.run_schedule()
        self.graph = check(drv.cuStreamEndCapture(s0), "cuStreamEndCapture")
        inst = getattr(drv, "cuGraphInstantiateWithFlags", None)
        self.exec = check(inst(self.graph, 0) if inst else drv.cuGraphInstantiate(self.graph, 0),
                          "cuGraphInstantiate")
        self.nodes: dict[int, tuple[Any, Any]] = {}
        """id(kernel thunk) -> (graph node, its CUDA_KERNEL_NODE_PARAMS with our packed
        kernelParams)."""
        if rt.graph_updates:
            self._match(rt)

    def _match(self, rt: GpuRuntime) -> None:
        drv = rt.drv
        kernels = [t for t in rt.exe.plan.thunks.walk() if isinstance(t, KernelThunk)]
        arity = {_handle(rt.functions[t.kernel]): len(t.args) for t in kernels}
        waiting: dict[tuple[Any, tuple[int, ...]], list[KernelThunk]] = {}
        for t in kernels:
            key = (_handle(rt.functions[t.kernel]), tuple(rt.address(a.slice) for a in t.args))
            waiting.setdefault(key, []).append(t)
        count = check(drv.cuGraphGetNodes(self.graph, 0), "cuGraphGetNodes")
        n = count[1] if isinstance(count, tuple) else count
        found = check(drv.cuGraphGetNodes(self.graph, n), "cuGraphGetNodes")
        nodes = found[0] if isinstance(found, tuple) else found
        kernel_type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
        for node in nodes[:n]:
            if check(drv.cuGraphNodeGetType(node), "cuGraphNodeGetType") != kernel_type:
                continue
            params = check(drv.cuGraphKernelNodeGetParams(node), "cuGraphKernelNodeGetParams")
            func = _handle(params.func)
            nargs = arity.get(func, 0)
            slots = (ctypes.c_void_p * max(1, nargs)).from_address(int(params.kernelParams))
            values = tuple(ctypes.c_uint64.from_address(slots[i] or 0).value
                           for i in range(nargs))
            match = waiting.get((func, values))
            if not match:
                raise XlcError("CUDA graph: a captured kernel node matches no kernel thunk")
            t = match.pop()
            params.kernelParams = rt.packed.params[id(t)]
            self.nodes[id(t)] = (node, params)
        left = sum(len(v) for v in waiting.values())
        if left:
            raise XlcError(f"CUDA graph: {left} kernel thunk(s) without a captured node")

    def launch(self, rt: GpuRuntime, changed: set[int]) -> None:
        """Give the kernels in `changed` (ids of thunks) their new arguments, then launch."""
        drv = rt.drv
        for tid in changed:
            entry = self.nodes.get(tid)
            if entry is not None:
                check(drv.cuGraphExecKernelNodeSetParams(self.exec, entry[0], entry[1]),
                      "cuGraphExecKernelNodeSetParams")
        check(drv.cuGraphLaunch(self.exec, rt.streams[0]), "cuGraphLaunch")
