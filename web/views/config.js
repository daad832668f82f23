// Configuration view: GET/PUT /api/config (routing engine, scan and sweep intervals, fault mask)
// and the daemon's GET /api/status summary.
import { tid, el, api, fillKv, showMessage, bus } from '../lib.js';

const st = { cfg: null, engines: [] };

export function init() {
  tid('config-form').addEventListener('submit', (e) => { e.preventDefault(); save(); });
  tid('config-reload').addEventListener('click', load);
  tid('status-refresh').addEventListener('click', status);
  tid('config-engine').addEventListener('change', engineDoc);
  bus.addEventListener('event', (e) => { if (e.detail.kind === 'config_change' && !tid('view-config').hidden) load(); });
}

export function show() { load(); status(); }

function engineDoc() {
  const e = st.engines.find(x => x.name === tid('config-engine').value);
  const ps = e?.parameters ?? e?.params;  // docs/api.md: parameters; the daemon sends params
  const params = ps ? (Array.isArray(ps) ? ps.map(p => (typeof p === 'object' ? p.name ?? JSON.stringify(p) : p)).join(', ')
    : Object.keys(ps).join(', ')) : '';
  tid('config-engine-doc').textContent = e ? `${e.doc ?? ''}${params ? ` (parameters: ${params})` : ''}` : '';
}

async function load() {
  let c;
  try { c = await api('GET', '/api/config'); } catch { return; }
  st.cfg = c;
  st.engines = (c.engines || []).map(e => (typeof e === 'string' ? { name: e } : e));
  const sel = tid('config-engine');
  sel.replaceChildren(...st.engines.map(e => el('option', { value: e.name }, e.name)));
  if (c.routing_engine && !st.engines.some(e => e.name === c.routing_engine)) sel.append(el('option', { value: c.routing_engine }, c.routing_engine));
  sel.value = c.routing_engine ?? '';
  engineDoc();
  tid('config-scan-interval').value = c.scan_interval_s ?? '';
  tid('config-sweep-interval').value = c.sweep_interval_s ?? '';
  const fm = c.fault_mask;
  tid('config-fault-mask').value = typeof fm === 'number' ? `0x${fm.toString(16)}` : fm ?? '';
  document.body.dataset.configReady = '1';
}

async function save() {
  if (!st.cfg) return;
  const c = st.cfg, body = {};
  const eng = tid('config-engine').value;
  if (eng && eng !== c.routing_engine) body.routing_engine = eng;
  const scan = Number(tid('config-scan-interval').value), sweep = Number(tid('config-sweep-interval').value);
  if (tid('config-scan-interval').value !== '' && scan !== c.scan_interval_s) body.scan_interval_s = scan;
  if (tid('config-sweep-interval').value !== '' && sweep !== c.sweep_interval_s) body.sweep_interval_s = sweep;
  const fmRaw = tid('config-fault-mask').value.trim();
  if (fmRaw !== '') {
    const fm = typeof c.fault_mask === 'number' ? Number(fmRaw) : fmRaw;  // Number() reads 0x.. too
    if (typeof fm === 'number' && Number.isNaN(fm)) { showMessage(`fault mask '${fmRaw}' is not a number`, 'error'); return; }
    if (fm !== c.fault_mask) body.fault_mask = fm;
  }
  if (!Object.keys(body).length) { showMessage('nothing changed', 'info'); return; }
  try {
    await api('PUT', '/api/config', body);
    showMessage(`configuration saved: ${Object.keys(body).join(', ')}`, 'ok');
  } catch { return; }
  load(); status();
}

async function status() {
  try { fillKv(tid('status-summary'), await api('GET', '/api/status')); } catch { /* shown */ }
}
