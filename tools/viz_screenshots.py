"""Screenshots of `xlc viz` pages in headless Chromium, and the programs they show.

Usage: python tools/viz_screenshots.py [OUT_DIR]   (default: ./viz_screenshots)

Writes, each as `NAME.html` and `NAME.png` (1400x900 window):
- `transformer_block`: tools/bench_models.py's transformer block traced with `xlc.jit`,
  optimized for the CPU, every cluster closed (the page's default);
- `attention`: the corpus case `attention_single_head` (../shared/corpus) optimized, closed;
- `long_program_3000`: a generated 3000-instruction program (`long_program`), as traced.
Then prints, per page, what the page's own check (`#check`) found: drawn boxes, overlapping
boxes, labels sticking out of their box. Needs chromium (or google-chrome) on the PATH.

The builders (`transformer_block_module`, `repeated_mlp_module`, `long_program`) are shared
with tests/viz.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import xlc  # noqa: E402
from xlc.hlo.ir import HloModule  # noqa: E402

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CORPUS = Path(os.environ.get("XLC_CORPUS", ROOT.parent / "shared" / "corpus"))


def find_browser() -> str | None:
    """The first headless-capable browser on the PATH, else None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def run_browser(browser: str, url: str, profile: Path, *action: str,
                size: str = "1400,900") -> subprocess.CompletedProcess[str]:
    """Run `browser` headless on `url` with `action` (--dump-dom, --screenshot=PATH)."""
    profile.mkdir(parents=True, exist_ok=True)
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars",
           f"--user-data-dir={profile}", f"--window-size={size}", *action, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def body_attrs(dom: str) -> dict[str, str]:
    """The attributes of the dumped DOM's <body> (where the page writes its checks)."""
    m = re.search(r"<body([^>]*)>", dom)
    return dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1))) if m else {}


def transformer_block_module(d: int = 64, t: int = 16) -> tuple[HloModule, Any, Any]:
    """tools/bench_models.py's transformer block (8 heads, batch 2) traced and optimized for
    the CPU: (optimized module, its buffer assignment, the Compiled)."""
    import xlc.lax
    import xlc.nn as xnn
    import xlc.numpy as xnp

    from tools.bench_models import _params, transformer_block

    p = _params(dict(wq=(d, d), wk=(d, d), wv=(d, d), wo=(d, d), w1=(d, 4 * d),
                     w2=(4 * d, d)))
    p.update(g1=np.ones(d, np.float32), b1=np.zeros(d, np.float32),
             g2=np.ones(d, np.float32), b2=np.zeros(d, np.float32))
    x = np.zeros((2, t, d), np.float32)
    compiled = xlc.jit(lambda p, x: transformer_block(xnp, xnn, xlc.lax, p, x)).lower(
        p, x).compile()
    opt = compiled.optimized()
    return opt.module, opt.assignment, compiled


def transformer_stack_module(layers: int = 8, d: int = 16, t: int = 4
                             ) -> tuple[HloModule, Any]:
    """`layers` transformer blocks (tools/bench_models.py) applied one after the other in a
    Python loop, optimized for the CPU (about 33 instructions per block): (optimized module,
    buffer assignment)."""
    import xlc.lax
    import xlc.nn as xnn
    import xlc.numpy as xnp

    from tools.bench_models import _params, transformer_block

    ps = []
    for i in range(layers):
        p = _params(dict(wq=(d, d), wk=(d, d), wv=(d, d), wo=(d, d), w1=(d, 4 * d),
                         w2=(4 * d, d)), seed=i)
        p.update(g1=np.ones(d, np.float32), b1=np.zeros(d, np.float32),
                 g2=np.ones(d, np.float32), b2=np.zeros(d, np.float32))
        ps.append(p)

    def stack(ps: list, x: Any) -> Any:
        for p in ps:
            x = transformer_block(xnp, xnn, xlc.lax, p, x)
        return x

    x = np.zeros((2, t, d), np.float32)
    opt = xlc.jit(stack).lower(ps, x).compile().optimized()
    return opt.module, opt.assignment


