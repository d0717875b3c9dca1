"""Measure what XLA's CPU runtime really allocates during a call, library workspaces included.

XLA's `temp_size_in_bytes` counts only its own temp buffer. The GEMM library behind its dots
(YNNPACK in jax 0.10.2's CPU backend: the optimized HLO holds `__ynn_fusion` custom fusions)
takes its packing buffers from malloc, outside that number, whereas xlc plans its GEMM
workspace inside its buffer assignment. This tool measures XLA's side like for like:

- a C shim (`SHIM_SOURCE`, built with `cc -shared -fPIC -O2` into
  `<xlc cache>/xla_heap/<hash of the source>.so`) is LD_PRELOADed into a child Python process.
  It wraps malloc, calloc, realloc, free, posix_memalign, aligned_alloc, memalign, valloc and
  pvalloc (found with `dlsym(RTLD_NEXT, ...)`; allocations made while dlsym itself runs come
  from a static buffer) and counts live bytes with `malloc_usable_size` of each block, and
  separately the anonymous mappings made through `mmap`/`munmap`/`mremap` (glibc's malloc maps
  its big blocks internally, which the malloc count already holds). Counters are atomics and
  each keeps its peak; `xla_heap_reset()` sets the peaks to the live values.
- the child compiles the case's `module.stablehlo.mlir` with `Client.compile_and_load(text,
  executable_devices=DeviceList, compile_options)` (what `jax._src.compiler` calls; the client
  accepts MLIR text as is) and runs it with `LoadedExecutable.execute_sharded(arrays)`. Inputs
  (inputs.npz, else random arrays of the meta.json shapes) are put on the device first.
- after 3 warm-up calls (the first one also sets up YNNPACK and the thread pool), each of
  `--repeats` calls: wait until the live count is steady, reset the peaks, call, block on the
  outputs, wait until steady again (XLA frees its temp buffer on a runtime thread, sometimes
  after the outputs are ready). `peak - before` is everything the call held at once. The
  reported *heap temp* is the median over calls (the lower one) of that peak less the output
  buffers as malloc sized them (`malloc_usable_size` of each output's buffer pointer): XLA's
  temp buffer, library workspaces and runtime bookkeeping (a few KiB per call, about 1.8 KiB
  more per output array: the PjRt buffer and jax Array objects). The minimum and maximum are
  shown too: YNNPACK's workers allocate their packing buffers only when they take part in a
  call, so on a busy machine a call that ran on fewer threads shows less.
- xlc's temp is `tools/memory_vs_xla.py`'s (its `run_case`: the CPU pipeline and buffer
  assignment, GEMM workspace included); `xlc/heap` is its ratio to the median heap temp.

Usage:

    python tools/xla_heap.py [--corpus ../shared/corpus] [--repeats N] [--threads N]
                             [--json out.json] [case ...]

`--threads N` pins the child to N CPUs before jax starts: XLA's intra-op thread pool (and with
it YNNPACK's per-thread packing buffers) is sized from the schedulable CPUs; N=1 also passes
`--xla_cpu_multi_thread_eigen=false`. The default is what jax picks (every CPU: 2 here, which
is also what xlc compiles for).
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
SHIM_SOURCE = r"""
/* xla_heap shim: live and peak bytes of the C heap and of anonymous mmaps. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define R __ATOMIC_RELAXED
typedef void *(*malloc_t)(size_t);
typedef void *(*calloc_t)(size_t, size_t);
typedef void *(*realloc_t)(void *, size_t);
typedef void (*free_t)(void *);
typedef int (*pmalign_t)(void **, size_t, size_t);
typedef void *(*align_t)(size_t, size_t);
typedef void *(*mmap_t)(void *, size_t, int, int, int, off_t);
typedef int (*munmap_t)(void *, size_t);
typedef void *(*mremap_t)(void *, size_t, size_t, int, ...);

static malloc_t real_malloc, real_valloc, real_pvalloc;
static calloc_t real_calloc;
static realloc_t real_realloc;
static free_t real_free;
static pmalign_t real_posix_memalign;
static align_t real_aligned_alloc, real_memalign;
static mmap_t real_mmap;
static munmap_t real_munmap;
static mremap_t real_mremap;

/* dlsym may allocate before the real functions are known: serve it from here, never reuse. */
static char boot[1 << 16] __attribute__((aligned(64)));
static size_t boot_used;

/* [0] heap live, [1] its peak, [2] mmap live, [3] its peak, [4] total live, [5] its peak,
   [6] allocation calls, [7] munmaps of regions not in the table. */
static int64_t st[8];

