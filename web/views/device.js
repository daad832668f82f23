// Device view (docs/system.md 2.5.2, 2.6): one chip's ports, peers and link state
// (GET /api/chips/{chip}); status scans in the single / loop / compare modes
// (GET /api/chips/{chip}/status); register read and write.
import { tid, el, api, fmtPct, fmtNum, fmtTime, chipRef, showMessage, fillKv } from '../lib.js';

const st = { chip: null, info: null, mode: 'single', timer: null, running: false, scans: 0, changes: 0, lastScan: null, ctx: null };

export function snapshot() {
  return { chip: st.chip, name: st.info?.name, ports: st.info?.ports?.length ?? 0, mode: st.mode, running: st.running, scans: st.scans, changes: st.changes };
}

// ---- EEPROM and built-in self-test -----------------------------------------------------------
const hex2 = (b) => Number(b).toString(16).padStart(2, '0');
async function eepromRead() {
  if (!st.chip) { showMessage('open a chip first', 'error'); return; }
  const q = `addr=${encodeURIComponent(tid('eeprom-addr').value.trim() || '0')}&count=${encodeURIComponent(tid('eeprom-count').value || '16')}`;
  try {
    const r = await api('GET', `/api/chips/${chipRef(st.chip)}/eeprom?${q}`);
    const bytes = r.bytes || [];
    tid('eeprom-result').textContent = `${bytes.length} bytes from ${r.addr ?? tid('eeprom-addr').value}: ${bytes.map(hex2).join(' ')}` +
      (r.sim_time_us !== undefined ? `  (${fmtNum(r.sim_time_us)} us simulated)` : '');
    document.body.dataset.eepromRead = String(bytes.length);
  } catch (e) { tid('eeprom-result').textContent = e.message; }
}
async function eepromWrite() {
  const raw = tid('eeprom-bytes').value.trim();
  if (!st.chip || !raw) { showMessage('open a chip and give the bytes to write', 'error'); return; }
  const bytes = raw.split(/[\s,]+/).map(Number);
  if (bytes.some(b => !Number.isInteger(b) || b < 0 || b > 255)) { showMessage(`bytes = '${raw}': each must be 0-255 (decimal or 0x hex)`, 'error'); return; }
  try {
    const r = await api('PUT', `/api/chips/${chipRef(st.chip)}/eeprom`, { addr: tid('eeprom-addr').value.trim() || '0', bytes });
    tid('eeprom-result').textContent = `written ${bytes.length} bytes at ${r?.addr ?? ''}` + (r?.sim_time_us !== undefined ? ` (${fmtNum(r.sim_time_us)} us simulated)` : '');
  } catch (e) { tid('eeprom-result').textContent = e.message; }
}
async function eepromDefaults() {
  if (!st.chip) { showMessage('open a chip first', 'error'); return; }
  tid('eeprom-result').textContent = 'writing the boot image…';
  try { tid('eeprom-result').textContent = JSON.stringify(await api('POST', `/api/chips/${chipRef(st.chip)}/eeprom/defaults`, {})); } catch (e) { tid('eeprom-result').textContent = e.message; }
}
async function bist() {
  if (!st.chip) { showMessage('open a chip first', 'error'); return; }
  const port = tid('bist-port').value.trim();
  const body = { chip: String(st.chip), duration_us: Number(tid('bist-duration').value) || 100, intensity_percent: Number(tid('bist-intensity').value) };
  if (port !== '') body.port = Number(port);
  tid('bist-result').textContent = 'testing…';
  try {
    const r = await api('POST', '/api/bist', body);
    const links = Array.isArray(r?.links) ? r.links : [];
    tid('bist-result').replaceChildren(
      `${r.passed ?? 0} of ${r.links_tested ?? links.length} links passed, ${r.duration_us} us at ${r.intensity_percent}%\n`,
      ...links.map(l => el('div', { class: l.pass ? '' : 'sev-critical', 'data-testid': 'bist-link' },
        `port ${l.port} -> ${l.peer}: ${l.pass ? 'pass' : l.no_wire ? 'no wire to test' : 'FAIL'}, ${l.errors} errors in ${l.flits} flits, BER ${fmtNum(l.ber)} (95% upper ${fmtNum(l.ber_upper_95)})`)));
    document.body.dataset.bistDone = String(links.length);
  } catch (e) { tid('bist-result').textContent = e.message; }
}

