// Fault view (docs/system.md 2.6): time, location, cause, severity of each fault and alarm
// (GET /api/faults), acknowledgement (POST /api/faults/{id}/ack), live arrivals over SSE.
import { tid, el, api, qs, bus, fmtTime, sevRank, showMessage } from '../lib.js';

const MAX_ROWS = 500;
const st = { rows: new Map(), unacked: new Set(), loaded: false, seq: 0, live: 0, lastLive: null };

export function snapshot() {
  return { rows: st.rows.size, unacknowledged: st.unacked.size, live: st.live, lastLive: st.lastLive };
}

const filters = () => ({
  min_severity: tid('fault-filter-severity').value,
  location: tid('fault-filter-location').value.trim(),
  acknowledged: tid('fault-filter-unack').checked ? 'false' : '',
});

export function init() {
  tid('fault-filters').addEventListener('submit', (e) => { e.preventDefault(); load(); });
  tid('fault-filter-severity').addEventListener('change', () => load());
  tid('fault-filter-unack').addEventListener('change', () => load());
  bus.addEventListener('event', (e) => {
    const { kind, event } = e.detail;
    if (kind === 'fault' || kind === 'alarm') onLive(event);
  });
  countUnacked();
}

export function show() { if (!st.loaded) load(); }

async function countUnacked() {
  try {
    const r = await api('GET', `/api/faults${qs({ acknowledged: 'false', limit: 1000 })}`, undefined, { quiet: true });
    for (const ev of list(r)) if (!ev.acknowledged) st.unacked.add(String(ev.id));
    badge();
  } catch { /* the header shows that the daemon is unreachable */ }
}

const list = (r) => (Array.isArray(r) ? r : r?.events || r?.faults || r?.items || []);

function badge() {
  const b = tid('tab-faults-badge');
  const n = st.unacked.size;
  b.hidden = n === 0;
  b.textContent = n > 999 ? '999+' : String(n);
  b.title = `${n} unacknowledged faults and alarms`;
}

async function load() {
  const seq = ++st.seq;
  delete document.body.dataset.faultsReady;
  let r;
  try { r = await api('GET', `/api/faults${qs({ ...filters(), limit: MAX_ROWS })}`); } catch { return; }
  if (seq !== st.seq) return;
  const tbody = tid('fault-table');
  st.rows.clear();
  const trs = list(r).map(ev => row(ev));
  tbody.replaceChildren(...trs);
  st.loaded = true;
  count();
  document.body.dataset.faultsReady = String(trs.length);
}

function count() { tid('fault-count').textContent = `${st.rows.size} shown · ${st.unacked.size} unacknowledged`; }

function ackCell(ev) {
  if (ev.acknowledged) {
    return el('td', { 'data-testid': 'fault-acked' }, `✓ ${ev.acknowledged_by || ''} ${ev.acknowledged_us ? fmtTime(ev.acknowledged_us).slice(11) : ''}`);
  }
  return el('td', {}, el('button', { 'data-testid': 'fault-ack', class: 'small', onclick: () => ack(ev) }, 'Ack'));
}

function row(ev, fresh = false) {
  const tr = el('tr', {
    'data-testid': 'fault-row', class: `${fresh ? 'new' : ''} ${ev.acknowledged ? 'acked' : ''}`,
    dataset: { id: ev.id, kind: ev.kind ?? '', severity: ev.severity ?? '', live: fresh ? '1' : '0' },
  },
  el('td', {}, fmtTime(ev.time_us)),
  el('td', {}, ev.kind ?? ''),
  el('td', { class: `sev-${ev.severity}` }, ev.severity ?? ''),
  el('td', {}, ev.location ?? (ev.chip >= 0 ? `chip ${ev.chip}${ev.port >= 0 ? ` port ${ev.port}` : ''}` : '')),
  el('td', {}, ev.cause ?? ''),
  el('td', { class: 'wrap', title: String(ev.detail ?? '') }, String(ev.detail ?? '').slice(0, 160)),
  ackCell(ev));
  st.rows.set(String(ev.id), tr);
  return tr;
}

function matches(ev) {
  const f = filters();
  if (f.min_severity && sevRank(ev.severity) < sevRank(f.min_severity)) return false;
  if (f.location && !String(ev.location ?? '').toLowerCase().includes(f.location.toLowerCase())) return false;
  if (f.acknowledged === 'false' && ev.acknowledged) return false;
  return true;
}

function onLive(ev) {
  st.live++;
  st.lastLive = { id: ev.id, at: performance.now() };
  if (!ev.acknowledged) { st.unacked.add(String(ev.id)); badge(); }
  if (!st.loaded || !matches(ev) || st.rows.has(String(ev.id))) { count(); return; }
  const tbody = tid('fault-table');
  tbody.prepend(row(ev, true));
  while (tbody.children.length > MAX_ROWS) { const last = tbody.lastChild; st.rows.delete(last.dataset.id); last.remove(); }
  count();
}

async function ack(ev) {
  try {
    const r = await api('POST', `/api/faults/${encodeURIComponent(ev.id)}/ack`, { by: 'console' });
    const upd = { ...ev, acknowledged: true, acknowledged_by: 'console', acknowledged_us: Date.now() * 1000, ...(r && typeof r === 'object' && r.id !== undefined ? r : {}) };
    st.unacked.delete(String(ev.id));
    badge();
    const old = st.rows.get(String(ev.id));
    if (old) old.replaceWith(row(upd));
    count();
    showMessage(`fault ${ev.id} acknowledged`, 'ok');
  } catch { /* shown by api() */ }
}