static void add(int i, int64_t d) {
  int64_t now = __atomic_add_fetch(&st[i], d, R), p = __atomic_load_n(&st[i + 1], R);
  while (d > 0 && now > p && !__atomic_compare_exchange_n(&st[i + 1], &p, now, 1, R, R)) {}
}
static void heap(int64_t d) { add(0, d); add(4, d); if (d > 0) __atomic_add_fetch(&st[6], 1, R); }
static void *track(void *p) { if (p) heap((int64_t)malloc_usable_size(p)); return p; }

static int is_boot(void *p) { return (char *)p >= boot && (char *)p < boot + sizeof boot; }
static void *boot_alloc(size_t n) {
  size_t off = __atomic_fetch_add(&boot_used, (n + 16 + 63) & ~(size_t)63, R);
  if (off + n + 16 > sizeof boot) return NULL;
  memcpy(boot + off, &n, sizeof n);
  return boot + off + 16;
}

static void resolve(void) {
  static int busy;
  if (busy) return;
  busy = 1;
#define LOOKUP(f, type) real_##f = (type)dlsym(RTLD_NEXT, #f)
  LOOKUP(malloc, malloc_t); LOOKUP(calloc, calloc_t); LOOKUP(realloc, realloc_t);
  LOOKUP(free, free_t); LOOKUP(posix_memalign, pmalign_t);
  LOOKUP(aligned_alloc, align_t); LOOKUP(memalign, align_t);
  LOOKUP(valloc, malloc_t); LOOKUP(pvalloc, malloc_t);
  LOOKUP(mmap, mmap_t); LOOKUP(munmap, munmap_t); LOOKUP(mremap, mremap_t);
#undef LOOKUP
  busy = 0;
}
#define NEED(f) do { if (!(f)) resolve(); } while (0)

void *malloc(size_t n) {
  NEED(real_malloc);
  return real_malloc ? track(real_malloc(n)) : boot_alloc(n);
}
void *calloc(size_t n, size_t m) {
  NEED(real_calloc);
  if (real_calloc) return track(real_calloc(n, m));
  return m && n > SIZE_MAX / m ? NULL : boot_alloc(n * m);
}
void free(void *p) {
  if (!p || is_boot(p)) return;
  NEED(real_free);
  heap(-(int64_t)malloc_usable_size(p));
  real_free(p);
}
void *realloc(void *p, size_t n) {
  NEED(real_realloc);
  if (is_boot(p)) {
    size_t old;
    memcpy(&old, (char *)p - 16, sizeof old);
    void *q = malloc(n);
    if (q) memcpy(q, p, old < n ? old : n);
    return q;
  }
  int64_t old = p ? (int64_t)malloc_usable_size(p) : 0;
  void *q = real_realloc(p, n);
  if (q) { heap(-old); track(q); }
  else if (p && n == 0) heap(-old);
  return q;
}
int posix_memalign(void **out, size_t align, size_t n) {
  NEED(real_posix_memalign);
  int rc = real_posix_memalign(out, align, n);
  if (rc == 0) track(*out);
  return rc;
}
void *aligned_alloc(size_t a, size_t n) {
  NEED(real_aligned_alloc);
  return track(real_aligned_alloc(a, n));
}
void *memalign(size_t a, size_t n) { NEED(real_memalign); return track(real_memalign(a, n)); }
void *valloc(size_t n) { NEED(real_valloc); return track(real_valloc(n)); }
void *pvalloc(size_t n) { NEED(real_pvalloc); return track(real_pvalloc(n)); }

