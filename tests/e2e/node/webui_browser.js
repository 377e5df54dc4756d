// tests/e2e/node/webui_browser.js: the web console (src/server/webui/, docs/internals/WEBUI.md)
// driven by a real browser against a running `sextant serve`. run_webui_browser.sh starts the
// server (users root:Milvus read-write and viewer:viewpass read-only) and runs this with
// SX_WEBUI_URL=http://127.0.0.1:PORT. Debian's Chromium (/usr/bin/chromium) through
// playwright-core, headless, with the flags a machine without network needs; no browser is ever
// downloaded.
//
// The data is made through the REST API from node (fetch), not through the page: a collection
// webui_demo (id Int64 primary key, vec FloatVector dim 32, tag VarChar(64), n Int64) with 3,000
// rows, some of whose tags are hostile HTML, flushed, then given an HNSW index so that a build
// runs while the collection page watches. Then, at 1280 x 900:
//   - a wrong password is refused on the log-in view (the error shown), root gets in;
//   - the overview lists webui_demo; its page shows the index build reach Finished with its rows
//     (and, when the build is slow enough to be seen, an intermediate state);
//   - Load through the page; the data browser pages (Next changes the first row id), shows the
//     hostile tags as literal text, gets a row by id, draws a caret under the parser's position
//     for `n > ` and `tag = `, and deletes one row after the in-page confirmation naming 1 row;
//   - the search playground finds k rows for a stored id, and "check recall" over 10 random
//     stored rows gives recall@10 >= 0.9 (HNSW, ef 64, against the exact scan);
//   - keyboard only, in a second browser (fresh context): Tab to the log-in fields, type, Enter;
//     Tab/Enter through the overview's collection link and the Data and Search links; a search
//     run with Space on its button (which keeps the focus and shows a focus outline);
//   - the metrics page draws request-rate series and the three latency percentiles;
//   - the vector map draws >= 100 points;
//   - the bench page opens tests/e2e/data/bench/fmnist_demo.json from disk (setInputFiles) and
//     draws one series per engine and thread count, as the HTML report does; the same file copied
//     to $SX_DATA_DIR/bench/ (the server's data directory, from run_webui_browser.sh) is listed by
//     POST /v2/sextant/bench/list and, opened from that list, draws as many series;
//   - Int64 primary keys beyond 2^53 (2^53 + 1 next to 2^53) keep their digits: shown in the data
//     browser, got by id, and searched by id;
//   - at 400 px the overview and the data page do not scroll sideways;
//   - after log-out, the read-only viewer sees no .write-action on the collection and data pages,
//     and a delete sent from the page with its token is refused (HTTP 403, code 1401);
//   - window.__xss stays undefined; no console error and no page error, except the browser's own
//     "Failed to load resource" lines for the deliberate 401 (wrong password) and 403 (viewer).
// Screenshots go to $SX_SCREENSHOT_DIR: overview, collection, data, search, metrics, map, bench,
// narrow (.png).
'use strict';
const { CHROMIUM_FLAGS, check, failures } = require('./checks');
const path = require('path');
const fs = require('fs');
const os = require('os');
const { chromium } = require('playwright-core');

const FLAGS = CHROMIUM_FLAGS;

const BASE = process.env.SX_WEBUI_URL;
const SHOTS = process.env.SX_SCREENSHOT_DIR || path.join(os.tmpdir(), 'webui-screens');
const BENCH = path.resolve(__dirname, '../data/bench/fmnist_demo.json');
const DATA_DIR = process.env.SX_DATA_DIR || '';
const COLL = 'webui_demo';
const ROWS = 3000;
const DIM = 32;
const HOSTILE = [
  '<img src=x onerror="window.__xss=1">',
  '"><script>window.__xss=2</script>',
  "'><svg onload=window.__xss=3>",
];

async function rest(route, body, token = 'root:Milvus') {
  const r = await fetch(BASE + route, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  const text = await r.text();
  try {
    return JSON.parse(text);
  } catch (_) {
    return { code: -1, message: `HTTP ${r.status}: ${text.slice(0, 200)}` };
  }
}

async function must(route, body) {
  const j = await rest(route, body);
  if (j.code !== 0) throw new Error(`${route}: ${JSON.stringify(j)}`);
  return j.data;
}

function rng(seed) {
  let x = seed >>> 0;
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 4294967296;
  };
}

function tagOf(i) {
  if (i >= 1 && i <= HOSTILE.length) return HOSTILE[i - 1];
  if (i % 97 === 0) return HOSTILE[i % HOSTILE.length];
  return ['alpha', 'beta', 'gamma', 'delta', 'epsilon'][i % 5];
}