// The out-of-band path: the chip's chassis monitor board over I2C (POST /api/chips/{chip}/oob).
async function oob(op) {
  if (!st.chip) { showMessage('open a chip first', 'error'); return; }
  if ((op === 'power-off' || op === 'reset') && !confirm(`${op} chip ${st.chip}?`)) return;
  tid('oob-result').textContent = `${op}…`;
  try {
    const r = await api('POST', `/api/chips/${chipRef(st.chip)}/oob`, { operation: op });
    const what = r.temperature_c !== undefined ? `${fmtNum(r.temperature_c)} °C`
      : r.voltage_mv !== undefined ? `${r.voltage_mv} mV` : 'done';
    tid('oob-result').textContent = `${op}: ${what}; powered ${r.powered ? 'yes' : 'no'}; I2C bus ${fmtNum(r.bus_us)} us, round trip ${fmtNum(r.elapsed_us)} us`;
    document.body.dataset.oobDone = op;
  } catch (e) { tid('oob-result').textContent = e.message; }
}

export function init(ctx) {
  st.ctx = ctx;
  for (const b of document.querySelectorAll('[data-testid="oob-controls"] button')) b.addEventListener('click', () => oob(b.dataset.op));
  tid('eeprom-form').addEventListener('submit', (e) => { e.preventDefault(); eepromRead(); });
  tid('eeprom-write').addEventListener('click', eepromWrite);
  tid('eeprom-defaults').addEventListener('click', eepromDefaults);
  tid('bist-form').addEventListener('submit', (e) => { e.preventDefault(); bist(); });
  tid('device-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const c = tid('device-chip').value.trim();
    if (c === st.chip) open(c); else if (c) ctx.setTab('device', c);
  });
  for (const b of document.querySelectorAll('[data-testid="scan-mode"] button')) b.addEventListener('click', () => setMode(b.dataset.mode));
  setMode('single');
  tid('scan-start').addEventListener('click', start);
  tid('scan-stop').addEventListener('click', stop);
  tid('reg-form').addEventListener('submit', (e) => { e.preventDefault(); regRead(); });
  tid('reg-write').addEventListener('click', regWrite);
}

export function show(arg) {
  if (arg !== undefined && arg !== '' && arg !== st.chip) { tid('device-chip').value = arg; open(arg); }
}

function setMode(m) {
  st.mode = m;
  for (const b of document.querySelectorAll('[data-testid="scan-mode"] button')) b.classList.toggle('active', b.dataset.mode === m);
  tid('scan-start').textContent = m === 'single' ? 'Read' : 'Start';
  if (m === 'single') stop();
}

async function open(chip) {
  stop();
  st.chip = chip; st.info = null; st.scans = 0;
  tid('scan-table').replaceChildren(); tid('scan-changes').replaceChildren(); tid('scan-info').textContent = '';
  tid('device-title').textContent = `loading ${chip}…`;
  let c;
  try { c = await api('GET', `/api/chips/${chipRef(chip)}`); } catch { tid('device-title').textContent = ''; return; }
  if (st.chip !== chip) return;
  st.info = c;
  tid('device-title').replaceChildren(`${c.name ?? ''} · chip ${c.chip ?? chip} · ${c.kind ?? ''} · `,
    el('a', { class: 'chip', 'data-testid': 'device-history', onclick: () => st.ctx.openHistory(c.chip ?? chip) }, 'history'));
  const { ports, faults, open_faults: openFaults, ...rest } = c;
  fillKv(tid('device-info'), { ...rest, ...(typeof faults === 'number' ? { faults } : {}) });
  const known = new Set(['port', 'peer', 'link', 'utilisation', 'retransmissions_per_s', 'scanned']);
  tid('device-ports').replaceChildren(...(ports || []).map(p => {
    const peer = p.peer && typeof p.peer === 'object' && p.peer.chip !== undefined && p.peer.chip !== null
      ? el('a', { class: 'chip', onclick: () => st.ctx.setTab('device', String(p.peer.chip)) }, `${p.peer.name ?? p.peer.chip}:${p.peer.port ?? ''}`)
      : '—';
    const extra = Object.entries(p).filter(([k]) => !known.has(k)).map(([k, v]) =>
      (v && typeof v === 'object' ? Object.entries(v).map(([a, b]) => `${a}=${b}`).join(' ') : `${k}=${fmtNum(v)}`)).join(' ');
    return el('tr', { 'data-testid': 'port-row', dataset: { port: p.port, link: p.link ?? '' } },
      el('td', {}, el('a', { class: 'chip', title: 'this port over time', 'data-testid': 'port-history',
        onclick: () => st.ctx.openHistory(c.chip ?? chip, p.port) }, p.port)), el('td', { class: `link-${p.link}` }, p.link ?? ''), el('td', {}, peer),
      el('td', {}, fmtPct(p.utilisation)), el('td', {}, fmtNum(p.retransmissions_per_s)), el('td', { class: 'wrap' }, extra));
  }));
  const fl = Array.isArray(faults) ? faults : Array.isArray(openFaults) ? openFaults : [];
  tid('device-faults').replaceChildren(...(fl.length ? fl.map(f => el('li', { class: `sev-${f.severity}` },
    `${fmtTime(f.time_us)} ${f.severity ?? ''} ${f.cause ?? ''} ${f.port !== undefined && f.port >= 0 ? `port ${f.port}` : ''}`))
    : [el('li', { class: 'muted' }, typeof faults === 'number' && faults > 0 && !openFaults ? `${faults}` : 'none')]));
  document.body.dataset.deviceReady = String(c.chip ?? chip);
}

