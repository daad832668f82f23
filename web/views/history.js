// History view: a series of GET /api/history (the whole fabric, one chip or one port) over time,
// drawn as an SVG line plot with labelled axes: time (UTC) across, the series in its unit up.
import { tid, api, qs, showApiError } from '../lib.js';

const SVG = 'http://www.w3.org/2000/svg';
const st = { data: null, visible: false, timer: null, seq: 0, drawn: null };

export function snapshot() { return st.drawn; }

export function init() {
  tid('history-form').addEventListener('submit', (e) => { e.preventDefault(); load(); });
  tid('history-series').addEventListener('change', draw);
  tid('history-auto').addEventListener('change', (e) => {
    clearInterval(st.timer);
    if (e.target.checked) st.timer = setInterval(() => { if (st.visible) load(); }, 10000);
  });
  new ResizeObserver(() => { if (st.visible) draw(); }).observe(tid('history-plot').parentElement);
}

// arg: "" (the fabric), "<chip>" or "<chip>:<port>" (from the device view or the URL).
export function show(arg) {
  st.visible = true;
  if (arg !== undefined) {
    const m = /^(.*?)(?::(\d+))?$/.exec(String(arg));
    tid('history-chip').value = m[1];
    tid('history-port').value = m[2] ?? '';
  }
  load();
}
export function hide() { st.visible = false; }

async function load() {
  const seq = ++st.seq;
  const chip = tid('history-chip').value.trim(), port = tid('history-port').value.trim();
  let r;
  try {
    r = await api('GET', `/api/history${qs({ chip: chip || undefined, port: port || undefined })}`, undefined, { quiet: true });
  } catch (e) {
    if (seq === st.seq) { showApiError(e, 'history'); st.data = null; draw(); }
    return;
  }
  if (seq !== st.seq) return;
  st.data = r;
  const sel = tid('history-series'), keep = sel.value;
  sel.replaceChildren(...r.series.map(s => new Option(`${s.name.replace(/_/g, ' ')} (${s.unit})`, s.name)));
  if (r.series.some(s => s.name === keep)) sel.value = keep;
  tid('history-title').textContent = r.scope === 'fabric' ? 'the whole fabric'
    : `${r.chip_name}${r.scope === 'port' ? ` port ${r.port}${r.peer ? ` (to ${r.peer})` : ''}` : ''} · ${r.location || ''}`;
  draw();
}

const svg = (tag, attrs, text) => {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
};

// About n round steps inside [lo, hi]; with cover, the last one at or above hi (an axis that
// holds every value).
function ticks(lo, hi, n, cover = false) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / n, mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map(f => f * mag).find(s => s >= raw);
  const end = cover ? Math.ceil(hi / step - 1e-9) * step : hi;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= end + step * 1e-9; v += step) out.push(+v.toPrecision(12));
  return out;
}
const pad = (n) => String(n).padStart(2, '0');
const clock = (us) => { const d = new Date(us / 1000); return `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`; };
const value = (v, unit) => (unit === 'ratio' ? `${+(v * 100).toPrecision(3)}%` : Number.isInteger(v) ? String(v) : String(+v.toPrecision(3)));

function draw() {
  const host = tid('history-plot');
  const W = Math.max(320, host.parentElement.clientWidth), H = Math.max(200, host.parentElement.clientHeight);
  host.setAttribute('viewBox', `0 0 ${W} ${H}`);
  host.replaceChildren();
  const s = st.data?.series.find(x => x.name === tid('history-series').value);
  const pts = (s?.points || []).filter(p => typeof p[1] === 'number');
  tid('history-count').textContent = s ? `${pts.length} points (at most ${st.data.capacity})` : '';
  if (!s) { st.drawn = null; return; }
  const L = 78, R = 16, T = 14, B = 48;
  const t0 = pts.length ? pts[0][0] : 0, t1 = pts.length ? pts[pts.length - 1][0] : 1;
  const span = Math.max(1, t1 - t0);
  let vmax = Math.max(0, ...pts.map(p => p[1]));
  if (s.unit === 'ratio') vmax = Math.max(vmax, 0.05);
  if (!(vmax > 0)) vmax = 1;
  const yt = ticks(0, vmax * 1.05, 5, true), ytop = yt[yt.length - 1] || 1;
  const x = (t) => L + ((t - t0) / span) * (W - L - R);
  const y = (v) => H - B - (v / ytop) * (H - B - T);
  // Axes, ticks and grid.
  host.append(svg('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis' }));
  host.append(svg('line', { x1: L, y1: T, x2: L, y2: H - B, class: 'axis' }));
  for (const v of yt) {
    host.append(svg('line', { x1: L, y1: y(v), x2: W - R, y2: y(v), class: 'grid' }));
    host.append(svg('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'tick', 'data-testid': 'history-ytick' }, value(v, s.unit)));
  }
  const xt = pts.length > 1 ? ticks(t0, t1, Math.max(2, Math.floor((W - L - R) / 110))) : [t0];
  for (const t of xt)
    host.append(svg('text', { x: x(t), y: H - B + 16, 'text-anchor': x(t) > W - R - 30 ? 'end' : x(t) < L + 30 ? 'start' : 'middle', class: 'tick', 'data-testid': 'history-xtick' }, clock(t)));
  const xLabel = 'time (UTC)', yLabel = `${s.name.replace(/_/g, ' ')} (${s.unit === 'ratio' ? '%' : s.unit})`;
  host.append(svg('text', { x: (L + W - R) / 2, y: H - 8, 'text-anchor': 'middle', class: 'label', 'data-testid': 'history-xlabel' }, xLabel));
  host.append(svg('text', { x: 14, y: (T + H - B) / 2, 'text-anchor': 'middle', class: 'label', transform: `rotate(-90 14 ${(T + H - B) / 2})`, 'data-testid': 'history-ylabel' }, yLabel));
  // The series: a line through its points, each point marked with its value as a tooltip.
  if (pts.length) {
    host.append(svg('polyline', { points: pts.map(p => `${x(p[0])},${y(p[1])}`).join(' '), class: 'series' }));
    for (const p of pts) {
      const c = svg('circle', { cx: x(p[0]), cy: y(p[1]), r: 3, class: 'point', 'data-testid': 'history-point' });
      c.append(svg('title', {}, `${clock(p[0])}  ${value(p[1], s.unit)}`));
      host.append(c);
    }
  } else {
    host.append(svg('text', { x: (L + W - R) / 2, y: (T + H - B) / 2, 'text-anchor': 'middle', class: 'tick' }, 'no points yet: the history has a point per status scan'));
  }
  st.drawn = { scope: st.data.scope, series: s.name, unit: s.unit, points: pts.length, xLabel, yLabel, yTicks: yt.length, xTicks: xt.length };
  document.body.dataset.historyPoints = String(pts.length);
}
