// Shared helpers of the Galaxy console: DOM, the API client (token, error display), the live
// event bus fed by the server-sent events of /api/events, formatting.

export const $ = (sel, root = document) => root.querySelector(sel);
export const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];
export const tid = (id, root = document) => root.querySelector(`[data-testid="${id}"]`);

// el('td', {class: 'x', dataset: {id: 3}, onclick: f}, 'text', childNode)
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) if (c !== undefined && c !== null && c !== false) e.append(c instanceof Node ? c : String(c));
  return e;
}

// ---- token ----------------------------------------------------------------------------------
const TOKEN_KEY = 'galaxy.token';
export const getToken = () => localStorage.getItem(TOKEN_KEY) || '';
export const setToken = (t) => (t ? localStorage.setItem(TOKEN_KEY, t) : localStorage.removeItem(TOKEN_KEY));

// ---- messages -------------------------------------------------------------------------------
export function showMessage(text, kind = 'info', ttlMs = kind === 'error' ? 15000 : 4000) {
  const area = tid('message-area');
  const m = el('div', { class: `msg ${kind}`, 'data-testid': 'message', role: kind === 'error' ? 'alert' : 'status' });
  if (text instanceof Node) m.append(text); else m.textContent = text;
  m.append(el('button', { onclick: () => m.remove(), title: 'dismiss' }, '×'));
  area.prepend(m);
  while (area.children.length > 5) area.lastChild.remove();
  if (ttlMs) setTimeout(() => m.remove(), ttlMs);
  return m;
}

export class ApiError extends Error {
  constructor(status, err) {
    super(`${err.id || '-'} ${err.code || ''}: ${err.message || ''}`);
    this.status = status; this.error = err;
  }
}

export function showApiError(e, what) {
  if (e instanceof ApiError) {
    const err = e.error;
    showMessage(el('span', {}, `${what}: HTTP ${e.status} `, el('code', { 'data-testid': 'error-id' }, err.id || '-'),
      ` ${err.code || ''} — ${err.message || ''}`), 'error');
  } else {
    showMessage(`${what}: ${e.message || e}`, 'error');
  }
}

// api('GET', '/api/status'); writes carry the bearer token. Errors {error:{id,code,message}} are
// shown in the message area (unless quiet) and thrown as ApiError.
export async function api(method, path, body, { quiet = false } = {}) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  const what = `${method} ${path}`;
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    const err = new ApiError(0, { id: '-', code: 'network', message: String(e.message || e) });
    if (!quiet) showApiError(err, what);
    throw err;
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) {
    const err = new ApiError(res.status, (data && data.error) ||
      { id: '-', code: `http_${res.status}`, message: text.slice(0, 300) || res.statusText });
    if (!quiet) showApiError(err, what);
    throw err;
  }
  return data;
}

export const qs = (o) => {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(o)) if (v !== undefined && v !== null && v !== '') p.set(k, v);
  const s = p.toString();
  return s ? `?${s}` : '';
};

// ---- live events ----------------------------------------------------------------------------
// bus dispatches 'event' CustomEvents with detail = {kind, event} for every SSE message.
export const bus = new EventTarget();
export const EVENT_KINDS = ['fault', 'alarm', 'config_change', 'scan_summary', 'log'];

export function startEvents() {
  const body = document.body;
  const ind = tid('sse-state');
  // EventSource cannot send headers: a daemon that protects reads takes the token as a query.
  const token = getToken();
  const es = new EventSource(token ? `/api/events?access_token=${encodeURIComponent(token)}` : '/api/events');
  const seen = new Set();
  const handle = (kind) => (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch { ev = { detail: m.data }; }
    const id = ev.id ?? m.lastEventId;
    if (id !== undefined && id !== '') {
      if (seen.has(String(id))) return;
      seen.add(String(id));
      if (seen.size > 5000) seen.clear();
    }
    if (!ev.kind) ev.kind = kind;
    bus.dispatchEvent(new CustomEvent('event', { detail: { kind: ev.kind || kind, event: ev } }));
  };
  for (const k of EVENT_KINDS) es.addEventListener(k, handle(k));
  es.onmessage = handle('log');
  es.onopen = () => { body.dataset.sse = 'open'; ind.className = 'sse open'; ind.title = 'live events connected'; };
  es.onerror = () => {
    body.dataset.sse = es.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting';
    ind.className = 'sse error'; ind.title = 'live events: reconnecting';
  };
  return es;
}

// ---- formatting -----------------------------------------------------------------------------
const pad = (n, w = 2) => String(n).padStart(w, '0');
export function fmtTime(us) {
  if (us === undefined || us === null) return '';
  const d = new Date(Number(us) / 1000);
  if (Number.isNaN(d.getTime())) return String(us);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}
export const fmtNum = (v, digits = 3) => (typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toPrecision(digits)) : v ?? '');
export const fmtPct = (v) => (typeof v === 'number' ? `${(v * 100).toFixed(1)}%` : '');
export const SEVERITIES = ['info', 'minor', 'major', 'critical'];
export const sevRank = (s) => Math.max(0, SEVERITIES.indexOf(String(s)));

// The key/value grid used by side panels: obj -> <b>key</b><span>value</span>, nested flattened.
export function fillKv(container, obj, prefix = '') {
  if (!prefix) container.replaceChildren();
  for (const [k, v] of Object.entries(obj || {})) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === 'object' && !Array.isArray(v)) fillKv(container, v, key);
    else container.append(el('b', {}, key), el('span', { dataset: { key } },
      Array.isArray(v) ? (v.length > 8 ? `[${v.length} items]` : JSON.stringify(v)) : fmtNum(v, 4)));
  }
}

// Colour ramp for 0..1: dark blue -> cyan -> yellow -> red.
const RAMP = [[30, 60, 110], [40, 160, 190], [240, 210, 60], [230, 60, 50]];
export function ramp(t) {
  if (!(t >= 0)) t = 0;
  if (t > 1) t = 1;
  const x = t * (RAMP.length - 1), i = Math.min(RAMP.length - 2, Math.floor(x)), f = x - i;
  const c = RAMP[i].map((a, j) => Math.round(a + (RAMP[i + 1][j] - a) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

// Canvas sized to its CSS box at the device pixel ratio; returns {ctx, w, h} in CSS pixels.
export function fitCanvas(canvas) {
  const dpr = window.devicePixelRatio || 1;
  const w = Math.max(1, canvas.clientWidth), h = Math.max(1, canvas.clientHeight);
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr);
  }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  return { ctx, w, h };
}

// Chip references typed by the operator or taken from API objects.
export const chipRef = (c) => encodeURIComponent(String(c).trim());
