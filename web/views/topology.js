// Topology view: the fabric at one zoom level (GET /api/topology, already aggregated by the
// daemon), drawn on a canvas; breadcrumb zoom; the path-trace overlay (GET /api/trace).
import { tid, el, api, qs, bus, fillKv, fitCanvas, ramp, fmtPct, fmtNum, showApiError, showMessage } from '../lib.js';

const COL = { ok: '#3fb07a', warn: '#f5a524', bad: '#e5484d', edge: '#4b5a6b', trace: '#ff4fd8', label: '#c3ccd8' };
const st = {
  view: 'physical', path: [], data: null, edgeMode: 'state',
  placed: [], byId: new Map(), byChip: new Map(), cell: 0,
  selected: null, seq: 0, stale: false, visible: false,
  trace: null, tracePoints: [], traceMissing: 0,
};
let ctx, canvas, tooltip;

export function snapshot() {
  const d = st.data;
  return { view: st.view, path: st.path, group: d?.group, nodes: d?.nodes?.length ?? 0, edges: d?.edges?.length ?? 0,
    drawn: st.placed.length, cell: st.cell, readyMs: st.readyMs ?? null };
}
export function traceSnapshot() {
  const t = st.trace;
  if (!t) return null;
  return { src: t.src, dst: t.dst, reachable: t.reachable, failure: t.failure, reason: t.reason,
    hops: (t.hops || []).length, points: st.tracePoints.map(p => ({ x: Math.round(p.x * 10) / 10, y: Math.round(p.y * 10) / 10, id: p.id })),
    unmapped: st.traceMissing };
}

export function init(c) {
  ctx = c;
  canvas = tid('topology-canvas');
  tooltip = tid('topo-tooltip');
  for (const b of document.querySelectorAll('[data-testid="topo-view"] button')) {
    b.addEventListener('click', () => { if (st.view !== b.dataset.view) { st.view = b.dataset.view; st.path = []; load(); } });
  }
  tid('topo-edge-mode').addEventListener('change', (e) => { st.edgeMode = e.target.value; draw(); });
  tid('topo-refresh').addEventListener('click', () => load());
  tid('topo-discover').addEventListener('click', async () => {
    const b = tid('topo-discover');
    b.disabled = true;
    try {
      const r = await api('POST', '/api/discover', {});
      const n = (x) => (Array.isArray(x) ? x.length : Number(x) || 0);
      showMessage(`discovery: ${r.changed ? 'the fabric changed' : 'no change'} (${n(r.chips_gone)} chips gone, ${n(r.chips_new)} new, links ${r.links_delta >= 0 ? '+' : ''}${r.links_delta ?? 0})`, 'ok');
      document.body.dataset.discovered = String(n(r.chips_new) - n(r.chips_gone));
      load();
    } catch { /* shown by api() */ } finally { b.disabled = false; }
  });
  tid('trace-form').addEventListener('submit', (e) => { e.preventDefault(); runTrace(); });
  tid('trace-clear').addEventListener('click', () => { st.trace = null; renderHops(); draw(); delete document.body.dataset.traceDrawn; });
  canvas.addEventListener('mousemove', onMove);
  canvas.addEventListener('mouseleave', () => { tooltip.hidden = true; });
  canvas.addEventListener('click', onClick);
  window.addEventListener('keydown', (e) => {
    if (st.visible && e.key === 'Escape' && st.path.length && !/INPUT|SELECT/.test(document.activeElement?.tagName)) zoomTo(st.path.length - 1);
  });
  new ResizeObserver(() => { if (st.visible && st.data) draw(); }).observe(canvas.parentElement);
  // The picture changes with faults (links down): reload, debounced, when shown; else on show.
  let timer = null;
  bus.addEventListener('event', (e) => {
    if (e.detail.kind !== 'fault' && e.detail.kind !== 'alarm') return;
    if (!st.visible) { st.stale = true; return; }
    clearTimeout(timer);
    timer = setTimeout(() => load(), 1000);
  });
  load();
}

