"""ns/element of sin/cos/tan (f32 and f64) as xlc's elemental emitter compiles them, against
numpy, on 64K L2-resident elements: arguments bounded by value ranges (|x| <= 100 known at
compile time), the same arguments unbounded (a parameter: the huge-argument path is compiled
in, behind its branch), arguments with 1 in 256 elements huge, and all huge (log-uniform up to
1e30 / 1e300, every lane through Payne-Hanek). The loops are scalar element code, vectorised by
LLVM as the CPU backend's loops are; `--jit` adds `xlc.jit(xnp.sin)` over 1M elements.

Usage: python tools/bench_trig.py [--repeats 31] [--jit]
"""
from __future__ import annotations

import argparse
import ctypes
import functools
import math
import statistics
import time
from collections.abc import Callable

import numpy as np
from llvmlite import ir

from xlc.backend_cpu import jit
from xlc.codegen import llvm_utils as lu
from xlc.codegen import math as xm
from xlc.hlo.shape import PrimitiveType

N = 1 << 16
FUNCS = ("sin", "cos", "tan")


def _best(fn: Callable[[], object], repeats: int) -> float:
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


Kernel = Callable[[np.ndarray, np.ndarray], None]


def _build() -> dict[tuple[str, str, bool], Kernel]:
    """Kernels keyed by (function, dtype name, bounded)."""
    name = lu.unique_symbol("bench_trig")
    mod = lu.new_module(name)
    syms = {}
    for fname in FUNCS:
        for pt in (PrimitiveType.F32, PrimitiveType.F64):
            for bounded in (True, False):
                sym = f"{name}_{fname}_{pt.text}_{int(bounded)}"
                func = ir.Function(mod, ir.FunctionType(lu.VOID, [lu.PTR, lu.PTR, lu.I64]),
                                   name=sym)
                for arg in func.args[:2]:
                    arg.add_attribute("noalias")
                b = ir.IRBuilder(func.append_basic_block("entry"))
                rng = (-100.0, 100.0) if bounded else (-math.inf, math.inf)
                with lu.for_range(b, func.args[2]) as i:
                    v = lu.load_element(b, func.args[1], i, pt)
                    try:
                        y = getattr(xm, fname)(b, v, arg_range=rng)
                    except TypeError:  # an xlc from before value ranges reached trig
                        y = getattr(xm, fname)(b, v)
                    lu.store_element(b, y, func.args[0], i, pt)
                b.ret_void()
                syms[(fname, pt.dtype.name, bounded)] = sym
    jit.compile_module(mod, name)
    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    out: dict[tuple[str, str, bool], Kernel] = {}
    for key, sym in syms.items():
        out[key] = functools.partial(_call, proto(jit.jit_engine().address(sym)))
    return out


def _call(cf: Callable[[int, int, int], None], o: np.ndarray, x: np.ndarray) -> None:
    cf(o.ctypes.data, x.ctypes.data, x.size)


def _inputs(dtype: type) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    small = rng.uniform(-100, 100, N)
    top = 30 if dtype is np.float32 else 300
    huge = 10.0 ** rng.uniform(10, top, N) * rng.choice([-1.0, 1.0], N)
    mixed = small.copy()
    mixed[rng.choice(N, N // 256, replace=False)] = huge[: N // 256]
    return {k: v.astype(dtype) for k, v in
            (("small", small), ("mixed 1/256", mixed), ("huge", huge))}


def main() -> None:
    """Print one line per function, dtype and argument kind: xlc and numpy ns/element."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=31)
    ap.add_argument("--jit", action="store_true")
    args = ap.parse_args()
    kernels = _build()
    print(f"{N} elements, ns/element (median of {args.repeats}); numpy ufunc with out=")
    print(f"{'':14s} {'bounded':>8s} {'unbounded':>10s} {'numpy':>7s}")
    for fname in FUNCS:
        for dtype in (np.float32, np.float64):
            dn = np.dtype(dtype).name
            unb, bnd_k, npf = kernels[(fname, dn, False)], kernels[(fname, dn, True)], \
                getattr(np, fname)
            for kind, x in _inputs(dtype).items():
                out = np.empty_like(x)
                t_unb = _best(functools.partial(unb, out, x), args.repeats)
                err = np.max(np.abs(out - npf(x.astype(np.float64))))
                t_np = _best(functools.partial(npf, x, out=out), args.repeats)
                bnd = "-"
                if kind == "small":
                    t_b = _best(functools.partial(bnd_k, out, x), args.repeats)
                    bnd = f"{t_b / N * 1e9:.2f}"
                print(f"{fname} {dn[5:]} {kind:11s} {bnd:>6s} {t_unb / N * 1e9:10.2f} "
                      f"{t_np / N * 1e9:7.2f}   max abs err {err:.1e}")
    if args.jit:
        import xlc.numpy as xnp

        import xlc

        for dtype in (np.float32, np.float64):
            x = np.random.default_rng(1).uniform(-100, 100, 1 << 20).astype(dtype)
            f = xlc.jit(xnp.sin)
            t = _best(functools.partial(f, x), args.repeats)
            t_np = _best(functools.partial(np.sin, x), args.repeats)
            print(f"jit sin {np.dtype(dtype).name} 1M: xlc {t / x.size * 1e9:.2f} "
                  f"numpy {t_np / x.size * 1e9:.2f} ns/element")


if __name__ == "__main__":
    main()