async function makeData() {
  await rest('/v2/vectordb/collections/drop', { collectionName: COLL });
  await must('/v2/vectordb/collections/create', {
    collectionName: COLL,
    schema: {
      autoID: false,
      enableDynamicField: false,
      fields: [
        { fieldName: 'id', dataType: 'Int64', isPrimary: true },
        { fieldName: 'vec', dataType: 'FloatVector', elementTypeParams: { dim: DIM } },
        { fieldName: 'tag', dataType: 'VarChar', elementTypeParams: { max_length: 64 } },
        { fieldName: 'n', dataType: 'Int64' },
      ],
    },
  });
  // 8 clusters, so the map has something to show
  const r = rng(7);
  const centres = Array.from({ length: 8 }, () => Array.from({ length: DIM }, () => r() * 2 - 1));
  for (let start = 0; start < ROWS; start += 500) {
    const data = [];
    for (let i = start; i < Math.min(ROWS, start + 500); i++) {
      const c = centres[i % 8];
      data.push({ id: i, vec: c.map((x) => x + (r() - 0.5) * 0.6), tag: tagOf(i), n: i % 100 });
    }
    const d = await must('/v2/vectordb/entities/insert', { collectionName: COLL, data });
    if (d.insertCount !== data.length) throw new Error(`insert: ${JSON.stringify(d)}`);
  }
  await must('/v2/vectordb/collections/flush', { collectionName: COLL });
}

function expectedBenchSeries(json) {
  // as report.c: per engine (the run, then each peer) one series of serial runs (threads <= 1)
  // and one per thread count above 1
  const runs = Array.isArray(json) ? json : [json];
  let n = 0;
  const count = (pts) => {
    const ok = (pts || []).filter((p) => Number.isFinite(Number(p.recall)) && Number.isFinite(Number(p.qps)));
    const serial = ok.some((p) => p.threads === undefined || p.threads <= 1);
    return (serial ? 1 : 0) + new Set(ok.filter((p) => p.threads > 1).map((p) => p.threads)).size;
  };
  for (const r of runs) {
    n += count(r.runs);
    for (const p of Object.values(r.peers || {})) n += count(p.runs);
  }
  return n;
}

