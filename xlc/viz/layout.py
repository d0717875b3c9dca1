"""The graph layout the HTML page runs: a layered (Sugiyama-style) left-to-right DAG layout in
JavaScript, so that opening or closing a cluster re-lays the graph out in the browser.

`LAYOUT_JS` defines `XlcLayout.layered(ids, sizes, edges)`:
- ids: item ids; sizes: `{id: [width, height]}`; edges: `[[src, dst], ...]` (unknown endpoints,
  self loops and duplicates are dropped);
- returns `{pos: {id: [x, y]}, edges: [[src, dst]], paths: [[[x, y], ...]], width, height}`:
  top-left corners, the kept edges and one polyline per kept edge (from the source's right
  middle to the target's left middle), and the bounding box.

Steps: longest-path layering into columns (sources pulled right, next to their first user);
dummy points on edges spanning several columns (up to `LONG_SPAN`; longer ones are drawn
straight); barycenter sweeps to reduce crossings; then the position inside each column by
isotonic regression (each item as close as possible to the mean of its neighbours while keeping
the column's order and gaps). Items of one column never overlap and columns are disjoint, so
no two boxes overlap. Cost: O((n + dummies) log n) per sweep; 3000 items lay out in well under
a second in Chromium.

`XlcLayout.path(points, dx, dy)` is the SVG path `d` of a polyline with horizontal cubic
segments.
"""
from __future__ import annotations

COL_GAP = 56      # between columns: room for the edges
ROW_GAP = 14      # between boxes of one column
LONG_SPAN = 30    # edges spanning more columns get no dummy points

