// tests/e2e/node/checks.js: what the browser tests share (report_browser.js, webui_browser.js,
// webui_firefox.js): Chromium's flags for a headless run on a machine without network (without
// --disable-background-networking it floods refused connections), and the `ok   ...` /
// `FAIL ...` check lines with their count.
'use strict';

const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

let failed = 0;

// Prints one check's line; returns ok.
function check(ok, what, detail) {
  if (ok) {
    console.log(`ok   ${what}`);
  } else {
    failed++;
    console.log(`FAIL ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
  }
  return ok;
}

// Checks failed so far (plus n more, for failures counted outside check()).
function failures(n = 0) {
  failed += n;
  return failed;
}

module.exports = { CHROMIUM_FLAGS, check, failures };
