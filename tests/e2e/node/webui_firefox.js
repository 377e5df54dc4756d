// tests/e2e/node/webui_firefox.js: the web console (src/server/webui/) in Debian's Firefox ESR,
// driven over WebDriver BiDi (Firefox's own remote protocol: --remote-debugging-port, a
// WebSocket, JSON commands; no geckodriver, no browser download). playwright-core's Firefox
// support needs a patched Firefox or BiDi commands ESR lacks, so this speaks BiDi itself with
// the `ws` package (pinned in package-lock.json).
//
// The Chromium test (webui_browser.js) covers every page in depth; this one checks that the
// console works in the second engine: log in (a wrong password is refused on screen, then the
// right one), the overview lists the collection, the data browser pages rows whose hostile tag
// values show as text (no element made from them, window.__xss stays undefined), a bad filter
// gets its caret, the collection page shows the schema, a search by a stored id answers with the
// row first and the recall check over FLAT gives 1, a bench result opened from the disk draws
// its 6 series, the metrics page draws its latency
// chart with 3 series, the overview at 400 px does not scroll sideways, and no error reached
// the console (console.error or an uncaught exception). Screenshots: firefox-*.png in
// $SX_SCREENSHOT_DIR.
//
//   SX_URL=http://127.0.0.1:PORT SX_USER=root SX_PASS=... node webui_firefox.js
'use strict';
const { check, failures } = require('./checks');
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const WebSocket = require('ws');

const base = process.env.SX_URL;
const user = process.env.SX_USER || 'root';
const pass = process.env.SX_PASS || '';
const firefox = process.env.SX_FIREFOX || '/usr/bin/firefox-esr';
const shots = process.env.SX_SCREENSHOT_DIR || '';
const auth = { Authorization: `Bearer ${user}:${pass}`, 'Content-Type': 'application/json' };
const BENCH = path.resolve(__dirname, '../data/bench/fmnist_demo.json');
const HOSTILE = ['<img src=x onerror="window.__xss=1">', '"><script>window.__xss=2</script>'];

async function api(route, body) {
  const r = await fetch(`${base}${route}`, { method: 'POST', headers: auth, body: JSON.stringify(body) });
  const j = await r.json();
  if (j.code !== 0) throw new Error(`${route}: ${JSON.stringify(j)}`);
  return j.data;
}

async function seed() {
  await api('/v2/vectordb/collections/create', {
    collectionName: 'ff_demo',
    schema: {
      fields: [
        { fieldName: 'id', dataType: 'Int64', isPrimary: true },
        { fieldName: 'vec', dataType: 'FloatVector', elementTypeParams: { dim: 8 } },
        { fieldName: 'tag', dataType: 'VarChar', elementTypeParams: { max_length: 64 } },
      ],
    },
    indexParams: [{ fieldName: 'vec', indexName: 'vec', metricType: 'L2', indexType: 'FLAT' }],
  });
  const data = [];
  for (let i = 0; i < 200; i++) {
    const vec = [];
    for (let d = 0; d < 8; d++) vec.push(Math.sin(i * 7 + d));
    data.push({ id: i, vec, tag: i < 2 ? HOSTILE[i] : `t${i % 5}` });
  }
  await api('/v2/vectordb/entities/insert', { collectionName: 'ff_demo', data });
}

// ------------------------------------------------------------------ BiDi

