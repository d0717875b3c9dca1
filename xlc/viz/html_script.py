"""The JavaScript of the page `xlc.viz.html.to_html` writes (no network, no library).

It reads the graph from `<script type="application/json" id="graph-data">` (nodes, clusters,
edges; see `xlc.viz.html.graph_json`) and draws it into `<svg id="graph">`:
- every cluster (fusion, while/conditional body, repeated layer) starts closed: one box in its
  parent's layout; a click opens it (its members laid out inside a frame), a click on an open
  frame's header closes it; "open all" / "close all" buttons;
- layout: `XlcLayout.layered` (`xlc.viz.layout`), per open group, bottom-up; box widths come
  from the measured label text, so labels fit;
- search box: matches name, opcode, op_name and `file.py:line` of every node and cluster
  (also inside closed clusters); Enter goes to the next match, opening what hides it;
- hover cards (`data-id` -> the item's details), pan (drag) and zoom (wheel, buttons);
- clicking a timeline buffer opens and centres its instruction;
- test hooks: `window.xlcViz` (`open`, `closeAll`, `search`, `check`), and the URL hash
  `#open=all|id,id&search=text&check` runs those on load; `check` writes the number of drawn
  boxes, overlapping boxes and labels sticking out of their box into `body` attributes.
Errors go to `#errors` and `body[data-errors]`; `body[data-rendered="ok"]` marks success.
"""
from __future__ import annotations

