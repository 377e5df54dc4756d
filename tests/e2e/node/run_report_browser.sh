#!/usr/bin/env bash
# tests/e2e/node/run_report_browser.sh: ctest `report_browser_e2e`. Writes the HTML benchmark
# report of tests/e2e/data/bench/fmnist_demo.json with "$SX_SEXTANT_BIN" bench report, then opens
# it in Debian's Chromium through playwright-core (report_browser.js: layout checks at 1400 x
# 1000). Exit 77 (skipped) when node (>= 20, what playwright-core needs), playwright-core
# (node_modules, installed by `npm ci` in this directory; .ci/run does it) or /usr/bin/chromium
# (Debian's chromium; tools/deps.sh installs it) is missing. The report and the browser's
# screenshot (report.png) stay in $SX_TMPDIR/report_browser.* when a check fails.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
chromium="${SX_CHROMIUM:-/usr/bin/chromium}"
. "$here/common.sh"

need_node 20 "playwright-core needs 20"
need_module playwright-core/package.json playwright-core
if [ ! -x "$chromium" ]; then
    echo "$chromium not found (apt-get install chromium): skipped"
    exit 77
fi
need_sextant
make_tmp report_browser
report="$tmp/report.html"
if ! "$bin" bench report "$root/tests/e2e/data/bench/fmnist_demo.json" -o "$report"; then
    echo "sextant bench report failed" >&2
    exit 1
fi
cd "$here"
SX_CHROMIUM="$chromium" timeout 300 node report_browser.js "$report"
rc=$?
if [ "$rc" = 0 ]; then
    rm -rf "$tmp"
else
    echo "report and screenshot kept in $tmp" >&2
fi
exit "$rc"