class Bidi {
  constructor(ws) {
    this.ws = ws;
    this.id = 0;
    this.pending = new Map();
    this.logs = [];
    ws.on('message', (m) => {
      const j = JSON.parse(m);
      if (j.id !== undefined && this.pending.has(j.id)) {
        const { res, rej } = this.pending.get(j.id);
        this.pending.delete(j.id);
        if (j.type === 'error') rej(new Error(`${j.error}: ${j.message}`));
        else res(j.result);
      } else if (j.method === 'log.entryAdded') {
        this.logs.push(j.params);
      }
    });
  }
  send(method, params) {
    return new Promise((res, rej) => {
      const id = ++this.id;
      this.pending.set(id, { res, rej });
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }
}

async function launch() {
  const prof = fs.mkdtempSync(path.join(os.tmpdir(), 'sx-ff-'));
  // no update checks, telemetry or captive-portal probes on a machine without network
  fs.writeFileSync(path.join(prof, 'user.js'), [
    'user_pref("app.update.enabled", false);',
    'user_pref("network.captive-portal-service.enabled", false);',
    'user_pref("network.connectivity-service.enabled", false);',
    'user_pref("datareporting.policy.dataSubmissionEnabled", false);',
    'user_pref("toolkit.telemetry.enabled", false);',
    'user_pref("browser.safebrowsing.malware.enabled", false);',
    'user_pref("browser.safebrowsing.phishing.enabled", false);',
    'user_pref("extensions.update.enabled", false);',
    'user_pref("browser.shell.checkDefaultBrowser", false);',
  ].join('\n'));
  const ff = spawn(firefox, ['--headless', '--no-remote', '--profile', prof,
    '--remote-debugging-port=0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const url = await new Promise((res, rej) => {
    let buf = '';
    const on = (d) => {
      buf += d;
      const m = buf.match(/WebDriver BiDi listening on (ws:\/\/\S+)/);
      if (m) res(m[1]);
    };
    ff.stderr.on('data', on);
    ff.stdout.on('data', on);
    ff.on('exit', (c) => rej(new Error(`firefox exited (${c}): ${buf.slice(-800)}`)));
    setTimeout(() => rej(new Error(`no BiDi endpoint after 60 s: ${buf.slice(-800)}`)), 60000);
  });
  const ws = new WebSocket(`${url}/session`);
  await new Promise((res, rej) => { ws.on('open', res); ws.on('error', rej); });
  const b = new Bidi(ws);
  await b.send('session.new', { capabilities: {} });
  await b.send('session.subscribe', { events: ['log.entryAdded'] });
  const tree = await b.send('browsingContext.getTree', {});
  b.ctx = tree.contexts[0].context;
  b.close = async () => {
    try { await b.send('session.end', {}); } catch { /* already gone */ }
    ws.close();
    ff.kill('SIGKILL');
    fs.rmSync(prof, { recursive: true, force: true });
  };
  return b;
}

// Evaluates an expression (a string; awaited) in the page; returns its JSON-able value.
async function ev(b, expr) {
  const r = await b.send('script.evaluate', {
    expression: `(async () => JSON.stringify(await (async () => (${expr}))()))()`,
    target: { context: b.ctx }, awaitPromise: true,
  });
  if (r.type !== 'success') throw new Error(`evaluate ${expr}: ${JSON.stringify(r.exceptionDetails)}`);
  return r.result.value === undefined ? undefined : JSON.parse(r.result.value);
}

async function waitFor(b, expr, what, ms = 20000) {
  const end = Date.now() + ms;
  for (;;) {
    let v;
    try { v = await ev(b, expr); } catch { v = false; }
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}

async function shot(b, name) {
  if (!shots) return;
  const r = await b.send('browsingContext.captureScreenshot', { context: b.ctx });
  fs.mkdirSync(shots, { recursive: true });
  fs.writeFileSync(path.join(shots, name), Buffer.from(r.data, 'base64'));
}

const T = (id) => `document.querySelector('[data-testid="${id}"]')`;
// Sets an input's value as typing would (input and change events).
const type = (id, v) => `(() => { const e = ${T(id)}; e.value = ${JSON.stringify(v)};
  e.dispatchEvent(new Event('input', { bubbles: true }));
  e.dispatchEvent(new Event('change', { bubbles: true })); return true; })()`;
const click = (id) => `(${T(id)}.click(), true)`;

async function main() {
  if (!base) {
    console.log('usage: SX_URL=http://127.0.0.1:PORT SX_USER=root SX_PASS=... node webui_firefox.js');
    process.exit(2);
  }
  await seed();
  const b = await launch();
  try {
    await b.send('browsingContext.setViewport', { context: b.ctx, viewport: { width: 1280, height: 900 } });
    await b.send('browsingContext.navigate', { context: b.ctx, url: `${base}/webui/`, wait: 'complete' });
    await waitFor(b, `!!${T('login-form')}`, 'the log-in form');
    await ev(b, type('login-user', user));
    await ev(b, type('login-password', 'wrong-password'));
    await ev(b, click('login-submit'));
    const err = await waitFor(b, `${T('login-error')} && ${T('login-error')}.textContent.trim()`, 'the log-in error');
    check(err.length > 0, 'a wrong password is refused on screen', err);
    await ev(b, type('login-password', pass));
    await ev(b, click('login-submit'));
    const listed = await waitFor(b, `${T('overview-collections')} &&
      ${T('overview-collections')}.textContent.includes('ff_demo')`, 'the overview listing ff_demo');
    check(listed, 'the overview lists the collection');
    await shot(b, 'firefox-overview.png');

    await b.send('browsingContext.navigate', { context: b.ctx, url: `${base}/webui/#/data/default/ff_demo`, wait: 'complete' });
    const nrows = await waitFor(b, `${T('data-rows')} && ${T('data-rows')}.querySelectorAll('tbody tr').length`, 'data rows');
    check(nrows === 20, 'the data browser shows a page of 20 rows', nrows);
    const first = await ev(b, `${T('data-rows')}.querySelector('tbody tr').dataset.id`);
    await ev(b, click('data-next'));
    const moved = await waitFor(b, `${T('data-rows')}.querySelector('tbody tr') &&
      ${T('data-rows')}.querySelector('tbody tr').dataset.id !== ${JSON.stringify(first)}`, 'the next page');
    check(moved, 'Next shows other rows');
    await ev(b, type('filter-input', 'id in [0, 1]'));
    await ev(b, click('filter-apply'));
    const texts = await waitFor(b, `(() => { const t = ${T('data-rows')};
      const s = t ? t.textContent : ''; return s.includes('onerror') && s.includes('</script>') ? s : false; })()`,
    'the hostile rows');
    check(HOSTILE.every((h) => texts.includes(h)), 'hostile values are shown as text', texts.slice(0, 200));
    const injected = await ev(b, `({ xss: window.__xss === undefined ? null : window.__xss,
      imgs: ${T('data-rows')}.querySelectorAll('img').length,
      scripts: document.querySelectorAll('script').length })`);
    check(injected.xss === null && injected.imgs === 0 && injected.scripts === 1,
      'no element or script was made from them', injected);
    await ev(b, type('filter-input', 'id > '));
    await ev(b, click('filter-apply'));
    const caret = await waitFor(b, `${T('filter-caret')} && ${T('filter-caret')}.textContent`, 'the filter caret');
    check(/\^/.test(caret), 'a bad filter shows a caret at the parser\'s position', caret);
    await shot(b, 'firefox-data.png');

    await b.send('browsingContext.navigate', { context: b.ctx, url: `${base}/webui/#/collection/default/ff_demo`, wait: 'complete' });
    const schema = await waitFor(b, `${T('schema')} && ${T('schema')}.textContent.includes('FloatVector') && ${T('schema')}.textContent`, 'the schema');
    check(schema.includes('tag') && schema.includes('VarChar'), 'the collection page shows the schema');

    // search by a stored row, then the recall check: FLAT is exact, so recall@10 must be 1
    await b.send('browsingContext.navigate', { context: b.ctx, url: `${base}/webui/#/search/default/ff_demo`, wait: 'complete' });
    await waitFor(b, `!!${T('search-id')}`, 'the search form');
    await ev(b, type('search-id', '7'));
    await ev(b, click('search-run'));
    const hits = await waitFor(b, `${T('search-results')} && [...${T('search-results')}.querySelectorAll('tbody tr')].map((r) => r.dataset.id)`,
      'the search results');
    check(hits.length === 10 && hits[0] === '7', 'a search by a stored id gives 10 hits, the row itself first', hits);
    await ev(b, type('recall-queries', '5'));
    await ev(b, click('recall-run'));
    const recall = await waitFor(b, `${T('recall-value')} && ${T('recall-value')}.dataset.recall`, 'the recall value', 30000);
    check(Number(recall) === 1, 'check recall over FLAT gives recall@10 = 1', recall);
    await shot(b, 'firefox-search.png');

    // a sextant bench result opened from the disk (input.setFiles): one series per engine
    // and thread count, as the Chromium test counts them
    await b.send('browsingContext.navigate', { context: b.ctx, url: `${base}/webui/#/bench`, wait: 'complete' });
    await waitFor(b, `!!${T('bench-file')}`, 'the bench file input');
    const node = await b.send('script.evaluate', {
      expression: `document.querySelector('[data-testid="bench-file"]')`,
      target: { context: b.ctx }, awaitPromise: false,
    });
    await b.send('input.setFiles', { context: b.ctx, element: { sharedId: node.result.sharedId }, files: [BENCH] });
    const nser = await waitFor(b, `${T('bench-chart')} && ${T('bench-chart')}.querySelectorAll('path.series').length`,
      'the bench chart', 30000);
    check(nser === 6, 'a bench result from the disk draws 6 series (3 engines x 1 and 2 threads)', nser);
    await shot(b, 'firefox-bench.png');

    await b.send('browsingContext.navigate', { context: b.ctx, url: `${base}/webui/#/metrics`, wait: 'complete' });
    const series = await waitFor(b, `${T('chart-latency')} &&
      ${T('chart-latency')}.querySelectorAll('path.series').length >= 3 &&
      ${T('chart-latency')}.querySelectorAll('path.series').length`, 'the latency chart', 30000);
    check(series === 3, 'the latency chart draws p50, p95 and p99', series);
    await shot(b, 'firefox-metrics.png');

    await b.send('browsingContext.setViewport', { context: b.ctx, viewport: { width: 400, height: 800 } });
    await b.send('browsingContext.navigate', { context: b.ctx, url: `${base}/webui/#/overview`, wait: 'complete' });
    await waitFor(b, `${T('overview-collections')} && ${T('overview-collections')}.textContent.includes('ff_demo')`, 'the narrow overview');
    const widths = await ev(b, `({ sw: document.documentElement.scrollWidth, cw: document.documentElement.clientWidth })`);
    check(widths.sw <= widths.cw, 'at 400 px the page does not scroll sideways', widths);
    await shot(b, 'firefox-narrow.png');

    const errors = b.logs.filter((l) => l.level === 'error');
    check(errors.length === 0, 'no error reached the console', errors.map((e) => e.text).slice(0, 5));
  } finally {
    await b.close();
  }
  console.log(failures() ? `${failures()} check(s) failed` : 'all checks passed');
  process.exit(failures() ? 1 : 0);
}

main().catch((e) => {
  console.log(`FAIL ${e.stack || e}`);
  process.exit(1);
});
