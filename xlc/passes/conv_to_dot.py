"""Convolutions on the GEMM, by an algorithm chosen per convolution from a cost model and the
memory budget: the CPU backend's way to run convolutions at GEMM speed instead of as direct
loops (a 3x3 conv of [8,32,32,32] by 64 filters: 130 ms direct, ~2 ms on the GEMM on the
2-core test VM).

A `convolution` (no feature or batch groups, no window reversal, a float type shared by
operands and result; base dilation, as in the input gradient of a strided convolution, is
interior padding of the input) becomes a sum over groups of window positions of
`dot(patches of the group, the group's kernel slice)` (`conv_lowering.lower_convolution`):

- **im2col** (one group of all positions): one patch matrix P of `positions` times the input
  ([batch, out spatial..., positions, in feature] for NHWC), one dot with K = positions x in
  feature. The fastest or level with the fastest in most measurements, but P is transient
  memory XLA does not spend (its Eigen convolution packs in blocks): a 3x3 conv's P is 9x
  its input, a weight gradient's (window = the image) hundreds of times.
- **per position** (groups of one): one strided slice of the input per position and a dot with
  K = in feature, summed by a chain of adds. The schedule keeps one slice, the dot's result and
  the running sum live (control edges order each group after the previous partial sum), so the
  transient memory is one slice + one output instead of 9 slices. Measured
  (`tools/bench_conv.py`): 1.1-1.6x im2col's time for 3x3 convolutions whose output is 1 MiB
  or more (the adds move 33 outputs' worth of bytes, K = 16..64 is short for the GEMM), level
  or faster for small outputs and long 1-D windows.
- **groups of g positions** in between: g = a window row (3 of a 3x3) runs level with im2col
  at ~55% of its temp.

The choice (`ConvToDot.choose`): every group size g has an estimated time and temp
(`estimate`). Time: the dots' flops at a GEMM rate that falls for small K (K_HALF), plus the
bytes the patches, the dots' results and the adds move (the latter slower once two outputs
exceed a core's cache), plus the concatenates of groups of several positions, plus a fixed
cost per kernel.
Temp: the group's patch matrix, plus one output-sized dot result when there is more than one
group, plus the kernel slices (x batch in the NCHW form), plus the sum before its transpose in
the transposed form (the running sum is the convolution's result, which every
algorithm has; the GEMM's packing scratch, a few hundred KiB at most, is the backend's). Then

- with `CompileOptions.memory_limit`: the budget of one convolution is WORKSPACE_SHARE (1/4) of
  the memory the limit leaves beside the entry's parameters and outputs - the rest is for the
  values live around the convolution (its own operands and result, activations a training step
  keeps for its backward pass). The fastest g whose temp fits is taken; when none does, the
  convolution stays for the direct emitter (no workspace at all, but ~65x slower);
- without a limit: of the group sizes estimated at most TIME_TOLERANCE (5%) or SMALL_S (5 us)
  slower than the fastest, the one with the least temp ("not measurably slower": the
  round-robin medians of `tools/bench_conv.py` move by about 5% from run to run).

No more than MAX_GROUPS groups are made (compile time: a group is ~4 kernels), so g starts at
positions / MAX_GROUPS (1 for windows up to 4x4); no patch group beyond MAX_PATCH_BYTES is
built, except at that smallest g. The dims of the patches are ordered so that the dots produce
the convolution's output order directly (NHWC, NCHW, CNHW, ...; see `conv_lowering`).

Requires: a verified module. Guarantees: the same values up to the reassociation of each
output's sum; every rewritten convolution's users see an instruction of the same shape.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from math import ceil

from xlc.hlo.ir import HloInstruction, HloModule
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import PrimitiveType
from xlc.passes.conv_lowering import (
    BATCH_FEATURE,
    FEATURE_LAST,
    TRANSPOSED,
    ConvGeometry,
    dot_form,
    geometry,
    lower_convolution,
)

log = logging.getLogger("xlc.passes.conv_to_dot")

MAX_PATCH_BYTES = 64 << 20
"""Largest patch matrix (input slices x positions of a group) materialized for one dot."""

MAX_GROUPS = 16
"""Most groups (dots) one convolution becomes: each is ~4 kernels to compile, and a weight
gradient's 32x32 window in 64 groups of 16 positions takes LLVM minutes (in 16 groups of 64,
14 s; as im2col, 59 s)."""

WORKSPACE_SHARE = 0.25
"""With a memory limit: the share of (limit - entry parameters - entry outputs) one
convolution's transient temp (patches, dot result, kernel slices) may take."""