/* Anonymous mappings: an open-addressed table start -> length under a spin lock. */
#define SLOTS 16384
static struct { uintptr_t a; size_t n; } tab[SLOTS];
static int lock;
static void lk(void) { while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE)) {} }
static void ulk(void) { __atomic_store_n(&lock, 0, __ATOMIC_RELEASE); }
static size_t slot(uintptr_t a) { return (a >> 12) * 2654435761u % SLOTS; }
static size_t pages(size_t n) { return (n + 4095) & ~(size_t)4095; }
static void put(uintptr_t a, size_t n) {
  lk();
  for (size_t i = slot(a), k = 0; k < SLOTS; i = (i + 1) % SLOTS, k++)
    if (tab[i].a == 0 || tab[i].a == a) {
      tab[i].a = a; tab[i].n = n; add(2, (int64_t)n); add(4, (int64_t)n); break;
    }
  ulk();
}
static size_t take(uintptr_t a) { /* removes a's entry; 0 when unknown */
  size_t n = 0, i = slot(a), k = 0;
  lk();
  for (; k < SLOTS && tab[i].a; i = (i + 1) % SLOTS, k++)
    if (tab[i].a == a) { n = tab[i].n; break; }
  if (n) { /* backward-shift deletion keeps the probe chains intact */
    for (size_t j = (i + 1) % SLOTS; tab[j].a; j = (j + 1) % SLOTS) {
      size_t h = slot(tab[j].a);
      if ((j > i) ? (h <= i || h > j) : (h <= i && h > j)) { tab[i] = tab[j]; i = j; }
    }
    tab[i].a = 0; tab[i].n = 0;
    add(2, -(int64_t)n); add(4, -(int64_t)n);
  }
  ulk();
  return n;
}
void *mmap(void *addr, size_t n, int prot, int flags, int fd, off_t off) {
  NEED(real_mmap);
  void *p = real_mmap(addr, n, prot, flags, fd, off);
  if (p != MAP_FAILED && (flags & MAP_ANONYMOUS)) {
    take((uintptr_t)p); /* a MAP_FIXED remap of a known start */
    put((uintptr_t)p, pages(n));
  }
  return p;
}
void *mmap64(void *, size_t, int, int, int, off_t) __attribute__((alias("mmap")));
int munmap(void *p, size_t n) {
  NEED(real_munmap);
  size_t had = take((uintptr_t)p);
  if (had > pages(n)) put((uintptr_t)p + pages(n), had - pages(n));
  else if (!had) __atomic_add_fetch(&st[7], 1, R);
  return real_munmap(p, n);
}
void *mremap(void *p, size_t old, size_t n, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  void *to = (flags & MREMAP_FIXED) ? va_arg(ap, void *) : NULL;
  va_end(ap);
  NEED(real_mremap);
  void *q = real_mremap(p, old, n, flags, to);
  if (q != MAP_FAILED && take((uintptr_t)p)) put((uintptr_t)q, pages(n));
  return q;
}

void xla_heap_reset(void) {
  for (int i = 0; i < 6; i += 2) __atomic_store_n(&st[i + 1], __atomic_load_n(&st[i], R), R);
}
int64_t xla_heap_live(void) { return __atomic_load_n(&st[0], R); }
int64_t xla_heap_peak(void) { return __atomic_load_n(&st[1], R); }
void xla_heap_stats(int64_t *out) {
  for (int i = 0; i < 8; i++) out[i] = __atomic_load_n(&st[i], R);
}
"""


def build_shim(cache_dir: Path | None = None) -> Path:
    """Compile the shim (once per source text) and return the shared library's path."""
    if cache_dir is None:
        from xlc.profiling import cache_directory
        cache_dir = cache_directory() / "xla_heap"
    digest = hashlib.sha256(SHIM_SOURCE.encode()).hexdigest()[:16]
    lib = cache_dir / f"shim-{digest}.so"
    if lib.exists():
        return lib
    cc = shutil.which("cc")
    if cc is None:
        raise RuntimeError("no C compiler: `cc` is not on PATH")
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir) as tmp:
        src, out = Path(tmp) / "shim.c", Path(tmp) / "shim.so"
        src.write_text(SHIM_SOURCE)
        subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(out), str(src), "-ldl"],
                       check=True, capture_output=True, text=True)
        os.replace(out, lib)  # atomic: concurrent builders all end with a whole file
    return lib


class HeapStats(NamedTuple):
    """The shim's counters (bytes, except the two counts)."""

    heap_live: int
    heap_peak: int
    mmap_live: int
    mmap_peak: int
    total_live: int
    total_peak: int
    allocations: int
    untracked_munmaps: int


class HeapCounters:
    """The shim's counters, read in the process it is preloaded into."""

    def __init__(self, shim: Path | str) -> None:
        self._lib = ctypes.CDLL(str(shim))  # already loaded: dlopen returns the same copy
        self._buf = (ctypes.c_int64 * 8)()

    def stats(self) -> HeapStats:
        """The counters now."""
        self._lib.xla_heap_stats(self._buf)
        return HeapStats(*self._buf)

    def reset(self) -> None:
        """Peaks := live values."""
        self._lib.xla_heap_reset()

    def settle(self, polls: int = 5, limit_s: float = 0.5) -> int:
        """Wait until the live heap bytes stop changing (`polls` equal readings 1 ms apart,
        at most `limit_s`) and return them."""
        last, same, end = self.stats().heap_live, 0, time.monotonic() + limit_s
        while same < polls and time.monotonic() < end:
            time.sleep(0.001)
            now = self.stats().heap_live
            same, last = (same + 1 if now == last else 0), now
        return last