def repeated_mlp_module(layers: int = 6, width: int = 32) -> tuple[HloModule, Any]:
    """An MLP of `layers` identical layers (dot, bias, tanh, residual) traced in a Python loop
    and optimized for the CPU: (optimized module, buffer assignment)."""
    import xlc.numpy as xnp

    def mlp(ws: list, bs: list, x: Any) -> Any:
        for w, b in zip(ws, bs):
            x = x + xnp.tanh(x @ w + b) * 0.5
        return x.sum()

    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((width, width)).astype(np.float32) for _ in range(layers)]
    bs = [rng.standard_normal(width).astype(np.float32) for _ in range(layers)]
    x = rng.standard_normal((4, width)).astype(np.float32)
    opt = xlc.jit(mlp).lower(ws, bs, x).compile().optimized()
    return opt.module, opt.assignment


def long_program(n: int = 3000, seed: int = 0) -> HloModule:
    """A traced (unoptimized) program of about `n` instructions: a random mix of elementwise
    ops, small matmuls, transposes and row sums over the last few values (no repeats)."""
    import xlc.numpy as xnp

    rng = np.random.default_rng(seed)
    picks = rng.integers(0, 6, size=n)
    back = rng.integers(1, 8, size=(n, 2))

    def prog(a: Any, w: Any) -> Any:
        vals = [a, a * 2.0]
        for k in range(n // 2):  # about two instructions per step (op + broadcast/convert)
            x, y = vals[-int(back[k, 0]) % len(vals)], vals[-int(back[k, 1]) % len(vals)]
            op = int(picks[k])
            if op == 0:
                v = x + y
            elif op == 1:
                v = x * y
            elif op == 2:
                v = xnp.tanh(x) - y
            elif op == 3:
                v = x @ w
            elif op == 4:
                v = x.T + y
            else:
                v = x - x.sum(axis=1, keepdims=True)
            vals.append(v)
        return vals[-1]

    a = np.ones((8, 8), np.float32)
    lowered = xlc.jit(prog).lower(a, a)
    return lowered.module


def write_pages(out: Path) -> list[Path]:
    """Write the three pages of the module docstring under `out`; returns their paths."""
    from xlc.hlo.parser import parse_module
    from xlc.passes.optimize import optimize_module
    from xlc.viz import to_html

    out.mkdir(parents=True, exist_ok=True)
    pages = []
    module, ba, _ = transformer_block_module()
    pages.append(out / "transformer_block.html")
    pages[-1].write_text(to_html(module, ba), encoding="utf-8")
    case = CORPUS / "cases" / "attention_single_head" / "module.hlo"
    if case.is_file():
        res = optimize_module(parse_module(case.read_text()))
        pages.append(out / "attention.html")
        pages[-1].write_text(to_html(res.module, res.assignment), encoding="utf-8")
    pages.append(out / "long_program_3000.html")
    pages[-1].write_text(to_html(long_program()), encoding="utf-8")
    return pages


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("viz_screenshots")
    browser = find_browser()
    if browser is None:
        sys.stderr.write(f"no browser on the PATH (looked for {', '.join(BROWSERS)})\n")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        for page in write_pages(out):
            shot = page.with_suffix(".png")
            url = page.resolve().as_uri()
            dom = run_browser(browser, url + "#check", Path(tmp), "--dump-dom",
                              f"--screenshot={shot.resolve()}").stdout
            a = body_attrs(dom)
            sys.stdout.write(f"{shot}: rendered={a.get('data-rendered')} nodes="
                             f"{a.get('data-nodes')} drawn={a.get('data-check-boxes')} "
                             f"overlaps={a.get('data-check-overlaps')} labels-outside="
                             f"{a.get('data-check-overflow')} layout_ms="
                             f"{a.get('data-layout-ms')}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
