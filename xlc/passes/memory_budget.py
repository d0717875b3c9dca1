"""Fitting a scheduled, assigned module under `CompileOptions.memory_limit`.

`fit_to_budget(module, assignment, limit, passes, assign)` is the driver `optimize_module` runs
after buffer assignment when a limit is set. Each entry of `passes` is a `BudgetPass` (e.g.
`Rematerialization`; the CPU list adds GEMM workspace shrinking, the GPU list host offload),
in order of preference: each is asked to bring the *device* peak (`device_peak_bytes`:
parameters + outputs + temps in the default memory space) under the limit; after each one that
changed the module, the buffers are assigned again. It stops at the first plan that fits.
The result says what each pass did, the peak before and after, and whether it fits;
`optimize_module` logs a warning (or raises
`MemoryLimitError` when `memory_limit_strict`) when it does not. The passes escalate: the
first runs again while it lowers the peak (the heap packing of one run's result tells the next
how much headroom its model needs), the next one runs only when it stops helping, and after
any later pass lowers the peak the first runs again.

Requires: `module.schedule` set and `assignment` its buffer assignment. Guarantees: the module
stays verified and scheduled, the returned assignment is of the final module, and the peak is
never above the one it started from (when the passes end no lower, the original plan is put
back; the report says so in an "undo" step).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from xlc.hlo.ir import HloModule
from xlc.passes.buffer_assignment import BufferAssignment
from xlc.passes.buffer_assignment_report import HOST_MEMORY_SPACE

__all__ = ["HOST_MEMORY_SPACE", "BudgetPass", "BudgetReport", "device_peak_bytes",
           "fit_to_budget"]

log = logging.getLogger("xlc.passes.memory_budget")

MAX_ROUNDS = 8
"""Runs per pass at most (each run sees the assignment of the previous one's result)."""


class BudgetPass(Protocol):
    """A pass that lowers the peak memory of a scheduled module towards `limit` bytes.

    `run_budget` may change the module (keeping `module.schedule` a valid schedule of every
    computation) and returns whether it did; `actions` lists what it did, one line each, for
    `xlc inspect` and the memory timeline (values it recomputed / offloaded)."""

    name: str
    actions: list[str]

    def run_budget(self, module: HloModule, assignment: BufferAssignment, limit: int) -> bool:
        ...


def device_peak_bytes(ba: BufferAssignment) -> int:
    """The assignment's peak_bytes: parameters, outputs (less io-aliased parameters) and temps
    in device memory; temps offloaded to host memory (S(5)) are `host_temp_bytes`."""
    return int(ba.stats()["peak_bytes"])


@dataclass
class BudgetReport:
    """What `fit_to_budget` did: the limit, device peaks before and after, the passes that ran
    with their actions, and whether the plan fits."""

    limit: int
    peak_before: int
    peak_after: int
    fits: bool
    steps: list[tuple[str, int, list[str]]] = field(default_factory=list)  # (pass, peak, acts)

    def summary(self) -> str:
        """One line: limit, peaks, and the number of actions per pass."""
        acts = ", ".join(f"{name}: {len(a)} action(s)" for name, _, a in self.steps) or "none"
        state = "fits" if self.fits else "does not fit"
        return (f"memory limit {self.limit} bytes: peak {self.peak_before} -> "
                f"{self.peak_after} bytes ({state}; {acts})")

    def lines(self) -> list[str]:
        """The summary and every action, one per line."""
        out = [self.summary()]
        for name, peak, acts in self.steps:
            out.append(f"  {name}: peak {peak} bytes after it")
            out += [f"    {a}" for a in acts]
        return out


def fit_to_budget(module: HloModule, assignment: BufferAssignment, limit: int,
                  passes: list[BudgetPass],
                  assign: Callable[[HloModule], BufferAssignment]
                  ) -> tuple[BufferAssignment, BudgetReport]:
    """Run `passes` in order until the device peak is <= `limit` (see the module docstring);
    `assign` re-runs buffer assignment on the changed module."""
    peak0 = device_peak_bytes(assignment)
    report = BudgetReport(limit, peak0, peak0, peak0 <= limit)
    ba = assignment
    if report.fits:
        return ba, report
    start = module.clone()  # the plan to fall back to if nothing beats it
    i = 0  # escalation: the first pass while it helps, a later one only when it stops helping
    for _ in range(MAX_ROUNDS * len(passes)):
        if report.fits or i >= len(passes):
            break
        p = passes[i]
        done = len(p.actions)
        if not p.run_budget(module, ba, limit):
            i += 1
            continue
        ba = assign(module)
        peak = device_peak_bytes(ba)
        improved = peak < report.peak_after
        report.peak_after = peak
        report.fits = peak <= limit
        report.steps.append((p.name, peak, list(p.actions[done:])))
        log.info("%s: peak %d bytes (limit %d)", p.name, peak, limit)
        i = 0 if improved else i + 1
    if report.peak_after >= peak0 and report.steps:
        # nothing helped (or packing made it worse): keep the plan as it was
        _restore(module, start)
        ba = assign(module)
        report.peak_after = device_peak_bytes(ba)
        report.steps.append(("undo", report.peak_after,
                             [f"kept the original plan: the passes reached no peak below "
                              f"{peak0} bytes"]))
    return ba, report


def _restore(module: HloModule, saved: HloModule) -> None:
    """Make `module` (in place: callers hold it) the copy `saved`."""
    name = module.name
    module.__dict__.update(saved.__dict__)
    module.name = name
    for comp in module.computations:
        comp.module = module