export function show() {
  st.visible = true;
  for (const b of document.querySelectorAll('[data-testid="topo-view"] button')) b.classList.toggle('active', b.dataset.view === st.view);
  if (st.stale) { st.stale = false; load(); } else if (st.data) draw();
}
export function hide() { st.visible = false; tooltip.hidden = true; }

function zoomTo(depth) { st.path = st.path.slice(0, depth); st.selected = null; load(); }

async function load() {
  const seq = ++st.seq;
  delete document.body.dataset.topologyReady;
  for (const b of document.querySelectorAll('[data-testid="topo-view"] button')) b.classList.toggle('active', b.dataset.view === st.view);
  let data;
  try {
    data = await api('GET', `/api/topology${qs({ view: st.view, path: st.path.join('/') })}`);
  } catch (e) {
    if (seq === st.seq && st.path.length) { st.path.pop(); }  // an unknown group: stay where we were
    return;
  }
  if (seq !== st.seq) return;
  st.data = data;
  renderCrumbs();
  renderSummary();
  draw();
}

function renderCrumbs() {
  const nav = tid('topo-breadcrumb');
  const parts = [el('a', { dataset: { depth: 0 }, 'data-testid': 'crumb-0', onclick: () => zoomTo(0) }, `fabric (${st.view})`)];
  const dp = st.data?.path || [];
  st.path.forEach((v, i) => {
    const label = dp[i]?.label ?? String(v);
    parts.push(el('span', { class: 'sep' }, '›'));
    parts.push(i === st.path.length - 1 ? el('span', { 'data-testid': `crumb-${i + 1}` }, label)
      : el('a', { 'data-testid': `crumb-${i + 1}`, onclick: () => zoomTo(i + 1) }, label));
  });
  const plural = { switch: 'switches', chassis: 'chassis' }[st.data?.group] ?? `${st.data?.group ?? ''}s`;
  parts.push(el('span', { class: 'sep' }, '›'), el('span', { class: 'muted' }, plural));
  nav.replaceChildren(...parts);
}

function renderSummary() {
  const d = st.data;
  let links = 0, down = 0, faults = 0, chips = 0;
  for (const n of d.nodes || []) { faults += n.faults || 0; chips += n.chips || 0; }
  for (const e of d.edges || []) { links += e.links || 0; down += e.links_down || 0; }
  fillKv(tid('topo-summary'), { view: d.view, group: d.group, nodes: (d.nodes || []).length, chips,
    edges: (d.edges || []).length, 'links between groups': links, 'links down (between)': down,
    outside_links: d.outside_links ?? 0, faults });
}

// ---- layout ---------------------------------------------------------------------------------
const numId = (x) => (x !== '' && x !== null && !Number.isNaN(Number(x)) ? Number(x) : null);
function cmpNode(a, b) {
  if (a.kind !== b.kind && a.kind && b.kind) return a.kind === 'nrc' ? -1 : 1;
  const x = numId(a.id), y = numId(b.id);
  if (x !== null && y !== null) return x - y;
  return String(a.id).localeCompare(String(b.id), undefined, { numeric: true });
}

