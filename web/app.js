// Galaxy management console (docs/system.md 2.6): topology, fault, device, traffic, history, log and
// configuration views over the REST API of `galaxy nmd` (docs/api.md). Plain ES modules, no build.
import { $$, tid, api, getToken, setToken, startEvents, bus } from './lib.js';
import * as topology from './views/topology.js';
import * as faults from './views/faults.js';
import * as device from './views/device.js';
import * as traffic from './views/traffic.js';
import * as historyView from './views/history.js';
import * as log from './views/log.js';
import * as config from './views/config.js';

const views = { topology, faults, device, traffic, history: historyView, log, config };
let current = null;

function setTab(name, arg) {
  if (!views[name]) name = 'topology';
  for (const b of $$('.tabs button')) b.classList.toggle('active', b.dataset.tab === name);
  for (const [n, v] of Object.entries(views)) {
    const sec = document.getElementById(`view-${n}`);
    const on = n === name;
    if (sec.hidden === on) sec.hidden = !on;
    if (!on && n === current && v.hide) v.hide();
  }
  current = name;
  document.body.dataset.tab = name;
  views[name].show?.(arg);
  const hash = `#${name}${arg !== undefined && arg !== '' ? `/${encodeURIComponent(arg)}` : ''}`;
  if (location.hash !== hash) history.replaceState(null, '', hash);
}

function fromHash() {
  const [name, ...rest] = location.hash.replace(/^#/, '').split('/');
  const arg = rest.length ? decodeURIComponent(rest.join('/')) : undefined;
  setTab(name || 'topology', arg);
}

const ctx = {
  setTab,
  openDevice: (chip) => setTab('device', String(chip)),
  openHistory: (chip, port) => setTab('history', port === undefined ? String(chip) : `${chip}:${port}`),
};

let scanTimer = null;
async function refreshHeader() {
  const pill = tid('header-status');
  try {
    const s = await api('GET', '/api/status', undefined, { quiet: true });
    const bits = [s.fabric, s.kind].filter(Boolean);
    const chips = s.chips ?? s.chip_count;
    if (typeof chips === 'number') bits.push(`${chips} chips`);
    // Galaxy fabrics: this server among the fabric's servers (nmd election, docs/api.md).
    if (s.sm && s.sm.state) {
      const peers = s.sm.state === 'master'
        ? `${(s.sm.standbys || []).length} standby`
        : (s.sm.master ? `master ${s.sm.master.name}` : 'no master');
      bits.push(`${s.sm.state} (${peers})`);
    }
    // A status scan in progress: its chips read so far, refreshed until it ends.
    if (s.scan && s.scan.running) {
      bits.push(`scanning ${s.scan.chips_done} of ${s.scan.chips_total} chips`);
      if (!scanTimer) scanTimer = setTimeout(() => { scanTimer = null; refreshHeader(); }, 2000);
    }
    pill.textContent = bits.join(' · ') || 'connected';
    pill.title = JSON.stringify(s, null, 1).slice(0, 1500);
  } catch (e) {
    pill.textContent = 'daemon unreachable';
  }
}

function init() {
  const tok = tid('token-input');
  tok.value = getToken();
  tok.addEventListener('change', () => setToken(tok.value.trim()));
  for (const b of $$('.tabs button')) b.addEventListener('click', () => setTab(b.dataset.tab));
  for (const v of Object.values(views)) v.init(ctx);
  startEvents();
  bus.addEventListener('event', (e) => { if (e.detail.kind === 'config_change') refreshHeader(); });
  refreshHeader();
  setInterval(refreshHeader, 30000);
  window.addEventListener('hashchange', fromHash);
  fromHash();
}

// Read-only state snapshot for tests and debugging: window.galaxyConsole.trace.points etc.
const frozen = (o) => JSON.parse(JSON.stringify(o ?? null));
window.galaxyConsole = Object.freeze({
  get tab() { return current; },
  get topology() { return frozen(topology.snapshot()); },
  get trace() { return frozen(topology.traceSnapshot()); },
  get faults() { return frozen(faults.snapshot()); },
  get device() { return frozen(device.snapshot()); },
  get traffic() { return frozen(traffic.snapshot()); },
  get history() { return frozen(historyView.snapshot()); },
});

init();
