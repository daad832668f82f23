#!/usr/bin/env node
// End-to-end test of the Galaxy console against a RUNNING `galaxy nmd`.
//   GALAXY_NMD_URL=http://127.0.0.1:18080 GALAXY_NMD_TOKEN=... node e2e/console.e2e.mjs [--th2-load]
// env: GALAXY_E2E_SCREENSHOTS (directory, created), CHROMIUM (default /usr/bin/chromium),
//      GALAXY_E2E_MODE=th2-load (same as --th2-load: only the top-level load time, 3 runs, median).
// Checks: (a) topology renders; (b) an injected link-down shows up as a fault row within 2 s,
// live over SSE; (c) a path trace nic:0 -> last NIC is drawn; (d) after the load has run, a
// port's history plot has points and labelled axes; (e) BIST, EEPROM and discovery controls. Prints a JSON summary line;
// exits non-zero with a clear message on the first failure.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const BASE = (process.env.GALAXY_NMD_URL || '').replace(/\/+$/, '');
const TOKEN = process.env.GALAXY_NMD_TOKEN || '';
const SHOTS = path.resolve(process.env.GALAXY_E2E_SCREENSHOTS || path.join(os.tmpdir(), 'galaxy-e2e-screenshots'));
const TH2 = process.argv.includes('--th2-load') || process.env.GALAXY_E2E_MODE === 'th2-load';
const FAULT_LIMIT_MS = 2000, TH2_LIMIT_MS = 3000;

const checks = [];
let browser = null;

async function fail(msg) {
  console.error(`E2E FAILED: ${msg}`);
  console.log(JSON.stringify({ ok: false, error: msg, checks }));
  if (browser) await browser.close().catch(() => {});
  process.exit(1);
}