// Groups of nodes (top to bottom) placed in rows of square cells of the largest size that fits.
function layout(d, w, h) {
  const nodes = d.nodes || [];
  const logical = d.view === 'logical' || d.group === 'level';
  let groups;
  if (logical) {
    const m = new Map();
    for (const n of nodes) { const l = n.level ?? 0; if (!m.has(l)) m.set(l, []); m.get(l).push(n); }
    groups = [...m.entries()].sort((a, b) => b[0] - a[0]).map(([, g]) => g.sort(cmpNode));
  } else groups = [nodes.slice().sort(cmpNode)];
  const pad = 14, W = Math.max(10, w - 2 * pad), H = Math.max(10, h - 2 * pad);
  const fits = (s) => { const cols = Math.max(1, Math.floor(W / s)); let rows = 0; for (const g of groups) rows += Math.ceil(g.length / cols); return rows * s <= H; };
  let lo = 1, hi = Math.max(2, Math.min(W, H));
  for (let i = 0; i < 30 && hi - lo > 0.25; i++) { const mid = (lo + hi) / 2; if (fits(mid)) lo = mid; else hi = mid; }
  const s = Math.min(lo, 160);
  const cols = Math.max(1, Math.floor(W / s));
  let rowsTotal = 0;
  for (const g of groups) rowsTotal += Math.ceil(g.length / cols);
  const gap = groups.length > 1 ? Math.min(s, (H - rowsTotal * s) / (groups.length - 1)) : 0;
  let y = pad + (H - rowsTotal * s - gap * (groups.length - 1)) / 2;
  const placed = [];
  for (const g of groups) {
    const rows = Math.ceil(g.length / cols);
    for (let r = 0; r < rows; r++) {
      const inRow = Math.min(cols, g.length - r * cols);
      const step = rows > 1 ? W / cols : W / inRow;
      const x0 = pad + (W - step * inRow) / 2;
      for (let c = 0; c < inRow; c++) {
        const node = g[r * cols + c];
        placed.push({ node, x: x0 + step * (c + 0.5), y: y + s * (r + 0.5) });
      }
    }
    y += rows * s + gap;
  }
  return { placed, cell: s };
}

// Links are drawn as slight arcs (always bulging the same way for a pair of nodes) so that a link
// between two nodes of a row does not hide behind the nodes between them; the trace follows them.
function curveTo(path, a, b) {
  const [p, q] = a.i < b.i ? [a, b] : [b, a];
  const dx = q.x - p.x, dy = q.y - p.y;
  path.quadraticCurveTo((p.x + q.x) / 2 - dy * 0.14, (p.y + q.y) / 2 + dx * 0.14, b.x, b.y);
}

// ---- drawing --------------------------------------------------------------------------------
const health = (n) => (n.faults > 0 || n.not_responding > 0 ? COL.bad : n.links_down > 0 ? COL.warn : COL.ok);
const isNic = (n) => n.kind === 'nic' || (!n.kind && n.nrcs === 0 && n.nics > 0);
function edgeStyle(e) {
  if (st.edgeMode === 'utilisation') return ramp(e.utilisation_max || 0);
  if (!e.links_down) return COL.edge;
  return e.links_down >= e.links ? COL.bad : COL.warn;
}