SCRIPT_JS = r"""
(function () {
  'use strict';
  var errors = [];
  function report(msg) {
    errors.push(String(msg));
    document.body.setAttribute('data-errors', String(errors.length));
    var box = document.getElementById('errors');
    if (box) { var d = document.createElement('div'); d.className = 'js-error';
               d.textContent = 'JS error: ' + msg; box.appendChild(d); }
  }
  window.addEventListener('error', function (e) { report(e.message || e); });
  var body = document.body;
  function setAttr(k, v) { body.setAttribute('data-' + k, String(v)); }
  try {
    var LINE_H = 14, PADX = 9, PAD = 12, HEAD = 38, TOP = 26;
    var data = JSON.parse(document.getElementById('graph-data').textContent);
    var view = document.getElementById('graph-view'), svg = document.getElementById('graph');
    var items = {}, members = { '': [] }, order = [];
    data.nodes.forEach(function (n) { n.c = false; items[n.id] = n; });
    data.clusters.forEach(function (c) { c.c = true; items[c.id] = c; members[c.id] = []; });
    data.nodes.concat(data.clusters).forEach(function (it) {
      members[it.p === null ? '' : it.p].push(it.id); order.push(it.id);
    });
    function ancestors(id) {  // [parent, grandparent, ...] (cluster ids)
      var out = [], cur = items[id].p;
      while (cur !== null) { out.push(cur); cur = items[cur].p; }
      return out;
    }
    // every edge is drawn in one group: the innermost cluster holding both ends
    var groupEdges = {};
    (function () {
      var seen = {};
      data.edges.forEach(function (e) {
        var a = [e[0]].concat(ancestors(e[0])), b = [e[1]].concat(ancestors(e[1]));
        var posB = {};
        b.forEach(function (x, i) { posB[x] = i; });
        var g = '', s = a[a.length - 1], d = b[b.length - 1];
        for (var i = 1; i < a.length; i++) {
          if (a[i] in posB) { g = a[i]; s = a[i - 1]; d = b[posB[a[i]] - 1]; break; }
        }
        var key = g + '|' + s + '|' + d;
        if (s === d || seen[key]) { return; }
        seen[key] = 1;
        (groupEdges[g] = groupEdges[g] || []).push({ s: s, d: d, label: e[2], style: e[3] });
      });
    })();

    var open = {};
    var ctx = document.createElement('canvas').getContext('2d');
    var family = getComputedStyle(svg).fontFamily || 'sans-serif';
    function textW(s, bold) {
      ctx.font = (bold ? '600 ' : '') + '11px ' + family;
      return ctx.measureText(s).width;
    }
    function closedLines(c) {
      return [c.l[0], c.l[1], '\u25B8 ' + c.n + ' inside \u00B7 click to open'];
    }
    function labelSize(lines, boldRow) {
      var w = 0;
      for (var i = 0; i < lines.length; i++) { w = Math.max(w, textW(lines[i], i === boldRow)); }
      return [Math.ceil(w) + 2 * PADX + 4, lines.length * LINE_H + 10];
    }
    var groups = {};
    function boxSize(id) {
      var it = items[id];
      if (!it.c) { return it.size || (it.size = labelSize(it.l, 1)); }
      if (!open[id]) { return it.csize || (it.csize = labelSize(closedLines(it), 0)); }
      var inner = layGroup(id);
      var head = Math.max(textW('\u25BE ' + it.l[0], true), textW(it.l[1], false));
      return [Math.max(inner[0] + 2 * PAD, Math.ceil(head) + 2 * PAD + 4),
              inner[1] + HEAD + PAD];
    }
    function layGroup(g) {
      var ids = members[g], sizes = {}, edges = groupEdges[g] || [], style = {};
      ids.forEach(function (id) { sizes[id] = boxSize(id); });
      var lay = XlcLayout.layered(ids, sizes, edges.map(function (e) {
        var k = e.s + '>' + e.d;
        if (!(k in style)) { style[k] = e; }
        return [e.s, e.d];
      }));
      groups[g] = { lay: lay, sizes: sizes, style: style };
      return [lay.width, lay.height];
    }

    var esc = function (s) {
      return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
        .replace(/"/g, '&quot;');
    };
    var out, where;
    function textRows(lines, x, y, boldRow, cls) {
      var s = '';
      for (var i = 0; i < lines.length; i++) {
        var c = i === boldRow ? 'op' : (i === 0 ? 'name' : 'dim');
        s += '<text class="' + (cls && i === 0 ? cls : c) + '" x="' + (x + PADX).toFixed(1) +
             '" y="' + (y + 17 + i * LINE_H).toFixed(1) + '">' + esc(lines[i]) + '</text>';
      }
      return s;
    }
    function drawGroup(g, ox, oy) {
      var G = groups[g], lay = G.lay;
      for (var k = 0; k < lay.edges.length; k++) {
        var e = G.style[lay.edges[k][0] + '>' + lay.edges[k][1]], pts = lay.paths[k];
        out.push('<path class="edge ' + e.style + '" d="' + XlcLayout.path(pts, ox, oy) +
                 '" marker-end="url(#arrow)"/>');
        if (e.label) {
          var p = pts[pts.length - 1];
          out.push('<text class="edge-label" x="' + (p[0] + ox - 4).toFixed(1) + '" y="' +
                   (p[1] + oy - 4).toFixed(1) + '" text-anchor="end">' + esc(e.label) +
                   '</text>');
        }
      }
      members[g].forEach(function (id) {
        var it = items[id], x = lay.pos[id][0] + ox, y = lay.pos[id][1] + oy;
        var w = G.sizes[id][0], h = G.sizes[id][1];
        where[id] = [x, y, w, h];
        var rect = '<rect data-box="' + id + '" x="' + x.toFixed(1) + '" y="' + y.toFixed(1) +
                   '" width="' + w.toFixed(1) + '" height="' + h.toFixed(1) + '" rx="';
        if (!it.c) {
          out.push('<g class="node k-' + it.k + '" id="' + id + '" data-id="' + id + '">' +
                   rect + '5"/>' + textRows(it.l, x, y, 1) + '</g>');
        } else if (!open[id]) {
          out.push('<g class="cluster closed ' + it.k + '" id="' + id + '" data-id="' + id +
                   '" data-toggle="' + id + '">' + rect + '7"/>' +
                   textRows(closedLines(it), x, y, -1, 'title') + '</g>');
        } else {
          out.push('<g class="cluster open ' + it.k + '" id="' + id + '" data-id="' + id +
                   '">' + rect.replace('<rect ', '<rect class="frame" ') + '9"/>' +
                   '<rect class="head" data-toggle="' + id + '" x="' + x.toFixed(1) +
                   '" y="' + y.toFixed(1) + '" width="' + w.toFixed(1) + '" height="' +
                   (HEAD - 6) + '" rx="9"/>' +
                   '<text class="title" data-toggle="' + id + '" x="' + (x + PAD).toFixed(1) +
                   '" y="' + (y + 15).toFixed(1) + '">' + esc('\u25BE ' + it.l[0]) + '</text>' +
                   '<text class="dim" x="' + (x + PAD).toFixed(1) + '" y="' +
                   (y + 28).toFixed(1) + '">' + esc(it.l[1]) + '</text></g>');
          drawGroup(id, x + PAD, y + HEAD);
        }
      });
    }
    var full = [1, 1], vb = { x: 0, y: 0, w: 1, h: 1 }, lastMs = 0;
    function render() {
      var t0 = performance.now();
      groups = {}; out = []; where = {};
      var size = layGroup('');
      out.push('<text class="panel-title" x="0" y="14">' + esc(data.title) + '</text>');
      drawGroup('', 0, TOP);
      full = [Math.max(size[0], 1), Math.max(size[1] + TOP, 1)];
      var defs = svg.querySelector('defs').outerHTML;
      svg.innerHTML = defs + out.join('');
      lastMs = performance.now() - t0;
      var nOpen = 0;
      for (var k in open) { if (open[k]) { nOpen++; } }
      setAttr('drawn-nodes', svg.querySelectorAll('g.node').length);
      setAttr('drawn-clusters', svg.querySelectorAll('g.cluster').length);
      setAttr('open-clusters', nOpen);
      setAttr('layout-ms', Math.round(lastMs));
      mark();
    }
    function apply() { svg.setAttribute('viewBox', vb.x + ' ' + vb.y + ' ' + vb.w + ' ' + vb.h); }
    function frame(minScale) {
      // the whole graph when it fits at `minScale` or more; else its left end at minScale
      var r = view.getBoundingClientRect();
      var s = Math.min(r.width / (full[0] + 40), r.height / (full[1] + 40));
      if (minScale !== undefined) { s = Math.max(s, Math.min(minScale, 1.0)); }
      var w = r.width / s, h = r.height / s;
      vb = { x: w > full[0] + 40 ? (full[0] - w) / 2 : -20,
             y: h > full[1] + 40 ? (full[1] - h) / 2 : -20, w: w, h: h };
      apply();
    }
    function zoom(f, cx, cy) {
      var r = view.getBoundingClientRect();
      var px = cx === undefined ? 0.5 : (cx - r.left) / r.width;
      var py = cy === undefined ? 0.5 : (cy - r.top) / r.height;
      var nw = vb.w * f, nh = vb.h * f;
      vb.x += (vb.w - nw) * px; vb.y += (vb.h - nh) * py; vb.w = nw; vb.h = nh; apply();
    }
    function centre(id, minScale) {
      var b = where[id];
      if (!b) { return; }
      var r = view.getBoundingClientRect(), s = r.width / vb.w;
      if (minScale && s < minScale) { vb.w = r.width / minScale; vb.h = r.height / minScale; }
      vb.x = b[0] + b[2] / 2 - vb.w / 2; vb.y = b[1] + b[3] / 2 - vb.h / 2; apply();
    }
    function toggle(id, state) {
      var before = where[id];
      open[id] = state === undefined ? !open[id] : state;
      render();
      var after = where[id];
      if (before && after) { vb.x += after[0] - before[0]; vb.y += after[1] - before[1]; apply(); }
    }
    function setAll(state) {
      data.clusters.forEach(function (c) { open[c.id] = state; });
      render(); frame(0.7);
    }
    function reveal(id) {
      var up = ancestors(id), changed = false;
      up.forEach(function (c) { if (!open[c]) { open[c] = true; changed = true; } });
      if (changed) { render(); }
      return !!where[id];
    }
    function focus(id) {
      if (!items[id] || !reveal(id)) { return; }
      var olds = svg.querySelectorAll('.hl');
      for (var i = 0; i < olds.length; i++) { olds[i].classList.remove('hl'); }
      var el = document.getElementById(id);
      if (el) { el.classList.add('hl'); }
      centre(id, 0.8);
    }

    // ---- search ----------------------------------------------------------------------------
    var search = document.getElementById('search'), hitsEl = document.getElementById('hits');
    var matches = [], cur = -1;
    function runSearch(q) {
      q = q.trim().toLowerCase(); cur = -1;
      matches = !q ? [] : order.filter(function (id) { return items[id].s.indexOf(q) >= 0; });
      matches.sort(function (a, b) { return ancestors(a).length - ancestors(b).length; });
      hitsEl.textContent = !q ? '' : matches.length ? matches.length + ' found \u00B7 Enter: next'
        : 'no match';
      setAttr('search-hits', matches.length);
      mark();
      return matches.length;
    }
    function next(step) {
      if (!matches.length) { return null; }
      cur = (cur + step + matches.length) % matches.length;
      focus(matches[cur]);
      hitsEl.textContent = (cur + 1) + ' of ' + matches.length;
      setAttr('search-current', matches[cur]);
      mark();
      return matches[cur];
    }
    function mark() {
      var olds = svg.querySelectorAll('.match, .has-match, .current');
      for (var i = 0; i < olds.length; i++) {
        olds[i].classList.remove('match', 'has-match', 'current');
      }
      matches.forEach(function (id, k) {
        var el = document.getElementById(id);
        if (el) {
          el.classList.add('match');
          if (k === cur) { el.classList.add('current'); }
          return;
        }
        var up = ancestors(id);
        for (var j = up.length - 1; j >= 0; j--) {
          if (!open[up[j]]) {
            var c = document.getElementById(up[j]);
            if (c) { c.classList.add('has-match'); }
            return;
          }
        }
      });
    }
    search.addEventListener('input', function () { runSearch(search.value); });
    search.addEventListener('keydown', function (e) {
      if (e.key === 'Enter') { e.preventDefault(); next(e.shiftKey ? -1 : 1); }
    });

    // ---- mouse -----------------------------------------------------------------------------
    view.addEventListener('wheel', function (e) {
      e.preventDefault(); zoom(e.deltaY > 0 ? 1.15 : 1 / 1.15, e.clientX, e.clientY);
    }, { passive: false });
    var drag = null, moved = false;
    view.addEventListener('mousedown', function (e) {
      drag = { x: e.clientX, y: e.clientY, vx: vb.x, vy: vb.y }; moved = false;
      view.classList.add('dragging');
    });
    window.addEventListener('mousemove', function (e) {
      if (!drag) { return; }
      if (Math.abs(e.clientX - drag.x) + Math.abs(e.clientY - drag.y) > 4) { moved = true; }
      var r = view.getBoundingClientRect();
      vb.x = drag.vx - (e.clientX - drag.x) * vb.w / r.width;
      vb.y = drag.vy - (e.clientY - drag.y) * vb.h / r.height; apply();
    });
    window.addEventListener('mouseup', function () {
      drag = null; view.classList.remove('dragging');
    });
    svg.addEventListener('click', function (e) {
      var t = e.target.closest ? e.target.closest('[data-toggle]') : null;
      if (t && !moved) { toggle(t.getAttribute('data-toggle')); }
    });
    document.getElementById('zoom-in').onclick = function () { zoom(1 / 1.3); };
    document.getElementById('zoom-out').onclick = function () { zoom(1.3); };
    document.getElementById('zoom-fit').onclick = function () { frame(); };
    document.getElementById('open-all').onclick = function () { setAll(true); };
    document.getElementById('close-all').onclick = function () { setAll(false); };

    var tip = document.getElementById('tooltip');
    document.addEventListener('mouseover', function (e) {
      var t = e.target.closest ? e.target.closest('[data-id], [data-tip]') : null;
      if (!t) { tip.style.display = 'none'; return; }
      var id = t.getAttribute('data-id');
      tip.textContent = id ? items[id].t : t.getAttribute('data-tip');
      tip.style.display = 'block';
    });
    document.addEventListener('mousemove', function (e) {
      if (tip.style.display !== 'block') { return; }
      var x = e.clientX + 14, y = e.clientY + 14;
      if (x + tip.offsetWidth > window.innerWidth - 8) { x = e.clientX - tip.offsetWidth - 14; }
      if (y + tip.offsetHeight > window.innerHeight - 8) { y = e.clientY - tip.offsetHeight - 14; }
      tip.style.left = x + 'px'; tip.style.top = y + 'px';
    });
    var bufs = document.querySelectorAll('svg.timeline .buf');
    for (var i = 0; i < bufs.length; i++) {
      bufs[i].addEventListener('click', function (e) {
        focus(e.currentTarget.getAttribute('data-inst'));
        view.scrollIntoView({ block: 'center' });
      });
    }

    // ---- checks (tests) --------------------------------------------------------------------
    function related(a, b) {
      return ancestors(b).indexOf(a) >= 0 || ancestors(a).indexOf(b) >= 0;
    }
    function check() {
      var rects = svg.querySelectorAll('rect[data-box]'), boxes = [], overflow = [], k;
      for (k = 0; k < rects.length; k++) {
        var r = rects[k], b = r.getBBox();
        var box = { id: r.getAttribute('data-box'), x0: b.x, y0: b.y, x1: b.x + b.width,
                    y1: b.y + b.height };
        boxes.push(box);
        var texts = r.parentNode.querySelectorAll('text');
        for (var j = 0; j < texts.length; j++) {
          var tb = texts[j].getBBox();
          if (tb.x < box.x0 + 2 || tb.x + tb.width > box.x1 - 2 || tb.y < box.y0 - 0.5 ||
              tb.y + tb.height > box.y1 + 0.5) { overflow.push(box.id); }
        }
      }
      boxes.sort(function (a, b) { return a.x0 - b.x0; });
      var active = [], overlaps = [];
      boxes.forEach(function (b) {
        active = active.filter(function (a) { return a.x1 > b.x0 + 0.5; });
        active.forEach(function (a) {
          if (a.y0 < b.y1 - 0.5 && b.y0 < a.y1 - 0.5 && !related(a.id, b.id)) {
            overlaps.push(a.id + '/' + b.id);
          }
        });
        active.push(b);
      });
      var res = { boxes: boxes.length, overlaps: overlaps.length, overflow: overflow.length,
                  overlapIds: overlaps.slice(0, 5).join(' '),
                  overflowIds: overflow.slice(0, 5).join(' ') };
      setAttr('check-boxes', res.boxes); setAttr('check-overlaps', res.overlaps);
      setAttr('check-overflow', res.overflow);
      if (overlaps.length) { setAttr('check-overlap-ids', res.overlapIds); }
      if (overflow.length) { setAttr('check-overflow-ids', res.overflowIds); }
      return res;
    }
    window.xlcViz = { open: function (id) { toggle(id, true); },
                      closeAll: function () { setAll(false); },
                      openAll: function () { setAll(true); }, search: runSearch, next: next,
                      focus: focus, check: check };

    render();
    frame(0.7);
    setAttr('nodes', data.nodes.length);
    setAttr('clusters', data.clusters.length);
    setAttr('buffers', bufs.length);
    var hash = {};
    location.hash.replace(/^#/, '').split('&').forEach(function (kv) {
      if (!kv) { return; }
      var at = kv.indexOf('=');
      hash[at < 0 ? kv : kv.slice(0, at)] = at < 0 ? '' : decodeURIComponent(kv.slice(at + 1));
    });
    if (hash.open === 'all') { setAll(true); }
    else if (hash.open) {
      hash.open.split(',').forEach(function (id) { if (items[id]) { toggle(id, true); } });
    }
    if (hash.search) { search.value = hash.search; runSearch(hash.search); next(1); }
    if ('check' in hash) { check(); }
  } catch (err) {
    report(err && err.stack ? err.stack : err);
  }
  if (!errors.length) { body.setAttribute('data-rendered', 'ok'); }
})();
"""
