"""The page's JavaScript layout (run in headless Chromium on random DAGs), repeated-layer
detection, and the timeline's live-bytes curve."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.viz.browser import load, requires_browser
from tests.viz.helpers import write
from xlc.viz.layout import LAYOUT_JS
from xlc.viz.repeats import Repeat, find_repeats
from xlc.viz.timeline import BufferRect, byte_ticks, live_bytes, mark_shared_steps

# Runs XlcLayout.layered on seeded random DAGs (and a 3000-item chain with skips) and writes
# the number of violations into <body>: boxes overlapping, outside the bounding box, edges
# not pointing right, paths not starting/ending on their boxes.
_CHECK_PAGE = """<!DOCTYPE html><html><body data-rendered="pending"><script>
@LAYOUT@
(function () {
  var seed = 1, bad = [], cases = @CASES@;
  function rnd() { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; }
  function no(msg) { bad.push(msg); }
  cases.forEach(function (c) {
    var ids = [], sizes = {}, edges = [], i, box = {}, act = [];
    for (i = 0; i < c.n; i++) {
      ids.push('v' + i); sizes['v' + i] = [10 + rnd() * 110, 20 + rnd() * 40];
    }
    for (i = 0; i < c.m; i++) {
      var a = Math.floor(rnd() * c.n);
      var b = c.chain ? Math.min(c.n - 1, a + 1 + Math.floor(rnd() * 12))
                      : Math.floor(rnd() * c.n);
      edges.push(['v' + Math.min(a, b), 'v' + Math.max(a, b)]);
    }
    edges.push(['v0', 'nope']);
    var L = XlcLayout.layered(ids, sizes, edges);
    ids.forEach(function (v) {
      var p = L.pos[v], q = [p[0], p[1], p[0] + sizes[v][0], p[1] + sizes[v][1]];
      box[v] = q;
      if (q[0] < -1e-6 || q[1] < -1e-6 || q[2] > L.width + 1e-6 ||
          q[3] > L.height + 1e-6) { no('outside ' + v); }
    });
    ids.slice().sort(function (x, y) { return box[x][0] - box[y][0]; }).forEach(function (v) {
      act = act.filter(function (u) { return box[u][2] > box[v][0] + 1e-6; });
      act.forEach(function (u) {
        if (box[u][1] < box[v][3] - 1e-6 && box[v][1] < box[u][3] - 1e-6) {
          no('overlap ' + u + ' ' + v);
        }
      });
      act.push(v);
    });
    L.edges.forEach(function (e, k) {
      var s = box[e[0]], d = box[e[1]], pts = L.paths[k], f = pts[0], l = pts[pts.length - 1];
      if (s[2] > d[0] + 1e-6) { no('edge ' + e); }
      if (Math.abs(f[0] - s[2]) > 1e-6 || Math.abs(l[0] - d[0]) > 1e-6) { no('path ' + e); }
      if (e[1] === 'nope' || e[0] === e[1]) { no('kept ' + e); }
    });
  });
  document.body.setAttribute('data-violations', String(bad.length));
  document.body.setAttribute('data-first', bad.slice(0, 3).join(';'));
  document.body.setAttribute('data-rendered', 'ok');
})();
</script></body></html>"""


@requires_browser
def test_js_layout_on_random_dags(tmp_path: Path) -> None:
    cases = [{"n": 1 + (k * 7) % 23, "m": (k * 13) % 60, "chain": False} for k in range(60)]
    cases.append({"n": 3000, "m": 6000, "chain": True})
    text = _CHECK_PAGE.replace("@LAYOUT@", LAYOUT_JS).replace("@CASES@", json.dumps(cases))
    attrs, _ = load(write(tmp_path, "layout.html", text), tmp_path)
    assert attrs["data-violations"] == "0", attrs["data-first"]


def test_repeats_found_back_to_back() -> None:
    seq = list("xy") + list("abcabcabcabc") + list("zz")
    assert find_repeats(seq) == [Repeat(2, 3, 4)]
    assert find_repeats(list("abcabd")) == []  # coverage below 8
    assert find_repeats(list("ab") * 5) == [Repeat(0, 2, 5)]  # the shortest period wins
    # two separate repeats; a copy is never split
    got = find_repeats(list("pqrspqrs") + ["-"] + list("uvwuvwuvw"))
    assert got == [Repeat(0, 4, 2), Repeat(9, 3, 3)]
    for r in got:
        assert r.end <= 18


@pytest.mark.parametrize("n", [0, 1, 3])
def test_repeats_of_short_sequences(n: int) -> None:
    assert find_repeats(["a"] * n) == []


def rect(offset: int, size: int, start: int, end: int) -> BufferRect:
    return BufferRect("b", "n0", "f32[1]", "op", offset, size, start, end, ["b"])


def test_live_bytes_counts_a_shared_chunk_once() -> None:
    rects = [rect(0, 64, 0, 2), rect(0, 64, 2, 4), rect(64, 32, 1, 1)]
    assert live_bytes(rects, 5) == [64, 96, 64, 64, 64, 0]


def test_shared_step_is_split_between_the_two_buffers() -> None:
    a, b, c = rect(0, 64, 0, 2), rect(0, 64, 2, 4), rect(64, 32, 2, 3)
    mark_shared_steps([a, b, c])
    assert a.shares_end and b.shares_start
    assert not (a.shares_start or b.shares_end or c.shares_start or c.shares_end)


def test_byte_ticks_are_powers_of_two() -> None:
    assert byte_ticks(1040) == [0, 256, 512, 768, 1024]
    assert byte_ticks(32768) == [0, 8192, 16384, 24576, 32768]
    assert byte_ticks(0) == [0]