// ---- status scans ---------------------------------------------------------------------------
function start() {
  if (!st.chip) { showMessage('open a chip first', 'error'); return; }
  if (st.mode === 'single') { scan(); return; }
  stop();
  st.running = true;
  tid('scan-start').disabled = true; tid('scan-stop').disabled = false;
  const tick = async () => {
    if (!st.running) return;
    await scan();
    if (!st.running) return;
    const s = Math.max(0.2, Number(tid('scan-interval').value) || 2);
    st.timer = setTimeout(tick, s * 1000);
  };
  tick();
}

function stop() {
  st.running = false;
  clearTimeout(st.timer);
  tid('scan-start').disabled = false; tid('scan-stop').disabled = true;
}

async function scan() {
  const chip = st.chip;
  let r;
  try { r = await api('GET', `/api/chips/${chipRef(chip)}/status`); } catch { stop(); return; }
  if (chip !== st.chip) return;
  st.scans++;
  const ports = r.ports || [];
  // Galaxy's chips answer status registers; an InfiniBand node its ports' PortCounters.
  const values = p => p.registers || p.counters || {};
  const field = c => c.register ?? c.counter;
  const names = [];
  for (const p of ports) for (const n of Object.keys(values(p))) if (!names.includes(n)) names.push(n);
  const compare = st.mode === 'compare';
  const changed = new Map();
  for (const c of r.changes || []) changed.set(`${c.port}|${field(c)}`, c);
  st.changes = (r.changes || []).length;
  const table = tid('scan-table');
  table.replaceChildren(
    el('thead', {}, el('tr', {}, el('th', {}, 'port'), ...names.map(n => el('th', { title: n }, n.replace(/_/g, '_\u200b'))))),
    el('tbody', {}, ...ports.map(p => el('tr', { 'data-testid': 'scan-row', dataset: { port: p.port } }, el('td', {}, p.port),
      ...names.map(n => {
        const c = compare && changed.get(`${p.port}|${n}`);
        return el('td', c ? { class: 'changed', 'data-testid': 'scan-changed', title: `${c.old} → ${c.new} (${c.delta >= 0 ? '+' : ''}${c.delta})` } : {}, fmtNum(values(p)[n]));
      })))));
  tid('scan-changes').replaceChildren(...(compare ? (r.changes || []).slice(0, 200).map(c =>
    el('li', {}, `port ${c.port} ${field(c)}: ${c.old} → ${c.new} (${c.delta >= 0 ? '+' : ''}${c.delta})`)) : []));
  tid('scan-info').textContent = `scan ${st.scans} at ${new Date().toLocaleTimeString()}` +
    (r.interval_s !== undefined ? ` · Δt ${fmtNum(r.interval_s)} s` : '') + (compare ? ` · ${st.changes} changes` : '');
}

// ---- registers ------------------------------------------------------------------------------
const addr = () => tid('reg-addr').value.trim();
function showReg(r) {
  tid('reg-result').textContent = r && typeof r === 'object'
    ? `${r.register ?? addr()} = ${r.value ?? ''} (${r.value_hex ?? ''})  latency ${fmtNum(r.latency_us)} us, attempts ${r.attempts ?? ''}`
    : String(r ?? 'ok');
}
async function regRead() {
  if (!st.chip || !addr()) { showMessage('give a chip and a register address', 'error'); return; }
  try { showReg(await api('GET', `/api/chips/${chipRef(st.chip)}/registers/${encodeURIComponent(addr())}`)); } catch (e) { tid('reg-result').textContent = e.message; }
}
async function regWrite() {
  const raw = tid('reg-value').value.trim();
  if (!st.chip || !addr() || !raw) { showMessage('give a chip, a register address and a value', 'error'); return; }
  const value = /^-?\d+$/.test(raw) ? Number(raw) : raw;
  try {
    const r = await api('PUT', `/api/chips/${chipRef(st.chip)}/registers/${encodeURIComponent(addr())}`, { value });
    showReg(r && Object.keys(r).length ? r : `written ${raw}`);
    showMessage(`${addr()} ← ${raw}`, 'ok');
  } catch (e) { tid('reg-result').textContent = e.message; }
}