function draw() {
  const d = st.data;
  if (!d || !canvas.clientWidth) return;
  const f = fitCanvas(canvas);
  const g = f.ctx;
  const { placed, cell } = layout(d, f.w, f.h);
  st.placed = placed; st.cell = cell;
  st.byId = new Map(placed.map(p => [String(p.node.id), p]));
  st.byChip = new Map(placed.filter(p => p.node.chip !== undefined).map(p => [String(p.node.chip), p]));
  const r = Math.max(1.5, Math.min(22, cell * 0.3));
  placed.forEach((p, i) => { p.r = r; p.i = i; });

  // edges, batched by style; healthy ones first, the interesting ones on top
  const edges = d.edges || [];
  const thin = edges.length > 1500 ? 0.5 : edges.length > 300 ? 0.75 : 1;
  const buckets = new Map();
  for (const e of edges) {
    const a = st.byId.get(String(e.a)), b = st.byId.get(String(e.b));
    if (!a || !b || a === b) continue;
    const color = edgeStyle(e);
    const width = Math.round(Math.min(6, 0.7 + Math.log2(1 + (e.links || 1)) * 0.45) * thin * 2) / 2;
    const prio = st.edgeMode === 'utilisation' ? Math.round((e.utilisation_max || 0) * 10) : e.links_down ? 1 : 0;
    const key = `${prio}|${color}|${width}`;
    let bk = buckets.get(key);
    if (!bk) buckets.set(key, bk = { prio, color, width, path: new Path2D() });
    bk.path.moveTo(a.x, a.y); curveTo(bk.path, a, b);
  }
  const sorted = [...buckets.values()].sort((x, y) => x.prio - y.prio);
  g.lineCap = 'round';
  for (const bk of sorted) {
    g.globalAlpha = bk.prio === 0 && edges.length > 400 ? 0.45 : 0.9;
    g.strokeStyle = bk.color; g.lineWidth = bk.width; g.stroke(bk.path);
  }
  g.globalAlpha = 1;

  // nodes, batched by colour and shape
  const shapes = new Map();
  for (const p of placed) {
    const key = `${health(p.node)}|${isNic(p.node) ? 'c' : 's'}`;
    let path = shapes.get(key);
    if (!path) shapes.set(key, path = new Path2D());
    if (isNic(p.node)) { path.moveTo(p.x + r, p.y); path.arc(p.x, p.y, r, 0, Math.PI * 2); }
    else path.rect(p.x - r, p.y - r, 2 * r, 2 * r);
  }
  for (const [key, path] of shapes) { g.fillStyle = key.split('|')[0]; g.fill(path); }
  if (r > 4) { g.strokeStyle = '#0c1016'; g.lineWidth = 1; for (const path of shapes.values()) g.stroke(path); }
  if (st.selected) {
    const p = st.byId.get(st.selected);
    if (p) { g.strokeStyle = '#fff'; g.lineWidth = 2; g.strokeRect(p.x - r - 3, p.y - r - 3, 2 * r + 6, 2 * r + 6); }
  }

  // labels when there is room
  if (cell >= 34) {
    const fs = cell >= 70 ? 12 : 10;
    g.font = `${fs}px system-ui, sans-serif`; g.fillStyle = COL.label; g.textAlign = 'center'; g.textBaseline = 'top';
    for (const p of placed) {
      let t = String(p.node.label ?? p.node.id);
      if (g.measureText(t).width > cell - 4) t = String(p.node.id);  // "switch 512" -> "512"
      while (t.length > 3 && g.measureText(t).width > cell - 4) t = t.slice(0, -2) + '…';
      g.fillText(t, p.x, p.y + r + 2);
      if (cell >= 70 && p.node.chips !== undefined && d.group !== 'chip') {
        g.fillStyle = '#7d8a9b'; g.fillText(`${p.node.chips} chips`, p.x, p.y + r + 4 + fs); g.fillStyle = COL.label;
      }
    }
  }

  drawTrace(g, r);
  renderLegend();
  st.readyMs = performance.now();
  document.body.dataset.topologyReady = String(placed.length);
  if (st.trace) document.body.dataset.traceDrawn = String((st.trace.hops || []).length);
}

function renderLegend() {
  const items = [['ok', COL.ok], ['links down', COL.warn], ['faults', COL.bad]];
  const lg = tid('topo-legend');
  const parts = items.map(([t, c]) => [el('i', { style: `background:${c}` }), t]).flat();
  if (st.edgeMode === 'utilisation') parts.push(el('i', { style: `background:linear-gradient(90deg,${ramp(0)},${ramp(0.5)},${ramp(1)});width:60px` }), 'edge utilisation 0–100%');
  else parts.push(el('i', { style: `background:${COL.edge}` }), 'edge up', el('i', { style: `background:${COL.warn}` }), 'some down', el('i', { style: `background:${COL.bad}` }), 'all down');
  if (st.trace) parts.push(el('i', { style: `background:${COL.trace}` }), 'trace');
  lg.replaceChildren(...parts);
}

// ---- interaction ----------------------------------------------------------------------------
function hit(ev) {
  const rect = canvas.getBoundingClientRect();
  const x = ev.clientX - rect.left, y = ev.clientY - rect.top;
  let best = null, bd = Infinity;
  for (const p of st.placed) {
    const dd = (p.x - x) ** 2 + (p.y - y) ** 2;
    if (dd < bd) { bd = dd; best = p; }
  }
  const lim = Math.max(8, (best?.r || 0) + 5);
  return best && bd <= lim * lim ? { p: best, x, y } : null;
}

