#!/usr/bin/env node
// DEVELOPMENT AID ONLY — a stand-in for `galaxy nmd` so the console (web/) and its e2e test can be
// developed before the daemon exists. It is NOT used by the real tests and is not part of the
// product: the real API is docs/api.md, served by the C++ daemon.
//
// Serves the static files of web/ and canned answers shaped as docs/api.md describes, computed
// over a synthetic TH-2-like fabric (bottom switches of 6 NRCs + 32 NICs per chassis, 20 leaf
// switches per group of 3 compute cabinets, root switches of 6 NRCs), including the SSE stream
// /api/events, which emits a `fault` event shortly after POST /api/inject.
//
//   node dev/mock-api.mjs [--listen 127.0.0.1:18081] [--token testtoken] [--fabric mini|th2|N]
//   (--fabric N = N compute cabinets; mini = 3; th2 = 143, the full TH-2 size)
// No dependencies (node:http only).
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const argv = process.argv.slice(2);
const arg = (name, def) => { const i = argv.indexOf(`--${name}`); return i >= 0 ? argv[i + 1] : def; };
const [HOST, PORT] = arg('listen', '127.0.0.1:18081').split(':');
const TOKEN = arg('token', process.env.GALAXY_NMD_TOKEN || 'testtoken');
const FABRIC = arg('fabric', 'mini');
const WEB = path.resolve(arg('web', path.join(path.dirname(fileURLToPath(import.meta.url)), '..')));
const COMPUTE_CABS = FABRIC === 'th2' ? 143 : FABRIC === 'mini' ? 3 : Math.max(1, Number(FABRIC) || 3);