async function main() {
  const exe = process.env.SX_CHROMIUM || '/usr/bin/chromium';
  if (!BASE) {
    console.log('usage: SX_WEBUI_URL=http://127.0.0.1:PORT node webui_browser.js');
    process.exit(2);
  }
  fs.mkdirSync(SHOTS, { recursive: true });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'sx-webui-browser-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: exe,
    headless: true,
    args: FLAGS,
    viewport: { width: 1280, height: 900 },
    timeout: 120000,
  });
  let phase = 'start';
  const consoleErrors = [];
  const tolerated = [];
  try {
    const page = ctx.pages()[0] || (await ctx.newPage());
    page.setDefaultTimeout(20000);
    page.on('console', (m) => {
      if (m.type() !== 'error') return;
      const text = m.text();
      const expected = (phase === 'bad-login' && /status of 401/.test(text)) ||
                       (phase === 'viewer-delete' && /status of 403/.test(text));
      (expected ? tolerated : consoleErrors).push({ phase, text });
    });
    page.on('pageerror', (e) => consoleErrors.push({ phase, text: `pageerror: ${e && e.message}` }));
    const shot = (name) => page.screenshot({ path: path.join(SHOTS, name), fullPage: true });
    const tid = (id) => `[data-testid="${id}"]`;

    async function step(name, fn) {
      phase = name;
      try {
        await fn();
      } catch (e) {
        check(false, `${name}: no exception`, String(e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e));
      }
    }
    const xss = () => page.evaluate(() => window.__xss);

    // ------------------------------------------------------------ page and headers
    await step('assets', async () => {
      const resp = await page.goto(`${BASE}/webui/`, { waitUntil: 'load' });
      check(resp && resp.status() === 200, 'GET /webui/ answers 200', resp && resp.status());
      const csp = (resp && resp.headers()['content-security-policy']) || '';
      check(/script-src 'self'/.test(csp) && /style-src 'self'/.test(csp), 'the console is served with its CSP', csp);
      await page.waitForSelector(tid('login-form'));
      check(true, 'the log-in view is shown first');
    });

    // ------------------------------------------------------------ log-in
    await step('bad-login', async () => {
      await page.fill(tid('login-user'), 'root');
      await page.fill(tid('login-password'), 'not-the-password');
      await page.click(tid('login-submit'));
      await page.waitForSelector(`${tid('login-error')}:not([hidden])`);
      const t = await page.textContent(tid('login-error'));
      check(/1800|credential/i.test(t), 'a wrong password is refused with the server\'s message', t);
      check(await page.isVisible(tid('login-form')), 'still on the log-in view');
    });
    await step('login', async () => {
      await page.fill(tid('login-password'), 'Milvus');
      await page.click(tid('login-submit'));
      await page.waitForSelector(tid('overview'));
      check(true, 'root logs in and sees the overview');
      const stored = await page.evaluate(() => Object.keys(sessionStorage).length);
      check(stored === 1, 'the token is kept in sessionStorage', stored);
    });

    // ------------------------------------------------------------ data, through the API
    await step('data', async () => {
      await makeData();
      check(true, `made ${COLL}: ${ROWS} rows, flushed`);
    });

    await step('overview', async () => {
      await page.goto(`${BASE}/webui/#/overview`);
      await page.waitForSelector(tid(`coll-link-${COLL}`), { timeout: 15000 });
      const rowText = await page.textContent(`tr[data-collection="${COLL}"]`);
      check(/3,000/.test(rowText), 'the overview shows the collection with its 3,000 rows', rowText);
      const cards = await page.textContent(tid('overview'));
      check(/Version/.test(cards) && /Uptime/.test(cards) && /Memory/.test(cards) && /Disk/.test(cards),
            'the overview shows version, uptime, memory and disk');
      await shot('overview.png');
    });

    // ------------------------------------------------------------ index build, watched
    await step('index-build', async () => {
      await page.goto(`${BASE}/webui/#/collection/default/${COLL}`);
      await page.waitForSelector(tid('schema') + ' table');
      await must('/v2/vectordb/indexes/create', {
        collectionName: COLL,
        indexParams: [{ fieldName: 'vec', indexName: 'vec_idx', metricType: 'COSINE',
                        params: { index_type: 'HNSW', M: 16, efConstruction: 200 } }],
      });
      const seen = [];
      const deadline = Date.now() + 120000;
      let last = null;
      while (Date.now() < deadline) {
        last = await page.evaluate(() => {
          const st = document.querySelector('[data-testid="index-state-vec"]');
          const bar = document.querySelector('[data-testid="index-progress-vec"]');
          if (!st || !bar) return null;
          return { state: st.textContent, done: Number(bar.dataset.done), total: Number(bar.dataset.total),
                   pct: Number(bar.getAttribute('aria-valuenow')) };
        });
        if (last) {
          const k = `${last.state} ${last.done}/${last.total}`;
          if (!seen.includes(k)) seen.push(k);
          if (last.state === 'Finished' && last.total > 0 && last.done >= last.total) break;
        }
        await page.waitForTimeout(200);
      }
      check(last && last.state === 'Finished', 'the index build reaches Finished on the page', last);
      check(last && last.total >= ROWS && last.done === last.total && last.pct === 100,
            'the finished index shows all its rows indexed (100%)', last);
      const inProgress = seen.some((x) => x.startsWith('InProgress'));
      const finishedRows = !!last && last.state === 'Finished' && last.done > 0 && last.done === last.total;
      check(inProgress || finishedRows, 'an intermediate state (InProgress), or the finished state with its rows, ' +
            `was displayed (${inProgress ? 'InProgress seen' : 'the build ended between two polls'})`, seen);
      console.log(`     states seen: ${seen.join(' -> ')}`);
      const segs = await page.textContent(tid('segments'));
      check(/Sealed/.test(segs), 'the segments table lists a sealed segment', segs.slice(0, 200));
    });

    // A build slow enough to watch: 60,000 x 64 rows sealed by a flush while the page is open;
    // the page must show it in progress (0 < done < total) at least once, then Finished.
    await step('index-build-watched', async () => {
      const big = 'webui_build';
      await rest('/v2/vectordb/collections/drop', { collectionName: big });
      await must('/v2/vectordb/collections/create', {
        collectionName: big,
        schema: { fields: [
          { fieldName: 'id', dataType: 'Int64', isPrimary: true },
          { fieldName: 'vec', dataType: 'FloatVector', elementTypeParams: { dim: 64 } },
        ] },
        indexParams: [{ fieldName: 'vec', indexName: 'vec', metricType: 'L2',
                        params: { index_type: 'HNSW', M: 16, efConstruction: 200 } }],
      });
      const r = rng(11);
      for (let start = 0; start < 60000; start += 4000) {
        const data = [];
        for (let i = start; i < start + 4000; i++)
          data.push({ id: i, vec: Array.from({ length: 64 }, () => r()) });
        await must('/v2/vectordb/entities/insert', { collectionName: big, data });
      }
      await page.goto(`${BASE}/webui/#/collection/default/${big}`);
      await page.waitForSelector(tid('index-progress-vec'));
      await must('/v2/vectordb/collections/flush', { collectionName: big });
      const seen = [];
      let last = null;
      const deadline = Date.now() + 180000;
      while (Date.now() < deadline) {
        last = await page.evaluate(() => {
          const st = document.querySelector('[data-testid="index-state-vec"]');
          const bar = document.querySelector('[data-testid="index-progress-vec"]');
          const rate = document.querySelector('[data-testid="index-rate-vec"]');
          const eta = document.querySelector('[data-testid="index-eta-vec"]');
          if (!st || !bar) return null;
          return { state: st.textContent, done: Number(bar.dataset.done), total: Number(bar.dataset.total),
                   rate: rate ? rate.textContent : '', eta: eta ? eta.textContent : '' };
        });
        if (last) {
          seen.push(last);
          if (last.state === 'Finished' && last.total === 60000 && last.done === 60000) break;
        }
        await page.waitForTimeout(100);
      }
      const mid = seen.filter((x) => x.state === 'InProgress' && x.total === 60000 && x.done > 0 && x.done < 60000);
      check(mid.length > 0, 'the page showed the build in progress (0 < rows done < 60,000)',
            seen.map((x) => `${x.state} ${x.done}/${x.total}`).filter((x, i, a) => a.indexOf(x) === i).slice(0, 12));
      check(mid.some((x) => /\d/.test(x.rate)), 'a build rate (rows/s) was shown while it ran',
            mid.map((x) => x.rate).slice(0, 5));
      check(last && last.state === 'Finished' && last.done === 60000, 'the watched build reached Finished', last);
      const shown = mid.map((x) => `${x.done} (${x.rate}, ${x.eta})`).filter((x, i, a) => a.indexOf(x) === i);
      console.log(`     progress seen: ${shown.join(' -> ')}`);
      await shot('index-build.png');
      await must('/v2/vectordb/collections/drop', { collectionName: big });
      await page.goto(`${BASE}/webui/#/collection/default/${COLL}`);
      await page.waitForSelector(tid('schema') + ' table');
    });

    await step('load', async () => {
      await page.click(tid('btn-load'));
      await page.waitForFunction(() => {
        const e = document.querySelector('[data-testid="load-state"]');
        return e && /Loaded/.test(e.textContent);
      }, null, { timeout: 60000 });
      check(true, 'Load on the collection page loads it');
      const parts = await page.textContent(tid('partitions'));
      check(/_default/.test(parts), 'partitions list _default', parts);
      await shot('collection.png');
    });

    // ------------------------------------------------------------ data browser
    await step('data-page', async () => {
      await page.goto(`${BASE}/webui/#/data/default/${COLL}`);
      await page.waitForFunction(() => document.querySelectorAll('[data-testid="data-rows"] tbody tr').length === 20);
      const first = await page.getAttribute(`${tid('data-rows')} tbody tr`, 'data-id');
      await page.click(tid('data-next'));
      await page.waitForFunction((f) => {
        const tr = document.querySelector('[data-testid="data-rows"] tbody tr');
        return tr && tr.dataset.id !== f;
      }, first);
      const second = await page.getAttribute(`${tid('data-rows')} tbody tr`, 'data-id');
      check(second !== first, 'Next shows another page (the first row id changes)', { first, second });
      await page.click(tid('data-prev'));
      await page.waitForFunction((f) => {
        const tr = document.querySelector('[data-testid="data-rows"] tbody tr');
        return tr && tr.dataset.id === f;
      }, first);
      const lit = await page.evaluate((hostile) => {
        const t = document.querySelector('[data-testid="data-rows"]');
        const cells = [...t.querySelectorAll('td')].map((td) => td.textContent);
        return {
          found: hostile.map((x) => cells.includes(x)),
          elements: t.querySelectorAll('img, script, svg').length,
          vec: cells.find((c) => /…dim 32/.test(c)) || null,
        };
      }, HOSTILE);
      check(lit.found.every(Boolean), 'hostile tag values are shown as literal text', lit.found);
      check(lit.elements === 0, 'no element came out of the hostile values', lit.elements);
      check(!!lit.vec && /^\[[^,]+, [^,]+, [^,]+, [^,]+, …dim 32\]$/.test(lit.vec),
            'vectors are shown as 4 numbers and the dimension', lit.vec);
      check((await xss()) === undefined, 'window.__xss is undefined after the data page');

      // get by id
      await page.fill(tid('get-id'), '42');
      await page.click(tid('get-run'));
      await page.waitForSelector(`${tid('get-result')} tr[data-id="42"]`);
      check(true, 'get by id 42 shows the row');

      // filter errors with a caret
      for (const [f, pos] of [['n > ', 4], ['tag = ', 4]]) {
        await page.fill(tid('filter-input'), f);
        await page.click(tid('filter-apply'));
        await page.waitForFunction((want) => {
          const e = document.querySelector('[data-testid="filter-error"]:not([hidden]) [data-testid="filter-caret"]');
          return e && e.textContent.split('\n')[0] === want;
        }, f).catch(() => {});
        const caret = await page.textContent(tid('filter-caret'));
        const lines = caret.split('\n');
        const msg = await page.textContent(tid('filter-error'));
        check(lines[0] === f && lines[1] === ' '.repeat(pos) + '^',
              `the filter "${f}" gets a caret under position ${pos}`, { lines, msg });
      }
      await shot('data.png');
      // a good filter clears the error
      await page.fill(tid('filter-input'), 'n < 3');
      await page.click(tid('filter-apply'));
      await page.waitForSelector(`${tid('filter-error')}[hidden]`, { state: 'attached' });
      const rows = await page.$$eval(`${tid('data-rows')} tbody tr`, (t) => t.length);
      check(rows === 20, 'a valid filter hides the error and shows rows', rows);

      // delete one row through the confirmation dialog
      await page.fill(tid('delete-filter'), `id in [${ROWS - 1}]`);
      await page.click(tid('delete-run'));
      await page.waitForSelector(`dialog[open]${tid('delete-dialog')}`);
      const n = await page.textContent(tid('delete-count'));
      check(n.trim() === '1', 'the confirmation names the count of matching rows (1)', n);
      await page.click(tid('delete-confirm'));
      await page.waitForFunction(() => /Deleted 1 row/.test(document.querySelector('[data-testid="delete-result"]').textContent));
      const left = await rest('/v2/vectordb/entities/get', { collectionName: COLL, id: [ROWS - 1] });
      check(left.code === 0 && left.data.length === 0, 'the row is gone after the confirmation', left);
    });

    // ------------------------------------------------------------ search
    await step('search', async () => {
      await page.goto(`${BASE}/webui/#/search/default/${COLL}`);
      await page.waitForSelector(tid('search-form'));
      await page.fill(tid('search-id'), '10');
      const params = await page.inputValue(tid('search-params'));
      check(/"ef":\s*64/.test(params), 'the search params default to {"ef":64} for HNSW', params);
      await page.click(tid('search-run'));
      await page.waitForFunction(() => document.querySelectorAll('[data-testid="search-results"] tbody tr').length > 0);
      const ids = await page.$$eval(`${tid('search-results')} tbody tr`, (t) => t.map((r) => r.dataset.id));
      check(ids.length === 10, 'a search by a stored id gives k = 10 results', ids);
      check(ids[0] === '10', 'the stored row is its own nearest neighbour', ids[0]);
      const lat = await page.textContent(tid('search-latency'));
      check(/\d+(\.\d+)? ms/.test(lat), 'the request latency is shown', lat);
      await page.click(tid('recall-run'));
      await page.waitForSelector(tid('recall-value'), { timeout: 60000 });
      const rv = Number(await page.getAttribute(tid('recall-value'), 'data-recall'));
      check(rv >= 0 && rv <= 1, 'check recall gives a recall in [0, 1]', rv);
      check(rv >= 0.9, 'recall@10 >= 0.9 (HNSW, ef 64, 10 random stored rows)', rv);
      const rl = await page.textContent(tid('recall-latency'));
      check(/exact \d/.test(rl), 'both latencies are shown', rl);
      await shot('search.png');
    });

    // ------------------------------------------------------------ keyboard only
    // A second browser, so a fresh context (no sessionStorage, no focus history); only
    // page.keyboard from the log-in view to a search.
    await step('keyboard', async () => {
      const browser = await chromium.launch({ executablePath: exe, headless: true, args: FLAGS, timeout: 120000 });
      try {
        const kctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
        const kp = await kctx.newPage();
        kp.setDefaultTimeout(20000);
        kp.on('console', (m) => {
          if (m.type() === 'error') consoleErrors.push({ phase: 'keyboard', text: m.text() });
        });
        kp.on('pageerror', (e) => consoleErrors.push({ phase: 'keyboard', text: `pageerror: ${e && e.message}` }));
        const focused = () => kp.evaluate(() => {
          const a = document.activeElement;
          return a ? (a.dataset.testid || a.id || a.tagName.toLowerCase()) : null;
        });
        // Tab (at most max times) until the focused element matches sel
        const tabTo = async (sel, max = 60) => {
          for (let i = 0; i <= max; i++) {
            if (await kp.evaluate((q) => !!document.activeElement && document.activeElement.matches(q), sel)) return true;
            await kp.keyboard.press('Tab');
          }
          return false;
        };
        await kp.goto(`${BASE}/webui/`);
        await kp.waitForSelector(tid('login-form'));
        check(await tabTo(tid('login-user')), 'keyboard: Tab reaches the user field', await focused());
        await kp.keyboard.type('root');
        check(await tabTo(tid('login-password')), 'keyboard: Tab reaches the password field', await focused());
        await kp.keyboard.type('Milvus');
        await kp.keyboard.press('Enter');
        await kp.waitForSelector(tid('overview'));
        const who = await kp.textContent(tid('who-user'));
        check(/root/.test(who), 'keyboard: Enter in the password field logs root in', who);

        check(await tabTo(tid(`coll-link-${COLL}`)), `keyboard: Tab reaches the ${COLL} link on the overview`,
              await focused());
        await kp.keyboard.press('Enter');
        await kp.waitForSelector(tid('collection-page'));
        check(kp.url().endsWith(`#/collection/default/${COLL}`), 'keyboard: Enter opens the collection page', kp.url());

        check(await tabTo(tid('sub-data')), 'keyboard: Tab reaches the Data link', await focused());
        await kp.keyboard.press('Enter');
        await kp.waitForFunction(() => document.querySelectorAll('[data-testid="data-rows"] tbody tr').length === 20);
        check(kp.url().endsWith(`#/data/default/${COLL}`), 'keyboard: Enter opens the Data page with its 20 rows', kp.url());

        check(await tabTo(tid('sub-search')), 'keyboard: Tab reaches the Search link', await focused());
        await kp.keyboard.press('Enter');
        await kp.waitForSelector(tid('search-form'));
        check(kp.url().endsWith(`#/search/default/${COLL}`), 'keyboard: Enter opens the Search page', kp.url());
        // the page puts a stored row's id in the field; replace it by typing
        await kp.waitForFunction(() => (document.querySelector('[data-testid="search-id"]') || {}).value);
        check(await tabTo(tid('search-id')), 'keyboard: Tab reaches the row id field', await focused());
        await kp.keyboard.press('ControlOrMeta+A');
        await kp.keyboard.type('10');
        check(await tabTo(tid('search-run')), 'keyboard: Tab reaches the Search button', await focused());
        const ring = await kp.evaluate(() => {
          const cs = getComputedStyle(document.activeElement);
          return { outlineStyle: cs.outlineStyle, outlineWidth: cs.outlineWidth, outlineColor: cs.outlineColor,
                   boxShadow: cs.boxShadow };
        });
        const outline = ring.outlineStyle !== 'none' && parseFloat(ring.outlineWidth) > 0;
        check(outline || ring.boxShadow !== 'none', 'keyboard: the focused button shows a focus indicator', ring);
        await kp.keyboard.press('Space');
        await kp.waitForFunction(() => document.querySelectorAll('[data-testid="search-results"] tbody tr').length > 0);
        const ids = await kp.$$eval(`${tid('search-results')} tbody tr`, (t) => t.map((r) => r.dataset.id));
        check(ids.length === 10 && ids[0] === '10', 'keyboard: Space on Search runs the search (10 hits, row 10 first)', ids);
        check((await focused()) === 'search-run', 'keyboard: the Search button keeps the focus after the search',
              await focused());
        check((await kp.evaluate(() => window.__xss)) === undefined, 'keyboard: window.__xss is undefined');
        await kctx.close();
      } finally {
        await browser.close();
      }
    });

    // ------------------------------------------------------------ metrics
    await step('metrics', async () => {
      await page.goto(`${BASE}/webui/#/metrics`);
      const ok = await page.waitForFunction(() => {
        const n = (name) => [...document.querySelectorAll(`[data-testid="chart-${name}"] path.series`)]
          .filter((p) => Number(p.dataset.points) >= 1).length;
        return n('requests') >= 1 && n('latency') === 3;
      }, null, { timeout: 30000 }).then(() => true, () => false);
      const counts = await page.evaluate(() => Object.fromEntries(
        [...document.querySelectorAll('figure[data-testid^="chart-"]')].map((f) =>
          [f.dataset.testid, f.querySelectorAll('path.series').length])));
      check(ok, 'request-rate chart has >= 1 series and the latency chart p50/p95/p99', counts);
      const lat = await page.$$eval(`${tid('chart-latency')} path.series`, (p) => p.map((x) => x.dataset.series));
      check(JSON.stringify(lat) === '["p50","p95","p99"]', 'latency series are p50, p95, p99', lat);
      check(counts['chart-io'] === 2, 'the I/O chart has read and write', counts['chart-io']);
      await shot('metrics.png');
    });

    // ------------------------------------------------------------ vector map
    await step('map', async () => {
      await page.goto(`${BASE}/webui/#/map/default/${COLL}`);
      await page.waitForFunction(() => document.querySelectorAll('[data-testid="map-svg"] circle.pt').length >= 100,
                                 null, { timeout: 30000 });
      const n = await page.$$eval(`${tid('map-svg')} circle.pt`, (c) => c.length);
      check(n >= 100, 'the vector map draws >= 100 points', n);
      const legend = await page.textContent(tid('map-legend'));
      check(HOSTILE.some((x) => legend.includes(x)), 'the map legend shows hostile categories as text', legend.slice(0, 120));
      const box = await page.locator(`${tid('map-svg')} circle.pt`).first().boundingBox();
      if (box) {
        await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
        const tip = await page.textContent(tid('map-tip'));
        check(/^id: \d+/.test(tip), 'hovering a point shows its primary key', tip);
      }
      check((await xss()) === undefined, 'window.__xss is undefined after the map');
      await shot('map.png');
    });

    // ------------------------------------------------------------ bench
    await step('bench', async () => {
      const want = expectedBenchSeries(JSON.parse(fs.readFileSync(BENCH, 'utf8')));
      const name = path.basename(BENCH);
      // the server's copy: DATA_DIR/bench/NAME.json, where `sextant bench --json` writes
      if (check(!!DATA_DIR, 'SX_DATA_DIR names the server\'s data directory (run_webui_browser.sh)')) {
        fs.mkdirSync(path.join(DATA_DIR, 'bench'), { recursive: true });
        fs.copyFileSync(BENCH, path.join(DATA_DIR, 'bench', name));
      }
      const listed = page.waitForResponse((r) => r.url().endsWith('/v2/sextant/bench/list') &&
                                                 r.request().method() === 'POST');
      await page.goto(`${BASE}/webui/#/bench`);
      const lr = await (await listed).json();
      const names = lr && lr.code === 0 && Array.isArray(lr.data) ? lr.data.map((x) => x.name) : lr;
      check(Array.isArray(names) && names.includes(name), `POST /v2/sextant/bench/list (from the page) lists ${name}`, names);
      const open = `${tid('bench-list')} button[data-name="${name}"]`;
      await page.waitForSelector(open);
      check(true, `the server list on the page offers ${name}`);

      // the local file, read in the page
      await page.setInputFiles(tid('bench-file'), BENCH);
      await page.waitForSelector(`${tid('bench-chart')} path.series`);
      const series = await page.$$eval(`${tid('bench-chart')} path.series`, (p) => p.map((x) => x.dataset.series));
      check(series.length === want, `the bench chart draws ${want} series (engines x thread counts)`, series);
      const title = await page.textContent(tid('bench-title'));
      check(/Fashion-MNIST/.test(title), 'the bench title names the data set', title);
      const sum = await page.$$eval(`${tid('bench-summary')} tbody tr`, (t) => t.length);
      check(sum === 3, 'the summary has a row per engine (sextant, hnswlib, faiss)', sum);
      await shot('bench.png');

      // the same file from the server list: the chart is drawn again (a new svg) with as many series
      await page.$eval(tid('bench-chart'), (e) => { e.dataset.stale = '1'; });
      const got = page.waitForResponse((r) => r.url().endsWith('/v2/sextant/bench/get'));
      await page.click(open);
      check((await got).status() === 200, 'Open asks the server for the file (POST /v2/sextant/bench/get)');
      await page.waitForSelector(`${tid('bench-chart')}:not([data-stale]) path.series`);
      const fromServer = await page.$$eval(`${tid('bench-chart')} path.series`, (p) => p.map((x) => x.dataset.series));
      check(fromServer.length === series.length && fromServer.length === want,
            `opened from the server list, the chart draws the same ${series.length} series as the local file`,
            { server: fromServer, local: series });
      const st = await page.textContent(tid('bench-title'));
      check(/Fashion-MNIST/.test(st), 'opened from the server list, the title names the data set', st);
    });

    // ------------------------------------------------------------ Int64 keys beyond 2^53
    // 2^53 + 1 is not a double: a page that reads or sends it through a Number gets 2^53, the
    // other row. Made through the API with the digits in the request text.
    await step('int64-ids', async () => {
      const coll = 'webui_bigids';
      const IDS = ['9007199254740993', '9007199254740992', '9223372036854775807'];
      await rest('/v2/vectordb/collections/drop', { collectionName: coll });
      await must('/v2/vectordb/collections/create', {
        collectionName: coll,
        schema: { fields: [
          { fieldName: 'id', dataType: 'Int64', isPrimary: true },
          { fieldName: 'vec', dataType: 'FloatVector', elementTypeParams: { dim: 4 } },
        ] },
        indexParams: [{ fieldName: 'vec', indexName: 'vec', metricType: 'L2', params: { index_type: 'FLAT' } }],
      });
      const rows = IDS.map((id, i) => `{"id":${id},"vec":${JSON.stringify([i, i * 2, 1 - i, 0.5])}}`).join(',');
      const ins = await fetch(`${BASE}/v2/vectordb/entities/insert`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: 'Bearer root:Milvus' },
        body: `{"collectionName":"${coll}","data":[${rows}]}`,
      }).then((r) => r.json());
      if (ins.code !== 0) throw new Error(`insert: ${JSON.stringify(ins)}`);
      await must('/v2/vectordb/collections/load', { collectionName: coll });

      await page.goto(`${BASE}/webui/#/data/default/${coll}`);
      await page.waitForFunction(() => document.querySelectorAll('[data-testid="data-rows"] tbody tr').length === 3);
      const shown = await page.$$eval(`${tid('data-rows')} tbody tr`, (t) => t.map((r) => r.dataset.id).sort());
      check(JSON.stringify(shown) === JSON.stringify(IDS.slice().sort()), 'the data browser shows Int64 ids exactly', shown);
      await page.fill(tid('get-id'), IDS[0]);
      await page.click(tid('get-run'));
      await page.waitForSelector(`${tid('get-result')} tbody tr`);
      const got = await page.$$eval(`${tid('get-result')} tbody tr`, (t) => t.map((r) => r.dataset.id));
      check(got.length === 1 && got[0] === IDS[0], `get by id ${IDS[0]} gives that row, not 2^53`, got);

      await page.goto(`${BASE}/webui/#/search/default/${coll}`);
      await page.waitForFunction(() => (document.querySelector('[data-testid="search-id"]') || {}).value);
      for (const id of [IDS[0], IDS[2]]) {
        await page.fill(tid('search-id'), id);
        await page.fill(tid('search-topk'), '3');
        await page.click(tid('search-run'));
        await page.waitForFunction((want) => {
          const tr = document.querySelector('[data-testid="search-results"] tbody tr');
          return tr && tr.dataset.id === want;
        }, id, { timeout: 10000 }).catch(() => {});
        const hits = await page.$$eval(`${tid('search-results')} tbody tr`, (t) => t.map((r) => r.dataset.id));
        check(hits[0] === id, `a search by the stored id ${id} finds that row first`, hits);
      }
      await must('/v2/vectordb/collections/drop', { collectionName: coll });
    });

    // ------------------------------------------------------------ narrow window
    await step('narrow', async () => {
      await page.setViewportSize({ width: 400, height: 900 });
      for (const [name, hash, sel] of [['overview', '#/overview', tid(`coll-link-${COLL}`)],
                                       ['data', `#/data/default/${COLL}`, `${tid('data-rows')} tbody tr`]]) {
        await page.goto(`${BASE}/webui/${hash}`);
        await page.waitForSelector(sel);
        const m = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth,
                                               client: document.documentElement.clientWidth }));
        check(m.scroll <= m.client, `at 400 px the ${name} page does not scroll sideways`, m);
        if (name === 'data') await shot('narrow.png');
      }
      await page.setViewportSize({ width: 1280, height: 900 });
    });

    // ------------------------------------------------------------ read-only viewer
    await step('viewer', async () => {
      await page.click(tid('logout'));
      await page.waitForSelector(tid('login-form'));
      check(await page.evaluate(() => sessionStorage.length === 0), 'log-out forgets the token');
      await page.fill(tid('login-user'), 'viewer');
      await page.fill(tid('login-password'), 'viewpass');
      await page.click(tid('login-submit'));
      await page.waitForSelector(tid('readonly-badge'));
      await page.goto(`${BASE}/webui/#/collection/default/${COLL}`);
      await page.waitForSelector(tid('index-state-vec'));
      await page.waitForSelector(tid('load-state'));
      const wc = await page.$$eval('.write-action', (e) => e.length);
      check(wc === 0, 'the viewer sees no write action on the collection page', wc);
      await page.goto(`${BASE}/webui/#/data/default/${COLL}`);
      await page.waitForSelector(`${tid('data-rows')} tbody tr`);
      const wd = await page.$$eval('.write-action', (e) => e.length);
      check(wd === 0, 'the viewer sees no write action on the data page', wd);
    });
    await step('viewer-delete', async () => {
      const r = await page.evaluate(async (coll) => {
        const res = await fetch('/v2/vectordb/entities/delete', {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Authorization: 'Bearer viewer:viewpass' },
          body: JSON.stringify({ collectionName: coll, filter: 'id in [1]' }),
        });
        return { status: res.status, body: await res.json() };
      }, COLL);
      check(r.status === 403 && r.body.code === 1401, 'a delete with the viewer\'s token is refused (403, 1401)', r);
      await page.waitForTimeout(300); // let the console report the 403 while it is expected
    });

    phase = 'end';
    check((await xss()) === undefined, 'window.__xss is still undefined');
    check(consoleErrors.length === 0, 'no console error and no page error', consoleErrors);
    if (tolerated.length) console.log(`     tolerated: ${tolerated.map((x) => `${x.phase}: ${x.text}`).join(' | ')}`);
  } finally {
    await ctx.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  console.log(`screenshots in ${SHOTS}`);
  console.log(failures() ? `${failures()} check(s) failed` : 'all checks passed');
  process.exit(failures() ? 1 : 0);
}

main().catch((e) => {
  console.log(`FAIL ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