LAYOUT_JS = r"""
var XlcLayout = (function () {
  'use strict';
  var COL_GAP = @COL_GAP@, ROW_GAP = @ROW_GAP@, DUMMY = 6, LONG_SPAN = @LONG_SPAN@;
  var SWEEPS = 6, PLACE_ITERS = 8;

  function columns(n, succ, pred) {
    var indeg = new Int32Array(n), queue = [], head = 0, order = [], layer = new Int32Array(n);
    var v, i;
    for (v = 0; v < n; v++) { indeg[v] = pred[v].length; if (!indeg[v]) { queue.push(v); } }
    while (head < queue.length) {
      v = queue[head++]; order.push(v);
      for (i = 0; i < succ[v].length; i++) {
        if (--indeg[succ[v][i]] === 0) { queue.push(succ[v][i]); }
      }
    }
    if (order.length < n) {  // a cycle (never in HLO): keep going
      var seen = new Uint8Array(n);
      for (i = 0; i < order.length; i++) { seen[order[i]] = 1; }
      for (v = 0; v < n; v++) { if (!seen[v]) { order.push(v); } }
    }
    var done = new Uint8Array(n);
    for (i = 0; i < order.length; i++) {
      v = order[i];
      var l = 0;
      for (var k = 0; k < pred[v].length; k++) {
        var p = pred[v][k];
        if (done[p] && layer[p] + 1 > l) { l = layer[p] + 1; }
      }
      layer[v] = l; done[v] = 1;
    }
    for (i = order.length - 1; i >= 0; i--) {  // pull sources next to their first user
      v = order[i];
      if (!pred[v].length && succ[v].length) {
        var m = Infinity;
        for (k = 0; k < succ[v].length; k++) { m = Math.min(m, layer[succ[v][k]]); }
        layer[v] = Math.max(layer[v], m - 1);
      }
    }
    return layer;
  }

  function isotonic(t) {  // least-squares nondecreasing fit (pool adjacent violators)
    var mean = [], wt = [], out = new Float64Array(t.length), i, k = 0;
    for (i = 0; i < t.length; i++) {
      mean.push(t[i]); wt.push(1);
      while (mean.length > 1 && mean[mean.length - 2] > mean[mean.length - 1]) {
        var m2 = mean.pop(), w2 = wt.pop(), m1 = mean.pop(), w1 = wt.pop();
        mean.push((m1 * w1 + m2 * w2) / (w1 + w2)); wt.push(w1 + w2);
      }
    }
    for (i = 0; i < mean.length; i++) { for (var j = 0; j < wt[i]; j++) { out[k++] = mean[i]; } }
    return out;
  }

  function place(row, ext, desired, y) {  // centres closest to `desired`, order and gaps kept
    var acc = 0, off = new Float64Array(row.length), t = new Float64Array(row.length), i;
    for (i = 0; i < row.length; i++) {
      off[i] = acc + ext[row[i]] / 2; acc += ext[row[i]] + ROW_GAP;
      t[i] = desired[row[i]] - off[i];
    }
    var f = isotonic(t);
    for (i = 0; i < row.length; i++) { y[row[i]] = f[i] + off[i]; }
  }

  function layered(ids, sizes, edges) {
    var n = ids.length, index = {}, i, k, v, r;
    for (i = 0; i < n; i++) { index[ids[i]] = i; }
    var succ = [], pred = [], kept = [], seen = {};
    for (i = 0; i < n; i++) { succ.push([]); pred.push([]); }
    for (i = 0; i < edges.length; i++) {
      var s = index[edges[i][0]], d = index[edges[i][1]];
      if (s === undefined || d === undefined || s === d || seen[s + ',' + d]) { continue; }
      seen[s + ',' + d] = 1; kept.push([s, d]); succ[s].push(d); pred[d].push(s);
    }
    var layer = Array.prototype.slice.call(columns(n, succ, pred));
    var ncol = 0;
    for (v = 0; v < n; v++) { ncol = Math.max(ncol, layer[v] + 1); }
    var rows = [];
    for (r = 0; r < ncol; r++) { rows.push([]); }
    var ext = [], wid = [], up = [], down = [];
    for (v = 0; v < n; v++) {
      rows[layer[v]].push(v); wid.push(sizes[ids[v]][0]); ext.push(sizes[ids[v]][1]);
      up.push([]); down.push([]);
    }
    var chains = [];
    for (k = 0; k < kept.length; k++) {
      var a = kept[k][0], b = kept[k][1], lo = layer[a], hi = layer[b];
      if (hi < lo) { var tmp = lo; lo = hi; hi = tmp; }
      if (hi - lo > LONG_SPAN) { chains.push([a, b]); continue; }
      var chain = [a];
      for (var li = lo + 1; li < hi; li++) {
        var dm = ext.length;
        ext.push(DUMMY); wid.push(0); layer.push(li); up.push([]); down.push([]);
        rows[li].push(dm); chain.push(dm);
      }
      chain.push(b);
      for (i = 0; i + 1 < chain.length; i++) {
        down[chain[i]].push(chain[i + 1]); up[chain[i + 1]].push(chain[i]);
      }
      chains.push(chain);
    }
    var total = ext.length, rank = new Float64Array(total), key = new Float64Array(total);
    function setRanks(row) { for (var q = 0; q < row.length; q++) { rank[row[q]] = q; } }
    rows.forEach(setRanks);
    function byKey(x, y) { return key[x] - key[y] || rank[x] - rank[y]; }
    for (var it = 0; it < SWEEPS; it++) {
      var fwd = it % 2 === 0;
      for (r = fwd ? 1 : ncol - 2; fwd ? r < ncol : r >= 0; r += fwd ? 1 : -1) {
        var row = rows[r], want = fwd ? r - 1 : r + 1;
        for (i = 0; i < row.length; i++) {
          v = row[i];
          var nb = fwd ? up[v] : down[v], sum = 0, cnt = 0;
          for (k = 0; k < nb.length; k++) {
            if (layer[nb[k]] === want) { sum += rank[nb[k]]; cnt++; }
          }
          key[v] = cnt ? sum / cnt : rank[v];
        }
        row.sort(byKey); setRanks(row);
      }
    }
    var y = new Float64Array(total), desired = new Float64Array(total);
    rows.forEach(function (row) { place(row, ext, desired, y); });
    for (it = 0; it < PLACE_ITERS; it++) {
      for (var q = 0; q < ncol; q++) {
        r = it % 2 === 0 ? q : ncol - 1 - q;
        var rw = rows[r];
        for (i = 0; i < rw.length; i++) {
          v = rw[i];
          var nbs = up[v].concat(down[v]), acc = 0;
          for (k = 0; k < nbs.length; k++) { acc += y[nbs[k]]; }
          desired[v] = nbs.length ? acc / nbs.length : y[v];
        }
        place(rw, ext, desired, y);
      }
    }
    var colX = new Float64Array(ncol), colW = new Float64Array(ncol), x = 0;
    for (r = 0; r < ncol; r++) {
      for (i = 0; i < rows[r].length; i++) { colW[r] = Math.max(colW[r], wid[rows[r][i]]); }
      colX[r] = x; x += colW[r] + COL_GAP;
    }
    var top = Infinity, bottom = -Infinity;
    for (v = 0; v < total; v++) {
      top = Math.min(top, y[v] - ext[v] / 2); bottom = Math.max(bottom, y[v] + ext[v] / 2);
    }
    if (!total) { top = 0; bottom = 0; }
    var out = { pos: {}, edges: [], paths: [], width: Math.max(x - COL_GAP, 0),
                height: bottom - top };
    for (v = 0; v < n; v++) {
      r = layer[v];
      out.pos[ids[v]] = [colX[r] + (colW[r] - wid[v]) / 2, y[v] - ext[v] / 2 - top];
    }
    for (k = 0; k < chains.length; k++) {
      var c = chains[k], src = ids[c[0]], dst = ids[c[c.length - 1]];
      var ps = out.pos[src], pd = out.pos[dst], pts = [];
      pts.push([ps[0] + sizes[src][0], ps[1] + sizes[src][1] / 2]);
      for (i = 1; i + 1 < c.length; i++) {
        r = layer[c[i]];
        pts.push([colX[r], y[c[i]] - top]); pts.push([colX[r] + colW[r], y[c[i]] - top]);
      }
      pts.push([pd[0], pd[1] + sizes[dst][1] / 2]);
      out.edges.push([src, dst]); out.paths.push(pts);
    }
    return out;
  }

  function path(points, dx, dy) {
    if (!points.length) { return ''; }
    var d = 'M' + (points[0][0] + dx).toFixed(1) + ',' + (points[0][1] + dy).toFixed(1);
    for (var i = 1; i < points.length; i++) {
      var a = points[i - 1], b = points[i], mx = ((a[0] + b[0]) / 2 + dx).toFixed(1);
      d += ' C' + mx + ',' + (a[1] + dy).toFixed(1) + ' ' + mx + ',' + (b[1] + dy).toFixed(1) +
           ' ' + (b[0] + dx).toFixed(1) + ',' + (b[1] + dy).toFixed(1);
    }
    return d;
  }

  return { layered: layered, path: path, isotonic: isotonic };
})();
""".replace("@COL_GAP@", str(COL_GAP)).replace("@ROW_GAP@", str(ROW_GAP)).replace(
    "@LONG_SPAN@", str(LONG_SPAN))
