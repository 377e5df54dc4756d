// tests/e2e/node/report_browser.js: the HTML benchmark report (tools/sextant/report.c) laid out
// by a real browser. run_report_browser.sh writes the report from a fixture (make demo's result:
// Fashion-MNIST, HNSW, hnswlib and FAISS peers, 1 and 2 threads) and runs this with the report's
// path. Debian's Chromium (/usr/bin/chromium) is driven through playwright-core, headless with the
// flags a machine without network needs (without --disable-background-networking it floods
// refused connections); no browser is ever downloaded.
//
// At 1400 x 1000 it asserts:
//   - no horizontal overflow: every table of the summary fits its scroll box (scrollWidth <=
//     clientWidth), and the page itself does not scroll sideways;
//   - every column header of the summary tables is visible: inside the window and its box, its
//     text not cut (scrollWidth <= clientWidth);
//   - the recall axis fits high-recall data: the chart's lower bound (data-x-lo and the first
//     tick label) is above 0.5 and the points spread over more than half the plot's width;
//   - the data set label is the data set's name and shape, not the IDX file name;
//   - the max QPS cell names the thread count of its run, and the peer ratio column is labelled
//     as the ratio at recall 0.95.
// A screenshot goes next to the report (report.png) for a human to look at.
'use strict';
const { CHROMIUM_FLAGS, check, failures } = require('./checks');
const path = require('path');
const fs = require('fs');
const os = require('os');
const { chromium } = require('playwright-core');

const FLAGS = CHROMIUM_FLAGS;

async function main() {
  const report = process.argv[2];
  const exe = process.env.SX_CHROMIUM || '/usr/bin/chromium';
  if (!report || !fs.existsSync(report)) {
    console.log(`usage: node report_browser.js REPORT.html (got ${report})`);
    process.exit(2);
  }
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'sx-report-browser-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: exe,
    headless: true,
    args: FLAGS,
    viewport: { width: 1400, height: 1000 },
    timeout: 120000,
  });
  try {
    const page = ctx.pages()[0] || (await ctx.newPage());
    await page.goto('file://' + path.resolve(report), { waitUntil: 'load', timeout: 60000 });
    await page.screenshot({ path: path.join(path.dirname(report), 'report.png') });

    const layout = await page.evaluate(() => {
      const doc = document.documentElement;
      const tables = ['setup', 'results', 'peer-table'].map((id) => {
        const t = document.getElementById(id);
        if (!t) return { id, missing: true };
        const box = t.closest('.tw') || t.parentElement;
        const b = box.getBoundingClientRect();
        const headers = [...t.querySelectorAll('th')].map((th) => {
          const r = th.getBoundingClientRect();
          return {
            text: th.textContent.trim(),
            left: r.left,
            right: r.right,
            width: r.width,
            cut: th.scrollWidth > th.clientWidth + 1,
            inBox: r.left >= b.left - 0.5 && r.right <= b.right + 0.5,
          };
        });
        return {
          id,
          scrollWidth: box.scrollWidth,
          clientWidth: box.clientWidth,
          headers,
        };
      });
      // every scroll box of the summary section (h2#summary up to the next h2), whatever ids
      const boxes = [];
      for (let e = document.getElementById('summary'); e && (e = e.nextElementSibling) &&
           e.tagName !== 'H2';) {
        if (e.classList.contains('tw')) {
          boxes.push({ scrollWidth: e.scrollWidth, clientWidth: e.clientWidth,
                       headers: [...e.querySelectorAll('th')].map((th) => th.textContent.trim()) });
        }
      }
      const ds = [...document.querySelectorAll('#setup td.ds')].map((td) => td.textContent.trim());
      const results = document.getElementById('results');
      const svg = document.querySelector('svg[data-chart="recall-qps"]');
      let chart = null;
      if (svg) {
        const ticks = [...svg.querySelectorAll('g.axis text.tx')].map((t) => ({
          v: parseFloat(t.textContent),
          x: t.getBoundingClientRect().left,
        }));
        ticks.sort((a, b) => a.x - b.x);
        const frame = svg.querySelector('.frame');
        const fr = frame ? frame.getBoundingClientRect() : svg.getBoundingClientRect();
        const xs = [...svg.querySelectorAll('.series circle, .series rect, .markers circle, ' +
                                            '.markers rect, .markers polygon, .series polygon')]
          .map((e) => { const r = e.getBoundingClientRect(); return r.left + r.width / 2; });
        chart = {
          lo: parseFloat(svg.getAttribute('data-x-lo')),
          hi: parseFloat(svg.getAttribute('data-x-hi')),
          firstTick: ticks.length ? ticks[0].v : NaN,
          plotWidth: fr.width,
          spread: xs.length ? Math.max(...xs) - Math.min(...xs) : 0,
          points: xs.length,
        };
      }
      return {
        pageScroll: doc.scrollWidth,
        pageClient: doc.clientWidth,
        innerWidth: window.innerWidth,
        tables,
        boxes,
        ds,
        resultsText: results ? results.textContent : '',
        chart,
      };
    });

    check(layout.pageScroll <= layout.pageClient, 'the page does not scroll sideways',
          { scrollWidth: layout.pageScroll, clientWidth: layout.pageClient });
    check(layout.boxes.length > 0, 'the summary section has tables');
    for (const [i, bx] of layout.boxes.entries()) {
      check(bx.scrollWidth <= bx.clientWidth, `summary table ${i + 1} fits without scrolling`,
            { scrollWidth: bx.scrollWidth, clientWidth: bx.clientWidth,
              headers: bx.headers.slice(0, 4) });
    }
    for (const t of layout.tables) {
      if (t.missing) {
        check(false, `table #${t.id} is in the report`);
        continue;
      }
      check(t.scrollWidth <= t.clientWidth, `#${t.id}: no horizontal overflow`,
            { scrollWidth: t.scrollWidth, clientWidth: t.clientWidth });
      const hidden = t.headers.filter((h) => !h.inBox || h.right > layout.innerWidth ||
                                              h.left < 0 || h.width <= 0 || h.cut);
      check(t.headers.length > 0 && hidden.length === 0,
            `#${t.id}: all ${t.headers.length} column headers visible`, hidden);
    }
    const results = layout.tables.find((t) => t.id === 'results');
    const names = results && !results.missing ? results.headers.map((h) => h.text) : [];
    for (const want of ['QPS at recall 0.95', 'QPS at recall 0.99', 'max QPS (setting, threads)',
                        'vs peers: QPS ratio at recall 0.95']) {
      check(names.includes(want), `results header "${want}"`, names);
    }
    check(layout.ds.length === 1 && layout.ds[0] === 'Fashion-MNIST (60,000 \u00d7 784, L2)',
          'data set label', layout.ds);
    check(!/idx3-ubyte/.test(layout.ds.join(' ')), 'no IDX file name as the data set', layout.ds);
    check(/ef=10, 2 threads/.test(layout.resultsText), 'max QPS names its 2-thread run');
    const c = layout.chart;
    check(c !== null, 'the recall-vs-QPS chart is drawn');
    if (c) {
      check(c.lo > 0.5 && c.firstTick > 0.5, 'recall axis lower bound above 0.5', c);
      check(c.hi <= 1.0 && c.hi >= 0.9995, 'recall axis ends at the data (<= 1)', c);
      check(c.points > 0 && c.spread > 0.5 * c.plotWidth,
            'the points spread over more than half the plot', c);
    }
  } finally {
    await ctx.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  console.log(failures() ? `${failures()} check(s) failed` : 'all checks passed');
  process.exit(failures() ? 1 : 0);
}

main().catch((e) => {
  console.log(`FAIL ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
