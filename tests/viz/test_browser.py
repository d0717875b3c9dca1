"""The page in a real browser: headless chromium runs the page's script without JS errors,
the graph and timeline are in the DOM, and a screenshot is saved under the test's tmp dir.
Skipped when no chromium is installed (CI installs Debian's chromium)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import requires_corpus
from tests.viz.helpers import optimized_case, write
from xlc.viz import to_html

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


BROWSER = find_browser()
requires_browser = pytest.mark.skipif(
    BROWSER is None, reason=f"no headless browser on the PATH (looked for {', '.join(BROWSERS)})")


def run_browser(page: Path, tmp: Path, *action: str) -> subprocess.CompletedProcess:
    assert BROWSER is not None
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
           "--window-size=1400,900", *action, page.resolve().as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)


def dump_dom(page: Path, tmp: Path) -> str:
    proc = run_browser(page, tmp, "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def body_attrs(dom: str) -> dict[str, str]:
    m = re.search(r"<body([^>]*)>", dom)
    assert m, "no <body> in the dumped DOM"
    return dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))


@requires_browser
@requires_corpus
@pytest.mark.parametrize("name", ["power_iteration", "reductions"])
def test_page_renders_in_chromium(name: str, tmp_path: Path) -> None:
    module, ba = optimized_case(name)
    html_text = to_html(module, ba)
    page = write(tmp_path, f"{name}.html", html_text)
    dom = dump_dom(page, tmp_path)
    attrs = body_attrs(dom)
    assert 'class="js-error"' not in dom, re.findall(r'class="js-error">([^<]*)', dom)
    assert "data-errors" not in attrs
    assert attrs.get("data-rendered") == "ok"
    assert int(attrs["data-nodes"]) == html_text.count('<g class="node ')
    assert int(attrs["data-buffers"]) == html_text.count('<rect class="buf ') > 0
    assert re.search(r'<svg id="graph"[^>]*viewBox="[-\d.]+ [-\d.]+ [\d.]+ [\d.]+"', dom)
    assert '<svg class="timeline"' in dom
    shot = tmp_path / f"{name}.png"
    proc = run_browser(page, tmp_path, f"--screenshot={shot}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


@requires_browser
def test_harness_catches_js_errors(tmp_path: Path) -> None:
    from tests.viz.test_dot import SIMPLE_HLO
    from xlc.hlo.parser import parse_module

    html_text = to_html(parse_module(SIMPLE_HLO)).replace(
        "frame(0.75);", "frame(0.75); noSuchFunction();")
    page = write(tmp_path, "broken.html", html_text)
    dom = dump_dom(page, tmp_path)
    attrs = body_attrs(dom)
    assert attrs.get("data-rendered") == "pending"
    assert attrs.get("data-errors") == "1"
    assert re.search(r'class="js-error">JS error: ReferenceError: noSuchFunction', dom)