function describe(n) {
  const lines = [n.label ?? n.id];
  if (n.chip !== undefined) lines.push(`chip ${n.chip} (${n.kind ?? ''})`);
  if (n.chips !== undefined) lines.push(`chips ${n.chips}  (nics ${n.nics ?? 0}, nrcs ${n.nrcs ?? 0})`);
  if (n.level !== undefined) lines.push(`level ${n.level}`);
  lines.push(`links ${n.links ?? 0}, down ${n.links_down ?? 0}`);
  lines.push(`util max ${fmtPct(n.utilisation_max ?? 0)}, retrans/s ${fmtNum(n.retransmissions_per_s ?? 0)}`);
  lines.push(`faults ${n.faults ?? 0}${n.not_responding ? `, not responding ${n.not_responding}` : ''}`);
  return lines.join('\n');
}

function onMove(ev) {
  const h = hit(ev);
  canvas.style.cursor = h ? 'pointer' : 'default';
  if (!h) { tooltip.hidden = true; return; }
  tooltip.textContent = describe(h.p.node) + (st.data.group === 'chip' ? '\nclick: device view' : '\nclick: zoom in');
  tooltip.hidden = false;
  const wrap = canvas.parentElement;
  tooltip.style.left = `${Math.min(h.x + 14, wrap.clientWidth - tooltip.offsetWidth - 4)}px`;
  tooltip.style.top = `${Math.min(h.y + 14, wrap.clientHeight - tooltip.offsetHeight - 4)}px`;
  fillKv(tid('topo-node'), h.p.node);
  tid('topo-node').classList.remove('muted');
}

function onClick(ev) {
  const h = hit(ev);
  if (!h) return;
  const n = h.p.node;
  if (st.data.group === 'chip') { ctx.openDevice(n.chip ?? n.id); return; }
  st.path = [...st.path, String(n.id)];
  st.selected = null;
  tooltip.hidden = true;
  load();
}

// ---- path trace -----------------------------------------------------------------------------
// A hop's value for a grouping key: chip, level, or location.{cabinet, chassis, switch}
// (location may also come as text "cabinet 3/chassis 1/switch 12").
function hopValue(hop, key) {
  if (key === 'chip') return hop.chip;
  const loc = hop.location;
  if (key === 'level') return hop.level ?? (loc && typeof loc === 'object' ? loc.level : undefined);
  if (loc && typeof loc === 'object') return loc[key] ?? (key === 'switch' ? loc.switch_index : undefined);
  if (typeof loc === 'string') { const m = loc.match(new RegExp(`${key}\\s+(-?\\d+)`)); return m ? Number(m[1]) : undefined; }
  return undefined;
}

function tracePoints() {
  const d = st.data, t = st.trace;
  const pts = [];
  let missing = 0, gap = false;
  if (!d || !t) return { pts, missing };
  const hops = [...(t.hops || [])];
  // NIC ends, when the answer lists them apart from the hops, can be placed at chip level
  const ends = [t.src, t.dst].map(x => (x && typeof x === 'object' ? x : null));
  const list = [];
  if (ends[0] && ends[0].chip !== undefined && hops[0]?.chip !== ends[0].chip) list.push({ ...ends[0], end: true });
  list.push(...hops);
  if (t.reachable && ends[1] && ends[1].chip !== undefined && hops[hops.length - 1]?.chip !== ends[1].chip) list.push({ ...ends[1], end: true });
  for (const hop of list) {
    let p = null;
    if (d.group === 'chip') p = st.byChip.get(String(hop.chip)) || st.byId.get(String(hop.chip));
    else {
      const inside = (d.path || []).every(pe => { const v = hopValue(hop, pe.key); return v !== undefined && String(v) === String(pe.value); });
      const v = hopValue(hop, d.group);
      if (inside && v !== undefined && v !== null) p = st.byId.get(String(v));
    }
    if (!p) { if (!hop.end) missing++; gap = pts.length > 0; continue; }
    if (pts.length && pts[pts.length - 1].id === String(p.node.id)) { gap = false; continue; }
    pts.push({ x: p.x, y: p.y, id: String(p.node.id), i: p.i, outside: gap });  // outside: reached via hops not shown
    gap = false;
  }
  return { pts, missing };
}