TIME_TOLERANCE = 1.05
SMALL_S = 5e-6
"""Without a limit, a lowering estimated at most this much slower than the fastest (ratio, or
absolute seconds) counts as not measurably slower, and the one with the least temp is taken."""

# The cost model's machine: fitted to the time ratios of tools/bench_conv.py on the 2-core
# AVX-512 test VM while it was otherwise idle (6 runs of 8 shapes: the fitted ratios to im2col
# are within 5% of the measured medians but for the two tiny shapes, microseconds apart).
# Effective figures, not hardware peaks.
GEMM_FLOPS_PER_THREAD = 50e9
"""f32 flop/s of the packed GEMM per thread at large K (f64: half)."""
K_HALF = 1
"""The GEMM's rate at contracting size K is K / (K + K_HALF) of its peak."""
BYTES_PER_S = 480e9
"""Bytes/s of writing the patches and reading them into the GEMM's packing."""
OUTPUT_BYTES_PER_S, CACHE_BYTES = 120e9, 1 << 20
"""Bytes/s of the dots' stores and the adds once the sum and a dot result (2 x output) exceed
CACHE_BYTES (a core's L2); BYTES_PER_S below."""
CONCAT_S_PER_BYTE = 4e-11
"""Extra seconds per patch byte of a group of more than one position: the fused concatenate
(a select per element) instead of a vectorised strided copy."""
KERNEL_S = 0.1e-6
"""Fixed cost of one kernel (a patch fusion, a dot, an add)."""

_FLOATS = (PrimitiveType.F32, PrimitiveType.F64)


def rewritable(conv: HloInstruction) -> bool:
    """Whether `conv` is lowered by this pass (see the module docstring)."""
    lhs, rhs = conv.operands
    pt = conv.shape.element_type
    window = conv.attrs.get("window")
    dims = window.dims if window is not None else ()
    if pt not in _FLOATS or lhs.shape.element_type is not pt or rhs.shape.element_type is not pt:
        return False
    if int(conv.attrs.get("feature_group_count", 1)) != 1 or \
            int(conv.attrs.get("batch_group_count", 1)) != 1:
        return False
    if any(d.reversal for d in dims):
        return False
    return conv.shape.byte_size() > 0 and lhs.shape.byte_size() > 0


@dataclass(frozen=True)
class Estimate:
    """The cost model's figures for one group size: seconds and transient temp bytes."""

    group: int
    seconds: float
    temp_bytes: int


def estimate(geo: ConvGeometry, group: int, threads: int = 1,
             form: str = FEATURE_LAST) -> Estimate:
    """Time and temp of lowering a convolution of geometry `geo` in groups of `group`
    positions on `threads` threads in dot form `form` (`conv_lowering.dot_form`). See the
    module docstring."""
    positions, eb = geo.positions, geo.element_bytes
    groups = ceil(positions / group)
    flops = 2 * geo.rows * geo.out_feature * geo.in_feature * positions
    rate = GEMM_FLOPS_PER_THREAD * max(1, threads) * (0.5 if eb == 8 else 1.0)
    k = group * geo.in_feature
    out, patches = geo.output_bytes(), positions * geo.slice_bytes()
    transposed = form == TRANSPOSED
    out_rate = OUTPUT_BYTES_PER_S if 2 * out > CACHE_BYTES else BYTES_PER_S
    seconds = (flops / (rate * k / (k + K_HALF))
               # the patches written and read by the GEMM's packing (concatenated for groups)
               + 2 * patches / BYTES_PER_S + (patches * CONCAT_S_PER_BYTE if group > 1 else 0.0)
               # each dot's result stored, each add reading two and writing one, the transpose
               + (groups + 3 * (groups - 1) + 2 * transposed) * out / out_rate
               + KERNEL_S * (3 * groups - 1 + transposed))
    kernel = ceil(geo.kernel_bytes() * group / positions)
    temp = (group * geo.slice_bytes() + (out if groups > 1 else 0) + (out if transposed else 0)
            + kernel * (geo.batch if form == BATCH_FEATURE else 1))
    return Estimate(group, seconds, temp)


