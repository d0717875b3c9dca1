"""Headless Chromium for the viz tests: load a page (with a URL hash naming actions such as
`#open=all&search=x&check`), read back what its script wrote into `<body>`, and save a
screenshot in $XLC_VIZ_SHOTS (default: a fresh temporary directory)."""
from __future__ import annotations

import functools
import os
import re
import tempfile
from pathlib import Path

import pytest

from tools.viz_screenshots import BROWSERS, body_attrs, find_browser, run_browser

BROWSER = find_browser()
requires_browser = pytest.mark.skipif(
    BROWSER is None, reason=f"no headless browser on the PATH (looked for {', '.join(BROWSERS)})")


@functools.cache
def shots_dir() -> Path:
    """Where screenshots go: $XLC_VIZ_SHOTS if set, else one temporary directory per run."""
    env = os.environ.get("XLC_VIZ_SHOTS")
    path = Path(env) if env else Path(tempfile.mkdtemp(prefix="xlc-viz-shots-"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def load(page: Path, tmp: Path, hash_: str = "", shot: str | None = None
         ) -> tuple[dict[str, str], str]:
    """Open `page` (plus `#hash_`) in headless Chromium; returns (<body> attributes, DOM).
    With `shot`, also saves the window as `shots_dir()/shot.png`. Fails on any JS error."""
    assert BROWSER is not None
    action = ["--dump-dom"]
    if shot is not None:
        action.append(f"--screenshot={shots_dir() / (shot + '.png')}")
    url = page.resolve().as_uri() + (f"#{hash_}" if hash_ else "")
    proc = run_browser(BROWSER, url, tmp / "profile", *action)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert 'class="js-error"' not in dom, re.findall(r'class="js-error">([^<]*)', dom)
    attrs = body_attrs(dom)
    assert attrs.get("data-rendered") == "ok", attrs
    if shot is not None:
        data = (shots_dir() / (shot + ".png")).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    return attrs, dom


def assert_legible(attrs: dict[str, str]) -> None:
    """The page's own check ran (`#check`): boxes drawn, none overlapping another (nested
    boxes aside), every label inside its box."""
    assert int(attrs["data-check-boxes"]) > 0
    assert attrs["data-check-overlaps"] == "0", attrs.get("data-check-overlap-ids")
    assert attrs["data-check-overflow"] == "0", attrs.get("data-check-overflow-ids")