function drawTrace(g, r) {
  const { pts, missing } = tracePoints();
  st.tracePoints = pts; st.traceMissing = missing;
  if (!pts.length) return;
  const color = st.trace.reachable ? COL.trace : COL.bad;
  g.lineJoin = 'round'; g.lineCap = 'round';
  for (const dashed of [false, true]) {
    g.beginPath();
    for (let i = 1; i < pts.length; i++) if (pts[i].outside === dashed) { g.moveTo(pts[i - 1].x, pts[i - 1].y); curveTo(g, pts[i - 1], pts[i]); }
    g.setLineDash(dashed ? [10, 8] : []);
    g.strokeStyle = '#000a'; g.lineWidth = 10; g.stroke();
    g.strokeStyle = color; g.lineWidth = 6; g.stroke();
  }
  g.setLineDash([]);
  const rr = Math.max(5, r + 3);
  pts.forEach((p, i) => {
    g.beginPath(); g.arc(p.x, p.y, rr, 0, Math.PI * 2);
    g.lineWidth = 3; g.strokeStyle = color; g.stroke();
    if (rr >= 7) { g.fillStyle = '#fff'; g.font = 'bold 11px system-ui'; g.textAlign = 'center'; g.textBaseline = 'middle'; g.fillText(String(i + 1), p.x, p.y); }
  });
}

const locText = (l) => (!l ? '' : typeof l === 'string' ? l : l.text ? l.text : Object.entries(l).filter(([, v]) => v !== undefined && v !== null && v !== -1).map(([k, v]) => `${k} ${v}`).join('/'));

function renderHops() {
  const ol = tid('trace-hops'), status = tid('trace-status');
  const t = st.trace;
  if (!t) { ol.replaceChildren(); status.textContent = ''; status.className = 'trace-status'; return; }
  const hops = t.hops || [];
  ol.replaceChildren(...hops.map((h, i) => el('li', {
    'data-testid': 'trace-hop', class: (!t.reachable && (t.failed_hop === i || (t.failed_hop === undefined && i === hops.length - 1))) ? 'bad' : '',
  }, el('a', { class: 'chip', onclick: () => ctx.openDevice(h.chip) }, h.name ?? h.chip), ` #${h.chip} in ${h.in_port ?? '-'} → ${h.chosen ?? '-'}`,
  el('br'), el('span', { class: 'muted' }, `${locText(h.location)} · level ${hopValue(h, 'level') ?? '?'}`))));
  if (t.reachable) { status.className = 'trace-status ok'; status.textContent = `reachable: ${hops.length} hops`; }
  else { status.className = 'trace-status bad'; status.textContent = `unreachable: ${t.failure ?? 'failure'} — ${t.reason ?? ''}`; }
}

async function runTrace() {
  const src = tid('trace-src').value.trim(), dst = tid('trace-dst').value.trim();
  const status = tid('trace-status');
  if (!src || !dst) { status.className = 'trace-status bad'; status.textContent = 'give a source and a destination'; return; }
  delete document.body.dataset.traceDrawn;
  status.className = 'trace-status'; status.textContent = 'tracing…';
  try {
    st.trace = await api('GET', `/api/trace${qs({ src, dst })}`);
  } catch (e) {
    st.trace = null; renderHops();
    status.className = 'trace-status bad';
    status.textContent = `trace failed: ${e.error ? `${e.error.id} ${e.error.message}` : e.message}`;
    return;
  }
  renderHops();
  if (st.data && canvas.clientWidth) draw();
  else document.body.dataset.traceDrawn = String((st.trace.hops || []).length);
  if (!st.tracePoints.length && st.data) showApiError(new Error('no hop of the path lies in the groups shown; zoom out'), 'trace');
}
