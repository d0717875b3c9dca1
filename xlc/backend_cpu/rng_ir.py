"""Counter-based bit generators in LLVM IR, bit-exact with `xlc.hlo.evaluator_rng`.

`threefry2x32(b, x0, x1, k0, k1)` (20 rounds) and `philox4x32(b, c, k0, k1)` (10 rounds) work on
i32 values; `split64`/`join64` move between one u64 and its (low, high) 32-bit words.
"""
from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

from xlc.codegen import llvm_utils as lu

_ROT = (13, 15, 26, 6, 17, 29, 16, 24)


def _c32(v: int) -> ir.Constant:
    return ir.Constant(lu.I32, v & 0xFFFFFFFF)


def split64(b: ir.IRBuilder, v: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(low, high) i32 words of i64 `v`."""
    return b.trunc(v, lu.I32), b.trunc(b.lshr(v, ir.Constant(lu.I64, 32)), lu.I32)


def join64(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value) -> ir.Value:
    """The i64 `lo | hi << 32` of two i32 words."""
    return b.or_(b.zext(lo, lu.I64), b.shl(b.zext(hi, lu.I64), ir.Constant(lu.I64, 32)))


def _rotl(b: ir.IRBuilder, v: ir.Value, d: int) -> ir.Value:
    return b.or_(b.shl(v, _c32(d)), b.lshr(v, _c32(32 - d)))


def threefry2x32(b: ir.IRBuilder, x0: ir.Value, x1: ir.Value, k0: ir.Value, k1: ir.Value
                 ) -> tuple[ir.Value, ir.Value]:
    """Threefry-2x32, 20 rounds, on i32 words under key (k0, k1) (the evaluator's algorithm)."""
    ks = (k0, k1, b.xor(b.xor(_c32(0x1BD11BDA), k0), k1))
    x0 = b.add(x0, ks[0])
    x1 = b.add(x1, ks[1])
    for group in range(5):
        for r in _ROT[(group % 2) * 4:(group % 2) * 4 + 4]:
            x0 = b.add(x0, x1)
            x1 = b.xor(_rotl(b, x1, r), x0)
        x0 = b.add(x0, ks[(group + 1) % 3])
        x1 = b.add(b.add(x1, ks[(group + 2) % 3]), _c32(group + 1))
    return x0, x1


def philox4x32(b: ir.IRBuilder, c: Sequence[ir.Value], k0: ir.Value, k1: ir.Value
               ) -> list[ir.Value]:
    """Philox-4x32, 10 rounds, on four i32 counter words under key (k0, k1)."""
    ma, mb = ir.Constant(lu.I64, 0xD2511F53), ir.Constant(lu.I64, 0xCD9E8D57)
    sh = ir.Constant(lu.I64, 32)
    x = list(c)
    for r in range(10):
        key0 = b.add(k0, _c32(r * 0x9E3779B9))
        key1 = b.add(k1, _c32(r * 0xBB67AE85))
        p0 = b.mul(b.zext(x[0], lu.I64), ma)
        p1 = b.mul(b.zext(x[2], lu.I64), mb)
        x = [b.xor(b.xor(b.trunc(b.lshr(p1, sh), lu.I32), x[1]), key0), b.trunc(p1, lu.I32),
             b.xor(b.xor(b.trunc(b.lshr(p0, sh), lu.I32), x[3]), key1), b.trunc(p0, lu.I32)]
    return x
