"""Run-time profiling of CPU executables: the recording library and the emitted hooks.

With `CompileOptions.profile` on (part of the cache key: profiled and unprofiled code never
share an entry) the emitter brackets every unit of every control-flow computation that calls
code (a kernel, a GEMM or sort library call, a host call, a loop) with two calls into the
`profile` run-time library, and the entry function with two more for the whole call:

    t0 = xlc_prof_begin(table, id)        ; id 0: the call itself, 1..: the units
    ... the unit's code ...
    xlc_prof_end(table, id, t0)

Each job function of the thread pool (`parallel.py`: every split kernel) brackets its share
the same way (`xlc_prof_now` / `xlc_prof_share_end(share, t0)`), attributed to the kernel the
calling thread began last. Unprofiled modules declare none of these symbols and are emitted
exactly as before (the job wrappers test for the declaration).

The library appends one event of six i64 words per `end`:

    [table, id, thread, t0_ns, t1_ns, share]     (share = -1 for a unit or the call)

to one process-wide buffer (an atomic counter hands out slots; events past the capacity are
counted, not written). `thread` is `pthread_self()` (Python's `threading.get_ident()` of the
calling thread); times are CLOCK_MONOTONIC nanoseconds, the clock of `time.monotonic_ns()`.
`table` is the address of a NUL-terminated JSON constant of the module that describes its
units (`kernel_table`): name, opcode, computation, instructions, bytes and flops. Events
therefore explain themselves whether the code was just compiled, loaded from an `.xlc` file or
from the compile cache. `xlc.backend_cpu.profiler` owns the buffer and turns it into traces.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from xlc.codegen import llvm_utils as lu

if TYPE_CHECKING:
    from xlc.backend_cpu.emitter import CpuEmitter, FnCtx
    from xlc.hlo.ir import HloInstruction

PROF_BEGIN = "xlc_prof_begin"
PROF_END = "xlc_prof_end"
PROF_NOW = "xlc_prof_now"
PROF_SHARE_END = "xlc_prof_share_end"
PROF_SET_BUFFER = "xlc_prof_set_buffer"
PROF_COUNT = "xlc_prof_count"
EXPORTS = (PROF_BEGIN, PROF_END, PROF_NOW, PROF_SHARE_END, PROF_SET_BUFFER, PROF_COUNT)
EVENT_WORDS = 6
"""i64 words per event: table, id, thread, t0, t1, share."""
CALL_ID = 0
"""The id of the whole-call event of an entry function."""

_CLOCK_MONOTONIC = 1

_TYPES = {
    PROF_BEGIN: ir.FunctionType(lu.I64, [lu.PTR, lu.I64]),
    PROF_END: ir.FunctionType(lu.VOID, [lu.PTR, lu.I64, lu.I64]),
    PROF_NOW: ir.FunctionType(lu.I64, []),
    PROF_SHARE_END: ir.FunctionType(lu.VOID, [lu.I64, lu.I64]),
    PROF_SET_BUFFER: ir.FunctionType(lu.VOID, [lu.PTR, lu.I64]),
    PROF_COUNT: ir.FunctionType(lu.I64, []),
}


def declare(module: ir.Module, name: str) -> ir.Function:
    """Library function `name` (one of EXPORTS) declared in `module` (once)."""
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, _TYPES[name], name=name)


def is_profiled(module: ir.Module) -> bool:
    """Whether `module` is being emitted with profiling hooks (it declares `xlc_prof_begin`)."""
    return PROF_BEGIN in module.globals


def call_share(b: ir.IRBuilder, fn: ir.Function, args: list[ir.Value], share: ir.Value
               ) -> None:
    """Call `fn(args)` at `b`, the body of pool share `share` (i64); in a profiled module the
    call is bracketed by `xlc_prof_now` / `xlc_prof_share_end` (a per-thread event)."""
    if not is_profiled(b.module):
        b.call(fn, args)
        return
    t0 = b.call(declare(b.module, PROF_NOW), [])
    b.call(fn, args)
    b.call(declare(b.module, PROF_SHARE_END), [share, t0])


# ---- the library ----------------------------------------------------------------------------
def build_profile_library() -> ir.Module:
    """The LLVM module of the `profile` run-time library (see the module docstring)."""
    m = lu.new_module("xlc_profile")

    def word(name: str, ty: ir.Type, init: ir.Constant) -> ir.GlobalVariable:
        g = ir.GlobalVariable(m, ty, name=f"xlc_prof.{name}")
        g.linkage = "internal"
        g.initializer = init
        g.align = 64
        return g

    null = ir.Constant(lu.PTR, None)
    buf = word("buf", lu.PTR, null)
    cap = word("cap", lu.I64, ir.Constant(lu.I64, 0))
    count = word("count", lu.I64, ir.Constant(lu.I64, 0))
    cur_table = word("cur_table", lu.PTR, null)
    cur_id = word("cur_id", lu.I64, ir.Constant(lu.I64, 0))
    clock = ir.Function(m, ir.FunctionType(lu.I32, [lu.I32, lu.PTR]), name="clock_gettime")
    self_fn = ir.Function(m, ir.FunctionType(lu.I64, []), name="pthread_self")

    def function(name: str, internal: bool = False) -> tuple[ir.Function, ir.IRBuilder]:
        ty = _TYPES.get(name) or ir.FunctionType(lu.VOID, [lu.PTR, lu.I64, lu.I64, lu.I64,
                                                           lu.I64])
        fn = ir.Function(m, ty, name=name)
        if internal:
            fn.linkage = "internal"
        return fn, ir.IRBuilder(fn.append_basic_block("entry"))

    now, b = function(PROF_NOW)
    ts = b.alloca(ir.ArrayType(lu.I64, 2))
    ts.type = lu.PTR
    b.call(clock, [ir.Constant(lu.I32, _CLOCK_MONOTONIC), ts])
    sec = b.load(ts, typ=lu.I64)
    nsec = b.load(b.gep(ts, [ir.Constant(lu.I64, 1)], source_etype=lu.I64), typ=lu.I64)
    b.ret(b.add(b.mul(sec, ir.Constant(lu.I64, 1_000_000_000)), nsec))

    # void record(ptr table, i64 id, i64 t0, i64 t1, i64 share)
    record, b = function("xlc_prof.record", internal=True)
    table, kid, t0, t1, share = record.args
    slot = b.atomic_rmw("add", count, ir.Constant(lu.I64, 1), "monotonic")
    base = b.load(buf, typ=lu.PTR)
    room = b.and_(b.icmp_signed("<", slot, b.load(cap, typ=lu.I64)),
                  b.icmp_unsigned("!=", b.ptrtoint(base, lu.I64), ir.Constant(lu.I64, 0)))
    with b.if_then(room):
        at = b.mul(slot, ir.Constant(lu.I64, EVENT_WORDS))
        words = [b.ptrtoint(table, lu.I64), kid, b.call(self_fn, []), t0, t1, share]
        for k, v in enumerate(words):
            p = b.gep(base, [b.add(at, ir.Constant(lu.I64, k))], source_etype=lu.I64)
            b.store(v, p)
    b.ret_void()

    fn, b = function(PROF_BEGIN)
    b.store(fn.args[0], cur_table)
    b.store(fn.args[1], cur_id)
    b.ret(b.call(now, []))

    fn, b = function(PROF_END)
    t_end = b.call(now, [])
    b.call(record, [fn.args[0], fn.args[1], fn.args[2], t_end, ir.Constant(lu.I64, -1)])
    b.ret_void()

    fn, b = function(PROF_SHARE_END)
    t_end = b.call(now, [])
    b.call(record, [b.load(cur_table, typ=lu.PTR), b.load(cur_id, typ=lu.I64), fn.args[1],
                    t_end, fn.args[0]])
    b.ret_void()

    fn, b = function(PROF_SET_BUFFER)
    b.store(fn.args[0], buf)
    b.store(fn.args[1], cap)
    b.store_atomic(ir.Constant(lu.I64, 0), count, "seq_cst", 8)
    b.ret_void()

    fn, b = function(PROF_COUNT)
    b.ret(b.load_atomic(count, "seq_cst", 8, typ=lu.I64))
    return m


# ---- the hooks the emitter places -----------------------------------------------------------
def kernel_entry(insts: list[HloInstruction], computation: str, top: bool) -> dict[str, Any]:
    """The table entry of a unit: the first instruction's name and opcode, every instruction
    of the unit, and the summed cost (`xlc.hlo.cost_analysis.instruction_cost`)."""
    from xlc.hlo.cost_analysis import instruction_cost

    flops = trans = nbytes = 0
    for inst in insts:
        cost = instruction_cost(inst)
        flops += cost.flops
        trans += cost.transcendentals
        nbytes += cost.bytes_accessed
    return {"name": insts[0].name, "opcode": insts[0].opcode.text, "computation": computation,
            "top": top, "instructions": [i.name for i in insts], "flops": flops,
            "transcendentals": trans, "bytes": nbytes}


class ProfileEmit:
    """Places the profiling hooks while a `CpuEmitter` emits (see the module docstring) and
    builds the module's unit table. Used by `CpuEmitter.computation_function`."""

    def __init__(self, em: CpuEmitter):
        """Declare the library's functions in `em`'s module and reserve the table global."""
        self.em = em
        for name in (PROF_BEGIN, PROF_END, PROF_NOW, PROF_SHARE_END):
            declare(em.llmod, name)
        self.table = ir.GlobalVariable(em.llmod, ir.ArrayType(lu.I8, 1),
                                       name=em.llmod.get_unique_name(f"{em.entry_name}.prof"))
        self.table.global_constant = True
        self.table.linkage = "internal"
        module = em.hlo
        assert module.entry is not None
        self.entry = module.entry
        self.kernels: dict[int, dict[str, Any]] = {CALL_ID: {
            "name": module.name, "opcode": "call", "computation": module.entry.name,
            "top": False, "instructions": [], "flops": 0, "transcendentals": 0, "bytes": 0}}
        self._next = CALL_ID + 1
        self._call_t0: ir.Value | None = None

    def enter(self, ctx: FnCtx) -> None:
        """At the start of a computation function: the entry's begins the call event."""
        if ctx.comp is self.entry:
            self._call_t0 = ctx.b.call(declare(ctx.b.module, PROF_BEGIN),
                                       [self.table, ir.Constant(lu.I64, CALL_ID)])

    def leave(self, ctx: FnCtx) -> None:
        """Before a computation function returns: the entry's ends the call event."""
        if ctx.comp is self.entry and self._call_t0 is not None:
            ctx.b.call(declare(ctx.b.module, PROF_END),
                       [self.table, ir.Constant(lu.I64, CALL_ID), self._call_t0])

    def begin(self, ctx: FnCtx) -> tuple[int, ir.Instruction, ir.Block, int]:
        """Before a unit: its begin call; returns the mark `end` needs."""
        kid = self._next
        self._next += 1
        call = ctx.b.call(declare(ctx.b.module, PROF_BEGIN),
                          [self.table, ir.Constant(lu.I64, kid)])
        block = ctx.b.block
        return kid, call, block, len(block.instructions)

    def end(self, ctx: FnCtx, mark: tuple[int, ir.Instruction, ir.Block, int],
            insts: list[HloInstruction]) -> None:
        """After a unit: its end call, or, when the unit called no code (a bitcast, a tuple),
        no event at all (the begin call is taken out again)."""
        kid, call, block, start = mark
        if not self._calls_code(ctx.fn, block, start):
            block.instructions.remove(call)
            return
        ctx.b.call(declare(ctx.b.module, PROF_END), [self.table, ir.Constant(lu.I64, kid), call])
        self.kernels[kid] = kernel_entry(insts, ctx.comp.name, ctx.comp is self.entry)

    @staticmethod
    def _calls_code(fn: ir.Function, block: ir.Block, start: int) -> bool:
        blocks = list(fn.blocks)
        later = blocks[blocks.index(block) + 1:] if block in blocks else []
        insts = list(block.instructions[start:])
        for blk in later:
            insts += blk.instructions
        for ins in insts:
            if not isinstance(ins, ir.CallInstr):
                continue
            callee = ins.callee
            if isinstance(callee, ir.Function):
                if callee.name in EXPORTS:
                    continue
                body = callee.blocks
                if body and len(body) == 1 and len(body[0].instructions) == 1:
                    continue  # an empty unit function: `ret void` only
            return True
        return False

    def finish(self) -> None:
        """Fill the table global with the JSON of every unit that got an event."""
        call = self.kernels[CALL_ID]
        for kid, entry in self.kernels.items():
            if kid != CALL_ID and entry["top"]:
                for key in ("flops", "transcendentals", "bytes"):
                    call[key] += entry[key]
        text = json.dumps({"module": self.em.hlo.name, "kernels": self.kernels},
                          separators=(",", ":"))
        data = bytearray(text.encode() + b"\0")
        ty = ir.ArrayType(lu.I8, len(data))
        self.table.value_type = ty
        self.table.initializer = ir.Constant(ty, data)