def case_inputs(case_dir: Path) -> list[Any]:
    """The case's inputs: inputs.npz when saved, else seeded normals of meta.json's shapes."""
    import numpy as np

    meta = json.loads((case_dir / "meta.json").read_text())
    if (case_dir / "inputs.npz").exists():
        with np.load(case_dir / "inputs.npz") as npz:
            return [npz[i["key"]] for i in meta["inputs"]]
    rng = np.random.default_rng(meta.get("seed", 0))
    return [rng.standard_normal(i["shape"]).astype(i["dtype"]) for i in meta["inputs"]]


def output_allocation(outs: list[Any], inputs: set[int]) -> int:
    """Bytes malloc gave the output buffers: `malloc_usable_size` of each new buffer (those in
    `inputs`, donated parameters, were allocated before the call). A size that does not look
    like a malloc block's (smaller than the array, or 64 KiB larger) counts as `nbytes`."""
    usable = ctypes.CDLL(None).malloc_usable_size
    usable.restype, usable.argtypes = ctypes.c_size_t, [ctypes.c_void_p]
    total, seen = 0, set(inputs)
    for o in outs:
        ptr = o.unsafe_buffer_pointer() if o.nbytes else 0
        if ptr in seen:
            continue
        seen.add(ptr)
        size = int(usable(ptr))
        total += size if o.nbytes <= size <= o.nbytes + 65536 else int(o.nbytes)
    return total


def measure_mlir(counters: HeapCounters, text: str, inputs: list[Any], repeats: int = 7,
                 warmup: int = 3) -> dict[str, Any]:
    """Compile StableHLO text on jax's CPU client and measure `repeats` calls after `warmup`
    (see the module docstring). Byte counts are malloc's usable sizes."""
    import jax
    from jax._src import compiler
    from jax._src import xla_bridge as xb
    from jax._src.lib import xla_client as xc

    client = xb.get_backend("cpu")
    exe = client.compile_and_load(
        text, executable_devices=xc.DeviceList(tuple(client.devices()[:1])),
        compile_options=compiler.get_compile_options(num_replicas=1, num_partitions=1))
    donates = "tf.aliasing_output" in text or "jax.buffer_donor" in text
    args = [jax.device_put(x) for x in inputs]
    calls: list[dict[str, int]] = []
    for k in range(warmup + repeats):
        if donates and k:  # the last call consumed the donated buffers
            args = [jax.device_put(x) for x in inputs]
            jax.block_until_ready(args)
        in_ptrs = {a.unsafe_buffer_pointer() for a in args if a.nbytes}
        before = counters.settle()
        counters.reset()
        start = counters.stats()
        res = exe.execute_sharded(args)
        outs = [a[0] for a in res.disassemble_into_single_device_arrays()]
        jax.block_until_ready(outs)
        after = counters.settle()
        s = counters.stats()
        out_alloc = output_allocation(outs, in_ptrs)
        calls.append({"peak": s.heap_peak - before, "kept": after - before,
                      "outputs_allocated": out_alloc, "temp": s.heap_peak - before - out_alloc,
                      "outputs": sum(int(o.nbytes) for o in outs),
                      "mmap_peak": s.mmap_peak - start.mmap_live,
                      "allocations": s.allocations - start.allocations})
        del res, outs
    measured = calls[warmup:]
    stats = exe.get_compiled_memory_stats()
    temps = sorted(c["temp"] for c in measured)
    return {"heap_temp": temps[(len(temps) - 1) // 2], "heap_temp_min": temps[0],
            "heap_temp_max": temps[-1],
            "first_call_temp": calls[0]["temp"], "outputs": calls[-1]["outputs"],
            "compiled_temp": stats.temp_size_in_bytes, "compiled_alias": stats.alias_size_in_bytes,
            "mmap_peak": max(c["mmap_peak"] for c in measured), "calls": calls}


def child_main(shim: str, case_dirs: list[str], repeats: int) -> int:
    """In the preloaded child: one JSON line per case ({"start": case} before each)."""
    counters = HeapCounters(shim)
    for d in map(Path, case_dirs):
        print(json.dumps({"start": d.name}), flush=True)
        try:
            text = (d / "module.stablehlo.mlir").read_text()
            row = {"case": d.name, **measure_mlir(counters, text, case_inputs(d), repeats)}
        except Exception as e:  # one line per failed case: this is a benchmark table
            row = {"case": d.name, "error": f"{type(e).__name__}: {e}".splitlines()[0][:160]}
        print(json.dumps(row), flush=True)
    return 0


def child_env(shim: Path, threads: int | None) -> dict[str, str]:
    """The child's environment: the shim preloaded, jax on the CPU, XLA flags for N=1."""
    env = dict(os.environ, LD_PRELOAD=str(shim), JAX_PLATFORMS="cpu")
    if threads == 1:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false")
    return env


def measure_cases(case_dirs: list[Path], repeats: int = 7, threads: int | None = None,
                  shim: Path | None = None) -> list[dict[str, Any]]:
    """Measure each case in a preloaded child process; a child that dies costs one case (it
    restarts for the rest). Rows are in `case_dirs` order; failures carry an "error"."""
    shim = shim or build_shim()
    rows: dict[str, dict[str, Any]] = {}
    todo = [Path(d) for d in case_dirs]
    while todo:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(shim),
               "--repeats", str(repeats)]
        if threads:
            cmd += ["--threads", str(threads)]
        proc = subprocess.run(cmd + [str(d) for d in todo], env=child_env(shim, threads),
                              capture_output=True, text=True)
        started = None
        for line in proc.stdout.splitlines():
            if not line.startswith("{"):
                continue
            msg = json.loads(line)
            if "start" in msg:
                started = msg["start"]
            else:
                rows[msg["case"]], started = msg, None
        if started is not None:
            tail = (proc.stderr.strip().splitlines() or [""])[-1][:160]
            rows[started] = {"case": started,
                             "error": f"child died (exit {proc.returncode}) {tail}".strip()}
        elif proc.returncode != 0 and not rows:
            tail = (proc.stderr.strip().splitlines() or [""])[-1][:160]
            raise RuntimeError(f"measuring child failed (exit {proc.returncode}): {tail}")
        todo = [d for d in todo if d.name not in rows]
    return [rows[d.name] for d in map(Path, case_dirs)]


