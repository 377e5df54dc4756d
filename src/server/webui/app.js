/*
 * app.js: Sextant's web console (docs/internals/WEBUI.md), the whole of it: hand-written ES2020,
 * no framework, no build step, served at /webui/app.js (embedded in the binary).
 *
 * Design. A client of the public API only: every figure comes from a POST with a JSON body to
 * Milvus's /v2/vectordb/... routes or Sextant's /v2/sextant/... routes (envelope
 * {code, data, message}; code != 0 is an error, shown in a visible box with its message; HTTP 403
 * code 1401 is "not allowed"), or from GET /metrics (Prometheus text, parsed here). Every call
 * carries `Authorization: Bearer <token>`; the token (an API key, `user:password`, or empty on a
 * server without credentials) is kept in sessionStorage only. A 1800 answer (bad credentials)
 * drops it and shows the log-in view. Pages are hash routes (#/overview, #/collection/DB/NAME,
 * #/data/DB/NAME, #/search/DB/NAME, #/metrics, #/map/DB/NAME, #/bench); each page owns a "view"
 * whose timers (the 1 s / 3 s polls) die when the route changes, and whose answers are dropped
 * once it is gone (v.alive after each await; act() drops a late error). Within a page, a request
 * that can be asked again before its answer (a data page, a get, a map, a bench file, the
 * collection poll against an action's refresh) carries a sequence number: only the latest one
 * draws. A confirmation dialog still open when the route changes is cancelled. Charts are SVG
 * drawn here.
 *
 * Escaping rule. Nothing from the server or the user is ever parsed as HTML: the DOM is built
 * with createElement / createElementNS and text goes in through textContent or text nodes (h()
 * and s() below); there is no innerHTML, no inline script and no style attribute in markup (the
 * page's CSP forbids them); run-time geometry and colours go through element.style (CSSOM) or
 * SVG presentation attributes set with setAttribute, and only from constants and numbers, never
 * from data. h() refuses an on* attribute that is not a function and an href/src that is not a
 * hash route or a relative path; s() refuses on* and href.
 *
 * Int64. Answers that hold primary keys are asked with Accept-Type-Allow-Int64: false (Int64 as
 * strings), so ids beyond 2^53 are shown and kept as their digits; an integer key typed by the
 * user or taken from an answer goes back as the same digits, a bare JSON integer (Int64Text,
 * jsonBody()), never through a Number.
 *
 * Busy buttons get aria-disabled (setBusy), not disabled, so a keyboard user's focus stays on
 * them while their request runs.
 *
 * Write controls (load, release, drop, delete, create index) carry the class "write-action" and
 * are not created at all when server/describe says canWrite is false.
 *
 * Test hooks (data-testid attributes; the browser test tests/e2e/node/webui_browser.js uses them):
 *   shell      error-box (the page's error box), nav-overview, nav-metrics, nav-bench, who-user,
 *              readonly-badge, logout; on a collection's pages sub-collection, sub-data,
 *              sub-search, sub-map (its sub-navigation)
 *   log-in     login-form, login-token, login-user, login-password, login-submit, login-anon,
 *              login-error
 *   overview   overview, ov-version, ov-uptime, ov-health, ov-storage, ov-datadir, ov-user,
 *              ov-memory, ov-disk, overview-collections (all databases' tables), db-<db> (one
 *              database's table), coll-link-<name> (its rows carry data-collection=<name>)
 *   collection collection-page, load-state, btn-load, btn-release, btn-drop (then drop-dialog,
 *              drop-confirm, drop-cancel), index-list,
 *              index-<field> (data-state), index-state-<field> (text: None, InProgress,
 *              Finished, Failed), index-progress-<field> (role=progressbar, aria-valuenow = %,
 *              data-done, data-total, data-state), index-rows-<field>, index-rate-<field>,
 *              index-eta-<field>, create-index-form, schema, dynamic-field, segments,
 *              partitions, aliases
 *   data       data-page, filter-input, filter-apply, filter-error, filter-caret (a pre: the
 *              filter, then a line with ^ under the parser's position), data-rows (the table;
 *              body rows carry data-id=<pk>), data-prev, data-next, data-range, data-load (the
 *              "load it" button when the collection is not loaded), get-id, get-run,
 *              get-result (holding the get-rows table), delete-filter, delete-run,
 *              delete-dialog, delete-count, delete-confirm, delete-cancel, delete-result
 *   search     search-page, search-form, search-field, search-mode-id, search-mode-vector, search-id,
 *              search-vector, search-topk, search-filter, search-params, search-run,
 *              search-latency, search-results (the table; body rows carry data-id),
 *              recall-queries, recall-run, recall-result, recall-value (mean recall@k, 0..1,
 *              also in data-recall), recall-latency
 *   metrics    metrics-status, chart-requests, chart-latency, chart-batch, chart-io,
 *              chart-io-profile, chart-rows: each a <figure> with one <svg>; one
 *              <path class="series" data-series=NAME data-points=N> per series, and a legend
 *   map        map-page, map-field, map-color, map-draw, map-status, map-svg (circle.pt with data-pk),
 *              map-legend, map-tip
 *   bench      bench-list (its Open buttons carry data-name), bench-file (input type=file),
 *              bench-view, bench-title, bench-chart (the svg: one
 *              path.series per engine and thread count, data-x-lo / data-x-hi), bench-summary,
 *              bench-runs
 */
'use strict';

