// Traffic view: heat map of GET /api/traffic?group=... cells (utilisation, retransmissions).
import { tid, api, qs, fitCanvas, ramp, fmtNum, fmtPct } from '../lib.js';

const st = { cells: [], placed: [], cell: 0, max: 0, visible: false, timer: null, seq: 0, ctx: null };
export function snapshot() { return { cells: st.cells.length, max: st.max, metric: metric(), unit: UNITS[metric()] }; }
const metric = () => tid('traffic-metric').value;
const isRatio = (m) => m.startsWith('utilisation');
const PLURAL = { switch: 'switches', chip: 'chips', link: 'links', chassis: 'chassis', cabinet: 'cabinets', level: 'levels' };
// The legend's unit of each metric.
const UNITS = { utilisation_max: '% of the link', utilisation_mean: '% of the link', retransmissions_per_s: 'per second',
  crc_errors_per_s: 'per second', links_down: 'links' };

export function init(ctx) {
  st.ctx = ctx;
  tid('traffic-group').addEventListener('change', load);
  tid('traffic-metric').addEventListener('change', draw);
  tid('traffic-refresh').addEventListener('click', load);
  tid('traffic-auto').addEventListener('change', (e) => {
    clearInterval(st.timer);
    if (e.target.checked) st.timer = setInterval(() => { if (st.visible) load(); }, 10000);
  });
  const canvas = tid('traffic-canvas'), tip = tid('traffic-tooltip');
  canvas.addEventListener('mousemove', (ev) => {
    const rect = canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left, y = ev.clientY - rect.top;
    const p = st.placed.find(q => x >= q.x && x < q.x + st.cell && y >= q.y && y < q.y + st.cell);
    if (!p) { tip.hidden = true; return; }
    const c = p.c;
    tip.textContent = `${c.label ?? c.key}\nutilisation max ${fmtPct(c.utilisation_max)} mean ${fmtPct(c.utilisation_mean)}\n` +
      `retransmissions/s ${fmtNum(c.retransmissions_per_s)}  crc errors/s ${fmtNum(c.crc_errors_per_s)}\nlinks down ${c.links_down ?? 0}`;
    tip.hidden = false;
    tip.style.left = `${Math.min(x + 12, canvas.clientWidth - tip.offsetWidth - 4)}px`;
    tip.style.top = `${Math.min(y + 12, canvas.clientHeight - tip.offsetHeight - 4)}px`;
  });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; });
  canvas.addEventListener('click', (ev) => {
    const group = tid('traffic-group').value;
    if (group !== 'chip' && group !== 'link') return;
    const rect = canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left, y = ev.clientY - rect.top;
    const p = st.placed.find(q => x >= q.x && x < q.x + st.cell && y >= q.y && y < q.y + st.cell);
    // A link cell's key is "chip:port": open the chip at its lower end.
    if (p) ctx.openDevice(group === 'link' ? String(p.c.key).split(':')[0] : p.c.key);
  });
  new ResizeObserver(() => { if (st.visible) draw(); }).observe(canvas.parentElement);
}

export function show() { st.visible = true; load(); }
export function hide() { st.visible = false; }

async function load() {
  const seq = ++st.seq;
  let r;
  try { r = await api('GET', `/api/traffic${qs({ group: tid('traffic-group').value })}`); } catch { return; }
  if (seq !== st.seq) return;
  st.cells = Array.isArray(r) ? r : r?.cells || [];
  draw();
}

function draw() {
  const canvas = tid('traffic-canvas');
  if (!canvas.clientWidth) return;
  const { ctx: g, w, h } = fitCanvas(canvas);
  const m = metric();
  const cells = st.cells;
  const vals = cells.map(c => Number(c[m]) || 0);
  st.max = isRatio(m) ? 1 : Math.max(...vals, 0) || 1;  // all zero: a scale of 0-1
  // Axes: the cells run left to right, then down, in the order of their keys; the left axis names
  // each row's first cell, the top axis counts the columns.
  const L = 96, T = 30, pad = 8, n = Math.max(1, cells.length), W = w - L - pad, H = h - T - pad;
  let s = Math.sqrt((W * H) / n);
  while (s > 2 && Math.floor(W / s) * Math.floor(H / s) < n) s -= 0.5;
  s = Math.min(s, 120);
  const cols = Math.max(1, Math.floor(W / s));
  st.cell = s;
  st.placed = cells.map((c, i) => ({ c, x: L + (i % cols) * s, y: T + Math.floor(i / cols) * s }));
  const rows = Math.ceil(cells.length / cols), group = tid('traffic-group').value;
  g.font = '10px system-ui'; g.fillStyle = '#8592a3'; g.textBaseline = 'middle';
  g.textAlign = 'right';
  const rowStep = Math.max(1, Math.ceil(12 / s));
  for (let r = 0; r < rows; r += rowStep) {
    let t = String(cells[r * cols].label ?? cells[r * cols].key);
    while (t.length > 3 && g.measureText(t).width > L - 24) t = `${t.slice(0, -2)}…`;
    g.fillText(t, L - 4, T + r * s + s / 2);
  }
  g.textAlign = 'center';
  const colStep = Math.max(1, Math.ceil(24 / s));
  for (let c = 0; c < cols; c += colStep) g.fillText(String(c + 1), L + c * s + s / 2, T - 7);
  g.fillStyle = '#c3ccd8'; g.textAlign = 'left';
  g.fillText(`${PLURAL[group] ?? group} in order, ${cols} to a row: column`, L, 9);
  g.save(); g.translate(10, T + Math.min(rows * s, H) / 2); g.rotate(-Math.PI / 2);
  g.textAlign = 'center'; g.fillText(`first ${group} of the row`, 0, 0); g.restore();
  const gap = s > 8 ? 1 : 0;
  st.placed.forEach((p, i) => {
    g.fillStyle = ramp(vals[i] / st.max);
    g.fillRect(p.x, p.y, s - gap, s - gap);
    if (p.c.links_down > 0 && s > 6) { g.strokeStyle = '#e5484d'; g.lineWidth = 2; g.strokeRect(p.x + 1, p.y + 1, s - gap - 2, s - gap - 2); }
  });
  if (s >= 40) {
    g.font = '10px system-ui'; g.textAlign = 'center'; g.textBaseline = 'middle'; g.fillStyle = '#000c';
    for (const [i, p] of st.placed.entries()) {
      let t = String(p.c.label ?? p.c.key);
      while (t.length > 3 && g.measureText(t).width > s - 6) t = t.slice(0, -2) + '…';
      g.fillText(t, p.x + s / 2, p.y + s / 2 - 6);
      g.fillText(isRatio(m) ? fmtPct(vals[i]) : fmtNum(vals[i]), p.x + s / 2, p.y + s / 2 + 7);
    }
  }
  legend(m);
  document.body.dataset.trafficReady = String(cells.length);
}

function legend(m) {
  const c = tid('traffic-legend');
  const g = c.getContext('2d');
  g.clearRect(0, 0, c.width, c.height);
  for (let x = 0; x < 160; x++) { g.fillStyle = ramp(x / 159); g.fillRect(30 + x, 2, 1, 12); }
  g.fillStyle = '#8592a3'; g.font = '10px system-ui'; g.textBaseline = 'top';
  g.textAlign = 'left'; g.fillText('0', 30, 16);
  g.textAlign = 'right'; g.fillText(isRatio(m) ? '100%' : fmtNum(st.max), 190, 16);
  g.textAlign = 'left'; g.fillText(`${m.replace(/_per_s$/, '').replace(/_/g, ' ')} (${UNITS[m] ?? ''})`, 198, 2);
}
