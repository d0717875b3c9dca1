"""CUDA graphs of a runtime's thunk schedule, replayed without copying arguments or results.

The schedule is captured once (stream capture of `GpuRuntime._run_schedule`) and instantiated.
Kernel nodes are then matched to their kernel thunks: `cuGraphKernelNodeGetParams` gives a
node's function and the argument values the capture recorded, which are the thunk's argument
addresses at capture time. On a later call, the kernels whose arguments moved (a parameter
bound to another device array, a result in a fresh pooled block: `PackedParams.patch` says
which) get their new addresses through `cuGraphExecKernelNodeSetParams` (the node's own
parameters with `kernelParams` pointing at the thunk's packed array), then the graph is
launched. Temps keep one block per runtime, so nodes that only touch them never change.

Memset and device-to-device copy nodes follow moved allocations too: they are matched by the
addresses and sizes `cuGraphMemsetNodeGetParams` / `cuGraphMemcpyNodeGetParams` report, and a
node whose addresses changed gets them through `cuGraphExecMemsetNodeSetParams` /
`cuGraphExecMemcpyNodeSetParams`. A schedule in which any other thunk (a copy-start of host
offload) touches a parameter or output allocation is replayed in **copy mode** instead: fixed
argument and result blocks, arguments copied in and results copied out. `uses_copy_mode`
decides, once per executable.
"""
from __future__ import annotations

import ctypes
import logging
from typing import TYPE_CHECKING, Any

from xlc.backend_gpu.cuda import check
from xlc.backend_gpu.thunks import (
    DeviceToDeviceCopyThunk,
    KernelThunk,
    Memset32Thunk,
    MemzeroThunk,
    SequentialThunk,
    Thunk,
)
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


_UPDATABLE = (MemzeroThunk, Memset32Thunk, DeviceToDeviceCopyThunk)
"""Non-kernel thunks whose graph nodes can follow moved allocations."""


def _node_key(rt: GpuRuntime, t: Thunk) -> tuple[Any, ...]:
    """What the node of memset/copy thunk `t` reports under the current bindings: ("set",
    dst, width, element size) or ("copy", src, dst, bytes)."""
    if isinstance(t, MemzeroThunk):
        return ("set", rt.address(t.dest), t.dest.size, 1)
    if isinstance(t, Memset32Thunk):
        return ("set", rt.address(t.dest), t.dest.size // 4, 4)
    assert isinstance(t, DeviceToDeviceCopyThunk)
    return ("copy", rt.address(t.src), rt.address(t.dst), t.src.size)


def uses_copy_mode(rt: GpuRuntime) -> bool:
    """Whether a non-kernel thunk touches a parameter or output allocation (whose address
    changes between calls): then graphs copy arguments and results (see the docstring)."""
    moving = {a.index for a in rt.exe.allocations
              if a.kind == "output" or a.is_entry_computation_parameter}
    for t in rt.exe.plan.thunks.walk():
        if isinstance(t, (KernelThunk, SequentialThunk, *_UPDATABLE)):
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
        self.others: list[list[Any]] = []
        """[thunk, graph node, its memset/memcpy params, the key it was last given]."""
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
        others: dict[tuple[Any, ...], list[Thunk]] = {}
        for th in rt.exe.plan.thunks.walk():
            if isinstance(th, _UPDATABLE) and th.reads() + th.writes() and \
                    all(sl.size for sl in th.reads() + th.writes()):
                others.setdefault(_node_key(rt, th), []).append(th)
        types = drv.CUgraphNodeType
        for node in nodes[:n]:
            kind = check(drv.cuGraphNodeGetType(node), "cuGraphNodeGetType")
            if kind == types.CU_GRAPH_NODE_TYPE_KERNEL:
                self._match_kernel(rt, node, arity, waiting)
            elif kind in (types.CU_GRAPH_NODE_TYPE_MEMSET, types.CU_GRAPH_NODE_TYPE_MEMCPY):
                self._match_other(rt, node, kind == types.CU_GRAPH_NODE_TYPE_MEMSET, others)
        left = sum(len(v) for v in waiting.values()) + sum(len(v) for v in others.values())
        if left:
            raise XlcError(f"CUDA graph: {left} thunk(s) without a captured node")

    def _match_kernel(self, rt: GpuRuntime, node: Any, arity: dict[Any, int],
                      waiting: dict[tuple[Any, tuple[int, ...]], list[KernelThunk]]) -> None:
        params = check(rt.drv.cuGraphKernelNodeGetParams(node), "cuGraphKernelNodeGetParams")
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

    def _match_other(self, rt: GpuRuntime, node: Any, memset: bool,
                     others: dict[tuple[Any, ...], list[Thunk]]) -> None:
        drv = rt.drv
        if memset:
            p = check(drv.cuGraphMemsetNodeGetParams(node), "cuGraphMemsetNodeGetParams")
            key: tuple[Any, ...] = ("set", int(p.dst), int(p.width), int(p.elementSize))
        else:
            p = check(drv.cuGraphMemcpyNodeGetParams(node), "cuGraphMemcpyNodeGetParams")
            key = ("copy", int(p.srcDevice), int(p.dstDevice), int(p.WidthInBytes))
        match = others.get(key)
        if not match:
            raise XlcError(f"CUDA graph: a captured {'memset' if memset else 'memcpy'} node "
                           f"matches no thunk")
        self.others.append([match.pop(), node, p, key])

    def launch(self, rt: GpuRuntime, changed: set[int]) -> None:
        """Give the kernels in `changed` (ids of thunks), and the memset/copy nodes whose
        addresses moved, their new arguments; then launch."""
        drv = rt.drv
        for tid in changed:
            entry = self.nodes.get(tid)
            if entry is not None:
                check(drv.cuGraphExecKernelNodeSetParams(self.exec, entry[0], entry[1]),
                      "cuGraphExecKernelNodeSetParams")
        for other in self.others:
            t, node, p, key = other
            now = _node_key(rt, t)
            if now == key:
                continue
            other[3] = now
            if now[0] == "set":
                p.dst = now[1]
                check(drv.cuGraphExecMemsetNodeSetParams(self.exec, node, p, rt.context),
                      "cuGraphExecMemsetNodeSetParams")
            else:
                p.srcDevice, p.dstDevice = now[1], now[2]
                check(drv.cuGraphExecMemcpyNodeSetParams(self.exec, node, p, rt.context),
                      "cuGraphExecMemcpyNodeSetParams")
        check(drv.cuGraphLaunch(self.exec, rt.streams[0]), "cuGraphLaunch")