def add_xlc_and_meta(row: dict[str, Any], case_dir: Path) -> None:
    """Add XLA's reported temp (meta.json) and xlc's temp (as tools/memory_vs_xla.py has it)."""
    meta = json.loads((case_dir / "meta.json").read_text())
    row["xla_temp"] = meta["memory_analysis"]["temp_size_in_bytes"]
    from tools.memory_vs_xla import run_case
    try:
        row["xlc_temp"] = run_case(case_dir)["temp"]
    except Exception as e:  # xlc's own failure: show it, keep XLA's numbers
        row["xlc_error"] = f"{type(e).__name__}: {e}".splitlines()[0][:120]


def format_table(rows: list[dict[str, Any]]) -> str:
    """The rows as a text table (bytes)."""
    head = (f"{'case':<24} {'XLA temp':>10} {'XLA heap':>10} {'heap min':>10} {'heap max':>10} "
            f"{'outputs':>10} {'xlc temp':>10} {'xlc/heap':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['case']:<24} SKIPPED {r['error']}")
            continue
        xlc = r.get("xlc_temp")
        ratio = f"{xlc / r['heap_temp']:.2f}x" if xlc is not None and r["heap_temp"] > 0 else "-"
        lines.append(f"{r['case']:<24} {r['xla_temp']:>10} {r['heap_temp']:>10} "
                     f"{r['heap_temp_min']:>10} {r['heap_temp_max']:>10} {r['outputs']:>10} "
                     f"{'-' if xlc is None else xlc:>10} {ratio:>8}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the table (and write the rows, per-call numbers included, with `--json`)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    ap.add_argument("--repeats", type=int, default=7, help="measured calls per case")
    ap.add_argument("--threads", type=int, help="pin XLA to this many CPUs")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("cases", nargs="*", help="case names (default: all)")
    args = ap.parse_args(argv)
    if args.threads is not None:
        cpus = sorted(os.sched_getaffinity(0))
        if not 1 <= args.threads <= len(cpus):
            ap.error(f"--threads must be between 1 and {len(cpus)} (the usable CPUs)")
        if args.child:  # before jax starts: XLA sizes its thread pool from the affinity
            os.sched_setaffinity(0, cpus[:args.threads])
    if args.child:
        return child_main(args.child, args.cases, args.repeats)
    from tools.memory_vs_xla import finish, select_cases

    cases = select_cases(ap, args.corpus, args.cases, needs="module.stablehlo.mlir")
    rows = measure_cases(cases, args.repeats, args.threads)
    for row, case in zip(rows, cases):
        if "error" not in row:
            add_xlc_and_meta(row, case)
    return finish(rows, format_table(rows), args.json)


if __name__ == "__main__":
    raise SystemExit(main())
