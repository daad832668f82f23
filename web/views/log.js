// Log view: every event (GET /api/log) plus the live SSE stream of all kinds.
import { tid, el, api, qs, bus, fmtTime } from '../lib.js';

const MAX_ROWS = 1000;
const st = { loaded: false, ids: new Set(), seq: 0 };

export function init() {
  tid('log-form').addEventListener('submit', (e) => { e.preventDefault(); load(); });
  tid('log-kind').addEventListener('change', load);
  bus.addEventListener('event', (e) => {
    const { kind, event } = e.detail;
    if (!st.loaded || !tid('log-live').checked) return;
    const want = tid('log-kind').value;
    if (want && want !== kind) return;
    if (st.ids.has(String(event.id))) return;
    const tbody = tid('log-table');
    tbody.prepend(row(event, true));
    while (tbody.children.length > MAX_ROWS) { st.ids.delete(tbody.lastChild.dataset.id); tbody.lastChild.remove(); }
    tid('log-count').textContent = `${tbody.children.length} entries`;
  });
}

export function show() { if (!st.loaded) load(); }

function row(ev, fresh) {
  st.ids.add(String(ev.id));
  const detail = typeof ev.detail === 'object' ? JSON.stringify(ev.detail) : String(ev.detail ?? '');
  return el('tr', { 'data-testid': 'log-row', class: fresh ? 'new' : '', dataset: { id: ev.id, kind: ev.kind ?? '' } },
    el('td', {}, fmtTime(ev.time_us)), el('td', {}, ev.kind ?? ''), el('td', { class: `sev-${ev.severity}` }, ev.severity ?? ''),
    el('td', {}, ev.location ?? ''), el('td', {}, ev.cause ?? ''), el('td', { class: 'wrap', title: detail }, detail.slice(0, 240)));
}

async function load() {
  const seq = ++st.seq;
  let r;
  try { r = await api('GET', `/api/log${qs({ kind: tid('log-kind').value, limit: 300 })}`); } catch { return; }
  if (seq !== st.seq) return;
  const items = Array.isArray(r) ? r : r?.events || r?.items || [];
  st.ids.clear();
  tid('log-table').replaceChildren(...items.map(ev => row(ev, false)));
  tid('log-count').textContent = `${items.length} entries`;
  st.loaded = true;
  document.body.dataset.logReady = String(items.length);
}
