"""The page in a real browser: headless chromium runs the page's script without JS errors,
the graph and timeline are in the DOM, and a screenshot is saved under the test's tmp dir.
Skipped when no chromium is installed (CI installs Debian's chromium)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import requires_corpus
from tests.viz.browser import BROWSER, assert_legible, load, requires_browser
from tests.viz.helpers import optimized_case, page_graph, write
from tools.viz_screenshots import body_attrs
from tools.viz_screenshots import run_browser as _run
from xlc.viz import to_html


def run_browser(page: Path, tmp: Path, *action: str) -> subprocess.CompletedProcess:
    assert BROWSER is not None
    return _run(BROWSER, page.resolve().as_uri(), tmp / "profile", *action)


def dump_dom(page: Path, tmp: Path) -> str:
    proc = run_browser(page, tmp, "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@requires_browser
@requires_corpus
@pytest.mark.parametrize("name", ["power_iteration", "reductions", "cond_switch"])
def test_page_renders_in_chromium(name: str, tmp_path: Path) -> None:
    """Every cluster opened (`#open=all`, while bodies and branches included): nothing
    overlaps, every label fits; the screenshot is of that fully open graph."""
    module, ba = optimized_case(name)
    html_text = to_html(module, ba)
    graph = page_graph(html_text)
    page = write(tmp_path, f"{name}.html", html_text)
    attrs, dom = load(page, tmp_path, "open=all&check", shot=f"corpus_{name}_open")
    assert "data-errors" not in attrs
    assert int(attrs["data-nodes"]) == len(graph["nodes"]) == int(attrs["data-drawn-nodes"])
    assert int(attrs["data-open-clusters"]) == len(graph["clusters"])
    assert int(attrs["data-buffers"]) == html_text.count('<rect class="buf ') > 0
    assert re.search(r'<svg id="graph"[^>]*viewBox="[-\d.]+ [-\d.]+ [\d.]+ [\d.]+"', dom)
    assert '<svg class="timeline"' in dom
    assert_legible(attrs)
    if name != "reductions":  # while / conditional: called computations drawn as clusters
        assert any(c["k"] == "computation" for c in graph["clusters"])
        assert dom.count('class="cluster open computation"') == sum(
            1 for c in graph["clusters"] if c["k"] == "computation")


@requires_browser
def test_harness_catches_js_errors(tmp_path: Path) -> None:
    from tests.viz.test_dot import SIMPLE_HLO
    from xlc.hlo.parser import parse_module

    html_text = to_html(parse_module(SIMPLE_HLO)).replace(
        "frame(0.7);", "frame(0.7); noSuchFunction();")
    page = write(tmp_path, "broken.html", html_text)
    dom = dump_dom(page, tmp_path)
    attrs = body_attrs(dom)
    assert attrs.get("data-rendered") == "pending"
    assert attrs.get("data-errors") == "1"
    assert re.search(r'class="js-error">JS error: ReferenceError: noSuchFunction', dom)
