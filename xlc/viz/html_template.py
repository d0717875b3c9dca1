"""The CSS inlined into the page `xlc.viz.html.to_html` writes (no network, no CDN); the
script is `xlc.viz.html_script.SCRIPT_JS`, the layout `xlc.viz.layout.LAYOUT_JS`."""
from __future__ import annotations

CSS = """
:root { --ink:#1f2933; --muted:#6b7785; --line:#d9dee5; --bg:#f5f7fa; --card:#ffffff;
        --accent:#3a5bd9; --peak:#d62839; }
* { box-sizing: border-box; }
body { margin:0; font:13px/1.45 -apple-system,"Segoe UI",Helvetica,Arial,sans-serif;
       color:var(--ink); background:var(--bg); }
header { padding:18px 28px 8px; background:linear-gradient(120deg,#1e2a4a,#3a5bd9);
         color:#fff; }
header h1 { margin:0 0 2px; font-size:20px; font-weight:600; letter-spacing:.2px; }
header .sub { opacity:.8; font-size:12px; }
.stats { display:flex; flex-wrap:wrap; gap:10px; margin:14px 0 10px; }
.stat { background:rgba(255,255,255,.12); border:1px solid rgba(255,255,255,.22);
        border-radius:8px; padding:7px 13px; min-width:112px; }
.stat .k { font-size:10.5px; text-transform:uppercase; letter-spacing:.6px; opacity:.8; }
.stat .v { font-size:17px; font-weight:600; }
.stat.peak { background:#d62839; border-color:#ff9aa5; }
main { padding:14px 28px 30px; }
section { background:var(--card); border:1px solid var(--line); border-radius:10px;
          margin-bottom:18px; box-shadow:0 1px 3px rgba(16,24,40,.06); }
section > h2 { margin:0; padding:10px 16px; font-size:14px; border-bottom:1px solid var(--line);
               display:flex; align-items:center; gap:12px; }
section > h2 .hint { font-weight:400; color:var(--muted); font-size:12px; }
.toolbar { margin-left:auto; display:flex; gap:6px; }
.toolbar button { border:1px solid var(--line); background:#fff; border-radius:6px;
                  padding:2px 10px; cursor:pointer; font-size:13px; }
.toolbar button:hover { background:#eef2ff; }
#graph-view { height:68vh; min-height:420px; overflow:hidden; cursor:grab; background:
  radial-gradient(circle,#e3e7ee 1px,transparent 1px) 0 0/18px 18px; }
#graph-view.dragging { cursor:grabbing; }
#graph { width:100%; height:100%; display:block; user-select:none; }
.node rect { stroke-width:1.2; }
.node text, .cluster text { font-size:11px; fill:var(--ink); }
.panel-title { font-size:12px; font-weight:700; fill:var(--ink); }
.node text.op { font-weight:600; }
.node text.dim, .cluster text.dim { fill:var(--muted); }
.node.k-input rect { fill:#d8f3dc; stroke:#2d6a4f; }
.node.k-parameter rect { fill:#edf6f0; stroke:#52796f; }
.node.k-output rect { fill:#ffd6d6; stroke:#b23a48; stroke-width:2.4; }
.node.k-root rect { fill:#ffe8d6; stroke:#b5651d; }
.node.k-constant rect { fill:#f1f1f1; stroke:#888; }
.node.k-plumbing rect { fill:#f8f9fa; stroke:#adb5bd; }
.node.k-control rect { fill:#e0d7ff; stroke:#5a4fcf; }
.node.k-heavy rect { fill:#cfe2ff; stroke:#1d4ed8; }
.node.k-op rect { fill:#fff; stroke:#495057; }
.node:hover rect, .cluster.closed:hover rect, .cluster .head:hover { filter:brightness(.93); }
.cluster text.title { font-weight:600; }
.cluster.closed { cursor:pointer; }
.cluster.closed rect { stroke-width:1.4; }
.cluster.closed.fusion rect { fill:#fff2c6; stroke:#d4a017; }
.cluster.closed.computation rect { fill:#eeeaff; stroke:#5a4fcf; stroke-dasharray:5 3; }
.cluster.closed.layer rect { fill:#dff4f1; stroke:#2a8f73; stroke-width:2; }
.cluster.closed rect + text + text + text { fill:var(--accent); }
.cluster.open > rect.frame { fill:#fffaf0; stroke:#d4a017; stroke-width:1.3; }
.cluster.open.computation > rect.frame { fill:#fbfbff; stroke:#5a4fcf; stroke-dasharray:5 3; }
.cluster.open.layer > rect.frame { fill:#f4fbfa; stroke:#2a8f73; stroke-width:1.6; }
.cluster.open > rect.head { fill:rgba(0,0,0,.035); stroke:none; cursor:pointer; }
.cluster.open text.title { cursor:pointer; }
.node.hl rect, .cluster.hl > rect { stroke:var(--peak) !important; stroke-width:3.5 !important; }
.match > rect:first-child { stroke:#f59f00 !important; stroke-width:3 !important; }
.has-match > rect:first-child { stroke:#f59f00 !important; stroke-width:3 !important;
                                stroke-dasharray:4 2; }
.current > rect:first-child { stroke:var(--peak) !important; stroke-width:4 !important; }
.edge { fill:none; stroke:#8792a2; stroke-width:1.3; }
.edge.control { stroke-dasharray:2 3; }
.edge.call { stroke:#5a4fcf; stroke-dasharray:6 4; opacity:.6; }
.edge-label { font-size:9.5px; fill:var(--muted); }
#search { border:1px solid var(--line); border-radius:6px; padding:3px 8px; width:260px;
          font-size:12.5px; }
#hits { color:var(--muted); font-size:12px; font-weight:400; min-width:90px; }
.memory { padding:10px 16px 4px; }
.memory p { margin:4px 0 8px; color:var(--ink); }
.membar { display:flex; height:26px; border-radius:6px; overflow:hidden;
          border:1px solid var(--line); max-width:1180px; position:relative; }
.membar div { height:100%; font-size:11px; color:#fff; padding:5px 6px; white-space:nowrap;
              overflow:hidden; }
.membar .seg-parameters { background:#52796f; }
.membar .seg-outputs { background:#b23a48; }
.membar .seg-temp { background:#d4a017; position:relative; }
.membar .live-mark { position:absolute; top:0; bottom:0; width:0;
                     border-left:2px dashed var(--peak); padding:0; }
.timeline-wrap { padding:8px 16px 14px; overflow-x:auto; }
.timeline-wrap h3 { margin:10px 0 2px; font-size:13px; }
.legend { display:flex; flex-wrap:wrap; gap:14px; padding:10px 16px 0; color:var(--muted); }
.legend span.sw { display:inline-block; width:12px; height:12px; border-radius:3px;
                  margin-right:5px; vertical-align:-2px; border:1px solid rgba(0,0,0,.25); }
svg.timeline .plot-bg { fill:#fafbfc; stroke:var(--line); }
svg.timeline .grid { stroke:#e8ebf0; }
svg.timeline .axis, svg.timeline .tick { font-size:10px; fill:var(--muted); }
svg.timeline .buf { stroke-width:1; fill-opacity:.88; cursor:pointer; }
svg.timeline .buf:hover { fill-opacity:1; stroke-width:2.2; }
svg.timeline .buf-label { font-size:10px; fill:#1f2933; pointer-events:none; }
svg.timeline .live-curve { fill:rgba(58,91,217,.18); stroke:var(--accent); stroke-width:1.2; }
svg.timeline .peak-line { stroke:var(--peak); stroke-width:1.6; stroke-dasharray:5 3; }
svg.timeline .peak-label { fill:var(--peak); font-size:11.5px; font-weight:600; }
svg.timeline .heap-top { stroke:#111; stroke-width:1; stroke-dasharray:1 2; }
.note { padding:14px 16px; color:var(--muted); }
details.allocs { padding:4px 16px 14px; }
details.allocs summary { cursor:pointer; color:var(--accent); font-weight:600; padding:4px 0; }
details.allocs table { border-collapse:collapse; margin-top:6px; font-size:12px; }
details.allocs th, details.allocs td { padding:3px 12px 3px 0; text-align:left;
                                       border-bottom:1px solid #eef0f3; }
details.allocs td.num { text-align:right; font-variant-numeric:tabular-nums; }
details.allocs td.names { color:var(--muted); font-family:ui-monospace,Menlo,monospace; }
details.allocs tr.k-temp td:nth-child(2) { color:#b7860b; font-weight:600; }
#tooltip { position:fixed; pointer-events:none; background:#111827; color:#f9fafb;
           padding:7px 10px; border-radius:6px; font:11.5px/1.45 ui-monospace,Menlo,monospace;
           white-space:pre; max-width:560px; box-shadow:0 4px 14px rgba(0,0,0,.25);
           display:none; z-index:10; }
#errors { color:#b00020; padding:0 28px; font-family:monospace; }
footer { color:var(--muted); padding:0 28px 20px; font-size:11px; }
"""