def entry_io_bytes(module: HloModule) -> int:
    """Bytes of the entry computation's parameters and result (what a limit always holds)."""
    entry = module.entry
    if entry is None:
        return 0
    params = sum(p.shape.byte_size() for p in entry.parameters if p is not None)
    root = entry.root
    return params + (root.shape.byte_size() if root is not None else 0)


class ConvToDot:
    """Pass: lower convolutions to sums of patches @ kernel slices, choosing the group size of
    each one (see the module docstring)."""

    name = "conv-to-dot"

    def __init__(self, memory_limit: int | None = None, threads: int = 1,
                 group: int | None = None):
        """`memory_limit`: `CompileOptions.memory_limit` (bytes or None); `threads`: the threads
        the dots run on (the GEMM's rate scales with them); `group`: force this many window
        positions per dot (tests and benchmarks; None: the cost model's choice)."""
        self.memory_limit, self.threads, self.group = memory_limit, threads, group
        self.budget: int | None = None  # a convolution's temp budget in the module being run

    def candidates(self, conv: HloInstruction) -> list[Estimate]:
        """The estimates of every group size allowed for `conv`: from the smallest that makes
        at most MAX_GROUPS groups (always allowed) up to the window, while the patches stay
        within MAX_PATCH_BYTES."""
        geo = geometry(conv)
        smallest = ceil(geo.positions / MAX_GROUPS)
        return [estimate(geo, g, self.threads, dot_form(conv, g))
                for g in range(smallest, geo.positions + 1)
                if g == smallest or g * geo.slice_bytes() <= MAX_PATCH_BYTES]

    def choose(self, conv: HloInstruction) -> int:
        """The number of window positions per dot for `conv`, 0 for none (the direct emitter;
        see the module docstring)."""
        if self.group is not None:
            return self.group
        cands = self.candidates(conv)
        if self.budget is not None:
            fits = [c for c in cands if c.temp_bytes <= self.budget]
            if not fits:  # the direct emitter: no workspace at all, ~65x slower
                log.debug("convolution %s: no lowering within the budget of %d bytes (least "
                          "%d): direct emitter", conv.name, self.budget, cands[0].temp_bytes)
                return 0
            pick = min(fits, key=lambda c: (c.seconds, c.temp_bytes))
        else:
            fastest = min(c.seconds for c in cands)
            near = [c for c in cands
                    if c.seconds <= max(fastest * TIME_TOLERANCE, fastest + SMALL_S)]
            pick = min(near, key=lambda c: (c.temp_bytes, c.seconds))
        log.debug("convolution %s: %d of %d positions per dot (est. %.1f us, %d temp bytes; "
                  "budget %s)", conv.name, pick.group, geometry(conv).positions,
                  pick.seconds * 1e6, pick.temp_bytes, self.budget)
        return pick.group

    def run(self, module: HloModule) -> bool:
        """Rewrite every `rewritable` convolution of every non-fusion computation."""
        self.budget = None
        if self.memory_limit is not None:
            self.budget = int(WORKSPACE_SHARE * max(0, self.memory_limit
                                                    - entry_io_bytes(module)))
        changed = False
        for comp in module.computations:
            if comp.is_fusion_computation:
                continue
            for inst in list(comp.instructions):
                if inst.opcode is Opcode.CONVOLUTION and rewritable(inst):
                    group = self.choose(inst)
                    if group > 0:
                        comp.replace_instruction(inst, lower_convolution(comp, inst, group))
                        changed = True
        return changed