async function apiJson(method, p, body) {
  let res;
  try {
    res = await fetch(BASE + p, {
      method,
      headers: { Accept: 'application/json', ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...(TOKEN ? { Authorization: `Bearer ${TOKEN}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new Error(`${method} ${p}: daemon unreachable at ${BASE} (${e.cause?.code || e.message})`);
  }
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${p} -> HTTP ${res.status}: ${text.slice(0, 300)}`);
  try { return text ? JSON.parse(text) : null; } catch { throw new Error(`${method} ${p}: answer is not JSON: ${text.slice(0, 200)}`); }
}
const listOf = (r, ...keys) => (Array.isArray(r) ? r : keys.map(k => r?.[k]).find(Array.isArray) || []);

async function check(name, fn) {
  const t0 = performance.now();
  try {
    const extra = await fn();
    const rec = { name, ms: Math.round(performance.now() - t0), ...(extra || {}) };
    checks.push(rec);
    console.log(`ok  ${name} (${rec.ms} ms)`);
  } catch (e) {
    await fail(`${name}: ${e.message}`);
  }
}

async function waitFor(page, what, fn, arg, timeout) {
  try {
    return await page.waitForFunction(fn, arg, { timeout, polling: 10 });
  } catch (e) {
    throw new Error(`timed out after ${timeout} ms waiting for ${what}`);
  }
}

const shot = async (page, file) => { await page.screenshot({ path: path.join(SHOTS, file) }); return path.join(SHOTS, file); };

async function newPage() {
  const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  if (TOKEN) await ctx.addInitScript((t) => localStorage.setItem('galaxy.token', t), TOKEN);
  const page = await ctx.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(String(e.message || e)));
  return page;
}

const topologyReady = () => Number(document.body.dataset.topologyReady) > 0;

async function main() {
  if (!BASE) await fail('GALAXY_NMD_URL is not set (e.g. http://127.0.0.1:18080)');
  fs.mkdirSync(SHOTS, { recursive: true });
  try {
    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking'],
    });
  } catch (e) { await fail(`cannot start Chromium: ${e.message.split('\n')[0]}`); }

  if (TH2) {
    const runs = [];
    for (let i = 0; i < 3; i++) {
      const page = await newPage();
      const t0 = performance.now();
      try { await page.goto(`${BASE}/#topology`, { waitUntil: 'commit', timeout: 30000 }); } catch (e) { await fail(`th2-load: cannot open ${BASE}/: ${e.message.split('\n')[0]}`); }
      try { await waitFor(page, 'body[data-topology-ready] > 0', topologyReady, null, 30000); } catch (e) { await fail(`th2-load run ${i + 1}: ${e.message}`); }
      const inPage = await page.evaluate(() => window.galaxyConsole?.topology?.readyMs);
      const ms = Math.round(typeof inPage === 'number' ? inPage : performance.now() - t0);  // from navigation start
      const nodes = await page.evaluate(() => document.body.dataset.topologyReady);
      console.log(`th2-load run ${i + 1}: ${ms} ms (${nodes} nodes)`);
      runs.push(ms);
      if (i === 0) await shot(page, 'th2-topology.png');
      await page.context().close();
    }
    const median = [...runs].sort((a, b) => a - b)[1];
    console.log(JSON.stringify({ th2_topology_load_ms: median, runs }));
    checks.push({ name: 'th2_topology_load', ms: median });
    if (median > TH2_LIMIT_MS) await fail(`th2-load: median ${median} ms > ${TH2_LIMIT_MS} ms`);
    await browser.close();
    console.log(JSON.stringify({ ok: true, checks }));
    return;
  }

  const page = await newPage();

  // (a) the topology view renders
  await check('topology_renders', async () => {
    await page.goto(`${BASE}/#topology`, { timeout: 20000 }).catch(e => { throw new Error(`cannot open ${BASE}/: ${e.message.split('\n')[0]}`); });
    await waitFor(page, 'body[data-topology-ready] > 0 (topology canvas drawn)', topologyReady, null, 15000);
    const nodes = await page.evaluate(() => Number(document.body.dataset.topologyReady));
    const file = await shot(page, 'topology.png');
    return { nodes, screenshot: file };
  });

  // (a2) the header names this server's role among the fabric's servers (a lone one: master)
  await check('header_shows_sm_role', async () => {
    await waitFor(page, 'the header pill to name the role', () =>
      /master \(0 standby\)/.test(document.querySelector('[data-testid="header-status"]')?.textContent || ''), null, 10000);
    return {};
  });

  // (b) an injected link fault reaches the fault view live (SSE) within 2 s
  await check('fault_live_within_2s', async () => {
    await page.click('[data-testid="tab-faults"]');
    await waitFor(page, 'the fault table to load (body[data-faults-ready])', () => document.body.dataset.faultsReady !== undefined, null, 10000);
    await waitFor(page, 'the live event stream to connect (body[data-sse=open])', () => document.body.dataset.sse === 'open', null, 10000);
    const nrc = listOf(await apiJson('GET', '/api/chips?kind=nrc&limit=1'), 'chips', 'items')[0];
    if (!nrc) throw new Error('GET /api/chips?kind=nrc&limit=1 returned no chip');
    const chipId = nrc.chip ?? nrc.id;
    const detail = await apiJson('GET', `/api/chips/${encodeURIComponent(chipId)}`);
    const ports = listOf(detail, 'ports');
    const linked = ports.filter(p => p.link === 'up' && p.peer && p.peer.chip !== undefined);
    if (!linked.length) throw new Error(`chip ${chipId} has no linked port (link up, with a peer) in GET /api/chips/${chipId}`);
    // prefer a link to another NRC, so that no NIC (e.g. nic:0 of the trace check) is cut off
    let port = linked[0];
    for (const p of linked) {
      const peer = await apiJson('GET', `/api/chips/${encodeURIComponent(p.peer.chip)}`).catch(() => null);
      if (peer && peer.kind === 'nrc') { port = p; break; }
    }
    const known = await page.$$eval('[data-testid="fault-row"]', rows => rows.map(r => r.dataset.id));
    await apiJson('POST', '/api/inject', { action: 'link-down', chip: chipId, port: port.port });
    const t0 = performance.now();
    let ms;
    try {
      await waitFor(page, 'a new fault row', (k) => [...document.querySelectorAll('[data-testid="fault-row"]')].some(r => !k.includes(r.dataset.id)), known, 5000);
      ms = Math.round(performance.now() - t0);
    } catch (e) {
      throw new Error(`no fault/alarm row appeared within 5 s of POST /api/inject link-down chip ${chipId} port ${port.port}`);
    }
    const row = await page.evaluate((k) => {
      const r = [...document.querySelectorAll('[data-testid="fault-row"]')].find(x => !k.includes(x.dataset.id));
      return r ? r.innerText.replace(/\s+/g, ' ').trim() : '';
    }, known);
    console.log(`fault row appeared ${ms} ms after the injection response: ${row}`);
    const file = await shot(page, 'faults.png');
    // put the link back (best effort) so the fabric is as it was
    await apiJson('POST', '/api/inject', { action: 'link-up', chip: chipId, port: port.port }).catch(e => console.warn(`warning: link-up failed: ${e.message}`));
    if (ms > FAULT_LIMIT_MS) throw new Error(`the fault row appeared after ${ms} ms > ${FAULT_LIMIT_MS} ms`);
    return { fault_ms: ms, chip: chipId, port: port.port, row, screenshot: file };
  });

  // (c) a path trace nic:0 -> the last NIC is drawn over the topology
  await check('trace_drawn', async () => {
    const r = await apiJson('GET', '/api/chips?kind=nic&limit=1');
    let total = r && !Array.isArray(r) ? (r.total ?? r.count) : undefined;
    if (typeof total !== 'number') total = listOf(await apiJson('GET', '/api/chips?kind=nic&limit=1000000'), 'chips', 'items').length;
    if (!(total >= 2)) throw new Error(`the fabric has ${total} NICs; need 2`);
    const dst = `nic:${total - 1}`;
    await page.click('[data-testid="tab-topology"]');
    await waitFor(page, 'body[data-topology-ready] > 0', topologyReady, null, 10000);
    await page.fill('[data-testid="trace-src"]', 'nic:0');
    await page.fill('[data-testid="trace-dst"]', dst);
    await page.click('[data-testid="trace-run"]');
    await waitFor(page, 'body[data-trace-drawn] (trace drawn)', () => document.body.dataset.traceDrawn !== undefined, null, 15000);
    const t = await page.evaluate(() => window.galaxyConsole.trace);
    const hops = await page.$$eval('[data-testid="trace-hop"]', l => l.length);
    const file = await shot(page, 'trace.png');
    if (!t || !Array.isArray(t.points) || t.points.length < 2) throw new Error(`trace nic:0 -> ${dst}: ${t?.points?.length ?? 0} points drawn (< 2); reachable=${t?.reachable} ${t?.reason ?? ''}`);
    if (!t.reachable) console.warn(`warning: trace nic:0 -> ${dst} is unreachable: ${t.failure} ${t.reason}`);
    return { dst, hops, points: t.points.length, reachable: t.reachable, screenshot: file };
  });

  // (d) a port's history plot after the load has run: points, both axes labelled, values > 0
  await check('history_plot', async () => {
    // Rates need two scans; the history has a point from the second on.
    for (let i = 0; i < 3; i++) await apiJson('POST', '/api/scans', {});
    const nrc = listOf(await apiJson('GET', '/api/chips?kind=nrc&limit=1'), 'chips', 'items')[0];
    const chipId = nrc.chip ?? nrc.id;
    const detail = await apiJson('GET', `/api/chips/${encodeURIComponent(chipId)}`);
    const port = listOf(detail, 'ports').find(p => p.link === 'up' && p.peer && p.peer.chip !== undefined);
    if (!port) throw new Error(`chip ${chipId} has no linked port`);
    const h = await apiJson('GET', `/api/history?chip=${encodeURIComponent(chipId)}&port=${port.port}`);
    const util = h.series.find(s => s.name === 'utilisation');
    if (!util || util.points.length < 2) throw new Error(`GET /api/history chip ${chipId} port ${port.port}: ${util?.points.length ?? 0} utilisation points after 3 scans (< 2)`);
    if (!util.points.some(p => p[1] > 0)) throw new Error(`chip ${chipId} port ${port.port}: utilisation 0 at every point though the load runs`);
    await page.goto(`${BASE}/#history/${encodeURIComponent(chipId)}:${port.port}`, { timeout: 20000 });
    await waitFor(page, 'body[data-history-points] >= 2 (history plot drawn)', () => Number(document.body.dataset.historyPoints) >= 2, null, 15000);
    const d = await page.evaluate(() => window.galaxyConsole.history);
    const xl = await page.$eval('[data-testid="history-xlabel"]', e => e.textContent);
    const yl = await page.$eval('[data-testid="history-ylabel"]', e => e.textContent);
    const xt = await page.$$eval('[data-testid="history-xtick"]', l => l.map(e => e.textContent));
    const yt = await page.$$eval('[data-testid="history-ytick"]', l => l.map(e => e.textContent));
    const circles = await page.$$eval('[data-testid="history-point"]', l => l.length);
    // Every point inside the plot's frame (an axis that does not hold the values draws them off it).
    const outside = await page.$eval('[data-testid="history-plot"]', (svg) => {
      const vb = svg.viewBox.baseVal;
      return [...svg.querySelectorAll('[data-testid="history-point"]')].filter(c => {
        const x = Number(c.getAttribute('cx')), y = Number(c.getAttribute('cy'));
        return !(x >= 0 && x <= vb.width && y >= 0 && y <= vb.height);
      }).length;
    });
    const file = await shot(page, 'history.png');
    if (d.scope !== 'port' || d.series !== 'utilisation') throw new Error(`plot shows ${d.scope} ${d.series}, not the port's utilisation`);
    if (circles < 2 || circles !== d.points) throw new Error(`${circles} points drawn, the view counted ${d.points}`);
    if (outside) throw new Error(`${outside} of ${circles} points drawn outside the plot`);
    if (!/time/.test(xl) || !/utilisation/.test(yl)) throw new Error(`axis labels '${xl}' / '${yl}'`);
    if (xt.length < 1 || yt.length < 2 || yt.some(t => !/%$/.test(t))) throw new Error(`ticks x [${xt}] y [${yt}]`);
    return { chip: chipId, port: port.port, points: circles, x_label: xl, y_label: yl, screenshot: file };
  });

  // (e) the device view's controls: a BIST of one port, an EEPROM read; a discovery sweep
  await check('device_controls', async () => {
    await page.goto(`${BASE}/#device/0`, { timeout: 20000 });
    await waitFor(page, 'body[data-device-ready] (device opened)', () => document.body.dataset.deviceReady === '0', null, 10000);
    const port = await page.$eval('[data-testid="port-row"][data-link="up"]', r => r.dataset.port);
    await page.fill('[data-testid="bist-port"]', port);
    await page.click('[data-testid="bist-run"]');
    await waitFor(page, 'body[data-bist-done] (BIST answered)', () => document.body.dataset.bistDone !== undefined, null, 10000);
    const bist = await page.$$eval('[data-testid="bist-link"]', l => l.map(e => e.textContent));
    if (bist.length !== 1 || !/pass/.test(bist[0])) throw new Error(`BIST of port ${port}: ${JSON.stringify(bist)}`);
    await page.fill('[data-testid="eeprom-count"]', '8');
    await page.click('[data-testid="eeprom-read"]');
    await waitFor(page, 'body[data-eeprom-read] (EEPROM read)', () => document.body.dataset.eepromRead !== undefined, null, 10000);
    const eeprom = await page.$eval('[data-testid="eeprom-result"]', e => e.textContent);
    if (!/^8 bytes from 0x0000: ([0-9a-f]{2} ){7}[0-9a-f]{2}/.test(eeprom)) throw new Error(`EEPROM read shows '${eeprom}'`);
    // The out-of-band path: the chip's temperature from its monitor board, over I2C.
    await page.click('[data-testid="oob-temperature"]');
    await waitFor(page, 'body[data-oob-done] (monitor board answered)', () => document.body.dataset.oobDone === 'temperature', null, 10000);
    const oob = await page.$eval('[data-testid="oob-result"]', e => e.textContent);
    const celsius = Number((/temperature: ([0-9.]+) °C/.exec(oob) || [])[1]);
    if (!(celsius > 25 && celsius < 85) || !/I2C bus [0-9.]+ us/.test(oob)) throw new Error(`out-of-band temperature shows '${oob}'`);
    await page.click('[data-testid="tab-topology"]');
    await page.click('[data-testid="topo-discover"]');
    await waitFor(page, 'body[data-discovered] (discovery answered)', () => document.body.dataset.discovered !== undefined, null, 10000);
    return { bist: bist[0], eeprom, oob };
  });

  // (f) the traffic heat map with its legend's unit
  await check('heatmap_units', async () => {
    await page.click('[data-testid="tab-traffic"]');
    await waitFor(page, 'body[data-traffic-ready] > 0 (heat map drawn)', () => Number(document.body.dataset.trafficReady) > 0, null, 10000);
    await page.selectOption('[data-testid="traffic-metric"]', 'retransmissions_per_s');
    const t = await page.evaluate(() => window.galaxyConsole.traffic);
    if (t.metric !== 'retransmissions_per_s' || t.unit !== 'per second') throw new Error(`heat map legend: ${JSON.stringify(t)}`);
    return { cells: t.cells, screenshot: await shot(page, 'traffic.png') };
  });

  if (page.errors.length) await fail(`uncaught errors in the page: ${page.errors.slice(0, 3).join(' | ')}`);
  await browser.close();
  console.log(JSON.stringify({ ok: true, checks }));
}

main().catch((e) => fail(e.stack || String(e)));