// ---- fabric --------------------------------------------------------------------------------
const chips = [], links = [], nics = [], byName = new Map();
let rnd = 12345;
const rand = () => ((rnd = (rnd * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
function addChip(kind, level, loc, name, nports) {
  const c = { chip: chips.length, name, kind, level, location: loc, ports: new Array(nports).fill(-1), regs: new Map() };
  chips.push(c); byName.set(name, c.chip);
  if (kind === 'nic') nics.push(c.chip);
  return c.chip;
}
function connect(a, pa, b, pb) {
  const i = links.length;
  links.push({ a, pa, b, pb, up: true, util: rand() * 0.35, retr: rand() < 0.05 ? rand() * 20 : 0, crc: 0 });
  chips[a].ports[pa] = i; chips[b].ports[pb] = i;
}
(function build() {
  let sw = 0;
  const groups = Math.ceil(COMPUTE_CABS / 3), leafCabs = Math.ceil(groups / 3), R = groups * 5;
  const bottom = [];
  for (let cab = 0; cab < COMPUTE_CABS; cab++) for (let h = 0; h < 4; h++) {
    const s = sw++, loc = { cabinet: cab, chassis: h, switch: s };
    const nm = (i) => `nrc-c${cab}-h${h}-s${s}-${i}`;
    const lower = [0, 1, 2, 3].map(i => addChip('nrc', 1, loc, nm(i), 24));
    const upper = [4, 5].map(i => addChip('nrc', 2, loc, nm(i), 24));
    for (let i = 0; i < 4; i++) {
      for (let n = 0; n < 8; n++) connect(addChip('nic', 0, loc, `nic${String(nics.length).padStart(5, '0')}`, 1), 0, lower[i], n);
      connect(lower[i], 8, upper[0], i); connect(lower[i], 9, upper[1], i);
    }
    bottom.push({ upper, group: Math.floor(cab / 3), idx: (cab % 3) * 4 + h });
  }
  const leafs = [];
  for (let g = 0; g < groups; g++) {
    leafs.push([]);
    for (let j = 0; j < 20; j++) {
      const s = sw++, cab = COMPUTE_CABS + Math.floor(g / 3);
      leafs[g].push(addChip('nrc', 3, { cabinet: cab, chassis: g % 3, switch: s }, `nrc-c${cab}-h${g % 3}-s${s}-0`, 24));
    }
  }
  for (const b of bottom) for (let u = 0; u < 20; u++) connect(b.upper[u % 2], 4 + Math.floor(u / 2), leafs[b.group][u], b.idx);
  const roots = [];
  for (let r = 0; r < R; r++) {
    const s = sw++, cab = COMPUTE_CABS + leafCabs + Math.floor(r / 30), h = Math.floor((r % 30) / 10);
    const nrcs = [0, 1, 2, 3, 4, 5].map(i => addChip('nrc', 4, { cabinet: cab, chassis: h, switch: s }, `nrc-c${cab}-h${h}-s${s}-${i}`, 24));
    let p = new Array(6).fill(8);
    for (let i = 0; i < 6; i++) for (let k = i + 1; k < 6; k++) connect(nrcs[i], p[i]++, nrcs[k], p[k]++);
    roots.push({ nrcs, next: 0 });
  }
  for (let g = 0; g < groups; g++) for (let j = 0; j < 20; j++) for (let u = 0; u < 12; u++) {
    const root = roots[(j * 12 + u) % R], k = root.next++;
    connect(leafs[g][j], 12 + u, root.nrcs[Math.floor(k / 8)], k % 8);
  }
})();
const linkState = (l) => (l.up ? 'up' : 'down');
const locText = (c) => `cabinet ${c.location.cabinet}/chassis ${c.location.chassis}/switch ${c.location.switch}`;

// ---- events --------------------------------------------------------------------------------
const events = [];
const sseClients = new Set();
const SEV = ['info', 'minor', 'major', 'critical'];
function emit(kind, fields) {
  const ev = { id: events.length + 1, time_us: Date.now() * 1000, kind, severity: 'info', location: '', chip: -1, port: -1,
    cause: '', detail: '', acknowledged: false, acknowledged_by: '', acknowledged_us: 0, ...fields };
  events.push(ev);
  const msg = `id: ${ev.id}\nevent: ${kind}\ndata: ${JSON.stringify(ev)}\n\n`;
  for (const res of sseClients) res.write(msg);
  return ev;
}
const unackedFaults = (chip) => events.filter(e => (e.kind === 'fault' || e.kind === 'alarm') && !e.acknowledged && (chip === undefined || e.chip === chip));
emit('log', { cause: 'daemon started', detail: `mock fabric: ${chips.length} chips, ${links.length} links` });

// ---- config --------------------------------------------------------------------------------
const ENGINES = [
  { name: 'fattree', doc: 'up*/down* fat-tree routing with destination-based spreading', parameters: [] },
  { name: 'minhop', doc: 'minimum-hop routing (may deadlock)', parameters: [] },
  { name: 'updown', doc: 'up*/down* from a root', parameters: [{ name: 'root', doc: 'root chip' }] },
];
const config = { routing_engine: 'fattree', scan_interval_s: 10, sweep_interval_s: 5, fault_mask: 0xffff };
const started = Date.now();
let scans = 0;

// ---- helpers -------------------------------------------------------------------------------
class HttpError extends Error { constructor(status, id, code, message) { super(message); Object.assign(this, { status, id, code }); } }
const bad = (id, msg) => new HttpError(400, id, 'bad_request', msg);
function resolveChip(ref) {
  const s = decodeURIComponent(String(ref ?? '')).trim();
  let id;
  if (/^\d+$/.test(s)) id = Number(s);
  else if (/^nic:\d+$/.test(s)) id = nics[Number(s.slice(4))];
  else id = byName.get(s);
  if (id === undefined || !chips[id]) throw new HttpError(404, 'E9404', 'not_found', `chip = '${s}' was not discovered`);
  return chips[id];
}
function chipSummary(c) {
  return { chip: c.chip, name: c.name, kind: c.kind, location: c.location, level: c.level, ports: c.ports.length, hops: c.kind === 'nic' ? 0 : c.level };
}
function portJson(c, p) {
  const li = c.ports[p];
  if (li < 0) return { port: p, peer: null, link: 'free', utilisation: 0, retransmissions_per_s: 0, counters: {} };
  const l = links[li], [pc, pp] = l.a === c.chip && l.pa === p ? [l.b, l.pb] : [l.a, l.pa];
  return { port: p, peer: { chip: pc, name: chips[pc].name, port: pp }, link: linkState(l),
    utilisation: l.up ? l.util : 0, retransmissions_per_s: l.up ? l.retr : 0,
    counters: { RETRANSMISSIONS: Math.round(l.retr * 100), CRC_ERRORS: l.crc, TX_FLITS: Math.round(l.util * 1e9) } };
}

// GET /api/topology
const KEYS = { physical: ['cabinet', 'chassis', 'switch', 'chip'], logical: ['level', 'switch', 'chip'] };
const val = (c, k) => (k === 'chip' ? c.chip : k === 'level' ? c.level : c.location[k]);
function topology(view, pathStr) {
  const keys = KEYS[view || 'physical'];
  if (!keys) throw bad('E9410', `view = '${view}' is not physical or logical`);
  const active = keys.filter(k => k === 'chip' || chips.some(c => val(c, k) !== undefined && val(c, k) >= 0));
  const parts = pathStr ? pathStr.split('/').filter(Boolean) : [];
  if (parts.length >= active.length) throw bad('E9411', `path = '${pathStr}' is deeper than the ${active.length - 1} group levels`);
  let sel = chips;
  const outPath = [];
  parts.forEach((p, i) => {
    const k = active[i], v = Number(p);
    sel = sel.filter(c => val(c, k) === v);
    if (!sel.length) throw new HttpError(404, 'E9412', 'not_found', `path = '${pathStr}': no ${k} ${p}`);
    outPath.push({ key: k, value: v, label: `${k} ${v}` });
  });
  const group = active[parts.length];
  const gOf = new Int32Array(chips.length).fill(-1);
  const nodes = new Map();
  for (const c of sel) {
    const g = val(c, group);
    gOf[c.chip] = g;
    let n = nodes.get(g);
    if (!n) {
      n = { id: String(g), label: group === 'chip' ? c.name : `${group} ${g}`, chips: 0, nics: 0, nrcs: 0, level: c.level,
        links: 0, links_down: 0, utilisation_max: 0, retransmissions_per_s: 0, faults: 0 };
      if (group === 'chip') { n.chip = c.chip; n.kind = c.kind; }
      nodes.set(g, n);
    }
    n.chips++; n[c.kind === 'nic' ? 'nics' : 'nrcs']++; n.level = Math.max(n.level, c.level);
  }
  for (const e of unackedFaults()) if (e.chip >= 0 && gOf[e.chip] >= 0) nodes.get(gOf[e.chip]).faults++;
  const edges = new Map();
  let outside = 0;
  for (const l of links) {
    const ga = gOf[l.a], gb = gOf[l.b];
    if (ga < 0 && gb < 0) continue;
    for (const g of ga === gb ? [ga] : [ga, gb]) {
      if (g < 0) continue;
      const n = nodes.get(g);
      n.links++; if (!l.up) n.links_down++;
      n.utilisation_max = Math.max(n.utilisation_max, l.util); n.retransmissions_per_s += l.retr;
    }
    if (ga < 0 || gb < 0) { outside++; continue; }
    if (ga === gb) continue;
    const key = ga < gb ? `${ga}|${gb}` : `${gb}|${ga}`;
    let e = edges.get(key);
    if (!e) edges.set(key, e = { a: String(Math.min(ga, gb)), b: String(Math.max(ga, gb)), links: 0, links_down: 0, utilisation_max: 0 });
    e.links++; if (!l.up) e.links_down++; e.utilisation_max = Math.max(e.utilisation_max, l.util);
  }
  return { view: view || 'physical', path: outPath, group, nodes: [...nodes.values()], edges: [...edges.values()], outside_links: outside };
}

// GET /api/trace: a BFS over the up links (the mock has no route tables)
function trace(srcRef, dstRef) {
  const s = resolveChip(srcRef), d = resolveChip(dstRef);
  if (s.kind !== 'nic' || d.kind !== 'nic') throw bad('E9420', `src/dst = '${s.kind !== 'nic' ? srcRef : dstRef}' is not a NIC`);
  const prev = new Map([[s.chip, null]]);
  const q = [s.chip];
  while (q.length && !prev.has(d.chip)) {
    const v = q.shift();
    chips[v].ports.forEach((li, p) => {
      if (li < 0 || !links[li].up) return;
      const l = links[li], [w, wp] = l.a === v && l.pa === p ? [l.b, l.pb] : [l.a, l.pa];
      if (prev.has(w) || (chips[w].kind === 'nic' && w !== d.chip)) return;
      prev.set(w, { v, p, wp }); q.push(w);
    });
  }
  const hopJson = (c, inPort, chosen) => ({ chip: c.chip, name: c.name, in_port: inPort, chosen, location: c.location, level: c.level });
  const ends = { src: { chip: s.chip, name: s.name }, dst: { chip: d.chip, name: d.name } };
  if (!prev.has(d.chip)) {
    const l = links[s.ports[0]], first = chips[l.a === s.chip ? l.b : l.a];
    return { ...ends, reachable: false, hops: [hopJson(first, l.a === s.chip ? l.pb : l.pa, -1)], failed_hop: 0, failure: 'no_route',
      reason: `no route to chip ${d.chip} at hop 0: chip ${first.chip} (${first.name}) has no usable output port` };
  }
  const chain = [];
  for (let w = d.chip; prev.get(w); w = prev.get(w).v) chain.unshift({ w, ...prev.get(w) });
  const hops = [];
  for (let i = 0; i < chain.length - 1; i++) hops.push(hopJson(chips[chain[i].w], chain[i].wp, chain[i + 1].p));
  return { ...ends, reachable: true, hops, failure: '', reason: '' };
}

const REGS = ['PEER_IDENT', 'LINK_STATE', 'HANDSHAKES', 'RETRANSMISSIONS', 'RETRANS_RATE', 'CRC_ERRORS', 'TX_FLITS', 'RX_FLITS', 'DIRTY_DISCARDS', 'TX_PACKETS'];
const lastStatus = new Map();
function status(c) {
  const prevRead = lastStatus.get(c.chip);
  const ports = c.ports.map((li, p) => {
    const l = li >= 0 ? links[li] : null;
    const old = prevRead?.ports[p]?.registers;
    const grow = (k, amt) => (old ? old[k] : 0) + (l && l.up ? Math.round(amt) : 0);
    return { port: p, registers: {
      PEER_IDENT: l ? (l.a === c.chip ? l.b : l.a) : 0, LINK_STATE: l ? (l.up ? 3 : 0) : 0, HANDSHAKES: old ? old.HANDSHAKES : 1,
      RETRANSMISSIONS: grow('RETRANSMISSIONS', rand() < 0.2 ? rand() * 5 : 0), RETRANS_RATE: l ? Math.round(l.retr) : 0,
      CRC_ERRORS: grow('CRC_ERRORS', rand() < 0.05 ? 1 : 0), TX_FLITS: grow('TX_FLITS', l ? l.util * 1e6 : 0),
      RX_FLITS: grow('RX_FLITS', l ? l.util * 1e6 : 0), DIRTY_DISCARDS: 0, TX_PACKETS: grow('TX_PACKETS', l ? l.util * 1e4 : 0) } };
  });
  const changes = [];
  if (prevRead) for (const p of ports) for (const k of REGS) {
    const o = prevRead.ports[p.port].registers[k], n = p.registers[k];
    if (o !== n) changes.push({ port: p.port, register: k, old: o, new: n, delta: n - o });
  }
  const now = Date.now();
  const r = { chip: c.chip, name: c.name, ports, changes, interval_s: prevRead ? (now - prevRead.at) / 1000 : 0 };
  lastStatus.set(c.chip, { ports, at: now });
  return r;
}

function traffic(group) {
  const keyOf = {
    chip: (c) => [c.chip, c.name], level: (c) => [c.level, `level ${c.level}`],
    cabinet: (c) => [c.location.cabinet, `cabinet ${c.location.cabinet}`],
    chassis: (c) => [`${c.location.cabinet}/${c.location.chassis}`, `cabinet ${c.location.cabinet}/chassis ${c.location.chassis}`],
    switch: (c) => [c.location.switch, `switch ${c.location.switch}`],
  }[group || 'switch'];
  if (!keyOf) throw bad('E9430', `group = '${group}' is not chip, switch, chassis, cabinet or level`);
  const cells = new Map();
  const add = (c, l) => {
    const [key, label] = keyOf(c);
    let x = cells.get(key);
    if (!x) cells.set(key, x = { key: String(key), label, utilisation_max: 0, utilisation_mean: 0, retransmissions_per_s: 0, crc_errors_per_s: 0, links_down: 0, n: 0 });
    x.utilisation_max = Math.max(x.utilisation_max, l.util); x.utilisation_mean += l.util; x.n++;
    x.retransmissions_per_s += l.retr; if (!l.up) x.links_down++;
  };
  for (const l of links) { add(chips[l.a], l); if (keyOf(chips[l.a])[0] !== keyOf(chips[l.b])[0]) add(chips[l.b], l); }
  return { group: group || 'switch', cells: [...cells.values()].map(({ n, ...x }) => ({ ...x, utilisation_mean: x.utilisation_mean / n })) };
}

function faultQuery(q, kinds) {
  let r = events.filter(e => !kinds || kinds.includes(e.kind));
  if (q.get('kind')) r = r.filter(e => e.kind === q.get('kind'));
  if (q.get('since_us')) r = r.filter(e => e.time_us >= Number(q.get('since_us')));
  if (q.get('until_us')) r = r.filter(e => e.time_us < Number(q.get('until_us')));
  if (q.get('location')) r = r.filter(e => e.location.toLowerCase().includes(q.get('location').toLowerCase()));
  if (q.get('min_severity')) {
    const m = SEV.indexOf(q.get('min_severity'));
    if (m < 0) throw bad('E9440', `min_severity = '${q.get('min_severity')}' is not info, minor, major or critical`);
    r = r.filter(e => SEV.indexOf(e.severity) >= m);
  }
  if (q.get('acknowledged')) r = r.filter(e => String(e.acknowledged) === q.get('acknowledged'));
  if (q.get('chip')) { const c = resolveChip(q.get('chip')); r = r.filter(e => e.chip === c.chip); }
  return r.slice().reverse().slice(0, Number(q.get('limit') || 1000));
}

// ---- HTTP ----------------------------------------------------------------------------------
const readBody = (req) => new Promise((ok, fail) => {
  let s = '';
  req.on('data', (d) => { s += d; if (s.length > 1 << 20) fail(new HttpError(413, 'E9413', 'too_large', 'body larger than 1 MiB')); });
  req.on('end', () => { try { ok(s ? JSON.parse(s) : {}); } catch { fail(bad('E9400', 'body is not JSON')); } });
});
function needToken(req) {
  const h = req.headers.authorization || '';
  if (h !== `Bearer ${TOKEN}`) throw new HttpError(401, 'E9401', 'unauthorized', `Authorization = '${h ? 'Bearer ***' : ''}' does not carry the daemon's token`);
}

const routes = [
  ['GET', /^\/api\/status$/, () => ({ fabric: `mock:${FABRIC}`, kind: 'sim', chips: chips.length, nics: nics.length, nrcs: chips.length - nics.length,
    links: links.length, links_down: links.filter(l => !l.up).length, uptime_s: (Date.now() - started) / 1000, sweeps: 0, scans,
    faults_unacknowledged: Object.fromEntries(SEV.map(s => [s, unackedFaults().filter(e => e.severity === s).length])), token_required: true })],
  ['GET', /^\/api\/config$/, () => ({ ...config, engines: ENGINES })],
  ['PUT', /^\/api\/config$/, async (req) => {
    needToken(req);
    const b = await readBody(req);
    if (b.routing_engine !== undefined && !ENGINES.some(e => e.name === b.routing_engine)) throw bad('E9450', `routing_engine = '${b.routing_engine}' is not a registered engine`);
    for (const k of ['scan_interval_s', 'sweep_interval_s']) if (b[k] !== undefined && !(Number(b[k]) >= 0)) throw bad('E9451', `${k} = '${b[k]}' is not a number >= 0`);
    for (const k of Object.keys(config)) if (b[k] !== undefined && b[k] !== config[k]) { emit('config_change', { cause: `${k} changed`, detail: `${config[k]} -> ${b[k]}` }); config[k] = b[k]; }
    return { ...config, engines: ENGINES };
  }],
  ['GET', /^\/api\/topology$/, (req, q) => topology(q.get('view'), q.get('path'))],
  ['GET', /^\/api\/chips$/, (req, q) => {
    let r = chips;
    if (q.get('kind')) r = r.filter(c => c.kind === q.get('kind'));
    if (q.get('q')) r = r.filter(c => c.name.includes(q.get('q')));
    const off = Number(q.get('offset') || 0), lim = Number(q.get('limit') || 100);
    return { total: r.length, offset: off, chips: r.slice(off, off + lim).map(chipSummary) };
  }],
  ['GET', /^\/api\/chips\/([^/]+)$/, (req, q, m) => { const c = resolveChip(m[1]); return { ...chipSummary(c), ports: c.ports.map((_, p) => portJson(c, p)), faults: unackedFaults(c.chip) }; }],
  ['GET', /^\/api\/chips\/([^/]+)\/status$/, (req, q, m) => status(resolveChip(m[1]))],
  ['GET', /^\/api\/chips\/([^/]+)\/registers\/([^/]+)$/, (req, q, m) => {
    const c = resolveChip(m[1]), a = decodeURIComponent(m[2]);
    const v = c.regs.get(a) ?? (a.toUpperCase() === 'SCRATCH' ? 0 : c.chip);
    return { register: a, value: v, value_hex: `0x${v.toString(16)}`, latency_us: 6.73 + rand() * 0.2, attempts: 1 };
  }],
  ['PUT', /^\/api\/chips\/([^/]+)\/registers\/([^/]+)$/, async (req, q, m) => {
    needToken(req);
    const c = resolveChip(m[1]), a = decodeURIComponent(m[2]), b = await readBody(req);
    const v = typeof b.value === 'string' ? Number(b.value) : b.value;
    if (!Number.isInteger(v) || v < 0) throw bad('E9460', `value = '${b.value}' is not an unsigned integer`);
    c.regs.set(a, v);
    emit('config_change', { chip: c.chip, location: locText(c), cause: 'register write', detail: `${a} = ${v}` });
    return { register: a, value: v, value_hex: `0x${v.toString(16)}`, latency_us: 6.5, attempts: 1 };
  }],
  ['GET', /^\/api\/trace$/, (req, q) => {
    if (!q.get('src') || !q.get('dst')) throw bad('E9421', 'src and dst are required');
    return trace(q.get('src'), q.get('dst'));
  }],
  ['GET', /^\/api\/traffic$/, (req, q) => traffic(q.get('group'))],
  ['GET', /^\/api\/faults$/, (req, q) => faultQuery(q, ['fault', 'alarm'])],
  ['POST', /^\/api\/faults\/(\d+)\/ack$/, async (req, q, m) => {
    needToken(req);
    const b = await readBody(req);
    const ev = events[Number(m[1]) - 1];
    if (!ev || (ev.kind !== 'fault' && ev.kind !== 'alarm')) throw new HttpError(404, 'E9470', 'not_found', `fault id = '${m[1]}' does not exist`);
    Object.assign(ev, { acknowledged: true, acknowledged_by: b.by || 'operator', acknowledged_us: Date.now() * 1000 });
    return ev;
  }],
  ['GET', /^\/api\/log$/, (req, q) => faultQuery(q, null)],
  ['POST', /^\/api\/inject$/, async (req) => {
    needToken(req);
    const b = await readBody(req);
    if (b.action !== 'link-down' && b.action !== 'link-up') throw bad('E9480', `action = '${b.action}' is not link-down or link-up`);
    const c = resolveChip(b.chip), p = Number(b.port);
    if (!(p >= 0 && p < c.ports.length) || c.ports[p] < 0) throw bad('E9481', `port = '${b.port}' is not a linked port of ${c.name}`);
    const l = links[c.ports[p]];
    l.up = b.action === 'link-up';
    setTimeout(() => emit('fault', { severity: l.up ? 'info' : 'major', chip: c.chip, port: p, location: `${locText(c)}/nrc ${c.chip} port ${p}`,
      cause: l.up ? 'link_up' : 'link_down', detail: `${c.name}:${p} ${l.up ? 'up' : 'down'} (injected)` }), 30 + rand() * 40);
    return { ok: true, chip: c.chip, port: p, link: linkState(l) };
  }],
];

const MIME = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8', '.json': 'application/json', '.png': 'image/png', '.svg': 'image/svg+xml' };

function send(res, status, obj) {
  const body = JSON.stringify(obj);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' });
  res.end(body);
}

const server = http.createServer(async (req, res) => {
  const u = new URL(req.url, 'http://x');
  try {
    if (u.pathname === '/api/events') {
      res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', Connection: 'keep-alive' });
      res.write('retry: 1000\n\n');
      const last = Number(req.headers['last-event-id'] || 0);
      if (last) for (const ev of events.filter(e => e.id > last)) res.write(`id: ${ev.id}\nevent: ${ev.kind}\ndata: ${JSON.stringify(ev)}\n\n`);
      sseClients.add(res);
      req.on('close', () => sseClients.delete(res));
      return;
    }
    if (u.pathname.startsWith('/api/')) {
      let known = false;
      for (const [method, re, fn] of routes) {
        const m = u.pathname.match(re);
        if (!m) continue;
        known = true;
        if (method !== req.method) continue;
        return send(res, 200, await fn(req, u.searchParams, m));
      }
      throw known ? new HttpError(405, 'E9405', 'method_not_allowed', `method = '${req.method}' is not allowed on ${u.pathname}`)
        : new HttpError(404, 'E9406', 'not_found', `route = '${u.pathname}' does not exist`);
    }
    const rel = u.pathname === '/' ? 'index.html' : decodeURIComponent(u.pathname).replace(/^\/+/, '');
    const file = path.resolve(WEB, rel);
    if (!file.startsWith(WEB + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) throw new HttpError(404, 'E9407', 'not_found', `file = '${u.pathname}' does not exist`);
    res.writeHead(200, { 'Content-Type': MIME[path.extname(file)] || 'application/octet-stream', 'Cache-Control': 'no-cache' });
    fs.createReadStream(file).pipe(res);
  } catch (e) {
    if (e instanceof HttpError) send(res, e.status, { error: { id: e.id, code: e.code, message: e.message } });
    else { console.error(e); send(res, 500, { error: { id: 'E9500', code: 'internal', message: String(e.message || e) } }); }
  }
});

// background: utilisation random walk; a scan summary every 10 s; SSE keep-alive
setInterval(() => { for (const l of links) l.util = Math.min(1, Math.max(0, l.util + (rand() - 0.5) * 0.05)); }, 2000).unref();
setInterval(() => { scans++; emit('scan_summary', { cause: 'status scan', detail: JSON.stringify({ scan: scans, chips: chips.length - nics.length }) }); }, 10000).unref();
setInterval(() => { for (const res of sseClients) res.write(': keep-alive\n\n'); }, 15000).unref();

server.listen(Number(PORT), HOST, () => {
  console.log(`mock galaxy nmd (DEVELOPMENT AID) on http://${HOST}:${PORT} — ${chips.length} chips (${nics.length} NICs), ${links.length} links; token ${TOKEN}`);
});