(() => {
  const TOKEN_KEY = 'sextant.console.token';
  const SVGNS = 'http://www.w3.org/2000/svg';
  const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2',
                   '#17becf', '#bcbd22', '#393b79'];
  const RAMP = ['#440154', '#3b528b', '#21918c', '#5ec962', '#fde725']; /* viridis stops */
  const VEC_TYPES = new Set(['FloatVector', 'BinaryVector', 'Float16Vector', 'BFloat16Vector',
                             'SparseFloatVector', 'Int8Vector']);
  const NUM_TYPES = new Set(['Int8', 'Int16', 'Int32', 'Int64', 'Float', 'Double']);
  const PAGE_ROWS = 20;
  const MAX_WINDOW = 16384; /* Milvus: offset + limit <= 16384 */
  const MAP_ROWS = 2000;
  const METRIC_SAMPLES = 61; /* 60 intervals of 3 s */

  const st = { token: null, server: null, canWrite: false };
  let view = { alive: false, timers: new Set() };
  let uid = 0;

  /* ------------------------------------------------------------------ DOM helpers */

  function append(el, kids) {
    for (const k of kids.flat(Infinity)) {
      if (k === null || k === undefined || k === false) continue;
      el.appendChild(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return el;
  }

  /* h('tag', {class, text, testid, on<event>: fn, attr: value}, ...children): an element;
   * strings among the children become text nodes. */
  function h(tag, props, ...kids) {
    const e = document.createElement(tag);
    let value;
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (v === undefined || v === null || v === false) continue;
        if (k === 'class') e.className = v;
        else if (k === 'text') e.textContent = String(v);
        else if (k === 'testid') e.setAttribute('data-testid', v);
        else if (k === 'value') value = v;
        else if (k === 'checked' || k === 'selected' || k === 'disabled' || k === 'hidden') e[k] = true;
        else if (/^on/i.test(k)) {
          /* a handler is a function, never text (an inline handler would be code from data) */
          if (typeof v !== 'function') throw new TypeError(`h(): ${k} must be a function`);
          e.addEventListener(k.slice(2), v);
        } else if ((k === 'href' || k === 'src' || k === 'action' || k === 'formaction') && !safeUrl(v)) {
          throw new TypeError(`h(): refused ${k} ${JSON.stringify(String(v).slice(0, 40))}`);
        } else e.setAttribute(k, v === true ? '' : String(v));
      }
    }
    append(e, kids);
    if (value !== undefined) e.value = String(value);
    return e;
  }

  /* A URL h() may put in href/src: a hash route or a same-origin relative path, never a scheme
   * (javascript:, data:, ...) and never another origin (//host). */
  function safeUrl(v) {
    const t = String(v);
    return /^#/.test(t) || (/^[./A-Za-z0-9_-]/.test(t) && !/^[A-Za-z][A-Za-z0-9+.-]*:/.test(t) && !/^\/\//.test(t));
  }

  /* s('tag', {attr: value}, ...children): an SVG element. */
  function s(tag, attrs, ...kids) {
    const e = document.createElementNS(SVGNS, tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === undefined || v === null || v === false) continue;
        if (k === 'testid') e.setAttribute('data-testid', v);
        else if (k === 'text') e.textContent = String(v);
        else if (/^on/i.test(k) || /(^|:)href$/i.test(k)) throw new TypeError(`s(): refused attribute ${k}`);
        else e.setAttribute(k, String(v));
      }
    }
    return append(e, kids);
  }

  function $(id) { return document.getElementById(id); }

  function clear(el) {
    while (el.firstChild) el.removeChild(el.firstChild);
    return el;
  }

  /* Replaces el's children, keeping the keyboard focus on the element of the same key (data-fk,
   * data-testid or id) when it was inside el: the polled pages redraw every few seconds. */
  function swap(el, ...kids) {
    const a = document.activeElement;
    let sel = null;
    if (a && a !== el && el.contains(a)) {
      if (a.dataset.fk) sel = `[data-fk="${CSS.escape(a.dataset.fk)}"]`;
      else if (a.dataset.testid) sel = `[data-testid="${CSS.escape(a.dataset.testid)}"]`;
      else if (a.id) sel = `#${CSS.escape(a.id)}`;
    }
    clear(el);
    append(el, kids);
    if (sel) {
      const n = el.querySelector(sel);
      if (n) n.focus({ preventScroll: true });
    }
  }

  /* A labelled form control: <div class=field><label for=id>label</label>input</div>. */
  function field(label, input, cls) {
    if (!input.id) input.id = 'f' + (++uid);
    return h('div', { class: 'field' + (cls ? ' ' + cls : '') },
             h('label', { for: input.id }, label), input);
  }

  function table(headers, rows, props) {
    const head = h('tr', null, headers.map((c) =>
      h('th', { scope: 'col', class: c && c.num ? 'num' : null }, c && c.label !== undefined ? c.label : c)));
    return h('div', { class: 'tw' }, h('table', props || null, h('thead', null, head), h('tbody', null, rows)));
  }

  function badge(text, cls) { return h('span', { class: 'badge' + (cls ? ' ' + cls : '') }, text); }

  /* ------------------------------------------------------------------ formatting */

  function num(v) {
    if (v === null || v === undefined || v === '') return NaN;
    const n = Number(v);
    return Number.isFinite(n) ? n : NaN;
  }

  function fmtInt(v) {
    const n = num(v);
    return Number.isNaN(n) ? '—' : Math.round(n).toLocaleString('en-US');
  }

  function fmtNum(v, digits) {
    const n = num(v);
    if (Number.isNaN(n)) return '—';
    const a = Math.abs(n);
    if (a >= 1000) return Math.round(n).toLocaleString('en-US');
    if (a === 0) return '0';
    return String(Number(n.toPrecision(digits || 3)));
  }

  function fmtBytes(v) {
    let n = num(v);
    if (Number.isNaN(n)) return '—';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let i = 0;
    while (Math.abs(n) >= 1024 && i < u.length - 1) {
      n /= 1024;
      i++;
    }
    return (i === 0 ? String(Math.round(n)) : n.toFixed(Math.abs(n) < 10 ? 2 : 1)) + ' ' + u[i];
  }

  function fmtDur(v) {
    const x = num(v);
    if (Number.isNaN(x)) return '—';
    if (x < 60) return `${x.toFixed(x < 10 ? 1 : 0)} s`;
    const t = Math.round(x);
    const d = Math.floor(t / 86400), hh = Math.floor((t % 86400) / 3600);
    const m = Math.floor((t % 3600) / 60), sec = t % 60;
    if (d) return `${d} d ${hh} h`;
    if (hh) return `${hh} h ${m} min`;
    return `${m} min ${sec} s`;
  }

  function fmtMs(ms) { return Number.isFinite(ms) ? `${ms < 10 ? ms.toFixed(2) : ms.toFixed(1)} ms` : '—'; }

  function prettyIndexState(sv) {
    const t = String(sv || '').replace(/^IndexState/, '');
    return t || 'None';
  }

  function prettyLoad(sv) {
    const t = String(sv || '').replace(/^LoadState/, '');
    if (t === 'NotLoad') return 'Not loaded';
    if (t === 'NotExist') return 'Not exist';
    return t || '—';
  }

  function stateClass(sv) {
    const t = prettyIndexState(sv);
    if (t === 'Finished' || t === 'Built' || t === 'Loaded' || t === 'ok') return 'good';
    if (t === 'InProgress' || t === 'Pending' || t === 'Loading' || t === 'Unissued' || t === 'Retry') return 'busy';
    if (t === 'Failed') return 'bad';
    return '';
  }

  /* A cell value as text: vectors as their first 4 numbers and "…dim N", objects as JSON,
   * long strings cut at 80 characters (the whole in the title attribute): cells do not wrap,
   * a wide table scrolls in its box. */
  function cellValue(v, type) {
    if (v === null || v === undefined) return h('span', { class: 'nul' }, 'null');
    if (Array.isArray(v) && (VEC_TYPES.has(type) || (v.length > 8 && v.every((x) => typeof x === 'number')))) {
      const head = v.slice(0, 4).map((x) => (typeof x === 'number' ? fmtVec(x) : String(x))).join(', ');
      return h('span', { class: 'vec' }, `[${head}${v.length > 4 ? ', ' : ''}…dim ${v.length}]`);
    }
    let t;
    if (typeof v === 'object') t = JSON.stringify(v);
    else t = String(v);
    if (t.length > 80) return h('span', { title: t.slice(0, 2000) }, t.slice(0, 80) + '…');
    return t;
  }

  function fmtVec(x) {
    if (Number.isInteger(x)) return String(x);
    return String(Number(x.toPrecision(4)));
  }

  /* Byte offset (the parser's "at position N", 0-based, UTF-8) to a code point column. */
  function byteToColumn(text, pos) {
    const bytes = new TextEncoder().encode(text);
    if (pos >= bytes.length) return [...text].length + (pos - bytes.length);
    return [...new TextDecoder().decode(bytes.slice(0, pos))].length;
  }

  /* ------------------------------------------------------------------ API */

  class ApiError extends Error {
    constructor(message, code, status) {
      super(message);
      this.code = code;
      this.status = status;
    }
  }

  /* An Int64 primary key sent back to the server as the exact digits it was typed or received
   * with: JSON.stringify can only write a Number, which is rounded beyond 2^53. toJSON writes a
   * marker string holding a per-page random nonce; jsonBody() replaces each marker by the bare
   * digits (a JSON integer, which the server reads exactly). Text from the user cannot forge a
   * marker: it would have to guess the nonce. */
  const I64_NONCE = Array.from(crypto.getRandomValues(new Uint32Array(2)), (x) => x.toString(36)).join('');
  const I64_MARK = new RegExp(`"\\\\u0001${I64_NONCE}:(-?\\d+)"`, 'g');
  const I64_MIN = -(2n ** 63n), I64_MAX = 2n ** 63n - 1n;

  class Int64Text {
    constructor(text) {
      const t = String(text).trim().replace(/^\+/, '');
      if (!/^-?\d+$/.test(t)) throw new Error(`not an integer: ${t}`);
      const b = BigInt(t);
      if (b < I64_MIN || b > I64_MAX) throw new Error(`${t} is out of the Int64 range`);
      this.text = b.toString(); /* canonical: no leading zeros, no "+", "-0" -> "0" */
    }
    toString() { return this.text; }
    toJSON() { return `\u0001${I64_NONCE}:${this.text}`; }
  }

  function jsonBody(body) {
    return JSON.stringify(body || {}).replace(I64_MARK, '$1');
  }

  function authHeaders(token) {
    const t = token === undefined ? st.token : token;
    return t ? { Authorization: 'Bearer ' + t } : {};
  }

  /* POST path with a JSON body; resolves to the envelope's data, throws ApiError on code != 0.
   * opt.token: the token to try (log-in); opt.login: no log-out on 1800; opt.int64Strings: ask
   * for Int64 values as strings (Accept-Type-Allow-Int64: false: ids beyond 2^53 stay exact). */
  async function api(path, body, opt) {
    opt = opt || {};
    const headers = Object.assign({ 'Content-Type': 'application/json' }, authHeaders(opt.token));
    if (opt.int64Strings) headers['Accept-Type-Allow-Int64'] = 'false';
    let res;
    try {
      res = await fetch(path, { method: 'POST', headers, body: jsonBody(body),
                                cache: 'no-store', credentials: 'omit' });
    } catch (e) {
      throw new ApiError(`cannot reach the server (${path}): ${e && e.message ? e.message : e}`, -1, 0);
    }
    const text = await res.text();
    let j;
    try {
      j = JSON.parse(text);
    } catch (_) {
      throw new ApiError(`${path}: HTTP ${res.status}: ${text.slice(0, 300)}`, -1, res.status);
    }
    if (!j || typeof j !== 'object') throw new ApiError(`${path}: not a JSON object`, -1, res.status);
    if (j.code !== 0) {
      const err = new ApiError(String(j.message || `error code ${j.code}`), Number(j.code), res.status);
      if (err.code === 1800 && !opt.login) authLost();
      throw err;
    }
    return opt.raw ? { data: j.data, text } : j.data;
  }

  async function fetchMetricsText() {
    let res;
    try {
      res = await fetch('/metrics', { headers: authHeaders(), cache: 'no-store', credentials: 'omit' });
    } catch (e) {
      throw new ApiError(`cannot reach the server (/metrics): ${e && e.message ? e.message : e}`, -1, 0);
    }
    const text = await res.text();
    if (!res.ok) {
      let msg = text.slice(0, 300), code = -1;
      try {
        const j = JSON.parse(text);
        msg = String(j.message);
        code = Number(j.code);
      } catch (_) { /* not JSON */ }
      if (code === 1800) authLost();
      throw new ApiError(`GET /metrics: HTTP ${res.status}: ${msg}`, code, res.status);
    }
    return text;
  }

  function errText(e) {
    if (e instanceof ApiError) {
      if (e.code === 1401 || e.status === 403) return `Not allowed (code ${e.code}): ${e.message}`;
      return e.code > 0 ? `${e.message} (code ${e.code})` : e.message;
    }
    return String(e && e.message ? e.message : e);
  }

  /* The page's error box holds one message, tagged with who put it there (a poll clears only
   * its own). */
  function showError(e, tag) {
    const b = $('error-box');
    b.textContent = errText(e);
    b.dataset.tag = tag || 'action';
    b.hidden = false;
  }

  function clearError(tag) {
    const b = $('error-box');
    if (tag && b.dataset.tag !== tag) return;
    b.hidden = true;
    b.textContent = '';
    delete b.dataset.tag;
  }

  /* An event handler that reports what it throws instead of leaving it to the console (no
   * unhandled rejection), in the page that made it: an error that comes back after the route
   * changed is dropped, not shown on the next page. */
  function act(fn) {
    const v = view;
    return (ev) => {
      const report = (e) => {
        if (v.alive) showError(e);
      };
      try {
        const r = fn(ev); /* runs synchronously up to its first await: preventDefault works */
        if (r && typeof r.catch === 'function') r.catch(report);
      } catch (e) {
        report(e);
      }
    };
  }

  /* A button that is busy: aria-disabled instead of disabled, so that a button the keyboard is
   * on keeps the focus (a disabled one loses it to the body); handlers check isBusy(). */
  function setBusy(btn, on) {
    if (on) {
      btn.setAttribute('aria-disabled', 'true');
      btn.dataset.busy = '1';
    } else {
      btn.removeAttribute('aria-disabled');
      delete btn.dataset.busy;
    }
  }

  function isBusy(btn) { return btn.dataset.busy === '1'; }

  /* ------------------------------------------------------------------ views and routes */

  function newView() {
    view.alive = false;
    for (const t of view.timers) clearTimeout(t);
    /* a confirmation left open by the old page (back button, log-out) must not act on it */
    for (const d of document.querySelectorAll('dialog[open]')) d.close('cancel');
    view = { alive: true, timers: new Set() };
    return view;
  }

  function later(v, fn, ms) {
    if (!v.alive) return;
    const id = setTimeout(() => {
      v.timers.delete(id);
      if (v.alive) fn();
    }, ms);
    v.timers.add(id);
  }

  const ROUTES = [
    { re: /^\/overview$/, fn: pageOverview, nav: 'overview' },
    { re: /^\/collection\/([^/]+)\/([^/]+)$/, fn: pageCollection, nav: 'overview' },
    { re: /^\/data\/([^/]+)\/([^/]+)$/, fn: pageData, nav: 'overview' },
    { re: /^\/search\/([^/]+)\/([^/]+)$/, fn: pageSearch, nav: 'overview' },
    { re: /^\/map\/([^/]+)\/([^/]+)$/, fn: pageMap, nav: 'overview' },
    { re: /^\/metrics$/, fn: pageMetrics, nav: 'metrics' },
    { re: /^\/bench$/, fn: pageBench, nav: 'bench' },
  ];

  function route(focus) {
    const v = newView();
    clearError();
    if (st.token === null) {
      renderLogin(v);
      return;
    }
    const hash = location.hash.replace(/^#/, '') || '/overview';
    for (const r of ROUTES) {
      const m = r.re.exec(hash);
      if (!m) continue;
      let args;
      try {
        args = m.slice(1).map(decodeURIComponent);
      } catch (_) {
        break;
      }
      renderNav(r.nav);
      const main = clear($('main'));
      r.fn(v, main, ...args).catch((e) => {
        if (v.alive) showError(e);
      });
      if (focus) {
        const h1 = main.querySelector('h1');
        if (h1) h1.focus({ preventScroll: true });
      }
      return;
    }
    location.replace('#/overview');
  }

  function renderNav(current) {
    const nav = clear($('nav'));
    const link = (key, label) => h('a', { href: '#/' + key, testid: 'nav-' + key,
                                          'aria-current': key === current ? 'page' : null }, label);
    if (st.token !== null) append(nav, [link('overview', 'Overview'), link('metrics', 'Metrics'), link('bench', 'Bench')]);
    renderWho();
  }

  function renderWho() {
    const who = clear($('who'));
    if (st.token === null) return;
    const d = st.server || {};
    append(who, [
      h('span', { testid: 'who-user' }, whoName(d)),
      st.canWrite ? null : h('span', { class: 'badge', testid: 'readonly-badge' }, 'read-only'),
      h('button', { type: 'button', testid: 'logout', onclick: logout }, 'Log out'),
    ]);
  }

  /* The user server/describe names, else the one of a user:password token (the server checked
   * it), else what kind of credential this is. */
  function whoName(d) {
    if (d && d.user) return `user ${d.user}`;
    const t = st.token || '';
    if (t.includes(':')) return `user ${t.slice(0, t.indexOf(':'))}`;
    return t ? 'API token' : 'no token';
  }

  function setServer(d) {
    st.server = d || {};
    st.canWrite = !(d && d.canWrite === false);
    renderWho();
  }

  function logout() {
    st.token = null;
    st.server = null;
    st.canWrite = false;
    metricsRing.length = 0;
    sessionStorage.removeItem(TOKEN_KEY);
    route(true);
  }

  function authLost() {
    if (st.token === null) return;
    st.token = null;
    st.server = null;
    metricsRing.length = 0;
    sessionStorage.removeItem(TOKEN_KEY);
    const v = newView();
    renderLogin(v, 'The server refused the token (code 1800): log in again.');
  }

  /* ------------------------------------------------------------------ log-in */

  function renderLogin(v, message) {
    renderNav(null);
    const main = clear($('main'));
    const token = h('input', { type: 'password', testid: 'login-token', autocomplete: 'off',
                               spellcheck: 'false' });
    const user = h('input', { type: 'text', testid: 'login-user', autocomplete: 'username',
                              spellcheck: 'false' });
    const pass = h('input', { type: 'password', testid: 'login-password', autocomplete: 'current-password' });
    const err = h('div', { class: 'err', role: 'alert', id: 'login-error', testid: 'login-error', hidden: !message },
                  message || '');
    for (const i of [token, user, pass]) i.setAttribute('aria-describedby', 'login-error');
    const submit = h('button', { type: 'submit', class: 'primary', testid: 'login-submit' }, 'Log in');
    const anon = h('button', { type: 'button', testid: 'login-anon' }, 'Continue without token');

    function fail(text) {
      err.textContent = text;
      err.hidden = false;
    }

    async function tryLogin(tok) {
      if (isBusy(submit)) return; /* one try at a time (Enter pressed twice) */
      setBusy(submit, true);
      setBusy(anon, true);
      err.hidden = true;
      try {
        const d = await api('/v2/sextant/server/describe', {}, { token: tok, login: true });
        if (!v.alive) return;
        st.token = tok;
        sessionStorage.setItem(TOKEN_KEY, tok);
        setServer(d);
        route(true);
      } catch (e) {
        if (!v.alive) return;
        fail(e instanceof ApiError && e.code === 1800
          ? `Wrong credentials: ${e.message} (code 1800)` : errText(e));
        setBusy(submit, false);
        setBusy(anon, false);
      }
    }

    const form = h('form', {
      class: 'panel login', testid: 'login-form', 'aria-labelledby': 'login-title',
      onsubmit: (ev) => {
        ev.preventDefault();
        const t = token.value.trim();
        if (!t && user.value.includes(':')) {
          /* Bearer user:password splits at the first ':' */
          fail('A user name cannot hold ":" (the token is user:password).');
          user.focus();
          return;
        }
        tryLogin(t || (user.value ? `${user.value}:${pass.value}` : ''));
      },
    },
    h('h1', { id: 'login-title', tabindex: '-1' }, 'Log in to Sextant'),
    h('p', { class: 'sub' }, 'An API token (or user:password), or a user name and a password. ' +
      'The token stays in this tab only (sessionStorage).'),
    field('Token', token),
    h('div', { class: 'or' }, 'or'),
    field('User', user),
    field('Password', pass),
    err,
    h('div', { class: 'buttons' }, anon, submit));
    anon.addEventListener('click', () => tryLogin(''));
    main.append(form);
    token.focus();
  }

  /* ------------------------------------------------------------------ shared page parts */

  function collPath(db, name) { return `${encodeURIComponent(db)}/${encodeURIComponent(name)}`; }

  function pageHead(title, db, name, current) {
    const p = collPath(db, name);
    const link = (key, label) => h('a', { href: `#/${key}/${p}`, testid: 'sub-' + key,
                                          'aria-current': key === current ? 'page' : null }, label);
    return h('div', null,
      h('h1', { tabindex: '-1' }, `${title}: `, h('span', { class: 'mono' }, name)),
      h('p', { class: 'sub' }, `database ${db}`),
      h('nav', { class: 'subnav', 'aria-label': 'Collection pages' },
        link('collection', 'Collection'), link('data', 'Data'), link('search', 'Search'),
        link('map', 'Vector map')));
  }

  function paramOf(f, key) {
    for (const p of f.params || []) if (p && p.key === key) return p.value;
    return undefined;
  }

  function schemaInfo(desc) {
    const fields = (desc.fields || []).map((f) => ({
      name: String(f.name), type: String(f.type), primary: !!f.primaryKey,
      dim: num(paramOf(f, 'dim')), raw: f,
    }));
    const pk = fields.find((f) => f.primary) || fields[0] || { name: 'id', type: 'Int64' };
    return {
      fields, pk: pk.name, pkType: pk.type,
      vectors: fields.filter((f) => VEC_TYPES.has(f.type)),
      scalars: fields.filter((f) => !VEC_TYPES.has(f.type)),
      byName: new Map(fields.map((f) => [f.name, f])),
      dynamic: !!desc.enableDynamicField,
    };
  }

  async function describe(db, name) {
    return api('/v2/vectordb/collections/describe', { dbName: db, collectionName: name });
  }

  /* A primary key typed by the user (or received from the server as text, with
   * Accept-Type-Allow-Int64: false), as the schema's type wants it: an integer key goes back as
   * its exact digits (Int64Text), never through a Number (rounded beyond 2^53). */
  function parsePk(text, info) {
    const t = String(text).trim();
    if (t === '') throw new Error('enter a primary key');
    if (/^Int(8|16|32|64)$/.test(info.pkType)) {
      if (!/^[-+]?\d+$/.test(t)) throw new Error(`${info.pk} is ${info.pkType}: enter an integer`);
      try {
        return new Int64Text(t);
      } catch (e) {
        throw new Error(`${info.pk} is ${info.pkType}: ${e.message}`);
      }
    }
    if (/^".*"$/.test(t)) {
      try { return String(JSON.parse(t)); } catch (_) { /* keep as typed */ }
    }
    return t;
  }

  /* A message with the parser's "at position N" drawn as a caret under the filter. */
  function filterErrorView(box, e, filterText) {
    clear(box);
    const msg = errText(e);
    box.append(h('div', null, msg));
    const m = /at position (\d+)/.exec(e && e.message ? e.message : '');
    if (m) {
      const col = byteToColumn(filterText, Number(m[1]));
      const line = filterText.replace(/[\t\r\n]/g, ' ');
      box.append(h('pre', { testid: 'filter-caret', 'aria-label': `the filter, position ${m[1]} marked` },
        line, '\n', ' '.repeat(col), h('span', { class: 'caret' }, '^')));
    }
    box.hidden = false;
  }

  function confirmDialog(opt) {
    return new Promise((resolve) => {
      const id = 'dlg' + (++uid);
      const cancel = h('button', { type: 'button', testid: opt.testid + '-cancel' }, 'Cancel');
      const ok = h('button', { type: 'button', class: opt.danger ? 'danger' : 'primary',
                               testid: opt.testid + '-confirm' }, opt.confirmText);
      const dlg = h('dialog', { testid: opt.testid + '-dialog', 'aria-labelledby': id },
        h('h2', { id }, opt.title), h('div', null, opt.body), h('div', { class: 'buttons' }, cancel, ok));
      document.body.append(dlg);
      cancel.addEventListener('click', () => dlg.close('cancel'));
      ok.addEventListener('click', () => dlg.close('ok'));
      dlg.addEventListener('close', () => {
        resolve(dlg.returnValue === 'ok');
        dlg.remove();
      });
      dlg.showModal();
      cancel.focus();
    });
  }

  /* ------------------------------------------------------------------ overview */

  async function pageOverview(v, main) {
    main.append(h('h1', { tabindex: '-1' }, 'Overview'));
    const body = h('div', { testid: 'overview' });
    main.append(body);
    const tick = async () => {
      try {
        const d = await api('/v2/sextant/server/describe', {});
        if (!v.alive) return;
        setServer(d);
        clearError('poll');
        swap(body, overviewView(d));
      } catch (e) {
        if (v.alive) showError(e, 'poll');
      }
      later(v, tick, 3000);
    };
    await tick();
  }

  function card(k, val, detail, testid) {
    return h('div', { class: 'card', testid },
      h('div', { class: 'k' }, k), h('div', { class: 'v' }, val),
      detail ? h('div', { class: 'd' }, detail) : null);
  }

  /* server/describe and collections/segments also list vector fields without an index (state
   * IndexStateNone, no index name) */
  function hasIndex(ix) {
    return !!(ix && (ix.indexName || prettyIndexState(ix.state) !== 'None'));
  }

  function indexCell(indexes) {
    indexes = (indexes || []).filter(hasIndex);
    if (!indexes.length) return h('span', { class: 'muted' }, 'no index');
    return indexes.map((ix) => {
      const pct = indexPct(ix);
      const stt = prettyIndexState(ix.state);
      return h('div', null, `${ix.indexType || '?'} `, badge(stt, stateClass(stt)),
               stt === 'Finished' ? null : ` ${pct.toFixed(0)}%`);
    });
  }

  function overviewView(d) {
    const mem = d.memory || {}, disk = d.disk || {};
    const budget = num(mem.budgetBytes);
    const out = [h('div', { class: 'cards' },
      card('Version', String(d.version || '—'), null, 'ov-version'),
      card('Uptime', fmtDur(d.uptimeSeconds), null, 'ov-uptime'),
      card('Health', badge(String(d.health || '—'), d.health === 'ok' ? 'good' : 'bad'), null, 'ov-health'),
      card('Storage', String(d.storage || '—'), null, 'ov-storage'),
      card('Data directory', h('span', { class: 'mono' }, String(d.dataDir || '—')), null, 'ov-datadir'),
      card('User', whoName(d).replace(/^user /, ''), d.canWrite === false ? 'read-only' : 'read-write', 'ov-user'),
      card('Memory', fmtBytes(mem.usedBytes),
           `budget ${budget > 0 ? fmtBytes(budget) : 'none'} · peak ${fmtBytes(mem.peakBytes)} · RSS ${fmtBytes(mem.rssBytes)}`,
           'ov-memory'),
      card('Disk', fmtBytes(disk.dataBytes), `free ${fmtBytes(disk.freeBytes)} of ${fmtBytes(disk.totalBytes)}`,
           'ov-disk'))];
    const dbs = Array.isArray(d.databases) ? d.databases : [];
    const wrap = h('div', { testid: 'overview-collections' });
    for (const db of dbs) {
      const name = String(db.name);
      const colls = Array.isArray(db.collections) ? db.collections : [];
      const rows = colls.map((c) => {
        const cn = String(c.name);
        return h('tr', { 'data-collection': cn },
          h('td', null, h('a', { href: `#/collection/${collPath(name, cn)}`, testid: `coll-link-${cn}`,
                                 'data-fk': `coll-${name}-${cn}` }, cn)),
          h('td', { class: 'num' }, fmtInt(c.rows)),
          h('td', { class: 'num' }, fmtInt(c.segments)),
          h('td', { class: 'num' }, fmtInt(c.growingRows)),
          h('td', { class: 'num' }, fmtBytes(c.memoryBytes)),
          h('td', { class: 'num' }, fmtBytes(c.diskBytes)),
          h('td', null, indexCell(c.indexes)),
          h('td', null, badge(prettyLoad(c.loadState), stateClass(prettyLoad(c.loadState)))));
      });
      if (!rows.length) rows.push(h('tr', null, h('td', { colspan: '8', class: 'muted' }, 'no collection')));
      wrap.append(h('h2', null, 'Database ', h('span', { class: 'mono' }, name)),
        table(['Collection', { label: 'Rows', num: true }, { label: 'Segments', num: true },
               { label: 'Growing rows', num: true }, { label: 'Memory', num: true },
               { label: 'Disk', num: true }, 'Index', 'Load state'], rows, { 'data-testid': `db-${name}` }));
    }
    if (!dbs.length) wrap.append(h('p', { class: 'muted' }, 'No database.'));
    out.push(wrap);
    return out;
  }

  /* ------------------------------------------------------------------ collection */

  const rateHist = new Map(); /* "db/coll/index" -> [{t, done}] */

  function indexPct(ix) {
    const total = num(ix.totalRows);
    const done = (num(ix.indexedRows) || 0) + (num(ix.buildingRows) || 0);
    if (total > 0) return Math.max(0, Math.min(100, (100 * done) / total));
    return prettyIndexState(ix.state) === 'Finished' ? 100 : 0;
  }

  /* rows/s over the samples of the last ~5 s (one a second while a build runs) */
  function indexRate(key, done) {
    const now = performance.now() / 1000;
    let hist = rateHist.get(key);
    if (!hist) rateHist.set(key, (hist = []));
    const last = hist[hist.length - 1];
    if (!last || now - last.t >= 0.5) hist.push({ t: now, done });
    while (hist.length > 2 && now - hist[0].t > 5.5) hist.shift();
    const a = hist[0], b = hist[hist.length - 1];
    if (b.t - a.t < 0.9) return NaN;
    return Math.max(0, (b.done - a.done) / (b.t - a.t));
  }

  async function pageCollection(v, main, db, name) {
    main.append(pageHead('Collection', db, name, 'collection'));
    const page = h('div', { testid: 'collection-page' });
    main.append(page);
    const sec = (title, testid) => {
      const body = h('div', { testid });
      page.append(h('section', { class: 'panel' }, h('h2', null, title), body));
      return body;
    };
    const loadBody = sec('Load state', null);
    const idxSec = sec('Index build', null);
    const idxBody = h('div', { testid: 'index-list' });
    const idxForm = h('div');
    idxSec.append(idxBody, idxForm);
    const schemaBody = sec('Schema', 'schema');
    const segBody = sec('Segments', 'segments');
    const partBody = sec('Partitions', 'partitions');
    const aliasBody = sec('Aliases', 'aliases');
    const body = { dbName: db, collectionName: name };
    let info = null, lastFull = 0, lastIndexes = [];
    let formOpen = null; /* the fields the create-index form offers: it is redrawn only when they change */

    async function doAction(path, extra) {
      try {
        await api(path, Object.assign({}, body, extra || {}));
        if (v.alive) clearError();
      } catch (e) {
        if (v.alive) showError(e);
      }
      if (v.alive) await refresh(true);
    }

    function renderLoad(ls) {
      const state = ls && ls.loadState;
      const kids = [h('p', null, 'State: ', badge(prettyLoad(state), stateClass(prettyLoad(state))),
                      ls && ls.loadProgress !== undefined && prettyLoad(state) === 'Loading' ? ` ${ls.loadProgress}%` : null)];
      kids[0].querySelector('.badge').setAttribute('data-testid', 'load-state');
      if (st.canWrite) {
        kids.push(h('div', { class: 'row' },
          h('button', { type: 'button', class: 'write-action', testid: 'btn-load',
                        onclick: act(() => doAction('/v2/vectordb/collections/load')) }, 'Load'),
          h('button', { type: 'button', class: 'write-action', testid: 'btn-release',
                        onclick: act(() => doAction('/v2/vectordb/collections/release')) }, 'Release'),
          h('button', { type: 'button', class: 'danger write-action', testid: 'btn-drop',
                        onclick: act(dropCollection) }, 'Drop collection…')));
      }
      swap(loadBody, kids);
    }

    async function dropCollection() {
      const ok = await confirmDialog({
        testid: 'drop', title: 'Drop the collection?', danger: true, confirmText: 'Drop',
        body: [h('p', null, 'This deletes ', h('code', null, name), ' and all its rows, for good.')],
      });
      if (!ok || !v.alive) return;
      await api('/v2/vectordb/collections/drop', body);
      if (v.alive) location.hash = '#/overview';
    }

    function renderIndexes(indexes) {
      const kids = [];
      for (const ix of indexes) {
        const f = String(ix.fieldName);
        const stt = prettyIndexState(ix.state);
        if (!hasIndex(ix)) {
          kids.push(h('div', { class: 'idx', testid: `index-${f}`, 'data-state': stt },
            h('h3', null, h('span', { class: 'mono' }, f), ': no index'),
            h('div', null, 'State: ', h('span', { class: 'badge', testid: `index-state-${f}` }, stt),
              ' · searches scan every row')));
          continue;
        }
        const total = num(ix.totalRows) || 0, indexed = num(ix.indexedRows) || 0;
        const building = num(ix.buildingRows) || 0, done = indexed + building;
        const pct = indexPct(ix);
        const rate = indexRate(`${db}/${name}/${ix.indexName}/${f}`, done);
        const eta = stt === 'InProgress' && rate > 0 && total > done ? (total - done) / rate : NaN;
        const fill = h('div');
        fill.style.width = pct.toFixed(1) + '%';
        kids.push(h('div', { class: 'idx', testid: `index-${f}`, 'data-state': stt },
          h('h3', null, `${ix.indexName || f} on `, h('span', { class: 'mono' }, f), `: ${ix.indexType || '?'}`,
            ix.metricType ? ` (${ix.metricType})` : ''),
          h('div', null, 'State: ', h('span', { class: 'badge ' + stateClass(stt), testid: `index-state-${f}` }, stt)),
          h('div', {
            class: 'bar' + (stt === 'Finished' ? ' done' : stt === 'Failed' ? ' failed' : ''),
            role: 'progressbar', 'aria-valuemin': '0', 'aria-valuemax': '100',
            'aria-valuenow': String(Math.round(pct)), 'aria-label': `index build of ${f}`,
            testid: `index-progress-${f}`, 'data-done': String(done), 'data-total': String(total),
            'data-state': stt,
          }, fill),
          h('div', { class: 'facts' },
            h('span', { testid: `index-rows-${f}` },
              `${fmtInt(indexed)} indexed + ${fmtInt(building)} building of ${fmtInt(total)} rows (${pct.toFixed(1)}%)`),
            h('span', null, `pending ${fmtInt(ix.pendingRows)}`),
            h('span', null, `growing ${fmtInt(ix.growingRows)}`),
            h('span', { testid: `index-rate-${f}` },
              `rate ${stt !== 'InProgress' || Number.isNaN(rate) ? '—' : fmtNum(rate) + ' rows/s'}`),
            h('span', { testid: `index-eta-${f}` }, `ETA ${Number.isNaN(eta) ? '—' : fmtDur(eta)}`)),
          ix.failReason ? h('div', { class: 'err' }, `failed: ${ix.failReason}`) : null));
      }
      if (!indexes.length) kids.push(h('p', { class: 'muted' }, 'No index.'));
      swap(idxBody, kids);
      if (st.canWrite && info) {
        const have = new Set(indexes.filter(hasIndex).map((ix) => String(ix.fieldName)));
        const free = info.vectors.filter((f) => !have.has(f.name));
        const key = free.map((f) => f.name).join('\n');
        if (key !== formOpen) {
          formOpen = key;
          swap(idxForm, free.length ? createIndexForm(free) : null);
        }
      }
    }

    function createIndexForm(fields) {
      const types = (t) => (t === 'BinaryVector' ? ['BIN_FLAT', 'BIN_IVF_FLAT']
        : t === 'SparseFloatVector' ? ['SPARSE_INVERTED_INDEX', 'SPARSE_WAND']
          : ['HNSW', 'IVF_FLAT', 'IVF_SQ8', 'IVF_PQ', 'DISKANN', 'FLAT', 'AUTOINDEX']);
      const metrics = (t) => (t === 'BinaryVector' ? ['HAMMING', 'JACCARD']
        : t === 'SparseFloatVector' ? ['IP', 'BM25'] : ['L2', 'IP', 'COSINE']);
      const defaults = { HNSW: { M: 16, efConstruction: 200 }, IVF_FLAT: { nlist: 128 }, IVF_SQ8: { nlist: 128 },
                         IVF_PQ: { nlist: 128, m: 8, nbits: 8 }, BIN_IVF_FLAT: { nlist: 128 } };
      const fsel = h('select', { 'data-fk': 'ci-field' }, fields.map((f) => h('option', { value: f.name }, f.name)));
      const tsel = h('select', { 'data-fk': 'ci-type' });
      const msel = h('select', { 'data-fk': 'ci-metric' });
      const params = h('input', { type: 'text', 'data-fk': 'ci-params', spellcheck: 'false' });
      const fill = () => {
        const t = (info.byName.get(fsel.value) || {}).type;
        swap(tsel, types(t).map((x) => h('option', { value: x }, x)));
        swap(msel, metrics(t).map((x) => h('option', { value: x }, x)));
        params.value = JSON.stringify(defaults[tsel.value] || {});
      };
      fsel.addEventListener('change', fill);
      tsel.addEventListener('change', () => { params.value = JSON.stringify(defaults[tsel.value] || {}); });
      fill();
      return h('form', {
        class: 'row', testid: 'create-index-form',
        onsubmit: act(async (ev) => {
          ev.preventDefault();
          let p;
          try { p = JSON.parse(params.value || '{}'); } catch (e) { throw new Error(`build parameters: ${e.message}`); }
          if (!p || typeof p !== 'object' || Array.isArray(p)) throw new Error('build parameters: a JSON object, e.g. {"M":16}');
          await api('/v2/vectordb/indexes/create', Object.assign({}, body, {
            indexParams: [{ fieldName: fsel.value, indexName: `${fsel.value}_idx`, metricType: msel.value,
                            params: Object.assign({ index_type: tsel.value }, p) }],
          }));
          if (!v.alive) return;
          clearError();
          await refresh(true);
        }),
      }, h('strong', null, 'Create an index'), field('Vector field', fsel), field('Type', tsel), field('Metric', msel),
      field('Build parameters (JSON)', params, 'grow'),
      h('button', { type: 'submit', class: 'primary write-action', 'data-fk': 'ci-go' }, 'Create index'));
    }

    function renderSchema(desc) {
      const flags = (f) => [
        f.primaryKey ? badge('primary key', 'good') : null, f.autoId ? badge('auto id') : null,
        f.partitionKey ? badge('partition key') : null, f.clusteringKey ? badge('clustering key') : null,
        f.nullable ? badge('nullable') : null, f.isFunctionOutput ? badge('function output') : null];
      const rows = (desc.fields || []).map((f) => h('tr', { 'data-field': String(f.name) },
        h('td', { class: 'mono' }, String(f.name)),
        h('td', null, String(f.type) + (f.elementType ? `<${f.elementType}>` : '')),
        h('td', { class: 'mono' }, (f.params || []).map((p) => `${p.key}=${p.value}`).join(', ')),
        h('td', null, flags(f)),
        h('td', { class: 'cell' }, f.defaultValue === undefined ? '' : cellValue(f.defaultValue, '')),
        h('td', { class: 'cell' }, String(f.description || ''))));
      swap(schemaBody,
        h('div', { class: 'cards' },
          card('Collection id', String(desc.collectionID === undefined ? '—' : desc.collectionID), null, null),
          card('Dynamic field', desc.enableDynamicField ? 'on' : 'off', null, 'dynamic-field'),
          card('Consistency', String(desc.consistencyLevel || '—')),
          card('Shards / partitions', `${fmtInt(desc.shardsNum)} / ${fmtInt(desc.partitionsNum)}`),
          card('Description', String(desc.description || '—'))),
        table(['Field', 'Type', 'Params', 'Flags', 'Default', 'Description'], rows, null));
    }

    function renderSegments(sg) {
      const segs = Array.isArray(sg.segments) ? sg.segments : [];
      const rows = segs.map((x) => h('tr', { 'data-segment': String(x.id) },
        h('td', { class: 'num' }, String(x.id)),
        h('td', null, badge(String(x.state), x.state === 'Sealed' ? 'good' : 'busy')),
        h('td', { class: 'num' }, fmtInt(x.rows)),
        h('td', { class: 'num' }, fmtInt(x.deletedRows)),
        h('td', null, x.persisted ? 'yes' : 'no'),
        h('td', null, (x.indexes || []).map((ix) => h('div', null, `${ix.fieldName}: `,
          badge(String(ix.state), ix.state === 'Built' ? 'good' : ix.state === 'Pending' ? 'busy' : '')))),
        h('td', null, (x.files || []).length
          ? h('ul', { class: 'files' }, x.files.map((fl) => h('li', null, h('span', { class: 'mono' }, String(fl.name)),
            ` ${fmtBytes(fl.bytes)} `, badge(String(fl.location), fl.location === 'store' ? 'busy' : ''))))
          : h('span', { class: 'muted' }, 'none'))));
      if (!rows.length) rows.push(h('tr', null, h('td', { colspan: '7', class: 'muted' }, 'no segment')));
      swap(segBody, h('p', { class: 'sub' }, `storage: ${sg.storage || '—'}`),
        table([{ label: 'ID', num: true }, 'State', { label: 'Rows', num: true }, { label: 'Deleted', num: true },
               'Persisted', 'Indexes', 'Files'], rows, null));
    }

    function renderList(el, items, what) {
      if (!items || !items.length) {
        swap(el, h('p', { class: 'muted' }, `No ${what}.`));
        return;
      }
      swap(el, h('ul', null, items.map((x) => h('li', { class: 'mono' }, String(x)))));
    }

    /* The 1 s poll and an action's refresh can overlap: only the latest one started draws, so an
     * answer that was on its way before a Load cannot put "Not loaded" back after it. */
    let refreshSeq = 0;
    async function refresh(full) {
      const my = ++refreshSeq;
      const jobs = [api('/v2/sextant/collections/segments', body, { int64Strings: true }), /* segment ids */
                    api('/v2/vectordb/collections/get_load_state', body)];
      if (full) {
        jobs.push(api('/v2/vectordb/collections/describe', body, { raw: true }),
                  api('/v2/vectordb/partitions/list', body),
                  api('/v2/vectordb/aliases/list', body));
      }
      const r = await Promise.allSettled(jobs);
      if (!v.alive || my !== refreshSeq) return;
      const failed = r.find((x) => x.status === 'rejected');
      if (failed) showError(failed.reason, 'poll');
      else clearError('poll');
      if (full) {
        lastFull = performance.now();
        if (r[2].status === 'fulfilled') {
          const desc = r[2].value.data || {};
          const m = /"collectionID"\s*:\s*(\d+)/.exec(r[2].value.text);
          if (m) desc.collectionID = m[1]; /* exact, beyond 2^53 */
          info = schemaInfo(desc);
          renderSchema(desc);
        }
        if (r[3].status === 'fulfilled') renderList(partBody, r[3].value, 'partition');
        if (r[4].status === 'fulfilled') renderList(aliasBody, r[4].value, 'alias');
      }
      if (r[1].status === 'fulfilled') renderLoad(r[1].value);
      if (r[0].status === 'fulfilled') {
        lastIndexes = Array.isArray(r[0].value.indexes) ? r[0].value.indexes : [];
        renderIndexes(lastIndexes);
        renderSegments(r[0].value);
      }
    }

    const tick = async () => {
      try {
        await refresh(performance.now() - lastFull > 2900);
      } catch (e) {
        if (v.alive) showError(e, 'poll');
      }
      /* every second: a build that starts (a flush, a new index) shows at once; the full
       * describe runs every 3 s (refresh's argument) */
      later(v, tick, 1000);
    };
    await tick();
  }

  /* ------------------------------------------------------------------ data browser */

  async function pageData(v, main, db, name) {
    main.append(pageHead('Data', db, name, 'data'));
    const page = h('div', { testid: 'data-page' });
    main.append(page);
    const desc = await describe(db, name);
    if (!v.alive) return;
    const info = schemaInfo(desc);
    const base = { dbName: db, collectionName: name };
    let offset = 0, filter = '', count = NaN;

    const filterIn = h('input', { type: 'text', testid: 'filter-input', spellcheck: 'false',
                                  placeholder: 'e.g. n > 10 and tag like "a%"' });
    const filterErr = h('div', { class: 'err filter-error', role: 'alert', testid: 'filter-error', hidden: true });
    const prev = h('button', { type: 'button', testid: 'data-prev', disabled: true }, '← Prev');
    const next = h('button', { type: 'button', testid: 'data-next', disabled: true }, 'Next →');
    const range = h('span', { testid: 'data-range', class: 'muted', 'aria-live': 'polite' }, '');
    const rowsBox = h('div');
    const loadHint = h('div');

    page.append(h('section', { class: 'panel' },
      h('h2', null, 'Rows'),
      h('form', {
        class: 'row', role: 'search',
        onsubmit: act(async (ev) => {
          ev.preventDefault();
          filter = filterIn.value;
          offset = 0;
          await load();
        }),
      }, field('Filter', filterIn, 'grow'), h('button', { type: 'submit', class: 'primary', testid: 'filter-apply' }, 'Apply')),
      filterErr, loadHint,
      h('div', { class: 'row' }, prev, next, range),
      rowsBox));

    prev.addEventListener('click', act(async () => {
      offset = Math.max(0, offset - PAGE_ROWS);
      await load();
    }));
    next.addEventListener('click', act(async () => {
      offset += PAGE_ROWS;
      await load();
    }));

    function rowsTable(rows, testid) {
      const cols = info.fields.map((f) => f.name);
      for (const r of rows) for (const k of Object.keys(r)) if (!cols.includes(k)) cols.push(k);
      const body = rows.map((r) => h('tr', { 'data-id': String(r[info.pk]) },
        cols.map((c) => {
          const f = info.byName.get(c);
          const t = f ? f.type : '';
          return h('td', { class: VEC_TYPES.has(t) ? null : 'cell' }, cellValue(r[c], t));
        })));
      return table(cols.map((c) => c), body, { 'data-testid': testid });
    }

    /* Next pressed twice, or Apply during a Next: only the latest load draws (a late answer
     * for an older offset or filter would show rows that do not match the range and buttons). */
    let loadSeq = 0;
    async function load() {
      const my = ++loadSeq;
      const q = Object.assign({}, base, { filter, limit: PAGE_ROWS, offset, outputFields: ['*'] });
      const c = Object.assign({}, base, { filter, outputFields: ['count(*)'] });
      const [rr, cr] = await Promise.allSettled([
        api('/v2/vectordb/entities/query', q, { int64Strings: true }),
        api('/v2/vectordb/entities/query', c, { int64Strings: true })]);
      if (!v.alive || my !== loadSeq) return;
      clear(loadHint);
      if (rr.status === 'rejected') {
        const e = rr.reason;
        prev.disabled = offset === 0;
        next.disabled = true;
        swap(rowsBox, table(info.fields.map((f) => f.name), [], { 'data-testid': 'data-rows' }));
        range.textContent = '';
        if (e instanceof ApiError && e.code === 101) {
          filterErr.hidden = true;
          showError(e);
          if (st.canWrite) {
            loadHint.append(h('p', { class: 'notice' }, 'The collection is not loaded. ',
              h('button', { type: 'button', class: 'write-action', testid: 'data-load',
                            onclick: act(async () => {
                              await api('/v2/vectordb/collections/load', base);
                              if (!v.alive) return;
                              clearError();
                              await load();
                            }) }, 'Load it')));
          }
        } else {
          filterErrorView(filterErr, e, filter);
        }
        return;
      }
      filterErr.hidden = true;
      clearError();
      const rows = Array.isArray(rr.value) ? rr.value : [];
      count = cr.status === 'fulfilled' && cr.value[0] ? num(cr.value[0]['count(*)']) : NaN;
      swap(rowsBox, rowsTable(rows, 'data-rows'));
      prev.disabled = offset === 0;
      next.disabled = rows.length < PAGE_ROWS || offset + 2 * PAGE_ROWS > MAX_WINDOW ||
        (!Number.isNaN(count) && offset + PAGE_ROWS >= count);
      range.textContent = rows.length
        ? `rows ${fmtInt(offset + 1)}–${fmtInt(offset + rows.length)}${Number.isNaN(count) ? '' : ` of ${fmtInt(count)}`}`
        : (offset ? 'no more rows' : 'no row matches');
    }

    /* get by id */
    const idIn = h('input', { type: 'text', testid: 'get-id', spellcheck: 'false',
                              inputmode: /^Int/.test(info.pkType) ? 'numeric' : null });
    const getOut = h('div', { testid: 'get-result', 'aria-live': 'polite' });
    let getSeq = 0;
    page.append(h('section', { class: 'panel' }, h('h2', null, 'Get by primary key'),
      h('form', {
        class: 'row',
        onsubmit: act(async (ev) => {
          ev.preventDefault();
          const my = ++getSeq;
          clear(getOut);
          let id;
          try {
            id = parsePk(idIn.value, info);
          } catch (e) {
            getOut.append(h('div', { class: 'err', role: 'alert' }, e.message));
            return;
          }
          const rows = await api('/v2/vectordb/entities/get', Object.assign({}, base, { id: [id], outputFields: ['*'] }),
                                 { int64Strings: true });
          if (!v.alive || my !== getSeq) return;
          clear(getOut);
          if (!rows || !rows.length) getOut.append(h('p', { class: 'muted' }, `No row with ${info.pk} = ${String(id)}.`));
          else getOut.append(rowsTable(rows, 'get-rows'));
        }),
      }, field(`Primary key (${info.pk}, ${info.pkType})`, idIn), h('button', { type: 'submit', testid: 'get-run' }, 'Get')),
      getOut));

    /* delete by filter */
    if (st.canWrite) {
      const delIn = h('input', { type: 'text', testid: 'delete-filter', spellcheck: 'false' });
      const delOut = h('div', { testid: 'delete-result', 'aria-live': 'polite' });
      const delBtn = h('button', { type: 'submit', class: 'danger write-action', testid: 'delete-run' },
                       'Delete matching rows…');
      const plural = (x) => `${fmtInt(x)} row${num(x) === 1 ? '' : 's'}`;
      /* count, confirm, delete: one at a time (a second Enter during the count would open a
       * second dialog) */
      const deleteFlow = async () => {
        clear(delOut);
        const f = delIn.value.trim();
        if (!f) {
          delOut.append(h('div', { class: 'err', role: 'alert' }, 'Enter a filter (e.g. id in [1, 2]).'));
          return;
        }
        let n;
        try {
          const r = await api('/v2/vectordb/entities/query', Object.assign({}, base, { filter: f, outputFields: ['count(*)'] }),
                              { int64Strings: true });
          n = num(r && r[0] ? r[0]['count(*)'] : NaN);
        } catch (e) {
          if (!v.alive) return;
          const box = h('div', { class: 'err filter-error', role: 'alert' });
          filterErrorView(box, e, f);
          delOut.append(box);
          return;
        }
        if (!v.alive) return;
        if (!(n > 0)) {
          delOut.append(h('p', { class: 'notice' }, 'No row matches that filter: nothing to delete.'));
          return;
        }
        const ok = await confirmDialog({
          testid: 'delete', danger: true, confirmText: `Delete ${plural(n)}`,
          title: 'Delete rows?',
          body: [h('p', null, 'Delete ', h('strong', { testid: 'delete-count' }, fmtInt(n)),
                   ` row${n === 1 ? '' : 's'} matching `, h('code', null, f), ' from ', h('code', null, name), '?')],
        });
        if (!ok || !v.alive) return;
        const r = await api('/v2/vectordb/entities/delete', Object.assign({}, base, { filter: f }));
        if (!v.alive) return;
        const dn = r && r.deleteCount !== undefined ? r.deleteCount : n;
        delOut.append(h('p', { class: 'notice' }, `Deleted ${plural(dn)}.`));
        await load();
      };
      page.append(h('section', { class: 'panel' }, h('h2', null, 'Delete rows'),
        h('p', { class: 'hint' }, 'The rows matching the filter are counted first; nothing is deleted before you confirm.'),
        h('form', {
          class: 'row',
          onsubmit: act(async (ev) => {
            ev.preventDefault();
            if (isBusy(delBtn)) return;
            setBusy(delBtn, true);
            try {
              await deleteFlow();
            } finally {
              setBusy(delBtn, false);
            }
          }),
        }, field('Filter of the rows to delete', delIn, 'grow'), delBtn),
        delOut));
    }

    await load();
  }

  /* ------------------------------------------------------------------ search playground */

  function defaultSearchParams(type) {
    const t = String(type || '').toUpperCase();
    if (t.includes('HNSW')) return { ef: 64 };
    if (t.startsWith('IVF') || t.startsWith('BIN_IVF') || t.startsWith('GPU_IVF') || t === 'SCANN') return { nprobe: 16 };
    if (t === 'DISKANN') return { search_list: 50 };
    if (t === 'GPU_CAGRA') return { itopk_size: 64 };
    return {};
  }

  /* The start of a page about a collection's vectors (search, map): its heading and box, the
   * schema; null (with a notice) when the view is gone or the collection has no vector field. */
  async function vectorPage(v, main, db, name, title, key, testid) {
    main.append(pageHead(title, db, name, key));
    const page = h('div', { testid });
    main.append(page);
    const desc = await describe(db, name);
    if (!v.alive) return null;
    const info = schemaInfo(desc);
    if (!info.vectors.length) {
      page.append(h('p', { class: 'notice' }, 'This collection has no vector field.'));
      return null;
    }
    return { page, base: { dbName: db, collectionName: name }, info };
  }

  async function pageSearch(v, main, db, name) {
    const start = await vectorPage(v, main, db, name, 'Search', 'search', 'search-page');
    if (!start) return;
    const { page, base, info } = start;
    let indexTypes = new Map();
    try {
      const sg = await api('/v2/sextant/collections/segments', base);
      for (const ix of sg.indexes || []) if (hasIndex(ix)) indexTypes.set(String(ix.fieldName), ix.indexType);
    } catch (_) {
      indexTypes = new Map(); /* defaults stay {} */
    }
    if (!v.alive) return;

    const fieldSel = h('select', { testid: 'search-field' },
      info.vectors.map((f) => h('option', { value: f.name }, `${f.name} (${f.type}${Number.isNaN(f.dim) ? '' : `, dim ${f.dim}`})`)));
    const modeId = h('input', { type: 'radio', name: 'qmode', value: 'id', testid: 'search-mode-id', checked: true });
    const modeVec = h('input', { type: 'radio', name: 'qmode', value: 'vector', testid: 'search-mode-vector' });
    const idIn = h('input', { type: 'text', testid: 'search-id', spellcheck: 'false',
                              inputmode: /^Int/.test(info.pkType) ? 'numeric' : null });
    const vecIn = h('textarea', { testid: 'search-vector', rows: '3', spellcheck: 'false', placeholder: '[0.1, 0.2, …]' });
    const topk = h('input', { type: 'number', testid: 'search-topk', min: '1', max: '16384', value: '10' });
    const filterIn = h('input', { type: 'text', testid: 'search-filter', spellcheck: 'false' });
    const paramsIn = h('input', { type: 'text', testid: 'search-params', spellcheck: 'false' });
    const outChecks = info.fields.filter((f) => f.name !== info.pk).map((f) =>
      h('input', { type: 'checkbox', value: f.name, checked: !VEC_TYPES.has(f.type) }));
    const nq = h('input', { type: 'number', testid: 'recall-queries', min: '1', max: '1000', value: '10' });
    const runBtn = h('button', { type: 'submit', class: 'primary', testid: 'search-run' }, 'Search');
    const recallBtn = h('button', { type: 'button', testid: 'recall-run' }, 'Check recall');
    const filterErr = h('div', { class: 'err filter-error', role: 'alert', testid: 'filter-error', hidden: true });
    const latency = h('p', { testid: 'search-latency', 'aria-live': 'polite' });
    const results = h('div');
    const recallOut = h('div', { testid: 'recall-result', 'aria-live': 'polite' });

    const setParams = () => { paramsIn.value = JSON.stringify(defaultSearchParams(indexTypes.get(fieldSel.value))); };
    fieldSel.addEventListener('change', setParams);
    setParams();
    const syncMode = () => {
      idIn.disabled = !modeId.checked;
      vecIn.disabled = modeId.checked;
    };
    modeId.addEventListener('change', syncMode);
    modeVec.addEventListener('change', syncMode);
    syncMode();

    page.append(h('form', {
      class: 'panel', testid: 'search-form',
      onsubmit: act(async (ev) => {
        ev.preventDefault();
        await runSearch();
      }),
    },
    h('div', { class: 'row' }, field('Vector field', fieldSel),
      field('Top k', topk), field('Filter', filterIn, 'grow')),
    h('fieldset', null, h('legend', null, 'Query vector'),
      h('div', { class: 'row radio' },
        h('label', null, modeId, ' by a stored row’s id'), h('label', null, modeVec, ' pasted vector (JSON array)')),
      h('div', { class: 'row' }, field(`Row id (${info.pk})`, idIn), field('Vector', vecIn, 'grow'))),
    h('div', { class: 'row' }, field('Search params (JSON, e.g. {"ef":64}, {"nprobe":16}, {"search_list":50})', paramsIn, 'grow')),
    h('fieldset', null, h('legend', null, 'Output fields'),
      h('div', { class: 'checks' }, outChecks.map((c) => h('label', null, c, ' ' + c.value)))),
    h('div', { class: 'row' }, runBtn, recallBtn, field('queries', nq)),
    filterErr));
    page.append(h('section', { class: 'panel' }, h('h2', null, 'Results'), latency, results),
                h('section', { class: 'panel' }, h('h2', null, 'Recall'),
                  h('p', { class: 'hint' }, 'Runs the queries as asked and again with {"exact": true} (every row ' +
                    'scanned, no index) and compares the ids: recall@k. With queries N > 1, N stored rows picked ' +
                    'at random are the queries; with 1, the query above.'),
                  recallOut));

    /* the first stored row's id as a starting point */
    try {
      const r = await api('/v2/vectordb/entities/query', Object.assign({}, base, { filter: '', limit: 1, outputFields: [info.pk] }),
                          { int64Strings: true });
      if (v.alive && r && r[0] && idIn.value === '') idIn.value = String(r[0][info.pk]);
    } catch (_) { /* not loaded yet: the search will say so */ }

    function readParams() {
      let p;
      try {
        p = JSON.parse(paramsIn.value.trim() || '{}');
      } catch (e) {
        throw new Error(`search params: not JSON: ${e.message}`);
      }
      if (!p || typeof p !== 'object' || Array.isArray(p)) throw new Error('search params: a JSON object, e.g. {"ef":64}');
      return p;
    }

    function readK() {
      const k = Math.floor(Number(topk.value));
      if (!(k >= 1 && k <= 16384)) throw new Error('top k: a number from 1 to 16384');
      return k;
    }

    async function queryVector() {
      const f = fieldSel.value;
      if (modeId.checked) {
        const id = parsePk(idIn.value, info);
        const rows = await api('/v2/vectordb/entities/get', Object.assign({}, base, { id: [id], outputFields: [f] }),
                               { int64Strings: true });
        if (!rows || !rows.length) throw new Error(`no row with ${info.pk} = ${String(id)}`);
        return rows[0][f];
      }
      let vec;
      try {
        vec = JSON.parse(vecIn.value);
      } catch (e) {
        throw new Error(`vector: not JSON: ${e.message}`);
      }
      if (!vec || typeof vec !== 'object') throw new Error('vector: a JSON array of numbers (or a sparse object)');
      return vec;
    }

    function searchBody(vec, params, k, outputFields) {
      return Object.assign({}, base, {
        data: [vec], annsField: fieldSel.value, limit: k, filter: filterIn.value,
        outputFields, searchParams: params,
      });
    }

    async function timedSearch(body) {
      const t0 = performance.now();
      const hits = await api('/v2/vectordb/entities/search', body, { int64Strings: true });
      return { hits: Array.isArray(hits) ? hits : [], ms: performance.now() - t0 };
    }

    function hitId(hit) { return String(hit[info.pk] !== undefined ? hit[info.pk] : hit.id); }

    function exactParams(p) {
      const e = { exact: true };
      if (p.metricType) e.metricType = p.metricType;
      return e;
    }

    function handleError(e) {
      if (/at position \d+/.test(e && e.message ? e.message : '')) filterErrorView(filterErr, e, filterIn.value);
      else showError(e);
    }

    async function runSearch() {
      if (isBusy(runBtn)) return; /* Enter in a field while a search runs */
      filterErr.hidden = true;
      clearError();
      setBusy(runBtn, true);
      try {
        const params = readParams();
        const k = readK();
        const outputFields = outChecks.filter((c) => c.checked).map((c) => c.value);
        const vec = await queryVector();
        const r = await timedSearch(searchBody(vec, params, k, outputFields));
        if (!v.alive) return;
        latency.textContent = `${r.hits.length} hits in ${fmtMs(r.ms)} (measured in the page, round trip)`;
        const cols = ['#', info.pk, 'distance'];
        for (const hit of r.hits) for (const key of Object.keys(hit)) if (!cols.includes(key) && key !== 'id') cols.push(key);
        const rows = r.hits.map((hit, i) => h('tr', { 'data-id': hitId(hit) },
          cols.map((c) => {
            if (c === '#') return h('td', { class: 'num' }, String(i + 1));
            if (c === info.pk) return h('td', { class: 'num' }, hitId(hit));
            if (c === 'distance') return h('td', { class: 'num' }, fmtNum(hit.distance, 6));
            const f = info.byName.get(c);
            return h('td', { class: 'cell' }, cellValue(hit[c], f ? f.type : ''));
          })));
        swap(results, table(cols, rows, { 'data-testid': 'search-results' }));
      } catch (e) {
        if (v.alive) handleError(e);
      } finally {
        setBusy(runBtn, false);
      }
    }

    async function randomQueries(n) {
      const f = fieldSel.value;
      const c = await api('/v2/vectordb/entities/query', Object.assign({}, base, { filter: '', outputFields: ['count(*)'] }),
                          { int64Strings: true });
      const total = Math.min(num(c && c[0] ? c[0]['count(*)'] : 0) || 0, MAX_WINDOW);
      if (!(total > 0)) throw new Error('the collection has no row to take queries from');
      n = Math.min(n, total);
      const picked = new Set();
      while (picked.size < n) picked.add(Math.floor(Math.random() * total));
      const out = [];
      for (const off of picked) {
        if (!v.alive) return out; /* left the page: stop asking */
        const r = await api('/v2/vectordb/entities/query',
                            Object.assign({}, base, { filter: '', limit: 1, offset: Math.min(off, MAX_WINDOW - 1),
                                                      outputFields: [info.pk, f] }),
                            { int64Strings: true });
        if (r && r[0] && r[0][f] !== undefined) out.push(r[0][f]);
      }
      if (!out.length) throw new Error('could not read any stored vector');
      return out;
    }

    recallBtn.addEventListener('click', act(async () => {
      if (isBusy(recallBtn)) return;
      filterErr.hidden = true;
      clearError();
      setBusy(recallBtn, true);
      swap(recallOut, h('p', { class: 'muted' }, 'Running…'));
      try {
        const params = readParams();
        const k = readK();
        const n = Math.min(1000, Math.max(1, Math.floor(Number(nq.value)) || 10)); /* the field's max */
        const queries = n === 1 ? [await queryVector()] : await randomQueries(n);
        let sumRecall = 0, sumA = 0, sumE = 0;
        for (let i = 0; i < queries.length; i++) {
          if (!v.alive) return;
          swap(recallOut, h('p', { class: 'muted' }, `Running query ${i + 1} of ${queries.length}…`));
          const a = await timedSearch(searchBody(queries[i], params, k, []));
          const e = await timedSearch(searchBody(queries[i], exactParams(params), k, []));
          const truth = new Set(e.hits.map(hitId));
          const found = a.hits.filter((x) => truth.has(hitId(x))).length;
          sumRecall += truth.size ? found / truth.size : 1;
          sumA += a.ms;
          sumE += e.ms;
        }
        if (!v.alive) return;
        const q = queries.length;
        const recall = sumRecall / q;
        swap(recallOut,
          h('p', null, `recall@${k} = `,
            h('strong', { testid: 'recall-value', 'data-recall': String(recall) }, recall.toFixed(4)),
            ` over ${q} quer${q === 1 ? 'y' : 'ies'}`),
          h('p', { testid: 'recall-latency' }, `mean latency: as asked ${fmtMs(sumA / q)}, exact ${fmtMs(sumE / q)}`));
      } catch (e) {
        if (!v.alive) return;
        swap(recallOut);
        handleError(e);
      } finally {
        setBusy(recallBtn, false);
      }
    }));
  }

  /* ------------------------------------------------------------------ metrics */

  const metricsRing = []; /* [{t (s), m: Map(name -> [{labels, value}])}] */

  function unescapeLabel(x) {
    return x.replace(/\\(["\\n])/g, (_, c) => (c === 'n' ? '\n' : c));
  }

  function parseProm(text) {
    const m = new Map();
    for (const line of text.split('\n')) {
      if (!line || line[0] === '#') continue;
      const r = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
      if (!r) continue;
      const labels = {};
      if (r[2]) {
        const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
        let x;
        while ((x = re.exec(r[2]))) labels[x[1]] = unescapeLabel(x[2]);
      }
      const value = r[3] === '+Inf' ? Infinity : r[3] === '-Inf' ? -Infinity : Number(r[3]);
      if (!m.has(r[1])) m.set(r[1], []);
      m.get(r[1]).push({ labels, value });
    }
    return m;
  }

  function famSum(m, name, match) {
    const arr = m.get(name);
    if (!arr) return null;
    let sum = 0, any = false;
    for (const x of arr) {
      if (match && !Object.entries(match).every(([k, val]) => x.labels[k] === val)) continue;
      sum += x.value;
      any = true;
    }
    return any ? sum : null;
  }

  function famGroup(m, name, keyFn) {
    const out = new Map();
    for (const x of m.get(name) || []) {
      const k = keyFn(x.labels);
      out.set(k, (out.get(k) || 0) + x.value);
    }
    return out;
  }

  function counterDelta(a, b) {
    if (a === null || b === null || a === undefined || b === undefined) return null;
    return b >= a ? b - a : b; /* a reset: the counter started again */
  }

  /* rate series of a scalar taken from each sample by get(m) */
  function rateOf(ring, get) {
    const pts = [];
    for (let i = 1; i < ring.length; i++) {
      const dt = ring[i].t - ring[i - 1].t;
      const d = counterDelta(get(ring[i - 1].m), get(ring[i].m));
      pts.push([ring[i].t, d === null || !(dt > 0) ? null : d / dt]);
    }
    return pts;
  }

  /* per-key rate series of a grouped counter; the `cap` most active keys with any activity */
  function groupedRates(ring, name, keyFn, cap) {
    const groups = ring.map((x) => famGroup(x.m, name, keyFn));
    const keys = new Set();
    for (const g of groups) for (const k of g.keys()) keys.add(k);
    const out = [];
    for (const k of keys) {
      let act2 = 0;
      const pts = [];
      for (let i = 1; i < ring.length; i++) {
        const dt = ring[i].t - ring[i - 1].t;
        /* a key missing from the earlier sample is a series created since: it started at 0 */
        const a = groups[i - 1].has(k) ? groups[i - 1].get(k) : 0;
        const d = counterDelta(a, groups[i].has(k) ? groups[i].get(k) : null);
        const rate = d === null || !(dt > 0) ? null : d / dt;
        if (rate) act2 += d;
        pts.push([ring[i].t, rate]);
      }
      if (act2 > 0) out.push({ name: k, points: pts, act: act2 });
    }
    out.sort((a, b) => b.act - a.act || (a.name < b.name ? -1 : 1));
    return out.slice(0, cap);
  }

  function histQuantile(q, buckets) {
    const total = buckets.length ? buckets[buckets.length - 1].c : 0;
    if (!(total > 0)) return null;
    const rank = q * total;
    let prevLe = 0, prevC = 0;
    for (const b of buckets) {
      if (b.c >= rank) {
        if (b.le === Infinity) return prevLe;
        if (b.c === prevC) return b.le;
        return prevLe + ((b.le - prevLe) * (rank - prevC)) / (b.c - prevC);
      }
      prevLe = b.le;
      prevC = b.c;
    }
    return prevLe;
  }

  function latencySeries(ring) {
    const cum = ring.map((x) => {
      const byLe = new Map();
      for (const s2 of x.m.get('sextant_http_request_duration_seconds_bucket') || []) {
        const le = s2.labels.le === '+Inf' ? Infinity : Number(s2.labels.le);
        byLe.set(le, (byLe.get(le) || 0) + s2.value);
      }
      return byLe;
    });
    const qs = [['p50', 0.5], ['p95', 0.95], ['p99', 0.99]];
    const series = qs.map(([n]) => ({ name: n, points: [] }));
    for (let i = 1; i < ring.length; i++) {
      const les = [...cum[i].keys()].sort((a, b) => a - b);
      const buckets = les.map((le) => ({ le, c: Math.max(0, cum[i].get(le) - (cum[i - 1].get(le) || 0)) }));
      qs.forEach(([, q], j) => {
        const val = histQuantile(q, buckets);
        series[j].points.push([ring[i].t, val === null ? null : val * 1000]);
      });
    }
    return series;
  }

  function niceStep(span, n) {
    const raw = span / Math.max(1, n);
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }

  function tickFmt(x) {
    const a = Math.abs(x);
    if (a >= 1e9) return `${fmtNum(x / 1e9)}G`;
    if (a >= 1e6) return `${fmtNum(x / 1e6)}M`;
    if (a >= 1e3) return `${fmtNum(x / 1e3)}k`;
    return fmtNum(x, 4);
  }

  /* A time-series chart: <figure data-testid="chart-NAME"> with an svg, one path.series per
   * series (data-series, data-points), and a legend with each series' last value. */
  function timeChart(opt) {
    const W = 560, H = 220, L = 56, R = 12, T = 20, B = 24;
    const pw = W - L - R, ph = H - T - B;
    const tMax = opt.tMax, tMin = opt.tMax - opt.span;
    let ymax = 0;
    for (const se of opt.series) for (const [, val] of se.points) if (val !== null && Number.isFinite(val)) ymax = Math.max(ymax, val);
    if (!(ymax > 0)) ymax = 1;
    const step = niceStep(ymax, 4);
    const top = Math.ceil(ymax / step) * step;
    const xOf = (t) => L + ((t - tMin) / (tMax - tMin)) * pw;
    const yOf = (val) => T + ph - (val / top) * ph;
    const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': opt.title });
    for (let y = 0; y <= top + step / 2; y += step) {
      const py = yOf(y).toFixed(1);
      svg.append(s('line', { class: 'grid', x1: L, x2: W - R, y1: py, y2: py }),
                 s('text', { x: L - 6, y: (yOf(y) + 4).toFixed(1), 'text-anchor': 'end', text: tickFmt(y) }));
    }
    for (let sec = 0; sec <= opt.span; sec += 30) {
      const px = xOf(tMax - sec).toFixed(1);
      svg.append(s('line', { class: 'grid', x1: px, x2: px, y1: T, y2: T + ph }),
                 s('text', { x: px, y: H - 6, 'text-anchor': 'middle', text: sec === 0 ? 'now' : `-${sec}s` }));
    }
    svg.append(s('line', { class: 'axis', x1: L, x2: L, y1: T, y2: T + ph }),
               s('line', { class: 'axis', x1: L, x2: W - R, y1: T + ph, y2: T + ph }));
    if (opt.unit) svg.append(s('text', { x: 4, y: 11, text: opt.unit }));
    const legend = h('ul', { class: 'legend' });
    opt.series.forEach((se, i) => {
      const color = PALETTE[i % PALETTE.length];
      let d = '', pen = false, n = 0, last = null, lastPt = null;
      for (const [t, val] of se.points) {
        if (val === null || !Number.isFinite(val) || t < tMin) {
          pen = false;
          continue;
        }
        const px = xOf(t), py = yOf(val);
        d += `${pen ? 'L' : 'M'}${px.toFixed(1)},${py.toFixed(1)}`;
        pen = true;
        n++;
        last = val;
        lastPt = [px, py];
      }
      const path = s('path', { class: 'series', 'data-series': se.name, 'data-points': n, stroke: color });
      if (d) path.setAttribute('d', d);
      svg.append(path);
      if (lastPt) svg.append(s('circle', { class: 'mk', cx: lastPt[0].toFixed(1), cy: lastPt[1].toFixed(1), r: 3, fill: color }));
      const sw = h('span', { class: 'sw' });
      sw.style.background = color;
      legend.append(h('li', null, sw, `${se.label || se.name}: ${last === null ? '—' : (opt.fmt || fmtNum)(last)}`));
    });
    const kids = [h('figcaption', null, opt.title), svg];
    if (!opt.series.length) kids.push(h('div', { class: 'nodata' }, opt.empty || 'no data yet'));
    kids.push(legend);
    return h('figure', { class: 'chart', testid: `chart-${opt.name}` }, kids);
  }

  async function pageMetrics(v, main) {
    main.append(h('h1', { tabindex: '-1' }, 'Metrics'));
    const status = h('p', { class: 'sub', testid: 'metrics-status', 'aria-live': 'off' }, 'Reading /metrics…');
    const grid = h('div', { class: 'charts' });
    main.append(status, grid);
    const tick = async () => {
      try {
        const text = await fetchMetricsText();
        if (!v.alive) return;
        const now = Date.now() / 1000;
        /* samples from an earlier visit, long ago, would make one rate over the whole gap */
        if (metricsRing.length && now - metricsRing[metricsRing.length - 1].t > 10) metricsRing.length = 0;
        metricsRing.push({ t: now, m: parseProm(text) });
        while (metricsRing.length > METRIC_SAMPLES) metricsRing.shift();
        clearError('poll');
        drawMetrics(status, grid);
      } catch (e) {
        if (v.alive) showError(e, 'poll');
      }
      later(v, tick, metricsRing.length < 2 ? 1000 : 3000); /* the first rate after 1 s */
    };
    await tick();
  }

  function drawMetrics(status, grid) {
    const ring = metricsRing;
    const tMax = ring[ring.length - 1].t;
    const span = 180;
    const short = (r) => r.replace(/^\/v2\/vectordb\//, '').replace(/^\/v2\/sextant\//, 'sextant/');
    const req = groupedRates(ring, 'sextant_http_requests_total', (l) => l.route || 'other', 8)
      .map((x) => Object.assign(x, { label: short(x.name) }));
    const lat = latencySeries(ring);
    const batch = [{
      name: 'requests per batch',
      points: (() => {
        const pts = [];
        for (let i = 1; i < ring.length; i++) {
          const dr = counterDelta(famSum(ring[i - 1].m, 'sextant_search_merged_requests_total'),
                                  famSum(ring[i].m, 'sextant_search_merged_requests_total'));
          const db = counterDelta(famSum(ring[i - 1].m, 'sextant_search_merged_batches_total'),
                                  famSum(ring[i].m, 'sextant_search_merged_batches_total'));
          pts.push([ring[i].t, dr === null || !(db > 0) ? null : dr / db]);
        }
        return pts;
      })(),
    }];
    const io = [
      { name: 'read', points: rateOf(ring, (m) => famSum(m, 'sextant_io_read_bytes_total')) },
      { name: 'write', points: rateOf(ring, (m) => famSum(m, 'sextant_io_write_bytes_total')) },
    ];
    const prof = groupedRates(ring, 'sextant_io_profile_bytes_total',
                              (l) => `${l.phase || '?'}/${l.backend || '?'}/${l.dir || '?'}`, 8);
    const rows = [
      { name: 'inserted', points: rateOf(ring, (m) => famSum(m, 'sextant_rows_inserted_total')) },
      { name: 'deleted', points: rateOf(ring, (m) => famSum(m, 'sextant_rows_deleted_total')) },
      { name: 'search queries', points: rateOf(ring, (m) => famSum(m, 'sextant_search_queries_total')) },
    ];
    const bps = (x) => `${fmtBytes(x)}/s`;
    status.textContent = `${ring.length} sample${ring.length === 1 ? '' : 's'} of GET /metrics, one every 3 s; ` +
      `last at ${new Date(tMax * 1000).toLocaleTimeString()}` + (ring.length < 2 ? ' (rates need two samples)' : '');
    swap(grid,
      timeChart({ name: 'requests', title: 'Requests per second by route (8 most active)', series: req, tMax, span,
                  unit: 'req/s', empty: 'no request in the window yet' }),
      timeChart({ name: 'latency', title: 'Request latency, all routes (from the histogram buckets)', series: lat,
                  tMax, span, unit: 'ms', fmt: fmtMs }),
      timeChart({ name: 'batch', title: 'Merged search batch size (requests per batch)', series: batch, tMax, span,
                  unit: 'req' }),
      timeChart({ name: 'io', title: 'Engine I/O bytes per second', series: io, tMax, span, unit: 'B/s', fmt: bps }),
      timeChart({ name: 'io-profile', title: 'I/O bytes per second by phase/backend/direction', series: prof, tMax, span,
                  unit: 'B/s', fmt: bps, empty: 'no I/O in the window' }),
      timeChart({ name: 'rows', title: 'Rows and queries per second', series: rows, tMax, span, unit: '/s' }));
  }

  /* ------------------------------------------------------------------ vector map */

  /* A deterministic pseudo-random start for the power iteration (same picture each time). */
  function seeded(seed) {
    let x = seed >>> 0 || 1;
    return () => {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      return ((x >>> 0) / 4294967296) - 0.5;
    };
  }

  /* PCA to 2-D: centre the rows, then power iteration on the covariance (never formed: C v =
   * X^T (X v) / (n - 1)) for the top component, and again with Hotelling's deflation
   * (C - l1 v1 v1^T) for the second. Returns the coordinates and the explained variance. */
  function pca2(rows, d) {
    const n = rows.length;
    const X = new Float64Array(n * d);
    const mean = new Float64Array(d);
    for (let i = 0; i < n; i++) for (let j = 0; j < d; j++) mean[j] += rows[i][j];
    for (let j = 0; j < d; j++) mean[j] /= n;
    let totalVar = 0;
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < d; j++) {
        const x = rows[i][j] - mean[j];
        X[i * d + j] = x;
        totalVar += x * x;
      }
    }
    const denom = Math.max(1, n - 1);
    totalVar /= denom;
    const xv = new Float64Array(n);
    const covMul = (vv, out) => {
      for (let i = 0; i < n; i++) {
        let sum = 0;
        const o = i * d;
        for (let j = 0; j < d; j++) sum += X[o + j] * vv[j];
        xv[i] = sum;
      }
      out.fill(0);
      for (let i = 0; i < n; i++) {
        const a = xv[i], o = i * d;
        if (a === 0) continue;
        for (let j = 0; j < d; j++) out[j] += a * X[o + j];
      }
      for (let j = 0; j < d; j++) out[j] /= denom;
    };
    const rnd = seeded(12345);
    const power = (v1, l1) => {
      let vv = new Float64Array(d);
      for (let j = 0; j < d; j++) vv[j] = rnd();
      let lambda = 0;
      const w = new Float64Array(d);
      for (let it = 0; it < 300; it++) {
        covMul(vv, w);
        if (v1) {
          let dot = 0;
          for (let j = 0; j < d; j++) dot += v1[j] * vv[j];
          for (let j = 0; j < d; j++) w[j] -= l1 * dot * v1[j];
        }
        let norm = 0;
        for (let j = 0; j < d; j++) norm += w[j] * w[j];
        norm = Math.sqrt(norm);
        if (!(norm > 0)) return { v: vv, lambda: 0 };
        let diff = 0;
        for (let j = 0; j < d; j++) {
          const nv = w[j] / norm;
          diff += Math.abs(nv - vv[j]);
          vv[j] = nv;
        }
        lambda = norm;
        if (diff < 1e-9 * d) break;
      }
      return { v: vv, lambda };
    };
    const c1 = power(null, 0);
    const c2 = power(c1.v, c1.lambda);
    const coords = new Array(n);
    for (let i = 0; i < n; i++) {
      let a = 0, b = 0;
      const o = i * d;
      for (let j = 0; j < d; j++) {
        a += X[o + j] * c1.v[j];
        b += X[o + j] * c2.v[j];
      }
      coords[i] = [a, b];
    }
    return { coords, explained: [c1.lambda / (totalVar || 1), c2.lambda / (totalVar || 1)] };
  }

  function valueText(x) {
    if (x === null || x === undefined) return 'null';
    return typeof x === 'object' ? JSON.stringify(x) : String(x);
  }

  function hexRgb(hx) { return [1, 3, 5].map((i) => parseInt(hx.slice(i, i + 2), 16)); }

  function rampColor(t) {
    const x = Math.max(0, Math.min(1, t)) * (RAMP.length - 1);
    const i = Math.min(RAMP.length - 2, Math.floor(x));
    const f = x - i;
    const a = hexRgb(RAMP[i]), b = hexRgb(RAMP[i + 1]);
    return `rgb(${a.map((c, k) => Math.round(c + (b[k] - c) * f)).join(',')})`;
  }

  async function pageMap(v, main, db, name) {
    const start = await vectorPage(v, main, db, name, 'Vector map', 'map', 'map-page');
    if (!start) return;
    const { page, base, info } = start;
    const fieldSel = h('select', { testid: 'map-field' },
      info.vectors.map((f) => h('option', { value: f.name }, `${f.name} (${f.type})`)));
    const colorSel = h('select', { testid: 'map-color' }, h('option', { value: '' }, '(none)'),
      info.scalars.map((f) => h('option', { value: f.name }, `${f.name} (${f.type})`)));
    const firstColor = info.scalars.find((f) => f.name !== info.pk);
    if (firstColor) colorSel.value = firstColor.name;
    const drawBtn = h('button', { type: 'submit', class: 'primary', testid: 'map-draw' }, 'Draw');
    const status = h('p', { class: 'sub', testid: 'map-status', 'aria-live': 'polite' });
    const box = h('div', { class: 'mapbox' });
    const legend = h('div', { testid: 'map-legend' });
    page.append(h('form', {
      class: 'panel row',
      onsubmit: act(async (ev) => {
        ev.preventDefault();
        await draw();
      }),
    }, field('Vector field', fieldSel), field('Colour by', colorSel), drawBtn,
    h('span', { class: 'hint' }, `a sample of up to ${MAP_ROWS} rows, projected on its two principal components`)),
    status, box, legend);

    /* Draw, then a change of field or colour while the sample is on its way: the latest draw
     * wins (an older answer would draw the other field's map under the new choice). */
    let drawSeq = 0;
    async function draw() {
      const my = ++drawSeq;
      const vf = info.byName.get(fieldSel.value);
      const cf = colorSel.value ? info.byName.get(colorSel.value) : null;
      clear(box);
      clear(legend);
      if (!vf || vf.type !== 'FloatVector') {
        status.textContent = `The map draws dense float vectors (FloatVector) only; ${vf ? `${vf.name} is ${vf.type}` : 'no field'}.`;
        setBusy(drawBtn, false);
        return;
      }
      status.textContent = 'Sampling rows…';
      setBusy(drawBtn, true);
      try {
        const outputFields = [info.pk, vf.name];
        if (cf && cf.name !== info.pk) outputFields.push(cf.name);
        const t0 = performance.now();
        const rows = await api('/v2/vectordb/entities/query',
                               Object.assign({}, base, { filter: '', limit: MAP_ROWS, outputFields }), { int64Strings: true });
        if (!v.alive || my !== drawSeq) return;
        const good = (rows || []).filter((r) => Array.isArray(r[vf.name]) && r[vf.name].length > 0);
        if (good.length < 2) {
          status.textContent = `Only ${good.length} row${good.length === 1 ? '' : 's'} with a vector: nothing to project.`;
          return;
        }
        const d = good[0][vf.name].length;
        const vecs = good.map((r) => r[vf.name].map(Number));
        const t1 = performance.now();
        const p = pca2(vecs.filter((x) => x.length === d), d);
        const t2 = performance.now();
        renderScatter(good.filter((r) => r[vf.name].length === d), p.coords, cf);
        status.textContent = `${good.length} rows sampled in ${fmtMs(t1 - t0)}; PCA in ${fmtMs(t2 - t1)}; ` +
          `the two components explain ${(100 * p.explained[0]).toFixed(1)}% and ${(100 * p.explained[1]).toFixed(1)}% of the variance.`;
      } catch (e) {
        if (!v.alive || my !== drawSeq) return;
        status.textContent = '';
        showError(e);
      } finally {
        if (my === drawSeq) setBusy(drawBtn, false);
      }
    }

    function renderScatter(rows, coords, cf) {
      const W = 800, H = 560, P = 16;
      let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
      for (const [a, b] of coords) {
        x0 = Math.min(x0, a); x1 = Math.max(x1, a); y0 = Math.min(y0, b); y1 = Math.max(y1, b);
      }
      const sx = (a) => P + ((a - x0) / ((x1 - x0) || 1)) * (W - 2 * P);
      const sy = (b) => H - P - ((b - y0) / ((y1 - y0) || 1)) * (H - 2 * P);
      /* colours */
      let colorOf = () => PALETTE[0];
      const legendKids = [];
      if (cf) {
        const vals = rows.map((r) => r[cf.name]);
        if (NUM_TYPES.has(cf.type)) {
          const nums = vals.map(num).filter((x) => !Number.isNaN(x));
          const lo = Math.min(...nums), hi = Math.max(...nums);
          colorOf = (r) => {
            const x = num(r[cf.name]);
            return Number.isNaN(x) ? '#9aa3ad' : rampColor(hi > lo ? (x - lo) / (hi - lo) : 0.5);
          };
          const grad = h('span', { class: 'grad' });
          grad.style.background = `linear-gradient(to right, ${RAMP.join(', ')})`;
          legendKids.push(h('div', { class: 'row' }, `${cf.name}: `, fmtNum(lo, 4), grad, fmtNum(hi, 4)));
        } else {
          const key = valueText;
          const counts = new Map();
          for (const x of vals) counts.set(key(x), (counts.get(key(x)) || 0) + 1);
          const top = [...counts.entries()].sort((a, b) => b[1] - a[1]);
          const colors = new Map(top.slice(0, 9).map(([k], i) => [k, PALETTE[i]]));
          colorOf = (r) => colors.get(key(r[cf.name])) || '#9aa3ad';
          const items = top.slice(0, 9).map(([k, c]) => {
            const sw = h('span', { class: 'sw dot' });
            sw.style.background = colors.get(k);
            return h('li', null, sw, `${k.length > 60 ? k.slice(0, 60) + '…' : k} (${c})`);
          });
          if (top.length > 9) {
            const sw = h('span', { class: 'sw dot' });
            sw.style.background = '#9aa3ad';
            items.push(h('li', null, sw, `other (${top.slice(9).reduce((a, [, c]) => a + c, 0)})`));
          }
          legendKids.push(h('div', null, `${cf.name}:`), h('ul', { class: 'legend' }, items));
        }
      }
      const r = rows.length > 1000 ? 2.5 : 3.5;
      const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, testid: 'map-svg', role: 'img',
                             'aria-label': `PCA map of ${rows.length} rows` });
      rows.forEach((row, i) => {
        const c = s('circle', { class: 'pt', cx: sx(coords[i][0]).toFixed(1), cy: sy(coords[i][1]).toFixed(1), r,
                                fill: colorOf(row), 'data-pk': String(row[info.pk]), 'data-i': i });
        svg.append(c);
      });
      const tip = h('div', { class: 'tip', testid: 'map-tip', hidden: true });
      let hot = null;
      svg.addEventListener('mousemove', (ev) => {
        const t = ev.target;
        if (!(t instanceof SVGCircleElement) || !t.classList.contains('pt')) {
          tip.hidden = true;
          if (hot) hot.classList.remove('hot');
          hot = null;
          return;
        }
        if (hot !== t) {
          if (hot) hot.classList.remove('hot');
          hot = t;
          t.classList.add('hot');
          const row = rows[Number(t.getAttribute('data-i'))];
          tip.textContent = `${info.pk}: ${t.getAttribute('data-pk')}` +
            (cf ? `\n${cf.name}: ${valueText(row[cf.name])}` : '');
        }
        const br = box.getBoundingClientRect();
        tip.style.left = `${Math.min(ev.clientX - br.left + 12, br.width - 160)}px`;
        tip.style.top = `${ev.clientY - br.top + 12}px`;
        tip.hidden = false;
      });
      svg.addEventListener('mouseleave', () => {
        tip.hidden = true;
        if (hot) hot.classList.remove('hot');
        hot = null;
      });
      append(box, [svg, tip]);
      append(legend, legendKids);
    }

    fieldSel.addEventListener('change', act(draw));
    colorSel.addEventListener('change', act(draw));
    await draw();
  }

  /* ------------------------------------------------------------------ bench */

  const KNOWN_SETS = [[/fashion-?mnist|fmnist/i, 'Fashion-MNIST'], [/sift/i, 'SIFT'], [/gist/i, 'GIST'],
                      [/glove/i, 'GloVe'], [/bigann/i, 'BIGANN'], [/deep/i, 'Deep'], [/mnist/i, 'MNIST']];

  function datasetName(r) {
    const ds = r.dataset && typeof r.dataset === 'object' ? r.dataset : {};
    if (ds.name) return String(ds.name);
    const b = String(ds.base || (typeof r.dataset === 'string' ? r.dataset : '') || '');
    for (const [re, n] of KNOWN_SETS) if (re.test(b)) return n;
    return b ? b.split('/').pop() : (ds.kind ? String(ds.kind) : 'data set');
  }

  function paramsText(p) {
    if (p === null || p === undefined) return '';
    if (typeof p !== 'object') return String(p);
    return Object.entries(p).map(([k, val]) => `${k}=${typeof val === 'object' ? JSON.stringify(val) : val}`).join(', ');
  }

  function benchPoints(r) {
    const arr = Array.isArray(r.runs) ? r.runs : Array.isArray(r.settings) ? r.settings
      : r.serial && Array.isArray(r.serial.settings) ? r.serial.settings : [];
    return arr.filter((p) => p && typeof p === 'object').map((p) => ({
      params: paramsText(p.search_params !== undefined ? p.search_params : p.params),
      recall: num(p.recall), qps: num(p.qps),
      threads: num(p.threads !== undefined ? p.threads : p.concurrency),
      p50: num(p.p50_ms), p95: num(p.p95_ms), p99: num(p.p99_ms),
    })).filter((p) => !Number.isNaN(p.recall) && !Number.isNaN(p.qps));
  }

  const isSerial = (p) => Number.isNaN(p.threads) || p.threads <= 1;

  function threadsText(t, sep) {
    const n = num(t);
    return Number.isNaN(n) ? '' : `${sep}${n} thread${n === 1 ? '' : 's'}`;
  }

  function qpsAtRecall(pts, t) {
    const ser = pts.filter(isSerial);
    let best = NaN;
    for (const a of ser) {
      if (a.recall === t && (Number.isNaN(best) || a.qps > best)) best = a.qps;
      for (const b of ser) {
        if (!(a.recall < t && b.recall > t)) continue;
        const q = a.qps + ((b.qps - a.qps) * (t - a.recall)) / (b.recall - a.recall);
        if (Number.isNaN(best) || q > best) best = q;
      }
    }
    return best;
  }

  /* Engines of one result file: the run itself, then its peers. */
  function benchEngines(json, fileLabel) {
    const runs = (Array.isArray(json) ? json : [json]).filter((r) => r && typeof r === 'object');
    const engines = [];
    runs.forEach((r, i) => {
      const idx = r.index_type || r.index;
      let label = fileLabel + (idx ? ` (${idx})` : '');
      if (r.build_device && r.build_device !== 'cpu') label += ` ${r.build_device}`;
      if (runs.length > 1) label += ` #${i + 1}`;
      const main = {
        label, run: r, peer: false, pts: benchPoints(r),
        build: num(r.build_s !== undefined ? r.build_s : r.optimize_duration), memory: num(r.memory_bytes),
      };
      engines.push(main);
      let peers = [];
      if (Array.isArray(r.peers)) peers = r.peers.map((p) => [String(p && p.name), p]);
      else if (r.peers && typeof r.peers === 'object') peers = Object.entries(r.peers);
      for (const [pn, p] of peers) {
        if (!p || typeof p !== 'object') continue;
        engines.push({
          label: runs.length > 1 ? `${pn} (peer of ${label})` : `${pn} (peer)`, run: p, peer: true, of: main,
          pts: benchPoints(p), build: num(p.build_s), memory: num(p.memory_bytes), index: p.index,
        });
      }
    });
    return { runs, engines };
  }

  /* One series per engine for its serial runs and one per thread count above 1 (the report's). */
  function benchSeries(engines) {
    const out = [];
    engines.forEach((e, ei) => {
      const color = PALETTE[ei % PALETTE.length];
      const ser = e.pts.filter(isSerial);
      if (ser.length) out.push({ name: e.label, color, dashed: e.peer, pts: ser, mark: 0 });
      const tcs = [...new Set(e.pts.filter((p) => !isSerial(p)).map((p) => p.threads))].sort((a, b) => a - b);
      for (const t of tcs) {
        out.push({ name: `${e.label}, ${t} threads`, color, dashed: e.peer, pts: e.pts.filter((p) => p.threads === t), mark: 1 });
      }
    });
    for (const se of out) se.pts = se.pts.slice().sort((a, b) => a.recall - b.recall);
    return out;
  }

  function benchChart(series, title) {
    const W = 760, H = 380, L = 64, R = 16, T = 14, B = 44;
    const pw = W - L - R, ph = H - T - B;
    const all = series.flatMap((se) => se.pts).filter((p) => p.qps > 0);
    if (!all.length) return h('div', { class: 'nodata' }, 'No run has recall and QPS.');
    let rlo = Math.min(...all.map((p) => p.recall)), rhi = Math.max(...all.map((p) => p.recall));
    const pad = Math.max(0.002, (rhi - rlo) * 0.06);
    const xhi = rhi <= 1 ? Math.min(1, rhi + pad) : rhi + pad;
    let xlo = Math.max(0, rlo - pad);
    const xstep = niceStep(xhi - xlo, 5);
    xlo = Math.max(0, Math.floor(xlo / xstep) * xstep);
    rlo = xlo;
    const qlo = Math.min(...all.map((p) => p.qps)), qhi = Math.max(...all.map((p) => p.qps));
    let e0 = Math.floor(Math.log10(qlo)), e1 = Math.ceil(Math.log10(qhi));
    if (e1 <= e0) e1 = e0 + 1;
    const xOf = (r) => L + ((r - rlo) / ((xhi - rlo) || 1)) * pw;
    const yOf = (q) => T + ph - ((Math.log10(q) - e0) / (e1 - e0)) * ph;
    const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title, testid: 'bench-chart',
                           'data-chart': 'recall-qps', 'data-x-lo': rlo.toFixed(4), 'data-x-hi': xhi.toFixed(4) });
    const decades = e1 - e0;
    for (let e = e0; e <= e1; e++) {
      for (const m of decades <= 2 ? [1, 2, 5] : [1]) {
        const q = m * Math.pow(10, e);
        if (Math.log10(q) > e1 + 1e-9) continue;
        const y = yOf(q).toFixed(1);
        svg.append(s('line', { class: 'grid', x1: L, x2: W - R, y1: y, y2: y }),
                   s('text', { x: L - 6, y: (yOf(q) + 4).toFixed(1), 'text-anchor': 'end', text: tickFmt(q) }));
      }
    }
    for (let x = xlo; x <= xhi + xstep * 1e-6; x += xstep) {
      const px = xOf(x).toFixed(1);
      svg.append(s('line', { class: 'grid', x1: px, x2: px, y1: T, y2: T + ph }),
                 s('text', { class: 'tx', x: px, y: T + ph + 16, 'text-anchor': 'middle', text: String(Number(x.toFixed(6))) }));
    }
    svg.append(s('line', { class: 'axis', x1: L, x2: L, y1: T, y2: T + ph }),
               s('line', { class: 'axis', x1: L, x2: W - R, y1: T + ph, y2: T + ph }),
               s('text', { x: L + pw / 2, y: H - 6, 'text-anchor': 'middle', text: 'recall' }),
               s('text', { x: 12, y: T + ph / 2, 'text-anchor': 'middle',
                           transform: `rotate(-90 12 ${T + ph / 2})`, text: 'queries per second (log scale)' }));
    const legend = h('ul', { class: 'legend' });
    for (const se of series) {
      const pts = se.pts.filter((p) => p.qps > 0);
      const d = pts.map((p, i) => `${i ? 'L' : 'M'}${xOf(p.recall).toFixed(1)},${yOf(p.qps).toFixed(1)}`).join('');
      const path = s('path', { class: 'series' + (se.dashed ? ' dashed' : ''), 'data-series': se.name,
                               'data-points': pts.length, stroke: se.color });
      if (d) path.setAttribute('d', d);
      const g = s('g', { class: 'markers' });
      for (const p of pts) {
        const cx = xOf(p.recall), cy = yOf(p.qps);
        const mk = se.mark
          ? s('rect', { class: 'mk', x: (cx - 3.5).toFixed(1), y: (cy - 3.5).toFixed(1), width: 7, height: 7,
                        fill: se.color })
          : s('circle', { class: 'mk', cx: cx.toFixed(1), cy: cy.toFixed(1), r: 3.5, fill: se.color });
        mk.append(s('title', { text: `${se.name}: ${p.params}${threadsText(p.threads, ', ')}; ` +
                                     `recall ${fmtNum(p.recall, 5)}, ${fmtNum(p.qps)} QPS` }));
        g.append(mk);
      }
      svg.append(path, g);
      const sw = h('span', { class: 'sw' });
      sw.style.background = se.color;
      legend.append(h('li', null, sw, se.name));
    }
    return h('figure', { class: 'chart bench' }, h('figcaption', null, title), svg, legend);
  }

  function renderBench(out, json, fileLabel) {
    clear(out);
    const { runs, engines } = benchEngines(json, fileLabel);
    if (!runs.length) {
      out.append(h('div', { class: 'err', role: 'alert' }, 'This file holds no benchmark run (a JSON object or an array of them).'));
      return;
    }
    const r0 = runs[0];
    const metric = r0.metric ? String(r0.metric).toUpperCase() : '';
    const shape = [Number.isNaN(num(r0.n)) ? null : fmtInt(r0.n), Number.isNaN(num(r0.dim)) ? null : fmtInt(r0.dim)]
      .filter(Boolean).join(' × ');
    const dsLabel = `${datasetName(r0)}${shape || metric ? ` (${[shape, metric].filter(Boolean).join(', ')})` : ''}`;
    out.append(h('h2', { testid: 'bench-title' }, `${fileLabel}: ${dsLabel}`));
    out.append(h('div', { class: 'cards' },
      card('Index', `${r0.index_type || r0.index || '—'}`, r0.index_params ? String(r0.index_params) : paramsText(r0.build_params)),
      card('k', Number.isNaN(num(r0.k)) ? '—' : fmtInt(r0.k), r0.recall_kind ? String(r0.recall_kind) : null),
      card('Queries', Number.isNaN(num(r0.nq)) ? '—' : fmtInt(r0.nq), r0.swept_param ? `swept: ${r0.swept_param}` : null),
      card('Build', Number.isNaN(num(r0.build_s)) ? '—' : fmtDur(r0.build_s),
           `insert ${fmtDur(r0.insert_s)} · load ${fmtDur(r0.load_s)}`),
      card('Memory', fmtBytes(r0.memory_bytes), r0.index_memory_bytes !== undefined ? `index ${fmtBytes(r0.index_memory_bytes)}` : null),
      card('Machine', threadsText(r0.threads, '') || '—', [r0.simd, r0.storage].filter(Boolean).join(' · ')),
      card('Tool', `${r0.tool || 'sextant bench'} ${r0.version || ''}`, r0.date ? String(r0.date) : null)));
    const series = benchSeries(engines);
    const k = num(r0.k);
    out.append(benchChart(series, `recall${Number.isNaN(k) ? '' : `@${k}`} vs QPS: ${dsLabel}`));

    /* n/a when no pair of serial settings brackets t; ">= the fastest setting" when all reach it */
    const fmtQ = (x, e, t) => {
      if (!Number.isNaN(x)) return fmtNum(x);
      const ser = e.pts.filter(isSerial);
      if (ser.length && ser.every((p) => p.recall >= t)) return `≥ ${fmtNum(Math.max(...ser.map((p) => p.qps)))}`;
      return 'n/a';
    };
    const mains = new Map(engines.filter((e) => !e.peer).map((e) => [e, qpsAtRecall(e.pts, 0.95)]));
    const sumRows = engines.map((e) => {
      const q95 = qpsAtRecall(e.pts, 0.95), q99 = qpsAtRecall(e.pts, 0.99);
      let best = null;
      for (const p of e.pts) if (!best || p.qps > best.qps) best = p;
      const bestRecall = e.pts.length ? Math.max(...e.pts.map((p) => p.recall)) : NaN;
      let ratio = '';
      if (e.peer) {
        const ours = mains.get(e.of);
        ratio = !Number.isNaN(ours) && q95 > 0 ? `${(ours / q95).toFixed(2)}×` : 'n/a';
      }
      return h('tr', null,
        h('td', null, e.label),
        h('td', { class: 'num' }, Number.isNaN(e.build) ? '—' : fmtDur(e.build)),
        h('td', { class: 'num' }, Number.isNaN(e.memory) ? '—' : fmtBytes(e.memory)),
        h('td', { class: 'num' }, fmtQ(q95, e, 0.95)),
        h('td', { class: 'num' }, fmtQ(q99, e, 0.99)),
        h('td', null, best ? `${fmtNum(best.qps)} (${best.params}${threadsText(best.threads, ', ')})` : '—'),
        h('td', { class: 'num' }, Number.isNaN(bestRecall) ? '—' : fmtNum(bestRecall, 5)),
        h('td', { class: 'num' }, ratio));
    });
    out.append(h('h3', null, 'Summary'),
      table(['Engine', { label: 'Build', num: true }, { label: 'Memory', num: true },
             { label: 'QPS at recall 0.95', num: true }, { label: 'QPS at recall 0.99', num: true },
             'max QPS (setting, threads)', { label: 'best recall', num: true },
             { label: 'ours / peer QPS at 0.95', num: true }], sumRows, { 'data-testid': 'bench-summary' }));
    const runRows = [];
    for (const e of engines) {
      for (const p of e.pts) {
        runRows.push(h('tr', null, h('td', null, e.label), h('td', { class: 'mono' }, p.params),
          h('td', { class: 'num' }, Number.isNaN(p.threads) ? '1' : String(p.threads)),
          h('td', { class: 'num' }, fmtNum(p.recall, 5)), h('td', { class: 'num' }, fmtNum(p.qps)),
          h('td', { class: 'num' }, fmtNum(p.p50, 3)), h('td', { class: 'num' }, fmtNum(p.p95, 3)),
          h('td', { class: 'num' }, fmtNum(p.p99, 3))));
      }
    }
    out.append(h('h3', null, 'Settings'),
      table(['Engine', 'Setting', { label: 'Threads', num: true }, { label: 'Recall', num: true },
             { label: 'QPS', num: true }, { label: 'p50 ms', num: true }, { label: 'p95 ms', num: true },
             { label: 'p99 ms', num: true }], runRows, { 'data-testid': 'bench-runs' }));
  }

  async function pageBench(v, main) {
    main.append(h('h1', { tabindex: '-1' }, 'Bench'));
    const listBox = h('div', { testid: 'bench-list' });
    const file = h('input', { type: 'file', accept: '.json,application/json', testid: 'bench-file' });
    const out = h('div', { testid: 'bench-view' });
    /* a server file and a local file can be opened one after the other: the last one asked for
     * is drawn, whichever answer comes back last */
    let openSeq = 0;
    const fail = (text) => clear(out).append(h('div', { class: 'err', role: 'alert' }, text));
    main.append(
      h('section', { class: 'panel' }, h('h2', null, 'Results on the server'),
        h('p', { class: 'hint' }, 'Files written by sextant bench … --json DATA_DIR/bench/NAME.json.'), listBox),
      h('section', { class: 'panel' }, h('h2', null, 'Open a local result'),
        h('p', { class: 'hint' }, 'The file is read in this page; nothing is uploaded.'),
        field('sextant bench JSON file', file)),
      out);
    file.addEventListener('change', () => {
      const f = file.files && file.files[0];
      if (!f) return;
      const my = ++openSeq;
      const rd = new FileReader();
      rd.onload = () => {
        if (!v.alive || my !== openSeq) return;
        let json;
        try {
          json = JSON.parse(String(rd.result));
        } catch (e) {
          fail(`${f.name}: not JSON: ${e.message}`);
          return;
        }
        try {
          renderBench(out, json, f.name.replace(/\.json$/i, ''));
        } catch (e) {
          fail(`${f.name}: ${e.message}`);
        }
      };
      rd.onerror = () => {
        if (v.alive && my === openSeq) fail(`${f.name}: cannot read the file`);
      };
      rd.readAsText(f);
    });
    try {
      const list = await api('/v2/sextant/bench/list', {});
      if (!v.alive) return;
      const items = Array.isArray(list) ? list : [];
      if (!items.length) {
        listBox.append(h('p', { class: 'muted' }, 'No result on the server.'));
        return;
      }
      const rows = items.map((it) => {
        const nm = String(it.name);
        const mod = num(it.modified);
        const when = Number.isNaN(mod) ? String(it.modified || '') : new Date(mod < 1e12 ? mod * 1000 : mod).toLocaleString();
        return h('tr', null, h('td', { class: 'mono' }, nm), h('td', { class: 'num' }, fmtBytes(it.bytes)), h('td', null, when),
          h('td', null, h('button', {
            type: 'button', 'data-name': nm, 'aria-label': `Open ${nm}`,
            onclick: act(async () => {
              const my = ++openSeq;
              const json = await api('/v2/sextant/bench/get', { name: nm });
              if (v.alive && my === openSeq) renderBench(out, json, nm.replace(/\.json$/i, ''));
            }),
          }, 'Open')));
      });
      listBox.append(table(['Name', { label: 'Size', num: true }, 'Modified', 'Action'], rows, null));
    } catch (e) {
      if (v.alive) listBox.append(h('div', { class: 'err', role: 'alert' }, errText(e)));
    }
  }

  /* ------------------------------------------------------------------ start */

  async function start() {
    window.addEventListener('hashchange', () => route(true));
    $('skip').addEventListener('click', (ev) => {
      ev.preventDefault();
      const t = document.querySelector('main h1') || $('main');
      t.focus();
    });
    const saved = sessionStorage.getItem(TOKEN_KEY);
    if (saved === null) {
      route(false);
      return;
    }
    try {
      const d = await api('/v2/sextant/server/describe', {}, { token: saved, login: true });
      st.token = saved;
      setServer(d);
    } catch (e) {
      sessionStorage.removeItem(TOKEN_KEY);
      st.token = null;
      renderLogin(newView(), e instanceof ApiError && e.code === 1800
        ? 'The saved token was refused (code 1800): log in again.' : errText(e));
      return;
    }
    route(false);
  }

  start().catch((e) => showError(e));
})();
